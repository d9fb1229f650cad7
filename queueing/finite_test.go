package queueing

import (
	"context"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestFiniteLockedCohort: the burst's first request reaches the idle engine alone
// and runs the first pass by itself (FiniteAdmitGapMs, SCHEDULERS.md §2.2); the
// other seven arrive during it and share the second pass. The two cohorts finish
// a pass apart and keep splitting in later rounds.
func TestFiniteLockedCohort(t *testing.T) {
	tm := timing.Linear{BaseMs: 8, PrefillMsPerToken: 0.03, DecodeMsPerRow: 0.02, CtxMsPerToken: 1e-5}
	e := testEngine(t, engine.VLLM, nil)
	w := workload.Spec{ISL: 1024, OSL: 512, Concurrency: 8}
	alone := tm.BaseMs + tm.PrefillMsPerToken*1024
	r, err := QuantitativeFinite(context.Background(), w, e, tm, Options{RecordTokenTimes: true}, FiniteRun{Requests: 40, Warmup: 16})
	if err != nil {
		t.Fatal(err)
	}
	if r.Diagnostics.SteadyRequests != 40 || len(r.Requests) != 40 {
		t.Fatalf("finite run: %d requests measured, %d records, want 40", r.Diagnostics.SteadyRequests, len(r.Requests))
	}
	if r.Diagnostics.FiniteRun == nil || *r.Diagnostics.FiniteRun != (FiniteRun{Requests: 40, Warmup: 16}) {
		t.Errorf("diagnostics finite_run = %+v", r.Diagnostics.FiniteRun)
	}
	// Round 0: slot 0 alone; slots 1..7 arrive k·gap later and get their first
	// token at the end of the second pass (7 prompts and slot 0's decode row).
	first := map[int]float64{}
	for _, q := range r.Requests {
		if q.Generation != 0 {
			continue
		}
		if want := float64(q.Slot) * FiniteAdmitGapMs; !near(q.ArrivalMs, want, 1e-12) {
			t.Errorf("slot %d: arrival %v, want %v", q.Slot, q.ArrivalMs, want)
		}
		first[q.Slot] = q.TTFTMs
	}
	if !near(first[0], alone, 1e-12) {
		t.Errorf("slot 0: TTFT %v, want one 1024-token pass %v", first[0], alone)
	}
	end2 := first[1] + FiniteAdmitGapMs
	if min2 := alone + tm.BaseMs + tm.PrefillMsPerToken*7*1024; !(end2 > min2) {
		t.Errorf("second pass ends at %v, want after %v", end2, min2)
	}
	for k := 2; k < 8; k++ {
		if !near(first[k]+float64(k)*FiniteAdmitGapMs, end2, 1e-12) {
			t.Errorf("slot %d: first token at %v, want the second pass's end %v", k, first[k]+float64(k)*FiniteAdmitGapMs, end2)
		}
	}
	// The split persists and spreads: no later round returns to the simultaneous
	// burst's single cohort (all 8 prompts in one pass, TTFT base + 8·1024 tokens);
	// the run's mean TTFT lies below it.
	locked := tm.BaseMs + tm.PrefillMsPerToken*8*1024
	if m := r.TTFTSteady.Mean(); !(m < locked) {
		t.Errorf("mean TTFT %v, want below the one-cohort %v", m, locked)
	}
	// Little's law bound: at most 8 clients busy from 0 to the last completion
	// (clients idle once the run's N requests are sent and their last one is done).
	if got := r.ThroughputRPS / 1000 * r.E2E.Mean(); !(got <= 8 && got > 7.9) {
		t.Errorf("throughput × mean E2E = %v, want in (7.9, 8]", got)
	}
}

// TestFiniteBurstWeighs: with a client round trip the burst's cohort dissolves;
// the run's mean TTFT lies above the steady burst-started limit cycle's and
// approaches it as the run gets longer (the burst weighs C/N), and a run shorter
// than C sends only N requests.
func TestFiniteBurstWeighs(t *testing.T) {
	tm := timing.Linear{BaseMs: 8, PrefillMsPerToken: 0.03, DecodeMsPerRow: 0.02, CtxMsPerToken: 1e-5}
	e := testEngine(t, engine.VLLM, nil)
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
	e := testEngine(t, engine.VLLM, nil)
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

// TestFiniteAdmission: sends made together reach the scheduler FiniteAdmitGapMs
// apart, first come first served; a send after the previous one's admission plus
// the gap keeps its own instant.
func TestFiniteAdmission(t *testing.T) {
	var a FiniteAdmission
	got := []float64{a.At(5), a.At(5), a.At(5), a.At(7), a.At(7)}
	want := []float64{5, 5 + FiniteAdmitGapMs, 5 + 2*FiniteAdmitGapMs, 7, 7 + FiniteAdmitGapMs}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("admissions %v, want %v", got, want)
		}
	}
}

