package refine

import "testing"

// TestEnumerateRejectsBeyondContext: a sweep whose isl + osl exceeds the model's
// context length (issue 8 item 4) is refused with the limit named; one that fits,
// or a model whose limit is unknown (0), is enumerated.
func TestEnumerateRejectsBeyondContext(t *testing.T) {
	spec := defaultSpec()
	r := Resolved{Version: "v", Heads: 64, MaxPos: 4096, DatabaseMode: "SILICON"}
	_, err := Enumerate(spec, r, "test-1")
	if err == nil || err.Error() != "--isl 4000 + --osl 500 = 4500 tokens exceeds the context length of Qwen/Qwen3-32B (max_position_embeddings 4096); lower --isl or --osl" {
		t.Fatalf("err %v", err)
	}
	for _, maxPos := range []int{4500, 0} {
		r.MaxPos = maxPos
		if pts, err := Enumerate(spec, r, "test-1"); err != nil || len(pts) == 0 {
			t.Fatalf("MaxPos %d: %d points, %v", maxPos, len(pts), err)
		}
	}
}
