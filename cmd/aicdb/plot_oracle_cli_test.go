package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// TestPlotCDFOracle: on a perf-data point, plot cdf --oracle draws the DES's
// curves, and the DES's steady TTFT p99 and ITL p99 for the point agree with the
// stored quantitative tier within the gate's 5 % tolerance; a screening-only point
// is refused with the fix.
func TestPlotCDFOracle(t *testing.T) {
	t.Setenv("AICDB_EVALUATOR", "perfdb")
	db := filepath.Join(t.TempDir(), "p.sqlite")
	if code, _, errs := cliRun(t, db, "init"); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	if code, _, errs := cliRun(t, db, "sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm",
		"--total-gpus", "2", "--tp", "2", "--batch", "8", "--isl", "1000", "--osl", "100"); code != 0 {
		t.Fatalf("sweep: %s", errs)
	}
	// best refines its top row to the quantitative tier; the others stay screening.
	if code, _, errs := cliRun(t, db, "best", "--ttft", "10000", "--ttft-percentile", "p99", "--top", "1"); code != 0 {
		t.Fatalf("best: %s", errs)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, db, store.Options{ReadOnly: true, MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var rows []struct {
		Key  string  `db:"key"`
		Tier string  `db:"queueing_tier"`
		TTFT float64 `db:"ttft_steady_p99"`
		ITL  float64 `db:"itl_p99"`
	}
	if err := storetest.DB(t, st).SelectContext(ctx, &rows, `SELECT key, queueing_tier, ttft_steady_p99, itl_p99 FROM points WHERE mode = 'agg' ORDER BY key`); err != nil {
		t.Fatal(err)
	}
	var quant, screen string
	var want struct{ ttft, itl float64 }
	for _, r := range rows {
		switch {
		case r.Tier == "quantitative" && quant == "":
			quant, want.ttft, want.itl = r.Key, r.TTFT, r.ITL
		case r.Tier == "screening" && screen == "":
			screen = r.Key
		}
	}
	if quant == "" || screen == "" {
		t.Fatalf("want one quantitative and one screening agg row, got %+v", rows)
	}
	des, err := oracleDistributions(ctx, st, quant)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		name       string
		got, model float64
	}{{"ttft_steady_p99", des.TTFT.Quantile(0.99), want.ttft}, {"itl_p99", des.ITL.Quantile(0.99), want.itl}} {
		if !(math.Abs(m.got-m.model) <= 0.05*m.model) {
			t.Errorf("%s: oracle %v vs stored model %v: more than 5 %% apart", m.name, m.got, m.model)
		}
	}
	out := filepath.Join(t.TempDir(), "c.png")
	code, o, errs := cliRun(t, db, "plot", "cdf", "--key", quant[:10], "--oracle", "--out", out)
	if want := fmt.Sprintf("wrote %s (%s, with the oracle)\n", out, quant[:12]); code != 0 || o != want {
		t.Fatalf("plot cdf --oracle: code %d out %q want %q err %q", code, o, want, errs)
	}
	checkPNG(t, out, 800, 500)
	code, _, errs = cliRun(t, db, "plot", "cdf", "--key", screen[:10], "--oracle", "--out", out)
	if code != 1 || !strings.HasPrefix(errs, "aicdb: plot cdf: point "+screen[:12]+" has no quantitative tier stored") || strings.Count(errs, "\n") != 1 {
		t.Fatalf("screening-only point: code %d err %q", code, errs)
	}
}
