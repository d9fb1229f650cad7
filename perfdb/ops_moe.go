package perfdb

// ops_moe.go builds the op lists of aiconfigurator's MOE family
// (models/moe.py MOEModel: Qwen3-MoE, Qwen2-MoE, Mixtral, MiniMax-M2, gpt-oss)
// with the generic fused MoE block (models/blocks/moe.py
// _default_moe_block_ops: router GEMM, pre-dispatch, MoE, post-dispatch).
// The large-EP (all-to-all) emission is not modeled: it is off by default.

import "fmt"

// moeDistribution is the MOE family's workload distribution:
// power_law_distribution("power_law", 1.2) (models/moe.py _power_law_alpha).
const moeDistribution = "power_law_1.2"

// validateMoE mirrors MOEModel's constructor assertions.
func validateMoE(m *Model, c *Config) error {
	if c.TP*c.DP != c.MoETP*c.MoEEP {
		return fmt.Errorf("tp (%d) × dp (%d) must equal moe-tp (%d) × moe-ep (%d) for the MoE model %s",
			c.TP, c.DP, c.MoETP, c.MoEEP, m.ID)
	}
	if m.NumExperts < c.MoEEP {
		return fmt.Errorf("moe-ep %d is larger than the %d experts of %s", c.MoEEP, m.NumExperts, m.ID)
	}
	if c.MoEQuant == MoEFP8Block && c.MoETP > 0 && (m.MoEInter/c.MoETP)%128 != 0 {
		return fmt.Errorf("moe-tp %d: moe_intermediate_size %d / moe-tp is not a multiple of the fp8 block 128",
			c.MoETP, m.MoEInter)
	}
	return nil
}

// moeBlock is _default_moe_block_ops for one phase (no shared experts).
func moeBlock(prefix string, m *Model, c *Config, scale float64, isContext bool) ([]op, error) {
	router, err := gemmOp(prefix+"_router_gemm", scale, m.NumExperts, m.Hidden, GemmBF16, false)
	if err != nil {
		return nil, err
	}
	args := MoEArgs{Quant: c.MoEQuant, Distribution: moeDistribution, TopK: m.TopK, NumExperts: m.NumExperts,
		Hidden: m.Hidden, Inter: m.MoEInter, MoETP: c.MoETP, MoEEP: c.MoEEP, AttentionDP: c.DP,
		IsGated: true, IsContext: isContext}
	mp, err := c.MoEQuant.Mapping()
	if err != nil {
		return nil, err
	}
	// MoeOp::weight_bytes: floor(floor(h·inter·E·bytes·3 / ep) / tp) · scale.
	raw := float64(m.Hidden) * float64(m.MoEInter) * float64(m.NumExperts) * mp.Memory * 3
	w := float64(int64(float64(int64(raw/float64(c.MoEEP))) / float64(c.MoETP)))
	disp := func(name string, pre bool) op {
		return op{name: name, kind: opMoEDispatch, scale: scale, hidden: m.Hidden, moe: args, pre: pre,
			backend: c.Backend, smVer: c.sys.SMVersion, nvl72: c.sys.NumGPUsPerNode >= 72}
	}
	return []op{
		router,
		disp(prefix+"_moe_pre_dispatch", true),
		{name: prefix + "_moe", kind: opMoE, scale: scale, moe: args, weightsB: w * scale},
		disp(prefix+"_moe_post_dispatch", false),
	}, nil
}

// buildMoE is MOEModel.__init__ (cp = 1, no large-EP comm backend).
func buildMoE(m *Model, c *Config) (opLists, error) {
	if err := validateMoE(m, c); err != nil {
		return opLists{}, err
	}
	tp, pp := c.TP, c.PP
	h, L := m.Hidden, float64(m.Layers)
	kvg := kvHeadsPerGPU(m, tp)
	mtp := mtpScale(c.Nextn, m.Layers)
	qkvN := m.Heads*m.HeadDim/tp + m.HeadDim*kvg*2
	attnScale := 1.0
	var ls opLists
	ctxAttn := func(scale float64, window int) op {
		return op{name: "context_attention", kind: opContextAttn, scale: scale, heads: m.Heads / tp, kvHeads: kvg,
			headDim: m.HeadDim, window: window, kvQ: c.KVQuant, fmhaQ: c.FMHAQuant, qkNorm: m.UseQKNorm}
	}
	genAttn := func(scale float64, window int) op {
		return op{name: "generation_attention", kind: opGenAttn, scale: scale, heads: m.Heads / tp, kvHeads: kvg,
			headDim: m.HeadDim, window: window, kvQ: c.KVQuant}
	}
	if m.Architecture == "GptOssForCausalLM" {
		// Half the layers use the 128-token banded window, half full attention.
		attnScale = 2
		ls.ctx = append(ls.ctx, ctxAttn(L/attnScale, gptOSSWindow))
		ls.gen = append(ls.gen, genAttn(L*mtp/attnScale, gptOSSWindow))
	}
	qkv, err := gemmOp("context_qkv_gemm", L, qkvN, h, c.GemmQuant, false)
	if err != nil {
		return opLists{}, err
	}
	proj, err := gemmOp("context_proj_gemm", L, h, m.Heads*m.HeadDim/tp, c.GemmQuant, true)
	if err != nil {
		return opLists{}, err
	}
	ls.ctx = append(ls.ctx, embeddingOp("context_embedding", 1, m.Vocab/tp, h),
		elementwiseOp("context_add_norm_1", L, 2*h, 2*h), qkv, ctxAttn(L/attnScale, 0), proj,
		elementwiseOp("context_add_norm_2", L, 2*h, 2*h))
	blk, err := moeBlock("context", m, c, L, true)
	if err != nil {
		return opLists{}, err
	}
	ls.ctx = append(ls.ctx, blk...)

	gqkv, err := gemmOp("generation_qkv_gemm", L*mtp, qkvN, h, c.GemmQuant, false)
	if err != nil {
		return opLists{}, err
	}
	gproj, err := gemmOp("generation_proj_gemm", L*mtp, h, m.Heads*m.HeadDim/tp, c.GemmQuant, true)
	if err != nil {
		return opLists{}, err
	}
	ls.gen = append(ls.gen, embeddingOp("generation_embedding", mtp, m.Vocab/tp, h),
		elementwiseOp("generation_add_norm_1", L*mtp, 2*h, 2*h), gqkv, genAttn(L/attnScale*mtp, 0), gproj,
		elementwiseOp("generation_add_norm_2", L*mtp, 2*h, 2*h))
	gblk, err := moeBlock("generation", m, c, L*mtp, false)
	if err != nil {
		return opLists{}, err
	}
	ls.gen = append(ls.gen, gblk...)
	logits, err := gemmOp("generation_logits_gemm", mtp, m.Vocab/tp, h, GemmBF16, false)
	if err != nil {
		return opLists{}, err
	}
	ls.gen = append(ls.gen, logits)

	ls.ctx = append(ls.ctx, op{name: "context_embedding_ar", kind: opAllReduce, scale: 1, hidden: h, tp: tp})
	ls.gen = append(ls.gen, op{name: "generation_embedding_ar", kind: opAllReduce, scale: mtp, hidden: h, tp: tp})
	ls.ctx = append(ls.ctx, op{name: "context_p2p", kind: opP2P, scale: float64(pp - 1), hidden: h, tp: pp})
	ls.gen = append(ls.gen, op{name: "generation_p2p", kind: opP2P, scale: float64(pp-1) * mtp, hidden: h, tp: pp})
	return ls, nil
}
