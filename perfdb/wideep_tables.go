package perfdb

// wideep_tables.go: the perf tables of the large-EP (wide-EP) path of SGLang —
// DeepEP all-to-all (wideep_deepep_normal_perf: high-throughput kernels, the
// context phase; wideep_deepep_ll_perf: low-latency kernels, the generation
// phase), the expert compute behind it (wideep_context/generation_moe_perf)
// and the DeepEP attention module (wideep_context/generation_mla_perf). None
// has an SQL mirror: the store keeps their Parquet content, which LoadStore
// decodes like any other file.

// DeepEPRow is one DeepEP all-to-all point: the dispatch and combine latency
// (µs, as collected) of num_token tokens per rank on node_num 8-GPU nodes.
// SMs is the high-throughput kernels' SM budget (dispatch_sms); 0 for the
// low-latency table, which has none.
type DeepEPRow struct {
	NodeNum    int
	Hidden     int
	NumTokens  int
	TopK       int
	NumExperts int
	SMs        int
	DispatchUS float64
	CombineUS  float64
	Kernel     string
}

type deepEPKey struct{ nodes, hidden, topk, experts, sms, tokens int }

func deepEPKeyOf(r *DeepEPRow) deepEPKey {
	return deepEPKey{r.NodeNum, r.Hidden, r.TopK, r.NumExperts, r.SMs, r.NumTokens}
}

// deepEPNormalKind reads the high-throughput table: a phase's latency is its
// transmit plus notify time (the reference's legacy DeepEP adapter).
var deepEPNormalKind = &tableKind[DeepEPRow, deepEPKey]{
	stem: "wideep_deepep_normal_perf",
	cols: []string{"kernel_source", "node_num", "hidden_size", "num_token", "num_topk", "num_experts", "dispatch_sms",
		"dispatch_transmit_us", "dispatch_notify_us", "combine_transmit_us", "combine_notify_us"},
	fromParquet: func(t *rawTable) ([]DeepEPRow, error) {
		c := &colReader{t: t}
		ks := c.strs("kernel_source", false)
		nodes, h, tok := c.ints("node_num", true, 0), c.ints("hidden_size", true, 0), c.ints("num_token", true, 0)
		topk, e, sms := c.ints("num_topk", true, 0), c.ints("num_experts", true, 0), c.ints("dispatch_sms", true, 0)
		dt, dn := c.floats("dispatch_transmit_us", true), c.floats("dispatch_notify_us", true)
		ct, cn := c.floats("combine_transmit_us", true), c.floats("combine_notify_us", true)
		if c.err != nil {
			return nil, c.err
		}
		out := make([]DeepEPRow, t.rows)
		for i := range out {
			out[i] = DeepEPRow{NodeNum: nodes[i], Hidden: h[i], NumTokens: tok[i], TopK: topk[i], NumExperts: e[i], SMs: sms[i],
				DispatchUS: dt[i] + dn[i], CombineUS: ct[i] + cn[i], Kernel: ks[i]}
		}
		return out, nil
	},
	kernel: func(r *DeepEPRow) string { return r.Kernel },
	key:    deepEPKeyOf,
}

// deepEPLLKind reads the low-latency table: the per-phase average times, no
// SM budget.
var deepEPLLKind = &tableKind[DeepEPRow, deepEPKey]{
	stem: "wideep_deepep_ll_perf",
	cols: []string{"kernel_source", "node_num", "hidden_size", "num_token", "num_topk", "num_experts",
		"dispatch_avg_t_us", "combine_avg_t_us"},
	fromParquet: func(t *rawTable) ([]DeepEPRow, error) {
		c := &colReader{t: t}
		ks := c.strs("kernel_source", false)
		nodes, h, tok := c.ints("node_num", true, 0), c.ints("hidden_size", true, 0), c.ints("num_token", true, 0)
		topk, e := c.ints("num_topk", true, 0), c.ints("num_experts", true, 0)
		d, cb := c.floats("dispatch_avg_t_us", true), c.floats("combine_avg_t_us", true)
		if c.err != nil {
			return nil, c.err
		}
		out := make([]DeepEPRow, t.rows)
		for i := range out {
			out[i] = DeepEPRow{NodeNum: nodes[i], Hidden: h[i], NumTokens: tok[i], TopK: topk[i], NumExperts: e[i],
				DispatchUS: d[i], CombineUS: cb[i], Kernel: ks[i]}
		}
		return out, nil
	},
	kernel: func(r *DeepEPRow) string { return r.Kernel },
	key:    deepEPKeyOf,
}

// wideEPMoEKind reads SGLang's DeepEP expert-compute tables (one per phase,
// the moe_perf columns). First wins per coordinate, as the reference's
// legacy adapter keeps the first row.
func wideEPMoEKind(stem string) *tableKind[MoERow, moeKey] {
	return &tableKind[MoERow, moeKey]{
		stem: stem, cols: moeKind.cols, fromParquet: moeKind.fromParquet,
		kernel: func(r *MoERow) string { return r.Kernel },
		key: func(r *MoERow) moeKey {
			return moeKey{false, r.Dtype, r.Distribution, r.TopK, r.NumExperts, r.Hidden, r.Inter, r.MoETP, r.MoEEP, r.NumTokens}
		},
	}
}

var (
	wideEPContextMoEKind    = wideEPMoEKind("wideep_context_moe_perf")
	wideEPGenerationMoEKind = wideEPMoEKind("wideep_generation_moe_perf")
)

// wideEPMLAKey keys a DeepEP MLA module point: the kernel (attention
// backend) and dtypes, then heads, sequence and batch.
type wideEPMLAKey struct {
	kernel, fmha, kv  string
	heads, seq, batch int
}

// wideEPMLAFromParquet reads a DeepEP MLA table: the module columns, with
// model and gemm_type optional (the 0.5.6.post2 files have neither; neither
// is a key).
func wideEPMLAFromParquet(t *rawTable) ([]MLAModuleRow, error) { return readMLAModule(t, false) }

// wideEPContextMLAKind keys (kernel, fmha, kv, heads, isl, batch).
var wideEPContextMLAKind = &tableKind[MLAModuleRow, wideEPMLAKey]{
	stem: "wideep_context_mla_perf", cols: mlaModuleCols, fromParquet: wideEPMLAFromParquet,
	kernel: func(r *MLAModuleRow) string { return r.Kernel },
	key: func(r *MLAModuleRow) wideEPMLAKey {
		return wideEPMLAKey{r.Kernel, r.FMHA, r.KVDtype, r.NumHeads, r.ISL, r.Batch}
	},
}

// wideEPGenerationMLAKind keys (kernel, kv, heads, isl+step, batch): the
// generation table has no fmha level.
var wideEPGenerationMLAKind = &tableKind[MLAModuleRow, wideEPMLAKey]{
	stem: "wideep_generation_mla_perf", cols: mlaModuleCols, fromParquet: wideEPMLAFromParquet,
	kernel: func(r *MLAModuleRow) string { return r.Kernel },
	key: func(r *MLAModuleRow) wideEPMLAKey {
		return wideEPMLAKey{r.Kernel, "", r.KVDtype, r.NumHeads, r.ISL + r.Step, r.Batch}
	},
}
