package queueing

import (
	"math"
	"slices"

	"github.com/aicdb/aicdb/queueing/workload"
)

// ClientPhases returns the first-arrival offsets (ms after the stages) of the C
// clients of stagger phase `phase` (1-based) spread over spreadMs: C independent
// draws, uniform on [0, spreadMs), from a splitmix64 stream seeded by the phase,
// sorted so that client c's first request is the c-th to arrive (the clients are
// exchangeable; the oracle's closed-loop driver takes non-decreasing starts).
// spreadMs ≤ 0 or phase < 1 is the burst: every offset 0.
//
// Desynchronised clients have independent phases on their request cycle, not
// evenly spaced ones. An even spacing is itself a fixed point of a fixed-shape
// closed loop: no two prompts ever meet, so a prefill pool at utilisation 0.6
// never queues (B200 Llama-3.1-70B fp8 tp 8 on vLLM, C 64, isl 8192: steady TTFT
// 217 ms evenly spaced, 339 ms from random phases, 570 ms locked; docs/validation.md
// Round 11). The draws are the model's and the oracle gate's alike (Window.Phase).
func ClientPhases(C, phase int, spreadMs float64) []float64 {
	out := make([]float64, max(C, 0))
	if phase < 1 || !(spreadMs > 0) || math.IsInf(spreadMs, 0) {
		return out
	}
	// Each phase's stream starts at a hashed seed: consecutive seeds would make
	// phase i+1's draws phase i's shifted by one (nearly the same clients).
	x := workload.Mix64(uint64(phase))
	for c := range out {
		out[c] = float64(workload.SplitMix64(&x)>>11) / (1 << 53) * spreadMs
	}
	slices.Sort(out)
	return out
}
