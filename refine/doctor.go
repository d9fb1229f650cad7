package refine

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/aicdb/aicdb/store"
)

// DoctorOptions select the stored quantitative rows Doctor re-evaluates.
type DoctorOptions struct {
	// Sample is the number of rows to check (default 50), taken in key order: keys
	// are sha256 hashes, so this is a deterministic, unbiased sample.
	Sample int
	// All checks every row (Sample is ignored).
	All bool
	// Progress, if set, is called before each sampled row and once at the end with
	// (rows done, rows sampled).
	Progress func(done, total int)
}

// Mismatch is one stored quantitative row that differs from a fresh evaluation.
type Mismatch struct {
	Point store.Point // as stored (queueing columns at the quantitative tier)
	// Column is the first queueing column that differs ("" when Err is set).
	Column        string
	Stored, Fresh float64
	// Err is set when the row could not be re-evaluated at all.
	Err error
}

// String renders the mismatch on one line.
func (m Mismatch) String() string {
	p := &m.Point
	head := fmt.Sprintf("%s %s %s %s %s %s b%d ctx%d", p.Key[:12], p.Model, p.System, p.Backend, p.Version, p.Parallel(), p.Batch, p.CtxTokens)
	if m.Err != nil {
		return head + ": cannot re-evaluate: " + m.Err.Error()
	}
	return fmt.Sprintf("%s: %s stored %.6g, fresh evaluation %.6g", head, m.Column, m.Stored, m.Fresh)
}

// DoctorReport is what Doctor found.
type DoctorReport struct {
	Total   int // quantitative rows stored
	Checked int // rows re-evaluated
	// Stale rows were computed by another evaluator version than the current one;
	// their numbers legitimately differ, so they are counted, not re-evaluated.
	Stale      int
	Mismatches []Mismatch
}

// Doctor re-evaluates a deterministic sample of the stored quantitative results
// and reports every row whose stored numbers differ from a fresh evaluation. Each
// (model, system, backend, version) group gets its own evaluator from fresh, so a
// cache shared across groups (issue 8) cannot hide itself. Nothing is written.
func Doctor(ctx context.Context, st *store.Store, fresh func() (Evaluator, error), opt DoctorOptions) (DoctorReport, error) {
	var rep DoctorReport
	var err error
	if rep.Total, err = st.QuantitativeCount(ctx); err != nil {
		return rep, fmt.Errorf("doctor: count quantitative results: %w", err)
	}
	n := opt.Sample
	if n <= 0 {
		n = 50
	}
	if opt.All {
		n = -1 // SQLite: no limit
	}
	rows, err := st.ResultEvaluators(ctx, n)
	if err != nil {
		return rep, fmt.Errorf("doctor: read quantitative results: %w", err)
	}
	if len(rows) == 0 {
		return rep, nil
	}
	keys := make([]string, len(rows))
	fp := make(map[string]string, len(rows))
	for i, r := range rows {
		keys[i], fp[r.Key] = r.Key, r.Evaluator
	}
	pts, err := st.SelectPoints(ctx, store.PointFilter{Keys: keys, IncludeOOM: true})
	if err != nil {
		return rep, err
	}
	evs := map[[4]string]Evaluator{}
	progress := func(done int) {
		if opt.Progress != nil {
			opt.Progress(done, len(pts))
		}
	}
	defer func() { progress(len(pts)) }()
	for i := range pts {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		progress(i)
		p := &pts[i]
		g := [4]string{p.Model, p.System, p.Backend, p.Version}
		ev, ok := evs[g]
		if !ok {
			if ev, err = fresh(); err != nil {
				return rep, err
			}
			evs[g] = ev
		}
		if fp[p.Key] != ev.Name() {
			rep.Stale++
			continue
		}
		rep.Checked++
		q, err := ev.Quantitative(ctx, p.PointInputs)
		if err != nil {
			if ctx.Err() != nil {
				return rep, ctx.Err()
			}
			if errors.Is(err, ErrNoQuantitative) || IsPerfDataGap(err) || errors.Is(err, ErrTraceChanged) {
				rep.Mismatches = append(rep.Mismatches, Mismatch{Point: *p, Err: err})
				continue
			}
			return rep, fmt.Errorf("doctor: re-evaluate %s: %w", p.Key[:12], err)
		}
		mismatch := false
		for j, c := range store.QueueingColumns {
			if !sameNumber(p.Q.V[j], q.V[j]) {
				rep.Mismatches = append(rep.Mismatches, Mismatch{Point: *p, Column: c, Stored: p.Q.V[j], Fresh: q.V[j]})
				mismatch = true
				break
			}
		}
		if m, ok := kvMismatch(p, q.KV); !mismatch && ok {
			rep.Mismatches = append(rep.Mismatches, m)
		}
	}
	return rep, nil
}

// kvMismatch compares a row's stored KV columns (its quantitative result's, as
// the points view shows them) with fresh ones; a NULL stored value (a result
// stored before migration 00012) is not compared.
func kvMismatch(p *store.Point, fresh store.KV) (Mismatch, bool) {
	st := p.Q.KV
	for _, c := range []struct {
		col           string
		stored, fresh float64
		ok            bool
	}{
		{"kv_capacity_tokens", float64(st.CapacityTokens), float64(fresh.CapacityTokens), st.CapacityTokens > 0},
		{"kv_util_peak", st.UtilPeak, fresh.UtilPeak, st.HasUtil},
		{"preemptions_per_request", st.PreemptionsPerRequest, fresh.PreemptionsPerRequest, st.HasPreemptions},
	} {
		if c.ok && !sameNumber(c.stored, c.fresh) {
			return Mismatch{Point: *p, Column: c.col, Stored: c.stored, Fresh: c.fresh}, true
		}
	}
	return Mismatch{}, false
}

// sameNumber compares a stored value with a recomputed one: evaluations are
// deterministic, so only the SQLite REAL round trip (exact for float64) may differ;
// 1e-9 relative leaves room for nothing else.
func sameNumber(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b))
}
