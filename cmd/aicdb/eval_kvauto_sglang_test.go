package main

import "testing"

// TestEvalKVCapacityAutoSGLang: for SGLang, --kv-capacity-tokens auto is the pool
// SGLang sizes itself (perfdb SGLangKVPoolTokens): the same at every prompt
// length (activations live outside mem_fraction_static), and larger under the
// aiconfigurator profile, whose --cuda-graph-bs 1…batch reserves graphs for the
// batch (32) instead of the tier's 256 on an H200 at tp 2.
func TestEvalKVCapacityAutoSGLang(t *testing.T) {
	pool := func(profile, isl string) float64 {
		t.Helper()
		n, _ := evalKVPool(t, "eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "sglang",
			"--tp", "2", "--concurrency", "32", "--isl", isl, "--osl", "500", "--kv-capacity-tokens", "auto",
			"--engine-profile", profile, "--format", "json")
		if !(n > 0) {
			t.Fatalf("kv_capacity_tokens = %v", n)
		}
		return n
	}
	short, long := pool("defaults", "1000"), pool("defaults", "4000")
	if short != long {
		t.Errorf("defaults: pool %v at isl 1000, %v at isl 4000; want the same", short, long)
	}
	if aic := pool("aiconfigurator", "4000"); !(aic > long) {
		t.Errorf("aiconfigurator pool %v, defaults %v: want it larger (graphs for 32, not 256)", aic, long)
	}
}
