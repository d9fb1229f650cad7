package perfdb

import "testing"

// TestWideEP: a feasible SGLang DeepSeek wide-EP deployment is priced; one
// the data or the model does not cover is refused with one line naming what
// is missing; an infeasible one names the rule it breaks; no request is
// priced on the fused path instead.
func TestWideEP(t *testing.T) {
	ds := embeddedModel(t, "deepseek-ai/DeepSeek-R1")
	q35 := embeddedModel(t, "Qwen/Qwen3.5-397B-A17B")
	llama := embeddedModel(t, "meta-llama/Meta-Llama-3.1-8B")
	qwen3 := embeddedModel(t, "Qwen/Qwen3-30B-A3B")
	b200 := testSystem()
	b200.SMVersion = 100
	cases := []struct {
		name string
		m    *Model
		sys  *System
		cfg  Config
		want string
	}{
		{"sglang", ds, b200, Config{Backend: "sglang", TP: 1, DP: 16, MoEEP: 16}, ""},
		{"vllm", ds, b200, Config{Backend: "vllm", TP: 8, MoEEP: 8},
			"wide-EP on vllm is not priced: no vllm DeepEP tables exist (wideep_deepep_normal/ll_perf and wideep_context/generation_moe_perf are collected for sglang only); drop --wide-ep to price the fused all-gather/reduce-scatter path"},
		{"trtllm", ds, b200, Config{Backend: "trtllm", TP: 1, DP: 8, MoEEP: 8},
			"wide-EP on trtllm is not priced: its nvlink all-to-all needs trtllm_alltoall_perf, which aicdb does not load (absent from the b200/h200 data, which has only wideep_moe_perf); drop --wide-ep to price the fused all-gather/reduce-scatter path"},
		{"sglang moe family", qwen3, b200, Config{Backend: "sglang", TP: 1, DP: 8, MoEEP: 8},
			"wide-EP on sglang is priced for the DeepSeek MLA families (DEEPSEEK, KIMIK25); Qwen/Qwen3-30B-A3B is family MOE; drop --wide-ep to price the fused all-gather/reduce-scatter path"},
		{"sglang tp", ds, b200, Config{Backend: "sglang", TP: 2, DP: 4, MoEEP: 8},
			"wide-EP on sglang with --tp 2: the all-gather/reduce-scatter around a TP-sharded DeepEP attention is not modeled; use --tp 1 and --dp 8"},
		{"sglang pp", ds, b200, Config{Backend: "sglang", TP: 1, PP: 2, DP: 8, MoEEP: 8},
			"wide-EP on sglang with --pp 2: pipeline parallelism is not part of the reference's wide-EP graph; use --pp 1"},
		{"sglang sol", ds, b200, Config{Backend: "sglang", TP: 1, DP: 8, MoEEP: 8, Mode: ModeSOL},
			"wide-EP is priced from silicon tables only (database mode SOL has no estimate for them); use SILICON or HYBRID"},
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
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil || err.Error() != c.want {
			t.Errorf("%s: err = %v\nwant %s", c.name, err, c.want)
		}
		cfg.WideEP = false
		if _, err := newEstimator(fakeKernels{}, c.sys, c.m, cfg); err != nil && c.name == "sglang" {
			t.Errorf("%s without --wide-ep: %v (the fused path must still build)", c.name, err)
		}
	}
}
