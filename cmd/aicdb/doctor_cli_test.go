package main

import (
	"strings"
	"testing"
)

// TestDoctorCLI: after a refining query the stored quantitative rows agree with a
// fresh evaluation (exit 0, one summary line); a tampered row is reported and the
// exit code is 1.
func TestDoctorCLI(t *testing.T) {
	db := syntheticDB(t)
	if code, _, errs := cliRun(t, db, sweepArgs...); code != 0 {
		t.Fatalf("sweep: %d %s", code, errs)
	}
	if code, _, errs := cliRun(t, db, "query", "select count(*) from points where ttft_steady_p99 < 200"); code != 0 {
		t.Fatalf("query: %d %s", code, errs)
	}
	code, out, errs := cliRun(t, db, "doctor", "--all")
	if code != 0 || !strings.HasPrefix(out, "doctor: ") || strings.Count(out, "\n") != 1 || strings.Contains(out, "0 of 0") ||
		!strings.Contains(out, " 0 mismatch") || errs != "" {
		t.Fatalf("doctor on a clean store: code %d out %q err %q", code, out, errs)
	}
	if code, quiet, errs := cliRun(t, db, "doctor", "--all", "--quiet"); code != 0 || quiet != out || errs != "" {
		t.Fatalf("doctor --quiet: code %d out %q err %q", code, quiet, errs)
	}
	if code, _, errs := cliRun(t, db, "query", "--write",
		"update quantitative_results set ttft_steady_p99 = ttft_steady_p99 + 1 where key = (select min(key) from quantitative_results)"); code != 0 {
		t.Fatalf("tamper: %d %s", code, errs)
	}
	code, out, errs = cliRun(t, db, "doctor", "--sample", "3")
	if code != 1 || strings.Count(out, "mismatch ") != 1 || !strings.Contains(out, "ttft_steady_p99 stored") ||
		!strings.Contains(errs, "3 of ") || !strings.Contains(errs, "1 mismatch") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("doctor on a tampered store: code %d out %q err %q", code, out, errs)
	}
	// Row formats: the mismatch as a row on stdout, the summary on stderr.
	code, out, errs = cliRun(t, db, "doctor", "--sample", "3", "--format", "csv")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 1 || len(lines) != 2 ||
		lines[0] != "key,model,system,backend,version,parallel,batch,ctx_tokens,column,stored,fresh,error" ||
		!strings.Contains(lines[1], ",ttft_steady_p99,") || !strings.HasSuffix(lines[1], ",") || !strings.Contains(errs, "1 mismatch") {
		t.Fatalf("doctor --format csv: code %d out %q err %q", code, out, errs)
	}
	if code, _, errs := cliRun(t, db, "doctor", "--sample", "0"); code != 1 || !strings.Contains(errs, "--sample 0") {
		t.Fatalf("--sample 0: code %d err %q", code, errs)
	}
}
