package queueing

import (
	"context"
	"math"
	"slices"
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

// TestClientPhases: each phase's first arrivals are C sorted draws in
// [0, spread), the same on every call, different between phases, roughly
// uniform (mean near spread/2); phase 0 or spread 0 is the burst.
func TestClientPhases(t *testing.T) {
	const C, spread = 4096, 1000.0
	a, b := ClientPhases(C, 1, spread), ClientPhases(C, 2, spread)
	if !slices.Equal(a, ClientPhases(C, 1, spread)) {
		t.Fatal("ClientPhases is not deterministic")
	}
	// Independent streams: no offset of phase 1 recurs in phase 2 (streams from
	// consecutive raw seeds would share all but one).
	shared := 0
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); ok {
			shared++
		}
	}
	if shared > 0 {
		t.Fatalf("phases 1 and 2 share %d of %d offsets: their streams overlap", shared, C)
	}
	for _, p := range [][]float64{a, b} {
		if len(p) != C || !slices.IsSorted(p) || p[0] < 0 || p[C-1] >= spread {
			t.Fatalf("offsets not C sorted values in [0, %v): len %d, first %v, last %v", spread, len(p), p[0], p[C-1])
		}
		mean := 0.0
		for _, x := range p {
			mean += x / C
		}
		if math.Abs(mean-spread/2) > 4*spread/math.Sqrt(12*C) { // 4 standard errors of a uniform mean
			t.Errorf("mean offset %v, want %v ± %v", mean, spread/2, 4*spread/math.Sqrt(12*C))
		}
	}
	for _, z := range [][]float64{ClientPhases(8, 0, spread), ClientPhases(8, 3, 0), ClientPhases(8, 3, math.Inf(1))} {
		if !slices.Equal(z, make([]float64, 8)) {
			t.Errorf("burst offsets %v, want all 0", z)
		}
	}
	if got := ClientPhases(0, 1, spread); len(got) != 0 {
		t.Errorf("no clients: %v", got)
	}
}

// TestStaggerPhasesQueue: desynchronised clients have independent phases, so
// prompts meet and queue at a prefill utilisation well below 1. At C 48, isl
// 8192, osl 1024 the prefill pool is busy ≈ 50 % of the time: evenly spaced
// starts (the rule before Round 11) settled into cycles where no prompt ever
// waited (TTFT mean 237.7, p99 236.6 ms against a lone prefill of 214.8); the
// random phases' mixture must show the queue in its mean and its tail (351.8,
// 646.2).
func TestStaggerPhasesQueue(t *testing.T) {
	tm := timing.Linear{BaseMs: 10, PrefillMsPerToken: 0.025, DecodeMsPerRow: 0.02}
	e := testEngine(t, engine.VLLM, func(e *engine.Spec) { e.MaxNumBatchedTokens = 8192 + 48 + 1500 })
	w := workload.Spec{ISL: 8192, OSL: 1024, Concurrency: 48}
	lone := quant(t, workload.Spec{ISL: 8192, OSL: 1024, Concurrency: 1}, e, tm).TTFTSteady.Mean()
	mix, err := QuantitativeWith(context.Background(), w, e, tm, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	busy := mix.ThroughputRPS / 1000 * lone
	if busy < 0.4 || busy > 0.7 {
		t.Fatalf("prefill utilisation %.2f, want ≈ 0.5 (the test's premise)", busy)
	}
	if m, p99 := mix.TTFTSteady.Mean(), mix.TTFTSteady.Quantile(0.99); !(m > 1.1*lone) || !(p99 > 1.8*lone) {
		t.Errorf("steady TTFT mean %.1f, p99 %.1f ms against a lone prefill of %.1f: want the queue of independent phases (mean > 1.1×, p99 > 1.8×)", m, p99, lone)
	}
}
