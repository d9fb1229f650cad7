package queueing

import (
	"context"
	"math"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// maxStaggerPhases bounds Options.StaggerPhases (each phase is one more run).
const maxStaggerPhases = 16

// staggered evaluates a closed loop as a deterministic mixture over initial
// client phases (the product default since issue 9: real clients desynchronise
// through EOS, jitter and tokenizer noise, so one burst-locked cycle is not a
// prediction of a benchmark). A fixed-shape closed loop started as a burst keeps
// the burst's cohorts forever (requests finishing in the same pass return
// together); started with the clients spread over a request cycle it settles into
// other limit cycles. Phase i (i = 1..K) places the C first requests at
// independent uniform draws over one request cycle (ClientPhases, seeded by i; the
// cycle is the screening tier's mean E2E + turnaround + client round trip, the
// burst transient's when screening declines the point): desynchronised clients
// have independent phases. Evenly spaced starts (the rule until Round 11) are a
// fixed point where no two prompts ever meet, so they showed no queueing at any
// prefill utilisation below 1 and under-predicted the measured TTFT at high C.
// Each phase measures ⌈W/K⌉ steady generations on its own limit cycle
// (cycle.go), so the mixture holds about as many steady requests as one burst
// window. The steady distributions are the equal mixture of the K phases (each
// phase's requests, and each phase's ITL gaps, weigh 1/K in total), throughputs
// their mean; the transient and its records come from a burst run stopped once
// generation 0 has finished.
func staggered(ctx context.Context, w workload.Spec, e engine.Spec, t timing.Timing, o Options, b shapeBounds) (*Report, error) {
	ob := o
	ob.transientOnly = true
	buf := &runScratch{} // lent to each run in turn (the runs are sequential)
	burst, err := quantitativeRun(ctx, w, e, t, ob, b, buf)
	if err != nil {
		return nil, err
	}
	var cycle float64
	if sc, err := ScreeningWith(w, screeningKVFree(e), t, o); err == nil && !sc.Unstable && sc.E2E.Mean() > 0 {
		cycle = sc.E2E.Mean()
	} else {
		cycle = transientE2E(burst)
	}
	cycle += w.TurnaroundMs + o.ClientRTTMs
	K := o.StaggerPhases
	win := ceilDiv(windowGenerations(w.Concurrency, o), K)
	x, tok := 0.0, 0.0
	passes, steady := burst.Diagnostics.Passes, 0
	kvPeak, preempts := burst.KVUtilPeak, 0.0 // KV: the peak of every run, the mean preemptions
	windows := make([]Window, 0, K)
	var first, last float64
	runs := make([]*Report, K) // runs[i−1]: phase i
	nTTFT, nITL, nRecs := 0, 0, len(burst.Requests)
	for i := 1; i <= K; i++ {
		oi := o
		oi.spreadMs, oi.phase = cycle, i
		oi.WindowGenerations = win
		r, err := quantitativeRun(ctx, w, e, t, oi, b, buf)
		if err != nil {
			return nil, err
		}
		runs[i-1] = r
		nTTFT += max(r.TTFTSteady.Len(), r.TPOT.Len(), r.E2E.Len())
		nITL += r.ITL.Len()
		nRecs += len(r.Requests)
	}
	// The mixture's atoms and records, sized once.
	ttft, tpot, e2e := make([]Atom, 0, nTTFT), make([]Atom, 0, nTTFT), make([]Atom, 0, nTTFT)
	itl := make([]Atom, 0, nITL)
	recs := make([]RequestRecord, 0, nRecs)
	for _, r := range burst.Requests {
		if r.Transient {
			recs = append(recs, r)
		}
	}
	for i := 1; i <= K; i++ {
		r := runs[i-1]
		// Each phase weighs 1 in total: its requests 1/n each, its gaps by count
		// normalised to 1.
		wr := 1 / float64(max(r.Diagnostics.SteadyRequests, 1))
		ttft = appendScaled(ttft, r.TTFTSteady, wr)
		tpot = appendScaled(tpot, r.TPOT, wr)
		e2e = appendScaled(e2e, r.E2E, wr)
		itl = appendScaled(itl, r.ITL, 1/math.Max(r.ITL.TotalWeight(), 1e-300))
		kvPeak = math.Max(kvPeak, r.KVUtilPeak)
		preempts += r.PreemptionsPerRequest / float64(K)
		x += r.ThroughputRPS / float64(K)
		tok += r.OutputTokensPerS / float64(K)
		passes += r.Diagnostics.Passes
		steady += r.Diagnostics.SteadyRequests
		windows = append(windows, r.Diagnostics.Windows...)
		if i == 1 {
			first, last = r.Diagnostics.WindowStartMs, r.Diagnostics.WindowEndMs
		}
		first, last = math.Min(first, r.Diagnostics.WindowStartMs), math.Max(last, r.Diagnostics.WindowEndMs)
		for _, q := range r.Requests {
			if !q.Transient {
				q.Phase = i
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
	rep.Diagnostics.StaggerCycleMs = cycle
	rep.Diagnostics.Windows = windows
	rep.Diagnostics.LimitCycle = limitCycleNote(windows)
	rep.Diagnostics.WindowStartMs, rep.Diagnostics.WindowEndMs = first, last
	return rep, finite(rep)
}

// appendScaled appends d's atoms with their weights multiplied by f.
func appendScaled(dst []Atom, d Distribution, f float64) []Atom {
	for _, a := range d.atoms {
		dst = append(dst, Atom{Value: a.Value, Weight: a.Weight * f})
	}
	return dst
}

// transientE2E is the mean E2E of the burst's generation-0 requests.
func transientE2E(r *Report) float64 {
	sum, n := 0.0, 0
	for _, q := range r.Requests {
		if q.Transient {
			sum += q.E2EMs
			n++
		}
	}
	return sum / float64(max(n, 1))
}
