package perfdb

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sourcesOf returns "channel:version" of each source of a table, in order.
func sourcesOf(d *Data, table string) []string {
	var out []string
	for _, s := range d.Sources {
		if s.Table == table {
			out = append(out, s.Channel+":"+s.Backend+"/"+s.Version)
		}
	}
	return out
}

func TestLoadDirSharedLayerPrecedence(t *testing.T) {
	root := buildFixture(t)
	d, err := LoadDir(context.Background(), root, "fx", "vllm", "0.10.0")
	if err != nil {
		t.Fatal(err)
	}
	// Primary, then the reuse.yaml donor (newer), then strictly earlier versions
	// nearest first by PEP 440 (0.10.0rc1 < 0.10.0; 0.8.0 vetoed by
	// INCOMPLETE.txt; 1.0.dev1 is later; "latest" is not PEP 440), then the
	// manifest-gated trtllm fill.
	want := []string{"primary:vllm/0.10.0", "reuse:vllm/0.11.0", "earlier:vllm/0.10.0rc1", "earlier:vllm/0.9.0", "manifest:trtllm/1.0.0"}
	if got := sourcesOf(d, "gemm_perf"); !reflect.DeepEqual(got, want) {
		t.Fatalf("gemm sources = %v, want %v", got, want)
	}
	sol, ok := d.System.GemmSOL("bfloat16", 64, 4096, 4096)
	// Hand value: max(2·64·4096²/989e12, 2·(64·4096·2+4096²)/4.8e12)·1e3 ms.
	if !ok || math.Abs(sol-34603008.0/4.8e12*1e3) > 1e-15 {
		t.Fatalf("GemmSOL = %v, %v", sol, ok)
	}
	type mk struct {
		m   int
		lat float64
	}
	var got []mk
	for _, r := range d.Gemm {
		got = append(got, mk{r.M, r.Latency})
	}
	wantRows := []mk{{1, 1.0}, {64, sol}, {2, 2.0}, {3, 3.0}, {4, 4.0}, {7, 7.0}}
	if !reflect.DeepEqual(got, wantRows) {
		t.Fatalf("gemm rows (m, latency) = %v, want %v", got, wantRows)
	}
	if d.Gemm[3].Power != 300 || d.Gemm[0].Power != 0 {
		t.Errorf("power kept per row: got %v and %v", d.Gemm[3].Power, d.Gemm[0].Power)
	}
	used := map[string][2]int{}
	for _, s := range d.Sources {
		if s.Table == "gemm_perf" {
			used[s.Version] = [2]int{s.Rows, s.Used}
		}
	}
	// 0.10.0: awq row dropped (3 rows), in-file duplicate loses (2 used);
	// trtllm: only the manifest-listed kernel passes the filter (2 rows).
	wantUsed := map[string][2]int{"0.10.0": {3, 2}, "0.11.0": {2, 1}, "0.10.0rc1": {2, 1}, "0.9.0": {2, 1}, "1.0.0": {2, 1}}
	if !reflect.DeepEqual(used, wantUsed) {
		t.Errorf("gemm (rows, used) per source = %v, want %v", used, wantUsed)
	}
}

func TestLoadDirLoaderRules(t *testing.T) {
	root := buildFixture(t)
	d, err := LoadDir(context.Background(), root, "fx", "vllm", "0.10.0")
	if err != nil {
		t.Fatal(err)
	}
	// Context attention: MHA stored under n_kv = 0; the donor fills batch 2 only.
	if len(d.ContextAttention) != 3 {
		t.Fatalf("context rows = %+v", d.ContextAttention)
	}
	if r := d.ContextAttention[0]; r.NumKVHeads != 0 || r.Latency != 0.5 {
		t.Errorf("MHA row = %+v, want NumKVHeads 0 latency 0.5", r)
	}
	if r := d.ContextAttention[1]; r.NumKVHeads != 2 {
		t.Errorf("GQA row = %+v, want NumKVHeads 2", r)
	}
	if r := d.ContextAttention[2]; r.Batch != 2 || r.Latency != 0.9 {
		t.Errorf("donor row = %+v", r)
	}
	// Generation: isl+step is the coordinate, attn_dtype is not: one row.
	if len(d.GenerationAttention) != 1 || d.GenerationAttention[0].Latency != 0.1 {
		t.Errorf("generation rows = %+v", d.GenerationAttention)
	}
	// All-reduce: no comm dir for 0.10.0 → earlier versions; eager rows dropped
	// by kernel_source and by backend column.
	if got := sourcesOf(d, "custom_allreduce_perf"); !reflect.DeepEqual(got, []string{"earlier:vllm/0.10.0rc1", "earlier:vllm/0.9.0"}) {
		t.Errorf("allreduce sources = %v", got)
	}
	if len(d.AllReduce) != 2 || d.AllReduce[0].NumGPUs != 4 || d.AllReduce[1].Latency != 0.01 {
		t.Errorf("allreduce rows = %+v", d.AllReduce)
	}
	// NCCL from misc.nccl_version only.
	if len(d.NCCL) != 1 || d.NCCL[0].Latency != 0.005 || sourcesOf(d, "nccl_perf")[0] != "nccl:nccl/2.26.2" {
		t.Errorf("nccl = %+v %v", d.NCCL, sourcesOf(d, "nccl_perf"))
	}
	// MoE: min-latency kernel kept apart; mxfp4 cutlass rewrite.
	if len(d.MoE) != 2 || len(d.MoEMinLatency) != 1 || d.MoE[1].Dtype != "w4a16_mxfp4_cutlass" || d.MoEMinLatency[0].Latency != 0.04 {
		t.Errorf("moe = %+v / %+v", d.MoE, d.MoEMinLatency)
	}
	if len(d.ComputeScale) != 1 || len(d.ScaleMatrix) != 1 || d.ScaleMatrix[0].Latency != 0.002 {
		t.Errorf("quantize = %+v %+v", d.ComputeScale, d.ScaleMatrix)
	}
}

