package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestEvalEngineConfigMemoryKeys: an --engine-config memory fraction sizes
// --kv-capacity-tokens auto's pool (half the GPU memory: a smaller pool than the
// default 0.92), and a kv_cache_dtype that contradicts the KV quant the point is
// timed with is refused in one line naming the flag that agrees.
func TestEvalEngineConfigMemoryKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := []string{"eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--tp", "2",
		"--concurrency", "8", "--isl", "1000", "--osl", "200", "--kv-capacity-tokens", "auto", "--format", "json"}
	pool := func(args ...string) float64 {
		t.Helper()
		n, _ := evalKVPool(t, append(append([]string{}, base...), args...)...)
		return n
	}
	def, half := pool(), pool("--engine-config", write("half.args", "--gpu-memory-utilization 0.5\n"))
	if !(half > 0 && half < def) {
		t.Errorf("gpu_memory_utilization 0.5: pool %v tokens, default %v: want smaller", half, def)
	}
	bad := write("fp8.args", "--kv-cache-dtype fp8\n")
	code, _, errs := runCLI(t, append(append([]string{}, base...), "--engine-config", bad)...)
	want := "aicdb: --engine-config: engine config kv_cache_dtype fp8 contradicts the KV-cache quant bfloat16 the point is timed with; give --kv-quant fp8, or drop the key\n"
	if code != 1 || errs != want {
		t.Errorf("kv dtype mismatch: exit %d\n got  %q\n want %q", code, errs, want)
	}
}

// evalKVPool runs eval args (--format json, exit 0 expected) and returns its
// kv_capacity_tokens and stderr.
func evalKVPool(t *testing.T, args ...string) (float64, string) {
	t.Helper()
	code, out, errs := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	n, _ := m["kv_capacity_tokens"].(float64)
	return n, errs
}

// TestEvalKVAutoUnderConfigCap: with --kv-capacity-tokens auto a TensorRT-LLM
// config's kv_cache_config.max_tokens below the memory pool caps it (the engine
// takes the smaller), instead of being overwritten by the memory model's pool.
func TestEvalKVAutoUnderConfigCap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "cap.yaml")
	if err := os.WriteFile(p, []byte("kv_cache_config:\n  max_tokens: 65536\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "trtllm", "--tp", "2",
		"--concurrency", "8", "--isl", "1000", "--osl", "200", "--kv-capacity-tokens", "auto", "--engine-config", p, "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if n, _ := m["kv_capacity_tokens"].(float64); n != 65536 {
		t.Errorf("kv_capacity_tokens = %v, want the config's cap 65536", m["kv_capacity_tokens"])
	}
}

// TestEvalMemoryKeysNeedAuto: with an explicit unbounded pool
// (--kv-capacity-tokens 0) a config's memory keys would change nothing: eval
// says so on stderr (one line) instead of accepting them silently, and says
// nothing when the pool is sized — auto, or unset on a perf-data closed loop,
// where they size eval's default pool (defaultKVCapacity; this one holds the 8
// requests, so the run is unbounded) — or the config has no memory key.
func TestEvalMemoryKeysNeedAuto(t *testing.T) {
	dir := t.TempDir()
	half := filepath.Join(dir, "half.args")
	plain := filepath.Join(dir, "plain.args")
	for p, text := range map[string]string{half: "--gpu-memory-utilization 0.5\n", plain: "--max-num-seqs 64\n"} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := []string{"eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--tp", "2",
		"--concurrency", "8", "--isl", "1000", "--osl", "200", "--format", "json"}
	const note = "aicdb: engine config: its memory keys size the KV pool only under --kv-capacity-tokens auto; this run's pool is unbounded\n"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--engine-config", half, "--kv-capacity-tokens", "0"}, note},
		{[]string{"--engine-config", half}, ""},
		{[]string{"--engine-config", half, "--kv-capacity-tokens", "auto"}, ""},
		{[]string{"--engine-config", plain}, ""},
	} {
		code, _, errs := runCLI(t, append(append([]string{}, base...), c.args...)...)
		if code != 0 || errs != c.want {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, errs, c.want)
		}
	}
}
