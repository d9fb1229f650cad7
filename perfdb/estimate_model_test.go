package perfdb

import (
	"strings"
	"testing"
)

// TestEmbeddedModelQuant checks the checkpoint quant inference (golden_inputs
// notes, QUANT) on the embedded configs, before backend resolution.
func TestEmbeddedModelQuant(t *testing.T) {
	cases := []struct {
		id                        string
		gemm, kv, fmha, moe       string
		qkNorm                    bool
		family                    string
		window, experts, moeInter int
	}{
		{"Qwen/Qwen3-32B", "bfloat16", "bfloat16", "bfloat16", "bfloat16", true, "LLAMA", 0, 0, 0},
		{"Qwen/Qwen3-32B-FP8", "fp8_block", "fp8", "fp8", "fp8_block", true, "LLAMA", 0, 0, 0},
		{"Qwen/Qwen3-32B-FP8-Static-PerTensor", "fp8_static", "fp8", "fp8", "fp8", true, "LLAMA", 0, 0, 0},
		{"meta-llama/Meta-Llama-3.1-8B", "bfloat16", "bfloat16", "bfloat16", "bfloat16", false, "LLAMA", 0, 0, 0},
		{"MiniMaxAI/MiniMax-M2.5", "fp8_block", "fp8", "fp8", "fp8_block", true, "MOE", 0, 256, 1536},
		{"nvidia/MiniMax-M2.5-NVFP4", "nvfp4", "fp8", "fp8", "nvfp4", true, "MOE", 0, 256, 1536},
		{"openai/gpt-oss-20b", "bfloat16", "bfloat16", "bfloat16", "w4a16_mxfp4", false, "MOE", 128, 32, 2880},
		{"Qwen/Qwen3-30B-A3B", "bfloat16", "bfloat16", "bfloat16", "bfloat16", true, "MOE", 0, 128, 768},
	}
	for _, c := range cases {
		m, err := EmbeddedModel(c.id)
		if err != nil {
			t.Errorf("%s: %v", c.id, err)
			continue
		}
		got := []string{m.GemmQuant, m.KVQuant, m.FMHAQuant, m.MoEQuant}
		want := []string{c.gemm, c.kv, c.fmha, c.moe}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: quant (gemm,kv,fmha,moe) = %v, want %v", c.id, got, want)
		}
		if m.UseQKNorm != c.qkNorm || m.Family != c.family || m.SlidingWindow != c.window ||
			m.NumExperts != c.experts || m.MoEInter != c.moeInter {
			t.Errorf("%s: qk-norm %v family %s window %d experts %d moe-inter %d", c.id, m.UseQKNorm, m.Family,
				m.SlidingWindow, m.NumExperts, m.MoEInter)
		}
	}
}

// FuzzParseHFConfig: any input either errors or yields a model with positive
// dimensions and known quant spellings; it never panics.
func FuzzParseHFConfig(f *testing.F) {
	f.Add([]byte(`{"architectures":["Qwen3ForCausalLM"],"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4}`), []byte(nil))
	f.Add([]byte(`{"architectures":["GptOssForCausalLM"],"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,
"quantization_config":{"quant_method":"mxfp4"},"num_local_experts":4,"num_experts_per_tok":2}`), []byte(nil))
	f.Add([]byte(`{"architectures":["LlamaForCausalLM"],"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,
"quantization_config":{"config_groups":{"g":{"weights":{"num_bits":8,"type":"float","dynamic":false}}}}}`),
		[]byte(`{"quantization":{"quant_algo":"FP8","kv_cache_quant_algo":"FP8"}}`))
	f.Add([]byte(`{"text_config":{"architectures":["X"]}}`), []byte(`[`))
	f.Fuzz(func(t *testing.T, cfg, quant []byte) {
		m, err := ParseHFConfig("fuzz/model", "fuzz", cfg, quant)
		if err != nil {
			return
		}
		if m.Layers <= 0 || m.Hidden <= 0 || m.Heads <= 0 || m.KVHeads <= 0 {
			t.Fatalf("accepted a model with non-positive dimensions: %+v", m)
		}
		for _, q := range []string{m.KVQuant, m.FMHAQuant} {
			if q != "bfloat16" && q != "fp8" {
				t.Fatalf("unexpected kv/fmha quant %q", q)
			}
		}
		if _, err := GemmQuant(m.GemmQuant).Mapping(); err != nil {
			t.Fatalf("gemm quant %q has no mapping: %v", m.GemmQuant, err)
		}
		if _, err := MoEQuant(m.MoEQuant).Mapping(); err != nil {
			t.Fatalf("moe quant %q has no mapping: %v", m.MoEQuant, err)
		}
	})
}
