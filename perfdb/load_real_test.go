package perfdb

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

// h200Vllm022 caches LoadEmbedded(h200_sxm, vllm, 0.22.0) across tests (~2 s of CPU).
var h200Vllm022 = sync.OnceValues(func() (*Data, error) {
	return LoadEmbedded(context.Background(), "h200_sxm", "vllm", "0.22.0")
})

// sharedSystemsDir returns aiconfigurator's systems folder of the shared data
// slice ($AICDB_AIC_DATA, default ../../shared/data/aiconfigurator) or skips.
func sharedSystemsDir(t testing.TB) string {
	t.Helper()
	root := os.Getenv("AICDB_AIC_DATA")
	if root == "" {
		root = filepath.Join("..", "..", "shared", "data", "aiconfigurator")
	}
	dir := filepath.Join(root, "aic-core", "src", "aiconfigurator_core", "systems")
	if _, err := os.Stat(filepath.Join(dir, "h200_sxm.yaml")); err != nil {
		t.Skipf("aiconfigurator data slice not found at %s (set AICDB_AIC_DATA): %v", root, err)
	}
	return dir
}

// TestH200Vllm022Golden pins what the h200 vllm 0.22.0 data resolves to
// (the golden case qwen3-32b-h200-vllm-022-power reads it): sources in
// resolution order and row counts, from the embedded data.
func TestH200Vllm022Golden(t *testing.T) {
	d, err := h200Vllm022()
	if err != nil {
		t.Fatal(err)
	}
	counts := []int{len(d.Gemm), len(d.ContextAttention), len(d.GenerationAttention), len(d.AllReduce), len(d.NCCL),
		len(d.MoE), len(d.MoEMinLatency), len(d.ComputeScale), len(d.ScaleMatrix)}
	if want := []int{107226, 50830, 63006, 69, 504, 77112, 0, 1628, 1628}; !reflect.DeepEqual(counts, want) {
		t.Errorf("row counts = %v, want %v", counts, want)
	}
	var got []string
	for _, s := range d.Sources {
		got = append(got, s.Table+" "+s.Channel+" "+s.Version)
	}
	want := []string{
		"gemm_perf primary 0.22.0", "gemm_perf reuse 0.24.0", "gemm_perf earlier 0.19.0", "gemm_perf earlier 0.18.0", "gemm_perf earlier 0.14.0",
		"context_attention_perf primary 0.22.0", "context_attention_perf reuse 0.24.0", "context_attention_perf earlier 0.19.0",
		"context_attention_perf earlier 0.18.0", "context_attention_perf earlier 0.14.0",
		"generation_attention_perf primary 0.22.0", "generation_attention_perf reuse 0.24.0", "generation_attention_perf earlier 0.19.0",
		"generation_attention_perf earlier 0.18.0", "generation_attention_perf earlier 0.14.0",
		// No comm/vllm/0.22.0: custom all-reduce falls back to earlier versions.
		"custom_allreduce_perf earlier 0.19.0", "custom_allreduce_perf earlier 0.18.0", "custom_allreduce_perf earlier 0.14.0",
		"nccl_perf nccl 2.26.2",
		"moe_perf primary 0.22.0", "moe_perf reuse 0.24.0", "moe_perf earlier 0.19.0", "moe_perf earlier 0.18.0", "moe_perf earlier 0.14.0",
		"computescale_perf primary 0.22.0", "computescale_perf reuse 0.24.0",
		"scale_matrix_perf primary 0.22.0", "scale_matrix_perf reuse 0.24.0",
		// The MLA module tables also take TRT-LLM's kernel_source "default"
		// rows (perf_data_reuse_manifest.yaml shared_fallback).
		"mla_context_module_perf primary 0.22.0", "mla_context_module_perf reuse 0.24.0", "mla_context_module_perf earlier 0.19.0",
		"mla_context_module_perf manifest 1.3.0rc20", "mla_context_module_perf manifest 1.3.0rc10",
		"mla_generation_module_perf primary 0.22.0", "mla_generation_module_perf reuse 0.24.0", "mla_generation_module_perf earlier 0.19.0",
		"mla_generation_module_perf manifest 1.3.0rc20", "mla_generation_module_perf manifest 1.3.0rc10",
		// Op-level MLA: only the reuse.yaml donor 0.14.0 has them for vllm.
		"context_mla_perf reuse 0.14.0", "generation_mla_perf reuse 0.14.0",
		"dsa_context_module_perf primary 0.22.0", "dsa_context_module_perf reuse 0.24.0", "dsa_context_module_perf earlier 0.19.0",
		"dsa_context_module_perf manifest 1.3.0rc20",
		"dsa_generation_module_perf primary 0.22.0", "dsa_generation_module_perf reuse 0.24.0", "dsa_generation_module_perf earlier 0.19.0",
		"dsa_generation_module_perf manifest 1.3.0rc20", "dsa_generation_module_perf manifest 1.3.0rc10",
		// gdn_perf: the manifest shares its kernels across all three frameworks.
		"gdn_perf primary 0.22.0", "gdn_perf reuse 0.24.0", "gdn_perf earlier 0.19.0", "gdn_perf earlier 0.18.0",
		"gdn_perf manifest 0.5.14", "gdn_perf manifest 0.5.9", "gdn_perf manifest 1.3.0rc20", "gdn_perf manifest 1.3.0rc10",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sources =\n%v\nwant\n%v", got, want)
	}
	// Loader rules hold on the real data.
	for _, r := range d.ContextAttention {
		if r.NumKVHeads == r.NumHeads {
			t.Fatalf("MHA row not mapped to n_kv 0: %+v", r)
		}
	}
	for _, r := range d.Gemm {
		if sol, ok := d.System.GemmSOL(r.Dtype, r.M, r.N, r.K); ok && r.Latency < sol {
			t.Fatalf("GEMM row below SOL: %+v < %v", r, sol)
		}
	}
}

