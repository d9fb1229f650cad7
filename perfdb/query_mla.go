package perfdb

// query_mla.go answers the fused MLA attention-module tables of the
// DeepSeek/Kimi family (Rust perf_database/mla.rs query_context_module /
// query_generation_module and operators/mla.rs MlaModuleOp): one layer's
// whole MLA block (projections, RoPE, latent attention, o-proj) per GPU.
// Context grids are [heads][full_s][batch] with the sqrt-seq blend;
// generation grids are [heads][batch][kv_len], raw. Each (dtype) slice holds
// one grid per model-native head count (the module native-head pin).

import (
	"fmt"
	"math"
	"sort"
)

// mlaModSliceKey selects one module slice; fmha is empty for generation.
type mlaModSliceKey struct{ fmha, kv, gemm string }

// mlaModSlice is one slice's grids by native head count (sorted natives).
type mlaModSlice struct {
	natives []int
	grids   map[int]*grid
	// unpinned names a profiled model the native-head pin does not know:
	// the reference fails the table load, which the module op treats as a
	// miss (its granular fallback runs).
	unpinned string
}

// resolve picks the native bucket: exact, else the sole bucket, else the
// nearest native ≤ want, else the smallest (Rust resolve_module_native).
func (s *mlaModSlice) resolve(native int) (*grid, bool) {
	if len(s.natives) == 0 {
		return nil, false
	}
	if native <= 0 {
		if len(s.natives) == 1 {
			return s.grids[s.natives[0]], true
		}
		return nil, false
	}
	if g, ok := s.grids[native]; ok {
		return g, true
	}
	if len(s.natives) == 1 {
		return s.grids[s.natives[0]], true
	}
	i := sort.SearchInts(s.natives, native+1) - 1
	if i < 0 {
		i = 0
	}
	return s.grids[s.natives[i]], true
}

// buildMLAModules indexes both module tables.
func (t *tables) buildMLAModules(d *Data) {
	t.mlaCtx = indexMLAModules(d.MLAContextModule, false)
	t.mlaGen = indexMLAModules(d.MLAGenerationModule, true)
}

func indexMLAModules(rows []MLAModuleRow, generation bool) map[mlaModSliceKey]*mlaModSlice {
	pts := map[mlaModSliceKey]map[int][]gridPoint{}
	out := map[mlaModSliceKey]*mlaModSlice{}
	for i := range rows {
		r := &rows[i]
		k := mlaModSliceKey{r.FMHA, r.KVDtype, r.GemmType}
		c := [maxAxes]int{r.NumHeads, r.ISL, r.Batch}
		if generation {
			k.fmha = ""
			c = [maxAxes]int{r.NumHeads, r.Batch, r.ISL + r.Step}
		}
		native := mlaModuleNativeHeads(r.Model)
		if native == 0 {
			if out[k] == nil {
				out[k] = &mlaModSlice{}
			}
			if out[k].unpinned == "" {
				out[k].unpinned = r.Model
			}
			continue
		}
		if pts[k] == nil {
			pts[k] = map[int][]gridPoint{}
		}
		pts[k][native] = append(pts[k][native], gridPoint{c: c, l: newLeaf(r.Latency, r.Power)})
	}
	for k, byNative := range pts {
		s := out[k]
		if s == nil {
			s = &mlaModSlice{}
			out[k] = s
		}
		s.grids = map[int]*grid{}
		for n, p := range byNative {
			s.natives = append(s.natives, n)
			s.grids[n] = buildGrid(3, p)
		}
		sort.Ints(s.natives)
	}
	return out
}

// ctxMLASOL is the context MLA SOL at c = [n, full_s, b] with prefix 0
// (Rust context_mla_sol_ms): the 192 + 128 q/k and v head widths.
type ctxMLASOL struct{ kvMem, flops, memBW float64 }

func (a *ctxMLASOL) sol(c pt) float64 { return a.solPrefix(c[0], c[1], 0, c[2]) }

