package perfdb

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"pgregory.net/rapid"
)

var (
	wideEPH200Once sync.Once
	wideEPH200     *Querier
	wideEPH200Err  error
)

// wideEPH200Querier is the embedded h200 SGLang 0.5.14 data, wide-EP tables
// only: DeepEP from 0.5.12 (the nearest earlier version), expert compute and
// DeepEP MLA from 0.5.10.
func wideEPH200Querier(t *testing.T) *Querier {
	t.Helper()
	wideEPH200Once.Do(func() {
		d, err := LoadEmbedded(context.Background(), "h200_sxm", "sglang", "0.5.14", WithoutSnapshot(),
			OnlyTables("wideep_deepep_normal_perf", "wideep_deepep_ll_perf", "wideep_context_moe_perf",
				"wideep_generation_moe_perf", "wideep_context_mla_perf", "wideep_generation_mla_perf"))
		if err != nil {
			wideEPH200Err = err
			return
		}
		wideEPH200, wideEPH200Err = NewQuerier(d, ModeSilicon)
	})
	if wideEPH200Err != nil {
		t.Fatal(wideEPH200Err)
	}
	return wideEPH200
}

// dsR1MoE is DeepSeek-R1's MoE block at moe-ep 8, attention DP 8.
var dsR1MoE = MoEArgs{Quant: MoEQuant("fp8_block"), Distribution: deepseekDistribution, TopK: 8, NumExperts: 256,
	Hidden: 7168, Inter: 2048, MoETP: 1, MoEEP: 8, AttentionDP: 8, IsGated: true}

// TestWideEPQueryHandValues: per-op latencies computed by hand from the
// table rows (an independent script over the dumped Parquet rows, following
// the reference's resolution): linear blends inside the measured token range,
// the boundary utilization held with the wide-EP MoE roofline outside it.
func TestWideEPQueryHandValues(t *testing.T) {
	q := wideEPH200Querier(t)
	near := func(name string, got Perf, err error, want float64) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if math.Abs(got.LatencyMs-want) > 1e-12*math.Max(1, want) {
			t.Errorf("%s = %.15g ms, want %.15g", name, got.LatencyMs, want)
		}
	}
	// deepep_ll dispatch, 40 tokens/rank: between the 32-token row of 0.5.12
	// (16.493 µs) and the 48-token row 0.5.6.post2 adds (24.78 µs); the
	// shared layer merges token points, the nearer version first.
	p, err := q.MoEA2A("deepep_ll", "dispatch", 8, 1, 7168, 8, 256, 0, 40)
	near("ll dispatch 40", p, err, 0.016493+(0.02478-0.016493)*0.5)
	p, err = q.MoEA2A("deepep_ll", "dispatch", 8, 1, 7168, 8, 256, 0, 48)
	near("ll dispatch 48 (0.5.6.post2 row)", p, err, 0.02478)
	// deepep_ht combine, 3000 tokens/rank at 20 SMs: transmit + notify of the
	// 2048 and 4096 rows, blended.
	p, err = q.MoEA2A("deepep_ht", "combine", 8, 1, 7168, 8, 256, 20, 3000)
	near("ht combine 3000", p, err, 0.5389374677015811+(0.9960104458186091-0.5389374677015811)*(3000-2048)/2048.0)
	// Context expert compute, 1000 tokens/rank × dp 8 = 8000 tokens.
	a := dsR1MoE
	a.IsContext = true
	p, err = q.WideEPExpert(a, "context", 1000)
	near("ctx expert 8000", p, err, 0.9845467397144863+(1.3876397745949882-0.9845467397144863)*(8000-4096)/4096.0)
	// Generation expert compute, 3 tokens/rank × 8 = 24 tokens.
	p, err = q.WideEPExpert(dsR1MoE, "generation", 3)
	near("gen expert 24", p, err, 0.26323072433471684+(0.29424448013305665-0.26323072433471684)*0.5)
	// Beyond the last generation row (1024 tokens, 0.42486526489257814 ms):
	// 5000 × 8 = 40000 tokens held at that row's utilization of the roofline.
	p, err = q.WideEPExpert(dsR1MoE, "generation", 5000)
	near("gen expert 40000", p, err, 2.5397506709387945)
	// DeepEP decode MLA, flashinfer, fp8 KV, 16 heads (tp 8), batch 8, KV
	// 3000: between the 2048 (0.0456 ms) and 4096 (0.0595 ms) rows.
	p, err = q.WideEPGenerationMLA(8, 3000, 16, "flashinfer", KVFP8)
	near("gen mla 3000", p, err, 0.0456+(0.0595-0.0456)*(3000-2048)/2048.0)
	// DeepEP context MLA, 16 heads, batch 2, 3000 tokens: blended in sqrt
	// space between the 2048 (0.6845 ms) and 4096 (0.964 ms) rows; with 1000
	// of them a cached prefix, times (3000² − 1000²)/3000².
	p, err = q.WideEPContextMLA(2, 3000, 0, 16, "flashinfer", KVFP8, FMHAFP8Block)
	near("ctx mla 3000", p, err, 0.8084865473761843)
	p, err = q.WideEPContextMLA(2, 2000, 1000, 16, "flashinfer", KVFP8, FMHAFP8Block)
	near("ctx mla 2000+1000", p, err, 0.7186547087788304)
}

