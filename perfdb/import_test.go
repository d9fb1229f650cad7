package perfdb

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// storeSnapshot renders the store's perf content: row counts of every table
// and the imported files with their sha256.
func storeSnapshot(t testing.TB, st *store.Store) string {
	t.Helper()
	var b strings.Builder
	for _, tab := range []string{"systems", "models", "perf_dirs", "perf_reuse", "perf_manifest", "perf_sources",
		"perf_gemm", "perf_context_attention", "perf_generation_attention", "perf_allreduce", "perf_nccl",
		"perf_moe", "perf_compute_scale", "perf_scale_matrix"} {
		var n int
		if err := storetest.DB(t, st).Get(&n, "SELECT count(*) FROM "+tab); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s=%d\n", tab, n)
	}
	var files []string
	if err := storetest.DB(t, st).Select(&files, `SELECT path || ' ' || sha256 || ' ' || mirrored FROM perf_sources ORDER BY path`); err != nil {
		t.Fatal(err)
	}
	b.WriteString(strings.Join(files, "\n"))
	return b.String()
}

func TestImportIdempotentAndIncremental(t *testing.T) {
	ctx := context.Background()
	root := buildFixture(t)
	st := openTestStore(t)
	rep, err := Import(ctx, st, root, ImportOptions{ImportedAt: "t0"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Files != 18 || rep.FilesSkipped != 0 || !reflect.DeepEqual(rep.Systems, []string{"fx"}) {
		t.Fatalf("first import report = %+v", rep)
	}
	snap := storeSnapshot(t, st)
	rep, err = Import(ctx, st, root, ImportOptions{ImportedAt: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Files != 0 || rep.FilesSkipped != 18 || rep.Rows != 0 {
		t.Errorf("re-import report = %+v, want everything skipped", rep)
	}
	if got := storeSnapshot(t, st); got != snap {
		t.Errorf("re-import changed the store:\n%s\nvs\n%s", got, snap)
	}
	// Change one file, remove another: one replaced, one removed, no duplicates.
	writeParquet(t, root, "data/fx/gemm/vllm/0.9.0/gemm_perf.parquet", []fxGemm{gemmAt("k", "bfloat16", 3, 40.0)})
	if err := os.Remove(filepath.Join(root, "data/fx/gemm/vllm/1.0.dev1/gemm_perf.parquet")); err != nil {
		t.Fatal(err)
	}
	rep, err = Import(ctx, st, root, ImportOptions{ImportedAt: "t2"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Files != 1 || rep.FilesRemoved != 1 || rep.FilesSkipped != 16 || rep.Rows != 1 {
		t.Errorf("incremental report = %+v", rep)
	}
	var n int
	if err := storetest.DB(t, st).Get(&n, `SELECT count(*) FROM perf_gemm WHERE version = '0.9.0'`); err != nil || n != 1 {
		t.Errorf("0.9.0 gemm mirror rows = %d, %v; want 1", n, err)
	}
	a, err := LoadDir(ctx, root, "fx", "vllm", "0.10.0")
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadStore(ctx, st, "fx", "vllm", "0.10.0")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("after incremental import LoadStore differs from LoadDir")
	}
}

func TestImportMirrorMatchesFiles(t *testing.T) {
	ctx := context.Background()
	st := openTestStore(t)
	if _, err := Import(ctx, st, buildFixture(t), ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	var srcs []struct {
		ID      int64  `db:"id"`
		Table   string `db:"table_name"`
		Path    string `db:"path"`
		Content []byte `db:"content"`
	}
	if err := storetest.DB(t, st).Select(&srcs, `SELECT id, table_name, path, content FROM perf_sources ORDER BY path`); err != nil {
		t.Fatal(err)
	}
	for _, s := range srcs {
		var err error
		switch s.Table {
		case "gemm_perf":
			err = mirrorEqual(ctx, st, gemmKind, s.ID, s.Content)
		case "context_attention_perf":
			err = mirrorEqual(ctx, st, contextAttentionKind, s.ID, s.Content)
		case "generation_attention_perf":
			err = mirrorEqual(ctx, st, generationAttentionKind, s.ID, s.Content)
		case "custom_allreduce_perf":
			err = mirrorEqual(ctx, st, allReduceKind, s.ID, s.Content)
		case "nccl_perf":
			err = mirrorEqual(ctx, st, ncclKind, s.ID, s.Content)
		case "moe_perf":
			err = mirrorEqual(ctx, st, moeKind, s.ID, s.Content)
		case "computescale_perf":
			err = mirrorEqual(ctx, st, computeScaleKind, s.ID, s.Content)
		case "scale_matrix_perf":
			err = mirrorEqual(ctx, st, scaleMatrixKind, s.ID, s.Content)
		default:
			err = fmt.Errorf("unexpected table %s", s.Table)
		}
		if err != nil {
			t.Errorf("%s: %v", s.Path, err)
		}
	}
	// The power column is NULL for files without one, set otherwise.
	var nulls, set int
	storetest.DB(t, st).Get(&nulls, `SELECT count(*) FROM perf_gemm WHERE power IS NULL`)
	storetest.DB(t, st).Get(&set, `SELECT count(*) FROM perf_gemm WHERE power = 300`)
	if set != 2 || nulls == 0 {
		t.Errorf("power: %d rows with 300 W (want 2), %d NULL", set, nulls)
	}
}

// mirrorEqual checks that a file's perf_* mirror rows equal its decoded rows, bit for bit.
func mirrorEqual[R any, K comparable](ctx context.Context, st *store.Store, k *tableKind[R, K], id int64, content []byte) error {
	tab, err := readParquet("x", content, k.cols)
	if err != nil {
		return err
	}
	want, err := k.fromParquet(tab)
	if err != nil {
		return err
	}
	got, err := loadMirrorRows(ctx, st, k, id)
	if err != nil {
		return err
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("mirror rows differ:\n%+v\n%+v", got, want)
	}
	return nil
}

func TestImportNoMirrorThenMirror(t *testing.T) {
	ctx := context.Background()
	root := buildFixture(t)
	st := openTestStore(t)
	rep, err := Import(ctx, st, root, ImportOptions{NoMirror: true})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	storetest.DB(t, st).Get(&n, `SELECT count(*) FROM perf_gemm`)
	if rep.Rows != 0 || n != 0 {
		t.Fatalf("NoMirror import copied rows: report %d, table %d", rep.Rows, n)
	}
	a, _ := LoadDir(ctx, root, "fx", "vllm", "0.10.0")
	b, err := LoadStore(ctx, st, "fx", "vllm", "0.10.0")
	if err != nil || !reflect.DeepEqual(a, b) {
		t.Fatalf("LoadStore without mirror differs from LoadDir (err %v)", err)
	}
	rep, err = Import(ctx, st, root, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.DB(t, st).Get(&n, `SELECT count(*) FROM perf_gemm`)
	if rep.Files != 0 || rep.FilesSkipped != 18 || n != 16 {
		t.Errorf("mirror fill: report %+v, perf_gemm rows %d (want 16)", rep, n)
	}
}

func TestImportBadInputLeavesStoreUnchanged(t *testing.T) {
	ctx := context.Background()
	root := buildFixture(t)
	st := openTestStore(t)
	if _, err := Import(ctx, st, root, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	snap := storeSnapshot(t, st)
	cases := []struct {
		name, rel string
		data      []byte
		want      string // error prefix, with ROOT replaced
	}{
		{"truncated parquet", "data/fx/gemm/vllm/0.9.0/gemm_perf.parquet", nil, "parquet file ROOT/data/fx/gemm/vllm/0.9.0/gemm_perf.parquet: "},
		{"garbage parquet", "data/fx/moe/vllm/0.10.0/moe_perf.parquet", []byte("PAR1 definitely not parquet PAR1"), "parquet file ROOT/data/fx/moe/vllm/0.10.0/moe_perf.parquet: "},
		{"system yaml", "fx.yaml", []byte("gpu: [\n"), "system spec ROOT/fx.yaml: not valid YAML"},
		{"system yaml missing keys", "fx.yaml", []byte("data_dir: data/fx\n"), "system spec ROOT/fx.yaml: gpu.mem_bw is missing"},
		{"reuse yaml", "data/fx/gemm/vllm/0.10.0/reuse.yaml", []byte("reuse:\n- table: gemm_perf\n"), "reuse file ROOT/data/fx/gemm/vllm/0.10.0/reuse.yaml: reuse[0].from_version must be a non-empty string"},
		{"collection meta", "data/fx/gemm/vllm/0.10.0/collection_meta.yaml", []byte(": :\n  - ["), "collection meta ROOT/data/fx/gemm/vllm/0.10.0/collection_meta.yaml: not valid YAML"},
		{"manifest", "perf_data_reuse_manifest.yaml", []byte("groups: 3\n"), "reuse manifest ROOT/perf_data_reuse_manifest.yaml: not valid YAML"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(root, c.rel)
			orig, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			defer os.WriteFile(p, orig, 0o644)
			data := c.data
			if data == nil {
				data = orig[:len(orig)/2]
			}
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = Import(ctx, st, root, ImportOptions{})
			want := strings.ReplaceAll(c.want, "ROOT", root)
			if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error = %v\nwant one line starting %q", err, want)
			}
			if got := storeSnapshot(t, st); got != snap {
				t.Errorf("failed import changed the store")
			}
		})
	}
}

func TestImportModels(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cfg, err := readEmbedded("model_configs/Qwen--Qwen3-32B_config.json")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "Qwen--Qwen3-32B_config.json", cfg)
	fp8, _ := readEmbedded("model_configs/nvidia--Llama-3.1-70B-Instruct-FP8_config.json")
	fp8q, _ := readEmbedded("model_configs/nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json")
	writeFile(t, dir, "nvidia--Llama-3.1-70B-Instruct-FP8_config.json", fp8)
	writeFile(t, dir, "nvidia--Llama-3.1-70B-Instruct-FP8_hf_quant_config.json", fp8q)
	st := openTestStore(t)
	rep, err := Import(ctx, st, dir, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rep.Models, []string{"Qwen/Qwen3-32B", "nvidia/Llama-3.1-70B-Instruct-FP8"}) {
		t.Errorf("models = %v", rep.Models)
	}
	m, err := LoadModel(ctx, st, "nvidia/Llama-3.1-70B-Instruct-FP8")
	if err != nil || m.Layers != 80 || m.RawQuant == nil {
		t.Errorf("LoadModel = %+v, %v", m, err)
	}
	em, err := EmbeddedModel("nvidia/Llama-3.1-70B-Instruct-FP8")
	if err != nil || !reflect.DeepEqual(em.GemmQuant, m.GemmQuant) || em.Hidden != m.Hidden {
		t.Errorf("EmbeddedModel = %+v, %v", em, err)
	}
	// One config.json: the id comes from --id.
	single := filepath.Join(dir, "sub", "config.json")
	writeFile(t, dir, "sub/config.json", cfg)
	if _, err := Import(ctx, st, single, ImportOptions{}); err == nil || !strings.Contains(err.Error(), "pass --id ORG/NAME") {
		t.Errorf("config.json without --id: %v", err)
	}
	if _, err := Import(ctx, st, single, ImportOptions{ID: "me/mine"}); err != nil {
		t.Fatal(err)
	}
	ms, err := ListModels(ctx, st)
	if err != nil || len(ms) != 3 || ms[0].ID != "Qwen/Qwen3-32B" || ms[1].ID != "me/mine" || ms[1].Hidden != 5120 {
		t.Errorf("ListModels = %+v, %v", ms, err)
	}
	if _, err := LoadModel(ctx, st, "x/y"); err == nil || !strings.Contains(err.Error(), "available: Qwen/Qwen3-32B, me/mine, nvidia/Llama-3.1-70B-Instruct-FP8") {
		t.Errorf("unknown model error = %v", err)
	}
	// Bad JSON names the file; the store is unchanged.
	snap := storeSnapshot(t, st)
	writeFile(t, dir, "Bad--Model_config.json", []byte("{nope"))
	if _, err := Import(ctx, st, dir, ImportOptions{}); err == nil || !strings.Contains(err.Error(), "Bad--Model_config.json") {
		t.Errorf("bad config error = %v", err)
	}
	if storeSnapshot(t, st) != snap {
		t.Error("failed model import changed the store")
	}
	if _, err := Import(ctx, st, t.TempDir(), ImportOptions{}); err == nil || !strings.Contains(err.Error(), "found no system spec") {
		t.Errorf("empty folder error = %v", err)
	}
}

// TestImportProgress: Progress sees every file of the system once, in order, done
// rising to the total — whether the files are imported or skipped as unchanged.
func TestImportProgress(t *testing.T) {
	ctx := context.Background()
	root := buildFixture(t)
	st := openTestStore(t)
	for _, run := range []string{"first", "re-import"} {
		var calls [][2]int
		rep, err := Import(ctx, st, root, ImportOptions{Progress: func(system string, done, total int) {
			if system != "fx" {
				t.Errorf("%s: progress for system %q, want fx", run, system)
			}
			calls = append(calls, [2]int{done, total})
		}})
		if err != nil {
			t.Fatal(err)
		}
		n := rep.Files + rep.FilesSkipped
		if len(calls) != n {
			t.Fatalf("%s: %d progress calls for %d files: %v", run, len(calls), n, calls)
		}
		for i, c := range calls {
			if c != [2]int{i + 1, n} {
				t.Fatalf("%s: call %d = %v, want [%d %d]", run, i, c, i+1, n)
			}
		}
	}
}
