package perfdb

import (
	"strings"
)

// tableKind describes one perf table family: how its rows come out of a Parquet
// file, the loader rules aiconfigurator applies to them, and its first-wins key.
// The store holds rows as read (before the rules), so LoadDir and LoadStore run
// the same rules on the same rows and give the same Data.
type tableKind[R any, K comparable] struct {
	stem string // file stem, e.g. "gemm_perf"
	sql  sqlTable[R]

	cols        []string // Parquet columns to read
	fromParquet func(t *rawTable) ([]R, error)

	kernel func(r *R) string // kernel_source, for the manifest filter
	keep   func(r *R) bool   // loader drop rule; nil keeps every row
	// keepExempt lists systems the drop rule does not apply to.
	keepExempt map[string]bool
	norm       func(r *R)   // loader rewrite, applied before keying; may be nil
	key        func(r *R) K // first-wins coordinate
}

// colReader collects the first error of a sequence of column reads.
type colReader struct {
	t   *rawTable
	err error
}

func (c *colReader) ints(name string, required bool, def int) []int {
	if c.err != nil {
		return nil
	}
	v, err := c.t.ints(name, required, def)
	c.err = err
	return v
}

func (c *colReader) floats(name string, required bool) []float64 {
	if c.err != nil {
		return nil
	}
	v, err := c.t.floats(name, required, 0)
	c.err = err
	return v
}

func (c *colReader) strs(name string, required bool) []string {
	if c.err != nil {
		return nil
	}
	v, err := c.t.strs(name, required)
	c.err = err
	return v
}

// hasCol reports whether the file has the column (power is optional per file).
func (t *rawTable) hasCol(name string) bool { _, ok := t.cols[name]; return ok }

// --- GEMM -------------------------------------------------------------------

type gemmKey struct {
	dtype   string
	m, n, k int
}

var gemmKind = &tableKind[GemmRow, gemmKey]{
	stem: "gemm_perf",
	sql:  gemmSQL,
	cols: []string{"kernel_source", "gemm_dtype", "m", "n", "k", "latency", "power"},
	fromParquet: func(t *rawTable) ([]GemmRow, error) {
		c := &colReader{t: t}
		ks, dt := c.strs("kernel_source", false), c.strs("gemm_dtype", true)
		m, n, k := c.ints("m", true, 0), c.ints("n", true, 0), c.ints("k", true, 0)
		lat, pw := c.floats("latency", true), c.floats("power", false)
		if c.err != nil {
			return nil, c.err
		}
		out := make([]GemmRow, t.rows)
		for i := range out {
			out[i] = GemmRow{Dtype: dt[i], M: m[i], N: n[i], K: k[i], Latency: lat[i], Power: pw[i], Kernel: ks[i]}
		}
		return out, nil
	},
	kernel: func(r *GemmRow) string { return r.Kernel },
	// Loader rule: awq/gptq GEMM rows are dropped (aiconfigurator load_gemm_parquet).
	keep: func(r *GemmRow) bool { return r.Dtype != "awq" && r.Dtype != "gptq" },
	key:  func(r *GemmRow) gemmKey { return gemmKey{r.Dtype, r.M, r.N, r.K} },
}

// --- attention --------------------------------------------------------------

type ctxAttnKey struct {
	attn, kv                                string
	nkv, headDim, window, heads, isl, batch int
}

type genAttnKey struct {
	kv                                      string
	nkv, headDim, window, heads, batch, seq int
}

// attentionFromParquet reads context or generation attention rows. Step is
// required for generation (KV length = isl + step) and optional for context.
func attentionFromParquet(t *rawTable, generation bool) ([]AttentionRow, error) {
	c := &colReader{t: t}
	ks := c.strs("kernel_source", false)
	attn := c.strs("attn_dtype", !generation)
	kv := c.strs("kv_cache_dtype", true)
	heads, nkv, hd := c.ints("num_heads", true, 0), c.ints("num_key_value_heads", true, 0), c.ints("head_dim", true, 0)
	win := c.ints("window_size", false, 0)
	isl, step, b := c.ints("isl", true, 0), c.ints("step", generation, 0), c.ints("batch_size", true, 0)
	lat, pw := c.floats("latency", true), c.floats("power", false)
	if c.err != nil {
		return nil, c.err
	}
	out := make([]AttentionRow, t.rows)
	for i := range out {
		out[i] = AttentionRow{AttnDtype: attn[i], KVDtype: kv[i], NumHeads: heads[i], NumKVHeads: nkv[i],
			HeadDim: hd[i], Window: win[i], ISL: isl[i], Step: step[i], Batch: b[i],
			Latency: lat[i], Power: pw[i], Kernel: ks[i]}
	}
	return out, nil
}

