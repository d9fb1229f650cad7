package perfdb

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// h200PassTiming is a PassTiming on the embedded h200 vLLM 0.22.0 data
// (Qwen3-32B, tp 8): real kernel tables behind the cache.
func h200PassTiming(tb testing.TB) *PassTiming {
	tb.Helper()
	d, err := LoadEmbedded(context.Background(), "h200_sxm", "vllm", "0.22.0")
	if err != nil {
		tb.Fatal(err)
	}
	m, err := EmbeddedModel("Qwen/Qwen3-32B")
	if err != nil {
		tb.Fatal(err)
	}
	e, err := NewEstimator(d, m, Config{TP: 8, MoEEP: 8})
	if err != nil {
		tb.Fatal(err)
	}
	pt, err := NewPassTiming(e)
	if err != nil {
		tb.Fatal(err)
	}
	return pt
}

// BenchmarkQuantitativeVLLMPerfData is queueing's BenchmarkQuantitativeVLLM
// point (vLLM C = 32, isl 4096, osl 256, budget 8192, the default options)
// priced by a warm PassTiming on real perf data (h200, Qwen3-32B, tp 8): the
// cost of one quantitative point through the pricing cache, every pass shape
// already priced once.
func BenchmarkQuantitativeVLLMPerfData(b *testing.B) {
	pt := h200PassTiming(b)
	e, _ := engine.Defaults(engine.VLLM, "")
	e.MaxNumBatchedTokens = 8192
	w := workload.Spec{ISL: 4096, OSL: 256, Concurrency: 32}
	ctx := context.Background()
	if _, err := queueing.Quantitative(ctx, w, e, pt); err != nil { // warm the cache
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := queueing.Quantitative(ctx, w, e, pt); err != nil {
			b.Fatal(err)
		}
	}
}
