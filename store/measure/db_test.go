package measure

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// TestImportIdempotent: a file is stored once (its content hash); its rows read
// back as parsed; a row the store refuses rolls the whole file back.
func TestImportIdempotent(t *testing.T) {
	ctx := context.Background()
	st := storetest.Temp(t)
	ms, err := Parse("silicon.csv", read(t, "silicon.csv"), "", Deployment{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Import(ctx, st, ms, Deployment{}, "t0")
	if err != nil || res.Rows != 2 || res.Unchanged {
		t.Fatalf("first import %+v %v", res, err)
	}
	res, err = Import(ctx, st, ms, Deployment{}, "t1")
	if err != nil || !res.Unchanged {
		t.Fatalf("second import %+v %v", res, err)
	}
	rows, err := Select(ctx, st, "system = 'h200_sxm'")
	if err != nil || len(rows) != 2 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	if r := rows[1]; r.Line != 3 || r.Values[TTFTMean] != ms[1].Values[TTFTMean] || !r.Has[TPOTMean] || r.Has[TTFTP99] {
		t.Errorf("read back %+v", r.Measurement)
	}
	// All or nothing: the second row breaks a CHECK, the first is not kept either.
	bad, _ := Parse("other.csv", append(read(t, "silicon.csv"), '\n'), "", Deployment{})
	bad[1].Prefix = bad[1].ISL
	if _, err := Import(ctx, st, bad, Deployment{}, "t2"); err == nil {
		t.Fatal("bad row stored")
	}
	var n int
	if err := storetest.DB(t, st).GetContext(ctx, &n, `SELECT count(*) FROM measurements`); err != nil || n != 2 {
		t.Errorf("%d rows after a failed import (%v), want 2", n, err)
	}
}

// TestImportKeepsBenchmark: a deployment file's benchmark (rounds, warm-up
// rounds, tool) is stored with each row and read back by Select.
func TestImportKeepsBenchmark(t *testing.T) {
	ctx := context.Background()
	st := storetest.Temp(t)
	dep, err := ParseSidecar("d.yaml", []byte("benchmark: {tool: bench_serving, rounds: 10, warmup_rounds: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	bms, err := Parse("bench.csv", read(t, "silicon.csv"), "", dep)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Import(ctx, st, bms, dep, "t0"); err != nil {
		t.Fatal(err)
	}
	back, err := Select(ctx, st, "source_sha256 = '"+bms[0].SHA256+"'")
	if err != nil || len(back) != 2 {
		t.Fatalf("%d rows, %v", len(back), err)
	}
	if b := back[0].Benchmark; b == nil || b.Rounds != 10 || b.WarmupRounds != 1 || b.Tool != "bench_serving" {
		t.Errorf("benchmark read back %+v", b)
	}
}

// FuzzParseSidecar: any YAML gives a deployment or an error, never a panic,
// and a deployment it gives (runs, rules and their expressions) deploys the
// silicon fixture's rows or refuses them with an error, never a panic.
func FuzzParseSidecar(f *testing.F) {
	f.Add(read(f, "vllm_bench.yaml"))
	f.Add([]byte("tp: [1]\n"))
	f.Add([]byte("runs:\n  a: &x {benchmark: {rounds: 10, length_spread: [0.8, 1]}}\n  b: *x\n"))
	f.Add([]byte("rules:\n  - {name: a, match: {model: Llama-3.1-70B, tp: [1, 2], concurrency: [4, 64]}, moe_ep: 2, engine_config: {x: '= ceil_to(concurrency + isl, 64)', y: {z: '= osl / tp'}}}\n"))
	silicon := read(f, "silicon.csv")
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseSidecar("s.yaml", data)
		if err != nil {
			return
		}
		_, _ = Parse("silicon.csv", silicon, "", d)
	})
}

// TestImportRereadsOlderReader: a file imported by an older reader is read
// again on the next import — its rows updated in place (same ids) and their
// cached predictions dropped — and is unchanged after that; a reader that reads
// other lines than the stored ones is refused, the store left as it was.
func TestImportRereadsOlderReader(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "m.sqlite"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	db := storetest.DB(t, st)
	ms, err := Parse("silicon.csv", read(t, "silicon.csv"), "", Deployment{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Import(ctx, st, ms, Deployment{}, "t0"); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	if err := db.SelectContext(ctx, &ids, `SELECT id FROM measurements ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	// As an older reader left it: another concurrency, a cached prediction, no reader recorded.
	for _, q := range []string{
		`UPDATE measurement_sources SET reader = ''`,
		`UPDATE measurements SET concurrency = 2048 WHERE line = 2`,
		`INSERT INTO measurement_predictions (measurement_id, calibration, evaluator, point_key, model_used, version_used,
			version_mapping, engine_profile, reason) SELECT id, '', 'ev', NULL, model, version, 'exact', '', 'test' FROM measurements`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	res, err := Import(ctx, st, ms, Deployment{}, "t1")
	if err != nil || !res.Reread || res.ReadBy != "" || res.Rows != 2 {
		t.Fatalf("import after an older reader: %+v %v, want both rows read again", res, err)
	}
	var got []struct {
		ID          int64 `db:"id"`
		Concurrency int   `db:"concurrency"`
	}
	if err := db.SelectContext(ctx, &got, `SELECT id, concurrency FROM measurements ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != ids[0] || got[1].ID != ids[1] || got[0].Concurrency != ms[0].Concurrency {
		t.Errorf("rows after the re-read %+v, want ids %v and concurrency %d again", got, ids, ms[0].Concurrency)
	}
	var n int
	if err := db.GetContext(ctx, &n, `SELECT count(*) FROM measurement_predictions`); err != nil || n != 0 {
		t.Errorf("%d cached predictions of the old reading kept (%v)", n, err)
	}
	var reader string
	if err := db.GetContext(ctx, &reader, `SELECT reader FROM measurement_sources`); err != nil || reader != ReaderVersion(FormatAICSilicon) {
		t.Errorf("reader %q (%v), want %q", reader, err, ReaderVersion(FormatAICSilicon))
	}
	if res, err := Import(ctx, st, ms, Deployment{}, "t2"); err != nil || !res.Unchanged {
		t.Errorf("import by the same reader: %+v %v, want unchanged", res, err)
	}
	// Lines the stored rows do not have: refused, nothing changed.
	if _, err := db.ExecContext(ctx, `UPDATE measurement_sources SET reader = 'aic-silicon/1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `UPDATE measurements SET concurrency = 7 WHERE line = 2`); err != nil {
		t.Fatal(err)
	}
	if _, err := Import(ctx, st, ms[:1], Deployment{}, "t3"); err == nil || !strings.Contains(err.Error(), "import it into a fresh store") {
		t.Errorf("re-read of other lines: %v, want refused", err)
	}
	if err := db.GetContext(ctx, &n, `SELECT concurrency FROM measurements WHERE line = 2`); err != nil || n != 7 {
		t.Errorf("refused re-read changed the store: concurrency %d (%v)", n, err)
	}
}
