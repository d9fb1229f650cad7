package perfdb

// interp_sites.go is the perf_interp v2 ScatteredSites resolver used by GEMM
// (PERFDB.md §1.4; Rust perf_interp.rs SiteIndex): collected (n, k) sites
// each own an m-curve. A collected site answers from its own curve (exact
// point, linear in m, or the k_tail = 3 median-util hold beyond the sweep);
// an unknown site transfers utilization SOL/latency from the 4 nearest
// sites in log2(n, k) whose curves cover m, within 2 octaves, with weights
// 1/(d²+1e-12). The gate is waived for a single-axis scale-up overflow.

import (
	"cmp"
	"math"
	"slices"
)

// siteCurvePoint is one (m, leaf) point of a site's curve.
type siteCurvePoint struct {
	m float64
	l leaf
}

// site is one collected (n, k) shape with its sorted m-curve.
type site struct {
	n, k   float64
	ln, lk float64 // log2Floor(n), log2Floor(k)
	curve  []siteCurvePoint
}

// covers reports whether the site's m-curve spans m.
func (st *site) covers(m float64) bool {
	return st.curve[0].m <= m && m <= st.curve[len(st.curve)-1].m
}

// dist is the log2 distance from the site to a query at (log2 n, log2 k).
func (st *site) dist(qn, qk float64) float64 {
	a, b := st.ln-qn, st.lk-qk
	return math.Sqrt(a*a + b*b)
}

// siteIndex is the GEMM site table of one quant. sites are enumerated in
// aiconfigurator's dict-walk order (first-seen m, then n, then k in row
// order), which breaks exact distance ties at the nearest-4 cutoff.
type siteIndex struct {
	sites  []site
	byKey  map[[2]int]int // (n, k) → index in sites
	kTail  int
	nn     int
	gate   float64
	points []gridPointF // (m, n, k) → latency in sorted order (empirical grids)
}

// buildSiteIndex builds the index from rows in resolution (file) order; the
// first row at a coordinate wins. Sites are numbered in the dict walk's order:
// m by its first row, then n by the first row of (m, n), then k by row order —
// the walk visits the winning rows sorted by (first row of m, first row of
// (m, n), row), and a site (n, k) is numbered where the walk first meets it.
// Two sorts and one map lookup per winning row instead of the walk's per-row map
// updates: it runs once per GEMM dtype in every process that prices a pass
// (~30k rows per dtype).
func buildSiteIndex(rows []gemmPoint) *siteIndex {
	idx := &siteIndex{byKey: map[[2]int]int{}, kTail: 3, nn: 4, gate: 2.0}
	// The rows' coordinates sorted by (m, n, k, row): a coordinate's winning row
	// leads its run. When every coordinate fits in packBits bits, key packs
	// (m, n, k) so the sort compares two fields instead of four.
	type coord struct {
		m, n, k int
		key     uint64
		row     int32
	}
	packed := len(rows) < 1<<packBits
	ord := make([]coord, len(rows))
	for i, r := range rows {
		ord[i] = coord{m: r.m, n: r.n, k: r.k, row: int32(i)}
		if packed {
			if fitsPack(r.m) && fitsPack(r.n) && fitsPack(r.k) {
				ord[i].key = uint64(r.m)<<(2*packBits) | uint64(r.n)<<packBits | uint64(r.k)
			} else {
				packed = false
			}
		}
	}
	if packed {
		// ord is in row order: a stable sort by key alone orders by (key, row).
		radixSortStable(ord, func(c *coord) uint64 { return c.key })
	} else {
		slices.SortFunc(ord, func(a, b coord) int {
			if a.m != b.m {
				return cmp.Compare(a.m, b.m)
			}
			if a.n != b.n {
				return cmp.Compare(a.n, b.n)
			}
			if a.k != b.k {
				return cmp.Compare(a.k, b.k)
			}
			return cmp.Compare(a.row, b.row)
		})
	}
	// walkRow is a winning row with its walk key.
	type walkRow struct{ fm, fmn, row int32 }
	win := make([]walkRow, 0, len(ord))
	for a := 0; a < len(ord); {
		b, fm := a, ord[a].row
		for ; b < len(ord) && ord[b].m == ord[a].m; b++ {
			fm = min(fm, ord[b].row)
		}
		for c := a; c < b; {
			d, fmn := c, ord[c].row
			for ; d < b && ord[d].n == ord[c].n; d++ {
				fmn = min(fmn, ord[d].row)
			}
			for e := c; e < d; e++ {
				if e == c || ord[e].k != ord[e-1].k {
					win = append(win, walkRow{fm: fm, fmn: fmn, row: ord[e].row})
				}
			}
			c = d
		}
		a = b
	}
	if packed {
		// Rows are < 1<<packBits, so (fm, fmn, row) packs into one word whose
		// order is the walk's: a plain integer sort, no comparator calls.
		keys := make([]uint64, len(win))
		for i, w := range win {
			keys[i] = uint64(w.fm)<<(2*packBits) | uint64(w.fmn)<<packBits | uint64(w.row)
		}
		slices.Sort(keys)
		for i, k := range keys {
			win[i].row = int32(k & (1<<packBits - 1))
		}
	} else {
		slices.SortFunc(win, func(x, y walkRow) int {
			if x.fm != y.fm {
				return cmp.Compare(x.fm, y.fm)
			}
			if x.fmn != y.fmn {
				return cmp.Compare(x.fmn, y.fmn)
			}
			return cmp.Compare(x.row, y.row)
		})
	}
	// Number the sites where the walk first meets them; each curve gathers its
	// site's winning rows, then ascends in m (unique per site).
	for _, w := range win {
		r := &rows[w.row]
		sk := [2]int{r.n, r.k}
		i, ok := idx.byKey[sk]
		if !ok {
			i = len(idx.sites)
			idx.byKey[sk] = i
			idx.sites = append(idx.sites, site{n: float64(r.n), k: float64(r.k), ln: log2Floor(float64(r.n)), lk: log2Floor(float64(r.k))})
		}
		idx.sites[i].curve = append(idx.sites[i].curve, siteCurvePoint{m: float64(r.m), l: r.l})
	}
	for i := range idx.sites {
		slices.SortFunc(idx.sites[i].curve, func(a, b siteCurvePoint) int { return cmp.Compare(a.m, b.m) })
	}
	return idx
}

