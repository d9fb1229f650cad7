package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateOutput = flag.Bool("update-output", false, "rewrite testdata/output/* from the current stdout")

// golden returns the golden file at path, or with update writes got there and
// returns nil (nothing to compare). hint names the flag that rewrites it.
func golden(t *testing.T, path, got string, update bool, hint string) []byte {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return nil
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (%s rewrites it)", err, hint)
	}
	return want
}

// goldenStdout compares stdout with testdata/output/name (-update-output rewrites it).
func goldenStdout(t *testing.T, name, out string) {
	t.Helper()
	path := filepath.Join("testdata", "output", name)
	if want := golden(t, path, out, *updateOutput, "-update-output"); want != nil && out != string(want) {
		t.Errorf("stdout differs from %s:\n got:\n%s\nwant:\n%s", path, out, want)
	}
}

// checkFormatShape checks what every format promises whatever the command: json
// is one JSON value, jsonl one JSON object a line, csv a header of snake_case keys,
// and no format prints NaN or Inf.
func checkFormatShape(t *testing.T, format, out string) {
	t.Helper()
	for _, bad := range []string{"NaN", "Inf"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s output prints %s:\n%s", format, bad, out)
		}
	}
	switch format {
	case formatJSON:
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Errorf("json output is not one JSON value: %v\n%s", err, out)
		}
	case formatJSONL:
		for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			var m map[string]any
			if l != "" && json.Unmarshal([]byte(l), &m) != nil {
				t.Errorf("jsonl line %d is not a JSON object: %q", i+1, l)
			}
		}
	case formatCSV:
		head, _, _ := strings.Cut(out, "\n")
		for _, k := range strings.Split(head, ",") {
			if k != strings.ToLower(k) || strings.ContainsAny(k, " ()") {
				t.Errorf("csv key %q is not snake_case", k)
			}
		}
	}
}

