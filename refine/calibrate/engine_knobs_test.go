package calibrate

import (
	"testing"

	"github.com/aicdb/aicdb/queueing"
)

// TestEngineKnobsSGLang: an SGLang row deployed by aiconfigurator's rules keeps
// both prompt caps — max_prefill_tokens = isl + 1500 (the budget ctx_tokens is
// derived from) and chunked_prefill_size sized by SGLang from the GPU (16384 on a
// 180 GiB B200) — in the engine the point records; under the defaults profile the
// running cap is the client concurrency.
func TestEngineKnobsSGLang(t *testing.T) {
	in := queueing.ProfileInput{Backend: "sglang", Role: queueing.RoleAgg, Batch: 64, ISL: 1024, OSL: 8192, GPUMemBytes: 193273528320}
	e, budget, seqs, chunked, err := engineKnobs(ProfileAIConfigurator, in)
	if err != nil || budget != 2524 || seqs != 64 || !chunked || e.ChunkedPrefillSize != 16384 || e.MaxPrefillTokens != 2524 ||
		e.MaxNumSeqs != 64 || !e.EnableMixedChunk || e.TokenBudget() != 16384 {
		t.Fatalf("aiconfigurator: %+v budget %d seqs %d chunked %v err %v", e, budget, seqs, chunked, err)
	}
	e, budget, seqs, _, err = engineKnobs(ProfileDefaults, in)
	if err != nil || budget != 16384 || seqs != 64 || e.MaxNumSeqs != 64 || e.ChunkedPrefillSize != 8192 {
		t.Fatalf("defaults: %+v budget %d seqs %d err %v", e, budget, seqs, err)
	}
	b, s, c, err := EngineKnobs(ProfileAIConfigurator, "sglang", "", 1024, 8192, 64)
	if err != nil || b != 2524 || s != 64 || !c {
		t.Fatalf("EngineKnobs: %d %d %v %v", b, s, c, err)
	}
}
