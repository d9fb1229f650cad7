package oracle_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/engine"
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
	e := engine.Spec{Backend: engine.VLLM, MaxNumBatchedTokens: 4, MaxNumSeqs: 8, BlockSize: 4, KVCapacityTokens: 49 * 4,
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

// TestPricingErrorIsTheRunsError: a pass the timing cannot price stops the run
// with an error that wraps the timing's (errors.Is) and names the pass.
func TestPricingErrorIsTheRunsError(t *testing.T) {
	gap := errors.New("no rows near this shape")
	n := 0
	tm := timing.Func(func(p *timing.Pass) (float64, error) {
		if n++; n == 3 {
			return 0, gap
		}
		return 1, nil
	})
	e := engine.Spec{Backend: engine.VLLM, MaxNumBatchedTokens: 4, MaxNumSeqs: 8, BlockSize: 4, KVCapacityTokens: 49 * 4,
		EnableChunkedPrefill: true}
	s, err := oracle.New(e, tm, oracle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.RunTrace(context.Background(), []workload.Request{{ID: "A", PromptTokens: []int{1, 2, 3, 4, 5, 6, 7, 8, 9}, MaxTokens: 4}})
	if !errors.Is(err, gap) || !strings.Contains(err.Error(), "oracle run: pricing pass 3 (1 prefill tokens, 0 decode rows): no rows near this shape") {
		t.Fatalf("err %v: want the timing's error naming pass 3", err)
	}
	if n != 3 {
		t.Errorf("%d passes priced: the run went on after the error", n)
	}
}
