package oracle_test

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/oracle/gate"
)

// TestGateFinite gates the finite benchmark run (how measured rows are predicted):
// the model's QuantitativeFinite against the DES's RunFiniteLoop, burst start and
// 20·C requests, under the default client round trip and the exact boundary.
func TestGateFinite(t *testing.T) {
	checkRows(t, gate.RunFinite(context.Background(), gate.FiniteFamilies()))
}
