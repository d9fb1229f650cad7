package refine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/aicdb/aicdb/store"
)

// SweepOptions tune a sweep's execution; none of them changes row content.
type SweepOptions struct {
	// Workers evaluating in parallel (default GOMAXPROCS).
	Workers int
	// BatchSize is the number of rows per commit (default 256).
	BatchSize int
	// Progress, if set, is called after each committed batch with (done, total)
	// points of this sweep (stored before + evaluated so far).
	Progress func(done, total int)
	// Now supplies the sweeps table's start/end times (default time.Now). Times are
	// metadata of the sweeps table only, never part of a point row.
	Now func() time.Time
	// Arguments is recorded in the sweeps table (JSON-encoded; default: the spec).
	Arguments any
}

// SweepResult counts what a sweep did.
type SweepResult struct {
	SweepID   int64
	Total     int // points in the search space
	Skipped   int // already stored (not evaluated)
	Evaluated int // evaluated and written in this run
	OOM       int // evaluated rows that do not fit in memory
	// NoPerfData counts points the perf data cannot price (IsPerfDataGap): skipped
	// like aiconfigurator skips them, not stored, so a rerun tries them again.
	NoPerfData int
	// FirstNoPerfData is the error of the first such point in enumeration order
	// (deterministic), to tell the user what is missing.
	FirstNoPerfData string
	Replaced        int // stale rows of another evaluator version deleted first
	// Abandoned counts earlier sweeps found still running (their process was
	// killed) and marked interrupted when this one started (store.BeginSweep).
	Abandoned int
	Groups    []store.Group
	Version   string
}

