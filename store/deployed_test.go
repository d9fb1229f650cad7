package store

import (
	"context"
	"database/sql"
	"testing"
)

// saveDeployedCalibration stores calibration name with one fit per deployed
// version of testInputs' key (saveParams numbers them).
func saveDeployedCalibration(t *testing.T, s *Store, name, digest string, deployed ...string) {
	t.Helper()
	in := testInputs()
	var ps []CalibrationParam
	for _, d := range deployed {
		ps = append(ps, CalibrationParam{System: in.System, Backend: in.Backend, Version: in.Version, Deployed: d, Model: in.Model,
			Quant: QuantLabel(in)})
	}
	saveParams(t, s, name, digest, ps)
}

// TestPointDeployedVersion: Deployed enters the key only when set, must not
// repeat Version, round-trips through the points view (which shows version
// where it is unset) and the screening path, filters by the deployed version
// either way, and partitions the pareto front.
func TestPointDeployedVersion(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	same := testInputs()
	old := same
	old.Deployed = "0.17.0"
	if same.Key() == old.Key() {
		t.Fatal("a deployed version does not change the row key")
	}
	bad := same
	bad.Deployed = same.Version
	if err := bad.Validate(); err == nil {
		t.Error("a deployed version equal to the priced one validated")
	}
	if DeployedAs("0.22.0", "0.22.0") != "" || DeployedAs("", "0.22.0") != "" || DeployedAs("0.17.0", "0.22.0") != "0.17.0" {
		t.Error("DeployedAs: want '' for the priced or an unstated version, else the deployed one")
	}
	if _, err := s.InsertPoints(ctx, []Point{testPoint(same, 30, 1000), testPoint(old, 30, 900)}); err != nil {
		t.Fatal(err)
	}
	for _, tier := range []string{"", TierScreening} {
		for _, c := range []struct {
			deployed string
			want     PointInputs
		}{{"0.22.0", same}, {"0.17.0", old}} {
			ps, err := s.SelectPoints(ctx, PointFilter{Deployed: c.deployed, Tier: tier})
			if err != nil || len(ps) != 1 {
				t.Fatalf("tier %q, deployed %s: %d rows (%v), want 1", tier, c.deployed, len(ps), err)
			}
			if ps[0].Key != c.want.Key() || ps[0].Deployed != c.want.Deployed || ps[0].DeployedVersion() != c.deployed {
				t.Errorf("tier %q, deployed %s: read back deployed %q (key %s), want %q", tier, c.deployed, ps[0].Deployed, ps[0].Key[:8], c.want.Deployed)
			}
		}
	}
	// Each deployed version has its own frontier: the 0.17.0 row (same throughput
	// per user, lower per GPU) is on its own, not dominated by the 0.22.0 one.
	for _, view := range []string{"pareto", "pareto_all"} {
		var n int
		if err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM `+view); err != nil || n != 2 {
			t.Errorf("%s holds %d rows (%v), want both deployed versions' fronts", view, n, err)
		}
	}
	var shown []string
	if err := s.db.SelectContext(ctx, &shown, `SELECT deployed_version FROM points ORDER BY deployed_version`); err != nil {
		t.Fatal(err)
	}
	if len(shown) != 2 || shown[0] != "0.17.0" || shown[1] != "0.22.0" {
		t.Errorf("points.deployed_version %v, want [0.17.0 0.22.0]", shown)
	}
}

// TestPointCalibrationsDeployed: a point is calibrated by the fit of its own
// deployed version, else by one stored with deployed version ” (any: fitted
// before migration 00015), else says uncalibrated — the view and the Go rule
// (refine/calibrate's Calibration.For) agree.
func TestPointCalibrationsDeployed(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	saveDeployedCalibration(t, s, "c", "d1", "0.17.0", "0.22.0")
	saveDeployedCalibration(t, s, "any", "d2", "")
	var pts []Point
	cases := []struct {
		deployed, cal, status string
		prefill               float64
	}{
		{"0.17.0", "c@d1", "calibrated", 2},
		{"", "c@d1", "calibrated", 3}, // deployed at the priced version 0.22.0
		{"0.18.0", "c@d1", "uncalibrated: c has no fit for this system, backend, version, deployed version, model, quantisation and layout", 0},
		{"0.18.0", "any@d2", "calibrated", 2},
	}
	for _, c := range cases {
		in := testInputs()
		in.Deployed, in.Evaluator = c.deployed, "ev+cal:"+c.cal
		pts = append(pts, testPoint(in, 30, 1000))
	}
	if _, err := s.InsertPoints(ctx, pts); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		var got struct {
			Status  string          `db:"calibration_status"`
			Prefill sql.NullFloat64 `db:"prefill_scale"`
		}
		if err := s.db.GetContext(ctx, &got, `SELECT calibration_status, prefill_scale FROM point_calibrations WHERE key = ?`, pts[i].Key); err != nil {
			t.Fatal(err)
		}
		if got.Status != c.status || got.Prefill.Float64 != c.prefill {
			t.Errorf("deployed %q under %s: %q, prefill %v; want %q, %v", c.deployed, c.cal, got.Status, got.Prefill.Float64, c.status, c.prefill)
		}
	}
}

// TestMigration00015: a calibration stored before 00015 migrates with deployed
// version ” (and still calibrates every deployed version); down again, a
// calibration with two deployed versions of one key keeps the group with the
// most rows, operating_points loses the column, and up again reads as before.
func TestMigration00015(t *testing.T) {
	ctx := context.Background()
	path, db := storeAt(t, 14)
	execAll(t, db,
		`INSERT INTO calibrations VALUES ('old', 'd0', 'true', 'ev', 'aiconfigurator', 5, '{}', '2026-12-01T00:00:00Z')`,
		`INSERT INTO calibration_params (name, system, backend, version, model, quant, prefill_scale, decode_scale, pass_overhead_ms,
			request_overhead_ms, rows, ttft_mape_before, tpot_mape_before, ttft_mape_fit, tpot_mape_fit, ttft_mape_cv, tpot_mape_cv,
			unidentified) VALUES ('old', 'h200_sxm', 'vllm', '0.22.0', 'Qwen/Qwen3-32B', '', 0.5, 0.9, 0.1, 2, 12, 30, 10, 12, 5, 13, 6, '[]')`,
	)
	s := openMigrated(t, path, db)
	ps, err := s.CalibrationParams(ctx, "old")
	if err != nil || len(ps) != 1 || ps[0].Deployed != "" || ps[0].PrefillScale != 0.5 {
		t.Fatalf("migrated calibration: %+v (%v), want one row with deployed version ''", ps, err)
	}
	in := testInputs()
	in.Deployed, in.Evaluator = "0.17.0", "ev+cal:old@d0"
	requireCalibratedPoint(t, s, in, "pre-00015 calibration on a deployed point")
	saveDeployedCalibration(t, s, "new", "d1", "0.17.0", "0.22.0") // 10 and 11 rows
	downKeepsLargerGroup(t, s, 14, "new", "deployed_version", "operating_points", "calibration_params", "calibration_rows")
	if ps, err = s.CalibrationParams(ctx, "new"); err != nil || len(ps) != 1 || ps[0].Deployed != "" || ps[0].PrefillScale != 3 {
		t.Fatalf("up again: %+v (%v)", ps, err)
	}
}
