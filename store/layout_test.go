package store

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/pressly/goose/v3"
	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/migrations"
)

// TestLayoutLabel: the calibration key's layout label over every pool — attention
// DP and pipeline parallelism anywhere in the deployment, else plain tp.
func TestLayoutLabel(t *testing.T) {
	cases := []struct {
		in   PointInputs
		want string
	}{
		{PointInputs{TP: 8, PP: 1, DP: 1}, "tp"},
		{PointInputs{}, "tp"},
		{PointInputs{TP: 1, PP: 1, DP: 8, MoEEP: 8}, "adp"},
		{PointInputs{TP: 4, PP: 2, DP: 1}, "pp"},
		{PointInputs{TP: 2, PP: 2, DP: 4}, "adp,pp"},
		{PointInputs{Mode: ModeDisagg, PTP: 8, PPP: 1, PDP: 1, DTP: 1, DPP: 1, DDP: 8}, "adp"},
		{PointInputs{Mode: ModeDisagg, PTP: 4, PPP: 2, PDP: 1, DTP: 8, DPP: 1, DDP: 1}, "pp"},
		{PointInputs{Mode: ModeDisagg, PTP: 8, PPP: 1, PDP: 1, DTP: 8, DPP: 1, DDP: 1}, "tp"},
	}
	for _, c := range cases {
		if got := LayoutLabel(c.in); got != c.want {
			t.Errorf("LayoutLabel(tp %d pp %d dp %d; p %d/%d/%d; d %d/%d/%d) = %q, want %q", c.in.TP, c.in.PP, c.in.DP,
				c.in.PTP, c.in.PPP, c.in.PDP, c.in.DTP, c.in.DPP, c.in.DDP, got, c.want)
		}
	}
}

// saveLayoutCalibration stores calibration name with one fit per layout of
// testInputs' key (saveParams numbers them: the i-th has prefill scale i+2).
func saveLayoutCalibration(t *testing.T, s *Store, name, digest string, layouts ...string) {
	t.Helper()
	in := testInputs()
	var ps []CalibrationParam
	for _, l := range layouts {
		ps = append(ps, CalibrationParam{System: in.System, Backend: in.Backend, Version: in.Version, Model: in.Model,
			Quant: QuantLabel(in), Layout: l})
	}
	saveParams(t, s, name, digest, ps)
}

// TestPointCalibrationsLayout: point_calibrations derives the point's layout by
// LayoutLabel's rule, and a point is calibrated by the fit of its own layout,
// else by one stored with layout ” (any: fitted before migration 00018), else
// says uncalibrated.
func TestPointCalibrationsLayout(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	saveLayoutCalibration(t, s, "c", "d1", "tp", "adp")
	saveLayoutCalibration(t, s, "any", "d2", "")
	tp := testInputs()
	adp := tp
	adp.TP, adp.DP = 1, 8
	pp := tp
	pp.TP, pp.PP = 4, 2
	cases := []struct {
		in                  PointInputs
		cal, status, layout string
		calLayout           sql.NullString
		prefill             float64
	}{
		{tp, "c@d1", "calibrated", "tp", sql.NullString{String: "tp", Valid: true}, 2},
		{adp, "c@d1", "calibrated", "adp", sql.NullString{String: "adp", Valid: true}, 3},
		{pp, "c@d1", "uncalibrated: c has no fit for this system, backend, version, deployed version, model, quantisation and layout", "pp", sql.NullString{}, 0},
		{pp, "any@d2", "calibrated", "pp", sql.NullString{String: "", Valid: true}, 2},
	}
	var pts []Point
	for i := range cases {
		cases[i].in.Evaluator = "ev+cal:" + cases[i].cal
		pts = append(pts, testPoint(cases[i].in, 30, 1000))
	}
	if _, err := s.InsertPoints(ctx, pts); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		var got struct {
			Status    string          `db:"calibration_status"`
			Layout    string          `db:"layout"`
			CalLayout sql.NullString  `db:"calibration_layout"`
			Prefill   sql.NullFloat64 `db:"prefill_scale"`
		}
		if err := s.db.GetContext(ctx, &got, `SELECT calibration_status, layout, calibration_layout, prefill_scale
			FROM point_calibrations WHERE key = ?`, pts[i].Key); err != nil {
			t.Fatal(err)
		}
		if got.Status != c.status || got.Layout != c.layout || got.CalLayout != c.calLayout || got.Prefill.Float64 != c.prefill {
			t.Errorf("%s under %s: %+v; want %q, layout %q, calibration layout %+v, prefill %v", c.layout, c.cal, got,
				c.status, c.layout, c.calLayout, c.prefill)
		}
	}
	// The view's label is LayoutLabel's for any layout columns of either mode.
	size, pool := rapid.SampledFrom([]int{1, 2, 4, 8}), rapid.SampledFrom([]int{0, 1, 2, 4, 8}) // a pool's 0: agg
	viewLabelMatches(t, s, pts[0].Key, "layout", func(rt *rapid.T) (string, []any, string) {
		in := PointInputs{PP: size.Draw(rt, "pp"), DP: size.Draw(rt, "dp"), PPP: pool.Draw(rt, "p_pp"), PDP: pool.Draw(rt, "p_dp"),
			DPP: pool.Draw(rt, "d_pp"), DDP: pool.Draw(rt, "d_dp")}
		return `pp = ?, dp = ?, p_pp = ?, p_dp = ?, d_pp = ?, d_dp = ?`, []any{in.PP, in.DP, in.PPP, in.PDP, in.DPP, in.DDP}, LayoutLabel(in)
	})
}

