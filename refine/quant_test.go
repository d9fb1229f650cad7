package refine

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/store"
)

// TestQuantInputsRoundTrip: every quant mode of perfdb.Config (a string field
// whose type is named …Quant) reaches a point's quant columns through
// QuantInputs and comes back through WorkerConfig, and every quant column (a
// string field named …Quant) of store.PointInputs and Resolved is filled from
// it. A mode or a column added on one side only fails here instead of being
// dropped on the way (calibrations are keyed by these columns, QuantLabel).
func TestQuantInputsRoundTrip(t *testing.T) {
	var cfg perfdb.Config
	cv := reflect.ValueOf(&cfg).Elem()
	var modes []string
	for i := range cv.NumField() {
		f := cv.Type().Field(i)
		if f.IsExported() && f.Type.Kind() == reflect.String && strings.HasSuffix(f.Type.Name(), "Quant") {
			cv.Field(i).SetString("mode-of-" + f.Name)
			modes = append(modes, f.Name)
		}
	}
	if len(modes) < 5 {
		t.Fatalf("perfdb.Config quant modes %v: want at least gemm, kv, fmha, moe, comm", modes)
	}

	in := QuantInputs(cfg)
	cols := quantColumns(reflect.ValueOf(in))
	if len(cols) != len(modes) {
		t.Errorf("store.PointInputs quant columns %v, perfdb.Config quant modes %v: one side has a field the other lacks", slices.Sorted(maps.Keys(cols)), modes)
	}
	seen := map[string]string{}
	for name, v := range cols {
		if v == "" {
			t.Errorf("QuantInputs leaves PointInputs.%s empty", name)
		} else if other, dup := seen[v]; dup {
			t.Errorf("QuantInputs puts %q into both PointInputs.%s and .%s", v, name, other)
		}
		seen[v] = name
	}
	rest := in
	rv := reflect.ValueOf(&rest).Elem()
	for name := range cols {
		rv.FieldByName(name).SetString("")
	}
	if !reflect.DeepEqual(rest, store.PointInputs{}) {
		t.Errorf("QuantInputs sets fields besides the quant columns: %+v", rest)
	}

	in.DatabaseMode = string(perfdb.ModeSilicon)
	back, err := WorkerConfig(in, Worker{TP: 1, PP: 1, DP: 1, MoETP: 1, MoEEP: 1})
	if err != nil {
		t.Fatal(err)
	}
	bv := reflect.ValueOf(back)
	for _, name := range modes {
		if got, want := bv.FieldByName(name).String(), cv.FieldByName(name).String(); got != want {
			t.Errorf("WorkerConfig(QuantInputs(cfg)).%s = %q, want %q", name, got, want)
		}
	}

	r := resolved("0.1", &perfdb.Model{}, cfg)
	if rc := quantColumns(reflect.ValueOf(r)); !maps.Equal(rc, cols) {
		t.Errorf("Resolved quant columns %v, want the PointInputs ones %v", rc, cols)
	}
}

// quantColumns are the string fields named …Quant of the struct v, by name.
func quantColumns(v reflect.Value) map[string]string {
	out := map[string]string{}
	for i := range v.NumField() {
		if f := v.Type().Field(i); f.Type.Kind() == reflect.String && strings.HasSuffix(f.Name, "Quant") {
			out[f.Name] = v.Field(i).String()
		}
	}
	return out
}
