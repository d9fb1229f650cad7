package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// embeddedPerfSource serves the embedded perf data and models to the sweep
// evaluator, as eval reads them without a store.
type embeddedPerfSource struct{}

func (embeddedPerfSource) Systems(context.Context) ([]string, error) { return perfdb.EmbeddedSystems() }

func (embeddedPerfSource) Backends(_ context.Context, system string) ([]string, error) {
	bv, err := perfdb.EmbeddedBackendVersions(system)
	var out []string
	for _, b := range []string{"sglang", "trtllm", "vllm"} {
		if len(bv[b]) > 0 {
			out = append(out, b)
		}
	}
	return out, err
}

func (embeddedPerfSource) Versions(_ context.Context, system, backend string) ([]string, error) {
	return perfdb.EmbeddedVersions(system, backend)
}

func (embeddedPerfSource) Data(ctx context.Context, system, backend, version string, opts ...perfdb.LoadOption) (*perfdb.Data, error) {
	return perfdb.LoadEmbedded(ctx, system, backend, version, opts...)
}

func (embeddedPerfSource) Model(_ context.Context, id string) (*perfdb.Model, error) {
	return perfdb.EmbeddedModel(id)
}

// TestEvalTimingIsSweepTiming: `eval --model` prices passes with the sweep
// evaluator's builder, so for the same deployment (a dense model on vLLM, an FP8
// MoE model on SGLang with expert parallelism) the estimator's resolved Config
// (quant modes, comm quant, MTP) and every pass time are bit-identical to the
// sweep point's.
func TestEvalTimingIsSweepTiming(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data of two systems/backends (seconds)")
	}
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "none.sqlite")
	cases := []struct {
		model, backend string
		par            parallelOpts
	}{
		{"Qwen/Qwen3-32B", "vllm", parallelOpts{TP: 2, PP: 1, DP: 1, MoETP: 1, MoEEP: 1}},
		{"Qwen/Qwen3-30B-A3B-FP8", "sglang", parallelOpts{TP: 2, PP: 1, DP: 1, MoETP: 1, MoEEP: 2}},
	}
	w := workload.Spec{ISL: 2048, OSL: 128, Concurrency: 8}
	passes := []timing.Pass{
		{Prefill: []timing.Chunk{{Tokens: 2048}}},
		{Prefill: []timing.Chunk{{Tokens: 512, Computed: 1024, Prefix: 256}}, Decode: []int{2100, 2200, 2300}},
		{Decode: []int{2049, 2050, 2100, 2175, 2200, 2300, 2400, 2500}},
		{Prefill: []timing.Chunk{{Tokens: 8192}, {Tokens: 100, Computed: 2000}}},
	}
	for _, tc := range cases {
		t.Run(tc.model, func(t *testing.T) {
			ev := refine.NewPerfdbEvaluator(embeddedPerfSource{})
			r, err := ev.Resolve(ctx, tc.model, "h200_sxm", tc.backend, "")
			if err != nil {
				t.Skipf("embedded perf data: %v", err)
			}
			in := store.PointInputs{Model: tc.model, System: "h200_sxm", Backend: tc.backend, Version: r.Version,
				Mode: store.ModeAgg, ISL: w.ISL, OSL: w.OSL, TP: tc.par.TP, PP: tc.par.PP, DP: tc.par.DP,
				MoETP: tc.par.MoETP, MoEEP: tc.par.MoEEP, Batch: 8, CtxTokens: w.ISL, DatabaseMode: r.DatabaseMode,
				GemmQuant: r.GemmQuant, KVCacheQuant: r.KVCacheQuant, FMHAQuant: r.FMHAQuant, MoEQuant: r.MoEQuant,
				CommQuant: r.CommQuant}
			pm, err := ev.PointModel(ctx, in)
			if err != nil {
				t.Fatalf("sweep point: %v", err)
			}
			dep := deploymentOpts{Model: tc.model, System: "h200_sxm", Backend: tc.backend}
			pt, version, err := evalPassTiming(ctx, db, dep, quantOpts{DatabaseMode: string(perfdb.ModeSilicon)}, tc.par, w, io.Discard)
			if err != nil {
				t.Fatalf("eval timing: %v", err)
			}
			if version != r.Version {
				t.Fatalf("eval version %s, sweep %s", version, r.Version)
			}
			cfg, err := workerConfig(dep, version, quantOpts{DatabaseMode: r.DatabaseMode, GemmQuant: r.GemmQuant,
				KVQuant: r.KVCacheQuant, FMHAQuant: r.FMHAQuant, MoE: r.MoEQuant}, 0, tc.par)
			if err != nil {
				t.Fatal(err)
			}
			if got := pt.Estimator().Config(); got.CommQuant != perfdb.CommQuant(r.CommQuant) || got.Nextn != in.NextN ||
				got.GemmQuant != cfg.GemmQuant || got.KVQuant != cfg.KVQuant || got.FMHAQuant != cfg.FMHAQuant || got.MoEQuant != cfg.MoEQuant {
				t.Errorf("eval Config %+v, sweep point resolves comm %s nextn %d and %+v", got, r.CommQuant, in.NextN, cfg)
			}
			for i := range passes {
				a, aerr := pt.PassMs(&passes[i])
				b, berr := pm.Timing.PassMs(&passes[i])
				if aerr != nil || berr != nil {
					t.Fatalf("pass %d: eval pricing %v, sweep point pricing %v", i, aerr, berr)
				}
				if math.Float64bits(a) != math.Float64bits(b) || !(a > 0) {
					t.Errorf("pass %d: eval %v ms, sweep point %v ms", i, a, b)
				}
			}
		})
	}
}

// TestEngineKnobsRoundTrip: every engine knob of eval is declared with its kind,
// read when given and copied into exactly its engine.Spec field; knobs not given
// leave the profile's value alone.
func TestEngineKnobsRoundTrip(t *testing.T) {
	args := []string{"x"}
	for i, k := range engineKnobs {
		switch k.field(&engine.Spec{}).(type) {
		case *int:
			args = append(args, fmt.Sprintf("--%s=%d", k.name, 100+i))
		case *bool:
			args = append(args, "--"+k.name+"=true")
		case *string:
			args = append(args, "--"+k.name+"=max_utilization")
		case *float64:
			args = append(args, fmt.Sprintf("--%s=%d.5", k.name, i))
		}
	}
	var got engine.Spec
	app := &cli.App{Flags: append(engineKnobFlags(), stageMsFlag()), Action: func(c *cli.Context) error {
		o, err := readEngineKnobs(c)
		if err != nil {
			return err
		}
		got = engine.Spec{MaxNumSeqs: -7, KVCapacityTokens: -9}
		o.apply(&got)
		return nil
	}}
	if err := app.Run(args); err != nil {
		t.Fatal(err)
	}
	for i, k := range engineKnobs {
		switch p := k.field(&got).(type) {
		case *int:
			if *p != 100+i {
				t.Errorf("--%s: field %d, want %d", k.name, *p, 100+i)
			}
		case *bool:
			if !*p {
				t.Errorf("--%s: field false", k.name)
			}
		case *string:
			if *p != "max_utilization" {
				t.Errorf("--%s: field %q", k.name, *p)
			}
		case *float64:
			if *p != float64(i)+0.5 {
				t.Errorf("--%s: field %v", k.name, *p)
			}
		}
	}
	if got.KVCapacityTokens != -9 {
		t.Errorf("--kv-capacity-tokens not given, but the field became %d", got.KVCapacityTokens)
	}
}
