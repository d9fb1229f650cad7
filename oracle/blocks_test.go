package oracle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestSuffixChainsEqualHashTable: keeping request-unique blocks in per-request chains
// answers exactly what the hash table would — same outcome on random workloads with
// prefix caching, shared prompts and heavy preemption (self-hits after recompute).
func TestSuffixChainsEqualHashTable(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 34))
	tm := timing.Linear{BaseMs: 1, PrefillMsPerToken: 0.1, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.001}
	compared, preempted := 0, 0
	for it := 0; it < 400; it++ {
		bs := []int{1, 2, 4}[rng.IntN(3)]
		e := engine.Spec{Backend: []engine.Backend{engine.VLLM, engine.VLLM, engine.TRTLLM, engine.SGLang}[rng.IntN(4)], BlockSize: bs, KVCapacityTokens: (5 + rng.IntN(24)) * bs, EnablePrefixCaching: true,
			MaxNumBatchedTokens: 4 + rng.IntN(32), MaxNumSeqs: 1 + rng.IntN(6), EnableChunkedPrefill: true, AsyncScheduling: rng.IntN(2) == 0,
			MaxNumTokens: 4 + rng.IntN(32), MaxBatchSize: 1 + rng.IntN(6), CapacityPolicy: engine.PolicyMaxUtilization,
			ChunkedPrefillSize: bs * (1 + rng.IntN(8)), MaxPrefillTokens: 64}
		if seats := 1 + rng.IntN(6); e.Backend == engine.SGLang { // SGLang's max_running_requests (drawn after the other knobs)
			e.MaxNumSeqs = seats
		}
		if e.Backend == engine.SGLang {
			e.AsyncScheduling = false
		}
		var reqs []workload.Request
		for i := 0; i < 2+rng.IntN(6); i++ {
			r := workload.Request{ID: fmt.Sprint(i), ArrivalMs: float64(rng.IntN(4)), MaxTokens: 1 + rng.IntN(16)}
			if rng.IntN(2) == 0 {
				for k := 0; k < 1+rng.IntN(16); k++ {
					r.PromptTokens = append(r.PromptTokens, k%5)
				}
			} else {
				r.PromptLen = 1 + rng.IntN(16)
			}
			reqs = append(reqs, r)
		}
		var out [2]*Result
		var errs [2]error
		for k := 0; k < 2; k++ {
			s, err := New(e, tm, Options{PassLog: true})
			if err != nil {
				t.Fatal(err)
			}
			s.allHashed = k == 1
			out[k], errs[k] = s.RunTrace(context.Background(), reqs)
		}
		if (errs[0] == nil) != (errs[1] == nil) {
			t.Fatalf("case %d: errors differ: %v vs %v", it, errs[0], errs[1])
		}
		if errs[0] != nil {
			continue
		}
		compared++
		for _, r := range out[0].Requests {
			if r.NumPreemptions > 0 {
				preempted++
				break
			}
		}
		if !reflect.DeepEqual(out[0], out[1]) {
			t.Fatalf("case %d (%+v): suffix chains and hash table disagree", it, e)
		}
	}
	if compared < 200 || preempted < 20 {
		t.Fatalf("compared %d cases, %d with preemption: too few to mean anything", compared, preempted)
	}
}
