package perfdb

// ops.go declares the kernel-latency query API that the composition layer
// (op lists, static/mixed/agg/disagg estimates) calls. It mirrors the
// database-mode dispatch of aiconfigurator's Rust engine
// (aic-core/rust/aiconfigurator-core/src/operators/*.rs, the
// `query_*_table` functions), so a Rust op list ports 1:1:
//
//   Rust                                            Go
//   GemmOp::query(db, x, None)                      q.GemmOp(quant, m, n, k, lowPrecisionInput)
//   query_gemm_table(db, quant, m, n, k)            q.Gemm(quant, m, n, k)
//   query_context_attention_table(db, b, s, pfx, …) q.ContextAttention(b, s, prefix, n, nKV, headDim, window, kvQuant, fmhaQuant)
//   query_generation_attention_table(db, b, s, …)   q.GenerationAttention(b, s, n, nKV, headDim, window, kvQuant)
//   query_custom_allreduce_table(db, q, tp, size)   q.CustomAllReduce(quant, tp, size)
//   query_nccl_table(db, q, g, op, size)            q.NCCL(quant, numGPUs, op, size)
//   MoeOp::query(db, num_tokens)                    q.MoE(args, numTokens)
//   query_mem_op(db, bytes)                         q.MemOp(bytes)
//   P2POp / query_p2p(db, bytes)                    q.P2P(bytes)
//
// Units: every latency is milliseconds; energy is watt·milliseconds (0 when
// the table carries no power column, and always 0 for SOL/empirical
// results). Sizes: GEMM m = tokens, n = output features, k = input
// features; attention s is the sequence length WITHOUT the prefix (the
// query adds it), heads are per GPU (after TP); communication sizes are
// ELEMENT counts (not bytes), MemOp and P2P take BYTES.
//
// The op-level multipliers (scale_factor = layer count, the 1.1× fused
// RoPE/KV-write extras of ContextAttentionOp, seq-imbalance corrections)
// belong to the caller; the helpers here return one kernel's latency.
//
// Construction and modes: NewQuerier(d, mode) indexes a resolved Data once;
// q.WithMode(m) and q.WithTransferPolicy(p) are cheap views over the same
// indexes (ParseTransferPolicy reads aiconfigurator's presets). Errors: a
// *MissError (IsMiss) is a structured table miss — what SILICON returns
// and HYBRID replaces with the empirical estimate; an *EmpiricalMissError
// means no utilization data to calibrate from (terminal in every mode);
// anything else is bad input or a missing system key, as one line naming it.
// EMPIRICAL and SOL answers in aiconfigurator read Data loaded WITHOUT the
// shared layer (see Querier).

import (
	"fmt"
)

// DatabaseMode selects how queries are answered (PERFDB.md §1.4–§1.5).
type DatabaseMode string

// Database modes, spelled as aiconfigurator's --database-mode flag.
const (
	// ModeSilicon answers from the measured tables only; a structured miss is an error.
	ModeSilicon DatabaseMode = "SILICON"
	// ModeHybrid answers from the tables and falls back to the empirical
	// (util-transfer) estimate on a structured miss.
	ModeHybrid DatabaseMode = "HYBRID"
	// ModeEmpirical always answers with the empirical estimate SOL(q)/util.
	ModeEmpirical DatabaseMode = "EMPIRICAL"
	// ModeSOL answers with the speed-of-light roofline (energy 0).
	ModeSOL DatabaseMode = "SOL"
)

// ParseDatabaseMode validates a --database-mode value (case-sensitive, as in aiconfigurator).
func ParseDatabaseMode(s string) (DatabaseMode, error) {
	switch m := DatabaseMode(s); m {
	case ModeSilicon, ModeHybrid, ModeEmpirical, ModeSOL:
		return m, nil
	}
	return "", fmt.Errorf("database mode %q: unknown; use one of SILICON, HYBRID, EMPIRICAL, SOL", s)
}

// Source tags where a result came from (Rust operators/base.rs Source).
type Source uint8

// Result sources. Mixed marks a sum of parts with different sources.
const (
	SourceSilicon Source = iota
	SourceEmpirical
	SourceSOL
	SourceEstimated
	SourceMixed
)

// String returns the aiconfigurator spelling of the source.
func (s Source) String() string {
	switch s {
	case SourceSilicon:
		return "silicon"
	case SourceEmpirical:
		return "empirical"
	case SourceSOL:
		return "sol"
	case SourceEstimated:
		return "estimated"
	case SourceMixed:
		return "mixed"
	}
	return fmt.Sprintf("source(%d)", uint8(s))
}

// Perf is one query answer: latency (ms), energy (W·ms) and its source.
// It mirrors Rust's PerformanceResult (without the SOL decomposition).
type Perf struct {
	LatencyMs float64
	EnergyWms float64
	Source    Source
}

// Scaled multiplies latency and energy by f, keeping the source.
func (p Perf) Scaled(f float64) Perf {
	return Perf{LatencyMs: p.LatencyMs * f, EnergyWms: p.EnergyWms * f, Source: p.Source}
}

// Plus adds two results. A zero result (latency and energy 0) is a
// source-neutral identity; otherwise differing sources become Mixed.
func (p Perf) Plus(o Perf) Perf {
	src := p.Source
	switch {
	case p.LatencyMs == 0 && p.EnergyWms == 0:
		src = o.Source
	case o.LatencyMs == 0 && o.EnergyWms == 0:
		src = p.Source
	case p.Source != o.Source:
		src = SourceMixed
	}
	return Perf{LatencyMs: p.LatencyMs + o.LatencyMs, EnergyWms: p.EnergyWms + o.EnergyWms, Source: src}
}

// ClampNonNegative floors latency and energy at 0.
func (p Perf) ClampNonNegative() Perf {
	return Perf{LatencyMs: max(p.LatencyMs, 0), EnergyWms: max(p.EnergyWms, 0), Source: p.Source}
}

// MoEArgs is the configuration of one MoE op (Rust operators/moe.rs MoeOp
// fields). Sizes are the full model's: Hidden = hidden_size, Inter =
// moe_intermediate_size, NumExperts = total routed experts.
type MoEArgs struct {
	Quant        MoEQuant
	Distribution string // workload_distribution, e.g. "power_law_1.2", "balanced"
	TopK         int
	NumExperts   int
	Hidden       int
	Inter        int
	MoETP        int
	MoEEP        int
	AttentionDP  int  // tokens are multiplied by this (all-gather into the expert pool); 0 means 1
	IsGated      bool // SwiGLU (3 GEMMs) when true; false for Relu² experts
	IsContext    bool // prefill op (only matters with EnableEPLB on sglang)
	EnableEPLB   bool
}

// NCCL collective operation names as stored in nccl_perf (op_name column).
const (
	NCCLAllGather     = "all_gather"
	NCCLAllReduce     = "all_reduce"
	NCCLAllToAll      = "alltoall"
	NCCLReduceScatter = "reduce_scatter"
)
