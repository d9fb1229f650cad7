// Package store opens the aicdb SQLite file: WAL journal, busy timeout, foreign keys,
// the embedded goose migrations applied, and the embedded views re-created when
// their definition changed; files that are not aicdb stores are refused untouched.
// SQL strings live only here (and in store's subpackages), in migrations/ and in
// views/: refine, perfdb and the CLI read and write the store through Store's
// methods, which own the transactions; the database handle is not exported.
// TestSQLStaysInStore enforces it. The user's own SQL (aicdb query) reaches the
// store as data, through QueryReadOnly or QueryWrite.
package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/aicdb/aicdb/migrations"
	"github.com/aicdb/aicdb/views"
)

func init() {
	sqlx.BindDriver("sqlite", sqlx.QUESTION)
}

// Store is an open aicdb file.
type Store struct {
	db       *sqlx.DB
	Path     string
	ReadOnly bool
}

// Options control how a store is opened. An existing file is opened only if it is an
// aicdb store (see AppID); a missing one is created only when neither ReadOnly nor
// MustExist is set (aicdb init does that; every other command sets MustExist).
type Options struct {
	// ReadOnly opens the file read-only at the driver level (SQLITE_OPEN_READONLY via
	// mode=ro); it must already exist. It is neither migrated nor changed.
	ReadOnly bool
	// MustExist refuses to create a new file.
	MustExist bool
}

// ErrReadOnly is wrapped by Open when a writable open finds the file (or its
// directory) not writable by this process.
var ErrReadOnly = errors.New("store is read-only")

// uriPath escapes path for a SQLite URI filename (file:PATH?…): '%', '?' and '#'
// would otherwise start an escape, the query or the fragment.
func uriPath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}

// DSN returns the modernc DSN for path with the store's per-connection pragmas. A
// read-only DSN opens the file with mode=ro (SQLITE_OPEN_READONLY: every write
// fails, whatever PRAGMA a statement runs) and query_only on top.
func DSN(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
		return "file:" + uriPath(path) + "?mode=ro&" + q.Encode()
	}
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Set("_txlock", "immediate")
	return "file:" + uriPath(path) + "?" + q.Encode()
}

// Open opens (creating if allowed) the store at path. It first checks, without
// writing anything, that an existing file is an aicdb store (identify); a file that
// is not, or a missing one that may not be created, is refused and left as it was.
// A writable open applies pending migrations, stamps the application_id and
// re-creates the views only when their embedded definition changed. A read-only
// store is neither migrated nor changed.
func Open(ctx context.Context, path string, o Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("store path is empty: pass --db PATH")
	}
	id, err := identify(ctx, path)
	if err != nil {
		return nil, err
	}
	switch id.kind {
	case kindMissing:
		if o.ReadOnly || o.MustExist {
			return nil, fmt.Errorf("store %s does not exist: run 'aicdb init' first ('aicdb init --db %s' creates it)", path, path)
		}
	case kindBlank:
		if o.ReadOnly || o.MustExist {
			return nil, notStore(path, id.detail)
		}
	case kindForeign:
		return nil, notStore(path, id.detail)
	}
	if o.ReadOnly {
		return openReadOnly(ctx, path)
	}
	db, err := sqlx.Open("sqlite", DSN(path, false))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{db: db, Path: path}
	if err := s.checkWritable(ctx, id.kind); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// openReadOnly opens an existing store with mode=ro. A WAL store whose directory
