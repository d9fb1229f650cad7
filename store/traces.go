package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

// TraceMeta describes an imported trace (one row of traces, migration 00010).
type TraceMeta struct {
	Name   string
	Format string
	Source string
	// SHA256 covers the format, the import parameters and the content; equal hashes
	// mean the same trace.
	SHA256     string
	HashBlock  int
	Params     string // JSON
	ImportedAt string // RFC 3339, supplied by the caller
}

// TraceInfo is a stored trace.
type TraceInfo struct {
	TraceMeta
	ID       int64
	Requests int
	LastMs   float64
}

// TraceRow is one request of a trace. HashIDs is a JSON array ("" = none); Session ""
// and ThinkMs 0 when the trace has no sessions.
type TraceRow struct {
	Seq       int64
	Line      int
	ArrivalMs float64
	ISL, OSL  int
	HashIDs   string
	Session   string
	ThinkMs   float64
}

// TraceImport is the outcome of ImportTrace.
type TraceImport struct {
	Info TraceInfo
	// Unchanged: a trace with the same content hash was already stored (under
	// Info.Name); nothing was written.
	Unchanged bool
}

// ErrTraceNameTaken is returned when the name is used by a trace with other content.
var ErrTraceNameTaken = errors.New("trace name taken")

// traceInsertBatch rows go in one INSERT (9 columns each, under SQLite's 32,766
// parameter limit and large enough to amortise statement overhead).
const traceInsertBatch = 128

// ImportTrace stores a trace in one transaction: rows calls emit once per request in
// arrival order; any error (from rows, emit or the database) rolls everything back,
// so the store is unchanged. A trace whose SHA256 is already stored is not read again.
func (s *Store) ImportTrace(ctx context.Context, m TraceMeta, rows func(emit func(TraceRow) error) error) (TraceImport, error) {
	var out TraceImport
	err := s.Tx(ctx, func(tx *sqlx.Tx) error {
		if info, err := traceBy(ctx, tx, "sha256", m.SHA256); err == nil {
			out = TraceImport{Info: info, Unchanged: true}
			return nil
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		if _, err := traceBy(ctx, tx, "name", m.Name); err == nil {
			return fmt.Errorf("%w: a trace named %q with other content is stored; pass another --name or remove it with 'aicdb trace rm %s'", ErrTraceNameTaken, m.Name, m.Name)
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO traces (name, format, source, sha256, hash_block, params, requests, last_ms, imported_at)
			VALUES (?, ?, ?, ?, ?, ?, 0, 0, ?)`, m.Name, m.Format, m.Source, m.SHA256, m.HashBlock, m.Params, m.ImportedAt)
		if err != nil {
			return fmt.Errorf("record trace %s: %w", m.Name, err)
		}
		id, err := res.LastInsertId()
		if err != nil {
			return err
		}
		w := traceWriter{ctx: ctx, tx: tx, id: id}
		if err := rows(w.add); err != nil {
			return err
		}
		if err := w.flush(); err != nil {
			return err
		}
		if w.n == 0 {
			return fmt.Errorf("trace %s: no requests", m.Name)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE traces SET requests = ?, last_ms = ? WHERE id = ?`, w.n, w.last, id); err != nil {
			return fmt.Errorf("record trace %s: %w", m.Name, err)
		}
		out.Info, err = traceBy(ctx, tx, "id", id)
		return err
	})
	return out, err
}

type traceWriter struct {
	ctx  context.Context
	tx   *sqlx.Tx
	id   int64
	n    int64
	last float64
	args []any
	rows int
	sql  map[int]string
}

func (w *traceWriter) add(r TraceRow) error {
	var hash, sess, think any
	if r.HashIDs != "" {
		hash = r.HashIDs
	}
	if r.Session != "" {
		sess, think = r.Session, r.ThinkMs
	}
	w.args = append(w.args, w.id, w.n, r.Line, r.ArrivalMs, r.ISL, r.OSL, hash, sess, think)
	w.n++
	w.last = r.ArrivalMs
	w.rows++
	if w.rows == traceInsertBatch {
		return w.flush()
	}
	return nil
}

func (w *traceWriter) flush() error {
	if w.rows == 0 {
		return nil
	}
	if w.sql == nil {
		w.sql = map[int]string{}
	}
	q, ok := w.sql[w.rows]
	if !ok {
		q = `INSERT INTO trace_requests (trace_id, seq, line, arrival_ms, isl, osl, hash_ids, session, think_ms) VALUES ` +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?),", w.rows), ",")
		w.sql[w.rows] = q
	}
	if _, err := w.tx.ExecContext(w.ctx, q, w.args...); err != nil {
		return fmt.Errorf("store trace requests: %w", err)
	}
	w.args, w.rows = w.args[:0], 0
	return nil
}

