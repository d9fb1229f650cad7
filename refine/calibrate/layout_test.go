package calibrate

import (
	"math"
	"testing"

	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// TestFitGroupsByLayout: rows of one (system, backend, version, model, quant)
// deployed with and without attention data parallelism, measured under
// different pass overheads (what a lockstep step adds), fit as two groups in key
// order, each recovering its own overhead.
func TestFitGroupsByLayout(t *testing.T) {
	ev := linearEval{timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.0001}}
	tp := synthSamples(t, ev, refine.PassAdjust{PrefillScale: 1, DecodeScale: 1, PassOverheadMs: 1})
	adp := synthSamples(t, ev, refine.PassAdjust{PrefillScale: 1, DecodeScale: 1, PassOverheadMs: 4})
	for i := range adp {
		adp[i].In.DP = 4
		adp[i].MeasurementID += 100
	}
	fits := fitTwoGroups(t, ev, adp, tp)
	for i, w := range []struct {
		layout   string
		overhead float64
	}{{"adp", 4}, {"tp", 1}} {
		g := fits[i]
		if g.Layout != w.layout || len(g.Samples) != 6 {
			t.Errorf("group %d: layout %q, %d rows; want %q, 6 rows", i, g.Layout, len(g.Samples), w.layout)
		}
		if math.Abs(g.Adjust.PassOverheadMs-w.overhead) > 0.2 {
			t.Errorf("group %s: pass overhead %v, want ≈ %v", g.Layout, g.Adjust.PassOverheadMs, w.overhead)
		}
	}
}

// TestLoadForLayout: a loaded calibration gives a point the fit of its own
// layout; a fit stored with layout "" (before migration 00018) applies to every
// layout of its key, and an own-layout fit wins over it; the deployed version's
// and the quantisation's matches rank before the layout's (the
// point_calibrations view's order).
func TestLoadForLayout(t *testing.T) {
	st := tempStore(t)
	tp := store.PointInputs{System: "b200_sxm", Backend: "trtllm", Version: "1.2.0rc5", Model: "m", GemmQuant: "nvfp4",
		MoEQuant: "nvfp4", CommQuant: "half", TP: 8, PP: 1, DP: 1}
	adp, pp := tp, tp
	adp.TP, adp.DP = 1, 8
	pp.TP, pp.PP = 4, 2
	other := tp
	other.GemmQuant = "fp8"
	param := func(in store.PointInputs, quant, layout string, prefill float64) store.CalibrationParam {
		return store.CalibrationParam{System: in.System, Backend: in.Backend, Version: in.Version, Model: in.Model, Quant: quant,
			Layout: layout, PrefillScale: prefill, DecodeScale: 1, Rows: 5, Unidentified: "[]"}
	}
	cal := saveAndLoad(t, st, "l", []store.CalibrationParam{
		param(tp, store.QuantLabel(tp), "tp", 0.5), param(adp, store.QuantLabel(adp), "adp", 1.5),
		param(tp, store.QuantLabel(tp), "", 2.5), // any layout of this quant
		param(tp, "", "adp", 3.5),                // any quant, attention DP
	})
	for _, c := range []struct {
		name    string
		in      store.PointInputs
		prefill float64
	}{{"tp", tp, 0.5}, {"adp", adp, 1.5}, {"pp: the quant's any-layout fit", pp, 2.5}, {"fp8 adp: any quant", func() store.PointInputs {
		o := other
		o.TP, o.DP = 1, 8
		return o
	}(), 3.5}} {
		a, ok := cal.For(c.in)
		if !ok || a.PrefillScale != c.prefill {
			t.Errorf("%s: For = %+v, %v; want prefill %v", c.name, a, ok, c.prefill)
		}
	}
	if _, ok := cal.For(other); ok {
		t.Error("fp8 tp: calibrated, but no fit covers its quantisation with its layout or any layout")
	}
}
