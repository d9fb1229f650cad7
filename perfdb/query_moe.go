package perfdb

// query_moe.go answers the fused-MoE expert compute (Rust
// perf_database/moe.rs, moe_index.rs, operators/moe.rs): a token curve per
// (quant, distribution, topk, experts, hidden, inter, moe_tp, moe_ep), the
// distribution falling back to "uniform" when the requested one was not
// collected for the quant, and the empirical transfer ladder
// xshape → xquant → xprofile.

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"
)

// moeShape is the categorical shape of a MoE curve.
type moeShape struct {
	topk, experts, hidden, inter, tp, ep int
}

// moeIndex is quant → distribution → shape → token curve, with the quants in
// first-seen row order (the ladder's tie-break order).
type moeIndex struct {
	byQuant map[string]map[string]map[moeShape]*moeSlice
	quants  []string
}

// moeSlice is one token curve with its precomputed rooflines (index 1:
// gated, 3 GEMMs; index 0: 2 GEMMs); nil when the system lacks the flops.
type moeSlice struct {
	cv  *curve
	sol [2]*moeSOL
}

// moeQuantRewrite maps kernel-specific rows to their own quant modes
// (Rust moe_kernel_quant_rewrite).
func moeQuantRewrite(q, kernel string) string {
	switch {
	case q == "w4a8_mxfp4_mxfp8" && kernel == "sglang_mxfp4_flashinfer_trtllm_moe":
		return "w4a8_mxfp4_mxfp8_trtllm"
	case q == "w4a16_mxfp4" && kernel == "sglang_flashinfer_cutlass_moe":
		return "w4a16_mxfp4_cutlass"
	}
	return q
}

// lazyMoE holds one MoE table's rows until its first query indexes them
// (buildMoEIndex): a dense model never queries MoE tables, and a MoE model
// not at nvfp4 never queries the min-latency one. The index is a pure
// function of the rows, so when it is built never changes an answer.
type lazyMoE struct {
	once sync.Once
	rows []MoERow
	sys  *System
	idx  *moeIndex
}

// get returns the index, building it on the first call.
func (l *lazyMoE) get() *moeIndex {
	l.once.Do(func() {
		l.idx = buildMoEIndex(l.rows, l.sys)
		l.rows = nil
	})
	return l.idx
}

// moeGroup is one token curve's key: quant (rewritten), distribution, shape.
type moeGroup struct {
	quant, dist string
	sh          moeShape
}

// buildMoEIndex indexes rows; the first row at a coordinate wins. Rows are
// grouped by curve with one map lookup per run of rows of the same curve
// (files list a curve's token counts together), then each curve's points,
// in row order, go to newCurve.
func buildMoEIndex(rows []MoERow, sys *System) *moeIndex {
	idx := &moeIndex{byQuant: map[string]map[string]map[moeShape]*moeSlice{}}
	ids := map[moeGroup]int32{}
	var groups []moeGroup
	var counts []int32
	rowGroup := make([]int32, len(rows))
	var prev moeGroup
	cur := int32(-1)
	for i := range rows {
		r := &rows[i]
		g := moeGroup{moeQuantRewrite(r.Dtype, r.Kernel), r.Distribution, moeShape{r.TopK, r.NumExperts, r.Hidden, r.Inter, r.MoETP, r.MoEEP}}
		if cur < 0 || g != prev {
			id, ok := ids[g]
			if !ok {
				id = int32(len(groups))
				ids[g] = id
				groups = append(groups, g)
				counts = append(counts, 0)
				if _, seen := idx.byQuant[g.quant]; !seen {
					idx.byQuant[g.quant] = map[string]map[moeShape]*moeSlice{}
					idx.quants = append(idx.quants, g.quant)
				}
			}
			prev, cur = g, id
		}
		rowGroup[i] = cur
		counts[cur]++
	}
	// Each curve's points in row order, curves one after the other; each curve
	// is then sorted in its own range of pts (sortCurve), which it keeps.
	start := make([]int32, len(groups)+1)
	for j, c := range counts {
		start[j+1] = start[j] + c
	}
	fill := slices.Clone(start[:len(groups)])
	pts := make([]curvePoint, len(rows))
	for i := range rows {
		g := rowGroup[i]
		pts[fill[g]] = curvePoint{x: float64(rows[i].NumTokens), l: newLeaf(rows[i].Latency, rows[i].Power)}
		fill[g]++
	}
	for j, g := range groups {
		sl := &moeSlice{cv: sortCurve("num_tokens", pts[start[j]:start[j+1]:start[j+1]])}
		for gated := 0; gated < 2; gated++ {
			if s, err := moeSOLOf(sys, MoEQuant(g.quant), gated == 1, g.sh); err == nil {
				sl.sol[gated] = &s
			}
		}
		byDist := idx.byQuant[g.quant]
		if byDist[g.dist] == nil {
			byDist[g.dist] = map[moeShape]*moeSlice{}
		}
		byDist[g.dist][g.sh] = sl
	}
	return idx
}

