package oracle_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/oracle"
)

const goodEngine = `"engine": {"backend": "vllm", "max_num_batched_tokens": 8, "max_num_seqs": 256,
 "block_size": 4, "num_gpu_blocks": 101, "enable_chunked_prefill": true,
 "long_prefill_token_threshold": 0, "enable_prefix_caching": false, "async_scheduling": false}`

const goodTiming = `"timing": {"kind": "constant", "pass_ms": 1.0}`

// TestScenarioBadInput checks that every kind of bad scenario is a one-line error that
// names the offending field.
func TestScenarioBadInput(t *testing.T) {
	req := `"requests": [{"id": "A", "arrival_ms": 0, "prompt_len": 10, "max_tokens": 3}]`
	cases := []struct{ name, doc, want string }{
		{"unknown top", `{` + goodEngine + `,` + goodTiming + `,` + req + `, "bogus": 1}`, `unknown field "bogus"`},
		{"unknown engine knob", `{"engine": {"backend": "vllm", "max_num_batched_tokens": 8, "max_num_seqs": 256, "block_size": 4, "num_gpu_blocks": 101, "enable_chunked_prefill": true, "long_prefill_token_threshold": 0, "enable_prefix_caching": false, "async_scheduling": false, "swap_space": 4},` + goodTiming + `,` + req + `}`, `unknown field "swap_space"`},
		{"missing knob", `{"engine": {"backend": "vllm", "max_num_batched_tokens": 8, "block_size": 4, "num_gpu_blocks": 101, "enable_chunked_prefill": true, "long_prefill_token_threshold": 0, "enable_prefix_caching": false, "async_scheduling": false},` + goodTiming + `,` + req + `}`, "engine.max_num_seqs"},
		{"zero budget", `{"engine": {"backend": "vllm", "max_num_batched_tokens": 0, "max_num_seqs": 256, "block_size": 4, "num_gpu_blocks": 101, "enable_chunked_prefill": true, "long_prefill_token_threshold": 0, "enable_prefix_caching": false, "async_scheduling": false},` + goodTiming + `,` + req + `}`, "max_num_batched_tokens = 0"},
		{"negative block size", `{"engine": {"backend": "vllm", "max_num_batched_tokens": 8, "max_num_seqs": 256, "block_size": -4, "num_gpu_blocks": 101, "enable_chunked_prefill": true, "long_prefill_token_threshold": 0, "enable_prefix_caching": false, "async_scheduling": false},` + goodTiming + `,` + req + `}`, "block_size = -4"},
		{"zero pass_ms", `{` + goodEngine + `, "timing": {"kind": "constant", "pass_ms": 0},` + req + `}`, "pass_ms"},
		{"linear missing coef", `{` + goodEngine + `, "timing": {"kind": "linear", "base_ms": 1, "prefill_ms_per_token": 0.1, "decode_ms_per_row": 0.1},` + req + `}`, "timing.ctx_ms_per_token"},
		{"zero prompt", `{` + goodEngine + `,` + goodTiming + `, "requests": [{"id": "A", "arrival_ms": 0, "prompt_len": 0, "max_tokens": 3}]}`, "requests[0].prompt_len = 0"},
		{"zero max_tokens", `{` + goodEngine + `,` + goodTiming + `, "requests": [{"id": "A", "arrival_ms": 0, "prompt_len": 5, "max_tokens": 0}]}`, "requests[0].max_tokens = 0"},
		{"both prompts", `{` + goodEngine + `,` + goodTiming + `, "requests": [{"id": "A", "arrival_ms": 0, "prompt_len": 5, "prompt_tokens": [1], "max_tokens": 1}]}`, "give one"},
		{"duplicate id", `{` + goodEngine + `,` + goodTiming + `, "requests": [{"id": "A", "arrival_ms": 0, "prompt_len": 5, "max_tokens": 1}, {"id": "A", "arrival_ms": 0, "prompt_len": 5, "max_tokens": 1}]}`, `requests[1].id "A"`},
		{"no requests", `{` + goodEngine + `,` + goodTiming + `, "requests": []}`, "requests is empty"},
		{"trailing", `{` + goodEngine + `,` + goodTiming + `,` + req + `} {}`, "trailing data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := oracle.ParseScenario([]byte(c.doc))
			if err == nil {
				t.Fatalf("no error; want one naming %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q: want one line containing %q", err, c.want)
			}
		})
	}
}

