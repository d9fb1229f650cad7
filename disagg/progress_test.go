package disagg

import (
	"context"
	"reflect"
	"testing"

	"github.com/aicdb/aicdb/queueing"
)

// TestTraceProgress: Options.Progress sees every request of a tandem trace replay
// finish once (done 1..n of n), W3 and W4, and does not change the report.
func TestTraceProgress(t *testing.T) {
	c := testConfig(t, 2, 1)
	var reqs []queueing.TraceRequest
	for i := range 30 {
		reqs = append(reqs, queueing.TraceRequest{ArrivalMs: float64(7 * i), ISL: 200 + 20*i, OSL: 5 + i%7, Session: i%4 + 1, ThinkMs: 3})
	}
	for _, sessions := range []bool{false, true} {
		run := func(o Options) *TraceReport {
			var r *TraceReport
			var err error
			if sessions {
				r, err = QuantitativeSessions(context.Background(), reqs, c, o, SessionOptions{})
			} else {
				r, err = QuantitativeTrace(context.Background(), reqs, c, o)
			}
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		var seen []int
		with := run(Options{Progress: func(done, total int) {
			if total != len(reqs) || len(seen) > 0 && done != seen[len(seen)-1]+1 {
				t.Fatalf("progress (%d, %d) after %v", done, total, seen)
			}
			seen = append(seen, done)
		}})
		if len(seen) != len(reqs) || seen[0] != 1 {
			t.Fatalf("sessions %v: progress calls %v, want 1..%d", sessions, seen, len(reqs))
		}
		if without := run(Options{}); !reflect.DeepEqual(with, without) {
			t.Fatalf("sessions %v: the progress callback changed the report", sessions)
		}
	}
}
