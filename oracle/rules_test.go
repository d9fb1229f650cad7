package oracle

import (
	"testing"

	"github.com/aicdb/aicdb/engine"
)

// TestValidateEngineRules pins ValidateEngine's messages, now produced by each
// backend's engineRules.validate (the seam must not change what users read).
func TestValidateEngineRules(t *testing.T) {
	spec := func(b engine.Backend, edit func(*engine.Spec)) engine.Spec {
		e, err := engine.Defaults(b, "")
		if err != nil {
			t.Fatal(err)
		}
		e.SetGPUBlocks(100)
		edit(&e)
		return e
	}
	cases := []struct {
		e    engine.Spec
		want string
	}{
		{spec(engine.VLLM, func(e *engine.Spec) {}), ""},
		{spec(engine.SGLang, func(e *engine.Spec) {}), ""},
		{spec(engine.TRTLLM, func(e *engine.Spec) {}), ""},
		{spec(engine.VLLM, func(e *engine.Spec) { e.MaxNumSeqs = 0 }), "engine max_num_seqs = 0: must be > 0"},
		{spec(engine.VLLM, func(e *engine.Spec) { e.LongPrefillTokenThreshold = -1 }), "engine long_prefill_token_threshold = -1: must be ≥ 0 (0 = off)"},
		{spec(engine.SGLang, func(e *engine.Spec) { e.EnableChunkedPrefill, e.ChunkedPrefillSize = true, 0 }), "engine chunked_prefill_size = 0: must be > 0"},
		{spec(engine.SGLang, func(e *engine.Spec) { e.MaxNumSeqs = -2 }), "engine max_running_requests = -2: must be > 0"},
		{spec(engine.TRTLLM, func(e *engine.Spec) { e.MaxNumTokens = 0 }), "engine max_num_tokens = 0: must be > 0"},
		{spec(engine.TRTLLM, func(e *engine.Spec) { e.CapacityPolicy = "x" }), `engine capacity_policy = "x": must be GUARANTEED_NO_EVICT or MAX_UTILIZATION`},
		{spec(engine.VLLM, func(e *engine.Spec) { e.Backend = "tgi" }), `engine backend = "tgi": must be vllm, sglang or trtllm`},
	}
	for i, c := range cases {
		got := ""
		if err := ValidateEngine(c.e); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("case %d (%s): got %q, want %q", i, c.e.Backend, got, c.want)
		}
	}
}

// TestRulesForRegistered checks that every registered backend has oracle rules.
func TestRulesForRegistered(t *testing.T) {
	for _, b := range engine.Backends() {
		if _, ok := rulesFor(b); !ok {
			t.Errorf("backend %s: no oracle engine rules", b)
		}
	}
}
