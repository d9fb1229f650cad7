package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

const measureTestdata = "../../store/measure/testdata/"

// initDB is a fresh store under t's temp dir after 'aicdb init' (the embedded
// perf data and model configs).
func initDB(t *testing.T) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "a.sqlite")
	if code, _, errs := cliRun(t, db, "init"); code != 0 {
		t.Fatalf("init: %s", errs)
	}
	return db
}

// benchDB is initDB with the hand-written vllm bench serve run imported (its
// sidecar names the deployment).
func benchDB(t *testing.T) string {
	t.Helper()
	db := initDB(t)
	if code, out, errs := cliRun(t, db, "bench", "import", measureTestdata+"vllm_bench.json"); code != 0 {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	return db
}

// TestBenchImportAccuracyRoundTrip: a hand-written vllm bench serve JSON (with its
// sidecar YAML) and an AIPerf export (deployment from flags) import once, a bad
// file changes nothing, and both round-trip through the accuracy view with
// predictions of every measured metric.
func TestBenchImportAccuracyRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data and evaluates two points")
	}
	db := initDB(t)
	code, out, errs := cliRun(t, db, "bench", "import", measureTestdata+"vllm_bench.json")
	if code != 0 || !strings.Contains(out, "vllm_bench.json: 1 measured runs imported (vllm-bench)") {
		t.Fatalf("import vllm: %d %q %q", code, out, errs)
	}
	// The deployment flags after the file, as one types them (urfave/cli stops at
	// the first argument; interspersed reads on).
	code, out, errs = cliRun(t, db, "bench", "import", measureTestdata+"aiperf.json", "--system", "h200_sxm", "--backend", "vllm",
		"--version", "0.22.0", "--tp", "2")
	if code != 0 || !strings.Contains(out, "1 measured runs imported (aiperf)") {
		t.Fatalf("import aiperf: %d %q %q", code, out, errs)
	}
	code, out, _ = cliRun(t, db, "bench", "import", measureTestdata+"vllm_bench.json")
	if code != 0 || !strings.Contains(out, "unchanged (already imported)") {
		t.Fatalf("re-import: %d %q", code, out)
	}
	// Bad files: one line naming the file and field, exit 1, nothing written.
	raw, err := os.ReadFile(measureTestdata + "vllm_bench.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bad := map[string]string{
		"truncated.json": string(raw[:len(raw)/2]),
		"types.json":     strings.Replace(string(raw), `"p99_ttft_ms": 410.0`, `"p99_ttft_ms": [1]`, 1),
		"nan.json":       strings.Replace(string(raw), `"mean_tpot_ms": 36.5`, `"mean_tpot_ms": NaN`, 1),
		"noclients.json": strings.Replace(string(raw), `"request_rate": Infinity, "burstiness": 1.0, "max_concurrency": 32, `, "", 1),
	}
	want := map[string]string{"truncated.json": "is the file truncated?", "types.json": "field p99_ttft_ms: an array: want a number",
		"nan.json": "field mean_tpot_ms: NaN", "noclients.json": "field concurrency: the file states neither a client concurrency (vllm bench serve max_concurrency, AIPerf concurrency) nor a finite request rate; add the one the run used to the file"}
	for name, data := range bad {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		// The good file first: all files are parsed before anything is written.
		code, _, errs := cliRun(t, db, "bench", "import", "--system", "h200_sxm", "--backend", "vllm", "--tp", "2",
			measureTestdata+"aiperf.json", p)
		if code != 1 || !strings.Contains(errs, p) || !strings.Contains(errs, want[name]) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%s: code %d stderr %q", name, code, errs)
		}
	}
	code, out, _ = cliRun(t, db, "query", "--format", "csv", "select count(*) from measurements")
	if code != 0 || strings.TrimSpace(out) != "count(*)\n2" {
		t.Fatalf("measurements after bad imports: %q", out)
	}
	code, out, errs = cliRun(t, db, "accuracy", "--metrics", "ttft_mean,ttft_p99,tpot_mean,itl_p99", "--format", "json")
	if code != 0 {
		t.Fatalf("accuracy: %d %q", code, errs)
	}
	var rep []map[string]any
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	got := map[string]float64{}
	for _, r := range rep {
		got[r["metric"].(string)] = r["n"].(float64)
		if r["unpredicted"].(float64) != 0 {
			t.Errorf("unpredicted rows: %v", r)
		}
	}
	if got["ttft_mean"] != 2 || got["ttft_p99"] != 2 || got["tpot_mean"] != 2 || got["itl_p99"] != 1 {
		t.Errorf("accuracy rows %v, want 2 TTFT/TPOT rows and 1 ITL p99 (vLLM only)", got)
	}
	// Every measured statistic sits beside its prediction in the view.
	code, out, _ = cliRun(t, db, "query", "--format", "csv",
		"select count(*) from accuracy where predicted is null or rel_error is null or version_mapping <> 'exact'")
	if code != 0 || strings.TrimSpace(out) != "count(*)\n0" {
		t.Errorf("accuracy view rows without a prediction: %q", out)
	}
	// Each measurement is predicted as the benchmark run that produced it (its
	// request count), its clients desynchronised after the burst by default, and
	// the view says so.
	code, out, _ = cliRun(t, db, "query", "--format", "csv",
		"select count(*), sum(run like 'finite:n=%,desync') from accuracy where metric = 'ttft_mean' and predicted is not null")
	if code != 0 || strings.TrimSpace(out) != "count(*),\"sum(run like 'finite:n=%,desync')\"\n2,2" {
		t.Errorf("accuracy: the view's runs %q, want both rows desync", out)
	}
	// A predicted row deploys as the evaluator ran it: a vLLM accuracy row keeps
	// its engine in its knob columns, and the header says so.
	code, out, _ = cliRun(t, db, "query", "--format", "csv", "select point_key from accuracy where metric = 'ttft_mean' and predicted is not null limit 1")
	if key := strings.TrimSpace(strings.TrimPrefix(out, "point_key\n")); code != 0 || len(key) < 12 {
		t.Errorf("accuracy point key: %q", out)
	} else if code, out, errs := cliRun(t, db, "deploy", key[:12]); code != 0 ||
		!strings.Contains(out, "engine from the row's columns (token budget, running cap, chunked prefill; the rest the engine's defaults), as the evaluator ran it\n") ||
		!strings.Contains(out, "--max-num-batched-tokens") {
		t.Errorf("deploy of an accuracy row: %d %q %q", code, out, errs)
	}
	// --run benchmark: the same runs, their clients locked for the whole run.
	if code, _, errs := cliRun(t, db, "accuracy", "--run", "benchmark", "--quiet", "--metrics", "ttft_mean"); code != 0 {
		t.Fatalf("accuracy --run benchmark: %d %q", code, errs)
	}
	code, out, _ = cliRun(t, db, "query", "--format", "csv",
		"select group_concat(distinct run) from (select run from accuracy order by run)")
	if code != 0 || !strings.Contains(out, "finite:n=") || strings.Contains(out, "steady") || strings.Contains(out, "desync") {
		t.Errorf("accuracy --run benchmark: the view's run column %q, want locked finite runs", out)
	}
	code, _, errs = cliRun(t, db, "accuracy", "--run", "forever")
	if code != 1 || !strings.Contains(errs, `accuracy: --run "forever": want desync, benchmark or steady`) {
		t.Errorf("accuracy --run forever: %d %q", code, errs)
	}
	// Calibrate on the two runs; eval applies it to the covered point and says
	// uncalibrated elsewhere; accuracy under it reads the same numbers as the fit.
	code, out, errs = cliRun(t, db, "calibrate", "--name", "t")
	if code != 0 || !strings.Contains(out, "calibration t@") || !strings.Contains(out, "h200_sxm     vllm   0.22.0            0.22.0  Qwen/Qwen3-32B") {
		t.Fatalf("calibrate: %d %q %q", code, out, errs)
	}
	for _, w := range []string{"measurements", "groups"} {
		if n := strings.Count(out+errs, w); n != 1 {
			t.Errorf("calibrate states its %s count %d times, want once: %q %q", w, n, out, errs)
		}
	}
	ev := []string{"eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--tp", "2",
		"--concurrency", "16", "--isl", "2000", "--osl", "64", "--calibration", "t"}
	code, out, errs = cliRun(t, db, append(ev, "--version", "0.22.0")...)
	if code != 0 || !strings.Contains(out, `"calibration": "t@`) {
		t.Errorf("calibrated eval: %d %q %q", code, out, errs)
	}
	code, out, _ = cliRun(t, db, append(ev, "--version", "0.24.0")...)
	if code != 0 || !strings.Contains(out, `"calibration": "uncalibrated: t@`) {
		t.Errorf("uncovered eval: %d %q", code, out)
	}
	code, _, errs = cliRun(t, db, append(ev[:len(ev)-1], "nope")...)
	if code != 1 || !strings.Contains(errs, `--calibration "nope" is not in the store: known calibrations are t`) {
		t.Errorf("unknown calibration: %d %q", code, errs)
	}
	code, out, errs = cliRun(t, db, "accuracy", "--calibration", "t", "--metrics", "ttft_mean,tpot_mean", "--format", "csv")
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(errs, "calibration t: 2 of 2 points calibrated\n") {
		t.Errorf("calibrated accuracy: %d %q %q", code, out, errs)
	}
	// point_calibrations reads the calibration out of an accuracy point's
	// evaluator name, which carries the run after it ("…+cal:t@digest+run:…").
	code, out, _ = cliRun(t, db, "query", "--format", "csv", `select pc.calibration_status, count(*) from measurement_predictions mp
		join point_calibrations pc on pc.key = mp.point_key where mp.calibration = 't' group by 1`)
	if code != 0 || strings.TrimSpace(out) != "calibration_status,count(*)\ncalibrated,2" {
		t.Errorf("the calibrated accuracy points' status: %q, want both calibrated", out)
	}
	// Points the calibration does not cover (it fits another model only) are
	// predicted uncalibrated, and said so.
	for _, q := range []string{`INSERT INTO calibrations VALUES ('u', 'd9', 'true', 'ev', 'aiconfigurator', 0, '{}', '2026-12-01T00:00:00Z')`,
		`INSERT INTO calibration_params (name, system, backend, version, model, prefill_scale, decode_scale, pass_overhead_ms,
			request_overhead_ms, rows, ttft_mape_before, tpot_mape_before, ttft_mape_fit, tpot_mape_fit, unidentified)
			VALUES ('u', 'h200_sxm', 'vllm', '0.22.0', 'Qwen/Qwen3-8B', 0.5, 1, 0, 0, 2, 10, 10, 5, 5, '[]')`} {
		if code, _, errs := cliRun(t, db, "query", "--write", q); code != 0 {
			t.Fatalf("%s: %q", q, errs)
		}
	}
	code, _, errs = cliRun(t, db, "accuracy", "--calibration", "u", "--metrics", "ttft_mean", "--quiet")
	if code != 0 || !strings.Contains(errs, "calibration u: 0 of 2 points calibrated; 2 uncalibrated (no fit for their quantisation or layout") {
		t.Errorf("accuracy under a calibration that covers no row: %d %q", code, errs)
	}
}

