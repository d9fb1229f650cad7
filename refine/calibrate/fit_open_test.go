package calibrate

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// TestFitRecoversScalesOpenRuns: open-loop measurements (Poisson sends at
// several rates, with and without a client bound) made by the model under known
// prefill and decode scales are fitted back as the closed runs are
// (TestFitRecoversScales), although their points' screening tier — the mapped
// descent's surrogate — is a closed loop of the point's batch.
func TestFitRecoversScalesOpenRuns(t *testing.T) {
	ev := linearEval{timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.0001}}
	truth := refine.PassAdjust{PrefillScale: 1.4, DecodeScale: 0.8}
	var ss []Sample
	id := int64(1)
	for _, isl := range []int{512, 2048} {
		for _, rate := range []float64{2, 8, 20} {
			for _, bound := range []int{0, 4} {
				batch := 128
				if bound > 0 {
					batch = bound
				}
				in := store.PointInputs{Model: "m", System: "s", Backend: "vllm", Version: "1", ISL: isl, OSL: 32, Batch: batch,
					MaxNumBatchedTokens: isl + batch + 1500}
				run := &queueing.FiniteRun{Requests: 100, Open: true, RateRPS: rate, MaxConcurrency: bound, Paths: queueing.OpenPaths(100)}
				q, err := ev.QuantitativeRunSummaryAdjusted(context.Background(), in, truth, *run)
				if err != nil {
					t.Fatal(err)
				}
				ss = append(ss, Sample{MeasurementID: id, In: in, TTFT: q.V[store.QTTFTSteadyMean], TPOT: q.V[store.QTPOTMean],
					ttftCol: store.QTTFTSteadyMean, tpotCol: store.QTPOTMean, Run: run})
				id++
			}
		}
	}
	fits, err := Fit(context.Background(), ev, ss, FitOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(fits) != 1 {
		t.Fatalf("%d groups", len(fits))
	}
	g := fits[0]
	t.Logf("MAPE before %.2f/%.2f, fitted %.2f/%.2f (adjust %+v)", g.TTFTBefore, g.TPOTBefore, g.TTFTFit, g.TPOTFit, g.Adjust)
	if g.TTFTBefore < 10 || g.TTFTFit > 5 || g.TPOTFit > 3 {
		t.Errorf("MAPE before %.2f/%.2f, fitted %.2f/%.2f (adjust %+v)", g.TTFTBefore, g.TPOTBefore, g.TTFTFit, g.TPOTFit, g.Adjust)
	}
}
