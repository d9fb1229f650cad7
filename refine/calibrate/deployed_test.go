package calibrate

import (
	"slices"
	"testing"

	"github.com/aicdb/aicdb/store"
)

// TestForDeployedVersion: a calibration applies the fit of the point's deployed
// engine version (its Version when Deployed is unset); a point deployed on a
// version it has no fit for stays uncalibrated — unless the key has a fit stored
// with deployed version "" (any: fitted before migration 00015). Deployed lists
// what it covers, and the fit's groups are split by deployed version.
func TestForDeployedVersion(t *testing.T) {
	st := tempStore(t)
	at19 := store.PointInputs{System: "b200_sxm", Backend: "vllm", Version: "0.19.0", Model: "m", GemmQuant: "fp8"}
	at17, at18 := at19, at19
	at17.Deployed, at18.Deployed = "0.17.0", "0.18.0"
	old := at18
	old.Model = "old"
	param := func(in store.PointInputs, deployed string, prefill float64) store.CalibrationParam {
		return store.CalibrationParam{System: in.System, Backend: in.Backend, Version: in.Version, Deployed: deployed, Model: in.Model,
			Quant: store.QuantLabel(in), PrefillScale: prefill, DecodeScale: 1, Rows: 5, Unidentified: "[]"}
	}
	ps := []store.CalibrationParam{param(at17, "0.17.0", 0.5), param(at19, "0.19.0", 1.5), param(old, "", 2.5)}
	cal := saveAndLoad(t, st, "d", ps)
	for _, c := range []struct {
		in      store.PointInputs
		ok      bool
		prefill float64
	}{{at17, true, 0.5}, {at19, true, 1.5}, {at18, false, 0}, {old, true, 2.5}} {
		a, ok := cal.For(c.in)
		if ok != c.ok || a.PrefillScale != c.prefill {
			t.Errorf("For(%s deployed %s) = %+v, %v; want prefill %v, %v", c.in.Model, c.in.DeployedVersion(), a, ok, c.prefill, c.ok)
		}
	}
	if got := cal.Deployed(at18); !slices.Equal(got, []string{"0.17.0", "0.19.0"}) {
		t.Errorf("Deployed = %v, want [0.17.0 0.19.0]", got)
	}
	if keyOf(at17) == keyOf(at19) || keyOf(at19).Deployed != "0.19.0" {
		t.Errorf("keys %+v and %+v: want one group per deployed version, the priced one when unset", keyOf(at17), keyOf(at19))
	}
}
