package perfdb

// ops_deepseek_wideep.go builds the op lists of aiconfigurator's SGLang
// large-EP (wide-EP) DeepSeek graph (models/deepseek.py, the "sglang
// large-EP (deepep)" branch, with blocks/moe.py _large_ep_block_ops and its
// DeepSeek/SGLang variant that drops the router GEMM):
//
//   - context, per layer: the fused q_a+kv_a projection (qkv_a_proj, 2112
//     wide) computed outside the attention module, embedding (once), the
//     first add-norm, the downscale GEMM, the DeepEP MLA module at 128/tp
//     heads; then the shared expert at full width (no TP split), the DeepEP
//     high-throughput dispatch, the expert compute and the combine;
//   - generation, per layer × the MTP factor: the same attention stack with
//     the decode MLA module, then the shared expert, the low-latency
//     dispatch, the expert compute and the combine, all in sequence;
//   - as the reference's graph: no second add-norm, no logits GEMM, no
//     pipeline hop.
//
// Attention TP > 1 (the all-gather / reduce-scatter around the attention)
// and pipeline parallelism are refused; so are the families and backends
// the data does not cover (wideep.go wideEPPlan).

// deepEPAttentionBackend is the attention backend aiconfigurator's
// ModelConfig gives SGLang's DeepEP MLA (attention_backend "flashinfer").
const deepEPAttentionBackend = "flashinfer"

// buildDeepSeekWideEP is the SGLang large-EP DeepSeek graph; backends holds
// the all-to-all backend per phase (WideEPBackends).
func buildDeepSeekWideEP(m *Model, c *Config, backends map[string]string) (opLists, error) {
	if err := validateDeepSeek(m, c); err != nil {
		return opLists{}, err
	}
	if _, err := c.MoEQuant.Mapping(); err != nil {
		return opLists{}, err
	}
	h, L := m.Hidden, float64(m.Layers)
	mtp := mtpScale(c.Nextn, m.Layers)
	gq := c.GemmQuant
	heads := mlaKernelHeads / c.TP
	nodes := (c.MoEEP*c.MoETP + c.sys.NumGPUsPerNode - 1) / max(c.sys.NumGPUsPerNode, 1)
	moe := deepseekMoE{m: m, c: c}
	var ls opLists
	for _, phase := range []string{"context", "generation"} {
		scale := L
		if phase == "generation" {
			scale = L * mtp
		}
		qkvA, err := gemmOp(phase+"_qkv_a_proj_gemm", scale, 2112, h, gq, false)
		if err != nil {
			return opLists{}, err
		}
		down, err := gemmOp(phase+"_downscale_gemm", scale, 2112, h, gq, false)
		if err != nil {
			return opLists{}, err
		}
		attn := op{name: phase + "_attention", kind: opWideEPCtxMLA, scale: scale, heads: heads, kernel: deepEPAttentionBackend,
			kvQ: c.KVQuant, fmhaQ: c.FMHAQuant}
		embScale := 1.0
		if phase == "generation" {
			attn.kind = opWideEPGenMLA
			embScale = mtp
		}
		ops := []op{qkvA, embeddingOp(phase+"_embedding", embScale, m.Vocab, h),
			elementwiseOp(phase+"_add_norm_1", scale, 2*h, 2*h), down, attn}

		// Shared expert: one, at full width (WideEP ADP mode, shared TP 1).
		inter := m.MoEInter
		gu, err := gemmOp(phase+"_gate_ffn1_gemm", scale, 2*inter, h, gq, false)
		if err != nil {
			return opLists{}, err
		}
		f2, err := gemmOp(phase+"_ffn2_gemm", scale, h, inter, gq, false)
		if err != nil {
			return opLists{}, err
		}
		ops = append(ops, gu, elementwiseOp(phase+"_act_gate", scale, 2*inter, inter), f2)

		// Routed experts: dispatch, expert compute, combine. The context
		// all-to-all sees tokens per attention-TP rank (tp = 1 here).
		args := moe.args(phase == "context")
		args.MoETP = 1
		w, err := moe.weights(scale)
		if err != nil {
			return opLists{}, err
		}
		a2a := func(commPhase string) op {
			o := op{name: phase + "_moe_" + commPhase, kind: opMoEA2A, scale: scale, moe: args, a2a: backends[phase],
				phase: commPhase, nodes: nodes, tp: 1}
			if o.a2a == "deepep_ht" {
				o.sms = deepEPDefaultSMs
				o.tp = c.TP
			}
			return o
		}
		ops = append(ops, a2a("dispatch"),
			op{name: phase + "_moe", kind: opWideEPExpert, scale: scale, moe: args, phase: phase, weightsB: w},
			a2a("combine"))
		if phase == "context" {
			ls.ctx = ops
		} else {
			ls.gen = ops
		}
	}
	return ls, nil
}
