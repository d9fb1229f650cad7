package oracle_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/oracle/gate"
)

// TestGateFinite gates the finite benchmark run (how measured rows are predicted):
// the model's QuantitativeFinite against the DES's RunFiniteLoop, burst start and
// 20·C requests, under the default client round trip and the exact boundary.
func TestGateFinite(t *testing.T) {
	rows := gate.RunFinite(context.Background(), gate.FiniteFamilies())
	var b strings.Builder
	if err := gate.WriteTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	if err := gate.Verdict(rows); err != nil {
		t.Error(err)
	}
}
