package refine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/store"
)

// PointSetup is what a trace replay of an agg point needs from the evaluator: the
// engine the point deploys, its pass timing, and its KV pool.
type PointSetup struct {
	Engine engine.Spec
	Timing timing.Timing
	// KVTokens is one replica's KV pool in tokens: the prefix cache the reuse
	// oracle simulates (0: no prefix cache).
	KVTokens int
}

// PointTimer is implemented by evaluators that can replay a trace on a point
// (PerfdbEvaluator, Synthetic). maxISL and maxOSL are the trace slice's longest
// request (they size the KV pool's activation reserve).
type PointTimer interface {
	PointSetup(ctx context.Context, in store.PointInputs, maxISL, maxOSL int) (PointSetup, error)
}

// TraceEvaluator evaluates points of trace workloads (PointInputs.Workload set:
// W3, W4) and leaves every other point to the evaluator it wraps, whose name it
// keeps (the trace identity is in the row key already). Traces are read from the
// store once per (trace, content, slice) and shared.
//
//   - Legacy: the wrapped evaluator at the slice's mean lengths (the row's isl/osl):
//     aiconfigurator's static estimate for the mean request, which gives the row
//     its throughput columns (the pareto front and best's ranking).
//   - Screen: per-request lower bounds (traceBounds); the bracket's hi is not
//     certain, so the funnel refines every row its lower bound does not eliminate.
//   - Quantitative: the trace replay of every replica (replayReplicas), merged.
type TraceEvaluator struct {
	Evaluator
	st *store.Store

	mu    sync.Mutex
	cache map[string]*traceEntry
}

type traceEntry struct {
	once sync.Once
	w    *TraceWorkload
	err  error

	boundsOnce sync.Once
	prefix     [2][]int // per request: the most tokens it can find cached (W3, W4)
}

// WithTraces wraps ev so that it also evaluates trace-workload points read from st
// (ev itself when it already does).
func WithTraces(ev Evaluator, st *store.Store) *TraceEvaluator {
	if t, ok := ev.(*TraceEvaluator); ok {
		return t
	}
	return &TraceEvaluator{Evaluator: ev, st: st, cache: map[string]*traceEntry{}}
}

// ExpectEvaluations forwards the funnel's progress to the wrapped evaluator.
func (t *TraceEvaluator) ExpectEvaluations(n int) { expectEvaluations(t.Evaluator, n) }

// GPUMemBytes is the wrapped evaluator's GPU memory of a system (gpuMemSource),
// 0 when it does not know it: a trace sweep sizes the engine profile as any sweep.
func (t *TraceEvaluator) GPUMemBytes(ctx context.Context, system, backend, version string) (float64, error) {
	if g, ok := t.Evaluator.(gpuMemSource); ok {
		return g.GPUMemBytes(ctx, system, backend, version)
	}
	return 0, nil
}

// ErrTraceChanged is returned (wrapped) when a row's trace was re-imported with
// other content (or removed) after the row was swept.
var ErrTraceChanged = errors.New("trace changed since the sweep")

// workload loads (once) the trace slice id names, checking its content hash.
func (t *TraceEvaluator) workload(ctx context.Context, id TraceWorkloadID) (*traceEntry, error) {
	base := id
	base.Sessions, base.MaxSessions, base.Replicas = false, 0, 1
	k := base.String()
	t.mu.Lock()
	e, ok := t.cache[k]
	if !ok {
		e = &traceEntry{}
		t.cache[k] = e
	}
	t.mu.Unlock()
	e.once.Do(func() {
		info, err := t.st.Trace(ctx, id.Trace)
		if errors.Is(err, store.ErrNotFound) {
			e.err = fmt.Errorf("trace %s: %w: it was removed; re-import it and re-run 'aicdb sweep --trace %s'", id.Trace, ErrTraceChanged, id.Trace)
			return
		}
		if err != nil {
			e.err = err
			return
		}
		if info.SHA256 != id.SHA256 {
			e.err = fmt.Errorf("trace %s: %w: it was re-imported with other content (sha256 %.12s…, the rows were swept on %.12s…); re-run 'aicdb sweep --trace %s'",
				id.Trace, ErrTraceChanged, info.SHA256, id.SHA256, id.Trace)
			return
		}
		e.w, e.err = LoadTraceWorkload(ctx, t.st, info, id.Slice())
	})
	return e, e.err
}