// TestMigration00018: a calibration stored before 00018 migrates with layout ”
// (and still calibrates every layout); down again, a calibration with two
// layouts of one key keeps the group with the most rows and calibration_rows
// loses the column; up again reads as before.
func TestMigration00018(t *testing.T) {
	ctx := context.Background()
	path, db := storeAt(t, 17)
	execAll(t, db,
		`INSERT INTO calibrations VALUES ('old', 'd0', 'true', 'ev', 'aiconfigurator', 5, '{}', '2026-12-01T00:00:00Z')`,
		`INSERT INTO calibration_params (name, system, backend, version, deployed_version, model, quant, prefill_scale, decode_scale,
			pass_overhead_ms, request_overhead_ms, rows, ttft_mape_before, tpot_mape_before, ttft_mape_fit, tpot_mape_fit, ttft_mape_cv,
			tpot_mape_cv, unidentified) VALUES ('old', 'h200_sxm', 'vllm', '0.22.0', '', 'Qwen/Qwen3-32B', '', 0.5, 0.9, 0.1, 2, 12,
			30, 10, 12, 5, 13, 6, '[]')`,
	)
	s := openMigrated(t, path, db)
	ps, err := s.CalibrationParams(ctx, "old")
	if err != nil || len(ps) != 1 || ps[0].Layout != "" || ps[0].PrefillScale != 0.5 {
		t.Fatalf("migrated calibration: %+v (%v), want one row with layout ''", ps, err)
	}
	in := testInputs()
	in.TP, in.DP, in.Evaluator = 1, 8, "ev+cal:old@d0"
	requireCalibratedPoint(t, s, in, "pre-00018 calibration on an attention-DP point")
	saveLayoutCalibration(t, s, "new", "d1", "adp", "tp") // 10 and 11 rows
	downKeepsLargerGroup(t, s, 17, "new", "layout", "calibration_params", "calibration_rows")
	if ps, err := s.CalibrationParams(ctx, "new"); err != nil || len(ps) != 1 || ps[0].Layout != "" || ps[0].PrefillScale != 3 {
		t.Fatalf("up again: %+v (%v)", ps, err)
	}
}

