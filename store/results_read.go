package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Reads of the stored results for the CLI (plot, best, schema) and refine
// (doctor, the query pre-pass).

// QuantitativeCount counts the stored quantitative results.
func (s *Store) QuantitativeCount(ctx context.Context) (int, error) {
	var n int
	err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM quantitative_results`)
	return n, err
}

// ResultEvaluator is a quantitative result's key and the evaluator that computed it.
type ResultEvaluator struct {
	Key       string `db:"key"`
	Evaluator string `db:"evaluator"`
}

// ResultEvaluators lists the first n quantitative results by key (n < 0: all).
func (s *Store) ResultEvaluators(ctx context.Context, n int) ([]ResultEvaluator, error) {
	var rows []ResultEvaluator
	err := s.db.SelectContext(ctx, &rows, `SELECT key, evaluator FROM quantitative_results ORDER BY key LIMIT ?`, n)
	return rows, err
}

// PointCount counts the stored operating points.
func (s *Store) PointCount(ctx context.Context) (int, error) {
	var n int
	err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM operating_points`)
	return n, err
}

// ParetoQuery is the default SQL of aicdb plot pareto: the pareto view's rows,
// run like a user's query (QueryReadOnly).
const ParetoQuery = `SELECT tokens_per_s_per_user, tokens_per_s_per_gpu, mode FROM pareto`

// ParetoSubject is one deployment (model, system, backend, shape) of the pareto view.
type ParetoSubject struct {
	Model   string `db:"model"`
	System  string `db:"system"`
	Backend string `db:"backend"`
	ISL     int    `db:"isl"`
	OSL     int    `db:"osl"`
}

// ParetoSubjects returns up to two distinct deployments of the pareto view's rows
// (enough to tell whether there is exactly one).
func (s *Store) ParetoSubjects(ctx context.Context) ([]ParetoSubject, error) {
	var subs []ParetoSubject
	err := s.db.SelectContext(ctx, &subs, `SELECT DISTINCT model, system, backend, isl, osl FROM pareto LIMIT 2`)
	return subs, err
}

// PointKeyByRowid returns the key of the operating point with that rowid (none or one).
func (s *Store) PointKeyByRowid(ctx context.Context, rowid int64) ([]string, error) {
	var keys []string
	err := s.db.SelectContext(ctx, &keys, `SELECT key FROM operating_points WHERE rowid = ?`, rowid)
	return keys, err
}

// PointKeysByPrefix returns up to two operating-point keys starting with prefix,
// sorted (enough to tell whether the prefix names exactly one point).
func (s *Store) PointKeysByPrefix(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	err := s.db.SelectContext(ctx, &keys, `SELECT key FROM operating_points WHERE substr(key, 1, length(?)) = ? ORDER BY key LIMIT 2`, prefix, prefix)
	return keys, err
}

// Distributions returns the stored distributions JSON of the quantitative result
// key (none or one).
func (s *Store) Distributions(ctx context.Context, key string) ([]string, error) {
	var raw []string
	err := s.db.SelectContext(ctx, &raw, `SELECT distributions FROM quantitative_results WHERE key = ?`, key)
	return raw, err
}

// Workloads lists the distinct non-empty workload names of the stored points, sorted.
func (s *Store) Workloads(ctx context.Context) ([]string, error) {
	var ws []string
	err := s.db.SelectContext(ctx, &ws, `SELECT DISTINCT workload FROM operating_points WHERE workload IS NOT NULL AND workload <> '' ORDER BY workload`)
	return ws, err
}

// SchemaColumn is one column of a table or view, as pragma_table_xinfo gives it.
type SchemaColumn struct {
	CID     int     `db:"cid"`
	Name    string  `db:"name"`
	Type    string  `db:"type"`
	NotNull int     `db:"notnull"`
	Default *string `db:"dflt_value"`
	PK      int     `db:"pk"`
	Hidden  int     `db:"hidden"`
}

