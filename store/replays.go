package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

// ReplayRecord is one row of replays (migration 00010).
type ReplayRecord struct {
	ID               int64
	TraceID          int64
	Tier             string // quantitative | oracle
	WorkloadFidelity string // W3 | W4
	Arguments        string // JSON
	Summary          string // JSON
	CreatedAt        string // RFC 3339, supplied by the caller
}

// ReplayRow is one request's result of a replay. Times in ms; TTFT from arrival.
type ReplayRow struct {
	Seq          int64
	ArrivalMs    float64
	ISL, OSL     int
	CachedTokens int
	Preemptions  int
	TTFTMs       float64
	TPOTMs       float64
	E2EMs        float64
}

// SaveReplay stores a replay and its per-request rows in one transaction and
// returns the replay's id.
func (s *Store) SaveReplay(ctx context.Context, r ReplayRecord, rows []ReplayRow) (int64, error) {
	var id int64
	err := s.Tx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO replays (trace_id, tier, workload_fidelity, arguments, summary, created_at)
			VALUES (?, ?, ?, ?, ?, ?)`, r.TraceID, r.Tier, r.WorkloadFidelity, r.Arguments, r.Summary, r.CreatedAt)
		if err != nil {
			return fmt.Errorf("record replay: %w", err)
		}
		if id, err = res.LastInsertId(); err != nil {
			return err
		}
		const cols = 10
		for i := 0; i < len(rows); i += traceInsertBatch {
			batch := rows[i:min(i+traceInsertBatch, len(rows))]
			args := make([]any, 0, cols*len(batch))
			for _, x := range batch {
				args = append(args, id, x.Seq, x.ArrivalMs, x.ISL, x.OSL, x.CachedTokens, x.Preemptions, x.TTFTMs, x.TPOTMs, x.E2EMs)
			}
			q := `INSERT INTO replay_requests (replay_id, seq, arrival_ms, isl, osl, cached_tokens, preemptions, ttft_ms, tpot_ms, e2e_ms) VALUES ` +
				strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?),", len(batch)), ",")
			if _, err := tx.ExecContext(ctx, q, args...); err != nil {
				return fmt.Errorf("record replay requests: %w", err)
			}
		}
		return nil
	})
	return id, err
}
