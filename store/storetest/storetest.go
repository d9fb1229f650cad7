// Package storetest gives tests outside store/ a temporary store and their own
// SQL handle on a store file, to check or corrupt what the code under test
// wrote. Production code
// never imports it (TestSQLStaysInStore): it reaches the store through
// store.Store's methods only.
package storetest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/aicdb/aicdb/store"
)

// DB opens a second handle on st's file, read-only when st is, closed when the
// test ends.
func DB(tb testing.TB, st *store.Store) *sqlx.DB {
	tb.Helper()
	db, err := sqlx.Open("sqlite", store.DSN(st.Path, st.ReadOnly))
	if err != nil {
		tb.Fatalf("storetest: open %s: %v", st.Path, err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// Temp opens a new store in the test's temporary directory, closed when the
// test ends.
func Temp(tb testing.TB) *store.Store {
	tb.Helper()
	st, err := store.Open(context.Background(), filepath.Join(tb.TempDir(), "store.sqlite"), store.Options{})
	if err != nil {
		tb.Fatalf("storetest: %v", err)
	}
	tb.Cleanup(func() { st.Close() })
	return st
}