// SchemaObjects lists the store's own objects of a type ("table" or "view"):
// SQLite's internal ones and goose's version table left out, sorted by name.
func (s *Store) SchemaObjects(ctx context.Context, typ string) ([]string, error) {
	var names []string
	err := s.db.SelectContext(ctx, &names, `SELECT name FROM sqlite_schema WHERE type = ? AND name NOT LIKE 'sqlite_%' AND name <> 'goose_db_version' ORDER BY name`, typ)
	return names, err
}

// SchemaColumns lists the columns of a table or view, in order.
func (s *Store) SchemaColumns(ctx context.Context, name string) ([]SchemaColumn, error) {
	var cols []SchemaColumn
	err := s.db.SelectContext(ctx, &cols, `SELECT cid, name, type, "notnull", dflt_value, pk, hidden FROM pragma_table_xinfo(?) ORDER BY cid`, name)
	return cols, err
}

// Hypothesis changes the operating points keyed Keys, inside a transaction that
// is always rolled back: Delete removes them; otherwise each column of Capped is
// set to min(column, coalesce(ttft_steady_p99_lo, column)) and each column of
// Huge to 1e300. Columns are operating_points columns (the caller checks them).
type Hypothesis struct {
	Keys   []string
	Delete bool
	Capped []string
	Huge   []string
}

// statement returns the hypothesis's write ("" when it changes nothing) and its
// argument.
func (h Hypothesis) statement() (string, string, error) {
	kj, err := json.Marshal(h.Keys)
	if err != nil {
		return "", "", err
	}
	in := ` WHERE key IN (SELECT value FROM json_each(?))`
	if h.Delete {
		return `DELETE FROM operating_points` + in, string(kj), nil
	}
	var sets []string
	for _, c := range h.Capped {
		sets = append(sets, fmt.Sprintf("%s = min(%s, coalesce(ttft_steady_p99_lo, %s))", c, c, c))
	}
	for _, c := range h.Huge {
		sets = append(sets, c+" = 1e300")
	}
	if len(sets) == 0 {
		return "", "", nil
	}
	return `UPDATE operating_points SET ` + strings.Join(sets, ", ") + in, string(kj), nil
}

// AnswerUnder runs the user's read-only SQL q (CheckReadOnlySQL is the caller's
// job) as if hypothesis h held and passes fn each row of the answer as it is read,
// in q's order, formatted as one string (%#v of the row's values: equal rows give
// equal strings), so a caller compares answers without holding them whole; an
// error from fn stops the read and is returned. h is written in a transaction on
// one pinned connection that is always rolled back, and q is compiled only while
// ReadOnlyAuthorizer is installed on it, so q reads the hypothetical rows but
// changes nothing.
func (s *Store) AnswerUnder(ctx context.Context, h Hypothesis, q string, fn func(row string) error) error {
	prep, arg, err := h.statement()
	if err != nil {
		return err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("query pre-pass: %w", err)
	}
	defer conn.Close()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("query pre-pass: %w", err)
	}
	defer tx.Rollback()
	if prep != "" {
		if _, err := tx.ExecContext(ctx, prep, arg); err != nil {
			return fmt.Errorf("query pre-pass: %w", err)
		}
	}
	return withReadOnlyAuthorizer(conn, func() error {
		rows, err := tx.QueryContext(ctx, q)
		if err != nil {
			return err
		}
		defer rows.Close()
		_, err = eachRow(rows, func(vals []any) error { return fn(fmt.Sprintf("%#v", vals)) })
		return err
	})
}

// scanAll reads rows' column names and every row's values as the driver gives
// them.
func scanAll(rows *sql.Rows) ([]string, [][]any, error) {
	var data [][]any
	cols, err := eachRow(rows, func(vals []any) error {
		data = append(data, slices.Clone(vals))
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return cols, data, nil
}

// eachRow passes fn each row's values of rows as the driver gives them, in one
// buffer reused from row to row, and returns the column names; an error from fn
// stops the read and is returned.
func eachRow(rows *sql.Rows, fn func(vals []any) error) ([]string, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	vals, ptrs := make([]any, len(cols)), make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		if err := fn(vals); err != nil {
			return nil, err
		}
	}
	return cols, rows.Err()
}
