package queueing

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// BenchmarkQuantitativeKVPressure: the KV-pressured point — C = 64, isl
// 8192, osl 256, the KV pool half of the running set's C·(isl + osl) — for the vLLM
// (recompute preemption, V-R6) and SGLang (reservation/retraction, S-R4/S-R5)
// defaults, with Linear and a warm cached timing, under the default options (the
// stagger mixture) and the burst alone. Budget: ≤ 5 ms per point.
func BenchmarkQuantitativeKVPressure(b *testing.B) {
	w := workload.Spec{ISL: 8192, OSL: 256, Concurrency: 64}
	for _, backend := range []engine.Backend{engine.VLLM, engine.SGLang} {
		e, _ := engine.Defaults(backend, "")
		e.KVCapacityTokens = w.Concurrency * (w.ISL + w.OSL) / 2
		for _, c := range []struct {
			name string
			t    timing.Timing
		}{{"linear", benchLin}, {"cached", &memo{t: benchLin, m: map[memoKey]float64{}}}} {
			for _, o := range []struct {
				name string
				o    Options
			}{{"defaults", DefaultOptions()}, {"burst", Options{}}} {
				b.Run(string(backend)+"/"+c.name+"/"+o.name, func(b *testing.B) {
					if _, err := QuantitativeWith(context.Background(), w, e, c.t, o.o); err != nil { // warm the cache
						b.Fatal(err)
					}
					b.ReportAllocs()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if _, err := QuantitativeWith(context.Background(), w, e, c.t, o.o); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}
