package queueing

import (
	"context"
	"math"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// finiteDesync evaluates the closed-loop benchmark run f (f.Desync) as a burst
// followed by desynchronised clients. The first min(C, N) requests are the
// burst's: sent together to an idle engine, they are the locked run's first
// generation (admitted one at a time, FiniteAdmitGapMs apart, and decoding beside
// their replacements as the locked run has them; that run is simulated only
// until they have finished). The other N − min(C, N) are
// requests of the desynchronised steady state under o (QuantitativeWith: with
// o.StaggerPhases > 0 the stagger mixture, the product's closed-loop default;
// with 0 the burst's own limit cycle). This is QuantitativeFinite's run with the
// clients desynchronised after their first request instead of locked for the
// whole run: the locked cohorts of a fixed-shape run are one phase of many
// (QUEUEING.md §4), and the measured runs desynchronise (docs/validation.md,
// Round 10).
//
// TTFT, TPOT and E2E are the request-weighted mixture: each burst request weighs
// 1, the steady distribution is scaled to N − min(C, N). The transient is the
// burst's. ITL, throughput, the KV peak and preemptions are the steady state's
// (the burst round's gaps and its ramp weigh C/N of the run and are left out).
// Report.Requests holds the burst's records only. With N ≤ C the run is the
// burst alone: the locked run's report. summary (QuantitativeFiniteSummary) runs
// the steady part without ITL gaps or records: the report's ITL is then a point
// mass at 0, the rest bit-identical.
func finiteDesync(ctx context.Context, w workload.Spec, e engine.Spec, t timing.Timing, o Options, f FiniteRun, summary bool) (*Report, error) {
	locked := f
	locked.Desync, locked.StaggerPhases = false, 0
	if f.Requests <= w.Concurrency {
		return quantitativeFinite(ctx, w, e, t, o, locked, summary)
	}
	ob := o
	ob.transientOnly = true
	burst, err := quantitativeFinite(ctx, w, e, t, ob, locked, false)
	if err != nil {
		return nil, err
	}
	var first []RequestRecord
	for _, q := range burst.Requests {
		if q.Generation == 0 {
			first = append(first, q)
		}
	}
	rest := f.Requests - len(first)
	so := o
	so.RecordTokenTimes = false
	so.summary = summary
	if f.StaggerPhases > 0 && so.StaggerPhases > 0 {
		so.StaggerPhases = f.StaggerPhases // a calibration descent's cheaper objective
	}
	st, err := QuantitativeWith(ctx, w, e, t, so)
	if err != nil {
		return nil, err
	}
	n := len(first) + max(st.TTFTSteady.Len(), st.TPOT.Len(), st.E2E.Len())
	ttft, tpot, e2e := make([]Atom, 0, n), make([]Atom, 0, n), make([]Atom, 0, n)
	for _, q := range first {
		tp := 0.0
		if q.OSL > 1 {
			tp = (q.E2EMs - q.TTFTMs) / float64(q.OSL-1) // the report's TPOT of a request
		}
		ttft = append(ttft, Atom{Value: q.TTFTMs, Weight: 1})
		tpot = append(tpot, Atom{Value: tp, Weight: 1})
		e2e = append(e2e, Atom{Value: q.E2EMs, Weight: 1})
	}
	scaled := func(dst []Atom, d Distribution) []Atom {
		return appendScaled(dst, d, float64(rest)/math.Max(d.TotalWeight(), 1e-300))
	}
	ttft, tpot, e2e = scaled(ttft, st.TTFTSteady), scaled(tpot, st.TPOT), scaled(e2e, st.E2E)
	rep := &Report{
		TTFTSteady: fromAtomsOwned(ttft), TTFTTransient: burst.TTFTTransient,
		ITL: st.ITL, TPOT: fromAtomsOwned(tpot), E2E: fromAtomsOwned(e2e),
		ThroughputRPS: st.ThroughputRPS, OutputTokensPerS: st.OutputTokensPerS,
		KVUtilPeak: math.Max(burst.KVUtilPeak, st.KVUtilPeak), PreemptionsPerRequest: st.PreemptionsPerRequest,
		Tier: TierQuantitative, Fidelity: w.Fidelity(), Requests: first,
		Diagnostics: st.Diagnostics,
	}
	p99 := rep.TTFTSteady.Quantile(0.99)
	rep.TTFTSteadyP99Lo, rep.TTFTSteadyP99Hi = p99, p99
	rep.Diagnostics.Passes += burst.Diagnostics.Passes
	rep.Diagnostics.SteadyRequests = f.Requests
	run := f
	rep.Diagnostics.FiniteRun = &run
	return rep, finite(rep)
}
