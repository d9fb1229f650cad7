package perfdb

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// fixtureStore imports buildFixture into a fresh store and returns both.
func fixtureStore(t *testing.T) (root string, st *store.Store) {
	t.Helper()
	root = buildFixture(t)
	st = openTestStore(t)
	if _, err := Import(context.Background(), st, root, ImportOptions{ImportedAt: "t0"}); err != nil {
		t.Fatal(err)
	}
	return root, st
}

// snapFiles lists the snapshot files of st.
func snapFiles(t *testing.T, st *store.Store) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(snapshotDir(st.Path), "*.snap"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// spoilContents overwrites every stored Parquet blob while keeping its
// recorded sha256: a load that decodes the store fails, a snapshot load does not.
func spoilContents(t *testing.T, st *store.Store) {
	t.Helper()
	if _, err := storetest.DB(t, st).Exec(`UPDATE perf_sources SET content = x'00'`); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotWrittenReusedAndEqual(t *testing.T) {
	root, st := fixtureStore(t)
	ctx := context.Background()
	versions := []string{"0.10.0", "0.9.0", "1.0.dev1"}
	want := map[string]*Data{}
	for _, v := range versions {
		for _, mode := range []DatabaseMode{ModeSilicon, ModeSOL} {
			dir, err := LoadDir(ctx, root, "fx", "vllm", v, ForMode(mode))
			if err != nil {
				t.Fatal(err)
			}
			got, err := LoadStore(ctx, st, "fx", "vllm", v, ForMode(mode)) // builds the snapshot
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, dir) {
				t.Errorf("vllm %s %s: first LoadStore differs from LoadDir", v, mode)
			}
			want[v+string(mode)] = dir
		}
	}
	if n := len(snapFiles(t, st)); n != 6 {
		t.Fatalf("%d snapshot files, want 6 (3 versions × shared/own)", n)
	}
	spoilContents(t, st)
	if _, err := LoadStore(ctx, st, "fx", "vllm", "0.10.0", WithoutSnapshot()); err == nil {
		t.Fatal("decoding spoiled contents succeeded; the test cannot tell a snapshot load apart")
	}
	for _, v := range versions {
		for _, mode := range []DatabaseMode{ModeSilicon, ModeSOL} {
			got, err := LoadStore(ctx, st, "fx", "vllm", v, ForMode(mode))
			if err != nil {
				t.Fatalf("vllm %s %s: snapshot not reused: %v", v, mode, err)
			}
			if !reflect.DeepEqual(got, want[v+string(mode)]) {
				t.Errorf("vllm %s %s: snapshot load differs from LoadDir", v, mode)
			}
		}
	}
}

func TestSnapshotDeterministic(t *testing.T) {
	_, st := fixtureStore(t)
	ctx := context.Background()
	if _, err := LoadStore(ctx, st, "fx", "vllm", "0.10.0"); err != nil {
		t.Fatal(err)
	}
	files := snapFiles(t, st)
	if len(files) != 1 || filepath.Base(files[0]) != "fx_vllm_0.10.0_shared_all.snap" {
		t.Fatalf("snapshot files = %v", files)
	}
	first, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(files[0])
	if _, err := LoadStore(ctx, st, "fx", "vllm", "0.10.0"); err != nil {
		t.Fatal(err)
	}
	second, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, second) {
		t.Error("two snapshots of the same data differ")
	}
}

// TestSnapshotInvalidatedByChangedSource changes one source file, re-imports
// it, and checks the next load gives the new numbers, not the snapshot's.
func TestSnapshotInvalidatedByChangedSource(t *testing.T) {
	root, st := fixtureStore(t)
	ctx := context.Background()
	before, err := LoadStore(ctx, st, "fx", "vllm", "0.10.0")
	if err != nil {
		t.Fatal(err)
	}
	// 0.9.0 is an earlier-version source of 0.10.0's GEMM table; m = 4 is its own.
	writeParquet(t, root, "data/fx/gemm/vllm/0.9.0/gemm_perf.parquet", []fxGemm{gemmAt("k", "bfloat16", 3, 4.0), gemmAt("k", "bfloat16", 4, 40.0)})
	if _, err := Import(ctx, st, root, ImportOptions{ImportedAt: "t1"}); err != nil {
		t.Fatal(err)
	}
	after, err := LoadStore(ctx, st, "fx", "vllm", "0.10.0")
	if err != nil {
		t.Fatal(err)
	}
	want, err := LoadDir(ctx, root, "fx", "vllm", "0.10.0")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(after, want) {
		t.Fatal("after a changed source, LoadStore differs from LoadDir (stale snapshot)")
	}
	if reflect.DeepEqual(after.Gemm, before.Gemm) {
		t.Fatal("the changed source did not change the GEMM rows; the test proves nothing")
	}
	if files := snapFiles(t, st); len(files) != 1 {
		t.Errorf("snapshot files = %v, want the one file rewritten", files)
	}
}

