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
	e, budget, err := engineKnobs(ProfileAIConfigurator, in)
	if err != nil || budget != 2524 || e.SeatCap() != 64 || !e.EnableChunkedPrefill || e.ChunkedPrefillSize != 16384 ||
		e.MaxPrefillTokens != 2524 || e.MaxNumSeqs != 64 || !e.EnableMixedChunk || e.TokenBudget() != 16384 {
		t.Fatalf("aiconfigurator: %+v budget %d err %v", e, budget, err)
	}
	e, budget, err = engineKnobs(ProfileDefaults, in)
	if err != nil || budget != 16384 || e.SeatCap() != 64 || e.MaxNumSeqs != 64 || e.ChunkedPrefillSize != 8192 {
		t.Fatalf("defaults: %+v budget %d err %v", e, budget, err)
	}
	// Without the GPU's capacity SGLang's chunked_prefill_size stays the engine default.
	in.GPUMemBytes = 0
	e, budget, err = engineKnobs(ProfileAIConfigurator, in)
	if err != nil || budget != 2524 || e.SeatCap() != 64 || !e.EnableChunkedPrefill || e.ChunkedPrefillSize != 8192 {
		t.Fatalf("aiconfigurator, capacity unknown: %+v budget %d err %v", e, budget, err)
	}
}
