package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSweepDisaggEngineConfigCLI: on the embedded perf data a disaggregated
// sweep applies --engine-config to both pools of its rows: the rows record the
// config's budget on the prefill and the decode engine, their numbers differ
// from the same rows without the file (before, disagg rows ran the backend's
// defaults whatever the file said), and aicdb deploy prints both engines with
// the file's keys.
func TestSweepDisaggEngineConfigCLI(t *testing.T) {
	t.Setenv("AICDB_EVALUATOR", "perfdb")
	dir := t.TempDir()
	db := filepath.Join(dir, "d.sqlite")
	if code, _, errs := cliRun(t, db, "init"); code != 0 {
		t.Fatalf("init: %d %s", code, errs)
	}
	cfg := filepath.Join(dir, "budget.args")
	if err := os.WriteFile(cfg, []byte("--max-num-batched-tokens 1024\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sweep := []string{"sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--total-gpus", "2",
		"--tp", "1", "--isl", "4000", "--osl", "500", "--mode", "disagg", "--decode-batch", "16", "--quiet"}
	for _, extra := range [][]string{nil, {"--engine-config", cfg}} {
		if code, out, errs := cliRun(t, db, append(append([]string{}, sweep...), extra...)...); code != 0 {
			t.Fatalf("sweep %v: exit %d\n%s%s", extra, code, out, errs)
		}
	}
	code, out, errs := cliRun(t, db, "query", "--format", "csv",
		"select engine_profile, json_extract(engine_config, '$.prefill.max_num_batched_tokens'), json_extract(engine_config, '$.decode.max_num_batched_tokens'), ttft_steady_p99_lo from points order by engine_profile")
	if code != 0 {
		t.Fatalf("query: exit %d %s", code, errs)
	}
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 3 || !strings.HasPrefix(rows[1], "aiconfigurator,5500,16,") || !strings.HasPrefix(rows[2], "aiconfigurator+config,1024,1024,") {
		t.Fatalf("rows:\n%s\nwant the profile's budgets (isl + 1500 prefill, batch decode) and the config's 1024 on both pools", out)
	}
	if a, b := rows[1][strings.LastIndex(rows[1], ",")+1:], rows[2][strings.LastIndex(rows[2], ",")+1:]; a == b {
		t.Errorf("ttft_steady_p99_lo %s with the config's 1024-token prefill budget and without: the config was not applied", a)
	}
	code, out, errs = cliRun(t, db, "query", "--format", "csv", "select rowid from operating_points where engine_profile = 'aiconfigurator+config'")
	if code != 0 {
		t.Fatalf("query: exit %d %s", code, errs)
	}
	id := strings.TrimSpace(out[strings.Index(out, "\n")+1:])
	// A key that cannot apply to the decode role of a KV-tight pool: one line,
	// exit 1, nothing stored.
	mu := filepath.Join(dir, "maxutil.yaml")
	if err := os.WriteFile(mu, []byte("kv_cache_config:\n  free_gpu_memory_fraction: 0.1\nscheduler_config:\n  capacity_scheduler_policy: MAX_UTILIZATION\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, files := storeDigest(t, db)
	trt := append(append([]string{}, sweep...), "--engine-config", mu)
	trt[6] = "trtllm" // --backend
	code, out, errs = cliRun(t, db, trt...)
	if want := "aicdb: disagg p1xtp1pp1dp1-d1xtp1pp1dp1 decode pool: --engine-config capacity_scheduler_policy max_utilization cannot apply to the decode role of a KV-tight pool (16 requests at full length need 2256 > 936 blocks): the tandem reserves each request's final KV at the pull (T-D3); use guaranteed_no_evict or give the decode pool more KV\n"; code != 1 || out != "" || errs != want {
		t.Errorf("max_utilization decode pool: exit %d, stdout %q\n got  %q\n want %q", code, out, errs, want)
	}
	if after, files2 := storeDigest(t, db); after != before || strings.Join(files, ",") != strings.Join(files2, ",") {
		t.Errorf("max_utilization decode pool: the store changed")
	}
	code, out, errs = cliRun(t, db, "deploy", id)
	if code != 0 || strings.Count(out, "--max-num-batched-tokens 1024") != 2 || !strings.Contains(out, "# engine config keys applied: max_num_batched_tokens=1024\n") ||
		!strings.Contains(out, "# prefill workers: 1 × (tp 1, pp 1, dp 1)\n") || !strings.Contains(out, "# decode workers: 1 × (tp 1, pp 1, dp 1)\n") {
		t.Errorf("deploy %s: exit %d\n%s%s\nwant both workers with --max-num-batched-tokens 1024", id, code, out, errs)
	}
}

// TestSweepConfigPromptBudget: a config whose budget cannot hold the sweep's
// prompt with chunked prefill off is refused before anything is stored — on the
// prefill engine of disaggregated rows (before, the tandem priced the whole
// prompt in one pass as if the budget were not there) and on agg rows (before,
// an internal error mid-sweep, exit 2).
func TestSweepConfigPromptBudget(t *testing.T) {
	db := syntheticDB(t)
	dir := t.TempDir()
	trt := filepath.Join(dir, "small.yaml")
	vllm := filepath.Join(dir, "small.args")
	for p, text := range map[string]string{trt: "max_num_tokens: 1024\nenable_chunked_prefill: false\n",
		vllm: "--max-num-batched-tokens 1024\n--no-enable-chunked-prefill\n"} {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	base := []string{"sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--total-gpus", "2", "--tp", "1", "--isl", "4000", "--osl", "500", "--quiet"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend", "trtllm", "--mode", "disagg", "--decode-batch", "8", "--engine-config", trt},
			"aicdb: --engine-config: the prefill engine's max_num_tokens 1024 cannot hold a whole prompt of 4000 tokens (isl 4000) with chunked prefill off, so the engine could not schedule it; enable chunked prefill or raise max_num_tokens\n"},
		{[]string{"--backend", "vllm", "--mode", "disagg", "--decode-batch", "8", "--engine-config", vllm},
			"aicdb: --engine-config: the prefill engine's max_num_batched_tokens 1024 cannot hold a whole prompt of 4000 tokens (isl 4000) with chunked prefill off, so the engine could not schedule it; enable chunked prefill or raise max_num_batched_tokens\n"},
		{[]string{"--backend", "trtllm", "--mode", "agg", "--batch", "8", "--ctx-tokens", "4000", "--engine-config", trt},
			"aicdb: --engine-config: the engine's max_num_tokens 1024 cannot hold a whole prompt of 4000 tokens (isl 4000) with chunked prefill off, so the engine could not schedule it; enable chunked prefill or raise max_num_tokens\n"},
	} {
		before, files := storeDigest(t, db)
		code, out, errs := cliRun(t, db, append(append([]string{}, base...), c.args...)...)
		if code != 1 || out != "" || errs != c.want {
			t.Errorf("%v: exit %d, stdout %q\n got  %q\n want %q", c.args, code, out, errs, c.want)
		}
		if after, files2 := storeDigest(t, db); after != before || strings.Join(files, ",") != strings.Join(files2, ",") {
			t.Errorf("%v: the store changed", c.args)
		}
	}
}
