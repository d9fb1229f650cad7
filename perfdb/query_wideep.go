package perfdb

// query_wideep.go answers the kernel queries of SGLang's wide-EP path from the
// tables of wideep_tables.go, as the reference resolves them
// (perf_database/moe_a2a.rs, moe_expert_compute.rs, wideep_mla.rs):
//
//   - all-to-all: a DeepEP row of node_num nodes serves ep = node_num × 8
//     ranks (the tables were collected on 8-GPU nodes); the phase's token
//     curve at the exact SM budget is blended linearly inside and held at the
//     boundary utilization outside with a SOL proportional to tokens. The
//     high-throughput (context) kernels take that 1-D curve only at one node
//     and the 20-SM budget aiconfigurator always asks for; any other budget
//     needs the reference's 2-D (sms, tokens) grid, which is not modeled
//     here and is a miss naming it;
//   - expert compute: the DeepEP expert table of the phase, keyed exactly by
//     (dtype, distribution, top-k, experts, hidden, inter, moe-tp 1, moe-ep);
//     a distribution not collected falls back to uniform, then to the first
//     collected one; the token curve is held at the boundary with the
//     wide-EP MoE roofline;
//   - DeepEP MLA module: the context grid (heads, seq in sqrt space, batch)
//     and the decode grid (heads, batch, KV length), both held at the
//     boundary with the DeepSeek-V3 MLA roofline of the reference; the
//     context value is corrected for a cached prefix by
//     (full² − prefix²)/full².
//
// SILICON (and HYBRID on silicon hits) only: the reference has no estimate
// tier for these tables; the estimator refuses other modes up front.

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// deepEPGPUsPerNode is the node width the DeepEP tables were collected on:
// a row of node_num nodes is an EP group of node_num × 8 ranks.
const deepEPGPUsPerNode = 8

// deepEPDefaultSMs is the SM budget aiconfigurator's model config gives
// the high-throughput DeepEP kernels (ModelConfig.sms).
const deepEPDefaultSMs = 20

// wideEPKernelSources are the attention backends the DeepEP MLA tables
// cover (the reference rejects any other).
var wideEPKernelSources = []string{"flashinfer", "fa3"}

// a2aCurveKey selects one all-to-all token curve.
type a2aCurveKey struct {
	backend, phase               string // deepep_ht | deepep_ll; dispatch | combine
	ep, nodes, hidden, topk, exp int
	sms                          int
}

// wideEPMoEKey selects one expert-compute token curve.
type wideEPMoEKey struct {
	phase, dtype, dist                   string
	topk, experts, hidden, inter, tp, ep int
}

// wideEPMLASliceKey selects one DeepEP MLA grid.
type wideEPMLASliceKey struct{ kernel, fmha, kv string }

// wideEPTables are the indexes of the wide-EP tables.
type wideEPTables struct {
	a2a     map[a2aCurveKey]*curve
	moe     map[wideEPMoEKey]*curve
	moeDist map[string][]string // phase/dtype → distributions in row order
	mlaCtx  map[wideEPMLASliceKey]*grid
	mlaGen  map[wideEPMLASliceKey]*grid
}

