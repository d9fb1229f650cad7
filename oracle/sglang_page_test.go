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

// TestSGLangAdmissionLocksHitsBeforeNoToken: the second turn of a session (900
// tokens, one 16-token page hit in the evictable cache) arrives while three
// requests decode and 56 pages are free or evictable. Its 884-token extend needs
// 56 pages once the hit page is locked out of the evictable pool; SGLang repeats
// the NO_TOKEN check after _lock_node (S-R4), so the turn waits. Before, the DES
// checked before locking, admitted it and ran out of pages mid-allocation
// (TestRunSessionsProperty seed 12796690357342256994).
func TestSGLangAdmissionLocksHitsBeforeNoToken(t *testing.T) {
	e := sessEngine(engine.SGLang, 120)
	ss := oracle.Sessions{Turns: []oracle.SessionTurn{
		turn(0, 20, 1, 2, 0), turn(0, 20, 15, 0, 0), turn(50, 285, 6, 0, 0),
		turn(50, 900, 1, 2, 76), turn(50, 637, 6, 0, 0),
	}}
	res := runSessions(t, e, ss)
	r := res.Requests[3]
	if r.NumCachedTokens != 16 || r.NumTokens != 1 {
		t.Errorf("second turn: %d cached tokens, %d output tokens; want 16 and 1", r.NumCachedTokens, r.NumTokens)
	}
	// It waits (NO_TOKEN) until the three decoders that arrived before it have
	// finished and freed their pages: its first token comes after their last.
	for _, i := range []int{1, 2, 4} {
		if d := res.Requests[i]; r.FirstTokenMs <= d.FinishMs {
			t.Errorf("second turn (arrived %v ms): first token at %v ms, before decoder %s finished at %v ms: admitted on pages its locked hit took", r.ArrivalMs, r.FirstTokenMs, d.ID, d.FinishMs)
		}
	}
}
