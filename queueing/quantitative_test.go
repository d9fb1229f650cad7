package queueing

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/queueing/timing"
)

// TestRunScratchReportsSurviveReuse checks the runScratch hand-back (lend,
// reclaim) over a stagger-like sequence of runs sharing one scratch, one of
// them cancelled mid-run:
//   - while a run holds the buffers the scratch holds none of them (a run that
//     reads or a caller that reuses the scratch cannot see them);
//   - after every run, failed or not, they are back and kept (capacities and
//     checkpoints never shrink; the pool index is all zero);
//   - every report equals a fresh-buffer run's, bit for bit, after ALL the runs:
//     a report that aliased a buffer the later runs overwrite would differ.
func TestRunScratchReportsSurviveReuse(t *testing.T) {
	errored := 0
	defer func() {
		if errored == 0 {
			t.Error("no run failed: the hand-back after an error was not exercised")
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		w, e, tm := propConfig(rt)
		if w.Concurrency == 0 {
			w.NumRequests, w.Concurrency = 0, rapid.IntRange(1, 40).Draw(rt, "c")
		}
		b, err := checkInputs(w, e, tm)
		if err != nil {
			rt.Skip(err)
		}
		quantiles := len(w.ISLQuantiles) > 0 || len(w.OSLQuantiles) > 0
		runs := []Options{{transientOnly: true}}
		for i := range 3 {
			o := DefaultOptions()
			o.spreadMs = rapid.Float64Range(0, 2000).Draw(rt, fmt.Sprintf("spread%d", i))
			o.WindowGenerations = rapid.IntRange(1, 4).Draw(rt, fmt.Sprintf("win%d", i))
			runs = append(runs, o)
		}
		cancelAt := rapid.IntRange(-1, len(runs)-1).Draw(rt, "cancelled run")
		cancelled, cancel := context.WithCancel(context.Background())
		cancel()

		buf := &runScratch{}
		var stateRule bool // the run in flight has the scheduler-state rule
		var lentBad string
		spy := timing.Func(func(p *timing.Pass) (float64, error) {
			switch {
			case buf.reqs != nil || buf.poolAt != nil || buf.bins.idx != nil || buf.bins.acc != nil:
				lentBad = "the scratch holds a request slice or ITL bins lent to the run"
			case stateRule && buf.ckpts != nil:
				lentBad = "the scratch holds checkpoints lent to the run"
			}
			return tm.PassMs(p)
		})
		type outcome struct {
			rep *Report
			err string
		}
		got := make([]outcome, len(runs))
		for i, o := range runs {
			ctx := context.Background()
			if i == cancelAt {
				ctx = cancelled
			}
			stateRule = !quantiles && !o.transientOnly
			reqCap, ckpts := cap(buf.reqs), len(buf.ckpts)
			rep, err := quantitativeRun(ctx, w, e, spy, o, b, buf)
			got[i] = outcome{rep, fmt.Sprint(err)}
			if lentBad != "" {
				rt.Fatalf("run %d (%+v): %s", i, o, lentBad)
			}
			if cap(buf.reqs) < reqCap || len(buf.ckpts) < ckpts {
				rt.Fatalf("run %d (%+v): the scratch lost buffers: request capacity %d → %d, checkpoints %d → %d",
					i, o, reqCap, cap(buf.reqs), ckpts, len(buf.ckpts))
			}
			if err == nil && (cap(buf.reqs) == 0 || buf.poolAt == nil) {
				rt.Fatalf("run %d (%+v): the request slice or pool index was not handed back", i, o)
			}
			if err == nil && stateRule && rep.Diagnostics.Windows[0].StatePeriodPasses > 0 && len(buf.ckpts) == 0 {
				rt.Fatalf("run %d (%+v): the state rule found its period on a checkpoint that was not handed back", i, o)
			}
			if err != nil {
				errored++
			}
			for bk, v := range buf.poolAt {
				if v != 0 {
					rt.Fatalf("run %d: pool index of bucket %d handed back as %d, want 0", i, bk, v)
				}
			}
		}
		for i, o := range runs {
			ctx := context.Background()
			if i == cancelAt {
				ctx = cancelled
			}
			f, errF := quantitativeRun(ctx, w, e, tm, o, b, nil)
			if got[i].err != fmt.Sprint(errF) || !reflect.DeepEqual(got[i].rep, f) {
				rt.Fatalf("run %d (%+v): the shared-scratch report, read after every run, differs from a fresh run's (errors %v / %v)",
					i, o, got[i].err, errF)
			}
		}
	})
}
