package perfdb

// sol.go holds the speed-of-light (roofline) formulas (PERFDB.md §1.5;
// aiconfigurator perf_database/gemm.rs, attention.rs, operators/moe.rs,
// communication.rs, attention.rs query_mem_op). Every result is ms
// (seconds × 1000). They serve three roles: SOL-mode answers, the util
// carrier of interpolation holds/transfers, and the numerator of empirical
// estimates.

import (
	"fmt"
	"math"
)

// tcFlops resolves the tensor-core FLOP/s for a compute dtype, or an error
// naming the missing system key (Rust quant_tc_flops → MissingSystemFlops).
func tcFlops(sys *System, d ComputeDtype) (float64, error) {
	var v float64
	var key string
	switch d {
	case ComputeBF16:
		v, key = sys.BF16TCFlops, "bfloat16_tc_flops"
	case ComputeInt8:
		v, key = sys.INT8TCFlops, "int8_tc_flops"
	case ComputeFP8:
		v, key = sys.FP8TCFlops, "fp8_tc_flops"
	case ComputeFP4:
		v, key = sys.FP4TCFlops, "fp4_tc_flops"
	default:
		return 0, fmt.Errorf("system %s: quant mode is memory-only and has no compute FLOPS", sys.Name)
	}
	if !positiveFinite(v) {
		return 0, fmt.Errorf("system %s: the quant mode needs gpu.%s, which the system YAML does not define; the platform cannot model it", sys.Name, key)
	}
	return v, nil
}

// gemmSOL is max(2mnk/flops, mem·(mn+mk+nk)/bw)·1000 at c = [m, n, k].
type gemmSOL struct{ flops, memBytes, memBW float64 }

func (g *gemmSOL) parts(m, n, k float64) (math, mem float64) {
	return 2 * m * n * k / g.flops * 1000, g.memBytes * (m*n + m*k + n*k) / g.memBW * 1000
}

func (g *gemmSOL) sol(c pt) float64 {
	a, b := g.parts(c[0], c[1], c[2])
	return math.Max(a, b)
}

// ctxAttnSOL is the prefix-0 context-attention SOL at c = [n, s, b] for one
// table slice (nKV 0 = MHA: kv heads track n).
type ctxAttnSOL struct {
	nKV, head, window   float64
	kvMem, flops, memBW float64
}

func (a *ctxAttnSOL) sol(c pt) float64 {
	n, s, b := c[0], c[1], c[2]
	nkv := a.nKV
	if nkv == 0 {
		nkv = n
	}
	var ops float64
	if a.window > 0 && s > a.window {
		ops = 2 * b * s * a.window * n * a.head * 2
	} else {
		ops = 2 * b * (s * s) * n * a.head * 2 / 2
	}
	mem := 2*b*(n*s*a.head+n*s*a.head) + a.kvMem*b*(2*nkv*s*a.head)
	return math.Max(ops/a.flops*1000, mem/a.memBW*1000)
}

// ctxAttnSOLPrefix is the query-level context-attention SOL with prefix
// (Rust context_attention_sol_with_prefix): the causal work discounts the
// cached prefix, Q/O traffic covers only new tokens, the KV write the full
// sequence. nKV is the real kv-head count.
func ctxAttnSOLPrefix(memBW, flops, kvMem float64, b, s, prefix, n, nKV, head, window float64) float64 {
	full := s + prefix
	var ops float64
	if window > 0 && full > window {
		ops = 2 * b * (full - prefix) * window * n * head * 2
	} else {
		ops = 2 * b * (full*full - prefix*prefix) * n * head * 2 / 2
	}
	mem := 2*b*(n*(full-prefix)*head+n*(full-prefix)*head) + kvMem*b*(2*nKV*full*head)
	return math.Max(ops/flops*1000, mem/memBW*1000)
}

// genAttnSOL is the decode-attention SOL at c = [n, b, s]: kv = s−1 (capped
// at the window), ops = 2·b·n·h·2·kv, bytes = b·(2nh + 2·n_kv·kv·h·kvbytes + 2nh).
type genAttnSOL struct {
	nKV, head, window   float64
	kvMem, flops, memBW float64
}

func (a *genAttnSOL) sol(c pt) float64 {
	n, b, s := c[0], c[1], c[2]
	nkv := a.nKV
	if nkv == 0 {
		nkv = n
	}
	kv := s - 1
	if a.window > 0 {
		kv = math.Min(s-1, a.window)
	}
	ops := 2 * b * n * a.head * 2 * kv
	mem := b * (n*a.head*2 + 2*nkv*kv*a.head*a.kvMem + n*a.head*2)
	return math.Max(ops/a.flops*1000, mem/a.memBW*1000)
}