// TestOutputGolden runs each result command in each format and compares stdout
// with testdata/output/<command>.<format>.
func TestOutputGolden(t *testing.T) {
	lin := []string{"eval", "--timing", "linear", "--base-ms", "5", "--prefill-ms-per-token", "0.02", "--decode-ms-per-row", "0.05",
		"--engine-profile", "defaults"}
	type cmd struct {
		name    string
		args    []string
		formats []string
	}
	all := rowFormats
	plain := []cmd{
		{"eval_both", append(append([]string{}, lin...), "--concurrency", "8", "--isl", "1024", "--osl", "64", "--tier", "both"), all},
		{"eval_unstable", append(append([]string{}, lin...), "--rate", "100", "--num-requests", "300", "--isl", "4096", "--osl", "64", "--tier", "both"), all},
		{"eval_disagg", append(append([]string{"eval"}, disaggArgs...), "--concurrency", "1", "--tier", "both"), all},
		{"oracle_run", []string{"oracle", "run", "--scenario", "testdata/oracle/tv1.json"}, all},
		{"oracle_run_log", []string{"oracle", "run", "--scenario", "testdata/oracle/tv1.json", "--show", "log"}, all},
		{"oracle_run_disagg", []string{"oracle", "run", "--scenario", "../../oracle/testdata/disagg/2p1d_pull.json"}, all},
		{"oracle_validate", []string{"oracle", "validate", "--family", "vllm/c8 isl2048"}, all},
	}
	if !testing.Short() { // each estimate loads the embedded perf data (≈ 1 s)
		plain = append(plain, cmd{"estimate_mixed", []string{"estimate", "--model", filepath.Join("testdata", "estimate", "Qwen--Qwen3-8B_config.json"),
			"--version", "0.14.0", "--tp", "4", "--mode", "mixed"}, append([]string{formatText}, all...)})
	}
	for _, c := range plain {
		for _, f := range c.formats {
			t.Run(c.name+"."+f, func(t *testing.T) {
				var out, errb bytes.Buffer
				if code := run(context.Background(), append(append([]string{"aicdb"}, c.args...), "--format", f), &out, &errb); code != 0 {
					t.Fatalf("exit %d: %s", code, errb.String())
				}
				checkFormatShape(t, f, out.String())
				goldenStdout(t, c.name+"."+f, out.String())
			})
		}
	}

	// Store commands: one synthetic sweep, then query, best, doctor and perfdb ls.
	db := syntheticDB(t)
	if code, _, errs := cliRun(t, db, sweepArgs...); code != 0 {
		t.Fatalf("sweep: %s", errs)
	}
	tr := []string{"trace", "import", "../../trace/testdata/mooncake_conversation_head.jsonl", "--name", "conv"}
	if code, _, errs := cliRun(t, db, tr...); code != 0 {
		t.Fatalf("trace import: %s", errs)
	}
	eng := filepath.Join(t.TempDir(), "eng.json")
	if err := os.WriteFile(eng, []byte(`{"engine": {"backend": "vllm", "max_num_batched_tokens": 8192, "max_num_seqs": 64,
		"block_size": 16, "num_gpu_blocks": 200000, "enable_chunked_prefill": true, "long_prefill_token_threshold": 0,
		"enable_prefix_caching": true, "async_scheduling": false},
		"timing": {"kind": "linear", "base_ms": 8, "prefill_ms_per_token": 0.01, "decode_ms_per_row": 0.05, "ctx_ms_per_token": 0.00002}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	engNoPC := filepath.Join(t.TempDir(), "engnopc.json") // disaggregated replays refuse prefix caching
	raw, err := os.ReadFile(eng)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(engNoPC, bytes.Replace(raw, []byte(`"enable_prefix_caching": true`), []byte(`"enable_prefix_caching": false`), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	stored := []cmd{
		{"query", []string{"query", "select parallel, batch, ttft_steady_p99, itl_p99, tokens_per_s_per_gpu, null as missing from pareto order by key limit 3"}, all},
		{"best", []string{"best", "--model", "Qwen/Qwen3-32B", "--isl", "4000", "--osl", "500", "--ttft", "5000", "--top", "2", "--no-refine"}, all},
		{"sweep_best", append(append([]string{}, sweepArgs...), "--ttft", "5000", "--top", "2", "--no-refine"), all},
		{"doctor", []string{"doctor", "--all"}, append([]string{formatText}, all...)},
		{"trace_ls", []string{"trace", "ls"}, all},
		{"trace_show", []string{"trace", "show", "conv", "--limit", "3"}, all},
		{"trace_stats", []string{"trace", "stats", "conv", "--window", "0..10"}, append([]string{formatText}, all...)},
		{"trace_replay", []string{"trace", "replay", "conv", "--engine", eng, "--limit", "20", "--tier", "oracle"}, all},
		{"trace_replay_disagg", []string{"trace", "replay", "conv", "--engine", engNoPC, "--limit", "8", "--tier", "oracle", "--mode", "disagg",
			"--prefill-workers", "1", "--decode-workers", "1", "--kv-bytes-per-token", "160000", "--inter-node-gbps", "25"}, all},
		{"trace_replay_by", []string{"trace", "replay", "conv", "--engine", eng, "--limit", "8", "--tier", "oracle", "--by", "second"}, all},
	}
	for _, c := range stored {
		for _, f := range c.formats {
			t.Run(c.name+"."+f, func(t *testing.T) {
				code, out, errs := cliRun(t, db, append(append([]string{}, c.args...), "--format", f)...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errs)
				}
				checkFormatShape(t, f, out)
				goldenStdout(t, c.name+"."+f, out)
			})
		}
	}
}

// TestOutputHeaders: table headers are words in sentence case with their unit;
// aiconfigurator's legacy means say so.
func TestOutputHeaders(t *testing.T) {
	for key, want := range map[string]string{
		"ttft_steady_p99":             "TTFT p99 (ms)",
		"ttft_steady_p999":            "TTFT p99.9 (ms)",
		"ttft_transient_max":          "TTFT transient max (ms)",
		"itl_p50":                     "ITL p50 (ms)",
		"e2e_mean":                    "E2E mean (ms)",
		"ttft_p90":                    "TTFT p90 (ms)",
		"ttft_p99_ms":                 "TTFT p99 (ms)",
		"ttft_steady_p99_se":          "TTFT p99 SE (ms)",
		"tpot_mean_ms":                "TPOT mean (ms)",
		"throughput_rps":              "Throughput (req/s)",
		"output_tokens_per_s_per_gpu": "Output (tok/s/GPU)",
		"mixed_step_ms":               "Mixed step (ms)",
		"span_s":                      "Span (s)",
		"mean_rate_rps":               "Mean rate (req/s)",
		"tokens_per_s":                "Tokens (tok/s)",
		"seq_per_s_per_gpu":           "Requests (req/s/GPU)",
		"parallel":                    "Parallel",
		"itl_p42":                     "ITL p42",
		"ttft":                        "TTFT legacy est. (ms)",
		"request_latency":             "Request latency legacy est. (ms)",
		"request_rate":                "Request rate (req/s)",
		"reason":                      "Reason",
		"num_mix_steps":               "Mix steps",
		"genonly_step_ms":             "Gen-only step (ms)",
		"prefill_memory_gib":          "Prefill memory (GiB)",
		"memory_gib":                  "Memory (GiB)",
		"mape_pct":                    "MAPE (%)",
		"ttft_mape_pct_cv":            "TTFT MAPE CV (%)",
		"ctx_tokens":                  "Context (tokens)",
		"isl_p99":                     "ISL p99 (tokens)",
		"num_gpus":                    "GPUs",
		"kv_transfer_ms_p99":          "KV transfer p99 (ms)",
		"d_headroom_min":              "Decode KV headroom min",
		"count(*)":                    "count(*)",
		"avg(itl_p99)":                "avg(itl_p99)",
		"nccl_version":                "NCCL version",
		"s":                           "S",
	} {
		if got := headerOf(key); got != want {
			t.Errorf("headerOf(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestWriteRowsNonFinite: NaN and ±Inf print as "-", empty and null, and csv/json
// numbers are exact (shortest round trip) while the table rounds them.
func TestWriteRowsNonFinite(t *testing.T) {
	cols := []string{"a", "ttft_steady_p99"}
	x := 0.1
	data := [][]any{{math.NaN(), x + 0.2}, {math.Inf(1), math.Inf(-1)}}
	want := map[string]string{
		formatTable: "  A  TTFT p99 (ms)\n  -          0.300\n  -              -\n",
		formatCSV:   "a,ttft_steady_p99\n,0.30000000000000004\n,\n",
		formatJSON:  "[\n  {\"a\": null, \"ttft_steady_p99\": 0.30000000000000004},\n  {\"a\": null, \"ttft_steady_p99\": null}\n]\n",
		formatJSONL: "{\"a\": null, \"ttft_steady_p99\": 0.30000000000000004}\n{\"a\": null, \"ttft_steady_p99\": null}\n",
	}
	for _, f := range rowFormats {
		var b bytes.Buffer
		if err := writeRows(&b, f, cols, data); err != nil {
			t.Fatal(err)
		}
		if b.String() != want[f] {
			t.Errorf("%s:\n got %q\nwant %q", f, b.String(), want[f])
		}
	}
	if err := checkFormat("xml"); err == nil || err.Error() != `--format "xml": use table, csv, json or jsonl` {
		t.Errorf("checkFormat(xml) = %v", err)
	}
}

// TestOutputGoldenMeasured runs the commands that need an initialised store — over
// measured runs (accuracy, calibrate, on the two bench fixtures) and perfdb ls — in
// each format and compares stdout with testdata/output/<command>.<format>.
func TestOutputGoldenMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data and evaluates the measured points")
	}
	db := filepath.Join(t.TempDir(), "m.sqlite")
	if code, _, errs := cliRun(t, db, "init"); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	for _, args := range [][]string{
		{"bench", "import", measureTestdata + "vllm_bench.json"},
		{"bench", "import", "--system", "h200_sxm", "--backend", "vllm", "--version", "0.22.0", "--tp", "2", measureTestdata + "aiperf.json"},
	} {
		if code, _, errs := cliRun(t, db, args...); code != 0 {
			t.Fatalf("%v: %s", args, errs)
		}
	}
	for _, c := range []struct {
		name string
		args []string
	}{
		{"accuracy", []string{"accuracy", "--by", "backend,model", "--metrics", "ttft_mean,ttft_p99,itl_p99,output_tokens_per_s"}},
		{"calibrate", []string{"calibrate", "--name", "t"}},
		{"perfdb_ls_versions", []string{"perfdb", "ls", "versions"}}, // the embedded data init loaded
		{"perfdb_ls_systems", []string{"perfdb", "ls", "systems"}},
		{"perfdb_ls_models", []string{"perfdb", "ls", "models"}},
	} {
		for _, f := range rowFormats {
			t.Run(c.name+"."+f, func(t *testing.T) {
				code, out, errs := cliRun(t, db, append(append([]string{}, c.args...), "--format", f)...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errs)
				}
				checkFormatShape(t, f, out)
				goldenStdout(t, c.name+"."+f, out)
			})
		}
	}
	code, _, errs := cliRun(t, db, "accuracy", "--format", "xml")
	if code != 1 || errs != "aicdb: --format \"xml\": use table, csv, json or jsonl\n" {
		t.Errorf("accuracy --format xml: exit %d, stderr %q", code, errs)
	}
}

// TestWriteRecordIntegralFloat: a float field that happens to be integral (JSON
// prints 2.0 as 2) still prints as a rounded float in a table, also from an
// embedded struct and a map; integers stay integers.
func TestWriteRecordIntegralFloat(t *testing.T) {
	type inner struct {
		EndMs float64 `json:"end_ms"`
	}
	rec := struct {
		inner
		Requests int      `json:"requests"`
		Rate     *float64 `json:"rate_rps"`
	}{inner{2}, 3, new(float64)}
	var b bytes.Buffer
	if err := writeRecord(&b, formatTable, rec); err != nil {
		t.Fatal(err)
	}
	if want := "  End (ms)  Requests  Rate (req/s)\n     2.000         3         0.000\n"; b.String() != want {
		t.Errorf("struct table:\n got %q\nwant %q", b.String(), want)
	}
	b.Reset()
	if err := writeRecord(&b, formatCSV, map[string]any{"a_ms": 4.0, "n": 4}); err != nil {
		t.Fatal(err)
	}
	if want := "a_ms,n\n4,4\n"; b.String() != want {
		t.Errorf("map csv: got %q, want %q", b.String(), want)
	}
	b.Reset()
	if err := writeRecord(&b, formatTable, map[string]any{"a_ms": 4.0, "n": 4}); err != nil {
		t.Fatal(err)
	}
	if want := "  A (ms)  N\n   4.000  4\n"; b.String() != want {
		t.Errorf("map table: got %q, want %q", b.String(), want)
	}
}
