package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

var updateEval = flag.Bool("update-eval", false, "rewrite testdata/eval golden outputs")

// evalRun runs `aicdb eval args...` and returns exit code, stdout and stderr.
func evalRun(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"aicdb", "eval"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

var linArgs = []string{"--timing", "linear", "--base-ms", "5", "--prefill-ms-per-token", "0.02", "--decode-ms-per-row", "0.05", "--ctx-ms-per-token", "0.00001"}

// evalKeys are the JSON keys of issue 3 item 6.
var evalKeys = []string{"ttft_steady_mean", "ttft_steady_p50", "ttft_steady_p75", "ttft_steady_p90",
	"ttft_steady_p95", "ttft_steady_p99", "ttft_steady_p999", "ttft_steady_p99_lo",
	"ttft_steady_p99_hi", "ttft_transient_mean", "ttft_transient_max", "itl_mean", "itl_p50",
	"itl_p99", "tpot_mean", "tpot_p50", "tpot_p99", "e2e_mean", "e2e_p50", "e2e_p99",
	"throughput_rps", "output_tokens_per_s", "output_tokens_per_s_per_gpu",
	"tokens_per_s_per_user", "queueing_tier", "workload_fidelity"}

// TestEvalJSONKeys: one tier prints exactly the keys with finite values.
func TestEvalJSONKeys(t *testing.T) {
	for _, tier := range []string{"screening", "quantitative"} {
		code, out, errs := evalRun(append(linArgs, "--concurrency", "8", "--isl", "2048", "--osl", "64", "--tier", tier, "--format", "json")...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tier, code, errs)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("%s: not JSON: %v\n%s", tier, err, out)
		}
		if len(m) != len(evalKeys) {
			t.Errorf("%s: %d keys, want %d", tier, len(m), len(evalKeys))
		}
		for _, k := range evalKeys {
			v, ok := m[k]
			if !ok {
				t.Errorf("%s: missing key %s", tier, k)
				continue
			}
			if f, isNum := v.(float64); isNum && (math.IsNaN(f) || math.IsInf(f, 0) || f < 0) {
				t.Errorf("%s: %s = %v", tier, k, f)
			}
		}
		if m["queueing_tier"] != tier || m["workload_fidelity"] != "W0" {
			t.Errorf("%s: tier %v fidelity %v", tier, m["queueing_tier"], m["workload_fidelity"])
		}
	}
}

