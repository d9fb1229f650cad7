package calibrate

import "testing"

// TestModelID: a measured model id finds the store's config exactly, without an
// org's "Meta-" prefix, or under the organisation's current name (zhipuai →
// zai-org), or NVIDIA's re-quantised checkpoint by its base model; another
// organisation's model of the same name is not taken.
func TestModelID(t *testing.T) {
	r := &Resolver{models: []string{"meta-llama/Meta-Llama-3.1-70B", "zai-org/GLM-5", "openai/gpt-oss-120b", "deepseek-ai/DeepSeek-R1", "nvidia/Kimi-K2.5-NVFP4", "moonshotai/Kimi-K2.5"}}
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"openai/gpt-oss-120b", "openai/gpt-oss-120b", true},
		{"meta-llama/Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-70B", true},
		{"zhipuai/GLM-5", "zai-org/GLM-5", true},
		{"ZAI-ORG/glm-5", "zai-org/GLM-5", true},
		{"someone/GLM-5", "", false},
		{"nvidia/DeepSeek-R1-NVFP4", "deepseek-ai/DeepSeek-R1", true},
		{"nvidia/Kimi-K2.5-NVFP4", "nvidia/Kimi-K2.5-NVFP4", true}, // its own config wins
		{"nvidia/DeepSeek-R1", "", false},                          // not a re-quantised name
		{"someone/DeepSeek-R1-NVFP4", "", false},                   // only NVIDIA's checkpoints
	} {
		got, ok := r.modelID(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("modelID(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestFP8Scaling: a bare "fp8" label takes the checkpoint's fp8 scaling, else the
// sibling label's block mode; every other label passes unchanged.
func TestFP8Scaling(t *testing.T) {
	for _, c := range []struct{ label, checkpoint, sibling, want string }{
		{"fp8", "fp8_block", "", "fp8_block"},         // DeepSeek-R1 on TRT-LLM: fp8/fp8
		{"fp8", "bfloat16", "fp8_block", "fp8_block"}, // GLM-5 on SGLang: fp8 beside fp8_block
		{"fp8", "bfloat16", "", "fp8"},
		{"fp8", "bfloat16", "nvfp4", "fp8"},
		{"nvfp4", "fp8_block", "nvfp4", "nvfp4"},
		{"fp8_block", "bfloat16", "", "fp8_block"},
		{"", "fp8_block", "", ""},
	} {
		if got := fp8Scaling(c.label, c.checkpoint, c.sibling); got != c.want {
			t.Errorf("fp8Scaling(%q, %q, %q) = %q, want %q", c.label, c.checkpoint, c.sibling, got, c.want)
		}
	}
}
