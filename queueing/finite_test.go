package queueing

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestFiniteLockedCohort: a burst that locks all C prompts into one pass keeps the
// cohort for the whole run (no client round trip): every one of the N requests
// has the locked TTFT, and one round (N = C) is exactly the burst's transient.
func TestFiniteLockedCohort(t *testing.T) {
	tm := timing.Linear{BaseMs: 8, PrefillMsPerToken: 0.03, DecodeMsPerRow: 0.02, CtxMsPerToken: 1e-5}
	e := engine(t, BackendVLLM, nil)
	w := workload.Spec{ISL: 1024, OSL: 512, Concurrency: 8}
	locked := tm.BaseMs + tm.PrefillMsPerToken*8*1024
	r, err := QuantitativeFinite(context.Background(), w, e, tm, Options{}, FiniteRun{Requests: 40, Warmup: 16})
	if err != nil {
		t.Fatal(err)
	}
	if r.Diagnostics.SteadyRequests != 40 || !near(r.TTFTSteady.Min(), locked, 1e-12) || !near(r.TTFTSteady.Max(), locked, 1e-12) {
		t.Fatalf("finite run: %d requests, TTFT [%v, %v], want 40 at the locked %v", r.Diagnostics.SteadyRequests, r.TTFTSteady.Min(), r.TTFTSteady.Max(), locked)
	}
	if r.Diagnostics.FiniteRun == nil || *r.Diagnostics.FiniteRun != (FiniteRun{Requests: 40, Warmup: 16}) {
		t.Errorf("diagnostics finite_run = %+v", r.Diagnostics.FiniteRun)
	}
	// Little's law over the run with no gaps between a completion and the next send:
	// 8 clients busy from 0 to the last completion.
	if got := r.ThroughputRPS / 1000 * r.E2E.Mean(); !near(got, 8, 1e-9) {
		t.Errorf("throughput × mean E2E = %v, want 8", got)
	}
	one, err := QuantitativeFinite(context.Background(), w, e, tm, Options{}, FiniteRun{Requests: 8})
	if err != nil {
		t.Fatal(err)
	}
	burst, err := QuantitativeWith(context.Background(), w, e, tm, Options{StaggerPhases: 4})
	if err != nil {
		t.Fatal(err)
	}
	if one.TTFTSteady.Mean() != burst.TTFTTransient.Mean() || one.TTFTSteady.Max() != burst.TTFTTransient.Max() {
		t.Errorf("one round: TTFT mean %v max %v, want the burst transient's %v, %v", one.TTFTSteady.Mean(), one.TTFTSteady.Max(),
			burst.TTFTTransient.Mean(), burst.TTFTTransient.Max())
	}
}

// TestFiniteBurstWeighs: with a client round trip the burst's cohort dissolves;
// the run's mean TTFT lies above the steady burst-started limit cycle's and
// approaches it as the run gets longer (the burst weighs C/N), and a run shorter
// than C sends only N requests.
func TestFiniteBurstWeighs(t *testing.T) {
	tm := timing.Linear{BaseMs: 8, PrefillMsPerToken: 0.03, DecodeMsPerRow: 0.02, CtxMsPerToken: 1e-5}
	e := engine(t, BackendVLLM, nil)
	w := workload.Spec{ISL: 2048, OSL: 64, Concurrency: 16}
	o := Options{ClientRTTMs: 1}
	steady, err := QuantitativeWith(context.Background(), w, e, tm, o)
	if err != nil {
		t.Fatal(err)
	}
	prev := 0.0
	for i, n := range []int{16 * 2, 16 * 20, 16 * 200} {
		r, err := QuantitativeFinite(context.Background(), w, e, tm, o, FiniteRun{Requests: n})
		if err != nil {
			t.Fatal(err)
		}
		m := r.TTFTSteady.Mean()
		if i > 0 && !(m < prev) {
			t.Errorf("N %d: mean TTFT %v not below the shorter run's %v", n, m, prev)
		}
		prev = m
		if r.Diagnostics.SteadyRequests != n {
			t.Errorf("N %d: %d requests measured", n, r.Diagnostics.SteadyRequests)
		}
	}
	if !near(prev, steady.TTFTSteady.Mean(), 0.05) {
		t.Errorf("N 3200: mean TTFT %v, want the steady %v within 5%%", prev, steady.TTFTSteady.Mean())
	}
	few, err := QuantitativeFinite(context.Background(), w, e, tm, o, FiniteRun{Requests: 5})
	if err != nil {
		t.Fatal(err)
	}
	if few.Diagnostics.SteadyRequests != 5 || few.TTFTTransient.TotalWeight() != 5 {
		t.Errorf("N 5 < C 16: %d measured, %v transient", few.Diagnostics.SteadyRequests, few.TTFTTransient.TotalWeight())
	}
}

func TestFiniteErrors(t *testing.T) {
	tm := timing.Linear{BaseMs: 8, PrefillMsPerToken: 0.03, DecodeMsPerRow: 0.02}
	e := engine(t, BackendVLLM, nil)
	for _, c := range []struct {
		w    workload.Spec
		f    FiniteRun
		want string
	}{
		{workload.Spec{ISL: 64, OSL: 8, Concurrency: 2}, FiniteRun{}, "finite run requests = 0: must be in 1..262144 (the benchmark's num_prompts / request count)"},
		{workload.Spec{ISL: 64, OSL: 8, Concurrency: 2}, FiniteRun{Requests: 4, Warmup: -1}, "finite run warmup = -1: must be in 0..262144"},
		{workload.Spec{ISL: 64, OSL: 8, RateRPS: 2}, FiniteRun{Requests: 4}, "workload: a finite benchmark run needs a closed loop (concurrency > 0), got concurrency 0"},
	} {
		_, err := QuantitativeFinite(context.Background(), c.w, e, tm, Options{}, c.f)
		if err == nil || !IsInputError(err) || err.Error() != c.want {
			t.Errorf("%+v: %v, want input error %q", c.f, err, c.want)
		}
	}
}
