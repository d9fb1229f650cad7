package calibrate

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// TestFallbackVersions: the versions tried after the mapped one cannot price a
// point run outwards from it, nearest first and the newer of two equally near
// first, without the mapped version itself or a development snapshot.
func TestFallbackVersions(t *testing.T) {
	avail := []string{"0.24.0", "0.1.dev19262", "0.19.0", "0.22.0", "0.14.0"}
	for _, c := range []struct {
		primary string
		want    []string
	}{
		{"0.14.0", []string{"0.19.0", "0.22.0", "0.24.0"}},
		{"0.19.0", []string{"0.22.0", "0.14.0", "0.24.0"}},
		{"0.24.0", []string{"0.22.0", "0.19.0", "0.14.0"}},
		{"0.1.dev19262", []string{"0.14.0", "0.19.0", "0.22.0", "0.24.0"}},
		{"0.30.0", nil}, // not an available version: nothing to run out from
	} {
		if got := FallbackVersions(c.primary, avail); !slices.Equal(got, c.want) {
			t.Errorf("FallbackVersions(%s) = %v, want %v", c.primary, got, c.want)
		}
	}
	if got := FallbackVersions("0.19.0", []string{"0.19.0"}); len(got) != 0 {
		t.Errorf("one version: fallbacks %v, want none", got)
	}
}

// TestShortMiss: a version mapping quotes the innermost clause of the miss.
func TestShortMiss(t *testing.T) {
	why := "no perf data for this point: legacy estimate of agg tp1: pass timing: probe pass 0: generation_attention: generation attention data missing for window=128 (h200_sxm vllm 0.14.0)"
	if got, want := shortMiss(why), "generation attention data missing for window=128 (h200_sxm vllm 0.14.0)"; got != want {
		t.Errorf("shortMiss = %q, want %q", got, want)
	}
	if got := []rune(shortMiss(strings.Repeat("é", 400))); len(got) != 160 || string(got[157:]) != "..." {
		t.Errorf("a long miss is cut to 160 runes ending in ...: %d runes", len(got))
	}
}

// linearEval is a refine evaluator over a synthetic linear timing: the real
// queueing tiers, the calibration applied through PassAdjust.Apply.
type linearEval struct{ t timing.Linear }

func (l linearEval) Name() string { return "linear-test" }
func (l linearEval) Resolve(context.Context, string, string, string, string) (refine.Resolved, error) {
	return refine.Resolved{}, errors.New("not used")
}
func (l linearEval) Legacy(context.Context, store.PointInputs) (store.Legacy, error) {
	return store.Legacy{}, errors.New("not used")
}
func (l linearEval) Screen(ctx context.Context, in store.PointInputs) (store.Queueing, error) {
	return l.ScreenAdjusted(ctx, in, refine.Identity())
}
func (l linearEval) Quantitative(ctx context.Context, in store.PointInputs) (store.Quantitative, error) {
	return l.QuantitativeAdjusted(ctx, in, refine.Identity())
}

func (l linearEval) setup(in store.PointInputs, adj refine.PassAdjust) (workload.Spec, engine.Spec, timing.Timing, error) {
	e, err := engine.Defaults(in.Backend, "")
	if err != nil {
		return workload.Spec{}, e, nil, err
	}
	e.MaxNumBatchedTokens, e.MaxNumSeqs = in.MaxNumBatchedTokens, in.Batch
	tm := adj.Apply(&e, l.t)
	return workload.Spec{ISL: in.ISL, OSL: in.OSL, Concurrency: in.Batch}, e, tm, nil
}

func (l linearEval) QuantitativeAdjusted(ctx context.Context, in store.PointInputs, adj refine.PassAdjust) (store.Quantitative, error) {
	w, e, tm, err := l.setup(in, adj)
	if err != nil {
		return store.Quantitative{}, err
	}
	r, err := queueing.Quantitative(ctx, w, e, tm)
	if err != nil {
		return store.Quantitative{}, err
	}
	var q store.Quantitative
	q.V[store.QTTFTSteadyMean], q.V[store.QTPOTMean] = r.TTFTSteady.Mean(), r.TPOT.Mean()
	return q, nil
}

func (l linearEval) QuantitativeRunAdjusted(ctx context.Context, in store.PointInputs, adj refine.PassAdjust, run queueing.FiniteRun) (store.Quantitative, error) {
	return l.runWith(ctx, in, adj, run, queueing.QuantitativeFinite)
}