// shapes resolves the distribution (requested, else "uniform") for quant.
func (m *moeIndex) shapes(quant, dist string) (string, map[moeShape]*moeSlice) {
	bd, ok := m.byQuant[quant]
	if !ok {
		return "uniform", nil
	}
	if s, ok := bd[dist]; ok {
		return dist, s
	}
	return "uniform", bd["uniform"]
}

// moeCurve returns the op's own slice, or a MissError.
func (q *Querier) moeCurve(idx *moeIndex, a *MoEArgs) (*moeSlice, error) {
	dist, by := idx.shapes(string(a.Quant), a.Distribution)
	cv := by[moeShape{a.TopK, a.NumExperts, a.Hidden, a.Inter, a.MoETP, a.MoEEP}]
	if cv == nil || len(cv.cv.pts) == 0 {
		return nil, missf("MoE data missing for quant=%s distribution=%s topk=%d experts=%d hidden=%d inter=%d moe_tp=%d moe_ep=%d (%s %s %s)",
			a.Quant, dist, a.TopK, a.NumExperts, a.Hidden, a.Inter, a.MoETP, a.MoEEP, q.sys.Name, q.backend, q.version)
	}
	return cv, nil
}

// moeSOLFor builds the roofline for a shape under quant.
func (q *Querier) moeSOLFor(quant MoEQuant, gated bool, topk, experts, hidden, inter, tp, ep int) (moeSOL, error) {
	return moeSOLOf(q.sys, quant, gated, moeShape{topk, experts, hidden, inter, tp, ep})
}

// moeSOLOf builds the roofline for a shape under quant on sys.
func moeSOLOf(sys *System, quant MoEQuant, gated bool, sh moeShape) (moeSOL, error) {
	topk, experts, hidden, inter, tp, ep := sh.topk, sh.experts, sh.hidden, sh.inter, sh.tp, sh.ep
	mp, err := quant.Mapping()
	if err != nil {
		return moeSOL{}, err
	}
	fl, err := tcFlops(sys, mp.Dtype)
	if err != nil {
		return moeSOL{}, fmt.Errorf("moe %s: %w", quant, err)
	}
	ng := uint64(2)
	if gated {
		ng = 3
	}
	return moeSOL{numGemms: ng, hidden: uint64(hidden), inter: uint64(inter), topk: uint64(topk),
		experts: uint64(experts), tp: uint64(tp), ep: uint64(ep), mem: mp.Memory, flops: fl, memBW: sys.MemBW}, nil
}

