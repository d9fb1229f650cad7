package perfdb

import (
	"errors"
	"math"
	"testing"
)

// TestSGLangMemFractionGraphBS: a launch's --cuda-graph-bs list sets
// cuda_graph_max_bs (its maximum), 2 MiB each in the reserve: B200 (180 GiB) tp 8
// reserves 512 + 1.5·16384 + 2·64 + 1024 MiB with graphs up to 64, 2·512 with the
// tier's default — 0.858 vs 0.853.
func TestSGLangMemFractionGraphBS(t *testing.T) {
	b200 := 193273528320.0
	mb := b200 / (1 << 20)
	for _, tc := range []struct {
		graph int
		res   float64
		want  float64
	}{{0, 512 + 1.5*16384 + 2*512 + 1024, 0.853}, {64, 512 + 1.5*16384 + 2*64 + 1024, 0.858}} {
		want := math.RoundToEven((mb-tc.res)/mb*1000) / 1000
		if got := SGLangMemFractionStatic(b200, 8, 1, 1, tc.graph); got != want || got != tc.want {
			t.Errorf("graph bs %d: %v, want %v (%v)", tc.graph, got, want, tc.want)
		}
	}
}

// TestSGLangKVPoolTokensHand checks SGLang's own pool (profile_max_num_token) for
// Qwen3-32B on h200_sxm (testSystem, capacity 141 GiB = 144 384 MiB), tp 2, bf16
// KV, page 64, against a hand computation:
//
//	reserve  = 512 + 1.5·8192 (chunk, < 160 GiB) + 2/8·1024 + 2·256 (graphs, tp < 4) = 13 568 MiB
//	fraction = round((144 384 − 13 568)/144 384, 3) = 0.906 (cuda_graph_max_bs 64: 13 184 MiB → 0.909)
//	total    = capacity − nccl 358 612 992 − others 3 758 096 384·1.2   (memory free before the weights)
//	rest     = total·fraction − weights 32 761 446 400 B (as TestKVCapacityQwen32BHand)
//	tokens   = ⌊rest / 131 072 B per token / 64⌋·64
//
// giving 762 880 (0.906), 766 208 (graphs up to 64) and 700 288 (mem_fraction_static
// 0.85, which wins over the graph knob), the same at every prompt length, and
// above the generic budget KVCapacityTokens (OOM rule: activations, tolerance).
func TestSGLangKVPoolTokensHand(t *testing.T) {
	e, err := newEstimator(fakeKernels{}, testSystem(), testModel(t), Config{Backend: "sglang", TP: 2})
	if err != nil {
		t.Fatal(err)
	}
	const capB, weights, nccl, others = 151397597184.0, 32761446400.0, 358612992.0, 3758096384 * 1.2
	hand := func(f float64) int {
		rest := (capB-nccl-others)*f - weights
		return int(math.Floor(rest/131072)) / 64 * 64
	}
	for _, tc := range []struct {
		name string
		k    KVPoolKnobs
		f    float64
		want int
	}{
		{"tier default", KVPoolKnobs{}, 0.906, 762880},
		{"cuda_graph_max_bs 64", KVPoolKnobs{GraphMaxBS: 64}, 0.909, 766208},
		{"mem_fraction_static 0.85", KVPoolKnobs{MemFraction: 0.85, GraphMaxBS: 64}, 0.85, 700288},
		{"kv_cache_memory_bytes (vLLM) ignored", KVPoolKnobs{KVCacheBytes: 1 << 30}, 0.906, 762880},
	} {
		if h := hand(tc.f); h != tc.want {
			t.Fatalf("%s: hand computation gives %d, want %d", tc.name, h, tc.want)
		}
		for _, isl := range []int{1000, 8000} {
			got, err := e.SGLangKVPoolTokens(isl, 500, 64, tc.k)
			if err != nil {
				t.Fatalf("%s isl %d: %v", tc.name, isl, err)
			}
			if got != tc.want {
				t.Errorf("%s isl %d: SGLangKVPoolTokens = %d, want %d (hand)", tc.name, isl, got, tc.want)
			}
		}
	}
	generic, err := e.KVCapacityTokens(1000, 500, 64)
	if err != nil {
		t.Fatal(err)
	}
	if !(generic < 762880) {
		t.Errorf("KVCapacityTokens = %d: not below SGLang's own pool 762880", generic)
	}
	if _, err := e.SGLangKVPoolTokens(400000, 500, 64, KVPoolKnobs{}); !errors.Is(err, ErrOOM) {
		t.Errorf("isl 400000: err = %v, want KVCapacityTokens' ErrOOM", err)
	}
}