// TestWideEPInvariants (rapid, on the h200 tables):
//   - at a fixed global token count inside both curves, doubling the EP ranks
//     does not raise the expert compute per rank (1 % tolerance: one measured
//     pair, 2048 tokens at ep 64 → 128, rises 0.3 %);
//   - past the last measured token count the all-to-all latency is
//     proportional to the tokens (the reference's token-proportional SOL);
//   - the wide-EP MoE roofline falls as the EP group grows and, compute-bound,
//     scales with tokens × top-k × hidden / ranks.
func TestWideEPInvariants(t *testing.T) {
	q := wideEPH200Querier(t)
	measured := func(phase string, ep int) (lo, hi float64) {
		cv := q.wideEP.moe[wideEPMoEKey{phase, "fp8_block", deepseekDistribution, 8, 256, 7168, 2048, 1, ep}]
		if cv == nil {
			return 0, -1
		}
		return cv.pts[0].x, cv.pts[len(cv.pts)-1].x
	}
	rapid.Check(t, func(rt *rapid.T) {
		phase := rapid.SampledFrom([]string{"context", "generation"}).Draw(rt, "phase")
		ep := rapid.SampledFrom([]int{4, 8, 16, 32, 64, 128}).Draw(rt, "ep")
		lo1, hi1 := measured(phase, ep)
		lo2, hi2 := measured(phase, 2*ep)
		lo, hi := max(lo1, lo2), min(hi1, hi2)
		if hi < lo {
			rt.Skip("no common measured range")
		}
		tokens := rapid.IntRange(int(lo), int(hi)).Draw(rt, "tokens")
		a := dsR1MoE
		a.AttentionDP = 1
		a.MoEEP = ep
		p1, err := q.WideEPExpert(a, phase, tokens)
		if err != nil {
			rt.Fatal(err)
		}
		a.MoEEP = 2 * ep
		p2, err := q.WideEPExpert(a, phase, tokens)
		if err != nil {
			rt.Fatal(err)
		}
		if p2.LatencyMs > 1.01*p1.LatencyMs {
			rt.Fatalf("%s %d tokens: ep %d → %.4f ms, ep %d → %.4f ms", phase, tokens, ep, p1.LatencyMs, 2*ep, p2.LatencyMs)
		}
	})
	rapid.Check(t, func(rt *rapid.T) {
		backend := rapid.SampledFrom([]string{"deepep_ht", "deepep_ll"}).Draw(rt, "backend")
		phase := rapid.SampledFrom([]string{"dispatch", "combine"}).Draw(rt, "phase")
		sms := 0
		if backend == "deepep_ht" {
			sms = deepEPDefaultSMs
		}
		cv := q.wideEP.a2a[a2aCurveKey{backend, phase, 8, 1, 7168, 8, 256, sms}]
		last := cv.pts[len(cv.pts)-1]
		k := rapid.IntRange(2, 64).Draw(rt, "k")
		p, err := q.MoEA2A(backend, phase, 8, 1, 7168, 8, 256, sms, k*int(last.x))
		if err != nil {
			rt.Fatal(err)
		}
		if want := float64(k) * last.l.lat; math.Abs(p.LatencyMs-want) > 1e-12*want {
			rt.Fatalf("%s %s at %d× the last point: %.9g ms, want %.9g", backend, phase, k, p.LatencyMs, want)
		}
	})
	rapid.Check(t, func(rt *rapid.T) {
		ep := rapid.SampledFrom([]int{2, 4, 8, 16, 32, 64, 128}).Draw(rt, "ep")
		tokens := rapid.IntRange(1, 1<<20).Draw(rt, "tokens")
		sol := func(ep, topk, hidden int) float64 {
			s := &wideEPMoESOL{topk: uint64(topk), slots: 256, hidden: uint64(hidden), inter: 2048, tp: 1, ep: uint64(ep), gemms: 3,
				mem: 1, compute: 2, flops: 989e12, memBW: 4.8e12}
			return s.sol(pt{float64(tokens)})
		}
		if sol(2*ep, 8, 7168) > sol(ep, 8, 7168) {
			rt.Fatalf("%d tokens: roofline rises from ep %d to %d", tokens, ep, 2*ep)
		}
		// Compute-bound (many tokens): time ∝ tokens·topk·hidden/ep.
		if tokens >= 1<<16 {
			r := sol(ep, 8, 7168) / sol(2*ep, 8, 7168)
			if math.Abs(r-2) > 1e-3 {
				rt.Fatalf("%d tokens: ep %d / ep %d roofline ratio %.6f, want 2", tokens, ep, 2*ep, r)
			}
		}
	})
}