// this process may not write (no -shm can be made) is opened immutable when it has
// no WAL content to read: nothing can be writing it then.
func openReadOnly(ctx context.Context, path string) (*Store, error) {
	open := func(dsn string) (*sqlx.DB, error) {
		db, err := sqlx.Open("sqlite", dsn)
		if err != nil {
			return nil, err
		}
		var n int
		if err := db.GetContext(ctx, &n, `SELECT count(*) FROM sqlite_schema`); err != nil {
			db.Close()
			return nil, err
		}
		return db, nil
	}
	db, err := open(DSN(path, true))
	if err != nil && readOnlyCode(err) && !hasWAL(path) {
		db, err = open(DSN(path, true) + "&immutable=1")
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{db: db, Path: path, ReadOnly: true}
	current, known, err := s.schemaVersions(ctx)
	if err != nil {
		db.Close()
		return nil, err
	}
	if current > 0 && current < known {
		// A read-only open cannot migrate, and this binary's reads (views,
		// calibration keys, new columns) assume the newest schema.
		db.Close()
		return nil, fmt.Errorf("store %s has schema version %d, older than this aicdb's %d: run 'aicdb init --db %s' once to migrate it (nothing else changes), then retry", path, current, known, path)
	}
	return s, nil
}

// checkWritable opens the first connection and reports ErrReadOnly when SQLite
// could open the file only read-only, or not at all for lack of write access.
func (s *Store) checkWritable(ctx context.Context, k storeKind) error {
	err := s.db.PingContext(ctx)
	if err != nil {
		if k != kindMissing && readOnlyCode(err) {
			return fmt.Errorf("store %s is read-only (the file or its directory is not writable): %w", s.Path, ErrReadOnly)
		}
		return fmt.Errorf("open store %s: %w", s.Path, err)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("open store %s: %w", s.Path, err)
	}
	defer conn.Close()
	var ro bool
	if err := conn.Raw(func(dc any) error {
		c, ok := dc.(interface{ IsReadOnly(string) (bool, error) })
		if !ok {
			return nil
		}
		var err error
		ro, err = c.IsReadOnly("main")
		return err
	}); err != nil {
		return fmt.Errorf("open store %s: %w", s.Path, err)
	}
	if ro {
		return fmt.Errorf("store %s is read-only (the file or its directory is not writable): %w", s.Path, ErrReadOnly)
	}
	return nil
}

// readOnlyCode reports SQLite errors that mean "cannot write here": SQLITE_READONLY
// (and its extended codes) and SQLITE_CANTOPEN (no -shm could be created).
func readOnlyCode(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN:
		return true
	}
	return false
}

// hasWAL reports a non-empty -wal file beside path.
func hasWAL(path string) bool {
	fi, err := os.Stat(path + "-wal")
	return err == nil && fi.Size() > 0
}

// Close closes the database handle.
func (s *Store) Close() error { return s.db.Close() }

// schemaVersions returns the store's applied schema version and the newest one
// this binary knows; a store written by a newer aicdb is refused.
func (s *Store) schemaVersions(ctx context.Context) (current, known int64, err error) {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return 0, 0, err
	}
	for _, n := range names {
		v, err := strconv.ParseInt(strings.SplitN(n, "_", 2)[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("migration %s: no version prefix", n)
		}
		known = max(known, v)
	}
	var tables int
	if err := s.db.GetContext(ctx, &tables, `SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'goose_db_version'`); err != nil {
		return 0, 0, fmt.Errorf("store %s: %w", s.Path, err)
	}
	if tables == 0 {
		return 0, known, nil
	}
	if err := s.db.GetContext(ctx, &current, `SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied = 1`); err != nil {
		return 0, 0, fmt.Errorf("store %s: read schema version: %w", s.Path, err)
	}
	if current > known {
		return current, known, fmt.Errorf("store %s has schema version %d, newer than this aicdb knows (%d): use a newer aicdb", s.Path, current, known)
	}
	return current, known, nil
}

// migrate applies pending migrations (none → no write), stamps AppID and brings
// the views up to date.
func (s *Store) migrate(ctx context.Context) error {
	current, known, err := s.schemaVersions(ctx)
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, s.db.DB, migrations.FS)
	if err != nil {
		return fmt.Errorf("store %s: load migrations: %w", s.Path, err)
	}
	pending := current < known
	if !pending && current > 0 {
		if pending, err = p.HasPending(ctx); err != nil {
			return fmt.Errorf("store %s: check migrations: %w", s.Path, err)
		}
	}
	if pending {
		if _, err := p.Up(ctx); err != nil {
			return fmt.Errorf("store %s: migrate: %w", s.Path, err)
		}
	}
	return s.ensureIdentityAndViews(ctx, known)
}

// viewsVersionKey is the store_meta key recording which view definitions (and at
// which schema version) the store's views were created from.
const viewsVersionKey = "views_version"

