package refine

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/queueing/engineconf"
	"github.com/aicdb/aicdb/store"
)

// TestDefaultsChunkTRTLLMPromptWithPrefix: under the defaults rule, a
// TensorRT-LLM budget that holds a prompt's uncached tokens but not the whole
// prompt turns chunked prefill on (T-R3 budgets the whole prompt, reuse comes
// after), on agg rows and on a disagg row's prefill pool, so a sweep with
// --prefix and no --engine-config is never refused for a config it was not
// given (wholePromptFits).
func TestDefaultsChunkTRTLLMPromptWithPrefix(t *testing.T) {
	spec := SweepSpec{Model: "Qwen/Qwen3-32B", System: "h200_sxm", Backend: "trtllm", TotalGPUs: 2, ISL: 9000, OSL: 200, Prefix: 2000,
		TPs: []int{1}, Batches: []int{8}, CtxTokens: []int{8000}, DecodeBatches: []int{8}, MaxWorkers: 1,
		Modes: []string{store.ModeAgg, store.ModeDisagg}}
	r, err := Synthetic{}.Resolve(context.Background(), spec.Model, spec.System, spec.Backend, "")
	if err != nil {
		t.Fatal(err)
	}
	pts, err := Enumerate(spec, r, "e")
	if err != nil {
		t.Fatalf("a sweep without --engine-config refused: %v", err)
	}
	var agg, disagg int
	for _, p := range pts {
		rs, _, err := engineconf.DecodeResolved(p.Engine)
		if err != nil {
			t.Fatal(err)
		}
		switch p.Mode {
		case store.ModeAgg:
			agg++
			e, err := pointEngine(p)
			if err != nil || !e.EnableChunkedPrefill || e.TokenBudget() != 8008 {
				t.Errorf("agg %s: budget %d, chunked %v (%v): want 8008, chunked", p.Parallel(), e.TokenBudget(), e.EnableChunkedPrefill, err)
			}
		case store.ModeDisagg:
			disagg++
			if rs.Prefill == nil || !rs.Prefill.EnableChunkedPrefill || rs.Prefill.TokenBudget() >= spec.ISL {
				t.Errorf("disagg %s: prefill engine %+v: want chunked prefill under a budget below isl %d", p.Parallel(), rs.Prefill, spec.ISL)
			}
		}
	}
	if agg == 0 || disagg == 0 {
		t.Fatalf("%d agg and %d disagg points, want both", agg, disagg)
	}
}
