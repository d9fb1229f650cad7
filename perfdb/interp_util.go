package perfdb

// interp_util.go is the empirical (util-space) estimator behind the
// EMPIRICAL and HYBRID modes (Rust operators/util_empirical.rs): every op's
// empirical latency is SOL(query)/util, util read from the collected
// samples of its slice in per-axis normalised log space with two-neighbour
// inverse-distance weights; queries outside the sampled range are clamped
// per axis (boundary utilization frozen). No samples → EmpiricalMissError,
// never a fabricated SOL/constant.

import (
	"fmt"
	"math"
)

// utilGrid holds normalised log coordinates and utils of one slice.
type utilGrid struct {
	dims  int
	norm  []pt
	utils []float64
	mins  pt
	spans pt
	// xform is the transfer tag when the grid was borrowed from another
	// slice ("xshape", "xquant", "xprofile"); "" for own-slice grids.
	xform string
}

// lnFloor is ln(max(v, 1e-9)), the util grid's log metric.
func lnFloor(v float64) float64 { return math.Log(math.Max(v, 1e-9)) }

// buildUtilGrid keeps points with latency > 0 and SOL > 0 (build_samples)
// and normalises their log coordinates. Points keep their order: exact
// distance ties prefer the earlier sample.
func buildUtilGrid(dims int, pts []gridPointF, sol solFn) *utilGrid {
	g := &utilGrid{dims: dims}
	var logs []pt
	for _, p := range pts {
		if !(p.lat > 0) {
			continue
		}
		s := sol.sol(p.c)
		if !(s > 0) {
			continue
		}
		var l pt
		for a := 0; a < dims; a++ {
			l[a] = lnFloor(p.c[a])
		}
		logs = append(logs, l)
		g.utils = append(g.utils, s/p.lat)
	}
	if len(logs) == 0 {
		return g
	}
	var maxs pt
	for a := 0; a < dims; a++ {
		g.mins[a], maxs[a] = math.Inf(1), math.Inf(-1)
	}
	for _, l := range logs {
		for a := 0; a < dims; a++ {
			g.mins[a] = math.Min(g.mins[a], l[a])
			maxs[a] = math.Max(maxs[a], l[a])
		}
	}
	for a := 0; a < dims; a++ {
		if maxs[a]-g.mins[a] > 0 {
			g.spans[a] = maxs[a] - g.mins[a]
		} else {
			g.spans[a] = 1
		}
	}
	g.norm = make([]pt, len(logs))
	for i, l := range logs {
		for a := 0; a < dims; a++ {
			g.norm[i][a] = (l[a] - g.mins[a]) / g.spans[a]
		}
	}
	return g
}

func (g *utilGrid) empty() bool { return g == nil || len(g.utils) == 0 }

// util is the interpolated utilization at q: exact sample → its util, else
// the two nearest (stable order) with weights 1/d.
func (g *utilGrid) util(q pt) (float64, bool) {
	if g.empty() {
		return 0, false
	}
	var nq pt
	for a := 0; a < g.dims; a++ {
		v := (lnFloor(q[a]) - g.mins[a]) / g.spans[a]
		nq[a] = math.Min(math.Max(v, 0), 1)
	}
	b0, b1 := -1, -1
	d0, d1 := math.Inf(1), math.Inf(1)
	for i, row := range g.norm {
		s := 0.0
		for a := 0; a < g.dims; a++ {
			x := row[a] - nq[a]
			s += x * x
		}
		d := math.Sqrt(s)
		switch {
		case d < d0:
			b1, d1 = b0, d0
			b0, d0 = i, d
		case d < d1:
			b1, d1 = i, d
		}
	}
	if d0 == 0 {
		return g.utils[b0], true
	}
	w0 := 1 / d0
	if b1 < 0 {
		return g.utils[b0], true
	}
	w1 := 1 / d1
	return (g.utils[b0]*w0 + g.utils[b1]*w1) / (w0 + w1), true
}

// estimate is util_empirical::estimate: SOL(query)/(util·scale).
func (g *utilGrid) estimate(solQ float64, q pt, scale float64) (float64, error) {
	if u, ok := g.util(q); ok && u > 0 {
		return solQ / (u * scale), nil
	}
	return 0, &EmpiricalMissError{Msg: fmt.Sprintf(
		"no empirical utilisation data to estimate this op at query=%v: no own-shape, cross-shape, or sibling transfer reference available", trimPt(q))}
}

// trimPt drops trailing zero coordinates for messages.
func trimPt(q pt) []float64 {
	n := len(q)
	for n > 1 && q[n-1] == 0 {
		n--
	}
	return q[:n]
}

// deltaLookup is the zero-aware nearest-point lookup over the compute_scale
// delta table (Rust ZeroAwareDeltaLookup): zero deltas are measured values.
type deltaLookup struct {
	coords []pt
	lats   []float64
	norm   []pt
	mins   pt
	spans  pt
}

// buildDeltaLookup keeps points with latency ≥ 0 (zeros included).
func buildDeltaLookup(pts []gridPointF) *deltaLookup {
	d := &deltaLookup{}
	var logs []pt
	for _, p := range pts {
		if !(p.lat >= 0) {
			continue
		}
		d.coords = append(d.coords, p.c)
		d.lats = append(d.lats, p.lat)
		logs = append(logs, pt{lnFloor(p.c[0]), lnFloor(p.c[1])})
	}
	if len(logs) == 0 {
		return d
	}
	var maxs pt
	for a := 0; a < 2; a++ {
		d.mins[a], maxs[a] = math.Inf(1), math.Inf(-1)
	}
	for _, l := range logs {
		for a := 0; a < 2; a++ {
			d.mins[a] = math.Min(d.mins[a], l[a])
			maxs[a] = math.Max(maxs[a], l[a])
		}
	}
	for a := 0; a < 2; a++ {
		d.spans[a] = 1
		if maxs[a]-d.mins[a] > 0 {
			d.spans[a] = maxs[a] - d.mins[a]
		}
	}
	d.norm = make([]pt, len(logs))
	for i, l := range logs {
		for a := 0; a < 2; a++ {
			d.norm[i][a] = (l[a] - d.mins[a]) / d.spans[a]
		}
	}
	return d
}

// estimate returns the nearest point's delta (query not clamped), rescaled
// by frozen utilization SOL(q)/(SOL(ref)/delta(ref)); a zero delta stays 0.
func (d *deltaLookup) estimate(q pt, sol solFn) (float64, error) {
	if d == nil || len(d.lats) == 0 {
		return 0, &EmpiricalMissError{Msg: fmt.Sprintf("no empirical compute_scale delta data is available at query=%v", q[:2])}
	}
	var nq pt
	for a := 0; a < 2; a++ {
		nq[a] = (lnFloor(q[a]) - d.mins[a]) / d.spans[a]
	}
	best, bestD := 0, math.Inf(1)
	for i, row := range d.norm {
		x, y := row[0]-nq[0], row[1]-nq[1]
		if s := x*x + y*y; s < bestD {
			best, bestD = i, s
		}
	}
	ref := d.lats[best]
	if ref == 0 {
		return 0, nil
	}
	rs, qs := sol.sol(d.coords[best]), sol.sol(q)
	if rs <= 0 || qs <= 0 {
		return 0, &EmpiricalMissError{Msg: fmt.Sprintf("no positive SOL reference is available for compute_scale at query=%v", q[:2])}
	}
	return qs / (rs / ref), nil
}
