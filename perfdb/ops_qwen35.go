package perfdb

// ops_qwen35.go builds the op lists of aiconfigurator's QWEN35 family
// (models/qwen35.py Qwen35Model: Qwen3.5 dense and MoE), a hybrid of Gated
// DeltaNet linear-attention layers and GQA full-attention layers in the
// config's layer_types pattern (3:1 in the released checkpoints). Each
// layer kind is priced once, scaled by its layer count: GDN layers run the
// fused in-projections, the causal conv1d and the chunked (prefill) or
// recurrent (decode) delta rule, then the out-projection; full layers run a
// gated-query GQA block with qk-norm. Every layer has the same FFN: a dense
// SwiGLU, or routed experts plus a gated shared expert. Backend details
// follow the reference (default MoE backend, attention DP off unless set):
// SGLang skips the pre-dispatch at dp 1 and fuses the shared-expert gate
// into the merge; vLLM/SGLang overlap routed and shared experts in decode.
// GDN state is per request (see Model.gdnStateBytes), not per token.

import "fmt"

// qwen35Distribution is Qwen35Model's MoE load curve (power law 1.2).
const qwen35Distribution = "power_law_1.2"

// validateQwen35 mirrors Qwen35Model's constructor checks.
func validateQwen35(m *Model, c *Config) error {
	if m.LinearKHeads%c.TP != 0 || m.LinearVHeads%c.TP != 0 {
		return fmt.Errorf("--tp %d must divide the Qwen3.5 GDN head counts (%d key, %d value heads) of %s",
			c.TP, m.LinearKHeads, m.LinearVHeads, m.ID)
	}
	if m.NumExperts > 0 {
		return validateDeepSeek(m, c) // tp·dp = moe-tp·moe-ep, ep ≤ experts
	}
	return nil
}

// layerCounts counts the linear (GDN) and full-attention layers.
func (m *Model) layerCounts() (linear, full int) {
	for _, t := range m.LayerTypes {
		switch t {
		case "linear_attention":
			linear++
		case "full_attention":
			full++
		}
	}
	return linear, full
}

