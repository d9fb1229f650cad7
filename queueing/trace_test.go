package queueing

import (
	"context"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestQuantitativeTraceEqualsOpenLoop: a trace holding the open loop's own arrival
// stream (warm-up included) and shape gives the open loop's steady requests exactly
// the same TTFT and E2E: the same calendar, only the driver differs.
func TestQuantitativeTraceEqualsOpenLoop(t *testing.T) {
	e := engine.Spec{Backend: engine.VLLM, MaxNumBatchedTokens: 2048, MaxNumSeqs: 64, EnableChunkedPrefill: true, BlockSize: 16}
	tm := timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.01, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.00001}
	const n = 400
	w := workload.Spec{ISL: 1000, OSL: 100, Prefix: 200, RateRPS: 6, NumRequests: n}
	ref, err := QuantitativeWith(context.Background(), w, e, tm, Options{})
	if err != nil {
		t.Fatal(err)
	}
	times, err := workload.ArrivalTimesMs(n, w.RateRPS)
	if err != nil {
		t.Fatal(err)
	}
	reqs := make([]TraceRequest, n)
	for i, a := range times {
		reqs[i] = TraceRequest{ArrivalMs: a, ISL: 1000, Prefix: 200, OSL: 100}
	}
	got, err := QuantitativeTrace(context.Background(), reqs, e, tm, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Requests) != n || got.Fidelity != workload.W3 {
		t.Fatalf("%d records, fidelity %s; want %d, W3", len(got.Requests), got.Fidelity, n)
	}
	warm := n - len(ref.Requests)
	for j, r := range ref.Requests {
		g := got.Requests[warm+j]
		if g.ArrivalMs != r.ArrivalMs || g.TTFTMs != r.TTFTMs || g.E2EMs != r.E2EMs {
			t.Fatalf("request %d: trace (%v, %v, %v) vs open loop (%v, %v, %v)", warm+j, g.ArrivalMs, g.TTFTMs, g.E2EMs, r.ArrivalMs, r.TTFTMs, r.E2EMs)
		}
	}
}

// TestQuantitativeTraceAlone: one request alone, by hand (constant 1 ms passes, the
// prompt in one pass): TTFT 1, E2E = osl passes.
func TestQuantitativeTraceAlone(t *testing.T) {
	e := engine.Spec{Backend: engine.VLLM, MaxNumBatchedTokens: 2048, MaxNumSeqs: 64, EnableChunkedPrefill: true, BlockSize: 16}
	rep, err := QuantitativeTrace(context.Background(), []TraceRequest{{ArrivalMs: 0, ISL: 100, OSL: 3}, {ArrivalMs: 1000, ISL: 100, Prefix: 50, OSL: 3}},
		e, timing.Constant{Ms: 1}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rep.Requests {
		if r.TTFTMs != 1 || r.E2EMs != 3 {
			t.Errorf("request %d: ttft %v e2e %v; want 1, 3", i, r.TTFTMs, r.E2EMs)
		}
	}
	span := 1003.0 // ms from the first arrival to the last finish
	if got, want := rep.ThroughputRPS, 2/span*1000; got != want {
		t.Errorf("throughput %v; want 2 requests / 1003 ms", got)
	}
	_, err = QuantitativeTrace(context.Background(), []TraceRequest{{ArrivalMs: 5, ISL: 10, OSL: 1}, {ArrivalMs: 4, ISL: 10, OSL: 1}}, e, timing.Constant{Ms: 1}, Options{})
	if err == nil || !strings.Contains(err.Error(), "trace request 1: arrival 4 ms: arrivals must be finite, ≥ 0 and non-decreasing") {
		t.Errorf("out-of-order arrivals: %v", err)
	}
	_, err = QuantitativeTrace(context.Background(), []TraceRequest{{ISL: 10, Prefix: 10, OSL: 1}}, e, timing.Constant{Ms: 1}, Options{})
	if err == nil || !strings.Contains(err.Error(), "trace request 0: prefix = 10: must be in 0..isl − 1 = 9") {
		t.Errorf("prefix = isl: %v", err)
	}
	short := e
	short.MaxModelLen = 12
	_, err = QuantitativeTrace(context.Background(), []TraceRequest{{ISL: 10, OSL: 2}, {ArrivalMs: 1, ISL: 10, OSL: 3}}, short, timing.Constant{Ms: 1}, Options{})
	if err == nil || !strings.Contains(err.Error(), "trace request 1: isl 10 + osl 3 = 13 tokens: longer than the engine config's max_model_len 12") {
		t.Errorf("request longer than max_model_len: %v", err)
	}
	nocache := e
	nocache.NoPrefixReuse = true
	_, err = QuantitativeTrace(context.Background(), []TraceRequest{{ISL: 10, OSL: 2}, {ArrivalMs: 1, ISL: 10, Prefix: 4, OSL: 2}}, nocache, timing.Constant{Ms: 1}, Options{})
	if err == nil || !strings.Contains(err.Error(), "trace request 1: prefix = 4: the engine config turns the prefix cache off") {
		t.Errorf("a cached prefix with the prefix cache off: %v", err)
	}
}
