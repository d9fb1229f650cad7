package store

import (
	"context"
	"path/filepath"
	"testing"
)

func TestOpenMigratesAndCreatesViews(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.sqlite")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var v int
	if err := s.db.GetContext(ctx, &v, `SELECT version FROM store_version`); err != nil {
		t.Fatal(err)
	}
	if v < 1 {
		t.Fatalf("schema version %d, want ≥ 1", v)
	}
	var mode string
	if err := s.db.GetContext(ctx, &mode, `PRAGMA journal_mode`); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Fatalf("journal_mode %q, want wal", mode)
	}
	s.Close()
	// Re-open is idempotent.
	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

func TestReadOnlyRefusesWrites(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.sqlite")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	ro, err := Open(ctx, path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.db.ExecContext(ctx, `INSERT INTO store_meta VALUES ('k','v')`); err == nil {
		t.Fatal("write through a read-only store succeeded")
	}
}

func TestOpenMissingReadOnly(t *testing.T) {
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), "nope.sqlite"), Options{ReadOnly: true})
	if err == nil {
		t.Fatal("opening a missing store read-only succeeded")
	}
}
