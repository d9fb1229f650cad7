package queueing

import (
	"context"
	"reflect"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"pgregory.net/rapid"
)

// shareEngine is a small vLLM engine with a KV pool of blocks blocks of 16 tokens.
func shareEngine(blocks int) engine.Spec {
	return engine.Spec{Backend: engine.VLLM, MaxNumBatchedTokens: 2048, MaxNumSeqs: 8, EnableChunkedPrefill: true, BlockSize: 16, KVCapacityTokens: blocks * 16}
}

var shareTiming = timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.01, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.00001}

// TestTraceSharedBlocksHeldOnce: two requests of 64 tokens (4 blocks of 16) whose
// first 32-token hash block is common, the second hitting it, both admitted in the
// first pass. vLLM holds the 2 common blocks once (the second request's hits are on
// blocks the first holds, ref_cnt > 0: no free block, V-R9): 4 + 2 blocks after
// admission, + 1 each for the first decode row's token 64 (block 4) = 8 of 16 at
// the peak; counted per request, 10. Without hash ids (or with no common chain)
// the replay is the old one.
func TestTraceSharedBlocksHeldOnce(t *testing.T) {
	ctx := context.Background()
	reqs := []TraceRequest{
		{ArrivalMs: 0, ISL: 64, OSL: 3, HashIDs: []int64{7, 8}},
		{ArrivalMs: 0, ISL: 64, OSL: 3, Prefix: 32, HashIDs: []int64{7, 9}},
	}
	o := Options{PrefixCaching: true, HashBlock: 32}
	shared, err := QuantitativeTrace(ctx, reqs, shareEngine(16), shareTiming, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := 8.0 / 16; shared.KVUtilPeak != want {
		t.Fatalf("KV peak %v with the common block shared, want %v", shared.KVUtilPeak, want)
	}
	plain := append([]TraceRequest(nil), reqs...)
	for i := range plain {
		plain[i].HashIDs = nil
	}
	old, err := QuantitativeTrace(ctx, plain, shareEngine(16), shareTiming, o)
	if err != nil {
		t.Fatal(err)
	}
	if want := 10.0 / 16; old.KVUtilPeak != want {
		t.Fatalf("KV peak %v without hash ids, want %v", old.KVUtilPeak, want)
	}
	unique := append([]TraceRequest(nil), reqs...)
	unique[1].HashIDs = []int64{1, 2}
	u, err := QuantitativeTrace(ctx, unique, shareEngine(16), shareTiming, o)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(u, old) {
		t.Fatalf("no chain named twice: the replay changed (KV peak %v, want %v)", u.KVUtilPeak, old.KVUtilPeak)
	}
	noCache := o
	noCache.PrefixCaching = false
	nc, err := QuantitativeTrace(ctx, reqs, shareEngine(16), shareTiming, noCache)
	if err != nil {
		t.Fatal(err)
	}
	if nc.KVUtilPeak != old.KVUtilPeak {
		t.Fatalf("prefix caching off: KV peak %v, want %v (nothing shared)", nc.KVUtilPeak, old.KVUtilPeak)
	}
}

// TestTraceSharedBlocksAdmitMore: a pool of 7 blocks fits both requests' prompts
// only when the common block is held once (4 + 2 < 8), so the second request is
// admitted at once and finishes earlier than when it counts its own copy.
func TestTraceSharedBlocksAdmitMore(t *testing.T) {
	ctx := context.Background()
	reqs := []TraceRequest{
		{ArrivalMs: 0, ISL: 64, OSL: 2, HashIDs: []int64{7, 8}},
		{ArrivalMs: 0, ISL: 64, OSL: 2, Prefix: 32, HashIDs: []int64{7, 9}},
	}
	o := Options{PrefixCaching: true, HashBlock: 32}
	shared, err := QuantitativeTrace(ctx, reqs, shareEngine(7), shareTiming, o)
	if err != nil {
		t.Fatal(err)
	}
	reqs[0].HashIDs, reqs[1].HashIDs = nil, nil
	old, err := QuantitativeTrace(ctx, reqs, shareEngine(7), shareTiming, o)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := shared.Requests[1].TTFTMs, old.Requests[1].TTFTMs; !(a < b) || shared.Requests[1].TTFTMs != shared.Requests[0].TTFTMs {
		t.Fatalf("second request's TTFT %v ms shared, %v ms counted twice; want it admitted with the first (TTFT %v ms)", a, b, shared.Requests[0].TTFTMs)
	}
}

// TestTraceSharedBlocksInvariants (property): random traces whose hash ids come from
// a small alphabet (so chains repeat), prefixes up to the whole common head, random
// pools that fit the longest request: the replay completes with every block free
// again (replayTrace checks it), it depends on the chains, not on the ids' values
// (small ids index a table, large ones a map), the KV peak stays within the pool;
// with a pool holding every block of the trace at once the KV peak is never above
// the one without hash ids and the schedule is the same.
func TestTraceSharedBlocksInvariants(t *testing.T) {
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 12).Draw(rt, "n")
		hb := rapid.SampledFrom([]int{16, 24, 32, 40}).Draw(rt, "hb")
		idBase := rapid.SampledFrom([]int64{0, 1 << 40}).Draw(rt, "idBase") // small ids, or ids looked up by map
		reqs := make([]TraceRequest, n)
		at, total, longest := 0.0, 0, 0
		for i := range reqs {
			at += rapid.Float64Range(0, 30).Draw(rt, "gap")
			isl := rapid.IntRange(1, 200).Draw(rt, "isl")
			osl := rapid.IntRange(1, 40).Draw(rt, "osl")
			ids := make([]int64, rapid.IntRange(0, (isl+hb-1)/hb+1).Draw(rt, "ids")) // + 1: an id past the prompt is ignored
			for k := range ids {
				ids[k] = idBase + int64(rapid.IntRange(0, 2).Draw(rt, "id"))
			}
			pre := 0
			if len(ids) > 0 {
				pre = rapid.IntRange(0, min(isl-1, len(ids)*hb)).Draw(rt, "prefix") / 16 * 16
			}
			reqs[i] = TraceRequest{ArrivalMs: at, ISL: isl, OSL: osl, Prefix: pre, HashIDs: ids}
			total += (isl + osl + 15) / 16
			longest = max(longest, (isl+osl-1+15)/16)
		}
		o := Options{PrefixCaching: true, HashBlock: hb, NoFastForward: rapid.Bool().Draw(rt, "noff")}
		plain := append([]TraceRequest(nil), reqs...)
		for i := range plain {
			plain[i].HashIDs = nil
		}
		pool := rapid.IntRange(longest, longest+total).Draw(rt, "pool")
		rep, err := QuantitativeTrace(ctx, reqs, shareEngine(pool), shareTiming, o)
		if err != nil {
			rt.Fatalf("pool %d: %v", pool, err)
		}
		if rep.KVUtilPeak > 1 {
			rt.Fatalf("KV peak %v over the pool", rep.KVUtilPeak)
		}
		moved := append([]TraceRequest(nil), reqs...) // the same chains under other ids
		for i := range moved {
			moved[i].HashIDs = make([]int64, len(reqs[i].HashIDs))
			for k, h := range reqs[i].HashIDs {
				moved[i].HashIDs[k] = h ^ (1 << 40) + 7
			}
		}
		if m, err := QuantitativeTrace(ctx, moved, shareEngine(pool), shareTiming, o); err != nil || !reflect.DeepEqual(m, rep) {
			rt.Fatalf("the same chains under other ids: another replay (%v)", err)
		}
		full, err := QuantitativeTrace(ctx, reqs, shareEngine(total), shareTiming, o)
		if err != nil {
			rt.Fatal(err)
		}
		old, err := QuantitativeTrace(ctx, plain, shareEngine(total), shareTiming, o)
		if err != nil {
			rt.Fatal(err)
		}
		if full.KVUtilPeak > old.KVUtilPeak {
			rt.Fatalf("ample pool: KV peak %v shared > %v counted per request", full.KVUtilPeak, old.KVUtilPeak)
		}
		full.KVUtilPeak = old.KVUtilPeak
		if !reflect.DeepEqual(full, old) {
			rt.Fatalf("ample pool: sharing changed the schedule")
		}
	})
}

// TestTraceHashIDErrors: hash ids need the hash block.
func TestTraceHashIDErrors(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		reqs []TraceRequest
		hb   int
		want string
	}{
		{[]TraceRequest{{ISL: 64, OSL: 2}, {ISL: 64, OSL: 2, HashIDs: []int64{1}}}, 0,
			"trace request 1: 1 hash ids but options hash_block = 0: set the tokens one hash id covers (≥ 1)"},
	} {
		_, err := QuantitativeTrace(ctx, c.reqs, shareEngine(64), shareTiming, Options{PrefixCaching: true, HashBlock: c.hb})
		if err == nil || err.Error() != c.want {
			t.Errorf("err %v, want %q", err, c.want)
		}
	}
}
