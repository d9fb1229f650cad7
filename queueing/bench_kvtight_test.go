package queueing

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/workload"
)

// kvTightPoint is the KV-tight regime of Qwen3-32B at tp 8, batch 1024 on h200_sxm
// as `aicdb eval` runs it (vLLM, isl 4000, osl 500, the aiconfigurator profile's
// budget batch + isl + 1500 and running cap batch, the memory model's pool of
// 3778464 tokens, which holds ~840 requests at full length), with a linear timing:
// every pass admits a prompt while ~300 requests wait, so the fast path never runs
// and each pass carries ~730 decode rows; the per-slot generation pattern never
// repeats (the slots rotate through the positions of a scheduler-state cycle of
// 4499 passes ≈ 6.4 generations). refine's BenchmarkQuantitativePerfDataKVTight is
// the sweep's row of that point at ctx 8000 with perf-data timing.
func kvTightPoint() (workload.Spec, engine.Spec) {
	w := workload.Spec{ISL: 4000, OSL: 500, Concurrency: 1024}
	e, _ := engine.Defaults(engine.VLLM, "")
	e.MaxNumBatchedTokens = 1024 + 4000 + 1500
	e.MaxNumSeqs = 1024
	e.KVCapacityTokens = 3778464
	return w, e
}

// BenchmarkQuantitativeKVTight is the quantitative tier of kvTightPoint under the
// default options (burst transient + 4 stagger phases) and the burst alone.
func BenchmarkQuantitativeKVTight(b *testing.B) {
	w, e := kvTightPoint()
	for _, o := range []struct {
		name string
		o    Options
	}{{"defaults", DefaultOptions()}, {"burst", Options{}}} {
		b.Run(o.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := QuantitativeWith(context.Background(), w, e, benchLin, o.o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuantitativeKVPreempting is a KV-tight point whose state never repeats:
// Qwen3-32B at tp 1 on h200_sxm's memory model (a pool of 250912 tokens), vLLM,
// 256 clients, isl = osl = 4000 — ~2.6 recompute preemptions per request (V-R6),
// long decode stretches on the fast path (~5M passes per evaluation under the
// default options); every run goes to its horizon.
func BenchmarkQuantitativeKVPreempting(b *testing.B) {
	w := workload.Spec{ISL: 4000, OSL: 4000, Concurrency: 256}
	e, _ := engine.Defaults(engine.VLLM, "")
	e.MaxNumBatchedTokens = 256 + 4000 + 1500
	e.MaxNumSeqs = 256
	e.KVCapacityTokens = 250912
	b.ReportAllocs()
	for b.Loop() {
		if _, err := QuantitativeWith(context.Background(), w, e, benchLin, DefaultOptions()); err != nil {
			b.Fatal(err)
		}
	}
}
