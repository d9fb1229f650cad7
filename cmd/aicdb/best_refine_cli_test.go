package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// bestJSON runs best --format json and decodes its rows.
func bestJSON(t *testing.T, db string, args ...string) ([]map[string]any, string) {
	t.Helper()
	code, out, errs := cliRun(t, db, append(append([]string{"best"}, args...), "--format", "json")...)
	if code != 0 {
		t.Fatalf("best %v: code %d err %q", args, code, errs)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("best %v: %v\n%s", args, err, out)
	}
	return rows, errs
}

func jsonKeys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// TestBestRefinesByDefault is issue 8 item 3 on a demo-like store: best refines
// percentile SLAs by default, so no row it prints violates the SLA on the numbers
// it prints; --no-refine lists undecided rows after decided ones, marked; the JSON
// keys are fixed snake_case whatever the percentile flags.
func TestBestRefinesByDefault(t *testing.T) {
	db := syntheticDB(t)
	if code, _, errs := cliRun(t, db, sweepArgs...); code != 0 {
		t.Fatal(errs)
	}
	sla := []string{"--ttft", "200", "--ttft-percentile", "p99", "--itl", "30", "--top", "5"}
	// The table marks undecided rows and lists them last.
	code, out, _ := cliRun(t, db, append([]string{"best", "--no-refine"}, sla...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	marked := 0
	for i, l := range lines[1:] {
		if strings.HasSuffix(l, "(unresolved)") {
			marked++
		} else if marked > 0 {
			t.Errorf("--no-refine table: decided row %d after an unresolved one:\n%s", i+1, out)
		}
	}
	if code != 0 || marked == 0 {
		t.Fatalf("--no-refine table: code %d, %d rows marked unresolved (the demo store has straddlers):\n%s", code, marked, out)
	}
	for _, mode := range [][]string{{"--no-refine"}, nil} {
		rows, errs := bestJSON(t, db, append(slices.Clone(sla), mode...)...)
		if len(rows) == 0 {
			t.Fatalf("best %v: no rows (%s)", mode, errs)
		}
		resolvedDone := false
		for i, r := range rows {
			ttft, itl := r["ttft_steady_p99"].(float64), r["itl_p99"].(float64)
			if !(ttft < 200) || !(itl < 30) {
				t.Errorf("best %v row %d %v: printed TTFT p99 %.1f, ITL p99 %.2f violate the SLA", mode, i+1, r["parallel"], ttft, itl)
			}
			resolved := r["resolved"].(bool)
			if mode == nil && (!resolved || r["queueing_tier"] != "quantitative") {
				t.Errorf("refined best row %d: resolved %v tier %v", i+1, resolved, r["queueing_tier"])
			}
			if resolved && resolvedDone {
				t.Errorf("best %v: resolved row %d after an unresolved one", mode, i+1)
			}
			resolvedDone = resolvedDone || !resolved
		}
	}
	// Stable JSON keys: the same set whatever the percentile flags.
	a, _ := bestJSON(t, db, "--ttft", "300", "--ttft-percentile", "p90", "--itl", "40", "--itl-percentile", "p50", "--top", "1")
	b, _ := bestJSON(t, db, "--ttft", "300", "--tpot", "40", "--top", "1")
	if len(a) == 0 || len(b) == 0 || !slices.Equal(jsonKeys(a[0]), jsonKeys(b[0])) {
		t.Fatalf("json keys differ with the flags:\n%v\n%v", a, b)
	}
	for _, k := range []string{"tokens_per_s_per_gpu", "ttft_steady_p99", "ttft_steady_p90", "itl_p50", "tpot", "queueing_tier"} {
		if _, ok := a[0][k]; !ok {
			t.Errorf("json key %s missing: %v", k, jsonKeys(a[0]))
		}
	}
	// A request-latency percentile prints that statistic, not the legacy mean.
	if code, out, errs := cliRun(t, db, "best", "--ttft", "300", "--ttft-percentile", "p99", "--request-latency", "60000",
		"--request-latency-percentile", "p99", "--top", "1"); code != 0 || !strings.Contains(out, "E2E p99 (ms)") {
		t.Fatalf("request-latency percentile: code %d out %q err %q", code, out, errs)
	}
	if code, _, errs := cliRun(t, db, "best", "--ttft", "200", "--ttft-percentile", "p99", "--no-refine", "--sla-refine"); code != 1 || !strings.Contains(errs, "--no-refine") {
		t.Fatalf("--no-refine with --sla-refine: code %d err %q", code, errs)
	}
}

// TestBestWithoutSLAEvaluatesNothing (U9): with no SLA flag nothing is undecided,
// so best ranks the stored rows without running the evaluator (their tier stays
// screening, a note says how to upgrade them) and stores nothing; --sla-refine
// upgrades the reported rows to quantitative tier, as before.
func TestBestWithoutSLAEvaluatesNothing(t *testing.T) {
	db := syntheticDB(t)
	if code, _, errs := cliRun(t, db, sweepArgs...); code != 0 {
		t.Fatal(errs)
	}
	count := func() string {
		code, out, errs := cliRun(t, db, "query", "--format", "csv", "select count(*) from quantitative_results")
		if code != 0 {
			t.Fatalf("count: %d %s", code, errs)
		}
		return out
	}
	before := count()
	rows, errs := bestJSON(t, db, "--top", "3")
	if len(rows) != 3 || errs != "aicdb: rows ranked as stored (no SLA given); --sla-refine evaluates the screening-tier ones at quantitative tier\n" {
		t.Fatalf("best: %d rows, stderr %q", len(rows), errs)
	}
	for i, r := range rows {
		if r["queueing_tier"] != "screening" {
			t.Errorf("row %d: tier %v, want the stored screening tier", i+1, r["queueing_tier"])
		}
	}
	if after := count(); after != before {
		t.Errorf("best without an SLA stored quantitative rows: %q → %q", before, after)
	}
	rows, errs = bestJSON(t, db, "--top", "3", "--sla-refine")
	if count() == before {
		t.Errorf("best --sla-refine stored no quantitative rows (%q)", before)
	}
	for i, r := range rows {
		if r["queueing_tier"] != "quantitative" {
			t.Errorf("--sla-refine row %d: tier %v, want quantitative (%s)", i+1, r["queueing_tier"], errs)
		}
	}
}
