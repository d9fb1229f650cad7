package queueing

import (
	"context"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

var kvLin = timing.Linear{BaseMs: 6, PrefillMsPerToken: 0.025, DecodeMsPerRow: 0.04, CtxMsPerToken: 0.00003}

// TestScreeningRejectsKVPressure: the closed form does not model preemption or
// retraction, so it refuses a vLLM/SGLang KV capacity and names the tier that does.
func TestScreeningRejectsKVPressure(t *testing.T) {
	w := workload.Spec{ISL: 1000, OSL: 50, Concurrency: 4}
	for _, b := range []engine.Backend{engine.VLLM, engine.SGLang, engine.TRTLLM} {
		e := testEngine(t, b, func(e *engine.Spec) { e.KVCapacityTokens = 1 << 20; e.CapacityPolicy = engine.PolicyMaxUtilization })
		_, err := Screening(w, e, kvLin)
		if err == nil || !strings.Contains(err.Error(), "use the quantitative tier") || !IsInputError(err) {
			t.Errorf("%s: screening error %v, want an input error naming the quantitative tier", b, err)
		}
	}
}

// TestKVAmpleIsIdentical: a KV pool that never runs short changes nothing but the
// KV columns (same TTFT/ITL/throughput bit for bit), and reports no preemption.
func TestKVAmpleIsIdentical(t *testing.T) {
	w := workload.Spec{ISL: 2048, OSL: 128, Concurrency: 16}
	for _, b := range []engine.Backend{engine.VLLM, engine.SGLang} {
		for _, async := range []bool{false, true} {
			if async && b == engine.SGLang {
				continue
			}
			e := testEngine(t, b, func(e *engine.Spec) { e.AsyncScheduling = async })
			base := quant(t, w, e, kvLin)
			e.KVCapacityTokens = 16 * 4096
			got := quant(t, w, e, kvLin)
			if got.TTFTSteady.Mean() != base.TTFTSteady.Mean() || got.ITL.Quantile(0.99) != base.ITL.Quantile(0.99) ||
				got.ThroughputRPS != base.ThroughputRPS || got.E2E.Mean() != base.E2E.Mean() {
				t.Errorf("%s async=%v: ample KV changed the prediction: ttft %v→%v thr %v→%v", b, async,
					base.TTFTSteady.Mean(), got.TTFTSteady.Mean(), base.ThroughputRPS, got.ThroughputRPS)
			}
			if got.PreemptionsPerRequest != 0 || !(got.KVUtilPeak > 0.4 && got.KVUtilPeak <= 1) {
				t.Errorf("%s async=%v: preemptions %v kv_util_peak %v, want 0 and in (0.4, 1]", b, async, got.PreemptionsPerRequest, got.KVUtilPeak)
			}
			if base.KVUtilPeak != 0 {
				t.Errorf("%s: kv_util_peak %v without a capacity, want 0", b, base.KVUtilPeak)
			}
		}
	}
}

// TestKVPressurePreempts: a pool short of the running set's KV preempts (vLLM),
// retracts (SGLang) or pauses (TRT-LLM MAX_UTILIZATION), fills the pool, lowers throughput, and the fast path agrees
// with the pass-by-pass recursion.
func TestKVPressurePreempts(t *testing.T) {
	w := workload.Spec{ISL: 512, OSL: 512, Concurrency: 16}
	for _, b := range []engine.Backend{engine.VLLM, engine.SGLang, engine.TRTLLM} {
		for _, async := range []bool{false, true} {
			if async && b == engine.SGLang {
				continue
			}
			e := testEngine(t, b, func(e *engine.Spec) { e.AsyncScheduling = async; e.CapacityPolicy = engine.PolicyMaxUtilization })
			base := quant(t, w, e, kvLin)
			e.KVCapacityTokens = 5 * 1024 // 5 full requests for 16 clients
			got := quant(t, w, e, kvLin)
			o := DefaultOptions()
			o.NoFastForward = true
			slow, err := QuantitativeWith(context.Background(), w, e, kvLin, o)
			if err != nil {
				t.Fatal(err)
			}
			if !(got.ThroughputRPS < base.ThroughputRPS) || !(got.KVUtilPeak > 0.9 && got.KVUtilPeak <= 1) {
				t.Errorf("%s async=%v: throughput %v (unbounded %v), kv_util_peak %v", b, async, got.ThroughputRPS, base.ThroughputRPS, got.KVUtilPeak)
			}
			burst, err := QuantitativeWith(context.Background(), w, e, kvLin, Options{}) // the burst's locked cohorts
			if err != nil {
				t.Fatal(err)
			}
			if b != engine.SGLang && !(burst.PreemptionsPerRequest > 0) {
				t.Errorf("%s async=%v: no preemption in the burst limit cycle under a pool of 5 full requests for 16 clients", b, async)
			}
			if d := slow.ThroughputRPS/got.ThroughputRPS - 1; d > 1e-9 || d < -1e-9 || slow.PreemptionsPerRequest != got.PreemptionsPerRequest {
				t.Errorf("%s async=%v: fast path %v/%v vs pass-by-pass %v/%v", b, async, got.ThroughputRPS, got.PreemptionsPerRequest, slow.ThroughputRPS, slow.PreemptionsPerRequest)
			}
		}
	}
}

// TestKVFastPathMatches: under KV pressure with a queue (the fast path runs while
// admission is provably blocked, kvQueueBlocked), the fast path gives the
// pass-by-pass numbers up to summation order.
func TestKVFastPathMatches(t *testing.T) {
	w := workload.Spec{ISL: 8192, OSL: 256, Concurrency: 64}
	for _, b := range []engine.Backend{engine.VLLM, engine.SGLang, engine.TRTLLM} {
		e := testEngine(t, b, func(e *engine.Spec) {
			e.KVCapacityTokens = w.Concurrency * (w.ISL + w.OSL) / 2
			e.CapacityPolicy, e.EnableChunkedPrefill = engine.PolicyMaxUtilization, true
		})
		fast := quant(t, w, e, kvLin)
		o := DefaultOptions()
		o.NoFastForward = true
		slow, err := QuantitativeWith(context.Background(), w, e, kvLin, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range [][2]float64{{fast.ThroughputRPS, slow.ThroughputRPS}, {fast.TTFTSteady.Mean(), slow.TTFTSteady.Mean()},
			{fast.ITL.Quantile(0.99), slow.ITL.Quantile(0.99)}, {fast.PreemptionsPerRequest, slow.PreemptionsPerRequest}, {fast.KVUtilPeak, slow.KVUtilPeak}} {
			if d := c[0] - c[1]; d > 1e-9*c[1] || -d > 1e-9*c[1] {
				t.Errorf("%s: fast path %v vs pass-by-pass %v", b, c[0], c[1])
			}
		}
	}
}

// TestTraceKVChecks: a trace under a per-pass KV model is refused with a request
// longer than the pool; a request's cached prefix (the reuse oracle's hit) is allowed.
func TestTraceKVChecks(t *testing.T) {
	e := testEngine(t, engine.VLLM, func(e *engine.Spec) { e.KVCapacityTokens = 1024 })
	if _, err := QuantitativeTrace(context.Background(), []TraceRequest{{ArrivalMs: 0, ISL: 100, OSL: 10, Prefix: 50}}, e, kvLin, Options{}); err != nil {
		t.Errorf("cached prefix under a KV capacity: %v", err)
	}
	for _, c := range []struct {
		reqs []TraceRequest
		want string
	}{
		{[]TraceRequest{{ArrivalMs: 0, ISL: 100, OSL: 10}, {ArrivalMs: 1, ISL: 1000, OSL: 100}}, "one request needs 69 blocks of 16 tokens"},
	} {
		_, err := QuantitativeTrace(context.Background(), c.reqs, e, kvLin, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want one containing %q", err, c.want)
		}
	}
}

// TestKVStarvationRefused: a pool so small that SGLang retracts the same request
// each time it is readmitted (four 16-token pages for three 16-token prompts,
// each needing a second page for its next token) never completes a generation of
// that client. The engine starves it (the DES runs the same cycle); the closed
// loop is refused as an input error naming the pool, not reported as an
// internal fault (found by TestPropertyClosedLoopAgainstDES).
func TestKVStarvationRefused(t *testing.T) {
	e, err := engine.Defaults(engine.SGLang, "")
	if err != nil {
		t.Fatal(err)
	}
	e.ChunkedPrefillSize, e.MaxPrefillTokens, e.MaxNumSeqs, e.BlockSize, e.KVCapacityTokens = 256, 256, 3, 16, 64
	_, err = QuantitativeWith(context.Background(), workload.Spec{ISL: 16, OSL: 2, Concurrency: 3}, e,
		timing.Linear{BaseMs: 6, PrefillMsPerToken: 0.025, DecodeMsPerRow: 0.04, CtxMsPerToken: 0.00003}, Options{})
	if err == nil || !IsInputError(err) || !strings.HasPrefix(err.Error(), "engine kv_capacity_tokens = 64: a request of isl 16 + osl 2 was preempted ") ||
		!strings.HasSuffix(err.Error(), "give the engine more KV or fewer clients") {
		t.Fatalf("error %v, want the starvation refusal", err)
	}
}

// TestKVRecomputeOverBudgetRefused: with chunked prefill off, a vLLM request
// preempted late in its output must recompute prompt + outputs in one pass (V-R6,
// V-R3); once that exceeds the budget the engine can never schedule it again (the
// DES deadlocks the same way). The run is refused naming the budget and the way
// out, not with a generic deadlock (found by TestPropertyClosedLoopAgainstDES).
func TestKVRecomputeOverBudgetRefused(t *testing.T) {
	e := engine.Spec{Backend: engine.VLLM, MaxNumBatchedTokens: 1024, MaxNumSeqs: 4, BlockSize: 16, KVCapacityTokens: 3 * 1056}
	w := workload.Spec{ISL: 990, OSL: 50, Concurrency: 4, ISLQuantiles: []int{16, 990}, OSLQuantiles: []int{1, 50}}
	_, err := QuantitativeWith(context.Background(), w, e,
		timing.Linear{BaseMs: 6, PrefillMsPerToken: 0.025, DecodeMsPerRow: 0.04, CtxMsPerToken: 0.00003}, Options{})
	if err == nil || !IsInputError(err) || !strings.HasPrefix(err.Error(), "engine token budget = 1024 with chunked prefill off: a preempted request must recompute ") ||
		!strings.HasSuffix(err.Error(), "enable chunked prefill, raise the budget or give the engine more KV") {
		t.Fatalf("error %v, want the recompute-over-budget refusal", err)
	}
}
