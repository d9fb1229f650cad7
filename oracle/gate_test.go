package oracle_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/oracle/gate"
)

// TestGate is the validation gate (QUEUEING.md §8): the quantitative evaluator against
// the DES over the §8 families with identical timing; any metric over tolerance or
// any non-finite value fails. `go test ./oracle -run Gate -v` prints the table.
func TestGate(t *testing.T) {
	checkGate(t, gate.Families())
}

// checkGate runs fams on both sides, logs the table and fails on the verdict.
func checkGate(t *testing.T, fams []gate.Family) {
	t.Helper()
	checkRows(t, gate.Run(context.Background(), fams))
}

// checkRows logs a suite's residual table and fails on its verdict.
func checkRows(t *testing.T, rows []gate.Row) {
	t.Helper()
	var b strings.Builder
	if err := gate.WriteTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	if err := gate.Verdict(rows); err != nil {
		t.Error(err)
	}
}
