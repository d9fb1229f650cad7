package calibrate

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/queueing"

	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/measure"
)

// TestResolveDisagg: a disaggregated silicon row maps onto the tandem point a
// sweep would store — pools from the prefill_* / decode_* columns, d_batch =
// concurrency / (d_workers · d_pp · d_dp), one expert-parallel size laying out
// both pools — or keeps a reason naming what is missing.
func TestResolveDisagg(t *testing.T) {
	res := refine.Resolved{MoE: true, DatabaseMode: "SILICON", GemmQuant: "fp8_block", KVCacheQuant: "fp8", FMHAQuant: "fp8", MoEQuant: "fp8_block", CommQuant: "half"}
	row := func(mut func(m *measure.Measurement)) Target {
		var r measure.Row
		m := &r.Measurement
		m.Model, m.System, m.Backend, m.Mode, m.ISL, m.OSL = "deepseek-ai/DeepSeek-R1", "b200_sxm", "trtllm", store.ModeDisagg, 8192, 1024
		m.PWorkers, m.PBatch, m.PTP, m.PPP, m.PDP = 2, 1, 1, 1, 4
		m.DWorkers, m.DBatch, m.DTP, m.DPP, m.DDP = 5, 74, 8, 1, 1
		m.MoETP, m.MoEEP, m.Concurrency, m.GemmQuant, m.MoEQuant = 1, 8, 370, "nvfp4", "nvfp4"
		mut(m)
		return (&Resolver{Ev: runEval{}}).resolveDisagg(Target{Row: r}, "deepseek-ai/DeepSeek-R1", "1.2.0rc5", res)
	}
	got := row(func(*measure.Measurement) {})
	want := store.PointInputs{Model: "deepseek-ai/DeepSeek-R1", System: "b200_sxm", Backend: "trtllm", Version: "1.2.0rc5",
		Mode: store.ModeDisagg, ISL: 8192, OSL: 1024, TP: 8, PP: 1, DP: 1, MoETP: 1, MoEEP: 4, Batch: 74, MaxNumSeqs: 74,
		DatabaseMode: "SILICON", GemmQuant: "nvfp4", KVCacheQuant: "fp8", FMHAQuant: "fp8", MoEQuant: "nvfp4", CommQuant: "half",
		PWorkers: 2, PBatch: 1, PTP: 1, PPP: 1, PDP: 4, DWorkers: 5, DBatch: 74, DTP: 8, DPP: 1, DDP: 1, Evaluator: "linear-test"}
	if got.Reason != "" || got.In != want {
		t.Fatalf("resolved:\n got %+v (%q)\nwant %+v", got.In, got.Reason, want)
	}
	for _, tc := range []struct {
		mut  func(m *measure.Measurement)
		want string
	}{
		{func(m *measure.Measurement) { m.PWorkers, m.DWorkers = 0, 0 }, "disaggregated deployment without its worker counts (prefill_num_workers / decode_num_workers not stated): the tandem needs them"},
		{func(m *measure.Measurement) { m.Concurrency = 371 }, "concurrency 371 is not a multiple of decode workers · pp · dp = 5"},
		{func(m *measure.Measurement) { m.Prefix = 100 }, "prefix 100: the disaggregated tandem does not model prefix caching yet"},
	} {
		if got := row(tc.mut); got.Reason != tc.want {
			t.Errorf("reason %q, want %q", got.Reason, tc.want)
		}
	}
	// The resolver's assumed MTP drafts on both pools, and its acceptance is
	// validated with the rest of the point.
	r := got.Row
	mtp := (&Resolver{Ev: runEval{}, NextN: 1, NextNAccepted: 0.85}).resolveDisagg(Target{Row: r}, "deepseek-ai/DeepSeek-R1", "1.2.0rc5", res)
	if want.NextN, want.NextNAccepted = 1, 0.85; mtp.Reason != "" || mtp.In != want {
		t.Errorf("nextn 1 accepted 0.85:\n got %+v (%q)\nwant %+v", mtp.In, mtp.Reason, want)
	}
	bad := (&Resolver{Ev: runEval{}, NextN: 1, NextNAccepted: 2}).resolveDisagg(Target{Row: r}, "deepseek-ai/DeepSeek-R1", "1.2.0rc5", res)
	if wantR := "point: nextn 1, nextn_accepted 2: want nextn ≥ 0 and 0 ≤ nextn_accepted ≤ nextn"; bad.Reason != wantR {
		t.Errorf("nextn 1 accepted 2: reason %q, want %q", bad.Reason, wantR)
	}
}

// runEval is linearEval with the RunEvaluator method.
type runEval struct{ linearEval }

func (r runEval) QuantitativeRun(ctx context.Context, in store.PointInputs, run queueing.FiniteRun) (store.Quantitative, error) {
	return r.QuantitativeRunAdjusted(ctx, in, refine.Identity(), run)
}

