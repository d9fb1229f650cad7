package store

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/migrations"
)

func testInputs() PointInputs {
	return PointInputs{Model: "Qwen/Qwen3-32B", System: "h200_sxm", Backend: "vllm", Version: "0.22.0",
		Mode: ModeAgg, ISL: 4000, OSL: 500, TP: 8, PP: 1, DP: 1, MoETP: 1, MoEEP: 1, Batch: 16,
		CtxTokens: 4000, MaxNumBatchedTokens: 4000, MaxNumSeqs: 16, DatabaseMode: "SILICON",
		GemmQuant: "bfloat16", KVCacheQuant: "bfloat16", FMHAQuant: "bfloat16", MoEQuant: "bfloat16",
		CommQuant: "half", Evaluator: "test-1"}
}

// testPoint builds a valid screening-tier row with throughput (x = per user, y = per gpu).
func testPoint(in PointInputs, x, y float64) Point {
	l := Legacy{Concurrency: in.Batch, TTFT: 100, TPOT: 1000 / x, RequestLatency: 100 + 1000/x*float64(in.OSL-1),
		RequestRate: 1, SeqPerS: 1, SeqPerSPerGPU: 1, TokensPerS: y * 8, TokensPerSPerGPU: y, TokensPerSPerUser: x, MemoryGiB: 60}
	q := Queueing{Valid: true, Tier: TierScreening, Fidelity: "W0", HasBracket: true, HiCertain: true, P99Lo: 50, P99Hi: 300}
	for i := range q.V {
		q.V[i] = 100 + float64(i)
	}
	return NewPoint(in, l, q)
}

func openTest(t testing.TB) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "p.sqlite"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestKeyGolden(t *testing.T) {
	in := testInputs()
	// Pinned: changing the key encoding orphans every stored row.
	k := in.Key()
	if len(k) != 64 || strings.Trim(k, "0123456789abcdef") != "" {
		t.Fatalf("key %q is not sha256 hex", k)
	}
	in2 := in
	in2.Batch++
	if in2.Key() == k {
		t.Fatal("keys of different inputs collide")
	}
	in3 := in
	in3.Model = `Qwen/Qwen3-32B"` // quoting keeps field boundaries unambiguous
	if in3.Key() == k {
		t.Fatal("quoted model collides")
	}
	if got := testInputs(); got.Key() != k {
		t.Fatal("key not stable across calls")
	}
	if k != keyGolden {
		t.Fatalf("key encoding changed: got %s want %s", k, keyGolden)
	}
}

const keyGolden = "cd322a9a8c6b10b2fbf35e73dbb5eea748e90efa28f7cd9fc7ffd6792ee70c50"

func TestInsertReadBack(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	in := testInputs()
	p := testPoint(in, 30, 1000)
	n, err := s.InsertPoints(ctx, []Point{p})
	if err != nil || n != 1 {
		t.Fatalf("insert: n=%d err=%v", n, err)
	}
	// Re-inserting an existing key is a no-op.
	if n, err := s.InsertPoints(ctx, []Point{p}); err != nil || n != 0 {
		t.Fatalf("re-insert: n=%d err=%v", n, err)
	}
	got, err := s.SelectPoints(ctx, PointFilter{Model: in.Model})
	if err != nil || len(got) != 1 {
		t.Fatalf("select: %d rows, err=%v", len(got), err)
	}
	g := got[0]
	if g.Key != p.Key || g.PointInputs != p.PointInputs || g.Legacy != p.Legacy || g.Q != p.Q || !g.IsPareto {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", g, p)
	}
	// A quantitative result overlays the queueing columns in the points view.
	var r Quantitative
	r.Key = p.Key
	for i := range r.V {
		r.V[i] = 7
	}
	r.Fidelity, r.Distributions, r.Evaluator = "W0", `{"ttft_steady":[[7,1]]}`, "test-1"
	if err := s.InsertQuantitative(ctx, []Quantitative{r}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.SelectPoints(ctx, PointFilter{})
	if got[0].Q.Tier != TierQuantitative || got[0].Q.V[QTTFTSteadyP99] != 7 || got[0].Q.P99Lo != 50 {
		t.Fatalf("quantitative overlay: %+v", got[0].Q)
	}
}

func TestNonFiniteRejected(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	for _, bad := range []float64{math.NaN(), math.Inf(1), -1} {
		p := testPoint(testInputs(), 30, 1000)
		p.Q.V[QITLP99] = bad
		if _, err := s.InsertPoints(ctx, []Point{p}); err == nil || !strings.Contains(err.Error(), "itl_p99") {
			t.Fatalf("itl_p99 = %v: err %v, want an error naming itl_p99", bad, err)
		}
		p = testPoint(testInputs(), 30, 1000)
		p.Legacy.TTFT = bad
		if _, err := s.InsertPoints(ctx, []Point{p}); err == nil || !strings.Contains(err.Error(), "ttft") {
			t.Fatalf("ttft = %v: err %v", bad, err)
		}
	}
	var n int
	if err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM operating_points`); err != nil || n != 0 {
		t.Fatalf("rows after rejected inserts: %d, %v", n, err)
	}
	// The schema's CHECKs hold too, for writers that bypass Validate.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO quantitative_results (key) VALUES ('x')`); err == nil {
		t.Fatal("partial quantitative row accepted")
	}
}

