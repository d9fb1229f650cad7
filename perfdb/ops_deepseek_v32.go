package perfdb

// ops_deepseek_v32.go builds the op lists of aiconfigurator's DEEPSEEKV32
// family (models/deepseek_v32.py DeepSeekV32Model: DeepSeek-V3.2 and GLM-5,
// DeepSeek Sparse Attention) on the fused-MoE path (cp = 1, no large-EP):
// one DSA module per layer (context_attention / generation_attention, so the
// mixed step prices it in its attention passes), the shared expert and the
// routed MoE on every layer (shared widths split by moe-tp), decode MoE
// overlapping shared and routed experts. Unlike DEEPSEEK, no TP all-reduce
// op is emitted. GLM-5.2's shared-index layers (index_topk_freq > 1) are
// priced by the reference on SGLang from a skip-indexer table aicdb does not
// model: that combination is a one-line error.

import "fmt"

// buildDeepSeekV32 is DeepSeekV32Model.__init__ on the fused path.
func buildDeepSeekV32(m *Model, c *Config) (opLists, error) {
	if err := validateDeepSeek(m, c); err != nil {
		return opLists{}, err
	}
	if c.Backend == "sglang" && m.IndexTopKFreq > 1 {
		return opLists{}, fmt.Errorf("%s on sglang shares one top-k index across layers (index_topk_freq %d); its skip-indexer DSA rows are not modeled by aicdb — use vllm or trtllm",
			m.ID, m.IndexTopKFreq)
	}
	gq := c.GemmQuant
	heads := m.Heads / c.TP
	gm, err := gq.Mapping()
	if err != nil {
		return opLists{}, err
	}
	attn := func(phase string, scale float64) (op, error) {
		kind := opDSACtx
		if phase == "generation" {
			kind = opDSAGen
		}
		return op{name: phase + "_attention", kind: kind, scale: scale, heads: heads, arch: m.Architecture,
			kvQ: c.KVQuant, fmhaQ: c.FMHAQuant, gemmQ: gq, weightsB: dsaBlockWeightBytes(m.Architecture, heads, gm.Memory) * scale}, nil
	}
	return deepseekLayers(m, c, deepseekMoE{m: m, c: c, sharedInter: m.MoEInter / c.MoETP}, attn, false)
}
