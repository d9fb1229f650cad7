package perfdb

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/aicdb/aicdb/engine"
)

// MemoryUsage is one GPU's memory footprint in GiB (BaseBackend._get_memory_usage).
type MemoryUsage struct {
	TotalGiB       float64 `json:"total_gib"`
	WeightsGiB     float64 `json:"weights_gib"`
	ActivationsGiB float64 `json:"activations_gib"`
	KVCacheGiB     float64 `json:"kvcache_gib"`
	NCCLGiB        float64 `json:"nccl_gib"`
	OthersGiB      float64 `json:"others_gib"`
}

// ErrOOM marks a configuration whose memory estimate exceeds the GPU.
var ErrOOM = errors.New("out of memory")

// activationCoeff is ACTIVATION_COEFFICIENTS[family][min(tp, 8)]: TRT-LLM and
// vLLM share one table, SGLang has its own (backends/*_backend.py).
func activationCoeff(backend, family string, tp int) float64 {
	idx := map[int]int{1: 0, 2: 1, 4: 2, 8: 3}[min(tp, 8)]
	var t map[string][4]float64
	if backend == "sglang" {
		t = map[string][4]float64{"LLAMA": {14, 8.5, 6.5, 6.5}, "MOE": {28, 17, 13, 13}, "DEEPSEEK": {28, 17, 13, 13},
			"KIMIK25": {28, 17, 13, 13}, "DEEPSEEKV32": {28, 17, 13, 13}, "default": {13, 8, 6.5, 6.5}}
	} else {
		t = map[string][4]float64{"LLAMA": {11, 6.5, 5, 5}, "MOE": {22, 13, 10, 10}, "DEEPSEEK": {22, 13, 10, 10},
			"KIMIK25": {22, 13, 10, 10}, "DEEPSEEKV32": {22, 13, 10, 10}, "default": {10, 6, 5, 5}}
	}
	c, ok := t[family]
	if !ok {
		c = t["default"]
	}
	return c[idx]
}

// KVElementsPerToken is the KV cache one token occupies on one GPU, summed
// over all layers, in elements (models/base.py get_kvcache_elements_per_token):
// MLA models (DEEPSEEK, KIMIK25) cache one latent (kv_lora_rank) plus the
// decoupled RoPE key (qk_rope_head_dim) per layer, shared by every head and
// NOT sharded by attention TP; other models cache K and V of ⌈n_kv/tp⌉ heads.
// gpt-oss's banded layers cap at their window; this is the full-layer rate.
func (m *Model) KVElementsPerToken(tp int) int {
	if isMLAFamily(m) {
		lora, rope := m.KVLoraRank, m.QKRopeHeadDim
		if lora == 0 {
			lora = 512 // DeepSeek-V3 / Kimi-K2 defaults when the config lacks them
		}
		if rope == 0 {
			rope = 64
		}
		return m.Layers * (lora + rope)
	}
	return kvHeadsPerGPU(m, max(tp, 1)) * m.HeadDim * m.Layers * 2
}

// kvBytesPerToken is the KV bytes of one token on one GPU at kvMem bytes per
// cached element. DSA (DEEPSEEKV32) caches, per layer, the latent in the KV
// dtype, the RoPE key in bf16 and the fp8 indexer key with its scales
// (deepseek_v32.py get_kvcache_bytes_per_sequence).
func (m *Model) kvBytesPerToken(tp int, kvMem float64) float64 {
	if m.Family == "QWEN35" { // only full-attention layers cache K/V per token
		_, full := m.layerCounts()
		return float64(full*2*kvHeadsPerGPU(m, max(tp, 1))*m.HeadDim) * kvMem
	}
	if m.Family == "DEEPSEEKV32" {
		lora, rope, idx := m.KVLoraRank, m.QKRopeHeadDim, m.IndexHeadDim
		if lora == 0 {
			lora = 512
		}
		if rope == 0 {
			rope = 64
		}
		if idx == 0 {
			idx = 128
		}
		return float64(m.Layers) * (float64(lora)*kvMem + float64(rope)*2 + float64(indexerCacheEntryBytes(int64(idx))))
	}
	return float64(m.KVElementsPerToken(tp)) * kvMem
}

// KVBytesPerToken is the KV cache bytes one token occupies on one GPU of
// this worker (all layers, the resolved KV cache dtype): what memory, KV
// capacity and the disaggregated KV transfer size are built from. gpt-oss's
// banded layers are counted at the full-layer rate (an upper bound).
func (e *Estimator) KVBytesPerToken() float64 {
	kvm, err := e.cfg.KVQuant.Mapping()
	if err != nil {
		return 0 // unreachable: newEstimator validated the KV quant
	}
	return e.model.kvBytesPerToken(e.cfg.TP, kvm.Memory)
}