// traceOf returns the point's trace workload, or ok = false for a fixed shape.
func (t *TraceEvaluator) traceOf(ctx context.Context, in store.PointInputs) (TraceWorkloadID, *traceEntry, PointSetup, bool, error) {
	if in.Workload == "" {
		return TraceWorkloadID{}, nil, PointSetup{}, false, nil
	}
	id, err := ParseTraceWorkload(in.Workload)
	if err != nil {
		return id, nil, PointSetup{}, true, err
	}
	if in.Mode != store.ModeAgg {
		return id, nil, PointSetup{}, true, fmt.Errorf("%s %s: %w (a trace is replayed on agg points only)", in.Mode, in.Parallel(), ErrNoQuantitative)
	}
	e, err := t.workload(ctx, id)
	if err != nil {
		return id, nil, PointSetup{}, true, err
	}
	pt, ok := t.Evaluator.(PointTimer)
	if !ok {
		return id, nil, PointSetup{}, true, fmt.Errorf("evaluator %s cannot replay traces", t.Name())
	}
	ps, err := pt.PointSetup(ctx, in, e.w.MaxISL, e.w.MaxOSL)
	// The sweep's rule (engine): chunked prefill is on when a prompt would not fit
	// the per-pass budget (V-R1, T-R1, S-R1) — here the trace's longest prompt, not
	// the mean shape the row's isl holds.
	if b := in.MaxNumBatchedTokens; err == nil && !ps.Engine.EnableChunkedPrefill && b > 0 && b < e.w.MaxISL {
		ps.Engine.EnableChunkedPrefill = true
	}
	return id, e, ps, true, err
}

// Screen implements Evaluator.
func (t *TraceEvaluator) Screen(ctx context.Context, in store.PointInputs) (store.Queueing, error) {
	id, e, ps, ok, err := t.traceOf(ctx, in)
	if !ok {
		return t.Evaluator.Screen(ctx, in)
	}
	if err != nil {
		return store.Queueing{}, err
	}
	return e.bounds(id, ps)
}

// Quantitative implements Evaluator.
func (t *TraceEvaluator) Quantitative(ctx context.Context, in store.PointInputs) (store.Quantitative, error) {
	id, e, ps, ok, err := t.traceOf(ctx, in)
	if !ok {
		return t.Evaluator.Quantitative(ctx, in)
	}
	if err != nil {
		return store.Quantitative{}, err
	}
	r, err := replayReplicas(ctx, e.w, id, in.Backend, ps)
	if errors.Is(err, queueing.ErrSessionContextsEvicted) {
		// a regime the calendar does not model: the row keeps its screening tier,
		// its KV note saying why (EvaluateRow), and best reports it unresolved
		return store.Quantitative{}, fmt.Errorf("%w: %w", ErrNoQuantitative, err)
	}
	if err != nil {
		return store.Quantitative{}, err
	}
	var out store.Quantitative
	if err := fillColumns(&out.V, r); err != nil {
		return out, err
	}
	out.ThroughputRPS, out.OutputTokensPerS, out.Fidelity = r.ThroughputRPS, r.OutputTokensPerS, id.Fidelity()
	d, err := json.Marshal(map[string]queueing.Distribution{"ttft_steady": r.TTFTSteady, "ttft_transient": r.TTFTTransient,
		"itl": r.ITL, "tpot": r.TPOT, "e2e": r.E2E})
	if err != nil {
		return out, fmt.Errorf("encode distributions: %w", err)
	}
	out.Distributions = string(d)
	return out, nil
}

// reuseConfig is the prefix cache of a replica with a KV pool of kvTokens: the
// backend's policy (V-R prefix caching on full blocks, S radix tree, T block
// reuse; on by default in all three engines) in the engine's block size.
func reuseConfig(backend string, e engine.Spec, kvTokens int) *oracle.ReuseConfig {
	if kvTokens <= 0 {
		return nil
	}
	b := engine.Backend(backend)
	bs := e.BlockSize
	if bs <= 0 {
		bs = oracle.DefaultReuseBlockSize(b)
	}
	blocks := max(1, kvTokens/bs)
	if b == engine.VLLM {
		blocks = min(blocks, oracle.MaxReuseVLLMBlocks)
	}
	return &oracle.ReuseConfig{Backend: b, KVBlocks: blocks, BlockSize: bs}
}

