package main

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkEvalPoint runs one `aicdb eval` command in process against a store
// initialised once under the test's temporary directory (the embedded h200_sxm
// data), after a first call that builds the perf-data snapshot: each iteration is
// the warm path of a single-point process (store open, snapshot read, model,
// queueing), without the executable's start-up. issue 10's target is ≤ 100 ms for
// the whole process; measure that with `farm-bench -- bin/aicdb eval …`.
func BenchmarkEvalPoint(b *testing.B) {
	if testing.Short() {
		b.Skip("initialises a store (seconds)")
	}
	db := filepath.Join(b.TempDir(), "e.sqlite")
	cli := func(args ...string) {
		b.Helper()
		var out, errb bytes.Buffer
		if code := run(context.Background(), append([]string{"aicdb", "--db", db}, args...), &out, &errb); code != 0 {
			b.Fatalf("%v: exit %d\n%s", args, code, errb.String())
		}
	}
	cli("init")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"qwen3-32b-vllm-tp4", []string{"eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm",
			"--tp", "4", "--isl", "4000", "--osl", "500", "--concurrency", "32"}},
		{"deepseek-v3-sglang-tp8-ep8", []string{"eval", "--model", "deepseek-ai/DeepSeek-V3", "--system", "h200_sxm",
			"--backend", "sglang", "--tp", "8", "--moe-ep", "8", "--isl", "4000", "--osl", "500", "--concurrency", "32"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			cli(c.args...) // builds the snapshot
			b.ReportAllocs()
			for b.Loop() {
				cli(c.args...)
			}
		})
	}
}
