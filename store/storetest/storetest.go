// Package storetest gives tests outside store/ their own SQL handle on a store
// file, to check or corrupt what the code under test wrote. Production code
// never imports it (TestSQLStaysInStore): it reaches the store through
// store.Store's methods only.
package storetest

import (
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
