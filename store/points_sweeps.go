package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

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
// when a later sweep starts and its lease holder is gone: its process ended without
// recording an outcome.
const AbandonedSweepError = "the sweep's process ended without recording an outcome (killed, e.g. kill -9, or crashed); its committed rows are whole and a rerun of the same command resumes it"

// ErrLeaseLost is returned by HeartbeatSweep when the sweep's lease is no longer in
// the store: a later sweep judged its holder gone (heartbeat too old) and released it.
var ErrLeaseLost = errors.New("the sweep's lease was released by a later sweep that judged this process gone (no heartbeat within the lease timeout)")

// SweepLease is the lease a running sweep holds on the workload groups it evaluates
// (table sweep_leases, migration 00006).
type SweepLease struct {
	SweepID int64
	Host    string
	PID     int
	// Heartbeat is the holder's last refresh, RFC 3339 on the holder's clock.
	Heartbeat string
	Groups    []Group
}

// SweepStart describes a sweep about to start: its sweeps row and its lease.
type SweepStart struct {
	Arguments   string // JSON
	StartedAt   string // RFC 3339; also the lease's first heartbeat
	PointsTotal int    // points of the sweep's search space, recorded at start
	Host        string
	PID         int
	Groups      []Group
}

// BeginSweep records a running sweep with its lease, unless a live sweep holds a
// lease on one of start.Groups. In one transaction:
//
//   - every lease whose holder gone reports gone is released, and every sweep still
//     running without a lease is marked interrupted (abandoned counts them): aicdb
//     records every outcome it lives to see (done, failed, interrupted on Ctrl-C),
//     so such a row was abandoned by a killed process. Its ended_at stays NULL: when
//     that process died is unknown, and a detection time would read as one;
//   - if a remaining (live) lease shares a group with start, nothing else is written
//     and that lease is returned as holder, id 0: the caller waits and retries;
//   - otherwise the sweep row (status running, points_total set) and its lease are
//     inserted, and holder is nil.
//
// The store never reads the clock: gone decides, from the caller's clock and host.
func (s *Store) BeginSweep(ctx context.Context, start SweepStart, gone func(SweepLease) bool) (id int64, abandoned int, holder *SweepLease, err error) {
	groups, err := json.Marshal(start.Groups)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("encode sweep groups: %w", err)
	}
	err = s.Tx(ctx, func(tx *sqlx.Tx) error {
		leases, err := readLeases(ctx, tx)
		if err != nil {
			return err
		}
		for _, l := range leases {
			if gone(l) {
				if _, err := tx.ExecContext(ctx, `DELETE FROM sweep_leases WHERE sweep_id = ?`, l.SweepID); err != nil {
					return fmt.Errorf("release the lease of sweep %d: %w", l.SweepID, err)
				}
				continue
			}
			if holder == nil && sharesGroup(l.Groups, start.Groups) {
				holder = &l
			}
		}
		res, err := tx.ExecContext(ctx, `UPDATE sweeps SET status = ?, error = ? WHERE status = ?
			AND id NOT IN (SELECT sweep_id FROM sweep_leases)`, SweepInterrupted, AbandonedSweepError, SweepRunning)
		if err != nil {
			return fmt.Errorf("mark abandoned sweeps interrupted: %w", err)
		}
		n, _ := res.RowsAffected()
		abandoned = int(n)
		if holder != nil {
			return nil
		}
		res, err = tx.ExecContext(ctx, `INSERT INTO sweeps (arguments, started_at, status, points_total) VALUES (?, ?, ?, ?)`,
			start.Arguments, start.StartedAt, SweepRunning, start.PointsTotal)
		if err != nil {
			return fmt.Errorf("record sweep: %w", err)
		}
		if id, err = res.LastInsertId(); err != nil {
			return fmt.Errorf("record sweep: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sweep_leases (sweep_id, host, pid, heartbeat_at, groups) VALUES (?, ?, ?, ?, ?)`,
			id, start.Host, start.PID, start.StartedAt, string(groups)); err != nil {
			return fmt.Errorf("record the lease of sweep %d: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return 0, 0, nil, err
	}
	return id, abandoned, holder, nil
}

// readLeases reads every lease, by sweep id.
func readLeases(ctx context.Context, q sqlx.QueryerContext) ([]SweepLease, error) {
	rows, err := q.QueryContext(ctx, `SELECT sweep_id, host, pid, heartbeat_at, groups FROM sweep_leases ORDER BY sweep_id`)
	if err != nil {
		return nil, fmt.Errorf("read sweep leases: %w", err)
	}
	defer rows.Close()
	var out []SweepLease
	for rows.Next() {
		var l SweepLease
		var groups string
		if err := rows.Scan(&l.SweepID, &l.Host, &l.PID, &l.Heartbeat, &groups); err != nil {
			return nil, fmt.Errorf("read sweep leases: %w", err)
		}
		if err := json.Unmarshal([]byte(groups), &l.Groups); err != nil {
			return nil, fmt.Errorf("read the lease of sweep %d: groups: %w", l.SweepID, err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// sharesGroup reports whether a and b have a group in common.
func sharesGroup(a, b []Group) bool {
	for _, g := range a {
		if slices.Contains(b, g) {
			return true
		}
	}
	return false
}

// HeartbeatSweep refreshes sweep id's lease with the holder's time at (RFC 3339);
// ErrLeaseLost when the lease is gone.
func (s *Store) HeartbeatSweep(ctx context.Context, id int64, at string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE sweep_leases SET heartbeat_at = ? WHERE sweep_id = ?`, at, id)
	if err != nil {
		return fmt.Errorf("refresh the lease of sweep %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("sweep %d: %w", id, ErrLeaseLost)
	}
	return nil
}

// EndSweep records a sweep's outcome and releases its lease, in one transaction.
func (s *Store) EndSweep(ctx context.Context, r SweepRecord) error {
	var errText any
	if r.Error != "" {
		errText = r.Error
	}
	err := s.Tx(ctx, func(tx *sqlx.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE sweeps SET ended_at = ?, status = ?, points_total = ?,
		points_evaluated = ?, points_skipped = ?, points_no_perf_data = ?, error = ? WHERE id = ?`,
			r.EndedAt, r.Status, r.PointsTotal, r.PointsEvaluated, r.PointsSkipped, r.PointsNoPerfData, errText, r.ID); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM sweep_leases WHERE sweep_id = ?`, r.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("record sweep %d end: %w", r.ID, err)
	}
	return nil
}

// SweepLeases lists the leases of running sweeps, by sweep id.
func (s *Store) SweepLeases(ctx context.Context) ([]SweepLease, error) {
	return readLeases(ctx, s.db)
}

// Sweeps lists the recorded sweeps, oldest first.
func (s *Store) Sweeps(ctx context.Context) ([]SweepRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, arguments, started_at, coalesce(ended_at, ''), status,
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
