package queueing

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestStaggerMixture: a fixed-shape closed loop that the burst locks into one
// cohort (all 8 prompts in one pass, forever) settles into desynchronized cycles
// when the clients start spread out; the mixture (the default since issue 9) reports those, flags them,
// keeps the burst's transient, stays deterministic and above the screening lo.
func TestStaggerMixture(t *testing.T) {
	tm := timing.Linear{BaseMs: 8, PrefillMsPerToken: 0.03, DecodeMsPerRow: 0.02, CtxMsPerToken: 1e-5}
	e := testEngine(t, engine.VLLM, nil)
	w := workload.Spec{ISL: 1024, OSL: 512, Concurrency: 8}
	burst, err := QuantitativeWith(context.Background(), w, e, tm, Options{})
	if err != nil {
		t.Fatal(err)
	}
	locked := tm.BaseMs + tm.PrefillMsPerToken*8*1024 // one pass with the whole cohort
	if !near(burst.TTFTSteady.Mean(), locked, 1e-9) {
		t.Fatalf("burst steady TTFT %v, want the locked cohort pass %v", burst.TTFTSteady.Mean(), locked)
	}
	mix, err := QuantitativeWith(context.Background(), w, e, tm, Options{StaggerPhases: 4})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := QuantitativeWith(context.Background(), w, e, tm, Options{StaggerPhases: 4})
	if mix.TTFTSteady.Mean() != again.TTFTSteady.Mean() || mix.ITL.Quantile(0.99) != again.ITL.Quantile(0.99) {
		t.Error("stagger mixture is not deterministic")
	}
	if mix.Diagnostics.StaggerPhases != 4 || len(mix.Diagnostics.Windows) != 4 || mix.Diagnostics.SteadyRequests < burst.Diagnostics.SteadyRequests/2 {
		t.Errorf("diagnostics %+v", mix.Diagnostics)
	}
	if mix.TTFTTransient.Mean() != burst.TTFTTransient.Mean() || mix.TTFTTransient.Max() != burst.TTFTTransient.Max() {
		t.Error("the transient must stay the burst's")
	}
	if !(mix.TTFTSteady.Mean() < 0.5*locked) {
		t.Errorf("staggered steady TTFT %v, want well below the locked %v", mix.TTFTSteady.Mean(), locked)
	}
	s, _ := Screening(w, e, tm)
	if s.TTFTSteadyP99Lo > mix.TTFTSteady.Min() {
		t.Errorf("screening lo %v above the mixture's minimum %v", s.TTFTSteadyP99Lo, mix.TTFTSteady.Min())
	}
	if got := mix.ThroughputRPS / 1000 * mix.E2E.Mean(); !near(got, 8, 0.03) {
		t.Errorf("Little's law over the mixture: %v, want 8 within 3%%", got)
	}
	if _, err := QuantitativeWith(context.Background(), w, e, tm, Options{StaggerPhases: 99}); err == nil || !IsInputError(err) {
		t.Errorf("stagger_phases 99: %v", err)
	}
}