// radixSortStable sorts s by key(e) ascending, keeping equal keys in their
// order (LSD radix sort, a byte a pass; a byte equal in every key is skipped).
func radixSortStable[E any](s []E, key func(*E) uint64) {
	if len(s) < 2 {
		return
	}
	and, or := ^uint64(0), uint64(0)
	for i := range s {
		k := key(&s[i])
		and &= k
		or |= k
	}
	varying := and ^ or
	src, dst := s, make([]E, len(s))
	for shift := uint(0); shift < 64; shift += 8 {
		if (varying>>shift)&0xff == 0 {
			continue
		}
		var start [257]int
		for i := range src {
			start[(key(&src[i])>>shift)&0xff+1]++
		}
		for b := 1; b < len(start); b++ {
			start[b] += start[b-1]
		}
		for i := range src {
			b := (key(&src[i]) >> shift) & 0xff
			dst[start[b]] = src[i]
			start[b]++
		}
		src, dst = dst, src
	}
	if &src[0] != &s[0] {
		copy(s, src)
	}
}

// packBits is the width of one field of buildSiteIndex's packed sort keys:
// three fields fill 63 bits of a uint64.
const packBits = 21

// fitsPack reports whether v fits one packed key field.
func fitsPack(v int) bool { return v >= 0 && v < 1<<packBits }

// gemmPoint is one GEMM row as the site index consumes it.
type gemmPoint struct {
	m, n, k int
	l       leaf
}

// rankedSite is a (distance, site index) candidate.
type rankedSite struct {
	d float64
	i int
}

// less orders candidates by distance, then enumeration index (stable).
func (a rankedSite) less(b rankedSite) bool {
	if a.d != b.d {
		return a.d < b.d
	}
	return a.i < b.i
}

// top4 keeps the nearest candidates in (d, i) order.
type top4 struct {
	c [4]rankedSite
	n int
}

func (t *top4) add(r rankedSite, k int) {
	if t.n == k && !r.less(t.c[k-1]) {
		return
	}
	if t.n < k {
		t.n++
	}
	j := t.n - 1
	for j > 0 && r.less(t.c[j-1]) {
		t.c[j] = t.c[j-1]
		j--
	}
	t.c[j] = r
}

var gemmAxes = []string{"m", "n", "k"}

