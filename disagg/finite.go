package disagg

import (
	"context"
	"errors"
	"math"

	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// QuantitativeFinite evaluates the closed loop w (w.Concurrency clients) on the
// tandem c as one benchmark run f, with the semantics of the aggregated
// calendar's run (queueing.QuantitativeFinite): min(C, N) requests are sent
// together at 0 to an idle deployment and reach the prefill router
// queueing.FiniteAdmitGapMs apart, first come first served (the frontend prepares
// them one at a time); each completion sends one more request, visible to the
// router after the turnaround, clientRTTMs and the stages, until N have been
// sent. The steady columns are the statistics over all N requests, the
// transient the first min(C, N); throughput is N over the span from the first
// send to the last completion. It is how a measured disaggregated closed-loop
// row is predicted (aiperf / vllm bench serve run a burst-started finite run on
// the whole deployment, not its limit cycle). There is one deterministic
// burst-started path: no staggered start and no mixture.
func QuantitativeFinite(ctx context.Context, w workload.Spec, c Config, f queueing.FiniteRun, clientRTTMs float64) (*Report, error) {
	return quantitativeFinite(ctx, w, c, f, clientRTTMs, false)
}

// QuantitativeFiniteSummary is QuantitativeFinite without the inter-token gaps
// (a calibration's objective reads TTFT, TPOT and E2E): the decode workers
// report no token, so the report's ITL is a point mass at 0 and every other
// number is bit-identical (TestFiniteSummaryIdentical). The gaps were a
// per-token callback into the tandem, a fifth of a disaggregated fit's cost.
func QuantitativeFiniteSummary(ctx context.Context, w workload.Spec, c Config, f queueing.FiniteRun, clientRTTMs float64) (*Report, error) {
	return quantitativeFinite(ctx, w, c, f, clientRTTMs, true)
}

func quantitativeFinite(ctx context.Context, w workload.Spec, c Config, f queueing.FiniteRun, clientRTTMs float64, summary bool) (*Report, error) {
	w, err := f.WithShapes(w) // the run's request lengths (W2), when it states them
	if err != nil {
		return nil, &queueing.InputError{Err: err}
	}
	if f.Open {
		return finiteOpen(ctx, w, c, f, clientRTTMs, summary)
	}
	if err := c.Validate(w); err != nil {
		return nil, &queueing.InputError{Err: err}
	}
	if err := f.ValidateClosedLoop(w); err != nil {
		return nil, &queueing.InputError{Err: err}
	}
	if f.Desync {
		return nil, &queueing.InputError{Err: errors.New("finite run desync: the tandem runs its clients locked for the whole run; a desynchronised run is aggregated only")}
	}
	if err := queueing.CheckClientRTT(clientRTTMs); err != nil {
		return nil, &queueing.InputError{Err: err}
	}
	N := f.Requests // ≤ maxRequests: FiniteRun's own bound
	t, err := finiteTandem(&c, &w, summary)
	if err != nil {
		return nil, err
	}
	C := min(w.Concurrency, N)
	t.reqs = make([]treq, 0, N)
	var adm queueing.FiniteAdmission // requests are created in time order
	gen := make([]int, C)
	for s := 0; s < C; s++ {
		t.submit(s, 0, adm.At(t.stage), true)
	}
	delay := w.TurnaroundMs + clientRTTMs + t.stage
	t.onDone = func(t *tandem, ri int, now float64) {
		if len(t.reqs) >= N {
			return
		}
		s := t.reqs[ri].slot
		gen[s]++
		t.submit(s, gen[s], adm.At(now+delay), true)
	}
	if err := t.loop(ctx, func() bool { return t.finished >= N }); err != nil {
		return nil, err
	}
	rep, err := t.spanReport(f)
	if err != nil {
		return nil, err
	}
	return rep, finiteReport(rep)
}

// finiteOpen evaluates the open-loop benchmark run f (f.Open: queueing's
// finite_open.go semantics) on the tandem: each of f.Paths independent arrival
// paths (at least one) sends its requests by queueing.OpenSends to an idle
// deployment (a send reaches the prefill router after the stages,
// queueing.FiniteAdmitGapMs after the previous one when sent together); the
// report pools the paths (queueing.PoolPaths; the KV transfer and prefill-queue
// distributions likewise, the decode headroom their minimum, the prefill-holds
// peak their maximum). w gives the shapes; its load is the run's: the bound in
// flight (or, at rate 0, every request) as the clients a decode worker can see;
// the report's fidelity is the sends' (queueing.FiniteRun.OpenLoad).
func finiteOpen(ctx context.Context, w workload.Spec, c Config, f queueing.FiniteRun, clientRTTMs float64, summary bool) (*Report, error) {
	if err := f.Validate(); err != nil {
		return nil, &queueing.InputError{Err: err}
	}
	w.Concurrency, w.RateRPS = 0, 0
	switch {
	case f.MaxConcurrency > 0:
		w.Concurrency = f.MaxConcurrency
	case f.RateRPS > 0:
		w.RateRPS = f.PeakRateRPS()
	default:
		w.Concurrency = f.Requests
	}
	if err := c.Validate(w); err != nil {
		return nil, &queueing.InputError{Err: err}
	}
	if err := queueing.CheckClientRTT(clientRTTMs); err != nil {
		return nil, &queueing.InputError{Err: err}
	}
	paths := max(f.Paths, 1)
	ats, err := f.Arrivals(f.FirstPath, paths)
	if err != nil {
		return nil, &queueing.InputError{Err: err}
	}
	reps := make([]*Report, paths)
	for p := range reps {
		r, err := openPath(ctx, w, c, f, ats[p], clientRTTMs, summary)
		if err != nil {
			return nil, err
		}
		reps[p] = r
	}
	load := f.OpenLoad(w)
	for _, r := range reps { // the sends' fidelity, not the bound's (w holds it as clients)
		r.Fidelity = load.Fidelity()
	}
	if paths == 1 {
		return reps[0], finiteReport(reps[0])
	}
	base := make([]*queueing.Report, paths)
	xfer, pq := make([]queueing.Distribution, paths), make([]queueing.Distribution, paths)
	rep := &Report{DHeadroomMin: 1}
	for p, r := range reps {
		base[p], xfer[p], pq[p] = &r.Report, r.KVTransfer, r.pQueue
		rep.DHeadroomMin = math.Min(rep.DHeadroomMin, r.DHeadroomMin)
		rep.PrefillAdmitPeakTokens = max(rep.PrefillAdmitPeakTokens, r.PrefillAdmitPeakTokens)
	}
	rep.Report = *queueing.PoolPaths(base, summary)
	rep.KVTransfer, rep.pQueue = queueing.PoolDistributions(xfer...), queueing.PoolDistributions(pq...)
	rep.PQueueMsP99 = rep.pQueue.Quantile(0.99)
	return rep, finiteReport(rep)
}

// openPath runs the open run f on one path's arrival instants at, on a fresh
// tandem.
func openPath(ctx context.Context, w workload.Spec, c Config, f queueing.FiniteRun, at []float64, clientRTTMs float64, summary bool) (*Report, error) {
	N := f.Requests
	t, err := finiteTandem(&c, &w, summary)
	if err != nil {
		return nil, err
	}
	sends := f.SendsAt(at, w.TurnaroundMs+clientRTTMs)
	t.reqs = make([]treq, 0, N)
	completed := sends.Drive(t.stage, func(at float64) {
		t.submit(0, len(t.reqs), at, true) // client 0, its send order: the first is the transient
	})
	t.onDone = func(t *tandem, ri int, now float64) { completed(now) }
	if err := t.loop(ctx, func() bool { return t.finished >= N }); err != nil {
		return nil, err
	}
	return t.spanReport(f)
}

// finiteTandem is a tandem for one benchmark run: a summary's decode workers
// report no token (their only effect is the ITL gaps, newTandem).
func finiteTandem(c *Config, w *workload.Spec, summary bool) (*tandem, error) {
	t, err := newTandem(c, w)
	if err != nil {
		return nil, &queueing.InputError{Err: err}
	}
	if summary {
		for _, k := range t.dec {
			k.OnToken = nil
		}
	}
	return t, nil
}

// spanReport is a finished benchmark run's report: throughput and window over
// the span from the first send (time 0) to the last completion.
func (t *tandem) spanReport(f queueing.FiniteRun) (*Report, error) {
	rep, err := t.report()
	if err != nil {
		return nil, err
	}
	end, toks := 0.0, 0.0
	for i := range t.reqs {
		end = math.Max(end, t.reqs[i].done)
		toks += float64(t.reqs[i].osl)
	}
	rep.SetSpan(f, end, toks)
	return rep, nil
}
