package perfdb

// This file holds the in-memory, typed and already-resolved perf data that the
// composition code (interpolation, op lists, estimates) consumes. Two constructors
// build it with the same result: LoadDir (from an aiconfigurator `systems` folder)
// and LoadStore (from the store after `aicdb perfdb import` / `aicdb init`).
//
// Units follow aiconfigurator's files (PERFDB.md §1.2): latency in milliseconds,
// power in watts, communication message sizes in ELEMENTS (not bytes), system
// bandwidths in B/s, flops in FLOP/s, latencies in the system spec in seconds.

// System is a parsed aiconfigurator system spec (`systems/<name>.yaml`, PERFDB.md §1.6).
// Values are copied verbatim; absent optional keys are 0.
type System struct {
	Name    string // file stem, e.g. "h200_sxm"
	DataDir string // data_dir, e.g. "data/h200_sxm" (relative to the systems folder)

	// gpu
	MemBW                       float64 // gpu.mem_bw, B/s
	MemBWEmpiricalScalingFactor float64 // gpu.mem_bw_empirical_scaling_factor
	MemEmpiricalConstantLatency float64 // gpu.mem_empirical_constant_latency, s
	MemCapacity                 float64 // gpu.mem_capacity, B
	BF16TCFlops                 float64 // gpu.bfloat16_tc_flops (older files: float16_tc_flops), FLOP/s
	INT8TCFlops                 float64 // gpu.int8_tc_flops
	FP8TCFlops                  float64 // gpu.fp8_tc_flops
	FP4TCFlops                  float64 // gpu.fp4_tc_flops (0 when the GPU has none)
	Power                       float64 // gpu.power, W
	SMVersion                   int     // gpu.sm_version, e.g. 90

	// node
	NumGPUsPerNode int     // node.num_gpus_per_node
	InterNodeBW    float64 // node.inter_node_bw, B/s per GPU one direction
	IntraNodeBW    float64 // node.intra_node_bw, B/s per GPU one direction
	PCIeBW         float64 // node.pcie_bw, B/s
	P2PLatency     float64 // node.p2p_latency, s
	NumGPUsPerRack int     // node.num_gpus_per_rack (0 = not defined)
	InterRackBW    float64 // node.inter_rack_bw (0 = not defined)

	// misc
	NCCLMem     map[int]float64 // misc.nccl_mem: GPUs → bytes reserved by NCCL
	OtherMem    float64         // misc.other_mem, B
	NCCLVersion string          // misc.nccl_version, e.g. "2.26.2"; picks comm/nccl/<v>/
}

// gemmQuant is aiconfigurator's GemmQuantMode mapping (common.py / enums.rs):
// bytes per weight element and the dtype whose tensor-core flops bound the math.
type gemmQuant struct {
	memory  float64
	compute string // "bfloat16" | "int8" | "fp8" | "fp4"
}

var gemmQuants = map[string]gemmQuant{
	"bfloat16": {2, "bfloat16"}, "int8_wo": {1, "bfloat16"}, "int4_wo": {0.5, "bfloat16"},
	"fp8": {1, "fp8"}, "fp8_static": {1, "fp8"}, "sq": {1, "int8"}, "fp8_block": {1, "fp8"},
	"fp8_ootb": {1, "fp8"}, "nvfp4": {9.0 / 16, "fp4"}, "nvfp4_wo": {9.0 / 16, "bfloat16"},
	"w4a16_nvfp4": {9.0 / 16, "bfloat16"},
}

// TCFlops returns the tensor-core FLOP/s of a compute dtype ("bfloat16", "int8",
// "fp8", "fp4"); 0 when the system does not define it.
func (s *System) TCFlops(computeDtype string) float64 {
	switch computeDtype {
	case "bfloat16":
		return s.BF16TCFlops
	case "int8":
		return s.INT8TCFlops
	case "fp8":
		return s.FP8TCFlops
	case "fp4":
		return s.FP4TCFlops
	}
	return 0
}

