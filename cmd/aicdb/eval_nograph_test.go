package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEvalSGLangDisableCUDAGraph: an SGLang --engine-config with
// --disable-cuda-graph is accepted with one stderr warning that decode timing
// (perf data measured with CUDA graphs) may be optimistic, and sizes the same
// --kv-capacity-tokens auto pool as without it: SGLang 0.5.x's default
// mem_fraction_static keeps the graph reserve whether graphs are captured or
// not, so a larger pool would be an optimistic guess.
func TestEvalSGLangDisableCUDAGraph(t *testing.T) {
	dir := t.TempDir()
	base := []string{"eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "sglang", "--tp", "2",
		"--concurrency", "8", "--isl", "1000", "--osl", "200", "--kv-capacity-tokens", "auto", "--format", "json"}
	run := func(text string) (float64, string) {
		t.Helper()
		p := filepath.Join(dir, "c.args")
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return evalKVPool(t, append(append([]string{}, base...), "--engine-config", p)...)
	}
	with, errs := run("--disable-cuda-graph --max-running-requests 64\n")
	without, quiet := run("--max-running-requests 64\n")
	want := "aicdb: warning: engine config: disable_cuda_graph: decode passes run without CUDA graphs, but the perf data was measured with them, so predicted decode times (ITL, TPOT) may be optimistic\n"
	if strings.Count(errs, want) != 1 || strings.Contains(quiet, "warning") {
		t.Errorf("stderr with the key %q, without %q: want the warning line once, only with it", errs, quiet)
	}
	if !(with > 0) || with != without {
		t.Errorf("kv_capacity_tokens %v with disable_cuda_graph, %v without: want the same pool", with, without)
	}
}
