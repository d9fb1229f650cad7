package measure

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/aicdb/aicdb/store"
)

// ImportResult says what Import did with one file.
type ImportResult struct {
	Rows      int
	Unchanged bool // the same content was imported before: nothing written
}

// Import stores one file's measurements (all from one Parse) in one transaction:
// all rows or none. A file whose content hash is already stored is skipped.
func Import(ctx context.Context, st *store.Store, ms []Measurement, dep Deployment, importedAt string) (ImportResult, error) {
	var res ImportResult
	if len(ms) == 0 {
		return res, fmt.Errorf("import: no measurements")
	}
	src := ms[0]
	depJSON, err := json.Marshal(dep)
	if err != nil {
		return res, fmt.Errorf("encode deployment: %w", err)
	}
	err = st.Tx(ctx, func(tx *sqlx.Tx) error {
		var n int
		if err := tx.GetContext(ctx, &n, `SELECT count(*) FROM measurement_sources WHERE sha256 = ?`, src.SHA256); err != nil {
			return fmt.Errorf("look up %s: %w", src.File, err)
		}
		if n > 0 {
			res.Unchanged = true
			return nil
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO measurement_sources (sha256, file, format, rows, deployment, imported_at)
			VALUES (?, ?, ?, ?, ?, ?)`, src.SHA256, src.File, src.Format, len(ms), string(depJSON), importedAt); err != nil {
			return fmt.Errorf("store %s: %w", src.File, err)
		}
		cols := []string{"source_sha256", "line", "run_id", "model", "system", "backend", "version", "mode", "isl", "osl",
			"prefix", "tp", "pp", "dp", "moe_tp", "moe_ep", "gemm_quant", "moe_quant", "concurrency", "request_rate",
			"num_prompts", "p_workers", "p_batch", "p_tp", "p_pp", "p_dp", "d_workers", "d_batch", "d_tp", "d_pp", "d_dp",
			"engine_config", "extra"}
		cols = append(cols, MetricColumns[:]...)
		q := `INSERT INTO measurements (` + strings.Join(cols, ", ") + `) VALUES (?` + strings.Repeat(", ?", len(cols)-1) + `)`
		stmt, err := tx.PreparexContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare measurement insert: %w", err)
		}
		defer stmt.Close()
		for i := range ms {
			m := &ms[i]
			ec, err := json.Marshal(nonNil(m.EngineConfig))
			if err != nil {
				return fmt.Errorf("%s: engine_config: %w", m.File, err)
			}
			ex, err := json.Marshal(nonNil(m.Extra))
			if err != nil {
				return fmt.Errorf("%s: extra fields: %w", m.File, err)
			}
			args := []any{m.SHA256, m.Line, m.RunID, m.Model, m.System, m.Backend, m.Version, m.Mode, m.ISL, m.OSL,
				m.Prefix, m.TP, m.PP, m.DP, m.MoETP, m.MoEEP, m.GemmQuant, m.MoEQuant, m.Concurrency, m.RequestRate,
				m.NumPrompts, m.PWorkers, m.PBatch, m.PTP, m.PPP, m.PDP, m.DWorkers, m.DBatch, m.DTP, m.DPP, m.DDP,
				string(ec), string(ex)}
			for k := range NumMetrics {
				if m.Has[k] {
					args = append(args, m.Values[k])
				} else {
					args = append(args, nil)
				}
			}
			if _, err := stmt.ExecContext(ctx, args...); err != nil {
				loc := m.File
				if m.Line > 0 {
					loc = fmt.Sprintf("%s line %d", m.File, m.Line)
				}
				return fmt.Errorf("%s: store measurement: %w", loc, err)
			}
		}
		res.Rows = len(ms)
		return nil
	})
	return res, err
}

func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// Row is one stored measurement as the predictor and the calibration read it.
type Row struct {
	ID int64 `db:"id"`
	Measurement
}

// Select returns the stored measurements matching where (a SQL predicate over the
// measurements table's columns; "" = all), in id order.
func Select(ctx context.Context, st *store.Store, where string) ([]Row, error) {
	q := `SELECT id, line, run_id, model, system, backend, version, mode, isl, osl, prefix, tp, pp, dp, moe_tp, moe_ep,
		gemm_quant, moe_quant, concurrency, request_rate, num_prompts, p_workers, p_batch, p_tp, p_pp, p_dp,
		d_workers, d_batch, d_tp, d_pp, d_dp, engine_config, source_sha256,
		(SELECT format FROM measurement_sources s WHERE s.sha256 = source_sha256), ` + strings.Join(MetricColumns[:], ", ") + `
		FROM measurements`
	if strings.TrimSpace(where) != "" {
		q += ` WHERE (` + where + `)`
	}
	q += ` ORDER BY id`
	var out []Row
	var rowErr error // a row's own error, returned as it is
	err := st.EachRow(ctx, q, nil, func(scan func(...any) error) error {
		var r Row
		m := &r.Measurement
		var ec string
		vals := make([]*float64, NumMetrics)
		dst := []any{&r.ID, &m.Line, &m.RunID, &m.Model, &m.System, &m.Backend, &m.Version, &m.Mode, &m.ISL, &m.OSL,
			&m.Prefix, &m.TP, &m.PP, &m.DP, &m.MoETP, &m.MoEEP, &m.GemmQuant, &m.MoEQuant, &m.Concurrency,
			&m.RequestRate, &m.NumPrompts, &m.PWorkers, &m.PBatch, &m.PTP, &m.PPP, &m.PDP, &m.DWorkers, &m.DBatch,
			&m.DTP, &m.DPP, &m.DDP, &ec, &m.SHA256, &m.Format}
		for k := range vals {
			dst = append(dst, &vals[k])
		}
		if err := scan(dst...); err != nil {
			rowErr = fmt.Errorf("read measurement: %w", err)
			return rowErr
		}
		if err := json.Unmarshal([]byte(ec), &m.EngineConfig); err != nil {
			rowErr = fmt.Errorf("measurement %d: engine_config: %w", r.ID, err)
			return rowErr
		}
		for k, v := range vals {
			if v != nil {
				m.Set(Metric(k), *v)
			}
		}
		out = append(out, r)
		return nil
	})
	if rowErr != nil {
		return nil, rowErr
	}
	if err != nil {
		return nil, fmt.Errorf("select measurements where %q: %w", where, err)
	}
	return out, nil
}
