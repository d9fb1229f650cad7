package disagg

import (
	"context"
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestPropertyScreeningLoAndFinite: over random tandems (pools, caps, decode KV,
// bandwidth, connector, backend) the quantitative tier finishes with finite
// columns, every steady TTFT is at least the screening lower bound (stage + the
// prompt's pure prefill), and the closed-loop throughput of each start obeys
// X ≤ C / (min E2E + turnaround).
func TestPropertyScreeningLoAndFinite(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		be := rapid.SampledFrom([]engine.Backend{engine.VLLM, engine.TRTLLM, engine.SGLang}).Draw(rt, "backend")
		e, err := engine.Defaults(be, "")
		if err != nil {
			rt.Fatal(err)
		}
		e.AsyncScheduling = e.AsyncScheduling && rapid.Bool().Draw(rt, "async")
		e.StageMs = float64(rapid.IntRange(0, 3).Draw(rt, "stage"))
		isl := rapid.IntRange(64, 3000).Draw(rt, "isl")
		osl := rapid.IntRange(1, 40).Draw(rt, "osl")
		c := Config{
			Prefill: Pool{Engine: e, Timing: timing.Linear{BaseMs: rapid.Float64Range(1, 40).Draw(rt, "pbase"), PrefillMsPerToken: 0.01},
				Workers: rapid.IntRange(1, 3).Draw(rt, "nP"), InFlightCap: rapid.IntRange(0, 4).Draw(rt, "kappa")},
			Decode: Pool{Engine: e, Timing: timing.Linear{BaseMs: rapid.Float64Range(1, 10).Draw(rt, "dbase"), DecodeMsPerRow: 0.1},
				Workers: rapid.IntRange(1, 3).Draw(rt, "nD"), BatchCap: rapid.IntRange(0, 8).Draw(rt, "dcap")},
			Fabric:          Fabric{InterNodeGBps: rapid.Float64Range(0.5, 50).Draw(rt, "bw")},
			KVBytesPerToken: 1e5,
			Push:            rapid.Bool().Draw(rt, "push"),
			HandoffInTTFT:   rapid.Bool().Draw(rt, "handoff"),
		}
		if n := rapid.IntRange(0, 6).Draw(rt, "kvreq"); n > 0 {
			c.Decode.KVCapacityTokens = n*(isl+osl) + e.BlockSize // a block of slack: vLLM allocates whole blocks
		}
		w := workload.Spec{ISL: isl, OSL: osl, Concurrency: rapid.IntRange(1, 12).Draw(rt, "C")}
		c.Decode.KVCapacityTokens = deadlockFreeKV(e, c.Decode.KVCapacityTokens, isl, osl, w.Concurrency)
		q, err := Quantitative(context.Background(), w, c, Options{WindowGenerations: 4})
		if err != nil {
			rt.Fatal(err)
		}
		for k, v := range q.Columns(1) {
			if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0) || f < 0) {
				rt.Fatalf("column %s = %v", k, f)
			}
		}
		s, err := Screening(w, c)
		if err != nil {
			rt.Fatal(err)
		}
		if lo, min := s.TTFTSteadyP99Lo, q.TTFTSteady.Min(); lo > min*(1+1e-9) {
			rt.Fatalf("screening lo %v > tandem min TTFT %v", lo, min)
		}
		for _, x := range []float64{q.BurstThroughputRPS, q.StaggeredThroughputRPS} {
			if bound := float64(w.Concurrency) / (q.E2E.Min() + w.TurnaroundMs) * 1000; x > bound*(1+1e-6) {
				rt.Fatalf("X %v above C/min E2E %v", x, bound)
			}
		}
	})
}
