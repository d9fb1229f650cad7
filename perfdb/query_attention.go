package perfdb

// query_attention.go answers context (prefill) and generation (decode)
// attention (Rust perf_database/attention.rs + operators/attention.rs).

import (
	"fmt"
	"math"
	"slices"
	"sync"
)

// ctxKey selects a context-attention slice; NKV 0 is the MHA sentinel.
type ctxKey struct {
	fmha, kv          string
	nkv, head, window int
}

// genKey selects a generation-attention slice; NKV 0 is the MHA sentinel.
type genKey struct {
	kv                string
	nkv, head, window int
}

// attnSlice is one attention slice: its grid (built on first use, see
// attnSlice.grid) and the slice SOL (nil when the system lacks the dtype's
// flops, which makes queries on it an error).
type attnSlice struct {
	pts    []gridPoint // the slice's points, until the grid is built
	once   sync.Once
	g      *grid
	ctxSOL *ctxAttnSOL
	genSOL *genAttnSOL
}

// grid returns the slice's grid, built on first use (a querier reads a few of
// the tables' slices). Generation points are first raised to the slice SOL
// (GenerationAttention._correct_sol; power/energy untouched).
func (sl *attnSlice) grid() *grid {
	sl.once.Do(func() {
		if sl.genSOL != nil {
			for i := range sl.pts {
				c := sl.pts[i].c
				if s := sl.genSOL.sol(pt{float64(c[0]), float64(c[1]), float64(c[2])}); s > sl.pts[i].l.lat {
					sl.pts[i].l.lat = s
				}
			}
		}
		sl.g = buildGrid(3, sl.pts)
		sl.pts = nil
	})
	return sl.g
}

// nkvLookup maps n_kv == n to the MHA sentinel 0.
func nkvLookup(n, nkv int) int {
	if nkv == n {
		return 0
	}
	return nkv
}

// lazyAttention holds the attention tables' rows until the first attention
// query indexes them (buildAttention): an MLA model (DeepSeek) never reads
// them. The index is a pure function of the rows, so when it is built never
// changes an answer.
type lazyAttention struct {
	once    sync.Once
	ctxRows []AttentionRow
	genRows []AttentionRow
}

// ctxSlices is the context-attention index, built on first use.
func (t *tables) ctxSlices() map[ctxKey]*attnSlice {
	t.attnIndex()
	return t.ctx
}

// genSlices is the generation-attention index, built on first use.
func (t *tables) genSlices() map[genKey]*attnSlice {
	t.attnIndex()
	return t.gen
}

// attnIndex builds both attention indexes once and drops the rows.
func (t *tables) attnIndex() {
	t.attn.once.Do(func() {
		t.buildAttention(t.attn.ctxRows, t.attn.genRows)
		t.attn.ctxRows, t.attn.genRows = nil, nil
	})
}

// buildAttention indexes both attention tables. Context grids are
// [heads][full_s][batch]; generation grids are [heads][batch][isl+step] and
// floored at their SOL (GenerationAttention._correct_sol).
func (t *tables) buildAttention(ctxRows, genRows []AttentionRow) {
	// Rows of a slice mostly come in runs: the map is consulted when the key changes.
	ctxPts := map[ctxKey]*[]gridPoint{}
	var ck ctxKey
	var cpts *[]gridPoint
	for _, r := range ctxRows {
		k := ctxKey{r.AttnDtype, r.KVDtype, nkvLookup(r.NumHeads, r.NumKVHeads), r.HeadDim, r.Window}
		if cpts == nil || k != ck {
			ck, cpts = k, ctxPts[k]
			if cpts == nil {
				cpts = new([]gridPoint)
				ctxPts[k] = cpts
			}
		}
		*cpts = append(*cpts, gridPoint{c: [maxAxes]int{r.NumHeads, r.ISL, r.Batch}, l: newLeaf(r.Latency, r.Power)})
	}
	t.ctx = map[ctxKey]*attnSlice{}
	for k, pts := range ctxPts {
		sl := &attnSlice{pts: *pts}
		if fm, err := FMHAQuant(k.fmha).Mapping(); err == nil {
			km, err2 := KVQuant(k.kv).Mapping()
			fl, err3 := tcFlops(t.sys, fm.Dtype)
			if err2 == nil && err3 == nil {
				sl.ctxSOL = &ctxAttnSOL{nKV: float64(k.nkv), head: float64(k.head), window: float64(k.window), kvMem: km.Memory, flops: fl, memBW: t.sys.MemBW}
			}
		}
		t.ctx[k] = sl
	}
	genPts := map[genKey]*[]gridPoint{}
	var gk genKey
	var gpts *[]gridPoint
	for _, r := range genRows {
		k := genKey{r.KVDtype, nkvLookup(r.NumHeads, r.NumKVHeads), r.HeadDim, r.Window}
		if gpts == nil || k != gk {
			gk, gpts = k, genPts[k]
			if gpts == nil {
				gpts = new([]gridPoint)
				genPts[k] = gpts
			}
		}
		*gpts = append(*gpts, gridPoint{c: [maxAxes]int{r.NumHeads, r.Batch, r.ISL + r.Step}, l: newLeaf(r.Latency, r.Power)})
	}
	t.gen = map[genKey]*attnSlice{}
	for k, pts := range genPts {
		sl := &attnSlice{pts: *pts}
		if km, err := KVQuant(k.kv).Mapping(); err == nil {
			if fl, err := tcFlops(t.sys, genAttnFlopsDtype(t.sys, KVQuant(k.kv))); err == nil {
				sl.genSOL = &genAttnSOL{nKV: float64(k.nkv), head: float64(k.head), window: float64(k.window), kvMem: km.Memory, flops: fl, memBW: t.sys.MemBW}
			}
		}
		t.gen[k] = sl
	}
}

