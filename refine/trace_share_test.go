package refine

import (
	"context"
	"reflect"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/store"
)

// TestReplaySharesPrefixBlocks: Replay (`aicdb trace replay --tier quantitative`)
// gives the calendar the trace's hash ids, so with a KV capacity and prefix caching
// (vLLM) a prefix block that several running requests hit is held once
// (queueing's kv_share.go, V-R9 ref_cnt): its report is QuantitativeTrace's with the
// ids and the same hits, and its KV peak is below the one that counts each running
// request's blocks as its own.
func TestReplaySharesPrefixBlocks(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	info := importTestTrace(t, st, "t", 60, 0)
	w, err := LoadTraceWorkload(ctx, st, info, store.TraceSlice{Scale: 1})
	if err != nil {
		t.Fatal(err)
	}
	e := engine.Spec{Backend: engine.VLLM, MaxNumBatchedTokens: 4096, MaxNumSeqs: 64, EnableChunkedPrefill: true, BlockSize: 16,
		EnablePrefixCaching: true, KVCapacityTokens: 40000 * 16}
	tm := timing.Linear{BaseMs: 30, PrefillMsPerToken: 0.01, DecodeMsPerRow: 0.05}
	rep, err := w.Replay(ctx, nil, TraceReplay{Engine: e, Timing: tm, PrefixCaching: true,
		Reuse: &oracle.ReuseConfig{Backend: engine.VLLM, KVBlocks: 40000, BlockSize: 16}})
	if err != nil {
		t.Fatal(err)
	}
	reqs := append([]queueing.TraceRequest(nil), w.Reqs...)
	for i := range reqs {
		reqs[i].Prefix = rep.Requests[i].Prefix
	}
	perRequest, err := queueing.QuantitativeTrace(ctx, reqs, e, tm, queueing.Options{PrefixCaching: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range reqs {
		reqs[i].HashIDs = w.hashIDs(i)
	}
	shared, err := queueing.QuantitativeTrace(ctx, reqs, e, tm, queueing.Options{PrefixCaching: true, HashBlock: info.HashBlock})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep, shared) {
		t.Fatalf("Replay's report is not the calendar's with the trace's hash ids (KV peak %v, want %v)", rep.KVUtilPeak, shared.KVUtilPeak)
	}
	if !(shared.KVUtilPeak < perRequest.KVUtilPeak) {
		t.Fatalf("KV peak %v with shared blocks held once, %v counted per request: want it lower", shared.KVUtilPeak, perRequest.KVUtilPeak)
	}
}
