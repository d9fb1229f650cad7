package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// hostileStatements is the grammar's statement pool: reads, and every kind of write
// a read-only query must not do ({dir} is the store's folder).
var hostileStatements = []string{
	"select * from sweeps",
	"select count(*) from pareto",
	"select key from points limit 1",
	"values (1)",
	"with x as (select 1) select * from x",
	"select * from store_meta where key = 'owner'",
	"pragma query_only=0",
	"PRAGMA query_only = OFF",
	"pragma journal_mode=delete",
	"pragma user_version=7",
	"pragma application_id=1",
	"pragma writable_schema=1",
	"attach '{dir}/a.db' as a",
	"detach a",
	"vacuum",
	"vacuum into '{dir}/v.db'",
	"delete from sweeps",
	"delete from store_meta",
	"drop view pareto",
	"drop table store_meta",
	"insert into store_meta values ('x', 'y')",
	"replace into store_meta values ('owner', 'z')",
	"update sweeps set status = 'x'",
	"create table t(a)",
	"create temp table t(a)",
	"create view v as select 1",
	"create index i on sweeps(status)",
	"alter table sweeps add column z",
	"reindex",
	"analyze",
	"begin",
	"commit",
	"savepoint s",
	"with d as (select 1) delete from sweeps",
	"select load_extension('x')",
	"select * from pareto where ttft_steady_p99 < 200",
}

// grammarSQL builds one to four statements from hostileStatements, each in a
// random letter case, with optional comments and separators; pick(n) returns a
// choice in [0, n).
func grammarSQL(pick func(n int) int, dir string) string {
	var b strings.Builder
	n := 1 + pick(4)
	for i := 0; i < n; i++ {
		switch pick(4) {
		case 1:
			b.WriteString("/* c; */ ")
		case 2:
			b.WriteString("-- c;\n")
		}
		st := strings.ReplaceAll(hostileStatements[pick(len(hostileStatements))], "{dir}", dir)
		switch pick(3) {
		case 1:
			st = strings.ToUpper(st)
		case 2:
			r := []byte(st)
			for j := range r {
				if pick(2) == 1 && r[j] >= 'a' && r[j] <= 'z' {
					r[j] -= 'a' - 'A'
				}
			}
			st = string(r)
		}
		b.WriteString(st)
		if i < n-1 || pick(2) == 1 {
			b.WriteString([]string{";", "; ", ";\n"}[pick(3)])
		}
	}
	return b.String()
}

// freshCopy copies the store db into a new folder under base and returns its path:
// every case starts from the same bytes, so a failing case is reported as itself.
func freshCopy(t interface {
	Helper()
	Fatal(...any)
}, base, db string) string {
	t.Helper()
	dir, err := os.MkdirTemp(base, "case")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, filepath.Base(db))
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkQueryLeavesStore runs the SQL that build makes for a fresh copy of db (its
// folder) without --write and fails if the copy's bytes or its folder changed, or
// the exit code is not 0 or 1.
func checkQueryLeavesStore(t *testing.T, fail func(string, ...any), base, db string, build func(dir string) string) {
	p := freshCopy(t, base, db)
	defer os.RemoveAll(filepath.Dir(p))
	sum0, files0 := storeDigest(t, p)
	q := build(filepath.Dir(p))
	code, _, errs := cliRun(t, p, "query", q)
	if code != 0 && code != 1 {
		fail("%q: exit %d (%s)", q, code, errs)
	}
	if sum, files := storeDigest(t, p); sum != sum0 || !slices.Equal(files, files0) {
		fail("%q changed the store (exit %d, %s): files %v → %v", q, code, errs, files0, files)
	}
}

// TestQueryReadOnlyProperty (issue 8 item 5): random statement mixtures from the
// grammar never change the store without --write.
func TestQueryReadOnlyProperty(t *testing.T) {
	db := integrityStore(t)
	storeDigest(t, db) // checkpoint: the copies hold every row
	base := t.TempDir()
	rapid.Check(t, func(rt *rapid.T) {
		pick := func(n int) int { return rapid.IntRange(0, n-1).Draw(rt, "pick") }
		checkQueryLeavesStore(t, rt.Fatalf, base, db, func(dir string) string { return grammarSQL(pick, dir) })
	})
}

// FuzzQueryReadOnly is the same property driven by the fuzzer's bytes (each byte
// one grammar choice); `go test` runs the seed corpus only.
func FuzzQueryReadOnly(f *testing.F) {
	for _, s := range []string{"", "\x00\x06", "\x01\x00\x06\x00\x10", "\x02\x01\x0c\x02\x01\x0f", "\x03\x02\x07\x01\x00\x11\x00\x12",
		"\x00\x00\x0e", "\x00\x00\x1f\x02", "\x01\x01\x21\x01\x00\x10\x00", "\x00\x03\x23\x00"} {
		f.Add([]byte(s))
	}
	db := integrityStore(f)
	storeDigest(f, db)
	base := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		pick := func(n int) int {
			if len(data) == 0 {
				return 0
			}
			c := int(data[0])
			data = data[1:]
			return c % n
		}
		checkQueryLeavesStore(t, t.Fatalf, base, db, func(dir string) string { return grammarSQL(pick, dir) })
	})
}

// TestQueryStaleViewsHint: a read-only query whose store's views another aicdb
// version made (their recorded fingerprint differs) fails with the SQLite error
// and names the command that refreshes them; on an up-to-date store the same
// error carries no such hint, and after the refresh the store is up to date.
func TestQueryStaleViewsHint(t *testing.T) {
	db := newStore(t, filepath.Join(t.TempDir(), "v.sqlite"))
	const bad = "select no_such_column from point_calibrations"
	hint := "this store's views were made by another aicdb version: 'aicdb init --db " + db + "' refreshes them, nothing else changes"
	code, _, errs := cliRun(t, db, "query", bad)
	if code != 1 || !strings.Contains(errs, "no such column: no_such_column") || strings.Contains(errs, "views were made") {
		t.Fatalf("up-to-date store: %d %q, want the error without the hint", code, errs)
	}
	// What an older binary leaves: another fingerprint (the writable open of
	// --write records the current one first; the statement then replaces it).
	if code, _, errs := cliRun(t, db, "query", "--write", "update store_meta set value = 'older' where key = 'views_version'"); code != 0 {
		t.Fatal(errs)
	}
	code, _, errs = cliRun(t, db, "query", bad)
	if code != 1 || !strings.Contains(errs, "no such column: no_such_column") || !strings.Contains(errs, hint) {
		t.Fatalf("stale views: %d %q, want the error and %q", code, errs, hint)
	}
	if code, _, errs := cliRun(t, db, "init"); code != 0 {
		t.Fatal(errs)
	}
	if code, _, errs = cliRun(t, db, "query", bad); code != 1 || strings.Contains(errs, "views were made") {
		t.Fatalf("after init: %d %q, want no hint", code, errs)
	}
}
