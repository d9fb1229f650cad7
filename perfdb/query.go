package perfdb

import "errors"

// errNotImplemented marks query kinds whose bodies have not landed yet.
var errNotImplemented = errors.New("perfdb: query not implemented yet")

// Querier answers kernel-latency queries for one resolved (system, backend,
// version) Data under one DatabaseMode. Build it with NewQuerier(d, mode)
// (it precomputes per-table indexes); it is immutable and safe for
// concurrent use.
type Querier struct {
	mode DatabaseMode
}

// Mode reports the database mode the querier answers in.
func (q *Querier) Mode() DatabaseMode { return q.mode }

// Gemm is the table-level GEMM latency for (m, n, k) under quant (Rust
// query_gemm_table). fp8_static reads the fp8 table here; use GemmOp for the
// fp8_static overhead subtraction.
func (q *Querier) Gemm(quant GemmQuant, m, n, k int) (Perf, error) {
	return Perf{}, errNotImplemented
}

// GemmOp is the operator-level GEMM (Rust GemmOp::query before
// scale_factor): Gemm, and for fp8_static minus compute_scale(m, k) (and
// scale_matrix(m, k) when lowPrecisionInput — o-proj and down-proj), floored
// at the GEMM's SOL, tagged Estimated.
func (q *Querier) GemmOp(quant GemmQuant, m, n, k int, lowPrecisionInput bool) (Perf, error) {
	return Perf{}, errNotImplemented
}

// ComputeScale is the fp8-static dynamic-quant overhead delta at (m, k).
func (q *Querier) ComputeScale(quant GemmQuant, m, k int) (Perf, error) {
	return Perf{}, errNotImplemented
}

// ScaleMatrix is the fp8-static static-quant kernel latency at (m, k).
func (q *Querier) ScaleMatrix(quant GemmQuant, m, k int) (Perf, error) {
	return Perf{}, errNotImplemented
}

// ContextAttention is the prefill FMHA latency (Rust
// query_context_attention_table): batch b, s new tokens per request after
// prefix cached tokens, nHeads/nKV per GPU (nKV == nHeads means MHA),
// window 0 = full attention. The table is read at full_s = s + prefix and
// scaled by (full_s² − prefix²)/full_s². The RoPE/KV-write extras of the
// operator are NOT included (compose them with MemOp).
func (q *Querier) ContextAttention(b, s, prefix, nHeads, nKV, headDim, window int, kvQuant KVQuant, fmhaQuant FMHAQuant) (Perf, error) {
	return Perf{}, errNotImplemented
}

// GenerationAttention is the decode attention latency (Rust
// query_generation_attention_table): batch b, KV length s (tokens already in
// the cache including the new one), averaged over 5 points in ±10 % of s.
func (q *Querier) GenerationAttention(b, s, nHeads, nKV, headDim, window int, kvQuant KVQuant) (Perf, error) {
	return Perf{}, errNotImplemented
}

// CustomAllReduce is the framework all-reduce latency of size ELEMENTS
// across tp GPUs (0 with source Empirical when tp ≤ 1).
func (q *Querier) CustomAllReduce(quant CommQuant, tp int, size float64) (Perf, error) {
	return Perf{}, errNotImplemented
}

// NCCL is the NCCL collective latency (op one of NCCLAllGather, …) of size
// ELEMENTS across numGPUs GPUs.
func (q *Querier) NCCL(quant CommQuant, numGPUs int, op string, size float64) (Perf, error) {
	return Perf{}, errNotImplemented
}

// MoE is the MoE expert-compute latency for numTokens tokens (per
// attention-DP rank; multiplied by AttentionDP inside).
func (q *Querier) MoE(a MoEArgs, numTokens int) (Perf, error) {
	return Perf{}, errNotImplemented
}

// MemOp is the memory-bound op latency for bytes moved:
// (bytes/(mem_bw·scaling) + constant)·1000 ms; SOL mode drops the constant
// and the scaling.
func (q *Querier) MemOp(bytes float64) (Perf, error) {
	return Perf{}, errNotImplemented
}

// P2P is the pipeline point-to-point latency for bytes:
// (bytes/inter_node_bw + p2p_latency)·1000 ms; SOL mode drops the latency.
func (q *Querier) P2P(bytes float64) (Perf, error) {
	return Perf{}, errNotImplemented
}
