package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestEagleCLI: an EAGLE3 head in --engine-config runs vLLM (and SGLang and
// TensorRT-LLM) speculative decoding on a model without MTP layers (Llama-3.1-70B): eval prices and
// schedules its drafts (TPOT well below the run without them at two of three
// accepted; above it at none accepted, the drafts' cost), a sweep stores rows
// that deploy with the head, and --nextn alone is refused naming the head.
func TestEagleCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: perf-data evaluations")
	}
	const cfg = "testdata/engine/vllm_eagle3.yaml"
	base := []string{"eval", "--model", "meta-llama/Meta-Llama-3.1-70B", "--system", "h200_sxm", "--backend", "vllm", "--tp", "4",
		"--concurrency", "16", "--isl", "1024", "--osl", "256", "--format", "json"}
	tpot := func(extra ...string) float64 {
		t.Helper()
		code, out, errs := runCLI(t, append(append([]string{}, base...), extra...)...)
		var r struct {
			TPOT float64 `json:"tpot_mean"`
		}
		if code != 0 || errs != "" || json.Unmarshal([]byte(out), &r) != nil || !(r.TPOT > 0) {
			t.Fatalf("%v: exit %d, stderr %q, out %q", extra, code, errs, out)
		}
		return r.TPOT
	}
	plain, two, none := tpot(), tpot("--engine-config", cfg, "--nextn-accepted", "2"), tpot("--engine-config", cfg, "--nextn-accepted", "0")
	if !(two < 0.75*plain && none > plain) {
		t.Errorf("TPOT mean: %v ms without drafts, %v with 2 of 3 accepted, %v with none: want the first well below and the second above", plain, two, none)
	}
	// The row says how it drafted.
	if code, out, errs := runCLI(t, append(append([]string{}, base...), "--engine-config", cfg, "--nextn-accepted", "2")...); code != 0 ||
		!strings.Contains(out, `"drafter": "eagle3"`) || !strings.Contains(out, `"nextn": 3`) || !strings.Contains(out, `"nextn_accepted": 2`) {
		t.Errorf("eval with the head: exit %d %q, want drafter, nextn and nextn_accepted in the row\n%s", code, errs, out)
	}
	// SGLang's EAGLE3 head (--speculative-algorithm EAGLE3 with its checkpoint),
	// an EAGLE chain as NEXTN's (S-R3), the same way.
	sg := slices.Clone(base)
	sg[slices.Index(sg, "vllm")] = "sglang"
	code, out, errs := runCLI(t, sg...)
	code2, out2, errs2 := runCLI(t, append(slices.Clone(sg), "--engine-config", "testdata/engine/sglang_eagle3.args", "--nextn-accepted", "2")...)
	var a, b struct {
		TPOT float64 `json:"tpot_mean"`
	}
	if code != 0 || code2 != 0 || json.Unmarshal([]byte(out), &a) != nil || json.Unmarshal([]byte(out2), &b) != nil || !(b.TPOT < 0.75*a.TPOT) {
		t.Errorf("SGLang EAGLE3: exit %d/%d (%q %q), TPOT %v ms with the head, %v without: want well below", code, code2, errs, errs2, b.TPOT, a.TPOT)
	}
	// TensorRT-LLM's one-model EAGLE3 (speculative_config decoding_type Eagle),
	// scheduled as one-model MTP (T-R3), the same way; a sweep row deploys with
	// the head in its extra_llm_api_options.
	trt := slices.Clone(base)
	trt[slices.Index(trt, "vllm")] = "trtllm"
	const trtCfg = "testdata/engine/trtllm_eagle3.yaml"
	code, out, errs = runCLI(t, trt...)
	code2, out2, errs2 = runCLI(t, append(slices.Clone(trt), "--engine-config", trtCfg, "--nextn-accepted", "2")...)
	a, b = struct {
		TPOT float64 `json:"tpot_mean"`
	}{}, struct {
		TPOT float64 `json:"tpot_mean"`
	}{}
	if code != 0 || code2 != 0 || json.Unmarshal([]byte(out), &a) != nil || json.Unmarshal([]byte(out2), &b) != nil || !(b.TPOT < 0.75*a.TPOT) ||
		!strings.Contains(out2, `"drafter": "eagle3"`) {
		t.Errorf("TensorRT-LLM EAGLE3: exit %d/%d (%q %q), TPOT %v ms with the head, %v without: want well below, drafter eagle3", code, code2, errs, errs2, b.TPOT, a.TPOT)
	}
	tdb := initDB(t)
	tsweep := []string{"sweep", "--model", "meta-llama/Meta-Llama-3.1-70B", "--system", "h200_sxm", "--backend", "trtllm", "--total-gpus", "4",
		"--isl", "1024", "--osl", "256", "--tp", "4", "--batch", "16", "--ctx-tokens", "2048", "--quiet", "--engine-config", trtCfg, "--nextn", "3", "--nextn-accepted", "2"}
	if code, out, errs := cliRun(t, tdb, tsweep...); code != 0 {
		t.Fatalf("TensorRT-LLM sweep: exit %d %q %q", code, out, errs)
	}
	code, out, _ = cliRun(t, tdb, "query", "--format", "csv", "select rowid from operating_points where nextn = 3 and queueing_tier <> 'none' limit 1")
	if id := strings.TrimSpace(strings.TrimPrefix(out, "rowid\n")); code != 0 || id == "" {
		t.Errorf("no priced TensorRT-LLM EAGLE row: %q", out)
	} else if code, out, errs := cliRun(t, tdb, "deploy", id); code != 0 ||
		!strings.Contains(out, "speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n  speculative_model_dir: yuhuili/EAGLE3-LLaMA3.1-Instruct-70B\n  eagle3_one_model: true\n") {
		t.Errorf("deploy %s: exit %d %q\n%s", id, code, errs, out)
	}

	code, out, errs = runCLI(t, append(base, "--nextn", "3", "--nextn-accepted", "2")...)
	const want = "aicdb: --nextn 3: meta-llama/Meta-Llama-3.1-70B has no MTP layers (its config names no num_nextn_predict_layers, mtp_num_hidden_layers or num_mtp_modules), so it cannot run MTP / NEXTN speculative decoding; drop --nextn, or draft with an EAGLE / EAGLE3 head (eval or sweep --engine-config: speculative_config method eagle3, model and num_speculative_tokens)\n"
	if code != 1 || out != "" || errs != want {
		t.Errorf("--nextn without a head: exit %d, stdout %q\n got  %q\n want %q", code, out, errs, want)
	}

	db := initDB(t)
	sweep := []string{"sweep", "--model", "meta-llama/Meta-Llama-3.1-70B", "--system", "h200_sxm", "--backend", "vllm", "--total-gpus", "4",
		"--isl", "1024", "--osl", "256", "--tp", "4", "--batch", "16", "--ctx-tokens", "2048", "--quiet", "--engine-config", cfg}
	code, _, errs = cliRun(t, db, sweep...)
	if want := "aicdb: --engine-config testdata/engine/vllm_eagle3.yaml: sets 3 MTP draft tokens per decode step (speculative decoding); sweep: give --nextn N --nextn-accepted A with it\n"; code != 1 || errs != want {
		t.Errorf("sweep without --nextn: exit %d\n got  %q\n want %q", code, errs, want)
	}
	if code, out, errs := cliRun(t, db, append(sweep, "--nextn", "3", "--nextn-accepted", "2")...); code != 0 {
		t.Fatalf("sweep: exit %d %q %q", code, out, errs)
	}
	code, out, _ = cliRun(t, db, "query", "--format", "csv", "select drafter, count(*) from points group by 1")
	if code != 0 || strings.TrimSpace(out) != "drafter,count(*)\neagle3,1" {
		t.Errorf("the points' drafter column: %q, want the one row's eagle3", out)
	}
	code, out, _ = cliRun(t, db, "query", "--format", "csv", "select rowid from operating_points where nextn = 3 and queueing_tier <> 'none' limit 1")
	id := strings.TrimSpace(strings.TrimPrefix(out, "rowid\n"))
	if code != 0 || id == "" {
		t.Fatalf("no priced EAGLE row: %q", out)
	}
	code, out, errs = cliRun(t, db, "deploy", id)
	if code != 0 || !strings.Contains(out, `--speculative-config '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-70B", "num_speculative_tokens": 3}'`) ||
		!strings.Contains(out, "# EAGLE3 head yuhuili/EAGLE3-LLaMA3.1-Instruct-70B: 3 draft tokens per decode step, predicted at 2 accepted per step") {
		t.Errorf("deploy %s: exit %d %q %q", id, code, out, errs)
	}
}
