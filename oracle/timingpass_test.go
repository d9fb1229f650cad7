package oracle_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// recordPasses returns a timing that prices every pass at 1 ms and records a copy of it.
func recordPasses(out *[]timing.Pass) timing.Timing {
	return timing.Func(func(p *timing.Pass) (float64, error) {
		*out = append(*out, timing.Pass{Prefill: append([]timing.Chunk(nil), p.Prefill...), Decode: append([]int(nil), p.Decode...)})
		return 1, nil
	})
}

// TestTimingPassRule: each pass reaches the timing exactly per timing.Pass's doc — a
// decode row iff the request had computed its whole prompt before the pass and the
// entry schedules one token (context = computed before + 1); a final one-token prompt
// chunk and a prefix-hit chunk are Chunks with their computed and prefix tokens.
func TestTimingPassRule(t *testing.T) {
	var got []timing.Pass
	e := oracle.Engine{Backend: oracle.VLLM, MaxNumBatchedTokens: 4, MaxNumSeqs: 8, BlockSize: 4, NumGPUBlocks: 50,
		EnableChunkedPrefill: true, EnablePrefixCaching: true}
	s, err := oracle.New(e, recordPasses(&got), oracle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.RunTrace(context.Background(), []workload.Request{
		{ID: "A", PromptTokens: []int{1, 2, 3, 4, 5}, MaxTokens: 2},
		{ID: "B", ArrivalMs: 10, PromptTokens: []int{1, 2, 3, 4, 9, 9}, MaxTokens: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []timing.Pass{
		{Prefill: []timing.Chunk{{Tokens: 4}}},                         // A's first chunk
		{Prefill: []timing.Chunk{{Tokens: 1, Computed: 4}}},            // A's final one-token chunk: a Chunk
		{Decode: []int{6}},                                             // A#2: computed 5 before, +1
		{Prefill: []timing.Chunk{{Tokens: 2, Computed: 4, Prefix: 4}}}, // B hits A's first block
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("passes\n got %+v\nwant %+v", got, want)
	}
}
