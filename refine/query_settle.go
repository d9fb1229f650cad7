package refine

import (
	"context"
	"errors"

	"github.com/aicdb/aicdb/store"
)

// answerSettled reports whether the user's SQL gives the same answer whatever the
// true values of the unresolved straddlers are. It runs the SQL twice, each time
// under a store.Hypothesis (store.AnswerUnder: a transaction that is always rolled
// back, so the store never changes), and compares the two answers as multisets of
// rows without holding the second:
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
	opt := store.Hypothesis{Keys: keys}
	for _, c := range sortedKeys(upper) {
		if _, ok := bracketedColumn(c); ok {
			opt.Capped = append(opt.Capped, c)
		}
	}
	opt.Huge = sortedKeys(lower)
	// The optimistic answer is kept as a multiset of its rows; the pessimistic one
	// is read against it, row by row, and stops at the first row it lacks.
	rows, n := map[string]int{}, 0
	if err := st.AnswerUnder(ctx, opt, userSQL, func(r string) error {
		rows[r]++
		n++
		return nil
	}); err != nil {
		return false, nil // the user's SQL fails or writes: let the real run report it
	}
	err := st.AnswerUnder(ctx, store.Hypothesis{Keys: keys, Delete: true}, userSQL, func(r string) error {
		if rows[r] == 0 {
			return errAnswersDiffer
		}
		rows[r]--
		n--
		return nil
	})
	return err == nil && n == 0, nil // an error (errAnswersDiffer or the SQL's): not settled
}

// errAnswersDiffer stops answerSettled's second read at a row the first answer
// lacks.
var errAnswersDiffer = errors.New("the answers differ")
