package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEvalDisaggEngineConfig: eval --mode disagg resolves each pool's engine as
// eval resolves an agg one — --engine-profile's prefill and decode roles, then
// --engine-config over both — instead of the backend's defaults whatever the
// flags said: the default aiconfigurator profile, --engine-profile defaults and
// a budget in a config file give three different rows (before, the same row);
// a config memory fraction sizes the decode pool (less headroom than the disagg
// rule's), and one below the weights is refused in one line naming the pool.
func TestEvalDisaggEngineConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: five perf-data evaluations")
	}
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := []string{"eval", "--mode", "disagg", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--tp", "1",
		"--isl", "4000", "--osl", "500", "--concurrency", "16", "--tier", "screening", "--format", "json"}
	row := func(args ...string) map[string]any {
		t.Helper()
		code, out, errs := runCLI(t, append(append([]string{}, base...), args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("%v: not JSON: %v\n%s", args, err, out)
		}
		return m
	}
	aic, def := row(), row("--engine-profile", "defaults")
	budget := row("--engine-config", write("budget.args", "--max-num-batched-tokens 1024\n"))
	p99 := func(m map[string]any) float64 { return m["ttft_steady_p99"].(float64) }
	if p99(aic) == p99(def) || p99(budget) == p99(aic) || p99(budget) == p99(def) {
		t.Errorf("ttft_steady_p99: aiconfigurator %v, defaults %v, a 1024-token budget %v: want three different rows", p99(aic), p99(def), p99(budget))
	}
	half := row("--engine-config", write("half.args", "--gpu-memory-utilization 0.5\n"))
	if h, d := half["d_headroom_min"].(float64), aic["d_headroom_min"].(float64); !(h < d) {
		t.Errorf("d_headroom_min %v under gpu_memory_utilization 0.5, %v under the disagg rule: want less", h, d)
	}
	code, out, errs := runCLI(t, append(append([]string{}, base...), "--engine-config", write("oom.args", "--gpu-memory-utilization 0.05\n"))...)
	const want = "aicdb: --engine-config: the prefill pool: out of memory: vllm KV budget 141.00 GiB × 0.05 × 0.98 − (weights "
	if code != 1 || out != "" || !strings.HasPrefix(errs, want) || strings.Count(errs, "\n") != 1 {
		t.Errorf("fraction 0.05: exit %d, stdout %q, stderr %q; want one line starting %q", code, out, errs, want)
	}
}

// TestEvalDisaggMaxUtilizationTightRefused: eval --mode disagg refuses a
// TensorRT-LLM max_utilization decode pool too small for its running requests
// in one line (exit 1), as the sweep refuses the same row, instead of answering
// under guaranteed_no_evict's reserve-at-pull (T-D3).
func TestEvalDisaggMaxUtilizationTightRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a perf-data evaluation")
	}
	code, out, errs := runCLI(t, "eval", "--mode", "disagg", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "trtllm",
		"--prefill-tp", "2", "--decode-tp", "2", "--concurrency", "64", "--isl", "4000", "--osl", "500",
		"--capacity-policy", "max_utilization", "--decode-kv-capacity-tokens", "100000", "--tier", "screening", "--format", "json")
	const want = "aicdb: decode capacity_scheduler_policy max_utilization: 64 running requests per decode worker at full length need 9024 KV blocks > 3125: the tandem reserves each request's final KV at the pull (T-D3); use guaranteed_no_evict or give the decode pool more KV\n"
	if code != 1 || out != "" || errs != want {
		t.Errorf("exit %d, stdout %q\n got  %q\n want %q", code, out, errs, want)
	}
}

// TestEvalDisaggTimingMemoryKeysWarning: with --timing (no perf database) a
// config's memory keys size neither pool; the warning names each pool's way
// out — the prefill pool's KV is not modelled, the decode pool's is
// --decode-kv-capacity-tokens — and the evaluation runs.
func TestEvalDisaggTimingMemoryKeysWarning(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "mem.args")
	if err := os.WriteFile(cfg, []byte("--gpu-memory-utilization 0.5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, "eval", "--mode", "disagg", "--timing", "linear", "--base-ms", "5", "--prefill-ms-per-token", "0.01",
		"--decode-ms-per-row", "0.05", "--concurrency", "8", "--isl", "1024", "--osl", "64", "--backend-engine", "vllm",
		"--kv-bytes-per-token", "160000", "--inter-node-gbps", "50", "--engine-config", cfg, "--tier", "screening", "--format", "json")
	const want = "aicdb: engine config: its memory keys size the prefill pool only with the perf database's memory model (--model); --timing ignores them (its prefill workers run without a KV pool)\n" +
		"aicdb: engine config: its memory keys size the decode pool only with the perf database's memory model (--model); --timing leaves its KV to --decode-kv-capacity-tokens\n"
	if code != 0 || out == "" || errs != want {
		t.Errorf("exit %d, stdout %d bytes\n got  %q\n want %q", code, len(out), errs, want)
	}
}

// TestEvalDisaggPrefillPoolModelled: a KV-bound decode worker (Qwen3-32B on one
// H200, C 512, isl 1024, osl 4096) leaves prompts waiting on their prefill
// worker until their holds fill its pool, where the engine stalls the prefill.
// The tandem answered TTFT 0.43 s there before it checked the pool, then
// refused; it now models the pool for vLLM and TensorRT-LLM (a held prompt keeps
// its blocks until pulled, V-P3, T-D1): the prompts wait (TTFT > 100 s), as the
// in-flight cap of the prompts the pool holds gives (every prompt the same
// length). (SGLang's pool is checked: TestTraceReplayDisaggPrefillPool.)
func TestEvalDisaggPrefillPoolModelled(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a perf-data evaluation")
	}
	ttft := func(args ...string) float64 {
		t.Helper()
		code, out, errs := runCLI(t, args...)
		var rep struct {
			TTFT float64 `json:"ttft_steady_mean"`
		}
		if code != 0 || errs != "" || json.Unmarshal([]byte(out), &rep) != nil {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errs)
		}
		return rep.TTFT
	}
	for _, c := range []struct {
		backend, kappa string
	}{{"vllm", "249"}, {"trtllm", "265"}} {
		base := []string{"eval", "--mode", "disagg", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", c.backend,
			"--tp", "1", "--concurrency", "512", "--isl", "1024", "--osl", "4096", "--tier", "quantitative", "--format", "json"}
		pool, kappa := ttft(base...), ttft(append(slices.Clone(base), "--prefill-inflight-cap", c.kappa)...)
		if !(pool > 100e3) || math.Abs(pool-kappa) > 1e-9*kappa {
			t.Errorf("%s: TTFT mean %v ms with the pool modelled, %v with κ %s: want the same wait (> 100 s)", c.backend, pool, kappa, c.kappa)
		}
	}
}