// TestBenchImportRereadsCLI: a file a store read with an older reader is read
// again by the next bench import, which says so per file and in its summary;
// the import after that finds it unchanged.
func TestBenchImportRereadsCLI(t *testing.T) {
	db := syntheticDB(t)
	file := measureTestdata + "silicon.csv"
	if code, out, errs := cliRun(t, db, "bench", "import", file); code != 0 || !strings.Contains(out, "2 measured runs imported") {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	st, err := store.Open(context.Background(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := storetest.DB(t, st).Exec(`UPDATE measurement_sources SET reader = ''`); err != nil { // as an older aicdb left it
		t.Fatal(err)
	}
	st.Close()
	code, out, errs := cliRun(t, db, "bench", "import", file)
	if code != 0 || !strings.Contains(out, "silicon.csv: 2 measured runs read again (imported by reader unrecorded, now aic-silicon/3)") ||
		!strings.Contains(errs, "1 files: 0 measured runs imported, 0 files unchanged, 1 files read again by a newer reader") {
		t.Errorf("import after an older reader: %d %q %q", code, out, errs)
	}
	if code, out, errs := cliRun(t, db, "bench", "import", file); code != 0 || !strings.Contains(out, "unchanged (already imported)") {
		t.Errorf("import by the same reader: %d %q %q", code, out, errs)
	}
}

// TestAccuracyCalibrateBadFlagsLeaveStore: accuracy checks --by and calibrate
// --objective before they predict a row (both predicted and stored every
// matching row, then refused the flag; calibrate's with exit 2), and calibrate
// over no matching measurement says so rather than that none "can be
// predicted": one line, exit 1, no prediction stored.
func TestAccuracyCalibrateBadFlagsLeaveStore(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data")
	}
	db := benchDB(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"accuracy", "--by", "backend,nonexistent"}, "aicdb: accuracy: --by nonexistent: want some of backend, model, system, mode, version, version_used, gemm_quant, isl, osl, tp, pp, dp, moe_ep, concurrency, calibration, run, nextn, deployed_as\n"},
		{[]string{"calibrate", "--name", "x", "--measurements", "backend = 'none'"}, "aicdb: calibrate: no measurements match \"backend = 'none'\": list them with aicdb query \"select id, backend, model, system from measurements\", or import some with 'aicdb bench import'\n"},
		{[]string{"calibrate", "--name", "x", "--objective", "bogus"}, "aicdb: calibrate: --objective \"bogus\": want quantitative or screening\n"},
		{[]string{"calibrate", "--name", "x", "--descent-clients", "-1"}, "aicdb: calibrate: --descent-clients -1: want the client starts the descent averages over (16 by default), or 0 for the evaluator's phases\n"},
	} {
		code, out, errs := cliRun(t, db, c.args...)
		if code != 1 || out != "" || errs != c.want {
			t.Errorf("%v: exit %d, stdout %q\n got  %q\n want %q", c.args, code, out, errs, c.want)
		}
	}
	code, out, _ := cliRun(t, db, "query", "--format", "csv", "select count(*) from measurement_predictions")
	if code != 0 || strings.TrimSpace(out) != "count(*)\n0" {
		t.Errorf("predictions stored by the refused commands: %q", out)
	}
}

