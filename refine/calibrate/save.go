package calibrate

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"

	"github.com/aicdb/aicdb/store"
)

// Save stores a fitted calibration under name (replacing one of the same name) in
// one transaction: its parameters per deployment key, quality and the training
// rows with their residuals. The report records the folds (opt.Holdout,
// opt.HoldoutBy), the fit's loss (opt.Loss), its descent's client starts
// (opt.DescentClients) and the row-weighted MAPE over all groups (OverallOf).
func Save(ctx context.Context, st *store.Store, name, predicate, evaluator, profile string, opt FitOptions, fits []GroupFit, createdAt string) (string, error) {
	h := sha256.New()
	for _, g := range fits {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%s\x00%s\x00%s\x00%x\x00%x\x00%x\x00%x\n", g.System, g.Backend, g.Version, g.Deployed, g.Model, g.Quant, g.Layout,
			math.Float64bits(g.Adjust.PrefillScale), math.Float64bits(g.Adjust.DecodeScale),
			math.Float64bits(g.Adjust.PassOverheadMs), math.Float64bits(g.Adjust.RequestOverheadMs))
	}
	digest := hex.EncodeToString(h.Sum(nil))[:8]
	loss := cmp.Or(opt.Loss, DefaultLoss)
	rep := map[string]any{"groups": len(fits), "holdout": opt.Holdout, "loss": loss}
	if opt.Holdout >= 2 {
		rep["holdout_by"] = cmp.Or(opt.HoldoutBy, "rows")
	}
	if opt.DescentClients > 0 {
		rep["descent_clients"] = opt.DescentClients // the descent's client phases (FitOptions.DescentClients)
	}
	// The row-weighted figures over every group (OverallOf); the cross-validated
	// ones only when some group had folds.
	o := OverallOf(fits)
	rep["rows"], rep["ttft_mape_pct_before"], rep["tpot_mape_pct_before"] = o.Rows, o.TTFTBefore, o.TPOTBefore
	rep["ttft_mape_pct_fit"], rep["tpot_mape_pct_fit"] = o.TTFTFit, o.TPOTFit
	if o.CVRows > 0 {
		rep["cv_rows"], rep["ttft_mape_pct_cv"], rep["tpot_mape_pct_cv"] = o.CVRows, o.TTFTCV, o.TPOTCV
	}
	report, err := json.Marshal(rep)
	if err != nil {
		return "", err
	}
	params := make([]store.CalibrationParam, len(fits))
	samples := make([][]store.CalibrationSample, len(fits))
	for k, g := range fits {
		un, _ := json.Marshal(append([]string{}, g.Unidentified...))
		a := g.Adjust
		params[k] = store.CalibrationParam{System: g.System, Backend: g.Backend, Version: g.Version, Deployed: g.Deployed, Model: g.Model, Quant: g.Quant, Layout: g.Layout,
			PrefillScale: a.PrefillScale, DecodeScale: a.DecodeScale, PassOverheadMs: a.PassOverheadMs,
			RequestOverheadMs: a.RequestOverheadMs, Rows: len(g.Samples), TTFTMAPEBefore: g.TTFTBefore,
			TPOTMAPEBefore: g.TPOTBefore, TTFTMAPEFit: g.TTFTFit, TPOTMAPEFit: g.TPOTFit, HasCV: g.HasCV,
			TTFTMAPECV: g.TTFTCV, TPOTMAPECV: g.TPOTCV, Unidentified: string(un)}
		for i, s := range g.Samples {
			for j, metric := range []string{"ttft", "tpot"} {
				meas := [2]float64{s.TTFT, s.TPOT}[j]
				r := store.CalibrationSample{MeasurementID: s.MeasurementID, System: g.System, Backend: g.Backend,
					Version: g.Version, Deployed: g.Deployed, Model: g.Model, Quant: g.Quant, Layout: g.Layout, Metric: metric, Measured: meas, Uncalibrated: g.Before[i][j],
					Fitted: g.Fitted[i][j], Residual: g.Fitted[i][j]/meas - 1, Fold: s.Fold}
				if g.HasCV {
					r.HasHeldOut, r.HeldOut = true, g.HeldOut[i][j]
				}
				samples[k] = append(samples[k], r)
			}
		}
	}
	err = st.SaveCalibration(ctx, store.Calibration{Name: name, Digest: digest, Predicate: predicate, Evaluator: evaluator,
		Profile: profile, HoldoutK: opt.Holdout, Report: string(report), CreatedAt: createdAt}, params, samples)
	return digest, err
}
