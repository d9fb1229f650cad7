package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestOpenRefusesForeignFiles (issue 8 item 7): whatever the options, a file that is
// not an aicdb store is refused with a message naming it, and neither it nor its
// folder changes (no -wal or -shm appear, even for a WAL-mode foreign database).
func TestOpenRefusesForeignFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	wal := filepath.Join(dir, "wal.db")
	other := filepath.Join(dir, "other.db")
	for _, c := range []struct{ path, sql string }{
		{wal, `PRAGMA journal_mode = WAL; CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('x')`},
		{other, `PRAGMA application_id = 1234; CREATE TABLE store_meta (key TEXT); CREATE TABLE goose_db_version (id INTEGER)`},
	} {
		db, err := sql.Open("sqlite", c.path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(c.sql); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	text := filepath.Join(dir, "a.txt")
	os.WriteFile(text, []byte(strings.Repeat("text ", 40)), 0o644)
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	before := dirNames(t, dir)
	for _, c := range []struct{ path, why string }{
		{wal, "without aicdb's tables"}, {other, "application_id 0x4d2"}, {text, "not a SQLite database"}, {sub, "directory"},
	} {
		b0, _ := os.ReadFile(c.path)
		for _, o := range []Options{{}, {MustExist: true}, {ReadOnly: true}} {
			s, err := Open(ctx, c.path, o)
			if err == nil {
				s.Close()
				t.Fatalf("%s %+v: opened", c.path, o)
			}
			if msg := err.Error(); !strings.Contains(msg, c.path+" is not an aicdb store") || !strings.Contains(msg, c.why) || strings.Contains(msg, "\n") {
				t.Errorf("%s %+v: %q, want it to name the file and say %q", c.path, o, msg, c.why)
			}
			if b, _ := os.ReadFile(c.path); string(b) != string(b0) {
				t.Fatalf("%s %+v: file changed", c.path, o)
			}
			if got := dirNames(t, dir); !slices.Equal(got, before) {
				t.Fatalf("%s %+v: folder %v → %v", c.path, o, before, got)
			}
		}
	}
}

// TestOpenMissingCreatesNothing: without permission to create, a missing path is
// refused naming the fix, and nothing appears.
func TestOpenMissingCreatesNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "typo.sqlite")
	for _, o := range []Options{{MustExist: true}, {ReadOnly: true}} {
		_, err := Open(context.Background(), p, o)
		if err == nil || !strings.Contains(err.Error(), "aicdb init --db "+p) {
			t.Fatalf("%+v: %v", o, err)
		}
	}
	if names := dirNames(t, dir); len(names) != 0 {
		t.Fatalf("left behind: %v", names)
	}
	// An empty file is not a store either (init may fill it).
	os.WriteFile(p, nil, 0o644)
	if _, err := Open(context.Background(), p, Options{MustExist: true}); err == nil || !strings.Contains(err.Error(), "empty file") {
		t.Fatalf("empty file: %v", err)
	}
	s, err := Open(context.Background(), p, Options{})
	if err != nil {
		t.Fatalf("init on an empty file: %v", err)
	}
	s.Close()
}

func headerAppID(t *testing.T, path string) uint32 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 100 {
		t.Fatalf("read %s: %v", path, err)
	}
	return binary.BigEndian.Uint32(b[68:72])
}

// TestOpenLegacyStore: a store written before application_id was set opens
// read-only untouched and is stamped by its next writable open.
func TestOpenLegacyStore(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "old.sqlite")
	s, err := Open(ctx, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if got := headerAppID(t, p); got != AppID {
		t.Fatalf("application_id %#x after init, want %#x", got, AppID)
	}
	db, _ := sql.Open("sqlite", p)
	if _, err := db.Exec(`PRAGMA application_id = 0`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	b0, _ := os.ReadFile(p)
	ro, err := Open(ctx, p, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a legacy store: %v", err)
	}
	ro.Close()
	if b, _ := os.ReadFile(p); string(b) != string(b0) {
		t.Fatal("read-only open changed the legacy store")
	}
	rw, err := Open(ctx, p, Options{MustExist: true})
	if err != nil {
		t.Fatalf("writable open of a legacy store: %v", err)
	}
	rw.Close()
	if got := headerAppID(t, p); got != AppID {
		t.Fatalf("application_id %#x after a writable open, want %#x", got, AppID)
	}
}

// TestOpenNewerSchemaRefused: a store migrated by a newer aicdb is refused, not
// opened with views this binary does not understand.
func TestOpenNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "new.sqlite")
	s, err := Open(ctx, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (99999, 1)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, o := range []Options{{}, {ReadOnly: true}} {
		if _, err := Open(ctx, p, o); err == nil || !strings.Contains(err.Error(), "schema version 99999, newer") {
			t.Fatalf("%+v: %v", o, err)
		}
	}
}

func schemaCookie(t *testing.T, s *Store) int {
	t.Helper()
	var v int
	if err := s.db.Get(&v, `PRAGMA schema_version`); err != nil {
		t.Fatal(err)
	}
	return v
}

// TestReopenKeepsViews (issue 8 item 6): reopening an up-to-date store does not
// touch its schema; a changed views version re-creates the views once.
func TestReopenKeepsViews(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "v.sqlite")
	s, err := Open(ctx, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c0 := schemaCookie(t, s)
	s.Close()
	s, err = Open(ctx, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c := schemaCookie(t, s); c != c0 {
		t.Fatalf("schema cookie %d → %d: reopening rewrote the schema", c0, c)
	}
	if _, err := s.db.Exec(`UPDATE store_meta SET value = 'old' WHERE key = ?`, viewsVersionKey); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c1 := schemaCookie(t, s)
	if c1 == c0 {
		t.Fatal("a changed views version did not re-create the views")
	}
	var n int
	if err := s.db.Get(&n, `SELECT count(*) FROM pareto`); err != nil {
		t.Fatalf("views after re-creation: %v", err)
	}
	want, _, _ := viewsVersion(0)
	var got string
	s.db.Get(&got, `SELECT value FROM store_meta WHERE key = ?`, viewsVersionKey)
	if !strings.HasPrefix(got, strings.SplitN(want, "@", 2)[0]+"@") {
		t.Fatalf("views version %q after re-creation, want the embedded hash", got)
	}
}
