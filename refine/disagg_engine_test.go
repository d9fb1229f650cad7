package refine

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/engineconf"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/store"
)

// disaggPoint enumerates the one disaggregated row p1×tp1 → d1×tp1 (decode
// batch 16, isl 4000, osl 500) of Qwen3-32B on h200_sxm under profile and the
// engine config text (none when ""), with the embedded perf data.
func disaggPoint(t *testing.T, ev *PerfdbEvaluator, backend, profile, text string) store.PointInputs {
	t.Helper()
	spec := SweepSpec{Model: "Qwen/Qwen3-32B", System: "h200_sxm", Backend: backend, TotalGPUs: 2, ISL: 4000, OSL: 500,
		TPs: []int{1}, Modes: []string{store.ModeDisagg}, DecodeBatches: []int{16}, MaxWorkers: 1, EngineProfile: profile}
	if text != "" {
		cfg, err := engineconf.Parse(backend, []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		spec.EngineConfig = cfg
	}
	return onePoint(t, ev, spec)
}

// onePoint is the one point spec enumerates on ev.
func onePoint(t testing.TB, ev *PerfdbEvaluator, spec SweepSpec) store.PointInputs {
	t.Helper()
	pts := sweepPoints(t, ev, spec)
	if len(pts) != 1 {
		t.Fatalf("enumerate: %d points, want 1", len(pts))
	}
	return pts[0]
}

// sweepPoints resolves spec's model on ev and enumerates its points.
func sweepPoints(t testing.TB, ev *PerfdbEvaluator, spec SweepSpec) []store.PointInputs {
	t.Helper()
	r, err := ev.Resolve(context.Background(), spec.Model, spec.System, spec.Backend, "")
	if err != nil {
		t.Fatal(err)
	}
	pts, err := Enumerate(spec, r, ev.Name())
	if err != nil {
		t.Fatal(err)
	}
	return pts
}

// TestDisaggRowsRunRecordedEngines: a disaggregated row is evaluated with the
// prefill and decode engines it records (the profile's roles, the config file
// applied over both), not the backend's defaults: the tandem's engines are the
// recorded ones, and a config key that changes the prefill budget changes the
// row's TTFT (before, the row was priced the same with or without the file).
func TestDisaggRowsRunRecordedEngines(t *testing.T) {
	ctx := context.Background()
	ev := NewPerfdbEvaluator(embeddedSource{})
	for _, c := range []struct{ backend, text string }{
		{"vllm", "--max-num-batched-tokens 1024 --max-num-seqs 4\n"},
		{"trtllm", "max_num_tokens: 1024\nenable_chunked_prefill: true\n"},
	} {
		plain := disaggPoint(t, ev, c.backend, queueing.ProfileAIConfigurator, "")
		withCfg := disaggPoint(t, ev, c.backend, queueing.ProfileAIConfigurator, c.text)
		r, _, err := engineconf.DecodeResolved(withCfg.Engine)
		if err != nil || r.Prefill == nil || r.Decode == nil || r.Prefill.TokenBudget() != 1024 || r.Decode.TokenBudget() != 1024 {
			t.Fatalf("%s: recorded %+v / %+v (%v): want the config's budget 1024 on both pools", c.backend, r.Prefill, r.Decode, err)
		}
		_, cfg, _, err := ev.disaggSetup(ctx, withCfg, Identity())
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Prefill.Engine != *r.Prefill || cfg.Decode.Engine != *r.Decode {
			t.Errorf("%s: the tandem runs %+v / %+v, the row records %+v / %+v", c.backend, cfg.Prefill.Engine, cfg.Decode.Engine, *r.Prefill, *r.Decode)
		}
		if c.backend == "vllm" && (cfg.Decode.Engine.SeatCap() != 4 || cfg.Prefill.Engine.SeatCap() != 4) {
			t.Errorf("vllm: max_num_seqs 4 from the config: seat caps %d / %d", cfg.Prefill.Engine.SeatCap(), cfg.Decode.Engine.SeatCap())
		}
		a, err := ev.Screen(ctx, plain)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ev.Screen(ctx, withCfg)
		if err != nil {
			t.Fatal(err)
		}
		if a.P99Lo == b.P99Lo || a.V == b.V {
			t.Errorf("%s: the same TTFT p99 lower bound %v and columns with a 1024-token prefill budget (4 chunks of a 4000-token prompt) as without", c.backend, a.P99Lo)
		}
	}
}

// TestDisaggMemoryKeysSizePools: the config's memory keys size both pools of a
// disaggregated row through the agg rule (planKV): a fraction that leaves the
// decode worker room for fewer requests than its running cap bounds the
// tandem's decode pool (the row says so), one below the weights is an OOM, and
// a KV-tight TensorRT-LLM max_utilization decode pool is refused naming the
// key and the role.
func TestDisaggMemoryKeysSizePools(t *testing.T) {
	ctx := context.Background()
	ev := NewPerfdbEvaluator(embeddedSource{})
	in := disaggPoint(t, ev, "vllm", queueing.ProfileAIConfigurator, "")
	_, cfg, k, err := ev.disaggSetup(ctx, in, Identity())
	if err != nil || cfg.Decode.KVCapacityTokens != 0 || k.tight {
		t.Fatalf("default fraction: decode pool %d (tight %v), %v: want no bound", cfg.Decode.KVCapacityTokens, k.tight, err)
	}
	// 0.5 of 141 GiB (× 0.98) leaves a few GiB after Qwen3-32B's weights at
	// tp 1: room for fewer than 16 requests of 4500 tokens.
	in = disaggPoint(t, ev, "vllm", queueing.ProfileAIConfigurator, "--gpu-memory-utilization 0.5\n")
	_, cfg, k, err = ev.disaggSetup(ctx, in, Identity())
	if err != nil || !k.tight || cfg.Decode.KVCapacityTokens != k.capTokens || k.capTokens <= 0 {
		t.Fatalf("fraction 0.5: decode pool %d (plan %+v), %v: want the tight pool as the bound", cfg.Decode.KVCapacityTokens, k, err)
	}
	q, err := ev.Screen(ctx, in)
	if err != nil || !strings.HasPrefix(q.KV.Note, "screening: decode KV-tight (16 requests per decode worker at full length need ") {
		t.Errorf("fraction 0.5: screening %v, note %q", err, q.KV.Note)
	}
	in = disaggPoint(t, ev, "vllm", queueing.ProfileAIConfigurator, "--gpu-memory-utilization 0.05\n")
	if _, err := ev.Screen(ctx, in); !errors.Is(err, perfdb.ErrOOM) || !strings.HasPrefix(err.Error(), "disagg p1xtp1pp1dp1-d1xtp1pp1dp1 prefill pool: out of memory: ") {
		t.Errorf("fraction 0.05: %v, want the prefill pool's ErrOOM", err)
	}
	in = disaggPoint(t, ev, "trtllm", queueing.ProfileAIConfigurator,
		"kv_cache_config:\n  free_gpu_memory_fraction: 0.1\nscheduler_config:\n  capacity_scheduler_policy: MAX_UTILIZATION\n")
	_, _, _, err = ev.disaggSetup(ctx, in, Identity())
	if err == nil || !strings.Contains(err.Error(), "capacity_scheduler_policy max_utilization cannot apply to the decode role of a KV-tight pool") {
		t.Errorf("trtllm max_utilization, tight decode pool: %v", err)
	}
	// The sweep refuses it before storing anything.
	if cerr := ev.CheckDisagg(ctx, []store.PointInputs{in}); cerr == nil || err == nil || cerr.Error() != err.Error() {
		t.Errorf("CheckDisagg: %v, want the set-up's refusal", cerr)
	}
}

// BenchmarkScreenDisaggRow is the screening of one disaggregated sweep row on
// the embedded perf data (engines as recorded, both pools' KV sized):
// go test -run '^$' -bench ScreenDisaggRow -benchtime 200x ./refine
func BenchmarkScreenDisaggRow(b *testing.B) {
	ctx := context.Background()
	ev := NewPerfdbEvaluator(embeddedSource{})
	spec := SweepSpec{Model: "Qwen/Qwen3-32B", System: "h200_sxm", Backend: "vllm", TotalGPUs: 2, ISL: 4000, OSL: 500,
		TPs: []int{1}, Modes: []string{store.ModeDisagg}, DecodeBatches: []int{16}, MaxWorkers: 1}
	pt := onePoint(b, ev, spec)
	if _, err := ev.Screen(ctx, pt); err != nil { // loads the perf data
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := ev.Screen(ctx, pt); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCheckDisaggSeesEveryDecodeLoad: CheckDisagg refuses a config key that
// cannot apply to the decode pool of any row, not only of the first row of a
// pool shape. With max_batch_size 64 over a decode batch of 16, a decode
// worker of the two-worker row runs 32 requests, so its pool (fraction 0.25)
// is KV-tight while the one-worker row's is not; before, the check set up the
// one-worker row only and the sweep failed on the other mid-way.
func TestCheckDisaggSeesEveryDecodeLoad(t *testing.T) {
	ctx := context.Background()
	ev := NewPerfdbEvaluator(embeddedSource{})
	spec := SweepSpec{Model: "Qwen/Qwen3-32B", System: "h200_sxm", Backend: "trtllm", TotalGPUs: 3, ISL: 4000, OSL: 500,
		TPs: []int{1}, Modes: []string{store.ModeDisagg}, DecodeBatches: []int{16}, MaxWorkers: 2, EngineProfile: queueing.ProfileAIConfigurator}
	cfg, err := engineconf.Parse("trtllm", []byte("max_batch_size: 64\nkv_cache_config:\n  free_gpu_memory_fraction: 0.25\nscheduler_config:\n  capacity_scheduler_policy: MAX_UTILIZATION\n"))
	if err != nil {
		t.Fatal(err)
	}
	spec.EngineConfig = cfg
	pts := sweepPoints(t, ev, spec)
	var refused error
	for _, in := range pts {
		_, _, k, err := ev.disaggSetup(ctx, in, Identity())
		var re *roleKeyError
		switch {
		case in.DWorkers == 1 && (err != nil || k.tight):
			t.Fatalf("%s: tight %v, %v: want a one-worker row the pool holds", in.Parallel(), k.tight, err)
		case in.DWorkers == 2 && !errors.As(err, &re):
			t.Fatalf("%s: %v: want the max_utilization refusal", in.Parallel(), err)
		case in.DWorkers == 2 && refused == nil:
			refused = err
		}
	}
	if refused == nil {
		t.Fatal("no two-worker row")
	}
	if err := ev.CheckDisagg(ctx, pts); err == nil || err.Error() != refused.Error() {
		t.Errorf("CheckDisagg: %v\nwant the two-worker row's refusal %v", err, refused)
	}
}

// TestDisaggCalibrationApplies: a calibration covering a disaggregated row
// adjusts both pools' pass timing as it adjusts an aggregated worker's, and
// its per-request overhead once (the prefill engine's stage, which the tandem
// counts); before, the row was labelled calibrated and computed without it.
func TestDisaggCalibrationApplies(t *testing.T) {
	ctx := context.Background()
	ev := NewPerfdbEvaluator(embeddedSource{})
	in := disaggPoint(t, ev, "vllm", queueing.ProfileAIConfigurator, "")
	adj := PassAdjust{PrefillScale: 2, DecodeScale: 1.5, PassOverheadMs: 0.5, RequestOverheadMs: 7}
	_, c0, _, err := ev.disaggSetup(ctx, in, Identity())
	if err != nil {
		t.Fatal(err)
	}
	_, c1, _, err := ev.disaggSetup(ctx, in, adj)
	if err != nil {
		t.Fatal(err)
	}
	if c1.Prefill.Engine.StageMs != c0.Prefill.Engine.StageMs+7 || c1.Decode.Engine.StageMs != c0.Decode.Engine.StageMs {
		t.Errorf("stages %v / %v, want the prefill's +7 ms and the decode's unchanged (%v / %v)",
			c1.Prefill.Engine.StageMs, c1.Decode.Engine.StageMs, c0.Prefill.Engine.StageMs, c0.Decode.Engine.StageMs)
	}
	pass := &timing.Pass{Prefill: []timing.Chunk{{Tokens: in.ISL}}}
	p0, err0 := c0.Prefill.Timing.PassMs(pass)
	p1, err1 := c1.Prefill.Timing.PassMs(pass)
	if err0 != nil || err1 != nil || math.Abs(p1-(0.5+2*p0)) > 1e-9*p1 {
		t.Errorf("prefill pass %v → %v (%v, %v), want 0.5 + 2 × %v", p0, p1, err0, err1, p0)
	}
	dpass := &timing.Pass{Decode: []int{in.ISL}}
	d0, err0 := c0.Decode.Timing.PassMs(dpass)
	d1, err1 := c1.Decode.Timing.PassMs(dpass)
	if err0 != nil || err1 != nil || math.Abs(d1-(0.5+1.5*d0)) > 1e-9*d1 {
		t.Errorf("decode pass %v → %v (%v, %v), want 0.5 + 1.5 × %v", d0, d1, err0, err1, d0)
	}
	q0, err := ev.QuantitativeAdjusted(ctx, in, Identity())
	if err != nil {
		t.Fatal(err)
	}
	q1, err := ev.QuantitativeAdjusted(ctx, in, adj)
	if err != nil {
		t.Fatal(err)
	}
	if !(q1.V[store.QTTFTSteadyMean] > q0.V[store.QTTFTSteadyMean]+7) || !(q1.V[store.QTPOTMean] > q0.V[store.QTPOTMean]) {
		t.Errorf("calibrated TTFT/TPOT %v / %v, uncalibrated %v / %v: want both slower, TTFT by more than the 7 ms overhead",
			q1.V[store.QTTFTSteadyMean], q1.V[store.QTPOTMean], q0.V[store.QTTFTSteadyMean], q0.V[store.QTPOTMean])
	}
}

// TestCheckDisaggPrefillOOMNotDecodeKV: a disaggregated sweep of a model whose
// weights fit a worker only at tp 8 (Llama-3.1-405B in bf16 on H200) is not
// refused as "no decode worker's KV can hold one request": the check prices a
// prefill worker beside each decode tp, and before it took the first row of
// each decode tp, whose prefill tp 1 does not fit, so every decode tp looked
// KV-tight (DeepSeek-V3 on B200, sweep --mode disagg --total-gpus 16, was
// refused whole).
func TestCheckDisaggPrefillOOMNotDecodeKV(t *testing.T) {
	ctx := context.Background()
	ev := NewPerfdbEvaluator(embeddedSource{})
	spec := SweepSpec{Model: "meta-llama/Meta-Llama-3.1-405B", System: "h200_sxm", Backend: "vllm", TotalGPUs: 16, ISL: 1000, OSL: 100,
		TPs: []int{1, 8}, Modes: []string{store.ModeDisagg}, DecodeBatches: []int{8}, MaxWorkers: 1}
	pts := sweepPoints(t, ev, spec)
	if err := ev.CheckDisagg(ctx, pts); err != nil {
		t.Fatalf("CheckDisagg: %v; want the sweep accepted (prefill tp 8 beside decode tp 8 fits)", err)
	}
	// Only tp 1 on both sides: the decode worker cannot hold the model, refused.
	spec.TPs, spec.TotalGPUs = []int{1}, 2
	if err := ev.CheckDisagg(ctx, sweepPoints(t, ev, spec)); err == nil || !strings.Contains(err.Error(), "cannot hold one request") {
		t.Errorf("tp 1 only: %v; want the decode-KV refusal", err)
	}
}

// TestDisaggPrefillPoolQuantitative: a disaggregated row whose decode worker
// is KV-bound (Qwen3-32B on one H200, 512 requests of 1024 + 4096 tokens) keeps
// its prompts waiting on the prefill worker until their holds fill the prefill
// pool the row deploys. The tandem models that pool for vLLM and TensorRT-LLM
// (a held prompt keeps its blocks until its pull, V-P3, T-D1): the prompts wait
// for the prefill, TTFT in minutes (answered at TTFT ~0.4 s before the pool was
// checked, refused while it was only checked). (SGLang's is still checked, not
// modelled: disagg.TestPrefillHoldsChecked.)
func TestDisaggPrefillPoolQuantitative(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a perf-data evaluation")
	}
	ctx := context.Background()
	ev := NewPerfdbEvaluator(embeddedSource{})
	spec := SweepSpec{Model: "Qwen/Qwen3-32B", System: "h200_sxm", Backend: "vllm", TotalGPUs: 2, ISL: 1024, OSL: 4096,
		TPs: []int{1}, Modes: []string{store.ModeDisagg}, DecodeBatches: []int{512}, MaxWorkers: 1, EngineProfile: queueing.ProfileAIConfigurator}
	cols, err := ev.Quantitative(ctx, onePoint(t, ev, spec))
	if err != nil || !(cols.V[store.QTTFTSteadyMean] > 100e3) {
		t.Fatalf("vLLM: %v, TTFT mean %v: want the prompts waiting for the prefill pool (> 100 s)", err, cols.V[store.QTTFTSteadyMean])
	}
	spec.Backend = "trtllm"
	cols, err = ev.Quantitative(ctx, onePoint(t, ev, spec))
	if err != nil || !(cols.V[store.QTTFTSteadyMean] > 100e3) {
		t.Fatalf("TensorRT-LLM: %v, TTFT mean %v: want the prompts waiting for the prefill pool (> 100 s)", err, cols.V[store.QTTFTSteadyMean])
	}
}
