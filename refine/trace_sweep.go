package refine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aicdb/aicdb/store"
)

// A sweep under a trace (`aicdb sweep --trace NAME`, issue 13): the search space is
// the agg deployments of a fixed-shape sweep (tp, batch = the running cap, the
// prefill budget), with no concurrency axis — the trace fixes the arrival process.
// The deployment is --total-gpus / gpus-per-replica replicas of the point; the
// trace's requests are routed over them round-robin at arrival
// (TraceWorkload.RoundRobin). Every row's PointInputs.Workload is its
// TraceWorkloadID (trace name + content hash + slice + sessions + replicas), its
// isl/osl the slice's mean lengths and its prefix 0.

// validate checks the trace workload's knobs (the trace itself is read by Sweep).
func (t *TraceSpec) validate(s *SweepSpec) error {
	switch {
	case t.Name == "":
		return errors.New("--trace: give a trace name ('aicdb trace ls' lists them)")
	case t.MaxSessions < 0:
		return fmt.Errorf("--max-sessions %d: must be ≥ 0 (0 = no cap)", t.MaxSessions)
	case t.MaxSessions > 0 && !t.Sessions:
		return errors.New("--max-sessions needs --sessions")
	case !(t.Slice.Scale >= 0) || t.Slice.Limit < 0:
		return fmt.Errorf("--scale-rate %v, --limit %d: must be > 0 and ≥ 0", t.Slice.Scale, t.Slice.Limit)
	}
	for _, m := range s.Modes {
		if m != store.ModeAgg {
			return errors.New("--trace: disaggregated deployments are not replayed under a trace yet (the prefill/decode tandem has no trace driver): use --mode agg")
		}
	}
	return nil
}

// resolveTrace reads the trace of spec.Trace from the store (once; the evaluator
// keeps it for the points) and sets its content hash, the slice's longest request
// and the sweep's ISL/OSL to the slice's mean lengths.
func (t *TraceEvaluator) resolveTrace(ctx context.Context, spec *SweepSpec) error {
	tr := spec.Trace
	info, err := t.st.Trace(ctx, tr.Name)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("--trace %s: %w", tr.Name, err)
	}
	if err != nil {
		return err
	}
	tr.SHA256 = info.SHA256
	e, err := t.workload(ctx, tr.id(0))
	if errors.Is(err, ErrEmptySlice) {
		return fmt.Errorf("--trace %s: %w: widen --window or drop --limit", tr.Name, ErrEmptySlice)
	}
	if err != nil {
		return err
	}
	tr.MaxISL, tr.MaxOSL, tr.MeanISL, tr.MeanOSL = e.w.MaxISL, e.w.MaxOSL, e.w.MeanISL, e.w.MeanOSL
	spec.ISL, spec.OSL, spec.Prefix = e.w.MeanISL, e.w.MeanOSL, 0
	return nil
}

// id is the workload identity of the trace on the given number of replicas.
// A scale of 0 is 1 (store.TraceSlice), so both name the same workload.
func (t *TraceSpec) id(replicas int) TraceWorkloadID {
	scale := t.Slice.Scale
	if scale == 0 {
		scale = 1
	}
	return TraceWorkloadID{Trace: t.Name, SHA256: t.SHA256, StartMs: t.Slice.StartMs, EndMs: t.Slice.EndMs,
		Scale: scale, Limit: t.Slice.Limit, Sessions: t.Sessions, MaxSessions: t.MaxSessions, Replicas: replicas}
}

// checkContext rejects a trace whose longest request exceeds the model's context
// length (nil receiver: no trace).
func (t *TraceSpec) checkContext(model string, maxPos int) error {
	if t == nil || maxPos <= 0 || t.MaxISL+t.MaxOSL <= maxPos {
		return nil
	}
	return fmt.Errorf("--trace %s: its longest request (isl %d + osl %d) exceeds the context length of %s (max_position_embeddings %d); slice it with --window or --limit",
		t.Name, t.MaxISL, t.MaxOSL, model, maxPos)
}

// setWorkloads stamps every point with the trace workload on its replica count
// (nil receiver: no trace).
func (t *TraceSpec) setWorkloads(totalGPUs int, pts []store.PointInputs) {
	if t == nil {
		return
	}
	for i := range pts {
		pts[i].Workload = t.id(max(1, totalGPUs/pts[i].NumGPUs())).String()
	}
}

// TraceFilter narrows f to the rows of trace workload t: its trace (name and the
// content hash t.SHA256), slice and session knobs, on totalGPUs GPUs in all
// (replicas × gpus per replica; 0 = any budget). It ANDs onto f.Where.
func TraceFilter(f *store.PointFilter, t TraceSpec, totalGPUs int) {
	id := t.id(0)
	conds := []string{"workload != ''", "json_extract(workload, '$.trace') = ?", "json_extract(workload, '$.sha256') = ?",
		"json_extract(workload, '$.start_ms') = ?", "json_extract(workload, '$.end_ms') = ?",
		"json_extract(workload, '$.scale') = ?", "json_extract(workload, '$.limit') = ?",
		"json_extract(workload, '$.sessions') = ?", "json_extract(workload, '$.max_sessions') = ?"}
	args := []any{id.Trace, id.SHA256, id.StartMs, id.EndMs, id.Scale, id.Limit, b2i(id.Sessions), id.MaxSessions}
	if totalGPUs > 0 {
		conds = append(conds, "json_extract(workload, '$.replicas') * num_gpus = ?")
		args = append(args, totalGPUs)
	}
	w := strings.Join(conds, " AND ")
	if f.Where != "" {
		w = "(" + f.Where + ") AND " + w
	}
	f.Where, f.WhereArgs = w, append(f.WhereArgs, args...)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// workloadLabel names a row's workload for Best's one-workload check: the fixed
// shape, or the trace workload with the deployment's GPU total (replicas differ
// between rows of one budget).
func workloadLabel(p *store.Point) string {
	if p.Workload == "" {
		return fmt.Sprintf("%s isl %d osl %d prefix %d", p.Model, p.ISL, p.OSL, p.Prefix)
	}
	id, err := ParseTraceWorkload(p.Workload)
	if err != nil {
		return p.Workload
	}
	fid := id.Fidelity()
	total := id.Replicas * p.NumGPUs()
	id.Replicas = 0
	return fmt.Sprintf("%s trace %s %s on %d GPUs %s", p.Model, id.Trace, fid, total, id.String())
}