// MoE is the MoE expert-compute latency for numTokens tokens per
// attention-DP rank (Rust MoeOp::query before scale_factor): tokens are
// multiplied by AttentionDP, SILICON resolves the token curve (linear
// inside, boundary util held outside, a singleton curve queried below its
// point is a miss), trtllm's min-latency nvfp4 kernels are probed first for
// ≤ 128 tokens; latency and energy clamped at 0.
func (q *Querier) MoE(a MoEArgs, numTokens int) (Perf, error) {
	if err := checkDims("moe", []string{"num_tokens", "topk", "num_experts", "hidden", "inter", "moe_tp", "moe_ep", "attention_dp"},
		numTokens, a.TopK, a.NumExperts, a.Hidden, a.Inter, a.MoETP, a.MoEEP, a.AttentionDP); err != nil {
		return Perf{}, err
	}
	tokens := numTokens * max(a.AttentionDP, 1)
	s, err := q.moeSOLFor(a.Quant, a.IsGated, a.TopK, a.NumExperts, a.Hidden, a.Inter, a.MoETP, a.MoEEP)
	if err != nil {
		return Perf{}, err
	}
	switch q.mode {
	case ModeSOL:
		return Perf{LatencyMs: s.sol(pt{float64(tokens)}), Source: SourceSOL}.ClampNonNegative(), nil
	case ModeEmpirical:
		v, err := q.moeEmpirical(&a, s, tokens)
		return Perf{LatencyMs: v, Source: SourceEmpirical}.ClampNonNegative(), err
	}
	p, err := q.moeSilicon(&a, s, tokens)
	if err == nil {
		return p, nil
	}
	if q.hybridMiss(err) {
		v, err := q.moeEmpirical(&a, s, tokens)
		return Perf{LatencyMs: v, Source: SourceEmpirical}.ClampNonNegative(), err
	}
	return Perf{}, err
}

// moeSilicon is MoeOp::silicon_pr.
func (q *Querier) moeSilicon(a *MoEArgs, s moeSOL, tokens int) (Perf, error) {
	if q.backend == "sglang" && a.EnableEPLB && a.IsContext {
		tokens = int(float64(tokens) * 0.8)
	}
	if tokens <= 128 && a.Quant == MoENVFP4 && a.IsGated && len(q.moeLL.get().quants) > 0 {
		if cv, err := q.moeCurve(q.moeLL.get(), a); err == nil {
			l, err := moeCurveQuery(cv, s, tokens)
			if err != nil {
				return Perf{}, err
			}
			return Perf{LatencyMs: l.lat, EnergyWms: l.energy, Source: SourceSilicon}.ClampNonNegative(), nil
		}
	}
	cv, err := q.moeCurve(q.moe.get(), a)
	if err != nil {
		return Perf{}, err
	}
	l, err := moeCurveQuery(cv, s, tokens)
	if err != nil {
		return Perf{}, err
	}
	return Perf{LatencyMs: l.lat, EnergyWms: l.energy, Source: SourceSilicon}.ClampNonNegative(), nil
}

// moeCurveQuery applies the singleton-underflow rule, then the curve (with
// the slice's precomputed roofline when available, s otherwise).
func moeCurveQuery(sl *moeSlice, s moeSOL, tokens int) (leaf, error) {
	cv := sl.cv
	g := 0
	if s.numGemms == 3 {
		g = 1
	}
	if sl.sol[g] == nil {
		return moeCurveQueryOwn(sl, s, tokens)
	}
	if len(cv.pts) == 1 && float64(tokens) < cv.pts[0].x {
		return leaf{}, missf("MoE silicon token underflow has only one measured point; cannot infer low-token latency from a singleton (num_tokens=%d, measured_token=%v)", tokens, cv.pts[0].x)
	}
	return cv.query(sl.sol[g], float64(tokens))
}

// moeCurveQueryOwn is moeCurveQuery with a roofline built for the query.
func moeCurveQueryOwn(sl *moeSlice, s moeSOL, tokens int) (leaf, error) {
	cv := sl.cv
	if len(cv.pts) == 1 && float64(tokens) < cv.pts[0].x {
		return leaf{}, missf("MoE silicon token underflow has only one measured point; cannot infer low-token latency from a singleton (num_tokens=%d, measured_token=%v)", tokens, cv.pts[0].x)
	}
	return cv.query(&s, float64(tokens))
}