// solPrefix is context_mla_sol_prefix_ms: s new tokens after prefix.
func (a *ctxMLASOL) solPrefix(n, s, prefix, b float64) float64 {
	full := s + prefix
	ops := b * n * 2 / 2 * (192 + 128) * (full*full - prefix*prefix)
	mem := b * n * (a.kvMem*full*(192+128) + 2*s*(192+128))
	return math.Max(ops/a.flops*1000, mem/a.memBW*1000)
}

// genMLAModuleSOL is generation_mla_module_sol_ms at c = [n, b, s]: the
// latent decode attention (1088 = 2·(512+64) q/k + … widths of the
// reference, 576 latent+rope KV bytes per token) plus the absorbed BMM pre
// and post, summed per roofline term before the max.
type genMLAModuleSOL struct{ kvMem, gemmMem, attnFlops, bmmFlops, memBW float64 }

func (a *genMLAModuleSOL) sol(c pt) float64 {
	n, b, s := c[0], c[1], c[2]
	attnOps := 2 * b * n * 1088 * s
	mem := b * (n*1088*2 + (s-1)*576*a.kvMem)
	math1 := attnOps / a.attnFlops * 1000
	mem1 := mem / a.memBW * 1000
	bmmOps := 2 * 2 * b * n * 128 * 512
	bmmMem := 2 * n * (b*640 + 128*512) * a.gemmMem
	math1 += bmmOps / a.bmmFlops * 1000
	mem1 += bmmMem / a.memBW * 1000
	return math.Max(math1, mem1)
}

// mlaModuleSOLs resolves the SOL carriers of a module query; the flops are
// resolved before any table lookup, so a missing dtype is an error in
// every mode (as in the reference).
func (q *Querier) ctxMLAModuleSOL(kv KVQuant, fmha FMHAQuant) (*ctxMLASOL, error) {
	fm, err := fmha.Mapping()
	if err != nil {
		return nil, err
	}
	km, err := kv.Mapping()
	if err != nil {
		return nil, err
	}
	fl, err := tcFlops(q.sys, fm.Dtype)
	if err != nil {
		return nil, fmt.Errorf("context MLA module fmha %s: %w", fmha, err)
	}
	return &ctxMLASOL{kvMem: km.Memory, flops: fl, memBW: q.sys.MemBW}, nil
}

func (q *Querier) genMLAModuleSOL(kv KVQuant, gemm GemmQuant) (*genMLAModuleSOL, error) {
	km, err := kv.Mapping()
	if err != nil {
		return nil, err
	}
	gm, err := gemm.Mapping()
	if err != nil {
		return nil, err
	}
	af, err := tcFlops(q.sys, genAttnFlopsDtype(q.sys, kv))
	if err != nil {
		return nil, fmt.Errorf("generation MLA module kv %s: %w", kv, err)
	}
	bf, err := tcFlops(q.sys, gm.Dtype)
	if err != nil {
		return nil, fmt.Errorf("generation MLA module gemm %s: %w", gemm, err)
	}
	return &genMLAModuleSOL{kvMem: km.Memory, gemmMem: gm.Memory, attnFlops: af, bmmFlops: bf, memBW: q.sys.MemBW}, nil
}

// siliconView is the mode a module query runs in: siliconOnly forces the
// silicon path in HYBRID (the module op's primary runs on a silicon view there).
func (q *Querier) siliconView(siliconOnly bool) DatabaseMode {
	if siliconOnly && q.mode == ModeHybrid {
		return ModeSilicon
	}
	return q.mode
}

// mlaAnswer runs one MLA query in mode: SOL the roofline solQ, EMPIRICAL the
// util-transfer estimate, else the silicon lookup, a HYBRID miss answered by
// the estimate.
func mlaAnswer(mode DatabaseMode, solQ float64, empirical, silicon func() (Perf, error)) (Perf, error) {
	switch mode {
	case ModeSOL:
		return Perf{LatencyMs: solQ, Source: SourceSOL}, nil
	case ModeEmpirical:
		return empirical()
	}
	p, err := silicon()
	if err == nil {
		return p, nil
	}
	if mode == ModeHybrid && IsMiss(err) {
		return empirical()
	}
	return Perf{}, err
}