// bruteFront is the O(n²) definition: a row is on the front iff no other row has
// x' ≥ x and y' ≥ y with (x', y') ≠ (x, y), and among identical (x, y) only the
// smallest key is kept.
func bruteFront(pts []Point) map[string]bool {
	out := map[string]bool{}
	for i, p := range pts {
		on := true
		for j, q := range pts {
			if i == j {
				continue
			}
			px, py := p.Legacy.TokensPerSPerUser, p.Legacy.TokensPerSPerGPU
			qx, qy := q.Legacy.TokensPerSPerUser, q.Legacy.TokensPerSPerGPU
			if qx >= px && qy >= py && (qx > px || qy > py || q.Key < p.Key) {
				on = false
				break
			}
		}
		if on {
			out[p.Key] = true
		}
	}
	return out
}

func TestParetoMatchesDefinition(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		in := testInputs()
		in.ISL = 1000 + n // a fresh group per case
		m := rapid.IntRange(1, 40).Draw(rt, "m")
		var pts []Point
		for i := 0; i < m; i++ {
			in.Batch = i + 1
			x := float64(rapid.IntRange(1, 6).Draw(rt, "x"))
			y := float64(rapid.IntRange(1, 6).Draw(rt, "y"))
			pts = append(pts, testPoint(in, x, y))
		}
		// Insert in two batches to exercise the incremental refresh.
		h := rapid.IntRange(0, m).Draw(rt, "split")
		for _, b := range [][]Point{pts[:h], pts[h:]} {
			if _, err := s.InsertPoints(ctx, b); err != nil {
				rt.Fatal(err)
			}
		}
		got, err := s.SelectPoints(ctx, PointFilter{ISL: in.ISL, ParetoOnly: true})
		if err != nil {
			rt.Fatal(err)
		}
		want := bruteFront(pts)
		if len(got) != len(want) {
			rt.Fatalf("front has %d rows, want %d", len(got), len(want))
		}
		for _, g := range got {
			if !want[g.Key] {
				rt.Fatalf("row %s (x %v, y %v) on the front but dominated", g.Key[:8], g.Legacy.TokensPerSPerUser, g.Legacy.TokensPerSPerGPU)
			}
		}
	})
}

func TestSweepRecords(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	id, _, _, err := s.BeginSweep(ctx, SweepStart{Arguments: `{"model":"m"}`, StartedAt: "2026-01-01T00:00:00Z", Host: "h", PID: 1}, never)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.EndSweep(ctx, SweepRecord{ID: id, EndedAt: "2026-01-01T00:00:01Z", Status: SweepDone, PointsTotal: 3, PointsEvaluated: 2, PointsSkipped: 1}); err != nil {
		t.Fatal(err)
	}
	rs, err := s.Sweeps(ctx)
	if err != nil || len(rs) != 1 || rs[0].Status != SweepDone || rs[0].PointsEvaluated != 2 {
		t.Fatalf("sweeps: %+v %v", rs, err)
	}
	if _, _, _, err := s.BeginSweep(ctx, SweepStart{Arguments: `not json`, StartedAt: "x", Host: "h", PID: 1}, never); err == nil {
		t.Fatal("non-JSON sweep arguments accepted")
	}
}

