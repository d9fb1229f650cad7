package refine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing"
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
	// Lease: a sweep holds a lease on the workload groups it evaluates (store.BeginSweep).
	// Host and PID identify this process (default os.Hostname, os.Getpid).
	Host string
	PID  int
	// Heartbeat is how often the lease is refreshed (default DefaultHeartbeat);
	// LeaseTimeout is how old a heartbeat may be before its holder counts as gone
	// (default DefaultLeaseTimeout); LeasePoll is how often a sweep waiting for
	// another's lease retries (default DefaultLeasePoll).
	Heartbeat, LeaseTimeout, LeasePoll time.Duration
	// Alive reports whether a process of this host is running (default ProcessAlive).
	Alive func(pid int) bool
	// OnWait, if set, is called once when the sweep has to wait for a live sweep
	// holding a lease on some of its points; it then reuses that sweep's rows.
	OnWait func(holder store.SweepLease)
}

// Lease defaults (SweepOptions).
const (
	DefaultHeartbeat    = 5 * time.Second
	DefaultLeaseTimeout = 2 * time.Minute
	DefaultLeasePoll    = time.Second
)

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
	// KVTight counts evaluated rows whose KV pool cannot hold C requests at full
	// length; their quantitative tier was stored with them (EvaluateRow).
	// Preempting counts those whose steady state preempts (off the pareto front).
	KVTight, Preempting int
	// Abandoned counts earlier sweeps found still running with their lease holder
	// gone (the process was killed) and marked interrupted when this one started
	// (store.BeginSweep).
	Abandoned int
	// WaitedFor is the id of the live sweep whose lease this one waited for before
	// it started (0: it did not wait); its committed rows were reused.
	WaitedFor int64
	Groups    []store.Group
	Version   string
}

