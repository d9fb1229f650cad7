// Package store opens the aicdb SQLite file: WAL journal, busy timeout, foreign keys,
// the embedded goose migrations applied, and the embedded views re-created. SQL
// strings live only here, in views/, in refine/ and in perfdb's import and load code
// (the perf tables it owns).
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/aicdb/aicdb/migrations"
	"github.com/aicdb/aicdb/views"
)

func init() {
	sqlx.BindDriver("sqlite", sqlx.QUESTION)
}

// Store is an open aicdb file.
type Store struct {
	DB       *sqlx.DB
	Path     string
	ReadOnly bool
}

// Options control how a store is opened.
type Options struct {
	// ReadOnly opens the file with query_only; it must already exist and be migrated.
	ReadOnly bool
	// MustExist refuses to create a new file.
	MustExist bool
}

// DSN returns the modernc DSN for path with the store's per-connection pragmas.
func DSN(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_pragma", "journal_mode(WAL)")
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// Open opens (creating if allowed) the store at path, applies pending migrations and
// re-creates the views. A read-only store is neither migrated nor changed.
func Open(ctx context.Context, path string, o Options) (*Store, error) {
	if path == "" {
		return nil, errors.New("store path is empty: pass --db PATH")
	}
	if o.ReadOnly || o.MustExist {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("store %s does not exist: run 'aicdb init' first", path)
		}
	}
	db, err := sqlx.Open("sqlite", DSN(path, o.ReadOnly))
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	s := &Store{DB: db, Path: path, ReadOnly: o.ReadOnly}
	if o.ReadOnly {
		return s, nil
	}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// Close closes the database handle.
func (s *Store) Close() error { return s.DB.Close() }

func (s *Store) migrate(ctx context.Context) error {
	p, err := goose.NewProvider(goose.DialectSQLite3, s.DB.DB, migrations.FS)
	if err != nil {
		return fmt.Errorf("store %s: load migrations: %w", s.Path, err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("store %s: migrate: %w", s.Path, err)
	}
	return s.recreateViews(ctx)
}

// recreateViews drops every view and creates those embedded in views/, in file-name
// order, in one transaction.
func (s *Store) recreateViews(ctx context.Context) error {
	names, err := fs.Glob(views.FS, "*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	return s.Tx(ctx, func(tx *sqlx.Tx) error {
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
	})
}

// Tx runs fn in one transaction: committed if fn returns nil, rolled back otherwise.
func (s *Store) Tx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	tx, err := s.DB.BeginTxx(ctx, nil)
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

// ErrNotFound is returned by lookups that find no row.
var ErrNotFound = sql.ErrNoRows
