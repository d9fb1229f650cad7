package calibrate

import (
	"context"
	"errors"
	"testing"

	"github.com/aicdb/aicdb/refine"
)

// TestMemoOn: the fit's memo evaluates each adjustment of its sample set once
// and returns the same predictions after; another sample set (a fold's test
// rows), and an evaluation that failed, are not remembered.
func TestMemoOn(t *testing.T) {
	calls := 0
	fail := false
	f := func(_ context.Context, ss []Sample, adj refine.PassAdjust) ([][2]float64, error) {
		calls++
		if fail {
			return nil, errors.New("boom")
		}
		out := make([][2]float64, len(ss))
		for i := range out {
			out[i] = [2]float64{adj.PrefillScale * float64(i+1), adj.DecodeScale}
		}
		return out, nil
	}
	ss := make([]Sample, 3)
	other := make([]Sample, 3)
	m := memoOn(ss, f)
	ctx := context.Background()
	a := refine.PassAdjust{PrefillScale: 1.5, DecodeScale: 0.9}
	p1, err := m(ctx, ss, a)
	if err != nil {
		t.Fatal(err)
	}
	p2, _ := m(ctx, ss, a)
	if calls != 1 || p2[2] != p1[2] || p1[2] != [2]float64{4.5, 0.9} {
		t.Errorf("same adjustment: %d evaluations, predictions %v then %v", calls, p1, p2)
	}
	if _, _ = m(ctx, other, a); calls != 2 {
		t.Errorf("another sample set: %d evaluations, want it evaluated (2)", calls)
	}
	if _, _ = m(ctx, other, a); calls != 3 {
		t.Errorf("another sample set again: %d evaluations, want it not remembered (3)", calls)
	}
	fail = true
	b := refine.PassAdjust{PrefillScale: 2, DecodeScale: 1}
	if _, err := m(ctx, ss, b); err == nil {
		t.Fatal("the failing evaluation succeeded")
	}
	fail = false
	if p, err := m(ctx, ss, b); err != nil || calls != 5 || p[0] != [2]float64{2, 1} {
		t.Errorf("after a failure: %v, %d evaluations, %v; want it evaluated again", err, calls, p)
	}
}
