package oracle

import (
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/engine"
)

// TestReusePinned: a running request pins its KV (AddAt). A is running when B, with
// other content, needs more blocks than are free: released at once (Add), A's blocks
// are evicted tail first and C, A's prompt again, hits only A's surviving leading
// blocks; pinned (AddAt, A runs until 1000), B cannot evict them and C hits A's whole
// prompt in whole blocks (vLLM) or tokens (SGLang) — C hits blocks A still holds.
func TestReusePinned(t *testing.T) {
	a, b := []int64{1, 2}, []int64{3, 4}
	for _, c := range []struct {
		be               engine.Backend
		kv, bs           int
		wantNow, wantPin int
	}{
		{engine.VLLM, 60, 16, 9 * 16, 784}, // 60 − 51 = 9 never-used blocks left for B; 784 = floor(799/16)·16
		{engine.SGLang, 60 * 16, 1, 0, 799},
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

// TestReuseSimPinnedReuses: Pinned on a cache that has already replayed requests
// (some still held) returns ReusePinned's hits on a fresh cache, for every backend,
// and a second Pinned the same again — the reset leaves nothing behind.
func TestReuseSimPinnedReuses(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		be := rapid.SampledFrom([]engine.Backend{engine.VLLM, engine.SGLang, engine.TRTLLM}).Draw(t, "backend")
		cfg := ReuseConfig{Backend: be, KVBlocks: rapid.IntRange(1, 400).Draw(t, "kv"),
			BlockSize: rapid.SampledFrom([]int{1, 16, 32}).Draw(t, "bs"), HashBlock: 64}
		n := rapid.IntRange(0, 30).Draw(t, "n")
		reqs := make([]ReuseRequest, n)
		at := 0.0
		for i := range reqs {
			at += float64(rapid.IntRange(0, 50).Draw(t, "gap"))
			isl := rapid.IntRange(1, 700).Draw(t, "isl")
			ids := make([]int64, (isl+63)/64)
			for k := range ids {
				ids[k] = int64(rapid.IntRange(0, 3).Draw(t, "id"))
			}
			reqs[i] = ReuseRequest{ArrivalMs: at, FinishMs: at + float64(rapid.IntRange(0, 200).Draw(t, "run")),
				ISL: isl, OSL: rapid.IntRange(1, 100).Draw(t, "osl"), HashIDs: ids}
		}
		want, err := ReusePinned(cfg, reqs)
		if err != nil {
			t.Fatal(err)
		}
		s, err := NewReuse(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reqs {
			s.Expect(r.HashIDs)
		}
		for i, r := range reqs { // half released at once, half still held
			if i%2 == 0 {
				s.Add(r.ISL, r.OSL, r.HashIDs)
			} else {
				s.AddAt(r.ArrivalMs, r.FinishMs+1e6, r.ISL, r.OSL, r.HashIDs)
			}
		}
		for pass := range 2 {
			got, err := s.Pinned(reqs)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("pass %d: Pinned %v, ReusePinned %v", pass, got, want)
			}
		}
	})
}
