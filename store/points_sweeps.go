package store

import (
	"context"
	"fmt"
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

// BeginSweep records a running sweep and returns its id.
func (s *Store) BeginSweep(ctx context.Context, argsJSON, startedAt string) (int64, error) {
	res, err := s.DB.ExecContext(ctx,
		`INSERT INTO sweeps (arguments, started_at, status) VALUES (?, ?, ?)`, argsJSON, startedAt, SweepRunning)
	if err != nil {
		return 0, fmt.Errorf("record sweep: %w", err)
	}
	return res.LastInsertId()
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
