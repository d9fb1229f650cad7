package perfdb

// ops_llama.go builds the op lists of aiconfigurator's LLAMA family
// (models/llama.py LLAMAModel: Llama, Qwen2, Qwen3, MiMo) and the pieces the
// MOE family shares with it.

import "fmt"

// opLists is a model's context and generation op lists for one parallel config.
type opLists struct {
	ctx, gen []op
}

// mtpScale is helpers.py mtp_scale_factor: (nextn + L)/L with MTP, else 1.
func mtpScale(nextn, layers int) float64 {
	if nextn <= 0 {
		return 1
	}
	return float64(nextn+layers) / float64(layers)
}

// kvHeadsPerGPU is ceil(n_kv/tp) (models/base.py _num_kv_heads_per_gpu).
func kvHeadsPerGPU(m *Model, tp int) int { return (m.KVHeads + tp - 1) / tp }

// gemmOp builds a GEMM op whose weights (n·k·bytes·scale) count toward memory.
func gemmOp(name string, scale float64, n, k int, q GemmQuant, lowPrec bool) (op, error) {
	mp, err := q.Mapping()
	if err != nil {
		return op{}, fmt.Errorf("%s: %w", name, err)
	}
	return op{name: name, kind: opGemm, scale: scale, n: n, k: k, gemmQ: q, lowPrec: lowPrec,
		weightsB: float64(n) * float64(k) * mp.Memory * scale}, nil
}

// embeddingOp is EmbeddingOp (bf16 rows: tokens·h·2 bytes; weights vocab·h·2).
func embeddingOp(name string, scale float64, vocab, h int) op {
	return op{name: name, kind: opEmbedding, scale: scale, bytesPerToken: float64(h) * 2,
		weightsB: float64(vocab) * float64(h) * 2 * scale}
}

// elementwiseOp is ElementwiseOp: tokens·(2·dimIn + 2·dimOut) bytes.
func elementwiseOp(name string, scale float64, dimIn, dimOut int) op {
	return op{name: name, kind: opElementwise, scale: scale, bytesPerToken: float64(dimIn*2 + dimOut*2)}
}

// buildLlama is LLAMAModel.__init__ (cp = 1): context ops then generation ops,
// all-reduces and the P2P hop appended last as in the reference.
func buildLlama(m *Model, c *Config) (opLists, error) {
	tp, pp := c.TP, c.PP
	h, L := m.Hidden, float64(m.Layers)
	kvg := kvHeadsPerGPU(m, tp)
	mtp := mtpScale(c.Nextn, m.Layers)
	qkvN := m.Heads*m.HeadDim/tp + m.HeadDim*kvg*2
	inter := m.Inter / tp
	var ls opLists
	var err error
	g := func(name string, scale float64, n, k int, q GemmQuant, lp bool) op {
		o, e := gemmOp(name, scale, n, k, q, lp)
		if err == nil && e != nil {
			err = e
		}
		return o
	}
	attnCtx := op{name: "context_attention", kind: opContextAttn, scale: L, heads: m.Heads / tp, kvHeads: kvg,
		headDim: m.HeadDim, kvQ: c.KVQuant, fmhaQ: c.FMHAQuant, qkNorm: m.UseQKNorm}
	attnGen := op{name: "generation_attention", kind: opGenAttn, scale: L * mtp, heads: m.Heads / tp, kvHeads: kvg,
		headDim: m.HeadDim, kvQ: c.KVQuant}

	ls.ctx = append(ls.ctx, embeddingOp("context_embedding", 1, m.Vocab/tp, h),
		elementwiseOp("context_add_norm_1", L, 2*h, 2*h))
	ls.ctx = append(ls.ctx, g("context_qkv_gemm", L, qkvN, h, c.GemmQuant, false))
	ls.ctx = append(ls.ctx, attnCtx)
	ls.ctx = append(ls.ctx, g("context_proj_gemm", L, h, m.Heads*m.HeadDim/tp, c.GemmQuant, true))
	ls.ctx = append(ls.ctx, elementwiseOp("context_add_norm_2", L, 2*h, 2*h))
	ls.ctx = append(ls.ctx, g("context_gate_ffn1_gemm", L, 2*inter, h, c.GemmQuant, false))
	ls.ctx = append(ls.ctx, elementwiseOp("context_act_gate", L, 2*inter, inter))
	ls.ctx = append(ls.ctx, g("context_ffn2_gemm", L, h, inter, c.GemmQuant, true))
	lg := g("context_logits_gemm", 1, m.Vocab/tp, h, GemmBF16, false)
	lg.logits = true
	ls.ctx = append(ls.ctx, lg)

	ls.gen = append(ls.gen, embeddingOp("generation_embedding", mtp, m.Vocab/tp, h),
		elementwiseOp("generation_add_norm_1", L*mtp, 2*h, 2*h))
	ls.gen = append(ls.gen, g("generation_qkv_gemm", L*mtp, qkvN, h, c.GemmQuant, false))
	ls.gen = append(ls.gen, attnGen)
	ls.gen = append(ls.gen, g("generation_proj_gemm", L*mtp, h, m.Heads*m.HeadDim/tp, c.GemmQuant, true))
	ls.gen = append(ls.gen, elementwiseOp("generation_add_norm_2", L*mtp, 2*h, 2*h))
	ls.gen = append(ls.gen, g("generation_gate_ffn1_gemm", L*mtp, 2*inter, h, c.GemmQuant, false))
	ls.gen = append(ls.gen, elementwiseOp("generation_act_gate", L*mtp, 2*inter, inter))
	ls.gen = append(ls.gen, g("generation_ffn2_gemm", L*mtp, h, inter, c.GemmQuant, true))
	ls.gen = append(ls.gen, g("generation_logits_gemm", mtp, m.Vocab/tp, h, GemmBF16, false))

	ar := func(name string, scale float64) op {
		return op{name: name, kind: opAllReduce, scale: scale, hidden: h, tp: tp}
	}
	ls.ctx = append(ls.ctx, ar("context_embedding_ar", 1), ar("context_ar_1", L), ar("context_ar_2", L))
	ls.gen = append(ls.gen, ar("generation_embedding_ar", mtp), ar("generation_ar_1", L*mtp), ar("generation_ar_2", L*mtp))
	ls.ctx = append(ls.ctx, op{name: "context_p2p", kind: opP2P, scale: float64(pp - 1), hidden: h, tp: pp})
	ls.gen = append(ls.gen, op{name: "generation_p2p", kind: opP2P, scale: float64(pp-1) * mtp, hidden: h, tp: pp})
	return ls, err
}