// resolve answers (m, n, k) (Rust SiteIndex::resolve_pair).
func (s *siteIndex) resolve(sol solFn, m, n, k float64) (leaf, error) {
	q := pt{m, n, k}
	if isExactKey(n) && isExactKey(k) {
		if i, ok := s.byKey[[2]int{int(n), int(k)}]; ok {
			lat, pw, err := s.evalCurve(sol, &s.sites[i], m, q)
			if err != nil {
				return leaf{}, err
			}
			return resolved(lat, pw), nil
		}
	}
	if len(s.sites) == 0 {
		return leaf{}, anchorMiss(gemmAxes, q, "no sites collected")
	}
	qn, qk := log2Floor(n), log2Floor(k)
	// Coverage filter; nothing covers m → every site (each held at its end).
	anyCover := false
	for i := range s.sites {
		if s.sites[i].covers(m) {
			anyCover = true
			break
		}
	}
	var best top4
	gated := false
	for i := range s.sites {
		st := &s.sites[i]
		if anyCover && !st.covers(m) {
			continue
		}
		if d := st.dist(qn, qk); d <= s.gate {
			gated = true
			best.add(rankedSite{d, i}, s.nn)
		}
	}
	if !gated {
		var ok bool
		best, ok = s.frontierWaiver(anyCover, m, n, k, qn, qk)
		if !ok {
			return leaf{}, anchorMiss(gemmAxes, q, "no site within max_site_distance")
		}
	}
	wsum, uacc, pacc := 0.0, 0.0, 0.0
	for j := 0; j < best.n; j++ {
		r := best.c[j]
		st := &s.sites[r.i]
		lat, pw, err := s.evalCurve(sol, st, m, q)
		if err != nil {
			continue
		}
		sl := sol.sol(pt{m, st.n, st.k})
		if !(positiveFinite(lat) && positiveFinite(sl)) {
			continue
		}
		w := 1 / (r.d*r.d + 1e-12)
		uacc += w * (sl / lat)
		pacc += w * pw
		wsum += w
	}
	if wsum <= 0 {
		return leaf{}, anchorMiss(gemmAxes, q, "no usable neighbour site")
	}
	sq := sol.sol(q)
	if !positiveFinite(sq) {
		return leaf{}, anchorMiss(gemmAxes, q, "non-positive SOL at query")
	}
	return resolved(sq/(uacc/wsum), pacc/wsum), nil
}

// frontierWaiver is frontier_waiver_anchors: the distance gate is waived only
// when exactly one site axis overflows the eligible sites' maximum, no axis
// is below their minimum, and the anchors pass the gate on the other axis.
func (s *siteIndex) frontierWaiver(anyCover bool, m, n, k, qn, qk float64) (top4, bool) {
	loN, hiN, loK, hiK := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for i := range s.sites {
		st := &s.sites[i]
		if anyCover && !st.covers(m) {
			continue
		}
		loN, hiN = math.Min(loN, st.n), math.Max(hiN, st.n)
		loK, hiK = math.Min(loK, st.k), math.Max(hiK, st.k)
	}
	if n < loN || k < loK {
		return top4{}, false
	}
	overN, overK := n > hiN, k > hiK
	if overN == overK {
		return top4{}, false
	}
	var best top4
	for i := range s.sites {
		st := &s.sites[i]
		if anyCover && !st.covers(m) {
			continue
		}
		resid := math.Abs(st.lk - qk)
		if overK {
			resid = math.Abs(st.ln - qn)
		}
		if resid <= s.gate {
			best.add(rankedSite{st.dist(qn, qk), i}, s.nn)
		}
	}
	return best, best.n > 0
}

// evalCurve evaluates one site's m-curve at m (Rust eval_curve): exact point
// verbatim, linear blend inside, k_tail-median util hold outside.
func (s *siteIndex) evalCurve(sol solFn, st *site, m float64, q pt) (float64, float64, error) {
	cv := st.curve
	lo := 0
	hi := len(cv)
	for lo < hi { // first index with cv.m >= m
		mid := int(uint(lo+hi) >> 1)
		if cv[mid].m < m {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	idx := lo
	if idx < len(cv) && cv[idx].m == m {
		return cv[idx].l.lat, cv[idx].l.blendPower(), nil
	}
	if m < cv[0].m || m > cv[len(cv)-1].m || len(cv) < 2 {
		var a, b int
		if m < cv[0].m {
			a, b = 0, min(s.kTail, len(cv))
		} else {
			a, b = max(0, len(cv)-s.kTail), len(cv)
		}
		var ub, pb [8]float64
		utils, pows := ub[:0], pb[:0]
		for _, p := range cv[a:b] {
			sl := sol.sol(pt{p.m, st.n, st.k})
			if p.l.lat > 0 && sl > 0 {
				utils = append(utils, sl/p.l.lat)
				pows = append(pows, p.l.blendPower())
			}
		}
		if len(utils) == 0 {
			return 0, 0, anchorMiss(gemmAxes, q, "no positive-util boundary anchor")
		}
		sq := sol.sol(pt{m, st.n, st.k})
		if !positiveFinite(sq) {
			return 0, 0, anchorMiss(gemmAxes, q, "non-positive SOL at query")
		}
		return sq / median(utils), median(pows), nil
	}
	pl, ph := cv[idx-1], cv[idx]
	w := (m - pl.m) / (ph.m - pl.m)
	plo, phi := pl.l.blendPower(), ph.l.blendPower()
	return pl.l.lat + (ph.l.lat-pl.l.lat)*w, plo + (phi-plo)*w, nil
}
