package perfdb

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// fakeKernels prices kernels with smooth deterministic formulas so the
// estimate arithmetic can be checked without perf data.
type fakeKernels struct{}

func (fakeKernels) GemmOp(q GemmQuant, m, n, k int, lp bool) (Perf, error) {
	return Perf{LatencyMs: 0.002 + float64(m)*float64(n)*float64(k)*1e-12, Source: SourceSilicon}, nil
}
func (fakeKernels) ContextAttention(b, s, prefix, nh, nkv, hd, w int, kv KVQuant, f FMHAQuant) (Perf, error) {
	full := float64(s + prefix)
	return Perf{LatencyMs: 0.01 + float64(b)*float64(nh)*(full*full-float64(prefix*prefix))*1e-9, Source: SourceSilicon}, nil
}
func (fakeKernels) GenerationAttention(b, s, nh, nkv, hd, w int, kv KVQuant) (Perf, error) {
	return Perf{LatencyMs: 0.005 + float64(b)*float64(s)*float64(nkv)*1e-8, Source: SourceSilicon}, nil
}
func (fakeKernels) CustomAllReduce(q CommQuant, tp int, size float64) (Perf, error) {
	return Perf{LatencyMs: 0.004 + size*1e-9, Source: SourceSilicon}, nil
}
func (fakeKernels) NCCL(q CommQuant, g int, op string, size float64) (Perf, error) {
	return Perf{LatencyMs: 0.006 + size*1e-9, Source: SourceSilicon}, nil
}
func (fakeKernels) MoE(a MoEArgs, tokens int) (Perf, error) {
	return Perf{LatencyMs: 0.02 + float64(tokens*max(a.AttentionDP, 1))*1e-5, Source: SourceSilicon}, nil
}
func (fakeKernels) MLAContextModule(b, s, prefix, heads, native int, kv KVQuant, fmha FMHAQuant, gemm GemmQuant, siliconOnly bool) (Perf, error) {
	return Perf{LatencyMs: 0.05 + float64(b*(s+prefix)*heads)*1e-7, Source: SourceSilicon}, nil
}
func (fakeKernels) MLAGenerationModule(b, s, heads, native int, kv KVQuant, gemm GemmQuant, siliconOnly bool) (Perf, error) {
	return Perf{LatencyMs: 0.03 + float64(b*s*heads)*1e-8, Source: SourceSilicon}, nil
}
func (fakeKernels) MLAContext(b, s, prefix, heads int, kv KVQuant, fmha FMHAQuant) (Perf, error) {
	return Perf{LatencyMs: 0.02 + float64(b*(s+prefix)*heads)*1e-7, Source: SourceSilicon}, nil
}
func (fakeKernels) MLAGeneration(b, s, heads int, kv KVQuant) (Perf, error) {
	return Perf{LatencyMs: 0.01 + float64(b*s*heads)*1e-8, Source: SourceSilicon}, nil
}
func (fakeKernels) MLABmm(tokens, heads int, quant GemmQuant, pre bool) (Perf, error) {
	return Perf{LatencyMs: 0.003 + float64(tokens*heads)*1e-7, Source: SourceSilicon}, nil
}
func (fakeKernels) DSAContext(b, s, prefix, heads int, arch string, kv KVQuant, fmha FMHAQuant, gemm GemmQuant) (Perf, error) {
	return Perf{LatencyMs: 0.04 + float64(b*s*heads)*1e-7, Source: SourceSilicon}, nil
}
func (fakeKernels) DSAGeneration(b, s, heads int, arch string, kv KVQuant, gemm GemmQuant) (Perf, error) {
	return Perf{LatencyMs: 0.02 + float64(b*min(s, 2048)*heads)*1e-8, Source: SourceSilicon}, nil
}
func (fakeKernels) GemmBelowGridSOL(quant GemmQuant, m, n, k int) (Perf, bool, error) {
	return Perf{}, false, nil
}
func (fakeKernels) GDN(g GDNShape, b, s int) (Perf, error) {
	return Perf{LatencyMs: 0.004 + float64(b*max(s, 1)*g.NV)*1e-9, Source: SourceSilicon}, nil
}
func (fakeKernels) MoEA2A(backend, phase string, ep, nodes, hidden, topk, experts, sms, tokens int) (Perf, error) {
	return Perf{LatencyMs: 0.01 + float64(tokens*topk*hidden)/float64(ep)*1e-10, Source: SourceSilicon}, nil
}
func (fakeKernels) WideEPExpert(a MoEArgs, phase string, tokens int) (Perf, error) {
	return Perf{LatencyMs: 0.05 + float64(tokens*a.AttentionDP*a.TopK)/float64(a.MoEEP)*1e-6, Source: SourceSilicon}, nil
}
func (fakeKernels) WideEPContextMLA(batch, s, prefix, heads int, kernel string, kv KVQuant, fmha FMHAQuant) (Perf, error) {
	return Perf{LatencyMs: 0.03 + float64(batch*(s+prefix)*heads)*1e-7, Source: SourceSilicon}, nil
}
func (fakeKernels) WideEPGenerationMLA(batch, s, heads int, kernel string, kv KVQuant) (Perf, error) {
	return Perf{LatencyMs: 0.01 + float64(batch*s*heads)*1e-8, Source: SourceSilicon}, nil
}
func (fakeKernels) MemOp(bytes float64) (Perf, error) {
	return Perf{LatencyMs: (bytes/(4.8e12*0.8) + 3e-6) * 1000, Source: SourceEmpirical}, nil
}
func (fakeKernels) P2P(bytes float64) (Perf, error) {
	return Perf{LatencyMs: (bytes/50e9 + 1e-5) * 1000, Source: SourceEmpirical}, nil
}

