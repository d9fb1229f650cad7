package calibrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"

	"github.com/jmoiron/sqlx"

	"github.com/aicdb/aicdb/store"
)

// Save stores a fitted calibration under name (replacing one of the same name) in
// one transaction: its parameters per deployment key, quality and the training
// rows with their residuals.
func Save(ctx context.Context, st *store.Store, name, predicate, evaluator, profile string, holdout int, fits []GroupFit, createdAt string) (string, error) {
	h := sha256.New()
	for _, g := range fits {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%x\x00%x\x00%x\x00%x\n", g.System, g.Backend, g.Version, g.Model,
			math.Float64bits(g.Adjust.PrefillScale), math.Float64bits(g.Adjust.DecodeScale),
			math.Float64bits(g.Adjust.PassOverheadMs), math.Float64bits(g.Adjust.RequestOverheadMs))
	}
	digest := hex.EncodeToString(h.Sum(nil))[:8]
	report, err := json.Marshal(map[string]any{"groups": len(fits), "holdout": holdout})
	if err != nil {
		return "", err
	}
	err = st.Tx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM calibrations WHERE name = ?`, name); err != nil {
			return fmt.Errorf("replace calibration %s: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO calibrations (name, digest, predicate, evaluator, profile, holdout_k, report, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, name, digest, predicate, evaluator, profile, holdout, string(report), createdAt); err != nil {
			return fmt.Errorf("store calibration %s: %w", name, err)
		}
		for _, g := range fits {
			un, _ := json.Marshal(append([]string{}, g.Unidentified...))
			var cvT, cvP any
			if g.HasCV {
				cvT, cvP = g.TTFTCV, g.TPOTCV
			}
			a := g.Adjust
			if _, err := tx.ExecContext(ctx, `INSERT INTO calibration_params (name, system, backend, version, model,
				prefill_scale, decode_scale, pass_overhead_ms, request_overhead_ms, rows, ttft_mape_before, tpot_mape_before,
				ttft_mape_fit, tpot_mape_fit, ttft_mape_cv, tpot_mape_cv, unidentified)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, name, g.System, g.Backend, g.Version, g.Model,
				a.PrefillScale, a.DecodeScale, a.PassOverheadMs, a.RequestOverheadMs, len(g.Samples), g.TTFTBefore, g.TPOTBefore,
				g.TTFTFit, g.TPOTFit, cvT, cvP, string(un)); err != nil {
				return fmt.Errorf("store calibration %s of %s/%s/%s/%s: %w", name, g.System, g.Backend, g.Version, g.Model, err)
			}
			for i, s := range g.Samples {
				for j, metric := range []string{"ttft", "tpot"} {
					meas := [2]float64{s.TTFT, s.TPOT}[j]
					var held any
					if g.HasCV {
						held = g.HeldOut[i][j]
					}
					if _, err := tx.ExecContext(ctx, `INSERT INTO calibration_rows (name, measurement_id, system, backend, version, model,
						metric, measured, uncalibrated, fitted, residual, held_out, fold) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
						name, s.MeasurementID, g.System, g.Backend, g.Version, g.Model, metric, meas, g.Before[i][j], g.Fitted[i][j],
						g.Fitted[i][j]/meas-1, held, s.Fold); err != nil {
						return fmt.Errorf("store calibration row %d: %w", s.MeasurementID, err)
					}
				}
			}
		}
		return nil
	})
	return digest, err
}
