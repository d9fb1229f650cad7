package calibrate

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"testing/quick"

	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// TestCorrectedAgreesAtItsAnchor: the mapped screening tier equals the
// quantitative predictions at the adjustment it was anchored at (the identity
// surrogateDescend relies on: its first residuals are f's), multiplicatively
// where the screening prediction is positive and additively where it is not,
// whether it takes its anchor's screening values or asks for them again, and
// it keeps the screening tier's ratios between adjustments.
func TestCorrectedAgreesAtItsAnchor(t *testing.T) {
	ctx := context.Background()
	prop := func(a, b, q0, q1 float64, zero bool) bool {
		s0 := [][2]float64{{1 + bounded(a), 1 + bounded(b)}}
		if zero {
			s0[0][1] = 0
		}
		q := [][2]float64{{1 + bounded(q0), 1 + bounded(q1)}}
		fj := func(_ context.Context, _ []Sample, adj refine.PassAdjust) ([][2]float64, error) {
			return [][2]float64{{s0[0][0] * adj.PrefillScale, s0[0][1] * adj.DecodeScale}}, nil
		}
		sur := corrected(fj, refine.Identity(), s0, q)
		at, err := sur(ctx, make([]Sample, 1), refine.Identity())
		if err != nil || !near(at[0][0], q[0][0]) || !near(at[0][1], q[0][1]) {
			return false
		}
		// Anchored elsewhere, it asks fj at the identity: the same values bit
		// for bit (the anchor's shortcut scales s0 as it would scale fj's answer).
		if asked, err := corrected(fj, refine.PassAdjust{}, s0, q)(ctx, make([]Sample, 1), refine.Identity()); err != nil || asked[0] != at[0] {
			return false
		}
		moved, _ := sur(ctx, make([]Sample, 1), refine.PassAdjust{PrefillScale: 2, DecodeScale: 3})
		if !near(moved[0][0], 2*q[0][0]) { // the screening tier's ratio, kept
			return false
		}
		if zero { // shifted: 0·3 + q − 0
			return near(moved[0][1], q[0][1])
		}
		return near(moved[0][1], 3*q[0][1])
	}
	if err := quick.Check(prop, &quick.Config{MaxCount: 2000}); err != nil {
		t.Error(err)
	}
}

// bounded maps a quick draw to [0, 1e6] (NaN to 0).
func bounded(x float64) float64 {
	if x < 0 || x != x {
		return 0
	}
	return min(x, 1e6)
}

// near: equal within 1e-12 relative (b > 0).
func near(a, b float64) bool { return a == b || (a-b)/b < 1e-12 && (b-a)/b < 1e-12 }

// TestMappedDescentCheaper: on rows the model made under known corrections,
// the descent through the mapped screening tier (surrogateDescend) reaches a
// quantitative cost at least as low as the Levenberg–Marquardt descent on the
// quantitative tier (lmDescend), from the identity, under both losses, with
// fewer quantitative evaluations (14 against 15–16 here; on the measured rows
// about a third fewer: docs/validation.md Round 21).
func TestMappedDescentCheaper(t *testing.T) {
	ev := linearEval{timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.0001}}
	truth := refine.PassAdjust{PrefillScale: 1.4, DecodeScale: 0.8, PassOverheadMs: 1, RequestOverheadMs: 20}
	ss := synthSamples(t, ev, truth)
	ctx := context.Background()
	for _, loss := range []string{LossL1, LossL2} {
		var costs [2]float64
		var evals [2]int
		for k, mapped := range []bool{false, true} {
			n := 0
			q := quantEval(ev, 1, 0)
			counted := memoOn(ss, func(ctx context.Context, s []Sample, adj refine.PassAdjust) ([][2]float64, error) {
				n++
				return q(ctx, s, adj)
			})
			var err error
			if mapped {
				_, costs[k], err = surrogateDescend(ctx, counted, screenEval(ev, 1), ss, [4]float64{}, loss, 12)
			} else {
				_, costs[k], err = lmDescend(ctx, counted, screenEval(ev, 1), ss, [4]float64{}, loss, 12)
			}
			if err != nil {
				t.Fatal(err)
			}
			evals[k] = n
		}
		t.Logf("%s: lmDescend cost %.4f in %d evaluations, surrogateDescend %.4f in %d", loss, costs[0], evals[0], costs[1], evals[1])
		if costs[1] > costs[0]*1.02 {
			t.Errorf("%s: mapped descent cost %.4f, above the direct descent's %.4f", loss, costs[1], costs[0])
		}
		if evals[1] >= evals[0] {
			t.Errorf("%s: mapped descent took %d quantitative evaluations, the direct one %d", loss, evals[1], evals[0])
		}
	}
}