// GemmSOL returns the speed-of-light time (ms) of an m×n×k GEMM in the given
// gemm_dtype (PERFDB.md §1.5): max(2mnk/tc_flops, bytes·(mn+mk+nk)/mem_bw)·1000.
// ok is false when the dtype is unknown or the system lacks its flops entry; the
// load-time SOL floor then leaves such rows unclamped, as aiconfigurator does.
func (s *System) GemmSOL(dtype string, m, n, k int) (ms float64, ok bool) {
	q, known := gemmQuants[dtype]
	flops := s.TCFlops(q.compute)
	if !known || flops <= 0 || s.MemBW <= 0 {
		return 0, false
	}
	fm, fn, fk := float64(m), float64(n), float64(k)
	math := 2 * fm * fn * fk / flops * 1000
	mem := q.memory * (fm*fn + fm*fk + fn*fk) / s.MemBW * 1000
	return max(math, mem), true
}

// GemmRow is one measured GEMM point (gemm_perf): m tokens × n out-features × k in-features.
// Latency is already floored at the GEMM SOL (see Data).
type GemmRow struct {
	Dtype   string // gemm_dtype: bfloat16, fp8, fp8_block, nvfp4, int8_wo, …
	M, N, K int
	Latency float64 // ms, max(measured, SOL)
	Power   float64 // W; 0 when the table has no power column
	Kernel  string  // kernel_source
}

// AttentionRow is one measured context- or generation-attention point.
// NumHeads and NumKVHeads are per GPU (after TP). For generation rows the KV
// length is ISL + Step; for context rows ISL is the full sequence. First-wins
// keys follow aiconfigurator's loaders: context (AttnDtype, KVDtype, NumKVHeads,
// HeadDim, Window, NumHeads, ISL, Batch); generation (KVDtype, NumKVHeads,
// HeadDim, Window, NumHeads, Batch, ISL+Step) — attn_dtype is not part of the
// generation key. A missing window_size column reads as 0.
type AttentionRow struct {
	AttnDtype  string // attn_dtype
	KVDtype    string // kv_cache_dtype
	NumHeads   int
	NumKVHeads int // 0 = MHA (num_key_value_heads == num_heads in the file; loader rule)
	HeadDim    int
	Window     int // window_size; 0 = no sliding window
	ISL        int
	Step       int
	Batch      int
	Latency    float64 // ms
	Power      float64 // W; 0 when absent
	Kernel     string
}

// AllReduceRow is one custom all-reduce point (custom_allreduce_perf). Only
// CUDA-graph rows are kept: rows whose kernel_source or backend column ends in
// "_eager" are dropped at load (loader rule; aiconfigurator exempts only b60).
// aiconfigurator files every row under dtype "half" whatever allreduce_dtype
// says, so first-wins dedupes on (NumGPUs, MessageSize) only.
type AllReduceRow struct {
	Dtype       string // allreduce_dtype
	NumGPUs     int
	MessageSize int // elements
	Latency     float64
	Power       float64
	Kernel      string
	Impl        string // the file's backend/implementation column, e.g. "vllm_graph"; "" when absent
}

// NCCLRow is one NCCL collective point (comm/nccl/<misc.nccl_version>/nccl_perf).
type NCCLRow struct {
	Dtype       string // nccl_dtype: half | int8
	Op          string // op_name: all_gather | all_reduce | alltoall | reduce_scatter
	NumGPUs     int
	MessageSize int // elements
	Latency     float64
	Power       float64
	Kernel      string
}

// MoERow is one fused-MoE point (moe_perf): a latency curve over NumTokens per key.
// Dtype has aiconfigurator's kernel-specific rewrites applied
// (w4a8_mxfp4_mxfp8 + sglang_mxfp4_flashinfer_trtllm_moe → w4a8_mxfp4_mxfp8_trtllm;
// w4a16_mxfp4 + sglang_flashinfer_cutlass_moe → w4a16_mxfp4_cutlass).
type MoERow struct {
	Dtype        string // moe_dtype
	Distribution string // balanced | power_law_1.01 | power_law_1.2 | uniform …
	TopK         int
	NumExperts   int
	Hidden       int
	Inter        int
	MoETP        int
	MoEEP        int
	NumTokens    int
	Latency      float64
	Power        float64
	Kernel       string
}

