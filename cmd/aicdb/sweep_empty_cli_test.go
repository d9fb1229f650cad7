package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestQueryBestEmptyStore: after `aicdb init` and before any sweep, `query` prints an
// empty result (headers only for table and csv, [] for json) with exit 0, and `best`
// says there are no swept points and which command to run.
func TestQueryBestEmptyStore(t *testing.T) {
	t.Setenv("AICDB_EVALUATOR", "") // the default (perf-database) evaluator
	db := filepath.Join(t.TempDir(), "e.sqlite")
	if code, _, errs := cliRun(t, db, "init"); code != 0 {
		t.Fatalf("init: code %d err %q", code, errs)
	}
	for _, sql := range []string{
		"select * from pareto where ttft_steady_p99 < 200", // a percentile filter: the funnel's path
		"select parallel, batch from best_configs",
		"select * from points",
	} {
		for _, f := range []string{"table", "csv", "json"} {
			code, out, errs := cliRun(t, db, "query", "--format", f, sql)
			if code != 0 || errs != "" {
				t.Fatalf("%s (%s) on an empty store: code %d err %q", sql, f, code, errs)
			}
			switch f {
			case "json":
				if out != "[]\n" {
					t.Errorf("%s (json): %q, want []", sql, out)
				}
			default:
				lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
				if len(lines) != 1 || !strings.Contains(strings.ToLower(lines[0]), "parallel") {
					t.Errorf("%s (%s): %q, want the header line only", sql, f, out)
				}
			}
		}
	}
	for _, args := range [][]string{
		{"best"},
		{"best", "--ttft", "200", "--ttft-percentile", "p99", "--sla-refine"},
	} {
		code, out, errs := cliRun(t, db, args...)
		if code != 1 || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 ||
			!strings.Contains(errs, "no swept points") || !strings.Contains(errs, "aicdb sweep --model") {
			t.Errorf("%v on an empty store: code %d out %q err %q, want exit 1 naming 'aicdb sweep'", args, code, out, errs)
		}
	}
}
