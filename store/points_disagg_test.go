package store

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
)

// testDisaggInputs is a 2P1D row of testInputs' workload: prefill tp2 × 2 workers,
// decode tp4 × 1 worker (8 GPUs).
func testDisaggInputs() PointInputs {
	in := testInputs()
	in.Mode = ModeDisagg
	in.TP, in.Batch = 4, 32
	in.PWorkers, in.PBatch, in.PTP, in.PPP, in.PDP = 2, 1, 2, 1, 1
	in.DWorkers, in.DBatch, in.DTP, in.DPP, in.DDP = 1, 32, 4, 1, 1
	return in
}

// TestDisaggColumns (migration 00011): a disagg row stores its pools' system and
// GPUs and the screening handoff; an agg row has NULL in every disagg-only column;
// the disagg view lists only disagg rows; a quantitative result's handoff replaces
// the screening one in points and disagg.
func TestDisaggColumns(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	agg := testPoint(testInputs(), 30, 1000)
	dis := testPoint(testDisaggInputs(), 40, 900)
	dis.Q.H = Handoff{Valid: true, KVTransferMsMean: 12.5, KVTransferMsP99: 12.5, HasKVTransferP99: true, PQueueMsP99: 3, DHeadroomMin: 0.25}
	if _, err := s.InsertPoints(ctx, []Point{agg, dis}); err != nil {
		t.Fatal(err)
	}
	disaggOnly := []string{"p_system", "d_system", "p_gpus", "d_gpus", "kv_transfer_ms_mean", "kv_transfer_ms_p99",
		"p_queue_ms_p99", "d_headroom_min", "multi_stable"}
	var nonNull int
	if err := s.db.GetContext(ctx, &nonNull, `SELECT count(*) FROM points WHERE key = ? AND coalesce(`+strings.Join(disaggOnly, ", ")+`) IS NOT NULL`, agg.Key); err != nil || nonNull != 0 {
		t.Fatalf("agg row: %d rows with a non-NULL disagg-only column (%v), want 0", nonNull, err)
	}
	type row struct {
		Key      string          `db:"key"`
		PSystem  string          `db:"p_system"`
		DSystem  string          `db:"d_system"`
		PGPUs    int             `db:"p_gpus"`
		DGPUs    int             `db:"d_gpus"`
		NumGPUs  int             `db:"num_gpus"`
		KVMean   float64         `db:"kv_transfer_ms_mean"`
		PQueue   float64         `db:"p_queue_ms_p99"`
		Headroom float64         `db:"d_headroom_min"`
		Multi    sql.NullInt64   `db:"multi_stable"`
		KVP99    sql.NullFloat64 `db:"kv_transfer_ms_p99"`
		Tier     string          `db:"queueing_tier"`
	}
	var rows []row
	q := `SELECT key, p_system, d_system, p_gpus, d_gpus, num_gpus, kv_transfer_ms_mean, p_queue_ms_p99,
		d_headroom_min, multi_stable, kv_transfer_ms_p99, queueing_tier FROM disagg`
	if err := s.db.SelectContext(ctx, &rows, q); err != nil {
		t.Fatal(err)
	}
	want := row{Key: dis.Key, PSystem: "h200_sxm", DSystem: "h200_sxm", PGPUs: 4, DGPUs: 4, NumGPUs: 8, KVMean: 12.5,
		PQueue: 3, Headroom: 0.25, Multi: sql.NullInt64{Int64: 0, Valid: true}, KVP99: sql.NullFloat64{Float64: 12.5, Valid: true}, Tier: TierScreening}
	if len(rows) != 1 || rows[0] != want {
		t.Fatalf("disagg view:\n got %+v\nwant [%+v]", rows, want)
	}
	// Read back through SelectPoints: the handoff round-trips.
	pts, err := s.SelectPoints(ctx, PointFilter{Mode: ModeDisagg})
	if err != nil || len(pts) != 1 || pts[0].Q.H != dis.Q.H {
		t.Fatalf("round trip: %+v, %v; want %+v", pts, err, dis.Q.H)
	}
	// The quantitative tier's handoff wins once stored.
	r := Quantitative{Key: dis.Key, ThroughputRPS: 1, OutputTokensPerS: 500, Fidelity: "W0", Evaluator: "test-1",
		H: Handoff{Valid: true, KVTransferMsMean: 20, KVTransferMsP99: 31, HasKVTransferP99: true, PQueueMsP99: 7, DHeadroomMin: 0, MultiStable: true}}
	for i := range r.V {
		r.V[i] = 200
	}
	if err := s.InsertQuantitative(ctx, []Quantitative{r}); err != nil {
		t.Fatal(err)
	}
	rows = rows[:0]
	if err := s.db.SelectContext(ctx, &rows, q); err != nil {
		t.Fatal(err)
	}
	want.KVMean, want.PQueue, want.Headroom, want.Multi.Int64, want.KVP99.Float64, want.Tier = 20, 7, 0, 1, 31, TierQuantitative
	if len(rows) != 1 || rows[0] != want {
		t.Fatalf("disagg view at quantitative tier:\n got %+v\nwant [%+v]", rows, want)
	}
	// A handoff out of range is refused with the column named.
	bad := testPoint(testDisaggInputs(), 41, 800)
	bad.PointInputs.DBatch++
	bad.Key = bad.PointInputs.Key()
	bad.Q.H = Handoff{Valid: true, DHeadroomMin: 1.5}
	if _, err := s.InsertPoints(ctx, []Point{bad}); err == nil || !strings.Contains(err.Error(), "d_headroom_min = 1.5: must be in [0, 1]") {
		t.Fatalf("headroom 1.5: %v", err)
	}
}

