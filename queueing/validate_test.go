package queueing

import (
	"context"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestBadInputNamesTheInput: every bad input of issue 3 gives a one-line input
// error naming it, on both tiers, never a hang or a NaN.
func TestBadInputNamesTheInput(t *testing.T) {
	ok := workload.Spec{ISL: 1000, OSL: 50, Concurrency: 4}
	type tc struct {
		name    string
		w       workload.Spec
		backend engine.Backend
		mod     func(*engine.Spec)
		tm      timing.Timing
		want    string
	}
	wmod := func(f func(*workload.Spec)) workload.Spec { w := ok; f(&w); return w }
	cases := []tc{
		{"zero concurrency", wmod(func(w *workload.Spec) { w.Concurrency = 0 }), engine.VLLM, nil, lin, "neither concurrency nor rate"},
		{"negative concurrency", wmod(func(w *workload.Spec) { w.Concurrency = -3 }), engine.VLLM, nil, lin, "concurrency = -3"},
		{"negative rate", wmod(func(w *workload.Spec) { w.Concurrency = 0; w.RateRPS = -1 }), engine.VLLM, nil, lin, "rate = -1"},
		{"both loops", wmod(func(w *workload.Spec) { w.RateRPS = 2 }), engine.VLLM, nil, lin, "both concurrency"},
		{"zero isl", wmod(func(w *workload.Spec) { w.ISL = 0 }), engine.VLLM, nil, lin, "isl = 0"},
		{"negative osl", wmod(func(w *workload.Spec) { w.OSL = -1 }), engine.VLLM, nil, lin, "osl = -1"},
		{"prefix = isl", wmod(func(w *workload.Spec) { w.Prefix = 1000 }), engine.VLLM, nil, lin, "prefix = 1000"},
		{"prefix ≥ isl stratum", wmod(func(w *workload.Spec) { w.Prefix = 600; w.ISLQuantiles = []int{500, 1500} }), engine.VLLM, nil, lin, "prefix = 600"},
		{"prefix, cache off", wmod(func(w *workload.Spec) { w.Prefix = 100 }), engine.SGLang, func(e *engine.Spec) { e.NoPrefixReuse = true }, lin,
			"workload prefix = 100: the engine config turns the prefix cache off, so nothing is reused, while the model reads a prefix as cached; pass prefix 0 (every prompt computed whole) or turn the cache on"},
		{"longer than max_model_len", ok, engine.VLLM, func(e *engine.Spec) { e.MaxModelLen = 1024 }, lin,
			"workload isl 1000 + osl 50 = 1050 tokens: longer than the engine config's max_model_len 1024 (max_seq_len, context_length), so the engine rejects it; raise it or shorten the requests"},
		{"cache on and off", ok, engine.VLLM, func(e *engine.Spec) { e.NoPrefixReuse, e.EnablePrefixCaching = true, true }, lin, "no_prefix_reuse and enable_prefix_caching are both set"},
		{"bad quantile", wmod(func(w *workload.Spec) { w.OSLQuantiles = []int{4, 0} }), engine.VLLM, nil, lin, "osl quantile 0"},
		{"negative turnaround", wmod(func(w *workload.Spec) { w.TurnaroundMs = -1 }), engine.VLLM, nil, lin, "turnaround_ms"},
		{"zero budget", ok, engine.VLLM, func(e *engine.Spec) { e.MaxNumBatchedTokens = 0 }, lin, "max_num_batched_tokens = 0"},
		{"negative budget", ok, engine.VLLM, func(e *engine.Spec) { e.MaxNumBatchedTokens = -5 }, lin, "max_num_batched_tokens = -5"},
		{"zero seqs", ok, engine.VLLM, func(e *engine.Spec) { e.MaxNumSeqs = 0 }, lin, "max_num_seqs = 0"},
		{"zero block", ok, engine.VLLM, func(e *engine.Spec) { e.BlockSize = 0 }, lin, "block_size = 0"},
		{"trt zero batch", ok, engine.TRTLLM, func(e *engine.Spec) { e.MaxBatchSize = 0 }, lin, "max_batch_size = 0"},
		{"trt zero tokens", ok, engine.TRTLLM, func(e *engine.Spec) { e.MaxNumTokens = 0 }, lin, "max_num_tokens = 0"},
		{"sglang zero chunk", ok, engine.SGLang, func(e *engine.Spec) { e.ChunkedPrefillSize = 0 }, lin, "chunked_prefill_size = 0"},
		{"sglang zero page", ok, engine.SGLang, func(e *engine.Spec) { e.BlockSize = 0 }, lin, "block_size = 0"},
		{"vllm chunk off small budget", ok, engine.VLLM, func(e *engine.Spec) { e.EnableChunkedPrefill = false; e.MaxNumBatchedTokens = 512 }, lin, "max_num_batched_tokens = 512"},
		{"trt chunk off small budget", ok, engine.TRTLLM, func(e *engine.Spec) { e.MaxNumTokens = 512 }, lin, "max_num_tokens = 512"},
		{"vllm kv below one request", ok, engine.VLLM, func(e *engine.Spec) { e.KVCapacityTokens = 1024 }, lin, "one request needs 66 blocks of 16 tokens for its last token (isl 1000 + osl 50 − 1) but the pool has 64"},
		{"sglang kv below one admission", ok, engine.SGLang, func(e *engine.Spec) { e.KVCapacityTokens = 1050 }, lin, "isl + min(osl, 4096) = 1050 < the free KV tokens (1050 when empty"},
		{"vllm kv with prefix", wmod(func(w *workload.Spec) { w.Prefix = 100 }), engine.VLLM, func(e *engine.Spec) { e.KVCapacityTokens = 1 << 20 }, lin, "cached prefix is not modelled for vllm"},
		{"trt max_util kv with prefix", wmod(func(w *workload.Spec) { w.Prefix = 100 }), engine.TRTLLM, func(e *engine.Spec) { e.CapacityPolicy = engine.PolicyMaxUtilization; e.KVCapacityTokens = 1 << 20 }, lin, "cached prefix is not modelled for trtllm"},
		{"trt kv below one request", ok, engine.TRTLLM, func(e *engine.Spec) { e.KVCapacityTokens = 512 }, lin, "kv_capacity_tokens = 512"},
		{"trt bad policy", ok, engine.TRTLLM, func(e *engine.Spec) { e.CapacityPolicy = "evict" }, lin, "capacity_policy"},
		{"unknown backend", ok, engine.VLLM, func(e *engine.Spec) { e.Backend = "tgi" }, lin, "backend \"tgi\""},
		{"nan stage", ok, engine.VLLM, func(e *engine.Spec) { e.StageMs = nanF() }, lin, "stage_ms"},
		{"bad timing", ok, engine.VLLM, nil, timing.Linear{BaseMs: -1}, "base_ms"},
		{"nil timing", ok, engine.VLLM, nil, nil, "timing"},
		{"nan timing", ok, engine.VLLM, nil, timing.Func(func(*timing.Pass) (float64, error) { return nanF(), nil }), "pass priced at NaN"},
	}
	for _, c := range cases {
		e := testEngine(t, c.backend, c.mod)
		_, qerr := Quantitative(context.Background(), c.w, e, c.tm)
		_, serr := Screening(c.w, e, c.tm)
		for tier, err := range map[string]error{"quantitative": qerr, "screening": serr} {
			if err == nil {
				t.Errorf("%s (%s): no error", c.name, tier)
				continue
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s (%s): error %q, want one line containing %q", c.name, tier, err, c.want)
			}
			if !IsInputError(err) {
				t.Errorf("%s (%s): %v is not an InputError", c.name, tier, err)
			}
		}
	}
}

func nanF() float64 { z := 0.0; return z / z }

// TestDefaultEngine: the §6 defaults validate, unknown backends and malformed
// versions are rejected.
func TestDefaultEngine(t *testing.T) {
	for _, b := range []string{"vllm", "trtllm", "sglang", "VLLM"} {
		for _, v := range []string{"", "latest", "0.11.0", "v1.3.0rc20", "0.5.14.post1"} {
			e, err := engine.Defaults(b, v)
			if err != nil {
				t.Fatalf("engine.Defaults(%q, %q): %v", b, v, err)
			}
			if err := e.Validate(); err != nil {
				t.Errorf("engine.Defaults(%q, %q) does not validate: %v", b, v, err)
			}
		}
	}
	if _, err := engine.Defaults("tgi", ""); err == nil || !strings.Contains(err.Error(), "tgi") {
		t.Errorf("unknown backend: %v", err)
	}
	for _, v := range []string{"x", "1", "a.b", "1..2"} {
		if _, err := engine.Defaults("vllm", v); err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("version %q: %v", v, err)
		}
	}
	e, _ := engine.Defaults("vllm", "")
	if e.MaxNumBatchedTokens != 8192 || e.MaxNumSeqs != 1024 || !e.AsyncScheduling || e.BlockSize != 16 {
		t.Errorf("vllm defaults %+v", e)
	}
	e, _ = engine.Defaults("trtllm", "")
	if e.MaxNumTokens != 8192 || e.MaxBatchSize != 2048 || e.EnableChunkedPrefill || e.CapacityPolicy != engine.PolicyGuaranteedNoEvict || e.BlockSize != 32 {
		t.Errorf("trtllm defaults %+v", e)
	}
	e, _ = engine.Defaults("sglang", "")
	if e.ChunkedPrefillSize != 8192 || e.MaxPrefillTokens != 16384 || !e.EnableMixedChunk || e.BlockSize != 1 {
		t.Errorf("sglang defaults %+v", e)
	}
}