// mlaEmpirical is the util-transfer estimate of an MLA query from its grid's
// points (memoised under key), times scale.
func (q *Querier) mlaEmpirical(key string, lookup func() (*grid, error), sol solFn, solQ float64, query pt, scale float64) (Perf, error) {
	g := q.emp.grid(key, func() *utilGrid {
		if gr, err := lookup(); err == nil {
			return buildUtilGrid(len(query), gr.points(), sol)
		}
		return nil
	})
	v, err := g.estimate(solQ, query, 1)
	return Perf{LatencyMs: v * scale, Source: SourceEmpirical}, err
}

// ctxMLASilicon reads a context MLA grid at [heads][s+prefix][b] and scales it
// by (full² − prefix²)/full²: the share of the causal attention the new tokens
// pay.
func ctxMLASilicon(lookup func() (*grid, error), sol solFn, query pt, s, prefix int) (Perf, error) {
	g, err := lookup()
	if err != nil {
		return Perf{}, err
	}
	l, err := g.query(&ctxAttnCfg, sol, query)
	if err != nil {
		return Perf{}, err
	}
	corr := 0.0
	if full := float64(s + prefix); full > 0 {
		p := float64(prefix)
		corr = (full*full - p*p) / (full * full)
	}
	return Perf{LatencyMs: l.lat * corr, EnergyWms: l.energy * corr, Source: SourceSilicon}, nil
}

// genMLASilicon reads a decode MLA grid at [heads][b][s].
func genMLASilicon(lookup func() (*grid, error), sol solFn, query pt) (Perf, error) {
	g, err := lookup()
	if err != nil {
		return Perf{}, err
	}
	l, err := g.query(&genAttnCfg, sol, query)
	if err != nil {
		return Perf{}, err
	}
	return Perf{LatencyMs: l.lat, EnergyWms: l.energy, Source: SourceSilicon}, nil
}

// mlaModuleGrid finds the slice grid or a structured miss naming it.
func (q *Querier) mlaModuleGrid(table string, idx map[mlaModSliceKey]*mlaModSlice, k mlaModSliceKey, native int) (*grid, error) {
	s, ok := idx[k]
	switch {
	case !ok:
		return nil, missf("%s data missing for fmha=%s kv=%s gemm=%s (%s %s %s)",
			table, orDash(k.fmha), k.kv, k.gemm, q.sys.Name, q.backend, q.version)
	case s.unpinned != "":
		return nil, missf("%s rows of %s: model %q has no native head count pinned; its module rows are not used",
			table, q.sys.Name, s.unpinned)
	}
	g, ok := s.resolve(native)
	if !ok {
		return nil, missf("%s data for kv=%s gemm=%s holds several native head counts; the query names none (%s %s %s)",
			table, k.kv, k.gemm, q.sys.Name, q.backend, q.version)
	}
	return g, nil
}

// MLAContextModule is the fused context MLA module latency of one layer
// (Rust query_context_mla_module_table): batch b, s new tokens after
// prefix, heads rank-local, native the model's head count (0 = the table's
// only bucket). SILICON reads [heads][s+prefix][b] and scales by
// (full² − prefix²)/full²; siliconOnly forces that path in HYBRID (the
// module op's primary runs on a silicon view there).
func (q *Querier) MLAContextModule(b, s, prefix, heads, native int, kv KVQuant, fmha FMHAQuant, gemm GemmQuant, siliconOnly bool) (Perf, error) {
	if err := checkDims("context MLA module", []string{"batch", "seq", "prefix", "num_heads"}, b, s, prefix, heads); err != nil {
		return Perf{}, err
	}
	sol, err := q.ctxMLAModuleSOL(kv, fmha)
	if err != nil {
		return Perf{}, err
	}
	solQ := sol.solPrefix(float64(heads), float64(s), float64(prefix), float64(b))
	k := mlaModSliceKey{string(fmha), string(kv), string(gemm)}
	query := pt{float64(heads), float64(s + prefix), float64(b)}
	lookup := func() (*grid, error) { return q.mlaModuleGrid("context MLA module", q.mlaCtx, k, native) }
	return mlaAnswer(q.siliconView(siliconOnly), solQ,
		func() (Perf, error) {
			return q.mlaEmpirical(fmt.Sprintf("ctx_mla_mod:%v:%d", k, native), lookup, sol, solQ, query, 1)
		},
		func() (Perf, error) { return ctxMLASilicon(lookup, sol, query, s, prefix) })
}

