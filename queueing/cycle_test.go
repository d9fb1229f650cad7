package queueing

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// issue9Example is the burst-started example of issue 9 part 1: vLLM sync, C 8,
// isl 1024, osl 128, budget 2048, linear 2 / 0.004 / 0.05 / 0.00002. Its
// per-generation mean TTFT is 9.73, 8.41, 8.41, 7.91 for generations 4–7 (the old
// window [4, 12) measured that transient), then 6.598 from generation 8 on.
func issue9Example(t *testing.T) (workload.Spec, engine.Spec, timing.Timing) {
	e := testEngine(t, engine.VLLM, func(e *engine.Spec) {
		e.MaxNumBatchedTokens = 2048
		e.AsyncScheduling = false
	})
	return workload.Spec{ISL: 1024, OSL: 128, Concurrency: 8},
		e, timing.Linear{BaseMs: 2, PrefillMsPerToken: 0.004, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.00002}
}

// TestLimitCycleBurstExample: with the burst and no client round trip, the steady
// window starts on the limit cycle (generation 8, period 1) and reports its TTFT
// mean 6.598 ms, not the transient's.
func TestLimitCycleBurstExample(t *testing.T) {
	w, e, tm := issue9Example(t)
	r, err := QuantitativeWith(context.Background(), w, e, tm, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.TTFTSteady.Mean(); math.Abs(got-6.598) > 5e-4 {
		t.Errorf("steady TTFT mean %.4f ms, want the limit cycle's 6.598", got)
	}
	ws := r.Diagnostics.Windows
	if len(ws) != 1 || !ws[0].Found || ws[0].Start != 8 || ws[0].Period != 1 || ws[0].Length != 16 || r.Diagnostics.LimitCycle != "" {
		t.Errorf("window %+v (note %q), want the cycle found at generation 8, period 1, 16 generations", ws, r.Diagnostics.LimitCycle)
	}
	if r.Diagnostics.SteadyRequests != 8*16 {
		t.Errorf("steady requests %d, want 128", r.Diagnostics.SteadyRequests)
	}
}

// TestSteadyWindowRule: the shared rule on hand-made samples — a repetition up to a
// time shift is found with the smallest period; none before the horizon gives the
// last window generations and Found = false; incomplete records end the search.
func TestSteadyWindowRule(t *testing.T) {
	gen := func(g int, shift, ttft0, ttft1 float64) []LoopSample {
		return []LoopSample{{Slot: 0, Generation: g, ArrivalMs: shift, TTFTMs: ttft0, E2EMs: 10},
			{Slot: 1, Generation: g, ArrivalMs: shift + 3, TTFTMs: ttft1, E2EMs: 12}}
	}
	var s []LoopSample
	s = append(s, gen(1, 10, 5, 6)...)
	s = append(s, gen(2, 30, 4, 6)...)
	s = append(s, gen(3, 50, 4.5, 6)...)
	s = append(s, gen(4, 70, 4, 6)...) // repeats generation 2 (period 2)
	s = append(s, gen(5, 90, 4.5, 6)...)
	if got := SteadyWindow(s, 2, 3, 30); got != (Window{Start: 2, Length: 4, Period: 2, Found: true, Horizon: 30}) {
		t.Errorf("periodic: %+v", got)
	}
	if got := SteadyWindow(s[:6], 2, 2, 3); got != (Window{Start: 1, Length: 2, Horizon: 3}) {
		t.Errorf("horizon: %+v", got)
	}
	if got := SteadyWindow(s[:5], 2, 8, 30); got != (Window{Start: 1, Length: 2, Horizon: 3}) {
		t.Errorf("incomplete: %+v", got)
	}
}

// TestDefaultOptions: Quantitative is the product default (the stagger mixture and
// a 1 ms client round trip); Little's law holds over the client cycle including the
// round trip; the round trip is validated.
func TestDefaultOptions(t *testing.T) {
	w, e, tm := issue9Example(t)
	a, err := Quantitative(context.Background(), w, e, tm)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := QuantitativeWith(context.Background(), w, e, tm, DefaultOptions())
	if a.TTFTSteady.Mean() != b.TTFTSteady.Mean() || a.Diagnostics.StaggerPhases != DefaultStaggerPhases || len(a.Diagnostics.Windows) != DefaultStaggerPhases {
		t.Errorf("Quantitative is not DefaultOptions: %+v", a.Diagnostics)
	}
	for _, o := range []Options{{ClientRTTMs: 1}, {ClientRTTMs: 3.5}, DefaultOptions()} {
		r, err := QuantitativeWith(context.Background(), w, e, tm, o)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.ThroughputRPS / 1000 * (r.E2E.Mean() + o.ClientRTTMs); math.Abs(got-8)/8 > 0.01 {
			t.Errorf("%+v: Little's law X·(E2E + rtt) = %v, want 8 within 1%%", o, got)
		}
	}
	_, err = QuantitativeWith(context.Background(), w, e, tm, Options{ClientRTTMs: math.NaN()})
	if err == nil || !IsInputError(err) || !strings.Contains(err.Error(), "client_rtt_ms") {
		t.Errorf("NaN rtt: %v", err)
	}
}
