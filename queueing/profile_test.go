package queueing

import (
	"testing"

	"github.com/aicdb/aicdb/engine"
)

// TestProfileEngineAIConfigurator: the aiconfigurator profile reproduces the
// benchmark rules' values (rule_plugin/benchmark/*.rule) per backend and role;
// every key the rules leave unset keeps DefaultEngine's value.
func TestProfileEngineAIConfigurator(t *testing.T) {
	def := func(b string) engine.Spec {
		e, err := engine.Defaults(b, "")
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	with := func(b string, f func(*engine.Spec)) engine.Spec { e := def(b); f(&e); return e }
	cases := []struct {
		name string
		in   ProfileInput
		want engine.Spec
	}{
		{"trtllm agg isl 1024 batch 8", ProfileInput{Backend: "trtllm", Role: "agg", Batch: 8, ISL: 1024, OSL: 1024},
			// 8 + 1024 + 1500 = 2532 → 2560 (multiple of 32).
			with("trtllm", func(e *engine.Spec) { e.MaxBatchSize, e.MaxNumTokens = 8, 2560 })},
		{"trtllm agg isl 8192 default batch", ProfileInput{Backend: "trtllm", Role: "agg", ISL: 8192, OSL: 1024},
			// 128 + 8192 + 1500 = 9820 → 9824.
			with("trtllm", func(e *engine.Spec) { e.MaxBatchSize, e.MaxNumTokens = 128, 9824 })},
		{"trtllm agg exact multiple", ProfileInput{Backend: "trtllm", Role: "agg", Batch: 36, ISL: 512},
			// 36 + 512 + 1500 = 2048 = 64·32, unchanged.
			with("trtllm", func(e *engine.Spec) { e.MaxBatchSize, e.MaxNumTokens = 36, 2048 })},
		{"trtllm prefill overlap off", ProfileInput{Backend: "trtllm", Role: "prefill", ISL: 4000},
			// 4000 + 1500 = 5500 → 5504; max_batch_size 1.
			with("trtllm", func(e *engine.Spec) { e.MaxBatchSize, e.MaxNumTokens, e.AsyncScheduling = 1, 5504, false })},
		{"trtllm decode", ProfileInput{Backend: "trtllm", Role: "decode", Batch: 40, ISL: 4000},
			with("trtllm", func(e *engine.Spec) { e.MaxBatchSize, e.MaxNumTokens = 40, 64 })},
		{"vllm agg", ProfileInput{Backend: "vllm", Role: "agg", Batch: 16, ISL: 1024, OSL: 1024},
			with("vllm", func(e *engine.Spec) { e.MaxNumSeqs, e.MaxNumBatchedTokens = 16, 2540 })},
		{"vllm prefill", ProfileInput{Backend: "vllm", Role: "prefill", ISL: 1024},
			with("vllm", func(e *engine.Spec) { e.MaxNumSeqs, e.MaxNumBatchedTokens = 1, 2524 })},
		{"vllm decode default batch", ProfileInput{Backend: "vllm", Role: "decode", ISL: 1024},
			with("vllm", func(e *engine.Spec) { e.MaxNumSeqs, e.MaxNumBatchedTokens = 128, 128 })},
		{"sglang agg", ProfileInput{Backend: "sglang", Role: "agg", Batch: 64, ISL: 2048},
			with("sglang", func(e *engine.Spec) { e.MaxNumSeqs, e.MaxPrefillTokens, e.EnableMixedChunk = 64, 3548, true })},
		{"sglang prefill no mixed chunk", ProfileInput{Backend: "sglang", Role: "prefill", ISL: 2048},
			with("sglang", func(e *engine.Spec) { e.MaxNumSeqs, e.MaxPrefillTokens, e.EnableMixedChunk = 1, 3548, false })},
		{"sglang decode", ProfileInput{Backend: "sglang", Role: "decode", Batch: 256, ISL: 100},
			with("sglang", func(e *engine.Spec) { e.MaxNumSeqs, e.MaxPrefillTokens, e.EnableMixedChunk = 256, 1600, false })},
		// SGLang's chunked_prefill_size follows the GPU's memory (ServerArgs
		// _handle_gpu_memory_settings): B200 (180 GiB) 16384, H200 (141 GB) 8192.
		{"sglang agg b200", ProfileInput{Backend: "sglang", Role: "agg", Batch: 64, ISL: 1024, GPUMemBytes: 193273528320},
			with("sglang", func(e *engine.Spec) {
				e.MaxNumSeqs, e.MaxPrefillTokens, e.EnableMixedChunk, e.ChunkedPrefillSize = 64, 2524, true, 16384
			})},
		{"sglang agg h200", ProfileInput{Backend: "sglang", Role: "agg", Batch: 64, ISL: 1024, GPUMemBytes: 150754820096},
			with("sglang", func(e *engine.Spec) {
				e.MaxNumSeqs, e.MaxPrefillTokens, e.EnableMixedChunk, e.ChunkedPrefillSize = 64, 2524, true, 8192
			})},
		{"sglang agg 40 GiB", ProfileInput{Backend: "sglang", Role: "agg", Batch: 8, ISL: 1024, GPUMemBytes: 40 << 30},
			with("sglang", func(e *engine.Spec) {
				e.MaxNumSeqs, e.MaxPrefillTokens, e.EnableMixedChunk, e.ChunkedPrefillSize = 8, 2524, true, 4096
			})},
		{"vllm ignores the GPU", ProfileInput{Backend: "vllm", Role: "agg", Batch: 64, ISL: 1024, GPUMemBytes: 193273528320},
			with("vllm", func(e *engine.Spec) { e.MaxNumSeqs, e.MaxNumBatchedTokens = 64, 2588 })},
	}
	for _, c := range cases {
		got, err := ProfileEngine(ProfileAIConfigurator, c.in)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s:\n got  %+v\n want %+v", c.name, got, c.want)
		}
		// No aiconfigurator rule disables SGLang's overlap scheduler, on any role
		// (trtllm.rule alone sets disable_overlap_scheduler, for prefill workers).
		if c.in.Backend == "sglang" && !got.AsyncScheduling {
			t.Errorf("%s: the SGLang overlap scheduler is off", c.name)
		}
	}
}

