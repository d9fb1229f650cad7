package gate

import (
	"context"
	"math"

	"github.com/aicdb/aicdb/queueing"
)

// openBase names the closed-loop families whose engines and shapes are gated as
// open-loop benchmark runs: each backend's calendar, async scheduling, a prefix,
// W2 shapes, TensorRT-LLM MTP, SGLang EAGLE.
var openBase = []string{
	"vllm/c8 isl2048 osl256 b8192",
	"vllm/c32 isl2048 osl256 async",
	"vllm/c16 isl4096 prefix2048 osl256 b8192",
	"vllm/c32 W2 isl256–8192 osl16–1024 b4096",
	"trtllm/c16 isl2048 osl256 defaults",
	"trtllm/c16 isl2048 osl256 mtp1 a0.85",
	"sglang/c16 isl2048 osl256 defaults",
	"sglang/c16 isl2048 osl256 eagle1 a0.85 kv",
}

// openSpacedBase are the bases also gated with bursty gamma sends (shape ½, vllm
// bench serve --burstiness 0.5), constant sends (AIPerf --arrival-pattern
// constant) and ramped rates (vllm bench serve --ramp-up-strategy: linear, and
// exponential with bursty gaps under a bound; from ¼ to 1.5 × the rate, so the
// end outruns the engine and a queue builds late): each backend's defaults.
var openSpacedBase = []string{
	"vllm/c8 isl2048 osl256 b8192",
	"trtllm/c16 isl2048 osl256 defaults",
	"sglang/c16 isl2048 osl256 defaults",
}

// openRequests is the gated open runs' length.
const openRequests = 160

// openLoad is the offered load of the gated rates: this fraction of the
// family's own closed-loop capacity at its C (the model's steady throughput), so
// queues form without growing without bound.
const openLoad = 0.8

// OpenFiniteFamilies returns the open-loop benchmark-run gate families
// (queueing.FiniteRun with Open, path 0; oracle.RunOpenRun): each of openBase at a
// Poisson rate of openLoad × its closed-loop capacity, the same rate with at most
// C/2 requests in flight (the client's semaphore binds), and every request at
// once (rate inf: 4·C requests, C where the family sizes a KV pool for C), and
// for openSpacedBase the rate with gamma and with constant sends and two ramps,
// under the default client round trip.
func OpenFiniteFamilies() []FiniteFamily {
	var out []FiniteFamily
	for _, f := range baseFamilies() {
		if !containsName(openBase, f.Name) {
			continue
		}
		rate := math.NaN()
		if r, err := queueing.Quantitative(context.Background(), f.Spec, f.Engine, f.Timing); err == nil {
			rate = math.Round(openLoad*r.ThroughputRPS*100) / 100
		}
		f.ClientRTTMs = queueing.DefaultClientRTTMs
		once := 4 * f.Spec.Concurrency
		if f.Engine.KVCapacityTokens > 0 {
			once = f.Spec.Concurrency // the family's pool is sized for its C
		}
		runs := []queueing.FiniteRun{
			{Requests: openRequests, Open: true, RateRPS: rate},
			{Requests: openRequests, Open: true, RateRPS: rate, MaxConcurrency: max(f.Spec.Concurrency/2, 1)},
			{Requests: once, Open: true},
		}
		if containsName(openSpacedBase, f.Name) {
			bursty := rampRun(rate, queueing.RampExponential)
			bursty.GammaShape, bursty.MaxConcurrency = 0.5, max(f.Spec.Concurrency/2, 1)
			runs = append(runs, queueing.FiniteRun{Requests: openRequests, Open: true, RateRPS: rate, GammaShape: 0.5},
				queueing.FiniteRun{Requests: openRequests, Open: true, RateRPS: rate, Constant: true},
				rampRun(rate, queueing.RampLinear), bursty)
		}
		for _, run := range runs {
			d := f
			d.Name += " · " + run.Label()
			out = append(out, FiniteFamily{d, run})
		}
	}
	return out
}

func containsName(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// rampRun is the gate's ramped open run about rate: openRequests requests from
// ¼ to 1.5 × the rate (rounded to 0.01 rps), so the end outruns the engine and a
// queue builds late.
func rampRun(rate float64, strategy string) queueing.FiniteRun {
	return queueing.FiniteRun{Requests: openRequests, Open: true, RateRPS: math.Round(rate*25) / 100, Ramp: strategy,
		RampEndRPS: math.Round(rate*150) / 100}
}