// moeUtilLevel is aiconfigurator's per-profile MoE util level
// (_MOE_QUANT_UTIL_LEVEL), used only as a ratio by the xprofile tier.
func moeUtilLevel(mp QuantMapping) float64 {
	for _, e := range [...][3]float64{
		{2, 1, 0.53}, {1, 1, 0.45}, {0.5625, 1, 0.07}, {0.5, 1, 0.07}, {1, 2, 0.40},
		{0.5, 2, 0.15}, {1, 4, 0.30}, {0.5, 4, 0.23}, {0.5625, 4, 0.23},
	} {
		if e[0] == mp.Memory && e[1] == mp.Compute {
			return e[2]
		}
	}
	return 0.30
}

// moeCand is a ladder candidate: a sibling curve and the quants that built it.
type moeCand struct {
	sh       moeShape
	cv       *curve
	refQuant MoEQuant
	solQuant MoEQuant
	xform    string
}

// moeEmpirical is MoeOp::empirical_latency: own-slice util, else the ladder.
func (q *Querier) moeEmpirical(a *MoEArgs, sv moeSOL, tokens int) (float64, error) {
	s := &sv
	idx, tag := q.moe.get(), "std"
	if tokens <= 128 && a.Quant == MoENVFP4 && a.IsGated && len(q.moeLL.get().quants) > 0 {
		if _, err := q.moeCurve(q.moeLL.get(), a); err == nil {
			idx, tag = q.moeLL.get(), "ll"
		}
	}
	ownKey := fmt.Sprintf("moe:%s:%s:%d:%d:%d:%d:%d:%d:%s:%d", a.Quant, tag, a.TopK, a.NumExperts, a.Hidden, a.Inter, a.MoETP, a.MoEEP, a.Distribution, s.numGemms)
	g := q.emp.grid(ownKey, func() *utilGrid {
		cv, err := q.moeCurve(idx, a)
		if err != nil {
			return nil
		}
		return buildUtilGrid(1, curvePoints(cv.cv), s)
	})
	scale := 1.0
	if g.empty() {
		var cands []moeCand
		if q.policy.XShape {
			cands = q.moeCollect(idx, a, a.Quant, a.Quant, "xshape", cands)
		}
		qm, _ := a.Quant.Mapping()
		if len(cands) == 0 && q.policy.XQuant {
			for _, name := range idx.quants {
				mp, err := MoEQuant(name).Mapping()
				if err != nil || MoEQuant(name) == a.Quant || mp.Memory != qm.Memory || mp.Compute != qm.Compute {
					continue
				}
				cands = q.moeCollect(idx, a, MoEQuant(name), a.Quant, "xquant", cands)
			}
		}
		ref, err := q.moeRefGrid(a, tag, s.numGemms, cands)
		if err != nil {
			return 0, err
		}
		if ref != nil {
			g = ref
		}
		if g.empty() && q.policy.XProfile {
			for _, rq := range q.xprofileMoE(idx, a.Quant, qm) {
				cs := q.moeCollect(idx, a, rq, rq, "xprofile", nil)
				ref, err := q.moeRefGrid(a, tag, s.numGemms, cs)
				if err != nil {
					return 0, err
				}
				if !ref.empty() {
					rm, _ := rq.Mapping()
					g, scale = ref, moeUtilLevel(qm)/moeUtilLevel(rm)
					break
				}
			}
		}
	}
	c := pt{float64(tokens)}
	return g.estimate(s.sol(c), c, scale)
}

// moeCollect appends source's sibling slices at the op's distribution,
// moe_tp and moe_ep (shape order is sorted, as Rust's BTreeMap walk).
func (q *Querier) moeCollect(idx *moeIndex, a *MoEArgs, source, solQuant MoEQuant, xform string, out []moeCand) []moeCand {
	_, by := idx.shapes(string(source), a.Distribution)
	var shs []moeShape
	for sh, sl := range by {
		if sh.tp == a.MoETP && sh.ep == a.MoEEP && len(sl.cv.pts) > 0 {
			shs = append(shs, sh)
		}
	}
	sort.Slice(shs, func(i, j int) bool {
		x, y := shs[i], shs[j]
		for _, d := range [...][2]int{{x.topk, y.topk}, {x.experts, y.experts}, {x.hidden, y.hidden}, {x.inter, y.inter}, {x.tp, y.tp}, {x.ep, y.ep}} {
			if d[0] != d[1] {
				return d[0] < d[1]
			}
		}
		return false
	})
	for _, sh := range shs {
		out = append(out, moeCand{sh: sh, cv: by[sh].cv, refQuant: source, solQuant: solQuant, xform: xform})
	}
	return out
}

