package oracle

import (
	"testing"

	"github.com/aicdb/aicdb/engine"
)

// TestValidateEngineRules pins ValidateEngine's messages: the engine's own
// checks (engine.Spec.Validate, one validation path with the queueing model),
// then the oracle's KV pool.
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
		{spec(engine.VLLM, func(e *engine.Spec) { e.MaxNumSeqs = 0 }), "engine max_num_seqs = 0: must be > 0 for backend vllm"},
		{spec(engine.VLLM, func(e *engine.Spec) { e.LongPrefillTokenThreshold = -1 }), "engine long_prefill_token_threshold = -1: must be ≥ 0"},
		{spec(engine.SGLang, func(e *engine.Spec) { e.EnableChunkedPrefill, e.ChunkedPrefillSize = true, 0 }), "engine chunked_prefill_size = 0: must be > 0 for backend sglang"},
		{spec(engine.SGLang, func(e *engine.Spec) { e.MaxNumSeqs = -2 }), "engine max_num_seqs = -2: must be ≥ 0"},
		{spec(engine.SGLang, func(e *engine.Spec) { e.AsyncScheduling = true }), "engine async_scheduling: the SGLang overlap scheduler is not modelled (calendar or oracle); set async_scheduling=false"},
		{spec(engine.TRTLLM, func(e *engine.Spec) { e.MaxNumTokens = 0 }), "engine max_num_tokens = 0: must be > 0 for backend trtllm"},
		{spec(engine.TRTLLM, func(e *engine.Spec) { e.CapacityPolicy = "x" }), `engine capacity_policy "x": use guaranteed_no_evict or max_utilization`},
		{spec(engine.VLLM, func(e *engine.Spec) { e.Backend = "tgi" }), `engine backend "tgi": unknown; use vllm, trtllm or sglang`},
		{spec(engine.VLLM, func(e *engine.Spec) { e.SetGPUBlocks(1) }), "engine num_gpu_blocks = 1: must be ≥ 2 (block 0 is the null block)"},
	}
	for i, c := range cases {
		got := ""
		if err := ValidateEngine(c.e); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("case %d (%s): got %q, want %q", i, c.e.Backend, got, c.want)
		}
		// One validation path: whatever the engine rejects, the oracle rejects with
		// the engine's message.
		if err := c.e.Validate(); err != nil && got != err.Error() {
			t.Errorf("case %d (%s): oracle says %q, engine %q", i, c.e.Backend, got, err)
		}
	}
}

// TestScenarioEngineSpellings: a scenario file's own knob spellings are checked,
// and named, as the file writes them.
func TestScenarioEngineSpellings(t *testing.T) {
	const tim = `"timing": {"kind": "constant", "pass_ms": 1.0}, "requests": [{"id": "A", "arrival_ms": 0, "prompt_len": 4, "max_tokens": 2}]}`
	cases := []struct{ engine, want string }{
		{`{"engine": {"backend": "sglang", "chunked_prefill_size": 8, "max_prefill_tokens": 16, "enable_mixed_chunk": true,
			"max_running_requests": -2, "enable_chunked_prefill": true, "block_size": 1, "num_gpu_blocks": 100, "enable_prefix_caching": false},`,
			"scenario: engine max_running_requests = -2: must be > 0"},
		{`{"engine": {"backend": "trtllm", "max_batch_size": 8, "max_num_tokens": 64, "enable_chunked_prefill": false,
			"capacity_policy": "guaranteed_no_evict", "block_size": 16, "num_gpu_blocks": 100, "enable_prefix_caching": false},`,
			`scenario: engine capacity_policy = "guaranteed_no_evict": must be GUARANTEED_NO_EVICT or MAX_UTILIZATION`},
		{`{"engine": {"backend": "sglang", "chunked_prefill_size": 8, "max_prefill_tokens": 16, "enable_mixed_chunk": true,
			"max_running_requests": 4, "enable_chunked_prefill": true, "block_size": 1, "num_gpu_blocks": 100, "enable_prefix_caching": false,
			"async_scheduling": true},`,
			"scenario: engine async_scheduling: the SGLang overlap scheduler is not modelled (calendar or oracle); set async_scheduling=false"},
	}
	for i, c := range cases {
		_, err := ParseScenario([]byte(c.engine + tim))
		if err == nil || err.Error() != c.want {
			t.Errorf("case %d: got %v, want %s", i, err, c.want)
		}
	}
}

// TestRulesForRegistered checks that every registered backend has oracle rules
// (New relies on it) and that an unknown one has none.
func TestRulesForRegistered(t *testing.T) {
	for _, b := range engine.Backends() {
		if rulesFor(b) == nil {
			t.Errorf("backend %s: no oracle engine rules", b)
		}
	}
	if r := rulesFor("tgi"); r != nil {
		t.Errorf("unknown backend tgi: rules %T, want nil", r)
	}
}
