package perfdb

import "testing"

func TestSuggestModel(t *testing.T) {
	ids := []string{"meta-llama/Meta-Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-8B", "Qwen/Qwen3-32B", "Qwen/Qwen3-32B-FP8"}
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"meta-llama/Llama-3.1-70B", "meta-llama/Meta-Llama-3.1-70B", true},
		{"qwen/qwen3_32b", "Qwen/Qwen3-32B", true},
		{"Qwen3-32B-fp8", "Qwen/Qwen3-32B-FP8", true},
		{"meta-llama/Llama-3.1-405B", "", false},
	} {
		if got, ok := SuggestModel(c.in, ids); got != c.want || ok != c.ok {
			t.Errorf("SuggestModel(%q) = %q, %v; want %q, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	if _, ok := SuggestModel("a/x-1", []string{"a/X-1", "b/x_1"}); ok {
		t.Error("two matches: want no suggestion")
	}
}
