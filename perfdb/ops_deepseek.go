package perfdb

// ops_deepseek.go builds the op lists of aiconfigurator's DEEPSEEK family
// (models/deepseek.py DeepSeekModel: DeepSeek-V3/R1, and Kimi-K2.5 under
// the KIMIK25 family) for the default, fused-MoE path (no large-EP comm
// backend, cp = 1):
//
//   - attention: the fused MLA module (mla_*_module_perf), with the granular
//     MLA ops as its fallback when the module table has no slice. On vLLM
//     the granular fallback is the absorbed form vLLM runs: standard
//     context/generation attention with head size v_head_dim; TRT-LLM and
//     SGLang fall back to the op-level MLA tables (context MLA; decode BMM
//     pre + generation MLA + BMM post);
//   - MoE on every layer (the reference prices all num_hidden_layers as MoE
//     layers, first_k_dense_replace is not modelled there), with one shared
//     expert: context runs shared and routed experts in sequence, decode
//     overlaps them (max of the two streams);
//   - vLLM pays two custom all-reduces per layer (after attention and MoE).
//
// The reference's hard-coded DeepSeek-V3 projection widths (fused q_a+kv_a
// 2112, q_lora 1536, kv_lora 512) are kept as it prices them.

import "fmt"

// mlaKernelHeads is the head count the op-level MLA kernel tables are keyed
// at before TP (the reference's DeepSeek-compatible 128-head convention,
// kept for Kimi-K2.5's 64 heads too); the BMMs and module use real heads.
const mlaKernelHeads = 128

// deepseekDistribution is DeepSeekModel's power-law MoE workload (alpha 1.01).
const deepseekDistribution = "power_law_1.01"

// isMLAFamily reports whether the model uses MLA attention (the DEEPSEEK
// family builder).
func isMLAFamily(m *Model) bool { return m.Family == "DEEPSEEK" || m.Family == "KIMIK25" }

// validateDeepSeek mirrors DeepSeekModel's constructor assertions.
func validateDeepSeek(m *Model, c *Config) error {
	if c.TP*c.DP != c.MoETP*c.MoEEP {
		return fmt.Errorf("tp (%d) × dp (%d) must equal moe-tp (%d) × moe-ep (%d) for the MoE model %s",
			c.TP, c.DP, c.MoETP, c.MoEEP, m.ID)
	}
	if m.NumExperts < c.MoEEP {
		return fmt.Errorf("moe-ep %d is larger than the %d experts of %s", c.MoEEP, m.NumExperts, m.ID)
	}
	return nil
}

// vllmHeadSize is the head size vLLM's absorbed MLA attention runs at:
// v_head_dim (128), not hidden/heads.
func vllmHeadSize(m *Model) int {
	if m.VHeadDim > 0 {
		return m.VHeadDim
	}
	return m.HeadDim
}

// buildDeepSeek is DeepSeekModel.__init__ on the fused (non-large-EP) path.
func buildDeepSeek(m *Model, c *Config) (opLists, error) {
	if err := validateDeepSeek(m, c); err != nil {
		return opLists{}, err
	}
	tp, h := c.TP, m.Hidden
	gq := c.GemmQuant // native checkpoints: every attention projection shares the global mode
	hs := vllmHeadSize(m)
	// The absorbed kv_b BMMs run in fp8 for any quantized checkpoint, else bf16.
	bmmQ := GemmBF16
	if gq != GemmBF16 {
		bmmQ = GemmFP8
	}
	heads := m.Heads / tp
	kvHeads := m.KVHeads / tp

	gemm := func(name string, scale float64, n, k int, q GemmQuant) (op, error) {
		return gemmOp(name, scale, n, k, q, false)
	}
	granular := func(phase string, scale float64) ([]op, error) {
		var out []op
		for _, g := range []struct {
			name string
			n, k int
		}{{phase + "_downscale_gemm", 2112, h}, {phase + "_q_b_proj_gemm", m.Heads * 192 / tp, 1536}} {
			o, err := gemm(g.name, scale, g.n, g.k, gq)
			if err != nil {
				return nil, err
			}
			out = append(out, o)
		}
		if phase == "context" {
			o, err := gemm("context_kv_b_proj_gemm", scale, m.Heads*256/tp, 512, gq)
			if err != nil {
				return nil, err
			}
			out = append(out, o)
		}
		switch {
		case c.Backend == "vllm" && phase == "context":
			out = append(out, op{name: "context_attention", kind: opContextAttn, scale: scale, heads: heads,
				kvHeads: kvHeads, headDim: hs, kvQ: c.KVQuant, fmhaQ: c.FMHAQuant})
		case c.Backend == "vllm":
			out = append(out, op{name: "generation_attention", kind: opGenAttn, scale: scale, heads: heads,
				kvHeads: kvHeads, headDim: hs, kvQ: c.KVQuant})
		case phase == "context":
			out = append(out, op{name: "context_attention", kind: opMLAContext, scale: scale, heads: mlaKernelHeads / tp,
				kvQ: c.KVQuant, fmhaQ: c.FMHAQuant})
		default:
			out = append(out,
				op{name: "generation_bmm_pre", kind: opMLABmm, scale: scale, heads: heads, gemmQ: bmmQ, pre: true},
				op{name: "generation_attention", kind: opMLAGeneration, scale: scale, heads: mlaKernelHeads / tp, kvQ: c.KVQuant},
				op{name: "generation_bmm_post", kind: opMLABmm, scale: scale, heads: heads, gemmQ: bmmQ})
		}
		o, err := gemm(phase+"_proj_gemm", scale, h, m.Heads*128/tp, gq)
		if err != nil {
			return nil, err
		}
		return append(out, o), nil
	}
	mlaBlock := func(phase string, scale float64) (op, error) {
		fb, err := granular(phase, scale)
		if err != nil {
			return op{}, err
		}
		kind := opMLACtxModule
		if phase == "generation" {
			kind = opMLAGenModule
		}
		primary := op{name: phase + "_mla_module", kind: kind, scale: scale, heads: heads, native: m.Heads,
			kvQ: c.KVQuant, fmhaQ: c.FMHAQuant, gemmQ: gq}
		blk := op{name: phase + "_mla_block", kind: opFallback, scale: 1, sub: append([]op{primary}, fb...)}
		// FallbackOp weights: the primary's (0 for a module) else the chain's.
		for i := range fb {
			blk.weightsB += fb[i].weightsB
		}
		return blk, nil
	}
	moe := deepseekMoE{m: m, c: c, sharedInter: m.MoEInter / tp}
	return deepseekLayers(m, c, moe, mlaBlock, c.Backend == "vllm")
}
