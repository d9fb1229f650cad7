package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

var disaggArgs = []string{"--mode", "disagg", "--timing", "linear", "--base-ms", "5", "--prefill-ms-per-token", "0.01",
	"--decode-ms-per-row", "0.1", "--kv-bytes-per-token", "1e5", "--inter-node-gbps", "10", "--isl", "1000", "--osl", "10"}

// TestEvalDisaggColumns: --mode disagg prints the aggregated keys plus the
// handoff columns, finite, at both tiers; at C = 1 TTFT is the prefill pass.
func TestEvalDisaggColumns(t *testing.T) {
	code, out, errs := evalRun(append(disaggArgs, "--concurrency", "1", "--tier", "both")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var m map[string]map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	for _, tier := range []string{"screening", "quantitative"} {
		row := m[tier]
		for _, k := range append(append([]string{}, evalKeys...), "kv_transfer_ms_mean", "kv_transfer_ms_p99", "p_queue_ms_p99", "d_headroom_min", "multi_stable") {
			v, ok := row[k]
			if !ok {
				t.Errorf("%s: missing %s", tier, k)
			}
			if f, isNum := v.(float64); isNum && (math.IsNaN(f) || math.IsInf(f, 0) || f < 0) {
				t.Errorf("%s: %s = %v", tier, k, f)
			}
		}
		if got := row["ttft_steady_p50"].(float64); math.Abs(got-15) > 1e-9 {
			t.Errorf("%s: TTFT %v, want the 15 ms prefill pass", tier, got)
		}
		if got := row["kv_transfer_ms_mean"].(float64); math.Abs(got-12.5) > 1e-9 {
			t.Errorf("%s: transfer %v, want 12.5 ms", tier, got)
		}
	}
}

// TestEvalDisaggBadInput: one line naming the input, exit 1.
func TestEvalDisaggBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurrency", "4", "--decode-kv-capacity-tokens", "500"}, "decode kv_capacity_tokens = 500: 31 blocks of 16 tokens, one request of isl 1000 + osl 10 needs 63 for its last step"},
		{[]string{"--concurrency", "4", "--inter-node-gbps", "0"}, "--inter-node-gbps 0: must be a finite number > 0"},
		{[]string{"--concurrency", "4", "--prefill-workers", "4", "--prefill-tp", "2", "--gpus", "8"}, "= 9 GPUs exceed --gpus 8"},
		{[]string{"--concurrency", "4", "--prefill-workers", "0"}, "--prefill-workers 0: must be ≥ 1"},
		{[]string{"--concurrency", "4", "--connector", "teleport"}, `--connector "teleport": use pull or push`},
	} {
		args := append(append([]string{}, disaggArgs...), tc.args...)
		// the zero-bandwidth case replaces the default flag
		code, out, errs := evalRun(args...)
		if code != 1 || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and one line with %q", tc.args, code, out, errs, tc.want)
		}
	}
	if code, _, errs := evalRun(append(linArgs, "--decode-workers", "2", "--concurrency", "1", "--isl", "10", "--osl", "2")...); code != 1 || !strings.Contains(errs, "--decode-workers: only with --mode disagg") {
		t.Errorf("agg with --decode-workers: exit %d, %q", code, errs)
	}
	if code, _, errs := evalRun(append(disaggArgs, "--concurrency", "1", "--stagger-phases", "4")...); code != 1 || !strings.Contains(errs, "--stagger-phases: not read by --mode disagg") {
		t.Errorf("disagg with --stagger-phases: exit %d, %q", code, errs)
	}
	if code, _, errs := evalRun(append(linArgs, "--mode", "split", "--concurrency", "1", "--isl", "10", "--osl", "2")...); code != 1 || !strings.Contains(errs, `--mode "split": use agg or disagg`) {
		t.Errorf("--mode split: exit %d, %q", code, errs)
	}
}