// buildWideEP indexes the wide-EP tables of d.
func buildWideEP(d *Data) *wideEPTables {
	w := &wideEPTables{a2a: map[a2aCurveKey]*curve{}, moe: map[wideEPMoEKey]*curve{}, moeDist: map[string][]string{},
		mlaCtx: map[wideEPMLASliceKey]*grid{}, mlaGen: map[wideEPMLASliceKey]*grid{}}
	a2aPts := map[a2aCurveKey][]curvePoint{}
	var a2aOrder []a2aCurveKey
	addA2A := func(backend string, rows []DeepEPRow) {
		for i := range rows {
			r := &rows[i]
			for _, ph := range []struct {
				name string
				us   float64
			}{{"dispatch", r.DispatchUS}, {"combine", r.CombineUS}} {
				k := a2aCurveKey{backend, ph.name, r.NodeNum * deepEPGPUsPerNode, r.NodeNum, r.Hidden, r.TopK, r.NumExperts, r.SMs}
				if _, ok := a2aPts[k]; !ok {
					a2aOrder = append(a2aOrder, k)
				}
				a2aPts[k] = append(a2aPts[k], curvePoint{x: float64(r.NumTokens), l: newLeaf(ph.us/1000, 0)})
			}
		}
	}
	addA2A("deepep_ht", d.DeepEPNormal)
	addA2A("deepep_ll", d.DeepEPLL)
	for _, k := range a2aOrder {
		w.a2a[k] = newCurve("num_tokens", a2aPts[k])
	}

	moePts := map[wideEPMoEKey][]curvePoint{}
	var moeOrder []wideEPMoEKey
	for _, ph := range []struct {
		name string
		rows []MoERow
	}{{"context", d.WideEPContextMoE}, {"generation", d.WideEPGenerationMoE}} {
		for i := range ph.rows {
			r := &ph.rows[i]
			k := wideEPMoEKey{ph.name, r.Dtype, r.Distribution, r.TopK, r.NumExperts, r.Hidden, r.Inter, r.MoETP, r.MoEEP}
			if _, ok := moePts[k]; !ok {
				moeOrder = append(moeOrder, k)
			}
			moePts[k] = append(moePts[k], curvePoint{x: float64(r.NumTokens), l: newLeaf(r.Latency, r.Power)})
			dk := ph.name + "/" + r.Dtype
			if !slices.Contains(w.moeDist[dk], r.Distribution) {
				w.moeDist[dk] = append(w.moeDist[dk], r.Distribution)
			}
		}
	}
	for _, k := range moeOrder {
		w.moe[k] = newCurve("num_tokens", moePts[k])
	}

	index := func(rows []MLAModuleRow, generation bool, out map[wideEPMLASliceKey]*grid) {
		pts := map[wideEPMLASliceKey][]gridPoint{}
		var order []wideEPMLASliceKey
		for i := range rows {
			r := &rows[i]
			k := wideEPMLASliceKey{r.Kernel, r.FMHA, r.KVDtype}
			var c [maxAxes]int
			if generation {
				k.fmha = ""
				c[0], c[1], c[2] = r.NumHeads, r.Batch, r.ISL+r.Step
			} else {
				c[0], c[1], c[2] = r.NumHeads, r.ISL, r.Batch
			}
			if _, ok := pts[k]; !ok {
				order = append(order, k)
			}
			pts[k] = append(pts[k], gridPoint{c: c, l: newLeaf(r.Latency, r.Power)})
		}
		for _, k := range order {
			out[k] = buildGrid(3, pts[k])
		}
	}
	index(d.WideEPContextMLA, false, w.mlaCtx)
	index(d.WideEPGenerationMLA, true, w.mlaGen)
	return w
}

// MoEA2A is one DeepEP all-to-all phase (dispatch or combine) of backend
// deepep_ht (context) or deepep_ll (generation) for tokens tokens per rank
// on an EP group of ep ranks over nodes nodes (Rust MoeAllToAllOp::query
// before its scale factor; the caller divides the tokens by the attention
// TP where the reference does).
func (q *Querier) MoEA2A(backend, phase string, ep, nodes, hidden, topk, experts, sms, tokens int) (Perf, error) {
	if err := checkDims("moe all-to-all", []string{"ep", "nodes", "hidden", "topk", "experts", "sms", "num_tokens"},
		ep, nodes, hidden, topk, experts, sms, tokens); err != nil {
		return Perf{}, err
	}
	if backend == "deepep_ll" {
		sms = 0 // the low-latency table has no SM budget
	}
	if backend == "deepep_ht" && !(nodes == 1 && sms == deepEPDefaultSMs) {
		return Perf{}, missf("%s %s: only one node at the %d-SM budget is modeled (nodes %d, sms %d); the reference's (sms, tokens) grid is not",
			backend, phase, deepEPDefaultSMs, nodes, sms)
	}
	cv := q.wideEP.a2a[a2aCurveKey{backend, phase, ep, nodes, hidden, topk, experts, sms}]
	if cv == nil {
		return Perf{}, missf("%s %s: no all-to-all data for ep %d over %d node(s), hidden %d, top-k %d, %d experts (wideep_deepep_%s_perf)",
			backend, phase, ep, nodes, hidden, topk, experts, map[string]string{"deepep_ht": "normal", "deepep_ll": "ll"}[backend])
	}
	l, err := cv.query(identitySOL{}, float64(tokens))
	if err != nil {
		return Perf{}, fmt.Errorf("%s %s: %w", backend, phase, err)
	}
	return Perf{LatencyMs: l.lat, EnergyWms: l.energy, Source: SourceSilicon}.ClampNonNegative(), nil
}

