package store

import (
	"context"
	"path/filepath"
	"testing"
)

// BenchmarkOpenUpToDate measures a writable open and close of a migrated store whose
// views are current: what every command pays before its work (no write happens).
func BenchmarkOpenUpToDate(b *testing.B) {
	ctx := context.Background()
	p := filepath.Join(b.TempDir(), "b.sqlite")
	s, err := Open(ctx, p, Options{})
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	b.ReportAllocs()
	for b.Loop() {
		s, err := Open(ctx, p, Options{MustExist: true})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}

// BenchmarkOpenReadOnly measures a read-only (mode=ro) open and close.
func BenchmarkOpenReadOnly(b *testing.B) {
	ctx := context.Background()
	p := filepath.Join(b.TempDir(), "b.sqlite")
	s, err := Open(ctx, p, Options{})
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	b.ReportAllocs()
	for b.Loop() {
		s, err := Open(ctx, p, Options{ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
