package store

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestMigrationDropsUnfingerprintedQuantitative is issue 8 item 1's migration: a
// store written by an evaluator that could mix models (schema 00004, results
// without an evaluator fingerprint) loses every quantitative result on open; its
// points stay and fall back to the screening tier, so the funnel refines them again.
func TestMigrationDropsUnfingerprintedQuantitative(t *testing.T) {
	ctx := context.Background()
	path, db := storeAt(t, 4)
	pt := testPoint(testInputs(), 30, 1000)
	// The writer of schema 00004: every column before migration 00009's engine
	// columns (and 00011's disagg columns after them).
	w := slices.Index(pointColumns, "engine_profile")
	if _, err := db.ExecContext(ctx, `INSERT INTO operating_points (`+strings.Join(pointColumns[:w], ", ")+`) VALUES (`+placeholders(w)+`)`, pt.args()[:w]...); err != nil {
		t.Fatal(err)
	}
	cols := append([]string{"key"}, QueueingColumns[:]...)
	cols = append(cols, "throughput_rps", "output_tokens_per_s", "workload_fidelity", "distributions")
	args := []any{pt.Key}
	for range QueueingColumns {
		args = append(args, 7.0)
	}
	args = append(args, 1.0, 1.0, "W0", "{}")
	if _, err := db.ExecContext(ctx, `INSERT INTO quantitative_results (`+strings.Join(cols, ", ")+`) VALUES (`+placeholders(len(cols))+`)`, args...); err != nil {
		t.Fatal(err)
	}
	s := openMigrated(t, path, db)
	var n int
	if err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM quantitative_results`); err != nil || n != 0 {
		t.Fatalf("quantitative rows after migration: %d, %v (want 0)", n, err)
	}
	got, err := s.SelectPoints(ctx, PointFilter{})
	if err != nil || len(got) != 1 || got[0].Q.Tier != TierScreening {
		t.Fatalf("points after migration: %+v, %v (want the row back at screening tier)", got, err)
	}
	// New rows carry the fingerprint; one without is refused.
	r := Quantitative{Key: pt.Key, Fidelity: "W0", Distributions: "{}"}
	if err := s.InsertQuantitative(ctx, []Quantitative{r}); err == nil || !strings.Contains(err.Error(), "evaluator fingerprint") {
		t.Fatalf("insert without fingerprint: %v", err)
	}
	r.Evaluator = "test-1"
	if err := s.InsertQuantitative(ctx, []Quantitative{r}); err != nil {
		t.Fatal(err)
	}
	var ev string
	if err := s.db.GetContext(ctx, &ev, `SELECT evaluator FROM quantitative_results`); err != nil || ev != "test-1" {
		t.Fatalf("stored fingerprint %q, %v", ev, err)
	}
}
