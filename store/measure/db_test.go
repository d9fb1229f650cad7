package measure

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// TestImportIdempotent: a file is stored once (its content hash); its rows read
// back as parsed; a row the store refuses rolls the whole file back.
func TestImportIdempotent(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "m.sqlite"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
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

// FuzzParseSidecar: any YAML gives a deployment or an error, never a panic.
func FuzzParseSidecar(f *testing.F) {
	f.Add(read(f, "vllm_bench.yaml"))
	f.Add([]byte("tp: [1]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseSidecar("s.yaml", data)
	})
}
