package store

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Sweep statuses.
const (
	SweepRunning     = "running"
	SweepDone        = "done"
	SweepFailed      = "failed"
	SweepInterrupted = "interrupted"
)

// SweepRecord is one row of the sweeps table. Times are RFC 3339 strings supplied by
// the caller (the store never reads the clock).
type SweepRecord struct {
	ID              int64
	Arguments       string // JSON
	StartedAt       string
	EndedAt         string
	Status          string
	PointsTotal     int
	PointsEvaluated int
	PointsSkipped   int
	// PointsNoPerfData counts points the perf data could not price (skipped, not
	// stored; migration 00004).
	PointsNoPerfData int
	Error            string
}

// AbandonedSweepError is the error text recorded on a sweep found still `running`
// when a later sweep starts: its process ended without recording an outcome.
const AbandonedSweepError = "the sweep's process ended without recording an outcome (killed, e.g. kill -9, or crashed); its committed rows are whole and a rerun of the same command resumes it"

// BeginSweep records a running sweep and returns its id. In the same transaction
// every sweep still marked running is marked interrupted (abandoned counts them):
// aicdb records every outcome it lives to see (done, failed, interrupted on
// Ctrl-C), so a row left running was abandoned by a killed process. Its ended_at
// stays NULL: when that process died is unknown, and a detection time would read as
// one. (Two sweeps run at the same time on one file would mark each other
// interrupted while alive; the live one's EndSweep then overwrites the mark.)
func (s *Store) BeginSweep(ctx context.Context, argsJSON, startedAt string) (id int64, abandoned int, err error) {
	err = s.Tx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE sweeps SET status = ?, error = ? WHERE status = ?`,
			SweepInterrupted, AbandonedSweepError, SweepRunning)
		if err != nil {
			return fmt.Errorf("mark abandoned sweeps interrupted: %w", err)
		}
		n, _ := res.RowsAffected()
		abandoned = int(n)
		res, err = tx.ExecContext(ctx,
			`INSERT INTO sweeps (arguments, started_at, status) VALUES (?, ?, ?)`, argsJSON, startedAt, SweepRunning)
		if err != nil {
			return fmt.Errorf("record sweep: %w", err)
		}
		id, err = res.LastInsertId()
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	return id, abandoned, nil
}

// EndSweep records a sweep's outcome.
func (s *Store) EndSweep(ctx context.Context, r SweepRecord) error {
	var errText any
	if r.Error != "" {
		errText = r.Error
	}
	_, err := s.DB.ExecContext(ctx, `UPDATE sweeps SET ended_at = ?, status = ?, points_total = ?,
		points_evaluated = ?, points_skipped = ?, points_no_perf_data = ?, error = ? WHERE id = ?`,
		r.EndedAt, r.Status, r.PointsTotal, r.PointsEvaluated, r.PointsSkipped, r.PointsNoPerfData, errText, r.ID)
	if err != nil {
		return fmt.Errorf("record sweep %d end: %w", r.ID, err)
	}
	return nil
}

// Sweeps lists the recorded sweeps, oldest first.
func (s *Store) Sweeps(ctx context.Context) ([]SweepRecord, error) {
	rows, err := s.DB.QueryContext(ctx, `SELECT id, arguments, started_at, coalesce(ended_at, ''), status,
		points_total, points_evaluated, points_skipped, points_no_perf_data, coalesce(error, '') FROM sweeps ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read sweeps: %w", err)
	}
	defer rows.Close()
	var out []SweepRecord
	for rows.Next() {
		var r SweepRecord
		if err := rows.Scan(&r.ID, &r.Arguments, &r.StartedAt, &r.EndedAt, &r.Status,
			&r.PointsTotal, &r.PointsEvaluated, &r.PointsSkipped, &r.PointsNoPerfData, &r.Error); err != nil {
			return nil, fmt.Errorf("read sweeps: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