// genAttnFlopsDtype is the decode FMHA compute dtype implied by the KV dtype:
// fp8 KV runs an fp8 MMA only where fp8 tensor cores exist (sm ≥ 89).
func genAttnFlopsDtype(sys *System, kv KVQuant) ComputeDtype {
	if kv == KVFP8 && sys.SMVersion >= 89 {
		return ComputeFP8
	}
	return ComputeBF16
}

// scaleSOL is the fp8-static overhead SOL at c = [m, k]: factor·m·k/bw·1000
// (2 for compute_scale, 3 for scale_matrix).
type scaleSOL struct{ factor, memBW float64 }

func (s *scaleSOL) sol(c pt) float64 { return s.factor * c[0] * c[1] / s.memBW * 1000 }

// p2pBandwidth is SystemSpec::get_p2p_bandwidth: NVLink inside a node,
// inter-node beyond it, inter-rack past num_gpus_per_rack when defined.
func p2pBandwidth(sys *System, numGPUs int) float64 {
	if numGPUs <= sys.NumGPUsPerNode {
		return sys.IntraNodeBW
	}
	if sys.NumGPUsPerRack == 0 || numGPUs <= sys.NumGPUsPerRack {
		return sys.InterNodeBW
	}
	if sys.InterRackBW > 0 {
		return sys.InterRackBW
	}
	return sys.InterNodeBW
}

// customAllReduceSOL is the ring all-reduce bound 2·size·2/tp·(tp−1)/bw·1000
// (size in elements, 2 bytes each; 0 at tp 1).
func customAllReduceSOL(sys *System, tp int, size float64) float64 {
	if tp == 1 {
		return 0
	}
	t := float64(tp)
	return 2 * size * 2 / t * (t - 1) / p2pBandwidth(sys, tp) * 1000
}

// ncclSOL is bytes·size·(g−1)/g/bw·1000 for gather/scatter collectives, ×2
// for all_reduce, 0 for unknown collectives.
func ncclSOL(sys *System, bytesPerElem float64, numGPUs int, op string, size float64) float64 {
	n := float64(numGPUs)
	bw := p2pBandwidth(sys, numGPUs)
	switch op {
	case NCCLAllGather, NCCLAllToAll, NCCLReduceScatter:
		return bytesPerElem * size * (n - 1) / n / bw * 1000
	case NCCLAllReduce:
		return 2 * bytesPerElem * size * (n - 1) / n / bw * 1000
	}
	return 0
}

// curveSOL adapts a comm SOL (linear in size) to the 1-D curve engine.
type commCurveSOL struct {
	sys  *System
	tp   int
	mem  float64
	op   string
	nccl bool
}

func (c *commCurveSOL) sol(p pt) float64 {
	if c.nccl {
		return ncclSOL(c.sys, c.mem, c.tp, c.op, p[0])
	}
	return customAllReduceSOL(c.sys, c.tp, p[0])
}

// moeSOL is the MoE roofline with aiconfigurator's integer arithmetic (Rust
// operators/moe.rs moe_sol): c = [num_tokens].
type moeSOL struct {
	numGemms, hidden, inter, topk, experts, tp, ep uint64
	mem, flops, memBW                              float64
}

func (m *moeSOL) parts(tokens uint64) (math, mem float64) {
	total := tokens * m.topk
	ep, tp := max(m.ep, 1), max(m.tp, 1)
	ops := total * m.hidden * m.inter * m.numGemms * 2 / ep / tp
	memInt := total/ep*m.hidden*2 +
		total/ep*m.inter*m.numGemms/tp +
		m.hidden*m.inter*m.numGemms/tp*min(m.experts/ep, total/ep)
	return float64(ops) / m.flops * 1000, float64(memInt) * m.mem / m.memBW * 1000
}

func (m *moeSOL) sol(c pt) float64 {
	t := math.Round(c[0])
	if t < 0 {
		t = 0
	}
	a, b := m.parts(uint64(t))
	return math.Max(a, b)
}

// memScaling is gpu.mem_bw_empirical_scaling_factor (1 when absent).
func memScaling(sys *System) float64 {
	if sys.MemBWEmpiricalScalingFactor > 0 {
		return sys.MemBWEmpiricalScalingFactor
	}
	return 1
}

// memOpMs is the empirical memory-op latency
// (bytes/(mem_bw·scaling) + constant)·1000 (Rust mem_op_latency_ms).
func memOpMs(sys *System, bytes float64) float64 {
	bw := math.Max(sys.MemBW, 1)
	return (bytes/(bw*math.Max(memScaling(sys), 1e-9)) + sys.MemEmpiricalConstantLatency) * 1000
}
