package oracle

import "testing"

// TestReusePinned: a running request pins its KV (AddAt). A is running when B, with
// other content, needs more blocks than are free: released at once (Add), A's blocks
// are evicted tail first and C, A's prompt again, hits only A's surviving leading
// blocks; pinned (AddAt, A runs until 1000), B cannot evict them and C hits A's whole
// prompt in whole blocks (vLLM) or tokens (SGLang) — C hits blocks A still holds.
func TestReusePinned(t *testing.T) {
	a, b := []int64{1, 2}, []int64{3, 4}
	for _, c := range []struct {
		be               Backend
		kv, bs           int
		wantNow, wantPin int
	}{
		{VLLM, 60, 16, 9 * 16, 784}, // 60 − 51 = 9 never-used blocks left for B; 784 = floor(799/16)·16
		{SGLang, 60 * 16, 1, 0, 799},
	} {
		s := newReuseT(t, c.be, c.kv, c.bs)
		s.Add(800, 10, a)
		s.Add(800, 10, b)
		if h := s.Add(800, 10, a); h != c.wantNow {
			t.Errorf("%s released at once: C hit %d, want %d", c.be, h, c.wantNow)
		}
		p := newReuseT(t, c.be, c.kv, c.bs)
		p.AddAt(0, 1000, 800, 10, a)
		p.AddAt(10, 20, 800, 10, b)
		if h := p.AddAt(30, 40, 800, 10, a); h != c.wantPin {
			t.Errorf("%s pinned: C hit %d, want %d", c.be, h, c.wantPin)
		}
		// by 5000 every earlier request has finished and released its KV
		p.AddAt(5000, 5001, 800, 10, b)
		if len(p.held) != 1 {
			t.Errorf("%s: %d requests still pinned at 5000, want 1 (the last)", c.be, len(p.held))
		}
	}
}
