package gate

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing"
)

// TestSGLangDraftKVRefused: SGLang EAGLE under KV pressure — a pool of two
// requests' length, where the decode steps' verify slots (input + k drafts per
// request) soon exceed the free pages — is refused on both sides with one line
// naming the verify slots and the fix, never answered optimistically; the same
// engine with a pool the verify slots fit agrees exactly.
func TestSGLangDraftKVRefused(t *testing.T) {
	e, err := engine.Defaults(engine.SGLang, "")
	if err != nil {
		t.Fatal(err)
	}
	e.SetDrafts(3, 1)
	e.KVCapacityTokens = 2 * (16 + 10 + 1)
	f := FiniteFamily{Family: Family{Name: "sglang eagle3 c4 kv2req", Spec: closed(16, 10, 0, 4), Engine: e, Timing: roofline},
		Run: queueing.FiniteRun{Requests: 8}}
	// The summary run a fit evaluates takes decode stretches in bulk; it stops at
	// the same step.
	requireRefusedBothSides(t, f, "verify slots", "raise")
	f.Engine.KVCapacityTokens = 4 * (16 + 10 + 4)
	requireAggExact(t, runFiniteFamily(context.Background(), f))
	// Two requests whose pool runs out near the end of their decode (admission
	// reserves isl + osl each: 76 < 153 − 76; their last verify, 59 outputs in,
	// needs 2 · (16 + 59 + 3) = 156 slots): the summary run's bulk stretch stops
	// before the step that does not fit, the same step the full run refuses.
	e.KVCapacityTokens = 153
	w, run := closed(16, 60, 0, 2), queueing.FiniteRun{Requests: 2}
	_, full := queueing.QuantitativeFinite(context.Background(), w, e, roofline, queueing.Options{}, run)
	_, sum := queueing.QuantitativeFiniteSummary(context.Background(), w, e, roofline, queueing.Options{}, run)
	if full == nil || !strings.Contains(full.Error(), "verify slots") || fmt.Sprint(sum) != fmt.Sprint(full) {
		t.Errorf("pool exhausted mid-decode: full run %v, summary run %v; want the same verify-slots refusal", full, sum)
	}
}

// TestVLLMDraftKVRefused: vLLM MTP under KV pressure — a pool of two requests'
// length for four clients, where a running request's slots with the drafts'
// lookahead (V-S2) soon do not fit, so vLLM preempts — agrees exactly when
// scheduling is synchronous (the recompute samples before new drafts) and, with
// an MTP step in flight (async), is refused on both sides with one line naming
// the preemption and the fix, never answered.
func TestVLLMDraftKVRefused(t *testing.T) {
	for _, async := range []bool{false, true} {
		e := vllm(256, 4)
		e.AsyncScheduling = async
		e.SetDrafts(3, 1)
		e.KVCapacityTokens = 2 * 32
		f := FiniteFamily{Family: Family{Name: fmt.Sprintf("vllm mtp3 c4 kv2req async %t", async), Spec: closed(16, 10, 0, 4), Engine: e, Timing: roofline},
			Run: queueing.FiniteRun{Requests: 8}}
		if !async {
			rep, err := queueing.QuantitativeFinite(context.Background(), f.Spec, e, roofline, queueing.Options{}, f.Run)
			if err != nil || !(rep.PreemptionsPerRequest > 0) {
				t.Fatalf("sync: %v, preemptions per request %v; want a run that preempts", err, rep.PreemptionsPerRequest)
			}
			requireAggExact(t, runFiniteFamily(context.Background(), f))
			continue
		}
		requireRefusedBothSides(t, f, "vLLM would preempt, which is not", "turn async scheduling off")
		f.Engine.KVCapacityTokens = 4 * 48
		requireAggExact(t, runFiniteFamily(context.Background(), f))
	}
}

// requireRefusedBothSides fails t unless finite family f is refused by the
// calendar's full and summary runs alike and by the DES, each in one line
// containing what (the refused state) and fix.
func requireRefusedBothSides(t *testing.T, f FiniteFamily, what, fix string) {
	t.Helper()
	_, merr := queueing.QuantitativeFinite(context.Background(), f.Spec, f.Engine, f.Timing, queueing.Options{}, f.Run)
	_, serr := queueing.QuantitativeFiniteSummary(context.Background(), f.Spec, f.Engine, f.Timing, queueing.Options{}, f.Run)
	_, derr := runDESFinite(context.Background(), f)
	if fmt.Sprint(serr) != fmt.Sprint(merr) {
		t.Errorf("%s: summary run: %v; full run: %v", f.Name, serr, merr)
	}
	for side, err := range map[string]error{"model": merr, "DES": derr} {
		if err == nil || !strings.Contains(err.Error(), what) || !strings.Contains(err.Error(), fix) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s, %s: got %v, want one line with %q and the fix %q", f.Name, side, err, what, fix)
		}
	}
}
