package main

// The screening bracket and the oracle curves of `aicdb plot cdf` (issue 10: "the
// TTFT/ITL CDF of one point (both tiers and the oracle when available)").

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"strings"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/aicdb/aicdb/oracle/gate"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/refine/calibrate"
	"github.com/aicdb/aicdb/store"
)

// bracketLine is the screening tier's steady-TTFT p99 bracket drawn at P = 0.99.
type bracketLine struct {
	*plotter.Line
	certain bool
}

// screeningBracket returns the point's screening bracket as a horizontal segment
// at 0.99 from its lower to its upper end, or nil when the row has none.
func screeningBracket(ctx context.Context, st *store.Store, key string) (*bracketLine, error) {
	pt, err := st.FindPoint(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read point %s: %w", key[:12], err)
	}
	q := pt.Q
	if !q.HasBracket || !(q.P99Hi >= q.P99Lo) || !finite(q.P99Lo) || !finite(q.P99Hi) {
		return nil, nil
	}
	l, err := plotter.NewLine(plotter.XYs{{X: q.P99Lo, Y: 0.99}, {X: q.P99Hi, Y: 0.99}})
	if err != nil {
		return nil, fmt.Errorf("screening bracket of %s: %w", key[:12], err)
	}
	l.LineStyle.Color = color.RGBA{R: 120, G: 120, B: 120, A: 255}
	l.LineStyle.Width = vg.Points(4)
	return &bracketLine{Line: l, certain: q.HiCertain}, nil
}

// oracleDistributions simulates the point in the oracle with the model's own
// inputs (its perf-data timing, engine and workload; its calibration when the row
// was computed with one), driven as the gate drives its families, and returns the
// DES's steady TTFT and ITL distributions.
func oracleDistributions(ctx context.Context, st *store.Store, key string) (gate.Distributions, error) {
	var none gate.Distributions
	pt, err := st.FindPoint(ctx, key)
	if err != nil {
		return none, fmt.Errorf("read point %s: %w", key[:12], err)
	}
	if pt.Mode == store.ModeDisagg {
		return none, userErrorf("plot cdf --oracle: point %s is disaggregated; the oracle simulates aggregated points only", key[:12])
	}
	ev := refine.NewPerfdbEvaluator(refine.StoreSource{St: st})
	if name, ok := calibrationOf(pt.Evaluator); ok {
		cal, err := calibrate.Load(ctx, st, name)
		if err != nil {
			return none, asUser(err)
		}
		ev.SetCalibrator(cal)
	}
	pm, err := ev.PointModel(ctx, pt.PointInputs)
	if err != nil {
		return none, asUser(err)
	}
	f := gate.Family{Name: key[:12], Spec: pm.Workload, Engine: pm.Engine, Timing: pm.Timing,
		StaggerPhases: queueing.DefaultStaggerPhases, ClientRTTMs: queueing.DefaultClientRTTMs}
	_, des, err := gate.PointDistributions(ctx, f)
	if err != nil {
		return none, fmt.Errorf("plot cdf --oracle: point %s: %w", key[:12], err)
	}
	return des, nil
}

// oracleSeries is oracleDistributions as CDFs, named like the stored series so
// they share colours.
func oracleSeries(ctx context.Context, st *store.Store, key string) ([]cdfSeries, error) {
	des, err := oracleDistributions(ctx, st, key)
	if err != nil {
		return nil, err
	}
	var out []cdfSeries
	for _, s := range []struct {
		name string
		d    queueing.Distribution
	}{{"ttft_steady", des.TTFT}, {"itl", des.ITL}} {
		atoms := s.d.Atoms()
		sa := make([]storedAtom, len(atoms))
		for i, a := range atoms {
			sa[i] = storedAtom{a.Value, a.Weight}
		}
		if xy, ok := cdfOf(sa); ok {
			out = append(out, cdfSeries{Name: s.name, XY: xy})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("plot cdf --oracle: the oracle measured no steady request")
	}
	return out, nil
}

// calibrationOf reads the calibration name out of an evaluator name
// ("…+cal:NAME@digest"), as withCalibration writes it.
func calibrationOf(evaluator string) (string, bool) {
	_, rest, ok := strings.Cut(evaluator, "+cal:")
	if !ok {
		return "", false
	}
	name, _, _ := strings.Cut(rest, "@")
	return name, name != ""
}

// seriesColor is the index of the stored series called name (its colour), or the
// next free index.
func seriesColor(series []cdfSeries, name string) int {
	for i, s := range series {
		if s.Name == name {
			return i
		}
	}
	return len(series)
}