// attnArgs validates attention sizes.
func attnArgs(op string, b, s, prefix, n, nkv, head, window int) error {
	if err := checkDims(op, []string{"batch", "seq", "prefix", "num_heads", "num_kv_heads", "head_dim", "window"}, b, s, prefix, n, nkv, head, window); err != nil {
		return err
	}
	if n == 0 || head == 0 {
		return fmt.Errorf("%s: num_heads and head_dim must be > 0", op)
	}
	return nil
}

// ContextAttention is the prefill FMHA latency (Rust
// query_context_attention_table): batch b, s new tokens per request after
// prefix cached tokens, nHeads/nKV per GPU (nKV == nHeads means MHA),
// window 0 = full attention. SILICON reads the table at full_s = s + prefix
// (sqrt-seq blend) and scales latency and energy by
// (full_s² − prefix²)/full_s². The RoPE/KV-write extras of the operator are
// NOT included (compose them with MemOp).
func (q *Querier) ContextAttention(b, s, prefix, nHeads, nKV, headDim, window int, kvQuant KVQuant, fmhaQuant FMHAQuant) (Perf, error) {
	if err := attnArgs("context attention", b, s, prefix, nHeads, nKV, headDim, window); err != nil {
		return Perf{}, err
	}
	fm, err := fmhaQuant.Mapping()
	if err != nil {
		return Perf{}, err
	}
	km, err := kvQuant.Mapping()
	if err != nil {
		return Perf{}, err
	}
	fl, err := tcFlops(q.sys, fm.Dtype)
	if err != nil {
		return Perf{}, fmt.Errorf("context attention %s: %w", fmhaQuant, err)
	}
	solQ := ctxAttnSOLPrefix(q.sys.MemBW, fl, km.Memory, float64(b), float64(s), float64(prefix),
		float64(nHeads), float64(nKV), float64(headDim), float64(window))
	switch q.mode {
	case ModeSOL:
		return Perf{LatencyMs: solQ, Source: SourceSOL}, nil
	case ModeEmpirical:
		v, err := q.ctxEmpirical(b, s, prefix, nHeads, nKV, headDim, window, kvQuant, fmhaQuant, solQ)
		return Perf{LatencyMs: v, Source: SourceEmpirical}, err
	}
	full := s + prefix
	k := ctxKey{string(fmhaQuant), string(kvQuant), nkvLookup(nHeads, nKV), headDim, window}
	sl, ok := q.ctxSlices()[k]
	if !ok {
		err = missf("context attention data missing for fmha=%s kv=%s n_kv=%d head_dim=%d window=%d (%s %s %s)",
			fmhaQuant, kvQuant, k.nkv, headDim, window, q.sys.Name, q.backend, q.version)
	} else {
		var l leaf
		l, err = sl.grid().query(&ctxAttnCfg, sl.ctxSOL, pt{float64(nHeads), float64(full), float64(b)})
		if err == nil {
			corr := 0.0
			if full > 0 {
				f, p := float64(full), float64(prefix)
				corr = (f*f - p*p) / (f * f)
			}
			return Perf{LatencyMs: l.lat * corr, EnergyWms: l.energy * corr, Source: SourceSilicon}, nil
		}
	}
	if q.hybridMiss(err) {
		v, err := q.ctxEmpirical(b, s, prefix, nHeads, nKV, headDim, window, kvQuant, fmhaQuant, solQ)
		return Perf{LatencyMs: v, Source: SourceEmpirical}, err
	}
	return Perf{}, err
}

