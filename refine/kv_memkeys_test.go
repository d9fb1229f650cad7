package refine

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing/engineconf"
	"github.com/aicdb/aicdb/store"
)

// configPool is the pool planKV gives a point of isl = osl = 1024 under the
// backend's defaults with the engine config text applied over them.
func configPool(t *testing.T, pt *perfdb.PassTiming, backend, text string) (int, error) {
	t.Helper()
	cfg, err := engineconf.Parse(backend, []byte(text))
	if err != nil {
		t.Fatalf("%s %q: %v", backend, text, err)
	}
	e, err := engine.Defaults(backend, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Apply(&e); err != nil {
		t.Fatalf("%s %q: %v", backend, text, err)
	}
	_, err = planKV(pt, store.PointInputs{ISL: 1024, OSL: 1024, Batch: 64}, &e)
	return e.KVCapacityTokens, err
}

// TestMemFractionShrinksPool: an engine config's memory fraction sizes the KV
// pool by the memory model's one budget rule (perfdb KVCapacityTokens) — a
// lower fraction a smaller pool, on every backend, and the value is the
// formula's exactly:
//
//	vLLM     ⌊(capacity·f·0.98 − non-KV) / per-token / block⌋·block
//	TRT-LLM  ⌊(capacity − non-KV)·f·0.985·0.98 / per-token / block⌋·block
//	SGLang   ⌊((capacity − NCCL − others)·f − weights) / per-token / page⌋·page
func TestMemFractionShrinksPool(t *testing.T) {
	cases := []struct {
		backend, key, oom string                                              // oom: a fraction too small for one request
		budget            func(u perfdb.MemoryUsage, capB, f float64) float64 // bytes
	}{
		{"vllm", "--gpu-memory-utilization", "0.05", func(u perfdb.MemoryUsage, capB, f float64) float64 {
			return capB*f*0.98 - (u.TotalGiB-u.KVCacheGiB)*(1<<30)
		}},
		{"trtllm", "--free_gpu_memory_fraction", "0.001", func(u perfdb.MemoryUsage, capB, f float64) float64 {
			return (capB/(1<<30) - (u.TotalGiB - u.KVCacheGiB)) * f * (1 - 0.015) * (1 - 0.02) * (1 << 30)
		}},
		{"sglang", "--mem-fraction-static", "0.05", func(u perfdb.MemoryUsage, capB, f float64) float64 {
			return (capB-(u.NCCLGiB+u.OthersGiB)*(1<<30))*f - u.WeightsGiB*(1<<30)
		}},
	}
	for _, c := range cases {
		pt := llama70BTiming(t, c.backend, 2)
		est := pt.Estimator()
		u, err := est.Memory(1, 1024, 1024, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		def, _ := engine.Defaults(c.backend, "")
		bs := def.BlockSize
		base, err := configPool(t, pt, c.backend, "")
		if err != nil {
			t.Fatal(err)
		}
		prev := 0
		for _, f := range []float64{0.5, 0.7, 0.85} {
			got, err := configPool(t, pt, c.backend, c.key+" "+strconv.FormatFloat(f, 'g', -1, 64))
			if err != nil {
				t.Fatalf("%s %s %v: %v", c.backend, c.key, f, err)
			}
			want := int(math.Floor(c.budget(u, est.System().MemCapacity, f)/est.KVBytesPerToken())) / bs * bs
			if got != want {
				t.Errorf("%s %s %v: pool %d tokens, want %d (formula)", c.backend, c.key, f, got, want)
			}
			if got <= prev {
				t.Errorf("%s %s %v: pool %d not above the lower fraction's %d", c.backend, c.key, f, got, prev)
			}
			prev = got
		}
		if half, _ := configPool(t, pt, c.backend, c.key+" 0.5"); half >= base {
			t.Errorf("%s %s 0.5: pool %d not below the default's %d", c.backend, c.key, half, base)
		}
		// A fraction too small for one request is the memory model's OOM.
		if _, err := configPool(t, pt, c.backend, c.key+" "+c.oom); !errors.Is(err, perfdb.ErrOOM) {
			t.Errorf("%s %s %s: %v, want ErrOOM", c.backend, c.key, c.oom, err)
		}
	}
}

// TestVLLMPoolKeys: vLLM's num_gpu_blocks_override sets the pool in blocks (block
// 0 its null block) and kv_cache_memory_bytes in bytes per GPU; a byte budget
// above the GPU is an OOM naming the key.
func TestVLLMPoolKeys(t *testing.T) {
	pt := llama70BTiming(t, "vllm", 2)
	if got, err := configPool(t, pt, "vllm", "--num-gpu-blocks-override 2001 --block-size 32"); err != nil || got != 2000*32 {
		t.Errorf("num_gpu_blocks_override 2001: pool %d (%v), want %d", got, err, 2000*32)
	}
	per := pt.Estimator().KVBytesPerToken()
	got, err := configPool(t, pt, "vllm", "--kv-cache-memory-bytes 20G")
	if want := int(math.Floor(20*(1<<30)/per)) / 16 * 16; err != nil || got != want {
		t.Errorf("kv_cache_memory_bytes 20G: pool %d (%v), want %d", got, err, want)
	}
	if _, err := configPool(t, pt, "vllm", "--kv-cache-memory-bytes 1T"); !errors.Is(err, perfdb.ErrOOM) ||
		!strings.Contains(err.Error(), "kv_cache_memory_bytes 1099511627776 (1024.00 GiB) > the ") {
		t.Errorf("kv_cache_memory_bytes 1T: %v, want ErrOOM naming the key", err)
	}
}

// TestSGLangConfigGraphBS: a config's cuda_graph_max_bs replaces the graph batch
// the profile's rules give (SGLang sizes mem_fraction_static's reserve with it).
func TestSGLangConfigGraphBS(t *testing.T) {
	sg := llama70BTiming(t, "sglang", 2)
	byList, err := KVPoolTokens(sg.Estimator(), engine.Spec{Backend: engine.SGLang, BlockSize: 1, CUDAGraphMaxBS: 64}, 1024, 1024, 512)
	if err != nil {
		t.Fatal(err)
	}
	byArg, err := KVPoolTokens(sg.Estimator(), engine.Spec{Backend: engine.SGLang, BlockSize: 1}, 1024, 1024, 64)
	if err != nil || byList != byArg {
		t.Errorf("cuda_graph_max_bs 64 from the config: pool %d, want %d (%v)", byList, byArg, err)
	}
	if byProfile, err := KVPoolTokens(sg.Estimator(), engine.Spec{Backend: engine.SGLang, BlockSize: 1}, 1024, 1024, 512); err != nil || byProfile == byList {
		t.Errorf("the profile's graph batch 512 gives pool %d (%v), the same as 64: the test cannot tell them apart", byProfile, err)
	}
}

// TestSweepKVDtypeMismatch: a sweep's engine config whose kv_cache_dtype
// contradicts a point's KV quant is refused before anything is evaluated; one
// that agrees (or says auto) records the dtype on the point's engine.
func TestSweepKVDtypeMismatch(t *testing.T) {
	cfg, err := engineconf.Parse("trtllm", []byte("kv_cache_config:\n  dtype: fp8\n"))
	if err != nil {
		t.Fatal(err)
	}
	s := SweepSpec{Backend: "trtllm", EngineProfile: "aiconfigurator", EngineConfig: cfg}
	pt := func(q string) []store.PointInputs {
		return []store.PointInputs{{Model: "Qwen/Qwen3-32B", Backend: "trtllm", Mode: store.ModeAgg, Batch: 8, ISL: 1024, OSL: 128, TP: 1, PP: 1, DP: 1, KVCacheQuant: q}}
	}
	// The sweep has no --kv-quant: the fix it names is the key's.
	want := "--engine-config: engine config kv_cache_dtype fp8 contradicts the KV-cache quant bfloat16 the point is timed with; a sweep times Qwen/Qwen3-32B at its own KV quant: drop the key or set it to auto"
	if err := resolveEngines(s, pt("bfloat16"), 0); err == nil || err.Error() != want {
		t.Errorf("mismatch:\n got  %v\n want %s", err, want)
	}
	ok := pt("fp8")
	if err := resolveEngines(s, ok, 0); err != nil {
		t.Fatal(err)
	}
	if r, _, err := engineconf.DecodeResolved(ok[0].Engine); err != nil || r.Engine == nil || r.Engine.KVCacheDtype != "fp8" {
		t.Errorf("recorded engine %+v (%v): want kv_cache_dtype fp8", r.Engine, err)
	}
}

// TestPoolCapKeys: TensorRT-LLM's kv_cache_config.max_tokens and SGLang's
// max_total_tokens cap the pool the memory fraction gives (the engines take the
// smaller), so a cap above it leaves the fraction's pool and one below it is the
// pool; vLLM's num_gpu_blocks_override replaces the pool (TestVLLMPoolKeys).
func TestPoolCapKeys(t *testing.T) {
	for _, c := range []struct{ backend, frac, capKey string }{
		{"trtllm", "--free_gpu_memory_fraction 0.5", "--kv_cache_config.max_tokens"},
		{"sglang", "--mem-fraction-static 0.5", "--max-total-tokens"},
	} {
		pt := llama70BTiming(t, c.backend, 2)
		byFrac, err := configPool(t, pt, c.backend, c.frac)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := configPool(t, pt, c.backend, c.frac+" "+c.capKey+" 1000000000"); err != nil || got != byFrac {
			t.Errorf("%s: cap 1e9 over %s: pool %d (%v), want the fraction's %d", c.backend, c.frac, got, err, byFrac)
		}
		if got, err := configPool(t, pt, c.backend, c.frac+" "+c.capKey+" 65536"); err != nil || got != 65536 {
			t.Errorf("%s: cap 65536: pool %d (%v), want 65536", c.backend, got, err)
		}
	}
}

// TestVLLMOverrideProfilesMemory: num_gpu_blocks_override replaces the pool vLLM
// profiles, not the profiling: a memory budget below the weights is an OOM under
// the override too (eval --kv-capacity-tokens auto sizes it so; the sweep used
// to take the override's pool without the check).
func TestVLLMOverrideProfilesMemory(t *testing.T) {
	pt := llama70BTiming(t, "vllm", 2)
	_, err := configPool(t, pt, "vllm", "--gpu-memory-utilization 0.05 --num-gpu-blocks-override 2001 --block-size 32")
	if !errors.Is(err, perfdb.ErrOOM) || !strings.Contains(err.Error(), "vllm KV budget 141.00 GiB × 0.05 × 0.98 − (weights ") {
		t.Errorf("override under a budget below the weights: %v, want the memory model's ErrOOM", err)
	}
	if got, err := configPool(t, pt, "vllm", "--gpu-memory-utilization 0.5 --num-gpu-blocks-override 2001 --block-size 32"); err != nil || got != 2000*32 {
		t.Errorf("override under a budget that fits: pool %d (%v), want %d", got, err, 2000*32)
	}
}