// TestMappedDescentScreeningRefusal: when the screening tier fails inside the
// surrogate's own descent (here once, at its fourth call: the first Jacobian
// of the mapped tier), the descent continues directly on the quantitative tier
// from its iterate instead of failing the fit, and still recovers the rows'
// corrections (made at prefill 1.4, decode 0.8).
func TestMappedDescentScreeningRefusal(t *testing.T) {
	ev := linearEval{timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.0001}}
	ss := synthSamples(t, ev, refine.PassAdjust{PrefillScale: 1.4, DecodeScale: 0.8})
	ctx := context.Background()
	screen := screenEval(ev, 1)
	calls := 0
	refusing := func(ctx context.Context, s []Sample, adj refine.PassAdjust) ([][2]float64, error) {
		if calls++; calls == 4 {
			return nil, errors.New("screening refused")
		}
		return screen(ctx, s, adj)
	}
	f := memoOn(ss, quantEval(ev, 1, 0))
	x, c, err := surrogateDescend(ctx, f, refusing, ss, [4]float64{}, LossL2, 6)
	if err != nil {
		t.Fatalf("mapped descent failed on a screening refusal: %v", err)
	}
	if calls < 4 {
		t.Fatalf("the screening tier was called %d times: the refusal was never met", calls)
	}
	if a := toAdjust(x); c > 0.01 || math.Abs(a.DecodeScale-0.8) > 0.05 {
		t.Errorf("after the refusal: cost %.4f, adjustment %+v; want ≈ prefill 1.4, decode 0.8", c, a)
	}
}