// TestWideEPA2AReferenceOracle reproduces the reference's own all-to-all
// oracle (its Python MoEAllToAll on h200 SGLang 0.5.6.post2, shared layer
// off) for every sample aicdb models — exact points, token blends, holds
// beyond both ends — to 1e-9 relative.
func TestWideEPA2AReferenceOracle(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "wideep_a2a_oracle.json"))
	if err != nil {
		t.Fatal(err)
	}
	var oracle struct {
		Samples []struct {
			Backend string  `json:"comm_backend"`
			Phase   string  `json:"phase"`
			EP      int     `json:"ep_size"`
			Nodes   int     `json:"node_num"`
			Hidden  int     `json:"hidden_size"`
			TopK    int     `json:"topk"`
			Experts int     `json:"num_experts"`
			SMs     int     `json:"sms"`
			Tokens  int     `json:"num_tokens"`
			Kind    string  `json:"kind"`
			Latency float64 `json:"latency_ms"`
		} `json:"samples"`
	}
	if err := json.Unmarshal(raw, &oracle); err != nil {
		t.Fatal(err)
	}
	d, err := LoadEmbedded(context.Background(), "h200_sxm", "sglang", "0.5.6.post2", WithoutSnapshot(), WithSharedLayer(false),
		OnlyTables("wideep_deepep_normal_perf", "wideep_deepep_ll_perf"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewQuerier(d, ModeSilicon)
	if err != nil {
		t.Fatal(err)
	}
	if len(oracle.Samples) < 20 {
		t.Fatalf("%d oracle samples, want ≥ 20", len(oracle.Samples))
	}
	for _, s := range oracle.Samples {
		p, err := q.MoEA2A(s.Backend, s.Phase, s.EP, s.Nodes, s.Hidden, s.TopK, s.Experts, s.SMs, s.Tokens)
		if err != nil {
			t.Errorf("%s %s ep %d tokens %d (%s): %v", s.Backend, s.Phase, s.EP, s.Tokens, s.Kind, err)
			continue
		}
		if math.Abs(p.LatencyMs-s.Latency) > 1e-9*s.Latency {
			t.Errorf("%s %s ep %d tokens %d (%s) = %.12g ms, reference %.12g", s.Backend, s.Phase, s.EP, s.Tokens, s.Kind, p.LatencyMs, s.Latency)
		}
	}
}
