package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ErrNoReplay is returned by Replay when the store holds no such replay.
var ErrNoReplay = errors.New("no such replay")

// Replay reads one stored replay (the newest when id is 0) and its per-request
// rows in sequence order. A missing replay is ErrNoReplay (wrapped).
func (s *Store) Replay(ctx context.Context, id int64) (ReplayRecord, []ReplayRow, error) {
	var r ReplayRecord
	q := `SELECT id, trace_id, tier, workload_fidelity, arguments, summary, created_at FROM replays WHERE id = ?`
	args := []any{id}
	if id == 0 {
		q, args = `SELECT id, trace_id, tier, workload_fidelity, arguments, summary, created_at FROM replays ORDER BY id DESC LIMIT 1`, nil
	}
	err := s.db.QueryRowxContext(ctx, q, args...).Scan(&r.ID, &r.TraceID, &r.Tier, &r.WorkloadFidelity, &r.Arguments, &r.Summary, &r.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return r, nil, ErrNoReplay
	}
	if err != nil {
		return r, nil, fmt.Errorf("read replay %d: %w", id, err)
	}
	rows, err := s.db.QueryxContext(ctx, `SELECT seq, arrival_ms, isl, osl, cached_tokens, preemptions, ttft_ms, tpot_ms, e2e_ms
		FROM replay_requests WHERE replay_id = ? ORDER BY seq`, r.ID)
	if err != nil {
		return r, nil, fmt.Errorf("read replay %d requests: %w", r.ID, err)
	}
	defer rows.Close()
	var out []ReplayRow
	for rows.Next() {
		var x ReplayRow
		if err := rows.Scan(&x.Seq, &x.ArrivalMs, &x.ISL, &x.OSL, &x.CachedTokens, &x.Preemptions, &x.TTFTMs, &x.TPOTMs, &x.E2EMs); err != nil {
			return r, nil, fmt.Errorf("read replay %d requests: %w", r.ID, err)
		}
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return r, nil, fmt.Errorf("read replay %d requests: %w", r.ID, err)
	}
	return r, out, nil
}
