package oracle_test

import (
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/oracle"
)

// TestUnknownBackendErrors: the scenario parser and the reuse oracle name the
// registered backends in the registry's order (engine.List) when the backend is
// missing or unknown.
func TestUnknownBackendErrors(t *testing.T) {
	req := `"requests": [{"id": "A", "arrival_ms": 0, "prompt_len": 10, "max_tokens": 3}]`
	for _, c := range []struct{ engine, want string }{
		{`{"block_size": 4}`, "scenario: missing engine knob engine.backend (vllm, trtllm or sglang)"},
		{`{"backend": "tgi", "block_size": 4}`, `scenario: engine.backend = "tgi": must be vllm, trtllm or sglang`},
	} {
		_, err := oracle.ParseScenario([]byte(`{"engine": ` + c.engine + `,` + goodTiming + `,` + req + `}`))
		if err == nil || err.Error() != c.want {
			t.Errorf("engine %s: error %v; want %q", c.engine, err, c.want)
		}
	}
	_, err := oracle.NewReuse(oracle.ReuseConfig{Backend: engine.Backend("tgi"), KVBlocks: 8, HashBlock: 16})
	if want := `backend "tgi": must be vllm, trtllm or sglang`; err == nil || err.Error() != want {
		t.Errorf("reuse: error %v; want %q", err, want)
	}
}