// wideEPMoESOL is the wide-EP MoE roofline (moe_comm.py get_sol_latency) at
// c = [tokens]: integer FLOP and byte counts as the reference truncates
// them, weights read for min(slots, tokens·topk)/ep experts.
type wideEPMoESOL struct {
	topk, slots, hidden, inter, tp, ep, gemms uint64
	mem, compute, flops, memBW                float64
}

func (s *wideEPMoESOL) sol(c pt) float64 {
	tok := uint64(math.Round(c[0])) * s.topk
	ops := tok * s.hidden * s.inter * s.gemms * 2 / s.ep / s.tp
	bytes := tok/s.ep*s.hidden*2 + tok/s.ep*s.inter*s.gemms/s.tp + s.hidden*s.inter*s.gemms/s.tp*min(s.slots/s.ep, tok/s.ep)
	math1 := float64(ops) / (s.flops * s.compute) * 1000
	mem := float64(bytes) * s.mem / s.memBW * 1000
	return math.Max(math1, mem)
}

// WideEPExpert is the DeepEP expert compute of phase ("context" or
// "generation") for tokens tokens per attention-DP rank (Rust
// MoeExpertComputeOp::query before its scale factor): the tokens are
// multiplied by the attention DP (the dispatch gathers every rank's tokens),
// moe-tp is 1 and there are no redundant expert slots.
func (q *Querier) WideEPExpert(a MoEArgs, phase string, tokens int) (Perf, error) {
	if err := checkDims("wide-EP expert compute", []string{"num_tokens", "topk", "num_experts", "hidden", "inter", "moe_ep", "attention_dp"},
		tokens, a.TopK, a.NumExperts, a.Hidden, a.Inter, a.MoEEP, a.AttentionDP); err != nil {
		return Perf{}, err
	}
	tokens *= max(a.AttentionDP, 1)
	mp, err := a.Quant.Mapping()
	if err != nil {
		return Perf{}, err
	}
	fl, err := tcFlops(q.sys, ComputeBF16)
	if err != nil {
		return Perf{}, fmt.Errorf("wide-EP expert compute: %w", err)
	}
	dists := q.wideEP.moeDist[phase+"/"+string(a.Quant)]
	if len(dists) == 0 {
		return Perf{}, missf("wide-EP expert compute: no %s rows for moe dtype %s (wideep_%s_moe_perf)", phase, a.Quant, phase)
	}
	dist := dists[0]
	if slices.Contains(dists, a.Distribution) {
		dist = a.Distribution
	} else if slices.Contains(dists, "uniform") {
		dist = "uniform"
	}
	cv := q.wideEP.moe[wideEPMoEKey{phase, string(a.Quant), dist, a.TopK, a.NumExperts, a.Hidden, a.Inter, 1, a.MoEEP}]
	if cv == nil || len(cv.pts) == 0 {
		return Perf{}, missf("wide-EP expert compute: no %s rows for %s %s, top-k %d, %d experts, hidden %d, inter %d, moe-ep %d (wideep_%s_moe_perf)",
			phase, a.Quant, dist, a.TopK, a.NumExperts, a.Hidden, a.Inter, a.MoEEP, phase)
	}
	if len(cv.pts) == 1 && float64(tokens) < cv.pts[0].x {
		return Perf{}, missf("wide-EP expert compute: one measured point (%v tokens); cannot infer %d tokens below it", cv.pts[0].x, tokens)
	}
	gemms := uint64(2)
	if a.IsGated {
		gemms = 3
	}
	s := &wideEPMoESOL{topk: uint64(a.TopK), slots: uint64(a.NumExperts), hidden: uint64(a.Hidden), inter: uint64(a.Inter),
		tp: 1, ep: uint64(max(a.MoEEP, 1)), gemms: gemms, mem: mp.Memory, compute: mp.Compute, flops: fl, memBW: q.sys.MemBW}
	l, err := cv.query(s, float64(tokens))
	if err != nil {
		return Perf{}, fmt.Errorf("wide-EP expert compute: %w", err)
	}
	return Perf{LatencyMs: l.lat, EnergyWms: l.energy, Source: SourceSilicon}.ClampNonNegative(), nil
}