// TestWorkGuard: an operating point too large to simulate is an input error naming
// the way out, returned at once (no hang); screening still answers.
func TestWorkGuard(t *testing.T) {
	e := testEngine(t, engine.VLLM, nil)
	for _, w := range []workload.Spec{
		{ISL: 1 << 20, OSL: 1 << 20, Concurrency: 1},
		{ISL: 128, OSL: 8, Concurrency: 60000},
		{ISL: 1 << 20, OSL: 1 << 16, RateRPS: 1, NumRequests: 100000},
	} {
		_, err := Quantitative(context.Background(), w, e, lin)
		if err == nil || !IsInputError(err) || !strings.Contains(err.Error(), "screening tier") {
			t.Errorf("%+v: %v", w, err)
		}
		if _, err := Screening(w, e, lin); err != nil {
			t.Errorf("screening %+v: %v", w, err)
		}
	}
}

// FuzzDefaultEngineVersion: the version parser never panics, accepts only dotted
// versions (or "", "latest"), and every accepted engine validates.
func FuzzDefaultEngineVersion(f *testing.F) {
	for _, s := range []string{"", "latest", "0.11.0", "v1.3.0rc20", "x", "1", "..", "1.2.post1", "v"} {
		f.Add("vllm", s)
	}
	f.Add("sglang", "0.5.14")
	f.Add("trtllm", "1.2")
	f.Fuzz(func(t *testing.T, backend, version string) {
		e, err := engine.Defaults(backend, version)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("engine.Defaults(%q, %q) does not validate: %v", backend, version, err)
		}
	})
}

// TestFirstPassTokens: the budget a whole prompt needs in one pass — TensorRT-LLM
// the whole prompt, reuse applied after (T-R3); vLLM the uncached tokens capped by
// long_prefill_token_threshold (V-R1, V-R3); SGLang the uncached tokens.
func TestFirstPassTokens(t *testing.T) {
	for _, c := range []struct {
		e                 engine.Spec
		isl, prefix, want int
	}{
		{engine.Spec{Backend: engine.TRTLLM}, 1000, 300, 1000},
		{engine.Spec{Backend: engine.VLLM}, 1000, 300, 700},
		{engine.Spec{Backend: engine.VLLM, LongPrefillTokenThreshold: 512}, 1000, 300, 512},
		{engine.Spec{Backend: engine.VLLM, LongPrefillTokenThreshold: 2048}, 1000, 300, 700},
		{engine.Spec{Backend: engine.SGLang}, 1000, 300, 700},
	} {
		if got := FirstPassTokens(c.e, c.isl, c.prefix); got != c.want {
			t.Errorf("%s threshold %d, isl %d prefix %d: %d, want %d", c.e.Backend, c.e.LongPrefillTokenThreshold, c.isl, c.prefix, got, c.want)
		}
	}
}