var attentionCols = []string{"kernel_source", "attn_dtype", "kv_cache_dtype", "num_heads", "num_key_value_heads",
	"head_dim", "window_size", "isl", "step", "batch_size", "latency", "power"}

// mhaSentinel is the loader rule "num_key_value_heads == num_heads (MHA) is keyed
// as n_kv = 0" (aiconfigurator attention.rs normalize_kv).
func mhaSentinel(r *AttentionRow) {
	if r.NumKVHeads == r.NumHeads {
		r.NumKVHeads = 0
	}
}

var contextAttentionKind = &tableKind[AttentionRow, ctxAttnKey]{
	stem:        "context_attention_perf",
	sql:         contextAttentionSQL,
	cols:        attentionCols,
	fromParquet: func(t *rawTable) ([]AttentionRow, error) { return attentionFromParquet(t, false) },
	kernel:      func(r *AttentionRow) string { return r.Kernel },
	norm:        mhaSentinel,
	key: func(r *AttentionRow) ctxAttnKey {
		return ctxAttnKey{r.AttnDtype, r.KVDtype, r.NumKVHeads, r.HeadDim, r.Window, r.NumHeads, r.ISL, r.Batch}
	},
}

var generationAttentionKind = &tableKind[AttentionRow, genAttnKey]{
	stem:        "generation_attention_perf",
	sql:         generationAttentionSQL,
	cols:        attentionCols,
	fromParquet: func(t *rawTable) ([]AttentionRow, error) { return attentionFromParquet(t, true) },
	kernel:      func(r *AttentionRow) string { return r.Kernel },
	norm:        mhaSentinel,
	key: func(r *AttentionRow) genAttnKey {
		return genAttnKey{r.KVDtype, r.NumKVHeads, r.HeadDim, r.Window, r.NumHeads, r.Batch, r.ISL + r.Step}
	},
}

// --- communication ----------------------------------------------------------

type allReduceKey struct{ gpus, size int }

var allReduceKind = &tableKind[AllReduceRow, allReduceKey]{
	stem: "custom_allreduce_perf",
	sql:  allReduceSQL,
	cols: []string{"kernel_source", "allreduce_dtype", "num_gpus", "message_size", "latency", "power", "backend", "implementation"},
	fromParquet: func(t *rawTable) ([]AllReduceRow, error) {
		c := &colReader{t: t}
		ks, dt := c.strs("kernel_source", false), c.strs("allreduce_dtype", false)
		g, sz := c.ints("num_gpus", true, 0), c.ints("message_size", true, 0)
		lat, pw := c.floats("latency", true), c.floats("power", false)
		impl := c.strs("backend", false)
		if c.err == nil && !t.hasCol("backend") {
			impl = c.strs("implementation", false)
		}
		if c.err != nil {
			return nil, c.err
		}
		out := make([]AllReduceRow, t.rows)
		for i := range out {
			out[i] = AllReduceRow{Dtype: dt[i], NumGPUs: g[i], MessageSize: sz[i], Latency: lat[i], Power: pw[i], Kernel: ks[i], Impl: impl[i]}
		}
		return out, nil
	},
	kernel: func(r *AllReduceRow) string { return r.Kernel },
	// Loader rule: CUDA-graph rows only (aiconfigurator load_custom_allreduce_parquet
	// checks kernel_source and the backend column).
	keep: func(r *AllReduceRow) bool {
		return !strings.HasSuffix(r.Kernel, "_eager") && !strings.HasSuffix(r.Impl, "_eager")
	},
	// aiconfigurator keeps eager rows on the b60 (XPU) system.
	keepExempt: map[string]bool{"b60": true},
	key:        func(r *AllReduceRow) allReduceKey { return allReduceKey{r.NumGPUs, r.MessageSize} },
}

type ncclKey struct {
	dtype, op  string
	gpus, size int
}

