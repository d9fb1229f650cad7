package engineconf

import (
	"errors"
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
		o.DraftTokens, o.DraftMethod, o.DraftModel = e.DraftTokens, e.DraftMethod, e.DraftModel // MTP or an EAGLE head (the acceptance is no key)
	case engine.TRTLLM:
		o.MaxBatchSize, o.MaxNumTokens, o.AsyncScheduling, o.CapacityPolicy = e.MaxBatchSize, e.MaxNumTokens, e.AsyncScheduling, e.CapacityPolicy
		o.DisableCUDAGraph = e.DisableCUDAGraph
		o.BatchWaitTimeoutIters, o.BatchWaitMaxTokensRatio = e.BatchWaitTimeoutIters, e.BatchWaitMaxTokensRatio // T-R6
	case engine.SGLang:
		o.MaxNumSeqs, o.MaxPrefillTokens, o.EnableMixedChunk, o.AsyncScheduling = e.MaxNumSeqs, e.MaxPrefillTokens, e.EnableMixedChunk, e.AsyncScheduling
		o.CUDAGraphMaxBS, o.DisableCUDAGraph = e.CUDAGraphMaxBS, e.DisableCUDAGraph
		o.SchedulerRecvInterval = e.SchedulerRecvInterval                                       // S-R7
		o.DraftTokens, o.DraftMethod, o.DraftModel = e.DraftTokens, e.DraftMethod, e.DraftModel // EAGLE's chain length and head (the acceptance is no key)
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
			if rapid.IntRange(0, 2).Draw(t, "vmtp") == 0 { // MTP: speculative_config (V-S1)
				e.SetDrafts(rapid.IntRange(1, 4).Draw(t, "vdrafts"), 0)
				if rapid.Bool().Draw(t, "eaglehead") { // an EAGLE / EAGLE3 head: method and checkpoint
					e.DraftMethod = rapid.SampledFrom(engine.DraftMethods).Draw(t, "dmethod")
					e.DraftModel = rapid.SampledFrom([]string{"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "/models/my head"}).Draw(t, "dmodel")
				}
			}
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
			e.SchedulerRecvInterval = rapid.SampledFrom([]int{0, 10, 30}).Draw(t, "recv") // S-R7
			e.CUDAGraphMaxBS = rapid.IntRange(0, 1024).Draw(t, "graphbs")
			e.DisableCUDAGraph = rapid.Bool().Draw(t, "nograph")
			if rapid.IntRange(0, 2).Draw(t, "eagle") == 0 { // EAGLE / NEXTN: overlap and mixed chunk off
				e.SetDrafts(rapid.IntRange(1, 4).Draw(t, "steps"), 0)
				if rapid.Bool().Draw(t, "sghead") { // an EAGLE / EAGLE3 head: algorithm and checkpoint
					e.DraftMethod = rapid.SampledFrom(engine.DraftMethods).Draw(t, "sgmethod")
					e.DraftModel = rapid.SampledFrom([]string{"lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B", "/models/my head"}).Draw(t, "sgmodel")
				}
			}
		}
		if backend == "trtllm" {
			e.DisableCUDAGraph = rapid.Bool().Draw(t, "nographs")
			e.CapacityPolicy = rapid.SampledFrom([]string{engine.PolicyGuaranteedNoEvict, engine.PolicyMaxUtilization}).Draw(t, "policy")
			e.BatchWaitTimeoutIters = rapid.SampledFrom([]int{0, 1, 20}).Draw(t, "waititers") // T-R6
			e.BatchWaitMaxTokensRatio = rapid.SampledFrom([]float64{0, 0.123456789, 0.9, 1}).Draw(t, "waitratio")
		}
		if e.Validate() != nil {
			t.Skip("invalid draw")
		}
		l, moe := drawLayout(t, backend)
		d := Deployment{Model: "org/My Model", Layout: l}
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
		// The layout keys deploy the layout rendered, and no other.
		if got, ok := cfg.Layout(); !ok || !got.sameAs(l, moe) {
			t.Fatalf("layout round trip: got %+v (%v), want %+v (moe %v)\n%s", got, ok, l, moe, out)
		}
		if err := cfg.CheckLayout(l, moe); err != nil {
			t.Fatalf("CheckLayout of the rendered layout: %v\n%s", err, out)
		}
		other := l
		other.TP *= 2
		if err := cfg.CheckLayout(other, moe); err == nil {
			t.Fatalf("CheckLayout passed tp %d for a file rendered at tp %d\n%s", other.TP, l.TP, out)
		}
	})
}

