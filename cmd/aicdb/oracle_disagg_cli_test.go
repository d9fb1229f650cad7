package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestOracleRunDisagg: `aicdb oracle run` on a scenario with a disagg section
// prints the summary with the handoff columns; --show log is refused with a
// one-line error and exit 1.
func TestOracleRunDisagg(t *testing.T) {
	const file = "../../oracle/testdata/disagg/2p1d_pull.json"
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"aicdb", "oracle", "run", "--scenario", file}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got map[string]float64
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	for k, want := range map[string]float64{"requests": 3, "ttft_p50": 15, "kv_transfer_ms_p99": 25, "p_queue_ms_p99": 0, "d_headroom_min": 0} {
		if v, ok := got[k]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", k, v, ok, want)
		}
	}
	out.Reset()
	errb.Reset()
	code := run(context.Background(), []string{"aicdb", "oracle", "run", "--scenario", file, "--show", "log"}, &out, &errb)
	if want := "aicdb: --show log: a disaggregated scenario prints its summary only; drop --show\n"; code != 1 || errb.String() != want || strings.Count(errb.String(), "\n") != 1 {
		t.Errorf("--show log: exit %d, stderr %q; want 1 and %q", code, errb.String(), want)
	}
}
