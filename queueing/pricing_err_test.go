package queueing

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// errGap stands for a timing's own failure (a perf-data miss in production).
var errGap = errors.New("no rows near this shape")

// gapAbove prices like lin but fails every pass with more than rows decode rows:
// a closed loop of C > rows requests runs its first passes and then hits the gap.
func gapAbove(rows int, n *int) timing.Timing {
	return timing.Func(func(p *timing.Pass) (float64, error) {
		*n++
		if len(p.Decode) > rows {
			return 0, errGap
		}
		return lin.PassMs(p)
	})
}

// TestPricingErrorStopsTheRun: a pricing error mid-simulation is the tier's error
// (errors.Is the timing's error, naming the pass), not an InputError, and the run
// stops at it: no pass is priced after the failing one.
func TestPricingErrorStopsTheRun(t *testing.T) {
	w := workload.Spec{ISL: 512, OSL: 64, Concurrency: 8}
	for _, backend := range []engine.Backend{engine.VLLM, engine.SGLang, engine.TRTLLM} {
		e := testEngine(t, backend, nil)
		n := 0
		_, err := Quantitative(context.Background(), w, e, gapAbove(4, &n))
		if !errors.Is(err, errGap) || IsInputError(err) {
			t.Fatalf("%s quantitative: err %v, want the timing's error", backend, err)
		}
		if !strings.Contains(err.Error(), "queueing: pricing the pass at t=") || !strings.Contains(err.Error(), "decode rows): no rows near this shape") {
			t.Errorf("%s quantitative: error %q does not name the pass", backend, err)
		}
		if n < 2 {
			t.Errorf("%s: the gap was hit at pass %d, want mid-simulation", backend, n)
		}
		before := n
		if _, err := Quantitative(context.Background(), w, e, gapAbove(1<<20, &n)); err != nil {
			t.Fatalf("%s without the gap: %v", backend, err)
		}
		if n-before <= before {
			t.Errorf("%s: the failing run priced %d passes, the full run %d: the run did not stop at the error", backend, before, n-before)
		}
		_, err = Screening(w, e, gapAbove(4, new(int)))
		if !errors.Is(err, errGap) || IsInputError(err) || !strings.Contains(err.Error(), "screening: pricing the pass of") {
			t.Errorf("%s screening: err %v, want the timing's error naming the pass", backend, err)
		}
	}
}
