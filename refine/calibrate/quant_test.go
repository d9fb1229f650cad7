package calibrate

import (
	"context"
	"math"
	"testing"

	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// withQuant labels samples with a gemm/moe quantisation and offsets their ids.
func withQuant(ss []Sample, gemm, moe string, idOffset int64) []Sample {
	for i := range ss {
		ss[i].In.GemmQuant, ss[i].In.MoEQuant, ss[i].In.CommQuant = gemm, moe, "half"
		ss[i].MeasurementID += idOffset
	}
	return ss
}

// TestFitGroupsByQuant: rows of one (system, backend, version, model) in two
// quantisations, measured under different decode scales, fit as two groups in
// key order, each recovering its own scale.
func TestFitGroupsByQuant(t *testing.T) {
	ev := linearEval{timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.0001}}
	int4 := withQuant(synthSamples(t, ev, refine.PassAdjust{PrefillScale: 1, DecodeScale: 0.7}), "bfloat16", "int4_wo", 0)
	nvfp4 := withQuant(synthSamples(t, ev, refine.PassAdjust{PrefillScale: 1, DecodeScale: 1.3}), "nvfp4", "nvfp4", 100)
	fits := fitTwoGroups(t, ev, nvfp4, int4)
	for i, w := range []struct {
		quant  string
		decode float64
	}{{"gemm=bfloat16,moe=int4_wo,comm=half", 0.7}, {"gemm=nvfp4,moe=nvfp4,comm=half", 1.3}} {
		g := fits[i]
		if g.Quant != w.quant || g.Model != "m" || len(g.Samples) != 6 {
			t.Errorf("group %d: %s %s, %d rows; want quant %s, 6 rows", i, g.Model, g.Quant, len(g.Samples), w.quant)
		}
		if math.Abs(g.Adjust.DecodeScale-w.decode) > 0.05 {
			t.Errorf("group %s: decode scale %v, want ≈ %v", g.Quant, g.Adjust.DecodeScale, w.decode)
		}
	}
}

// TestLoadForQuant: a loaded calibration gives a point the fit of its own
// quantisation; a fit stored with quant "" (before migration 00014) applies to
// every quantisation of its key, and an own-quant fit wins over it.
func TestLoadForQuant(t *testing.T) {
	st := tempStore(t)
	fp8 := store.PointInputs{System: "b200_sxm", Backend: "vllm", Version: "0.19.0", Model: "m", GemmQuant: "fp8", MoEQuant: "fp8",
		KVCacheQuant: "fp8", FMHAQuant: "bfloat16", CommQuant: "half"}
	nvfp4, int4 := fp8, fp8
	nvfp4.GemmQuant, nvfp4.MoEQuant = "nvfp4", "nvfp4"
	int4.GemmQuant, int4.MoEQuant = "bfloat16", "int4_wo"
	old := fp8
	old.Model = "old"
	old4 := nvfp4
	old4.Model = "old"
	param := func(in store.PointInputs, quant string, prefill float64) store.CalibrationParam {
		return store.CalibrationParam{System: in.System, Backend: in.Backend, Version: in.Version, Model: in.Model, Quant: quant,
			PrefillScale: prefill, DecodeScale: 1, Rows: 5, Unidentified: "[]"}
	}
	ps := []store.CalibrationParam{param(fp8, store.QuantLabel(fp8), 0.5), param(nvfp4, store.QuantLabel(nvfp4), 1.5),
		param(old, "", 2.5), param(old4, store.QuantLabel(old4), 3.5)}
	cal := saveAndLoad(t, st, "q", ps)
	for _, c := range []struct {
		in      store.PointInputs
		ok      bool
		prefill float64
	}{{fp8, true, 0.5}, {nvfp4, true, 1.5}, {int4, false, 0}, {old, true, 2.5}, {old4, true, 3.5}} {
		a, ok := cal.For(c.in)
		if ok != c.ok || a.PrefillScale != c.prefill {
			t.Errorf("For(%s [%s]) = %+v, %v; want prefill %v, %v", c.in.Model, store.QuantLabel(c.in), a, ok, c.prefill, c.ok)
		}
	}
}

// fitTwoGroups fits the samples of a and b together (a short descent, no
// polish) and checks that they make two deployment keys.
func fitTwoGroups(t *testing.T, ev Evaluator, a, b []Sample) []GroupFit {
	t.Helper()
	fits, err := Fit(context.Background(), ev, append(a, b...), FitOptions{Workers: 1, MaxIter: 4, SimplexEvals: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(fits) != 2 {
		t.Fatalf("%d groups, want 2 (one per key)", len(fits))
	}
	return fits
}

// tempStore is a new store in the test's temporary directory, closed when the
// test ends.
func tempStore(t *testing.T) *store.Store { return storetest.Temp(t) }

// saveAndLoad stores calibration name with params ps and loads it back.
func saveAndLoad(t *testing.T, st *store.Store, name string, ps []store.CalibrationParam) *Calibration {
	t.Helper()
	ctx := context.Background()
	if err := st.SaveCalibration(ctx, store.Calibration{Name: name, Digest: "d", Predicate: "true", Evaluator: "ev",
		Profile: "aiconfigurator", Report: "{}", CreatedAt: "2026-12-04T00:00:00Z"}, ps, nil); err != nil {
		t.Fatal(err)
	}
	cal, err := Load(ctx, st, name)
	if err != nil {
		t.Fatal(err)
	}
	return cal
}