// Sweep evaluates spec's search space into st: every point not yet stored gets the
// legacy estimate and the screening tier. Points are evaluated in parallel and
// written in batches, each batch one transaction (whole rows only); cancelling ctx
// stops after the batch in flight is committed or discarded, and rerunning resumes
// from what is stored. Row content depends only on the point's inputs. The sweep
// holds a lease on its workload groups while it runs (store.BeginSweep): a sweep of
// a group another live sweep is evaluating waits for it (opt.OnWait), then reuses
// the rows it committed, so concurrent sweeps evaluate each point once.
func Sweep(ctx context.Context, st *store.Store, ev Evaluator, spec SweepSpec, opt SweepOptions) (SweepResult, error) {
	var res SweepResult
	if err := spec.validate(); err != nil {
		return res, err
	}
	if spec.Trace != nil {
		tev := WithTraces(ev, st)
		if err := tev.resolveTrace(ctx, &spec); err != nil {
			return res, err
		}
		ev = tev
	}
	r, err := ev.Resolve(ctx, spec.Model, spec.System, spec.Backend, spec.Version)
	if err != nil {
		return res, err
	}
	res.Version = r.Version
	if r.GPUMemBytes, err = sweepGPUMem(ctx, ev, spec, r.Version); err != nil {
		return res, err
	}
	pts, err := Enumerate(spec, r, ev.Name())
	if err != nil {
		return res, err
	}
	if dc, ok := ev.(disaggChecker); ok {
		if err := dc.CheckDisagg(ctx, pts); err != nil {
			return res, err
		}
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

	if err := opt.leaseDefaults(); err != nil {
		return res, err
	}
	seen := map[store.Group]bool{}
	for i := range pts {
		if g := pts[i].Group(); !seen[g] {
			seen[g] = true
			res.Groups = append(res.Groups, g)
		}
	}
	// Take the lease on the sweep's groups (waiting while a live sweep holds one),
	// then read what is stored: a sweep that waited reuses its holder's rows.
	id, err := acquireLease(ctx, st, store.SweepStart{Arguments: string(argsJSON),
		StartedAt: opt.Now().UTC().Format(time.RFC3339Nano), PointsTotal: res.Total,
		Host: opt.Host, PID: opt.PID, Groups: res.Groups}, opt, &res)
	if err != nil {
		return res, err
	}
	res.SweepID = id
	beat, stopBeat := heartbeat(ctx, st, id, opt)
	runErr := sweepStored(beat, st, ev, pts, opt, &res)
	stopBeat()
	if cause := context.Cause(beat); runErr != nil && errors.Is(cause, store.ErrLeaseLost) {
		runErr = cause
	}
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

// sweepStored replaces stale rows of res.Groups, skips the points already stored
// (incremental sweep) and evaluates the others.
func sweepStored(ctx context.Context, st *store.Store, ev Evaluator, pts []store.PointInputs, opt SweepOptions, res *SweepResult) error {
	// Rows of the same groups made by another evaluator version are stale and
	// replaced, so a frontier never mixes numbers of two code versions.
	stored := map[string]struct{}{}
	for _, g := range res.Groups {
		n, err := st.DeleteStale(ctx, g, ev.Name())
		if err != nil {
			return err
		}
		res.Replaced += n
		ks, err := st.GroupKeys(ctx, g)
		if err != nil {
			return err
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
	if opt.Progress != nil {
		opt.Progress(res.Skipped, res.Total)
	}
	return sweepBatches(ctx, st, ev, todo, opt, res)
}

// leaseDefaults fills the lease options left zero.
func (o *SweepOptions) leaseDefaults() error {
	if o.Host == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("sweep lease: host name: %w", err)
		}
		o.Host = h
	}
	if o.PID <= 0 {
		o.PID = os.Getpid()
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.LeaseTimeout <= 0 {
		o.LeaseTimeout = DefaultLeaseTimeout
	}
	if o.LeasePoll <= 0 {
		o.LeasePoll = DefaultLeasePoll
	}
	if o.Alive == nil {
		o.Alive = ProcessAlive
	}
	return nil
}

// LeaseHolderGone reports whether the holder of lease l has stopped: it runs on
// host and its process is not alive, or its last heartbeat (or an unreadable one)
// is more than timeout before now. Only then may its sweep be marked interrupted.
func LeaseHolderGone(l store.SweepLease, host string, alive func(pid int) bool, now time.Time, timeout time.Duration) bool {
	if l.Host == host && !alive(l.PID) {
		return true
	}
	hb, err := time.Parse(time.RFC3339Nano, l.Heartbeat)
	return err != nil || now.Sub(hb) > timeout
}

// acquireLease records the sweep as running with its lease (store.BeginSweep),
// waiting, polling every opt.LeasePoll, while a live sweep holds a lease on one of
// its groups; opt.OnWait is told once.
func acquireLease(ctx context.Context, st *store.Store, start store.SweepStart, opt SweepOptions, res *SweepResult) (int64, error) {
	gone := func(l store.SweepLease) bool {
		return LeaseHolderGone(l, opt.Host, opt.Alive, opt.Now(), opt.LeaseTimeout)
	}
	for {
		id, abandoned, holder, err := st.BeginSweep(ctx, start, gone)
		res.Abandoned += abandoned
		if err != nil || holder == nil {
			return id, err
		}
		if res.WaitedFor != holder.SweepID {
			res.WaitedFor = holder.SweepID
			if opt.OnWait != nil {
				opt.OnWait(*holder)
			}
		}
		t := time.NewTimer(opt.LeasePoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("sweep interrupted while waiting for sweep %d (pid %d on %s) to finish the same points: %w",
				holder.SweepID, holder.PID, holder.Host, ctx.Err())
		case <-t.C:
		}
	}
}

// heartbeat refreshes sweep id's lease every opt.Heartbeat until stop is called.
// The returned context is ctx, cancelled with store.ErrLeaseLost as cause if a later
// sweep released the lease (it judged this process gone): the sweep then stops
// rather than evaluate points another sweep now owns. Other heartbeat errors (a busy
// store) are retried at the next beat: the timeout spans many beats.
func heartbeat(ctx context.Context, st *store.Store, id int64, opt SweepOptions) (context.Context, func()) {
	beat, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(opt.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-beat.Done():
				return
			case <-t.C:
				err := st.HeartbeatSweep(beat, id, opt.Now().UTC().Format(time.RFC3339Nano))
				if errors.Is(err, store.ErrLeaseLost) {
					cancel(err)
					return
				}
			}
		}
	}()
	return beat, func() {
		close(done)
		<-stopped
		cancel(nil)
	}
}

// sweepBatches evaluates todo in batches of opt.BatchSize, each evaluated in parallel
// and committed in one transaction.
func sweepBatches(ctx context.Context, st *store.Store, ev Evaluator, todo []store.PointInputs, opt SweepOptions, res *SweepResult) error {
	rows := make([]store.Point, opt.BatchSize)
	gap := make([]error, opt.BatchSize)                 // per point of the batch: why the perf data cannot price it
	quant := make([]*store.Quantitative, opt.BatchSize) // KV-tight rows' quantitative tier (EvaluateRow)
	for start := 0; start < len(todo); start += opt.BatchSize {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("sweep interrupted after %d of %d new points: %w", res.Evaluated, len(todo), err)
		}
		batch := todo[start:min(start+opt.BatchSize, len(todo))]
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(opt.Workers)
		for i := range batch {
			gap[i], quant[i] = nil, nil
			g.Go(func() error {
				p, r, err := EvaluateRow(gctx, ev, batch[i])
				if err != nil && gctx.Err() == nil && IsPerfDataGap(err) {
					gap[i] = err // skipped and counted, like aiconfigurator
					return nil
				}
				if err != nil {
					return err
				}
				rows[i], quant[i] = p, r
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
		var results []store.Quantitative
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
			if quant[i] != nil {
				results = append(results, *quant[i])
			}
		}
		if _, err := st.InsertPointsWithResults(ctx, keep, results); err != nil {
			return err
		}
		res.Evaluated += len(keep)
		res.NoPerfData += gaps
		for i := range keep {
			if keep[i].Legacy.OOM {
				res.OOM++
			}
		}
		for i := range results {
			res.KVTight++
			if results[i].KV.Preempts() {
				res.Preempting++
			}
		}
		if opt.Progress != nil {
			opt.Progress(res.Skipped+res.Evaluated+res.NoPerfData, res.Total)
		}
	}
	return nil
}

// EvaluatePoint computes one row: the legacy estimate, then (unless OOM) the
// screening tier with the point's KV pressure (EvaluateRow).
func EvaluatePoint(ctx context.Context, ev Evaluator, in store.PointInputs) (store.Point, error) {
	p, _, err := EvaluateRow(ctx, ev, in)
	return p, err
}

// EvaluateRow computes one row like EvaluatePoint and, for a KV-tight row (its
// screening tier cannot tell whether it preempts: no preemption count), its
// quantitative tier too (nil otherwise), so the row's preemption is known when it
// is stored and the pareto front can leave it out (store.RefreshPareto). A point
// whose worker cannot hold one request (perfdb.ErrOOM from the KV pool's memory
// arithmetic) is an OOM row whose kv_note carries the arithmetic.
func EvaluateRow(ctx context.Context, ev Evaluator, in store.PointInputs) (store.Point, *store.Quantitative, error) {
	l, err := ev.Legacy(ctx, in)
	if err != nil {
		return store.Point{}, nil, fmt.Errorf("legacy estimate of %s %s b%d ctx%d: %w", in.Mode, in.Parallel(), in.Batch, in.CtxTokens, err)
	}
	q := store.Queueing{Tier: store.TierNone}
	if l.OOM {
		q.KV.Note = "oom: weights + the KV of C requests + activations exceed the memory (legacy check)"
	} else {
		q, err = ev.Screen(ctx, in)
		if isKVOOM(err) {
			l = store.Legacy{OOM: true, Concurrency: l.Concurrency}
			q = store.Queueing{Tier: store.TierNone, KV: store.KV{Note: "oom: " + err.Error()}}
		} else if err != nil {
			return store.Point{}, nil, fmt.Errorf("screening of %s %s b%d ctx%d: %w", in.Mode, in.Parallel(), in.Batch, in.CtxTokens, err)
		}
	}
	p := store.NewPoint(in, l, q)
	var quant *store.Quantitative
	switch {
	case !q.Valid:
	case q.KV.CapacityTokens > 0 && !q.KV.HasPreemptions:
		r, err := evaluate(ctx, ev, &p)
		if errors.Is(err, ErrNoQuantitative) {
			p.Q.KV.Note += "; no quantitative tier: " + err.Error()
			break
		}
		if err != nil {
			return store.Point{}, nil, err
		}
		quant = &r
	case q.KV.Note == "" && in.Mode == store.ModeDisagg:
		p.Q.KV.Note = "not modelled: the disagg pools are evaluated without a KV pool"
	case q.KV.Note == "":
		p.Q.KV.Note = "not modelled: the evaluator sets no KV pool"
	}
	if err := p.Validate(); err != nil {
		return store.Point{}, nil, fmt.Errorf("evaluator %s: %w", ev.Name(), err)
	}
	return p, quant, nil
}

// gpuMemSource is an evaluator that knows a system's GPU memory.
type gpuMemSource interface {
	GPUMemBytes(ctx context.Context, system, backend, version string) (float64, error)
}

// sweepGPUMem is the GPU memory the engine profile needs: SGLang under the
// aiconfigurator profile sizes chunked_prefill_size from it (SGLang's own
// default, which the rules leave alone); 0 otherwise, or when ev does not know it.
func sweepGPUMem(ctx context.Context, ev Evaluator, spec SweepSpec, version string) (float64, error) {
	if spec.Backend != string(engine.SGLang) || spec.EngineProfile != queueing.ProfileAIConfigurator {
		return 0, nil
	}
	g, ok := ev.(gpuMemSource)
	if !ok {
		return 0, nil
	}
	m, err := g.GPUMemBytes(ctx, spec.System, spec.Backend, version)
	if err != nil {
		return 0, fmt.Errorf("GPU memory of %s: %w", spec.System, err)
	}
	return m, nil
}
