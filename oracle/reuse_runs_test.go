package oracle

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// TestReuseRunsSameHits: the vLLM prefix-cache map keyed by hash id (runIndex) gives
// the same hits as keying by block hash, request by request — released at once with
// and without Expect, and pinned (AddAt) — on random streams over few hash ids and
// small pools, so evictions split runs, duplicates are registered (a miss before a
// still-cached block) and block sizes that do not divide the hash block occur. The
// ids either name one chain each (numbered in order of appearance, as Mooncake's:
// the run is the id itself), now and then with a negative or far id that moves the
// runs to the map mid-stream, or are drawn freely (an id under several prefixes).
func TestReuseRunsSameHits(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		bs := rapid.SampledFrom([]int{1, 3, 16, 32, 48}).Draw(t, "bs")
		hb := rapid.SampledFrom([]int{16, 64, 100}).Draw(t, "hb")
		cfg := ReuseConfig{Backend: VLLM, KVBlocks: rapid.IntRange(1, 300).Draw(t, "kv"), BlockSize: bs, HashBlock: hb}
		n := rapid.IntRange(1, 40).Draw(t, "n")
		consistent := rapid.Bool().Draw(t, "consistent")
		type edge struct {
			parent int64
			choice int
		}
		idOf := map[edge]int64{}
		reqs := make([]ReuseRequest, n)
		at := 0.0
		for i := range reqs {
			at += float64(rapid.IntRange(0, 20).Draw(t, "gap"))
			isl := rapid.IntRange(1, 600).Draw(t, fmt.Sprintf("isl%d", i))
			ids := make([]int64, rapid.IntRange(0, (isl+hb-1)/hb).Draw(t, "nids"))
			for k := range ids {
				c := rapid.IntRange(0, 2).Draw(t, "id")
				if !consistent {
					ids[k] = int64(c)
					continue
				}
				e := edge{-1, c}
				if k > 0 {
					e.parent = ids[k-1]
				}
				id, ok := idOf[e]
				if !ok {
					id = int64(len(idOf))
					if rapid.IntRange(0, 30).Draw(t, "wild") == 0 {
						id = rapid.SampledFrom([]int64{-7, 1 << 40, 3 << 20}).Draw(t, "far")
					}
					idOf[e] = id
				}
				ids[k] = id
			}
			reqs[i] = ReuseRequest{ArrivalMs: at, FinishMs: at + float64(rapid.IntRange(0, 100).Draw(t, "run")),
				ISL: isl, OSL: rapid.IntRange(1, 200).Draw(t, "osl"), HashIDs: ids}
		}
		hits := func(maxWidth int, expect, pinned bool) []int {
			s, err := newReuse(cfg, maxWidth)
			if err != nil {
				t.Fatal(err)
			}
			if (s.runs != nil) != (maxWidth > 0) {
				t.Fatalf("max width %d: runs %v", maxWidth, s.runs != nil)
			}
			if pinned {
				h, err := s.Pinned(reqs)
				if err != nil {
					t.Fatal(err)
				}
				return h
			}
			if expect {
				for _, r := range reqs {
					s.Expect(r.HashIDs)
				}
			}
			out := make([]int, len(reqs))
			for i, r := range reqs {
				out[i] = s.Add(r.ISL, r.OSL, r.HashIDs)
			}
			return out
		}
		for _, m := range []struct{ expect, pinned bool }{{false, false}, {true, false}, {false, true}} {
			byRun, byHash := hits(1<<20, m.expect, m.pinned), hits(0, m.expect, m.pinned)
			for i := range byRun {
				if byRun[i] != byHash[i] {
					t.Fatalf("expect %v pinned %v: request %d hit %d keyed by hash id, %d by block hash", m.expect, m.pinned, i, byRun[i], byHash[i])
				}
			}
		}
	})
}
