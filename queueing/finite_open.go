package queueing

import (
	"context"
	"fmt"
	"math"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// An open-loop benchmark run as it was run. `vllm bench serve --request-rate R
// --num-prompts N` sends request i at the i-th instant of a Poisson process of
// rate R (its default burstiness 1: exponential gaps; the first request at 0);
// with --max-concurrency C a request whose instant comes while C are in flight
// waits on the client's semaphore (first come, first served) and is sent when
// one completes, and its TTFT counts from that send; at the default rate inf
// without --max-concurrency every request is sent at once. `aiperf profile
// --request-rate R` sends the same way. Statistics are over all N requests from
// an idle engine (no warm-up), throughput N over the span from the first send to
// the last completion — as for the closed run (finite.go).

// maxOpenPaths bounds FiniteRun.Paths.
const maxOpenPaths = 64

// OpenPaths is how many independent arrival paths a prediction of an open run of
// n requests pools: enough that the paths hold ~2,048 requests together (a path
// of a few hundred Poisson arrivals has a realised rate several percent off R, and
// a queue's mean TTFT moves with it), at most 8.
func OpenPaths(n int) int {
	return min(max(ceilDiv(2048, max(n, 1)), 1), 8)
}

// OpenSends is the send schedule of one path of an open run: when each request
// reaches the scheduler (ms from the run's start, before the additive stages).
// The model's calendar and the oracle's DES both drive their runs with it, so the
// gate compares their schedulers on the same sends.
//
// Request j reaches the scheduler at its arrival instant a_j when fewer than
// MaxConcurrency requests are in flight then; otherwise it waits for a completion
// (first come, first served) and reaches the scheduler delayMs after it (the
// client's turnaround and round trip, as a closed loop's replacement) — at
// max(a_j, completion + delayMs) in both cases, so a request is created exactly
// when a seat is free for it: at the start for the first MaxConcurrency, then one
// per completion. Times are non-decreasing in creation order.
type OpenSends struct {
	at       []float64
	cap      int
	delay    float64
	next     int
	inFlight int
}

// NewOpenSends returns the schedule of run f's (f.Open) path f.FirstPath + p with
// delayMs from a completion to the send it releases.
func NewOpenSends(f FiniteRun, p int, delayMs float64) (*OpenSends, error) {
	if !f.Open {
		return nil, fmt.Errorf("finite run: not an open-loop run")
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	ats, err := f.Arrivals(f.FirstPath+p, 1)
	if err != nil {
		return nil, err
	}
	return f.SendsAt(ats[0], delayMs), nil
}

// SendsAt is the schedule of open run f on the arrival instants at.
func (f FiniteRun) SendsAt(at []float64, delayMs float64) *OpenSends {
	return &OpenSends{at: at, cap: f.MaxConcurrency, delay: delayMs}
}

// Arrivals returns the arrival instants of k paths of open run f from path
// first: every request at 0 at rate 0, 1/rate apart for constant sends, else
// the W1 stream's Poisson or gamma gaps (workload.ArrivalPaths), respaced along
// the ramp when the rate ramps up (ramp).
func (f FiniteRun) Arrivals(first, k int) ([][]float64, error) {
	if f.RateRPS == 0 || f.Constant {
		at := make([]float64, f.Requests)
		if f.Constant {
			var err error
			if at, err = workload.ConstantArrivalsMs(f.Requests, f.RateRPS); err != nil {
				return nil, err
			}
		}
		out := make([][]float64, k)
		for i := range out {
			out[i] = at // read only
		}
		return out, nil
	}
	paths, err := workload.ArrivalPaths(f.Requests, f.RateRPS, f.GammaShape, first, k)
	if err != nil || f.Ramp == "" {
		return paths, err
	}
	for _, at := range paths {
		f.ramp(at)
	}
	return paths, nil
}

// ramp respaces at, arrival instants drawn at the ramp's start rate, in place:
// gap j (before request j) is redrawn at rampRate(j) by scaling it by
// start/rampRate(j) — a gamma (or exponential) gap at rate r is the same unit
// draw over r, as the client draws it. The first request stays at 0 (the
// client's first delay only shifts the whole run).
func (f FiniteRun) ramp(at []float64) {
	prev := 0.0
	for j := 1; j < len(at); j++ {
		gap := at[j] - prev
		prev = at[j]
		at[j] = at[j-1] + gap*f.RateRPS/f.rampRate(j, len(at))
	}
}

// OpenLoad is w as open run f loads the engine, for the checks and the fidelity
// a workload states (the run, not w, says how requests are sent): sends at a
// rate are the W1 stream (RateRPS), every request at once the loop of that many
// clients (Concurrency); the shapes are w's.
func (f FiniteRun) OpenLoad(w workload.Spec) workload.Spec {
	w.Concurrency, w.RateRPS = 0, f.PeakRateRPS()
	if f.RateRPS == 0 {
		w.Concurrency = f.Requests
	}
	return w
}

// free reports whether a seat is free for the next request.
func (o *OpenSends) free() bool {
	return o.next < len(o.at) && (o.cap == 0 || o.inFlight < o.cap)
}

// Start returns the sends made at the start: the first MaxConcurrency requests'
// (every request's without a bound), at their arrival instants.
func (o *OpenSends) Start() []float64 {
	var out []float64
	for o.free() {
		out = append(out, o.at[o.next])
		o.next++
		o.inFlight++
	}
	return out
}

// Drive makes the schedule's sends through send: the first ones at once, and
// each later one from the returned completion hook (call it at every
// completion). A send at instant a reaches the scheduler at
// FiniteAdmission.At(a + stageMs): sends made together are admitted
// FiniteAdmitGapMs apart, in send order. The one driver of the calendar, the
// tandem and both DES drivers.
func (o *OpenSends) Drive(stageMs float64, send func(atMs float64)) (completed func(nowMs float64)) {
	var adm FiniteAdmission // sends are made in time order
	for _, a := range o.Start() {
		send(adm.At(a + stageMs))
	}
	return func(now float64) {
		if a, ok := o.Completed(now); ok {
			send(adm.At(a + stageMs))
		}
	}
}

// Completed records a completion at now and returns the send it releases
// (false: none — no bound, or every request sent).
func (o *OpenSends) Completed(now float64) (float64, bool) {
	o.inFlight--
	if !o.free() {
		return 0, false
	}
	t := math.Max(o.at[o.next], now+o.delay)
	o.next++
	o.inFlight++
	return t, true
}

// finiteOpen evaluates the open-loop benchmark run f (f.Open, finite_open.go's
// semantics) on w's shapes: f.Paths independent arrival paths (at least one),
// each from an idle engine; the statistics are over the requests of every path
// (each path weighs equally: the same count), the throughput the mean of the
// paths' N over their spans; the ITL pools every path's gaps. The transient is
// each path's first request.
func finiteOpen(ctx context.Context, w workload.Spec, e engine.Spec, t timing.Timing, o Options, f FiniteRun, summary bool) (*Report, error) {
	if err := f.Validate(); err != nil {
		return nil, inputErr(err)
	}
	w = f.OpenLoad(w)
	b, err := checkInputs(w, e, t)
	if err != nil {
		return nil, err
	}
	if err := CheckClientRTT(o.ClientRTTMs); err != nil {
		return nil, inputErr(fmt.Errorf("options %w", err))
	}
	paths := max(f.Paths, 1)
	ats, err := f.Arrivals(f.FirstPath, paths)
	if err != nil {
		return nil, inputErr(err)
	}
	reps := make([]*Report, paths)
	for p := range reps {
		r, err := finiteOpenPath(ctx, w, e, t, o, f, b, ats[p], summary)
		if err != nil {
			return nil, err
		}
		reps[p] = r
	}
	rep := PoolPaths(reps, summary)
	return rep, finite(rep)
}

// PoolPaths pools the reports of an open run's independent arrival paths (each
// of the same N requests): the distributions are the union of the paths' (each
// request, each ITL gap once), the throughputs, the preemptions per request and
// the passes the mean and sum over paths, the KV peak their maximum; records
// (unless summary) carry their path as Phase (1..). One path is returned as is.
// The first path's report is the base (its run, window and tier).
func PoolPaths(reps []*Report, summary bool) *Report {
	if len(reps) == 1 {
		return reps[0]
	}
	k := float64(len(reps))
	var ttft, tpot, e2e, trans, itl []Distribution
	var recs []RequestRecord
	rep := *reps[0]
	rep.ThroughputRPS, rep.OutputTokensPerS, rep.PreemptionsPerRequest, rep.KVUtilPeak = 0, 0, 0, 0
	rep.Diagnostics.Passes, rep.Diagnostics.SteadyRequests = 0, 0
	for p, r := range reps {
		ttft, tpot, e2e = append(ttft, r.TTFTSteady), append(tpot, r.TPOT), append(e2e, r.E2E)
		trans, itl = append(trans, r.TTFTTransient), append(itl, r.ITL)
		for _, q := range r.Requests {
			q.Phase = p + 1 // the path, as a stagger phase's records carry theirs
			recs = append(recs, q)
		}
		rep.ThroughputRPS += r.ThroughputRPS / k
		rep.OutputTokensPerS += r.OutputTokensPerS / k
		rep.PreemptionsPerRequest += r.PreemptionsPerRequest / k
		rep.KVUtilPeak = math.Max(rep.KVUtilPeak, r.KVUtilPeak)
		rep.Diagnostics.Passes += r.Diagnostics.Passes
		rep.Diagnostics.SteadyRequests += r.Diagnostics.SteadyRequests
	}
	rep.TTFTSteady, rep.TPOT, rep.E2E = PoolDistributions(ttft...), PoolDistributions(tpot...), PoolDistributions(e2e...)
	rep.TTFTTransient, rep.ITL = PoolDistributions(trans...), PoolDistributions(itl...)
	rep.Requests = nil
	if !summary {
		rep.Requests = recs
	}
	p99 := rep.TTFTSteady.Quantile(0.99)
	rep.TTFTSteadyP99Lo, rep.TTFTSteadyP99Hi = p99, p99
	return &rep
}

// PoolDistributions is the union of ds: every atom of each, at its weight.
func PoolDistributions(ds ...Distribution) Distribution {
	n := 0
	for _, d := range ds {
		n += len(d.atoms)
	}
	a := make([]Atom, 0, n)
	for _, d := range ds {
		a = append(a, d.atoms...)
	}
	return fromAtomsOwned(a)
}

// finiteOpenPath runs the open run f on one path's arrival instants at.
func finiteOpenPath(ctx context.Context, w workload.Spec, e engine.Spec, t timing.Timing, o Options, f FiniteRun, b shapeBounds, at []float64, summary bool) (*Report, error) {
	s, col := finiteSim(e, t, o, summary)
	perReq := b.maxISL - w.Prefix + b.maxOSL + 2
	N := f.Requests
	C := N
	if f.MaxConcurrency > 0 {
		C = min(C, f.MaxConcurrency)
	}
	if err := s.workGuard(N, float64(ceilDiv(N, C)+1)*cyclePasses(s, w, C), C); err != nil {
		return nil, err
	}
	stage := e.StageMs
	sends := f.SendsAt(at, w.TurnaroundMs+o.ClientRTTMs)
	s.reqs = make([]simReq, 0, N)
	s.maxPasses = N*perReq + 64
	completed := sends.Drive(stage, func(at float64) {
		i := len(s.reqs)
		ri := s.newReq(&w, -1, i, at)
		s.reqs[ri].steady, s.reqs[ri].bucket = true, 0
		s.reqs[ri].transient = i == 0
	})
	done := 0
	s.onFinish = func(s *sim, ri int32, now float64) {
		done++
		completed(now)
	}
	if err := s.run(ctx, func() bool { return done == N }); err != nil {
		return nil, err
	}
	return s.spanReport(col, w, f)
}
