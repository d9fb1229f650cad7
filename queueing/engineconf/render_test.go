package engineconf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing"
)

// sched keeps the fields backend's calendar reads (engine.Spec doc); the others
// are not launch keys of that engine.
func sched(e engine.Spec) engine.Spec {
	o := engine.Spec{Backend: e.Backend, BlockSize: e.BlockSize, KVCapacityTokens: e.KVCapacityTokens,
		EnableChunkedPrefill: e.EnableChunkedPrefill, MemFraction: e.MemFraction, KVCacheDtype: e.KVCacheDtype,
		NoPrefixReuse: e.NoPrefixReuse, MaxModelLen: e.MaxModelLen}
	switch e.Backend {
	case engine.VLLM:
		o.MaxNumBatchedTokens, o.MaxNumSeqs, o.LongPrefillTokenThreshold, o.AsyncScheduling =
			e.MaxNumBatchedTokens, e.MaxNumSeqs, e.LongPrefillTokenThreshold, e.AsyncScheduling
		o.KVCacheMemoryBytes, o.DisableCUDAGraph = e.KVCacheMemoryBytes, e.DisableCUDAGraph
	case engine.TRTLLM:
		o.MaxBatchSize, o.MaxNumTokens, o.AsyncScheduling, o.CapacityPolicy = e.MaxBatchSize, e.MaxNumTokens, e.AsyncScheduling, e.CapacityPolicy
		o.DisableCUDAGraph = e.DisableCUDAGraph
	case engine.SGLang:
		o.MaxNumSeqs, o.MaxPrefillTokens, o.EnableMixedChunk, o.AsyncScheduling = e.MaxNumSeqs, e.MaxPrefillTokens, e.EnableMixedChunk, e.AsyncScheduling
		o.CUDAGraphMaxBS, o.DisableCUDAGraph = e.CUDAGraphMaxBS, e.DisableCUDAGraph
		o.DraftTokens = e.DraftTokens // EAGLE's chain length (the acceptance is no key)
		if e.EnableChunkedPrefill {
			o.ChunkedPrefillSize = e.ChunkedPrefillSize
		}
	}
	return o
}

