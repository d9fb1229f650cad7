package refine

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// TestAnswerSettledReadOnly (issue 8 item 5): the pre-pass runs the user's SQL only
// under the read-only authorizer, so a top-k query still settles lazily, and SQL
// that is more than one query is never run (no settle: resolve everything) and
// changes nothing.
func TestAnswerSettledReadOnly(t *testing.T) {
	ctx := context.Background()
	s, todo, ths := settleFixture(t)
	count := func(q string) int {
		var n int
		if err := storetest.DB(t, s).GetContext(ctx, &n, q); err != nil {
			t.Fatal(err)
		}
		return n
	}
	sweeps := count(`SELECT count(*) FROM sweeps`)
	// Every row passes a huge threshold: the top 1 is decided by the rows already
	// resolved, whatever the straddlers' values (they sit at the end).
	topK := `SELECT key FROM points WHERE ttft_steady_p99 < 1e12 ORDER BY key LIMIT 1`
	if settled, err := answerSettled(ctx, s, topK, ths, todo); err != nil || !settled {
		t.Fatalf("top-1 query: settled %v, %v; want settled", settled, err)
	}
	for _, q := range []string{
		`SELECT key FROM points WHERE ttft_steady_p99 < 1e12; DELETE FROM sweeps`,
		`DELETE FROM sweeps WHERE id IN (SELECT 1 FROM points WHERE ttft_steady_p99 < 1e12)`,
		`WITH d AS (SELECT 1) DELETE FROM sweeps`,
		`SELECT key FROM points WHERE ttft_steady_p99 < 1e12 AND load_extension('x') IS NULL`,
	} {
		if settled, err := answerSettled(ctx, s, q, ths, todo); err != nil || settled {
			t.Errorf("%q: settled %v, %v; want not settled", q, settled, err)
		}
	}
	if got := count(`SELECT count(*) FROM sweeps`); got != sweeps {
		t.Fatalf("sweeps %d → %d: the pre-pass ran a write", sweeps, got)
	}
	// The pooled connection is unrestricted again after the pre-pass.
	if _, err := storetest.DB(t, s).ExecContext(ctx, `INSERT INTO store_meta VALUES ('after', 'x')`); err != nil {
		t.Fatalf("write after the pre-pass: %v", err)
	}
}

// settleFixture is a store swept with the synthetic evaluator and the pre-pass's
// inputs over it: the last five rows (in the store's order) as the straddlers,
// under a TTFT p99 threshold every row passes.
func settleFixture(tb testing.TB) (*store.Store, []store.Point, []Threshold) {
	tb.Helper()
	ctx := context.Background()
	s := openStore(tb)
	if _, err := Sweep(ctx, s, Synthetic{}, defaultSpec(), SweepOptions{Now: fixedNow}); err != nil {
		tb.Fatal(err)
	}
	all, err := s.SelectPoints(ctx, store.PointFilter{})
	if err != nil || len(all) < 10 {
		tb.Fatalf("points: %d, %v", len(all), err)
	}
	return s, all[len(all)-5:], []Threshold{{Column: "ttft_steady_p99", Op: LT, Value: 1e12}}
}