// TestFiniteSummaryIdentical: the summary run (a calibration fit's objective)
// gives the full run's TTFT, TPOT and E2E distributions, throughput and
// diagnostics bit for bit on every backend, chunked and whole-prompt budgets,
// sync and async, with and without the fast path, TensorRT-LLM MTP (whose
// summary run alone takes stretches in bulk); it carries no ITL
// distribution or request records, and refuses token times.
func TestFiniteSummaryIdentical(t *testing.T) {
	tm := timing.Linear{BaseMs: 6, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.04, CtxMsPerToken: 2e-5}
	run := FiniteRun{Requests: 96, Warmup: 16}
	for _, be := range []engine.Backend{engine.VLLM, engine.TRTLLM, engine.SGLang, "trtllm-mtp"} {
		for _, async := range []bool{false, true} {
			for _, c := range []struct{ isl, osl, conc int }{{1024, 64, 8}, {3000, 40, 16}, {200, 300, 5}} {
				for _, noFast := range []bool{false, true} {
					backend := be
					if be == "trtllm-mtp" { // the summary run's MTP stretch (fastForwardDrafts)
						backend = engine.TRTLLM
					}
					e, err := ProfileEngine(ProfileAIConfigurator, ProfileInput{Backend: string(backend), Role: RoleAgg, Batch: c.conc, ISL: c.isl, OSL: c.osl})
					if err != nil {
						t.Fatal(err)
					}
					if be == "trtllm-mtp" {
						e.DraftTokens, e.DraftAccepted = 2, 1.3
					}
					e.AsyncScheduling = async
					w := workload.Spec{ISL: c.isl, OSL: c.osl, Concurrency: c.conc}
					o := DefaultOptions()
					o.NoFastForward = noFast
					full, err := QuantitativeFinite(context.Background(), w, e, tm, o, run)
					if err != nil {
						t.Fatal(err)
					}
					sum, err := QuantitativeFiniteSummary(context.Background(), w, e, tm, o, run)
					if err != nil {
						t.Fatal(err)
					}
					name := fmt.Sprintf("%s async=%v %+v nofast=%v", be, async, c, noFast)
					if !reflect.DeepEqual(sum.TTFTSteady, full.TTFTSteady) || !reflect.DeepEqual(sum.TPOT, full.TPOT) ||
						!reflect.DeepEqual(sum.E2E, full.E2E) || !reflect.DeepEqual(sum.TTFTTransient, full.TTFTTransient) {
						t.Errorf("%s: summary distributions differ: TTFT mean %v vs %v, TPOT mean %v vs %v", name,
							sum.TTFTSteady.Mean(), full.TTFTSteady.Mean(), sum.TPOT.Mean(), full.TPOT.Mean())
					}
					if sum.ThroughputRPS != full.ThroughputRPS || sum.OutputTokensPerS != full.OutputTokensPerS ||
						!reflect.DeepEqual(sum.Diagnostics, full.Diagnostics) {
						t.Errorf("%s: summary throughput %v / diagnostics %+v, full %v / %+v", name,
							sum.ThroughputRPS, sum.Diagnostics, full.ThroughputRPS, full.Diagnostics)
					}
					if sum.Requests != nil || sum.ITL.Len() != 1 || sum.ITL.Mean() != 0 || full.ITL.Mean() <= 0 || len(full.Requests) != run.Requests {
						t.Errorf("%s: summary has %d records, ITL len %d mean %v (full: %d records, ITL mean %v)", name,
							len(sum.Requests), sum.ITL.Len(), sum.ITL.Mean(), len(full.Requests), full.ITL.Mean())
					}
				}
			}
		}
	}
	e, _ := engine.Defaults(engine.VLLM, "")
	_, err := QuantitativeFiniteSummary(context.Background(), workload.Spec{ISL: 64, OSL: 8, Concurrency: 2}, e, tm, Options{RecordTokenTimes: true}, FiniteRun{Requests: 4})
	if err == nil || err.Error() != "options record_token_times: a summary run keeps no request records" {
		t.Errorf("summary with token times: %v", err)
	}
}