// drawLayout draws a layout backend can launch, and whether the model is MoE:
// TensorRT-LLM's attention DP runs attention at tp 1, and vLLM splits the
// experts by TP or by EP over all tp·dp GPUs, not both.
func drawLayout(t *rapid.T, backend string) (Layout, bool) {
	l := Layout{TP: rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(t, "tp"), PP: rapid.IntRange(1, 2).Draw(t, "pp"),
		DP: rapid.SampledFrom([]int{1, 2, 4}).Draw(t, "dp"), MoETP: 1, MoEEP: 1}
	if backend == "trtllm" && l.DP > 1 {
		l.TP = 1
	}
	moe := rapid.Bool().Draw(t, "moe")
	if moe {
		n := l.TP * l.DP
		var eps []int
		for ep := 1; ep <= n; ep++ {
			if n%ep == 0 && (backend != "vllm" || ep == 1 || ep == n) {
				eps = append(eps, ep)
			}
		}
		l.MoEEP = rapid.SampledFrom(eps).Draw(t, "moe_ep")
		l.MoETP = n / l.MoEEP
	}
	return l, moe
}

// TestLayoutKeys: each backend's parallelism keys read as the layout the engine
// deploys (keys it omits at the engine's defaults), and a file the engine
// would not start, or whose layout differs from the prediction's, is refused in
// one line naming the keys and the flags that match.
func TestLayoutKeys(t *testing.T) {
	for _, c := range []struct {
		backend, file string
		moe           bool
		want          Layout
		err           string
	}{
		{backend: "vllm", file: "--tensor-parallel-size 4 --data-parallel-size 2 --enable-expert-parallel", moe: true,
			want: Layout{TP: 4, PP: 1, DP: 2, MoETP: 1, MoEEP: 8}},
		{backend: "vllm", file: "tensor_parallel_size: 8\n", moe: true, want: Layout{TP: 8, PP: 1, DP: 1, MoETP: 8, MoEEP: 1}},
		{backend: "vllm", file: "-tp 2 -pp 2", want: Layout{TP: 2, PP: 2, DP: 1, MoETP: 2, MoEEP: 1}},
		{backend: "trtllm", file: "tensor_parallel_size: 8\nenable_attention_dp: true\nmoe_expert_parallel_size: 8\n", moe: true,
			want: Layout{TP: 1, PP: 1, DP: 8, MoETP: 1, MoEEP: 8}},
		{backend: "trtllm", file: "tp_size: 4\n", moe: true, want: Layout{TP: 4, PP: 1, DP: 1, MoETP: 4, MoEEP: 1}},
		{backend: "trtllm", file: "tp_size: 4\nmoe_expert_parallel_size: 4\nmoe_tensor_parallel_size: -1\n", moe: true, want: Layout{TP: 4, PP: 1, DP: 1, MoETP: 1, MoEEP: 4}},
		{backend: "trtllm", file: "tensor_parallel_size: 8\nmoe_expert_parallel_size: 2\nmoe_tensor_parallel_size: 2\n",
			err: "moe_tensor_parallel_size × moe_expert_parallel_size must be tensor_parallel_size 8 (TensorRT-LLM's Mapping); got 2 × 2"},
		{backend: "trtllm", file: "context_parallel_size: 2\n", err: `line 1: key context_parallel_size "2": context parallelism splits each prompt over 2 GPUs, which the perf data does not time; set 1 or remove it`},
		{backend: "sglang", file: "--tp 8 --dp 8 --enable-dp-attention --ep-size 8", moe: true,
			want: Layout{TP: 1, PP: 1, DP: 8, MoETP: 1, MoEEP: 8}},
		{backend: "sglang", file: "--tp-size 8 --dp-size 2",
			err: "dp_size 2 without enable_dp_attention runs 2 independent replicas behind SGLang's data-parallel router, which aicdb does not model as one worker; predict one replica (drop dp_size) at its share of the load"},
		{backend: "sglang", file: "--tp-size 4 --dp-size 8 --enable-dp-attention", err: "tp_size 4: dp_size 8 must divide it (attention runs at tp_size / dp_size)"},
	} {
		cfg, err := Parse(c.backend, []byte(c.file))
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s %q: error %v, want %q", c.backend, c.file, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s %q: %v", c.backend, c.file, err)
		}
		if got, ok := cfg.Layout(); !ok || got != c.want {
			t.Errorf("%s %q: layout %+v (%v), want %+v", c.backend, c.file, got, ok, c.want)
		}
		if len(cfg.Ignored) != 0 {
			t.Errorf("%s %q: layout keys listed as ignored: %v", c.backend, c.file, cfg.Ignored)
		}
	}
	cfg, err := Parse("trtllm", []byte("tensor_parallel_size: 8\nenable_attention_dp: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := "its parallelism (tensor_parallel_size 8, enable_attention_dp true) deploys tp 1, pp 1, dp 8, moe-tp 8, moe-ep 1, but the prediction prices tp 8, pp 1, dp 1, moe-tp 1, moe-ep 8"
	err = cfg.CheckLayout(Layout{TP: 8, PP: 1, DP: 1, MoETP: 1, MoEEP: 8}, true)
	var lm *LayoutMismatch
	if err == nil || err.Error() != want || !errors.As(err, &lm) || lm.Got.Flags(true) != "--tp 1 --pp 1 --dp 8 --moe-tp 8 --moe-ep 1" {
		t.Errorf("CheckLayout: %v\nwant %s", err, want)
	}
	if none, _ := Parse("vllm", []byte("--max-num-seqs 8")); none.CheckLayout(Layout{TP: 2, PP: 1, DP: 1}, false) != nil {
		t.Error("a file naming no layout key must pass any layout")
	}
	if _, err := Render(engine.Spec{}, Deployment{}, FormatCLI); err == nil {
		t.Error("Render of an invalid engine passed")
	}
	for _, c := range []struct {
		backend string
		l       Layout
		err     string
	}{
		{"trtllm", Layout{TP: 2, PP: 1, DP: 4, MoETP: 8, MoEEP: 1}, "layout tp 2 × dp 4: TensorRT-LLM's attention data parallelism runs attention at tp 1 (enable_attention_dp over tensor_parallel_size ranks)"},
		{"vllm", Layout{TP: 4, PP: 1, DP: 1, MoETP: 2, MoEEP: 2}, "layout moe-tp 2 × moe-ep 2: vLLM splits a MoE model's experts either by tensor parallelism or by expert parallelism (enable_expert_parallel) over all tp·dp GPUs, not both"},
	} {
		e, _ := engine.Defaults(c.backend, "")
		if _, err := Render(e, Deployment{Model: "m", Layout: c.l}, FormatYAML); err == nil || err.Error() != c.err {
			t.Errorf("Render %s %+v: %v, want %q", c.backend, c.l, err, c.err)
		}
	}
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
			out, err := Render(e, Deployment{Model: "meta-llama/Llama-3.1-70B", Layout: Layout{TP: 4, PP: 1, DP: 1}}, format)
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
