package perfdb

// interp_grid.go is the perf_interp v2 Grid resolver (PERFDB.md §1.4 step
// 1–4; Rust perf_interp.rs query_value / grid_interior / grid_hold): nested
// sorted tables, exact hit, bracket-and-blend level by level with a per-axis
// value transform, ragged-branch SOL rescaling, and past-the-frontier util
// hold (k_tail median for 1-D, tapered Shepard over the 4 nearest leaves in
// joint log2 space otherwise).

import (
	"math"
	"slices"
	"sort"
)

// gnode is one level of a nested table: sorted integer keys and either child
// levels (kids) or, at the innermost axis, measured leaves (vals).
type gnode struct {
	keys  []float64
	lkeys []float64 // log2Floor(keys), for the hold's distance walk
	kids  []gnode
	vals  []leaf
}

// find returns the index of key c, or -1.
func (g *gnode) find(c float64) int {
	i := sort.SearchFloat64s(g.keys, c)
	if i < len(g.keys) && g.keys[i] == c {
		return i
	}
	return -1
}

// gridCfg is the op-specific engine record for a Grid table.
type gridCfg struct {
	axes     []string // axis names, outer → inner (messages only)
	sqrtAxis int      // axis blended in sqrt(latency) space; -1 = raw everywhere
	kTail    int      // 1-D boundary hold width (1 for every Grid op)
	nnLeaves int      // multi-axis hold anchors (4)
}

// ctxAttnCfg is context_attention_config: sqrt along seq only.
var ctxAttnCfg = gridCfg{axes: []string{"num_heads", "seq_len", "batch"}, sqrtAxis: 1, kTail: 1, nnLeaves: 4}

// genAttnCfg is generation_attention_config: raw everywhere, axes [n][b][s].
var genAttnCfg = gridCfg{axes: []string{"num_heads", "batch", "seq_len"}, sqrtAxis: -1, kTail: 1, nnLeaves: 4}

// scaleCfg is the 2-axis RAW grid of compute_scale / scale_matrix.
var scaleCfg = gridCfg{axes: []string{"m", "k"}, sqrtAxis: -1, kTail: 1, nnLeaves: 4}

// grid is a built nested table with its axis count.
type grid struct {
	root  gnode
	naxes int
	n     int // number of leaves
}

// gridPoint is one (coordinates, leaf) input row of buildGrid.
type gridPoint struct {
	c [maxAxes]int
	l leaf
}

// buildGrid builds a nested table from points; the first point at a
// coordinate wins (insert_value_first_wins), later duplicates are ignored.
func buildGrid(naxes int, pts []gridPoint) *grid {
	seen := make(map[[maxAxes]int]bool, len(pts))
	uniq := make([]gridPoint, 0, len(pts))
	for _, p := range pts {
		if seen[p.c] {
			continue
		}
		seen[p.c] = true
		uniq = append(uniq, p)
	}
	slices.SortFunc(uniq, func(a, b gridPoint) int {
		for i := 0; i < naxes; i++ {
			if a.c[i] != b.c[i] {
				if a.c[i] < b.c[i] {
					return -1
				}
				return 1
			}
		}
		return 0
	})
	g := &grid{naxes: naxes, n: len(uniq)}
	g.root = buildLevel(uniq, 0, naxes)
	return g
}

func buildLevel(pts []gridPoint, depth, naxes int) gnode {
	groups := 0
	for i := range pts {
		if i == 0 || pts[i].c[depth] != pts[i-1].c[depth] {
			groups++
		}
	}
	n := gnode{keys: make([]float64, 0, groups), lkeys: make([]float64, 0, groups)}
	if depth == naxes-1 {
		n.vals = make([]leaf, 0, groups)
	} else {
		n.kids = make([]gnode, 0, groups)
	}
	for i := 0; i < len(pts); {
		j := i
		for j < len(pts) && pts[j].c[depth] == pts[i].c[depth] {
			j++
		}
		n.keys = append(n.keys, float64(pts[i].c[depth]))
		n.lkeys = append(n.lkeys, log2Floor(float64(pts[i].c[depth])))
		if depth == naxes-1 {
			n.vals = append(n.vals, pts[i].l)
		} else {
			n.kids = append(n.kids, buildLevel(pts[i:j], depth+1, naxes))
		}
		i = j
	}
	return n
}

// exact walks the table verbatim; ok is false unless every coordinate is a key.
func (g *grid) exact(c pt) (leaf, bool) {
	node := &g.root
	for d := 0; d < g.naxes; d++ {
		if !isExactKey(c[d]) {
			return leaf{}, false
		}
		i := node.find(c[d])
		if i < 0 {
			return leaf{}, false
		}
		if d == g.naxes-1 {
			return node.vals[i], true
		}
		node = &node.kids[i]
	}
	return leaf{}, false
}

// gridStatus is the internal outcome of an interior resolution.
type gridStatus uint8

const (
	gridOK gridStatus = iota
	gridOutOfRange
	gridMiss
)

