package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestReplayContextOverflow: a trace request longer than the model's context is
// named by its line, with the fix (U4), and nothing is replayed.
func TestReplayContextOverflow(t *testing.T) {
	dir := t.TempDir()
	db := newStore(t, filepath.Join(dir, "a.sqlite"))
	tr := filepath.Join(dir, "long.jsonl")
	if err := os.WriteFile(tr, []byte(`{"timestamp": 0, "input_length": 1000, "output_length": 10}
{"timestamp": 10, "input_length": 40000, "output_length": 1000}
{"timestamp": 20, "input_length": 40900, "output_length": 10}
{"timestamp": 30, "input_length": 100, "output_length": 2000}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := cliRun(t, db, "trace", "import", tr, "--name", "long"); code != 0 {
		t.Fatalf("import: exit %d %s", code, errs)
	}
	cfg := filepath.Join("testdata", "estimate", "Qwen--Qwen3-8B_config.json")
	replay := []string{"trace", "replay", "long", "--engine", linearVLLMEngine(t, dir), "--model", cfg, "--system", "h200_sxm",
		"--backend", "vllm", "--version", "0.22.0", "--tp", "1"}
	code, out, errs := cliRun(t, db, replay...)
	want := "aicdb: trace long: the request at line 2 (isl 40000 + osl 1000 = 41000 tokens) exceeds the 40960-token context of " +
		"Qwen/Qwen3-8B; narrow --window/--limit or pick a longer-context model\n"
	if code != 1 || out != "" || errs != want {
		t.Fatalf("replay: exit %d stdout %q stderr %q, want %q", code, out, errs, want)
	}
}

// TestImportInputFormat: trace import and bench import take the input format as
// --input-format, with --format its alias, and say so in their help (U22).
func TestImportInputFormat(t *testing.T) {
	db := newStore(t, filepath.Join(t.TempDir(), "a.sqlite"))
	moon := "../../trace/testdata/mooncake_conversation_head.jsonl"
	for _, f := range []string{"--input-format", "--format"} {
		code, out, errs := cliRun(t, db, "trace", "import", moon, f, "mooncake", "--name", "c"+f)
		if code != 0 || !strings.Contains(out, "(mooncake)") && !strings.Contains(out, "unchanged") {
			t.Errorf("trace import %s mooncake: exit %d stdout %q stderr %q", f, code, out, errs)
		}
	}
	code, _, errs := cliRun(t, db, "bench", "import", "--input-format", "csv", moon)
	if want := "aicdb: bench import: --input-format \"csv\": want one of vllm-bench, aiperf, aic-silicon\n"; code != 1 || errs != want {
		t.Errorf("bench import --input-format csv: exit %d stderr %q, want %q", code, errs, want)
	}
	for _, cmd := range [][]string{{"trace", "import", "--help"}, {"bench", "import", "--help"}} {
		_, out, _ := cliRun(t, db, cmd...)
		if !strings.Contains(out, "--input-format FORMAT, --format FORMAT") || !strings.Contains(out, "--format is an alias: here it names the input, not the output") {
			t.Errorf("%v does not document --input-format and its alias:\n%s", cmd, out)
		}
	}
}

// TestAccuracyMeasuredOOM: a measured run that aiconfigurator's memory model calls
// OOM keeps that reason and says the memory model disagrees with the measurement
// (U19); accuracy's summary line counts it as without a prediction.
func TestAccuracyMeasuredOOM(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "a.sqlite")
	if code, _, errs := cliRun(t, db, "init", "--quiet"); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	raw, err := os.ReadFile(measureTestdata + "silicon.csv")
	if err != nil {
		t.Fatal(err)
	}
	header, _, _ := strings.Cut(string(raw), "\n")
	csv := filepath.Join(dir, "oom.csv")
	row := "oom_405b_tp1_c128,source_file=t.csv; silicon_concurrency=128,vllm,,meta-llama/Meta-Llama-3.1-405B,h200_sxm,fp8,agg,1024,1024,fp8,fp8,128,1,1,1,1,1,,,,,,,,,,,,,,,101.1,10.1\n"
	if err := os.WriteFile(csv, []byte(header+"\n"+row), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := cliRun(t, db, "bench", "import", csv); code != 0 {
		t.Fatalf("bench import: %s", errs)
	}
	code, _, errs := cliRun(t, db, "accuracy", "--metrics", "ttft_mean")
	if code != 0 || !strings.HasPrefix(errs, "aicdb: accuracy: 1 measurements, 0 predicted, 1 without a prediction; ") || !strings.HasSuffix(errs, " s wall\n") {
		t.Fatalf("accuracy: exit %d stderr %q", code, errs)
	}
	if code, _, errs := cliRun(t, db, "accuracy", "--metrics", "ttft_mean", "--quiet"); code != 0 || errs != "" {
		t.Fatalf("accuracy --quiet: exit %d stderr %q", code, errs)
	}
	_, out, _ := cliRun(t, db, "query", "--format", "csv", "select distinct reason from accuracy")
	if want := "reason\ndoes not fit in GPU memory by aiconfigurator's memory model (OOM); measured run exists: memory model disagrees\n"; out != want {
		t.Fatalf("reason %q, want %q", out, want)
	}
}

// isSummary reports whether stderr is exactly one progress summary line: "aicdb: ",
// the counts, then the wall time (not compared).
func isSummary(stderr, counts string) bool {
	rest, ok := strings.CutPrefix(stderr, "aicdb: "+counts+"; ")
	wall, ok2 := strings.CutSuffix(rest, " s wall\n")
	_, err := strconv.ParseFloat(wall, 64)
	return ok && ok2 && err == nil
}

// TestReplayQuietAndSummary: trace replay (both tiers, W3 and W4) ends with one
// summary line on stderr without a terminal (counts, then wall time) and prints
// nothing there with --quiet (issue 10).
func TestReplayQuietAndSummary(t *testing.T) {
	dir := t.TempDir()
	db := newStore(t, filepath.Join(dir, "a.sqlite"))
	if code, _, errs := cliRun(t, db, "trace", "import", "../../trace/testdata/mooncake_conversation_head.jsonl", "--name", "conv"); code != 0 {
		t.Fatal(errs)
	}
	eng := linearVLLMEngine(t, dir)
	n := 0
	for _, tier := range []string{"quantitative", "oracle"} {
		for _, fid := range []string{"W3", "W4"} {
			args := []string{"trace", "replay", "conv", "--engine", eng, "--limit", "20", "--tier", tier}
			if fid == "W4" {
				args = append(args, "--sessions")
			}
			n++
			code, _, errs := cliRun(t, db, args...)
			if want := fmt.Sprintf("trace replay conv: replay %d stored (20 requests, %s tier, agg %s)", n, tier, fid); code != 0 || !isSummary(errs, want) {
				t.Errorf("%s %s: exit %d stderr %q, want %q then the wall time", tier, fid, code, errs, want)
			}
			n++
			if code, _, errs := cliRun(t, db, append(args, "--quiet")...); code != 0 || errs != "" {
				t.Errorf("%s %s --quiet: exit %d stderr %q", tier, fid, code, errs)
			}
		}
	}
	// --mode disagg (the tandem and the disaggregated DES), without prefix caching.
	raw, err := os.ReadFile(eng)
	if err != nil {
		t.Fatal(err)
	}
	noPC := filepath.Join(dir, "nopc.json")
	if err := os.WriteFile(noPC, []byte(strings.Replace(string(raw), `"enable_prefix_caching": true`, `"enable_prefix_caching": false`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tier := range []string{"quantitative", "oracle"} {
		args := []string{"trace", "replay", "conv", "--engine", noPC, "--limit", "20", "--tier", tier, "--mode", "disagg",
			"--prefill-workers", "1", "--decode-workers", "1", "--kv-bytes-per-token", "160000", "--inter-node-gbps", "25"}
		n++
		code, _, errs := cliRun(t, db, args...)
		if want := fmt.Sprintf("trace replay conv: replay %d stored (20 requests, %s tier, disagg W3)", n, tier); code != 0 || !isSummary(errs, want) {
			t.Errorf("disagg %s: exit %d stderr %q, want %q then the wall time", tier, code, errs, want)
		}
		n++
		if code, _, errs := cliRun(t, db, append(args, "--quiet")...); code != 0 || errs != "" {
			t.Errorf("disagg %s --quiet: exit %d stderr %q", tier, code, errs)
		}
	}
}

// TestImportSummaryQuiet: trace import and bench import end with one summary line
// on stderr without a terminal (counts, then wall time) and print nothing there
// with --quiet (issue 10).
func TestImportSummaryQuiet(t *testing.T) {
	db := newStore(t, filepath.Join(t.TempDir(), "a.sqlite"))
	moon := "../../trace/testdata/mooncake_conversation_head.jsonl"
	for _, c := range []struct {
		args []string
		want string // "" = --quiet: nothing
	}{
		{[]string{"trace", "import", moon, "--name", "conv"}, "trace import conv: 120 requests imported"},
		{[]string{"trace", "import", moon, "--name", "conv"}, "trace import conv: unchanged, 120 requests already stored"},
		{[]string{"trace", "import", moon, "--name", "conv2", "--hash-block", "16", "--quiet"}, ""},
		{[]string{"bench", "import", "--system", "h200_sxm", "--backend", "vllm", "--version", "0.22.0", "--tp", "2", measureTestdata + "aiperf.json"},
			"bench import: 1 files: 1 measured runs imported, 0 files unchanged"},
		{[]string{"bench", "import", "--system", "h200_sxm", "--backend", "vllm", "--version", "0.22.0", "--tp", "2", "--quiet", measureTestdata + "aiperf.json"}, ""},
	} {
		code, _, errs := cliRun(t, db, c.args...)
		if code != 0 || (c.want == "" && errs != "") || (c.want != "" && !isSummary(errs, c.want)) {
			t.Errorf("%v: exit %d stderr %q, want %q", c.args, code, errs, c.want)
		}
	}
}

// TestEvalRateAboveCapacity: an open loop above the engine's capacity is reported
// unstable with the stable rate bound named — the throughput of the saturated
// engine (U23) — and a rate just below that bound is stable.
func TestEvalRateAboveCapacity(t *testing.T) {
	lin := []string{"--timing", "linear", "--base-ms", "5", "--prefill-ms-per-token", "0.02", "--decode-ms-per-row", "0.05",
		"--isl", "4096", "--osl", "256", "--format", "json"}
	code, out, errs := evalRun(append(lin, "--rate", "1000")...)
	want := "unstable at rate 1000 rps: requests accumulate (in system 8303 → 16343 over the second half of the arrivals, 5.01 rps completed); lower the rate; " +
		"capacity ≈ 9.55 rps (the saturated engine: 128 concurrent requests of isl 4096, osl 256, screening tier): use --rate below it"
	var rep struct{ Reason string }
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.Reason != want {
		t.Fatalf("eval --rate 1000: exit %d stderr %q reason\n%q\nwant\n%q", code, errs, rep.Reason, want)
	}
	if code, out, _ := evalRun(append(lin, "--rate", "9.4")...); code != 0 || strings.Contains(out, "unstable") {
		t.Fatalf("eval --rate 9.4 (below the bound): exit %d %s", code, out)
	}
}

// TestBestClosestMiss: when no stored row meets the SLA, best names the closest
// miss — its configuration, every constrained value, the target and by how much
// it misses (U24).
func TestBestClosestMiss(t *testing.T) {
	db := syntheticDB(t)
	if code, _, errs := cliRun(t, db, append(slices.Clone(sweepArgs), "--quiet")...); code != 0 {
		t.Fatalf("sweep: %s", errs)
	}
	code, out, errs := cliRun(t, db, "best", "--model", "Qwen/Qwen3-32B", "--isl", "4000", "--osl", "500", "--ttft", "1", "--ttft-percentile", "p99", "--itl", "1000", "--quiet")
	want := "aicdb: no stored configuration meets the SLA\n" +
		"aicdb: closest miss: agg tp8pp1dp1etp1ep1 batch 1: TTFT(P99) 58.79 ms (SLA ≤ 1: misses by 57.8 ms (+5778.6%)), ITL(P99) 28.75 ms (SLA ≤ 1000: meets it); screening tier\n"
	if code != 0 || !strings.HasPrefix(errs, want) {
		t.Fatalf("best: exit %d stdout %q stderr %q", code, out, errs)
	}
}
