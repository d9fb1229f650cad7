package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

// pointColumns are the operating_points columns written by InsertPoints, in the
// order of Point.args.
var pointColumns = append(append(append(append(append([]string{
	"key", "model", "system", "backend", "version", "mode", "isl", "osl", "prefix",
	"tp", "pp", "dp", "moe_tp", "moe_ep", "batch", "ctx_tokens", "max_num_batched_tokens",
	"max_num_seqs", "enable_chunked_prefill", "database_mode", "gemm_quant", "kvcache_quant",
	"fmha_quant", "moe_quant", "comm_quant", "nextn",
	"p_workers", "p_batch", "p_tp", "p_pp", "p_dp", "d_workers", "d_batch", "d_tp", "d_pp", "d_dp",
	"evaluator", "parallel", "num_gpus", "concurrency", "oom"},
	legacyColumns...), QueueingColumns[:]...),
	"ttft_steady_p99_lo", "ttft_steady_p99_hi", "bracket_certain", "queueing_tier", "workload_fidelity",
	"engine_profile", "engine_config", "workload",
	"kv_capacity_tokens", "kv_util_peak", "preemptions_per_request", "kv_note",
	// migration 00011: each pool's system and GPUs (NULL on agg rows), the handoff
	"p_system", "d_system", "p_gpus", "d_gpus"), handoffColumns...),
	"deployed_version", // migration 00015: the engine version deployed ('' = version)
	"nextn_accepted")   // migration 00017: mean MTP drafts accepted per decode step

func nullable(v float64, ok bool) any {
	if !ok {
		return nil
	}
	return v
}