// query resolves c: exact hit verbatim, else interior blend, else util hold,
// else a structured miss (Rust perf_interp::query_value).
func (g *grid) query(cfg *gridCfg, sol solFn, c pt) (leaf, error) {
	if g == nil || g.n == 0 {
		return leaf{}, anchorMiss(cfg.axes, c, "empty table")
	}
	if l, ok := g.exact(c); ok {
		return l, nil
	}
	lat, pw, st := g.interior(cfg, sol, &g.root, c, 0)
	switch st {
	case gridOK:
		return resolved(lat, pw), nil
	case gridMiss:
		return leaf{}, anchorMiss(cfg.axes, c, "no usable branch")
	}
	if g.naxes == 1 {
		return g.hold1D(cfg, sol, c)
	}
	return g.holdShepard(cfg, sol, c)
}

// interior is grid_interior: an exact key collapses the level; otherwise the
// two bracketing branches are resolved and blended with w = (c−lo)/(hi−lo)
// (sqrt space on cfg.sqrtAxis). A dropped (ragged) branch leaves the
// survivor rescaled by SOL(query)/SOL(snapped) along this axis.
func (g *grid) interior(cfg *gridCfg, sol solFn, node *gnode, c pt, depth int) (float64, float64, gridStatus) {
	if len(node.keys) == 0 {
		return 0, 0, gridMiss
	}
	x := c[depth]
	last := depth == g.naxes-1
	if isExactKey(x) {
		if i := node.find(x); i >= 0 {
			if last {
				return node.vals[i].lat, node.vals[i].blendPower(), gridOK
			}
			return g.interior(cfg, sol, &node.kids[i], c, depth+1)
		}
	}
	lo, hi := node.keys[0], node.keys[len(node.keys)-1]
	if x < lo || x > hi {
		return 0, 0, gridOutOfRange
	}
	idx := sort.SearchFloat64s(node.keys, x)
	var (
		keys   [2]float64
		lats   [2]float64
		pows   [2]float64
		nres   int
		sawOOR bool
	)
	for _, i := range [2]int{idx - 1, idx} {
		var (
			lat, pw float64
			st      gridStatus
		)
		if last {
			lat, pw, st = node.vals[i].lat, node.vals[i].blendPower(), gridOK
		} else {
			lat, pw, st = g.interior(cfg, sol, &node.kids[i], c, depth+1)
		}
		switch st {
		case gridOK:
			keys[nres], lats[nres], pows[nres] = node.keys[i], lat, pw
			nres++
		case gridOutOfRange:
			sawOOR = true
		}
	}
	switch nres {
	case 0:
		if sawOOR {
			return 0, 0, gridOutOfRange
		}
		return 0, 0, gridMiss
	case 1:
		snapped := c
		snapped[depth] = keys[0]
		sq, ss := sol.sol(c), sol.sol(snapped)
		if positiveFinite(sq) && positiveFinite(ss) {
			return lats[0] * (sq / ss), pows[0], gridOK
		}
		return lats[0], pows[0], gridOK
	}
	w := (x - keys[0]) / (keys[1] - keys[0])
	sq := cfg.sqrtAxis == depth
	a, b := toSpace(sq, lats[0]), toSpace(sq, lats[1])
	return fromSpace(sq, a+(b-a)*w), pows[0] + (pows[1]-pows[0])*w, gridOK
}

// hold1D is grid_hold_1d: past the end of a 1-D curve, hold the median util
// of the k_tail boundary points; power is their median blend power.
func (g *grid) hold1D(cfg *gridCfg, sol solFn, c pt) (leaf, error) {
	keys := g.root.keys
	var lo, hi int
	if c[0] > keys[len(keys)-1] {
		lo, hi = max(0, len(keys)-cfg.kTail), len(keys)
	} else {
		lo, hi = 0, min(cfg.kTail, len(keys))
	}
	var ub, pb [8]float64
	utils, pows := ub[:0], pb[:0]
	for i := lo; i < hi; i++ {
		l := g.root.vals[i]
		var a pt
		a[0] = keys[i]
		s := sol.sol(a)
		if l.lat > 0 && s > 0 {
			utils = append(utils, s/l.lat)
			pows = append(pows, l.blendPower())
		}
	}
	if len(utils) == 0 {
		return leaf{}, anchorMiss(cfg.axes, c, "no positive-util boundary anchor")
	}
	sq := sol.sol(c)
	if !positiveFinite(sq) {
		return leaf{}, anchorMiss(cfg.axes, c, "non-positive SOL at query")
	}
	return resolved(sq/median(utils), median(pows)), nil
}

// holdCand is one hold-anchor candidate.
type holdCand struct {
	d float64
	c pt
	l leaf
}

// holdSel is the bounded best-M buffer of hold_anchor_weights (M = nn+8).
type holdSel struct {
	q     pt // log2 query
	naxes int
	m     int
	n     int // leaves visited
	best  [16]holdCand
	nbest int
}

