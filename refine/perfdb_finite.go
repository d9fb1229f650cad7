package refine

import (
	"context"

	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/store"
)

// QuantitativeRunAdjusted is QuantitativeAdjusted for one benchmark run as it was
// run (queueing.QuantitativeFinite: burst start, run.Requests requests, statistics
// over all of them) instead of the steady state: how a measured closed-loop row is
// predicted (refine/calibrate); a disaggregated row runs the tandem's
// (disagg.QuantitativeFinite, the whole deployment). The stored columns mean the
// same statistics over the run's requests.
func (p *PerfdbEvaluator) QuantitativeRunAdjusted(ctx context.Context, in store.PointInputs, adj PassAdjust, run queueing.FiniteRun) (store.Quantitative, error) {
	return p.quantitativeRun(ctx, in, adj, run, false)
}

// QuantitativeRunSummaryAdjusted is QuantitativeRunAdjusted for a caller that reads
// only the TTFT, TPOT and E2E columns and the throughput (a calibration fit's
// objective): an aggregated point runs queueing.QuantitativeFiniteSummary, whose
// statistics are identical at less cost, so its ITL columns read 0 and it
// carries no encoded distributions — never store the result. A disaggregated
// point runs disagg.QuantitativeFiniteSummary the same way.
func (p *PerfdbEvaluator) QuantitativeRunSummaryAdjusted(ctx context.Context, in store.PointInputs, adj PassAdjust, run queueing.FiniteRun) (store.Quantitative, error) {
	return p.quantitativeRun(ctx, in, adj, run, true)
}

// quantitativeRun evaluates run at in under adj: the full run, or with summary
// its summary (queueing / disagg QuantitativeFiniteSummary, no encoded
// distributions).
func (p *PerfdbEvaluator) quantitativeRun(ctx context.Context, in store.PointInputs, adj PassAdjust, run queueing.FiniteRun, summary bool) (store.Quantitative, error) {
	if in.Mode == store.ModeDisagg {
		return p.quantitativeDisagg(ctx, in, adj, &run, summary) // disaggSetup validates adj
	}
	if err := adj.Validate(); err != nil {
		return store.Quantitative{}, err
	}
	w, e, tm, _, k, err := p.setup(ctx, in, adj)
	if err != nil {
		return store.Quantitative{}, err
	}
	if e, err = k.quantitativeEngine(e, in.Prefix); err != nil { // the KV pool the quantitative tier runs
		return store.Quantitative{}, err
	}
	finite, encode := queueing.QuantitativeFinite, quantitativeOf
	if summary {
		finite, encode = queueing.QuantitativeFiniteSummary, quantitativeColumns
	}
	r, err := finite(ctx, w, e, tm, queueing.DefaultOptions(), run)
	if err != nil {
		return store.Quantitative{}, err
	}
	out, err := encode(r)
	out.KV = k.quantitative(r, e.KVCapacityTokens > 0)
	return out, err
}

// QuantitativeRun is QuantitativeRunAdjusted under the evaluator's own
// calibration of in (identity when none covers it).
func (p *PerfdbEvaluator) QuantitativeRun(ctx context.Context, in store.PointInputs, run queueing.FiniteRun) (store.Quantitative, error) {
	return p.QuantitativeRunAdjusted(ctx, in, p.adjustment(in), run)
}