// TestEvalGolden: fixed CLI invocations against testdata/eval (-update-eval).
func TestEvalGolden(t *testing.T) {
	cases := map[string][]string{
		"both_vllm_c32":      append(append([]string{}, linArgs...), "--concurrency", "32", "--isl", "4096", "--osl", "256", "--tier", "both"),
		"trtllm_open":        append(append([]string{}, linArgs...), "--backend-engine", "trtllm", "--rate", "4", "--num-requests", "800", "--isl", "2048", "--osl", "128"),
		"sglang_w2":          append(append([]string{}, linArgs...), "--backend-engine", "sglang", "--concurrency", "16", "--isl", "2048", "--osl", "128", "--isl-quantiles", "512,2048,4096", "--osl-quantiles", "32,128,256", "--mixed-chunk=false", "--tier", "both"),
		"vllm_knobs":         append(append([]string{}, linArgs...), "--concurrency", "12", "--isl", "3000", "--osl", "40", "--prefix", "1000", "--max-num-batched-tokens", "1024", "--max-num-seqs", "8", "--async-scheduling=false", "--stage-ms", "4", "--turnaround-ms", "20"),
		"roofline_trtllm":    {"--timing", "roofline", "--base-ms", "2", "--weights-ms", "8", "--token-ms", "0.01", "--attn-ms-per-pair", "1e-6", "--kv-ms-per-token", "1e-4", "--backend-engine", "trtllm", "--concurrency", "24", "--isl", "3000", "--osl", "200", "--chunked-prefill", "--max-num-tokens", "2048", "--tier", "both"},
		"vllm_staggered":     append(append([]string{}, linArgs...), "--concurrency", "8", "--isl", "1024", "--osl", "256", "--stagger-phases", "4"),
		"unstable_open_loop": append(append([]string{}, linArgs...), "--rate", "100", "--num-requests", "600", "--isl", "4096", "--osl", "256", "--tier", "both"),
		// Engine profiles and config files (issue 9 part 2): the default profile
		// (aiconfigurator) and a TensorRT-LLM extra_llm_api_options file over it.
		"profile_aic_trtllm_isl8192": append(append([]string{}, linArgs...), "--backend-engine", "trtllm", "--concurrency", "4", "--isl", "8192", "--osl", "64"),
		"profile_aic_vllm_c32":       append(append([]string{}, linArgs...), "--concurrency", "32", "--isl", "4096", "--osl", "256", "--tier", "both"),
		"profile_config_trtllm":      append(append([]string{}, linArgs...), "--backend-engine", "trtllm", "--concurrency", "4", "--isl", "8192", "--osl", "64", "--engine-config", "testdata/engine/trtllm_chunked.yaml"),
	}
	for name, args := range cases {
		if !strings.HasPrefix(name, "profile_") {
			// These goldens pin the model at the engines' bare defaults.
			args = append(args, "--engine-profile", "defaults")
		}
		t.Run(name, func(t *testing.T) {
			code, out, errs := evalRun(args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			want := golden(t, filepath.Join("testdata", "eval", name+".json"), out, *updateEval, "go test -run EvalGolden -update-eval")
			if want == nil {
				return
			}
			var g, w any
			if err := json.Unmarshal([]byte(out), &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(want, &w); err != nil {
				t.Fatal(err)
			}
			if d := jsonDiff("", w, g); d != "" {
				t.Error(d)
			}
		})
	}
}

// TestEvalUnstableExitZero: an unstable open-loop point prints {"unstable": true,
// "reason": ...} and exits 0.
func TestEvalUnstableExitZero(t *testing.T) {
	code, out, errs := evalRun(append(linArgs, "--rate", "100", "--num-requests", "500", "--isl", "4096", "--osl", "256", "--tier", "quantitative")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	if m["unstable"] != true || !strings.Contains(m["reason"].(string), "unstable at rate 100") || len(m) != 2 {
		t.Errorf("got %v", m)
	}
}

// TestEvalBadInput: bad flags exit 1 with one line naming the flag or input.
func TestEvalBadInput(t *testing.T) {
	base := func(extra ...string) []string { return append(append([]string{}, linArgs...), extra...) }
	cases := []struct {
		args []string
		want string
	}{
		{base("--concurrency", "0", "--isl", "10", "--osl", "2"), "--concurrency 0"},
		{base("--concurrency", "-2", "--isl", "10", "--osl", "2"), "--concurrency -2"},
		{base("--concurrency", "100000", "--isl", "10", "--osl", "2"), "aicdb: --concurrency 100000: must be in 1..65536\n"}, // before any note
		{base("--rate", "0", "--isl", "10", "--osl", "2"), "--rate 0"},
		{base("--rate", "2", "--concurrency", "3", "--isl", "10", "--osl", "2"), "exactly one of --concurrency"},
		{base("--concurrency", "2", "--isl", "0", "--osl", "2"), "--isl 0"},
		{base("--concurrency", "2", "--isl", "10", "--osl", "-1"), "--osl -1"},
		{base("--concurrency", "2", "--isl", "10"), "--osl is required"},
		{base("--concurrency", "2", "--isl", "10", "--osl", "2", "--prefix", "10"), "--prefix 10"},
		{base("--concurrency", "2", "--isl", "10", "--osl", "2", "--max-num-batched-tokens", "0"), "--max-num-batched-tokens 0"},
		{base("--concurrency", "2", "--isl", "10", "--osl", "2", "--block-size", "-16"), "--block-size -16"},
		{base("--concurrency", "2", "--isl", "10", "--osl", "2", "--max-num-seqs", "0"), "--max-num-seqs 0"},
		{base("--concurrency", "2", "--isl", "10", "--osl", "2", "--backend-engine", "trtllm", "--max-batch-size", "0"), "--max-batch-size 0"},
		{base("--concurrency", "2", "--isl", "5000", "--osl", "2", "--chunked-prefill=false", "--max-num-batched-tokens", "4096"), "max_num_batched_tokens = 4096"},
		{base("--concurrency", "2", "--isl", "10", "--osl", "2", "--kv-capacity-tokens", "8"), "kv_capacity_tokens = 8: one request needs 1 blocks of 16 tokens"},
		{base("--concurrency", "2", "--isl", "10", "--osl", "2", "--backend-engine", "sglang", "--kv-capacity-tokens", "8"), "kv_capacity_tokens = 8: one request needs 11 blocks of 1 tokens"},
		{base("--concurrency", "2", "--isl", "10", "--osl", "2", "--backend-engine", "trtllm", "--kv-capacity-tokens", "100000", "--capacity-policy", "max_utilization", "--tier", "both"), "the screening tier does not model trtllm KV pressure"},
		{base("--concurrency", "2", "--isl", "10", "--osl", "2", "--prefix", "4", "--kv-capacity-tokens", "100000"), "cached prefix is not modelled for vllm"},
		{base("--concurrency", "2", "--isl", "10", "--osl", "2", "--isl-quantiles", "5,x"), "--isl-quantiles"},
		{base("--concurrency", "2", "--isl", "10", "--osl", "2", "--tier", "fast"), "--tier"},
		{base("--concurrency", "2", "--isl", "10", "--osl", "2", "--stagger-phases", "-1"), "stagger_phases = -1"},
		{base("--concurrency", "2", "--isl", "10", "--osl", "2", "--format", "yaml"), "--format"},
		{base("--concurrency", "2", "--isl", "10", "--osl", "2", "--backend-engine", "tgi"), "tgi"},
		{[]string{"--timing", "linear", "--base-ms", "5", "--concurrency", "2", "--isl", "10", "--osl", "2"}, "aicdb: --timing linear: --prefill-ms-per-token, --decode-ms-per-row are required\n"},
		{[]string{"--timing", "linear", "--base-ms", "-5", "--prefill-ms-per-token", "1", "--decode-ms-per-row", "1", "--concurrency", "2", "--isl", "10", "--osl", "2"}, "base_ms"},
		{[]string{"--concurrency", "2", "--isl", "10", "--osl", "2"}, "--timing linear"},
		{[]string{"--timing", "roofline", "--base-ms", "1", "--concurrency", "2", "--isl", "10", "--osl", "2"}, "aicdb: --timing roofline: --weights-ms, --token-ms, --attn-ms-per-pair, --kv-ms-per-token are required\n"},
		{[]string{"--timing", "roofline", "--base-ms", "1", "--weights-ms", "5", "--token-ms", "0.001", "--attn-ms-per-pair", "0", "--concurrency", "2", "--isl", "10", "--osl", "2"}, "aicdb: --timing roofline: --kv-ms-per-token is required\n"},
		{[]string{"--timing", "cubic", "--concurrency", "2", "--isl", "10", "--osl", "2"}, "--timing \"cubic\""},
		{[]string{"--model", "m", "--concurrency", "2", "--isl", "10", "--osl", "2"}, "--system is required"},
	}
	for _, c := range cases {
		code, out, errs := evalRun(c.args...)
		if code != 1 || out != "" || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q, want exit 1 and one line containing %q", c.args, code, errs, c.want)
		}
	}
}

// FuzzParseQuantiles: the quantile-list parser never panics, and accepts exactly
// lists of positive integers.
func FuzzParseQuantiles(f *testing.F) {
	for _, s := range []string{"", "1", "512,1024,4096", " 3 , 4 ", "0", "-1", "a,b", "1,,2", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := parseQuantiles(s)
		if err != nil {
			if v != nil || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q with values %v", err, v)
			}
			return
		}
		for _, x := range v {
			if x <= 0 {
				t.Fatalf("%q parsed to non-positive %d", s, x)
			}
		}
	})
}

