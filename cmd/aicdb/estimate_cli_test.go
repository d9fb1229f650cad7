package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateEstimate = flag.Bool("update-estimate", false, "rewrite testdata/estimate/*.json from the current output")

// runCLI runs aicdb in-process against a store path that does not exist, so
// estimate falls back to the embedded h200_sxm data.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	db := filepath.Join(t.TempDir(), "none.sqlite")
	code = run(context.Background(), append([]string{"aicdb", "--db", db}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// TestEstimateCLIGolden checks each mode's JSON against testdata/estimate
// (rewrite with -update-estimate) and the aiconfigurator golden values of the
// qwen3-32b-h200-vllm-022-power case.
func TestEstimateCLIGolden(t *testing.T) {
	base := []string{"estimate", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm",
		"--version", "0.22.0", "--isl", "1024", "--osl", "2", "--tp", "8", "--format", "json"}
	cases := []struct {
		name string
		args []string
		want map[string]float64 // aiconfigurator goldens (engine_step.json)
	}{
		{"static", []string{"--mode", "static"}, map[string]float64{"context_latency_ms": 26.224, "generation_latency_ms": 4.757}},
		{"mixed", []string{"--mode", "mixed", "--ctx-tokens", "1024", "--gen-tokens", "1"}, map[string]float64{"mixed_step_ms": 28.379304385116573}},
		{"agg", []string{"--mode", "agg", "--batch", "2"}, map[string]float64{"ttft": 89.52671743325614,
			"tpot": 28.379304385116573, "request_latency": 117.90602181837271}},
		{"disagg", []string{"--mode", "disagg", "--prefill-batch", "1", "--prefill-workers", "1", "--decode-batch", "4",
			"--decode-workers", "1"}, map[string]float64{"ttft": 51.923, "tpot": 5.267, "request_latency": 57.19}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runCLI(t, append(append([]string{}, base...), c.args...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			var got map[string]float64
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("output is not a JSON object of numbers: %v\n%s", err, out)
			}
			for k, v := range c.want {
				if g, ok := got[k]; !ok || !closeTo(g, v, 1e-9) {
					t.Errorf("%s = %v, aiconfigurator golden %v", k, g, v)
				}
			}
			for _, k := range []string{"seq_per_s", "tokens_per_s_per_gpu", "tokens_per_s_per_user", "memory_gib"} {
				if _, ok := got[k]; !ok && c.name != "mixed" {
					t.Errorf("missing key %s", k)
				}
			}
			golden := filepath.Join("testdata", "estimate", c.name+".json")
			if *updateEstimate {
				if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update-estimate to create it)", err)
			}
			if string(want) != out {
				t.Errorf("output differs from %s:\n got %s\nwant %s", golden, out, want)
			}
		})
	}
}

func closeTo(a, b, rtol float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	m := b
	if m < 0 {
		m = -m
	}
	return d <= rtol*m+1e-12
}

// TestEstimateCLIModelPath prices a config.json given by path (text format).
func TestEstimateCLIModelPath(t *testing.T) {
	code, out, errs := runCLI(t, "estimate", "--model", filepath.Join("testdata", "estimate", "Qwen--Qwen3-8B_config.json"),
		"--version", "0.14.0", "--tp", "4", "--mode", "mixed", "--format", "text")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.HasPrefix(out, "mixed_step_ms: ") {
		t.Errorf("text output: %q", out)
	}
}

// TestEstimateCLIBadInput: bad input exits 1 with one line naming the flag
// or listing what is available.
func TestEstimateCLIBadInput(t *testing.T) {
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"--model", "Foo/Bar"}, []string{"--model", "Qwen/Qwen3-32B"}},
		{[]string{"--model", "Qwen/Qwen3-32B", "--system", "b300"}, []string{"--system", "h200_sxm"}},
		{[]string{"--model", "Qwen/Qwen3-32B", "--backend", "tgi"}, []string{"--backend"}},
		{[]string{"--model", "Qwen/Qwen3-32B", "--version", "9.9"}, []string{"9.9", "0.22.0"}},
		{[]string{"--model", "Qwen/Qwen3-32B", "--version", "0.22.0", "--tp", "3"}, []string{"--tp 3"}},
		{[]string{"--model", "Qwen/Qwen3-32B", "--isl", "0"}, []string{"--isl"}},
		{[]string{"--model", "Qwen/Qwen3-32B", "--isl", "100", "--prefix", "100"}, []string{"--prefix", "--isl"}},
		{[]string{"--model", "Qwen/Qwen3-32B", "--batch", "-2"}, []string{"--batch"}},
		{[]string{"--model", "Qwen/Qwen3-32B", "--mode", "fast"}, []string{"--mode"}},
		{[]string{"--model", "Qwen/Qwen3-32B", "--database-mode", "FAST"}, []string{"--database-mode"}},
		{[]string{"--model", "Qwen/Qwen3-32B", "--format", "yaml"}, []string{"--format"}},
		{[]string{"--model", "Qwen/Qwen3-30B-A3B", "--version", "0.22.0", "--tp", "4", "--moe-ep", "2"},
			[]string{"aicdb: --tp 4 × --dp 1 = 4 GPUs, but --moe-tp 1 × --moe-ep 2 = 2 for the MoE model Qwen/Qwen3-30B-A3B; pass --moe-ep 4\n"}},
	}
	for _, c := range cases {
		code, out, errs := runCLI(t, append([]string{"estimate"}, c.args...)...)
		if code != 1 {
			t.Errorf("%v: exit %d, want 1 (stderr %q)", c.args, code, errs)
			continue
		}
		if out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: want one stderr line and no stdout, got %q / %q", c.args, out, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("%v: stderr %q does not mention %q", c.args, errs, w)
			}
		}
	}
}
