package calibrate

import "testing"

// TestModelID: a measured model id finds the store's config exactly, without an
// org's "Meta-" prefix, or under the organisation's current name (zhipuai →
// zai-org); another organisation's model of the same name is not taken.
func TestModelID(t *testing.T) {
	r := &Resolver{models: []string{"meta-llama/Meta-Llama-3.1-70B", "zai-org/GLM-5", "openai/gpt-oss-120b"}}
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"openai/gpt-oss-120b", "openai/gpt-oss-120b", true},
		{"meta-llama/Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-70B", true},
		{"zhipuai/GLM-5", "zai-org/GLM-5", true},
		{"ZAI-ORG/glm-5", "zai-org/GLM-5", true},
		{"someone/GLM-5", "", false},
	} {
		got, ok := r.modelID(c.in)
		if got != c.want || ok != c.ok {
			t.Errorf("modelID(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
