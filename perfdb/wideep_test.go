package perfdb

import (
	"fmt"
	"strings"
	"testing"
)

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

// callLog records the wide-EP kernel calls of a pass.
type callLog struct {
	fakeKernels
	calls *[]string
}

func (c callLog) MoEA2A(backend, phase string, ep, nodes, hidden, topk, experts, sms, tokens int) (Perf, error) {
	*c.calls = append(*c.calls, fmt.Sprintf("a2a %s %s ep%d nodes%d h%d k%d e%d sms%d tok%d", backend, phase, ep, nodes, hidden, topk, experts, sms, tokens))
	return c.fakeKernels.MoEA2A(backend, phase, ep, nodes, hidden, topk, experts, sms, tokens)
}
func (c callLog) WideEPExpert(a MoEArgs, phase string, tokens int) (Perf, error) {
	*c.calls = append(*c.calls, fmt.Sprintf("expert %s %s %s ep%d tp%d dp%d tok%d", phase, a.Quant, a.Distribution, a.MoEEP, a.MoETP, a.AttentionDP, tokens))
	return c.fakeKernels.WideEPExpert(a, phase, tokens)
}
func (c callLog) WideEPContextMLA(batch, s, prefix, heads int, kernel string, kv KVQuant, fmha FMHAQuant) (Perf, error) {
	*c.calls = append(*c.calls, fmt.Sprintf("ctx-mla b%d s%d p%d n%d %s", batch, s, prefix, heads, kernel))
	return c.fakeKernels.WideEPContextMLA(batch, s, prefix, heads, kernel, kv, fmha)
}
func (c callLog) WideEPGenerationMLA(batch, s, heads int, kernel string, kv KVQuant) (Perf, error) {
	*c.calls = append(*c.calls, fmt.Sprintf("gen-mla b%d s%d n%d %s", batch, s, heads, kernel))
	return c.fakeKernels.WideEPGenerationMLA(batch, s, heads, kernel, kv)
}

// TestWideEPGraph: the op lists are the reference's SGLang large-EP DeepSeek
// graph (deepseek.py sglang deepep branch + blocks/moe.py), and a pass calls
// the wide-EP kernels with the reference's arguments: the context
// all-to-all at the 20-SM budget on one node for 8 ranks, the expert compute
// with moe-tp 1 and the attention DP, the DeepEP MLA at 128/tp heads.
func TestWideEPGraph(t *testing.T) {
	ds := embeddedModel(t, "deepseek-ai/DeepSeek-R1")
	var calls []string
	e, err := newEstimator(callLog{calls: &calls}, testSystem(), ds,
		Config{Backend: "sglang", TP: 1, DP: 8, MoEEP: 8, WideEP: true, MoEQuant: "fp8_block", GemmQuant: "fp8_block", KVQuant: KVFP8, FMHAQuant: FMHAFP8Block})
	if err != nil {
		t.Fatal(err)
	}
	names := func(ops []op) []string {
		var out []string
		for _, o := range ops {
			out = append(out, fmt.Sprintf("%s×%g", o.name, o.scale))
		}
		return out
	}
	wantCtx := "[context_qkv_a_proj_gemm×61 context_embedding×1 context_add_norm_1×61 context_downscale_gemm×61 context_attention×61 " +
		"context_gate_ffn1_gemm×61 context_act_gate×61 context_ffn2_gemm×61 context_moe_dispatch×61 context_moe×61 context_moe_combine×61]"
	if got := fmt.Sprint(names(e.ops.ctx)); got != wantCtx {
		t.Errorf("context ops %s\nwant %s", got, wantCtx)
	}
	wantGen := "[generation_qkv_a_proj_gemm×61 generation_embedding×1 generation_add_norm_1×61 generation_downscale_gemm×61 generation_attention×61 " +
		"generation_gate_ffn1_gemm×61 generation_act_gate×61 generation_ffn2_gemm×61 generation_moe_dispatch×61 generation_moe×61 generation_moe_combine×61]"
	if got := fmt.Sprint(names(e.ops.gen)); got != wantGen {
		t.Errorf("generation ops %s\nwant %s", got, wantGen)
	}
	if e.ops.ctx[5].n != 2*2048 || e.ops.ctx[7].k != 2048 {
		t.Errorf("shared expert is not full width: gate/up n %d, down k %d", e.ops.ctx[5].n, e.ops.ctx[7].k)
	}
	calls = nil
	if _, err := e.ContextMs(2, 1000, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GenerationMs(16, 1000, 2, 1); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ctx-mla b2 s1000 p0 n128 flashinfer",
		"a2a deepep_ht dispatch ep8 nodes1 h7168 k8 e256 sms20 tok2000",
		"expert context fp8_block power_law_1.01 ep8 tp1 dp8 tok2000",
		"a2a deepep_ht combine ep8 nodes1 h7168 k8 e256 sms20 tok2000",
		"gen-mla b16 s1001 n128 flashinfer",
		"a2a deepep_ll dispatch ep8 nodes1 h7168 k8 e256 sms0 tok16",
		"expert generation fp8_block power_law_1.01 ep8 tp1 dp8 tok16",
		"a2a deepep_ll combine ep8 nodes1 h7168 k8 e256 sms0 tok16",
	}
	if fmt.Sprint(calls) != fmt.Sprint(want) {
		t.Errorf("calls\n%s\nwant\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
}