func TestSnapshotCorruptIgnoredAndRebuilt(t *testing.T) {
	_, st := fixtureStore(t)
	ctx := context.Background()
	want, err := LoadStore(ctx, st, "fx", "vllm", "0.10.0", WithoutSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadStore(ctx, st, "fx", "vllm", "0.10.0"); err != nil {
		t.Fatal(err)
	}
	file := snapFiles(t, st)[0]
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		b := slices.Clone(good)
		b[i] ^= 0x55
		return b
	}
	for name, b := range map[string][]byte{
		"empty":     {},
		"truncated": good[:len(good)-7],
		"magic":     flip(0),
		"key":       flip(len(snapshotMagic) + 3),
		"length":    flip(len(snapshotMagic) + 32),
		"crc":       flip(len(snapshotMagic) + 40),
		"payload":   flip(len(good) - 9),
		"longer":    append(slices.Clone(good), 0),
	} {
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := LoadStore(ctx, st, "fx", "vllm", "0.10.0")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: a corrupt snapshot changed the data", name)
		}
		if rebuilt, _ := os.ReadFile(file); !bytes.Equal(rebuilt, good) {
			t.Errorf("%s: the snapshot was not rebuilt", name)
		}
	}
}

func TestSnapshotSkippedWhenFolderUnwritable(t *testing.T) {
	_, st := fixtureStore(t)
	// A file where the folder should be: nothing can be written, loads still work.
	if err := os.WriteFile(snapshotDir(st.Path), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := LoadStore(context.Background(), st, "fx", "vllm", "0.10.0", WithoutSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	got, err := LoadStore(context.Background(), st, "fx", "vllm", "0.10.0")
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("load with an unwritable snapshot folder: %v", err)
	}
	// Warming names nothing it could not keep.
	if warmed, err := WarmSnapshots(context.Background(), st, "fx"); err != nil || len(warmed) != 0 {
		t.Errorf("WarmSnapshots with an unwritable folder = %q, %v; want none", warmed, err)
	}
}

func TestOnlyTablesLoadsTheNamedTables(t *testing.T) {
	root, st := fixtureStore(t)
	ctx := context.Background()
	full, err := LoadDir(ctx, root, "fx", "vllm", "0.10.0")
	if err != nil {
		t.Fatal(err)
	}
	want := *full
	want.ContextAttention, want.GenerationAttention, want.AllReduce = nil, nil, nil
	want.MoE, want.MoEMinLatency, want.ComputeScale, want.ScaleMatrix = nil, nil, nil, nil
	want.Sources = nil
	for _, s := range full.Sources {
		if s.Table == "gemm_perf" || s.Table == "nccl_perf" {
			want.Sources = append(want.Sources, s)
		}
	}
	for _, load := range []func() (*Data, error){
		func() (*Data, error) { return LoadDir(ctx, root, "fx", "vllm", "0.10.0", OnlyTables("gemm_perf")) },
		func() (*Data, error) { return LoadStore(ctx, st, "fx", "vllm", "0.10.0", OnlyTables("gemm_perf")) },
		func() (*Data, error) { return LoadStore(ctx, st, "fx", "vllm", "0.10.0", OnlyTables("gemm_perf")) }, // snapshot
	} {
		got, err := load()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, &want) {
			t.Errorf("OnlyTables(gemm_perf) = %+v\nwant %+v", got, &want)
		}
	}
	if n := len(snapFiles(t, st)); n != 1 {
		t.Errorf("%d snapshot files, want 1", n)
	}
	_, err = LoadStore(ctx, st, "fx", "vllm", "0.10.0", OnlyTables("gemm"))
	if want := `load perf data: table "gemm": unknown; known tables: ` + strings.Join(tableStems, ", "); err == nil || err.Error() != want {
		t.Errorf("unknown table error = %v\nwant %s", err, want)
	}
}

