package refine

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// counting wraps an evaluator and counts its calls.
type counting struct {
	Evaluator
	legacy, screen, quant atomic.Int64
}

func (c *counting) Legacy(ctx context.Context, in store.PointInputs) (store.Legacy, error) {
	c.legacy.Add(1)
	return c.Evaluator.Legacy(ctx, in)
}

func (c *counting) Screen(ctx context.Context, in store.PointInputs) (store.Queueing, error) {
	c.screen.Add(1)
	return c.Evaluator.Screen(ctx, in)
}

func (c *counting) Quantitative(ctx context.Context, in store.PointInputs) (store.Quantitative, error) {
	c.quant.Add(1)
	return c.Evaluator.Quantitative(ctx, in)
}

// openStore is a new store in the test's temporary directory, closed when the
// test ends.
func openStore(t testing.TB) *store.Store { return storetest.Temp(t) }

func fixedNow() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

func defaultSpec() SweepSpec {
	return SweepSpec{Model: "Qwen/Qwen3-32B", System: "h200_sxm", Backend: "vllm", TotalGPUs: 8, ISL: 4000, OSL: 500}
}

func TestAggCtxTokensMatchesReference(t *testing.T) {
	// Values printed by sweep.py's _agg_ctx_tokens_list (aiconfigurator 095f58a5).
	for _, c := range []struct {
		isl     int
		chunked bool
		want    []int
	}{
		{4000, false, []int{4000, 8000}},
		{1024, false, []int{1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192}},
		{10000, false, []int{10000, 20000}},
		{1000, true, []int{512, 1000, 1024, 1536, 2000, 2048, 2560, 3072, 3584, 4096, 4608, 5120, 5632, 6144, 6656, 7168, 7680, 8192}},
	} {
		if got := AggCtxTokens(c.isl, 512, c.chunked); !slices.Equal(got, c.want) {
			t.Errorf("AggCtxTokens(%d, 512, %v) = %v, want %v", c.isl, c.chunked, got, c.want)
		}
	}
	if b := DefaultAggBatches(); len(b) != 46 || b[0] != 1 || b[len(b)-1] != 1024 {
		t.Errorf("agg batch schedule: %v", b)
	}
}

func TestEnumerate(t *testing.T) {
	r, _ := Synthetic{}.Resolve(context.Background(), "Qwen/Qwen3-32B", "h200_sxm", "vllm", "")
	pts, err := Enumerate(defaultSpec(), r, "x")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Enumerate(defaultSpec(), r, "x")
	if !slices.Equal(pts, again) {
		t.Fatal("enumeration is not deterministic")
	}
	keys := map[string]bool{}
	for _, p := range pts {
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		if keys[p.Key()] {
			t.Fatalf("duplicate point %+v", p)
		}
		keys[p.Key()] = true
		// sweep.py guard: b − ceil(ctx/isl) ≥ 1 for b > 1.
		if need := (p.CtxTokens + p.ISL - 1) / p.ISL; p.Batch > 1 && p.Batch-need < 1 {
			t.Fatalf("guard violated: %+v", p)
		}
	}
	if len(pts) < 100 {
		t.Fatalf("only %d agg points", len(pts))
	}
	spec := defaultSpec()
	spec.TotalGPUs = 6
	pts, _ = Enumerate(spec, r, "x")
	for _, p := range pts {
		if 6%p.TP != 0 {
			t.Fatalf("tp %d does not divide 6 GPUs", p.TP)
		}
	}
	spec.Modes = []string{"disagg"}
	spec.DecodeBatches = []int{4}
	pts, _ = Enumerate(spec, r, "x")
	for _, p := range pts {
		if p.NumGPUs() > 6 {
			t.Fatalf("disagg point uses %d > 6 GPUs", p.NumGPUs())
		}
	}
	for _, bad := range []func(*SweepSpec){
		func(s *SweepSpec) { s.TotalGPUs = 0 }, func(s *SweepSpec) { s.Prefix = s.ISL },
		func(s *SweepSpec) { s.Modes = []string{"both"} }, func(s *SweepSpec) { s.TPs = []int{3} },
	} {
		s := defaultSpec()
		bad(&s)
		if _, err := Enumerate(s, r, "x"); err == nil {
			t.Errorf("bad spec %+v accepted", s)
		}
	}
}

