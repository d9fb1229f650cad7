package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCalibrateLoss: --loss names what the fit minimises and is recorded in the
// calibration's report; an unknown loss is one line naming the flag and its
// values, exit 1, and the store keeps the calibration it had.
func TestCalibrateLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data and fits two measured runs")
	}
	db := filepath.Join(t.TempDir(), "a.sqlite")
	if code, _, errs := cliRun(t, db, "init"); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	if code, out, errs := cliRun(t, db, "bench", "import", measureTestdata+"vllm_bench.json"); code != 0 {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	report := func() string {
		t.Helper()
		code, out, errs := cliRun(t, db, "query", "--format", "csv", "select name, json_extract(report, '$.loss') as loss from calibrations order by name")
		if code != 0 {
			t.Fatalf("query: %d %q", code, errs)
		}
		return strings.TrimSpace(out)
	}
	for _, c := range []struct{ args, want string }{
		{"", "d,l1"},
		{"--loss l1", "d,l1\nl1,l1"},
		{"--loss l2", "d,l1\nl1,l1\nl2,l2"},
	} {
		name := strings.TrimPrefix(c.args, "--loss ")
		if name == "" {
			name = "d"
		}
		args := append([]string{"calibrate", "--name", name}, strings.Fields(c.args)...)
		if code, out, errs := cliRun(t, db, args...); code != 0 || !strings.Contains(out, "calibration "+name+"@") {
			t.Fatalf("calibrate %s: %d %q %q", c.args, code, out, errs)
		}
		if got := report(); got != "name,loss\n"+c.want {
			t.Errorf("after calibrate %s: %q, want %q", c.args, got, "name,loss\n"+c.want)
		}
	}
	code, _, errs := cliRun(t, db, "calibrate", "--name", "l1", "--loss", "huber")
	want := `calibrate: --loss "huber": want l1 (mean absolute relative error, the reported MAPE) or l2 (squared relative error)`
	if code != 1 || strings.TrimSpace(errs) != "aicdb: "+want {
		t.Errorf("--loss huber: %d %q, want exit 1 and %q", code, errs, want)
	}
	if got := report(); got != "name,loss\nd,l1\nl1,l1\nl2,l2" {
		t.Errorf("a refused --loss changed the store: %q", got)
	}
}
