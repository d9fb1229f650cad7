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

// TestEvalDisaggMTP: --nextn with --mode disagg runs MTP on both pools (a
// decode step emits engine.StepTokens tokens, the accepted drafts with its
// token): at isl 1000, osl 10 and one draft always accepted, a request's 9
// decode-side tokens take 5 steps instead of 9 — the first gap (a decode pass
// after the handoff) and 4 passes, the other 4 tokens gaps of 0 — at both
// tiers, on TensorRT-LLM and on vLLM (V-S1); a TensorRT-LLM config's
// speculative_config gives the same drafts as the flags; a missing acceptance
// and that config on SGLang (whose EAGLE keys differ) are one line each.
func TestEvalDisaggMTP(t *testing.T) {
	backend := "trtllm"
	run := func(extra ...string) map[string]map[string]any {
		t.Helper()
		args := append(append(append([]string{}, disaggArgs...), "--concurrency", "1", "--tier", "both", "--backend-engine", backend), extra...)
		code, out, errs := evalRun(args...)
		if code != 0 {
			t.Fatalf("eval %v: exit %d: %s", extra, code, errs)
		}
		var m map[string]map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		return m
	}
	plain, mtp := run(), run("--nextn", "1", "--nextn-accepted", "1")
	backend = "vllm"
	vplain, vmtp := run(), run("--nextn", "1", "--nextn-accepted", "1")
	backend = "trtllm"
	for _, tier := range []string{"screening", "quantitative"} {
		if p, q := vplain[tier]["tpot_mean"].(float64), vmtp[tier]["tpot_mean"].(float64); !(q < 0.7*p) {
			t.Errorf("vLLM %s: TPOT %v with one draft always accepted, %v without: want ≥ 30 %% lower", tier, q, p)
		}
		// The same pass lengths at C = 1 (the synthetic timing prices no
		// drafts): TPOT = (first + 8·t)/9 plain, (first + 4·t)/9 with MTP.
		p, q, tD := plain[tier]["tpot_mean"].(float64), mtp[tier]["tpot_mean"].(float64), plain[tier]["itl_p50"].(float64)
		if want := p - 4*tD/9; math.Abs(q-want) > 1e-9*p {
			t.Errorf("%s: TPOT %v with MTP, want %v (plain %v, decode pass %v)", tier, q, want, p, tD)
		}
		if m := mtp[tier]["itl_mean"].(float64); math.Abs(m-q) > 1e-9*q {
			t.Errorf("%s: ITL mean %v, want the TPOT %v (the 4 accepted drafts are gaps of 0)", tier, m, q)
		}
	}
	dir := t.TempDir()
	cfg := writeTestFile(t, dir, "mtp.yaml", "speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: 1\n")
	if fromCfg := run("--engine-config", cfg, "--nextn-accepted", "1"); fromCfg["quantitative"]["tpot_mean"] != mtp["quantitative"]["tpot_mean"] {
		t.Errorf("--engine-config mtp.yaml: TPOT %v, --nextn 1: %v", fromCfg["quantitative"]["tpot_mean"], mtp["quantitative"]["tpot_mean"])
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend-engine", "trtllm", "--nextn", "2"}, "aicdb: --nextn 2: give --nextn-accepted"},
		{[]string{"--backend-engine", "sglang", "--engine-config", cfg}, "key speculative_config.decoding_type: not a sglang key aicdb knows"},
	} {
		code, out, errs := evalRun(append(append(append([]string{}, disaggArgs...), "--concurrency", "1"), tc.args...)...)
		if code != 1 || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and one line with %q", tc.args, code, out, errs, tc.want)
		}
	}
}
