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

// TestGateOpenFinite gates the open-loop benchmark run (measured `vllm bench
// serve --request-rate` / aiperf --request-rate rows): the model's
// QuantitativeFinite of an Open run against the DES's RunOpenRun on the same
// sends, at a Poisson rate, the same rate under a client concurrency bound,
// every request at once, gamma and constant sends, and ramped rates (linear;
// exponential with gamma gaps under a bound).
func TestGateOpenFinite(t *testing.T) {
	fams := gate.OpenFiniteFamilies()
	if len(fams) != 36 {
		t.Fatalf("%d open-run families, want 36 (8 bases × 3 runs, 3 of them also gamma, constant and two ramps)", len(fams))
	}
	checkRows(t, gate.RunFinite(context.Background(), fams))
}