// TestMeasurementEngineConfigApplied: a measured run's engine_config (sidecar
// YAML) is the engine it was deployed with, applied over the profile's as a
// sweep's --engine-config is; before, it was stored and ignored, and the row
// was predicted with the profile's budget. A key the model does not represent,
// and drafts without an acceptance, leave the row unpredicted with the reason.
func TestMeasurementEngineConfigApplied(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data and evaluates points")
	}
	raw, err := os.ReadFile(measureTestdata + "vllm_bench.json")
	if err != nil {
		t.Fatal(err)
	}
	const deploy = "system: h200_sxm\nbackend: vllm\nversion: 0.22.0\ntp: 2\n"
	predict := func(config string, extra ...string) (string, string) {
		t.Helper()
		db := initDB(t)
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "run.json"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "run.yaml"), []byte(deploy+config), 0o644); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := cliRun(t, db, "bench", "import", filepath.Join(dir, "run.json")); code != 0 {
			t.Fatalf("import: %d %q %q", code, out, errs)
		}
		if code, out, errs := cliRun(t, db, append([]string{"accuracy", "--quiet", "--metrics", "tpot_mean"}, extra...)...); code != 0 {
			t.Fatalf("accuracy: %d %q %q", code, out, errs)
		}
		_, out, _ := cliRun(t, db, "query", "--format", "csv",
			"select coalesce(p.engine_profile || ' ' || p.max_num_batched_tokens || ' ' || coalesce(p.drafter, '-'), '') || '|' || coalesce(a.reason, '') from accuracy a left join points p on p.key = a.point_key where a.metric = 'tpot_mean'")
		row := strings.TrimSpace(out[strings.Index(out, "\n")+1:])
		got, reason, _ := strings.Cut(row, "|")
		return got, reason
	}
	if got, why := predict("engine_config:\n  max_num_batched_tokens: 512\n  max_num_seqs: 8\n"); got != "aiconfigurator+config 512 -" || why != "" {
		t.Errorf("budget 512: row %q (%q), want the config's budget recorded", got, why)
	}
	if _, why := predict("engine_config:\n  frobnicate: 3\n"); !strings.HasPrefix(why, "engine_config: ") || !strings.Contains(why, "frobnicate") {
		t.Errorf("unknown key: reason %q", why)
	}
	eagle := "engine_config:\n  speculative_config:\n    method: eagle3\n    model: org/head\n    num_speculative_tokens: 3\n"
	if _, why := predict(eagle); why != "engine_config: 3 draft tokens per decode step (speculative decoding): predict it with --nextn 3 --nextn-accepted A (the acceptance is not a config key)" {
		t.Errorf("EAGLE without an acceptance: reason %q", why)
	}
	if got, why := predict(eagle, "--nextn", "3", "--nextn-accepted", "2"); !strings.HasSuffix(got, " eagle3") || why != "" {
		t.Errorf("EAGLE with --nextn: row %q (%q), want the head", got, why)
	}
}