func (l linearEval) QuantitativeRunSummaryAdjusted(ctx context.Context, in store.PointInputs, adj refine.PassAdjust, run queueing.FiniteRun) (store.Quantitative, error) {
	return l.runWith(ctx, in, adj, run, queueing.QuantitativeFiniteSummary)
}

func (l linearEval) runWith(ctx context.Context, in store.PointInputs, adj refine.PassAdjust, run queueing.FiniteRun,
	finite func(context.Context, workload.Spec, engine.Spec, timing.Timing, queueing.Options, queueing.FiniteRun) (*queueing.Report, error)) (store.Quantitative, error) {
	w, e, tm, err := l.setup(in, adj)
	if err != nil {
		return store.Quantitative{}, err
	}
	r, err := finite(ctx, w, e, tm, queueing.DefaultOptions(), run)
	if err != nil {
		return store.Quantitative{}, err
	}
	var q store.Quantitative
	q.V[store.QTTFTSteadyMean], q.V[store.QTPOTMean] = r.TTFTSteady.Mean(), r.TPOT.Mean()
	return q, nil
}

func (l linearEval) ScreenAdjusted(_ context.Context, in store.PointInputs, adj refine.PassAdjust) (store.Queueing, error) {
	w, e, tm, err := l.setup(in, adj)
	if err != nil {
		return store.Queueing{}, err
	}
	r, err := queueing.Screening(w, e, tm)
	if err != nil {
		return store.Queueing{}, err
	}
	var q store.Queueing
	q.V[store.QTTFTSteadyMean], q.V[store.QTPOTMean] = r.TTFTSteady.Mean(), r.TPOT.Mean()
	return q, nil
}

// synthSamples are "measurements" made by the model itself under truth: each
// row a benchmark run of 20·C requests, as the silicon rows are predicted (the
// calibration default). Not the steady state: its stagger mixture of independent
// random client phases settles into limit cycles that jump with the pass timing,
// which makes a fit's objective rugged, and these tests are about the fit.
func synthSamples(t *testing.T, ev linearEval, truth refine.PassAdjust) []Sample {
	t.Helper()
	var ss []Sample
	for _, isl := range []int{512, 2048} {
		for _, c := range []int{1, 4, 16} {
			ss = append(ss, modelMade(t, ev, truth, int64(len(ss)+1), synthPoint(isl, c), queueing.FiniteRun{Requests: 20 * c}))
		}
	}
	return ss
}

// synthPoint is the synthetic rows' point: vLLM, osl 32, batch c, the
// aiconfigurator budget batch + isl + 1500.
func synthPoint(isl, c int) store.PointInputs {
	return store.PointInputs{Model: "m", System: "s", Backend: "vllm", Version: "1", ISL: isl, OSL: 32, Batch: c,
		MaxNumBatchedTokens: isl + c + 1500}
}

// modelMade is measurement id made by the model: run at point in under truth,
// its TTFT and TPOT means the measured values.
func modelMade(t *testing.T, ev linearEval, truth refine.PassAdjust, id int64, in store.PointInputs, run queueing.FiniteRun) Sample {
	t.Helper()
	q, err := ev.QuantitativeRunSummaryAdjusted(context.Background(), in, truth, run)
	if err != nil {
		t.Fatal(err)
	}
	return Sample{MeasurementID: id, In: in, TTFT: q.V[store.QTTFTSteadyMean], TPOT: q.V[store.QTPOTMean],
		ttftCol: store.QTTFTSteadyMean, tpotCol: store.QTPOTMean, Run: &run}
}

