package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestBestAllowPreemptionCLI: on a KV-tight SGLang sweep (the engine's own
// --max-total-tokens 150000 at tp 2, isl 4000, osl 500) batch 64 retracts and would
// rank first on tokens/s/gpu; best leaves it out and says so, --allow-preemption
// ranks it first, flagged in the tier column.
func TestBestAllowPreemptionCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("init + a real perf data sweep")
	}
	t.Setenv("AICDB_EVALUATOR", "") // the default (perf-database) evaluator
	db := filepath.Join(t.TempDir(), "kv.sqlite")
	if code, _, errs := cliRun(t, db, "init"); code != 0 {
		t.Fatalf("init: code %d err %q", code, errs)
	}
	if code, out, errs := cliRun(t, db, "sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "sglang",
		"--total-gpus", "2", "--isl", "4000", "--osl", "500", "--tp", "2", "--batch", "32,64", "--ctx-tokens", "4000",
		"--engine-config", "testdata/engine/sglang_pool150k.args", "--quiet"); code != 0 ||
		!strings.Contains(out, "\n1 KV-tight points (the KV pool cannot hold C requests at full length) evaluated at quantitative tier: 1 preempt, left off the pareto front (best --allow-preemption shows them)\n") {
		t.Fatalf("sweep: %d %s %s", code, out, errs)
	}
	code, out, errs := cliRun(t, db, "best", "--top", "1", "--format", "csv")
	if code != 0 || !strings.Contains(out, "\n1,agg,tp2pp1dp1etp1ep1,32,") ||
		!strings.Contains(errs, "aicdb: 1 points left out: their steady state preempts (KV pool too small for their concurrency); --allow-preemption shows them\n") {
		t.Fatalf("best: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = cliRun(t, db, "best", "--top", "1", "--allow-preemption")
	if code != 0 || !strings.Contains(out, "  64  ") || !strings.Contains(out, "quantitative (preempts 0.0") || strings.Contains(errs, "left out") {
		t.Fatalf("best --allow-preemption: exit %d\n%s%s", code, out, errs)
	}
	code, out, _ = cliRun(t, db, "query", "--format", "csv", "select batch, preempts from pareto_all order by batch")
	if code != 0 || !strings.HasSuffix(out, "32,0\n64,1\n") {
		t.Fatalf("pareto_all: exit %d\n%s", code, out)
	}
}
