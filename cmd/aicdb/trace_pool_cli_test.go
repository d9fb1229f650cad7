package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSweepTracePoolOOM: a trace whose longest request the worker's KV pool
// cannot hold (Qwen3-32B at tp 1 under gpu_memory_utilization 0.5, a 30000-token
// prompt) gives an OOM row whose kv_note names the point, the request, the
// memory arithmetic and the fix. Before, trace replay's point set-up swallowed
// the pool error and the row was evaluated on an unbounded pool without a
// prefix cache.
func TestSweepTracePoolOOM(t *testing.T) {
	t.Setenv("AICDB_EVALUATOR", "perfdb")
	dir := t.TempDir()
	db := filepath.Join(dir, "t.sqlite")
	if code, _, errs := cliRun(t, db, "init"); code != 0 {
		t.Fatalf("init: %d %s", code, errs)
	}
	var tr strings.Builder
	for i := range 6 {
		isl := 1000
		if i == 5 {
			isl = 30000
		}
		fmt.Fprintf(&tr, "{\"arrival_ms\": %d, \"isl\": %d, \"osl\": 50}\n", 100*i, isl)
	}
	trace, cfg := filepath.Join(dir, "long.jsonl"), filepath.Join(dir, "half.args")
	for p, text := range map[string]string{trace: tr.String(), cfg: "--gpu-memory-utilization 0.5\n"} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if code, _, errs := cliRun(t, db, "trace", "import", trace, "--name", "long"); code != 0 {
		t.Fatalf("trace import: %s", errs)
	}
	code, out, errs := cliRun(t, db, "sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm",
		"--total-gpus", "1", "--tp", "1", "--batch", "8", "--ctx-tokens", "4096", "--trace", "long", "--engine-config", cfg, "--quiet")
	if code != 0 || !strings.Contains(out, ": 1 evaluated, 0 already stored, 1 OOM, ") {
		t.Fatalf("sweep: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = cliRun(t, db, "query", "--format", "csv", "select oom, kv_note from points")
	const want = "1,oom: trace replay on agg tp1pp1dp1etp1ep1 b8: the KV pool for the trace's longest request (isl 30000 + osl 50): out of memory: vllm KV budget 141.00 GiB × 0.5 × 0.98 − (weights "
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], want) ||
		!strings.HasSuffix(lines[1], "; raise --tp/--pp or shorten the request") {
		t.Errorf("row: exit %d %s\n%s\nwant one OOM row whose note starts %q", code, errs, out, want)
	}
}
