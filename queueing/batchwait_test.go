package queueing

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// batchWaitEngine is TensorRT-LLM as InferenceMAX launched it for its 1k/1k
// runs at tp < 8 (max_num_tokens 16384, batch_wait_timeout_iters 20,
// batch_wait_max_tokens_ratio 0.9), overlap executor as given.
func batchWaitEngine(t *testing.T, iters int, ratio float64, async bool) engine.Spec {
	t.Helper()
	e, err := engine.Defaults(engine.TRTLLM, "")
	if err != nil {
		t.Fatal(err)
	}
	e.MaxNumTokens, e.AsyncScheduling = 16384, async
	e.BatchWaitTimeoutIters, e.BatchWaitMaxTokensRatio = iters, ratio
	return e
}

// TestBatchWaitHoldsPromptTimeoutPasses: with few clients no schedule reaches
// 0.9 × max_num_tokens, so every prompt is held the timeout's 20 passes
// beside the decoding requests (T-R6): the burst-free steady TTFT grows by 20
// decode-only passes, within the spread of those passes' lengths, and the
// TPOT by the held passes' share of a request's decode.
func TestBatchWaitHoldsPromptTimeoutPasses(t *testing.T) {
	lin := timing.Linear{BaseMs: 2, PrefillMsPerToken: 0.004, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.00002}
	w := workload.Spec{ISL: 1024, OSL: 256, Concurrency: 4}
	o := DefaultOptions()
	for _, async := range []bool{false, true} {
		off, err := QuantitativeWith(context.Background(), w, batchWaitEngine(t, 0, 0, async), lin, o)
		if err != nil {
			t.Fatal(err)
		}
		on, err := QuantitativeWith(context.Background(), w, batchWaitEngine(t, 20, 0.9, async), lin, o)
		if err != nil {
			t.Fatal(err)
		}
		// A decode-only pass of 3 rows: base + 3 rows + their contexts.
		lo, hi := 2+3*0.05+3*1024*0.00002, 2+3*0.05+3*1280*0.00002
		extra := on.TTFTSteady.Mean() - off.TTFTSteady.Mean()
		if extra < 19*lo || extra > 21*hi {
			t.Errorf("async %v: batch waiting added %.3f ms to the mean TTFT (%.3f → %.3f); want 20 decode passes of %.3f–%.3f ms", async, extra, off.TTFTSteady.Mean(), on.TTFTSteady.Mean(), lo, hi)
		}
		if !(on.ThroughputRPS < off.ThroughputRPS) {
			t.Errorf("async %v: throughput %.4g with batch waiting, %.4g without; the held passes lengthen every cycle", async, on.ThroughputRPS, off.ThroughputRPS)
		}
	}
}

// TestBatchWaitTokenThresholdReleases: a ratio whose threshold one prompt
// reaches (0.05 × 16384 = 819 < 1024 tokens) never holds, and a zero timeout
// or zero ratio turns the rule off (the executor's stop test holds at once):
// each report equals the one without batch waiting.
func TestBatchWaitTokenThresholdReleases(t *testing.T) {
	w := workload.Spec{ISL: 1024, OSL: 64, Concurrency: 8}
	ref, err := Quantitative(context.Background(), w, batchWaitEngine(t, 0, 0, true), benchLin)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		iters int
		ratio float64
	}{{20, 0.05}, {0, 0.9}, {20, 0}} {
		got, err := Quantitative(context.Background(), w, batchWaitEngine(t, c.iters, c.ratio, true), benchLin)
		if err != nil {
			t.Fatal(err)
		}
		if got.TTFTSteady.Mean() != ref.TTFTSteady.Mean() || got.TPOT.Mean() != ref.TPOT.Mean() || got.ThroughputRPS != ref.ThroughputRPS {
			t.Errorf("iters %d ratio %v: TTFT %.6g TPOT %.6g thr %.6g, want the no-wait %.6g %.6g %.6g", c.iters, c.ratio,
				got.TTFTSteady.Mean(), got.TPOT.Mean(), got.ThroughputRPS, ref.TTFTSteady.Mean(), ref.TPOT.Mean(), ref.ThroughputRPS)
		}
	}
}

// TestScreeningHoldIsUpperBound: the screening tier adds a hold's whole count
// of decode passes (heldMs) to every TTFT — batch waiting's timeout (T-R6),
// SGLang's receipt interval (S-R7) — so at every load its steady TTFT mean
// is at least the quantitative tier's replay, its p99 bracket reaches the
// replay's p99, and the bracket is not called certain.
func TestScreeningHoldIsUpperBound(t *testing.T) {
	sgl, err := engine.Defaults(engine.SGLang, "")
	if err != nil {
		t.Fatal(err)
	}
	sgl.SchedulerRecvInterval = 30
	for _, c := range []struct {
		name string
		e    engine.Spec
	}{{"batch wait 20 0.9", batchWaitEngine(t, 20, 0.9, true)}, {"recv 30", sgl}} {
		for _, conc := range []int{4, 16, 64} {
			w := workload.Spec{ISL: 1024, OSL: 256, Concurrency: conc}
			q, err := Quantitative(context.Background(), w, c.e, benchLin)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Screening(w, c.e, benchLin)
			if err != nil {
				t.Fatal(err)
			}
			if s.TTFTSteady.Mean() < q.TTFTSteady.Mean() || s.TTFTSteadyP99Hi < q.TTFTSteady.Quantile(0.99) || s.Diagnostics.BracketCertain {
				t.Errorf("%s C %d: screening TTFT mean %.4g, p99 hi %.4g (certain %v) against the replay's %.4g, %.4g: want bounds, uncertain",
					c.name, conc, s.TTFTSteady.Mean(), s.TTFTSteadyP99Hi, s.Diagnostics.BracketCertain, q.TTFTSteady.Mean(), q.TTFTSteady.Quantile(0.99))
			}
		}
	}
}
