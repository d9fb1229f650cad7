package refine

import (
	"context"
	"io/fs"
	"testing"
	"testing/fstest"

	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/engineconf"
	"github.com/aicdb/aicdb/store"
)

// TestEnumerateSGLangGPUChunk: under the aiconfigurator profile an SGLang point's
// engine takes SGLang's GPU-sized chunked_prefill_size (16384 on a 180 GiB
// B200, the engine default 8192 when the GPU is not known) beside the rules'
// max_prefill_tokens = isl + 1500; sweepGPUMem asks the perf data for the GPU only
// for SGLang under that profile.
func TestEnumerateSGLangGPUChunk(t *testing.T) {
	ctx := context.Background()
	spec := SweepSpec{Model: "Qwen/Qwen3-32B", System: "b200_sxm", Backend: "sglang", TotalGPUs: 2, ISL: 1000, OSL: 200,
		TPs: []int{2}, Batches: []int{8}, CtxTokens: []int{1000}, EngineProfile: queueing.ProfileAIConfigurator}
	r, err := Synthetic{}.Resolve(ctx, spec.Model, "h200_sxm", spec.Backend, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mem   float64
		chunk int
	}{{0, 8192}, {193273528320, 16384}} {
		r.GPUMemBytes = tc.mem
		pts, err := Enumerate(spec, r, "e")
		if err != nil || len(pts) != 1 || pts[0].Mode != store.ModeAgg {
			t.Fatalf("%d points, %v", len(pts), err)
		}
		rs, ok, err := engineconf.DecodeResolved(pts[0].Engine)
		if err != nil || !ok || rs.Engine == nil {
			t.Fatalf("engine %q: %v", pts[0].Engine, err)
		}
		if e := rs.Engine; e.ChunkedPrefillSize != tc.chunk || e.MaxPrefillTokens != 2500 || pts[0].MaxNumBatchedTokens != tc.chunk {
			t.Errorf("GPU %v: chunk %d, max_prefill %d, budget column %d; want %d, 2500, %d", tc.mem, e.ChunkedPrefillSize,
				e.MaxPrefillTokens, pts[0].MaxNumBatchedTokens, tc.chunk, tc.chunk)
		}
	}
	ev := NewPerfdbEvaluator(sharedSource(t))
	res, err := ev.Resolve(ctx, spec.Model, spec.System, spec.Backend, "")
	if err != nil {
		t.Skipf("no b200 SGLang perf data: %v", err)
	}
	if m, err := sweepGPUMem(ctx, ev, spec, res.Version); err != nil || m != 193273528320 {
		t.Errorf("aiconfigurator: GPU %v, %v; want 193273528320", m, err)
	}
	spec.EngineProfile = queueing.ProfileDefaults
	if m, err := sweepGPUMem(ctx, ev, spec, res.Version); err != nil || m != 0 {
		t.Errorf("defaults: GPU %v, %v; want 0 (not asked)", m, err)
	}
}

// TestStoreGPUMemFromSystemSpec: on the store the GPU memory comes from the
// system spec alone (gpu.mem_capacity), so a store holding the h200 spec and no
// perf data answers it and the evaluator loads no perf data; an unknown system is
// the store's not-found error naming it.
func TestStoreGPUMemFromSystemSpec(t *testing.T) {
	ctx := context.Background()
	yml, err := fs.ReadFile(perfdb.EmbeddedFS(), "systems/h200_sxm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t)
	if _, err := perfdb.ImportFS(ctx, st, fstest.MapFS{"h200_sxm.yaml": {Data: yml}}, "spec", perfdb.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := NewPerfdbEvaluator(StoreSource{St: st})
	spec := SweepSpec{System: "h200_sxm", Backend: "sglang", EngineProfile: queueing.ProfileAIConfigurator}
	if m, err := sweepGPUMem(ctx, ev, spec, "0.5.6"); err != nil || m != 151397597184 {
		t.Errorf("GPU %v, %v; want 151397597184 (141 GiB)", m, err)
	}
	if len(ev.data) != 0 {
		t.Errorf("%d perf data sets loaded; want none", len(ev.data))
	}
	spec.System = "b300"
	if _, err := sweepGPUMem(ctx, ev, spec, "0.5.6"); err == nil || err.Error() != "GPU memory of b300: store: read system b300: "+store.ErrNotFound.Error() {
		t.Errorf("unknown system: %v", err)
	}
}
