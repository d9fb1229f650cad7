package gate

import (
	"context"
	"math"
	"testing"

	"github.com/aicdb/aicdb/queueing"
)

// TestGateFiniteDesync gates the desynchronised benchmark run (accuracy and
// calibrate --run desync) on the finite families under the product defaults
// (1 ms round trip, the stagger mixture): the model's desync run
// (queueing.QuantitativeFinite of a FiniteRun.Desync run) has the mean TTFT and
// TPOT of the same composition on the DES — the first min(C, N) requests of
// oracle.RunFiniteLoop, weight 1 each, and the DES's stagger-mixture steady
// state (RunFamily) for the other N − C — within 1e-9 (relative).
func TestGateFiniteDesync(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every finite family's burst and steady state on both sides")
	}
	ctx := context.Background()
	gated := 0
	for _, f := range FiniteFamilies() {
		if f.ClientRTTMs != queueing.DefaultClientRTTMs {
			continue // the product defaults only (the "· burst" twins run round trip 0)
		}
		w := f.Spec
		o := queueing.Options{ClientRTTMs: f.ClientRTTMs, StaggerPhases: queueing.DefaultStaggerPhases}
		run := f.Run
		run.Desync = true
		rep, err := queueing.QuantitativeFinite(ctx, w, f.Engine, f.Timing, o, run)
		if err != nil {
			t.Fatalf("%s: model: %v", f.Name, err)
		}
		// DES: the burst's generation from the finite loop.
		res, err := runDESFinite(ctx, f)
		if err != nil {
			t.Fatalf("%s: oracle: %v", f.Name, err)
		}
		sumTTFT, sumTPOT, n0 := 0.0, 0.0, 0
		for _, r := range res.Requests {
			if r.Generation != 0 {
				continue
			}
			n0++
			sumTTFT += r.TTFTMs
			if osl := len(r.TokenTimesMs); osl > 1 {
				sumTPOT += (r.FinishMs - r.ArrivalMs - r.TTFTMs) / float64(osl-1)
			}
		}
		// DES: the steady state driven the same way (stagger mixture, 1 ms round trip).
		sf := f.Family
		sf.StaggerPhases, sf.ClientRTTMs = queueing.DefaultStaggerPhases, queueing.DefaultClientRTTMs
		row := RunFamily(ctx, sf)
		if row.Err != nil {
			t.Fatalf("%s: steady: %v", f.Name, row.Err)
		}
		gated++
		rest := float64(f.Run.Requests - n0)
		N := float64(f.Run.Requests)
		wantTTFT := (sumTTFT + rest*row.Oracle.TTFTMean) / N
		wantTPOT := (sumTPOT + rest*row.Oracle.TPOTMean) / N
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"ttft_mean", rep.TTFTSteady.Mean(), wantTTFT}, {"tpot_mean", rep.TPOT.Mean(), wantTPOT}} {
			if math.Abs(c.got-c.want) > 1e-9*math.Abs(c.want) {
				t.Errorf("%s: %s model %.9g, DES composition %.9g (burst %d requests, steady %.9g)", f.Name, c.name, c.got, c.want, n0, row.Oracle.TTFTMean)
			}
		}
		t.Logf("%s: ttft_mean %.6g (locked run's burst %d + steady %.6g), tpot_mean %.6g", f.Name, rep.TTFTSteady.Mean(), n0, row.Oracle.TTFTMean, rep.TPOT.Mean())
	}
	if gated != len(finiteBase) {
		t.Errorf("%d families gated, want the %d finite bases", gated, len(finiteBase))
	}
}
