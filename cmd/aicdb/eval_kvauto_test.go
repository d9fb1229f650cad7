package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestEvalKVCapacityAuto: --kv-capacity-tokens auto sizes the pool from the
// perf database's memory model (Qwen3-32B, h200_sxm, vLLM 0.22.0, tp 2: the
// 756 800 tokens of perfdb's TestKVCapacityQwen32BHand) and prints it next to
// kv_util_peak; a worker that cannot hold one request exits 1 with the memory
// arithmetic; a synthetic timing, which has no memory model, and a malformed
// value exit 1 with one line naming why.
func TestEvalKVCapacityAuto(t *testing.T) {
	base := []string{"eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--version", "0.22.0",
		"--concurrency", "32", "--isl", "4000", "--osl", "500", "--kv-capacity-tokens", "auto", "--format", "json"}
	code, out, errs := runCLI(t, append(base, "--tp", "2")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if m["kv_capacity_tokens"] != 756800.0 {
		t.Errorf("kv_capacity_tokens = %v, want 756800", m["kv_capacity_tokens"])
	}
	if u, ok := m["kv_util_peak"].(float64); !ok || !(u > 0 && u <= 1) {
		t.Errorf("kv_util_peak = %v, want in (0, 1]", m["kv_util_peak"])
	}
	if i, j := strings.Index(out, `"kv_capacity_tokens"`), strings.Index(out, `"kv_util_peak"`); i < 0 || j < 0 || i > j {
		t.Errorf("kv_capacity_tokens not printed before kv_util_peak:\n%s", out)
	}

	oom := []string{"eval", "--model", "meta-llama/Meta-Llama-3.1-70B", "--system", "h200_sxm", "--backend", "vllm", "--version", "0.22.0",
		"--tp", "1", "--concurrency", "4", "--isl", "4000", "--osl", "500", "--kv-capacity-tokens", "auto"}
	code, out, errs = runCLI(t, oom...)
	want := "aicdb: --kv-capacity-tokens auto: out of memory: vllm KV budget 141.00 GiB × 0.92 × 0.98 − (weights 131.41 + activations 0.67 + nccl 0.00 + others 3.50 GiB) = -8.46 GiB per GPU < the KV of one request of isl 4000 + osl 500 (1.37 GiB) on h200_sxm tp 1; raise --tp/--pp or shorten the request\n"
	if code != 1 || errs != want || out != "" {
		t.Errorf("70B on one h200: exit %d, stderr\n %q\nwant\n %q", code, errs, want)
	}

	syn := append(append([]string{"eval"}, linArgs...), "--concurrency", "32", "--isl", "4096", "--osl", "256", "--kv-capacity-tokens", "auto")
	code, _, errs = runCLI(t, syn...)
	want = "aicdb: --kv-capacity-tokens auto: --timing linear has no GPU memory model to size the KV pool from; give the capacity in tokens, or use --model with --system, --backend and --tp\n"
	if code != 1 || errs != want {
		t.Errorf("auto with --timing linear: exit %d, stderr %q, want %q", code, errs, want)
	}
	code, _, errs = runCLI(t, append(syn[:len(syn)-1], "-5")...)
	if want = "aicdb: --kv-capacity-tokens \"-5\": want auto or a token count ≥ 0\n"; code != 1 || errs != want {
		t.Errorf("--kv-capacity-tokens -5: exit %d, stderr %q, want %q", code, errs, want)
	}
}

// FuzzParseKVCapacity: every --kv-capacity-tokens value either parses to auto
// or a count ≥ 0 that prints back to itself (canonical decimal), or is a
// one-line error naming the flag.
func FuzzParseKVCapacity(f *testing.F) {
	for _, s := range []string{"auto", "0", "756800", "-5", "", "AUTO", "1e6", "+3", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, auto, err := parseKVCapacity(s)
		switch {
		case err != nil:
			if msg := err.Error(); !strings.HasPrefix(msg, "--kv-capacity-tokens ") || strings.Contains(msg, "\n") {
				t.Fatalf("%q: error %q", s, msg)
			}
		case auto:
			if s != "auto" || n != 0 {
				t.Fatalf("%q: auto with n %d", s, n)
			}
		case n < 0:
			t.Fatalf("%q: n %d < 0", s, n)
		}
	})
}
