package queueing

import (
	"context"
	"math"

	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// maxStaggerPhases bounds Options.StaggerPhases (each phase is one more run).
const maxStaggerPhases = 16

// staggered evaluates a closed loop as a deterministic mixture over initial
// phases. A fixed-shape closed loop started as a burst keeps the burst's cohorts
// forever (requests finishing in the same pass return together); started with the
// clients spread over a request cycle it settles into other limit cycles. Phase i
// (i = 1..K) spreads the C first requests uniformly over i/K of the burst run's
// request cycle (mean E2E + turnaround). The steady distributions are the equal
// mixture of the K runs (every run has the same number of steady requests),
// throughputs their mean; the transient, the records' transient and the bracket
// come from the burst run.
func staggered(ctx context.Context, w workload.Spec, e EngineSpec, t timing.Timing, o Options, b shapeBounds) (*Report, error) {
	burst, err := quantitativeRun(ctx, w, e, t, o, b)
	if err != nil {
		return nil, err
	}
	cycle := burst.E2E.Mean() + w.TurnaroundMs
	K := o.StaggerPhases
	var ttft, itl, tpot, e2e []Atom
	var recs []RequestRecord
	x, tok := 0.0, 0.0
	passes, steady := burst.Diagnostics.Passes, 0
	kvPeak, preempts := burst.KVUtilPeak, 0.0 // KV: the peak of every run, the mean preemptions
	for _, r := range burst.Requests {
		if r.Transient {
			recs = append(recs, r)
		}
	}
	for i := 1; i <= K; i++ {
		oi := o
		oi.spreadMs = cycle * float64(i) / float64(K)
		r, err := quantitativeRun(ctx, w, e, t, oi, b)
		if err != nil {
			return nil, err
		}
		ttft = append(ttft, r.TTFTSteady.Atoms()...)
		tpot = append(tpot, r.TPOT.Atoms()...)
		e2e = append(e2e, r.E2E.Atoms()...)
		// ITL: every run weighs its gaps by count; normalise per run so each phase
		// counts equally.
		wt := r.ITL.TotalWeight()
		for _, a := range r.ITL.Atoms() {
			itl = append(itl, Atom{Value: a.Value, Weight: a.Weight / math.Max(wt, 1e-300)})
		}
		kvPeak = math.Max(kvPeak, r.KVUtilPeak)
		preempts += r.PreemptionsPerRequest / float64(K)
		x += r.ThroughputRPS / float64(K)
		tok += r.OutputTokensPerS / float64(K)
		passes += r.Diagnostics.Passes
		steady += r.Diagnostics.SteadyRequests
		for _, q := range r.Requests {
			if !q.Transient {
				recs = append(recs, q)
			}
		}
	}
	rep := &Report{
		TTFTSteady: fromAtomsOwned(ttft), TTFTTransient: burst.TTFTTransient,
		ITL: fromAtomsOwned(itl), TPOT: fromAtomsOwned(tpot), E2E: fromAtomsOwned(e2e),
		ThroughputRPS: x, OutputTokensPerS: tok, KVUtilPeak: kvPeak, PreemptionsPerRequest: preempts,
		Tier: TierQuantitative, Fidelity: w.Fidelity(), Requests: recs,
		Diagnostics: burst.Diagnostics,
	}
	p99 := rep.TTFTSteady.Quantile(0.99)
	rep.TTFTSteadyP99Lo, rep.TTFTSteadyP99Hi = p99, p99
	rep.Diagnostics.Passes = passes
	rep.Diagnostics.SteadyRequests = steady
	rep.Diagnostics.StaggerPhases = K
	return rep, finite(rep)
}
