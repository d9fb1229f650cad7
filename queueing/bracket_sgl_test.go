package queueing

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestBracketHiGridSGLangPrefix: the near-tight grid for SGLang (mixed on/off,
// chunking on/off, overlap scheduler on/off, pages 1/16, max_prefill small and large) and for vLLM/TRT-LLM
// with a cached prefix: a certain hi is ≥ the evaluator's steady p99.
func TestBracketHiGridSGLangPrefix(t *testing.T) {
	tm := timing.Roofline{BaseMs: 1, WeightsMs: 2, TokenMs: 0.05, AttnMsPerPair: 1e-6, KVMsPerToken: 1e-4}
	checked := 0
	check := func(w workload.Spec, e engine.Spec) {
		q, err := Quantitative(context.Background(), w, e, tm)
		if err != nil {
			t.Fatal(err)
		}
		s, err := Screening(w, e, tm)
		if err != nil {
			t.Fatal(err)
		}
		if !s.Diagnostics.BracketCertain || q.Unstable {
			return
		}
		checked++
		if p99 := q.TTFTSteady.Quantile(0.99); s.TTFTSteadyP99Hi < p99*(1-1e-9) {
			t.Errorf("%+v %+v: hi %v < p99 %v", w, e, s.TTFTSteadyP99Hi, p99)
		}
	}
	for _, C := range []int{1, 2, 3, 5, 9, 24} {
		for _, isl := range []int{50, 700, 3000} {
			for _, osl := range []int{1, 2, 9} {
				for _, turn := range []float64{0, 3} {
					for _, budget := range []int{256, 2048} {
						for flags := range 8 {
							for _, page := range []int{1, 16} {
								for _, mp := range []int{512, 16384} {
									e, _ := engine.Defaults(engine.SGLang, "")
									e.ChunkedPrefillSize, e.BlockSize, e.MaxPrefillTokens = budget, page, mp
									e.EnableChunkedPrefill, e.EnableMixedChunk = flags&1 == 1, flags&2 == 2
									e.AsyncScheduling = flags&4 == 4 // the overlap scheduler (§3.2)
									check(workload.Spec{ISL: isl, OSL: osl, Concurrency: C, TurnaroundMs: turn}, e)
								}
							}
						}
						for _, be := range []engine.Backend{engine.VLLM, engine.TRTLLM} {
							for _, async := range []bool{false, true} {
								e, _ := engine.Defaults(be, "")
								e.AsyncScheduling, e.EnableChunkedPrefill = async, true
								e.MaxNumBatchedTokens, e.MaxNumTokens = budget, budget
								if be == engine.TRTLLM {
									e.BlockSize = 16
								}
								check(workload.Spec{ISL: isl, OSL: osl, Concurrency: C, TurnaroundMs: turn, Prefix: isl / 3}, e)
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d certain points", checked)
	if checked < 200 {
		t.Fatalf("only %d certain points checked", checked)
	}
}