func TestLoadDirB60KeepsEagerAllReduce(t *testing.T) {
	root := buildFixture(t)
	// The same data under the system name b60: aiconfigurator exempts it from the eager drop.
	if err := os.Rename(filepath.Join(root, "fx.yaml"), filepath.Join(root, "b60.yaml")); err != nil {
		t.Fatal(err)
	}
	d, err := LoadDir(context.Background(), root, "b60", "vllm", "0.10.0")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.AllReduce) != 3 || d.AllReduce[1].Kernel != "vLLM_custom_eager" {
		t.Errorf("b60 all-reduce rows = %+v, want the eager rows kept", d.AllReduce)
	}
}

func TestLoadDirCommDoesNotInherit(t *testing.T) {
	root := buildFixture(t)
	d, err := LoadDir(context.Background(), root, "fx", "vllm", "0.10.0rc1")
	if err != nil {
		t.Fatal(err)
	}
	// comm/vllm/0.10.0rc1 exists: aiconfigurator adds no other comm source.
	if got := sourcesOf(d, "custom_allreduce_perf"); !reflect.DeepEqual(got, []string{"primary:vllm/0.10.0rc1"}) {
		t.Errorf("allreduce sources = %v", got)
	}
}

func TestLoadErrorsListWhatExists(t *testing.T) {
	root := buildFixture(t)
	ctx := context.Background()
	for _, c := range []struct{ system, backend, version, want string }{
		{"h100", "vllm", "0.10.0", `system "h100": unknown in ` + root + `; available: fx`},
		{"fx", "vllm", "0.99", "perf data for system fx: no vllm 0.99; available: trtllm 1.0.0; vllm latest, 0.8.0, 0.9.0, 0.10.0rc1, 0.10.0, 0.11.0, 1.0.dev1"},
		{"fx", "", "0.10.0", "perf data for system fx: no - 0.10.0; available:"},
		{"fx", "nccl", "2.26.2", "perf data for system fx: no nccl 2.26.2; available: trtllm"},
	} {
		_, err := LoadDir(ctx, root, c.system, c.backend, c.version)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("LoadDir(%s, %s, %s) error = %v, want prefix %q", c.system, c.backend, c.version, err, c.want)
		}
	}
	if _, err := LoadDir(ctx, filepath.Join(root, "nope"), "fx", "vllm", "0.10.0"); err == nil || !strings.HasPrefix(err.Error(), "systems folder "+filepath.Join(root, "nope")+": not a folder") {
		t.Errorf("missing folder error = %v", err)
	}
	vs, err := ListVersionsDir(root, "fx", "vllm")
	if err != nil || !reflect.DeepEqual(vs, []string{"latest", "0.8.0", "0.9.0", "0.10.0rc1", "0.10.0", "0.11.0", "1.0.dev1"}) {
		t.Errorf("ListVersionsDir = %v, %v", vs, err)
	}
	bs, err := ListBackendsDir(root, "fx")
	if err != nil || !reflect.DeepEqual(bs, []string{"trtllm", "vllm"}) {
		t.Errorf("ListBackendsDir = %v, %v", bs, err)
	}
}

func TestLoadStoreEqualsLoadDirFixture(t *testing.T) {
	root := buildFixture(t)
	ctx := context.Background()
	st := openTestStore(t)
	if _, err := Import(ctx, st, root, ImportOptions{ImportedAt: "t0"}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"0.10.0", "0.10.0rc1", "0.9.0", "0.11.0", "1.0.dev1", "latest"} {
		a, err := LoadDir(ctx, root, "fx", "vllm", v)
		if err != nil {
			t.Fatal(err)
		}
		b, err := LoadStore(ctx, st, "fx", "vllm", v)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("vllm %s: LoadStore differs from LoadDir:\n%+v\n%+v", v, a, b)
		}
	}
	vs, err := ListVersions(ctx, st, "fx", "vllm")
	if err != nil || !reflect.DeepEqual(vs, []string{"latest", "0.8.0", "0.9.0", "0.10.0rc1", "0.10.0", "0.11.0", "1.0.dev1"}) {
		t.Errorf("ListVersions = %v, %v", vs, err)
	}
	if _, err := LoadStore(ctx, st, "nope", "vllm", "0.10.0"); err == nil || !strings.Contains(err.Error(), "available: fx") {
		t.Errorf("unknown system error = %v", err)
	}
}

func TestGemmSOLUnknownDtypeLeavesRowsUnclamped(t *testing.T) {
	s := &System{MemBW: 4.8e12, BF16TCFlops: 989e12}
	if _, ok := s.GemmSOL("fp8", 1, 1, 1); ok {
		t.Error("fp8 SOL without fp8 flops should be unknown")
	}
	if _, ok := s.GemmSOL("awq", 1, 1, 1); ok {
		t.Error("unknown dtype SOL should be unknown")
	}
	rows := []GemmRow{{Dtype: "fp8", M: 1, N: 1, K: 1, Latency: 1e-12}}
	floorGemmAtSOL(s, rows)
	if rows[0].Latency != 1e-12 {
		t.Errorf("unclamped row changed: %v", rows[0].Latency)
	}
}