// MLAGenerationModule is the fused decode MLA module latency of one layer
// (Rust query_generation_mla_module_table): batch b, KV length s, heads
// rank-local; one grid query at [heads][b][s] (no ±10 % averaging, unlike
// generation attention).
func (q *Querier) MLAGenerationModule(b, s, heads, native int, kv KVQuant, gemm GemmQuant, siliconOnly bool) (Perf, error) {
	if err := checkDims("generation MLA module", []string{"batch", "seq", "num_heads"}, b, s, heads); err != nil {
		return Perf{}, err
	}
	sol, err := q.genMLAModuleSOL(kv, gemm)
	if err != nil {
		return Perf{}, err
	}
	query := pt{float64(heads), float64(b), float64(s)}
	k := mlaModSliceKey{"", string(kv), string(gemm)}
	lookup := func() (*grid, error) { return q.mlaModuleGrid("generation MLA module", q.mlaGen, k, native) }
	solQ := sol.sol(query)
	return mlaAnswer(q.siliconView(siliconOnly), solQ,
		func() (Perf, error) {
			return q.mlaEmpirical(fmt.Sprintf("gen_mla_mod:%v:%d", k, native), lookup, sol, solQ, query, 1)
		},
		func() (Perf, error) { return genMLASilicon(lookup, sol, query) })
}

// --- op-level MLA and MLA BMM (the granular path of TRT-LLM and SGLang) -------

// mlaBmmCfg is the BMM tokens curve: raw blend, util hold past its ends.
var mlaBmmCfg = gridCfg{axes: []string{"num_tokens"}, sqrtAxis: -1, kTail: 1, nnLeaves: 4}

// mlaBmmSliceKey selects a BMM slice: dtype and pre/post op name.
type mlaBmmSliceKey struct{ dtype, op string }

// buildMLAOps indexes the op-level MLA and BMM tables (first row wins).
func (t *tables) buildMLAOps(d *Data) {
	ctx := map[mlaModSliceKey][]gridPoint{}
	for i := range d.MLAContext {
		r := &d.MLAContext[i]
		k := mlaModSliceKey{r.FMHA, r.KVDtype, ""}
		ctx[k] = append(ctx[k], gridPoint{c: [maxAxes]int{r.NumHeads, r.ISL, r.Batch}, l: newLeaf(r.Latency, r.Power)})
	}
	t.mlaOpCtx = map[mlaModSliceKey]*grid{}
	for k, p := range ctx {
		t.mlaOpCtx[k] = buildGrid(3, p)
	}
	gen := map[string][]gridPoint{}
	for i := range d.MLAGeneration {
		r := &d.MLAGeneration[i]
		gen[r.KVDtype] = append(gen[r.KVDtype], gridPoint{c: [maxAxes]int{r.NumHeads, r.Batch, r.ISL + r.Step}, l: newLeaf(r.Latency, r.Power)})
	}
	t.mlaOpGen = map[string]*grid{}
	for k, p := range gen {
		t.mlaOpGen[k] = buildGrid(3, p)
	}
	bmm := map[mlaBmmSliceKey]map[int][]gridPoint{}
	for i := range d.MLABmm {
		r := &d.MLABmm[i]
		k := mlaBmmSliceKey{r.Dtype, r.Op}
		if bmm[k] == nil {
			bmm[k] = map[int][]gridPoint{}
		}
		bmm[k][r.NumHeads] = append(bmm[k][r.NumHeads], gridPoint{c: [maxAxes]int{r.NumTokens}, l: newLeaf(r.Latency, r.Power)})
	}
	t.mlaBmm = map[mlaBmmSliceKey]map[int]*grid{}
	for k, byHeads := range bmm {
		t.mlaBmm[k] = map[int]*grid{}
		for h, p := range byHeads {
			t.mlaBmm[k][h] = buildGrid(1, p)
		}
	}
}

