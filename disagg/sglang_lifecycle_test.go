package disagg

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// sglConfig is testConfig with SGLang engines on both pools (overlap off, so a
// pass boundary is the only schedule).
func sglConfig(t *testing.T, nP, nD int) Config {
	t.Helper()
	c := testConfig(t, nP, nD)
	e, err := engine.Defaults(engine.SGLang, "")
	if err != nil {
		t.Fatal(err)
	}
	e.AsyncScheduling = false
	c.Prefill.Engine, c.Decode.Engine = e, e
	return c
}

// TestSGLangFirstTokenFromDecode (S-D4): an SGLang client receives the first
// token from the decode server when the landed request joins its running batch.
// At C = 1 the decode worker is idle at the landing, so the TTFT is the stage,
// the prefill pass and the transfer (2 + 15 + 12.5 ms) and the first gap is one
// decode pass (3.1 ms); a vLLM tandem of the same timing shows the prefill
// worker's first token (17 ms).
func TestSGLangFirstTokenFromDecode(t *testing.T) {
	w := workload.Spec{ISL: 1000, OSL: 10, Concurrency: 1}
	c := sglConfig(t, 1, 1)
	c.Prefill.Engine.StageMs = 2
	r := eval(t, w, c)
	if got := r.TTFTSteady.Max(); !near(got, 29.5) || !near(r.TTFTSteady.Min(), 29.5) {
		t.Errorf("SGLang TTFT %v..%v ms, want 29.5 (stage 2 + prefill 15 + transfer 12.5)", r.TTFTSteady.Min(), got)
	}
	if got := r.ITL.Max(); !near(got, 3.1) {
		t.Errorf("SGLang ITL max %v ms, want 3.1 (the first gap is one decode pass)", got)
	}
	v := testConfig(t, 1, 1)
	v.Prefill.Engine.StageMs = 2
	if got := eval(t, w, v).TTFTSteady.Max(); !near(got, 17) {
		t.Errorf("vLLM TTFT %v ms, want 17 (the prefill worker's first token)", got)
	}
}

// TestSGLangFirstTokenWaitsForPass (S-D4): at C = 2 one request lands while the
// other decodes; it becomes visible at the next decode pass start, so some
// request's TTFT exceeds stage + prefill + transfer, and never by more than one
// decode pass of two rows.
func TestSGLangFirstTokenWaitsForPass(t *testing.T) {
	c := sglConfig(t, 2, 1)
	r := eval(t, workload.Spec{ISL: 1000, OSL: 40, Concurrency: 2}, c)
	floor := 15 + r.KVTransfer.Min()
	if min := r.TTFTSteady.Min(); min < floor*(1-1e-12) {
		t.Errorf("TTFT min %v ms below prefill + transfer %v", min, floor)
	}
	if max := r.TTFTSteady.Max(); !(max > floor+1e-9) || max > 15+r.KVTransfer.Max()+3.2+1e-9 {
		t.Errorf("TTFT max %v ms, want above %v (a pass in flight) and at most one 2-row decode pass (3.2 ms) more", max, floor)
	}
}

// TestSGLangPrefillKappa (S-D1): an SGLang prefill worker holds two handoff
// buffers per running slot, which lower a looser κ; vLLM keeps the deployed κ.
func TestSGLangPrefillKappa(t *testing.T) {
	c := sglConfig(t, 1, 1)
	c.Prefill.BatchCap = 3
	if got := c.prefillKappa(); got != 6 {
		t.Errorf("SGLang batch cap 3: κ = %d, want 6", got)
	}
	c.Prefill.InFlightCap = 4
	if got := c.prefillKappa(); got != 4 {
		t.Errorf("SGLang batch cap 3, κ 4: κ = %d, want 4 (the tighter)", got)
	}
	v := testConfig(t, 1, 1)
	v.Prefill.BatchCap = 3
	if got := v.prefillKappa(); got != 0 {
		t.Errorf("vLLM: κ = %d, want 0 (none)", got)
	}
}

// TestSGLangPreallocGatesPrefill (S-D2): an SGLang decode server with a running
// cap of 1 holds 3 requests from their preallocation to their finish, so at C 4
// one request waits for a decode slot — some 39 decode passes of the request
// it replaces — before its prefill starts; without a preallocation (vLLM's pull)
// it prefills at once and waits for a decode seat after the transfer instead.
func TestSGLangPreallocGatesPrefill(t *testing.T) {
	w := workload.Spec{ISL: 1000, OSL: 40, Concurrency: 4}
	c := sglConfig(t, 1, 1)
	c.Decode.BatchCap = 1
	if got := eval(t, w, c).PQueueMsP99; got < 39*3.1 {
		t.Errorf("SGLang decode cap 1, C 4: prefill queueing p99 %v ms, want ≥ %v (a decode slot frees after 39 passes)", got, 39*3.1)
	}
	v := testConfig(t, 1, 1)
	v.Decode.BatchCap = 1
	if got := eval(t, w, v).PQueueMsP99; got > 2*15 {
		t.Errorf("vLLM decode cap 1, C 4: prefill queueing p99 %v ms, want ≤ 30 (the pull waits after the prefill)", got)
	}
	c.Push = true // push connectors keep the old order (no preallocation)
	if got := eval(t, w, c).PQueueMsP99; got > 2*15 {
		t.Errorf("SGLang push, C 4: prefill queueing p99 %v ms, want ≤ 30", got)
	}
}

// TestSGLangTraceOneTokenNoDecodeWorker: a one-token request has no handoff, so
// its trace record names no decode worker, though SGLang's decode server
// preallocated (and returned) a slot for it (S-D2); a longer one names its.
func TestSGLangTraceOneTokenNoDecodeWorker(t *testing.T) {
	reqs := []queueing.TraceRequest{{ArrivalMs: 0, ISL: 500, OSL: 1}, {ArrivalMs: 1, ISL: 500, OSL: 8}}
	r, err := QuantitativeTrace(context.Background(), reqs, sglConfig(t, 1, 1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Records[0].DecodeWorker; got != -1 {
		t.Errorf("osl 1: decode worker %d, want -1 (no handoff)", got)
	}
	if got := r.Records[1].DecodeWorker; got != 0 {
		t.Errorf("osl 8: decode worker %d, want 0", got)
	}
}