// DeepSeek-V3 MLA dimensions the reference's DeepEP MLA rooflines hard-code.
const (
	dsHidden = 7168.0
	dsQLora  = 1536.0
	dsKVLora = 512.0
	dsRope   = 64.0
	dsNope   = 128.0
	dsVHead  = 128.0
	dsNHeads = 128.0
)

// wideEPHeads maps a table head count to the roofline's: tp = 128 // n, then
// 128 // tp (the reference's sol closures).
func wideEPHeads(n float64) float64 { return math.Floor(dsNHeads / math.Floor(dsNHeads/n)) }

// wideEPMLASOL is the DeepEP MLA roofline: context at c = [n, s, b] (no
// prefix: the table rows have none), decode at c = [n, b, s].
type wideEPMLASOL struct {
	generation                bool
	mem, mainFlops, bf16Flops float64
	memBW                     float64
}

func (a *wideEPMLASOL) sol(c pt) float64 {
	nh := wideEPHeads(c[0])
	var ops, attn, bytes float64
	if !a.generation {
		s, b := c[1], c[2]
		qb := 2 * dsQLora * nh * (dsRope + dsNope) * b * s
		qbMem := b*dsQLora*s + dsQLora*nh*(dsRope+dsNope) + 2*b*nh*(dsRope+dsNope)*s
		kvb := 2 * dsKVLora * nh * (dsNope + dsVHead) * b * s
		kvbMem := b*s*dsKVLora + nh*(dsNope+dsVHead)*dsKVLora + 2*b*nh*(dsNope+dsVHead)*s
		attn = math.Floor(2 * nh * (dsNope*2 + dsRope) * b * (s * s) / 2)
		attnMem := b*s*nh*(dsNope+dsRope) + b*s*nh*(dsNope+dsRope) + b*s*nh*dsNope + b*s*nh*dsNope
		out := 2 * nh * dsVHead * dsHidden * b * s
		outMem := b*nh*dsVHead*s + nh*dsVHead*dsHidden + 2*b*dsHidden*s
		ops = qb + kvb + out
		bytes = (qbMem + kvbMem + attnMem*2 + outMem) * a.mem
	} else {
		b, s := c[1], c[2]
		qb := 2 * dsQLora * nh * (dsRope + dsNope) * b
		qbMem := b*dsQLora + dsQLora*nh*(dsRope+dsNope) + 2*b*nh*(dsRope+dsNope)
		wkc := 2 * nh * dsNope * dsKVLora * b
		wkcMem := b*nh*dsNope + nh*dsKVLora*dsNope + 2*b*nh*dsKVLora
		attn = 2 * b * s * nh * (dsRope + dsKVLora*2)
		attnMem := b*nh*(dsKVLora+dsRope) + b*s*(dsRope+dsKVLora) + b*nh*dsKVLora
		wvc := 2 * b * nh * dsKVLora * dsVHead
		wvcMem := b*nh*dsKVLora + nh*dsVHead*dsKVLora + 2*b*nh*dsVHead
		out := 2 * nh * dsVHead * dsHidden * b
		outMem := b*nh*dsVHead + nh*dsVHead*dsHidden + 2*b*dsHidden
		ops = qb + wkc + wvc + out
		bytes = (qbMem + wkcMem + attnMem*2 + wvcMem + outMem) * a.mem
	}
	m := ops/a.mainFlops*1000 + attn/a.bf16Flops*1000
	return math.Max(m, bytes/a.memBW*1000)
}

