package perfdb

import (
	"bytes"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// Fixture row types: column order and int widths differ on purpose (vllm and
// trtllm write different orders; ints may be int32 or int64).

type fxGemm struct {
	Framework string  `parquet:"framework"`
	Kernel    string  `parquet:"kernel_source"`
	Dtype     string  `parquet:"gemm_dtype"`
	M         int64   `parquet:"m"`
	N         int32   `parquet:"n"`
	K         int64   `parquet:"k"`
	Latency   float64 `parquet:"latency"`
}

type fxGemmPower struct {
	K       int32   `parquet:"k"`
	Latency float64 `parquet:"latency"`
	Power   float64 `parquet:"power"`
	Dtype   string  `parquet:"gemm_dtype"`
	M       int32   `parquet:"m"`
	N       int32   `parquet:"n"`
	Kernel  string  `parquet:"kernel_source"`
}

type fxAttn struct {
	Kernel  string  `parquet:"kernel_source"`
	Batch   int64   `parquet:"batch_size"`
	ISL     int64   `parquet:"isl"`
	Heads   int64   `parquet:"num_heads"`
	KVHeads int64   `parquet:"num_key_value_heads"`
	HeadDim int64   `parquet:"head_dim"`
	Attn    string  `parquet:"attn_dtype"`
	KV      string  `parquet:"kv_cache_dtype"`
	Step    int64   `parquet:"step"`
	Latency float64 `parquet:"latency"`
}

type fxAllReduce struct {
	Kernel  string  `parquet:"kernel_source"`
	Dtype   string  `parquet:"allreduce_dtype"`
	GPUs    int64   `parquet:"num_gpus"`
	Size    int64   `parquet:"message_size"`
	Latency float64 `parquet:"latency"`
	Backend string  `parquet:"backend"`
}

type fxNCCL struct {
	Dtype   string  `parquet:"nccl_dtype"`
	GPUs    int64   `parquet:"num_gpus"`
	Size    int64   `parquet:"message_size"`
	Kernel  string  `parquet:"kernel_source"`
	Op      string  `parquet:"op_name"`
	Latency float64 `parquet:"latency"`
}

type fxMoE struct {
	Kernel  string  `parquet:"kernel_source"`
	Dtype   string  `parquet:"moe_dtype"`
	Tokens  int64   `parquet:"num_tokens"`
	Hidden  int64   `parquet:"hidden_size"`
	Inter   int64   `parquet:"inter_size"`
	TopK    int64   `parquet:"topk"`
	Experts int64   `parquet:"num_experts"`
	TP      int64   `parquet:"moe_tp_size"`
	EP      int64   `parquet:"moe_ep_size"`
	Dist    string  `parquet:"distribution"`
	Latency float64 `parquet:"latency"`
}

type fxQuant struct {
	Kernel  string  `parquet:"kernel_source"`
	M       int64   `parquet:"m"`
	K       int64   `parquet:"k"`
	Dtype   string  `parquet:"quant_dtype"`
	Latency float64 `parquet:"latency"`
}

// fxSystemYAML is a small system spec (h200-like numbers).
const fxSystemYAML = `data_dir: data/fx
gpu:
  mem_bw: 4800000000000
  mem_bw_empirical_scaling_factor: 0.8
  mem_empirical_constant_latency: 0.000003
  mem_capacity: 151397597184
  bfloat16_tc_flops: 989000000000000
  int8_tc_flops: 1978000000000000
  fp8_tc_flops: 1978000000000000
  power: 700
  sm_version: 90
node:
  num_gpus_per_node: 8
  inter_node_bw: 50000000000
  intra_node_bw: 450000000000
  pcie_bw: 64000000000
  p2p_latency: 0.00001
misc:
  nccl_mem: {1: 0, 2: 358612992}
  other_mem: 3758096384
  nccl_version: '2.26.2'
`

const fxMeta = "schema_version: 1\nprovenance: collected\ntables: {}\n"

// writeParquet writes rows to dir/rel, creating directories.
func writeParquet[T any](t testing.TB, root, rel string, rows []T) {
	t.Helper()
	var buf bytes.Buffer
	if err := parquet.Write(&buf, rows); err != nil {
		t.Fatalf("write fixture %s: %v", rel, err)
	}
	writeFile(t, root, rel, buf.Bytes())
}

func writeFile(t testing.TB, root, rel string, data []byte) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// gemmAt returns a GEMM fixture row with a latency well above SOL.
func gemmAt(kernel, dtype string, m int64, lat float64) fxGemm {
	return fxGemm{Framework: "X", Kernel: kernel, Dtype: dtype, M: m, N: 4096, K: 4096, Latency: lat}
}

// buildFixture writes a small systems folder exercising every resolution
// channel and loader rule:
//
//	vllm versions: 0.9.0, 0.10.0rc1, 0.10.0 (requested), 0.11.0 (reuse donor),
//	1.0.dev1 (later: never inherited), "latest" (not PEP 440: skipped);
//	trtllm 1.0.0 with a manifest-shared kernel; comm with eager rows; nccl 2.26.2 and 2.23.
func buildFixture(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	writeFile(t, root, "fx.yaml", []byte(fxSystemYAML))
	writeFile(t, root, "perf_data_reuse_manifest.yaml", []byte(`groups:
  - op_file: gemm_perf.parquet
    kernel_source: 'shared_k'
    tier: shared
    frameworks: [trtllm, vllm]
  - op_file: gemm_perf.parquet
    kernel_source: 'trt_only'
    tier: shared
    frameworks: [trtllm]
  - op_file: gemm_perf.txt
    kernel_source: 'inert'
    tier: absence_load_bearing
    frameworks: [trtllm, vllm]
`))
	g := "data/fx/gemm/"
	for _, v := range []string{"0.9.0", "0.10.0rc1", "0.10.0", "0.11.0", "1.0.dev1", "latest"} {
		writeFile(t, root, g+"vllm/"+v+"/collection_meta.yaml", []byte(fxMeta))
	}
	writeParquet(t, root, g+"vllm/0.10.0/gemm_perf.parquet", []fxGemm{
		gemmAt("k", "bfloat16", 1, 1.0),
		gemmAt("k", "awq", 2, 1.0),      // dropped: awq
		gemmAt("k", "bfloat16", 1, 9.0), // duplicate coordinate in the same file: first wins
		gemmAt("k", "bfloat16", 64, 1e-9),
	})
	writeFile(t, root, g+"vllm/0.10.0/reuse.yaml", []byte(`schema_version: 1
reuse:
- table: gemm_perf
  from_version: 0.11.0
  reason: test
  approved_by: test
- table: context_attention_perf
  from_version: 0.11.0
  reason: test
  approved_by: test
`))
	writeParquet(t, root, g+"vllm/0.11.0/gemm_perf.parquet", []fxGemm{gemmAt("k", "bfloat16", 1, 2.0), gemmAt("k", "bfloat16", 2, 2.0)})
	writeParquet(t, root, g+"vllm/0.10.0rc1/gemm_perf.parquet", []fxGemmPower{
		{M: 2, N: 4096, K: 4096, Dtype: "bfloat16", Latency: 3.0, Power: 300, Kernel: "k"},
		{M: 3, N: 4096, K: 4096, Dtype: "bfloat16", Latency: 3.0, Power: 300, Kernel: "k"},
	})
	writeParquet(t, root, g+"vllm/0.9.0/gemm_perf.parquet", []fxGemm{gemmAt("k", "bfloat16", 3, 4.0), gemmAt("k", "bfloat16", 4, 4.0)})
	writeParquet(t, root, g+"vllm/1.0.dev1/gemm_perf.parquet", []fxGemm{gemmAt("k", "bfloat16", 5, 5.0)})
	writeParquet(t, root, g+"vllm/latest/gemm_perf.parquet", []fxGemm{gemmAt("k", "bfloat16", 6, 6.0)})
	writeFile(t, root, g+"trtllm/1.0.0/collection_meta.yaml", []byte(fxMeta))
	writeParquet(t, root, g+"trtllm/1.0.0/gemm_perf.parquet", []fxGemm{
		gemmAt("shared_k", "bfloat16", 7, 7.0),
		gemmAt("trt_only", "bfloat16", 8, 7.0),
		gemmAt("shared_k", "bfloat16", 1, 7.0), // coordinate taken by vllm
	})
	// An INCOMPLETE.txt without collection_meta vetoes a dir.
	writeFile(t, root, g+"vllm/0.8.0/INCOMPLETE.txt", []byte("x"))
	writeParquet(t, root, g+"vllm/0.8.0/gemm_perf.parquet", []fxGemm{gemmAt("k", "bfloat16", 9, 8.0)})

	a := "data/fx/attention/vllm/"
	writeFile(t, root, a+"0.10.0/collection_meta.yaml", []byte(fxMeta))
	writeParquet(t, root, a+"0.10.0/context_attention_perf.parquet", []fxAttn{
		{Kernel: "fa", Batch: 1, ISL: 1024, Heads: 8, KVHeads: 8, HeadDim: 128, Attn: "bfloat16", KV: "bfloat16", Latency: 0.5}, // MHA → 0
		{Kernel: "fa", Batch: 1, ISL: 1024, Heads: 8, KVHeads: 2, HeadDim: 128, Attn: "bfloat16", KV: "bfloat16", Latency: 0.4},
	})
	writeParquet(t, root, a+"0.10.0/generation_attention_perf.parquet", []fxAttn{
		{Kernel: "fa", Batch: 4, ISL: 1, Step: 1023, Heads: 8, KVHeads: 2, HeadDim: 128, Attn: "bfloat16", KV: "bfloat16", Latency: 0.1},
		{Kernel: "fa", Batch: 4, ISL: 2, Step: 1022, Heads: 8, KVHeads: 2, HeadDim: 128, Attn: "fp8", KV: "bfloat16", Latency: 0.2}, // same KV length: dup
	})
	writeFile(t, root, a+"0.11.0/collection_meta.yaml", []byte(fxMeta))
	writeParquet(t, root, a+"0.11.0/context_attention_perf.parquet", []fxAttn{
		{Kernel: "fa", Batch: 1, ISL: 1024, Heads: 8, KVHeads: 8, HeadDim: 128, Attn: "bfloat16", KV: "bfloat16", Latency: 9},
		{Kernel: "fa", Batch: 2, ISL: 1024, Heads: 8, KVHeads: 8, HeadDim: 128, Attn: "bfloat16", KV: "bfloat16", Latency: 0.9},
	})

	c := "data/fx/comm/"
	writeFile(t, root, c+"vllm/0.9.0/collection_meta.yaml", []byte(fxMeta))
	writeParquet(t, root, c+"vllm/0.9.0/custom_allreduce_perf.parquet", []fxAllReduce{
		{Kernel: "vLLM_custom_eager", Dtype: "bfloat16", GPUs: 2, Size: 128, Latency: 0.5, Backend: "vllm_eager"},
		{Kernel: "vLLM_custom_graph", Dtype: "bfloat16", GPUs: 2, Size: 128, Latency: 0.01, Backend: "vllm_graph"},
		{Kernel: "vLLM_custom_graph", Dtype: "bfloat16", GPUs: 2, Size: 256, Latency: 0.02, Backend: "vllm_eager"}, // backend says eager
	})
	writeFile(t, root, c+"vllm/0.10.0rc1/collection_meta.yaml", []byte(fxMeta))
	writeParquet(t, root, c+"vllm/0.10.0rc1/custom_allreduce_perf.parquet", []fxAllReduce{
		{Kernel: "vLLM_custom_graph", Dtype: "bfloat16", GPUs: 4, Size: 128, Latency: 0.03, Backend: "vllm_graph"},
	})
	for _, v := range []string{"2.26.2", "2.23"} {
		writeFile(t, root, c+"nccl/"+v+"/collection_meta.yaml", []byte(fxMeta))
		writeParquet(t, root, c+"nccl/"+v+"/nccl_perf.parquet", []fxNCCL{
			{Dtype: "half", GPUs: 2, Size: 256, Kernel: "NCCL", Op: "all_reduce", Latency: map[string]float64{"2.26.2": 0.005, "2.23": 0.5}[v]},
		})
	}
	m := "data/fx/moe/vllm/0.10.0/"
	writeFile(t, root, m+"collection_meta.yaml", []byte(fxMeta))
	writeParquet(t, root, m+"moe_perf.parquet", []fxMoE{
		{Kernel: "moe_torch_flow", Dtype: "bfloat16", Tokens: 1, Hidden: 2048, Inter: 768, TopK: 8, Experts: 128, TP: 1, EP: 8, Dist: "power_law_1.2", Latency: 0.05},
		{Kernel: "moe_torch_flow_min_latency", Dtype: "bfloat16", Tokens: 1, Hidden: 2048, Inter: 768, TopK: 8, Experts: 128, TP: 1, EP: 8, Dist: "power_law_1.2", Latency: 0.04},
		{Kernel: "sglang_flashinfer_cutlass_moe", Dtype: "w4a16_mxfp4", Tokens: 1, Hidden: 2048, Inter: 768, TopK: 8, Experts: 128, TP: 1, EP: 8, Dist: "power_law_1.2", Latency: 0.03},
	})
	q := "data/fx/quantize/vllm/0.10.0/"
	writeFile(t, root, q+"collection_meta.yaml", []byte(fxMeta))
	writeParquet(t, root, q+"computescale_perf.parquet", []fxQuant{{Kernel: "q", M: 16, K: 4096, Dtype: "fp8", Latency: 0.001}})
	writeParquet(t, root, q+"scale_matrix_perf.parquet", []fxQuant{{Kernel: "q", M: 16, K: 4096, Dtype: "fp8", Latency: 0.002}})
	return root
}

// openTestStore opens a fresh store in a temp dir.
func openTestStore(t testing.TB) *store.Store { return storetest.Temp(t) }

var updateAIC = flag.Bool("update-aic", false, "rewrite ../testdata/aic/systems from buildFixture")

// TestAICFixtureUpToDate keeps ../testdata/aic/systems (the small systems
// folder the CLI tests import) equal to buildFixture; -update-aic rewrites it.
func TestAICFixtureUpToDate(t *testing.T) {
	src := buildFixture(t)
	dst := filepath.Join("..", "testdata", "aic", "systems")
	if *updateAIC {
		if err := os.RemoveAll(dst); err != nil {
			t.Fatal(err)
		}
	}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		want, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if *updateAIC {
			writeFile(t, dst, filepath.ToSlash(rel), want)
			return nil
		}
		got, err := os.ReadFile(filepath.Join(dst, rel))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("testdata/aic/systems/%s is stale (run go test ./perfdb -run TestAICFixtureUpToDate -update-aic): %v", rel, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
