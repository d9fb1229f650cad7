package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

// Calibrations (migrations: calibrations, calibration_params, calibration_rows,
// measurement_predictions) and the accuracy view: refine/calibrate fits and
// reads them; the SQL is here.

// QuantLabel is a point's quantisation as a calibration key (migration 00014):
// "gemm=G,moe=M,kv=K,fmha=F,comm=C" from its GemmQuant, MoEQuant, KVCacheQuant,
// FMHAQuant and CommQuant in that order, an empty part omitted (so all empty
// gives ""). The point_calibrations view derives the same label from
// operating_points' columns; calibration_params.quant "" (a calibration fitted
// before 00014, or points without quantisation labels) applies to any
// quantisation.
func QuantLabel(in PointInputs) string {
	parts := make([]string, 0, 5)
	for _, p := range [...]struct{ k, v string }{{"gemm", in.GemmQuant}, {"moe", in.MoEQuant},
		{"kv", in.KVCacheQuant}, {"fmha", in.FMHAQuant}, {"comm", in.CommQuant}} {
		if p.v != "" {
			parts = append(parts, p.k+"="+p.v)
		}
	}
	return strings.Join(parts, ",")
}

// LayoutLabel is a point's parallel layout as a calibration key's component
// (migration 00018): "adp" when a worker runs attention data parallelism (dp >
// 1: dp schedulers stepping in lockstep), "pp" when it pipelines (pp > 1),
// "adp,pp" for both, "tp" for neither — over every pool of a disaggregated
// point. The perf data prices one rank's kernels; what a lockstep step or a
// pipeline adds to a pass is left to the calibration, and differs from a plain
// tensor-parallel deployment's. The point_calibrations view derives the same
// label from operating_points' columns; calibration_params.layout "" (fitted
// before 00018) applies to any layout.
func LayoutLabel(in PointInputs) string {
	adp := max(in.DP, in.PDP, in.DDP) > 1
	pp := max(in.PP, in.PPP, in.DPP) > 1
	switch {
	case adp && pp:
		return "adp,pp"
	case adp:
		return "adp"
	case pp:
		return "pp"
	}
	return "tp"
}

// Calibration is a calibrations row.
type Calibration struct {
	Name, Digest, Predicate, Evaluator, Profile string
	HoldoutK                                    int
	Report, CreatedAt                           string
}

// CalibrationParam is a calibration_params row: one deployment key's fitted
// adjustment and quality. Quant is the points' QuantLabel ("" = any); Deployed
// the engine version the group's measurements were deployed at
// (PointInputs.DeployedVersion; "" = any, fitted before migration 00015);
// Layout the points' LayoutLabel ("" = any, fitted before migration 00018). The
// CV columns are NULL when HasCV is false.
type CalibrationParam struct {
	System, Backend, Version, Deployed, Model, Quant, Layout     string
	PrefillScale, DecodeScale, PassOverheadMs, RequestOverheadMs float64
	Rows                                                         int
	TTFTMAPEBefore, TPOTMAPEBefore, TTFTMAPEFit, TPOTMAPEFit     float64
	HasCV                                                        bool
	TTFTMAPECV, TPOTMAPECV                                       float64
	Unidentified                                                 string // JSON array
}

// CalibrationSample is a calibration_rows row: one training measurement's
// metric. HeldOut is NULL when HasHeldOut is false.
type CalibrationSample struct {
	MeasurementID                                                    int64
	System, Backend, Version, Deployed, Model, Quant, Layout, Metric string
	Measured, Uncalibrated, Fitted, Residual                         float64
	HasHeldOut                                                       bool
	HeldOut                                                          float64
	Fold                                                             int
}

