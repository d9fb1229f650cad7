package refine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/store"
)

// importTestTrace stores n requests under name: a Poisson-ish deterministic stream
// of 2 s⁻¹ with shared-prefix hash ids (block 512) and, every 3rd request, a
// session turn. salt changes the content (and so the hash); salt < 0 stores no
// hash ids (no prefix reuse).
func importTestTrace(t testing.TB, st *store.Store, name string, n int, salt int) store.TraceInfo {
	t.Helper()
	ctx := context.Background()
	meta := store.TraceMeta{Name: name, Format: "jsonl", Source: "test", SHA256: fmt.Sprintf("%064x", 1000*n+salt), HashBlock: 512,
		Params: "{}", ImportedAt: "2026-12-03T00:00:00Z"}
	res, err := st.ImportTrace(ctx, meta, func(emit func(store.TraceRow) error) error {
		at := 0.0
		for i := range n {
			at += float64(250 + (i*7919)%500)
			isl := 600 + (i*397+salt)%1800
			ids := fmt.Sprintf("[%d, %d, %d]", i%4, 100+i%4, 1000+i)
			if salt < 0 {
				ids = ""
			}
			r := store.TraceRow{Seq: int64(i), Line: i + 1, ArrivalMs: at,
				ISL: isl, OSL: 20 + (i*31)%90, HashIDs: ids}
			if i%3 == 0 {
				r.Session, r.ThinkMs = fmt.Sprintf("s%d", i%5), 300
			}
			if err := emit(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.Info
}

func traceSweepSpec(name string, total int, sessions bool) SweepSpec {
	return SweepSpec{Model: "Qwen/Qwen3-32B", System: "h200_sxm", Backend: "vllm", TotalGPUs: total,
		TPs: []int{1, 2}, Batches: []int{4, 16}, CtxTokens: []int{4096},
		Trace: &TraceSpec{Name: name, Slice: store.TraceSlice{Scale: 1}, Sessions: sessions}}
}

// TestTraceSweep: every row of a trace sweep carries the trace identity (W3), its
// screening bracket's lower bound is below the replay's p99 (honest), and the
// quantitative tier of a one-replica row is exactly the trace replay of that
// deployment; a re-import under the same name gives other keys, and the old rows
// refuse to evaluate.
func TestTraceSweep(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	info := importTestTrace(t, st, "t", 60, 0)
	ev := Synthetic{}
	spec := traceSweepSpec("t", 2, false)
	res, err := Sweep(ctx, st, ev, spec, SweepOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	// tp1: 2 replicas, tp2: 1 replica; 2 batches each.
	if res.Total != 4 || res.Evaluated != 4 {
		t.Fatalf("sweep: %+v", res)
	}
	rows, err := st.SelectPoints(ctx, store.PointFilter{IncludeOOM: true})
	if err != nil || len(rows) != 4 {
		t.Fatalf("rows: %v %d", err, len(rows))
	}
	tev := WithTraces(ev, st)
	for _, p := range rows {
		id, err := ParseTraceWorkload(p.Workload)
		if err != nil || id.SHA256 != info.SHA256 || id.Replicas*p.NumGPUs() != 2 || p.Q.Fidelity != "W3" || p.Q.Tier != store.TierScreening {
			t.Fatalf("row %s b%d: workload %q fidelity %s tier %s (%v)", p.Parallel(), p.Batch, p.Workload, p.Q.Fidelity, p.Q.Tier, err)
		}
		q, err := tev.Quantitative(ctx, p.PointInputs)
		if err != nil {
			t.Fatal(err)
		}
		if p99 := q.V[store.QTTFTSteadyP99]; !(p.Q.P99Lo <= p99) || p.Q.HiCertain || q.Fidelity != "W3" {
			t.Fatalf("row %s b%d: bracket lo %v above the replay's p99 %v (or hi certain %v)", p.Parallel(), p.Batch, p.Q.P99Lo, p99, p.Q.HiCertain)
		}
		for i := range store.NumQ {
			if p.Q.V[i] > q.V[i]*(1+1e-9) && i != store.QTTFTTransientMean && i != store.QTTFTTransientMax {
				t.Fatalf("row %s b%d: screening %s = %v is not a lower bound of the replay's %v", p.Parallel(), p.Batch, store.QueueingColumns[i], p.Q.V[i], q.V[i])
			}
		}
		if id.Replicas != 1 {
			continue
		}
		// One replica: the plain replay (what `trace replay` runs) of the point's engine.
		ps, err := ev.PointSetup(ctx, p.PointInputs, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		w, err := LoadTraceWorkload(ctx, st, info, store.TraceSlice{Scale: 1})
		if err != nil {
			t.Fatal(err)
		}
		r, err := w.Replay(ctx, nil, TraceReplay{Engine: ps.Engine, Timing: ps.Timing, Reuse: reuseConfig("vllm", ps.Engine, ps.KVTokens)})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := q.V[store.QTTFTSteadyP99], r.TTFTSteady.Quantile(0.99); got != want {
			t.Fatalf("one replica: ttft p99 %v, replay %v", got, want)
		}
		cached := 0
		for _, q := range r.Requests {
			cached += q.Prefix
		}
		if cached == 0 {
			t.Fatal("the replay found no prefix-cache hit in a trace of shared prefixes")
		}
	}
	// Resumed: nothing new.
	if res, err = Sweep(ctx, st, ev, spec, SweepOptions{Workers: 1}); err != nil || res.Skipped != 4 || res.Evaluated != 0 {
		t.Fatalf("rerun: %+v %v", res, err)
	}
	// Other content under the same name: new keys; the old rows no longer evaluate.
	if err := st.DeleteTrace(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	importTestTrace(t, st, "t", 60, 1)
	if _, err := WithTraces(ev, st).Quantitative(ctx, rows[0].PointInputs); !errors.Is(err, ErrTraceChanged) {
		t.Fatalf("stale row evaluated: %v", err)
	}
	if res, err = Sweep(ctx, st, ev, spec, SweepOptions{Workers: 1}); err != nil || res.Evaluated != 4 || res.Skipped != 0 {
		t.Fatalf("after re-import: %+v %v", res, err)
	}
}

// TestTraceSweepRefuses: disagg and unknown traces are one-line errors.
func TestTraceSweepRefuses(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	importTestTrace(t, st, "t", 10, 0)
	spec := traceSweepSpec("nope", 2, false)
	if _, err := Sweep(ctx, st, Synthetic{}, spec, SweepOptions{}); err == nil || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown trace: %v", err)
	}
	spec = traceSweepSpec("t", 2, false)
	spec.Modes = []string{store.ModeDisagg}
	if _, err := Sweep(ctx, st, Synthetic{}, spec, SweepOptions{}); err == nil || err.Error() != "--trace: disaggregated deployments are not replayed under a trace yet (the prefill/decode tandem has no trace driver): use --mode agg" {
		t.Fatalf("disagg: %v", err)
	}
}

// TestRoundRobin: requests go to replica k mod r in arrival order; with sessions a
// session's turns follow its first turn, session-less requests are units alone.
func TestRoundRobin(t *testing.T) {
	w := &TraceWorkload{}
	for _, s := range []int{0, 1, 0, 1, 2, 0, 2} {
		w.Reqs = append(w.Reqs, traceReq(s))
	}
	if got := w.RoundRobin(2, false); !slices.Equal(got[0], []int{0, 2, 4, 6}) || !slices.Equal(got[1], []int{1, 3, 5}) {
		t.Fatalf("per request: %v", got)
	}
	// Units in order: 0 (req 0), s1 (1, 3), 2 (req 2), s2 (4, 6), 5 (req 5).
	got := w.RoundRobin(2, true)
	if !slices.Equal(got[0], []int{0, 2, 5}) || !slices.Equal(got[1], []int{1, 3, 4, 6}) {
		t.Fatalf("sessions: %v", got)
	}
	if one := w.RoundRobin(1, true); len(one[0]) != 7 {
		t.Fatalf("one replica: %v", one)
	}
}

func traceReq(session int) queueing.TraceRequest {
	return queueing.TraceRequest{ISL: 10, OSL: 2, Session: session}
}

// FuzzParseTraceWorkload: the row identity parser never panics, and what it accepts
// re-encodes to an identity that parses to the same value.
func FuzzParseTraceWorkload(f *testing.F) {
	f.Add(TraceWorkloadID{Trace: "t", SHA256: "ab", Scale: 1, Replicas: 2}.String())
	f.Add(`{"trace":"","replicas":1}`)
	f.Add(`[1]`)
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseTraceWorkload(s)
		if err != nil {
			return
		}
		back, err := ParseTraceWorkload(id.String())
		if err != nil || back != id {
			t.Fatalf("%q: round trip %+v → %+v (%v)", s, id, back, err)
		}
	})
}

// TestTraceBoundsProperty: on random traces and deployments the screening columns
// are lower bounds of the replay's (every replica count), and the pooled TTFT
// distribution is the per-request TTFTs of all replicas.
func TestTraceBoundsProperty(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	importTestTrace(t, st, "t", 80, 0)
	tev := WithTraces(Synthetic{}, st)
	rapid.Check(t, func(rt *rapid.T) {
		spec := traceSweepSpec("t", rapid.SampledFrom([]int{1, 2, 4}).Draw(rt, "gpus"), rapid.Bool().Draw(rt, "sessions"))
		spec.Trace.Slice = store.TraceSlice{Limit: rapid.IntRange(0, 60).Draw(rt, "limit"), Scale: rapid.Float64Range(0.5, 4).Draw(rt, "scale")}
		spec.TPs = []int{1}
		spec.Batches = []int{rapid.IntRange(1, 64).Draw(rt, "batch")}
		spec.CtxTokens = []int{rapid.SampledFrom([]int{512, 2048, 8192}).Draw(rt, "ctx")}
		if err := tev.resolveTrace(ctx, &spec); err != nil {
			rt.Fatal(err)
		}
		r, _ := tev.Resolve(ctx, spec.Model, spec.System, spec.Backend, "")
		pts, err := Enumerate(spec, r, tev.Name())
		if err != nil {
			rt.Fatal(err)
		}
		for _, in := range pts {
			q, err := tev.Screen(ctx, in)
			if err != nil {
				rt.Fatal(err)
			}
			rep, err := tev.Quantitative(ctx, in)
			if err != nil {
				rt.Fatal(err)
			}
			for i := range store.NumQ {
				if i != store.QTTFTTransientMean && i != store.QTTFTTransientMax && q.V[i] > rep.V[i]*(1+1e-9) {
					rt.Fatalf("%s: screening %v > replay %v", store.QueueingColumns[i], q.V[i], rep.V[i])
				}
			}
			if q.P99Lo > rep.V[store.QTTFTSteadyP99] {
				rt.Fatalf("bracket lo %v > replay p99 %v", q.P99Lo, rep.V[store.QTTFTSteadyP99])
			}
			// Pooled replicas: the TTFT distribution is every request's TTFT once.
			id, e, ps, _, err := tev.traceOf(ctx, in)
			if err != nil {
				rt.Fatal(err)
			}
			r, err := replayReplicas(ctx, e.w, id, in.Backend, ps)
			if err != nil {
				rt.Fatal(err)
			}
			atoms := make([]queueing.Atom, len(r.Requests))
			for i, x := range r.Requests {
				atoms[i] = queueing.Atom{Value: x.TTFTMs, Weight: 1}
			}
			d, _ := queueing.NewDistribution(atoms)
			if len(r.Requests) != len(e.w.Reqs) || d.Quantile(0.99) != r.TTFTSteady.Quantile(0.99) || d.Quantile(0.5) != r.TTFTSteady.Quantile(0.5) {
				rt.Fatalf("%d replicas: pooled p99 %v, per-request %v (%d of %d requests)", id.Replicas, r.TTFTSteady.Quantile(0.99), d.Quantile(0.99), len(r.Requests), len(e.w.Reqs))
			}
		}
	})
}

// TestTraceChunkedForLongestPrompt: a budget above the mean prompt but below the
// trace's longest turns chunked prefill on (the sweep's rule at the longest prompt),
// so the replay does not deadlock on the long prompts.
func TestTraceChunkedForLongestPrompt(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	importTestTrace(t, st, "t", 60, -1)
	tev := WithTraces(Synthetic{}, st)
	spec := traceSweepSpec("t", 1, false)
	spec.TPs, spec.Batches, spec.CtxTokens = []int{1}, []int{4}, []int{2048}
	if err := tev.resolveTrace(ctx, &spec); err != nil {
		t.Fatal(err)
	}
	r, _ := tev.Resolve(ctx, spec.Model, spec.System, spec.Backend, "")
	pts, err := Enumerate(spec, r, tev.Name())
	if err != nil || len(pts) != 1 {
		t.Fatalf("%v %d", err, len(pts))
	}
	in := pts[0]
	if !(spec.ISL < in.MaxNumBatchedTokens && in.MaxNumBatchedTokens < spec.Trace.MaxISL) || in.ChunkedPrefill {
		t.Fatalf("not the case under test: mean isl %d, budget %d, longest %d, chunked %v", spec.ISL, in.MaxNumBatchedTokens, spec.Trace.MaxISL, in.ChunkedPrefill)
	}
	if _, err := tev.Quantitative(ctx, in); err != nil {
		t.Fatal(err)
	}
}

// smallPool is Synthetic with a KV pool of kv tokens per replica.
type smallPool struct {
	Synthetic
	kv int
}

func (s smallPool) PointSetup(ctx context.Context, in store.PointInputs, maxISL, maxOSL int) (PointSetup, error) {
	ps, err := s.Synthetic.PointSetup(ctx, in, maxISL, maxOSL)
	ps.KVTokens = s.kv
	return ps, err
}

// TestTraceSessionsKVPressure: a W4 trace row whose replica pool cannot keep a
// thinking session's context while another session runs has no quantitative tier
// (ErrNoQuantitative wrapping queueing.ErrSessionContextsEvicted: the row keeps
// its screening tier), where an ample pool replays it as before and W3 rows are
// not affected.
func TestTraceSessionsKVPressure(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	meta := store.TraceMeta{Name: "kv", Format: "jsonl", Source: "test", SHA256: fmt.Sprintf("%064x", 77), Params: "{}", ImportedAt: "2026-12-03T00:00:00Z"}
	if _, err := st.ImportTrace(ctx, meta, func(emit func(store.TraceRow) error) error {
		for i, r := range []store.TraceRow{
			{ArrivalMs: 0, ISL: 1000, OSL: 50, Session: "a"},
			{ArrivalMs: 1000, ISL: 800, OSL: 20, Session: "b"},
			{ArrivalMs: 1100, ISL: 1100, OSL: 10, Session: "a", ThinkMs: 3000},
		} {
			r.Seq, r.Line = int64(i), i+1
			if err := emit(r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, sessions := range []bool{false, true} {
		spec := traceSweepSpec("kv", 1, sessions)
		spec.TPs, spec.Batches = []int{1}, []int{16}
		if res, err := Sweep(ctx, st, Synthetic{}, spec, SweepOptions{Workers: 1}); err != nil || res.Evaluated != 1 {
			t.Fatalf("sweep (sessions %v): %+v %v", sessions, res, err)
		}
	}
	rows, err := st.SelectPoints(ctx, store.PointFilter{IncludeOOM: true})
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows: %v %d", err, len(rows))
	}
	for _, p := range rows {
		w4 := p.Q.Fidelity == "W4"
		for _, kv := range []int{100 * 16, 1 << 20} {
			_, err := WithTraces(smallPool{kv: kv}, st).Quantitative(ctx, p.PointInputs)
			refused := errors.Is(err, ErrNoQuantitative) && errors.Is(err, queueing.ErrSessionContextsEvicted)
			if want := w4 && kv < 1<<20; refused != want || (!want && err != nil) {
				t.Fatalf("%s row, pool %d tokens: %v; want refused = %v", p.Q.Fidelity, kv, err, want)
			}
		}
	}
	// best: the W4 row stays at screening tier (reported unresolved), counted with its reason
	sla, err := SLAInput{TTFT: 1e6, TTFTPct: "p99"}.Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Best(ctx, st, WithTraces(smallPool{kv: 100 * 16}, st), BestOptions{Filter: store.PointFilter{Where: "workload_fidelity = 'W4'"}, SLA: sla, TopK: 1, Refine: true})
	if err != nil || len(res.Rows) != 1 || res.Rows[0].Q.Tier != store.TierScreening || res.Unresolved != 1 || res.SessionsEvicted != 1 ||
		!strings.Contains(res.FirstSessionsEvicted, queueing.ErrSessionContextsEvicted.Error()) {
		t.Fatalf("best: %+v %v", res, err)
	}
}