// downKeepsLargerGroup migrates s down to version (a key component's migration
// undone), checks that calibration name kept only its larger group (prefill
// scale 3: saveParams' second) and that the tables lost the column, and
// migrates up again.
func downKeepsLargerGroup(t *testing.T, s *Store, version int64, name, column string, tables ...string) {
	t.Helper()
	ctx := context.Background()
	p, err := goose.NewProvider(goose.DialectSQLite3, s.db.DB, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, version); err != nil {
		t.Fatalf("down: %v", err)
	}
	var prefill []float64
	if err := s.db.SelectContext(ctx, &prefill, `SELECT prefill_scale FROM calibration_params WHERE name = ?`, name); err != nil {
		t.Fatal(err)
	}
	if len(prefill) != 1 || prefill[0] != 3 {
		t.Fatalf("after down: %s's prefill scales %v, want only the larger group's 3", name, prefill)
	}
	for _, tbl := range tables {
		var n int
		if err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM pragma_table_info(?) WHERE name = ?`, tbl, column); err != nil || n != 0 {
			t.Fatalf("after down: %s has %d %s columns (%v)", tbl, n, column, err)
		}
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
}

// TestReadOnlyRefusesOlderSchema: a read-only open cannot migrate, so a store of
// an older schema is refused in one line naming the migration; a writable open
// migrates it, after which a read-only open succeeds.
func TestReadOnlyRefusesOlderSchema(t *testing.T) {
	ctx := context.Background()
	path, db := storeAt(t, 17)
	db.Close()
	_, err := Open(ctx, path, Options{ReadOnly: true})
	if err == nil || !strings.Contains(err.Error(), "has schema version 17, older than this aicdb's") ||
		!strings.Contains(err.Error(), "run 'aicdb init --db "+path+"' once to migrate it") {
		t.Fatalf("read-only open of a schema-17 store: %v", err)
	}
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open after the migration: %v", err)
	}
	s.Close()
}

// TestCalibrationCoverage counts a calibrated sweep's rows by what
// point_calibrations says of them: the layouts the calibration has fits for are
// calibrated, the others not; rows of another evaluator or workload are not
// counted.
func TestCalibrationCoverage(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	saveLayoutCalibration(t, s, "c", "d1", "tp", "adp")
	var pts []Point
	for _, l := range []struct{ tp, pp, dp int }{{8, 1, 1}, {1, 1, 8}, {4, 2, 1}, {2, 2, 2}} {
		in := testInputs()
		in.TP, in.PP, in.DP, in.Evaluator = l.tp, l.pp, l.dp, "ev+cal:c@d1"
		pts = append(pts, testPoint(in, 30, 1000))
	}
	other := testInputs()
	other.OSL, other.Evaluator = 64, "ev+cal:c@d1"
	pts = append(pts, testPoint(other, 30, 1000))
	if _, err := s.InsertPoints(ctx, pts); err != nil {
		t.Fatal(err)
	}
	in := testInputs()
	cal, uncal, err := s.CalibrationCoverage(ctx, PointFilter{Model: in.Model, System: in.System, Backend: in.Backend, Version: in.Version,
		ISL: in.ISL, OSL: in.OSL, IncludeOOM: true, Where: "evaluator = ?", WhereArgs: []any{"ev+cal:c@d1"}})
	if err != nil || cal != 2 || uncal != 2 {
		t.Fatalf("coverage: %d calibrated, %d uncalibrated (%v); want 2 (tp, adp) and 2 (pp, adp,pp)", cal, uncal, err)
	}
}

// requireCalibratedPoint stores point in (its evaluator naming a calibration)
// and fails unless point_calibrations says it is calibrated; what names the case.
func requireCalibratedPoint(t *testing.T, s *Store, in PointInputs, what string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.InsertPoints(ctx, []Point{testPoint(in, 30, 1000)}); err != nil {
		t.Fatal(err)
	}
	var status string
	if err := s.db.GetContext(ctx, &status, `SELECT calibration_status FROM point_calibrations WHERE key = ?`, in.Key()); err != nil || status != "calibrated" {
		t.Fatalf("%s: %q (%v), want calibrated", what, status, err)
	}
}