// viewsVersion fingerprints the embedded view definitions and the schema version:
// the views are re-created when it changes, and only then.
func viewsVersion(schema int64) (string, []string, error) {
	names, err := fs.Glob(views.FS, "*.sql")
	if err != nil {
		return "", nil, err
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := views.FS.ReadFile(n)
		if err != nil {
			return "", nil, err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return fmt.Sprintf("%x@%d", h.Sum(nil), schema), names, nil
}

// ViewsStale reports that the store's views were created from other view
// definitions than this binary embeds (another aicdb version made them): a
// writable open re-creates them, a read-only one reads them as they are, so a
// query of a column they lack fails until 'aicdb init' (or any writing
// command) refreshes them.
func (s *Store) ViewsStale(ctx context.Context) (bool, error) {
	current, _, err := s.schemaVersions(ctx)
	if err != nil {
		return false, err
	}
	want, _, err := viewsVersion(current)
	if err != nil {
		return false, err
	}
	var got []string
	if err := s.db.SelectContext(ctx, &got, `SELECT value FROM store_meta WHERE key = ?`, viewsVersionKey); err != nil {
		return false, fmt.Errorf("store %s: read views version: %w", s.Path, err)
	}
	return len(got) != 1 || got[0] != want, nil
}

// ensureIdentityAndViews sets PRAGMA application_id to AppID (a store from before
// aicdb set it gets it here) and re-creates the views when their recorded version
// differs from the embedded one, in one transaction. An up-to-date store is only
// read.
func (s *Store) ensureIdentityAndViews(ctx context.Context, schema int64) error {
	want, names, err := viewsVersion(schema)
	if err != nil {
		return err
	}
	upToDate := func(q sqlx.QueryerContext) (appOK, viewsOK bool, err error) {
		var app int64
		if err := sqlx.GetContext(ctx, q, &app, `PRAGMA application_id`); err != nil {
			return false, false, fmt.Errorf("store %s: read application_id: %w", s.Path, err)
		}
		var got []string
		if err := sqlx.SelectContext(ctx, q, &got, `SELECT value FROM store_meta WHERE key = ?`, viewsVersionKey); err != nil {
			return false, false, fmt.Errorf("store %s: read views version: %w", s.Path, err)
		}
		return app == AppID, len(got) == 1 && got[0] == want, nil
	}
	appOK, viewsOK, err := upToDate(s.db)
	if err != nil || (appOK && viewsOK) {
		return err
	}
	return s.Tx(ctx, func(tx *sqlx.Tx) error {
		appOK, viewsOK, err := upToDate(tx) // another process may have done it meanwhile
		if err != nil {
			return err
		}
		if !appOK {
			if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA application_id = %d`, AppID)); err != nil {
				return fmt.Errorf("store %s: set application_id: %w", s.Path, err)
			}
		}
		if viewsOK {
			return nil
		}
		if err := recreateViews(ctx, tx, names); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO store_meta (key, value) VALUES (?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value`, viewsVersionKey, want)
		return err
	})
}

// recreateViews drops every view and creates those embedded in views/ (names, in
// file-name order) inside tx.
func recreateViews(ctx context.Context, tx *sqlx.Tx, names []string) error {
	var existing []string
	if err := tx.SelectContext(ctx, &existing, `SELECT name FROM sqlite_schema WHERE type = 'view'`); err != nil {
		return fmt.Errorf("list views: %w", err)
	}
	for _, v := range existing {
		if _, err := tx.ExecContext(ctx, `DROP VIEW IF EXISTS "`+strings.ReplaceAll(v, `"`, `""`)+`"`); err != nil {
			return fmt.Errorf("drop view %s: %w", v, err)
		}
	}
	for _, n := range names {
		b, err := views.FS.ReadFile(n)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(b)); err != nil {
			return fmt.Errorf("create views from %s: %w", n, err)
		}
	}
	return nil
}

// Tx runs fn in one transaction: committed if fn returns nil, rolled back otherwise.
func (s *Store) Tx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// EachRow runs the query q (SQL built inside store/ or its subpackages, never
// outside: TestSQLStaysInStore) with args and hands each row's Scan to scan, in
// order; it stops at the first error.
func (s *Store) EachRow(ctx context.Context, q string, args []any, scan func(scan func(dest ...any) error) error) error {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}

// ErrNotFound is returned by lookups that find no row.
var ErrNotFound = sql.ErrNoRows
