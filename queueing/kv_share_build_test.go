package queueing

import (
	"fmt"
	"testing"
)

// shareBuildCase is a small trace for newKVShare (hash blocks of 4 tokens, engine
// blocks of 2): r0 and r1 share the chain (1, 2); 2 after 7 is a chain of its own
// (another parent), shared by r2 and r3; r3's id 9 lies past its prompt (names
// nothing); r4 shares nothing.
func shareBuildCase(off int64) []TraceRequest {
	ids := func(h ...int64) []int64 {
		for i := range h {
			h[i] += off
		}
		return h
	}
	return []TraceRequest{
		{ISL: 12, HashIDs: ids(1, 2, 3)},
		{ISL: 10, HashIDs: ids(1, 2, 5)},
		{ISL: 8, HashIDs: ids(7, 2)},
		{ISL: 7, HashIDs: ids(7, 2, 9)},
		{ISL: 4, HashIDs: ids(11)},
	}
}

// TestNewKVShareChains pins the shared-block state newKVShare builds, with the
// small ids (chain id = hash id, no table) and with large ones (dense numbers by a
// map): per request its leading chains another request names, and the number of
// its leading full blocks in them (r3: 7 tokens, 3 full blocks).
func TestNewKVShareChains(t *testing.T) {
	for _, c := range []struct {
		off  int64
		want string
	}{
		{0, "chains [1 2 1 2 7 12 7 12] start [0 2 4 6 8 8] keyed [4 4 4 3 0] base 13"},
		{1 << 40, "chains [0 1 0 1 4 5 4 5] start [0 2 4 6 8 8] keyed [4 4 4 3 0] base 7"},
	} {
		x := newKVShare(shareBuildCase(c.off), 4, 2)
		got := fmt.Sprintf("chains %v start %v keyed %v base %d", x.chains, x.start, x.keyed, len(x.base))
		if got != c.want {
			t.Errorf("ids +%d: %s; want %s", c.off, got, c.want)
		}
		for _, b := range x.base {
			if b != -1 {
				t.Fatalf("ids +%d: base %v; want all -1 (nothing held)", c.off, x.base)
			}
		}
	}
	if x := newKVShare([]TraceRequest{{ISL: 8, HashIDs: []int64{1, 2}}, {ISL: 8, HashIDs: []int64{3, 4}}}, 4, 2); x != nil {
		t.Errorf("no common chain: %+v; want nil", x)
	}
}

// BenchmarkNewKVShare builds the shared-block state of 20000 requests of 16 hash
// blocks, the first 8 one of 50 common prefixes: with running-number ids (no
// table) and with large ids (a map).
func BenchmarkNewKVShare(b *testing.B) {
	for _, c := range []struct {
		name string
		id   func(int64) int64
	}{{"small", func(h int64) int64 { return h }}, {"large", func(h int64) int64 { return 1<<40 + h*7919 }}} {
		b.Run(c.name, func(b *testing.B) {
			const n, groups, common, blocks = 20000, 50, 8, 16
			reqs := make([]TraceRequest, n)
			next := int64(groups * common)
			for i := range reqs {
				ids := make([]int64, blocks)
				for k := range ids {
					if k < common {
						ids[k] = c.id(int64(i%groups*common + k))
					} else {
						ids[k], next = c.id(next), next+1
					}
				}
				reqs[i] = TraceRequest{ISL: blocks * 512, HashIDs: ids}
			}
			b.ReportAllocs()
			for b.Loop() {
				if newKVShare(reqs, 512, 16) == nil {
					b.Fatal("nothing shared")
				}
			}
		})
	}
}