// TestBenchOpenLoopRuns: `vllm bench serve` runs at a request rate (with and
// without --max-concurrency, Poisson or gamma sends) and at its default rate inf
// without a bound are predicted as they were run; a bound that holds fewer
// requests in flight predicts less queueing; an unbounded run whose point the
// legacy memory check calls OOM is predicted all the same.
func TestBenchOpenLoopRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data and evaluates open runs")
	}
	raw, side := vllmBench(t)
	runs := map[string]string{}
	for name, l := range map[string]string{
		"rate":  `"request_rate": 2.0, "burstiness": 1.0, "max_concurrency": null, `,
		"cap":   `"request_rate": 2.0, "burstiness": 1.0, "max_concurrency": 4, `,
		"once":  `"request_rate": Infinity, "burstiness": 1.0, "max_concurrency": null, `,
		"gamma": `"request_rate": 2.0, "burstiness": 0.5, "max_concurrency": null, `,
		"many":  `"request_rate": 2.0, "burstiness": 1.0, "max_concurrency": null, `,
		// A ramp-up run's request_rate is inf: read as its ramp, not as every
		// prompt at once (unbounded) or a closed loop of its bound (before Round 25).
		"ramp":     `"request_rate": Infinity, "burstiness": 1.0, "max_concurrency": null, "ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 4, `,
		"rampcap":  `"request_rate": Infinity, "burstiness": 1.0, "max_concurrency": 4, "ramp_up_strategy": "exponential", "ramp_up_start_rps": 1, "ramp_up_end_rps": 4, `,
		"rampstep": `"request_rate": Infinity, "burstiness": 1.0, "max_concurrency": null, "ramp_up_strategy": "step", "ramp_up_start_rps": 1, "ramp_up_end_rps": 4, `,
	} {
		n := "100"
		if name == "many" {
			n = "1000"
		}
		runs[name] = strings.Replace(strings.Replace(raw, vllmBenchLoad, l, 1), `"num_prompts": 320`, `"num_prompts": `+n, 1)
	}
	db := initDB(t)
	importRuns(t, db, runs, side)
	code, out, _ := cliRun(t, db, "query", "--format", "csv",
		"select run_id, concurrency, request_rate from measurements order by run_id")
	if code != 0 || out != "run_id,concurrency,request_rate\ncap.json,4,2\ngamma.json,0,2\nmany.json,0,2\nonce.json,100,0\nramp.json,0,0\nrampcap.json,4,0\nrampstep.json,0,0\nrate.json,0,2\n" {
		t.Errorf("imported loads: %q", out)
	}
	out = ttftAccuracy(t, db, "select run_id, run, predicted is not null, coalesce(reason, '') from accuracy where metric = 'ttft_mean' order by run_id")
	want := "run_id,run,predicted is not null,\"coalesce(reason, '')\"\n" +
		"cap.json,\"finite:n=100,open,rate=2,cap=4,paths=8\",1,\n" +
		"gamma.json,\"finite:n=100,open,rate=2,gamma=0.5,paths=8\",1,\n" +
		"many.json,\"finite:n=1000,open,rate=2,paths=3\",1,\n" +
		"once.json,\"finite:n=100,open\",1,\n" +
		"ramp.json,\"finite:n=100,open,rate=1,ramp=linear:4,paths=8\",1,\n" +
		"rampcap.json,\"finite:n=100,open,rate=1,ramp=exponential:4,cap=4,paths=8\",1,\n" +
		"rampstep.json,,0,open-loop measurement: ramp_up_strategy step: linear and exponential ramps are modelled\n" +
		"rate.json,\"finite:n=100,open,rate=2,paths=8\",1,\n"
	if out != want {
		t.Errorf("accuracy runs:\n%s\nwant\n%s", out, want)
	}
	code, out, _ = cliRun(t, db, "query", "--format", "csv",
		"select group_concat(round(predicted, 3), ' ') from (select predicted from accuracy where metric = 'ttft_mean' and run_id in ('cap.json', 'rate.json') order by run_id)")
	var capTTFT, rateTTFT float64
	lines := strings.Split(out, "\n")
	if _, err := fmt.Sscanf(lines[min(1, len(lines)-1)], "%g %g", &capTTFT, &rateTTFT); code != 0 || err != nil || !(capTTFT > 0 && capTTFT < rateTTFT) {
		t.Errorf("TTFT under a bound of 4 in flight %v, unbounded %v (%q)", capTTFT, rateTTFT, out)
	}
	// Under the defaults profile the unbounded run's point takes vLLM's own
	// running cap, 1,024 seats, which aiconfigurator's memory check calls OOM at
	// full length: the point keeps the verdict and the run is predicted on the
	// memory model's pool all the same.
	if code, _, errs := cliRun(t, db, "accuracy", "--quiet", "--engine-profile", "defaults", "--metrics", "ttft_mean", "--measurements", "run_id = 'many.json'"); code != 0 {
		t.Fatalf("accuracy --engine-profile defaults: %d %q", code, errs)
	}
	code, out, _ = cliRun(t, db, "query", "--format", "csv",
		"select a.predicted > 0, p.oom, p.max_num_seqs from accuracy a join points p on p.key = a.point_key where a.metric = 'ttft_mean' and a.run_id = 'many.json' and a.engine_profile = 'defaults'")
	if code != 0 || !strings.HasSuffix(out, "\n1,1,1024\n") {
		t.Errorf("the unbounded run under the defaults profile (predicted, oom, seats): %q", out)
	}
}

