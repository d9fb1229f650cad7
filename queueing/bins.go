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
	cache []binCache // per bucket: the bins touched last
}

type bucketAcc struct {
	key    int64
	bucket int32
	w, sum float64
}

// binWays is the number of bins remembered per bucket: a bucket's gaps alternate
// between a few pass lengths (decode-only, mixed, the gaps of rows that sat out),
// each drifting slowly, so the last few bins catch most values without a log.
const binWays = 4

// binCache remembers the last binWays bins of one bucket (round robin): the
// accumulator and the value range [lo, hi) that certainly falls in its bin.
type binCache struct {
	way  [binWays]binWay
	next int
}

type binWay struct {
	i      int32 // accumulator index, −1: empty
	lo, hi float64
}

// maxBuckets bounds the bucket index of bucketBins (the composite key packs it).
const maxBuckets = 1 << 12

// add records value v (> 0) with weight w in bucket b (0 ≤ b < maxBuckets).
func (bb *bucketBins) add(b int32, v, w float64) {
	for int(b) >= len(bb.cache) {
		c := binCache{}
		for j := range c.way {
			c.way[j].i = -1
		}
		bb.cache = append(bb.cache, c)
	}
	c := &bb.cache[b]
	for j := range c.way {
		if cw := &c.way[j]; cw.i >= 0 && v >= cw.lo && v < cw.hi {
			a := &bb.acc[cw.i]
			a.w += w
			a.sum += w * v
			return
		}
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
		// The range is shrunk by 1e-12 relative on both sides so that a value inside
		// it falls in bin k by the formula above too (exp/log rounding).
		c.way[c.next] = binWay{i: i, lo: math.Exp(float64(k)/invLogBin) * (1 + 1e-12), hi: math.Exp(float64(k+1)/invLogBin) * (1 - 1e-12)}
		c.next = (c.next + 1) % binWays
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
