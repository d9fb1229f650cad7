package main

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
)

// TestDisaggBadInputPerfdb (issue 11): on the embedded perf data, `eval --mode
// disagg` and `sweep --mode disagg` refuse a decode pool whose KV cannot hold one
// request, a fabric without bandwidth and pools beyond the GPUs with one line
// naming the input and the fix, exit 1, and the store byte-for-byte unchanged.
func TestDisaggBadInputPerfdb(t *testing.T) {
	t.Setenv("AICDB_EVALUATOR", "perfdb")
	db := filepath.Join(t.TempDir(), "d.sqlite")
	if code, _, errs := cliRun(t, db, "init"); code != 0 {
		t.Fatalf("init: %d %s", code, errs)
	}
	eval := []string{"eval", "--mode", "disagg", "--system", "h200_sxm", "--backend", "vllm", "--isl", "1000", "--osl", "100", "--concurrency", "4"}
	sweep := []string{"sweep", "--system", "h200_sxm", "--backend", "vllm", "--mode", "disagg", "--isl", "1000", "--osl", "100"}
	with := func(base []string, more ...string) []string { return append(append([]string{}, base...), more...) }
	// A good evaluation first: it creates the perf-data cache beside the store.
	if code, _, errs := cliRun(t, db, with(eval, "--model", "Qwen/Qwen3-32B", "--tp", "1", "--tier", "screening")...); code != 0 {
		t.Fatalf("good eval: %d %s", code, errs)
	}
	check := func(t *testing.T, args []string, want string) {
		t.Helper()
		before, files := storeDigest(t, db)
		code, out, errs := cliRun(t, db, args...)
		if code != 1 || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and one line with %q", args, code, out, errs, want)
		}
		if after, files2 := storeDigest(t, db); after != before || strings.Join(files, ",") != strings.Join(files2, ",") {
			t.Errorf("%v: the store changed", args)
		}
	}
	for _, tc := range []struct {
		name  string
		args  []string
		want  string
		heavy bool // loads the perf data of a sweep (several seconds on 2 loaded cores)
	}{
		{"eval decode KV", with(eval, "--model", "meta-llama/Meta-Llama-3.1-70B", "--prefill-tp", "4", "--decode-tp", "1"),
			"--decode-tp 1: a decode worker's KV cannot hold one request of isl 1000 + osl 100 on h200_sxm; raise --decode-tp or shorten the request", false},
		{"eval GPUs", with(eval, "--model", "Qwen/Qwen3-32B", "--tp", "2", "--prefill-workers", "3", "--gpus", "4"),
			"--prefill-workers 3 × 2 GPUs + --decode-workers 1 × 2 GPUs = 8 GPUs exceed --gpus 4; use fewer or narrower workers", false},
		{"sweep decode KV", with(sweep, "--model", "meta-llama/Meta-Llama-3.1-70B", "--tp", "1", "--total-gpus", "2"),
			"--isl 1000 + --osl 100: a decode worker's KV cannot hold one request of meta-llama/Meta-Llama-3.1-70B on h200_sxm at any decode tp of the sweep [1]; shorten the request, allow a larger --tp, or use --mode agg", true},
		{"sweep GPUs", with(sweep, "--model", "Qwen/Qwen3-32B", "--tp", "4", "--total-gpus", "4"),
			"--mode disagg: the smallest disaggregated deployment (one prefill and one decode worker at tp 4) needs 8 GPUs, above --total-gpus 4; give --total-gpus ≥ 8, a smaller --tp, or --mode agg", false},
		{"sweep all GPUs", with(sweep, "--model", "Qwen/Qwen3-32B", "--mode", "all", "--total-gpus", "1"),
			"--mode agg,disagg: the smallest disaggregated deployment (one prefill and one decode worker at tp 1) needs 2 GPUs, above --total-gpus 1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.heavy && testing.Short() {
				t.Skip("-short: a sweep's perf-data load")
			}
			check(t, tc.args, tc.want)
		})
	}
	if testing.Short() {
		return
	}
	// A system spec without inter-node bandwidth: no KV fabric.
	s, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(`UPDATE systems SET inter_node_bw = 0 WHERE name = 'h200_sxm'`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	t.Run("eval zero bandwidth", func(t *testing.T) {
		check(t, with(eval, "--model", "Qwen/Qwen3-32B", "--tp", "1"), "--system h200_sxm: inter_node_bw is 0; give --inter-node-gbps > 0")
	})
	t.Run("sweep zero bandwidth", func(t *testing.T) {
		check(t, with(sweep, "--model", "Qwen/Qwen3-32B", "--tp", "1", "--total-gpus", "2"),
			"--system h200_sxm: inter_node_bw is 0, so disaggregated rows have no KV fabric; fix the system spec (node.inter_node_bw) or use --mode agg")
	})
}