// GenerationAttention is the decode attention latency (Rust
// query_generation_attention_table): batch b, KV length s (cached tokens
// including the new one); SILICON averages 5 grid queries at
// s_i = s_min + (s_max−s_min)·i//4, s_min = max(1, ⌊0.9s⌋),
// s_max = max(s_min, ⌊1.1s⌋) (latency and energy averaged).
func (q *Querier) GenerationAttention(b, s, nHeads, nKV, headDim, window int, kvQuant KVQuant) (Perf, error) {
	if err := attnArgs("generation attention", b, s, 0, nHeads, nKV, headDim, window); err != nil {
		return Perf{}, err
	}
	km, err := kvQuant.Mapping()
	if err != nil {
		return Perf{}, err
	}
	fl, err := tcFlops(q.sys, genAttnFlopsDtype(q.sys, kvQuant))
	if err != nil {
		return Perf{}, fmt.Errorf("generation attention kv %s: %w", kvQuant, err)
	}
	k := genKey{string(kvQuant), nkvLookup(nHeads, nKV), headDim, window}
	qsol := genAttnSOL{nKV: float64(k.nkv), head: float64(headDim), window: float64(window), kvMem: km.Memory, flops: fl, memBW: q.sys.MemBW}
	c := pt{float64(nHeads), float64(b), float64(s)}
	switch q.mode {
	case ModeSOL:
		return Perf{LatencyMs: qsol.sol(c), Source: SourceSOL}, nil
	case ModeEmpirical:
		v, err := q.genEmpirical(k, c, qsol.sol(c))
		return Perf{LatencyMs: v, Source: SourceEmpirical}, err
	}
	sl, ok := q.genSlices()[k]
	if !ok {
		err = missf("generation attention data missing for kv=%s n_kv=%d head_dim=%d window=%d (%s %s %s)",
			kvQuant, k.nkv, headDim, window, q.sys.Name, q.backend, q.version)
	} else {
		sMin := max(1, int(float64(s)*0.9))
		sMax := max(sMin, int(float64(s)*1.1))
		var lat, en float64
		for i := 0; i < 5; i++ {
			si := sMin + (sMax-sMin)*i/4
			var l leaf
			l, err = sl.grid().query(&genAttnCfg, sl.genSOL, pt{float64(nHeads), float64(b), float64(si)})
			if err != nil {
				break
			}
			lat += l.lat
			en += l.energy
		}
		if err == nil {
			return Perf{LatencyMs: lat / 5, EnergyWms: en / 5, Source: SourceSilicon}, nil
		}
	}
	if q.hybridMiss(err) {
		v, err := q.genEmpirical(k, c, qsol.sol(c))
		return Perf{LatencyMs: v, Source: SourceEmpirical}, err
	}
	return Perf{}, err
}

// attnPrefillHSRatio is the prefill util ratio vs head_dim 128 per backend
// (_ATTN_PREFILL_HS_RATIO), log2-interpolated and clamped; 1 for unknown.
func attnPrefillHSRatio(backend string, head int) float64 {
	var tab [][2]float64
	switch backend {
	case "trtllm":
		tab = [][2]float64{{64, 0.58}, {128, 1.00}, {192, 1.10}, {256, 1.17}, {512, 1.20}}
	case "sglang":
		tab = [][2]float64{{64, 0.60}, {128, 1.00}, {192, 1.18}, {256, 1.32}, {512, 1.38}}
	case "vllm":
		tab = [][2]float64{{64, 0.60}, {128, 1.00}, {192, 1.27}, {256, 1.51}, {512, 1.60}}
	default:
		return 1
	}
	h := float64(head)
	for _, e := range tab {
		if e[0] == h {
			return e[1]
		}
	}
	if h <= tab[0][0] {
		return tab[0][1]
	}
	if h >= tab[len(tab)-1][0] {
		return tab[len(tab)-1][1]
	}
	for i := 1; i < len(tab); i++ {
		if tab[i][0] > h {
			lo, hi := tab[i-1], tab[i]
			t := (math.Log2(h) - math.Log2(lo[0])) / (math.Log2(hi[0]) - math.Log2(lo[0]))
			return lo[1] + t*(hi[1]-lo[1])
		}
	}
	return 1
}