// TestBenchDisaggSidecar: a vllm bench serve run against a disaggregated
// deployment, its pools stated in the sidecar, is predicted by the tandem as the
// run it was: the closed loop of its clients, and the same file at a request
// rate as Poisson sends.
func TestBenchDisaggSidecar(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data and runs the tandem")
	}
	raw, _ := vllmBench(t)
	db := initDB(t)
	importRuns(t, db, map[string]string{
		"closed": raw,
		"open":   strings.Replace(raw, `"request_rate": Infinity`, `"request_rate": 2.0`, 1),
	}, "system: h200_sxm\nbackend: vllm\nversion: 0.22.0\nmode: disagg\nprefill: {workers: 1, tp: 2}\ndecode: {workers: 1, tp: 2}\n")
	out := ttftAccuracy(t, db, "select run_id, mode, coalesce(run, ''), predicted > 0, coalesce(reason, '') from accuracy where metric = 'ttft_mean' order by run_id")
	want := "run_id,mode,\"coalesce(run, '')\",predicted > 0,\"coalesce(reason, '')\"\n" +
		"closed.json,disagg,finite:n=320,1,\n" +
		"open.json,disagg,\"finite:n=320,open,rate=2,cap=32,paths=7\",1,\n"
	if out != want {
		t.Errorf("disaggregated rows:\n%s\nwant\n%s", out, want)
	}
}

// TestBenchDetailedLengths: a vllm bench serve --save-detailed run is predicted
// with its requests' lengths (W2 quantile points through the run), and the row
// says so: the run names the shapes, the point's fidelity is W2.
func TestBenchDetailedLengths(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data and evaluates a run")
	}
	raw, side := vllmBench(t)
	var ins []string
	for i := range 320 {
		ins = append(ins, fmt.Sprint(512+(i*37)%1024)) // 512…1535, mean 1024 (the file's total)
	}
	db := initDB(t)
	importRuns(t, db, map[string]string{"d": strings.TrimSuffix(strings.TrimSpace(raw), "}") + `, "input_lens": [` + strings.Join(ins, ",") + `]}`}, side)
	out := ttftAccuracy(t, db, "select a.run like 'finite:n=320,desync,shapes=%', p.workload_fidelity from accuracy a join points p on p.key = a.point_key where a.metric = 'ttft_mean'")
	if !strings.HasSuffix(out, "\n1,W2\n") {
		t.Errorf("the detailed run's row: %q", out)
	}
}

