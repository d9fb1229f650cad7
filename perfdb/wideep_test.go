package perfdb

import "testing"

// TestWideEP: a feasible wide-EP request is refused with one line naming the
// all-to-all backends the reference would use per phase and the tables it reads;
// an infeasible one names the rule it breaks; no request is priced on the fused
// path instead.
func TestWideEP(t *testing.T) {
	ds := embeddedModel(t, "deepseek-ai/DeepSeek-R1")
	q35 := embeddedModel(t, "Qwen/Qwen3.5-397B-A17B")
	llama := embeddedModel(t, "meta-llama/Meta-Llama-3.1-8B")
	b200 := testSystem()
	b200.SMVersion = 100
	cases := []struct {
		name string
		m    *Model
		sys  *System
		cfg  Config
		want string
	}{
		{"sglang", ds, b200, Config{Backend: "sglang", TP: 1, DP: 16, MoEEP: 16},
			"wide-EP (all-to-all MoE) on sglang is not modeled by aicdb: the reference prices context deepep_ht (wideep_deepep_normal_perf + wideep_context_moe_perf), generation deepep_ll (wideep_deepep_ll_perf + wideep_generation_moe_perf), tables aicdb does not load; drop --wide-ep to price the fused all-gather/reduce-scatter path"},
		{"vllm", ds, b200, Config{Backend: "vllm", TP: 8, MoEEP: 8},
			"wide-EP (all-to-all MoE) on vllm is not modeled by aicdb: the reference prices context deepep_ht (wideep_deepep_normal_perf + wideep_context_moe_perf), generation deepep_ll (wideep_deepep_ll_perf + wideep_generation_moe_perf), tables aicdb does not load; drop --wide-ep to price the fused all-gather/reduce-scatter path"},
		{"trtllm", ds, b200, Config{Backend: "trtllm", TP: 1, DP: 8, MoEEP: 8},
			"wide-EP (all-to-all MoE) on trtllm is not modeled by aicdb: the reference prices context nvlink_two_sided (trtllm_alltoall_perf + wideep_moe_perf), generation nvlink_two_sided (trtllm_alltoall_perf + wideep_moe_perf), tables aicdb does not load; drop --wide-ep to price the fused all-gather/reduce-scatter path"},
		{"trtllm tp", ds, b200, Config{Backend: "trtllm", TP: 8, MoEEP: 8},
			"wide-EP on trtllm needs attention data parallelism: --dp 1, want > 1"},
		{"trtllm sm90", ds, testSystem(), Config{Backend: "trtllm", TP: 1, DP: 8, MoEEP: 8},
			"wide-EP: no all-to-all backend serves the context phase on trtllm at SM 90"},
		{"moe-tp", ds, b200, Config{Backend: "sglang", TP: 8, MoETP: 2, MoEEP: 4},
			"wide-EP: --moe-tp 2: the all-to-all needs moe-tp 1 (experts split by expert parallelism only)"},
		{"moe-ep", ds, b200, Config{Backend: "sglang", TP: 1, MoEEP: 1},
			"wide-EP: --moe-ep 1: want 1 < moe-ep ≤ 256 dividing the 256 experts of deepseek-ai/DeepSeek-R1"},
		{"top-k", q35, b200, Config{Backend: "sglang", TP: 8, MoEEP: 8},
			"wide-EP: Qwen/Qwen3.5-397B-A17B routes to 10 experts per token; the all-to-all backends serve top-k ≤ 8"},
		{"dense", llama, b200, Config{Backend: "vllm", TP: 8},
			"wide-EP: meta-llama/Meta-Llama-3.1-8B has no routed experts (family LLAMA)"},
	}
	for _, c := range cases {
		cfg := c.cfg
		cfg.WideEP = true
		_, err := newEstimator(fakeKernels{}, c.sys, c.m, cfg)
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: err = %v\nwant %s", c.name, err, c.want)
		}
		cfg.WideEP = false
		if _, err := newEstimator(fakeKernels{}, c.sys, c.m, cfg); err != nil && c.name == "sglang" {
			t.Errorf("%s without --wide-ep: %v (the fused path must still build)", c.name, err)
		}
	}
}