// SaveCalibration replaces the calibration c.Name by c with its params and
// samples, in one transaction. samples are written after the params of their
// deployment key, in the order given.
func (s *Store) SaveCalibration(ctx context.Context, c Calibration, params []CalibrationParam, samples [][]CalibrationSample) error {
	return s.Tx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `DELETE FROM calibrations WHERE name = ?`, c.Name); err != nil {
			return fmt.Errorf("replace calibration %s: %w", c.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO calibrations (name, digest, predicate, evaluator, profile, holdout_k, report, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, c.Name, c.Digest, c.Predicate, c.Evaluator, c.Profile, c.HoldoutK, c.Report, c.CreatedAt); err != nil {
			return fmt.Errorf("store calibration %s: %w", c.Name, err)
		}
		for i, g := range params {
			var cvT, cvP any
			if g.HasCV {
				cvT, cvP = g.TTFTMAPECV, g.TPOTMAPECV
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO calibration_params (name, system, backend, version, deployed_version, model, quant, layout,
				prefill_scale, decode_scale, pass_overhead_ms, request_overhead_ms, rows, ttft_mape_before, tpot_mape_before,
				ttft_mape_fit, tpot_mape_fit, ttft_mape_cv, tpot_mape_cv, unidentified)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, c.Name, g.System, g.Backend, g.Version, g.Deployed, g.Model, g.Quant, g.Layout,
				g.PrefillScale, g.DecodeScale, g.PassOverheadMs, g.RequestOverheadMs, g.Rows, g.TTFTMAPEBefore, g.TPOTMAPEBefore,
				g.TTFTMAPEFit, g.TPOTMAPEFit, cvT, cvP, g.Unidentified); err != nil {
				return fmt.Errorf("store calibration %s of %s/%s/%s (deployed %s)/%s [%s; %s]: %w", c.Name, g.System, g.Backend, g.Version, g.Deployed, g.Model, g.Quant, g.Layout, err)
			}
			if i >= len(samples) {
				continue
			}
			for _, r := range samples[i] {
				var held any
				if r.HasHeldOut {
					held = r.HeldOut
				}
				if _, err := tx.ExecContext(ctx, `INSERT INTO calibration_rows (name, measurement_id, system, backend, version, deployed_version,
						model, quant, layout, metric, measured, uncalibrated, fitted, residual, held_out, fold) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
					c.Name, r.MeasurementID, r.System, r.Backend, r.Version, r.Deployed, r.Model, r.Quant, r.Layout, r.Metric, r.Measured, r.Uncalibrated, r.Fitted,
					r.Residual, held, r.Fold); err != nil {
					return fmt.Errorf("store calibration row %d: %w", r.MeasurementID, err)
				}
			}
		}
		return nil
	})
}

// CalibrationDigest returns the digest of the calibration name; the error is
// ErrNotFound when there is none.
func (s *Store) CalibrationDigest(ctx context.Context, name string) (string, error) {
	var digest string
	err := s.db.GetContext(ctx, &digest, `SELECT digest FROM calibrations WHERE name = ?`, name)
	return digest, err
}

// CalibrationNames lists the stored calibrations, sorted.
func (s *Store) CalibrationNames(ctx context.Context) ([]string, error) {
	var names []string
	err := s.db.SelectContext(ctx, &names, `SELECT name FROM calibrations ORDER BY name`)
	return names, err
}

// CalibrationParams reads the fitted adjustments of the calibration name, by
// deployment key: the key, the four adjustment fields, the group's rows and its
// cross-validated MAPE (HasCV false where it had no folds).
func (s *Store) CalibrationParams(ctx context.Context, name string) ([]CalibrationParam, error) {
	var out []CalibrationParam
	err := s.EachRow(ctx, `SELECT system, backend, version, deployed_version, model, quant, layout, prefill_scale, decode_scale,
		pass_overhead_ms, request_overhead_ms, rows, ttft_mape_cv, tpot_mape_cv FROM calibration_params WHERE name = ?
		ORDER BY system, backend, version, deployed_version, model, quant, layout`,
		[]any{name}, func(scan func(...any) error) error {
			var p CalibrationParam
			var ttft, tpot sql.NullFloat64
			if err := scan(&p.System, &p.Backend, &p.Version, &p.Deployed, &p.Model, &p.Quant, &p.Layout, &p.PrefillScale, &p.DecodeScale,
				&p.PassOverheadMs, &p.RequestOverheadMs, &p.Rows, &ttft, &tpot); err != nil {
				return err
			}
			p.HasCV, p.TTFTMAPECV, p.TPOTMAPECV = ttft.Valid && tpot.Valid, ttft.Float64, tpot.Float64
			out = append(out, p)
			return nil
		})
	return out, err
}

// CalibrationShape is one (isl, osl) a calibration's fit was trained on, with
// the fit's deployment key (CalibrationParam's key fields).
type CalibrationShape struct {
	System, Backend, Version, Deployed, Model, Quant, Layout string
	ISL, OSL                                                 int
}

// CalibrationShapes lists the distinct (isl, osl) of the measurements each fit
// of the calibration name was trained on (its calibration_rows).
func (s *Store) CalibrationShapes(ctx context.Context, name string) ([]CalibrationShape, error) {
	var out []CalibrationShape
	err := s.EachRow(ctx, `SELECT DISTINCT r.system, r.backend, r.version, r.deployed_version, r.model, r.quant, r.layout, m.isl, m.osl
		FROM calibration_rows r JOIN measurements m ON m.id = r.measurement_id WHERE r.name = ?
		ORDER BY r.system, r.backend, r.version, r.deployed_version, r.model, r.quant, r.layout, m.isl, m.osl`,
		[]any{name}, func(scan func(...any) error) error {
			var c CalibrationShape
			if err := scan(&c.System, &c.Backend, &c.Version, &c.Deployed, &c.Model, &c.Quant, &c.Layout, &c.ISL, &c.OSL); err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("read calibration %s's training shapes: %w", name, err)
	}
	return out, nil
}

// CalibrationTrained counts the measurements among ids that trained the
// calibration name (its calibration_rows): predicted under it, their error is
// the fit's, in-sample.
func (s *Store) CalibrationTrained(ctx context.Context, name string, ids []int64) (int, error) {
	list, err := json.Marshal(ids)
	if err != nil {
		return 0, err
	}
	var n int
	err = s.db.GetContext(ctx, &n, `SELECT count(DISTINCT measurement_id) FROM calibration_rows
		WHERE name = ? AND measurement_id IN (SELECT value FROM json_each(?))`, name, string(list))
	if err != nil {
		return 0, fmt.Errorf("read calibration %s's training rows: %w", name, err)
	}
	return n, nil
}

// CalibrationCV is the row-weighted cross-validated accuracy a calibration's
// report keeps: K folds (each holding out what By names: "rows", or a
// calibrate --holdout-by column) over Rows rows, TTFT and TPOT MAPE (%).
type CalibrationCV struct {
	K, Rows    int
	By         string
	TTFT, TPOT float64
}

// CalibrationCrossValidated reads the cross-validated figures of the
// calibration name's report; ok is false when it has none (fitted without
// folds, or no group had as many rows as folds, or stored before the report
// kept them).
func (s *Store) CalibrationCrossValidated(ctx context.Context, name string) (cv CalibrationCV, ok bool, err error) {
	var r struct {
		K    int             `db:"holdout_k"`
		By   string          `db:"by"`
		Rows sql.NullInt64   `db:"rows"`
		TTFT sql.NullFloat64 `db:"ttft"`
		TPOT sql.NullFloat64 `db:"tpot"`
	}
	err = s.db.GetContext(ctx, &r, `SELECT holdout_k, coalesce(json_extract(report, '$.holdout_by'), 'rows') AS by,
		json_extract(report, '$.cv_rows') AS rows, json_extract(report, '$.ttft_mape_pct_cv') AS ttft,
		json_extract(report, '$.tpot_mape_pct_cv') AS tpot FROM calibrations WHERE name = ?`, name)
	if err != nil {
		return CalibrationCV{}, false, fmt.Errorf("read calibration %s's report: %w", name, err)
	}
	if !r.Rows.Valid || !r.TTFT.Valid || !r.TPOT.Valid || r.Rows.Int64 == 0 {
		return CalibrationCV{}, false, nil
	}
	return CalibrationCV{K: r.K, Rows: int(r.Rows.Int64), By: r.By, TTFT: r.TTFT.Float64, TPOT: r.TPOT.Float64}, true, nil
}

// AccuracyRow is one (group, metric) aggregate of the accuracy view (see
// AccuracyReport).
type AccuracyRow struct {
	Group       []string
	Metric      string
	N           int     // predicted rows
	MAPE        float64 // %
	LegacyN     int
	LegacyMAPE  float64 // % on the rows with a legacy estimate
	MAPESame    float64 // % of the predictions on those same rows
	Unpredicted int     // measured rows without a prediction (see the view's reason)
}

// AccuracyReport aggregates the accuracy view per group of the columns by (the
// caller checks they are the view's) and metric, for one calibration ("" =
// uncalibrated), over the measurements matching where (a SQL predicate over the
// measurements table; "" = all) and the given metrics (none = all): the count and
// MAPE (%) of the predictions, the same of aiconfigurator's legacy estimate and of
// the predictions on the rows that have one, and the unpredicted rows. Ordered by
// group and metric.
func (s *Store) AccuracyReport(ctx context.Context, by []string, metrics []string, calibration, where string) ([]AccuracyRow, error) {
	sel := "''"
	if len(by) > 0 {
		parts := make([]string, len(by))
		for i, b := range by {
			parts[i] = "coalesce(CAST(" + b + " AS TEXT), '')"
		}
		sel = strings.Join(parts, " || char(31) || ")
	}
	q := `SELECT ` + sel + ` AS grp, metric,
		count(rel_error),
		coalesce(100 * avg(abs(rel_error)), 0),
		count(CASE WHEN rel_error IS NOT NULL THEN legacy_rel_error END),
		coalesce(100 * avg(CASE WHEN rel_error IS NOT NULL THEN abs(legacy_rel_error) END), 0),
		coalesce(100 * avg(CASE WHEN legacy_rel_error IS NOT NULL THEN abs(rel_error) END), 0),
		count(*) - count(rel_error)
		FROM accuracy WHERE calibration = ?`
	args := []any{calibration}
	if strings.TrimSpace(where) != "" {
		q += ` AND measurement_id IN (SELECT id FROM measurements WHERE (` + where + `))`
	}
	if len(metrics) > 0 {
		q += ` AND metric IN (?` + strings.Repeat(", ?", len(metrics)-1) + `)`
		for _, m := range metrics {
			args = append(args, m)
		}
	}
	q += ` GROUP BY grp, metric ORDER BY grp, metric`
	var out []AccuracyRow
	err := s.EachRow(ctx, q, args, func(scan func(...any) error) error {
		var r AccuracyRow
		var g string
		if err := scan(&g, &r.Metric, &r.N, &r.MAPE, &r.LegacyN, &r.LegacyMAPE, &r.MAPESame, &r.Unpredicted); err != nil {
			return err
		}
		if len(by) > 0 {
			r.Group = strings.Split(g, "\x1f")
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// Prediction is a measurement_predictions row: the point a measurement was
// predicted by (PointKey) or why it was not (Reason); the other is NULL when
// empty.
type Prediction struct {
	MeasurementID                                    int64
	Calibration, Evaluator                           string
	PointKey, ModelUsed, VersionUsed, VersionMapping string
	EngineProfile, Reason                            string
}

// SavePredictions stores ps in one transaction, one per measurement and
// calibration: a stored prediction of another evaluator is replaced.
func (s *Store) SavePredictions(ctx context.Context, ps []Prediction) error {
	return s.Tx(ctx, func(tx *sqlx.Tx) error {
		stmt, err := tx.PreparexContext(ctx, `INSERT OR REPLACE INTO measurement_predictions
			(measurement_id, calibration, evaluator, point_key, model_used, version_used, version_mapping, engine_profile, reason)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return fmt.Errorf("prepare prediction insert: %w", err)
		}
		defer stmt.Close()
		del, err := tx.PreparexContext(ctx, `DELETE FROM measurement_predictions WHERE measurement_id = ? AND calibration = ? AND evaluator <> ?`)
		if err != nil {
			return fmt.Errorf("prepare prediction delete: %w", err)
		}
		defer del.Close()
		for i := range ps {
			p := &ps[i]
			if _, err := del.ExecContext(ctx, p.MeasurementID, p.Calibration, p.Evaluator); err != nil {
				return fmt.Errorf("replace prediction of measurement %d: %w", p.MeasurementID, err)
			}
			var key, reason any
			if p.Reason == "" {
				key = p.PointKey
			} else {
				reason = p.Reason
			}
			if _, err := stmt.ExecContext(ctx, p.MeasurementID, p.Calibration, p.Evaluator, key, p.ModelUsed, p.VersionUsed,
				p.VersionMapping, p.EngineProfile, reason); err != nil {
				return fmt.Errorf("store prediction of measurement %d: %w", p.MeasurementID, err)
			}
		}
		return nil
	})
}

// QuantitativeKeys returns which of keys have a stored quantitative result.
func (s *Store) QuantitativeKeys(ctx context.Context, keys []string) (map[string]bool, error) {
	have := map[string]bool{}
	for start := 0; start < len(keys); start += 500 {
		chunk := keys[start:min(start+500, len(keys))]
		q, args, err := sqlx.In(`SELECT key FROM quantitative_results WHERE key IN (?)`, chunk)
		if err != nil {
			return nil, err
		}
		var got []string
		if err := s.db.SelectContext(ctx, &got, s.db.Rebind(q), args...); err != nil {
			return nil, err
		}
		for _, k := range got {
			have[k] = true
		}
	}
	return have, nil
}