// TestRenderRoundTrip: what Render prints for an engine, parsed back and applied
// over the backend's defaults, is that engine again (its scheduling fields), in
// both formats and for every backend — so `aicdb deploy` launches what was
// predicted. (SGLang's enable_mixed_chunk is a store_true flag, so the base it
// is read over has the engine's own default, false.)
func TestRenderRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		backend := rapid.SampledFrom([]string{"vllm", "trtllm", "sglang"}).Draw(t, "backend")
		format := rapid.SampledFrom([]string{FormatCLI, FormatYAML}).Draw(t, "format")
		e, _ := engine.Defaults(backend, "")
		in := queueing.ProfileInput{Backend: backend, Role: rapid.SampledFrom([]string{"agg", "prefill", "decode"}).Draw(t, "role"),
			Batch: rapid.IntRange(0, 1024).Draw(t, "batch"), ISL: rapid.IntRange(1, 32768).Draw(t, "isl"), OSL: rapid.IntRange(1, 4096).Draw(t, "osl")}
		if rapid.Bool().Draw(t, "aic") {
			var err error
			if e, err = queueing.ProfileEngine(queueing.ProfileAIConfigurator, in); err != nil {
				t.Fatal(err)
			}
		}
		e.EnableChunkedPrefill = rapid.Bool().Draw(t, "chunked")
		e.AsyncScheduling = rapid.Bool().Draw(t, "async")
		e.EnableMixedChunk = rapid.Bool().Draw(t, "mixed")
		if backend == "vllm" {
			e.LongPrefillTokenThreshold = rapid.SampledFrom([]int{0, 256, 2048}).Draw(t, "thr")
			e.KVCacheMemoryBytes = rapid.SampledFrom([]int64{0, 1, 40 << 30}).Draw(t, "kvbytes")
			e.DisableCUDAGraph = rapid.Bool().Draw(t, "eager")
		}
		e.KVCapacityTokens = rapid.SampledFrom([]int{0, 1 << 20}).Draw(t, "kv")
		e.NoPrefixReuse = rapid.Bool().Draw(t, "noreuse")
		e.MaxModelLen = rapid.SampledFrom([]int{0, 4096, 131072}).Draw(t, "maxlen")
		// The memory keys (a fraction in (0, 1], written back exactly) and the KV
		// dtype as each engine spells it.
		e.MemFraction = rapid.SampledFrom([]float64{0, 0.05, 0.5, 0.9, 0.123456789, 1}).Draw(t, "frac")
		dtypes := map[string][]string{"vllm": {"", "bfloat16", "fp8"}, "trtllm": {"", "bfloat16", "fp8", "int8"}, "sglang": {"", "bfloat16", "fp8"}}
		e.KVCacheDtype = rapid.SampledFrom(dtypes[backend]).Draw(t, "dtype")
		if backend == "sglang" {
			e.CUDAGraphMaxBS = rapid.IntRange(0, 1024).Draw(t, "graphbs")
			e.DisableCUDAGraph = rapid.Bool().Draw(t, "nograph")
			if rapid.IntRange(0, 2).Draw(t, "eagle") == 0 { // EAGLE / NEXTN: overlap and mixed chunk off
				e.SetDrafts(rapid.IntRange(1, 4).Draw(t, "steps"), 0)
			}
		}
		if backend == "trtllm" {
			e.DisableCUDAGraph = rapid.Bool().Draw(t, "nographs")
			e.CapacityPolicy = rapid.SampledFrom([]string{engine.PolicyGuaranteedNoEvict, engine.PolicyMaxUtilization}).Draw(t, "policy")
		}
		if e.Validate() != nil {
			t.Skip("invalid draw")
		}
		d := Deployment{Model: "org/My Model", TP: rapid.IntRange(1, 8).Draw(t, "tp"), PP: 1, DP: rapid.IntRange(1, 2).Draw(t, "dp")}
		out, err := Render(e, d, format)
		if err != nil {
			t.Fatal(err)
		}
		text := out
		if backend == "trtllm" && format == FormatCLI {
			// The YAML between the heredoc markers is the file trtllm-serve reads.
			_, after, _ := strings.Cut(out, "<<'EOF'\n")
			text, _, _ = strings.Cut(after, "EOF\n")
		}
		cfg, err := Parse(backend, []byte(text))
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		base, _ := engine.Defaults(backend, "")
		base.EnableMixedChunk = false
		if err := cfg.Apply(&base); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if sched(base) != sched(e) {
			t.Fatalf("round trip:\n got  %+v\n want %+v\n%s", sched(base), sched(e), out)
		}
	})
}

// TestRenderGolden pins the launch text of one aiconfigurator-profile engine per
// backend and format (testdata/render_*.golden, -update).
func TestRenderGolden(t *testing.T) {
	for _, backend := range []string{"vllm", "trtllm", "sglang"} {
		for _, format := range []string{FormatCLI, FormatYAML} {
			e, err := queueing.ProfileEngine(queueing.ProfileAIConfigurator, queueing.ProfileInput{Backend: backend, Role: "agg", Batch: 16, ISL: 1024, OSL: 1024})
			if err != nil {
				t.Fatal(err)
			}
			out, err := Render(e, Deployment{Model: "meta-llama/Llama-3.1-70B", TP: 4, PP: 1, DP: 1}, format)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "render_"+backend+"_"+format+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(path)
			if err != nil || string(want) != out {
				t.Errorf("%s %s (%v):\n%s", backend, format, err, out)
			}
		}
	}
	if _, err := Render(engine.Spec{}, Deployment{}, "toml"); err == nil || err.Error() != `format "toml": unknown; use cli or yaml` {
		t.Errorf("bad format: %v", err)
	}
}
