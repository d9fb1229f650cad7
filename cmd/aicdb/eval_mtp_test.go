package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestEvalMTP: --nextn/--nextn-accepted run TensorRT-LLM one-model MTP (and
// SGLang EAGLE/NEXTN, vLLM MTP): with
// accepted drafts a request takes fewer decode steps, so its TPOT falls and the
// loop cycles faster; the mistakes are one-line errors naming the flag and the fix.
func TestEvalMTP(t *testing.T) {
	base := []string{"eval", "--timing", "linear", "--base-ms", "5", "--prefill-ms-per-token", "0.01", "--decode-ms-per-row", "0.05",
		"--concurrency", "8", "--isl", "1024", "--osl", "128", "--backend-engine", "trtllm", "--tier", "both", "--format", "json"}
	tpot := func(args ...string) (screen, quant float64) {
		t.Helper()
		code, out, errb := runCLI(t, append(append([]string{}, base...), args...)...)
		if code != 0 {
			t.Fatalf("eval %v: exit %d: %s", args, code, errb)
		}
		var tiers map[string]map[string]any
		if err := json.Unmarshal([]byte(out), &tiers); err != nil || tiers["screening"] == nil || tiers["quantitative"] == nil {
			t.Fatalf("eval %v: %v: %s", args, err, out)
		}
		return tiers["screening"]["tpot_mean"].(float64), tiers["quantitative"]["tpot_mean"].(float64)
	}
	s0, q0 := tpot()
	s1, q1 := tpot("--nextn", "1", "--nextn-accepted", "0.85")
	if !(q1 < 0.7*q0 && s1 < 0.7*s0) {
		t.Errorf("TPOT with one draft at 0.85 accepted: screening %v, quantitative %v; without: %v, %v — want ≥ 30 %% lower", s1, q1, s0, q0)
	}
	// SGLang EAGLE / NEXTN: the same fall in TPOT; the engine runs without the
	// overlap scheduler and mixed chunk (SGLang turns both off), and an explicit
	// request for either is refused.
	ss0, sq0 := tpot("--backend-engine", "sglang", "--mixed-chunk=false", "--async-scheduling=false")
	ss1, sq1 := tpot("--backend-engine", "sglang", "--nextn", "1", "--nextn-accepted", "0.85")
	if !(sq1 < 0.7*sq0 && ss1 < 0.7*ss0) {
		t.Errorf("SGLang TPOT with one EAGLE draft at 0.85 accepted: screening %v, quantitative %v; without: %v, %v — want ≥ 30 %% lower", ss1, sq1, ss0, sq0)
	}
	// vLLM MTP (V-S1..V-S4), synchronous and async.
	for _, async := range []string{"--async-scheduling=false", "--async-scheduling=true"} {
		vs0, vq0 := tpot("--backend-engine", "vllm", async)
		vs1, vq1 := tpot("--backend-engine", "vllm", async, "--nextn", "1", "--nextn-accepted", "0.85")
		if !(vq1 < 0.7*vq0 && vs1 < 0.7*vs0) {
			t.Errorf("vLLM (%s) TPOT with one draft at 0.85 accepted: screening %v, quantitative %v; without: %v, %v — want ≥ 30 %% lower", async, vs1, vq1, vs0, vq0)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend-engine", "sglang", "--nextn", "1", "--nextn-accepted", "0.5", "--mixed-chunk"}, "aicdb: --mixed-chunk: SGLang turns it off under EAGLE/NEXTN speculative decoding (1 draft tokens); drop --mixed-chunk"},
		{[]string{"--backend-engine", "sglang", "--nextn", "1", "--nextn-accepted", "0.5", "--async-scheduling"}, "aicdb: --async-scheduling: SGLang turns it off under EAGLE/NEXTN"},
		{[]string{"--nextn", "1"}, "aicdb: --nextn 1: give --nextn-accepted"},
		{[]string{"--nextn-accepted", "0.5"}, "aicdb: --nextn-accepted 0.5: only with --nextn ≥ 1"},
		{[]string{"--nextn", "1", "--nextn-accepted", "1.5"}, "aicdb: --nextn-accepted 1.5: must be in [0, --nextn = 1]"},
		{[]string{"--nextn", "-1"}, "aicdb: --nextn -1: must be ≥ 0"},
		{[]string{"--nextn", "1", "--nextn-accepted", "0.5", "--capacity-policy", "max_utilization"}, "max_utilization is not modelled"},
	} {
		code, _, errb := runCLI(t, append(append([]string{}, base...), c.args...)...)
		if code != 1 || !strings.Contains(errb, c.want) || strings.Count(errb, "\n") != 1 {
			t.Errorf("eval %v: exit %d, stderr %q; want exit 1 and one line containing %q", c.args, code, errb, c.want)
		}
	}
}

// TestSweepMTPRefusals: sweep --nextn runs vLLM, TensorRT-LLM and SGLang sweeps
// (aggregated or disaggregated: the flags pass on to the store, absent here),
// and needs an acceptance; each mistake is one line, exit 1.
func TestSweepMTPRefusals(t *testing.T) {
	base := []string{"sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--total-gpus", "8", "--isl", "4000", "--osl", "500"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--backend", "vllm", "--nextn", "1", "--nextn-accepted", "0.5"}, "aicdb: store "},
		{[]string{"--backend", "vllm", "--mode", "disagg", "--nextn", "1", "--nextn-accepted", "0.5"}, "aicdb: store "},
		{[]string{"--backend", "trtllm", "--mode", "disagg", "--nextn", "1", "--nextn-accepted", "0.5"}, "aicdb: store "},
		{[]string{"--backend", "sglang", "--mode", "all", "--nextn", "1", "--nextn-accepted", "0.5"}, "aicdb: store "},
		{[]string{"--backend", "trtllm", "--nextn", "2"}, "aicdb: --nextn 2: give --nextn-accepted"},
	} {
		code, _, errb := runCLI(t, append(append([]string{}, base...), c.args...)...)
		if code != 1 || !strings.HasPrefix(errb, c.want) || strings.Count(errb, "\n") != 1 {
			t.Errorf("sweep %v: exit %d, stderr %q; want exit 1 and one line starting %q", c.args, code, errb, c.want)
		}
	}
}

// TestEvalMTPFromEngineConfig: a TensorRT-LLM config's one-model MTP
// (speculative_config decoding_type MTP, num_nextn_predict_layers) runs like
// --nextn with --nextn-accepted giving the acceptance; without it, with an EAGLE3
// decoding type but no head, or in a sweep it is one line naming the file and
// the fix.
func TestEvalMTPFromEngineConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := func(name, body string) string { return writeTestFile(t, dir, name, body) }
	mtp := cfg("mtp.yaml", "speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: 1\n")
	eagle := cfg("eagle.yaml", "speculative_config:\n  decoding_type: Eagle3\n  max_draft_len: 3\n")
	base := []string{"eval", "--timing", "linear", "--base-ms", "5", "--prefill-ms-per-token", "0.01", "--decode-ms-per-row", "0.05",
		"--concurrency", "8", "--isl", "1024", "--osl", "128", "--backend-engine", "trtllm", "--tier", "quantitative", "--format", "json"}
	run := func(args ...string) (int, string, string) {
		return runCLI(t, append(append([]string{}, base...), args...)...)
	}
	code, fromCfg, errb := run("--engine-config", mtp, "--nextn-accepted", "0.85")
	if code != 0 {
		t.Fatalf("eval --engine-config mtp.yaml --nextn-accepted 0.85: %d %s", code, errb)
	}
	if code, fromFlags, errb := run("--nextn", "1", "--nextn-accepted", "0.85"); code != 0 || fromFlags != fromCfg {
		t.Errorf("the config's MTP and --nextn 1 differ (%d %s):\n%s\n%s", code, errb, fromCfg, fromFlags)
	}
	// SGLang server arguments with NEXTN (as aiconfigurator's generator writes
	// them, beside --enable-mixed-chunk) run like --nextn on SGLang.
	sglArgs := cfg("sglang.args", "--speculative-algorithm NEXTN --speculative-num-steps 1 --enable-mixed-chunk\n")
	code, sglCfg, errb := run("--backend-engine", "sglang", "--engine-config", sglArgs, "--nextn-accepted", "0.85")
	if code != 0 {
		t.Fatalf("eval --backend-engine sglang --engine-config sglang.args: %d %s", code, errb)
	}
	if code, sglFlags, errb := run("--backend-engine", "sglang", "--nextn", "1", "--nextn-accepted", "0.85"); code != 0 || sglFlags != sglCfg {
		t.Errorf("SGLang: the config's NEXTN and --nextn 1 differ (%d %s):\n%s\n%s", code, errb, sglCfg, sglFlags)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--engine-config", mtp}, "aicdb: --engine-config " + mtp + ": MTP with 1 draft tokens per decode step: give --nextn-accepted"},
		{[]string{"--engine-config", mtp, "--nextn-accepted", "2"}, "aicdb: --nextn-accepted 2: must be in [0, the config's 1 draft tokens]"},
		{[]string{"--engine-config", eagle, "--nextn-accepted", "1"}, "speculative_config decoding_type Eagle: give speculative_model_dir, the EAGLE3 head's checkpoint"},
	} {
		code, _, errb := run(c.args...)
		if code != 1 || !strings.Contains(errb, c.want) || strings.Count(errb, "\n") != 1 {
			t.Errorf("eval %v: exit %d, stderr %q; want exit 1 and one line containing %q", c.args, code, errb, c.want)
		}
	}
	// With the perf database the config's drafts also price each decode row
	// (WorkerConfig): the same as --nextn, the tables read once. The model must
	// carry MTP layers: a model whose config names none is refused in one line.
	perf := []string{"eval", "--model", "deepseek-ai/DeepSeek-V3", "--system", "h200_sxm", "--backend", "trtllm", "--tp", "8",
		"--concurrency", "16", "--isl", "2000", "--osl", "300", "--format", "json", "--nextn-accepted", "0.85"}
	code, _, errb = runCLI(t, "eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "trtllm", "--tp", "2",
		"--concurrency", "16", "--isl", "2000", "--osl", "300", "--nextn", "1", "--nextn-accepted", "0.85")
	if want := "aicdb: --nextn 1: Qwen/Qwen3-32B has no MTP layers"; code != 1 || !strings.HasPrefix(errb, want) || strings.Count(errb, "\n") != 1 {
		t.Errorf("eval --model Qwen/Qwen3-32B --nextn 1: exit %d, stderr %q; want one line starting %q", code, errb, want)
	}
	code, perfCfg, errb := runCLI(t, append(slices.Clone(perf), "--engine-config", mtp)...)
	if code != 0 {
		t.Fatalf("eval --model … --engine-config mtp.yaml: %d %s", code, errb)
	}
	if code, perfFlags, errb := runCLI(t, append(slices.Clone(perf), "--nextn", "1")...); code != 0 || perfFlags != perfCfg {
		t.Errorf("perf database: the config's MTP and --nextn 1 differ (%d %s):\n%s\n%s", code, errb, perfCfg, perfFlags)
	}
	code, _, errb = runCLI(t, "sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "trtllm", "--total-gpus", "8",
		"--isl", "4000", "--osl", "500", "--engine-config", mtp)
	if want := "sets 1 MTP draft tokens per decode step (speculative decoding); sweep: give --nextn N --nextn-accepted A with it"; code != 1 || !strings.Contains(errb, want) {
		t.Errorf("sweep --engine-config mtp.yaml: exit %d, stderr %q; want %q", code, errb, want)
	}
}

// TestEvalDisaggMTPPerfData: with the perf database, --mode disagg --nextn
// prices both pools with the MTP layers and the decode rows' drafts (as
// --nextn does an agg point), a config's speculative_config reads the same,
// and a model whose config names no MTP layers is refused in one line.
func TestEvalDisaggMTPPerfData(t *testing.T) {
	base := []string{"eval", "--mode", "disagg", "--system", "h200_sxm", "--backend", "trtllm", "--prefill-tp", "8", "--decode-tp", "8",
		"--concurrency", "16", "--isl", "2000", "--osl", "300", "--tier", "quantitative", "--format", "json"}
	tpot := func(args ...string) (float64, string) {
		t.Helper()
		code, out, errb := runCLI(t, append(slices.Clone(base), args...)...)
		if code != 0 {
			t.Fatalf("eval %v: exit %d: %s", args, code, errb)
		}
		var row map[string]any
		if err := json.Unmarshal([]byte(out), &row); err != nil {
			t.Fatalf("eval %v: %v: %s", args, err, out)
		}
		return row["tpot_mean"].(float64), out
	}
	ds := []string{"--model", "deepseek-ai/DeepSeek-V3"}
	plain, _ := tpot(ds...)
	mtp, fromFlags := tpot(append(slices.Clone(ds), "--nextn", "1", "--nextn-accepted", "0.85")...)
	if !(mtp < 0.75*plain) {
		t.Errorf("disagg TPOT with one draft at 0.85 accepted %v, without %v: want ≥ 25 %% lower", mtp, plain)
	}
	cfg := writeTestFile(t, t.TempDir(), "mtp.yaml", "speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: 1\n")
	if _, fromCfg := tpot(append(slices.Clone(ds), "--engine-config", cfg, "--nextn-accepted", "0.85")...); fromCfg != fromFlags {
		t.Errorf("perf database: the config's MTP and --nextn 1 differ:\n%s\n%s", fromCfg, fromFlags)
	}
	code, _, errb := runCLI(t, append(slices.Clone(base), "--model", "Qwen/Qwen3-32B", "--nextn", "1", "--nextn-accepted", "0.85")...)
	if want := "aicdb: --nextn 1: Qwen/Qwen3-32B has no MTP layers"; code != 1 || !strings.HasPrefix(errb, want) || strings.Count(errb, "\n") != 1 {
		t.Errorf("eval --mode disagg --model Qwen/Qwen3-32B --nextn 1: exit %d, stderr %q; want one line starting %q", code, errb, want)
	}
}