// jsonDiff describes the first differences between want and got (floats 1e-9).
func jsonDiff(path string, want, got any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return path + ": objects differ in shape"
		}
		var b strings.Builder
		for k := range w {
			b.WriteString(jsonDiff(path+"."+k, w[k], g[k]))
		}
		return b.String()
	case float64:
		g, ok := got.(float64)
		if !ok || math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
			return path + ": differs\n"
		}
		return ""
	default:
		wb, _ := json.Marshal(want)
		gb, _ := json.Marshal(got)
		if string(wb) != string(gb) {
			return path + ": " + string(gb) + " != " + string(wb) + "\n"
		}
		return ""
	}
}

// TestEvalPerfDatabase: the perf-database timing path (embedded h200_sxm data, no
// store): both tiers, the keys, per-GPU throughput over tp·pp·dp GPUs.
func TestEvalPerfDatabase(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none.sqlite")
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"aicdb", "--db", db, "eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm",
		"--backend", "vllm", "--tp", "2", "--concurrency", "16", "--isl", "2048", "--osl", "64", "--tier", "both"}, &out, &errb)
	if code != 0 && strings.Contains(errb.String(), "no store found") {
		t.Skip("embedded perf data not available in this build: " + errb.String())
	}
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var m map[string]map[string]any
	if err := json.Unmarshal(out.Bytes(), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	for _, tier := range []string{"screening", "quantitative"} {
		cols := m[tier]
		if len(cols) != len(evalKeys) {
			t.Errorf("%s: %d keys", tier, len(cols))
		}
		for _, k := range evalKeys {
			if f, ok := cols[k].(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0) || f < 0) {
				t.Errorf("%s %s = %v", tier, k, f)
			}
		}
		tok, per := cols["output_tokens_per_s"].(float64), cols["output_tokens_per_s_per_gpu"].(float64)
		if !(tok > 0) || per != tok/2 { // tp 2: exactly half (JSON round-trips float64)
			t.Errorf("%s: output_tokens_per_s %v, per GPU %v (want /2)", tier, tok, per)
		}
	}
	if lo, p99 := m["screening"]["ttft_steady_p99_lo"].(float64), m["quantitative"]["ttft_steady_p99"].(float64); lo > p99 {
		t.Errorf("screening lo %v above the evaluator's p99 %v", lo, p99)
	}
}