// TestForModelDenseSkipsMoEWithSamePrices: every embedded LLAMA model prices
// the same passes, in SILICON and EMPIRICAL (with its util transfers), on the data ForModel loads for it
// (no MoE tables) as on the full data.
func TestForModelDenseSkipsMoEWithSamePrices(t *testing.T) {
	full, err := h200Vllm022()
	if err != nil {
		t.Fatal(err)
	}
	llama := &Model{Family: "LLAMA"}
	dense, err := LoadEmbedded(context.Background(), "h200_sxm", "vllm", "0.22.0", ForModel(llama))
	if err != nil {
		t.Fatal(err)
	}
	if len(dense.MoE) != 0 || len(dense.Gemm) != len(full.Gemm) || len(dense.GenerationAttention) != len(full.GenerationAttention) {
		t.Fatalf("dense load: %d MoE rows (want 0), %d/%d GEMM rows", len(dense.MoE), len(dense.Gemm), len(full.Gemm))
	}
	plan, err := resolveLoadOptions([]LoadOption{ForModel(llama)})
	if err != nil {
		t.Fatal(err)
	}
	for _, stem := range tableStems {
		if got, want := plan.wants(stem), slices.Contains(denseTables, stem); got != want {
			t.Errorf("dense plan wants %s = %v, want %v", stem, got, want)
		}
	}
	if plan.wants("moe_perf") {
		t.Error("dense plan loads moe_perf")
	}
	for fam, skip := range map[string][]string{
		"MOE":         {"dsa_context_module_perf", "dsa_generation_module_perf", "gdn_perf"},
		"DEEPSEEK":    {"dsa_context_module_perf", "dsa_generation_module_perf", "gdn_perf"},
		"DEEPSEEKV32": {"gdn_perf"},
		"QWEN35":      {"dsa_context_module_perf", "dsa_generation_module_perf"},
	} {
		plan, _ := resolveLoadOptions([]LoadOption{ForModel(&Model{Family: fam})})
		for _, stem := range tableStems {
			if got, want := plan.wants(stem), !slices.Contains(skip, stem); got != want {
				t.Errorf("%s plan wants %s = %v, want %v", fam, stem, got, want)
			}
		}
	}
	ids, err := EmbeddedModels()
	if err != nil {
		t.Fatal(err)
	}
	passes := []timing.Pass{
		{Decode: []int{1025}},
		{Prefill: []timing.Chunk{{Tokens: 512, Computed: 512}}, Decode: []int{2048, 4096}},
		{Prefill: []timing.Chunk{{Tokens: 4000, Computed: 4000}}},
	}
	tested := 0
	for _, mode := range []DatabaseMode{ModeSilicon, ModeEmpirical} {
		qf, err := NewQuerier(full, mode)
		if err != nil {
			t.Fatal(err)
		}
		qd, err := NewQuerier(dense, mode)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			m, err := EmbeddedModel(id)
			if err != nil || m.Family != "LLAMA" {
				continue
			}
			tested++
			price := func(q *Querier, d *Data) []float64 {
				e, err := NewEstimatorWith(q, d, m, Config{TP: 1})
				if err != nil {
					return []float64{-1}
				}
				pt := &PassTiming{e: e, pe: e.monotone(), cache: map[passKey]float64{}}
				var out []float64
				for i := range passes {
					v, err := pt.PassMs(&passes[i])
					if err != nil {
						v = -1
					}
					out = append(out, v)
				}
				return out
			}
			if a, b := price(qf, full), price(qd, dense); !slices.Equal(a, b) {
				t.Errorf("%s %s: full %v, dense %v", id, mode, a, b)
			}
		}
	}
	if tested < 3 {
		t.Fatalf("only %d LLAMA models embedded", tested)
	}
}