// TestResolveDisaggRun: a disaggregated silicon row is predicted as the
// benchmark run that produced it, on the whole deployment (one tandem: 20·C
// requests after 2·C warm-up), and its point says so in its evaluator; under
// --run steady it stays the steady state.
func TestResolveDisaggRun(t *testing.T) {
	res := refine.Resolved{MoE: true, DatabaseMode: "SILICON", GemmQuant: "fp8_block", KVCacheQuant: "fp8", FMHAQuant: "fp8", MoEQuant: "fp8_block", CommQuant: "half"}
	var r measure.Row
	m := &r.Measurement
	m.Format, m.Model, m.System, m.Backend, m.Mode, m.ISL, m.OSL = measure.FormatAICSilicon, "deepseek-ai/DeepSeek-R1", "b200_sxm", "sglang", store.ModeDisagg, 8192, 1024
	m.PWorkers, m.PBatch, m.PTP, m.DWorkers, m.DTP, m.MoETP, m.MoEEP, m.Concurrency = 1, 1, 8, 1, 8, 1, 8, 64
	for _, steady := range []bool{false, true} {
		rs := &Resolver{Ev: runEval{}}
		if steady {
			rs.Run = RunSteady
		}
		tg := rs.resolveDisagg(Target{Row: r}, m.Model, "0.5.8", res)
		rs.benchmarkRun(&tg, 1)
		switch {
		case tg.Reason != "":
			t.Fatalf("reason %q", tg.Reason)
		case steady && (tg.Run != nil || tg.In.Evaluator != "linear-test"):
			t.Errorf("--run steady: run %+v, evaluator %q; want the steady state", tg.Run, tg.In.Evaluator)
		case !steady && (tg.Run == nil || *tg.Run != queueing.FiniteRun{Requests: 1280, Warmup: 128} || tg.In.Evaluator != "linear-test+run:finite:n=1280,warmup=128"):
			t.Errorf("benchmark run %+v, evaluator %q; want 1280 requests after 128 on the whole deployment", tg.Run, tg.In.Evaluator)
		}
	}
	// --run desync: the tandem has no desynchronised run, so a disaggregated row
	// keeps the locked one; an aggregated row's run is marked desync.
	rs := &Resolver{Ev: runEval{}, Run: RunDesync}
	tg := rs.resolveDisagg(Target{Row: r}, m.Model, "0.5.8", res)
	if rs.benchmarkRun(&tg, 1); tg.Run == nil || tg.Run.Desync || tg.In.Evaluator != "linear-test+run:finite:n=1280,warmup=128" {
		t.Errorf("--run desync, disaggregated: run %+v, evaluator %q; want the locked run", tg.Run, tg.In.Evaluator)
	}
	agg := Target{Row: r, In: store.PointInputs{Mode: store.ModeAgg, Evaluator: "ev"}}
	agg.Row.Measurement.Mode, agg.Row.Measurement.Concurrency = store.ModeAgg, 16
	if rs.benchmarkRun(&agg, 1); agg.Run == nil || !agg.Run.Desync || agg.In.Evaluator != "ev+run:finite:n=320,warmup=32,desync" {
		t.Errorf("--run desync, aggregated: run %+v, evaluator %q; want 320 requests after 32, desync", agg.Run, agg.In.Evaluator)
	}
}

// TestResolveDisaggPools: under the aiconfigurator profile a disaggregated row
// records the pools' engines as the generator deploys them (prefill budget
// isl + 1500 at running cap p_batch with the overlap scheduler off; decode
// budget = its batch), as a sweep's row would; under defaults it keeps the
// original rule (no recorded engine).
func TestResolveDisaggPools(t *testing.T) {
	res := refine.Resolved{DatabaseMode: "SILICON", GemmQuant: "fp8", KVCacheQuant: "fp8", FMHAQuant: "fp8", CommQuant: "half"}
	var r measure.Row
	m := &r.Measurement
	m.Format, m.Model, m.System, m.Backend, m.Mode, m.ISL, m.OSL = measure.FormatAICSilicon, "meta-llama/Llama-3.1-70B", "b200_sxm", "trtllm", store.ModeDisagg, 8192, 1024
	m.PWorkers, m.PBatch, m.PTP, m.DWorkers, m.DTP, m.Concurrency = 2, 1, 4, 1, 8, 64
	for _, profile := range []string{ProfileAIConfigurator, ProfileDefaults} {
		rs := &Resolver{Ev: runEval{}, Profile: profile}
		tg := rs.resolveDisagg(Target{Row: r}, m.Model, "1.2.0rc5", res)
		rs.deployedPools(&tg, nil)
		if tg.Reason != "" {
			t.Fatalf("%s: reason %q", profile, tg.Reason)
		}
		if profile == ProfileDefaults {
			if tg.In.Engine != "" || tg.In.EngineProfile != "" {
				t.Errorf("defaults: engine %q profile %q, want the original rule", tg.In.Engine, tg.In.EngineProfile)
			}
			continue
		}
		pr, _, err := refine.PointResolved(tg.In)
		if err != nil || pr.Prefill == nil || pr.Decode == nil || tg.In.EngineProfile != ProfileAIConfigurator {
			t.Fatalf("aiconfigurator: %+v %v (profile %q)", pr, err, tg.In.EngineProfile)
		}
		p, d := pr.Prefill, pr.Decode
		if p.MaxNumTokens != 9696 || p.MaxBatchSize != 1 || p.AsyncScheduling || d.MaxNumTokens != 64 || d.MaxBatchSize != 64 || !d.AsyncScheduling {
			t.Errorf("pools: prefill max_num_tokens %d batch %d overlap %v; decode %d / %d / %v; want 9696 / 1 / off and 64 / 64 / on",
				p.MaxNumTokens, p.MaxBatchSize, p.AsyncScheduling, d.MaxNumTokens, d.MaxBatchSize, d.AsyncScheduling)
		}
	}
}