// dump returns every stored row (all columns) in key order, for content comparison.
func dump(t testing.TB, s *store.Store) string {
	t.Helper()
	rows, err := storetest.DB(t, s).Queryx(`SELECT * FROM operating_points ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		v, err := rows.SliceScan()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, v...)
	}
	return b.String()
}

func TestSweepIncrementalZeroEvaluations(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	ev := &counting{Evaluator: Synthetic{}}
	res, err := Sweep(ctx, s, ev, defaultSpec(), SweepOptions{Now: fixedNow, BatchSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	if res.Evaluated != res.Total || res.Skipped != 0 || int(ev.legacy.Load()) != res.Total {
		t.Fatalf("first sweep: %+v, legacy calls %d", res, ev.legacy.Load())
	}
	first := dump(t, s)
	ev2 := &counting{Evaluator: Synthetic{}}
	res2, err := Sweep(ctx, s, ev2, defaultSpec(), SweepOptions{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	if res2.Evaluated != 0 || res2.Skipped != res.Total || ev2.legacy.Load()+ev2.screen.Load()+ev2.quant.Load() != 0 {
		t.Fatalf("repeated sweep evaluated: %+v, calls %d/%d", res2, ev2.legacy.Load(), ev2.screen.Load())
	}
	if dump(t, s) != first {
		t.Fatal("repeated sweep changed stored rows")
	}
	sw, _ := s.Sweeps(ctx)
	if len(sw) != 2 || sw[1].Status != store.SweepDone || sw[1].PointsEvaluated != 0 || sw[1].PointsSkipped != res.Total {
		t.Fatalf("sweeps table: %+v", sw)
	}
}

func TestSweepUnknownModelListsStore(t *testing.T) {
	s := openStore(t)
	spec := defaultSpec()
	spec.Model = "nope/Nope-1B"
	_, err := Sweep(context.Background(), s, Synthetic{}, spec, SweepOptions{Now: fixedNow})
	if err == nil || !strings.Contains(err.Error(), "Qwen/Qwen3-32B") {
		t.Fatalf("err %v: want a list of known models", err)
	}
}

func TestSweepInterruptedResumesToSameContent(t *testing.T) {
	ctx := context.Background()
	ref := openStore(t)
	if _, err := Sweep(ctx, ref, Synthetic{}, defaultSpec(), SweepOptions{Now: fixedNow, Workers: 1}); err != nil {
		t.Fatal(err)
	}
	want := dump(t, ref)

	s := openStore(t)
	cctx, cancel := context.WithCancel(ctx)
	batches := 0
	_, err := Sweep(cctx, s, Synthetic{}, defaultSpec(), SweepOptions{Now: fixedNow, BatchSize: 32, Workers: 2,
		Progress: func(done, total int) {
			batches++
			if batches == 3 {
				cancel()
			}
		}})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("cancelled sweep: err %v", err)
	}
	var n int
	storetest.DB(t, s).Get(&n, `SELECT count(*) FROM operating_points`)
	if n == 0 || n%32 != 0 {
		t.Fatalf("interrupted sweep left %d rows: want whole batches of 32", n)
	}
	sw, _ := s.Sweeps(ctx)
	if sw[0].Status != store.SweepInterrupted {
		t.Fatalf("status %q, want interrupted", sw[0].Status)
	}
	res, err := Sweep(ctx, s, Synthetic{}, defaultSpec(), SweepOptions{Now: fixedNow, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Skipped != n || res.Evaluated != res.Total-n {
		t.Fatalf("resume: %+v after %d stored", res, n)
	}
	if got := dump(t, s); got != want {
		t.Fatal("resumed sweep content differs from an uninterrupted one")
	}
}

func TestConcurrentReaderSeesWholeRows(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.sqlite")
	w, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ro, err := store.Open(ctx, path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	r, _ := Synthetic{}.Resolve(ctx, "Qwen/Qwen3-32B", "h200_sxm", "vllm", "")
	all, _ := Enumerate(defaultSpec(), r, Synthetic{}.Name())
	total := len(all)
	done := make(chan SweepResult)
	var sweepErr error
	go func() {
		res, err := Sweep(ctx, w, Synthetic{Delay: 200 * time.Microsecond}, defaultSpec(), SweepOptions{Now: fixedNow, BatchSize: 40})
		sweepErr = err
		done <- res
	}()
	seen := map[int]bool{}
	for {
		select {
		case res := <-done:
			if sweepErr != nil {
				t.Fatal(sweepErr)
			}
			t.Logf("%d points; the reader saw row counts %v", total, sortedInts(seen))
			var n int
			storetest.DB(t, ro).Get(&n, `SELECT count(*) FROM pareto`)
			if n == 0 || res.Evaluated == 0 {
				t.Fatal("no pareto rows after the sweep")
			}
			return
		default:
		}
		var n, partial int
		if err := storetest.DB(t, ro).GetContext(ctx, &n, `SELECT count(*) FROM points`); err != nil {
			t.Fatal(err)
		}
		if err := storetest.DB(t, ro).GetContext(ctx, &partial, `SELECT count(*) FROM operating_points
			WHERE oom = 0 AND (ttft IS NULL OR ttft_steady_p99 IS NULL OR itl_p99 IS NULL)`); err != nil {
			t.Fatal(err)
		}
		if partial != 0 || (n%40 != 0 && n != total) {
			t.Fatalf("reader saw %d rows (%d partial): want whole batches", n, partial)
		}
		seen[n] = true
		time.Sleep(2 * time.Millisecond)
	}
}

func sortedInts(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// renamed is an evaluator whose code version (name) changed.
type renamed struct{ Synthetic }

func (renamed) Name() string { return "synthetic-2" }

func TestSweepReplacesStaleEvaluatorRows(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	first, err := Sweep(ctx, s, Synthetic{}, defaultSpec(), SweepOptions{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Sweep(ctx, s, renamed{}, defaultSpec(), SweepOptions{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	if res.Replaced != first.Total || res.Evaluated != res.Total {
		t.Fatalf("new evaluator version: %+v, want every stale row replaced and re-evaluated", res)
	}
	var stale, front int
	storetest.DB(t, s).Get(&stale, `SELECT count(*) FROM operating_points WHERE evaluator != 'synthetic-2'`)
	storetest.DB(t, s).Get(&front, `SELECT count(*) FROM pareto WHERE evaluator != 'synthetic-2'`)
	if stale != 0 || front != 0 {
		t.Fatalf("%d stale rows (%d on the front) left", stale, front)
	}
}