// Sweep evaluates spec's search space into st: every point not yet stored gets the
// legacy estimate and the screening tier. Points are evaluated in parallel and
// written in batches, each batch one transaction (whole rows only); cancelling ctx
// stops after the batch in flight is committed or discarded, and rerunning resumes
// from what is stored. Row content depends only on the point's inputs.
func Sweep(ctx context.Context, st *store.Store, ev Evaluator, spec SweepSpec, opt SweepOptions) (SweepResult, error) {
	var res SweepResult
	if err := spec.validate(); err != nil {
		return res, err
	}
	r, err := ev.Resolve(ctx, spec.Model, spec.System, spec.Backend, spec.Version)
	if err != nil {
		return res, err
	}
	res.Version = r.Version
	pts, err := Enumerate(spec, r, ev.Name())
	if err != nil {
		return res, err
	}
	res.Total = len(pts)
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	if opt.BatchSize <= 0 {
		opt.BatchSize = 256
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	args := opt.Arguments
	if args == nil {
		args = spec
	}
	argsJSON, err := json.Marshal(args)
	if err != nil {
		return res, fmt.Errorf("encode sweep arguments: %w", err)
	}

	// Which points are stored already (incremental sweep). Rows of the same groups
	// made by another evaluator version are stale and replaced, so a frontier never
	// mixes numbers of two code versions.
	stored := map[string]struct{}{}
	seen := map[store.Group]bool{}
	for i := range pts {
		g := pts[i].Group()
		if seen[g] {
			continue
		}
		seen[g] = true
		res.Groups = append(res.Groups, g)
		n, err := st.DeleteStale(ctx, g, ev.Name())
		if err != nil {
			return res, err
		}
		res.Replaced += n
		ks, err := st.GroupKeys(ctx, g)
		if err != nil {
			return res, err
		}
		for k := range ks {
			stored[k] = struct{}{}
		}
	}
	var todo []store.PointInputs
	for _, p := range pts {
		if _, ok := stored[p.Key()]; ok {
			res.Skipped++
			continue
		}
		todo = append(todo, p)
	}

	id, abandoned, err := st.BeginSweep(ctx, string(argsJSON), opt.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return res, err
	}
	res.SweepID, res.Abandoned = id, abandoned
	if opt.Progress != nil {
		opt.Progress(res.Skipped, res.Total)
	}
	runErr := sweepBatches(ctx, st, ev, todo, opt, &res)
	if runErr == nil && res.NoPerfData > 0 && res.Evaluated == 0 && res.Skipped == 0 {
		// Like aiconfigurator (pareto_analysis: "No results found for any parallel
		// configuration"), skipping is per point; a sweep nothing of which can be
		// priced is an error.
		runErr = &noPerfDataError{n: res.NoPerfData, first: res.FirstNoPerfData}
	}
	rec := store.SweepRecord{ID: id, EndedAt: opt.Now().UTC().Format(time.RFC3339Nano), Status: store.SweepDone,
		PointsTotal: res.Total, PointsEvaluated: res.Evaluated, PointsSkipped: res.Skipped, PointsNoPerfData: res.NoPerfData}
	if runErr != nil {
		rec.Status = store.SweepFailed
		if errors.Is(runErr, context.Canceled) || errors.Is(runErr, context.DeadlineExceeded) || ctx.Err() != nil {
			rec.Status = store.SweepInterrupted
		}
		rec.Error = runErr.Error()
	}
	// Record the outcome even when ctx is cancelled (the rows written stay valid).
	if err := st.EndSweep(context.WithoutCancel(ctx), rec); err != nil && runErr == nil {
		runErr = err
	}
	return res, runErr
}

// sweepBatches evaluates todo in batches of opt.BatchSize, each evaluated in parallel
// and committed in one transaction.
func sweepBatches(ctx context.Context, st *store.Store, ev Evaluator, todo []store.PointInputs, opt SweepOptions, res *SweepResult) error {
	rows := make([]store.Point, opt.BatchSize)
	gap := make([]error, opt.BatchSize) // per point of the batch: why the perf data cannot price it
	for start := 0; start < len(todo); start += opt.BatchSize {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("sweep interrupted after %d of %d new points: %w", res.Evaluated, len(todo), err)
		}
		batch := todo[start:min(start+opt.BatchSize, len(todo))]
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(opt.Workers)
		for i := range batch {
			gap[i] = nil
			g.Go(func() error {
				p, err := EvaluatePoint(gctx, ev, batch[i])
				if err != nil && gctx.Err() == nil && IsPerfDataGap(err) {
					gap[i] = err // skipped and counted, like aiconfigurator
					return nil
				}
				if err != nil {
					return err
				}
				rows[i] = p
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("sweep interrupted after %d of %d new points: %w", res.Evaluated+res.NoPerfData, len(todo), ctx.Err())
			}
			return err
		}
		keep := rows[:0]
		gaps := 0
		for i := range batch {
			if gap[i] != nil {
				if res.NoPerfData+gaps == 0 {
					res.FirstNoPerfData = gap[i].Error()
				}
				gaps++
				continue
			}
			keep = append(keep, rows[i])
		}
		if _, err := st.InsertPoints(ctx, keep); err != nil {
			return err
		}
		res.Evaluated += len(keep)
		res.NoPerfData += gaps
		for i := range keep {
			if keep[i].Legacy.OOM {
				res.OOM++
			}
		}
		if opt.Progress != nil {
			opt.Progress(res.Skipped+res.Evaluated+res.NoPerfData, res.Total)
		}
	}
	return nil
}

// EvaluatePoint computes one row: the legacy estimate, then (unless OOM) the
// screening tier.
func EvaluatePoint(ctx context.Context, ev Evaluator, in store.PointInputs) (store.Point, error) {
	l, err := ev.Legacy(ctx, in)
	if err != nil {
		return store.Point{}, fmt.Errorf("legacy estimate of %s %s b%d ctx%d: %w", in.Mode, in.Parallel(), in.Batch, in.CtxTokens, err)
	}
	q := store.Queueing{Tier: store.TierNone}
	if !l.OOM {
		q, err = ev.Screen(ctx, in)
		if err != nil {
			return store.Point{}, fmt.Errorf("screening of %s %s b%d ctx%d: %w", in.Mode, in.Parallel(), in.Batch, in.CtxTokens, err)
		}
	}
	p := store.NewPoint(in, l, q)
	if err := p.Validate(); err != nil {
		return store.Point{}, fmt.Errorf("evaluator %s: %w", ev.Name(), err)
	}
	return p, nil
}
