package oracle_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/oracle/gate"
)

// TestGateDisagg is the disaggregated gate (issue 11): the tandem's quantitative
// tier (disagg.Quantitative) against the disaggregated DES over the families of
// gate.DisaggFamilies with identical timing, under the agg tolerances.
func TestGateDisagg(t *testing.T) {
	requireDisaggGate(t, gate.RunDisagg(context.Background(), gate.DisaggFamilies()))
}

// TestDisaggNonMonotone: the prefill-hold coupling curve in the DES — raising the
// prefill in-flight cap κ raises throughput while the decode KV has headroom (κ 1
// → 2) and lowers it once the headroom is gone (cohorts of κ prompts fan into the
// decode NIC together and keep their reserved KV idle longer). The table (DES vs
// tandem) is docs/validation.md's.
func TestDisaggNonMonotone(t *testing.T) {
	x := map[int]float64{}
	t.Log("| κ | X DES (rps) | X tandem (rps) | kv_transfer_ms_mean DES | tandem | d_headroom_min DES | tandem |")
	for _, k := range gate.DisaggKappas {
		r := gate.RunDisaggFamily(context.Background(), gate.HoldFamily(k))
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		x[k] = r.Oracle.ThroughputRPS
		t.Logf("| %d | %.2f | %.2f | %.1f | %.1f | %.3f | %.3f |", k, r.Oracle.ThroughputRPS, r.Model.ThroughputRPS,
			r.OracleX.KVTransferMean, r.ModelX.KVTransferMean, r.OracleX.DHeadroomMin, r.ModelX.DHeadroomMin)
	}
	if !(x[2] > x[1] && x[4] < x[2] && x[8] < x[2]) {
		t.Fatalf("DES throughput vs κ %v: want a rise from κ=1 to 2 and a fall beyond", x)
	}
}

// TestGateDisaggFinite gates the tandem's finite benchmark run
// (disagg.QuantitativeFinite, how measured disaggregated rows are predicted)
// against the DES's (DisaggSim.RunFiniteLoop) over gate.DisaggFiniteFamilies,
// under the agg tolerances.
func TestGateDisaggFinite(t *testing.T) {
	requireDisaggGate(t, gate.RunDisaggFinite(context.Background(), gate.DisaggFiniteFamilies()))
}

// requireDisaggGate logs a disaggregated gate's table and fails t on its verdict.
func requireDisaggGate(t *testing.T, rows []gate.DisaggRow) {
	t.Helper()
	var b strings.Builder
	if err := gate.WriteDisaggTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	if err := gate.DisaggVerdict(rows); err != nil {
		t.Error(err)
	}
}
