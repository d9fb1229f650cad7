package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestKVPoolOverrideEvalSweepAgree: eval --kv-capacity-tokens auto and a sweep
// size the same vLLM point under num_gpu_blocks_override alike. The override
// replaces the profiled pool (2000 blocks of 32 tokens, block 0 the null
// block), but vLLM profiles its memory first, so a worker whose memory budget
// cannot hold one request (gpu_memory_utilization 0.05 leaves less than the
// weights) is OOM either way: eval refuses it in one line, the sweep stores an
// OOM row with the same arithmetic in its kv_note — not a row run on the
// override's pool.
func TestKVPoolOverrideEvalSweepAgree(t *testing.T) {
	t.Setenv("AICDB_EVALUATOR", "perfdb")
	dir := t.TempDir()
	db := filepath.Join(dir, "kv.sqlite")
	if code, _, errs := cliRun(t, db, "init"); code != 0 {
		t.Fatalf("init: %d %s", code, errs)
	}
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	point := []string{"--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--tp", "2", "--isl", "1000", "--osl", "200"}
	eval := func(cfg string) (int, float64, string) {
		t.Helper()
		code, out, errs := cliRun(t, db, append(append([]string{"eval"}, point...), "--concurrency", "8",
			"--kv-capacity-tokens", "auto", "--engine-config", cfg, "--format", "json")...)
		var m map[string]any
		if code == 0 {
			if err := json.Unmarshal([]byte(out), &m); err != nil {
				t.Fatalf("eval: not JSON: %v\n%s", err, out)
			}
		}
		n, _ := m["kv_capacity_tokens"].(float64)
		return code, n, errs
	}
	sweep := func(cfg, memFraction string) (oom int, pool int, note string) {
		t.Helper()
		if code, out, errs := cliRun(t, db, append(append([]string{"sweep"}, point...), "--total-gpus", "2", "--batch", "8",
			"--ctx-tokens", "1000", "--mode", "agg", "--engine-config", cfg, "--quiet")...); code != 0 {
			t.Fatalf("sweep %s: exit %d\n%s%s", cfg, code, out, errs)
		}
		code, out, errs := cliRun(t, db, "query", "--format", "csv",
			"select oom, coalesce(kv_capacity_tokens, 0), kv_note from points where coalesce(json_extract(engine_config, '$.engine.mem_fraction'), 0) = "+memFraction)
		if code != 0 {
			t.Fatalf("query: exit %d %s", code, errs)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		f := strings.SplitN(lines[len(lines)-1], ",", 3)
		if len(lines) != 2 || len(f) != 3 {
			t.Fatalf("query: want one row, got %q", out)
		}
		oom, err1 := strconv.Atoi(f[0])
		pool, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			t.Fatalf("query: %q", out)
		}
		return oom, pool, strings.Trim(f[2], `"`)
	}

	fits := write("override.args", "--num-gpu-blocks-override 2001 --block-size 32\n")
	code, evalPool, errs := eval(fits)
	if code != 0 || evalPool != 2000*32 {
		t.Fatalf("eval override: exit %d, pool %v (%s), want %d", code, evalPool, errs, 2000*32)
	}
	if oom, pool, note := sweep(fits, "0"); oom != 0 || pool != int(evalPool) {
		t.Errorf("sweep override: oom %d, pool %d (%s); eval's pool %v", oom, pool, note, evalPool)
	}

	tooSmall := write("override_oom.args", "--gpu-memory-utilization 0.05\n--num-gpu-blocks-override 2001 --block-size 32\n")
	const arith = "out of memory: vllm KV budget 141.00 GiB × 0.05 × 0.98 − (weights 30.51 + activations 0.10 + nccl 0.33 + others 3.50 GiB) = -27.54 GiB per GPU < the KV of one request of isl 1000 + osl 200 (0.15 GiB) on h200_sxm tp 2; raise --tp/--pp or shorten the request"
	code, _, errs = eval(tooSmall)
	if want := "aicdb: --kv-capacity-tokens auto: " + arith + "\n"; code != 1 || errs != want {
		t.Errorf("eval override under a budget below the weights: exit %d\n got  %q\n want %q", code, errs, want)
	}
	if oom, pool, note := sweep(tooSmall, "0.05"); oom != 1 || pool != 0 || note != "oom: agg tp2pp1dp1etp1ep1 b8: "+arith {
		t.Errorf("sweep override under a budget below the weights: oom %d, pool %d, note %q; want an OOM row with eval's arithmetic", oom, pool, note)
	}
}
