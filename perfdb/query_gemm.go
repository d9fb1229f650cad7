package perfdb

// query_gemm.go answers GEMM and the fp8-static overhead tables (Rust
// perf_database/gemm.rs + operators/gemm.rs).

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// buildGemm indexes GEMM rows per dtype (awq/gptq dropped, first row at a
// coordinate wins, dict-walk site order kept).
func (t *tables) buildGemm(d *Data) {
	t.gemm = map[string]*gemmTable{}
	// Rows of a dtype mostly come in runs: the maps are consulted when it changes.
	count := map[string]int{}
	last, run := "", 0
	for _, r := range d.Gemm {
		if r.Dtype != last {
			count[last] += run
			last, run = r.Dtype, 0
		}
		run++
	}
	count[last] += run
	byDtype := make(map[string]*[]gemmPoint, len(count))
	var cur *[]gemmPoint
	last = ""
	for _, r := range d.Gemm {
		if r.Dtype == "awq" || r.Dtype == "gptq" {
			continue
		}
		if cur == nil || r.Dtype != last {
			last, cur = r.Dtype, byDtype[r.Dtype]
			if cur == nil {
				t.gemmQuants = append(t.gemmQuants, r.Dtype)
				rows := make([]gemmPoint, 0, count[r.Dtype])
				cur = &rows
				byDtype[r.Dtype] = cur
			}
		}
		*cur = append(*cur, gemmPoint{m: r.M, n: r.N, k: r.K, l: newLeaf(r.Latency, r.Power)})
	}
	for dt, rows := range byDtype {
		gt := &gemmTable{rows: *rows}
		if mp, err := GemmQuant(dt).Mapping(); err == nil {
			if fl, err := tcFlops(t.sys, mp.Dtype); err == nil {
				gt.sol, gt.ok = gemmSOL{flops: fl, memBytes: mp.Memory, memBW: t.sys.MemBW}, true
			}
		}
		t.gemm[dt] = gt
	}
}

// index returns the dtype's site index, built on first use: a querier reads a
// few of the table's GEMM dtypes, and indexing all of them up front was the
// largest part of a single point's start-up.
func (gt *gemmTable) index() *siteIndex {
	gt.once.Do(func() {
		rows := gt.rows
		if gt.ok {
			for i := range rows { // load-time SOL floor (idempotent with the loader's)
				if s := gt.sol.sol(pt{float64(rows[i].m), float64(rows[i].n), float64(rows[i].k)}); s > rows[i].l.lat {
					rows[i].l.lat = s
				}
			}
		}
		if gt.cacheDir != "" {
			gt.idx = cachedSiteIndex(gt.cacheDir, rows)
		} else {
			gt.idx = buildSiteIndex(rows)
		}
		gt.rows = nil
	})
	return gt.idx
}

// monoIndex returns the dtype's site index with each site's m-curve replaced
// by its lower monotone envelope: the latency at a collected m is the least
// latency collected at that m or any larger m of the same (n, k) site
// (Querier.Monotone says why). Sites, their order and the query rule are
// index()'s; only curve latencies can be lower. Built once, on first use.
func (gt *gemmTable) monoIndex() *siteIndex {
	idx := gt.index()
	gt.monoOnce.Do(func() {
		m := *idx
		m.points = nil
		m.sites = make([]site, len(idx.sites))
		for i, st := range idx.sites {
			st.curve = slices.Clone(st.curve)
			lowerEnvelope(st.curve, func(p *siteCurvePoint) *leaf { return &p.l })
			m.sites[i] = st
		}
		gt.mono = &m
	})
	return gt.mono
}

// points returns the dtype's (m, n, k) → latency points in sorted order,
// built on first use (only the empirical util grids read them).
func (gt *gemmTable) points() []gridPointF {
	idx := gt.index()
	gt.ptsOnce.Do(func() {
		n := 0
		for _, st := range idx.sites {
			n += len(st.curve)
		}
		pts := make([]gridPointF, 0, n)
		for _, st := range idx.sites {
			for _, p := range st.curve {
				pts = append(pts, gridPointF{c: pt{p.m, st.n, st.k}, lat: p.l.lat})
			}
		}
		slices.SortFunc(pts, cmpPoints)
		idx.points = pts
	})
	return idx.points
}