// TestForModelSkipsDSAAndGDNWithSamePrices: every embedded model of a family
// other than LLAMA prices the same passes on h200_sxm sglang 0.5.14 (which has
// DSA and GDN tables) with the tables ForModel drops for its family emptied as
// on the full data (a dropped table would change a price or turn it into a miss).
func TestForModelSkipsDSAAndGDNWithSamePrices(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes sglang 0.5.14 (seconds)")
	}
	full, err := LoadEmbedded(context.Background(), "h200_sxm", "sglang", "0.5.14", WithoutSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	if len(full.DSAContext) == 0 || len(full.GDN) == 0 {
		t.Fatalf("sglang 0.5.14 lost its DSA (%d rows) or GDN (%d rows) tables", len(full.DSAContext), len(full.GDN))
	}
	ids, err := EmbeddedModels()
	if err != nil {
		t.Fatal(err)
	}
	passes := []timing.Pass{
		{Decode: []int{1025}},
		{Prefill: []timing.Chunk{{Tokens: 512, Computed: 512}}, Decode: []int{2048, 4096}},
		{Prefill: []timing.Chunk{{Tokens: 4000, Computed: 4000}}},
	}
	qf, err := NewQuerier(full, ModeSilicon)
	if err != nil {
		t.Fatal(err)
	}
	price := func(q *Querier, d *Data, m *Model) []float64 {
		e, err := NewEstimatorWith(q, d, m, Config{TP: 8, MoEEP: 8})
		if err != nil {
			return nil
		}
		pt := &PassTiming{e: e, pe: e.monotone(), cache: map[passKey]float64{}}
		var out []float64
		for i := range passes {
			v, err := pt.PassMs(&passes[i])
			if err != nil {
				v = -1
			}
			out = append(out, v)
		}
		return out
	}
	tested := map[string]int{}
	subs := map[string]*Querier{} // by table selection
	for _, id := range ids {
		m, err := EmbeddedModel(id)
		if err != nil || m.Family == "LLAMA" {
			continue
		}
		plan, err := resolveLoadOptions([]LoadOption{ForModel(m)})
		if err != nil {
			t.Fatal(err)
		}
		sub := *full
		if !plan.wants("dsa_context_module_perf") {
			sub.DSAContext, sub.DSAGeneration = nil, nil
		}
		if !plan.wants("gdn_perf") {
			sub.GDN = nil
		}
		qs := subs[plan.tableTag()]
		if qs == nil {
			if qs, err = NewQuerier(&sub, ModeSilicon); err != nil {
				t.Fatal(err)
			}
			subs[plan.tableTag()] = qs
		}
		a := price(qf, full, m)
		if a == nil {
			continue
		}
		if b := price(qs, &sub, m); !slices.Equal(a, b) {
			t.Errorf("%s (%s): full data %v, ForModel's tables %v", id, m.Family, a, b)
		}
		tested[m.Family]++
	}
	for _, fam := range []string{"MOE", "DEEPSEEK", "DEEPSEEKV32", "QWEN35"} {
		if tested[fam] == 0 {
			t.Errorf("no embedded %s model priced at tp 8 / moe-ep 8 (tested %v)", fam, tested)
		}
	}
}