var ncclKind = &tableKind[NCCLRow, ncclKey]{
	stem: "nccl_perf",
	sql:  ncclSQL,
	cols: []string{"kernel_source", "nccl_dtype", "op_name", "num_gpus", "message_size", "latency", "power"},
	fromParquet: func(t *rawTable) ([]NCCLRow, error) {
		c := &colReader{t: t}
		ks, dt, op := c.strs("kernel_source", false), c.strs("nccl_dtype", true), c.strs("op_name", true)
		g, sz := c.ints("num_gpus", true, 0), c.ints("message_size", true, 0)
		lat, pw := c.floats("latency", true), c.floats("power", false)
		if c.err != nil {
			return nil, c.err
		}
		out := make([]NCCLRow, t.rows)
		for i := range out {
			out[i] = NCCLRow{Dtype: dt[i], Op: op[i], NumGPUs: g[i], MessageSize: sz[i], Latency: lat[i], Power: pw[i], Kernel: ks[i]}
		}
		return out, nil
	},
	kernel: func(r *NCCLRow) string { return r.Kernel },
	key:    func(r *NCCLRow) ncclKey { return ncclKey{r.Dtype, r.Op, r.NumGPUs, r.MessageSize} },
}

// --- MoE --------------------------------------------------------------------

// moeMinLatencyKernel is TRT-LLM's low-latency MoE kernel; its rows form a
// separate grid (Data.MoEMinLatency), keyed independently of the default one.
const moeMinLatencyKernel = "moe_torch_flow_min_latency"

type moeKey struct {
	lowLatency                                   bool
	dtype, dist                                  string
	topk, experts, hidden, inter, tp, ep, tokens int
}

var moeKind = &tableKind[MoERow, moeKey]{
	stem: "moe_perf",
	sql:  moeSQL,
	cols: []string{"kernel_source", "moe_dtype", "distribution", "topk", "num_experts", "hidden_size", "inter_size",
		"moe_tp_size", "moe_ep_size", "num_tokens", "latency", "power"},
	fromParquet: func(t *rawTable) ([]MoERow, error) {
		c := &colReader{t: t}
		ks, dt, dist := c.strs("kernel_source", false), c.strs("moe_dtype", true), c.strs("distribution", true)
		topk, e := c.ints("topk", true, 0), c.ints("num_experts", true, 0)
		h, in := c.ints("hidden_size", true, 0), c.ints("inter_size", true, 0)
		tp, ep, tok := c.ints("moe_tp_size", true, 0), c.ints("moe_ep_size", true, 0), c.ints("num_tokens", true, 0)
		lat, pw := c.floats("latency", true), c.floats("power", false)
		if c.err != nil {
			return nil, c.err
		}
		out := make([]MoERow, t.rows)
		for i := range out {
			out[i] = MoERow{Dtype: dt[i], Distribution: dist[i], TopK: topk[i], NumExperts: e[i], Hidden: h[i], Inter: in[i],
				MoETP: tp[i], MoEEP: ep[i], NumTokens: tok[i], Latency: lat[i], Power: pw[i], Kernel: ks[i]}
		}
		return out, nil
	},
	kernel: func(r *MoERow) string { return r.Kernel },
	// Loader rewrite: kernel-specific mxfp4 quant names (aiconfigurator moe_kernel_quant_rewrite).
	norm: func(r *MoERow) {
		switch {
		case r.Dtype == "w4a8_mxfp4_mxfp8" && r.Kernel == "sglang_mxfp4_flashinfer_trtllm_moe":
			r.Dtype = "w4a8_mxfp4_mxfp8_trtllm"
		case r.Dtype == "w4a16_mxfp4" && r.Kernel == "sglang_flashinfer_cutlass_moe":
			r.Dtype = "w4a16_mxfp4_cutlass"
		}
	},
	key: func(r *MoERow) moeKey {
		return moeKey{r.Kernel == moeMinLatencyKernel, r.Dtype, r.Distribution, r.TopK, r.NumExperts, r.Hidden, r.Inter, r.MoETP, r.MoEEP, r.NumTokens}
	},
}

// --- fp8-static overheads -----------------------------------------------------

type quantKey struct {
	dtype string
	m, k  int
}

func quantizeFromParquet(t *rawTable) ([]QuantizeRow, error) {
	c := &colReader{t: t}
	ks, dt := c.strs("kernel_source", false), c.strs("quant_dtype", true)
	m, k := c.ints("m", true, 0), c.ints("k", true, 0)
	lat, pw := c.floats("latency", true), c.floats("power", false)
	if c.err != nil {
		return nil, c.err
	}
	out := make([]QuantizeRow, t.rows)
	for i := range out {
		out[i] = QuantizeRow{Dtype: dt[i], M: m[i], K: k[i], Latency: lat[i], Power: pw[i], Kernel: ks[i]}
	}
	return out, nil
}

