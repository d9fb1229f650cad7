package queueing

import (
	"math"
	"testing"

	"pgregory.net/rapid"
)

// TestPropertyBinCacheRanges: every value inside a bin's cache range, as binOf
// and binAfter state it, has that bin's key (floor(log v · invLogBin)), and the
// range holds the value it was derived from when that value is not within the
// margins of an edge — so a cache hit never files a gap under another bin than
// binOf would.
func TestPropertyBinCacheRanges(t *testing.T) {
	key := func(v float64) int64 { return int64(math.Floor(math.Log(v) * invLogBin)) }
	rapid.Check(t, func(rt *rapid.T) {
		v := math.Exp(rapid.Float64Range(-20, 20).Draw(rt, "lnv"))
		b := binOf(v)
		if b.k != key(v) || !(b.lo < b.hi) {
			rt.Fatalf("binOf(%v) = %+v, key %d", v, b, key(v))
		}
		u := b.lo + rapid.Float64Range(0, 1).Draw(rt, "u")*(b.hi-b.lo)
		if u < b.hi && key(u) != b.k {
			rt.Fatalf("%v in [%v, %v) has key %d, the range's %d", u, b.lo, b.hi, key(u), b.k)
		}
		for _, edge := range []float64{b.lo, math.Nextafter(b.hi, 0)} {
			if key(edge) != b.k {
				rt.Fatalf("edge %v of bin %d has key %d", edge, b.k, key(edge))
			}
		}
		// binAfter: the bins above the cached one, each derived from the last (no
		// logarithm) for up to 5,000 steps.
		bb := bucketBins{acc: []bucketAcc{{key: b.k}}}
		c := binCache{i: 0, lo: b.lo, hi: b.hi}
		steps := rapid.IntRange(1, 5000).Draw(rt, "steps")
		for j := 0; j < steps; j++ {
			w := c.hi * (1 + rapid.Float64Range(0, 2e-4).Draw(rt, "step"))
			n := bb.binAfter(&c, w)
			if n.k != key(w) {
				rt.Fatalf("step %d: binAfter(%v) key %d, want %d", j, w, n.k, key(w))
			}
			for _, edge := range []float64{n.lo, math.Nextafter(n.hi, 0)} {
				if key(edge) != n.k {
					rt.Fatalf("step %d: binAfter edge %v of bin %d has key %d", j, edge, n.k, key(edge))
				}
			}
			bb.acc = append(bb.acc, bucketAcc{key: n.k})
			c = binCache{i: int32(len(bb.acc) - 1), lo: n.lo, hi: n.hi}
		}
	})
}