// wideEPMLASOLFor builds the roofline for the fmha compute mode.
func (q *Querier) wideEPMLASOLFor(generation bool, fmha QuantMapping) (*wideEPMLASOL, error) {
	main, err := tcFlops(q.sys, fmha.Dtype)
	if err != nil {
		return nil, fmt.Errorf("wide-EP MLA: %w", err)
	}
	bf, err := tcFlops(q.sys, ComputeBF16)
	if err != nil {
		return nil, fmt.Errorf("wide-EP MLA: %w", err)
	}
	return &wideEPMLASOL{generation: generation, mem: fmha.Memory, mainFlops: main, bf16Flops: bf, memBW: q.sys.MemBW}, nil
}

// WideEPContextMLA is SGLang's DeepEP context MLA module (one layer, heads
// per rank) for batch requests of s new tokens after prefix cached ones,
// with kernel the attention backend.
func (q *Querier) WideEPContextMLA(batch, s, prefix, heads int, kernel string, kv KVQuant, fmha FMHAQuant) (Perf, error) {
	if err := checkDims("wide-EP context MLA", []string{"batch", "seq", "prefix", "heads"}, batch, s, prefix, heads); err != nil {
		return Perf{}, err
	}
	if !slices.Contains(wideEPKernelSources, kernel) {
		return Perf{}, fmt.Errorf("wide-EP context MLA: attention backend %q; the DeepEP MLA tables cover flashinfer and fa3", kernel)
	}
	fm, err := fmha.Mapping()
	if err != nil {
		return Perf{}, err
	}
	g := q.wideEP.mlaCtx[wideEPMLASliceKey{kernel, string(fmha), string(kv)}]
	if g == nil {
		var have []string
		for k := range q.wideEP.mlaCtx {
			if k.kernel == kernel && k.kv == string(kv) && !slices.Contains(have, k.fmha) {
				have = append(have, k.fmha)
			}
		}
		slices.Sort(have)
		return Perf{}, missf("wide-EP context MLA: no %s rows for fmha %s, kv %s in wideep_context_mla_perf (fmha there: %s)",
			kernel, fmha, kv, strings.Join(have, ", "))
	}
	sol, err := q.wideEPMLASOLFor(false, fm)
	if err != nil {
		return Perf{}, err
	}
	full := s + prefix
	l, err := g.query(&ctxAttnCfg, sol, pt{float64(heads), float64(full), float64(batch)})
	if err != nil {
		return Perf{}, fmt.Errorf("wide-EP context MLA: %w", err)
	}
	corr := 0.0
	if full > 0 {
		f, p := float64(full), float64(prefix)
		corr = (f*f - p*p) / (f * f)
	}
	return Perf{LatencyMs: l.lat * corr, EnergyWms: l.energy * corr, Source: SourceSilicon}.ClampNonNegative(), nil
}

// WideEPGenerationMLA is SGLang's DeepEP decode MLA module (one layer, heads
// per rank) for batch requests at KV length s.
func (q *Querier) WideEPGenerationMLA(batch, s, heads int, kernel string, kv KVQuant) (Perf, error) {
	if err := checkDims("wide-EP generation MLA", []string{"batch", "seq", "heads"}, batch, s, heads); err != nil {
		return Perf{}, err
	}
	if !slices.Contains(wideEPKernelSources, kernel) {
		return Perf{}, fmt.Errorf("wide-EP generation MLA: attention backend %q; the DeepEP MLA tables cover flashinfer and fa3", kernel)
	}
	g := q.wideEP.mlaGen[wideEPMLASliceKey{kernel, "", string(kv)}]
	if g == nil {
		return Perf{}, missf("wide-EP generation MLA: no %s rows for kv %s (wideep_generation_mla_perf)", kernel, kv)
	}
	fm := QuantMapping{2, 1, ComputeBF16}
	if genAttnFlopsDtype(q.sys, kv) == ComputeFP8 {
		fm = QuantMapping{1, 2, ComputeFP8}
	}
	sol, err := q.wideEPMLASOLFor(true, fm)
	if err != nil {
		return Perf{}, err
	}
	l, err := g.query(&genAttnCfg, sol, pt{float64(heads), float64(batch), float64(s)})
	if err != nil {
		return Perf{}, fmt.Errorf("wide-EP generation MLA: %w", err)
	}
	return Perf{LatencyMs: l.lat, EnergyWms: l.energy, Source: SourceSilicon}.ClampNonNegative(), nil
}