var quantizeCols = []string{"kernel_source", "quant_dtype", "m", "k", "latency", "power"}

var computeScaleKind = &tableKind[QuantizeRow, quantKey]{
	stem: "computescale_perf", sql: computeScaleSQL, cols: quantizeCols, fromParquet: quantizeFromParquet,
	kernel: func(r *QuantizeRow) string { return r.Kernel },
	key:    func(r *QuantizeRow) quantKey { return quantKey{r.Dtype, r.M, r.K} },
}

var scaleMatrixKind = &tableKind[QuantizeRow, quantKey]{
	stem: "scale_matrix_perf", sql: scaleMatrixSQL, cols: quantizeCols, fromParquet: quantizeFromParquet,
	kernel: func(r *QuantizeRow) string { return r.Kernel },
	key:    func(r *QuantizeRow) quantKey { return quantKey{r.Dtype, r.M, r.K} },
}

// --- MLA modules --------------------------------------------------------------

type mlaModuleKey struct {
	fmha, kv, gemm                  string
	native, heads, batch, seq, step int
}

// mlaModuleNativeHeads is the model-native head count that keys the MLA
// module tables (aiconfigurator's module native-head pin); 0 for a model
// the pin does not know (its rows are unusable, and the module op then
// falls back to the granular MLA ops, as the reference does).
func mlaModuleNativeHeads(model string) int {
	switch model {
	case "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-R1", "nvidia/DeepSeek-V3.1-NVFP4":
		return 128
	}
	return 0
}

var mlaModuleCols = []string{"kernel_source", "model", "mla_dtype", "kv_cache_dtype", "gemm_type", "num_heads",
	"tp_size", "batch_size", "isl", "step", "latency", "power"}

func mlaModuleFromParquet(t *rawTable) ([]MLAModuleRow, error) { return readMLAModule(t, true) }

// readMLAModule reads an MLA module table; strict requires the model and
// gemm_type columns (the DeepEP wide-EP tables of some versions have neither).
func readMLAModule(t *rawTable, strict bool) ([]MLAModuleRow, error) {
	c := &colReader{t: t}
	ks, model := c.strs("kernel_source", false), c.strs("model", strict)
	fm, kv, gt := c.strs("mla_dtype", true), c.strs("kv_cache_dtype", true), c.strs("gemm_type", strict)
	heads, tp := c.ints("num_heads", true, 0), c.ints("tp_size", false, 1)
	b, isl, step := c.ints("batch_size", true, 0), c.ints("isl", true, 0), c.ints("step", false, 0)
	lat, pw := c.floats("latency", true), c.floats("power", false)
	if c.err != nil {
		return nil, c.err
	}
	out := make([]MLAModuleRow, t.rows)
	for i := range out {
		out[i] = MLAModuleRow{Model: model[i], FMHA: fm[i], KVDtype: kv[i], GemmType: gt[i], NumHeads: heads[i],
			TPSize: tp[i], Batch: b[i], ISL: isl[i], Step: step[i], Latency: lat[i], Power: pw[i], Kernel: ks[i]}
	}
	return out, nil
}

// mlaContextModuleKind keys (fmha, kv, gemm, native, heads, isl, batch) —
// first wins, as the reference's module loader does.
var mlaContextModuleKind = &tableKind[MLAModuleRow, mlaModuleKey]{
	stem: "mla_context_module_perf", cols: mlaModuleCols, fromParquet: mlaModuleFromParquet,
	kernel: func(r *MLAModuleRow) string { return r.Kernel },
	key: func(r *MLAModuleRow) mlaModuleKey {
		return mlaModuleKey{r.FMHA, r.KVDtype, r.GemmType, mlaModuleNativeHeads(r.Model), r.NumHeads, r.Batch, r.ISL, 0}
	},
}

// mlaGenerationModuleKind keys (kv, gemm, native, heads, batch, isl+step):
// the generation table's mla_dtype column is degenerate and not a key.
var mlaGenerationModuleKind = &tableKind[MLAModuleRow, mlaModuleKey]{
	stem: "mla_generation_module_perf", cols: mlaModuleCols, fromParquet: mlaModuleFromParquet,
	kernel: func(r *MLAModuleRow) string { return r.Kernel },
	key: func(r *MLAModuleRow) mlaModuleKey {
		return mlaModuleKey{"", r.KVDtype, r.GemmType, mlaModuleNativeHeads(r.Model), r.NumHeads, r.Batch, r.ISL + r.Step, 0}
	},
}