// genMLASOL is generation_mla_sol_ms at c = [n, b, s].
type genMLASOL struct{ kvMem, flops, memBW float64 }

func (a *genMLASOL) sol(c pt) float64 {
	n, b, s := c[0], c[1], c[2]
	ops := 2 * b * n * 1088 * s
	mem := b * (n*1088*2 + (s-1)*576*a.kvMem)
	return math.Max(ops/a.flops*1000, mem/a.memBW*1000)
}

// mlaBmmSOL is mla_bmm_sol_ms at c = [tokens] for n heads (the requested
// quant's bytes and flops, even when the data fell back to bfloat16).
type mlaBmmSOL struct{ n, mem, flops, memBW float64 }

func (a *mlaBmmSOL) sol(c pt) float64 {
	t := c[0]
	ops := 2 * t * a.n * 128 * 512
	mem := a.n * (t*640 + 128*512) * a.mem
	return math.Max(ops/a.flops*1000, mem/a.memBW*1000)
}

// MLAContext is the op-level context MLA latency (Rust
// query_context_mla_table): [heads][s+prefix][b], sqrt-seq blend, scaled by
// (full² − prefix²)/full² on the silicon path.
func (q *Querier) MLAContext(b, s, prefix, heads int, kv KVQuant, fmha FMHAQuant) (Perf, error) {
	if err := checkDims("context MLA", []string{"batch", "seq", "prefix", "num_heads"}, b, s, prefix, heads); err != nil {
		return Perf{}, err
	}
	sol, err := q.ctxMLAModuleSOL(kv, fmha)
	if err != nil {
		return Perf{}, err
	}
	solQ := sol.solPrefix(float64(heads), float64(s), float64(prefix), float64(b))
	k := mlaModSliceKey{string(fmha), string(kv), ""}
	query := pt{float64(heads), float64(s + prefix), float64(b)}
	lookup := func() (*grid, error) {
		if g, ok := q.mlaOpCtx[k]; ok {
			return g, nil
		}
		return nil, missf("context MLA data missing for fmha=%s kv=%s (%s %s %s)", fmha, kv, q.sys.Name, q.backend, q.version)
	}
	return mlaAnswer(q.mode, solQ,
		func() (Perf, error) { return q.mlaEmpirical(fmt.Sprintf("ctx_mla:%v", k), lookup, sol, solQ, query, 1) },
		func() (Perf, error) { return ctxMLASilicon(lookup, sol, query, s, prefix) })
}

// MLAGeneration is the op-level decode MLA latency (Rust
// query_generation_mla_table): one query at [heads][b][s].
func (q *Querier) MLAGeneration(b, s, heads int, kv KVQuant) (Perf, error) {
	if err := checkDims("generation MLA", []string{"batch", "seq", "num_heads"}, b, s, heads); err != nil {
		return Perf{}, err
	}
	km, err := kv.Mapping()
	if err != nil {
		return Perf{}, err
	}
	fl, err := tcFlops(q.sys, genAttnFlopsDtype(q.sys, kv))
	if err != nil {
		return Perf{}, fmt.Errorf("generation MLA kv %s: %w", kv, err)
	}
	sol := &genMLASOL{kvMem: km.Memory, flops: fl, memBW: q.sys.MemBW}
	query := pt{float64(heads), float64(b), float64(s)}
	lookup := func() (*grid, error) {
		if g, ok := q.mlaOpGen[string(kv)]; ok {
			return g, nil
		}
		return nil, missf("generation MLA data missing for kv=%s (%s %s %s)", kv, q.sys.Name, q.backend, q.version)
	}
	solQ := sol.sol(query)
	return mlaAnswer(q.mode, solQ,
		func() (Perf, error) { return q.mlaEmpirical("gen_mla:"+string(kv), lookup, sol, solQ, query, 1) },
		func() (Perf, error) { return genMLASilicon(lookup, sol, query) })
}