// KVStateBytesPerRequest is the constant per-request state (not per token)
// one request holds on one GPU of this worker: Qwen3.5's GDN recurrent and
// conv state; 0 for attention-only models. A request's KV footprint is
// KVStateBytesPerRequest + tokens·KVBytesPerToken.
func (e *Estimator) KVStateBytesPerRequest() float64 { return e.model.gdnStateBytes(e.cfg.TP) }

// memOpts are the per-call knobs of _get_memory_usage.
type memOpts struct {
	numTokens   int // per-step tokens sizing activations; 0 = (isl − prefix)·batch
	decodeShare int // tokens of numTokens that verify nextn+1 drafts; < 0 = all (decode-only step)
}

// Memory estimates one GPU's footprint for batch requests of isl + osl tokens
// with activations sized for numTokens per step (0 = (isl − prefix)·batch, the
// prefill peak). See memory for the formula.
func (e *Estimator) Memory(batch, isl, osl, prefix, numTokens int) (MemoryUsage, error) {
	return e.memory(batch, isl, osl, prefix, memOpts{numTokens: numTokens})
}

// memory estimates one GPU's footprint (BaseBackend._get_memory_usage):
//
//	weights     = Σ op weights / pp
//	activations = max(2·tokens·(n·d)·coef[family][min(tp,8)], 70 MiB (SGLang 90 MiB)) (SGLang ×1.15)
//	kvcache     = batch·(isl + osl)·kv_bytes·L·2·⌈n_kv/tp⌉·d   (gpt-oss: banded layers capped at 128)
//	nccl        = misc.nccl_mem[min(tp,8)];  others = misc.other_mem (SGLang ×1.2)
//
// With MTP (nextn > 0) the decode share of the activations is multiplied by
// nextn + 1 (all of them for a decode-only step).
func (e *Estimator) memory(batch, isl, osl, prefix int, o memOpts) (MemoryUsage, error) {
	m, c := e.model, e.cfg
	numTokens := o.numTokens
	var weights float64
	for i := range e.ops.ctx {
		weights += e.ops.ctx[i].weightsB
	}
	weights /= float64(c.PP)
	h := float64(m.Heads * m.HeadDim)
	if numTokens == 0 {
		numTokens = (isl - prefix) * batch
	}
	tpc := min(c.TP, 8)
	act := 2 * float64(numTokens) * h * activationCoeff(c.Backend, m.Family, tpc)
	if (isMLAFamily(m) || m.Family == "DEEPSEEKV32") && m.NumExperts > 0 {
		// MoE block-scale dispatch workspace (MOE_WORKSPACE_FAMILIES): fp32
		// scales per 128-wide block of every routed copy of a token.
		act += float64(numTokens) * h * float64(c.DP) * float64(m.NumExperts) * float64(m.TopK) / float64(c.MoEEP) / 128 * 4
	}
	minAct, actOver, othOver := 70.0*(1<<20), 0.0, 0.0
	if c.Backend == "sglang" {
		minAct, actOver, othOver = 90.0*(1<<20), 0.15, 0.20
	}
	act = math.Max(act, minAct)
	if c.Nextn > 0 && numTokens > 0 {
		if o.decodeShare < 0 {
			act *= float64(c.Nextn + 1)
		} else {
			share := float64(min(o.decodeShare, numTokens))
			act = act * (float64(numTokens) - share + share*float64(c.Nextn+1)) / float64(numTokens)
		}
	}
	act *= 1 + actOver
	kvm, err := c.KVQuant.Mapping()
	if err != nil {
		return MemoryUsage{}, err
	}
	seq := isl + osl
	var kvPerSeq float64
	if m.Architecture == "GptOssForCausalLM" {
		perTok := float64(kvHeadsPerGPU(m, c.TP)*m.HeadDim) * 2 * kvm.Memory
		swa := m.Layers / 2
		kvPerSeq = perTok * float64(swa*min(seq, gptOSSWindow)+(m.Layers-swa)*seq)
	} else {
		kvPerSeq = m.kvBytesPerToken(c.TP, kvm.Memory)*float64(seq) + m.gdnStateBytes(c.TP)
	}
	kv := float64(batch) * kvPerSeq
	nccl, ok := e.sys.NCCLMem[tpc]
	if !ok && tpc > 1 {
		return MemoryUsage{}, fmt.Errorf("system %s: misc.nccl_mem has no entry for %d GPUs", e.sys.Name, tpc)
	}
	others := e.sys.OtherMem * (1 + othOver)
	const gib = 1 << 30
	u := MemoryUsage{WeightsGiB: weights / gib, ActivationsGiB: act / gib, KVCacheGiB: kv / gib,
		NCCLGiB: nccl / gib, OthersGiB: others / gib}
	u.TotalGiB = (weights + act + kv + nccl + others) / gib
	return u, nil
}