// dataGen draws Data with a few rows in every table (nil, empty or filled).
func dataGen() *rapid.Generator[*Data] {
	str := rapid.SampledFrom([]string{"", "bfloat16", "fp8", "k", "ünï", "a\x00b"})
	num := rapid.SampledFrom([]float64{0, math.Copysign(0, -1), 1.5, 1e-300, -7, 3.25e9})
	return rapid.Custom(func(t *rapid.T) *Data {
		d := &Data{Backend: str.Draw(t, "backend"), Version: str.Draw(t, "version")}
		if rapid.Bool().Draw(t, "sys") {
			d.System = &System{Name: "s", MemBW: num.Draw(t, "bw"), NCCLMem: map[int]float64{2: 1, 8: 3}}
		}
		rows := func(name string) int { return rapid.IntRange(-1, 4).Draw(t, name) }
		if n := rows("gemm"); n >= 0 {
			d.Gemm = make([]GemmRow, n)
			for i := range d.Gemm {
				d.Gemm[i] = GemmRow{Dtype: str.Draw(t, "d"), M: rapid.Int().Draw(t, "m"), N: rapid.IntRange(-3, 3).Draw(t, "n"),
					Latency: num.Draw(t, "l"), Power: num.Draw(t, "p"), Kernel: str.Draw(t, "k")}
			}
		}
		if n := rows("moe"); n >= 0 {
			d.MoE = make([]MoERow, n)
			for i := range d.MoE {
				d.MoE[i] = MoERow{Dtype: str.Draw(t, "d"), TopK: rapid.Int().Draw(t, "k"), Latency: num.Draw(t, "l")}
			}
		}
		if n := rows("src"); n >= 0 {
			d.Sources = make([]DataSource, n)
			for i := range d.Sources {
				d.Sources[i] = DataSource{Table: str.Draw(t, "t"), Path: str.Draw(t, "p"), Rows: rapid.Int().Draw(t, "r")}
			}
		}
		return d
	})
}

func TestSnapshotCodecRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		d := dataGen().Draw(rt, "data")
		b, err := encodeData(nil, d)
		if err != nil {
			rt.Fatal(err)
		}
		got, err := decodeData(b)
		if err != nil {
			rt.Fatal(err)
		}
		if !reflect.DeepEqual(got, d) {
			rt.Fatalf("round trip:\n%+v\n%+v", got, d)
		}
		again, _ := encodeData(nil, got)
		if !bytes.Equal(again, b) {
			rt.Fatal("encoding is not deterministic")
		}
	})
}

// FuzzSnapshotDecode: any payload decodes to Data or to errSnapshotCorrupt, never a panic.
func FuzzSnapshotDecode(f *testing.F) {
	d := &Data{Backend: "vllm", System: &System{Name: "s"}, Gemm: []GemmRow{{Dtype: "fp8", M: 3, Latency: 1}, {Dtype: "fp8", M: -4}},
		Sources: []DataSource{{Table: "gemm_perf", Rows: 2}}, MoE: []MoERow{}}
	b, err := encodeData(nil, d)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		got, err := decodeData(p)
		if err != nil {
			if err != errSnapshotCorrupt {
				t.Fatalf("error %v, want errSnapshotCorrupt", err)
			}
			return
		}
		if _, err := encodeData(nil, got); err != nil {
			t.Fatalf("decoded data does not encode: %v", err)
		}
		// Passing over the tables a dense model does not load (a warm
		// snapshot's selection) accepts what the full decode accepts and
		// leaves the same rows in the tables it keeps.
		plan, _ := resolveLoadOptions([]LoadOption{ForModel(&Model{Family: "LLAMA"})})
		sel, err := decodeDataSkipping(p, unwantedFields(plan))
		if err != nil {
			t.Fatalf("skipping decode: %v; the full decode accepted it", err)
		}
		if !reflect.DeepEqual(sel.only(plan), got.only(plan)) {
			t.Fatal("skipping decode differs from the full decode restricted")
		}
	})
}

// BenchmarkLoadStoreH200 loads h200_sxm vllm 0.24.0 (the newest, what
// `aicdb eval --model … --backend vllm` picks) from a store made by `aicdb
// init`: decoding the stored Parquet (decode), the warm snapshot of every
// table (snapshot) and of a dense model's tables (snapshot-dense).
func BenchmarkLoadStoreH200(b *testing.B) {
	ctx := context.Background()
	st := benchStore(b)
	defer st.Close()
	if _, err := ImportEmbedded(ctx, st, ImportOptions{NoMirror: true}); err != nil {
		b.Fatal(err)
	}
	m, err := EmbeddedModel("Qwen/Qwen3-32B")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts []LoadOption
	}{
		{"decode", []LoadOption{WithoutSnapshot()}},
		{"snapshot", nil},
		{"snapshot-dense", []LoadOption{ForModel(m)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			if _, err := LoadStore(ctx, st, "h200_sxm", "vllm", "0.24.0", c.opts...); err != nil { // builds the snapshot
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := LoadStore(ctx, st, "h200_sxm", "vllm", "0.24.0", c.opts...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
