package store

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestAnswerUnder: the hypothesis is visible to the user's SQL and rolled back
// after; the user's SQL cannot write even inside the hypothesis's transaction.
func TestAnswerUnder(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	a, b := testInputs(), testInputs()
	b.Batch, b.MaxNumSeqs = 32, 32
	if _, err := s.InsertPoints(ctx, []Point{testPoint(a, 20, 500), testPoint(b, 15, 800)}); err != nil {
		t.Fatal(err)
	}
	answer := func(h Hypothesis, q string) ([]string, error) {
		var rows []string
		err := s.AnswerUnder(ctx, h, q, func(r string) error {
			rows = append(rows, r)
			return nil
		})
		slices.Sort(rows)
		return rows, err
	}
	count := `SELECT count(*) FROM operating_points`
	got, err := answer(Hypothesis{Keys: []string{a.Key()}, Delete: true}, count)
	if err != nil || strings.Join(got, ";") != "[]interface {}{1}" {
		t.Fatalf("delete one of two: %q %v", got, err)
	}
	got, err = answer(Hypothesis{Keys: []string{a.Key()}}, count) // changes nothing
	if err != nil || strings.Join(got, ";") != "[]interface {}{2}" {
		t.Fatalf("no change: %q %v", got, err)
	}
	capped := `SELECT ttft_steady_p99, tokens_per_s_per_gpu FROM operating_points`
	got, err = answer(Hypothesis{Keys: []string{a.Key(), b.Key()}, Capped: []string{"ttft_steady_p99"}, Huge: []string{"tokens_per_s_per_gpu"}}, capped)
	if err != nil || strings.Join(got, ";") != "[]interface {}{50, 1e+300};[]interface {}{50, 1e+300}" {
		t.Fatalf("capped (p99_lo 50) and huge: %q %v", got, err)
	}
	if _, err := answer(Hypothesis{}, `DELETE FROM operating_points`); err == nil || !strings.Contains(err.Error(), "not authorized") {
		t.Fatalf("a write under the authorizer: %v", err)
	}
	if n, err := s.PointCount(ctx); err != nil || n != 2 {
		t.Fatalf("%d points after the hypotheses (%v), want 2: not rolled back", n, err)
	}
}

// TestQueryModes: QueryReadOnly needs a read-only store, QueryWrite a writable one.
func TestQueryModes(t *testing.T) {
	ctx := context.Background()
	w := openTest(t)
	if _, _, err := w.QueryReadOnly(ctx, "SELECT 1"); err == nil {
		t.Error("QueryReadOnly ran on a writable store")
	}
	cols, rows, err := w.QueryWrite(ctx, "INSERT INTO store_meta (key, value) VALUES ('k', 'v') RETURNING value")
	if err != nil || len(cols) != 1 || len(rows) != 1 || rows[0][0] != "v" {
		t.Fatalf("QueryWrite: %v %v %v", cols, rows, err)
	}
	ro, err := Open(ctx, w.Path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, _, err := ro.QueryWrite(ctx, "SELECT 1"); err == nil {
		t.Error("QueryWrite ran on a read-only store")
	}
	cols, rows, err = ro.QueryReadOnly(ctx, "SELECT value AS v FROM store_meta WHERE key = 'k'")
	if err != nil || strings.Join(cols, ",") != "v" || len(rows) != 1 || rows[0][0] != "v" {
		t.Fatalf("QueryReadOnly: %v %v %v", cols, rows, err)
	}
}