// replayReplicas replays the trace on each of id.Replicas replicas of the point —
// requests routed round-robin at arrival (TraceWorkload.RoundRobin), each replica
// with its own prefix cache and, for W4, its own cap of id.MaxSessions sessions —
// and merges the reports: every request's TTFT, TPOT and E2E count once, every
// decode interval once for ITL, and the throughput is all requests over the span
// from the first arrival to the last completion. One replica is the plain replay.
func replayReplicas(ctx context.Context, w *TraceWorkload, id TraceWorkloadID, backend string, ps PointSetup) (*queueing.Report, error) {
	rc := TraceReplay{Engine: ps.Engine, Timing: ps.Timing, Reuse: reuseConfig(backend, ps.Engine, ps.KVTokens),
		Sessions: id.Sessions, MaxSessions: id.MaxSessions}
	if id.Sessions && rc.Engine.KVCapacityTokens <= 0 && ps.KVTokens > 0 {
		// W4: the calendar gets the replica's pool, so that it refuses a replay whose
		// session contexts cannot all stay cached (queueing.ErrSessionContextsEvicted)
		rc.Engine.KVCapacityTokens = ps.KVTokens
	}
	parts := w.RoundRobin(id.Replicas, id.Sessions)
	var reps []*queueing.Report
	for _, idx := range parts {
		if len(idx) == 0 {
			continue
		}
		r, err := w.Replay(ctx, idx, rc)
		if err != nil {
			return nil, fmt.Errorf("trace %s replay: %w", w.Info.Name, err)
		}
		reps = append(reps, r)
	}
	if len(reps) == 1 {
		return reps[0], nil
	}
	return mergeReports(reps)
}

// mergeReports pools replica reports (see replayReplicas).
func mergeReports(reps []*queueing.Report) (*queueing.Report, error) {
	out := &queueing.Report{Tier: reps[0].Tier, Fidelity: reps[0].Fidelity}
	var ttft, tr, itl, tpot, e2e []queueing.Atom
	add := func(dst []queueing.Atom, d queueing.Distribution, units float64) []queueing.Atom {
		tw := d.TotalWeight()
		if tw <= 0 || units <= 0 {
			return dst
		}
		for _, a := range d.Atoms() {
			dst = append(dst, queueing.Atom{Value: a.Value, Weight: a.Weight * units / tw})
		}
		return dst
	}
	first, last := math.Inf(1), math.Inf(-1)
	n, toks, pre := 0.0, 0.0, 0.0
	for _, r := range reps {
		reqs, intervals, multi := 0.0, 0.0, 0.0
		for _, q := range r.Requests {
			reqs++
			toks += float64(q.OSL)
			if q.OSL > 1 {
				multi++
				intervals += float64(q.OSL - 1)
			}
		}
		ttft = add(ttft, r.TTFTSteady, reqs)
		tr = add(tr, r.TTFTTransient, reqs)
		itl = add(itl, r.ITL, intervals)
		tpot = add(tpot, r.TPOT, multi)
		e2e = add(e2e, r.E2E, reqs)
		n += reqs
		pre += r.PreemptionsPerRequest * reqs
		first, last = math.Min(first, r.Diagnostics.WindowStartMs), math.Max(last, r.Diagnostics.WindowEndMs)
		out.KVUtilPeak = math.Max(out.KVUtilPeak, r.KVUtilPeak)
		out.Diagnostics.Passes += r.Diagnostics.Passes
		out.Requests = append(out.Requests, r.Requests...)
	}
	var err error
	for _, d := range []struct {
		dst   *queueing.Distribution
		atoms []queueing.Atom
	}{{&out.TTFTSteady, ttft}, {&out.TTFTTransient, tr}, {&out.ITL, itl}, {&out.TPOT, tpot}, {&out.E2E, e2e}} {
		if *d.dst, err = queueing.NewDistribution(d.atoms); err != nil {
			return nil, err
		}
	}
	if span := last - first; span > 0 {
		out.ThroughputRPS, out.OutputTokensPerS = n/span*1000, toks/span*1000
	}
	if n > 0 {
		out.PreemptionsPerRequest = pre / n
	}
	out.Diagnostics.WindowStartMs, out.Diagnostics.WindowEndMs = first, last
	return out, nil
}

