package oracle_test

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestSGLangAdmissionChargesWholePages: with page_size 16, seven prompts arriving
// together (20, 20, 20, 33, 209, 625, 900 tokens, one output token each) fit a
// 1,904-token pool by their token counts (1,834 + reserves) but not by the pages
// the allocator hands out (120 of 119). SGLang's PrefillAdder charges every extend
// page-rounded (ceil_paged_tokens, S-R4), so the 900-token prompt is refused
// (NO_TOKEN) and waits for the others to finish; before, the DES admitted it and
// ran out of pages mid-allocation ("the KV pool ran out during a prefill chunk").
func TestSGLangAdmissionChargesWholePages(t *testing.T) {
	e := sessEngine(engine.SGLang, 120)
	var reqs []workload.Request
	for i, isl := range []int{20, 20, 20, 33, 209, 625, 900} {
		reqs = append(reqs, workload.Request{ID: string(rune('a' + i)), PromptLen: isl, MaxTokens: 1})
	}
	s, err := oracle.New(e, sessTiming, oracle.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.RunTrace(context.Background(), reqs)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	first := res.Requests[0].FirstTokenMs
	for _, r := range res.Requests[:6] {
		if r.FirstTokenMs != first {
			t.Errorf("request %s (isl %d): first token at %v ms, want %v (admitted with the first six)", r.ID, r.PromptLen, r.FirstTokenMs, first)
		}
	}
	if last := res.Requests[6]; last.FirstTokenMs <= first {
		t.Errorf("request %s (isl %d): first token at %v ms, want after %v (refused by its page-rounded charge)", last.ID, last.PromptLen, last.FirstTokenMs, first)
	}
}