func testSystem() *System {
	return &System{Name: "h200_sxm", MemBW: 4.8e12, MemBWEmpiricalScalingFactor: 0.8, MemEmpiricalConstantLatency: 3e-6,
		MemCapacity: 151397597184, BF16TCFlops: 989e12, FP8TCFlops: 1978e12, INT8TCFlops: 1978e12, SMVersion: 90,
		NumGPUsPerNode: 8, InterNodeBW: 50e9, IntraNodeBW: 450e9, P2PLatency: 1e-5,
		NCCLMem: map[int]float64{1: 0, 2: 358612992, 4: 411041792, 8: 411041792}, OtherMem: 3758096384}
}

func testModel(t testing.TB) *Model {
	t.Helper()
	cfg := `{"architectures":["Qwen3ForCausalLM"],"num_hidden_layers":64,"hidden_size":5120,"num_attention_heads":64,
"num_key_value_heads":8,"head_dim":128,"intermediate_size":25600,"vocab_size":151936,"max_position_embeddings":40960}`
	m, err := ParseHFConfig("Qwen/Qwen3-32B", "inline", []byte(cfg), nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func testEstimator(t testing.TB, backend string, tp int) *Estimator {
	t.Helper()
	e, err := newEstimator(fakeKernels{}, testSystem(), testModel(t), Config{Backend: backend, TP: tp, MoEEP: tp})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func near(a, b, rtol float64) bool { return math.Abs(a-b) <= math.Max(math.Abs(b)*rtol, 1e-9) }

// TestAggIdentityVLLM checks PERFDB.md §2.3: vLLM agg at b = 2, ctx = isl,
// osl = 2 gives tpot = mixed step and ttft = (mixed + 0.8·L)·1.125.
func TestAggIdentityVLLM(t *testing.T) {
	e := testEstimator(t, "vllm", 8)
	r, err := e.Agg(AggInput{Batch: 2, CtxTokens: 1024, ISL: 1024, OSL: 2})
	if err != nil {
		t.Fatal(err)
	}
	mix, err := e.MixedMs(1024, 1, 1024, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !near(r.TPOTMs, mix, 1e-12) {
		t.Errorf("agg tpot %v != mixed %v", r.TPOTMs, mix)
	}
	if want := (mix + 0.8*64) * 1.125; !near(r.TTFTMs, want, 1e-12) {
		t.Errorf("agg ttft %v, want %v", r.TTFTMs, want)
	}
	if !near(r.RequestMs, r.TTFTMs+r.TPOTMs, 1e-12) {
		t.Errorf("request %v != ttft + tpot", r.RequestMs)
	}
}

// TestAggRatioTRTLLM: TRT-LLM agg at b = 2, ctx = isl, osl = 2 has steps = 2 =
// decode iterations, so ttft = mix·1.95 and tpot = mix.
func TestAggRatioTRTLLM(t *testing.T) {
	e := testEstimator(t, "trtllm", 8)
	r, err := e.Agg(AggInput{Batch: 2, CtxTokens: 1024, ISL: 1024, OSL: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !near(r.TTFTMs/r.TPOTMs, 1.95, 1e-12) {
		t.Errorf("ttft/tpot = %v, want 1.95", r.TTFTMs/r.TPOTMs)
	}
}

// TestHooks mirrors the reference hook unit tests.
func TestHooks(t *testing.T) {
	v := hooks{"vllm"}
	for b, want := range map[int]float64{1: 1, 2: 1.125, 256: 2, 1024: 2} {
		if got := v.ttftQueuingFactor(b, 3); got != want {
			t.Errorf("vllm queuing(%d) = %v, want %v", b, got, want)
		}
	}
	if got := (hooks{"trtllm"}).tpotMixSteps(10); got != 7 {
		t.Errorf("trtllm tpot mix steps(10) = %v, want 7", got)
	}
	if got := (hooks{"trtllm"}).ttftQueuingFactor(4, 1); got != 1.9 {
		t.Errorf("legacy queuing(1 step) = %v, want 1.9", got)
	}
	if got := (hooks{"sglang"}).ttftQueuingFactor(4, 100); got != 4 {
		t.Errorf("legacy queuing cap = %v, want 4", got)
	}
	if got := v.dispatchOverheadMs(64); got != 51.2 {
		t.Errorf("vllm dispatch overhead = %v", got)
	}
	if got := v.throughputCap(1e9, 10, 1, 4, 11); got != 4*10*1000.0/20 {
		t.Errorf("little's law cap = %v", got)
	}
}

// TestDisaggIdentity: disagg ttft = round(round(ctx·1.1, 3)·1.8, 3).
func TestDisaggIdentity(t *testing.T) {
	e := testEstimator(t, "vllm", 8)
	r, err := Disagg(e, e, DisaggInput{ISL: 1024, OSL: 2, PrefillBatch: 1, PrefillWorkers: 1, DecodeBatch: 4, DecodeWorkers: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, _ := e.ContextMs(1, 1024, 0)
	if want := round3(round3(ctx.LatencyMs*1.1) * 1.8); r.TTFTMs != want {
		t.Errorf("disagg ttft %v, want %v", r.TTFTMs, want)
	}
	gen, _ := e.GenerationMs(4, 1024, 2, 32)
	if want := round3(gen.LatencyMs * 1.08); r.TPOTMs != want {
		t.Errorf("disagg tpot %v, want %v", r.TPOTMs, want)
	}
}

// TestDisaggMTPProjection: with MTP the decode worker's row is projected as
// aiconfigurator projects a decode summary (SpeculativeDecodingProfile,
// role decode): TPOT divided by 1 + accepted and rounded again, the decode
// seq/s and tokens/s/user multiplied; TTFT is the prefill worker's; an
// acceptance outside [1, nextn + 1] is one error naming the fix.
func TestDisaggMTPProjection(t *testing.T) {
	e, err := newEstimator(fakeKernels{}, testSystem(), testModel(t), Config{Backend: "trtllm", TP: 8, MoEEP: 8, Nextn: 1})
	if err != nil {
		t.Fatal(err)
	}
	in := DisaggInput{ISL: 1024, OSL: 256, PrefillBatch: 1, PrefillWorkers: 1, DecodeBatch: 16, DecodeWorkers: 4}
	plain, err := Disagg(e, e, in)
	if err != nil {
		t.Fatal(err)
	}
	in.DecodeTokensPerIter = 1.85
	mtp, err := Disagg(e, e, in)
	if err != nil {
		t.Fatal(err)
	}
	if want := round3(plain.TPOTMs / 1.85); mtp.TPOTMs != want {
		t.Errorf("MTP TPOT %v, want round3(%v / 1.85) = %v", mtp.TPOTMs, plain.TPOTMs, want)
	}
	if mtp.TTFTMs != plain.TTFTMs {
		t.Errorf("MTP TTFT %v, want the prefill worker's %v", mtp.TTFTMs, plain.TTFTMs)
	}
	if want := round3(plain.TokensPerSPerUser * 1.85); !near(mtp.TokensPerSPerUser, want, 1e-3) {
		t.Errorf("MTP tokens/s/user %v, want %v", mtp.TokensPerSPerUser, want)
	}
	if want := round3(plain.TTFTMs + mtp.TPOTMs*255); mtp.RequestMs != want {
		t.Errorf("MTP request latency %v, want %v", mtp.RequestMs, want)
	}
	in.DecodeTokensPerIter = 2.5
	if _, err := Disagg(e, e, in); err == nil || !strings.Contains(err.Error(), "decode tokens per iteration 2.5: must lie in [1, nextn+1 = 2]") {
		t.Errorf("acceptance above nextn: %v", err)
	}
}

// TestStaticTotal: static_total = rounded ctx + rounded gen, and the stride
// quadrature weights steps by min(stride, osl−1−i).
func TestStaticTotal(t *testing.T) {
	e := testEstimator(t, "vllm", 8)
	r, err := e.Static(StaticInput{Batch: 1, ISL: 1024, OSL: 70, Stride: 32})
	if err != nil {
		t.Fatal(err)
	}
	g1, _ := runGenStep(e.ks, e.ops.gen, 1, 1025, false)
	g2, _ := runGenStep(e.ks, e.ops.gen, 1, 1057, false)
	g3, _ := runGenStep(e.ks, e.ops.gen, 1, 1089, false)
	if want := round3(g1.LatencyMs*32 + g2.LatencyMs*32 + g3.LatencyMs*5); r.GenerationMs != want {
		t.Errorf("stride-32 generation %v, want %v", r.GenerationMs, want)
	}
	if r.StaticTotal() != r.ContextMs+r.GenerationMs {
		t.Error("static total is not the sum of the rounded phases")
	}
}

// TestBadInput checks that bad shapes name their flag.
func TestBadInput(t *testing.T) {
	e := testEstimator(t, "vllm", 8)
	if _, err := e.Static(StaticInput{Batch: 1, ISL: 100, OSL: 2, Prefix: 100}); err == nil || !strings.Contains(err.Error(), "--prefix") {
		t.Errorf("prefix ≥ isl: %v", err)
	}
	if _, err := e.Static(StaticInput{Batch: 0, ISL: 100, OSL: 2}); err == nil || !strings.Contains(err.Error(), "--batch") {
		t.Errorf("batch 0: %v", err)
	}
	if _, err := newEstimator(fakeKernels{}, testSystem(), testModel(t), Config{Backend: "vllm", TP: 3}); err == nil || !strings.Contains(err.Error(), "--tp") {
		t.Errorf("tp 3: %v", err)
	}
	big := testEstimator(t, "vllm", 1)
	if _, err := big.Agg(AggInput{Batch: 4096, CtxTokens: 32768, ISL: 32768, OSL: 2}); !errors.Is(err, ErrOOM) {
		t.Errorf("huge batch: want OOM, got %v", err)
	}
}

// TestEstimateProperties checks invariants of the estimates on random shapes
// (fake kernels): finite positive results, request = ttft + tpot·(osl−1),
// ttft ≥ the prefill work (queuing factor ≥ 1), vLLM throughput within the
// Little's-law cap, static total = sum of phases, disagg identities.
func TestEstimateProperties(t *testing.T) {
	ests := map[string]*Estimator{}
	for _, b := range []string{"vllm", "trtllm", "sglang"} {
		ests[b] = testEstimator(t, b, 8)
	}
	rapid.Check(t, func(rt *rapid.T) {
		backend := rapid.SampledFrom([]string{"vllm", "trtllm", "sglang"}).Draw(rt, "backend")
		e := ests[backend]
		isl := rapid.IntRange(2, 16384).Draw(rt, "isl")
		osl := rapid.IntRange(1, 512).Draw(rt, "osl")
		prefix := rapid.IntRange(0, isl-1).Draw(rt, "prefix")
		b := rapid.IntRange(1, 64).Draw(rt, "b")
		ctx := rapid.IntRange(1, 4*isl).Draw(rt, "ctx")
		if b > 1 && b-ceilDiv(ctx, isl) < 1 {
			ctx = isl // the sweep skips points with no decode row
		}
		r, err := e.Agg(AggInput{Batch: b, CtxTokens: ctx, ISL: isl, OSL: osl, Prefix: prefix})
		if err != nil {
			if errors.Is(err, ErrOOM) {
				return
			}
			rt.Fatal(err)
		}
		if !(r.TTFTMs > 0) || r.TPOTMs < 0 || math.IsInf(r.RequestMs, 0) {
			rt.Fatalf("non-positive or infinite agg result %+v", r)
		}
		if !near(r.RequestMs, r.TTFTMs+r.TPOTMs*float64(osl-1), 1e-12) {
			rt.Fatalf("request %v != ttft + tpot·(osl−1)", r.RequestMs)
		}
		if r.TTFTMs < r.MixedStepMs*math.Ceil(float64(isl)/float64(ctx))*(1-1e-12) {
			rt.Fatalf("ttft %v below the prefill work %v", r.TTFTMs, r.MixedStepMs)
		}
		if backend == "vllm" && osl > 1 {
			capTok := float64(b*(osl-1)) * 1000 / r.RequestMs
			if r.TokensPerSPerGPU*8 > capTok*(1+1e-9) {
				rt.Fatalf("throughput %v above the Little's-law cap %v", r.TokensPerSPerGPU*8, capTok)
			}
		}
		s, err := e.Static(StaticInput{Batch: b, ISL: isl, OSL: osl, Prefix: prefix, Stride: rapid.IntRange(1, 64).Draw(rt, "stride")})
		if err != nil {
			rt.Fatal(err)
		}
		if !(s.ContextMs > 0) || s.StaticTotal() != s.ContextMs+s.GenerationMs {
			rt.Fatalf("static %+v", s)
		}
		dr, err := Disagg(e, e, DisaggInput{ISL: isl, OSL: osl, Prefix: prefix, PrefillBatch: 1, PrefillWorkers: 1, DecodeBatch: b, DecodeWorkers: 1})
		if err != nil {
			if errors.Is(err, ErrOOM) {
				return
			}
			rt.Fatal(err)
		}
		c, _ := e.ContextMs(1, isl, prefix)
		if dr.TTFTMs != round3(round3(c.LatencyMs*1.1)*1.8) {
			rt.Fatalf("disagg ttft %v != round(round(ctx·1.1)·1.8)", dr.TTFTMs)
		}
	})
}

// BenchmarkAggH200 prices one agg point (mix + gen-only steps, memory) on the
// embedded h200 vllm 0.22.0 data, Qwen3-32B tp 8, after the lazy indexes are warm.
func BenchmarkAggH200(b *testing.B) {
	d, err := LoadEmbedded(context.Background(), "h200_sxm", "vllm", "0.22.0")
	if err != nil {
		b.Fatal(err)
	}
	m, err := EmbeddedModel("Qwen/Qwen3-32B")
	if err != nil {
		b.Fatal(err)
	}
	e, err := NewEstimator(d, m, Config{TP: 8, MoEEP: 8})
	if err != nil {
		b.Fatal(err)
	}
	in := AggInput{Batch: 16, CtxTokens: 4096, ISL: 4096, OSL: 256}
	if _, err := e.Agg(in); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Agg(in); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSGLangMemFraction checks derive_sglang_mem_fraction_static on the h200
// (141 GiB: 8192-token chunks, graph bs 512 at tp ≥ 4) and a small GPU.
func TestSGLangMemFraction(t *testing.T) {
	h200 := 151397597184.0
	mb := h200 / (1 << 20)
	want := math.RoundToEven((mb-math.Max(512+1.5*8192+1024+512*2, 10*1024))/mb*1000) / 1000
	if got := SGLangMemFractionStatic(h200, 8, 1, 1, 0); got != want || got != 0.897 {
		t.Errorf("h200 tp8: %v, want %v (0.897)", got, want)
	}
	if got := SGLangMemFractionStatic(16<<30, 1, 1, 1, 0); got != math.RoundToEven((16384-(512+1.5*2048+128+16))/16384*1000)/1000 {
		t.Errorf("16 GiB tp1: %v", got)
	}
}
