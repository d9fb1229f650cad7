package gate

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing"
)

// FiniteFamily is a closed-loop family gated as one benchmark run (burst start,
// Run.Requests requests in total, statistics over all of them): how measured rows
// are predicted (queueing.QuantitativeFinite against oracle.RunFiniteLoop).
type FiniteFamily struct {
	Family
	Run queueing.FiniteRun
}

// finiteRounds is the gated runs' length in requests per client (aiconfigurator's
// benchmark: 20).
const finiteRounds = 20

// finiteBase names the closed-loop families gated as finite runs: each backend's
// calendar, chunked and whole-prompt budgets, async scheduling, a prefix, W2 shapes,
// TensorRT-LLM MTP, SGLang EAGLE.
var finiteBase = []string{
	"vllm/c8 isl2048 osl256 b8192",
	"vllm/c64 isl512 osl128 b2048",
	"vllm/c8 isl1024 osl1024 b4096",
	"vllm/c16 isl8192 osl256 b2048 staircase",
	"vllm/c32 isl2048 osl256 async",
	"vllm/c16 isl4096 prefix2048 osl256 b8192",
	"vllm/c32 W2 isl256–8192 osl16–1024 b4096",
	"trtllm/c16 isl2048 osl256 defaults",
	"trtllm/c8 isl1024 osl512 overlap off",
	"trtllm/c16 isl2048 osl256 mtp1 a0.85",
	"trtllm/c32 isl4096 osl256 mtp3 a1.7 chunked t2048",
	"sglang/c16 isl2048 osl256 defaults",
	"sglang/c32 isl4096 osl256 chunk2048 mixed",
	"sglang/c16 isl2048 osl256 eagle1 a0.85 kv",
}

// FiniteFamilies returns the finite-run gate families: each of finiteBase as a run
// of 20·C requests, under the default client round trip and ("· burst") under the
// exact boundary semantics (round trip 0).
func FiniteFamilies() []FiniteFamily {
	var out []FiniteFamily
	for _, f := range baseFamilies() {
		if !slices.Contains(finiteBase, f.Name) {
			continue
		}
		run := queueing.FiniteRun{Requests: finiteRounds * f.Spec.Concurrency}
		d := f
		d.Name += fmt.Sprintf(" · finite n=%d", run.Requests)
		d.ClientRTTMs = queueing.DefaultClientRTTMs
		b := f
		b.Name += fmt.Sprintf(" · finite n=%d · burst", run.Requests)
		out = append(out, FiniteFamily{d, run}, FiniteFamily{b, run})
	}
	return out
}

// RunFinite evaluates finite-run families on both sides (closed runs, and open
// ones: OpenFiniteFamilies).
func RunFinite(ctx context.Context, fams []FiniteFamily) []Row {
	rows := make([]Row, 0, len(fams))
	for _, f := range fams {
		rows = append(rows, runFiniteFamily(ctx, f))
	}
	return rows
}

// runFiniteFamily measures both sides the same way: every request of the run is
// steady, the first min(C, N) (generation 0; an open run's first request) are the
// transient, throughput is N over the span from 0 to the last completion; the
// model's reported metrics must equal its own records'.
func runFiniteFamily(ctx context.Context, f FiniteFamily) Row {
	row := Row{Family: f.Family}
	fail := func(err error) Row {
		row.Err = err
		return row
	}
	w := f.Spec
	rep, err := queueing.QuantitativeFinite(ctx, w, f.Engine, f.Timing, queueing.Options{RecordTokenTimes: true, ClientRTTMs: f.ClientRTTMs}, f.Run)
	if err != nil {
		return fail(fmt.Errorf("model: %w", err))
	}
	var mrec []rec
	for _, r := range rep.Requests {
		mrec = append(mrec, rec{slot: r.Slot, gen: r.Generation, arrival: r.ArrivalMs, ttft: r.TTFTMs, e2e: r.E2EMs, tokens: r.TokenMs})
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
	res, err := runDESFinite(ctx, f)
	if err != nil {
		return fail(fmt.Errorf("oracle: %w", err))
	}
	var orec []rec
	for _, r := range res.Requests {
		orec = append(orec, rec{slot: r.Client, gen: r.Generation, arrival: r.ArrivalMs, ttft: r.TTFTMs, e2e: r.FinishMs - r.ArrivalMs, tokens: r.TokenTimesMs})
	}
	orc, err := finiteMetrics(orec, f.Run.Requests)
	if err != nil {
		return fail(fmt.Errorf("oracle: %w", err))
	}
	row.Model, row.Oracle = model, orc
	row.Resid, row.Failures = compare(model.values(), orc.values(), tolerances, metricNames)
	return row
}

// runDESFinite runs f's benchmark run on the DES: oracle.RunFiniteLoop, or for
// an open run oracle.RunOpenRun (its pool sized for what can be in flight).
func runDESFinite(ctx context.Context, f FiniteFamily) (*oracle.Result, error) {
	w := f.Spec
	inflight := w.Concurrency
	if f.Run.Open {
		inflight = f.Run.Requests
		if f.Run.MaxConcurrency > 0 {
			inflight = f.Run.MaxConcurrency
		}
	}
	eng, err := oracleEngine(f.Family, inflight)
	if err != nil {
		return nil, err
	}
	s, err := oracle.New(eng, f.Timing, oracle.Options{})
	if err != nil {
		return nil, err
	}
	if f.Run.Open {
		return s.RunOpenRun(ctx, oracle.OpenRun{Shape: shapeOf(w), Run: f.Run, TurnaroundMs: w.TurnaroundMs, ClientRTTMs: f.ClientRTTMs})
	}
	return s.RunFiniteLoop(ctx, oracle.FiniteLoop{Shape: shapeOf(w), Clients: w.Concurrency, Requests: f.Run.Requests,
		TurnaroundMs: w.TurnaroundMs, ClientRTTMs: f.ClientRTTMs})
}

// finiteMetrics measures a finite run's records: all n requests steady, generation
// 0 the transient, throughput n / last completion (the run starts at 0).
func finiteMetrics(rs []rec, n int) (Metrics, error) {
	if len(rs) != n {
		return Metrics{}, fmt.Errorf("%d requests recorded, want %d", len(rs), n)
	}
	var trans []rec
	end := 0.0
	for _, r := range rs {
		if r.gen == 0 {
			trans = append(trans, r)
		}
		end = math.Max(end, r.arrival+r.e2e)
	}
	all := make([]rec, len(rs))
	for i, r := range rs {
		r.slot = -1 // no per-slot spans: the run's throughput is set below
		all[i] = r
	}
	m, err := measure([][]rec{all}, trans, 0, 0)
	if err != nil {
		return m, err
	}
	m.ThroughputRPS = float64(n) / (end / 1000)
	return m, nil
}
