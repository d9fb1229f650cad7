package perfdb

import (
	"math"
	"strings"
	"testing"
)

// missMLAKernels answers every kernel like fakeKernels but has no MLA
// module data (a structured miss), so the module op's fallback runs.
type missMLAKernels struct{ fakeKernels }

func (missMLAKernels) MLAContextModule(b, s, prefix, heads, native int, kv KVQuant, fmha FMHAQuant, gemm GemmQuant, siliconOnly bool) (Perf, error) {
	return Perf{}, missf("context MLA module data missing")
}
func (missMLAKernels) MLAGenerationModule(b, s, heads, native int, kv KVQuant, gemm GemmQuant, siliconOnly bool) (Perf, error) {
	return Perf{}, missf("generation MLA module data missing")
}

func embeddedModel(t *testing.T, id string) *Model {
	t.Helper()
	m, err := EmbeddedModel(id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestKVBytesPerToken: MLA caches one latent (kv_lora_rank 512) plus the RoPE
// key (64) per layer, shared by all heads and not sharded by TP; GQA caches
// K and V of ⌈n_kv/tp⌉ heads. Memory's KV term is batch·(isl+osl)·that.
func TestKVBytesPerToken(t *testing.T) {
	ds := embeddedModel(t, "deepseek-ai/DeepSeek-V3")
	if ds.Family != "DEEPSEEK" || ds.KVLoraRank != 512 || ds.QKRopeHeadDim != 64 || ds.VHeadDim != 128 {
		t.Fatalf("DeepSeek-V3 parsed as family %s kv_lora %d rope %d v_head %d", ds.Family, ds.KVLoraRank, ds.QKRopeHeadDim, ds.VHeadDim)
	}
	llama := embeddedModel(t, "meta-llama/Meta-Llama-3.1-8B")
	v32 := embeddedModel(t, "deepseek-ai/DeepSeek-V3.2")
	glm := embeddedModel(t, "zai-org/GLM-5")
	q35 := embeddedModel(t, "Qwen/Qwen3.5-397B-A17B")
	kimi := embeddedModel(t, "moonshotai/Kimi-K2.5")
	cases := []struct {
		m      *Model
		tp     int
		kv     KVQuant
		perTok float64
	}{
		{ds, 8, KVFP8, 61 * 576},
		{ds, 1, KVFP8, 61 * 576}, // not TP-sharded
		{ds, 8, KVBF16, 61 * 576 * 2},
		{kimi, 8, KVBF16, 61 * 576 * 2},
		{llama, 2, KVBF16, 4 * 128 * 32 * 2 * 2},
		// DSA: latent in the KV dtype + bf16 RoPE key + fp8 indexer key (128 + 4 B scale).
		{v32, 8, KVFP8, 61 * (512*1 + 64*2 + 132)},
		{v32, 1, KVBF16, 61 * (512*2 + 64*2 + 132)},
		{glm, 8, KVBF16, float64(glm.Layers) * (512*2 + 64*2 + 132)},
		// Qwen3.5: only the 15 full-attention layers cache K/V per token.
		{q35, 8, KVBF16, 15 * 2 * 1 * 256 * 2},
		{q35, 1, KVBF16, 15 * 2 * 2 * 256 * 2},
		{llama, 16, KVBF16, 1 * 128 * 32 * 2 * 2}, // ⌈8/16⌉ = 1 head per GPU
	}
	for _, c := range cases {
		e, err := newEstimator(fakeKernels{}, testSystem(), c.m, Config{Backend: "vllm", TP: c.tp, MoEEP: c.tp, KVQuant: c.kv})
		if err != nil {
			t.Fatalf("%s tp %d: %v", c.m.ID, c.tp, err)
		}
		if got := e.KVBytesPerToken(); got != c.perTok {
			t.Errorf("%s tp %d kv %s: KVBytesPerToken = %v, want %v", c.m.ID, c.tp, c.kv, got, c.perTok)
		}
		u, err := e.Memory(3, 1000, 24, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := 3 * (1024*c.perTok + e.KVStateBytesPerRequest()) / (1 << 30); math.Abs(u.KVCacheGiB-want) > 1e-12*want {
			t.Errorf("%s tp %d: KV memory %v GiB, want %v", c.m.ID, c.tp, u.KVCacheGiB, want)
		}
	}
}

// TestGDNStatePerRequest: Qwen3.5's GDN layers hold a constant state per
// request — 45 GDN layers × (fp32 state (64/tp)·128·128 + bf16 conv window
// (2·16·128 + 64·128)/tp·3) — independent of the sequence length; other
// models hold none.
func TestGDNStatePerRequest(t *testing.T) {
	q35 := embeddedModel(t, "Qwen/Qwen3.5-397B-A17B")
	lin, full := q35.layerCounts()
	if lin != 45 || full != 15 {
		t.Fatalf("layer pattern %d linear / %d full, want 45 / 15", lin, full)
	}
	for _, tp := range []int{1, 8} {
		e, err := newEstimator(fakeKernels{}, testSystem(), q35, Config{Backend: "vllm", TP: tp, MoEEP: tp})
		if err != nil {
			t.Fatal(err)
		}
		want := 45 * (float64(64/tp*128*128*4) + float64((2*16*128+64*128)/tp*3*2))
		if got := e.KVStateBytesPerRequest(); got != want {
			t.Errorf("tp %d: GDN state %v B, want %v", tp, got, want)
		}
		short, _ := e.Memory(1, 10, 1, 0, 0)
		long, _ := e.Memory(1, 10000, 1, 0, 0)
		perTok := e.KVBytesPerToken()
		if d := (long.KVCacheGiB - short.KVCacheGiB) * (1 << 30); math.Abs(d-9990*perTok) > 1e-6*d {
			t.Errorf("tp %d: KV grows %v B over 9990 tokens, want %v (state is per request)", tp, d, 9990*perTok)
		}
	}
	ds := embeddedModel(t, "deepseek-ai/DeepSeek-V3")
	e, err := newEstimator(fakeKernels{}, testSystem(), ds, Config{Backend: "vllm", TP: 8, MoEEP: 8})
	if err != nil {
		t.Fatal(err)
	}
	if e.KVStateBytesPerRequest() != 0 {
		t.Errorf("DeepSeek-V3 has no per-request state")
	}
}

// TestDeepSeekComposition checks the op-list structure against the reference:
// the MLA module is a fallback op named *_mla_block (so the mixed step prices
// it in the batch-1 pass, not as context/generation attention), decode MoE
// overlaps shared and routed experts, and a module miss on vLLM falls back
// to absorbed attention at v_head_dim while TRT-LLM/SGLang use the op-level
// MLA kernels and BMMs.
func TestDeepSeekComposition(t *testing.T) {
	ds := embeddedModel(t, "deepseek-ai/DeepSeek-V3")
	cfg := Config{Backend: "vllm", TP: 8, MoEEP: 8}
	e, err := newEstimator(fakeKernels{}, testSystem(), ds, cfg)
	if err != nil {
		t.Fatal(err)
	}
	names := func(ops []op) string {
		var s []string
		for i := range ops {
			s = append(s, ops[i].name)
		}
		return strings.Join(s, " ")
	}
	wantCtx := "context_embedding context_add_norm_1 context_mla_block context_add_norm_2 context_shared_gate_up_gemm " +
		"context_shared_act_gate context_shared_ffn2_gemm context_router_gemm context_moe_pre_dispatch context_moe " +
		"context_moe_post_dispatch context_logits_gemm context_tp_allreduce context_p2p"
	if got := names(e.ops.ctx); got != wantCtx {
		t.Errorf("context ops\n%s\nwant\n%s", got, wantCtx)
	}
	wantGen := "generation_embedding generation_add_norm_1 generation_mla_block generation_add_norm_2 " +
		"generation_moe_overlap generation_logits_gemm generation_tp_allreduce generation_p2p"
	if got := names(e.ops.gen); got != wantGen {
		t.Errorf("generation ops\n%s\nwant\n%s", got, wantGen)
	}
	// Mixed step: no op is named context_attention/generation_attention, so
	// passes 2 and 3 are empty and the step equals pass 1 alone.
	mixed, err := e.MixedMs(1024, 1, 1024, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	p1, err := runContext(e.ks, e.ops.ctx, 1, 1025, 0, skipContextAttention)
	if err != nil {
		t.Fatal(err)
	}
	if mixed != p1.LatencyMs {
		t.Errorf("mixed %v != pass 1 %v", mixed, p1.LatencyMs)
	}
	// Overlap: decode MoE is max(routed, shared).
	ov := &e.ops.gen[4]
	r, err := ov.query(e.ks, 4, 1025, 0, 4)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := ov.overlap(e.ks, 4, 1025, 0, 4)
	if r.LatencyMs != a.LatencyMs || ov.split != 4 || len(ov.sub) != 7 {
		t.Errorf("overlap %v / %v, split %d of %d", r.LatencyMs, a.LatencyMs, ov.split, len(ov.sub))
	}
	// Weights: the fallback op carries its granular GEMMs' weights.
	if e.ops.ctx[2].weightsB <= 0 {
		t.Errorf("context_mla_block weights %v, want the granular GEMMs'", e.ops.ctx[2].weightsB)
	}

	// Module miss: vLLM falls back to absorbed attention at v_head_dim;
	// TRT-LLM/SGLang to the op-level MLA kernels (128/tp heads) and BMMs.
	for _, be := range []string{"vllm", "sglang", "trtllm"} {
		c := cfg
		c.Backend = be
		eb, err := newEstimator(missMLAKernels{}, testSystem(), ds, c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eb.ContextMs(1, 1024, 0); err != nil {
			t.Errorf("%s context fallback: %v", be, err)
		}
		if _, err := eb.GenerationMs(2, 1024, 3, 1); err != nil {
			t.Errorf("%s generation fallback: %v", be, err)
		}
		fb := eb.ops.gen[2].sub[1:]
		var kinds []string
		for i := range fb {
			kinds = append(kinds, fb[i].name)
		}
		want := "generation_downscale_gemm generation_q_b_proj_gemm generation_attention generation_proj_gemm"
		if be != "vllm" {
			want = "generation_downscale_gemm generation_q_b_proj_gemm generation_bmm_pre generation_attention generation_bmm_post generation_proj_gemm"
		}
		if got := strings.Join(kinds, " "); got != want {
			t.Errorf("%s decode fallback ops %s, want %s", be, got, want)
		}
	}
}

// TestAggMTPAcceptance: with nextn drafts and acceptance a tokens per
// decode iteration, a batch-1 agg point decodes in (osl−1)/a iterations of
// the same (nextn+1)-row verify step, so TPOT is exactly TPOT(a=1)/a; an
// acceptance outside [1, nextn+1] is a one-line error.
func TestAggMTPAcceptance(t *testing.T) {
	ds := embeddedModel(t, "deepseek-ai/DeepSeek-V3")
	e, err := newEstimator(fakeKernels{}, testSystem(), ds, Config{Backend: "vllm", TP: 8, MoEEP: 8, Nextn: 2})
	if err != nil {
		t.Fatal(err)
	}
	in := AggInput{Batch: 1, CtxTokens: 1024, ISL: 1024, OSL: 129}
	base, err := e.Agg(in)
	if err != nil {
		t.Fatal(err)
	}
	in0 := in
	in0.DecodeTokensPerIter = 1
	if one, err := e.Agg(in0); err != nil || one != base {
		t.Fatalf("acceptance 1 differs from the default: %+v vs %+v (%v)", one, base, err)
	}
	for _, a := range []float64{1.5, 2, 3} {
		in.DecodeTokensPerIter = a
		r, err := e.Agg(in)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(r.TPOTMs-base.TPOTMs/a) > 1e-12*base.TPOTMs || r.NumGenOnly != 128/a {
			t.Errorf("a=%v: TPOT %v want %v, gen-only steps %v want %v", a, r.TPOTMs, base.TPOTMs/a, r.NumGenOnly, 128/a)
		}
		if r.GenOnlyMs != base.GenOnlyMs {
			t.Errorf("a=%v: the verify step (nextn+1 rows) must not depend on acceptance", a)
		}
	}
	in.DecodeTokensPerIter = 3.5
	if _, err := e.Agg(in); err == nil || !strings.Contains(err.Error(), "[1, nextn+1 = 3]") {
		t.Errorf("acceptance above nextn+1: %v", err)
	}
}

// TestResolveQuantMLAFmha: off vLLM, an fp8 DeepSeek checkpoint keeps its
// fp8 context fmha only when the context MLA tables have an fp8 slice with
// the same KV dtype (or no slice at all); with only bf16 slices it falls
// back to bf16. DSA always ends with bf16.
func TestResolveQuantMLAFmha(t *testing.T) {
	ds := embeddedModel(t, "deepseek-ai/DeepSeek-V3")
	v32 := embeddedModel(t, "deepseek-ai/DeepSeek-V3.2")
	sys := testSystem()
	cfg := Config{Backend: "sglang"}
	cases := []struct {
		name string
		m    *Model
		d    *Data
		want FMHAQuant
	}{
		{"no MLA data", ds, &Data{System: sys}, FMHAFP8},
		{"bf16 slice only", ds, &Data{System: sys, MLAContext: []MLARow{{FMHA: "bfloat16", KVDtype: "fp8"}}}, FMHABF16},
		{"fp8 slice", ds, &Data{System: sys, MLAContextModule: []MLAModuleRow{{FMHA: "bfloat16", KVDtype: "fp8"}, {FMHA: "fp8", KVDtype: "fp8"}}}, FMHAFP8},
		{"fp8 slice under another kv", ds, &Data{System: sys, MLAContext: []MLARow{{FMHA: "bfloat16", KVDtype: "fp8"}, {FMHA: "fp8", KVDtype: "bfloat16"}}}, FMHABF16},
		{"DSA", v32, &Data{System: sys}, FMHABF16},
	}
	for _, c := range cases {
		if got := ResolveQuant(c.d, c.m, cfg, true).FMHAQuant; got != c.want {
			t.Errorf("%s: fmha %s, want %s", c.name, got, c.want)
		}
	}
}
