package refine

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/aicdb/aicdb/store"
)

// answerSettled reports whether the user's SQL gives the same answer whatever the
// true values of the unresolved straddlers are. It runs the SQL twice inside a
// transaction that is always rolled back (the store never changes):
//
//   - optimistic: every straddler's thresholded columns set to the most passing value
//     its stored numbers allow (bracketed TTFT columns: min(value, lo) for upper
//     bounds; a huge value for lower bounds);
//   - pessimistic: the straddlers deleted.
//
// For queries monotone in the set of qualifying rows (filters, ORDER BY … LIMIT k,
// the pareto/points views) equal answers mean no straddler can enter the answer, so
// the rest need not be evaluated. Equal answers also mean no straddler is in it,
// so the real run returns only decided rows. Anything unusual (a non-SELECT, a
// column bounded on both sides) reports false: resolve everything. The user's SQL
// must pass store.CheckReadOnlySQL and runs under store.ReadOnlyAuthorizer.
func answerSettled(ctx context.Context, st *store.Store, userSQL string, ths []Threshold, todo []store.Point) (bool, error) {
	if store.CheckReadOnlySQL(userSQL) != nil {
		return false, nil
	}
	upper, lower := map[string]bool{}, map[string]bool{}
	for _, th := range ths {
		if th.Op == LT || th.Op == LE {
			upper[th.Column] = true
		} else {
			lower[th.Column] = true
		}
	}
	for c := range upper {
		if lower[c] {
			return false, nil
		}
	}
	keys := make([]string, len(todo))
	for i := range todo {
		keys[i] = todo[i].Key
	}
	kj, err := json.Marshal(keys)
	if err != nil {
		return false, err
	}
	in := ` WHERE key IN (SELECT value FROM json_each(?))`
	var sets []string
	for _, c := range sortedKeys(upper) {
		if _, ok := bracketedColumn(c); ok {
			sets = append(sets, fmt.Sprintf("%s = min(%s, coalesce(ttft_steady_p99_lo, %s))", c, c, c))
		}
	}
	for _, c := range sortedKeys(lower) {
		sets = append(sets, c+" = 1e300")
	}
	run := func(prep string) ([]string, error) {
		// One pinned connection: the hypothetical rows are written in a transaction
		// that is always rolled back, and the user's SQL is compiled only while
		// SQLite's read-only authorizer is installed on it (store.ReadOnlyAuthorizer),
		// so it can read the hypothetical rows but change nothing.
		conn, err := st.DB.Conn(ctx)
		if err != nil {
			return nil, fmt.Errorf("query pre-pass: %w", err)
		}
		defer conn.Close()
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return nil, fmt.Errorf("query pre-pass: %w", err)
		}
		defer tx.Rollback()
		if prep != "" {
			if _, err := tx.ExecContext(ctx, prep+in, string(kj)); err != nil {
				return nil, fmt.Errorf("query pre-pass: %w", err)
			}
		}
		var out []string
		err = store.WithReadOnlyAuthorizer(conn, func() error {
			var err error
			out, err = answer(ctx, tx, userSQL)
			return err
		})
		return out, err
	}
	opt := ""
	if len(sets) > 0 {
		opt = `UPDATE operating_points SET ` + strings.Join(sets, ", ")
	}
	a, err := run(opt)
	if err != nil {
		return false, nil // the user's SQL fails or writes: let the real run report it
	}
	b, err := run(`DELETE FROM operating_points`)
	if err != nil {
		return false, nil
	}
	return slices.Equal(a, b), nil
}

// answer runs q and returns its rows, formatted and sorted (a multiset).
func answer(ctx context.Context, tx *sql.Tx, q string) ([]string, error) {
	rows, err := tx.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out []string
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("%#v", vals))
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}
