package refine

import (
	"context"
	"reflect"
	"sync"
	"testing"

	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/store"
)

// forgetQuantitative drops ev's reused quantitative results, so a benchmark that
// evaluates the same point again measures the simulation, not the reuse.
func forgetQuantitative(ev *PerfdbEvaluator) {
	ev.mu.Lock()
	clear(ev.quants)
	ev.mu.Unlock()
}

// ctxTwins sweeps one small agg configuration (Qwen3-32B, h200_sxm, vLLM, tp 2,
// batch 8) under profile and returns two stored rows that differ only in
// ctx_tokens (the default list for isl 4000 is 4000 and 8000) and what the
// sweep derives from it (the recorded engine and its budget).
func ctxTwins(t *testing.T, profile string) (a, b store.PointInputs) {
	t.Helper()
	ctx := context.Background()
	s := openStore(t)
	spec := defaultSpec()
	spec.TPs, spec.Batches, spec.EngineProfile = []int{2}, []int{8}, profile
	if _, err := Sweep(ctx, s, NewPerfdbEvaluator(sharedSource(t)), spec, SweepOptions{Now: fixedNow}); err != nil {
		t.Fatal(err)
	}
	pts, err := s.SelectPoints(ctx, store.PointFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pts {
		for j := range pts {
			p, q := pts[i].PointInputs, pts[j].PointInputs
			if p.Mode != store.ModeAgg || pts[i].Legacy.OOM || p.CtxTokens >= q.CtxTokens {
				continue
			}
			same := q
			same.CtxTokens, same.MaxNumBatchedTokens, same.Engine = p.CtxTokens, p.MaxNumBatchedTokens, p.Engine
			if same == p {
				return p, q
			}
		}
	}
	t.Fatalf("no two agg rows differing only in ctx_tokens among %d", len(pts))
	return a, b
}

// TestPerfdbQuantitativeReusesIdenticalInput: under the aiconfigurator profile the
// recorded engine's budget is batch + isl + 1500, so two rows that differ only in
// ctx_tokens have identical queueing inputs: the second is not re-simulated, and
// its result equals a fresh evaluator's. Concurrent callers of one input share one
// run too.
func TestPerfdbQuantitativeReusesIdenticalInput(t *testing.T) {
	ctx := context.Background()
	src := sharedSource(t)
	a, b := ctxTwins(t, queueing.ProfileAIConfigurator)
	if a.Engine != b.Engine || a.MaxNumBatchedTokens != b.MaxNumBatchedTokens {
		t.Fatalf("aiconfigurator rows ctx %d and %d recorded different engines:\n%s\n%s", a.CtxTokens, b.CtxTokens, a.Engine, b.Engine)
	}
	ev := NewPerfdbEvaluator(src)
	qa, err := ev.Quantitative(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	qb, err := ev.Quantitative(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if n := ev.simulations.Load(); n != 1 {
		t.Fatalf("ctx %d after ctx %d: %d simulations, want 1 (the second input is identical)", b.CtxTokens, a.CtxTokens, n)
	}
	fresh := NewPerfdbEvaluator(src)
	want, err := fresh.Quantitative(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(qb, want) || !reflect.DeepEqual(qa, want) {
		t.Fatalf("reused result differs from a fresh evaluation:\nreused %+v\nfresh  %+v", qb, want)
	}
	// QuantitativeAdjusted (the calibration fit's path) never reuses.
	if _, err := ev.QuantitativeAdjusted(ctx, b, Identity()); err != nil {
		t.Fatal(err)
	}
	if n := ev.simulations.Load(); n != 2 {
		t.Fatalf("QuantitativeAdjusted: %d simulations, want 2", n)
	}

	conc := NewPerfdbEvaluator(src)
	out := make([]store.Quantitative, 4)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() {
			in := a
			if i%2 == 1 {
				in = b
			}
			q, err := conc.Quantitative(ctx, in)
			if err != nil {
				t.Error(err)
			}
			out[i] = q
		})
	}
	wg.Wait()
	if n := conc.simulations.Load(); n != 1 {
		t.Fatalf("4 concurrent identical inputs: %d simulations, want 1", n)
	}
	for i := range out {
		if !reflect.DeepEqual(out[i], want) {
			t.Fatalf("concurrent result %d differs from a fresh evaluation", i)
		}
	}
}

// TestPerfdbQuantitativeKeysCtxBudget: under the defaults profile the engine's
// budget is ctx_tokens + batch (pointEngine), so ctx_tokens is a queueing input
// there and the two rows are simulated separately.
func TestPerfdbQuantitativeKeysCtxBudget(t *testing.T) {
	ctx := context.Background()
	a, b := ctxTwins(t, queueing.ProfileDefaults)
	if a.MaxNumBatchedTokens != a.CtxTokens+a.Batch || b.MaxNumBatchedTokens != b.CtxTokens+b.Batch {
		t.Fatalf("defaults rows: budgets %d and %d, want ctx_tokens + batch", a.MaxNumBatchedTokens, b.MaxNumBatchedTokens)
	}
	ev := NewPerfdbEvaluator(sharedSource(t))
	for _, in := range []store.PointInputs{a, b} {
		if _, err := ev.Quantitative(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	if n := ev.simulations.Load(); n != 2 {
		t.Fatalf("defaults profile, ctx %d and %d: %d simulations, want 2 (ctx_tokens sets the budget)", a.CtxTokens, b.CtxTokens, n)
	}
}
