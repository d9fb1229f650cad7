package perfdb

// interp_test.go checks the perf_interp v2 engine identities on synthetic
// tables (the fixtures of aiconfigurator's perf_interp.rs tests): whenever
// the table's latency equals its SOL (util ≡ 1), every blend, hold and
// transfer must reproduce the formula exactly.

import (
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// fnSOL adapts a function to solFn in tests.
type fnSOL func(c pt) float64

func (f fnSOL) sol(c pt) float64 { return f(c) }

func approxRel(t testing.TB, label string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9*math.Max(math.Abs(want), 1) {
		t.Errorf("%s: got %.17g, want %.17g", label, got, want)
	}
}

// attnLat is latency ~ n·b·s² on [n][s][b] (util 1 against itself).
func attnLat(c pt) float64 { return 1e-6 * c[0] * c[2] * c[1] * c[1] }

// attnTable is a staircase-truncated [n][s][b] table: long seqs lack big batches.
func attnTable() *grid {
	present := []struct {
		s  int
		bs []int
	}{{512, []int{1, 2, 4, 8}}, {1024, []int{1, 2, 4, 8}}, {2048, []int{1, 2, 4}}, {4096, []int{1, 2}}}
	var pts []gridPoint
	for _, n := range []int{8, 16} {
		for _, p := range present {
			for _, b := range p.bs {
				c := pt{float64(n), float64(p.s), float64(b)}
				pts = append(pts, gridPoint{c: [maxAxes]int{n, p.s, b}, l: leaf{lat: attnLat(c)}})
			}
		}
	}
	return buildGrid(3, pts)
}

func TestGridIdentities(t *testing.T) {
	g := attnTable()
	sol := fnSOL(attnLat)
	for _, c := range []struct {
		label string
		q     pt
	}{
		{"exact hit", pt{8, 2048, 4}},
		{"sqrt blend exact for s²", pt{8, 1536, 2}},
		{"raw blend along batch", pt{8, 1024, 3}},
		{"hold beyond seq frontier", pt{8, 8192, 2}},
		{"ragged branch SOL ratio", pt{8, 1536, 8}},
		{"heads blend", pt{12, 1024, 2}},
		{"staircase corner hold", pt{16, 4096, 8}},
	} {
		l, err := g.query(&ctxAttnCfg, sol, c.q)
		if err != nil {
			t.Errorf("%s: %v", c.label, err)
			continue
		}
		approxRel(t, c.label, l.lat, attnLat(c.q))
	}
	if _, err := (&grid{naxes: 3}).query(&ctxAttnCfg, sol, pt{8, 512, 1}); !IsMiss(err) {
		t.Errorf("empty table: want a structured miss, got %v", err)
	}
}

func TestGridExactHitVerbatim(t *testing.T) {
	// Measured leaves come back untouched (power and energy included), even
	// when they disagree with the SOL.
	pts := []gridPoint{
		{c: [maxAxes]int{1, 1}, l: newLeaf(3, 500)},
		{c: [maxAxes]int{1, 2}, l: newLeaf(5, 700)},
		{c: [maxAxes]int{1, 1}, l: newLeaf(99, 1)}, // duplicate: first wins
	}
	g := buildGrid(2, pts)
	l, err := g.query(&scaleCfg, fnSOL(func(pt) float64 { return 1 }), pt{1, 1})
	if err != nil || l != newLeaf(3, 500) {
		t.Fatalf("exact hit: got %+v, %v; want the first measured leaf", l, err)
	}
	// In between: latency and power blend linearly, energy = power × latency.
	l, err = g.query(&scaleCfg, fnSOL(func(pt) float64 { return 1 }), pt{1, 1.5})
	if err != nil {
		t.Fatal(err)
	}
	approxRel(t, "lat", l.lat, 4)
	approxRel(t, "power", l.power, 600)
	approxRel(t, "energy", l.energy, 2400)
}

func TestGridSqrtExactProperty(t *testing.T) {
	// For any a·s² + 0 curve on any sorted seq keys, the sqrt blend is exact
	// inside the range and the util hold is exact outside it.
	rapid.Check(t, func(rt *rapid.T) {
		a := rapid.Float64Range(1e-9, 1e-3).Draw(rt, "a")
		keys := rapid.SliceOfNDistinct(rapid.IntRange(1, 1<<16), 2, 12, rapid.ID[int]).Draw(rt, "keys")
		lat := func(c pt) float64 { return a * c[1] * c[1] * c[0] * c[2] }
		var pts []gridPoint
		for _, s := range keys {
			c := pt{4, float64(s), 2}
			pts = append(pts, gridPoint{c: [maxAxes]int{4, s, 2}, l: leaf{lat: lat(c)}})
		}
		g := buildGrid(3, pts)
		s := rapid.IntRange(1, 1<<17).Draw(rt, "s")
		q := pt{4, float64(s), 2}
		l, err := g.query(&ctxAttnCfg, fnSOL(lat), q)
		if err != nil {
			rt.Fatalf("query s=%d: %v", s, err)
		}
		if math.Abs(l.lat-lat(q)) > 1e-9*lat(q) {
			rt.Fatalf("s=%d: got %g want %g", s, l.lat, lat(q))
		}
	})
}

func TestGridOneAxis(t *testing.T) {
	lat := func(c pt) float64 { return 0.001 * c[0] }
	var pts []gridPoint
	for _, sz := range []int{1024, 2048, 4096} {
		pts = append(pts, gridPoint{c: [maxAxes]int{sz}, l: leaf{lat: lat(pt{float64(sz)})}})
	}
	g := buildGrid(1, pts)
	cfg := gridCfg{axes: []string{"size"}, sqrtAxis: -1, kTail: 1, nnLeaves: 4}
	for _, x := range []float64{3072, 16384, 128} {
		l, err := g.query(&cfg, fnSOL(lat), pt{x})
		if err != nil {
			t.Fatal(err)
		}
		approxRel(t, "1-D", l.lat, lat(pt{x}))
	}
	// The curve fast path answers identically.
	var cps []curvePoint
	for _, p := range pts {
		cps = append(cps, curvePoint{x: float64(p.c[0]), l: p.l})
	}
	cv := newCurve("size", cps)
	for _, x := range []float64{3072, 16384, 128, 2048} {
		a, err1 := cv.query(fnSOL(lat), x)
		b, err2 := g.query(&cfg, fnSOL(lat), pt{x})
		if err1 != nil || err2 != nil || a != b {
			t.Errorf("curve vs grid at %v: %+v %v / %+v %v", x, a, err1, b, err2)
		}
	}
}

// gemmLat is latency = mnk·1e-9 (util 1 against itself).
func gemmLat(c pt) float64 { return 1e-9 * c[0] * c[1] * c[2] }

func gemmSites(sites [][2]int, ms []int, lat func(pt) float64) *siteIndex {
	var rows []gemmPoint
	for _, m := range ms {
		for _, s := range sites {
			rows = append(rows, gemmPoint{m: m, n: s[0], k: s[1], l: leaf{lat: lat(pt{float64(m), float64(s[0]), float64(s[1])})}})
		}
	}
	return buildSiteIndex(rows)
}

func TestSitesIdentities(t *testing.T) {
	idx := gemmSites([][2]int{{4096, 1024}, {5120, 2048}}, []int{16, 32, 64, 128, 256, 512, 1024}, gemmLat)
	sol := fnSOL(gemmLat)
	for _, c := range []struct {
		label   string
		m, n, k float64
	}{
		{"own curve lerp", 48, 4096, 1024},
		{"m beyond sweep holds util", 8192, 4096, 1024},
		{"m below sweep holds util", 3, 5120, 2048},
		{"unknown site transfers util", 64, 4608, 1536},
	} {
		l, err := idx.resolve(sol, c.m, c.n, c.k)
		if err != nil {
			t.Errorf("%s: %v", c.label, err)
			continue
		}
		approxRel(t, c.label, l.lat, gemmLat(pt{c.m, c.n, c.k}))
	}
	if _, err := idx.resolve(sol, 64, 64, 64); !IsMiss(err) {
		t.Errorf("far site: want a structured miss, got %v", err)
	}
	// One axis overflowing the frontier (big LM head n) waives the gate.
	l, err := idx.resolve(sol, 64, 131072, 2048)
	if err != nil {
		t.Fatalf("scale-up waiver: %v", err)
	}
	approxRel(t, "waiver", l.lat, gemmLat(pt{64, 131072, 2048}))
	// Both axes overflowing is a sparse stub: miss.
	if _, err := idx.resolve(sol, 64, 131072, 131072); !IsMiss(err) {
		t.Errorf("two-axis overflow: want a miss, got %v", err)
	}
}

func TestSitesLinearInMProperty(t *testing.T) {
	// On a collected site, any m inside the sweep is the linear blend of its
	// neighbours, whatever the latencies.
	rapid.Check(t, func(rt *rapid.T) {
		ms := rapid.SliceOfNDistinct(rapid.IntRange(1, 100000), 2, 10, rapid.ID[int]).Draw(rt, "ms")
		lats := map[int]float64{}
		var rows []gemmPoint
		for _, m := range ms {
			lats[m] = rapid.Float64Range(1e-4, 10).Draw(rt, "lat")
			rows = append(rows, gemmPoint{m: m, n: 1024, k: 1024, l: leaf{lat: lats[m]}})
		}
		idx := buildSiteIndex(rows)
		lo, hi := ms[0], ms[0]
		for _, m := range ms {
			lo, hi = min(lo, m), max(hi, m)
		}
		m := rapid.IntRange(lo, hi).Draw(rt, "m")
		got, err := idx.resolve(fnSOL(gemmLat), float64(m), 1024, 1024)
		if err != nil {
			rt.Fatal(err)
		}
		a, b := lo, hi
		for _, x := range ms {
			if x <= m && x > a {
				a = x
			}
			if x >= m && x < b {
				b = x
			}
		}
		want := lats[a]
		if a != b {
			w := float64(m-a) / float64(b-a)
			want = lats[a] + (lats[b]-lats[a])*w
		}
		if math.Abs(got.lat-want) > 1e-12*math.Max(want, 1) {
			rt.Fatalf("m=%d in [%d,%d]: got %g want %g", m, a, b, got.lat, want)
		}
	})
}

func TestUtilGridTwoNeighbours(t *testing.T) {
	// Utils 1 and 0.5 at x=1 and x=4 (log-normalised 0 and 1): the midpoint
	// in log space weighs both equally; out of range clamps to the boundary.
	pts := []gridPointF{{c: pt{1}, lat: 1}, {c: pt{4}, lat: 8}}
	g := buildUtilGrid(1, pts, fnSOL(func(c pt) float64 { return c[0] }))
	u, _ := g.util(pt{2})
	approxRel(t, "mid", u, 0.75)
	u, _ = g.util(pt{100})
	approxRel(t, "clamp", u, 0.5)
	var empty *utilGrid
	if _, err := empty.estimate(1, pt{1}, 1); err == nil {
		t.Error("empty grid must be an EmpiricalMissError")
	}
}

func TestHoldSelectionMatchesExhaustive(t *testing.T) {
	// The pruned best-M walk selects exactly the first M leaves of the
	// distance-sorted (stable, table-order) exhaustive list.
	rapid.Check(t, func(rt *rapid.T) {
		var pts []gridPoint
		for _, n := range rapid.SliceOfNDistinct(rapid.IntRange(1, 128), 1, 4, rapid.ID[int]).Draw(rt, "n") {
			for _, s := range rapid.SliceOfNDistinct(rapid.IntRange(1, 1<<14), 1, 6, rapid.ID[int]).Draw(rt, "s") {
				for _, b := range rapid.SliceOfNDistinct(rapid.IntRange(1, 256), 1, 5, rapid.ID[int]).Draw(rt, "b") {
					pts = append(pts, gridPoint{c: [maxAxes]int{n, s, b}, l: leaf{lat: 1}})
				}
			}
		}
		g := buildGrid(3, pts)
		q := pt{float64(rapid.IntRange(1, 256).Draw(rt, "qn")), float64(rapid.IntRange(1, 1<<15).Draw(rt, "qs")), float64(rapid.IntRange(1, 512).Draw(rt, "qb"))}
		s := holdSel{naxes: 3, m: 12}
		for a := 0; a < 3; a++ {
			s.q[a] = log2Floor(q[a])
		}
		s.visit(&g.root, pt{}, 0, 0)
		var all []holdCand
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
		want := all[:min(len(all), 12)]
		if s.nbest != len(want) {
			rt.Fatalf("selected %d, want %d", s.nbest, len(want))
		}
		for i := range want {
			if s.best[i].c != want[i].c || s.best[i].d != want[i].d {
				rt.Fatalf("rank %d: got %v (%g), want %v (%g)", i, s.best[i].c, s.best[i].d, want[i].c, want[i].d)
			}
		}
	})
}

func TestSitesWaiverEdges(t *testing.T) {
	sol := fnSOL(gemmLat)
	// Scale-up frontier (a big LM head ~2.005 octaves out) holds util.
	idx := gemmSites([][2]int{{65536, 2560}, {65536, 3072}, {4096, 2816}}, []int{16, 32, 64}, gemmLat)
	l, err := idx.resolve(sol, 32, 262144, 2816)
	if err != nil {
		t.Fatalf("LM-head scale-up: %v", err)
	}
	approxRel(t, "LM-head scale-up", l.lat, gemmLat(pt{32, 262144, 2816}))
	for _, c := range []struct {
		label   string
		sites   [][2]int
		m, n, k float64
	}{
		{"interior hole beyond the gate", [][2]int{{256, 256}, {65536, 65536}}, 32, 8192, 8192},
		{"incomparable notch", [][2]int{{256, 65536}, {65536, 256}}, 32, 4096, 4096},
		{"sparse stub, two axes overflow", [][2]int{{32, 32}, {32, 64}, {64, 128}, {128, 128}}, 1, 151936, 5120},
	} {
		idx := gemmSites(c.sites, []int{1, 2, 4, 16, 32, 64}, gemmLat)
		if _, err := idx.resolve(sol, c.m, c.n, c.k); !IsMiss(err) {
			t.Errorf("%s: want a structured miss, got %v", c.label, err)
		}
	}
	// Admissibility is judged over the coverage candidates: only (64, 64)
	// covers m = 32, and k = 1 would be a scale-down from it → miss.
	var rows []gemmPoint
	for _, m := range []int{1, 2} {
		rows = append(rows, gemmPoint{m: m, n: 1, k: 1, l: leaf{lat: gemmLat(pt{float64(m), 1, 1})}})
	}
	for _, m := range []int{16, 32, 64} {
		rows = append(rows, gemmPoint{m: m, n: 64, k: 64, l: leaf{lat: gemmLat(pt{float64(m), 64, 64})}})
	}
	if _, err := buildSiteIndex(rows).resolve(sol, 32, 1024, 1); !IsMiss(err) {
		t.Errorf("coverage-candidate admissibility: want a miss, got %v", err)
	}
}

func TestSitesDictWalkTieBreak(t *testing.T) {
	// (1536, 4096) and (1024, 6144) are bitwise equidistant from (1280,
	// 5120) in log2 space; with one neighbour the winner is the first site
	// in aiconfigurator's dict-walk (row) order. Utils 0.5 vs 0.25 reveal it.
	sol := fnSOL(gemmLat)
	mk := func(first, second [2]int, u1, u2 float64) *siteIndex {
		var rows []gemmPoint
		for _, m := range []int{16, 32, 64} {
			for _, s := range []struct {
				nk [2]int
				u  float64
			}{{first, u1}, {second, u2}} {
				c := pt{float64(m), float64(s.nk[0]), float64(s.nk[1])}
				rows = append(rows, gemmPoint{m: m, n: s.nk[0], k: s.nk[1], l: leaf{lat: gemmLat(c) / s.u}})
			}
		}
		idx := buildSiteIndex(rows)
		idx.nn = 1
		return idx
	}
	q := pt{32, 1280, 5120}
	l, err := mk([2]int{1536, 4096}, [2]int{1024, 6144}, 0.5, 0.25).resolve(sol, q[0], q[1], q[2])
	if err != nil {
		t.Fatal(err)
	}
	approxRel(t, "row order A first", l.lat, gemmLat(q)/0.5)
	l, err = mk([2]int{1024, 6144}, [2]int{1536, 4096}, 0.25, 0.5).resolve(sol, q[0], q[1], q[2])
	if err != nil {
		t.Fatal(err)
	}
	approxRel(t, "row order B first", l.lat, gemmLat(q)/0.25)
}

func TestHoldBoundaryTiesCarryZeroWeight(t *testing.T) {
	// One leaf at d = 1, then a four-way tie at √2 = R: tied leaves weigh 0,
	// so the answer is the nearest anchor's held util, whatever the nesting.
	lats := []struct {
		c   [3]int
		lat float64
	}{
		{[3]int{64, 32, 2}, 1.00}, {[3]int{64, 16, 2}, 1.10}, {[3]int{64, 64, 2}, 1.30},
		{[3]int{32, 32, 2}, 1.50}, {[3]int{128, 32, 2}, 1.70}, {[3]int{64, 32, 4}, 2.00},
	}
	var pts, swapped []gridPoint
	for _, x := range lats {
		pts = append(pts, gridPoint{c: [maxAxes]int{x.c[0], x.c[1], x.c[2]}, l: leaf{lat: x.lat}})
		swapped = append(swapped, gridPoint{c: [maxAxes]int{x.c[0], x.c[2], x.c[1]}, l: leaf{lat: x.lat}})
	}
	one := fnSOL(func(pt) float64 { return 1 })
	l, err := buildGrid(3, pts).query(&genAttnCfg, one, pt{64, 32, 1})
	if err != nil {
		t.Fatal(err)
	}
	approxRel(t, "tie hold", l.lat, 1.0)
	l2, err := buildGrid(3, swapped).query(&genAttnCfg, one, pt{64, 1, 32})
	if err != nil || l2.lat != l.lat {
		t.Errorf("nesting changed the tie blend: %v vs %v (%v)", l2.lat, l.lat, err)
	}
}
