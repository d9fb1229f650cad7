package calibrate

import (
	"math"
	"slices"
	"testing"

	"github.com/aicdb/aicdb/store"
)

// TestOverallRowWeighted: a calibration's overall MAPE weighs every row the
// same across groups (not every group), and its cross-validated figure covers
// only the rows of groups that had folds.
func TestOverallRowWeighted(t *testing.T) {
	rows := func(n int) []Sample {
		ss := make([]Sample, n)
		for i := range ss {
			ss[i] = Sample{MeasurementID: int64(i + 1), TTFT: 100, TPOT: 10}
		}
		return ss
	}
	same := func(n int, ttft, tpot float64) [][2]float64 {
		p := make([][2]float64, n)
		for i := range p {
			p[i] = [2]float64{ttft, tpot}
		}
		return p
	}
	// Group a: one row, 10 % / 20 % off before, exact fitted, no folds.
	// Group b: three rows, 20 % / 40 % off before, 4 % / 2 % fitted, held out 6 % / 3 %.
	a := GroupFit{Samples: rows(1), Before: same(1, 110, 12), Fitted: same(1, 100, 10)}
	b := GroupFit{Samples: rows(3), Before: same(3, 80, 14), Fitted: same(3, 104, 10.2), HeldOut: same(3, 94, 9.7), HasCV: true}
	o := OverallOf([]GroupFit{a, b})
	want := Overall{Rows: 4, CVRows: 3,
		TTFTBefore: 100 * (0.1 + 3*0.2) / 4, TPOTBefore: 100 * (0.2 + 3*0.4) / 4,
		TTFTFit: 100 * 3 * 0.04 / 4, TPOTFit: 100 * 3 * 0.02 / 4,
		TTFTCV: 6, TPOTCV: 3}
	got := [6]float64{o.TTFTBefore, o.TPOTBefore, o.TTFTFit, o.TPOTFit, o.TTFTCV, o.TPOTCV}
	exp := [6]float64{want.TTFTBefore, want.TPOTBefore, want.TTFTFit, want.TPOTFit, want.TTFTCV, want.TPOTCV}
	if o.Rows != want.Rows || o.CVRows != want.CVRows {
		t.Fatalf("rows %d / %d in folds, want %d / %d", o.Rows, o.CVRows, want.Rows, want.CVRows)
	}
	for i := range got {
		if math.Abs(got[i]-exp[i]) > 1e-9 {
			t.Errorf("figure %d: %v, want %v (row-weighted: group a's mean would count as much as b's three rows)", i, got[i], exp[i])
		}
	}
	// The per-group figures are the same sums over one group.
	b.TTFTBefore, b.TPOTBefore = mape(b.Samples, b.Before)
	if only := OverallOf([]GroupFit{b}); math.Abs(only.TTFTBefore-b.TTFTBefore) > 1e-12 || math.Abs(only.TPOTBefore-b.TPOTBefore) > 1e-12 {
		t.Errorf("one group: overall %v / %v, group %v / %v", only.TTFTBefore, only.TPOTBefore, b.TTFTBefore, b.TPOTBefore)
	}
	if none := OverallOf([]GroupFit{a}); none.CVRows != 0 || none.TTFTCV != 0 || none.TPOTCV != 0 {
		t.Errorf("no folds: %+v, want no cross-validated rows or figures", none)
	}
	if empty := OverallOf(nil); empty != (Overall{}) {
		t.Errorf("no groups: %+v", empty)
	}
}

// TestAssignFoldsBy: folds by a column hold out all the rows of a value
// together (values in order, value j in fold j mod k), and a group with fewer
// distinct values than folds is not cross-validated; by rows, row i is in fold
// i mod k given k rows.
func TestAssignFoldsBy(t *testing.T) {
	var g []Sample
	for i, sh := range [][2]int{{1024, 1024}, {8192, 1024}, {1024, 8192}, {1024, 1024}, {8192, 1024}, {1024, 8192}} {
		in := store.PointInputs{ISL: sh[0], OSL: sh[1], Batch: 4 << (i % 2), TP: 1 + i%3, PP: 1, DP: 1, MoETP: 1, MoEEP: 1}
		g = append(g, Sample{MeasurementID: int64(i + 1), In: in})
	}
	folds := func() []int {
		f := make([]int, len(g))
		for i := range g {
			f[i] = g[i].Fold
		}
		return f
	}
	if !assignFolds(g, 3, HoldoutShape) {
		t.Fatal("3 shapes, 3 folds: not cross-validated")
	}
	// shapes in order: 1024/1024 → 0, 1024/8192 → 1, 8192/1024 → 2
	if got, want := folds(), []int{0, 2, 1, 0, 2, 1}; !slices.Equal(got, want) {
		t.Errorf("folds by shape %v, want %v", got, want)
	}
	if assignFolds(g, 4, HoldoutShape) {
		t.Error("3 shapes, 4 folds: cross-validated")
	}
	if !assignFolds(g, 2, HoldoutConcurrency) || !slices.Equal(folds(), []int{0, 1, 0, 1, 0, 1}) {
		t.Errorf("folds by concurrency (4, 8, …): %v", folds())
	}
	if !assignFolds(g, 3, HoldoutParallel) || !slices.Equal(folds(), []int{0, 1, 2, 0, 1, 2}) {
		t.Errorf("folds by layout (tp 1, 2, 3, …): %v", folds())
	}
	if !assignFolds(g, 4, HoldoutRows) || !slices.Equal(folds(), []int{0, 1, 2, 3, 0, 1}) {
		t.Errorf("folds by rows: %v", folds())
	}
	if assignFolds(g, 7, HoldoutRows) {
		t.Error("6 rows, 7 folds: cross-validated")
	}
	if err := CheckHoldoutBy("model"); err == nil || err.Error() != `--holdout-by "model": want shape, concurrency or parallel (default: every k-th row)` {
		t.Errorf("CheckHoldoutBy(model) = %v", err)
	}
}