// TestEvalBenchmarkRun: eval --benchmark-requests predicts the benchmark run
// accuracy predicts for the same measured row — closed (320 requests of 32
// clients, desynchronised after the burst) and open (Poisson sends at 2 rps) —
// to the same number; bad combinations are one-line errors.
func TestEvalBenchmarkRun(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data and evaluates runs")
	}
	raw, side := vllmBench(t)
	db := initDB(t)
	importRuns(t, db, map[string]string{
		"closed": raw,
		"open":   strings.Replace(raw, vllmBenchLoad, `"request_rate": 2.0, "burstiness": 1.0, "max_concurrency": null, `, 1),
		"ramp": strings.Replace(raw, vllmBenchLoad, `"request_rate": Infinity, "burstiness": 1.0, "max_concurrency": 16, `+
			`"ramp_up_strategy": "linear", "ramp_up_start_rps": 1, "ramp_up_end_rps": 6, `, 1),
		"bound": strings.Replace(raw, vllmBenchLoad, `"request_rate": 2.0, "burstiness": 1.0, "max_concurrency": 16, `, 1),
	}, side)
	if code, _, errs := cliRun(t, db, "accuracy", "--quiet", "--metrics", "ttft_mean"); code != 0 {
		t.Fatalf("accuracy: %d %q", code, errs)
	}
	predicted := func(runID string) float64 {
		code, out, _ := cliRun(t, db, "query", "--format", "csv", "select predicted from accuracy where metric = 'ttft_mean' and run_id = '"+runID+"'")
		var v float64
		if _, err := fmt.Sscanf(strings.TrimPrefix(out, "predicted\n"), "%g", &v); code != 0 || err != nil {
			t.Fatalf("accuracy of %s: %q", runID, out)
		}
		return v
	}
	base := []string{"eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--version", "0.22.0", "--tp", "2",
		"--isl", "1024", "--osl", "64", "--format", "json"}
	eval := func(extra ...string) (float64, string) {
		code, out, errs := cliRun(t, db, append(slices.Clone(base), extra...)...)
		var r struct {
			TTFT float64 `json:"ttft_steady_mean"`
			Run  string  `json:"run"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
			t.Fatalf("eval %v: %d %q %q", extra, code, out, errs)
		}
		return r.TTFT, r.Run
	}
	for _, c := range []struct {
		id   string
		args []string
		run  string
	}{
		{"closed.json", []string{"--concurrency", "32", "--benchmark-requests", "320"}, "finite:n=320,desync"},
		{"open.json", []string{"--rate", "2", "--benchmark-requests", "320"}, "finite:n=320,open,rate=2,paths=7"},
		{"ramp.json", []string{"--rate", "1", "--ramp-up-strategy", "linear", "--ramp-up-end-rps", "6", "--max-concurrency", "16", "--benchmark-requests", "320"},
			"finite:n=320,open,rate=1,ramp=linear:6,cap=16,paths=7"},
		{"bound.json", []string{"--rate", "2", "--max-concurrency", "16", "--benchmark-requests", "320"}, "finite:n=320,open,rate=2,cap=16,paths=7"},
	} {
		got, run := eval(c.args...)
		if want := predicted(c.id); math.Abs(got-want) > 1e-6*want || run != c.run {
			t.Errorf("eval %v: TTFT mean %v (run %s), accuracy predicts %v (%s)", c.args, got, run, want, c.run)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--concurrency", "32", "--benchmark-requests", "320", "--max-concurrency", "4"}, "--max-concurrency: only with --rate (a closed loop's clients are its bound)"},
		{[]string{"--rate", "2", "--max-concurrency", "4"}, "--max-concurrency: only with --rate and --benchmark-requests"},
		{[]string{"--rate", "2", "--benchmark-requests", "30", "--tier", "both"}, "--benchmark-requests: a benchmark run is predicted by the quantitative tier"},
		{[]string{"--rate", "2", "--benchmark-requests", "0"}, "--benchmark-requests: finite run requests = 0"},
		{[]string{"--rate", "2", "--benchmark-requests", "30", "--burstiness", "-1"}, "gamma_shape = -1"},
		{[]string{"--rate", "2", "--benchmark-requests", "30", "--ramp-up-strategy", "linear"}, "--ramp-up-strategy and --ramp-up-end-rps come together"},
		{[]string{"--rate", "2", "--benchmark-requests", "30", "--ramp-up-strategy", "step", "--ramp-up-end-rps", "4"}, `ramp = "step": want linear or exponential`},
		{[]string{"--rate", "2", "--benchmark-requests", "30", "--ramp-up-strategy", "linear", "--ramp-up-end-rps", "1"}, "ramp_end_rps = 1: must be a finite rate ≥ rate_rps = 2"},
		{[]string{"--concurrency", "32", "--benchmark-requests", "320", "--ramp-up-strategy", "linear"}, "--ramp-up-strategy: only with --rate"},
	} {
		code, _, errs := cliRun(t, db, append(slices.Clone(base), c.args...)...)
		if code != 1 || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("eval %v: %d %q, want %q", c.args, code, errs, c.want)
		}
	}
}

// TestBenchAIPerfLoadRefused: an AIPerf export whose load options send the
// requests in a way no run represents (a prefill concurrency limit, a
// time-based concurrency ramp, a fixed schedule) is imported, and accuracy
// leaves it unpredicted with the option and the reason; the plain export beside
// it is predicted.
func TestBenchAIPerfLoadRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data")
	}
	raw, err := os.ReadFile(measureTestdata + "aiperf.json")
	if err != nil {
		t.Fatal(err)
	}
	ai := string(raw)
	db := initDB(t)
	importRuns(t, db, map[string]string{
		"plain":   ai,
		"prefill": strings.Replace(ai, `"loadgen": {`, `"loadgen": {"prefill_concurrency": 4, `, 1),
		"ramp":    strings.Replace(ai, `"loadgen": {`, `"loadgen": {"concurrency_ramp_duration": 30, `, 1),
		"trace":   strings.Replace(ai, `"loadgen": {`, `"input": {"fixed_schedule": true}, "loadgen": {`, 1),
	}, "system: h200_sxm\nbackend: vllm\nversion: 0.22.0\ntp: 2\n")
	out := ttftAccuracy(t, db, "select run_id, predicted is not null, coalesce(reason, '') from accuracy where metric = 'ttft_mean' order by run_id")
	want := "run_id,predicted is not null,\"coalesce(reason, '')\"\n" +
		"plain.json,1,\n" +
		"prefill.json,0,\"measured run: aiperf prefill_concurrency 4: holds a request until fewer than that many wait for their first token, which the model does not represent\"\n" +
		"ramp.json,0,\"measured run: aiperf concurrency_ramp_duration 30: ramps the clients from 1 over that many seconds, which the model does not represent\"\n" +
		"trace.json,0,measured run: aiperf fixed schedule (--fixed-schedule or a mooncake_trace dataset): the requests replay the dataset's timestamps; import the trace and replay it (aicdb trace) instead\n"
	if out != want {
		t.Errorf("accuracy of AIPerf loads:\n%s\nwant\n%s", out, want)
	}
}

// ttftAccuracy predicts db's measured runs' TTFT mean (aicdb accuracy) and
// returns the CSV of query over the accuracy view.
func ttftAccuracy(t *testing.T, db, query string) string {
	t.Helper()
	if code, _, errs := cliRun(t, db, "accuracy", "--quiet", "--metrics", "ttft_mean"); code != 0 {
		t.Fatalf("accuracy: %d %q", code, errs)
	}
	code, out, errs := cliRun(t, db, "query", "--format", "csv", query)
	if code != 0 {
		t.Fatalf("query %q: %d %q", query, code, errs)
	}
	return out
}

// vllmBench is the hand-written vllm bench serve result (C 32, 320 requests,
// rate inf) and its sidecar.
func vllmBench(t *testing.T) (raw, side string) {
	t.Helper()
	r, err := os.ReadFile(measureTestdata + "vllm_bench.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := os.ReadFile(measureTestdata + "vllm_bench.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(r), string(d)
}

// vllmBenchLoad is vllmBench's load clause, for tests that swap it.
const vllmBenchLoad = `"request_rate": Infinity, "burstiness": 1.0, "max_concurrency": 32, `

// importRuns writes each run (name → result JSON) as NAME.json with side as its
// sidecar NAME.yaml, imports them all into db and fails the test on an error.
func importRuns(t *testing.T, db string, runs map[string]string, side string) {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for name, data := range runs {
		p := filepath.Join(dir, name+".json")
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(side), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	slices.Sort(paths)
	if code, out, errs := cliRun(t, db, append([]string{"bench", "import"}, paths...)...); code != 0 {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
}

// TestBenchDeploymentRuns: a --deployment file's runs: apply per run id of a
// CSV of many runs (engine config, benchmark rounds and length spread), are
// kept with the file's deployment, and a later import of the same file with
// another deployment updates its rows in place (their predictions dropped)
// instead of calling it unchanged — without a file of the user's, the
// built-in campaign rules deploy the row, and --campaigns none reads it as
// recorded; a file whose runs and rules deploy no row of the files given, or
// a bad --campaigns, is one line, exit 1, nothing stored, and runs or rules
// that deploy nothing beside others that do are noted.
func TestBenchDeploymentRuns(t *testing.T) {
	db := syntheticDB(t)
	file := measureTestdata + "silicon.csv"
	const id = "2026_04_06_llama_3_1_70b_h200_sxm_trtllm_fp8_agg_1024x1024_c64_tp2_ep1_582"
	dir := t.TempDir()
	write := func(name, text string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stray := write("stray.yaml", "runs:\n  not_a_row: {benchmark: {rounds: 10}}\n")
	if code, out, errs := cliRun(t, db, "bench", "import", "--deployment", stray, file); code != 1 || out != "" ||
		!strings.Contains(errs, `runs: none of its 1 runs (e.g. "not_a_row") is a run of the files given`) || strings.Count(errs, "\n") != 1 {
		t.Errorf("stray runs: %d %q %q", code, out, errs)
	}
	strayRule := write("rule.yaml", "rules:\n  - {name: other campaign, match: {model: Llama-3.1-8B}, engine_config: {max_num_tokens: 1}}\n")
	if code, out, errs := cliRun(t, db, "bench", "import", "--deployment", strayRule, file); code != 1 || out != "" ||
		!strings.Contains(errs, `none of its 0 runs and 1 rules (e.g. rule "other campaign") deploys a run of the files given`) || strings.Count(errs, "\n") != 1 {
		t.Errorf("stray rules: %d %q %q", code, out, errs)
	}
	if _, out, _ := cliRun(t, db, "query", "--format", "csv", "select count(*) from measurements"); !strings.Contains(out, "\n0") {
		t.Errorf("a refused deployment file stored rows: %q", out)
	}
	dep := write("d.yaml", "runs:\n  "+id+":\n    benchmark: {tool: bench_serving, rounds: 10, warmup_rounds: 0, length_spread: [0.8, 1.0]}\n"+
		"    engine_config: {max_num_tokens: 16384, batch_wait_timeout_iters: 20, batch_wait_max_tokens_ratio: 0.9}\n  other_file_row: {tp: 1}\n"+
		"rules:\n  - {name: another sweep, match: {model: Llama-3.1-8B}, engine_config: {max_num_tokens: 1}}\n")
	code, out, errs := cliRun(t, db, "bench", "import", "--deployment", dep, file)
	if code != 0 || !strings.Contains(out, "2 measured runs imported") || !strings.Contains(errs, "1 of its 2 runs are not in the files given") ||
		!strings.Contains(errs, `1 of its 1 rules select no run of the files given (e.g. "another sweep")`) {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	row := func() string {
		t.Helper()
		_, out, _ := cliRun(t, db, "query", "--format", "csv", "select engine_config, json_extract(extra, '$.benchmark.rounds'), json_array_length(extra, '$.isl_quantiles') from measurements where run_id = '"+id+"'")
		return strings.TrimSpace(out[strings.Index(out, "\n")+1:])
	}
	if got := row(); got != `"{""batch_wait_max_tokens_ratio"":0.9,""batch_wait_timeout_iters"":20,""max_num_tokens"":16384}",10,16` {
		t.Errorf("the run's row: %s", got)
	}
	if code, out, _ := cliRun(t, db, "bench", "import", "--deployment", dep, file); code != 0 || !strings.Contains(out, "unchanged (already imported)") {
		t.Errorf("same file, same deployment: %d %q", code, out)
	}
	if code, out, _ := cliRun(t, db, "bench", "import", file); code != 0 || !strings.Contains(out, "2 measured runs updated to the deployment given now") {
		t.Errorf("same file, no deployment: %d %q", code, out)
	}
	// Without a file of the user's, the built-in campaign rules deploy the row
	// (InferenceMAX's Llama-70B sweep: max_num_tokens 16384, batch waiting at
	// 1k/1k and tp < 8, block reuse off, bench_serving's 10 rounds).
	if got := row(); got != `"{""batch_wait_max_tokens_ratio"":0.9,""batch_wait_timeout_iters"":20,""kv_cache_config"":{""enable_block_reuse"":false},""max_num_tokens"":16384}",10,16` {
		t.Errorf("the run's row deployed by the built-in campaigns: %s", got)
	}
	if _, out, _ := cliRun(t, db, "query", "--format", "csv", "select distinct deployed_as from accuracy where run_id = '"+id+"'"); !strings.Contains(out, "built-in rule InferenceMAX Llama-3.1-70B TensorRT-LLM 1k/1k tp<8 (batch waiting)") {
		t.Errorf("the accuracy view's deployed_as: %q", out)
	}
	if code, out, errs := cliRun(t, db, "bench", "import", "--campaigns", "all", file); code != 1 || out != "" ||
		errs != "aicdb: bench import: --campaigns \"all\": want builtin or none\n" {
		t.Errorf("bad --campaigns: %d %q %q", code, out, errs)
	}
	if code, out, _ := cliRun(t, db, "bench", "import", "--campaigns", "none", file); code != 0 || !strings.Contains(out, "2 measured runs updated to the deployment given now") {
		t.Errorf("same file, campaigns off: %d %q", code, out)
	}
	if got := row(); got != "{},," {
		t.Errorf("the run's row without any deployment: %s", got)
	}
}
