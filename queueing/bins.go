package queueing

import (
	"cmp"
	"math"
	"slices"
)

// binStep is the relative width of an ITL bin: values within a factor (1 + 1e-4)
// share an atom (their weighted mean), so quantiles move by < 1e-4 relative and
// the mean is exact. Equal values stay exact.
const binStep = 1e-4

// binMargin is how far (relative) a cached bin range keeps inside its bin's edges:
// far above the rounding of binOf's floor(log(v)·invLogBin) (~1e-15) and the drift
// of a chain of binAfter steps, far below the bin width.
const binMargin = 1e-10

var invLogBin = 1 / math.Log1p(binStep)

// bucketBins accumulates weighted values into log-spaced bins, per bucket (a
// closed loop's generations): O(1) per value and a sort over the bins used,
// instead of a sort over every gap of every pass. One index keyed by (bin, bucket)
// serves every bucket, so the steady window can be chosen after the fact without a
// map per generation; bins of the same key in different buckets merge exactly as
// if their values had been added together.
type bucketBins struct {
	idx   map[int64]int32
	acc   []bucketAcc
	cache []binCache // per bucket: the bin touched last
}

type bucketAcc struct {
	key    int64
	bucket int32
	w, sum float64
}

type binCache struct {
	i      int32
	lo, hi float64
}

// maxBuckets bounds the bucket index of bucketBins (the composite key packs it).
const maxBuckets = 1 << 12

// add records value v (> 0) with weight w in bucket b (0 ≤ b < maxBuckets).
func (bb *bucketBins) add(b int32, v, w float64) {
	if c := bb.cacheOf(b); !bb.addCached(c, v, w) {
		bb.place(b, c, bb.binAfter(c, v), v, w)
	}
}

// addRows is add(r.bucket, v, r.n) for each row group r of a pass (the same gap in
// several buckets): the bin of v is computed once, on the first cache miss.
func (bb *bucketBins) addRows(rows []bucketRows, v float64) {
	var bin vbin
	have := false
	for _, r := range rows {
		c := bb.cacheOf(r.bucket)
		if bb.addCached(c, v, r.n) {
			continue
		}
		if !have {
			bin, have = bb.binAfter(c, v), true
		}
		bb.place(r.bucket, c, bin, v, r.n)
	}
}

// addCached adds v with weight w to the bin of cache c and reports true when v
// falls in it.
func (bb *bucketBins) addCached(c *binCache, v, w float64) bool {
	if !(c.i >= 0 && v >= c.lo && v < c.hi) {
		return false
	}
	a := &bb.acc[c.i]
	a.w += w
	a.sum += w * v
	return true
}

// cacheOf returns bucket b's last-bin cache.
func (bb *bucketBins) cacheOf(b int32) *binCache {
	for int(b) >= len(bb.cache) {
		bb.cache = append(bb.cache, binCache{i: -1})
	}
	return &bb.cache[b]
}

// vbin is the bin of a value: its key and, for v > 0, the value range that
// certainly falls in it (the cache's interval).
type vbin struct {
	k      int64
	lo, hi float64
}

// binOf returns v's bin.
func binOf(v float64) vbin {
	if !(v > 0) {
		return vbin{k: -1 << 50} // v ≤ 0 (not a gap; kept apart)
	}
	k := int64(math.Floor(math.Log(v) * invLogBin))
	// The upper edge e^((k+1)/invLogBin) is the lower one times 1 + binStep up to a
	// few ulps, far inside the margins.
	e := math.Exp(float64(k) / invLogBin)
	return vbin{k: k, lo: e * (1 + binMargin), hi: e * (1 + binStep) * (1 - binMargin)}
}