// refHeadSize picks the head size to borrow util from: 128 when collected,
// else the nearest in log space (first on ties).
func refHeadSize(avail []int, target int) (int, bool) {
	var hs []int
	for _, h := range avail {
		if h != 0 {
			hs = append(hs, h)
		}
	}
	if len(hs) == 0 {
		return 0, false
	}
	if slices.Contains(hs, 128) {
		return 128, true
	}
	// 1-D normalised-log argmin == |ln h − ln target| argmin (first on ties).
	best, bd := hs[0], math.Inf(1)
	for _, h := range hs {
		if d := math.Abs(lnFloor(float64(h)) - lnFloor(float64(target))); d < bd {
			best, bd = h, d
		}
	}
	return best, true
}

// ctxEmpirical is context_attention_empirical: own slice (exact window, then
// window 0), else the xshape head-size borrow with the prefill util ratio.
func (q *Querier) ctxEmpirical(b, s, prefix, n, nkv, head, window int, kv KVQuant, fmha FMHAQuant, solQ float64) (float64, error) {
	nl := nkvLookup(n, nkv)
	query := pt{float64(n), float64(s + prefix), float64(b)}
	windows := []int{window}
	if window > 0 {
		windows = append(windows, 0)
	}
	for _, w := range windows {
		key := ctxKey{string(fmha), string(kv), nl, head, w}
		g := q.emp.grid(fmt.Sprintf("ctx_attn:%v", key), func() *utilGrid {
			if sl, ok := q.ctxSlices()[key]; ok && sl.ctxSOL != nil {
				return buildUtilGrid(3, sl.grid().points(), sl.ctxSOL)
			}
			return nil
		})
		if !g.empty() {
			return g.estimate(solQ, query, 1)
		}
		if q.policy.XShape {
			var heads []int
			for k := range q.ctxSlices() {
				if k.fmha == key.fmha && k.kv == key.kv && k.nkv == nl && !slices.Contains(heads, k.head) {
					heads = append(heads, k.head)
				}
			}
			slices.Sort(heads)
			if ref, ok := refHeadSize(heads, head); ok {
				rk := ctxKey{string(fmha), string(kv), nl, ref, w}
				rg := q.emp.grid(fmt.Sprintf("ctx_attn_xhs:%v", rk), func() *utilGrid {
					if sl, ok := q.ctxSlices()[rk]; ok && sl.ctxSOL != nil {
						return buildUtilGrid(3, sl.grid().points(), sl.ctxSOL)
					}
					return nil
				})
				if !rg.empty() {
					scale := attnPrefillHSRatio(q.backend, head) / attnPrefillHSRatio(q.backend, ref)
					return rg.estimate(solQ, query, scale)
				}
			}
		}
	}
	var none *utilGrid
	return none.estimate(solQ, query, 1)
}

// genEmpirical is generation_attention_empirical: own slice (exact window,
// then window 0), else the nearest head size's util (decode util is
// head-size independent, scale 1).
func (q *Querier) genEmpirical(k genKey, query pt, solQ float64) (float64, error) {
	windows := []int{k.window}
	if k.window > 0 {
		windows = append(windows, 0)
	}
	for _, w := range windows {
		key := genKey{k.kv, k.nkv, k.head, w}
		g := q.emp.grid(fmt.Sprintf("gen_attn:%v", key), func() *utilGrid {
			if sl, ok := q.genSlices()[key]; ok && sl.genSOL != nil {
				return buildUtilGrid(3, sl.grid().points(), sl.genSOL)
			}
			return nil
		})
		if !g.empty() {
			return g.estimate(solQ, query, 1)
		}
		if q.policy.XShape {
			var heads []int
			for gk := range q.genSlices() {
				if gk.kv == k.kv && gk.nkv == k.nkv && !slices.Contains(heads, gk.head) {
					heads = append(heads, gk.head)
				}
			}
			slices.Sort(heads)
			if ref, ok := refHeadSize(heads, k.head); ok {
				rk := genKey{k.kv, k.nkv, ref, w}
				rg := q.emp.grid(fmt.Sprintf("gen_attn_xhs:%v", rk), func() *utilGrid {
					if sl, ok := q.genSlices()[rk]; ok && sl.genSOL != nil {
						return buildUtilGrid(3, sl.grid().points(), sl.genSOL)
					}
					return nil
				})
				if !rg.empty() {
					return rg.estimate(solQ, query, 1)
				}
			}
		}
	}
	var none *utilGrid
	return none.estimate(solQ, query, 1)
}
