package calibrate

import (
	"context"
	"database/sql"
	"testing"

	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// TestPropertyForMatchesPointCalibrations: for any set of fits over deployed
// versions and quantisations (each possibly ” = any) and any point, the fit
// Calibration.For applies is the one the point_calibrations view reports — the
// Go rule and the SQL rule agree on the fallback order (migrations 00014, 00015),
// and the view's fit quality (rows, cross-validated MAPE) is QualityFor's.
func TestPropertyForMatchesPointCalibrations(t *testing.T) {
	ctx := context.Background()
	st := tempStore(t)
	db := storetest.DB(t, st)
	base := store.PointInputs{Model: "m", System: "b200_sxm", Backend: "vllm", Version: "0.19.0", Mode: store.ModeAgg,
		ISL: 1024, OSL: 128, TP: 1, PP: 1, DP: 1, MoETP: 1, MoEEP: 1, Batch: 4, CtxTokens: 1024, MaxNumBatchedTokens: 1024,
		MaxNumSeqs: 4, GemmQuant: "fp8"}
	deployed := rapid.SampledFrom([]string{"", "0.17.0", "0.19.0", "0.18.0"})
	quant := rapid.SampledFrom([]string{"", "fp8", "nvfp4"})
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		name := "c" + string(rune('a'+n%26)) + string(rune('a'+n/26%26)) + string(rune('a'+n/676%26))
		seen := map[[2]string]bool{}
		var ps []store.CalibrationParam
		for i := range rapid.IntRange(0, 6).Draw(rt, "fits") {
			d, q := deployed.Draw(rt, "fit deployed"), quant.Draw(rt, "fit quant")
			if seen[[2]string{d, q}] {
				continue
			}
			seen[[2]string{d, q}] = true
			in := base
			in.GemmQuant = q
			label := store.QuantLabel(in)
			if q == "" {
				label = ""
			}
			ps = append(ps, store.CalibrationParam{System: base.System, Backend: base.Backend, Version: base.Version, Deployed: d,
				Model: base.Model, Quant: label, PrefillScale: float64(i + 2), DecodeScale: 1, Rows: 5 + i, Unidentified: "[]",
				HasCV: i%2 == 0, TTFTMAPECV: float64(10 + i), TPOTMAPECV: float64(20 + i)})
		}
		if err := st.SaveCalibration(ctx, store.Calibration{Name: name, Digest: "d", Predicate: "true", Evaluator: "ev",
			Profile: "aiconfigurator", Report: "{}", CreatedAt: "2026-12-05T00:00:00Z"}, ps, nil); err != nil {
			rt.Fatal(err)
		}
		cal, err := Load(ctx, st, name)
		if err != nil {
			rt.Fatal(err)
		}
		in := base
		in.GemmQuant = rapid.SampledFrom([]string{"fp8", "nvfp4"}).Draw(rt, "point quant")
		in.Deployed = store.DeployedAs(deployed.Draw(rt, "point deployed"), in.Version)
		in.Evaluator = "ev+cal:" + cal.Name()
		l := store.Legacy{Concurrency: 4, TTFT: 100, TPOT: 10, RequestLatency: 1370, RequestRate: 1, SeqPerS: 1, SeqPerSPerGPU: 1,
			TokensPerS: 100, TokensPerSPerGPU: 100, TokensPerSPerUser: 100, MemoryGiB: 60}
		q := store.Queueing{Valid: true, Tier: store.TierScreening, Fidelity: "W0", HasBracket: true, HiCertain: true, P99Lo: 50, P99Hi: 300}
		for i := range q.V {
			q.V[i] = 100 + float64(i)
		}
		p := store.NewPoint(in, l, q)
		if _, err := st.InsertPoints(ctx, []store.Point{p}); err != nil {
			rt.Fatal(err)
		}
		var got struct {
			Status  string          `db:"calibration_status"`
			Prefill sql.NullFloat64 `db:"prefill_scale"`
			Rows    sql.NullInt64   `db:"calibration_rows"`
			TTFTCV  sql.NullFloat64 `db:"calibration_ttft_cv_mape_pct"`
			TPOTCV  sql.NullFloat64 `db:"calibration_tpot_cv_mape_pct"`
		}
		if err := db.GetContext(ctx, &got, `SELECT calibration_status, prefill_scale, calibration_rows, calibration_ttft_cv_mape_pct,
			calibration_tpot_cv_mape_pct FROM point_calibrations WHERE key = ?`, p.Key); err != nil {
			rt.Fatal(err)
		}
		a, ok := cal.For(in)
		if ok != (got.Status == "calibrated") || (ok && a.PrefillScale != got.Prefill.Float64) {
			rt.Fatalf("For: %v prefill %v; view: %q prefill %v (point deployed %q quant %q; fits %+v)",
				ok, a.PrefillScale, got.Status, got.Prefill.Float64, in.DeployedVersion(), store.QuantLabel(in), ps)
		}
		// The applied fit's quality: the same fit in Go (QualityFor) and in the view.
		qf, qok := cal.QualityFor(in)
		view := Quality{Rows: int(got.Rows.Int64), HasCV: got.TTFTCV.Valid && got.TPOTCV.Valid, TTFTCV: got.TTFTCV.Float64, TPOTCV: got.TPOTCV.Float64}
		if qok != ok || (ok && qf != view) || (!ok && got.Rows.Valid) {
			rt.Fatalf("QualityFor: %v %+v; view: %+v (rows valid %v)", qok, qf, view, got.Rows.Valid)
		}
	})
}
