package store

import (
	"context"
	"testing"
)

// TestPointNextNAccepted: the MTP acceptance enters the key only with drafts (a
// row without keeps its pre-00017 key), must lie in [0, nextn], and round-trips
// through the store and the points view.
func TestPointNextNAccepted(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	plain := testInputs()
	before := plain.Key()
	mtp := plain
	mtp.NextN, mtp.NextNAccepted = 1, 0.85
	other := mtp
	other.NextNAccepted = 0.5
	if plain.Key() != before || mtp.Key() == plain.Key() || mtp.Key() == other.Key() {
		t.Fatal("want: no drafts keep the key; drafts and each acceptance change it")
	}
	for _, bad := range []struct {
		n int
		a float64
	}{{1, 1.5}, {1, -0.1}, {0, 0.5}, {-1, 0}} {
		in := plain
		in.NextN, in.NextNAccepted = bad.n, bad.a
		if err := in.Validate(); err == nil {
			t.Errorf("nextn %d, nextn_accepted %v validated", bad.n, bad.a)
		}
	}
	if _, err := s.InsertPoints(ctx, []Point{testPoint(plain, 30, 1000), testPoint(mtp, 30, 900), testPoint(other, 30, 800)}); err != nil {
		t.Fatal(err)
	}
	ps, err := s.SelectPoints(ctx, PointFilter{})
	if err != nil || len(ps) != 3 {
		t.Fatalf("%d rows (%v), want 3", len(ps), err)
	}
	got := map[string]float64{}
	for _, p := range ps {
		got[p.Key] = p.NextNAccepted
	}
	if got[mtp.Key()] != 0.85 || got[other.Key()] != 0.5 || got[plain.Key()] != 0 {
		t.Errorf("read back acceptances %v", got)
	}
	var shown []float64
	if err := s.db.SelectContext(ctx, &shown, `SELECT nextn_accepted FROM points ORDER BY nextn_accepted`); err != nil || len(shown) != 3 || shown[2] != 0.85 {
		t.Errorf("points.nextn_accepted %v (%v)", shown, err)
	}
}