// prefixBounds returns, per request, the most prompt tokens it can find in a prefix
// cache: without sessions, its hash-id blocks that appeared in any earlier request
// of the slice (a cache holds nothing else: every block's identity chains its whole
// prefix, and no cache, whatever its size or replica, holds a block no earlier
// request brought) times the hash block; with sessions also the previous turn's
// context (queueing.QuantitativeSessions: min(isl − 1, previous isl + osl)). At
// most isl − 1.
func (w *TraceWorkload) prefixBounds(sessions bool) []int {
	out := make([]int, len(w.Reqs))
	seen := map[int64]bool{}
	last := map[int]int{} // session → its previous turn
	for i, r := range w.Reqs {
		hits := 0
		for _, h := range w.hashIDs(i) {
			if seen[h] {
				hits++
			}
		}
		for _, h := range w.hashIDs(i) {
			seen[h] = true
		}
		p := hits * w.Info.HashBlock
		if sessions && r.Session != 0 {
			if j, ok := last[r.Session]; ok {
				p = max(p, w.Reqs[j].ISL+w.Reqs[j].OSL)
			}
			last[r.Session] = i
		}
		out[i] = min(p, r.ISL-1)
	}
	return out
}

// bounds is the screening tier of a trace point: lower bounds per request, under
// the calendar's premise that a pass costs no less than any pass it contains and
// that splitting a prefill into chunks costs no less than one pass with all of it.
// A request's TTFT is at least the stage time plus one pass prefilling its
// uncached tokens (isl − prefixBounds) alone; each decode interval is at least one
// pass decoding one row of context 1 alone. Since TTFT_i ≥ L_i for every request, every quantile
// of the TTFTs is at least the same quantile of the L_i (the same quantile rule), so
// ttft_steady_p99_lo is a true lower bound; hi is not certain (set to lo), so a row
// that lo does not eliminate is refined by the trace replay. The queueing columns
// hold these lower bounds (tier screening).
func (e *traceEntry) bounds(id TraceWorkloadID, ps PointSetup) (store.Queueing, error) {
	e.boundsOnce.Do(func() {
		e.prefix[0] = e.w.prefixBounds(false)
		e.prefix[1] = e.w.prefixBounds(true)
	})
	pre := e.prefix[0]
	if id.Sessions {
		pre = e.prefix[1]
	}
	n := len(e.w.Reqs)
	ttft, itl, tpot, e2e := make([]queueing.Atom, n), make([]queueing.Atom, 0, n), make([]queueing.Atom, 0, n), make([]queueing.Atom, n)
	var pass timing.Pass
	for i, r := range e.w.Reqs {
		pass.Reset()
		pass.Prefill = append(pass.Prefill, timing.Chunk{Tokens: r.ISL - pre[i]})
		l, err := ps.Timing.PassMs(&pass)
		if err != nil {
			return store.Queueing{}, fmt.Errorf("trace %s request %d: pricing its prefill alone (%d tokens): %w", e.w.Info.Name, e.w.Seqs[i], r.ISL-pre[i], err)
		}
		l += ps.Engine.StageMs
		pass.Reset()
		pass.Decode = append(pass.Decode, 1) // the least context a decode row can have
		d, err := ps.Timing.PassMs(&pass)
		if err != nil {
			return store.Queueing{}, fmt.Errorf("trace %s request %d: pricing a decode row alone: %w", e.w.Info.Name, e.w.Seqs[i], err)
		}
		if !(l >= 0) || !(d >= 0) || math.IsInf(l+d, 0) {
			return store.Queueing{}, fmt.Errorf("trace %s request %d: pass time not finite", e.w.Info.Name, e.w.Seqs[i])
		}
		ttft[i] = queueing.Atom{Value: l, Weight: 1}
		e2e[i] = queueing.Atom{Value: l + float64(r.OSL-1)*d, Weight: 1}
		if r.OSL > 1 {
			itl = append(itl, queueing.Atom{Value: d, Weight: float64(r.OSL - 1)})
			tpot = append(tpot, queueing.Atom{Value: d, Weight: 1})
		}
	}
	var rep queueing.Report
	var err error
	for _, x := range []struct {
		dst   *queueing.Distribution
		atoms []queueing.Atom
	}{{&rep.TTFTSteady, ttft}, {&rep.ITL, itl}, {&rep.TPOT, tpot}, {&rep.E2E, e2e}} {
		if *x.dst, err = queueing.NewDistribution(x.atoms); err != nil {
			return store.Queueing{}, err
		}
	}
	rep.TTFTTransient = rep.TTFTSteady
	q := store.Queueing{Valid: true, Tier: store.TierScreening, Fidelity: id.Fidelity(), HasBracket: true}
	if err := fillColumns(&q.V, &rep); err != nil {
		return q, err
	}
	// 1 − 1e-9: the replay sums the same pass times in another order.
	q.P99Lo = rep.TTFTSteady.Quantile(0.99) * (1 - 1e-9)
	q.P99Hi = q.P99Lo
	return q, nil
}
