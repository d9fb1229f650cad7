package queueing

import (
	"context"
	"reflect"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
)

// TestTraceSelfHits (Options.PrefixCaching, vLLM): a request preempted under KV
// pressure keeps its computed blocks cached (V-R6, V-R8), so its recompute starts
// from its last computed full block and it finishes sooner than when it recomputes
// from scratch; the reported prefix stays the first admission's; without a KV
// capacity nothing is preempted and the option changes nothing.
func TestTraceSelfHits(t *testing.T) {
	ctx := context.Background()
	e := engine.Spec{Backend: engine.VLLM, MaxNumBatchedTokens: 2048, MaxNumSeqs: 8, EnableChunkedPrefill: true, BlockSize: 16, KVCapacityTokens: 150 * 16}
	tm := timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.01, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.00001}
	reqs := []TraceRequest{{ArrivalMs: 0, ISL: 1000, OSL: 400, Prefix: 32}, {ArrivalMs: 1, ISL: 1000, OSL: 400}}
	scratch, err := QuantitativeTrace(ctx, reqs, e, tm, Options{})
	if err != nil {
		t.Fatal(err)
	}
	hits, err := QuantitativeTrace(ctx, reqs, e, tm, Options{PrefixCaching: true})
	if err != nil {
		t.Fatal(err)
	}
	if !(scratch.PreemptionsPerRequest > 0) || hits.PreemptionsPerRequest != scratch.PreemptionsPerRequest {
		t.Fatalf("preemptions per request: %v from scratch, %v with self hits; want the same, > 0", scratch.PreemptionsPerRequest, hits.PreemptionsPerRequest)
	}
	last := func(r *Report) float64 {
		return max(r.Requests[0].ArrivalMs+r.Requests[0].E2EMs, r.Requests[1].ArrivalMs+r.Requests[1].E2EMs)
	}
	if !(last(hits) < last(scratch)) {
		t.Fatalf("last finish %v ms with self hits, %v from scratch: the recompute should be cheaper", last(hits), last(scratch))
	}
	for i, r := range hits.Requests {
		if r.Prefix != reqs[i].Prefix {
			t.Fatalf("request %d: reported prefix %d, want the first admission's %d", i, r.Prefix, reqs[i].Prefix)
		}
	}
	e.KVCapacityTokens = 0
	a, err := QuantitativeTrace(ctx, reqs, e, tm, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := QuantitativeTrace(ctx, reqs, e, tm, Options{PrefixCaching: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("no KV capacity: PrefixCaching changed the replay")
	}
}
