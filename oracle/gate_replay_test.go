package oracle_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/oracle/gate"
)

// TestGateReplay is the replay gate (issue 13): a 2,000-request slice of each sample
// trace replayed by the quantitative calendar and by the DES, within the agg
// tolerances on TTFT p50/p99, ITL p99, TPOT mean and throughput. Skipped when
// ../shared/data/traces is absent.
func TestGateReplay(t *testing.T) {
	checkReplayGate(t, func(dir string) []gate.ReplayRow {
		return gate.RunReplays(context.Background(), dir, gate.ReplayFamilies())
	})
}

// TestGateReplayDisagg is the disaggregated replay gate (issue 13): a 500-request
// slice of the Azure conversation trace replayed by the tandem and by the
// disaggregated DES (W3, and W4 sessions), within the agg replay tolerances on TTFT
// p50/p99, ITL p99, TPOT mean and throughput. Skipped when ../shared/data/traces is
// absent.
func TestGateReplayDisagg(t *testing.T) {
	checkReplayGate(t, func(dir string) []gate.ReplayRow {
		return gate.RunReplayDisaggs(context.Background(), dir, gate.ReplayDisaggFamilies())
	})
}

// checkReplayGate runs a replay suite on the sample traces, logs its table and
// fails on its verdict.
func checkReplayGate(t *testing.T, run func(dir string) []gate.ReplayRow) {
	t.Helper()
	dir := filepath.Join("..", "..", "shared", "data", "traces")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("replay gate: no sample traces at %s (../shared absent): %v", dir, err)
	}
	rows := run(dir)
	var b strings.Builder
	if err := gate.WriteReplayTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	if err := gate.ReplayVerdict(rows); err != nil {
		t.Error(err)
	}
}
