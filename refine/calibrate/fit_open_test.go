package calibrate

import (
	"context"
	"math"
	"testing"

	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/refine"
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
	for _, isl := range []int{512, 2048} {
		for _, rate := range []float64{2, 8, 20} {
			for _, bound := range []int{0, 4} {
				batch := 128 // unbounded: the profile's running cap
				if bound > 0 {
					batch = bound
				}
				run := queueing.FiniteRun{Requests: 100, Open: true, RateRPS: rate, MaxConcurrency: bound, Paths: queueing.OpenPaths(100)}
				ss = append(ss, modelMade(t, ev, truth, int64(len(ss)+1), synthPoint(isl, batch), run))
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
	// The prefill scale comes back; the decode scale trades with the per-pass
	// overhead these rows do not separate (0.746 beside 0.23 ms for 0.8 beside 0).
	if g.TTFTBefore < 10 || g.TTFTFit > 5 || g.TPOTFit > 3 || math.Abs(g.Adjust.PrefillScale/truth.PrefillScale-1) > 0.02 {
		t.Errorf("MAPE before %.2f/%.2f, fitted %.2f/%.2f (adjust %+v)", g.TTFTBefore, g.TPOTBefore, g.TTFTFit, g.TPOTFit, g.Adjust)
	}
}
