package store

import (
	"context"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/aicdb/aicdb/migrations"
)

// TestEngineConfigKeyAndRoundTrip: rows of the sweep's original engine rule keep
// their key whatever engine config they record; a profile puts the profile and the
// resolved engine into the key; both columns round-trip, and a row without a
// recorded config reads back as "".
func TestEngineConfigKeyAndRoundTrip(t *testing.T) {
	ctx := context.Background()
	legacy := testInputs()
	recorded := legacy
	recorded.Engine = `{"profile":"defaults","engine":{"backend":"vllm"}}`
	if recorded.Key() != legacy.Key() || legacy.Key() != keyGolden {
		t.Fatal("recording the engine of an original-rule row changed its key")
	}
	aic := recorded
	aic.EngineProfile = "aiconfigurator"
	aic.Engine = `{"profile":"aiconfigurator","engine":{"backend":"vllm","max_num_batched_tokens":5516}}`
	aic2 := aic
	aic2.Engine = `{"profile":"aiconfigurator","engine":{"backend":"vllm","max_num_batched_tokens":5517}}`
	if aic.Key() == legacy.Key() || aic.Key() == aic2.Key() {
		t.Fatal("profile rows must key on the profile and the resolved engine")
	}
	bad := aic
	bad.Engine = "{"
	if err := bad.Validate(); err == nil || err.Error() != `point: engine config "{" is not JSON` {
		t.Fatalf("invalid JSON: %v", err)
	}
	bad.Engine = ""
	if err := bad.Validate(); err == nil || err.Error() != `point: engine profile "aiconfigurator" without its resolved engine config` {
		t.Fatalf("profile without engine: %v", err)
	}

	s := openTest(t)
	pts := []Point{testPoint(legacy, 30, 1000), testPoint(aic, 31, 900)}
	if n, err := s.InsertPoints(ctx, pts); err != nil || n != 2 {
		t.Fatalf("insert: %d %v", n, err)
	}
	got, err := s.SelectPoints(ctx, PointFilter{})
	if err != nil || len(got) != 2 {
		t.Fatalf("select: %d %v", len(got), err)
	}
	for _, g := range got {
		var want PointInputs
		for _, p := range pts {
			if p.Key == g.Key {
				want = p.PointInputs
			}
		}
		if g.PointInputs != want || g.Key != g.PointInputs.Key() {
			t.Errorf("round trip:\n got %+v\nwant %+v", g.PointInputs, want)
		}
	}
	var raw string
	if err := s.db.GetContext(ctx, &raw, `SELECT engine_config FROM operating_points WHERE key = ?`, legacy.Key()); err != nil || raw != "{}" {
		t.Fatalf("unrecorded engine stored as %q (%v), want {}", raw, err)
	}
}

// TestMigration00009DownUp: the engine columns migrate down and up again.
func TestMigration00009DownUp(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	p, err := goose.NewProvider(goose.DialectSQLite3, s.db.DB, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 8); err != nil {
		t.Fatalf("down: %v", err)
	}
	var n int
	if err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM pragma_table_info('operating_points') WHERE name LIKE 'engine_%'`); err != nil || n != 0 {
		t.Fatalf("after down: %d engine columns (%v)", n, err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	if err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM pragma_table_info('operating_points') WHERE name LIKE 'engine_%'`); err != nil || n != 2 {
		t.Fatalf("after up: %d engine columns (%v)", n, err)
	}
}

// TestFindPoint: by rowid, by key prefix, ambiguous and missing refs.
func TestFindPoint(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	a := testInputs()
	b := a
	b.Batch++
	if _, err := s.InsertPoints(ctx, []Point{testPoint(a, 30, 1000), testPoint(b, 31, 900)}); err != nil {
		t.Fatal(err)
	}
	p, err := s.FindPoint(ctx, "2")
	if err != nil || p.Key != b.Key() {
		t.Fatalf("rowid 2: %v %v", p.Key, err)
	}
	p, err = s.FindPoint(ctx, a.Key()[:8])
	if err != nil || p.Key != a.Key() {
		t.Fatalf("prefix: %v %v", p.Key, err)
	}
	for ref, want := range map[string]string{
		"3":      "row 3: no such operating point",
		"abc":    `row "abc": want a row id (a positive integer) or a key prefix of at least 6 hex digits`,
		"-1":     `row "-1": want a row id (a positive integer) or a key prefix of at least 6 hex digits`,
		"ffffff": "row ffffff: no such operating point",
	} {
		if _, err := s.FindPoint(ctx, ref); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", ref, err, want)
		}
	}
}