// TestProfileEngineDefaults: the defaults profile is DefaultEngine whatever the
// role, batch and lengths say.
func TestProfileEngineDefaults(t *testing.T) {
	for _, b := range []string{"vllm", "trtllm", "sglang"} {
		want, _ := engine.Defaults(b, "0.11.0")
		got, err := ProfileEngine(ProfileDefaults, ProfileInput{Backend: b, Version: "0.11.0", Role: "prefill", Batch: 3, ISL: 9000})
		if err != nil || got != want {
			t.Errorf("%s: got %+v, %v; want %+v", b, got, err, want)
		}
	}
}

// TestProfileEngineErrors: bad input is a one-line error naming it.
func TestProfileEngineErrors(t *testing.T) {
	cases := []struct {
		profile string
		in      ProfileInput
		want    string
	}{
		{"tuned", ProfileInput{Backend: "vllm", Role: "agg"}, `engine profile "tuned": unknown; use defaults or aiconfigurator`},
		{"", ProfileInput{Backend: "vllm", Role: "agg"}, `engine profile "": unknown; use defaults or aiconfigurator`},
		{ProfileAIConfigurator, ProfileInput{Backend: "tgi", Role: "agg"}, `backend "tgi": unknown; use vllm, trtllm or sglang`},
		{ProfileDefaults, ProfileInput{Backend: "vllm", Version: "x"}, `version "x": want a dotted version such as 0.11.0 (or empty for the latest defaults)`},
		{ProfileAIConfigurator, ProfileInput{Backend: "vllm", Role: "mixed"}, `engine role "mixed": unknown; use agg, prefill or decode`},
		{ProfileAIConfigurator, ProfileInput{Backend: "vllm", Role: "agg", Batch: -1}, `engine profile aiconfigurator: batch = -1 must be ≥ 0`},
		{ProfileAIConfigurator, ProfileInput{Backend: "vllm", Role: "agg", ISL: -2}, `engine profile aiconfigurator: isl = -2 must be ≥ 0`},
		{ProfileAIConfigurator, ProfileInput{Backend: "vllm", Role: "agg", OSL: -3}, `engine profile aiconfigurator: osl = -3 must be ≥ 0`},
		{ProfileAIConfigurator, ProfileInput{Backend: "vllm", Role: "agg", ISL: 1 << 31}, `engine profile aiconfigurator: isl 2147483648 / batch 0 out of range (≤ 2^30)`},
	}
	for _, c := range cases {
		_, err := ProfileEngine(c.profile, c.in)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q %+v: got %v, want %q", c.profile, c.in, err, c.want)
		}
	}
}

// TestProfileSGLangDraftsRunningCap: under the defaults profile SGLang's server
// arguments reset an unset max_running_requests to 48 for EAGLE / NEXTN; the
// aiconfigurator profile sets it (the batch) and other backends ignore drafts.
func TestProfileSGLangDraftsRunningCap(t *testing.T) {
	in := ProfileInput{Backend: "sglang", Role: RoleAgg, Batch: 96, ISL: 1024, OSL: 256, Drafts: 1}
	e, err := ProfileEngine(ProfileDefaults, in)
	if err != nil || e.MaxNumSeqs != 48 {
		t.Errorf("defaults, SGLang EAGLE: max_running_requests %d (%v), want 48", e.MaxNumSeqs, err)
	}
	if e, err := ProfileEngine(ProfileAIConfigurator, in); err != nil || e.MaxNumSeqs != 96 {
		t.Errorf("aiconfigurator, SGLang EAGLE: max_running_requests %d (%v), want the batch 96", e.MaxNumSeqs, err)
	}
	in.Drafts = 0
	if e, err := ProfileEngine(ProfileDefaults, in); err != nil || e.MaxNumSeqs == 48 {
		t.Errorf("defaults, SGLang without drafts: max_running_requests %d (%v), want SGLang's own default", e.MaxNumSeqs, err)
	}
	in.Backend, in.Drafts = "trtllm", 1
	base, _ := ProfileEngine(ProfileDefaults, ProfileInput{Backend: "trtllm", Role: RoleAgg})
	if e, err := ProfileEngine(ProfileDefaults, in); err != nil || e != base {
		t.Errorf("defaults, TensorRT-LLM MTP: %+v (%v), want the defaults unchanged", e, err)
	}
}