const traceCols = `id, name, format, source, sha256, hash_block, params, requests, last_ms, imported_at`

func scanTrace(row interface{ Scan(...any) error }) (TraceInfo, error) {
	var t TraceInfo
	err := row.Scan(&t.ID, &t.Name, &t.Format, &t.Source, &t.SHA256, &t.HashBlock, &t.Params, &t.Requests, &t.LastMs, &t.ImportedAt)
	return t, err
}

func traceBy(ctx context.Context, q sqlx.QueryerContext, col string, v any) (TraceInfo, error) {
	t, err := scanTrace(q.QueryRowxContext(ctx, `SELECT `+traceCols+` FROM traces WHERE `+col+` = ?`, v))
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("read trace: %w", err)
	}
	return t, err
}

// Trace returns the trace named name; the error wraps ErrNotFound when there is none.
func (s *Store) Trace(ctx context.Context, name string) (TraceInfo, error) {
	t, err := traceBy(ctx, s.db, "name", name)
	if errors.Is(err, ErrNotFound) {
		return t, notFound(fmt.Sprintf("no trace named %q; 'aicdb trace ls' lists them", name))
	}
	return t, err
}

// notFound is an error that says msg and wraps ErrNotFound without printing the
// driver's "no rows in result set".
type notFound string

func (e notFound) Error() string { return string(e) }
func (e notFound) Unwrap() error { return ErrNotFound }

// Traces lists the stored traces by name.
func (s *Store) Traces(ctx context.Context) ([]TraceInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+traceCols+` FROM traces ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("read traces: %w", err)
	}
	defer rows.Close()
	var out []TraceInfo
	for rows.Next() {
		t, err := scanTrace(rows)
		if err != nil {
			return nil, fmt.Errorf("read traces: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// DeleteTrace removes a trace and its requests; the error wraps ErrNotFound when
// there is none.
func (s *Store) DeleteTrace(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM traces WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("delete trace %s: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return notFound(fmt.Sprintf("no trace named %q; 'aicdb trace ls' lists them", name))
	}
	return nil
}

// TraceSlice selects part of a trace, in SQL: requests arriving in [StartMs, EndMs)
// (EndMs 0 = to the end), at most Limit of them (0 = all), with times shifted so
// StartMs is 0 and divided by Scale (rate multiplied by Scale; 0 = 1).
type TraceSlice struct {
	StartMs, EndMs float64
	Scale          float64
	Limit          int
}

// TraceRequests streams the requests of trace id in the slice, in arrival order.
func (s *Store) TraceRequests(ctx context.Context, id int64, sl TraceSlice, fn func(TraceRow) error) error {
	scale := sl.Scale
	if scale == 0 {
		scale = 1
	}
	limit := int64(-1)
	if sl.Limit > 0 {
		limit = int64(sl.Limit)
	}
	open := sl.EndMs <= 0
	rows, err := s.db.QueryContext(ctx, `SELECT seq, line, (arrival_ms - ?) / ?, isl, osl, coalesce(hash_ids, ''),
		coalesce(session, ''), coalesce(think_ms, 0) / ? FROM trace_requests
		WHERE trace_id = ? AND arrival_ms >= ? AND (? OR arrival_ms < ?) ORDER BY arrival_ms, seq LIMIT ?`,
		sl.StartMs, scale, scale, id, sl.StartMs, open, sl.EndMs, limit)
	if err != nil {
		return fmt.Errorf("read trace requests: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r TraceRow
		if err := rows.Scan(&r.Seq, &r.Line, &r.ArrivalMs, &r.ISL, &r.OSL, &r.HashIDs, &r.Session, &r.ThinkMs); err != nil {
			return fmt.Errorf("read trace requests: %w", err)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}