// TestFitRecoversScales: measurements made by the model with known prefill and
// decode scales are fitted back from the
// identity, held-out folds stay close, and the fit is deterministic. (The
// schedule is piecewise in the timing, so the cost has plateaus: within 5 % / 3 %
// MAPE rather than exactly.)
func TestFitRecoversScales(t *testing.T) {
	ev := linearEval{timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.0001}}
	truth := refine.PassAdjust{PrefillScale: 1.4, DecodeScale: 0.8, PassOverheadMs: 0, RequestOverheadMs: 0}
	ss := synthSamples(t, ev, truth)
	fits, err := Fit(context.Background(), ev, ss, FitOptions{Holdout: 3, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(fits) != 1 {
		t.Fatalf("%d groups", len(fits))
	}
	g := fits[0]
	if g.TTFTBefore < 10 || g.TTFTFit > 5 || g.TPOTFit > 3 {
		t.Errorf("MAPE before %.2f/%.2f, fitted %.2f/%.2f (adjust %+v)", g.TTFTBefore, g.TPOTBefore, g.TTFTFit, g.TPOTFit, g.Adjust)
	}
	if !g.HasCV || g.TTFTCV > 15 || g.TPOTCV > 8 {
		t.Errorf("cross-validated MAPE %.2f/%.2f", g.TTFTCV, g.TPOTCV)
	}
	if math.Abs(g.Adjust.DecodeScale-0.8) > 0.05 {
		t.Errorf("decode scale %v, want ≈ 0.8", g.Adjust.DecodeScale)
	}
	// The refit reports its progress: one fit for the group, then one per fold.
	var progress [][2]int
	again, err := Fit(context.Background(), ev, synthSamples(t, ev, truth), FitOptions{Holdout: 3, Workers: 1,
		Progress: func(done, total int) { progress = append(progress, [2]int{done, total}) }})
	if err != nil || again[0].Adjust != g.Adjust {
		t.Errorf("refit %+v differs from %+v (%v)", again[0].Adjust, g.Adjust, err)
	}
	if want := [][2]int{{1, 4}, {2, 4}, {3, 4}, {4, 4}}; !slices.Equal(progress, want) {
		t.Errorf("fit progress %v, want %v", progress, want)
	}
	if _, err := Fit(context.Background(), ev, ss, FitOptions{Holdout: 1}); err == nil {
		t.Error("--holdout 1 accepted")
	}
}

// BenchmarkFit200: the fit of 200 synthetic rows under each loss (the acceptance
// bound is 30 s for 200 measured rows through the perf data).
func BenchmarkFit200(b *testing.B) {
	ev := linearEval{timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.0001}}
	var ss []Sample
	for i := range 200 {
		in := store.PointInputs{Model: "m", System: "s", Backend: "vllm", Version: "1", ISL: 256 + 64*(i%32), OSL: 64,
			Batch: 1 + i%16, MaxNumBatchedTokens: 8192}
		ss = append(ss, Sample{MeasurementID: int64(i + 1), In: in, TTFT: 50 + float64(i%7), TPOT: 5 + float64(i%3),
			ttftCol: store.QTTFTSteadyMean, tpotCol: store.QTPOTMean})
	}
	for _, loss := range []string{LossL1, LossL2} {
		b.Run(loss, func(b *testing.B) {
			for b.Loop() {
				if _, err := Fit(context.Background(), ev, ss, FitOptions{Loss: loss}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestFitFiniteRuns: measurements of benchmark runs (20 rounds, burst start) made
// by the model under known scales are fitted back through the finite-run path,
// and predicted by the steady state instead they are not (the burst's weight is
// workload semantics the scales cannot absorb).
func TestFitFiniteRuns(t *testing.T) {
	ev := linearEval{timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.0001}}
	truth := refine.PassAdjust{PrefillScale: 1.4, DecodeScale: 0.8}
	var ss []Sample
	for _, isl := range []int{512, 2048} {
		for _, c := range []int{1, 4, 16} {
			ss = append(ss, modelMade(t, ev, truth, int64(len(ss)+1), synthPoint(isl, c), queueing.FiniteRun{Requests: 20 * c, Warmup: 2 * c}))
		}
	}
	fits, err := Fit(context.Background(), ev, ss, FitOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if g := fits[0]; g.TTFTFit > 5 || g.TPOTFit > 3 {
		t.Errorf("finite runs: fitted MAPE %.2f/%.2f (adjust %+v)", g.TTFTFit, g.TPOTFit, g.Adjust)
	}
}

// BenchmarkFit200Runs: BenchmarkFit200 with every row a 20-round benchmark run
// (how measured silicon rows are predicted): locked, the clients locked for the
// whole run (--run benchmark), and desync, the burst then desynchronised
// clients (--run desync, the stagger mixture).
func BenchmarkFit200Runs(b *testing.B) {
	ev := linearEval{timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.0001}}
	for _, desync := range []bool{false, true} {
		var ss []Sample
		for i := range 200 {
			in := store.PointInputs{Model: "m", System: "s", Backend: "vllm", Version: "1", ISL: 256 + 64*(i%32), OSL: 64,
				Batch: 1 + i%16, MaxNumBatchedTokens: 8192}
			ss = append(ss, Sample{MeasurementID: int64(i + 1), In: in, TTFT: 50 + float64(i%7), TPOT: 5 + float64(i%3),
				ttftCol: store.QTTFTSteadyMean, tpotCol: store.QTPOTMean,
				Run: &queueing.FiniteRun{Requests: 20 * in.Batch, Warmup: 2 * in.Batch, Desync: desync}})
		}
		name := "locked"
		if desync {
			name = "desync"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if _, err := Fit(context.Background(), ev, ss, FitOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
