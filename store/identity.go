package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"

	"github.com/jmoiron/sqlx"
)

// AppID is the SQLite application_id (PRAGMA application_id, file header offset
// 68) of every aicdb store: "aicd" in ASCII. Open refuses an existing file that does
// not carry it, unless it is a store written before aicdb set it (it has aicdb's
// goose_db_version and store_meta tables); such a store gets it on its next
// writable open.
const AppID = 0x61696364

type storeKind int

const (
	kindMissing storeKind = iota // no file: may be created
	kindBlank                    // an empty file, or a SQLite file with no schema
	kindStore                    // an aicdb store (AppID, or a legacy store)
	kindForeign                  // anything else: never opened for writing
)

// identity is what identify found at a path.
type identity struct {
	kind   storeKind
	detail string // why a blank or foreign file is not a store
}

// sqliteMagic starts every SQLite 3 database file.
const sqliteMagic = "SQLite format 3\x00"

// identify tells what path holds without changing anything there: it reads the file
// header, and only when the header does not carry AppID it looks at the schema
// through a read-only (immutable unless a WAL file is present) connection, which
// neither writes the file nor creates -wal or -shm files beside it.
func identify(ctx context.Context, path string) (identity, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return identity{kind: kindMissing}, nil
	}
	if err != nil {
		return identity{}, fmt.Errorf("open store %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return identity{}, fmt.Errorf("open store %s: %w", path, err)
	}
	if fi.IsDir() {
		return identity{kind: kindForeign, detail: "it is a directory"}, nil
	}
	if fi.Size() == 0 {
		return identity{kind: kindBlank, detail: "it is an empty file"}, nil
	}
	var h [100]byte
	if _, err := io.ReadFull(f, h[:]); err != nil || string(h[:16]) != sqliteMagic {
		return identity{kind: kindForeign, detail: "it is not a SQLite database"}, nil
	}
	if binary.BigEndian.Uint32(h[68:72]) == AppID {
		return identity{kind: kindStore}, nil
	}
	return probe(ctx, path)
}

// probe reads the application_id and the table names of a SQLite file whose header
// does not carry AppID (the WAL may hold a newer header, or it predates AppID).
func probe(ctx context.Context, path string) (identity, error) {
	dsn := "file:" + uriPath(path) + "?mode=ro"
	if _, err := os.Stat(path + "-wal"); err != nil {
		dsn += "&immutable=1"
	}
	db, err := sqlx.Open("sqlite", dsn)
	if err != nil {
		return identity{}, fmt.Errorf("open store %s: %w", path, err)
	}
	defer db.Close()
	var app int64
	var tables []string
	if err := db.GetContext(ctx, &app, `PRAGMA application_id`); err != nil {
		return identity{kind: kindForeign, detail: fmt.Sprintf("it cannot be read as SQLite: %v", err)}, nil
	}
	if err := db.SelectContext(ctx, &tables, `SELECT name FROM sqlite_schema`); err != nil {
		return identity{kind: kindForeign, detail: fmt.Sprintf("it cannot be read as SQLite: %v", err)}, nil
	}
	switch {
	case app == AppID:
		return identity{kind: kindStore}, nil
	case app != 0:
		return identity{kind: kindForeign, detail: fmt.Sprintf("it belongs to another application (application_id %#x)", app)}, nil
	case len(tables) == 0:
		return identity{kind: kindBlank, detail: "it is a SQLite database with no tables"}, nil
	case slices.Contains(tables, "goose_db_version") && slices.Contains(tables, "store_meta"):
		return identity{kind: kindStore}, nil // written before aicdb set application_id
	}
	return identity{kind: kindForeign, detail: "it is a SQLite database without aicdb's tables"}, nil
}

// notStore is the one-line error for a file that is not an aicdb store.
func notStore(path, detail string) error {
	return fmt.Errorf("%s is not an aicdb store (%s): pass an aicdb store with --db, or create one with 'aicdb init --db NEW.sqlite'", path, detail)
}