// binAfter is binOf(v), derived without logarithms when v lies in the bin right
// above the cached one c (a decode stretch's pass lengths grow by less than a bin
// per pass): bin k + 1 spans [B, B·(1 + binStep)) for B the cached bin's upper
// edge, recovered from c.hi = B·(1 − binMargin), and the derived range keeps
// binMargin inside it, so a value it admits is one binOf puts in bin k + 1. Each
// step re-derives B from the last range (a few ulps of drift per step, not a
// margin lost per step): ranges chained over 10⁵ steps stay inside their bins.
func (bb *bucketBins) binAfter(c *binCache, v float64) vbin {
	if c.i >= 0 && v >= c.hi {
		b := c.hi / (1 - binMargin)
		lo, hi := b*(1+binMargin), b*(1+binStep)*(1-binMargin)
		if v >= lo && v < hi {
			return vbin{k: bb.acc[c.i].key + 1, lo: lo, hi: hi}
		}
	}
	return binOf(v)
}

// place adds (v, w) to bin `bin` of bucket b and points b's cache c at it.
func (bb *bucketBins) place(b int32, c *binCache, bin vbin, v, w float64) {
	ck := bin.k*maxBuckets + int64(b)
	if bb.idx == nil {
		bb.idx = make(map[int64]int32, 256)
	}
	i, ok := bb.idx[ck]
	if !ok {
		i = int32(len(bb.acc))
		bb.idx[ck] = i
		bb.acc = append(bb.acc, bucketAcc{key: bin.k, bucket: b})
	}
	a := &bb.acc[i]
	a.w += w
	a.sum += w * v
	if v > 0 {
		c.i, c.lo, c.hi = i, bin.lo, bin.hi
	} else {
		c.i = -1
	}
}

// emptied returns bb with nothing added, keeping its buffers for reuse.
func (bb bucketBins) emptied() bucketBins {
	clear(bb.idx)
	return bucketBins{idx: bb.idx, acc: bb.acc[:0], cache: bb.cache[:0]}
}

// dist returns the binned distribution of the buckets [lo, hi) (empty when
// nothing was added there).
func (bb *bucketBins) dist(lo, hi int) Distribution {
	sel := make([]bucketAcc, 0, len(bb.acc))
	for _, a := range bb.acc {
		if int(a.bucket) >= lo && int(a.bucket) < hi {
			sel = append(sel, a)
		}
	}
	return mergeBins(sel)
}

// binSnap is one bin's weight and sum at a checkpoint (index into acc).
type binSnap struct {
	i      int32
	w, sum float64
}

// snapFrom appends to dst the bins of buckets ≥ lo (in acc order), the only ones
// values can still be added to when no bucket below lo receives any.
func (bb *bucketBins) snapFrom(dst []binSnap, lo int32) []binSnap {
	n := 0
	for _, a := range bb.acc {
		if a.bucket >= lo {
			n++
		}
	}
	dst = slices.Grow(dst, n)
	for i, a := range bb.acc {
		if a.bucket >= lo {
			dst = append(dst, binSnap{int32(i), a.w, a.sum})
		}
	}
	return dst
}

// distSince returns the binned distribution of the values added (in any bucket
// ≥ lo) since prev = snapFrom(lo): each bin's weight and sum less prev's.
func (bb *bucketBins) distSince(prev []binSnap, lo int32) Distribution {
	sel := make([]bucketAcc, 0, len(bb.acc))
	j := 0
	for i, a := range bb.acc {
		if a.bucket < lo {
			continue
		}
		if j < len(prev) && int(prev[j].i) == i {
			a.w -= prev[j].w
			a.sum -= prev[j].sum
			j++
		}
		if a.w > 0 {
			sel = append(sel, a)
		}
	}
	return mergeBins(sel)
}

// mergeBins sorts sel by bin and merges each bin's buckets into one atom (their
// weighted mean).
func mergeBins(sel []bucketAcc) Distribution {
	slices.SortFunc(sel, func(x, y bucketAcc) int { return cmp.Compare(x.key, y.key) })
	atoms := make([]Atom, 0, len(sel))
	for i := 0; i < len(sel); {
		j, w, sum := i, 0.0, 0.0
		for ; j < len(sel) && sel[j].key == sel[i].key; j++ {
			w += sel[j].w
			sum += sel[j].sum
		}
		atoms = append(atoms, Atom{Value: sum / w, Weight: w})
		i = j
	}
	return fromAtomsOwned(atoms)
}
