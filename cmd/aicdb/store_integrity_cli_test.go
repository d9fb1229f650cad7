package main

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// integrityStore creates a migrated store holding a few rows in tables a write
// would change (store_meta, sweeps), so any write shows in the file's bytes.
func integrityStore(t testing.TB) string {
	t.Helper()
	t.Setenv("AICDB_EVALUATOR", "synthetic")
	db := filepath.Join(t.TempDir(), "s.sqlite")
	st, err := store.Open(context.Background(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO store_meta VALUES ('owner', 'test')`,
		`INSERT INTO sweeps (arguments, started_at, status) VALUES ('{}', 'x', 'done')`,
		`INSERT INTO sweeps (arguments, started_at, status) VALUES ('{"b":1}', 'y', 'done')`,
	} {
		if _, err := storetest.DB(t, st).Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	return db
}

// storeDigest checkpoints the store's WAL into the main file and returns the
// sha256 of the main file and the sorted names of every file in its directory
// (a write, an ATTACH or a VACUUM INTO shows in one of them).
func storeDigest(t interface {
	Helper()
	Fatal(...any)
}, db string) (string, []string) {
	t.Helper()
	if _, err := os.Stat(db + "-wal"); err == nil {
		s, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(5000)")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	f, err := os.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(filepath.Dir(db))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if n := e.Name(); n != filepath.Base(db)+"-wal" && n != filepath.Base(db)+"-shm" {
			names = append(names, n)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), names
}

// TestQueryCannotWrite (issue 8 item 5): without --write no statement changes the
// store or creates a file, even one that switches query_only off first; each is
// refused with exit 1 and one line.
func TestQueryCannotWrite(t *testing.T) {
	db := integrityStore(t)
	dir := filepath.Dir(db)
	sum0, files0 := storeDigest(t, db)
	for _, q := range []string{
		"pragma query_only=0; delete from sweeps",
		"PRAGMA query_only = false; DROP VIEW pareto",
		"pragma query_only=0",
		"pragma journal_mode=delete",
		"delete from store_meta",
		"select 1; delete from store_meta",
		"select 1; pragma query_only=0; delete from store_meta",
		"attach '" + filepath.Join(dir, "evil.db") + "' as evil",
		"vacuum into '" + filepath.Join(dir, "copy.db") + "'",
		"vacuum",
		"create temp table x(a)",
		"with d as (select 1) delete from sweeps",
		"insert into store_meta values ('a', 'b')",
		"/* comment */ pragma query_only=0; update store_meta set value = 'x'",
		"select load_extension('libx')",
	} {
		code, _, errs := cliRun(t, db, "query", q)
		if code != 1 || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%q: code %d stderr %q, want exit 1 with one line", q, code, errs)
		}
		if sum, files := storeDigest(t, db); sum != sum0 || !slices.Equal(files, files0) {
			t.Fatalf("%q changed the store: files %v → %v", q, files0, files)
		}
	}
	// The pragma change must not outlive the command: journal_mode is still wal.
	code, out, errs := cliRun(t, db, "query", "--format", "csv", "select count(*) from sweeps")
	if code != 0 || out != "count(*)\n2\n" {
		t.Fatalf("count after the attempts: code %d out %q err %q", code, out, errs)
	}
	// Read-only introspection stays available.
	code, out, errs = cliRun(t, db, "query", "--format", "csv", "select name from pragma_table_info('store_meta') order by cid")
	if code != 0 || out != "name\nkey\nvalue\n" {
		t.Fatalf("pragma_table_info: code %d out %q err %q", code, out, errs)
	}
	// --write keeps today's behaviour.
	if code, _, errs := cliRun(t, db, "query", "--write", "delete from store_meta where key = 'owner'"); code != 0 {
		t.Fatalf("--write: code %d err %q", code, errs)
	}
	if sum, _ := storeDigest(t, db); sum == sum0 {
		t.Fatal("--write did not change the store")
	}
}

// TestOpenDoesNotRewriteViews (issue 8 item 6): opening an up-to-date store leaves
// its schema alone (the schema cookie does not move).
func TestOpenDoesNotRewriteViews(t *testing.T) {
	db := integrityStore(t)
	sum0, _ := storeDigest(t, db)
	for _, args := range [][]string{
		{"query", "select * from pareto where ttft_steady_p99 < 200"},
		{"query", "--write", "select count(*) from points"},
	} {
		if code, _, errs := cliRun(t, db, args...); code != 0 {
			t.Fatalf("%v: code %d err %q", args, code, errs)
		}
		if sum, _ := storeDigest(t, db); sum != sum0 {
			t.Fatalf("%v rewrote the store", args)
		}
	}
}

// TestCommandsRefuseForeignFiles (issue 8 item 7): every command but init refuses
// a file that is not an aicdb store, leaves it byte-identical and creates nothing.
func TestCommandsRefuseForeignFiles(t *testing.T) {
	t.Setenv("AICDB_EVALUATOR", "synthetic")
	dir := t.TempDir()
	foreign := filepath.Join(dir, "someone-elses.sqlite")
	s, err := sql.Open("sqlite", foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(`CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('keep me')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("not a database at all\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	commands := [][]string{
		sweepArgs,
		{"query", "select 1"},
		{"query", "--write", "select 1"},
		{"best", "--ttft", "200"},
		{"perfdb", "ls", "systems"},
		{"perfdb", "import", "../../testdata"},
		{"estimate", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--isl", "1024", "--osl", "2", "--tp", "8", "--batch", "2"},
	}
	for _, path := range []string{foreign, text} {
		before, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, args := range append(commands, []string{"init"}) {
			code, _, errs := cliRun(t, path, args...)
			if code != 1 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, path) ||
				!strings.Contains(errs, "not an aicdb store") {
				t.Errorf("%s %v: code %d stderr %q, want exit 1, one line naming the file", filepath.Base(path), args[0], code, errs)
			}
			after, _ := os.ReadFile(path)
			if string(after) != string(before) {
				t.Fatalf("%s %v changed the file", filepath.Base(path), args)
			}
		}
	}
	// A typo'd path: refused, and no file (nor -wal/-shm) is left behind. estimate
	// answers from the embedded data when the store does not exist.
	typo := filepath.Join(dir, "typo.sqlite")
	if code, _, errs := cliRun(t, typo, commands[len(commands)-1]...); code != 0 {
		t.Errorf("estimate without a store: code %d stderr %q", code, errs)
	}
	for _, args := range commands[:len(commands)-1] {
		code, _, errs := cliRun(t, typo, args...)
		if code != 1 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, typo) ||
			!strings.Contains(errs, "aicdb init --db "+typo) {
			t.Errorf("typo %v: code %d stderr %q, want exit 1 naming the path and 'aicdb init --db'", args[0], code, errs)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("files left behind: %v", names)
	}
}

// TestLegacyStoreOpens (issue 8 item 7): a store written before aicdb set its
// application_id still opens (query, sweep) and is stamped on its next writable open.
func TestLegacyStoreOpens(t *testing.T) {
	db := integrityStore(t)
	s, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(`PRAGMA application_id = 0`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	code, out, errs := cliRun(t, db, "query", "--format", "csv", "select count(*) from sweeps")
	if code != 0 || out != "count(*)\n2\n" {
		t.Fatalf("query on a legacy store: code %d out %q err %q", code, out, errs)
	}
	if code, _, errs := cliRun(t, db, sweepArgs...); code != 0 {
		t.Fatalf("sweep on a legacy store: code %d err %q", code, errs)
	}
	code, out, _ = cliRun(t, db, "query", "--format", "json", "select * from pragma_application_id")
	var got []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got) != 1 || got[0]["application_id"] == float64(0) {
		t.Fatalf("application_id after a writable open: code %d out %q", code, out)
	}
}

// TestQueryNonFinite (issue 8 surface defect): a non-finite value prints as null
// (json), empty (csv) or "-" (table) with one warning on stderr, exit 0.
func TestQueryNonFinite(t *testing.T) {
	db := integrityStore(t)
	for _, c := range []struct{ format, want string }{
		{"json", "[\n  {\"a\": null, \"b\": null, \"c\": 1}\n]\n"},
		{"csv", "a,b,c\n,,1\n"},
	} {
		code, out, errs := cliRun(t, db, "query", "--format", c.format, "select 1e308*10 as a, -1e308*10 as b, 1 as c")
		if code != 0 || out != c.want || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, "non-finite") {
			t.Errorf("%s: code %d out %q err %q, want %q and one warning", c.format, code, out, errs, c.want)
		}
	}
	code, out, errs := cliRun(t, db, "query", "select 1e308*10 as a, 2.5 as b")
	if code != 0 || strings.Contains(strings.ToLower(out), "inf") || !strings.Contains(out, "-") || !strings.Contains(errs, "non-finite") {
		t.Errorf("table: code %d out %q err %q", code, out, errs)
	}
}