// visit walks the leaves in sorted (table) order keeping the M nearest;
// equal distances keep visit order (stable), as the Rust buffer does. A
// subtree whose partial distance already reaches the M-th best is skipped:
// every leaf in it would be rejected (d ≥ worst), so the selection is the
// exhaustive one. partial is the squared distance over axes < depth.
func (s *holdSel) visit(node *gnode, path pt, depth int, partial float64) {
	for i, k := range node.keys {
		delta := node.lkeys[i] - s.q[depth]
		dd := partial + delta*delta
		if s.nbest == s.m && math.Sqrt(dd) >= s.best[s.m-1].d {
			if delta > 0 {
				break // later keys are farther still on this axis
			}
			continue
		}
		path[depth] = k
		if depth < s.naxes-1 {
			s.visit(&node.kids[i], path, depth+1, dd)
			continue
		}
		d := math.Sqrt(dd)
		if s.nbest == s.m {
			s.nbest--
		}
		pos := sort.Search(s.nbest, func(j int) bool { return s.best[j].d > d })
		copy(s.best[pos+1:s.nbest+1], s.best[pos:s.nbest])
		s.best[pos] = holdCand{d: d, c: path, l: node.vals[i]}
		s.nbest++
	}
}

// holdShepard is the multi-axis grid_hold: util from the nnLeaves nearest
// valid leaves in joint log2 space, tapered Shepard weights
// w = ((R−d)/(R·d))² with R the next valid leaf's distance.
func (g *grid) holdShepard(cfg *gridCfg, sol solFn, c pt) (leaf, error) {
	s := holdSel{naxes: g.naxes, m: cfg.nnLeaves + 8}
	for a := 0; a < g.naxes; a++ {
		s.q[a] = log2Floor(c[a])
	}
	s.visit(&g.root, pt{}, 0, 0)
	s.n = g.n
	cands := s.best[:s.nbest]
	var (
		picked  [8]holdCand
		sols    [8]float64
		np      int
		supR    = math.Inf(1)
		support bool
	)
	pick := func(cs []holdCand) {
		for _, cd := range cs {
			sl := sol.sol(cd.c)
			if !(positiveFinite(cd.l.lat) && positiveFinite(sl)) {
				continue
			}
			if np < cfg.nnLeaves {
				picked[np], sols[np] = cd, sl
				np++
			} else {
				supR, support = cd.d, true
				return
			}
		}
	}
	pick(cands)
	if s.n > s.m && !support && np <= cfg.nnLeaves {
		// Too many invalid leaves near the query: redo exhaustively.
		all := make([]holdCand, 0, g.n)
		g.collect(&g.root, pt{}, 0, &all, &s)
		slices.SortStableFunc(all, func(a, b holdCand) int {
			switch {
			case a.d < b.d:
				return -1
			case a.d > b.d:
				return 1
			}
			return 0
		})
		np, supR = 0, math.Inf(1)
		pick(all)
	}
	if np == 0 {
		return leaf{}, anchorMiss(cfg.axes, c, "no positive-util boundary anchor")
	}
	var ws [8]float64
	wsum := 0.0
	for i := 0; i < np; i++ {
		d := picked[i].d
		if math.IsInf(supR, 1) {
			ws[i] = 1 / (d*d + 1e-12)
		} else {
			t := math.Max(supR-d, 0) / (supR*d + 1e-12)
			ws[i] = t * t
		}
		wsum += ws[i]
	}
	if wsum <= 0 {
		for i := 0; i < np; i++ {
			ws[i] = 1
		}
		wsum = float64(np)
	}
	uacc, pacc := 0.0, 0.0
	for i := 0; i < np; i++ {
		uacc += ws[i] * (sols[i] / picked[i].l.lat)
		pacc += ws[i] * picked[i].l.blendPower()
	}
	sq := sol.sol(c)
	if !positiveFinite(sq) {
		return leaf{}, anchorMiss(cfg.axes, c, "non-positive SOL at query")
	}
	return resolved(sq/(uacc/wsum), pacc/wsum), nil
}

// collect appends every leaf with its log2 distance (exhaustive hold path).
func (g *grid) collect(node *gnode, path pt, depth int, out *[]holdCand, s *holdSel) {
	for i, k := range node.keys {
		path[depth] = k
		if depth < g.naxes-1 {
			g.collect(&node.kids[i], path, depth+1, out, s)
			continue
		}
		dd := 0.0
		for a := 0; a < g.naxes; a++ {
			delta := log2Floor(path[a]) - s.q[a]
			dd += delta * delta
		}
		*out = append(*out, holdCand{d: math.Sqrt(dd), c: path, l: node.vals[i]})
	}
}

// points lists every (coordinates, latency) leaf in table order — the input
// of the empirical util grids (Rust node_points).
func (g *grid) points() []gridPointF {
	var out []gridPointF
	var walk func(n *gnode, path pt, depth int)
	walk = func(n *gnode, path pt, depth int) {
		for i, k := range n.keys {
			path[depth] = k
			if depth < g.naxes-1 {
				walk(&n.kids[i], path, depth+1)
				continue
			}
			out = append(out, gridPointF{c: path, lat: n.vals[i].lat})
		}
	}
	if g != nil {
		walk(&g.root, pt{}, 0)
	}
	return out
}

// gridPointF is a float-coordinate (coordinates, latency) point.
type gridPointF struct {
	c   pt
	lat float64
}
