package oracle_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/aicdb/aicdb/oracle"
)

// poissonScenario is the issue's `oracle run` yardstick: 10,000 requests (prompt 2048
// with a 512-token shared prefix given as a field, 256 output tokens), Poisson at
// 9.6 rps (~70 % of this engine's capacity), the bench engine and timing.
func poissonScenario(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"engine": {"backend": "vllm", "max_num_batched_tokens": 8192, "max_num_seqs": 256, "block_size": 16,
		"num_gpu_blocks": 40000, "enable_chunked_prefill": true, "long_prefill_token_threshold": 0,
		"enable_prefix_caching": true, "async_scheduling": false},
		"timing": {"kind": "linear", "base_ms": 8, "prefill_ms_per_token": 0.02, "decode_ms_per_row": 0.05, "ctx_ms_per_token": 0.00002},
		"requests": [`)
	rng := rand.New(rand.NewPCG(1, 2))
	t := 0.0
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id": "r%d", "arrival_ms": %.3f, "prompt_len": 2048, "prefix_group": 1, "prefix_len": 512, "max_tokens": 256}`, i, t)
		t += rng.ExpFloat64() * 1000 / 9.6
	}
	b.WriteString("]}")
	return b.Bytes()
}

// BenchmarkOracleRun10k is what `aicdb oracle run` does by default: read the scenario
// as a stream, simulate without the pass log, summarise.
func BenchmarkOracleRun10k(b *testing.B) { benchOracleRun(b, poissonScenario(10000)) }

// benchOracleRun times `aicdb oracle run` on scenario doc: read, simulate
// without the pass log or per-token times (SummaryOnly, as the CLI does for its
// summary), summarise.
func benchOracleRun(b *testing.B, doc []byte) {
	b.ReportAllocs()
	for b.Loop() {
		sc, err := oracle.ReadScenario(bytes.NewReader(doc))
		if err != nil {
			b.Fatal(err)
		}
		res, err := sc.Simulate(context.Background(), oracle.Options{SummaryOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := res.Summary(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadScenario10k is the streaming parse alone.
func BenchmarkReadScenario10k(b *testing.B) {
	doc := poissonScenario(10000)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := oracle.ReadScenario(bytes.NewReader(doc)); err != nil {
			b.Fatal(err)
		}
	}
}

// sglangPoissonScenario is poissonScenario's workload on an SGLang engine (chunk
// 8192, mixed chunk, page 16) with the overlap scheduler on or off (§3.2).
func sglangPoissonScenario(n int, overlap bool) []byte {
	vllm := poissonScenario(n)
	_, rest, _ := bytes.Cut(vllm, []byte(`"timing"`))
	e := fmt.Sprintf(`{"engine": {"backend": "sglang", "chunked_prefill_size": 8192, "max_prefill_tokens": 16384,
		"enable_mixed_chunk": true, "max_running_requests": 256, "enable_chunked_prefill": true, "block_size": 16,
		"num_gpu_blocks": 40000, "enable_prefix_caching": true, "async_scheduling": %t},
		"timing"`, overlap)
	return append([]byte(e), rest...)
}

// BenchmarkOracleSGLang10k is BenchmarkOracleRun10k on SGLang, overlap scheduler
// on (the default) and off: the per-request cost of the SGLang scheduler.
func BenchmarkOracleSGLang10k(b *testing.B) {
	for _, overlap := range []bool{true, false} {
		b.Run(fmt.Sprintf("overlap=%t", overlap), func(b *testing.B) { benchOracleRun(b, sglangPoissonScenario(10000, overlap)) })
	}
}
