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
	dir := filepath.Join("..", "..", "shared", "data", "traces")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("replay gate: no sample traces at %s (../shared absent): %v", dir, err)
	}
	rows := gate.RunReplays(context.Background(), dir, gate.ReplayFamilies())
	var b strings.Builder
	if err := gate.WriteReplayTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
	if err := gate.ReplayVerdict(rows); err != nil {
		t.Error(err)
	}
}
