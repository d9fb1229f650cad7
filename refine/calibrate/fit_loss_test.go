package calibrate

import (
	"context"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/refine"
)

// paramDistance is how far a fitted adjustment's scales are from the truth's:
// |ln(prefill/prefill*)| + |ln(decode/decode*)|.
func paramDistance(a, truth refine.PassAdjust) float64 {
	return math.Abs(math.Log(a.PrefillScale/truth.PrefillScale)) + math.Abs(math.Log(a.DecodeScale/truth.DecodeScale))
}

// TestFitL1ResistsOutlier: rows made by the model under known scales, one of
// them a gross outlier (its TTFT ×3, or ×0.3) that no pass-timing correction
// fits. The L1 fit (the reported MAPE) recovers the scales within 3 % and puts
// the error on the outlier; the least-squares fit is pulled off the truth by it
// (at least twice as far), and it fits the other rows worse.
func TestFitL1ResistsOutlier(t *testing.T) {
	ev := linearEval{timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.0001}}
	truth := refine.PassAdjust{PrefillScale: 1.4, DecodeScale: 0.8}
	for _, c := range []struct {
		row    int
		factor float64
	}{{3, 3}, {5, 0.3}} {
		var dist [2]float64
		var clean [2]float64 // MAPE (%) of TTFT and TPOT over the rows other than the outlier
		for k, loss := range []string{LossL1, LossL2} {
			ss := synthSamples(t, ev, truth)
			ss[c.row].TTFT *= c.factor
			fits, err := Fit(context.Background(), ev, ss, FitOptions{Workers: 1, Loss: loss})
			if err != nil {
				t.Fatal(err)
			}
			g := fits[0]
			dist[k] = paramDistance(g.Adjust, truth)
			for i, s := range g.Samples {
				if i != c.row {
					clean[k] += math.Abs(g.Fitted[i][0]/s.TTFT-1) + math.Abs(g.Fitted[i][1]/s.TPOT-1)
				}
			}
		}
		if dist[0] > 0.03 || dist[1] < 2*dist[0] {
			t.Errorf("outlier row %d ×%g: distance from the true scales L1 %.4f, L2 %.4f; want L1 ≤ 0.03 and L2 ≥ 2×L1", c.row, c.factor, dist[0], dist[1])
		}
		if clean[0] >= clean[1] {
			t.Errorf("outlier row %d ×%g: summed relative error on the other rows L1 %.4f ≥ L2 %.4f", c.row, c.factor, clean[0], clean[1])
		}
	}
}

// TestFitL1Deterministic: the L1 fit with cross-validation, run twice on fresh
// copies of the same rows, gives bit-identical parameters and predictions.
func TestFitL1Deterministic(t *testing.T) {
	ev := linearEval{timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.0001}}
	truth := refine.PassAdjust{PrefillScale: 1.4, DecodeScale: 0.8, RequestOverheadMs: 3}
	var runs [2]GroupFit
	for i := range runs {
		ss := synthSamples(t, ev, truth)
		ss[2].TTFT *= 2.5
		fits, err := Fit(context.Background(), ev, ss, FitOptions{Holdout: 3, Workers: 2, Loss: LossL1})
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = fits[0]
	}
	a, b := runs[0], runs[1]
	bits := func(ps [][2]float64) []uint64 {
		var out []uint64
		for _, p := range ps {
			out = append(out, math.Float64bits(p[0]), math.Float64bits(p[1]))
		}
		return out
	}
	if a.Adjust != b.Adjust || !slices.Equal(bits(a.Fitted), bits(b.Fitted)) || !slices.Equal(bits(a.HeldOut), bits(b.HeldOut)) ||
		math.Float64bits(a.TTFTCV) != math.Float64bits(b.TTFTCV) || math.Float64bits(a.TPOTCV) != math.Float64bits(b.TPOTCV) {
		t.Errorf("two L1 fits differ: %+v (CV %v/%v) vs %+v (CV %v/%v)", a.Adjust, a.TTFTCV, a.TPOTCV, b.Adjust, b.TTFTCV, b.TPOTCV)
	}
}

// TestFitLossOption: an unknown loss is refused with the fix, before any fit.
func TestFitLossOption(t *testing.T) {
	_, err := Fit(context.Background(), linearEval{}, nil, FitOptions{Loss: "huber"})
	want := `--loss "huber": want l1 (mean absolute relative error, the reported MAPE) or l2 (squared relative error)`
	if err == nil || err.Error() != want {
		t.Errorf("loss huber: %v, want %q", err, want)
	}
	for _, l := range []string{"", LossL1, LossL2} {
		if err := CheckLoss(l); err != nil {
			t.Errorf("loss %q: %v", l, err)
		}
	}
}

// TestReweightMajorises: the reweighted squares of the L1 fit are a majoriser of
// the L1 cost that touches it at the current residuals: Σ(wᵢrᵢ)² = Σ|rᵢ|/2 over
// data residuals at or above δ, every prior row is left as it is, and the
// majoriser Σ(wᵢ·sᵢ)² + Σ|rᵢ|/2 is ≥ Σ|sᵢ| for any other residuals s (so a step
// that lowers it lowers the L1 cost). Under L2 the problem is returned unchanged.
func TestReweightMajorises(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(t, "n")
		gen := rapid.Float64Range(-3, 3)
		r := make([]float64, 2*n+4)
		s := make([]float64, 2*n+4)
		jac := make([][4]float64, len(r))
		for i := range r {
			r[i], s[i] = gen.Draw(t, "r"), gen.Draw(t, "s")
			for j := range 4 {
				jac[i][j] = gen.Draw(t, "j")
			}
		}
		jw, rw := reweight(jac, r, n, LossL1)
		half, tangent, lhs, l1 := 0.0, 0.0, 0.0, 0.0
		for i := range 2 * n {
			w := rw[i] / r[i]
			if r[i] == 0 {
				w = 1 / math.Sqrt(2*l1Floor)
			}
			for j := range 4 {
				if math.Abs(jw[i][j]-w*jac[i][j]) > 1e-12*(1+math.Abs(jac[i][j])) {
					t.Fatalf("row %d: Jacobian not scaled like its residual", i)
				}
			}
			if math.Abs(r[i]) >= l1Floor {
				half += rw[i] * rw[i]
				tangent += math.Abs(r[i]) / 2
			}
			m := math.Max(math.Abs(r[i]), l1Floor)
			lhs += w*w*s[i]*s[i] + m/2
			l1 += math.Abs(s[i])
		}
		if math.Abs(half-tangent) > 1e-9*(1+tangent) {
			t.Fatalf("Σ(w·r)² = %v, want Σ|r|/2 = %v", half, tangent)
		}
		if lhs < l1-1e-9*(1+l1) {
			t.Fatalf("majoriser %v below the L1 cost %v", lhs, l1)
		}
		for i := 2 * n; i < len(r); i++ {
			if rw[i] != r[i] || jw[i] != jac[i] {
				t.Fatalf("prior row %d reweighted", i)
			}
		}
		if j2, r2 := reweight(jac, r, n, LossL2); &j2[0] != &jac[0] || &r2[0] != &r[0] {
			t.Fatal("L2 problem changed")
		}
		if got, want := cost(r, n, LossL1), sumAbs(r[:2*n])+sumSq(r[2*n:]); got != want {
			t.Fatalf("L1 cost %v, want %v", got, want)
		}
	})
}

func sumAbs(r []float64) float64 {
	s := 0.0
	for _, v := range r {
		s += math.Abs(v)
	}
	return s
}
