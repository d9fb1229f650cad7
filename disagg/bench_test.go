package disagg

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// benchConfig is 2P2D, roofline timing of a 32B-class model, isl 4000, osl 500,
// C = 32, a 50 GB/s NIC and a decode KV of 64 requests.
func benchConfig(b *testing.B) (workload.Spec, Config) {
	e, err := engine.Defaults(engine.VLLM, "")
	if err != nil {
		b.Fatal(err)
	}
	rf := timing.Roofline{BaseMs: 2, WeightsMs: 8, TokenMs: 0.004, AttnMsPerPair: 2e-8, KVMsPerToken: 2e-5}
	c := Config{
		Prefill:         Pool{Engine: e, Timing: rf, Workers: 2},
		Decode:          Pool{Engine: e, Timing: rf, Workers: 2, KVCapacityTokens: 64 * 4500},
		Fabric:          Fabric{InterNodeGBps: 50},
		KVBytesPerToken: 131072,
	}
	return workload.Spec{ISL: 4000, OSL: 500, Concurrency: 32}, c
}

// BenchmarkScreening: one tandem screening point (target ≤ 20 µs).
func BenchmarkScreening(b *testing.B) {
	w, c := benchConfig(b)
	var s Screener
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Screen(w, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkQuantitative: one tandem quantitative point, both starts (target ≤ 20 ms).
func BenchmarkQuantitative(b *testing.B) {
	w, c := benchConfig(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Quantitative(context.Background(), w, c, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
