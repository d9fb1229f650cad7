package oracle

import (
	"math/rand/v2"
	"testing"
)

// TestHashTabMatchesMap: random set/get/del sequences agree with a Go map.
func TestHashTabMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	tab := newHashTab(500)
	ref := map[uint64]int32{}
	keys := make([]uint64, 700)
	for i := range keys {
		keys[i] = rng.Uint64() | 1
	}
	for step := 0; step < 200000; step++ {
		k := keys[rng.IntN(len(keys))]
		switch rng.IntN(3) {
		case 0:
			if len(ref) < 500 {
				v := int32(rng.IntN(1000))
				tab.set(k, v)
				ref[k] = v
			}
		case 1:
			tab.del(k)
			delete(ref, k)
		}
		want, ok := ref[k]
		if !ok {
			want = -1
		}
		if got := tab.get(k); got != want {
			t.Fatalf("step %d: get(%x) = %d, want %d", step, k, got, want)
		}
	}
	for k, v := range ref {
		if tab.get(k) != v {
			t.Fatalf("final get(%x) = %d, want %d", k, tab.get(k), v)
		}
	}
}
