package oracle_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/oracle/gate"
	"github.com/aicdb/aicdb/queueing"
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

// TestGateReplayW4KVPressure: the W4 family whose 4,000-block pool cannot keep the
// contexts of the thinking sessions (kv4000blk) is refused by the quantitative
// calendar (queueing.ErrSessionContextsEvicted: its TTFT was 47–60 % low with every
// context kept cached) and run by the DES, which evicts them. Skipped when
// ../shared/data/traces is absent.
func TestGateReplayW4KVPressure(t *testing.T) {
	dir := filepath.Join("..", "..", "shared", "data", "traces")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("no sample traces at %s (../shared absent): %v", dir, err)
	}
	var fam *gate.ReplayFamily
	for _, f := range gate.ReplayFamilies() {
		if strings.HasSuffix(f.Name, "W4 4-turn sessions kv4000blk") {
			fam = &f
		}
	}
	if fam == nil || !errors.Is(fam.Refused, queueing.ErrSessionContextsEvicted) {
		t.Fatalf("kv4000blk family: %+v; want one refused with ErrSessionContextsEvicted", fam)
	}
	r := gate.RunReplay(context.Background(), dir, *fam)
	if r.Err != nil || !strings.HasPrefix(r.Refusal, queueing.ErrSessionContextsEvicted.Error()+": ") || r.Oracle.CachedTokens <= 0 || r.Oracle.TTFTP50 <= 0 {
		t.Fatalf("kv4000blk: err %v, refusal %q, DES %+v; want the model's refusal and a DES run", r.Err, r.Refusal, r.Oracle)
	}
	if v := gate.ReplayVerdictOf(r); v != "pass (model refuses)" {
		t.Fatalf("kv4000blk verdict %q", v)
	}
	t.Logf("model: %s; DES: ttft p50 %.1f ms, %d cached tokens", r.Refusal, r.Oracle.TTFTP50, r.Oracle.CachedTokens)
}
