package queueing

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// lin is the synthetic timing used by the identity tests.
var lin = timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.025, DecodeMsPerRow: 0.07, CtxMsPerToken: 0.00002}

func testEngine(t testing.TB, backend engine.Backend, mod func(*engine.Spec)) engine.Spec {
	t.Helper()
	e, err := engine.Defaults(backend, "")
	if err != nil {
		t.Fatal(err)
	}
	if mod != nil {
		mod(&e)
	}
	return e
}

func quant(t testing.TB, w workload.Spec, e engine.Spec, tm timing.Timing) *Report {
	t.Helper()
	r, err := Quantitative(context.Background(), w, e, tm)
	if err != nil {
		t.Fatalf("Quantitative(%+v, %+v): %v", w, e, err)
	}
	return r
}

// TestC1SGLangOverlapWaitsForTheDiscardedPass: under the SGLang overlap
// scheduler (§3.2) a request that finishes in pass k still runs in pass k+1 (its
// token discarded), so with one client the successor — reaching the scheduler
// the client round trip and the stages after its predecessor's last token —
// first waits for what is left of that one-row decode pass (context isl + osl):
// steady TTFT = stages + pure prefill + max(0, decode pass − RTT − stages),
// exactly.
func TestC1SGLangOverlapWaitsForTheDiscardedPass(t *testing.T) {
	for _, c := range []struct {
		isl, prefix, budget, passes int
		stage, rtt                  float64
	}{
		{4096, 256, 8192, 1, 0, DefaultClientRTTMs},
		{9000, 0, 2048, 5, 1, DefaultClientRTTMs},
		{4096, 0, 8192, 1, 0, 10}, // the round trip outlasts the discarded pass
	} {
		e := testEngine(t, engine.SGLang, func(e *engine.Spec) {
			e.AsyncScheduling, e.StageMs, e.ChunkedPrefillSize = true, c.stage, c.budget
		})
		for _, osl := range []int{1, 2, 64} {
			w := workload.Spec{ISL: c.isl, OSL: osl, Prefix: c.prefix, Concurrency: 1}
			o := DefaultOptions()
			o.ClientRTTMs = c.rtt
			r, err := QuantitativeWith(context.Background(), w, e, lin, o)
			if err != nil {
				t.Fatal(err)
			}
			var dp timing.Pass
			dp.Decode = []int{c.isl + osl}
			dec, err := lin.PassMs(&dp)
			if err != nil {
				t.Fatal(err)
			}
			want := c.stage + float64(c.passes)*lin.BaseMs + lin.PrefillMsPerToken*float64(c.isl-c.prefix) + max(0, dec-c.rtt-c.stage)
			if !near(r.TTFTSteady.Min(), want, 1e-12) || !near(r.TTFTSteady.Max(), want, 1e-12) {
				t.Errorf("%+v osl %d: steady TTFT [%v, %v], want %v", c, osl, r.TTFTSteady.Min(), r.TTFTSteady.Max(), want)
			}
			// The screening tier has the same closed form.
			sr, err := ScreeningWith(w, e, lin, o)
			if err != nil {
				t.Fatal(err)
			}
			if !near(sr.TTFTSteady.Min(), want, 1e-12) || !near(sr.TTFTSteady.Max(), want, 1e-12) {
				t.Errorf("%+v osl %d: screening steady TTFT [%v, %v], want %v", c, osl, sr.TTFTSteady.Min(), sr.TTFTSteady.Max(), want)
			}
		}
	}
	// A locked cohort (C prompts whole in one pass) waits out the C-row discarded
	// pass the same way, in both tiers.
	e := testEngine(t, engine.SGLang, func(e *engine.Spec) { e.AsyncScheduling, e.ChunkedPrefillSize = true, 8192 })
	w := workload.Spec{ISL: 1024, OSL: 32, Concurrency: 4}
	var pp timing.Pass
	for range 4 {
		pp.Prefill = append(pp.Prefill, timing.Chunk{Tokens: 1024})
	}
	pre, _ := lin.PassMs(&pp)
	pp = timing.Pass{Decode: []int{1056, 1056, 1056, 1056}}
	dec, _ := lin.PassMs(&pp)
	want := pre + dec - DefaultClientRTTMs
	o := DefaultOptions()
	o.StaggerPhases = 0 // the burst: the cohort stays locked
	r, err := QuantitativeWith(context.Background(), w, e, lin, o)
	if err != nil {
		t.Fatal(err)
	}
	sr, err := ScreeningWith(w, e, lin, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []Distribution{r.TTFTSteady, sr.TTFTSteady} {
		if !near(got.Min(), want, 1e-12) || !near(got.Max(), want, 1e-12) {
			t.Errorf("locked cohort C 4: steady TTFT [%v, %v], want %v", got.Min(), got.Max(), want)
		}
	}
	// The burst's cohort has no predecessor, hence no discarded pass to wait out.
	for _, got := range []Distribution{r.TTFTTransient, sr.TTFTTransient} {
		if !near(got.Min(), pre, 1e-12) || !near(got.Max(), pre, 1e-12) {
			t.Errorf("locked cohort C 4: transient TTFT [%v, %v], want the prefill pass %v", got.Min(), got.Max(), pre)
		}
	}
}

func near(a, b, rel float64) bool {
	return math.Abs(a-b) <= rel*math.Max(math.Abs(a), math.Abs(b))+1e-9
}

// TestC1SteadyTTFTIsPurePrefill: with one client the steady TTFT is exactly the
// pure prefill of the uncached prompt (chunked at the engine's budget) plus the
// additive stages, on every calendar, synchronous or not (QUEUEING.md §8) — the
// SGLang overlap scheduler aside (TestC1SGLangOverlapWaitsForTheDiscardedPass).
func TestC1SteadyTTFTIsPurePrefill(t *testing.T) {
	type tc struct {
		backend         engine.Backend
		isl, prefix     int
		budget          int
		chunked, async  bool
		stage           float64
		wantPrefillPass int
	}
	cases := []tc{
		{engine.VLLM, 4096, 0, 8192, true, true, 0, 1},
		{engine.VLLM, 10000, 1000, 2048, true, false, 7.5, 5}, // ceil(9000/2048)
		{engine.VLLM, 3000, 512, 4096, false, true, 2, 1},
		{engine.TRTLLM, 4096, 0, 8192, false, true, 0, 1},
		{engine.TRTLLM, 8192, 0, 2048, true, false, 3, 4},
		{engine.SGLang, 4096, 256, 8192, true, false, 0, 1},
		{engine.SGLang, 9000, 0, 2048, true, false, 1, 5},
	}
	for _, c := range cases {
		e := testEngine(t, c.backend, func(e *engine.Spec) {
			e.EnableChunkedPrefill = c.chunked
			e.StageMs = c.stage
			e.AsyncScheduling = c.async
			switch c.backend {
			case engine.VLLM:
				e.MaxNumBatchedTokens = c.budget
			case engine.TRTLLM:
				e.MaxNumTokens = c.budget
			case engine.SGLang:
				e.ChunkedPrefillSize = c.budget
			}
		})
		for _, osl := range []int{1, 2, 64} {
			w := workload.Spec{ISL: c.isl, OSL: osl, Prefix: c.prefix, Concurrency: 1}
			r := quant(t, w, e, lin)
			want := c.stage + float64(c.wantPrefillPass)*lin.BaseMs + lin.PrefillMsPerToken*float64(c.isl-c.prefix)
			if !near(r.TTFTSteady.Min(), want, 1e-12) || !near(r.TTFTSteady.Max(), want, 1e-12) {
				t.Errorf("%+v osl %d: steady TTFT [%v, %v], want pure prefill %v", c, osl, r.TTFTSteady.Min(), r.TTFTSteady.Max(), want)
			}
			if !near(r.TTFTTransient.Max(), want, 1e-12) {
				t.Errorf("%+v osl %d: transient TTFT %v, want %v", c, osl, r.TTFTTransient.Max(), want)
			}
			s, err := Screening(w, e, lin)
			if err != nil {
				t.Fatal(err)
			}
			if !near(s.TTFTSteady.Mean(), want, 1e-12) || !near(s.TTFTSteadyP99Lo, want, 1e-12) {
				t.Errorf("%+v osl %d: screening TTFT %v lo %v, want %v", c, osl, s.TTFTSteady.Mean(), s.TTFTSteadyP99Lo, want)
			}
		}
	}
}

// TestClosedLoopLittlesLaw: C = X·(E2E + turnaround + client round trip) over the
// steady window of one run (the burst with the default round trip; the mixture's
// mean X times mean E2E is not a per-run identity).
func TestClosedLoopLittlesLaw(t *testing.T) {
	for _, backend := range []engine.Backend{engine.VLLM, engine.TRTLLM, engine.SGLang} {
		for _, c := range []int{1, 7, 32, 100} {
			for _, turn := range []float64{0, 35} {
				e := testEngine(t, backend, func(e *engine.Spec) { e.StageMs = 3 })
				w := workload.Spec{ISL: 1500, OSL: 40, Prefix: 100, Concurrency: c, TurnaroundMs: turn}
				r, err := QuantitativeWith(context.Background(), w, e, lin, Options{ClientRTTMs: DefaultClientRTTMs})
				if err != nil {
					t.Fatal(err)
				}
				got := r.ThroughputRPS / 1000 * (r.E2E.Mean() + turn + DefaultClientRTTMs)
				if !near(got, float64(c), 0.01) {
					t.Errorf("%s C=%d T=%v: X·(E2E+T) = %v, want %d", backend, c, turn, got, c)
				}
			}
		}
	}
}

// TestITLMedianIsDecodeOnlyPass: where decode-only passes dominate, the ITL median
// is exactly the decode-only pass of the running batch.
func TestITLMedianIsDecodeOnlyPass(t *testing.T) {
	tm := timing.Linear{BaseMs: 6, PrefillMsPerToken: 0.03, DecodeMsPerRow: 0.11}
	for _, backend := range []engine.Backend{engine.VLLM, engine.TRTLLM, engine.SGLang} {
		for _, c := range []int{1, 8, 48} {
			e := testEngine(t, backend, nil)
			w := workload.Spec{ISL: 700, OSL: 300, Concurrency: c}
			r := quant(t, w, e, tm)
			want := tm.BaseMs + tm.DecodeMsPerRow*float64(c)
			if got := r.ITL.Quantile(0.5); !near(got, want, 1e-12) {
				t.Errorf("%s C=%d: ITL p50 %v, want the decode-only pass %v", backend, c, got, want)
			}
			s, err := Screening(w, e, tm)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.ITL.Quantile(0.5); !near(got, want, 0.02) {
				t.Errorf("%s C=%d: screening ITL p50 %v, want ≈ %v", backend, c, got, want)
			}
		}
	}
}

// TestOSL1HasNoGaps: osl = 1 rows report ITL and TPOT 0, never a pass length.
func TestOSL1HasNoGaps(t *testing.T) {
	for _, backend := range []engine.Backend{engine.VLLM, engine.TRTLLM, engine.SGLang} {
		e := testEngine(t, backend, nil)
		for _, w := range []workload.Spec{{ISL: 900, OSL: 1, Concurrency: 16}, {ISL: 900, OSL: 1, RateRPS: 3}} {
			q := quant(t, w, e, lin)
			s, err := Screening(w, e, lin)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []*Report{q, s} {
				cols := r.Columns(1)
				for _, k := range []string{"itl_mean", "itl_p50", "itl_p99", "tpot_mean", "tpot_p50", "tpot_p99", "tokens_per_s_per_user"} {
					if cols[k] != 0.0 {
						t.Errorf("%s %s %+v: %s = %v, want 0", backend, r.Tier, w, k, cols[k])
					}
				}
			}
		}
	}
}

// md1WaitCDF is Erlang's M/D/1 waiting-time distribution with arrival rate lam and
// service s: P(W ≤ x) = (1−ρ)·Σ_{k=0}^{⌊x/s⌋} (λ(ks−x))^k/k!·e^{−λ(ks−x)}.
func md1WaitCDF(x, lam, s float64) float64 {
	rho := lam * s
	sum := 0.0
	for k := 0; float64(k)*s <= x; k++ {
		u := lam * (float64(k)*s - x)
		lg, _ := math.Lgamma(float64(k) + 1)
		term := math.Exp(-u - lg)
		if k > 0 {
			term *= math.Pow(math.Abs(u), float64(k))
			if u < 0 && k%2 == 1 {
				term = -term
			}
		}
		sum += term
	}
	return (1 - rho) * sum
}

// openQueueCheck asserts a measured quantity within 3 % of theory, with a
// standard error reported beside it.
func openQueueCheck(t *testing.T, what string, rho, got, want, se float64) {
	t.Helper()
	if math.IsNaN(se) || !(se > 0) || math.Abs(got-want) > 0.03*want {
		t.Errorf("ρ=%v: %s %.3f, theory %.3f (SE %.3f, allowed ±%.3f)", rho, what, got, want, se, 0.03*want)
	}
}

// md1Periods is the number of W1 stream periods pooled per load: enough that two
// batch-means standard errors of the mean and p90 wait stay inside the 3 %
// tolerance. The error of one frozen path is a sampling error, not a bias of the
// stratified stream: at ρ = 0.9 the mean wait is −5.0 % (SE 2.1 %) over 48
// measured periods and −1.5 … −2.0 % (SE 1.3 … 1.6 %) over any of 96 … 127; at
// ρ = 0.8 −2.4 % (SE 1.2 %) over 48 and within 0.6 % (SE 0.8 %) over 96 … 127.
var md1Periods = map[float64]int{0.5: 48, 0.8: 96, 0.9: 120}

// TestMD1OpenLoop: a one-sequence engine with osl = 1 under the W1 stream is an
// M/D/1 queue; mean and p90 waiting time within 3 % of theory at ρ = 0.5, 0.8,
// 0.9, over md1Periods whole stream periods after a warm-up period, with the
// batch-means standard error reported beside each quantile.
func TestMD1OpenLoop(t *testing.T) {
	tm := timing.Constant{Ms: 20}
	e := testEngine(t, engine.VLLM, func(e *engine.Spec) { e.MaxNumSeqs = 1; e.AsyncScheduling = false })
	for _, rho := range []float64{0.5, 0.8, 0.9} {
		t.Run(fmt.Sprintf("rho=%v", rho), func(t *testing.T) {
			lam := rho / tm.Ms // per ms
			w := workload.Spec{ISL: 512, OSL: 1, RateRPS: lam * 1000, NumRequests: (md1Periods[rho] + 1) * workload.ArrivalStrata}
			r := quant(t, w, e, tm)
			wait := r.TTFTSteady.Shift(-tm.Ms)
			wantMean := rho * tm.Ms / (2 * (1 - rho))
			// Scan upwards (Erlang's alternating series loses precision far in the tail).
			hi := 0.0
			for md1WaitCDF(hi, lam, tm.Ms) < 0.9 {
				hi += tm.Ms / 2000
			}
			se := r.Diagnostics.QuantileSE
			if len(se) == 0 || r.Columns(1)["ttft_steady_p90_se"] != se["ttft_steady_p90"] {
				t.Fatalf("ρ=%v: no standard errors beside the quantiles: %v", rho, se)
			}
			if got := r.ThroughputRPS; !near(got, lam*1000, 1e-9) {
				t.Errorf("ρ=%v: throughput %v, want the nominal %v over whole periods", rho, got, lam*1000)
			}
			openQueueCheck(t, "mean wait", rho, wait.Mean(), wantMean, se["ttft_steady_mean"])
			openQueueCheck(t, "p90 wait", rho, wait.Quantile(0.9), hi, se["ttft_steady_p90"])
			s, err := Screening(w, e, tm)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.TTFTSteady.Mean() - tm.Ms; !near(got, wantMean, 0.05) {
				t.Errorf("ρ=%v: screening mean wait %v, M/D/1 %v", rho, got, wantMean)
			}
			t.Logf("ρ=%v: mean %.3f ± %.3f (M/D/1 %.3f), p90 %.3f ± %.3f (M/D/1 %.3f), screening mean %.3f", rho, wait.Mean(), se["ttft_steady_mean"], wantMean, wait.Quantile(0.9), se["ttft_steady_p90"], hi, s.TTFTSteady.Mean()-tm.Ms)
		})
	}
}

// TestScreeningOwnPrefillIsPure: the screening TTFT's own-prefill term is the pure
// prefill of the request's chunks, not a mixed-pass price, even where the two
// differ (QUEUEING.md §9); the riding decode rows are a separate term.
func TestScreeningOwnPrefillIsPure(t *testing.T) {
	tm := timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.5, CtxMsPerToken: 1e-4}
	e := testEngine(t, engine.VLLM, func(e *engine.Spec) { e.MaxNumBatchedTokens = 2048; e.AsyncScheduling = false })
	w := workload.Spec{ISL: 5000, OSL: 200, Prefix: 1000, Concurrency: 16}
	s, err := ScreeningWith(w, e, tm, Options{}) // no client round trip: pass-aligned arrivals
	if err != nil {
		t.Fatal(err)
	}
	d := s.Diagnostics
	pure := 0.0 // chunks of the budget left beside the decode rows, from the prefix on
	chunk := 2048 - int(math.Round(15*199.0/(199+2)))
	for pos := 1000; pos < 5000; pos += chunk {
		pure += tm.BaseMs + tm.PrefillMsPerToken*float64(min(chunk, 5000-pos))
	}
	if !near(d.OwnPrefillMs, pure, 1e-12) {
		t.Errorf("own prefill %v, want the pure prefill %v", d.OwnPrefillMs, pure)
	}
	if !(d.RideMs > 0) || !(d.TMixMs > tm.BaseMs+tm.PrefillMsPerToken*float64(chunk)) {
		t.Errorf("ride %v, t_mix %v: the mixed pass must differ from the pure one here", d.RideMs, d.TMixMs)
	}
	if got := s.TTFTSteady.Min(); !near(got, d.OwnPrefillMs+d.RideMs, 1e-12) {
		t.Errorf("TTFT min %v, want own %v + ride %v (sync, T = 0: no residual)", got, d.OwnPrefillMs, d.RideMs)
	}
}
