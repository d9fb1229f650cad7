package perfdb

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/aicdb/aicdb/store"
)

// TestTableFieldsCoverData: every slice field of Data but NCCL (always loaded)
// and Sources is a table of tableFields, and every listed field exists, so
// Data.only and the skipping snapshot decode cannot keep a table a selection
// does not load.
func TestTableFieldsCoverData(t *testing.T) {
	listed := map[string]bool{}
	for _, f := range tableFields {
		if _, ok := dataType.FieldByName(f.field); !ok {
			t.Errorf("tableFields names %s, which Data does not have", f.field)
		}
		if !isImportedStem(f.stem) {
			t.Errorf("tableFields maps %s to %q, not a table stem", f.field, f.stem)
		}
		listed[f.field] = true
	}
	for i := range dataType.NumField() {
		f := dataType.Field(i)
		if f.Type.Kind() == reflect.Slice && f.Name != "NCCL" && f.Name != "Sources" && !listed[f.Name] {
			t.Errorf("Data.%s is not in tableFields", f.Name)
		}
	}
}

// TestOnlyMatchesAssemble: for each backend of the embedded data (its newest
// version) and each table selection — every single table, and on sglang
// 0.5.14 (which has every table) every model family's — the data decoded for the selection equals the data of every table
// restricted to it (Data.only), and equals the snapshot of every table
// decoded with the selection's other tables passed over.
func TestOnlyMatchesAssemble(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes three backends' perf data (seconds)")
	}
	ctx := context.Background()
	for _, bv := range [][2]string{{"vllm", "0.24.0"}, {"trtllm", "1.3.0rc20"}, {"sglang", "0.5.14"}} {
		full, err := LoadEmbedded(ctx, "h200_sxm", bv[0], bv[1], WithoutSnapshot())
		if err != nil {
			t.Fatal(err)
		}
		payload, err := encodeData(nil, full)
		if err != nil {
			t.Fatal(err)
		}
		var opts [][]LoadOption
		if bv[0] == "sglang" { // the version with DSA and GDN tables: every family's selection differs
			for _, fam := range []string{"LLAMA", "MOE", "DEEPSEEKV32", "QWEN35"} {
				opts = append(opts, []LoadOption{ForModel(&Model{Family: fam})})
			}
		}
		for _, stem := range tableStems {
			opts = append(opts, []LoadOption{OnlyTables(stem)})
		}
		for _, o := range opts {
			plan, err := resolveLoadOptions(o)
			if err != nil {
				t.Fatal(err)
			}
			want, err := LoadEmbedded(ctx, "h200_sxm", bv[0], bv[1], append(o, WithoutSnapshot())...)
			if err != nil {
				t.Fatal(err)
			}
			if got := full.only(plan); !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s %s: every table restricted differs from the selection decoded", bv[0], bv[1], plan.tableTag())
			}
			got, err := decodeDataSkipping(payload, unwantedFields(plan))
			if err != nil {
				t.Fatalf("%s %s %s: skipping decode: %v", bv[0], bv[1], plan.tableTag(), err)
			}
			if got = got.only(plan); !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s %s: the snapshot of every table decoded for the selection differs from the selection decoded", bv[0], bv[1], plan.tableTag())
			}
		}
	}
}

// TestWarmSnapshotsServeModelSelections: after WarmSnapshots (what `aicdb init`
// runs), warming again reads no Parquet, and a model's table selection of a
// warmed version loads from the snapshot of every table — equal to decoding it, and without decoding: the stored
// Parquet spoiled, it still loads — and writes no snapshot of its own; a
// version that was not warmed (not the newest) still decodes.
func TestWarmSnapshotsServeModelSelections(t *testing.T) {
	if testing.Short() {
		t.Skip("decodes the embedded perf data (seconds)")
	}
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "s.sqlite"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := ImportEmbedded(ctx, st, ImportOptions{NoMirror: true}); err != nil {
		t.Fatal(err)
	}
	m := &Model{Family: "LLAMA"}
	want, err := LoadStore(ctx, st, "h200_sxm", "vllm", "0.24.0", ForModel(m), WithoutSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	warmed, err := WarmSnapshots(ctx, st, "h200_sxm")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(warmed, []string{"vllm 0.24.0", "trtllm 1.3.0rc20", "sglang 0.5.14"}) {
		t.Errorf("warmed %q", warmed)
	}
	before := snapFiles(t, st)
	if len(before) != 3 {
		t.Errorf("%d snapshot files after warming, want 3: %v", len(before), before)
	}
	spoilContents(t, st)
	// Warming again finds every snapshot current: it reads no Parquet (the
	// spoiled contents would fail) and names them again.
	if again, err := WarmSnapshots(ctx, st, "h200_sxm"); err != nil || !reflect.DeepEqual(again, warmed) {
		t.Errorf("warming a warm store: %q, %v; want %q without reading the Parquet", again, err, warmed)
	}
	got, err := LoadStore(ctx, st, "h200_sxm", "vllm", "0.24.0", ForModel(m))
	if err != nil {
		t.Fatalf("a warmed version's model selection decoded the stored Parquet: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("the model selection from the warm snapshot differs from decoding it")
	}
	if after := snapFiles(t, st); len(after) != len(before) {
		t.Errorf("snapshot files %v after the load, want %v", after, before)
	}
	if _, err := LoadStore(ctx, st, "h200_sxm", "vllm", "0.22.0", ForModel(m)); err == nil {
		t.Error("vllm 0.22.0 (not warmed) loaded from spoiled Parquet")
	}
}

// TestSelectionFromCorruptEveryTableSnapshot: a corrupt every-table snapshot is
// not read for a table selection: the selection is decoded (equal to decoding it
// without snapshots) and kept as its own snapshot.
func TestSelectionFromCorruptEveryTableSnapshot(t *testing.T) {
	_, st := fixtureStore(t)
	ctx := context.Background()
	want, err := LoadStore(ctx, st, "fx", "vllm", "0.10.0", OnlyTables("gemm_perf"), WithoutSnapshot())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadStore(ctx, st, "fx", "vllm", "0.10.0"); err != nil { // the every-table snapshot
		t.Fatal(err)
	}
	all := snapFiles(t, st)
	if len(all) != 1 {
		t.Fatalf("snapshots %v, want the every-table one", all)
	}
	b, err := os.ReadFile(all[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-9] ^= 0x55 // a payload byte: the CRC no longer holds
	if err := os.WriteFile(all[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := LoadStore(ctx, st, "fx", "vllm", "0.10.0", OnlyTables("gemm_perf"))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("selection beside a corrupt every-table snapshot: %v (equal %v)", err, reflect.DeepEqual(got, want))
	}
	if n := len(snapFiles(t, st)); n != 2 {
		t.Errorf("%d snapshot files, want 2 (the selection's own written)", n)
	}
}