// TestEmbeddedEqualsSharedSlice: skipping the families aicdb does not model
// leaves the resolved tables unchanged (so the h200 golden case resolves
// identically from the embedded data). Structurally: no skipped family holds
// an imported table, and every imported h200 file is embedded byte for byte;
// then vllm 0.22.0 (the golden case) is compared whole.
func TestEmbeddedEqualsSharedSlice(t *testing.T) {
	dir := sharedSystemsDir(t)
	ctx := context.Background()
	shared, err := scanTreeFS(os.DirFS(dir), dir, &System{Name: "h200_sxm", DataDir: "data/h200_sxm"})
	if err != nil {
		t.Fatal(err)
	}
	emb := subOrEmpty(EmbeddedFS(), "systems")
	embedded, err := scanTreeFS(emb, "embedded", &System{Name: "h200_sxm", DataDir: "data/h200_sxm"})
	if err != nil {
		t.Fatal(err)
	}
	for p := range shared.files {
		if !embedded.files[p] {
			t.Errorf("%s is imported from the shared slice but not embedded", p)
			continue
		}
		a, _ := os.ReadFile(filepath.Join(dir, p))
		b, _ := fs.ReadFile(emb, p)
		if !bytes.Equal(a, b) {
			t.Errorf("embedded %s differs from the shared slice", p)
		}
	}
	if len(embedded.files) != len(shared.files) {
		t.Errorf("embedded %d table files, shared slice %d", len(embedded.files), len(shared.files))
	}
	for k, d := range shared.dirs {
		if e, ok := embedded.dirs[k]; ok && !reflect.DeepEqual(e, d) {
			t.Errorf("dir %v: sidecars differ", k)
		}
	}
	a, err := h200Vllm022()
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadDir(ctx, dir, "h200_sxm", "vllm", "0.22.0")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("vllm 0.22.0: embedded data resolves differently from the shared slice")
	}
}

// TestH200LoadStoreEqualsLoadDir imports the embedded data (files and
// resolution index, without the SQL mirror) and checks LoadStore gives the
// same rows and sources as loading the folder.
func TestH200LoadStoreEqualsLoadDir(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t)
	if _, err := ImportEmbedded(ctx, st, ImportOptions{NoMirror: true}); err != nil {
		t.Fatal(err)
	}
	a, err := h200Vllm022()
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadStore(ctx, st, "h200_sxm", "vllm", "0.22.0")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Error("LoadStore differs from LoadDir on h200 vllm 0.22.0")
	}
	vs, err := ListVersions(ctx, st, "h200_sxm", "vllm")
	if err != nil || !reflect.DeepEqual(vs, []string{"0.14.0", "0.18.0", "0.19.0", "0.22.0", "0.24.0"}) {
		t.Errorf("ListVersions = %v, %v", vs, err)
	}
	evs, err := EmbeddedVersions("h200_sxm", "vllm")
	if err != nil || !reflect.DeepEqual(evs, vs) {
		t.Errorf("EmbeddedVersions = %v, %v", evs, err)
	}
}