func (p *Point) args() []any {
	in := &p.PointInputs
	a := make([]any, 0, len(pointColumns))
	conc := p.Legacy.Concurrency
	if conc <= 0 {
		conc = in.Batch * in.PP * in.DP
	}
	a = append(a, p.Key, in.Model, in.System, in.Backend, in.Version, in.Mode, in.ISL, in.OSL, in.Prefix,
		in.TP, in.PP, in.DP, in.MoETP, in.MoEEP, in.Batch, in.CtxTokens, in.MaxNumBatchedTokens,
		in.MaxNumSeqs, b2i(in.ChunkedPrefill), in.DatabaseMode, in.GemmQuant, in.KVCacheQuant,
		in.FMHAQuant, in.MoEQuant, in.CommQuant, in.NextN,
		in.PWorkers, in.PBatch, in.PTP, in.PPP, in.PDP, in.DWorkers, in.DBatch, in.DTP, in.DPP, in.DDP,
		in.Evaluator, in.Parallel(), in.NumGPUs(), conc, b2i(p.Legacy.OOM))
	for _, v := range p.Legacy.values() {
		a = append(a, nullable(v, !p.Legacy.OOM))
	}
	for _, v := range p.Q.V {
		a = append(a, nullable(v, p.Q.Valid))
	}
	a = append(a, nullable(p.Q.P99Lo, p.Q.Valid && p.Q.HasBracket), nullable(p.Q.P99Hi, p.Q.Valid && p.Q.HasBracket),
		b2i(p.Q.Valid && p.Q.HasBracket && p.Q.HiCertain))
	tier, fid := TierNone, "none"
	if p.Q.Valid {
		tier, fid = p.Q.Tier, p.Q.Fidelity
	} else if p.Q.Tier != "" {
		tier = p.Q.Tier
	}
	engine := in.Engine
	if engine == "" {
		engine = "{}" // not recorded (migration 00009's default)
	}
	a = append(a, tier, fid, in.EngineProfile, engine, in.Workload)
	a = append(append(a, p.Q.KV.args()...), p.Q.KV.Note)
	if in.Mode == ModeDisagg {
		a = append(a, in.System, in.System, in.PWorkers*in.PTP*in.PPP*in.PDP, in.DWorkers*in.DTP*in.DPP*in.DDP)
	} else {
		a = append(a, nil, nil, nil, nil)
	}
	h := Handoff{}
	if p.Q.Valid {
		h = p.Q.H
	}
	return append(append(a, h.args()...), in.Deployed, in.NextNAccepted)
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

var insertPointSQL = `INSERT OR IGNORE INTO operating_points (` + strings.Join(pointColumns, ", ") +
	`) VALUES (` + placeholders(len(pointColumns)) + `)`

// InsertPoints writes rows in one transaction (INSERT OR IGNORE: a key already stored
// is kept) and refreshes the pareto flag of every workload group it touched, so a
// reader never sees a batch half-written. It returns the number of rows inserted.
func (s *Store) InsertPoints(ctx context.Context, pts []Point) (int, error) {
	return s.InsertPointsWithResults(ctx, pts, nil)
}

// InsertPointsWithResults is InsertPoints that also stores quantitative results of
// those rows (a sweep's KV-tight rows) in the same transaction, before the pareto
// flags are refreshed: a reader never sees a preempting row on the front.
func (s *Store) InsertPointsWithResults(ctx context.Context, pts []Point, rs []Quantitative) (int, error) {
	for i := range pts {
		if err := pts[i].Validate(); err != nil {
			return 0, err
		}
	}
	for i := range rs {
		if err := rs[i].Validate(); err != nil {
			return 0, err
		}
	}
	n := 0
	err := s.Tx(ctx, func(tx *sqlx.Tx) error {
		stmt, err := tx.PrepareContext(ctx, insertPointSQL)
		if err != nil {
			return fmt.Errorf("prepare point insert: %w", err)
		}
		defer stmt.Close()
		groups := map[Group]bool{}
		var order []Group
		for i := range pts {
			res, err := stmt.ExecContext(ctx, pts[i].args()...)
			if err != nil {
				return fmt.Errorf("insert point %s: %w", pts[i].Key[:12], err)
			}
			k, _ := res.RowsAffected()
			n += int(k)
			g := pts[i].Group()
			if !groups[g] {
				groups[g] = true
				order = append(order, g)
			}
		}
		if err := insertQuantitative(ctx, tx, rs); err != nil {
			return err
		}
		for _, g := range order {
			if err := refreshPareto(ctx, tx, g); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

const groupWhere = `model = ? AND system = ? AND backend = ? AND version = ? AND mode = ? AND isl = ? AND osl = ? AND prefix = ? AND workload = ? AND deployed_version = ?`

func (g Group) args() []any {
	return []any{g.Model, g.System, g.Backend, g.Version, g.Mode, g.ISL, g.OSL, g.Prefix, g.Workload, g.Deployed}
}

// preemptsSQL is true for an operating_points row whose steady state is known to
// preempt (its own columns or its quantitative result): such rows are not pareto
// candidates (views/100_points.sql, pareto_all shows them).
const preemptsSQL = `coalesce(operating_points.preemptions_per_request, 0) > 0 OR EXISTS (SELECT 1 FROM quantitative_results AS r
	           WHERE r.key = operating_points.key AND r.preemptions_per_request > 0)`

// refreshPareto recomputes is_pareto for one workload group: a non-OOM row that
// does not preempt is on the front iff its tokens_per_s_per_gpu is strictly greater than the running max over
// every row ordered before it by tokens_per_s_per_user descending (ties: higher
// tokens_per_s_per_gpu first, then key), i.e. no other row weakly dominates it.
// Only rows whose flag changes are written.
func refreshPareto(ctx context.Context, tx *sqlx.Tx, g Group) error {
	q := `WITH ranked AS (
	SELECT key, tokens_per_s_per_gpu AS y,
	       max(tokens_per_s_per_gpu) OVER (
	           ORDER BY tokens_per_s_per_user DESC, tokens_per_s_per_gpu DESC, key
	           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS m
	FROM operating_points WHERE ` + groupWhere + ` AND oom = 0 AND NOT (` + preemptsSQL + `)
), front AS (SELECT key FROM ranked WHERE m IS NULL OR y > m)
UPDATE operating_points SET is_pareto = 1 - is_pareto
WHERE ` + groupWhere + ` AND is_pareto != (key IN (SELECT key FROM front))`
	args := append(g.args(), g.args()...)
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("refresh pareto for %s %s %s %s %s isl %d osl %d: %w",
			g.Model, g.System, g.Backend, g.Version, g.Mode, g.ISL, g.OSL, err)
	}
	return nil
}

// DeleteStale deletes the rows of workload group g produced by an evaluator other
// than evaluator (their numbers are stale: the code that made them changed), with
// their quantitative results, and refreshes the group's pareto flags, in one
// transaction. It returns the number of rows deleted.
func (s *Store) DeleteStale(ctx context.Context, g Group, evaluator string) (int, error) {
	n := 0
	err := s.Tx(ctx, func(tx *sqlx.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM operating_points WHERE `+groupWhere+` AND evaluator != ?`,
			append(g.args(), evaluator)...)
		if err != nil {
			return fmt.Errorf("delete stale points: %w", err)
		}
		k, _ := res.RowsAffected()
		n = int(k)
		if n == 0 {
			return nil
		}
		return refreshPareto(ctx, tx, g)
	})
	return n, err
}

// RefreshPareto recomputes the pareto flags of g in one transaction.
func (s *Store) RefreshPareto(ctx context.Context, g Group) error {
	return s.Tx(ctx, func(tx *sqlx.Tx) error { return refreshPareto(ctx, tx, g) })
}

// HasPoints reports whether any operating point is stored (false on a store that
// was initialised but never swept).
func (s *Store) HasPoints(ctx context.Context) (bool, error) {
	var ok bool
	if err := s.db.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM operating_points)`).Scan(&ok); err != nil {
		return false, fmt.Errorf("read operating points: %w", err)
	}
	return ok, nil
}

// GroupKeys returns the keys stored for workload group g.
func (s *Store) GroupKeys(ctx context.Context, g Group) (map[string]struct{}, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT key FROM operating_points WHERE `+groupWhere, g.args()...)
	if err != nil {
		return nil, fmt.Errorf("read stored keys: %w", err)
	}
	defer rows.Close()
	out := map[string]struct{}{}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("read stored keys: %w", err)
		}
		out[k] = struct{}{}
	}
	return out, rows.Err()
}

var quantColumns = append(append(append([]string{"key"}, QueueingColumns[:]...),
	"throughput_rps", "output_tokens_per_s", "workload_fidelity", "distributions", "evaluator",
	"kv_capacity_tokens", "kv_util_peak", "preemptions_per_request"), handoffColumns...)

var insertQuantSQL = `INSERT OR REPLACE INTO quantitative_results (` + strings.Join(quantColumns, ", ") +
	`) VALUES (` + placeholders(len(quantColumns)) + `)`

// InsertQuantitative stores quantitative results in one transaction; a result that
// preempts takes its row off the pareto front (refreshPareto of its group).
func (s *Store) InsertQuantitative(ctx context.Context, rs []Quantitative) error {
	for i := range rs {
		if err := rs[i].Validate(); err != nil {
			return err
		}
	}
	return s.Tx(ctx, func(tx *sqlx.Tx) error {
		if err := insertQuantitative(ctx, tx, rs); err != nil {
			return err
		}
		return refreshPreempting(ctx, tx, rs)
	})
}

// insertQuantitative writes validated quantitative results in tx.
func insertQuantitative(ctx context.Context, tx *sqlx.Tx, rs []Quantitative) error {
	if len(rs) == 0 {
		return nil
	}
	stmt, err := tx.PrepareContext(ctx, insertQuantSQL)
	if err != nil {
		return fmt.Errorf("prepare quantitative insert: %w", err)
	}
	defer stmt.Close()
	for i := range rs {
		r := &rs[i]
		a := make([]any, 0, len(quantColumns))
		a = append(a, r.Key)
		for _, v := range r.V {
			a = append(a, v)
		}
		a = append(a, r.ThroughputRPS, r.OutputTokensPerS, r.Fidelity, r.Distributions, r.Evaluator)
		a = append(a, r.KV.args()...)
		a = append(a, r.H.args()...)
		if _, err := stmt.ExecContext(ctx, a...); err != nil {
			return fmt.Errorf("insert quantitative result %s: %w", r.Key[:12], err)
		}
	}
	return nil
}

// refreshPreempting refreshes the pareto flags of the groups of the rows rs shows
// to preempt (in key order, each group once).
func refreshPreempting(ctx context.Context, tx *sqlx.Tx, rs []Quantitative) error {
	var keys []string
	for i := range rs {
		if rs[i].KV.Preempts() {
			keys = append(keys, rs[i].Key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	var gs []Group
	err := sqlx.SelectContext(ctx, tx, &gs, `SELECT DISTINCT model, system, backend, version, mode, isl, osl, prefix, workload, deployed_version
		FROM operating_points WHERE key IN (SELECT value FROM json_each(?)) ORDER BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10`, jsonStrings(keys))
	if err != nil {
		return fmt.Errorf("read groups of preempting rows: %w", err)
	}
	for _, g := range gs {
		if err := refreshPareto(ctx, tx, g); err != nil {
			return err
		}
	}
	return nil
}

// PointFilter selects rows of the points view; empty/zero fields do not filter.
type PointFilter struct {
	Model, System, Backend, Version, Mode string
	ISL, OSL                              int
	Prefix                                int // -1 or 0 with !PrefixSet: any
	PrefixSet                             bool
	ParetoOnly                            bool
	IncludeOOM                            bool
	// Workload keeps the rows of this trace workload (PointInputs.Workload) when
	// WorkloadSet; "" with WorkloadSet keeps the fixed-shape rows only.
	Workload    string
	WorkloadSet bool
	// Deployed keeps the rows deployed at this engine version (their
	// deployed_version, or version when that is ''; PointInputs.DeployedVersion).
	Deployed string
	// Tier keeps rows whose best available tier is this one (e.g. "screening").
	Tier string
	// Where is an extra SQL condition on the points view's columns (built by refine),
	// with its arguments.
	Where     string
	WhereArgs []any
	Keys      []string
}

// readColumns are read back from the points view by SelectPoints.
var readColumns = append(append([]string{}, pointColumns...), "is_pareto")

// sql is f as the source SelectPoints reads (the points view, or the
// screening rows of operating_points) and the conditions on it with their
// arguments.
func (f PointFilter) sql() (from string, where []string, args []any) {
	add := func(col string, v any) {
		where = append(where, col+" = ?")
		args = append(args, v)
	}
	if f.Model != "" {
		add("model", f.Model)
	}
	if f.System != "" {
		add("system", f.System)
	}
	if f.Backend != "" {
		add("backend", f.Backend)
	}
	if f.Version != "" {
		add("version", f.Version)
	}
	if f.Deployed != "" {
		// The points view shows version where the row's own column is ''; the
		// screening path reads the table itself.
		add("coalesce(nullif(deployed_version, ''), version)", f.Deployed)
	}
	if f.Mode != "" {
		add("mode", f.Mode)
	}
	if f.ISL > 0 {
		add("isl", f.ISL)
	}
	if f.OSL > 0 {
		add("osl", f.OSL)
	}
	if f.PrefixSet {
		add("prefix", f.Prefix)
	}
	if f.WorkloadSet {
		add("workload", f.Workload)
	}
	if f.ParetoOnly {
		where = append(where, "is_pareto = 1")
	}
	from = "points"
	if f.Tier == TierScreening {
		// Screening rows are the operating_points rows without a quantitative result:
		// read the table itself (no join, no CASE per column).
		from = "operating_points AS o"
		where = append(where, "queueing_tier = 'screening'",
			"NOT EXISTS (SELECT 1 FROM quantitative_results AS r WHERE r.key = o.key)")
	} else if f.Tier != "" {
		add("queueing_tier", f.Tier)
	}
	if f.Where != "" {
		where = append(where, "("+f.Where+")")
		args = append(args, f.WhereArgs...)
	}
	if !f.IncludeOOM {
		where = append(where, "oom = 0")
	}
	if f.Keys != nil {
		where = append(where, "key IN (SELECT value FROM json_each(?))")
		args = append(args, jsonStrings(f.Keys))
	}
	return from, where, args
}

// SelectPoints reads rows of the points view (each at its best available tier)
// matching f, ordered by tokens_per_s_per_gpu descending, then key.
func (s *Store) SelectPoints(ctx context.Context, f PointFilter) ([]Point, error) {
	from, where, args := f.sql()
	q := `SELECT ` + strings.Join(readColumns, ", ") + ` FROM ` + from
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY tokens_per_s_per_gpu DESC, key`
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read points: %w", err)
	}
	defer rows.Close()
	var out []Point
	for rows.Next() {
		p, err := scanPoint(rows)
		if err != nil {
			return nil, fmt.Errorf("read points: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

func jsonStrings(ss []string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q", s)
	}
	b.WriteByte(']')
	return b.String()
}

func scanPoint(rows *sql.Rows) (Point, error) {
	var p Point
	in := &p.PointInputs
	var chunked, oom, pareto int
	var parallel string
	var numGPUs int
	leg := make([]sql.NullFloat64, len(legacyColumns))
	var qv [NumQ]sql.NullFloat64
	var lo, hi sql.NullFloat64
	var certain int
	dst := []any{&p.Key, &in.Model, &in.System, &in.Backend, &in.Version, &in.Mode, &in.ISL, &in.OSL, &in.Prefix,
		&in.TP, &in.PP, &in.DP, &in.MoETP, &in.MoEEP, &in.Batch, &in.CtxTokens, &in.MaxNumBatchedTokens,
		&in.MaxNumSeqs, &chunked, &in.DatabaseMode, &in.GemmQuant, &in.KVCacheQuant,
		&in.FMHAQuant, &in.MoEQuant, &in.CommQuant, &in.NextN,
		&in.PWorkers, &in.PBatch, &in.PTP, &in.PPP, &in.PDP, &in.DWorkers, &in.DBatch, &in.DTP, &in.DPP, &in.DDP,
		&in.Evaluator, &parallel, &numGPUs, &p.Legacy.Concurrency, &oom}
	for i := range leg {
		dst = append(dst, &leg[i])
	}
	for i := range qv {
		dst = append(dst, &qv[i])
	}
	var kvCap sql.NullInt64
	var kvUtil, kvPre sql.NullFloat64
	var pSys, dSys sql.NullString
	var pGPUs, dGPUs, multi sql.NullInt64
	var kvMean, kvP99, pq, head sql.NullFloat64
	dst = append(dst, &lo, &hi, &certain, &p.Q.Tier, &p.Q.Fidelity, &in.EngineProfile, &in.Engine, &in.Workload,
		&kvCap, &kvUtil, &kvPre, &p.Q.KV.Note, &pSys, &dSys, &pGPUs, &dGPUs, &kvMean, &kvP99, &pq, &head, &multi, &in.Deployed, &in.NextNAccepted, &pareto)
	if err := rows.Scan(dst...); err != nil {
		return p, err
	}
	in.ChunkedPrefill = chunked == 1
	if in.Engine == "{}" {
		in.Engine = ""
	}
	in.Deployed = DeployedAs(in.Deployed, in.Version) // the points view shows version when unset
	p.Legacy.OOM = oom == 1
	p.IsPareto = pareto == 1
	l := &p.Legacy
	for i, f := range []*float64{&l.TTFT, &l.TPOT, &l.RequestLatency, &l.RequestRate, &l.SeqPerS, &l.SeqPerSPerGPU,
		&l.TokensPerS, &l.TokensPerSPerGPU, &l.TokensPerSPerUser, &l.MemoryGiB} {
		*f = leg[i].Float64
	}
	p.Q.Valid = qv[QTTFTSteadyP50].Valid || qv[QITLP50].Valid
	for i := range qv {
		p.Q.V[i] = qv[i].Float64
	}
	p.Q.HasBracket = lo.Valid && hi.Valid
	p.Q.P99Lo, p.Q.P99Hi = lo.Float64, hi.Float64
	p.Q.HiCertain = certain == 1
	p.Q.KV.CapacityTokens = int(kvCap.Int64)
	p.Q.KV.UtilPeak, p.Q.KV.HasUtil = kvUtil.Float64, kvUtil.Valid
	p.Q.KV.PreemptionsPerRequest, p.Q.KV.HasPreemptions = kvPre.Float64, kvPre.Valid
	if p.Q.Valid && pq.Valid {
		p.Q.H = Handoff{Valid: true, KVTransferMsMean: kvMean.Float64, KVTransferMsP99: kvP99.Float64,
			HasKVTransferP99: kvP99.Valid, PQueueMsP99: pq.Float64, DHeadroomMin: head.Float64, MultiStable: multi.Int64 == 1}
	}
	return p, nil
}

// CalibrationCoverage counts the rows matching f (as SelectPoints reads them)
// that their calibration covers and those it leaves uncalibrated (the
// point_calibrations view's status): a calibrated sweep's closing note.
func (s *Store) CalibrationCoverage(ctx context.Context, f PointFilter) (calibrated, uncalibrated int, err error) {
	from, where, args := f.sql()
	q := `SELECT key FROM ` + from
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	err = s.db.QueryRowContext(ctx, `SELECT coalesce(sum(calibration_status = 'calibrated'), 0),
		coalesce(sum(calibration_status LIKE 'uncalibrated%'), 0) FROM point_calibrations WHERE key IN (`+q+`)`, args...).Scan(&calibrated, &uncalibrated)
	if err != nil {
		return 0, 0, fmt.Errorf("read calibration coverage: %w", err)
	}
	return calibrated, uncalibrated, nil
}
