package refine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// gapping fails chosen points: tp 2 with a structured perfdb miss, tp 4 screening
// with an unsupported family, and (when bad) batch 8 with an ordinary error.
type gapping struct {
	Evaluator
	bad bool
}

func (g gapping) Legacy(ctx context.Context, in store.PointInputs) (store.Legacy, error) {
	switch {
	case in.TP == 2:
		return store.Legacy{}, fmt.Errorf("gemm: %w", &perfdb.MissError{Msg: "no gemm rows near m=8"})
	case g.bad && in.Batch == 8:
		return store.Legacy{}, errors.New("disk on fire")
	}
	return g.Evaluator.Legacy(ctx, in)
}

func (g gapping) Screen(ctx context.Context, in store.PointInputs) (store.Queueing, error) {
	if in.TP == 4 {
		return store.Queueing{}, fmt.Errorf("estimator: %w", perfdb.ErrUnsupportedFamily)
	}
	return g.Evaluator.Screen(ctx, in)
}

func TestSweepIsPerfDataGap(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("x"), false},
		{context.Canceled, false},
		{fmt.Errorf("a: %w", &perfdb.MissError{Msg: "m"}), true},
		{fmt.Errorf("a: %w", &perfdb.EmpiricalMissError{Msg: "m"}), true},
		{fmt.Errorf("a: %w", perfdb.ErrUnsupportedFamily), true},
		{fmt.Errorf("a: %w", ErrNoPerfData), true},
		{fmt.Errorf("a: %w", perfdb.ErrOOM), false},
	} {
		if got := IsPerfDataGap(c.err); got != c.want {
			t.Errorf("IsPerfDataGap(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestSweepSkipsPerfDataGaps: points the perf data cannot price are skipped and
// counted (result and sweeps table), every other point is stored as without gaps,
// and a rerun tries the gaps again (nothing else).
func TestSweepSkipsPerfDataGaps(t *testing.T) {
	ctx := context.Background()
	ref := openStore(t)
	full, err := Sweep(ctx, ref, Synthetic{}, defaultSpec(), SweepOptions{Now: fixedNow, BatchSize: 32})
	if err != nil {
		t.Fatal(err)
	}
	var wantKept, wantGaps int
	// Screening (tp 4) is not asked for OOM points: those are stored.
	const gapWhere = `tp = 2 OR (tp = 4 AND oom = 0)`
	storetest.DB(t, ref).Get(&wantGaps, `SELECT count(*) FROM operating_points WHERE `+gapWhere)
	storetest.DB(t, ref).Get(&wantKept, `SELECT count(*) FROM operating_points WHERE NOT (`+gapWhere+`)`)

	s := openStore(t)
	ev := gapping{Evaluator: Synthetic{}}
	res, err := Sweep(ctx, s, ev, defaultSpec(), SweepOptions{Now: fixedNow, BatchSize: 32, Workers: 2})
	if err != nil {
		t.Fatalf("a sweep with perf-data gaps must not abort: %v", err)
	}
	if wantGaps == 0 || res.NoPerfData != wantGaps || res.Evaluated != wantKept || res.Total != full.Total ||
		res.Evaluated+res.NoPerfData != res.Total {
		t.Fatalf("result %+v: want %d gaps, %d evaluated of %d", res, wantGaps, wantKept, full.Total)
	}
	if !strings.Contains(res.FirstNoPerfData, "no gemm rows near m=8") && !strings.Contains(res.FirstNoPerfData, "model family not supported") {
		t.Fatalf("first gap %q: want the evaluator's miss", res.FirstNoPerfData)
	}
	var n int
	storetest.DB(t, s).Get(&n, `SELECT count(*) FROM operating_points WHERE `+gapWhere)
	if n != 0 {
		t.Fatalf("%d gap points were stored", n)
	}
	var same int
	storetest.DB(t, s).Get(&same, `SELECT count(*) FROM operating_points`)
	if same != wantKept {
		t.Fatalf("stored %d rows, want %d", same, wantKept)
	}
	sw, _ := s.Sweeps(ctx)
	if len(sw) != 1 || sw[0].Status != store.SweepDone || sw[0].PointsNoPerfData != wantGaps || sw[0].PointsEvaluated != wantKept {
		t.Fatalf("sweeps table: %+v", sw)
	}
	// A rerun evaluates the gaps again and nothing else.
	res2, err := Sweep(ctx, s, ev, defaultSpec(), SweepOptions{Now: fixedNow})
	if err != nil || res2.Evaluated != 0 || res2.Skipped != wantKept || res2.NoPerfData != wantGaps {
		t.Fatalf("rerun: %+v %v", res2, err)
	}
}

// TestSweepOtherErrorsStillAbort: an error that is not a perf-data gap fails the
// sweep (status failed, error recorded).
func TestSweepOtherErrorsStillAbort(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	_, err := Sweep(ctx, s, gapping{Evaluator: Synthetic{}, bad: true}, defaultSpec(), SweepOptions{Now: fixedNow, Workers: 1})
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("err %v: want the evaluator's failure", err)
	}
	sw, _ := s.Sweeps(ctx)
	if len(sw) != 1 || sw[0].Status != store.SweepFailed || !strings.Contains(sw[0].Error, "disk on fire") {
		t.Fatalf("sweeps table: %+v", sw)
	}
}

// TestSweepAllPerfDataGapsFails: when no point of a sweep can be priced the sweep
// fails with ErrNoPerfData naming the first miss (aiconfigurator's "No results found
// for any parallel configuration"), recorded failed with the gap count.
func TestSweepAllPerfDataGapsFails(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	spec := defaultSpec()
	spec.TPs = []int{2}
	res, err := Sweep(ctx, s, gapping{Evaluator: Synthetic{}}, spec, SweepOptions{Now: fixedNow})
	if !errors.Is(err, ErrNoPerfData) || !strings.Contains(err.Error(), "no gemm rows near m=8") ||
		res.NoPerfData == 0 || res.NoPerfData != res.Total {
		t.Fatalf("all-gap sweep: %+v, err %v", res, err)
	}
	sw, _ := s.Sweeps(ctx)
	if len(sw) != 1 || sw[0].Status != store.SweepFailed || sw[0].PointsNoPerfData != res.Total {
		t.Fatalf("sweeps table: %+v", sw)
	}
}
