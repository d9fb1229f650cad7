package oracle_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestRunProgress: Options.Progress is called where Run polls its context (every
// 1,024 iterations) with the requests finished so far, never decreasing, of the
// requests held; it does not change the result.
func TestRunProgress(t *testing.T) {
	e := oracle.Engine{Backend: oracle.VLLM, MaxNumBatchedTokens: 2048, MaxNumSeqs: 16, BlockSize: 16,
		NumGPUBlocks: 20000, EnableChunkedPrefill: true}
	tm := timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.04}
	var reqs []workload.Request
	for i := range 300 {
		reqs = append(reqs, workload.Request{ID: fmt.Sprint(i), ArrivalMs: float64(50 * i), PromptLen: 300, MaxTokens: 100})
	}
	run := func(o oracle.Options) *oracle.Result {
		s, err := oracle.New(e, tm, o)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.RunTrace(context.Background(), reqs)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	var seen []int
	with := run(oracle.Options{Progress: func(done, total int) {
		if total != len(reqs) || done < 0 || done > total || len(seen) > 0 && done < seen[len(seen)-1] {
			t.Fatalf("progress (%d, %d) after %v", done, total, seen)
		}
		seen = append(seen, done)
	}})
	if len(seen) < 2 || seen[0] != 0 || seen[len(seen)-1] == 0 {
		t.Fatalf("progress calls %v: want a first call at 0 and later ones with finished requests", seen)
	}
	if without := run(oracle.Options{}); !reflect.DeepEqual(with.Requests, without.Requests) || with.NumPasses != without.NumPasses {
		t.Fatal("the progress callback changed the result")
	}
}
