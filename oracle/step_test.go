package oracle

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestStepMatchesRun: an engine stepped by an outside clock (requests added one
// by one as the clock reaches them) emits every token at the time Run does, for
// each backend, synchronous and asynchronous, under KV pressure (preemption).
func TestStepMatchesRun(t *testing.T) {
	tm := timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.01, DecodeMsPerRow: 0.05, CtxMsPerToken: 1e-5}
	for _, be := range []engine.Backend{engine.VLLM, engine.TRTLLM, engine.SGLang} {
		for _, async := range []bool{false, true} {
			if async && be == engine.SGLang {
				continue
			}
			eng := engine.Spec{Backend: be, MaxNumBatchedTokens: 2048, MaxNumSeqs: 64, EnableChunkedPrefill: true,
				AsyncScheduling: async, BlockSize: 16, KVCapacityTokens: 299 * 16, // tight: vLLM preempts, SGLang retracts
				ChunkedPrefillSize: 2048, MaxPrefillTokens: 16384, EnableMixedChunk: true,
				MaxBatchSize: 64, MaxNumTokens: 2048, CapacityPolicy: engine.PolicyGuaranteedNoEvict}
			var reqs []workload.Request
			for i := 0; i < 60; i++ {
				reqs = append(reqs, workload.Request{ID: fmt.Sprint(i), ArrivalMs: float64(i) * 5, PromptLen: 500 + 97*(i%7), MaxTokens: 20 + 3*(i%5)})
			}
			ref, err := New(eng, tm, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range reqs {
				if _, err := ref.Add(r); err != nil {
					t.Fatal(err)
				}
			}
			want, err := ref.Run(context.Background())
			if err != nil {
				t.Fatalf("%s async=%v: run: %v", be, async, err)
			}
			s, err := New(eng, tm, Options{})
			if err != nil {
				t.Fatal(err)
			}
			next := 0
			for {
				at := s.NextEventMs()
				if next < len(reqs) && reqs[next].ArrivalMs <= at {
					at = reqs[next].ArrivalMs
				}
				if math.IsInf(at, 1) {
					break
				}
				for next < len(reqs) && reqs[next].ArrivalMs <= at {
					if _, err := s.Add(reqs[next]); err != nil {
						t.Fatal(err)
					}
					next++
				}
				if err := s.Step(at); err != nil {
					t.Fatalf("%s async=%v: step: %v", be, async, err)
				}
			}
			got := s.result()
			pre := 0
			for _, r := range want.Requests {
				pre += r.NumPreemptions
			}
			if be == engine.VLLM && pre == 0 {
				t.Fatalf("vLLM async=%v: no preemption; tighten the pool", async)
			}
			for i := range want.Requests {
				w, g := want.Requests[i].TokenTimesMs, got.Requests[i].TokenTimesMs
				if len(w) != len(g) {
					t.Fatalf("%s async=%v request %d: %d tokens stepped, %d run", be, async, i, len(g), len(w))
				}
				for j := range w {
					if w[j] != g[j] {
						t.Fatalf("%s async=%v request %d token %d: stepped %v, run %v", be, async, i, j, g[j], w[j])
					}
				}
			}
		}
	}
}