// mlaBmmSelected is the BMM dtype the data answers for quant: quant when
// any slice has it, else bfloat16 (Rust bmm_selected_quant).
func (q *Querier) mlaBmmSelected(quant GemmQuant) GemmQuant {
	for k := range q.mlaBmm {
		if k.dtype == string(quant) {
			return quant
		}
	}
	return GemmBF16
}

// MLABmm is the absorbed-MLA BMM latency (Rust query_mla_bmm_table) at
// tokens rows and heads rank-local heads: pre (q·W_UK) or post (o·W_UV).
// A non-power-of-two head count without its own rows reads the next
// power-of-two slice scaled by heads/pow2.
func (q *Querier) MLABmm(tokens, heads int, quant GemmQuant, pre bool) (Perf, error) {
	if err := checkDims("MLA BMM", []string{"num_tokens", "num_heads"}, tokens, heads); err != nil {
		return Perf{}, err
	}
	gm, err := quant.Mapping()
	if err != nil {
		return Perf{}, err
	}
	fl, err := tcFlops(q.sys, gm.Dtype)
	if err != nil {
		return Perf{}, fmt.Errorf("MLA BMM %s: %w", quant, err)
	}
	if q.mode == ModeSOL {
		s := &mlaBmmSOL{n: float64(heads), mem: gm.Memory, flops: fl, memBW: q.sys.MemBW}
		return Perf{LatencyMs: s.sol(pt{float64(tokens)}), Source: SourceSOL}, nil
	}
	opName := "mla_gen_post"
	if pre {
		opName = "mla_gen_pre"
	}
	selected := q.mlaBmmSelected(quant)
	k := mlaBmmSliceKey{string(selected), opName}
	slice := heads
	scale := 1.0
	if p2 := nextPow2(heads); p2 != heads {
		if _, ok := q.mlaBmm[k][heads]; !ok {
			slice, scale = p2, float64(heads)/float64(p2)
		}
	}
	sol := &mlaBmmSOL{n: float64(slice), mem: gm.Memory, flops: fl, memBW: q.sys.MemBW}
	query := pt{float64(tokens)}
	lookup := func() (*grid, error) {
		byHeads, ok := q.mlaBmm[k]
		if !ok {
			return nil, missf("MLA BMM data missing for quant=%s, %s (%s %s %s)", quant, opName, q.sys.Name, q.backend, q.version)
		}
		g, ok := byHeads[slice]
		if !ok {
			return nil, missf("MLA BMM data missing for num_heads=%d (%s %s %s)", slice, q.sys.Name, q.backend, q.version)
		}
		return g, nil
	}
	// SOL returned above at the requested heads, so the mode here is never SOL.
	return mlaAnswer(q.mode, 0,
		func() (Perf, error) {
			return q.mlaEmpirical(fmt.Sprintf("mla_bmm:%s:%s:%s:%d", quant, selected, opName, slice), lookup, sol, sol.sol(query), query, scale)
		},
		func() (Perf, error) {
			g, err := lookup()
			if err != nil {
				return Perf{}, err
			}
			l, err := g.query(&mlaBmmCfg, sol, query)
			if err != nil {
				return Perf{}, err
			}
			return Perf{LatencyMs: l.lat * scale, EnergyWms: l.energy * scale, Source: SourceSilicon}, nil
		})
}

// nextPow2 is the smallest power of two ≥ n (n ≥ 1).
func nextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}
