package perfdb

// ops_deepseek_layers.go holds what the DEEPSEEK/KIMIK25 (MLA) and DEEPSEEKV32
// (DSA) builders share: the MoE block of every layer (one shared expert beside
// the routed experts, DeepSeekModel's power-law workload) and the per-phase
// layer layout around the family's attention op.

// deepseekMoE builds the MoE block of a DeepSeek-style layer.
type deepseekMoE struct {
	m *Model
	c *Config
	// sharedInter is the shared expert's per-rank width: DeepSeekModel splits it
	// by tp, DeepSeekV32Model by moe-tp.
	sharedInter int
}

func (d deepseekMoE) args(isContext bool) MoEArgs {
	m, c := d.m, d.c
	return MoEArgs{Quant: c.MoEQuant, Distribution: deepseekDistribution, TopK: m.TopK, NumExperts: m.NumExperts,
		Hidden: m.Hidden, Inter: m.MoEInter, MoETP: c.MoETP, MoEEP: c.MoEEP, AttentionDP: c.DP, IsGated: true, IsContext: isContext}
}

// weights is the routed experts' weight bytes per rank, times scale (the
// reference truncates after each split).
func (d deepseekMoE) weights(scale float64) (float64, error) {
	m, c := d.m, d.c
	mp, err := c.MoEQuant.Mapping()
	if err != nil {
		return 0, err
	}
	raw := float64(m.Hidden) * float64(m.MoEInter) * float64(m.NumExperts) * mp.Memory * 3
	return float64(int64(float64(int64(raw/float64(c.MoEEP)))/float64(c.MoETP))) * scale, nil
}

func (d deepseekMoE) dispatch(name string, scale float64, pre, isContext bool) op {
	c := d.c
	return op{name: name, kind: opMoEDispatch, scale: scale, hidden: d.m.Hidden, moe: d.args(isContext), pre: pre,
		backend: c.Backend, smVer: c.sys.SMVersion, nvl72: c.sys.NumGPUsPerNode >= 72}
}

// shared is the shared expert: gate/up GEMM, activation, down GEMM.
func (d deepseekMoE) shared(phase string, scale float64) ([]op, error) {
	h, inter, gq := d.m.Hidden, d.sharedInter, d.c.GemmQuant
	gu, err := gemmOp(phase+"_shared_gate_up_gemm", scale, 2*inter, h, gq, false)
	if err != nil {
		return nil, err
	}
	f2, err := gemmOp(phase+"_shared_ffn2_gemm", scale, h, inter, gq, false)
	if err != nil {
		return nil, err
	}
	return []op{gu, elementwiseOp(phase+"_shared_act_gate", scale, 2*inter, inter), f2}, nil
}

// routed is the router GEMM, the dispatch before, the routed experts and the
// dispatch after.
func (d deepseekMoE) routed(phase string, scale float64, isContext bool) ([]op, error) {
	m := d.m
	router, err := gemmOp(phase+"_router_gemm", scale, m.NumExperts, m.Hidden, GemmBF16, false)
	if err != nil {
		return nil, err
	}
	w, err := d.weights(scale)
	if err != nil {
		return nil, err
	}
	return []op{router, d.dispatch(phase+"_moe_pre_dispatch", scale, true, isContext),
		{name: phase + "_moe", kind: opMoE, scale: scale, moe: d.args(isContext), weightsB: w},
		d.dispatch(phase+"_moe_post_dispatch", scale, false, isContext)}, nil
}

// deepseekLayers lays out both phases of a DeepSeek-style model around its
// attention op (attn(phase, scale), scale = layers × the MTP factor):
// embedding, norm, attention, norm, MoE block — context: shared then routed
// experts in sequence (no CUDA graph); generation: the two overlapped on two
// streams (max of the streams) — logits, then the TP all-reduce pair per layer
// when tpAllReduce (DeepSeekModel on vLLM), then the pipeline p2p.
func deepseekLayers(m *Model, c *Config, moe deepseekMoE, attn func(phase string, scale float64) (op, error), tpAllReduce bool) (opLists, error) {
	tp, pp := c.TP, c.PP
	h, L := m.Hidden, float64(m.Layers)
	mtp := mtpScale(c.Nextn, m.Layers)
	if _, err := c.MoEQuant.Mapping(); err != nil {
		return opLists{}, err
	}
	var ls opLists

	ctxAttn, err := attn("context", L)
	if err != nil {
		return opLists{}, err
	}
	ls.ctx = append(ls.ctx, embeddingOp("context_embedding", 1, m.Vocab, h),
		elementwiseOp("context_add_norm_1", L, 2*h, 2*h), ctxAttn, elementwiseOp("context_add_norm_2", L, 2*h, 2*h))
	sh, err := moe.shared("context", L)
	if err != nil {
		return opLists{}, err
	}
	rt, err := moe.routed("context", L, true)
	if err != nil {
		return opLists{}, err
	}
	ls.ctx = append(append(ls.ctx, sh...), rt...)
	logits, err := gemmOp("context_logits_gemm", 1, m.Vocab/tp, h, GemmBF16, false)
	if err != nil {
		return opLists{}, err
	}
	logits.logits = true
	ls.ctx = append(ls.ctx, logits)
	if tpAllReduce {
		ls.ctx = append(ls.ctx, op{name: "context_tp_allreduce", kind: opAllReduce, scale: 2 * L, hidden: h, tp: tp})
	}

	genAttn, err := attn("generation", L*mtp)
	if err != nil {
		return opLists{}, err
	}
	ls.gen = append(ls.gen, embeddingOp("generation_embedding", mtp, m.Vocab, h),
		elementwiseOp("generation_add_norm_1", L*mtp, 2*h, 2*h), genAttn, elementwiseOp("generation_add_norm_2", L*mtp, 2*h, 2*h))
	gsh, err := moe.shared("generation", L*mtp)
	if err != nil {
		return opLists{}, err
	}
	grt, err := moe.routed("generation", L*mtp, false)
	if err != nil {
		return opLists{}, err
	}
	ov := op{name: "generation_moe_overlap", kind: opOverlap, scale: 1, sub: append(grt, gsh...), split: len(grt)}
	for i := range ov.sub {
		ov.weightsB += ov.sub[i].weightsB
	}
	glogits, err := gemmOp("generation_logits_gemm", mtp, m.Vocab/tp, h, GemmBF16, false)
	if err != nil {
		return opLists{}, err
	}
	ls.gen = append(ls.gen, ov, glogits)
	if tpAllReduce {
		ls.gen = append(ls.gen, op{name: "generation_tp_allreduce", kind: opAllReduce, scale: 2 * L * mtp, hidden: h, tp: tp})
	}
	ls.ctx = append(ls.ctx, op{name: "context_p2p", kind: opP2P, scale: float64(pp - 1), hidden: h, tp: pp})
	ls.gen = append(ls.gen, op{name: "generation_p2p", kind: opP2P, scale: float64(pp-1) * mtp, hidden: h, tp: pp})
	return ls, nil
}
