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
	Unchanged bool // the same content was imported before by the same reader: nothing written
	// Reread: the same content was imported before by an older reader (ReadBy);
	// its Rows rows were updated in place.
	Reread bool
	ReadBy string
	// Redeployed: the same content was imported before with another deployment
	// (flags, sidecar or --deployment file); its rows were updated in place
	// with this one and their cached predictions dropped.
	Redeployed bool
}

// ReaderVersion names the rules files of format are read by. A change to how a
// format's rows are read bumps its number, so a file imported by an older
// reader is read again (Import) instead of keeping the old reading.
func ReaderVersion(format string) string {
	if format == FormatAICSilicon {
		// 2: silicon_concurrency is the client count (docs/validation.md Round 15);
		// 3: rows of known benchmark campaigns deployed as they ran (Round 29).
		return format + "/3"
	}
	// 2: an open-loop run's send pattern kept (burstiness, ramp_up_strategy,
	// arrival_pattern and arrival_smoothness), rate inf without a bound read as
	// every prompt at once, --save-detailed lengths kept as quantile points
	// (docs/validation.md Round 24).
	switch format {
	case FormatVLLMBench:
		// 3: a ramp-up run (rate inf beside ramp_up_strategy) read as its ramp,
		// its rates kept, not as every prompt at once (docs/validation.md Round 25).
		return format + "/3"
	case FormatAIPerf:
		// 3: the load options that send otherwise (prefill concurrency, time-based
		// ramps, user-centric sessions, cancellations, a fixed schedule) kept, so
		// such a run is refused with its reason (Round 25).
		return format + "/3"
	}
	return format + "/2"
}

// measurementColumns are the measurements columns Import writes, in the order
// of measurementArgs.
var measurementColumns = append([]string{"source_sha256", "line", "run_id", "model", "system", "backend", "version", "mode",
	"isl", "osl", "prefix", "tp", "pp", "dp", "moe_tp", "moe_ep", "gemm_quant", "moe_quant", "concurrency", "request_rate",
	"num_prompts", "p_workers", "p_batch", "p_tp", "p_pp", "p_dp", "d_workers", "d_batch", "d_tp", "d_pp", "d_dp",
	"engine_config", "extra"}, MetricColumns[:]...)

// measurementArgs are m's values for measurementColumns.
func measurementArgs(m *Measurement) ([]any, error) {
	ec, err := json.Marshal(nonNil(m.EngineConfig))
	if err != nil {
		return nil, fmt.Errorf("%s: engine_config: %w", m.File, err)
	}
	ex, err := json.Marshal(nonNil(m.Extra))
	if err != nil {
		return nil, fmt.Errorf("%s: extra fields: %w", m.File, err)
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
	return args, nil
}

// location names m in an error: its file, and line when it has one.
func location(m *Measurement) string {
	if m.Line > 0 {
		return fmt.Sprintf("%s line %d", m.File, m.Line)
	}
	return m.File
}

// Import stores one file's measurements (all from one Parse) in one transaction:
// all rows or none. A file whose content hash is already stored is skipped when
// the same reader (ReaderVersion) read it; read by an older one, its rows are
// updated in place (reread).
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
	reader := ReaderVersion(src.Format)
	err = st.Tx(ctx, func(tx *sqlx.Tx) error {
		var prev []struct {
			Reader     string `db:"reader"`
			Deployment string `db:"deployment"`
		}
		if err := tx.SelectContext(ctx, &prev, `SELECT reader, deployment FROM measurement_sources WHERE sha256 = ?`, src.SHA256); err != nil {
			return fmt.Errorf("look up %s: %w", src.File, err)
		}
		if len(prev) > 0 {
			switch {
			case prev[0].Reader == reader && prev[0].Deployment == string(depJSON):
				res.Unchanged = true
				return nil
			case prev[0].Reader == reader:
				res.Redeployed = true // the same file given another deployment: its rows take it
			default:
				res.Reread, res.ReadBy = true, prev[0].Reader
			}
			res.Rows = len(ms)
			return reread(ctx, tx, ms, string(depJSON), prev[0].Reader, reader)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO measurement_sources (sha256, file, format, rows, deployment, imported_at, reader)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, src.SHA256, src.File, src.Format, len(ms), string(depJSON), importedAt, reader); err != nil {
			return fmt.Errorf("store %s: %w", src.File, err)
		}
		q := `INSERT INTO measurements (` + strings.Join(measurementColumns, ", ") + `) VALUES (?` + strings.Repeat(", ?", len(measurementColumns)-1) + `)`
		stmt, err := tx.PreparexContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare measurement insert: %w", err)
		}
		defer stmt.Close()
		for i := range ms {
			args, err := measurementArgs(&ms[i])
			if err != nil {
				return err
			}
			if _, err := stmt.ExecContext(ctx, args...); err != nil {
				return fmt.Errorf("%s: store measurement: %w", location(&ms[i]), err)
			}
		}
		res.Rows = len(ms)
		return nil
	})
	return res, err
}