// QuantizeRow is one fp8-static overhead point (computescale_perf / scale_matrix_perf).
type QuantizeRow struct {
	Dtype   string // quant_dtype
	M, K    int
	Latency float64
	Power   float64
	Kernel  string
}

// MLAModuleRow is one fused MLA attention-module point
// (mla_context_module_perf / mla_generation_module_perf): the whole MLA block
// (q/kv projections, RoPE, attention, o-proj) of one layer on one GPU.
// NumHeads is rank-local; Model names the checkpoint the rows were profiled
// on (its native head count keys the table, see mlaModuleNativeHeads).
type MLAModuleRow struct {
	Model    string // model, e.g. "deepseek-ai/DeepSeek-V3"
	FMHA     string // mla_dtype (context: the attention compute dtype)
	KVDtype  string // kv_cache_dtype
	GemmType string // gemm_type: the projections' GEMM quant mode
	NumHeads int
	TPSize   int
	Batch    int
	ISL      int
	Step     int // generation: KV length = isl + step
	Latency  float64
	Power    float64
	Kernel   string
}

// MLARow is one op-level MLA attention point (context_mla_perf /
// generation_mla_perf): the latent attention kernel alone, heads rank-local.
type MLARow struct {
	FMHA     string // mla_dtype (context compute dtype; degenerate for generation)
	KVDtype  string // kv_cache_dtype
	NumHeads int
	Batch    int
	ISL      int
	Step     int // generation: KV length = isl + step
	Latency  float64
	Power    float64
	Kernel   string
}

// MLABmmRow is one absorbed-MLA BMM point (mla_bmm_perf): the per-head
// q·W_UK (op "mla_gen_pre") or o·W_UV ("mla_gen_post") batched GEMM.
type MLABmmRow struct {
	Op        string // op_name: mla_gen_pre | mla_gen_post
	Dtype     string // bmm_dtype
	NumHeads  int
	NumTokens int
	Latency   float64
	Power     float64
	Kernel    string
}

// DSARow is one DeepSeek Sparse Attention module point
// (dsa_context_module_perf / dsa_generation_module_perf): one layer's DSA
// block (projections, indexer, top-k sparse MLA) per GPU. Context rows use
// Step as the cached prefix; generation rows' KV length is ISL + Step.
// OpName marks the GLM-5.2 shared-index ("*skip_indexer*") rows.
type DSARow struct {
	Arch     string // architecture, e.g. "DeepseekV32ForCausalLM"
	FMHA     string // mla_dtype
	KVDtype  string // kv_cache_dtype
	GemmType string // gemm_type
	OpName   string
	NumHeads int
	Batch    int
	ISL      int
	Step     int
	Latency  float64
	Power    float64
	Kernel   string
}

// GDNRow is one Gated-DeltaNet kernel point (gdn_perf): a conv1d or
// delta-rule kernel of one layer at TP-local head counts. Context rows are
// keyed (batch, seq_len), generation rows by batch only.
type GDNRow struct {
	Kernel         string // kernel_source (normalised: fused_recurrent_* → fused_sigmoid_gating_delta_rule_update)
	Phase          string // context | generation
	Batch, SeqLen  int
	DModel, DConv  int
	NumKHeads, HK  int
	NumVHeads, HV  int
	Latency, Power float64
}

// DataSource records one file that contributed rows to a resolved table.
type DataSource struct {
	Table   string // table stem, e.g. "gemm_perf"
	Backend string // backend dir of the file (may differ only for manifest fill)
	Version string // version dir of the file
	Channel string // "primary" | "reuse" | "earlier" | "manifest" | "nccl"
	Path    string // slash path relative to the systems folder, e.g. data/h200_sxm/gemm/vllm/0.24.0/gemm_perf.parquet
	SHA256  string // hex digest of the file
	Rows    int    // rows read from the file after the kernel_source allowlist and the drop rules
	Used    int    // rows that won (first source with a coordinate wins)
}