// TestFiniteDesync: the desynchronised benchmark run is the locked run's burst
// (its first C requests, weight 1 each) mixed with the steady state's
// distribution scaled to the other N − C requests: the mean TTFT is exactly that
// weighted mean; the transient is the burst's; ITL and throughput are the steady
// state's. A run no longer than the burst is the locked run's report, and the
// summary entry gives a desync run's full report.
func TestFiniteDesync(t *testing.T) {
	tm := timing.Linear{BaseMs: 8, PrefillMsPerToken: 0.03, DecodeMsPerRow: 0.02, CtxMsPerToken: 1e-5}
	e := testEngine(t, engine.VLLM, nil)
	w := workload.Spec{ISL: 1024, OSL: 128, Concurrency: 8}
	o := DefaultOptions()
	ctx := context.Background()
	run := FiniteRun{Requests: 160, Warmup: 16}
	locked, err := QuantitativeFinite(ctx, w, e, tm, o, run)
	if err != nil {
		t.Fatal(err)
	}
	steady, err := QuantitativeWith(ctx, w, e, tm, o)
	if err != nil {
		t.Fatal(err)
	}
	drun := run
	drun.Desync = true
	d, err := QuantitativeFinite(ctx, w, e, tm, o, drun)
	if err != nil {
		t.Fatal(err)
	}
	burstSum := 0.0
	for _, a := range locked.TTFTTransient.Atoms() {
		burstSum += a.Value * a.Weight
	}
	want := (burstSum + 152*steady.TTFTSteady.Mean()) / 160
	if got := d.TTFTSteady.Mean(); !near(got, want, 1e-9*want) {
		t.Errorf("desync mean TTFT %v, want (burst + 152 × steady %v) / 160 = %v", got, steady.TTFTSteady.Mean(), want)
	}
	if d.TTFTSteady.TotalWeight() < 160-1e-9 || d.TTFTSteady.TotalWeight() > 160+1e-9 {
		t.Errorf("desync TTFT weighs %v requests, want 160", d.TTFTSteady.TotalWeight())
	}
	if !reflect.DeepEqual(d.TTFTTransient, locked.TTFTTransient) || !reflect.DeepEqual(d.ITL, steady.ITL) ||
		d.ThroughputRPS != steady.ThroughputRPS || len(d.Requests) != 8 {
		t.Errorf("desync: transient %v (burst %v), ITL mean %v (steady %v), throughput %v (steady %v), %d records",
			d.TTFTTransient.Mean(), locked.TTFTTransient.Mean(), d.ITL.Mean(), steady.ITL.Mean(), d.ThroughputRPS, steady.ThroughputRPS, len(d.Requests))
	}
	if d.Diagnostics.FiniteRun == nil || *d.Diagnostics.FiniteRun != drun || drun.Label() != "finite:n=160,warmup=16,desync" {
		t.Errorf("desync diagnostics run %+v, label %q", d.Diagnostics.FiniteRun, drun.Label())
	}
	// The locked run of this fixed-shape loop keeps its cohorts: the desync run,
	// whose clients spread after the burst, queues less.
	if !(d.TTFTSteady.Mean() < locked.TTFTSteady.Mean()) {
		t.Errorf("desync mean TTFT %v, want below the locked run's %v", d.TTFTSteady.Mean(), locked.TTFTSteady.Mean())
	}
	// N ≤ C: the burst alone.
	short := FiniteRun{Requests: 8, Desync: true}
	a, err := QuantitativeFinite(ctx, w, e, tm, o, short)
	if err != nil {
		t.Fatal(err)
	}
	b, err := QuantitativeFinite(ctx, w, e, tm, o, FiniteRun{Requests: 8})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a.TTFTSteady, b.TTFTSteady) || !reflect.DeepEqual(a.TPOT, b.TPOT) {
		t.Errorf("a desync run of the burst alone differs from the locked run: TTFT %v vs %v", a.TTFTSteady.Mean(), b.TTFTSteady.Mean())
	}
	// The summary of a desync run (a calibration fit's objective): the same
	// per-request distributions, throughput and diagnostics bit for bit, no ITL.
	sd, err := QuantitativeFiniteSummary(ctx, w, e, tm, o, drun)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sd.TTFTSteady, d.TTFTSteady) || !reflect.DeepEqual(sd.TTFTTransient, d.TTFTTransient) ||
		!reflect.DeepEqual(sd.TPOT, d.TPOT) || !reflect.DeepEqual(sd.E2E, d.E2E) ||
		sd.ThroughputRPS != d.ThroughputRPS || sd.OutputTokensPerS != d.OutputTokensPerS || !reflect.DeepEqual(sd.Diagnostics, d.Diagnostics) {
		t.Errorf("summary of a desync run: TTFT mean %v vs %v, TPOT mean %v vs %v, throughput %v vs %v",
			sd.TTFTSteady.Mean(), d.TTFTSteady.Mean(), sd.TPOT.Mean(), d.TPOT.Mean(), sd.ThroughputRPS, d.ThroughputRPS)
	}
	if sd.ITL.Len() != 1 || sd.ITL.Mean() != 0 || !(d.ITL.Mean() > 0) {
		t.Errorf("summary of a desync run: ITL len %d mean %v, want a point mass at 0 (full: mean %v)", sd.ITL.Len(), sd.ITL.Mean(), d.ITL.Mean())
	}
}