// reread updates in place the stored rows of a file read before by reader old
// with its rows as reader now reads them (matched by line: the same content
// gives the same lines) and the deployment flags given now, and drops their
// cached predictions, which priced the old reading. Ids stay, so calibrations
// keep their training rows. A reader that reads other lines than the stored
// ones is refused: the rows cannot be matched.
func reread(ctx context.Context, tx *sqlx.Tx, ms []Measurement, dep, old, now string) error {
	src := ms[0]
	var stored []struct {
		ID   int64 `db:"id"`
		Line int   `db:"line"`
	}
	if err := tx.SelectContext(ctx, &stored, `SELECT id, line FROM measurements WHERE source_sha256 = ? ORDER BY line`, src.SHA256); err != nil {
		return fmt.Errorf("read the stored rows of %s: %w", src.File, err)
	}
	ids := make(map[int]int64, len(stored))
	for _, r := range stored {
		ids[r.Line] = r.ID
	}
	if len(stored) != len(ms) || len(ids) != len(ms) {
		return fmt.Errorf("%s: imported before by reader %q (%d rows), which this aicdb's %s reads as %d rows: import it into a fresh store", src.File, old, len(stored), now, len(ms))
	}
	set := make([]string, len(measurementColumns))
	for i, c := range measurementColumns {
		set[i] = c + " = ?"
	}
	upd, err := tx.PreparexContext(ctx, `UPDATE measurements SET `+strings.Join(set, ", ")+` WHERE id = ?`)
	if err != nil {
		return fmt.Errorf("prepare measurement update: %w", err)
	}
	defer upd.Close()
	for i := range ms {
		id, ok := ids[ms[i].Line]
		if !ok {
			return fmt.Errorf("%s: imported before by reader %q without this row: import it into a fresh store", location(&ms[i]), old)
		}
		args, err := measurementArgs(&ms[i])
		if err != nil {
			return err
		}
		if _, err := upd.ExecContext(ctx, append(args, id)...); err != nil {
			return fmt.Errorf("%s: update measurement: %w", location(&ms[i]), err)
		}
	}
	// Every stored row of the file was matched and updated: drop their predictions at once.
	if _, err := tx.ExecContext(ctx, `DELETE FROM measurement_predictions WHERE measurement_id IN
		(SELECT id FROM measurements WHERE source_sha256 = ?)`, src.SHA256); err != nil {
		return fmt.Errorf("%s: drop the cached predictions of its rows: %w", src.File, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE measurement_sources SET reader = ?, deployment = ? WHERE sha256 = ?`, now, dep, src.SHA256); err != nil {
		return fmt.Errorf("record the reader of %s: %w", src.File, err)
	}
	return nil
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
		d_workers, d_batch, d_tp, d_pp, d_dp, engine_config, extra, source_sha256,
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
		var ec, ex string
		vals := make([]*float64, NumMetrics)
		dst := []any{&r.ID, &m.Line, &m.RunID, &m.Model, &m.System, &m.Backend, &m.Version, &m.Mode, &m.ISL, &m.OSL,
			&m.Prefix, &m.TP, &m.PP, &m.DP, &m.MoETP, &m.MoEEP, &m.GemmQuant, &m.MoEQuant, &m.Concurrency,
			&m.RequestRate, &m.NumPrompts, &m.PWorkers, &m.PBatch, &m.PTP, &m.PPP, &m.PDP, &m.DWorkers, &m.DBatch,
			&m.DTP, &m.DPP, &m.DDP, &ec, &ex, &m.SHA256, &m.Format}
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
		// The file's other fields: an open-loop row's send pattern is read from them
		// (Measurement.OpenArrivals).
		if err := json.Unmarshal([]byte(ex), &m.Extra); err != nil {
			rowErr = fmt.Errorf("measurement %d: extra: %w", r.ID, err)
			return rowErr
		}
		m.readQuantiles()
		m.readBenchmark()
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
