package store

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func traceMeta(name, sha string) TraceMeta {
	return TraceMeta{Name: name, Format: "jsonl", Source: "x.jsonl", SHA256: strings.Repeat(sha, 64)[:64],
		HashBlock: 512, Params: "{}", ImportedAt: "2026-01-01T00:00:00Z"}
}

// rowsOf emits n requests one second apart; failAt > 0 fails at that row.
func rowsOf(n, failAt int) func(func(TraceRow) error) error {
	return func(emit func(TraceRow) error) error {
		for i := range n {
			if i == failAt && failAt > 0 {
				return fmt.Errorf("x.jsonl: line %d: field isl: bad", i+1)
			}
			r := TraceRow{Line: i + 1, ArrivalMs: float64(i) * 1000, ISL: 100 + i, OSL: 10, HashIDs: "[1,2]"}
			if i%2 == 0 {
				r.Session, r.ThinkMs = "s", 5
			}
			if err := emit(r); err != nil {
				return err
			}
		}
		return nil
	}
}

func countTraceRows(t *testing.T, s *Store) (int, int) {
	t.Helper()
	var a, b int
	if err := s.db.Get(&a, `SELECT count(*) FROM traces`); err != nil {
		t.Fatal(err)
	}
	if err := s.db.Get(&b, `SELECT count(*) FROM trace_requests`); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// TestImportTrace: whole or nothing, idempotent by content hash, names unique, and
// slices (window, rate scale, limit) applied in SQL.
func TestImportTrace(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "t.sqlite"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// 300 rows: more than two insert batches.
	res, err := s.ImportTrace(ctx, traceMeta("a", "1"), rowsOf(300, 0))
	if err != nil || res.Unchanged || res.Info.Requests != 300 || res.Info.LastMs != 299000 {
		t.Fatalf("import: %+v, %v", res, err)
	}
	res, err = s.ImportTrace(ctx, traceMeta("b", "1"), rowsOf(300, 0))
	if err != nil || !res.Unchanged || res.Info.Name != "a" {
		t.Fatalf("same content under another name: %+v, %v; want unchanged, named a", res, err)
	}
	if _, err := s.ImportTrace(ctx, traceMeta("a", "2"), rowsOf(5, 0)); !errors.Is(err, ErrTraceNameTaken) {
		t.Fatalf("other content under a taken name: %v", err)
	}
	if _, err := s.ImportTrace(ctx, traceMeta("c", "3"), rowsOf(300, 250)); err == nil || err.Error() != "x.jsonl: line 251: field isl: bad" {
		t.Fatalf("bad row: %v", err)
	}
	if a, b := countTraceRows(t, s); a != 1 || b != 300 {
		t.Fatalf("after the failed imports: %d traces, %d requests; want 1, 300 (store unchanged)", a, b)
	}
	info, err := s.Trace(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	var got []TraceRow
	err = s.TraceRequests(ctx, info.ID, TraceSlice{StartMs: 10000, EndMs: 20000, Scale: 2, Limit: 3}, func(r TraceRow) error {
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "[{10 11 0 110 10 [1,2] s 2.5} {11 12 500 111 10 [1,2]  0} {12 13 1000 112 10 [1,2] s 2.5}]"
	if fmt.Sprint(got) != want {
		t.Fatalf("slice:\n got %v\nwant %s", got, want)
	}
	n := 0
	if err := s.TraceRequests(ctx, info.ID, TraceSlice{StartMs: 295000}, func(TraceRow) error { n++; return nil }); err != nil || n != 5 {
		t.Fatalf("open-ended window: %d rows, %v; want 5", n, err)
	}
	if err := s.DeleteTrace(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if a, b := countTraceRows(t, s); a != 0 || b != 0 {
		t.Fatalf("after rm: %d traces, %d requests", a, b)
	}
	if err := s.DeleteTrace(ctx, "a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rm twice: %v", err)
	}
}
