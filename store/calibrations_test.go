package store

import (
	"context"
	"database/sql"
	"testing"

	"github.com/pressly/goose/v3"
	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/migrations"
)

// TestQuantLabel: the calibration key's quantisation label, fields in fixed
// order, an empty part omitted.
func TestQuantLabel(t *testing.T) {
	cases := []struct {
		in   PointInputs
		want string
	}{
		{PointInputs{GemmQuant: "fp8", MoEQuant: "nvfp4", KVCacheQuant: "fp8", FMHAQuant: "bfloat16", CommQuant: "half"},
			"gemm=fp8,moe=nvfp4,kv=fp8,fmha=bfloat16,comm=half"},
		{PointInputs{GemmQuant: "bfloat16", MoEQuant: "int4_wo", KVCacheQuant: "bfloat16", FMHAQuant: "bfloat16", CommQuant: "half"},
			"gemm=bfloat16,moe=int4_wo,kv=bfloat16,fmha=bfloat16,comm=half"},
		{PointInputs{GemmQuant: "fp8", KVCacheQuant: "fp8"}, "gemm=fp8,kv=fp8"},
		{PointInputs{CommQuant: "half"}, "comm=half"},
		{PointInputs{Model: "m", System: "s"}, ""},
	}
	for _, c := range cases {
		if got := QuantLabel(c.in); got != c.want {
			t.Errorf("QuantLabel(%+v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// saveTestCalibration stores calibration name with one param row per (model,
// quant) of (h200_sxm, vllm, 0.22.0) (saveParams numbers them).
func saveTestCalibration(t *testing.T, s *Store, name, digest string, keys ...[2]string) {
	t.Helper()
	var ps []CalibrationParam
	for _, k := range keys {
		ps = append(ps, CalibrationParam{System: "h200_sxm", Backend: "vllm", Version: "0.22.0", Model: k[0], Quant: k[1]})
	}
	saveParams(t, s, name, digest, ps)
}

// saveParams stores calibration name with the deployment keys of ps, the i-th
// given prefill scale i+2 and 10+i rows.
func saveParams(t *testing.T, s *Store, name, digest string, ps []CalibrationParam) {
	t.Helper()
	for i := range ps {
		ps[i].PrefillScale, ps[i].DecodeScale, ps[i].Rows, ps[i].Unidentified = float64(i+2), 1, 10+i, "[]"
	}
	if err := s.SaveCalibration(context.Background(), Calibration{Name: name, Digest: digest, Predicate: "true", Evaluator: "ev",
		Profile: "aiconfigurator", Report: "{}", CreatedAt: "2026-12-04T00:00:00Z"}, ps, nil); err != nil {
		t.Fatal(err)
	}
}

// TestPointCalibrationsQuant: point_calibrations derives the point's quant by
// QuantLabel's rule, and a point is calibrated by the fit of its own quant, else
// by one stored with quant "" (any), else says uncalibrated.
func TestPointCalibrationsQuant(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	fp8 := testInputs()
	fp8.GemmQuant, fp8.KVCacheQuant, fp8.Evaluator = "fp8", "fp8", "ev+cal:c@d1"
	nvfp4 := fp8
	nvfp4.GemmQuant = "nvfp4"
	other := fp8
	other.Model = "Qwen/Qwen3-8B"
	bare := fp8
	bare.Evaluator = "ev"
	saveTestCalibration(t, s, "c", "d1", [2]string{fp8.Model, QuantLabel(fp8)}, [2]string{other.Model, ""})
	if _, err := s.InsertPoints(ctx, []Point{testPoint(fp8, 30, 1000), testPoint(nvfp4, 30, 1000),
		testPoint(other, 30, 1000), testPoint(bare, 30, 1000)}); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		in                   PointInputs
		status, calQuant     string
		prefill              float64
		hasPrefill, hasQuant bool
	}{
		{fp8, "calibrated", QuantLabel(fp8), 2, true, true},
		{nvfp4, "uncalibrated: c has no fit for this system, backend, version, deployed version, model, quantisation and layout", "", 0, false, false},
		{other, "calibrated", "", 3, true, true},
		{bare, "none", "", 0, false, false},
	}
	for _, w := range want {
		var got struct {
			Status   string          `db:"calibration_status"`
			Quant    string          `db:"quant"`
			CalQuant sql.NullString  `db:"calibration_quant"`
			Prefill  sql.NullFloat64 `db:"prefill_scale"`
		}
		if err := s.db.GetContext(ctx, &got, `SELECT calibration_status, quant, calibration_quant, prefill_scale
			FROM point_calibrations WHERE key = ?`, w.in.Key()); err != nil {
			t.Fatal(err)
		}
		if got.Status != w.status || got.Quant != QuantLabel(w.in) || got.CalQuant.Valid != w.hasQuant ||
			got.CalQuant.String != w.calQuant || got.Prefill.Valid != w.hasPrefill || got.Prefill.Float64 != w.prefill {
			t.Errorf("%s [%s]: %+v, want %q, quant %q, calibration quant %q, prefill %v", w.in.Model, QuantLabel(w.in), got,
				w.status, QuantLabel(w.in), w.calQuant, w.prefill)
		}
	}
	// The view's label is QuantLabel's for any quant columns, empty ones too.
	part := rapid.SampledFrom([]string{"", "fp8", "nvfp4", "bfloat16", "int4_wo", "half", "w4a16_mxfp4"})
	viewLabelMatches(t, s, fp8.Key(), "quant", func(rt *rapid.T) (string, []any, string) {
		in := PointInputs{GemmQuant: part.Draw(rt, "gemm"), MoEQuant: part.Draw(rt, "moe"), KVCacheQuant: part.Draw(rt, "kv"),
			FMHAQuant: part.Draw(rt, "fmha"), CommQuant: part.Draw(rt, "comm")}
		return `gemm_quant = ?, moe_quant = ?, kvcache_quant = ?, fmha_quant = ?, comm_quant = ?`,
			[]any{in.GemmQuant, in.MoEQuant, in.KVCacheQuant, in.FMHAQuant, in.CommQuant}, QuantLabel(in)
	})
}

// viewLabelMatches checks a point_calibrations label column against its Go rule:
// draw gives the operating_points assignments (SET clause and arguments) for the
// point key and the label the Go rule gives them.
func viewLabelMatches(t *testing.T, s *Store, key, column string, draw func(*rapid.T) (set string, args []any, want string)) {
	t.Helper()
	ctx := context.Background()
	rapid.Check(t, func(rt *rapid.T) {
		set, args, want := draw(rt)
		if _, err := s.db.ExecContext(ctx, `UPDATE operating_points SET `+set+` WHERE key = ?`, append(args, key)...); err != nil {
			rt.Fatal(err)
		}
		var got string
		if err := s.db.GetContext(ctx, &got, `SELECT `+column+` FROM point_calibrations WHERE key = ?`, key); err != nil {
			rt.Fatal(err)
		}
		if got != want {
			rt.Fatalf("view %s %q, Go rule %q", column, got, want)
		}
	})
}

// TestMigration00014: a calibration stored before 00014 migrates with quant ""
// (and still calibrates every quantisation); down again, a calibration with two
// quantisations of one key keeps the group with the most rows, and up again the
// old rows read as before.
func TestMigration00014(t *testing.T) {
	ctx := context.Background()
	path, db := storeAt(t, 13)
	execAll(t, db,
		`INSERT INTO calibrations VALUES ('old', 'd0', 'true', 'ev', 'aiconfigurator', 5, '{}', '2026-12-01T00:00:00Z')`,
		`INSERT INTO calibration_params (name, system, backend, version, model, prefill_scale, decode_scale, pass_overhead_ms,
			request_overhead_ms, rows, ttft_mape_before, tpot_mape_before, ttft_mape_fit, tpot_mape_fit, ttft_mape_cv, tpot_mape_cv,
			unidentified) VALUES ('old', 'h200_sxm', 'vllm', '0.22.0', 'Qwen/Qwen3-32B', 0.5, 0.9, 0.1, 2, 12, 30, 10, 12, 5, 13, 6, '[]')`,
	)
	s := openMigrated(t, path, db)
	ps, err := s.CalibrationParams(ctx, "old")
	if err != nil || len(ps) != 1 || ps[0].Quant != "" || ps[0].PrefillScale != 0.5 || ps[0].RequestOverheadMs != 2 {
		t.Fatalf("migrated calibration: %+v (%v), want one row with quant ''", ps, err)
	}
	in := testInputs()
	in.Evaluator = "ev+cal:old@d0"
	requireCalibratedPoint(t, s, in, "pre-00014 calibration on a point")
	saveTestCalibration(t, s, "new", "d1", [2]string{"Qwen/Qwen3-32B", "gemm=fp8"}, [2]string{"Qwen/Qwen3-32B", "gemm=nvfp4"}) // 10 and 11 rows
	p, err := goose.NewProvider(goose.DialectSQLite3, s.db.DB, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 13); err != nil {
		t.Fatalf("down: %v", err)
	}
	var got []struct {
		Name    string  `db:"name"`
		Prefill float64 `db:"prefill_scale"`
	}
	if err := s.db.SelectContext(ctx, &got, `SELECT name, prefill_scale FROM calibration_params ORDER BY name`); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "new" || got[0].Prefill != 3 || got[1].Name != "old" || got[1].Prefill != 0.5 {
		t.Fatalf("after down: %+v, want new's larger group (prefill 3) and old", got)
	}
	var n int
	if err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM pragma_table_info('calibration_params') WHERE name = 'quant'`); err != nil || n != 0 {
		t.Fatalf("after down: calibration_params has %d quant columns (%v)", n, err)
	}
	if err := s.db.GetContext(ctx, &n, `SELECT count(*) FROM pragma_table_info('calibration_rows') WHERE name = 'quant'`); err != nil || n != 0 {
		t.Fatalf("after down: calibration_rows has %d quant columns (%v)", n, err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("up: %v", err)
	}
	if ps, err = s.CalibrationParams(ctx, "new"); err != nil || len(ps) != 1 || ps[0].Quant != "" || ps[0].PrefillScale != 3 {
		t.Fatalf("up again: %+v (%v)", ps, err)
	}
}
