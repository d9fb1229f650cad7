package gate

import (
	"context"
	"fmt"
	"math"

	"github.com/aicdb/aicdb/oracle"
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
// bench serve --burstiness 0.5) and constant sends (AIPerf --arrival-pattern
// constant): each backend's defaults.
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
// for openSpacedBase the rate with gamma and with constant sends, under the
// default client round trip.
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
			runs = append(runs, queueing.FiniteRun{Requests: openRequests, Open: true, RateRPS: rate, GammaShape: 0.5},
				queueing.FiniteRun{Requests: openRequests, Open: true, RateRPS: rate, Constant: true})
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

// runOpenFamily measures an open-run family on both sides as finite runs are
// measured (finiteMetrics: every request steady, the first one the transient,
// throughput N over the span to the last completion).
func runOpenFamily(ctx context.Context, f FiniteFamily) Row {
	row := Row{Family: f.Family}
	fail := func(err error) Row {
		row.Err = err
		return row
	}
	rep, err := queueing.QuantitativeFinite(ctx, f.Spec, f.Engine, f.Timing, queueing.Options{RecordTokenTimes: true, ClientRTTMs: f.ClientRTTMs}, f.Run)
	if err != nil {
		return fail(fmt.Errorf("model: %w", err))
	}
	var mrec []rec
	for _, r := range rep.Requests {
		mrec = append(mrec, rec{slot: 0, gen: r.Generation, arrival: r.ArrivalMs, ttft: r.TTFTMs, e2e: r.E2EMs, tokens: r.TokenMs})
	}
	fromRecords, err := finiteMetrics(mrec, f.Run.Requests)
	if err != nil {
		return fail(fmt.Errorf("model records: %w", err))
	}
	model := Metrics{
		TTFTMean: rep.TTFTSteady.Mean(), TTFTP50: rep.TTFTSteady.Quantile(0.5), TTFTP99: rep.TTFTSteady.Quantile(0.99),
		TransMean: rep.TTFTTransient.Mean(), TransMax: rep.TTFTTransient.Max(),
		ITLP50: rep.ITL.Quantile(0.5), ITLP99: rep.ITL.Quantile(0.99), TPOTMean: rep.TPOT.Mean(),
		TPOTP50: rep.TPOT.Quantile(0.5), TPOTP99: rep.TPOT.Quantile(0.99), ThroughputRPS: rep.ThroughputRPS,
	}
	if err := consistent(model, fromRecords); err != nil {
		return fail(fmt.Errorf("model: %w", err))
	}
	inflight := f.Run.Requests
	if f.Run.MaxConcurrency > 0 {
		inflight = f.Run.MaxConcurrency
	}
	eng, err := oracleEngine(f.Family, inflight)
	if err != nil {
		return fail(fmt.Errorf("oracle: %w", err))
	}
	s, err := oracle.New(eng, f.Timing, oracle.Options{})
	if err != nil {
		return fail(fmt.Errorf("oracle: %w", err))
	}
	res, err := s.RunOpenRun(ctx, oracle.OpenRun{Shape: shapeOf(f.Spec), Run: f.Run, TurnaroundMs: f.Spec.TurnaroundMs, ClientRTTMs: f.ClientRTTMs})
	if err != nil {
		return fail(fmt.Errorf("oracle: %w", err))
	}
	var orec []rec
	for _, r := range res.Requests {
		orec = append(orec, rec{slot: 0, gen: r.Generation, arrival: r.ArrivalMs, ttft: r.TTFTMs, e2e: r.FinishMs - r.ArrivalMs, tokens: r.TokenTimesMs})
	}
	orc, err := finiteMetrics(orec, f.Run.Requests)
	if err != nil {
		return fail(fmt.Errorf("oracle: %w", err))
	}
	row.Model, row.Oracle = model, orc
	row.Resid, row.Failures = compare(model.values(), orc.values(), tolerances, metricNames)
	return row
}
