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

// bins accumulates weighted values into log-spaced bins: O(1) per value and a
// sort over the bins used, instead of a sort over every gap of every pass.
type bins struct {
	idx     map[int64]int32
	acc     []binAcc
	lastKey int64
	last    int32 // index of the last bin touched (consecutive passes often share it)
	// lastLo ≤ v < lastHi ⇒ v falls in the last bin (no logarithm needed).
	lastLo, lastHi float64
}

type binAcc struct {
	key    int64
	w, sum float64
}

func (b *bins) key(v float64) int64 {
	if v <= 0 {
		return math.MinInt64
	}
	return int64(math.Floor(math.Log(v) * invLogBin))
}

// add records value v with weight w (> 0).
func (b *bins) add(v, w float64) {
	if len(b.acc) > 0 && v >= b.lastLo && v < b.lastHi {
		a := &b.acc[b.last]
		a.w += w
		a.sum += w * v
		return
	}
	k := b.key(v)
	if len(b.acc) > 0 && k == b.lastKey {
		a := &b.acc[b.last]
		a.w += w
		a.sum += w * v
		return
	}
	if b.idx == nil {
		b.idx = make(map[int64]int32)
	}
	i, ok := b.idx[k]
	if !ok {
		i = int32(len(b.acc))
		b.idx[k] = i
		b.acc = append(b.acc, binAcc{key: k})
	}
	a := &b.acc[i]
	a.w += w
	a.sum += w * v
	b.last, b.lastKey = i, k
	if k != math.MinInt64 {
		// Bounds of bin k, shrunk by a hair so that a value inside them always
		// has key k.
		b.lastLo = math.Exp(float64(k)/invLogBin) * (1 + 1e-12)
		b.lastHi = math.Exp(float64(k+1)/invLogBin) * (1 - 1e-12)
	} else {
		b.lastLo, b.lastHi = 0, 0
	}
}

// dist returns the binned distribution (empty when nothing was added).
func (b *bins) dist() Distribution {
	acc := slices.Clone(b.acc)
	slices.SortFunc(acc, func(x, y binAcc) int { return cmp.Compare(x.key, y.key) })
	atoms := make([]Atom, len(acc))
	for i, a := range acc {
		atoms[i] = Atom{Value: a.sum / a.w, Weight: a.w}
	}
	return fromAtomsOwned(atoms)
}

func (b *bins) empty() bool { return len(b.acc) == 0 }

// merge adds every bin of o into b (same keys: the result equals adding o's values
// to b one by one, up to summation order).
func (b *bins) merge(o *bins) {
	for _, a := range o.acc {
		if b.idx == nil {
			b.idx = make(map[int64]int32)
		}
		i, ok := b.idx[a.key]
		if !ok {
			i = int32(len(b.acc))
			b.idx[a.key] = i
			b.acc = append(b.acc, binAcc{key: a.key})
		}
		b.acc[i].w += a.w
		b.acc[i].sum += a.sum
	}
	b.lastLo, b.lastHi, b.lastKey = 0, 0, math.MinInt64 // the fast-path cache is stale
}
