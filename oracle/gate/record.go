package gate

import "math"

// MetricResult is one gated metric of one family: both sides' values, the
// residual (model − oracle)/oracle and its tolerance.
type MetricResult struct {
	Name                               string
	Model, Oracle, Residual, Tolerance float64
}

// Record is one family's outcome in a form every gate suite shares (the agg,
// KV and long-prompt families, the trace replays): what `aicdb oracle validate
// --format csv|json|jsonl` prints. Metrics is empty when a side failed (Error).
type Record struct {
	Suite, Family, Verdict string
	KnownFailing           string
	Metrics                []MetricResult
	Error                  string
}

// Record returns the row's outcome as a Record of suite.
func (r Row) Record(suite string) Record {
	return record(suite, r.Family.Name, verdictOf(r), r.Family.KnownFailing, r.Err, metricNames, tolerances,
		r.Model.values(), r.Oracle.values(), r.Resid)
}

// Record returns the replay row's outcome as a Record of suite.
func (r ReplayRow) Record(suite string) Record {
	if r.Err == nil && r.Refusal != "" { // no model values: the calendar refuses the regime
		return Record{Suite: suite, Family: r.Family.Name, Verdict: ReplayVerdictOf(r)}
	}
	return record(suite, r.Family.Name, ReplayVerdictOf(r), r.Family.KnownFailing, r.Err, replayMetricNames, replayTolerances,
		r.Model.values(), r.Oracle.values(), r.Resid)
}

func record(suite, family, verdict, known string, err error, names []string, tols, model, oracle, resid []float64) Record {
	rec := Record{Suite: suite, Family: family, Verdict: verdict, KnownFailing: known}
	if err != nil {
		rec.Error = err.Error()
		return rec
	}
	for i, n := range names {
		m := MetricResult{Name: n, Model: model[i], Oracle: oracle[i], Tolerance: tols[i], Residual: math.NaN()}
		if i < len(resid) {
			m.Residual = resid[i]
		}
		rec.Metrics = append(rec.Metrics, m)
	}
	return rec
}

// Record returns the disaggregated row's outcome as a Record of suite (the gated
// metrics; the handoff diagnostics stay in WriteDisaggTable).
func (r DisaggRow) Record(suite string) Record {
	row := Row{Family: Family{Name: r.Family.Name, KnownFailing: r.Family.KnownFailing}, Model: r.Model, Oracle: r.Oracle,
		Resid: r.Resid, Failures: r.Failures, Err: r.Err}
	return row.Record(suite)
}
