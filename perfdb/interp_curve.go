package perfdb

// interp_curve.go is the one-axis fast path of the Grid resolver (Rust
// axis_curve.rs LeafAxisCurve), used by the communication size curves and
// the MoE token curves: exact hit verbatim, raw linear blend inside the
// measured range, and outside it the boundary point's utilization held
// (k_tail = 1): latency = SOL(q) / (SOL(anchor)/latency(anchor)).

import (
	"slices"
)

// curvePoint is one measured point of a 1-D curve.
type curvePoint struct {
	x float64
	l leaf
}

// curve is a sorted 1-D curve with the axis name for messages.
type curve struct {
	axis string
	pts  []curvePoint
}

// newCurve sorts a copy of pts by x; the first point at an x wins.
func newCurve(axis string, pts []curvePoint) *curve {
	out := slices.Clone(pts)
	if out == nil {
		out = []curvePoint{}
	}
	return sortCurve(axis, out)
}

// monotoneCurve returns cv's lower monotone envelope: the same points, each
// with the leaf of the lowest latency at its x or any larger x (Querier.Monotone).
func monotoneCurve(cv *curve) *curve {
	pts := slices.Clone(cv.pts)
	lowerEnvelope(pts, func(p *curvePoint) *leaf { return &p.l })
	return &curve{axis: cv.axis, pts: pts}
}

// lowerEnvelope gives each of pts (sorted by size, ascending) the leaf of the
// lowest latency at its size or any larger one, in place: the rule of
// Querier.Monotone for every curve type (l returns a point's leaf).
func lowerEnvelope[P any](pts []P, l func(*P) *leaf) {
	for j := len(pts) - 2; j >= 0; j-- {
		if next := l(&pts[j+1]); next.lat < l(&pts[j]).lat {
			*l(&pts[j]) = *next
		}
	}
}

// sortCurve is newCurve over pts itself (the caller's to give away): it sorts
// and compacts pts in place. A stable sort keeps the points at one x in input
// order, so the first of each run of equal x is the first point at that x
// (without NaN, which no axis holds: a NaN takes the general path, where no
// NaN equals another).
func sortCurve(axis string, pts []curvePoint) *curve {
	byX := func(a, b curvePoint) int {
		switch {
		case a.x < b.x:
			return -1
		case a.x > b.x:
			return 1
		}
		return 0
	}
	if slices.ContainsFunc(pts, func(p curvePoint) bool { return p.x != p.x }) {
		out := make([]curvePoint, 0, len(pts))
		seen := make(map[float64]bool, len(pts))
		for _, p := range pts {
			if !seen[p.x] {
				seen[p.x] = true
				out = append(out, p)
			}
		}
		slices.SortStableFunc(out, byX)
		return &curve{axis: axis, pts: out}
	}
	slices.SortStableFunc(pts, byX)
	w := 0
	for i, p := range pts {
		if i == 0 || p.x != pts[w-1].x {
			pts[w] = p
			w++
		}
	}
	return &curve{axis: axis, pts: pts[:w:w]}
}

// search returns the first index with x >= c.
func (cv *curve) search(c float64) int {
	lo, hi := 0, len(cv.pts)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if cv.pts[mid].x < c {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// query resolves c with sol the analytic SOL along the axis.
func (cv *curve) query(sol solFn, c float64) (leaf, error) {
	q := pt{c}
	axes := []string{cv.axis}
	if cv == nil || len(cv.pts) == 0 {
		return leaf{}, anchorMiss(axes, q, "empty table")
	}
	up := cv.search(c)
	if up < len(cv.pts) && cv.pts[up].x == c && isExactKey(c) {
		return cv.pts[up].l, nil
	}
	if up == 0 || up == len(cv.pts) {
		a := cv.pts[0]
		if up != 0 {
			a = cv.pts[len(cv.pts)-1]
		}
		as := sol.sol(pt{a.x})
		if !(a.l.lat > 0) || !(as > 0) {
			return leaf{}, anchorMiss(axes, q, "no positive-util boundary anchor")
		}
		qs := sol.sol(q)
		if !(qs > 0) {
			return leaf{}, anchorMiss(axes, q, "non-positive SOL at query")
		}
		lat := qs / (as / a.l.lat)
		return resolved(lat, a.l.blendPower()), nil
	}
	lo, hi := cv.pts[up-1], cv.pts[up]
	w := (c - lo.x) / (hi.x - lo.x)
	plo := lo.l.blendPower()
	return resolved(lo.l.lat+(hi.l.lat-lo.l.lat)*w, plo+(hi.l.blendPower()-plo)*w), nil
}

// identitySOL is the SOL of communication curves: proportional to size.
type identitySOL struct{}

func (identitySOL) sol(c pt) float64 { return c[0] }
