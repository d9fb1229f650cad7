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
	tp, pp := c.TP, c.PP
	h, L := m.Hidden, float64(m.Layers)
	mtp := mtpScale(c.Nextn, m.Layers)
	gq := c.GemmQuant
	heads := m.Heads / tp
	gm, err := gq.Mapping()
	if err != nil {
		return opLists{}, err
	}
	gemm := func(name string, scale float64, n, k int, q GemmQuant) (op, error) {
		return gemmOp(name, scale, n, k, q, false)
	}
	moeArgs := func(isContext bool) MoEArgs {
		return MoEArgs{Quant: c.MoEQuant, Distribution: deepseekDistribution, TopK: m.TopK, NumExperts: m.NumExperts,
			Hidden: h, Inter: m.MoEInter, MoETP: c.MoETP, MoEEP: c.MoEEP, AttentionDP: c.DP, IsGated: true, IsContext: isContext}
	}
	mp, err := c.MoEQuant.Mapping()
	if err != nil {
		return opLists{}, err
	}
	moeWeights := func(scale float64) float64 {
		raw := float64(h) * float64(m.MoEInter) * float64(m.NumExperts) * mp.Memory * 3
		return float64(int64(float64(int64(raw/float64(c.MoEEP)))/float64(c.MoETP))) * scale
	}
	disp := func(name string, scale float64, pre, isContext bool) op {
		return op{name: name, kind: opMoEDispatch, scale: scale, hidden: h, moe: moeArgs(isContext), pre: pre,
			backend: c.Backend, smVer: c.sys.SMVersion, nvl72: c.sys.NumGPUsPerNode >= 72}
	}
	shared := func(phase string, scale float64) ([]op, error) {
		inter := m.MoEInter / c.MoETP
		gu, err := gemm(phase+"_shared_gate_up_gemm", scale, 2*inter, h, gq)
		if err != nil {
			return nil, err
		}
		f2, err := gemm(phase+"_shared_ffn2_gemm", scale, h, inter, gq)
		if err != nil {
			return nil, err
		}
		return []op{gu, elementwiseOp(phase+"_shared_act_gate", scale, 2*inter, inter), f2}, nil
	}
	routed := func(phase string, scale float64, isContext bool) ([]op, error) {
		router, err := gemm(phase+"_router_gemm", scale, m.NumExperts, h, GemmBF16)
		if err != nil {
			return nil, err
		}
		return []op{router, disp(phase+"_moe_pre_dispatch", scale, true, isContext),
			{name: phase + "_moe", kind: opMoE, scale: scale, moe: moeArgs(isContext), weightsB: moeWeights(scale)},
			disp(phase+"_moe_post_dispatch", scale, false, isContext)}, nil
	}
	dsa := func(phase string, kind opKind, scale float64) op {
		return op{name: phase + "_attention", kind: kind, scale: scale, heads: heads, arch: m.Architecture,
			kvQ: c.KVQuant, fmhaQ: c.FMHAQuant, gemmQ: gq, weightsB: dsaBlockWeightBytes(m.Architecture, heads, gm.Memory) * scale}
	}

	var ls opLists
	ls.ctx = append(ls.ctx, embeddingOp("context_embedding", 1, m.Vocab, h), elementwiseOp("context_add_norm_1", L, 2*h, 2*h),
		dsa("context", opDSACtx, L), elementwiseOp("context_add_norm_2", L, 2*h, 2*h))
	sh, err := shared("context", L)
	if err != nil {
		return opLists{}, err
	}
	rt, err := routed("context", L, true)
	if err != nil {
		return opLists{}, err
	}
	ls.ctx = append(append(ls.ctx, sh...), rt...)
	logits, err := gemm("context_logits_gemm", 1, m.Vocab/tp, h, GemmBF16)
	if err != nil {
		return opLists{}, err
	}
	logits.logits = true
	ls.ctx = append(ls.ctx, logits, op{name: "context_p2p", kind: opP2P, scale: float64(pp - 1), hidden: h, tp: pp})

	ls.gen = append(ls.gen, embeddingOp("generation_embedding", mtp, m.Vocab, h),
		elementwiseOp("generation_add_norm_1", L*mtp, 2*h, 2*h), dsa("generation", opDSAGen, L*mtp),
		elementwiseOp("generation_add_norm_2", L*mtp, 2*h, 2*h))
	gsh, err := shared("generation", L*mtp)
	if err != nil {
		return opLists{}, err
	}
	grt, err := routed("generation", L*mtp, false)
	if err != nil {
		return opLists{}, err
	}
	ov := op{name: "generation_moe_overlap", kind: opOverlap, scale: 1, sub: append(grt, gsh...), split: len(grt)}
	for i := range ov.sub {
		ov.weightsB += ov.sub[i].weightsB
	}
	glogits, err := gemm("generation_logits_gemm", mtp, m.Vocab/tp, h, GemmBF16)
	if err != nil {
		return opLists{}, err
	}
	ls.gen = append(ls.gen, ov, glogits, op{name: "generation_p2p", kind: opP2P, scale: float64(pp-1) * mtp, hidden: h, tp: pp})
	return ls, nil
}