// cmpPoints orders points lexicographically by coordinates (table order).
func cmpPoints(a, b gridPointF) int {
	for i := range a.c {
		if a.c[i] != b.c[i] {
			if a.c[i] < b.c[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// buildQuantize indexes compute_scale / scale_matrix per quant_dtype.
func (t *tables) buildQuantize(d *Data) {
	build := func(rows []QuantizeRow) map[string]*grid {
		by := map[string][]gridPoint{}
		for _, r := range rows {
			by[r.Dtype] = append(by[r.Dtype], gridPoint{c: [maxAxes]int{r.M, r.K}, l: newLeaf(r.Latency, r.Power)})
		}
		out := map[string]*grid{}
		for k, v := range by {
			out[k] = buildGrid(2, v)
		}
		return out
	}
	t.cscale, t.smatrix = build(d.ComputeScale), build(d.ScaleMatrix)
}

// gemmSetup validates the shape and resolves the quant's SOL (flops are
// resolved before any data lookup, as aiconfigurator does).
func (q *Querier) gemmSetup(quant GemmQuant, m, n, k int) (gemmSOL, error) {
	if err := checkDims("gemm", []string{"m", "n", "k"}, m, n, k); err != nil {
		return gemmSOL{}, err
	}
	mp, err := quant.Mapping()
	if err != nil {
		return gemmSOL{}, err
	}
	fl, err := tcFlops(q.sys, mp.Dtype)
	if err != nil {
		return gemmSOL{}, fmt.Errorf("gemm %s: %w", quant, err)
	}
	return gemmSOL{flops: fl, memBytes: mp.Memory, memBW: q.sys.MemBW}, nil
}

// Gemm is the table-level GEMM latency for (m, n, k) under quant (Rust
// query_gemm_table). fp8_static reads the fp8 table here; use GemmOp for
// the fp8_static overhead subtraction.
func (q *Querier) Gemm(quant GemmQuant, m, n, k int) (Perf, error) {
	s, err := q.gemmSetup(quant, m, n, k)
	if err != nil {
		return Perf{}, err
	}
	fm, fn, fk := float64(m), float64(n), float64(k)
	switch q.mode {
	case ModeSOL:
		return Perf{LatencyMs: s.sol(pt{fm, fn, fk}), Source: SourceSOL}, nil
	case ModeEmpirical:
		v, err := q.gemmEmpirical(quant, s, fm, fn, fk)
		return Perf{LatencyMs: v, Source: SourceEmpirical}, err
	}
	l, err := q.gemmSilicon(quant, fm, fn, fk)
	if err == nil {
		return Perf{LatencyMs: l.lat, EnergyWms: l.energy, Source: SourceSilicon}, nil
	}
	if q.hybridMiss(err) {
		v, err := q.gemmEmpirical(quant, s, fm, fn, fk)
		return Perf{LatencyMs: v, Source: SourceEmpirical}, err
	}
	return Perf{}, err
}

// gemmSilicon resolves on the quant's table (GemmTable::query).
func (q *Querier) gemmSilicon(quant GemmQuant, m, n, k float64) (leaf, error) {
	gt, ok := q.gemm[quant.tableName()]
	if !ok {
		return leaf{}, missf("GEMM perf data missing for quant %q (%s %s %s); available: %v",
			quant.tableName(), q.sys.Name, q.backend, q.version, q.gemmQuants)
	}
	sol := &gt.sol
	if !gt.ok {
		return leaf{}, missf("GEMM quant %q has no SOL on %s", quant.tableName(), q.sys.Name)
	}
	if q.monotone {
		return gt.monoIndex().resolve(sol, m, n, k)
	}
	return gt.index().resolve(sol, m, n, k)
}

// gemmQuantUtilLevel is aiconfigurator's per-profile GEMM util level
// (_GEMM_QUANT_UTIL_LEVEL), used only as a ratio by the xprofile transfer.
func gemmQuantUtilLevel(mp QuantMapping) float64 {
	for _, e := range [...][3]float64{
		{2, 1, 0.70}, {1, 1, 0.55}, {0.5625, 1, 0.45}, {0.5, 1, 0.45}, {1, 2, 0.45},
		{0.5, 2, 0.35}, {1, 4, 0.30}, {0.5, 4, 0.30}, {0.5625, 4, 0.30},
	} {
		if e[0] == mp.Memory && e[1] == mp.Compute {
			return e[2]
		}
	}
	return 0.45
}

// gemmEmpirical is SOL(q)/util over the quant's whole (m, n, k) table, with
// the xquant (first same-profile dtype in row order) and xprofile
// (compute-first nearest profile, util × e(q)/e(ref)) ladder behind an
// own-data miss (Rust gemm_empirical).
func (q *Querier) gemmEmpirical(quant GemmQuant, s gemmSOL, m, n, k float64) (float64, error) {
	tq := GemmQuant(quant.tableName())
	qm, _ := tq.Mapping()
	own := q.emp.grid("gemm:"+string(tq), func() *utilGrid {
		if gt, ok := q.gemm[string(tq)]; ok {
			return buildUtilGrid(3, gt.points(), &s)
		}
		return nil
	})
	g, scale := own, 1.0
	if g.empty() {
		if q.policy.XQuant {
			for _, name := range q.gemmQuants {
				mp, err := GemmQuant(name).Mapping()
				if err != nil || name == string(tq) || mp.Memory != qm.Memory || mp.Compute != qm.Compute {
					continue
				}
				g = q.emp.grid(fmt.Sprintf("gemm_xquant:%s:%v:ref=%s", tq, q.policy, name), func() *utilGrid {
					ug := buildUtilGrid(3, q.gemm[name].points(), &s)
					ug.xform = "xquant"
					return ug
				})
				break
			}
		}
		if g.empty() && q.policy.XProfile {
			for _, name := range q.xprofileGemm(tq, qm) {
				mp, _ := GemmQuant(name).Mapping()
				fl, err := tcFlops(q.sys, mp.Dtype)
				if err != nil {
					return 0, fmt.Errorf("gemm %s: %w", name, err)
				}
				rs := gemmSOL{flops: fl, memBytes: mp.Memory, memBW: q.sys.MemBW}
				ref := q.emp.grid(fmt.Sprintf("gemm_xprofile:%s:%v:ref=%s", tq, q.policy, name), func() *utilGrid {
					ug := buildUtilGrid(3, q.gemm[name].points(), &rs)
					ug.xform = "xprofile"
					return ug
				})
				if !ref.empty() {
					g, scale = ref, gemmQuantUtilLevel(qm)/gemmQuantUtilLevel(mp)
					break
				}
			}
		}
	}
	c := pt{m, n, k}
	return g.estimate(s.sol(c), c, scale)
}

// xprofileGemm lists collected dtypes of a different (memory, compute)
// profile, ordered by (|Δcompute|, |Δmemory|), stable in row order.
func (q *Querier) xprofileGemm(tq GemmQuant, qm QuantMapping) []string {
	var refs []string
	for _, name := range q.gemmQuants {
		mp, err := GemmQuant(name).Mapping()
		if err != nil || name == string(tq) || (mp.Memory == qm.Memory && mp.Compute == qm.Compute) {
			continue
		}
		refs = append(refs, name)
	}
	dist := func(name string) [2]float64 {
		mp, _ := GemmQuant(name).Mapping()
		return [2]float64{math.Abs(mp.Compute - qm.Compute), math.Abs(mp.Memory - qm.Memory)}
	}
	sort.SliceStable(refs, func(i, j int) bool {
		a, b := dist(refs[i]), dist(refs[j])
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		return a[1] < b[1]
	})
	return refs
}

// GemmOp is the operator-level GEMM (Rust GemmOp::query before
// scale_factor): Gemm, and for fp8_static minus compute_scale(m, k) (and
// scale_matrix(m, k) when lowPrecisionInput — o-proj and down-proj),
// floored at the GEMM's own SOL and tagged Estimated; latency and energy
// clamped at 0.
func (q *Querier) GemmOp(quant GemmQuant, m, n, k int, lowPrecisionInput bool) (Perf, error) {
	base, err := q.Gemm(quant, m, n, k)
	if err != nil || quant != GemmFP8Static {
		return base.ClampNonNegative(), err
	}
	cs, err := q.ComputeScale(quant, m, k)
	if err != nil {
		return Perf{}, err
	}
	lat, en := base.LatencyMs-cs.LatencyMs, base.EnergyWms-cs.EnergyWms
	if lowPrecisionInput {
		sm, err := q.ScaleMatrix(quant, m, k)
		if err != nil {
			return Perf{}, err
		}
		lat, en = lat-sm.LatencyMs, en-sm.EnergyWms
	}
	s, err := q.gemmSetup(quant, m, n, k)
	if err != nil {
		return Perf{}, err
	}
	floor := s.sol(pt{float64(m), float64(n), float64(k)})
	return Perf{LatencyMs: math.Max(lat, floor), EnergyWms: en, Source: SourceEstimated}.ClampNonNegative(), nil
}

// ComputeScale is the fp8-static dynamic-quant overhead delta at (m, k):
// queried on the (m, k) grid after clamping into its envelope and held flat
// beyond it (Rust query_compute_scale / query_compute_scale_table).
func (q *Querier) ComputeScale(quant GemmQuant, m, k int) (Perf, error) {
	return q.scaleQuery(quant, m, k, false)
}

// ScaleMatrix is the fp8-static static-quant kernel latency at (m, k);
// beyond the grid the boundary utilization is held (latency and energy ×
// SOL(q)/SOL(boundary)).
func (q *Querier) ScaleMatrix(quant GemmQuant, m, k int) (Perf, error) {
	return q.scaleQuery(quant, m, k, true)
}

func (q *Querier) scaleQuery(quant GemmQuant, m, k int, matrix bool) (Perf, error) {
	name := "compute_scale"
	factor := 2.0
	tabs := q.cscale
	if matrix {
		name, factor, tabs = "scale_matrix", 3, q.smatrix
	}
	if err := checkDims(name, []string{"m", "k"}, m, k); err != nil {
		return Perf{}, err
	}
	s := scaleSOL{factor: factor, memBW: q.sys.MemBW}
	fm, fk := float64(m), float64(k)
	tq := quant.tableName()
	emp := func() (Perf, error) {
		var v float64
		var err error
		if matrix {
			g := q.emp.grid("scale_matrix:"+tq, func() *utilGrid {
				if t, ok := tabs[tq]; ok {
					return buildUtilGrid(2, t.points(), &s)
				}
				return nil
			})
			v, err = g.estimate(s.sol(pt{fm, fk}), pt{fm, fk}, 1)
		} else {
			t, ok := tabs[tq]
			if !ok {
				return Perf{}, &EmpiricalMissError{Msg: fmt.Sprintf("no empirical compute_scale data is available for m=%d, k=%d", m, k)}
			}
			d := q.emp.delta("compute_scale:"+tq, func() *deltaLookup { return buildDeltaLookup(t.points()) })
			v, err = d.estimate(pt{fm, fk}, &s)
		}
		return Perf{LatencyMs: v, Source: SourceEmpirical}, err
	}
	switch q.mode {
	case ModeSOL:
		return Perf{LatencyMs: s.sol(pt{fm, fk}), Source: SourceSOL}, nil
	case ModeEmpirical:
		return emp()
	}
	l, err := q.scaleSilicon(tabs, name, tq, fm, fk, &s, matrix)
	if err == nil {
		return Perf{LatencyMs: l.lat, EnergyWms: l.energy, Source: SourceSilicon}, nil
	}
	if q.hybridMiss(err) {
		return emp()
	}
	return Perf{}, err
}

// scaleSilicon is query_scale_table: clamp (m, k) into the collected
// envelope, resolve on the RAW 2-axis grid, then hold flat (compute_scale)
// or rescale by SOL(q)/SOL(boundary) (scale_matrix).
func (q *Querier) scaleSilicon(tabs map[string]*grid, name, tq string, m, k float64, s *scaleSOL, ratio bool) (leaf, error) {
	g, ok := tabs[tq]
	if !ok || g.n == 0 {
		return leaf{}, missf("%s perf data missing for quant %q (%s %s %s)", name, tq, q.sys.Name, q.backend, q.version)
	}
	mk := g.root.keys
	mc := math.Min(math.Max(m, mk[0]), mk[len(mk)-1])
	kmin, kmax := math.Inf(1), math.Inf(-1)
	for i := range g.root.kids {
		ks := g.root.kids[i].keys
		if len(ks) > 0 {
			kmin, kmax = math.Min(kmin, ks[0]), math.Max(kmax, ks[len(ks)-1])
		}
	}
	kc := math.Min(math.Max(k, kmin), kmax)
	v, err := g.query(&scaleCfg, s, pt{mc, kc})
	if err != nil || !ratio || (mc == m && kc == k) {
		return v, err
	}
	bs, qs := s.sol(pt{mc, kc}), s.sol(pt{m, k})
	if bs > 0 && qs > 0 {
		r := qs / bs
		v.lat *= r
		v.energy *= r
	}
	return v, nil
}

// GemmBelowGridSOL is the opt-in below-grid degrade of a GEMM op (Rust
// GemmOp below_grid_sol): in SILICON mode, when the quant's table exists
// but the shape misses, the GEMM is priced at its SOL. ok is false when
// the degrade does not apply (other modes, or no table for the quant).
func (q *Querier) GemmBelowGridSOL(quant GemmQuant, m, n, k int) (Perf, bool, error) {
	if q.mode != ModeSilicon {
		return Perf{}, false, nil
	}
	if _, ok := q.gemm[quant.tableName()]; !ok {
		return Perf{}, false, nil
	}
	s, err := q.gemmSetup(quant, m, n, k)
	if err != nil {
		return Perf{}, false, err
	}
	return Perf{LatencyMs: s.sol(pt{float64(m), float64(n), float64(k)}), Source: SourceSOL}, true, nil
}
