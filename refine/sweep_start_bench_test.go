package refine

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/store"
)

// BenchmarkSweepStartSGLangRerun is the start of a small SGLang sweep under the
// aiconfigurator profile whose points are all stored already (a rerun: nothing is
// evaluated), on a store holding the embedded perf data, with a fresh evaluator
// each time as a new CLI process has: Resolve, the GPU memory the engine profile
// needs (sweepGPUMem), enumeration and the skip of every stored point.
func BenchmarkSweepStartSGLangRerun(b *testing.B) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(b.TempDir(), "b.sqlite"), store.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	if _, err := perfdb.ImportEmbedded(ctx, st, perfdb.ImportOptions{NoMirror: true, ImportedAt: "2026-01-01"}); err != nil {
		b.Fatal(err)
	}
	spec := SweepSpec{Model: "Qwen/Qwen3-32B", System: "h200_sxm", Backend: "sglang", TotalGPUs: 1, ISL: 1000, OSL: 100,
		TPs: []int{1}, Batches: []int{8}, CtxTokens: []int{1000}, EngineProfile: queueing.ProfileAIConfigurator}
	res, err := Sweep(ctx, st, NewPerfdbEvaluator(StoreSource{St: st}), spec, SweepOptions{Now: fixedNow})
	if err != nil || res.Total == 0 || res.Evaluated+res.NoPerfData != res.Total {
		b.Fatalf("first sweep: %+v, %v", res, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		res, err := Sweep(ctx, st, NewPerfdbEvaluator(StoreSource{St: st}), spec, SweepOptions{Now: fixedNow})
		if err != nil || res.Evaluated != 0 {
			b.Fatalf("rerun: %+v, %v", res, err)
		}
	}
}