// seedPoints fills the store with n rows in groups of about perGroup rows.
func seedPoints(b testing.TB, s *Store, n, perGroup int) {
	ctx := context.Background()
	var batch []Point
	for i := 0; i < n; i++ {
		in := testInputs()
		in.ISL = 1000 + i/perGroup
		in.Batch = 1 + i%perGroup
		// A concave-ish cloud: many dominated rows, a front of modest size.
		x := float64(1 + (i*7919)%997)
		y := 5000 - x*float64(1+(i*104729)%13)/3
		if y < 1 {
			y = 1
		}
		batch = append(batch, testPoint(in, x, y))
		if len(batch) == 2000 {
			if _, err := s.InsertPoints(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := s.InsertPoints(ctx, batch); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPareto100k measures `SELECT * FROM pareto` over 100,000 rows (target < 500 ms).
func BenchmarkPareto100k(b *testing.B) {
	s := openTest(b)
	seedPoints(b, s, 100000, 2000)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() { // setup runs once (b.Loop), not once per b.N probe
		rows, err := s.db.QueryxContext(ctx, `SELECT * FROM pareto`)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for rows.Next() {
			if _, err := rows.SliceScan(); err != nil {
				b.Fatal(err)
			}
			n++
		}
		rows.Close()
		if n == 0 {
			b.Fatal("empty front")
		}
		b.ReportMetric(float64(n), "front_rows")
	}
}

// BenchmarkParetoRefreshGroup measures refreshing one 2,000-row group's flags.
func BenchmarkParetoRefreshGroup(b *testing.B) {
	s := openTest(b)
	seedPoints(b, s, 2000, 2000)
	g := testInputs()
	g.ISL = 1000
	ctx := context.Background()
	for b.Loop() {
		if err := s.RefreshPareto(ctx, g.Group()); err != nil {
			b.Fatal(err)
		}
	}
}

func TestSelectByKeys(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	var pts []Point
	var keys []string
	for i := 1; i <= 5; i++ {
		in := testInputs()
		in.Batch = i
		pts = append(pts, testPoint(in, float64(i), float64(10-i)))
		keys = append(keys, pts[len(pts)-1].Key)
	}
	if _, err := s.InsertPoints(ctx, pts); err != nil {
		t.Fatal(err)
	}
	got, err := s.SelectPoints(ctx, PointFilter{Keys: keys[1:3]})
	if err != nil {
		t.Fatal(err)
	}
	var gk []string
	for _, g := range got {
		gk = append(gk, g.Key)
	}
	sort.Strings(gk)
	want := append([]string{}, keys[1:3]...)
	sort.Strings(want)
	if fmt.Sprint(gk) != fmt.Sprint(want) {
		t.Fatalf("keys %v, want %v", gk, want)
	}
}

// TestWorkloadIdentity: a trace workload goes into the row key and the group (two
// traces, or one trace and the fixed shape, never share rows), and the column
// round-trips through the points view.
func TestWorkloadIdentity(t *testing.T) {
	a := testInputs()
	b := a
	b.Workload = `{"trace":"t","sha256":"aa"}`
	c := a
	c.Workload = `{"trace":"t","sha256":"bb"}`
	if a.Key() == b.Key() || b.Key() == c.Key() || a.Group() == b.Group() || b.Group() == c.Group() {
		t.Fatal("workload not part of the key and group")
	}
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "s.sqlite"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.InsertPoints(ctx, []Point{testPoint(a, 30, 1000), testPoint(b, 30, 1000), testPoint(c, 30, 1000)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.SelectPoints(ctx, PointFilter{Workload: b.Workload, WorkloadSet: true})
	if err != nil || len(got) != 1 || got[0].Workload != b.Workload || got[0].Key != b.Key() || !got[0].IsPareto {
		t.Fatalf("select by workload: %v %+v", err, got)
	}
	fixed, err := s.SelectPoints(ctx, PointFilter{WorkloadSet: true})
	if err != nil || len(fixed) != 1 || fixed[0].Key != a.Key() {
		t.Fatalf("fixed-shape rows: %v %d", err, len(fixed))
	}
	bad := b
	bad.Workload = "not json"
	if err := bad.Validate(); err == nil {
		t.Fatal("a non-JSON workload validated")
	}
}

// storeAt creates a store file migrated up to schema version (an older aicdb's
// store) and returns its path and an open handle; the test closes it before
// store.Open migrates the rest.
func storeAt(t *testing.T, version int64) (string, *sqlx.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.sqlite")
	db, err := sqlx.Open("sqlite", DSN(path, false))
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db.DB, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(context.Background(), version); err != nil {
		t.Fatal(err)
	}
	return path, db
}

// execAll runs the statements qs on db, an old-schema store (storeAt).
func execAll(t *testing.T, db *sqlx.DB, qs ...string) {
	t.Helper()
	for _, q := range qs {
		if _, err := db.ExecContext(context.Background(), q); err != nil {
			t.Fatal(err)
		}
	}
}

// openMigrated closes db, the old-schema handle of the store at path (storeAt),
// and opens the store, migrating it up; it is closed when the test ends.
func openMigrated(t *testing.T, path string, db *sqlx.DB) *Store {
	t.Helper()
	db.Close()
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
