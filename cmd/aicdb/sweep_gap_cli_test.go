package main

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// TestSweepCLINoPerfData: points the perf data cannot price are skipped, counted in
// the summary line and recorded in the sweeps table; the sweep exits 0.
func TestSweepCLINoPerfData(t *testing.T) {
	db := syntheticDB(t)
	t.Setenv("AICDB_SYNTHETIC_NODATA_TP", "2")
	code, out, errs := cliRun(t, db, sweepArgs...)
	m := regexp.MustCompile(`: (\d+) evaluated, 0 already stored, (\d+) OOM, (\d+) no perf data\n$`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("sweep with gaps: code %d out %q err %q", code, out, errs)
	}
	if !strings.Contains(errs, "points skipped for lack of perf data") || !strings.Contains(errs, "synthetic: no perf data for tp2") ||
		strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("stderr %q: want one note naming the first miss", errs)
	}
	ev, _ := strconv.Atoi(m[1])
	gaps, _ := strconv.Atoi(m[3])
	if gaps == 0 || ev+gaps != 352 {
		t.Fatalf("summary %q: want evaluated + no perf data = 352 with gaps > 0", out)
	}
	st, err := store.Open(context.Background(), db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var inTable, tp2 int
	storetest.DB(t, st).Get(&inTable, `SELECT points_no_perf_data FROM sweeps`)
	storetest.DB(t, st).Get(&tp2, `SELECT count(*) FROM operating_points WHERE tp = 2`)
	if inTable != gaps || tp2 != 0 {
		t.Fatalf("sweeps.points_no_perf_data %d (want %d), %d tp2 rows stored (want 0)", inTable, gaps, tp2)
	}
}

// TestSweepCLINoPerfDataAtAll: a sweep none of whose points has perf data is a user
// error (exit 1, one line naming the first miss), like aiconfigurator's "No results
// found for any parallel configuration".
func TestSweepCLINoPerfDataAtAll(t *testing.T) {
	db := syntheticDB(t)
	t.Setenv("AICDB_SYNTHETIC_NODATA_TP", "2")
	code, out, errs := cliRun(t, db, append(sweepArgs, "--tp", "2")...)
	if code != 1 || out != "" || strings.Count(strings.TrimSpace(errs), "\n") != 0 ||
		!strings.Contains(errs, "none of the 88 points of this sweep has perf data") || !strings.Contains(errs, "synthetic: no perf data for tp2") {
		t.Fatalf("all-gap sweep: code %d out %q err %q", code, out, errs)
	}
}
