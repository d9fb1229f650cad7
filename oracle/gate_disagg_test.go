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
	rows := gate.RunDisagg(context.Background(), gate.DisaggFamilies())
	var b strings.Builder
	if err := gate.WriteDisaggTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	if err := gate.DisaggVerdict(rows); err != nil {
		t.Error(err)
	}
}
