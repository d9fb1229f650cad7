package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestEvalDefaultKVPool: without --kv-capacity-tokens a perf-data closed loop is
// sized as the sweep sizes it: a deployment whose weights do not fit its GPUs is
// refused in one line (an open loop's too); a KV-tight one (Qwen3-32B on one H200, C 256 at 4000 +
// 500 tokens: the 253 600-token pool holds 49 of them) runs with that pool, says
// so on stderr and reports preemptions; --kv-capacity-tokens 0 keeps an
// unbounded pool; a point the pool holds is answered as before, unbounded.
func TestEvalDefaultKVPool(t *testing.T) {
	base := []string{"eval", "--system", "h200_sxm", "--backend", "vllm", "--version", "0.22.0", "--format", "json"}
	run := func(args ...string) (int, map[string]any, string) {
		code, out, errs := runCLI(t, append(append([]string{}, base...), args...)...)
		var m map[string]any
		if code == 0 {
			if err := json.Unmarshal([]byte(out), &m); err != nil {
				t.Fatalf("%v: not JSON: %v\n%s", args, err, out)
			}
		}
		return code, m, errs
	}
	code, _, errs := run("--model", "meta-llama/Meta-Llama-3.1-70B", "--tp", "1", "--concurrency", "4", "--isl", "4000", "--osl", "500")
	if want := "aicdb: eval: out of memory: vllm KV budget 141.00 GiB × 0.92 × 0.98 − (weights 131.41 + activations 0.67 + nccl 0.00 + others 3.50 GiB) = -8.46 GiB per GPU < the KV of one request of isl 4000 + osl 500 (1.37 GiB) on h200_sxm tp 1; raise --tp/--pp or shorten the request (or give --kv-capacity-tokens N to evaluate a pool of your choosing)\n"; code != 1 || errs != want {
		t.Errorf("70B on one h200: exit %d, stderr\n %q\nwant\n %q", code, errs, want)
	}

	code, _, errs = run("--model", "meta-llama/Meta-Llama-3.1-70B", "--tp", "1", "--rate", "1", "--isl", "4000", "--osl", "500")
	if code != 1 || !strings.HasPrefix(errs, "aicdb: eval: out of memory: vllm KV budget 141.00 GiB") {
		t.Errorf("70B on one h200, open loop: exit %d, stderr %q", code, errs)
	}

	tight := []string{"--model", "Qwen/Qwen3-32B", "--tp", "1", "--concurrency", "256", "--isl", "4000", "--osl", "500"}
	code, m, errs := run(tight...)
	if code != 0 {
		t.Fatalf("KV-tight: exit %d: %s", code, errs)
	}
	if !strings.HasPrefix(errs, "aicdb: note: KV-tight: the KV pool the engine deploys (") || !strings.Contains(errs, "of the 256 requests at full length (isl 4000 + osl 500); modelled with the engine's preemption (--kv-capacity-tokens 0 for an unbounded pool)") {
		t.Errorf("KV-tight note: %q", errs)
	}
	if p, ok := m["preemptions_per_request"].(float64); !ok || !(p > 0) || m["kv_capacity_tokens"] == nil {
		t.Errorf("KV-tight: kv_capacity_tokens %v, preemptions_per_request %v; want the pool and preemptions > 0", m["kv_capacity_tokens"], m["preemptions_per_request"])
	}
	code, u, errs := run(append(tight, "--kv-capacity-tokens", "0")...)
	if code != 0 || errs != "" || u["kv_capacity_tokens"] != nil || !(u["ttft_steady_mean"].(float64) < m["ttft_steady_mean"].(float64)) {
		t.Errorf("--kv-capacity-tokens 0: exit %d, stderr %q, pool %v, ttft %v (KV-tight %v)", code, errs, u["kv_capacity_tokens"], u["ttft_steady_mean"], m["ttft_steady_mean"])
	}

	code, m, errs = run("--model", "Qwen/Qwen3-32B", "--tp", "2", "--concurrency", "32", "--isl", "4000", "--osl", "500")
	if code != 0 || errs != "" || m["kv_capacity_tokens"] != nil {
		t.Errorf("a pool that holds C: exit %d, stderr %q, kv_capacity_tokens %v; want unbounded and silent", code, errs, m["kv_capacity_tokens"])
	}

	// An open loop's arrivals can fill every seat: its pool is tested against
	// the running cap (vLLM 0.22's max_num_seqs 256 requests of 4,500 tokens
	// do not fit one H200's pool), and the run then preempts and queues far
	// behind the unbounded answer.
	open := []string{"--model", "Qwen/Qwen3-32B", "--tp", "1", "--rate", "1.2", "--isl", "4000", "--osl", "500"}
	code, m, errs = run(open...)
	if code != 0 || !strings.HasPrefix(errs, "aicdb: note: KV-tight: the KV pool the engine deploys (") ||
		!strings.Contains(errs, "requests its running cap admits at full length (isl 4000 + osl 500)") || m["kv_capacity_tokens"] == nil {
		t.Fatalf("KV-tight open loop: exit %d, stderr %q, kv_capacity_tokens %v", code, errs, m["kv_capacity_tokens"])
	}
	code, u, errs = run(append(open, "--kv-capacity-tokens", "0")...)
	if code != 0 || errs != "" || u["kv_capacity_tokens"] != nil || !(u["ttft_steady_mean"].(float64) < m["ttft_steady_mean"].(float64)) {
		t.Errorf("open loop, --kv-capacity-tokens 0: exit %d, stderr %q, pool %v, ttft %v (KV-tight %v)", code, errs, u["kv_capacity_tokens"], u["ttft_steady_mean"], m["ttft_steady_mean"])
	}
	code, m, errs = run("--model", "Qwen/Qwen3-32B", "--tp", "2", "--rate", "1", "--isl", "1000", "--osl", "200", "--max-num-seqs", "32")
	if code != 0 || errs != "" || m["kv_capacity_tokens"] != nil {
		t.Errorf("an open loop whose pool holds its running cap: exit %d, stderr %q, kv_capacity_tokens %v; want unbounded and silent", code, errs, m["kv_capacity_tokens"])
	}
}
