package calibrate

import (
	"testing"

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
		return resolveDisagg(Target{Row: r}, "deepseek-ai/DeepSeek-R1", "1.2.0rc5", res, "ev")
	}
	got := row(func(*measure.Measurement) {})
	want := store.PointInputs{Model: "deepseek-ai/DeepSeek-R1", System: "b200_sxm", Backend: "trtllm", Version: "1.2.0rc5",
		Mode: store.ModeDisagg, ISL: 8192, OSL: 1024, TP: 8, PP: 1, DP: 1, MoETP: 1, MoEEP: 4, Batch: 74, MaxNumSeqs: 74,
		DatabaseMode: "SILICON", GemmQuant: "nvfp4", KVCacheQuant: "fp8", FMHAQuant: "fp8", MoEQuant: "nvfp4", CommQuant: "half",
		PWorkers: 2, PBatch: 1, PTP: 1, PPP: 1, PDP: 4, DWorkers: 5, DBatch: 74, DTP: 8, DPP: 1, DDP: 1, Evaluator: "ev"}
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
}