// --- op-level MLA and MLA BMM --------------------------------------------------

type mlaKey struct {
	fmha, kv          string
	heads, batch, seq int
}

func mlaFromParquet(t *rawTable) ([]MLARow, error) {
	c := &colReader{t: t}
	ks, fm, kv := c.strs("kernel_source", false), c.strs("mla_dtype", true), c.strs("kv_cache_dtype", true)
	heads, b := c.ints("num_heads", true, 0), c.ints("batch_size", true, 0)
	isl, step := c.ints("isl", true, 0), c.ints("step", false, 0)
	lat, pw := c.floats("latency", true), c.floats("power", false)
	if c.err != nil {
		return nil, c.err
	}
	out := make([]MLARow, t.rows)
	for i := range out {
		out[i] = MLARow{FMHA: fm[i], KVDtype: kv[i], NumHeads: heads[i], Batch: b[i], ISL: isl[i], Step: step[i],
			Latency: lat[i], Power: pw[i], Kernel: ks[i]}
	}
	return out, nil
}

var mlaCols = []string{"kernel_source", "mla_dtype", "kv_cache_dtype", "num_heads", "batch_size", "isl", "step", "latency", "power"}

// mlaContextKind keys (fmha, kv, heads, isl, batch), first wins.
var mlaContextKind = &tableKind[MLARow, mlaKey]{
	stem: "context_mla_perf", cols: mlaCols, fromParquet: mlaFromParquet,
	kernel: func(r *MLARow) string { return r.Kernel },
	key:    func(r *MLARow) mlaKey { return mlaKey{r.FMHA, r.KVDtype, r.NumHeads, r.Batch, r.ISL} },
}

// mlaGenerationKind keys (kv, heads, batch, isl+step): mla_dtype is not a key.
var mlaGenerationKind = &tableKind[MLARow, mlaKey]{
	stem: "generation_mla_perf", cols: mlaCols, fromParquet: mlaFromParquet,
	kernel: func(r *MLARow) string { return r.Kernel },
	key:    func(r *MLARow) mlaKey { return mlaKey{"", r.KVDtype, r.NumHeads, r.Batch, r.ISL + r.Step} },
}

type mlaBmmKey struct {
	dtype, op     string
	heads, tokens int
}

var mlaBmmKind = &tableKind[MLABmmRow, mlaBmmKey]{
	stem: "mla_bmm_perf",
	cols: []string{"kernel_source", "op_name", "bmm_dtype", "num_heads", "num_tokens", "latency", "power"},
	fromParquet: func(t *rawTable) ([]MLABmmRow, error) {
		c := &colReader{t: t}
		ks, op, dt := c.strs("kernel_source", false), c.strs("op_name", true), c.strs("bmm_dtype", true)
		heads, tok := c.ints("num_heads", true, 0), c.ints("num_tokens", true, 0)
		lat, pw := c.floats("latency", true), c.floats("power", false)
		if c.err != nil {
			return nil, c.err
		}
		out := make([]MLABmmRow, t.rows)
		for i := range out {
			out[i] = MLABmmRow{Op: op[i], Dtype: dt[i], NumHeads: heads[i], NumTokens: tok[i], Latency: lat[i], Power: pw[i], Kernel: ks[i]}
		}
		return out, nil
	},
	kernel: func(r *MLABmmRow) string { return r.Kernel },
	key:    func(r *MLABmmRow) mlaBmmKey { return mlaBmmKey{r.Dtype, r.Op, r.NumHeads, r.NumTokens} },
}

// --- DSA modules ----------------------------------------------------------------

func dsaFromParquet(t *rawTable) ([]DSARow, error) {
	c := &colReader{t: t}
	ks, arch, op := c.strs("kernel_source", false), c.strs("architecture", true), c.strs("op_name", false)
	fm, kv, gt := c.strs("mla_dtype", true), c.strs("kv_cache_dtype", true), c.strs("gemm_type", true)
	heads, b := c.ints("num_heads", true, 0), c.ints("batch_size", true, 0)
	isl, step := c.ints("isl", true, 0), c.ints("step", true, 0)
	lat, pw := c.floats("latency", true), c.floats("power", false)
	if c.err != nil {
		return nil, c.err
	}
	out := make([]DSARow, t.rows)
	for i := range out {
		out[i] = DSARow{Arch: arch[i], FMHA: fm[i], KVDtype: kv[i], GemmType: gt[i], OpName: op[i], NumHeads: heads[i],
			Batch: b[i], ISL: isl[i], Step: step[i], Latency: lat[i], Power: pw[i], Kernel: ks[i]}
	}
	return out, nil
}