// Data is the perf data one (system, backend, version) sees: the union of the
// shared-layer sources already resolved, with the loader rules applied.
//
// Resolution (PERFDB.md §1.3, aiconfigurator source_resolution.rs), per table, in
// priority order, the first source holding a coordinate wins:
//  1. the requested <family>/<backend>/<version> dir;
//  2. donors named in that dir's reuse.yaml for the table, in file order (the only
//     way to borrow a newer version);
//  3. same-backend versions strictly earlier than the requested one by PEP 440
//     order, nearest first;
//  4. cross-backend fill only for kernel_source values that
//     perf_data_reuse_manifest.yaml lists for the table (never touches dense
//     GEMM/attention/MoE tables in practice).
//
// A table whose requested file lies in the comm family (custom all-reduce)
// takes no other source; when the requested version has no comm dir, earlier
// versions fill it (h200/b200 vllm 0.22.0 read 0.19.0's). NCCL comes from
// comm/nccl/<System.NCCLVersion>/ only and is never inherited. Only the
// family-first layout (<data_dir>/<family>/<backend>/<version>) is read; a
// malformed reuse.yaml or collection_meta.yaml is an error (aiconfigurator's
// strict-provenance behaviour) rather than a warning.
//
// Loader rules applied: all-reduce rows whose kernel_source or backend column
// ends in "_eager" are dropped (except on system b60, as in aiconfigurator); GEMM rows with awq/gptq dtypes are dropped; attention rows with
// num_key_value_heads == num_heads are stored with NumKVHeads = 0 (MHA sentinel);
// every GEMM latency is floored at its speed-of-light time,
// latency = max(measured, System.GemmSOL) (PERFDB.md §1.5; aiconfigurator's
// GEMM._correct_sol: only latency is raised, power kept; rows of a dtype the
// system has no flops for stay unclamped), so composition code must not floor
// again. Rows keep resolution order: the winning source's rows in file order,
// then each later source's new coordinates in its file order (aiconfigurator
// builds its dicts in this order and its tie-breaks depend on it).
type Data struct {
	System  *System
	Backend string
	Version string

	Gemm                []GemmRow
	ContextAttention    []AttentionRow
	GenerationAttention []AttentionRow
	AllReduce           []AllReduceRow
	NCCL                []NCCLRow
	// MoE holds moe_perf rows of the default kernels; MoEMinLatency holds the
	// TRT-LLM "moe_torch_flow_min_latency" kernel rows, kept separate as
	// aiconfigurator keeps them as its low-latency grid.
	MoE           []MoERow
	MoEMinLatency []MoERow
	ComputeScale  []QuantizeRow
	ScaleMatrix   []QuantizeRow
	// MLAContextModule / MLAGenerationModule are the fused MLA module tables
	// (DeepSeek/Kimi MLA attention); empty for systems/backends without them.
	MLAContextModule    []MLAModuleRow
	MLAGenerationModule []MLAModuleRow
	// MLAContext / MLAGeneration / MLABmm are the op-level MLA tables the
	// granular (non-module) MLA path of TRT-LLM and SGLang reads.
	MLAContext    []MLARow
	MLAGeneration []MLARow
	MLABmm        []MLABmmRow
	// DSAContext / DSAGeneration are the DSA module tables (DeepSeek-V3.2,
	// GLM-5). Rows are kept as read, without first-wins: the reference keeps
	// the LAST row of a coordinate within a file and the first file across
	// files, which the querier applies using Sources' per-file row counts.
	DSAContext    []DSARow
	DSAGeneration []DSARow
	// GDN holds the linear-attention kernels of Qwen3.5 (gdn_perf).
	GDN []GDNRow
	// DeepEPNormal / DeepEPLL are SGLang's DeepEP all-to-all tables (wide-EP
	// context / generation), WideEPContextMoE / WideEPGenerationMoE the expert
	// compute behind them and WideEPContextMLA / WideEPGenerationMLA the DeepEP
	// attention module (wideep_tables.go); empty where not collected.
	DeepEPNormal        []DeepEPRow
	DeepEPLL            []DeepEPRow
	WideEPContextMoE    []MoERow
	WideEPGenerationMoE []MoERow
	WideEPContextMLA    []MLAModuleRow
	WideEPGenerationMLA []MLAModuleRow

	// Sources lists every file that contributed, in resolution order per table,
	// tables in a fixed order.
	Sources []DataSource
}
