package main

import (
	"encoding/json"
	"testing"
)

// TestEvalKVColumns: with a KV capacity the quantitative tier prints the KV columns
// (issue 12): a vLLM pool of 10 prompts for 32 clients fills (kv_util_peak 1) and
// preempts; the screening tier refuses the capacity for vLLM.
func TestEvalKVColumns(t *testing.T) {
	args := append(append([]string{}, linArgs...), "--concurrency", "32", "--isl", "2048", "--osl", "256",
		"--async-scheduling=false", "--kv-capacity-tokens", "20480")
	code, out, errs := evalRun(args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if m["kv_util_peak"] != 1.0 {
		t.Errorf("kv_util_peak = %v, want 1", m["kv_util_peak"])
	}
	if p, _ := m["preemptions_per_request"].(float64); !(p > 0) {
		t.Errorf("preemptions_per_request = %v, want > 0", m["preemptions_per_request"])
	}
	code, _, errs = evalRun(append(args, "--tier", "screening")...)
	if code != 1 || errs == "" {
		t.Errorf("screening with a vLLM KV capacity: exit %d (%q), want 1 with a message", code, errs)
	}
}