// kvBudgetParams are the backend's KV-cache budget rule
// (set_memory_and_check_oom + memory.kv_cache_budget_bytes): the memory
// fraction, whether it applies to the free pool (TRT-LLM
// free_gpu_memory_fraction) or to total memory (vLLM gpu_memory_utilization,
// SGLang mem_fraction_static), and the reserved/tolerance shrink factors.
// SGLang's static path (disagg workers) derives mem_fraction_static from the
// capacity and parallelism; its agg path uses the 0.88 fallback.
func kvBudgetParams(backend, version string, static bool, capacity float64, tp, pp, dp int) (fraction float64, ofFree bool, reserved, tolerance float64) {
	switch backend {
	case "trtllm":
		return 0.9, true, 0.015, 0.02
	case "sglang":
		if static && capacity > 0 {
			return SGLangMemFractionStatic(capacity, tp, pp, dp, 0), false, 0, 0.02
		}
		return 0.88, false, 0, 0.02
	}
	for _, p := range []struct {
		prefix string
		f      float64
	}{{"0.14", 0.9}, {"0.19", 0.9}, {"0.22", 0.92}, {"0.24", 0.92}} {
		if strings.HasPrefix(version, p.prefix) {
			return p.f, false, 0, 0.02
		}
	}
	return 0.92, false, 0, 0.02
}

// SGLangMemFractionStatic is derive_sglang_mem_fraction_static (SGLang
// ServerArgs' capacity-tiered default mem_fraction_static for a GPU of
// capacityBytes): capacity minus the reserve for chunked prefill, parallel
// slack, decode graphs and DP-attention padding. graphMaxBS > 0 is the
// cuda_graph_max_bs a launch's --cuda-graph-bs list gives (SGLang takes its
// maximum); 0 keeps the capacity tier's default.
func SGLangMemFractionStatic(capacityBytes float64, tp, pp, dp, graphMaxBS int) float64 {
	mb := capacityBytes / (1 << 20)
	chunk := float64(engine.SGLangChunkedPrefillSize(capacityBytes))
	var graphBS float64
	switch {
	case mb < 20*1024:
		graphBS = 8
	case mb < 35*1024:
		graphBS = 24
		if tp >= 4 {
			graphBS = 80
		}
	case mb < 60*1024:
		graphBS = 32
		if tp >= 4 {
			graphBS = 160
		}
	case mb < 160*1024:
		graphBS = 256
		if tp >= 4 {
			graphBS = 512
		}
	default:
		graphBS = 512
	}
	if graphMaxBS > 0 {
		graphBS = float64(graphMaxBS)
	}
	res := 512 + 1.5*chunk + float64(tp*pp)/8*1024 + graphBS*2
	if dp > 1 {
		res += graphBS * float64(dp) * 3
		if graphBS > 300 {
			res += graphBS * float64(dp) * 1.5
		}
	}
	if mb > 60*1024 {
		res = math.Max(res, 10*1024)
	}
	return math.RoundToEven((mb-res)/mb*1000) / 1000
}

// checkOOM fails when the footprint reaches the GPU's memory capacity or the
// KV cache exceeds the backend's KV budget (the reference raises
// RuntimeError for both). static selects the static-path budget (disagg).
func (e *Estimator) checkOOM(u MemoryUsage, static bool) error {
	capGiB := e.sys.MemCapacity / (1 << 30)
	if capGiB <= 0 {
		return nil
	}
	if u.TotalGiB >= capGiB {
		return fmt.Errorf("%w: %.2f GiB needed on %s (capacity %.2f GiB); raise tp/pp or lower the batch",
			ErrOOM, u.TotalGiB, e.sys.Name, capGiB)
	}
	f, ofFree, reserved, tol := kvBudgetParams(e.cfg.Backend, e.cfg.Version, static, e.sys.MemCapacity, e.cfg.TP, e.cfg.PP, e.cfg.DP)
	scale := (1 - reserved) * (1 - tol)
	nonKV := u.TotalGiB - u.KVCacheGiB
	budget := capGiB*f*scale - nonKV
	if ofFree {
		budget = (capGiB - nonKV) * f * scale
	}
	if u.KVCacheGiB > budget {
		return fmt.Errorf("%w: KV cache %.2f GiB exceeds the %s KV budget %.2f GiB on %s; raise tp/pp or lower the batch",
			ErrOOM, u.KVCacheGiB, e.cfg.Backend, budget, e.sys.Name)
	}
	return nil
}