// TestFitScreeningObjective: with the screening objective (the path that
// skips the mapped descent) the fit lowers the screening tier's cost from the
// identity and still reports quantitative errors.
func TestFitScreeningObjective(t *testing.T) {
	ev := linearEval{timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.0001}}
	ss := synthSamples(t, ev, refine.PassAdjust{PrefillScale: 1.4, DecodeScale: 0.8})
	fits, err := Fit(context.Background(), ev, ss, FitOptions{Objective: store.TierScreening, Workers: 1, SimplexEvals: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fj := screenEval(ev, 1)
	r0, err := residuals(ctx, fj, ss, [4]float64{})
	if err != nil {
		t.Fatal(err)
	}
	a := fits[0].Adjust
	x := [4]float64{math.Log(a.PrefillScale), math.Log(a.DecodeScale), a.PassOverheadMs, a.RequestOverheadMs}
	r1, err := residuals(ctx, fj, ss, x)
	if err != nil {
		t.Fatal(err)
	}
	if c0, c1 := cost(r0, len(ss), DefaultLoss), cost(r1, len(ss), DefaultLoss); c1 >= c0 {
		t.Errorf("screening cost %.4f at the fit (%+v), not below the identity's %.4f", c1, a, c0)
	}
	if g := fits[0]; len(g.Fitted) != len(ss) || g.TTFTFit <= 0 {
		t.Errorf("no quantitative report of the fit: %d predictions, TTFT MAPE %v", len(g.Fitted), g.TTFTFit)
	}
}

// TestFitWorkersDeterministic: the fit's evaluations run in parallel (the
// groups' and folds' fits, each evaluation's distinct points, the mapped
// descent's screening sweeps), yet the adjustments and every reported error
// are those of the sequential fit.
func TestFitWorkersDeterministic(t *testing.T) {
	ev := linearEval{timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.0001}}
	truth := refine.PassAdjust{PrefillScale: 1.3, DecodeScale: 0.9, PassOverheadMs: 0.5, RequestOverheadMs: 10}
	one, err := Fit(context.Background(), ev, synthSamples(t, ev, truth), FitOptions{Holdout: 3, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	many, err := Fit(context.Background(), ev, synthSamples(t, ev, truth), FitOptions{Holdout: 3, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	a, b := one[0], many[0]
	if a.Adjust != b.Adjust || a.TTFTFit != b.TTFTFit || a.TPOTFit != b.TPOTFit || a.TTFTCV != b.TTFTCV || a.TPOTCV != b.TPOTCV {
		t.Errorf("4 workers: %+v fit %v/%v CV %v/%v; 1 worker: %+v fit %v/%v CV %v/%v",
			b.Adjust, b.TTFTFit, b.TPOTFit, b.TTFTCV, b.TPOTCV, a.Adjust, a.TTFTFit, a.TPOTFit, a.TTFTCV, a.TPOTCV)
	}
}

// TestDescentClientsReportFullPhases: with DescentClients the descent's
// objective averages a desync run of many clients over fewer client phases
// (⌈clients / C⌉, at least one; the evaluator's where that is not fewer), but
// every reported number is the evaluator's own: the uncalibrated predictions
// are those of a fit without it bit for bit, and the fitted ones are the full
// evaluation at the adjustment found (not the cheaper objective's), which
// recovers the known corrections about as well.
func TestDescentClientsReportFullPhases(t *testing.T) {
	for _, c := range []struct{ clients, c, want int }{
		{64, 128, 1}, {64, 64, 1}, {64, 33, 2}, {64, 32, 2}, {64, 22, 3}, {64, 21, 0}, {64, 16, 0}, {64, 1, 0}, {0, 128, 0}, {64, 0, 0},
	} {
		if got := descentPhases(c.clients, c.c); got != c.want {
			t.Errorf("descentPhases(%d, %d) = %d, want %d", c.clients, c.c, got, c.want)
		}
	}
	ev := linearEval{timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.0001}}
	truth := refine.PassAdjust{PrefillScale: 1.4, DecodeScale: 0.8, PassOverheadMs: 1, RequestOverheadMs: 20}
	var ss []Sample // made by the model under truth, as desync runs
	for _, isl := range []int{512, 2048} {
		for _, c := range []int{2, 16, 96} {
			ss = append(ss, modelMade(t, ev, truth, int64(len(ss)+1), synthPoint(isl, c), queueing.FiniteRun{Requests: 10 * c, Desync: true}))
		}
	}
	ctx := context.Background()
	full, err := Fit(ctx, ev, ss, FitOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	cheap, err := Fit(ctx, ev, ss, FitOptions{Workers: 2, DescentClients: DefaultDescentClients})
	if err != nil {
		t.Fatal(err)
	}
	if len(full) != 1 || len(cheap) != 1 {
		t.Fatalf("%d and %d groups", len(full), len(cheap))
	}
	for i := range ss {
		if full[0].Before[i] != cheap[0].Before[i] {
			t.Errorf("row %d: uncalibrated %v with DescentClients, %v without", i, cheap[0].Before[i], full[0].Before[i])
		}
	}
	at, err := quantEval(ev, 2, 0)(ctx, cheap[0].Samples, cheap[0].Adjust)
	if err != nil {
		t.Fatal(err)
	}
	for i := range at {
		if at[i] != cheap[0].Fitted[i] {
			t.Errorf("row %d: fitted %v, the full evaluation at the fit's adjustment %v", i, cheap[0].Fitted[i], at[i])
		}
	}
	tf, pf := mape(full[0].Samples, full[0].Fitted)
	tc, pc := mape(cheap[0].Samples, cheap[0].Fitted)
	if tc > tf+2 || pc > pf+2 {
		t.Errorf("fitted TTFT / TPOT MAPE %.2f / %.2f %% with DescentClients %d, %.2f / %.2f %% without: want within 2 points", tc, pc, DefaultDescentClients, tf, pf)
	}
}

// countingLinear counts a linearEval's quantitative run evaluations.
type countingLinear struct {
	linearEval
	calls atomic.Int32
}

func (c *countingLinear) QuantitativeRunSummaryAdjusted(ctx context.Context, in store.PointInputs, adj refine.PassAdjust, run queueing.FiniteRun) (store.Quantitative, error) {
	c.calls.Add(1)
	return c.linearEval.QuantitativeRunSummaryAdjusted(ctx, in, adj, run)
}

// TestDescentClientsSmallRunsShareEvaluations: a group none of whose runs is
// descended over fewer phases (C below DescentClients / 3) fits exactly as
// without DescentClients, with the same evaluations — the descent shares the
// quantitative tier's remembered predictions instead of repeating them.
func TestDescentClientsSmallRunsShareEvaluations(t *testing.T) {
	truth := refine.PassAdjust{PrefillScale: 1.4, DecodeScale: 0.8, PassOverheadMs: 1, RequestOverheadMs: 20}
	lin := linearEval{timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.0001}}
	var ss []Sample
	for _, isl := range []int{512, 2048} {
		for _, c := range []int{2, 4} {
			ss = append(ss, modelMade(t, lin, truth, int64(len(ss)+1), synthPoint(isl, c), queueing.FiniteRun{Requests: 10 * c, Desync: true}))
		}
	}
	if descendsCheaper(ss, DefaultDescentClients) {
		t.Fatal("C 2 and 4 descended over fewer phases")
	}
	var fits [2][]GroupFit
	var calls [2]int32
	for i, clients := range []int{0, DefaultDescentClients} {
		ev := &countingLinear{linearEval: lin}
		f, err := Fit(context.Background(), ev, ss, FitOptions{Workers: 1, DescentClients: clients})
		if err != nil {
			t.Fatal(err)
		}
		fits[i], calls[i] = f, ev.calls.Load()
	}
	if calls[0] != calls[1] || fits[0][0].Adjust != fits[1][0].Adjust || fits[0][0].TTFTFit != fits[1][0].TTFTFit {
		t.Errorf("without DescentClients %d evaluations, %+v; with it %d, %+v", calls[0], fits[0][0].Adjust, calls[1], fits[1][0].Adjust)
	}
}
