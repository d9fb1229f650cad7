package refine

import (
	"context"
	"fmt"
	"testing"

	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/store"
)

// quantGap prices sweeps like Synthetic but its quantitative tier always misses.
type quantGap struct{ Synthetic }

func (quantGap) Quantitative(context.Context, store.PointInputs) (store.Quantitative, error) {
	return store.Quantitative{}, fmt.Errorf("pass timing: %w", &perfdb.MissError{Msg: "no attention rows near s=9000"})
}

// TestSweepGapInFunnelKeepsTier: a perf-data miss in the quantitative tier does not
// abort a query or best: the straddlers stay at screening tier, reported unresolved.
func TestSweepGapInFunnelKeepsTier(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	if _, err := Sweep(ctx, s, Synthetic{}, defaultSpec(), SweepOptions{Now: fixedNow}); err != nil {
		t.Fatal(err)
	}
	qs, err := PrepareQuery(ctx, s, quantGap{}, "select * from points where ttft_steady_p99 < 150", 0, 2)
	if err != nil || qs.Straddlers == 0 || qs.Evaluated != 0 || qs.Unresolved == 0 {
		t.Fatalf("query with a quantitative miss: %+v, err %v", qs, err)
	}
	sla, err := SLAInput{TTFT: 150, TTFTSet: true, TTFTPct: "p99"}.Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := Best(ctx, s, quantGap{}, BestOptions{SLA: sla, TopK: 3, Refine: true})
	if err != nil || res.Evaluated != 0 {
		t.Fatalf("best with a quantitative miss: %+v, err %v", res, err)
	}
	for _, p := range res.Rows {
		if p.Q.Tier != store.TierScreening {
			t.Fatalf("row %s at %s, want screening", p.Key[:8], p.Q.Tier)
		}
	}
}
