package refine

import (
	"context"
	"slices"
	"testing"

	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/engineconf"
)

// TestEnumerateRecordsDisableCUDAGraph: a sweep under an SGLang config with
// --disable-cuda-graph records the key on each point's resolved engine (Config
// and Engine), so its rows never share a key with rows predicted for a launch
// with CUDA graphs.
func TestEnumerateRecordsDisableCUDAGraph(t *testing.T) {
	spec := SweepSpec{Model: "Qwen/Qwen3-32B", System: "h200_sxm", Backend: "sglang", TotalGPUs: 2, ISL: 1000, OSL: 200,
		TPs: []int{2}, Batches: []int{8}, CtxTokens: []int{1000}, EngineProfile: queueing.ProfileAIConfigurator}
	r, err := Synthetic{}.Resolve(context.Background(), spec.Model, spec.System, spec.Backend, "")
	if err != nil {
		t.Fatal(err)
	}
	engineOf := func(text string) (string, engineconf.Resolved) {
		t.Helper()
		spec.EngineConfig, err = engineconf.Parse("sglang", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		pts, err := Enumerate(spec, r, "e")
		if err != nil || len(pts) != 1 {
			t.Fatalf("%q: %d points, %v", text, len(pts), err)
		}
		rs, ok, err := engineconf.DecodeResolved(pts[0].Engine)
		if err != nil || !ok || rs.Engine == nil {
			t.Fatalf("engine %q: %v", pts[0].Engine, err)
		}
		return pts[0].Engine, rs
	}
	off, _ := engineOf("--max-running-requests 8\n")
	on, rs := engineOf("--max-running-requests 8 --disable-cuda-graph\n")
	if !rs.Engine.DisableCUDAGraph || !slices.Contains(rs.Config, engineconf.Setting{Key: "disable_cuda_graph", Value: "true"}) {
		t.Errorf("resolved engine %+v, config %+v: want disable_cuda_graph recorded", rs.Engine, rs.Config)
	}
	if on == off {
		t.Errorf("the rows with and without disable_cuda_graph record the same engine %s", on)
	}
}
