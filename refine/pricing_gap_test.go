package refine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// missAbove prices passes linearly but misses the perf data (a structured
// *perfdb.MissError, as PassTiming returns) on every pass with more than rows
// decode rows: a closed loop of more requests hits it mid-simulation.
func missAbove(rows int) timing.Timing {
	lin := timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.025, DecodeMsPerRow: 0.07, CtxMsPerToken: 2e-5}
	return timing.Func(func(p *timing.Pass) (float64, error) {
		if len(p.Decode) > rows {
			return 0, &perfdb.MissError{Msg: fmt.Sprintf("no generation_attention rows near b=%d", len(p.Decode))}
		}
		return lin.PassMs(p)
	})
}

// midGap screens tp 2 points by simulating them under a calibrated timing whose
// perf data ends mid-simulation; other points are Synthetic's.
type midGap struct{ Evaluator }

func (g midGap) Screen(ctx context.Context, in store.PointInputs) (store.Queueing, error) {
	if in.TP != 2 {
		return g.Evaluator.Screen(ctx, in)
	}
	e, err := queueing.DefaultEngine(queueing.BackendVLLM, "")
	if err != nil {
		return store.Queueing{}, err
	}
	adj := PassAdjust{PrefillScale: 1.1, DecodeScale: 0.9, PassOverheadMs: 0.5}
	_, err = queueing.Quantitative(ctx, workload.Spec{ISL: 256, OSL: 32, Concurrency: 8}, e, adj.Apply(&e, missAbove(4)))
	if err == nil {
		return store.Queueing{}, errors.New("midGap: the simulation priced every pass")
	}
	return store.Queueing{}, fmt.Errorf("screen tp%d: %w", in.TP, err)
}

// TestPricingGapMidSimulation: a perf-data miss met mid-simulation is the
// evaluation's error, names the pass, is a perf-data gap (errors.As through the
// simulator's and the calibration's wrapping) and the sweep counts it as one.
func TestPricingGapMidSimulation(t *testing.T) {
	ctx := context.Background()
	ev := midGap{Evaluator: Synthetic{}}
	_, err := ev.Screen(ctx, store.PointInputs{TP: 2})
	if !IsPerfDataGap(err) || !strings.Contains(err.Error(), "screen tp2: queueing: pricing the pass at t=") ||
		!strings.Contains(err.Error(), "decode rows): no generation_attention rows near b=8") {
		t.Fatalf("err %v: want a perf-data gap naming the pass", err)
	}
	s := openStore(t)
	res, err := Sweep(ctx, s, ev, defaultSpec(), SweepOptions{Now: fixedNow, BatchSize: 32, Workers: 2})
	if err != nil {
		t.Fatalf("a sweep with perf-data gaps must not abort: %v", err)
	}
	var gaps int
	storetest.DB(t, s).Get(&gaps, `SELECT count(*) FROM operating_points WHERE tp = 2 AND oom = 0`) // OOM points are not screened
	if res.NoPerfData == 0 || res.Evaluated+res.NoPerfData != res.Total || gaps != 0 ||
		!strings.Contains(res.FirstNoPerfData, "no generation_attention rows near b=8") {
		t.Fatalf("result %+v (%d screened tp2 rows stored): want the tp 2 points counted as no perf data", res, gaps)
	}
}
