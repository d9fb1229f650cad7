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
	for int(b) >= len(bb.cache) {
		bb.cache = append(bb.cache, binCache{i: -1})
	}
	c := &bb.cache[b]
	if c.i >= 0 && v >= c.lo && v < c.hi {
		a := &bb.acc[c.i]
		a.w += w
		a.sum += w * v
		return
	}
	var k int64 = -1 << 50 // v ≤ 0 (not a gap; kept apart)
	if v > 0 {
		k = int64(math.Floor(math.Log(v) * invLogBin))
	}
	ck := k*maxBuckets + int64(b)
	if bb.idx == nil {
		bb.idx = make(map[int64]int32, 256)
	}
	i, ok := bb.idx[ck]
	if !ok {
		i = int32(len(bb.acc))
		bb.idx[ck] = i
		bb.acc = append(bb.acc, bucketAcc{key: k, bucket: b})
	}
	a := &bb.acc[i]
	a.w += w
	a.sum += w * v
	if v > 0 {
		c.i = i
		c.lo = math.Exp(float64(k)/invLogBin) * (1 + 1e-12)
		c.hi = math.Exp(float64(k+1)/invLogBin) * (1 - 1e-12)
	} else {
		c.i = -1
	}
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
