package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// BenchmarkTraceReplayMooncake runs `aicdb trace replay` in process on the Mooncake
// conversation sample (12,031 requests, imported once into a store under the test's
// temporary directory; skipped when ../shared is absent) with the vLLM engine of
// docs/traces.md (100,000 blocks of 16 tokens, budget 8192, 256 sequences, linear
// timing), per tier. Each iteration is one whole replay command: the trace read
// from the store, the reuse oracle (quantitative) or the DES, the summary and the
// per-request rows stored in one transaction. alloc_B/req is the allocation churn of
// one replay per request (B/op over the trace's 12,031 requests).
func BenchmarkTraceReplayMooncake(b *testing.B) {
	cli, _, eng := mooncakeStore(b)
	const requests = 12031
	for _, tier := range []string{"quantitative", "oracle"} {
		b.Run(tier, func(b *testing.B) {
			b.ReportAllocs()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				cli("trace", "replay", "conv", "--engine", eng, "--tier", tier)
			}
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/float64(b.N*requests), "alloc_B/req")
		})
	}
}

// mooncakeStore imports the Mooncake conversation sample as trace "conv" into a store
// under the benchmark's temporary directory (skipped when ../shared is absent) and
// writes the vLLM engine file of docs/traces.md beside it; it returns a function
// running aicdb on that store, the store's and the engine file's paths.
func mooncakeStore(b *testing.B) (cli func(args ...string), db, eng string) {
	src := "../../../shared/data/traces/mooncake/conversation_trace.jsonl"
	if _, err := os.Stat(src); err != nil {
		b.Skip("the Mooncake conversation sample is not in ../shared")
	}
	dir := b.TempDir()
	db = filepath.Join(dir, "t.sqlite")
	eng = filepath.Join(dir, "eng.json")
	if err := os.WriteFile(eng, []byte(`{"engine": {"backend": "vllm", "max_num_batched_tokens": 8192, "max_num_seqs": 256,
		"block_size": 16, "num_gpu_blocks": 100000, "enable_chunked_prefill": true, "long_prefill_token_threshold": 0,
		"enable_prefix_caching": true, "async_scheduling": false},
		"timing": {"kind": "linear", "base_ms": 8, "prefill_ms_per_token": 0.01, "decode_ms_per_row": 0.05, "ctx_ms_per_token": 0.00002}}`), 0o644); err != nil {
		b.Fatal(err)
	}
	cli = func(args ...string) {
		b.Helper()
		var out, errb bytes.Buffer
		if code := run(context.Background(), append([]string{"aicdb", "--db", db}, args...), &out, &errb); code != 0 {
			b.Fatalf("%v: exit %d\n%s", args, code, errb.String())
		}
	}
	cli("trace", "import", src, "--format", "mooncake", "--name", "conv")
	return cli, db, eng
}