// TestFiniteRunStaggerPhases: a desync run's StaggerPhases evaluates its steady
// part over that many client phases, bit for bit the run under options of
// that many phases (the cheaper objective of a calibration's descent); it is
// not part of the run's label, and a run that is not desync, or a count out of
// range, is refused.
func TestFiniteRunStaggerPhases(t *testing.T) {
	e, err := engine.Defaults(engine.VLLM, "")
	if err != nil {
		t.Fatal(err)
	}
	e.MaxNumBatchedTokens = 2048
	w := workload.Spec{ISL: 512, OSL: 64, Concurrency: 8}
	ctx := context.Background()
	run := FiniteRun{Requests: 160, Desync: true}
	one := run
	one.StaggerPhases = 1
	got, err := QuantitativeFiniteSummary(ctx, w, e, benchLin, DefaultOptions(), one)
	if err != nil {
		t.Fatal(err)
	}
	o := DefaultOptions()
	o.StaggerPhases = 1
	want, err := QuantitativeFiniteSummary(ctx, w, e, benchLin, o, run)
	if err != nil {
		t.Fatal(err)
	}
	full, err := QuantitativeFiniteSummary(ctx, w, e, benchLin, DefaultOptions(), run)
	if err != nil {
		t.Fatal(err)
	}
	if got.TTFTSteady.Mean() != want.TTFTSteady.Mean() || got.TPOT.Mean() != want.TPOT.Mean() {
		t.Errorf("StaggerPhases 1: TTFT %v TPOT %v, options of 1 phase: %v %v", got.TTFTSteady.Mean(), got.TPOT.Mean(), want.TTFTSteady.Mean(), want.TPOT.Mean())
	}
	if got.TTFTSteady.Mean() == full.TTFTSteady.Mean() && got.TPOT.Mean() == full.TPOT.Mean() {
		t.Errorf("StaggerPhases 1 changed nothing against %d phases", DefaultStaggerPhases)
	}
	if one.Label() != run.Label() {
		t.Errorf("label %q, want %q", one.Label(), run.Label())
	}
	for _, bad := range []FiniteRun{{Requests: 10, StaggerPhases: 2}, {Requests: 10, Desync: true, StaggerPhases: 17}, {Requests: 10, Desync: true, StaggerPhases: -1}} {
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "stagger_phases") {
			t.Errorf("%+v: error %v", bad, err)
		}
	}
}