// TestParetoComparesModes: agg and disagg rows of one workload keep separate
// frontiers (mode is part of the group) but share the pareto view, so one SLA in
// its WHERE clause selects both kinds, each on its own percentile columns.
func TestParetoComparesModes(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	agg := testPoint(testInputs(), 30, 1000)
	dis := testPoint(testDisaggInputs(), 40, 900)
	slow := testPoint(testDisaggInputs(), 50, 1200) // beats both: a disagg row with a TTFT p99 over the SLA
	slow.PointInputs.PWorkers = 3
	slow.Key = slow.PointInputs.Key()
	slow.Q.V[QTTFTSteadyP99] = 900
	if _, err := s.InsertPoints(ctx, []Point{agg, dis, slow}); err != nil {
		t.Fatal(err)
	}
	var modes []string
	if err := s.db.SelectContext(ctx, &modes, `SELECT mode FROM pareto ORDER BY tokens_per_s_per_gpu DESC`); err != nil {
		t.Fatal(err)
	}
	if strings.Join(modes, ",") != "disagg,agg" { // dis is dominated within its own mode by slow
		t.Fatalf("pareto modes %v, want [disagg agg] (slow on the disagg front, agg on its own)", modes)
	}
	modes = modes[:0]
	if err := s.db.SelectContext(ctx, &modes, `SELECT mode FROM points WHERE oom = 0 AND ttft_steady_p99 < 200 ORDER BY tokens_per_s_per_gpu DESC`); err != nil {
		t.Fatal(err)
	}
	if strings.Join(modes, ",") != "agg,disagg" {
		t.Fatalf("SLA over points: %v, want [agg disagg]", modes)
	}
}

// TestMigration00011Backfill: a store of schema 00010 with a disagg row and its
// quantitative result gains the pool columns and the handoff from the
// distributions JSON on open; an agg row stays NULL.
func TestMigration00011Backfill(t *testing.T) {
	ctx := context.Background()
	path, db := storeAt(t, 10)
	w := slices.Index(pointColumns, "workload") // the writer of schema 00010: every column before 00013's workload and 00011's
	dis := testPoint(testDisaggInputs(), 40, 900)
	agg := testPoint(testInputs(), 30, 1000)
	for _, pt := range []Point{dis, agg} {
		if _, err := db.ExecContext(ctx, `INSERT INTO operating_points (`+strings.Join(pointColumns[:w], ", ")+`) VALUES (`+placeholders(w)+`)`, pt.args()[:w]...); err != nil {
			t.Fatal(err)
		}
	}
	qw := slices.Index(quantColumns, "kv_capacity_tokens") // the writer of schema 00010
	args := []any{dis.Key}
	for range QueueingColumns {
		args = append(args, 7.0)
	}
	args = append(args, 1.0, 1.0, "W0",
		`{"kv_transfer":[{"value":10,"weight":3},{"value":30,"weight":1}],"p_queue_ms_p99":4.5,"d_headroom_min":0.5,"multi_stable":true}`, "ev")
	if _, err := db.ExecContext(ctx, `INSERT INTO quantitative_results (`+strings.Join(quantColumns[:qw], ", ")+`) VALUES (`+placeholders(qw)+`)`, args...); err != nil {
		t.Fatal(err)
	}
	s := openMigrated(t, path, db)
	var got struct {
		PGPUs  int             `db:"p_gpus"`
		DSys   string          `db:"d_system"`
		KVMean float64         `db:"kv_transfer_ms_mean"`
		KVP99  sql.NullFloat64 `db:"kv_transfer_ms_p99"`
		PQueue float64         `db:"p_queue_ms_p99"`
		Head   float64         `db:"d_headroom_min"`
		Multi  int             `db:"multi_stable"`
	}
	if err := s.db.GetContext(ctx, &got, `SELECT p_gpus, d_system, kv_transfer_ms_mean, kv_transfer_ms_p99, p_queue_ms_p99, d_headroom_min, multi_stable FROM disagg`); err != nil {
		t.Fatal(err)
	}
	if got.PGPUs != 4 || got.DSys != "h200_sxm" || got.KVMean != 15 || got.KVP99.Valid || got.PQueue != 4.5 || got.Head != 0.5 || got.Multi != 1 {
		t.Fatalf("backfilled disagg row: %+v", got)
	}
	var n int
	if err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM points WHERE mode = 'agg' AND p_gpus IS NULL AND p_system IS NULL AND kv_transfer_ms_mean IS NULL`); err != nil || n != 1 {
		t.Fatalf("agg row after backfill: %d (%v), want 1 with NULL disagg columns", n, err)
	}
}
