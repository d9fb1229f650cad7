package gate

import (
	"context"
	"fmt"
	"math"

	"github.com/aicdb/aicdb/disagg"
	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing"
)

// DisaggFiniteFamily is a closed-loop disaggregated family gated as one
// benchmark run (disagg.QuantitativeFinite against DisaggSim.RunFiniteLoop): how
// measured disaggregated rows are predicted.
type DisaggFiniteFamily struct {
	DisaggFamily
	Run         queueing.FiniteRun
	ClientRTTMs float64
}

// DisaggFiniteFamilies returns every closed-loop family of DisaggFamilies as a
// run of 20·C requests under the default client round trip, and the 1P1D ones
// also under the exact boundary semantics (round trip 0, "· burst"), plus the
// silicon rows' shape: a prefill worker that runs one request at a time (the
// generator's prefill max_batch_size 1) behind a burst; and each 1P1D family as
// open-loop runs (a Poisson rate, the rate under a bound, every request at once).
func DisaggFiniteFamilies() []DisaggFiniteFamily {
	var out []DisaggFiniteFamily
	add := func(f DisaggFamily, rtt float64, tag string) {
		run := queueing.FiniteRun{Requests: finiteRounds * f.Spec.Concurrency}
		f.Name += fmt.Sprintf(" · finite n=%d%s", run.Requests, tag)
		out = append(out, DisaggFiniteFamily{DisaggFamily: f, Run: run, ClientRTTMs: rtt})
	}
	for _, f := range DisaggFamilies() {
		if f.Spec.Concurrency <= 0 {
			continue
		}
		add(f, queueing.DefaultClientRTTMs, "")
		if f.Config.Prefill.Workers == 1 && f.Config.Decode.Workers == 1 {
			add(f, 0, " · burst")
		}
	}
	// Open-loop runs (queueing.FiniteRun with Open) on the 1P1D deployments: Poisson
	// sends at openLoad × the tandem's steady closed-loop throughput, the same
	// under a bound of C/2, 2·C requests at once, and a linear ramp from ¼ to 1.5 ×
	// that rate (vllm bench serve --ramp-up-strategy linear).
	for _, f := range DisaggFamilies() {
		if f.Spec.Concurrency <= 0 || f.Config.Prefill.Workers != 1 || f.Config.Decode.Workers != 1 {
			continue
		}
		rate := math.NaN()
		if r, err := disagg.Quantitative(context.Background(), f.Spec, f.Config, disagg.Options{NoMultiStability: true}); err == nil {
			rate = math.Round(openLoad*r.ThroughputRPS*100) / 100
		}
		for _, run := range []queueing.FiniteRun{
			{Requests: openRequests, Open: true, RateRPS: rate},
			{Requests: openRequests, Open: true, RateRPS: rate, MaxConcurrency: max(f.Spec.Concurrency/2, 1)},
			{Requests: 2 * f.Spec.Concurrency, Open: true},
			rampRun(rate, queueing.RampLinear),
		} {
			g := f
			g.Name += " · " + run.Label()
			out = append(out, DisaggFiniteFamily{DisaggFamily: g, Run: run, ClientRTTMs: queueing.DefaultClientRTTMs})
		}
	}
	for _, e := range []struct {
		name string
		f    DisaggFamily
	}{
		{"vllm", DisaggFamily{Spec: closed(8192, 256, 0, 16), Config: tandemConfig(1, 1, vllm(16384, 256), 50)}},
		{"trtllm", DisaggFamily{Spec: closed(8192, 256, 0, 16), Config: tandemConfig(1, 1, trtEngine(), 50)}},
		{"sglang", DisaggFamily{Spec: closed(8192, 256, 0, 16), Config: tandemConfig(1, 1, sglEngine(), 50)}},
	} {
		f := e.f
		f.Config.Prefill.BatchCap = 1
		f.Name = "1P1D " + e.name + " prefill cap 1 c16 isl8192 osl256 50GB/s"
		add(f, queueing.DefaultClientRTTMs, "")
	}
	return out
}

// RunDisaggFiniteFamily evaluates f with the tandem's finite run and with the
// DES's, both measured over every request of the run (generation 0 the
// transient, throughput N over the span from 0 to the last completion).
func RunDisaggFiniteFamily(ctx context.Context, f DisaggFiniteFamily) DisaggRow {
	rep, err := disagg.QuantitativeFinite(ctx, f.Spec, f.Config, f.Run, f.ClientRTTMs)
	return disaggRow(f.DisaggFamily, rep, err, func() (Metrics, DisaggExtra, error) { return runDisaggFiniteOracle(ctx, f) })
}

func runDisaggFiniteOracle(ctx context.Context, f DisaggFiniteFamily) (Metrics, DisaggExtra, error) {
	w := f.Spec
	if f.Run.Open { // the DES deployment sized for what can be in flight
		w.Concurrency = f.Run.Requests
		if f.Run.MaxConcurrency > 0 {
			w.Concurrency = f.Run.MaxConcurrency
		}
	}
	cfg, err := DisaggConfig(w, f.Config)
	if err != nil {
		return Metrics{}, DisaggExtra{}, err
	}
	shape := shapeOf(w) // no prefix: the tandem refuses one
	d, err := oracle.NewDisagg(cfg)
	if err != nil {
		return Metrics{}, DisaggExtra{}, err
	}
	var res *oracle.DisaggResult
	if f.Run.Open {
		res, err = d.RunOpenRun(ctx, oracle.OpenRun{Shape: shape, Run: f.Run, TurnaroundMs: w.TurnaroundMs, ClientRTTMs: f.ClientRTTMs})
	} else {
		res, err = d.RunFiniteLoop(ctx, oracle.FiniteLoop{Shape: shape, Clients: w.Concurrency, Requests: f.Run.Requests,
			TurnaroundMs: w.TurnaroundMs, ClientRTTMs: f.ClientRTTMs})
	}
	if err != nil {
		return Metrics{}, DisaggExtra{}, err
	}
	if len(res.Requests) != f.Run.Requests {
		return Metrics{}, DisaggExtra{}, fmt.Errorf("%d requests recorded, want %d", len(res.Requests), f.Run.Requests)
	}
	var trans []oracle.DisaggRecord
	end := 0.0
	for _, r := range res.Requests {
		if r.Generation == 0 {
			trans = append(trans, r)
		}
		end = math.Max(end, r.FinishMs)
	}
	return disaggMeasure([][]oracle.DisaggRecord{res.Requests}, trans, float64(f.Run.Requests)/end*1000)
}

// RunDisaggFinite evaluates every finite family; an error stays in its row.
func RunDisaggFinite(ctx context.Context, fams []DisaggFiniteFamily) []DisaggRow {
	rows := make([]DisaggRow, 0, len(fams))
	for _, f := range fams {
		rows = append(rows, RunDisaggFiniteFamily(ctx, f))
	}
	return rows
}