// TestScenarioPromptTooLong: a prompt the KV pool can never hold is rejected up front.
func TestScenarioPromptTooLong(t *testing.T) {
	doc := `{"engine": {"backend": "vllm", "max_num_batched_tokens": 8, "max_num_seqs": 256, "block_size": 4, "num_gpu_blocks": 3, "enable_chunked_prefill": true, "long_prefill_token_threshold": 0, "enable_prefix_caching": false, "async_scheduling": false},` + goodTiming + `, "requests": [{"id": "big", "arrival_ms": 0, "prompt_len": 9, "max_tokens": 1}]}`
	sc, err := oracle.ParseScenario([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sc.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "request big") || !strings.Contains(err.Error(), "num_gpu_blocks") {
		t.Fatalf("err = %v; want the prompt rejected naming request big and num_gpu_blocks", err)
	}
}

// TestScenarioNeverFinishes: a request whose prompt fits but whose decode outgrows the
// pool can never finish; the run reports it instead of spinning.
func TestScenarioNeverFinishes(t *testing.T) {
	for _, async := range []string{"false", "true"} {
		doc := `{"engine": {"backend": "vllm", "max_num_batched_tokens": 8, "max_num_seqs": 256, "block_size": 4, "num_gpu_blocks": 3, "enable_chunked_prefill": true, "long_prefill_token_threshold": 0, "enable_prefix_caching": false, "async_scheduling": ` + async + `},` + goodTiming + `, "requests": [{"id": "grow", "arrival_ms": 0, "prompt_len": 8, "max_tokens": 10}]}`
		sc, err := oracle.ParseScenario([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		_, err = sc.Run(context.Background())
		if err == nil || !strings.Contains(err.Error(), "request grow") || !strings.Contains(err.Error(), "never") {
			t.Fatalf("async=%s: err = %v; want a can-never-finish error naming request grow", async, err)
		}
	}
}

// TestScenarioChunkingOffTooLong: with chunked prefill off a prompt larger than the
// budget can never be admitted; reported, not spun on.
func TestScenarioChunkingOffTooLong(t *testing.T) {
	doc := `{"engine": {"backend": "vllm", "max_num_batched_tokens": 8, "max_num_seqs": 256, "block_size": 4, "num_gpu_blocks": 101, "enable_chunked_prefill": false, "long_prefill_token_threshold": 0, "enable_prefix_caching": false, "async_scheduling": false},` + goodTiming + `, "requests": [{"id": "long", "arrival_ms": 0, "prompt_len": 9, "max_tokens": 1}]}`
	sc, err := oracle.ParseScenario([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err = sc.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "request long") {
		t.Fatalf("err = %v; want a can-never-finish error naming request long", err)
	}
}

// FuzzParseScenario: the parser never panics, and whatever it accepts runs to an
// outcome (result or error) without hanging.
func FuzzParseScenario(f *testing.F) {
	f.Add([]byte(`{` + goodEngine + `,` + goodTiming + `, "requests": [{"id": "A", "arrival_ms": 0, "prompt_len": 10, "max_tokens": 3}, {"id": "B", "arrival_ms": 0, "prompt_tokens": [1, 2, 3], "max_tokens": 2, "eos_at": 2}]}`))
	f.Add([]byte(`{"engine": {}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sc, err := oracle.ParseScenario(data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		total := 0
		for _, r := range sc.Requests {
			total += r.Len() + r.MaxTokens
		}
		if total > 20000 {
			return // keep each fuzz run cheap
		}
		_, _ = sc.Run(context.Background())
	})
}