// buildQwen35 is Qwen35Model.__init__ (cp = 1, default MoE backend).
func buildQwen35(m *Model, c *Config) (opLists, error) {
	if err := validateQwen35(m, c); err != nil {
		return opLists{}, err
	}
	tp, pp, dp := c.TP, c.PP, c.DP
	h := m.Hidden
	gq := c.GemmQuant
	sglang := c.Backend == "sglang"
	arFolded := sglang && m.NumExperts > 0 && dp > 1
	fusedGate := sglang
	nLin, nFull := m.layerCounts()
	nk, hk, nv, hv, dConv := m.LinearKHeads, m.LinearKHeadDim, m.LinearVHeads, m.LinearVHeadDim, m.LinearConvKernel
	nq := m.Heads / tp
	nkv := kvHeadsPerGPU(m, tp)
	hd := m.HeadDim
	mtp := mtpScale(c.Nextn, m.Layers)
	var err error
	g := func(name string, scale float64, n, k int, q GemmQuant, lowPrec bool) op {
		if err != nil {
			return op{}
		}
		var o op
		o, err = gemmOp(name, scale, n, k, q, lowPrec)
		return o
	}
	ar := func(name string, scale float64) op {
		return op{name: name, kind: opAllReduce, scale: scale, hidden: h, tp: tp}
	}
	gdn := func(name string, scale float64, kernel, phase string) op {
		return op{name: name, kind: opGDN, scale: scale, gdn: GDNShape{Kernel: kernel, Phase: phase, DModel: h, DConv: dConv,
			NK: nk / tp, HK: hk, NV: nv / tp, HV: hv}}
	}
	moeArgs := func(isContext bool) MoEArgs {
		return MoEArgs{Quant: c.MoEQuant, Distribution: qwen35Distribution, TopK: m.TopK, NumExperts: m.NumExperts,
			Hidden: h, Inter: m.MoEInter, MoETP: c.MoETP, MoEEP: c.MoEEP, AttentionDP: dp, IsGated: true, IsContext: isContext}
	}
	var moeMem float64
	if m.NumExperts > 0 {
		mp, e := c.MoEQuant.Mapping()
		if e != nil {
			return opLists{}, e
		}
		moeMem = mp.Memory
	}
	moeOp := func(name string, scale float64, isContext bool) op {
		raw := float64(h) * float64(m.MoEInter) * float64(m.NumExperts) * moeMem * 3
		w := float64(int64(float64(int64(raw/float64(c.MoEEP)))/float64(c.MoETP))) * scale
		return op{name: name, kind: opMoE, scale: scale, moe: moeArgs(isContext), weightsB: w}
	}
	disp := func(name string, scale float64, pre, isContext bool) op {
		return op{name: name, kind: opMoEDispatch, scale: scale, hidden: h, moe: moeArgs(isContext), pre: pre,
			backend: c.Backend, smVer: c.sys.SMVersion, nvl72: c.sys.NumGPUsPerNode >= 72, attnAR: true}
	}
	sh := m.SharedExpertInter
	shared := func(prefix string, scale float64) []op {
		var out []op
		if !fusedGate {
			gg := g(prefix+"_shared_expert_gate_gemm", scale, 1, h, GemmBF16, false)
			gg.belowGridSOL = true
			out = append(out, gg)
		}
		out = append(out, g(prefix+"_shared_gate_up_gemm", scale, 2*sh/tp, h, gq, false),
			elementwiseOp(prefix+"_shared_act_gate", scale, 2*sh/tp, sh/tp),
			g(prefix+"_shared_down_gemm", scale, h, sh/tp, gq, true))
		if !fusedGate {
			out = append(out, elementwiseOp(prefix+"_shared_expert_gate_mul", scale, h, h))
		}
		return out
	}
	merge := func(prefix string, scale float64) op {
		if fusedGate {
			return elementwiseOp(prefix+"_shared_merge", scale, 3*h, h)
		}
		return elementwiseOp(prefix+"_shared_merge", scale, 2*h, h)
	}
	withPre := !(sglang && dp == 1)
	dense := func(prefix string, scale float64) []op {
		return []op{g(prefix+"_gate_ffn1_gemm", scale, 2*m.Inter/tp, h, gq, false),
			elementwiseOp(prefix+"_act_gate", scale, 2*m.Inter/tp, m.Inter/tp),
			g(prefix+"_ffn2_gemm", scale, h, m.Inter/tp, gq, true), ar(prefix+"_ffn_ar", scale)}
	}
	ffnCtx := func(prefix string, scale float64) []op {
		out := []op{elementwiseOp(prefix+"_ffn_norm", scale, 2*h, 2*h)}
		if m.NumExperts == 0 {
			return append(out, dense(prefix, scale)...)
		}
		if m.NumExperts >= 128 {
			out = append(out, g(prefix+"_router_gemm", scale, m.NumExperts, h, GemmBF16, false))
		}
		if withPre {
			out = append(out, disp(prefix+"_moe_pre_dispatch", scale, true, true))
		}
		out = append(out, moeOp(prefix+"_moe", scale, true), disp(prefix+"_moe_post_dispatch", scale, false, true))
		if sh > 0 {
			out = append(append(out, shared(prefix, scale)...), merge(prefix, scale))
		}
		return out
	}
	ffnGen := func(prefix string, scale float64) []op {
		out := []op{elementwiseOp(prefix+"_ffn_norm", scale, 2*h, 2*h)}
		if m.NumExperts == 0 {
			return append(out, dense(prefix, scale)...)
		}
		var routed []op
		if m.NumExperts >= 128 {
			routed = append(routed, g(prefix+"_router_gemm", scale, m.NumExperts, h, GemmBF16, false))
		}
		if withPre {
			pre := disp(prefix+"_moe_pre_dispatch", scale, true, false)
			if sglang {
				out = append(out, pre)
			} else {
				routed = append(routed, pre)
			}
		}
		routed = append(routed, moeOp(prefix+"_moe", scale, false))
		var shOps []op
		if sh > 0 {
			shOps = shared(prefix, scale)
		}
		if len(shOps) > 0 && (c.Backend == "vllm" || sglang) {
			ov := op{name: prefix + "_moe_overlap", kind: opOverlap, scale: 1, sub: append(routed, shOps...), split: len(routed)}
			for i := range ov.sub {
				ov.weightsB += ov.sub[i].weightsB
			}
			out = append(out, ov)
		} else {
			out = append(append(out, routed...), shOps...)
		}
		if sh > 0 {
			out = append(out, merge(prefix, scale))
		}
		return append(out, disp(prefix+"_moe_post_dispatch", scale, false, false))
	}
	inProj := (2*nk*hk + 2*nv*hv) / tp
	qkvOut := 2*nq*hd + nkv*hd*2
	layers := func(phase string, sf float64) []op {
		ctx := phase == "context"
		out := []op{embeddingOp(phase+"_embedding", sf, m.Vocab/tp, h), ar(phase+"_embedding_ar", sf)}
		ffn := ffnGen
		conv, scan := "causal_conv1d_update", "fused_sigmoid_gating_delta_rule_update"
		scanName := phase + "_gdn_recurrence"
		if ctx {
			ffn, conv, scan, scanName = ffnCtx, "causal_conv1d_fn", "chunk_gated_delta_rule", "context_gdn_scan"
		}
		if nLin > 0 {
			cnt := float64(nLin) * sf
			ba := g(phase+"_gdn_in_proj_ba_gemm", cnt, 2*nv/tp, h, gq, false)
			ba.belowGridSOL = true
			out = append(out, elementwiseOp(phase+"_gdn_norm", cnt, 2*h, 2*h), g(phase+"_gdn_in_proj_gemm", cnt, inProj, h, gq, false), ba,
				gdn(phase+"_gdn_conv1d", cnt, conv, phase), gdn(scanName, cnt, scan, phase),
				g(phase+"_gdn_out_proj_gemm", cnt, h, nv*hv/tp, gq, true))
			if !arFolded {
				out = append(out, ar(phase+"_gdn_ar", cnt))
			}
			out = append(out, ffn(phase+"_gdn", cnt)...)
		}
		if nFull > 0 {
			cnt := float64(nFull) * sf
			attn := op{name: phase + "_attention", kind: opGenAttn, scale: cnt, heads: nq, kvHeads: nkv, headDim: hd, kvQ: c.KVQuant}
			if ctx {
				attn = op{name: "context_attention", kind: opContextAttn, scale: cnt, heads: nq, kvHeads: nkv, headDim: hd,
					kvQ: c.KVQuant, fmhaQ: c.FMHAQuant, qkNorm: true}
			}
			out = append(out, elementwiseOp(phase+"_full_attn_norm", cnt, 2*h, 2*h), g(phase+"_qkv_gemm", cnt, qkvOut, h, gq, false),
				attn, g(phase+"_proj_gemm", cnt, h, nq*hd, gq, true))
			if !arFolded {
				out = append(out, ar(phase+"_full_ar", cnt))
			}
			out = append(out, ffn(phase+"_full", cnt)...)
		}
		logits := g(phase+"_logits_gemm", sf, m.Vocab/tp, h, GemmBF16, false)
		logits.logits = ctx
		return append(out, logits, op{name: phase + "_p2p", kind: opP2P, scale: float64(pp-1) * sf, hidden: h, tp: pp})
	}
	ls := opLists{ctx: layers("context", 1), gen: layers("generation", mtp)}
	return ls, err
}

// gdnStateBytes is the constant GDN state one request holds on one GPU
// (Qwen35Model._gdn_state_bytes_per_request): the fp32 recurrent state and
// the bf16 conv window of every GDN layer, TP-sharded. 0 for other models.
func (m *Model) gdnStateBytes(tp int) float64 {
	if m.Family != "QWEN35" {
		return 0
	}
	nLin, _ := m.layerCounts()
	tp = max(tp, 1)
	ssm := float64(m.LinearVHeads/tp) * float64(m.LinearKHeadDim) * float64(m.LinearVHeadDim) * 4
	conv := float64((2*m.LinearKHeads*m.LinearKHeadDim+m.LinearVHeads*m.LinearVHeadDim)/tp) * float64(m.LinearConvKernel-1) * 2
	return float64(nLin) * (ssm + conv)
}