// moeRefGrid picks the candidate nearest to the op's (topk, experts, hidden,
// inter) in normalised log space (first on ties) and builds its util grid
// with the candidate's own shape in the SOL.
func (q *Querier) moeRefGrid(a *MoEArgs, tag string, numGemms uint64, cands []moeCand) (*utilGrid, error) {
	if len(cands) == 0 {
		return nil, nil
	}
	feat := func(c moeShape) [4]float64 {
		return [4]float64{lnFloor(float64(c.topk)), lnFloor(float64(c.experts)), lnFloor(float64(c.hidden)), lnFloor(float64(c.inter))}
	}
	qf := [4]float64{lnFloor(float64(a.TopK)), lnFloor(float64(a.NumExperts)), lnFloor(float64(a.Hidden)), lnFloor(float64(a.Inter))}
	var mins, maxs [4]float64
	for i := range mins {
		mins[i], maxs[i] = math.Inf(1), math.Inf(-1)
	}
	for _, c := range cands {
		f := feat(c.sh)
		for i := range f {
			mins[i], maxs[i] = math.Min(mins[i], f[i]), math.Max(maxs[i], f[i])
		}
	}
	best, bd := 0, math.Inf(1)
	for ci, c := range cands {
		f := feat(c.sh)
		d2 := 0.0
		for i := range f {
			span := maxs[i] - mins[i]
			if !(span > 0) {
				span = 1
			}
			x := (f[i]-mins[i])/span - (qf[i]-mins[i])/span
			d2 += x * x
		}
		if d2 < bd {
			best, bd = ci, d2
		}
	}
	ch := cands[best]
	gated := numGemms == 3
	rs, err := q.moeSOLFor(ch.solQuant, gated, ch.sh.topk, ch.sh.experts, ch.sh.hidden, ch.sh.inter, a.MoETP, a.MoEEP)
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("moe_%s:%s:%s:%d:%d:%d:%d:%d:%d:%s:%d:policy=%v:ref=%s:%dx%dx%dx%d", ch.xform, a.Quant, tag,
		a.TopK, a.NumExperts, a.Hidden, a.Inter, a.MoETP, a.MoEEP, a.Distribution, numGemms, q.policy, ch.refQuant,
		ch.sh.topk, ch.sh.experts, ch.sh.hidden, ch.sh.inter)
	return q.emp.grid(key, func() *utilGrid {
		ug := buildUtilGrid(1, curvePoints(ch.cv), &rs)
		ug.xform = ch.xform
		return ug
	}), nil
}

// xprofileMoE lists collected quants of a different profile, nearest
// (|Δmemory| + |Δcompute|) first, stable in row order.
func (q *Querier) xprofileMoE(idx *moeIndex, quant MoEQuant, qm QuantMapping) []MoEQuant {
	var refs []MoEQuant
	for _, name := range idx.quants {
		mp, err := MoEQuant(name).Mapping()
		if err != nil || MoEQuant(name) == quant || (mp.Memory == qm.Memory && mp.Compute == qm.Compute) {
			continue
		}
		refs = append(refs, MoEQuant(name))
	}
	dist := func(x MoEQuant) float64 {
		mp, _ := x.Mapping()
		return math.Abs(mp.Memory-qm.Memory) + math.Abs(mp.Compute-qm.Compute)
	}
	sort.SliceStable(refs, func(i, j int) bool { return dist(refs[i]) < dist(refs[j]) })
	return refs
}
