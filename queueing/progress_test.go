package queueing

import (
	"context"
	"reflect"
	"testing"

	"github.com/aicdb/aicdb/queueing/timing"
)

// TestTraceProgress: Options.Progress sees every request finish once, in order
// (done 1..n of n), for W3 and W4 replays, and does not change the report.
func TestTraceProgress(t *testing.T) {
	ctx := context.Background()
	e := EngineSpec{Backend: BackendVLLM, MaxNumBatchedTokens: 2048, MaxNumSeqs: 8, EnableChunkedPrefill: true, BlockSize: 16}
	tm := timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.01, DecodeMsPerRow: 0.05}
	var reqs []TraceRequest
	for i := range 40 {
		reqs = append(reqs, TraceRequest{ArrivalMs: float64(10 * i), ISL: 200 + 10*i, OSL: 20 + i, Session: i%5 + 1})
	}
	for _, sessions := range []bool{false, true} {
		run := func(o Options) *Report {
			var r *Report
			var err error
			if sessions {
				r, err = QuantitativeSessions(ctx, reqs, e, tm, o, SessionOptions{})
			} else {
				r, err = QuantitativeTrace(ctx, reqs, e, tm, o)
			}
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		var seen []int
		with := run(Options{Progress: func(done, total int) {
			if total != len(reqs) {
				t.Fatalf("total %d, want %d", total, len(reqs))
			}
			seen = append(seen, done)
		}})
		if len(seen) != len(reqs) || seen[0] != 1 || seen[len(seen)-1] != len(reqs) {
			t.Fatalf("sessions %v: progress calls %v, want 1..%d", sessions, seen, len(reqs))
		}
		if without := run(Options{}); !reflect.DeepEqual(with, without) {
			t.Fatalf("sessions %v: the progress callback changed the report", sessions)
		}
	}
}
