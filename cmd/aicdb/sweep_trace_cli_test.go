package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

const smallTrace = "testdata/trace/small.jsonl"

// traceSweepArgs sweeps the small trace on one GPU (one replica per point).
var traceSweepArgs = []string{"sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm",
	"--total-gpus", "1", "--tp", "1", "--batch", "8,32", "--ctx-tokens", "4096", "--trace", "small"}

// TestSweepTraceCLI (issue 13): import a small JSONL trace, sweep under it, and
// `best` returns a W3 row whose TTFT p99 is exactly `trace replay` of that
// deployment (its engine, timing and KV pool written as an engine file).
func TestSweepTraceCLI(t *testing.T) {
	db := syntheticDB(t)
	if code, _, errs := cliRun(t, db, "trace", "import", smallTrace, "--name", "small"); code != 0 {
		t.Fatal(errs)
	}
	code, out, errs := cliRun(t, db, traceSweepArgs...)
	if code != 0 || !strings.Contains(out, "(trace small, W3, mean isl 1959, osl 80)") || !strings.Contains(out, ": 2 evaluated, 0 already stored") {
		t.Fatalf("sweep: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = cliRun(t, db, "best", "--trace", "small", "--ttft", "1e6", "--ttft-percentile", "p99", "--itl", "1e6", "--top", "1", "--format", "json")
	var rows []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 {
		t.Fatalf("best: exit %d\n%s%s", code, out, errs)
	}
	// Another slice than the sweep's: the error names the slices that have rows.
	code, _, errs = cliRun(t, db, "best", "--trace", "small", "--limit", "3", "--ttft", "1e6", "--ttft-percentile", "p99")
	if want := "aicdb: best: --trace small: no stored rows for this slice; the store has rows for the whole trace: pass the same slice flags\n"; code != 1 || errs != want {
		t.Fatalf("best on another slice: exit %d\n got %q\nwant %q", code, errs, want)
	}
	best := rows[0]
	if best["workload_fidelity"] != "W3" || best["queueing_tier"] != "quantitative" || best["replicas"] != 1.0 {
		t.Fatalf("best row: %v", best)
	}
	// The deployment of the best row as a trace replay engine file.
	st, err := store.Open(context.Background(), db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	pts, err := st.SelectPoints(context.Background(), store.PointFilter{Where: "batch = ?", WhereArgs: []any{int64(best["batch"].(float64))}})
	st.Close()
	if err != nil || len(pts) != 1 {
		t.Fatalf("row: %v %d", err, len(pts))
	}
	ps, err := refine.Synthetic{}.PointSetup(context.Background(), pts[0].PointInputs, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	e := ps.Engine
	eng := map[string]any{"engine": map[string]any{"backend": "vllm", "max_num_batched_tokens": e.MaxNumBatchedTokens, "max_num_seqs": e.MaxNumSeqs,
		"block_size": e.BlockSize, "num_gpu_blocks": ps.KVTokens/e.BlockSize + 1, "enable_chunked_prefill": e.EnableChunkedPrefill,
		"long_prefill_token_threshold": e.LongPrefillTokenThreshold, "enable_prefix_caching": true, "async_scheduling": e.AsyncScheduling},
		"timing": ps.Timing}
	b, _ := json.Marshal(eng)
	b = []byte(strings.Replace(string(b), `"timing":{`, `"timing":{"kind":"linear",`, 1))
	path := filepath.Join(t.TempDir(), "eng.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = cliRun(t, db, "trace", "replay", "small", "--engine", path)
	var sum map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &sum) != nil {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errs)
	}
	if sum["ttft_p99"] != best["ttft_steady_p99"] || sum["cached_tokens"] == 0.0 {
		t.Fatalf("best's TTFT p99 %v, trace replay's %v (cached tokens %v)", best["ttft_steady_p99"], sum["ttft_p99"], sum["cached_tokens"])
	}

	// W4: --sessions rows are their own workload.
	code, out, errs = cliRun(t, db, append(traceSweepArgs, "--sessions", "--ttft", "1e6", "--ttft-percentile", "p99", "--top", "1")...)
	if code != 0 || !strings.Contains(out, "(trace small, W4, ") || !strings.Contains(out, ": 2 evaluated, 0 already stored") ||
		!strings.Contains(out, "Workload fidelity  Replicas") || !strings.Contains(out, " W4 ") {
		t.Fatalf("sweep --sessions: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = cliRun(t, db, "best", "--trace", "small", "--sessions", "--ttft", "1e6", "--ttft-percentile", "p99", "--top", "1", "--format", "json")
	if code != 0 || !strings.Contains(out, `"workload_fidelity": "W4"`) {
		t.Fatalf("best --sessions: exit %d\n%s%s", code, out, errs)
	}
	// doctor re-replays the trace rows' quantitative results.
	code, out, errs = cliRun(t, db, "doctor", "--all")
	if code != 0 || !strings.Contains(out, "doctor: 4 of 4 stored quantitative rows re-evaluated, 0 mismatch") {
		t.Fatalf("doctor: exit %d\n%s%s", code, out, errs)
	}
	// The pareto view holds trace rows, with their workload.
	code, out, errs = cliRun(t, db, "query", "select workload_fidelity, json_extract(workload, '$.trace') as trace from pareto where workload != '' order by 1 limit 10")
	if code != 0 || !strings.Contains(out, "W3") || !strings.Contains(out, "W4") || !strings.Contains(out, "small") {
		t.Fatalf("query pareto: exit %d\n%s%s", code, out, errs)
	}
}

// TestSweepTraceCLIErrors: unknown trace, conflicting and orphan flags, disagg: one
// line, exit 1, the store unchanged.
func TestSweepTraceCLIErrors(t *testing.T) {
	db := syntheticDB(t)
	if code, _, errs := cliRun(t, db, "trace", "import", smallTrace, "--name", "small"); code != 0 {
		t.Fatal(errs)
	}
	before, _ := dumpPoints(t, db)
	base := traceSweepArgs[:len(traceSweepArgs)-2]
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(base, "--trace", "nope"), `aicdb: --trace nope: no trace named "nope"; 'aicdb trace ls' lists them` + "\n"},
		{append(base, "--trace", "small", "--isl", "100"), "aicdb: --trace small is the workload: it replaces --isl/--osl/--prefix; drop --isl\n"},
		{append(base, "--isl", "100", "--osl", "10", "--window", "0..5"), "aicdb: --window applies to a trace workload: give --trace NAME, or drop --window\n"},
		{base, "aicdb: --isl and --osl are required (or give a stored trace as the workload with --trace NAME)\n"},
		{append(base, "--trace", "small", "--max-sessions", "2"), "aicdb: --max-sessions needs --sessions\n"},
		{[]string{"sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--total-gpus", "1", "--trace", "small", "--mode", "disagg"}, "aicdb: --trace: disaggregated deployments are not replayed under a trace yet (the prefill/decode tandem has no trace driver): use --mode agg\n"},
		{append(base, "--trace", "small", "--window", "900.."), "aicdb: --trace small: the slice holds no requests: widen --window or drop --limit\n"},
		{[]string{"best", "--trace", "nope"}, `aicdb: best: --trace nope: no trace named "nope"; 'aicdb trace ls' lists them` + "\n"},
		{[]string{"best", "--sessions"}, "aicdb: --sessions selects trace rows: give --trace NAME, or drop --sessions\n"},
	} {
		code, _, errs := cliRun(t, db, c.args...)
		if code != 1 || errs != c.want {
			t.Errorf("%v: exit %d\n got %q\nwant %q", c.args, code, errs, c.want)
		}
	}
	if after, _ := dumpPoints(t, db); after != before {
		t.Fatal("a refused sweep changed the store")
	}
}

// TestSweepTracePerfData: with the perf database's timing, best's W3 TTFT p99 is
// exactly `trace replay --model … --tp …` of that deployment (its engine and KV pool
// as the engine file).
func TestSweepTracePerfData(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a store with the embedded perf data (init, ~5 s)")
	}
	db := filepath.Join(t.TempDir(), "p.sqlite")
	if code, _, errs := cliRun(t, db, "init"); code != 0 {
		t.Fatal(errs)
	}
	if code, _, errs := cliRun(t, db, "trace", "import", smallTrace, "--name", "small"); code != 0 {
		t.Fatal(errs)
	}
	args := []string{"sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm",
		"--total-gpus", "2", "--tp", "2", "--batch", "16", "--ctx-tokens", "4096", "--trace", "small"}
	if code, out, errs := cliRun(t, db, args...); code != 0 || !strings.Contains(out, ": 1 evaluated") {
		t.Fatalf("sweep: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs := cliRun(t, db, "best", "--trace", "small", "--ttft", "1e6", "--ttft-percentile", "p99", "--format", "json")
	var rows []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0]["workload_fidelity"] != "W3" {
		t.Fatalf("best: exit %d\n%s%s", code, out, errs)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	pts, err := st.SelectPoints(ctx, store.PointFilter{})
	if err != nil || len(pts) != 1 {
		t.Fatalf("rows: %v %d", err, len(pts))
	}
	info, err := st.Trace(ctx, "small")
	if err != nil {
		t.Fatal(err)
	}
	w, err := refine.LoadTraceWorkload(ctx, st, info, store.TraceSlice{Scale: 1})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := refine.NewPerfdbEvaluator(refine.StoreSource{St: st}).PointSetup(ctx, pts[0].PointInputs, w.MaxISL, w.MaxOSL)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	e := ps.Engine
	eng, _ := json.Marshal(map[string]any{"engine": map[string]any{"backend": "vllm", "max_num_batched_tokens": e.MaxNumBatchedTokens,
		"max_num_seqs": e.MaxNumSeqs, "block_size": e.BlockSize, "num_gpu_blocks": ps.KVTokens/e.BlockSize + 1,
		"enable_chunked_prefill": e.EnableChunkedPrefill, "long_prefill_token_threshold": e.LongPrefillTokenThreshold,
		"enable_prefix_caching": true, "async_scheduling": e.AsyncScheduling}})
	path := filepath.Join(t.TempDir(), "eng.json")
	if err := os.WriteFile(path, eng, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs = cliRun(t, db, "trace", "replay", "small", "--engine", path, "--model", "Qwen/Qwen3-32B",
		"--system", "h200_sxm", "--backend", "vllm", "--tp", "2")
	var sum map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &sum) != nil {
		t.Fatalf("replay: exit %d\n%s%s", code, out, errs)
	}
	if sum["ttft_p99"] != rows[0]["ttft_steady_p99"] {
		t.Fatalf("best's TTFT p99 %v, trace replay's %v", rows[0]["ttft_steady_p99"], sum["ttft_p99"])
	}
}
