package queueing

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestBracketHiGrid: on a grid where the pass count of the bound is nearly
// reached (prefill-dominated passes, short outputs, zero and non-zero turnaround,
// outputs of 1 or 2 tokens, sync and async, chunked and whole prompts, vLLM
// thresholds, TRT-LLM blocks of 1 and 32, vLLM and TRT-LLM), a certain hi is ≥
// the evaluator's steady p99.
func TestBracketHiGrid(t *testing.T) {
	tm := timing.Linear{BaseMs: 1, PrefillMsPerToken: 0.05, DecodeMsPerRow: 0.01, CtxMsPerToken: 1e-5}
	checked, minRatio := 0, 1e300
	for _, be := range []engine.Backend{engine.VLLM, engine.TRTLLM} {
		for _, C := range []int{1, 2, 3, 5, 8, 17, 32} {
			for _, isl := range []int{50, 100, 1000, 3000} {
				for _, budget := range []int{100, 512, 2048, 8192} {
					for _, async := range []bool{false, true} {
						for _, chunked := range []bool{false, true} {
							for _, thr := range []int{0, 320} {
								for _, turn := range []float64{0, 1, 7, 8} {
									e, _ := engine.Defaults(be, "")
									e.AsyncScheduling = async
									e.EnableChunkedPrefill = chunked
									if be == engine.VLLM {
										e.MaxNumBatchedTokens = budget
										if !chunked {
											e.MaxNumBatchedTokens = max(budget, isl)
										}
									} else {
										e.MaxNumTokens = budget
										if !chunked {
											e.MaxNumTokens = max(budget, isl)
										}
									}
									if be == engine.VLLM {
										e.LongPrefillTokenThreshold = thr
									} else if thr > 0 {
										continue
									}
									w := workload.Spec{ISL: isl, OSL: 1 + int(turn)%2, Concurrency: C, TurnaroundMs: turn}
									q, err := Quantitative(context.Background(), w, e, tm)
									if err != nil {
										t.Fatal(err)
									}
									s, err := Screening(w, e, tm)
									if err != nil {
										t.Fatal(err)
									}
									if !s.Diagnostics.BracketCertain || q.Unstable {
										continue
									}
									checked++
									if C > 1 {
										minRatio = min(minRatio, s.TTFTSteadyP99Hi/q.TTFTSteady.Quantile(0.99))
									}
									if p99 := q.TTFTSteady.Quantile(0.99); s.TTFTSteadyP99Hi < p99*(1-1e-9) {
										t.Errorf("%s C %d isl %d budget %d async %v chunked %v threshold %d turnaround %v: hi %v < p99 %v",
											be, C, isl, budget, async, chunked, thr, turn, s.TTFTSteadyP99Hi, p99)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d certain points, min hi/p99 at C ≥ 2 %.3f", checked, minRatio)
	if checked < 200 {
		t.Fatalf("only %d certain points checked", checked)
	}
}