var dsaCols = []string{"kernel_source", "architecture", "op_name", "mla_dtype", "kv_cache_dtype", "gemm_type",
	"num_heads", "batch_size", "isl", "step", "latency", "power"}

// dsaRowKey makes every row distinct (its address in the decoded file):
// DSA rows skip the loader's first-wins, see Data.DSAContext.
func dsaRowKey(r *DSARow) *DSARow { return r }

var dsaContextKind = &tableKind[DSARow, *DSARow]{
	stem: "dsa_context_module_perf", cols: dsaCols, fromParquet: dsaFromParquet,
	kernel: func(r *DSARow) string { return r.Kernel }, key: dsaRowKey,
}

var dsaGenerationKind = &tableKind[DSARow, *DSARow]{
	stem: "dsa_generation_module_perf", cols: dsaCols, fromParquet: dsaFromParquet,
	kernel: func(r *DSARow) string { return r.Kernel }, key: dsaRowKey,
}

// --- GDN (linear attention) -------------------------------------------------------

type gdnKey struct {
	kernel, phase                             string
	dModel, dConv, nk, hk, nv, hv, batch, seq int
}

var gdnKind = &tableKind[GDNRow, gdnKey]{
	stem: "gdn_perf",
	cols: []string{"kernel_source", "phase", "batch_size", "seq_len", "d_model", "d_conv", "num_k_heads", "head_k_dim",
		"num_v_heads", "head_v_dim", "latency", "power"},
	fromParquet: func(t *rawTable) ([]GDNRow, error) {
		c := &colReader{t: t}
		ks, ph := c.strs("kernel_source", true), c.strs("phase", true)
		b, sl := c.ints("batch_size", true, 0), c.ints("seq_len", true, 0)
		dm, dc := c.ints("d_model", true, 0), c.ints("d_conv", true, 0)
		nk, hk := c.ints("num_k_heads", true, 0), c.ints("head_k_dim", true, 0)
		nv, hv := c.ints("num_v_heads", true, 0), c.ints("head_v_dim", true, 0)
		lat, pw := c.floats("latency", true), c.floats("power", false)
		if c.err != nil {
			return nil, c.err
		}
		out := make([]GDNRow, t.rows)
		for i := range out {
			out[i] = GDNRow{Kernel: ks[i], Phase: ph[i], Batch: b[i], SeqLen: sl[i], DModel: dm[i], DConv: dc[i],
				NumKHeads: nk[i], HK: hk[i], NumVHeads: nv[i], HV: hv[i], Latency: lat[i], Power: pw[i]}
		}
		return out, nil
	},
	kernel: func(r *GDNRow) string { return r.Kernel },
	// Loader rewrite: the recurrent decode kernels are one logical kernel.
	norm: func(r *GDNRow) {
		if r.Kernel == "fused_recurrent_gated_delta_rule" || r.Kernel == "fused_recurrent_gated_delta_rule_packed_decode" {
			r.Kernel = "fused_sigmoid_gating_delta_rule_update"
		}
	},
	key: func(r *GDNRow) gdnKey {
		k := gdnKey{r.Kernel, r.Phase, r.DModel, r.DConv, r.NumKHeads, r.HK, r.NumVHeads, r.HV, r.Batch, r.SeqLen}
		if r.Phase == "generation" {
			k.seq = 0
		}
		return k
	},
}

// tableStems lists the tables aicdb imports and resolves, in Data.Sources order.
var tableStems = []string{"gemm_perf", "context_attention_perf", "generation_attention_perf",
	"custom_allreduce_perf", "nccl_perf", "moe_perf", "computescale_perf", "scale_matrix_perf",
	"mla_context_module_perf", "mla_generation_module_perf", "context_mla_perf", "generation_mla_perf", "mla_bmm_perf",
	"dsa_context_module_perf", "dsa_generation_module_perf", "gdn_perf",
	"wideep_deepep_normal_perf", "wideep_deepep_ll_perf", "wideep_context_moe_perf", "wideep_generation_moe_perf",
	"wideep_context_mla_perf", "wideep_generation_mla_perf"}

// isImportedStem reports whether a Parquet file stem is one aicdb imports.
func isImportedStem(stem string) bool {
	for _, s := range tableStems {
		if s == stem {
			return true
		}
	}
	return false
}
