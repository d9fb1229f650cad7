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
	t, err := newTandem(&c, &w)
	if err != nil {
		return nil, &queueing.InputError{Err: err}
	}
	if summary {
		for _, k := range t.dec {
			k.OnToken = nil // its only effect is the ITL gaps (newTandem)
		}
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
	return rep, finiteReport(rep)
}
