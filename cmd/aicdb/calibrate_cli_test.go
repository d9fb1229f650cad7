package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestCalibrateLoss: --loss names what the fit minimises and is recorded in the
// calibration's report, as is --descent-clients; an unknown loss is one line
// naming the flag and its values, exit 1, and the store keeps the calibration
// it had.
func TestCalibrateLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data and fits two measured runs")
	}
	db := benchDB(t)
	report := func() string {
		return queryCSV(t, db, "select name, json_extract(report, '$.loss') as loss from calibrations order by name")
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
	// The report records the descent's client starts (--descent-clients, 16 by
	// default; 0: the evaluator's phases, not recorded).
	if code, _, errs := cliRun(t, db, "calibrate", "--name", "full", "--descent-clients", "0"); code != 0 {
		t.Fatalf("--descent-clients 0: %s", errs)
	}
	if got := queryCSV(t, db, "select name, json_extract(report, '$.descent_clients') as dc from calibrations where name in ('d', 'full') order by name"); got != "name,dc\nd,16\nfull," {
		t.Errorf("descent_clients in the reports: %q", got)
	}
}

// TestAccuracyVersionFallback: a measured run whose mapped perf-data version
// cannot price its point (gpt-oss's banded attention is not in the embedded H200
// vLLM 0.14.0 tables) stays unpredicted, with the miss as its reason; with
// --version-fallback it is priced at the nearest version that has the data
// (0.18.0) and its version mapping records both steps.
func TestAccuracyVersionFallback(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data and predicts a measured run")
	}
	db := initDB(t)
	run := writeTestFile(t, t.TempDir(), "gptoss.json", `{"backend": "vllm", "model_id": "openai/gpt-oss-120b", "num_prompts": 16, "max_concurrency": 4,
 "completed": 16, "total_input_tokens": 16384, "total_output_tokens": 2048, "duration": 10.0,
 "request_throughput": 1.6, "output_throughput": 204.8,
 "mean_ttft_ms": 60.0, "median_ttft_ms": 55.0, "p99_ttft_ms": 90.0,
 "mean_tpot_ms": 7.5, "median_tpot_ms": 7.4, "p99_tpot_ms": 8.0}`)
	if code, out, errs := cliRun(t, db, "bench", "import", "--system", "h200_sxm", "--backend", "vllm", "--version", "0.13.0", "--tp", "1", run); code != 0 {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	view := func() string {
		return queryCSV(t, db, "select version_used, version_mapping, predicted is not null, substr(reason, 1, 27) from accuracy where metric = 'ttft_mean'")
	}
	if code, _, errs := cliRun(t, db, "accuracy", "--quiet", "--metrics", "ttft_mean"); code != 0 {
		t.Fatalf("accuracy: %d %q", code, errs)
	}
	head := "version_used,version_mapping,predicted is not null,\"substr(reason, 1, 27)\"\n"
	if got, want := view(), head+"0.14.0,0.13.0 → 0.14.0 (oldest above),0,no perf data for this point"; got != want {
		t.Errorf("without --version-fallback:\n%s\nwant\n%s", got, want)
	}
	code, _, errs := cliRun(t, db, "accuracy", "--metrics", "ttft_mean", "--version-fallback")
	if code != 0 {
		t.Fatalf("accuracy --version-fallback: %d %q", code, errs)
	}
	if !strings.Contains(errs, "1 measurements, 1 predicted, 0 without a prediction (1 predicted at a fallback perf-data version: see version_mapping)") {
		t.Errorf("accuracy --version-fallback summary: %q", errs)
	}
	want := head + "0.18.0,0.13.0 → 0.14.0 (oldest above); no perf data at 0.14.0 (generation attention data missing for kv=bfloat16 n_kv=8 head_dim=64 window=128 (h200_sxm vllm 0.14.0)) → 0.18.0,1,"
	if got := view(); got != want {
		t.Errorf("with --version-fallback:\n%s\nwant\n%s", got, want)
	}
}

// queryCSV runs sql through aicdb query on db and returns its CSV, trimmed; a
// failed query fails t.
func queryCSV(t *testing.T, db, sql string) string {
	t.Helper()
	code, out, errs := cliRun(t, db, "query", "--format", "csv", sql)
	if code != 0 {
		t.Fatalf("query %q: %d %q", sql, code, errs)
	}
	return strings.TrimSpace(out)
}

// TestCalibrateKeysDeployedVersions: two runs measured on vLLM 0.19.0 and
// 0.20.0 both price at perf-data version 0.19.0 (0.20.0 has none), and get one
// fit each, keyed by the engine version they were measured on. eval
// --deployed-version 0.20.0 prices at 0.19.0 (saying so) and applies the 0.20.0
// fit; a deployed version without a fit stays uncalibrated, naming the ones the
// calibration has, and so does a layout without one (pp 2), naming the fitted
// labels.
func TestCalibrateKeysDeployedVersions(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data and fits two measured runs")
	}
	db := initDB(t)
	src, err := os.ReadFile(measureTestdata + "vllm_bench.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for i, v := range []string{"0.19.0", "0.20.0"} {
		run := writeTestFile(t, dir, "run"+v+".json",
			strings.Replace(string(src), `"mean_ttft_ms": 180.5`, fmt.Sprintf(`"mean_ttft_ms": %d.5`, 180+60*i), 1))
		if code, out, errs := cliRun(t, db, "bench", "import", "--system", "h200_sxm", "--backend", "vllm", "--version", v, "--tp", "2", run); code != 0 {
			t.Fatalf("import %s: %d %q %q", v, code, out, errs)
		}
	}
	code, out, errs := cliRun(t, db, "calibrate", "--name", "mix")
	if code != 0 || !strings.Contains(out, "calibration mix@") || !strings.Contains(out, "2 groups") {
		t.Fatalf("calibrate: %d %q %q", code, out, errs)
	}
	if got := queryCSV(t, db, "select version, deployed_version, rows from calibration_params order by deployed_version"); got != "version,deployed_version,rows\n0.19.0,0.19.0,1\n0.19.0,0.20.0,1" {
		t.Errorf("calibration_params keys:\n%s\nwant one 0.19.0-priced group per deployed version", got)
	}
	if got := queryCSV(t, db, "select distinct p.deployed_version from accuracy a join points p on p.key = a.point_key where a.version = '0.20.0'"); got != "deployed_version\n0.20.0" {
		t.Errorf("the 0.20.0 run's prediction: %q, want deployed_version 0.20.0", got)
	}
	ev := []string{"eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--tp", "2",
		"--concurrency", "16", "--isl", "2000", "--osl", "64", "--calibration", "mix", "--format", "csv"}
	ttft := func(out string) string { // the quantitative row's ttft_steady_mean
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			return ""
		}
		cols, vals := strings.Split(lines[0], ","), strings.Split(lines[1], ",")
		if i := slices.Index(cols, "ttft_steady_mean"); i >= 0 && i < len(vals) {
			return vals[i]
		}
		return ""
	}
	code, out, _ = cliRun(t, db, ev...) // priced at the newest version, 0.24.0
	if code != 0 || !strings.Contains(out, "it has fits of runs deployed on 0.19.0, 0.20.0: pass --deployed-version") {
		t.Errorf("eval at the newest version: %d %q, want a hint naming the fitted deployed versions", code, out)
	}
	code, at19, errs := cliRun(t, db, append(ev, "--deployed-version", "0.19.0")...)
	// (no version note: 0.19.0 has perf data; the fit's shape note stays, it was trained at isl 1024)
	if code != 0 || strings.Contains(at19, "uncalibrated") || strings.Contains(errs, "note: --deployed-version") ||
		!strings.Contains(errs, "was trained on isl/osl 1024/64, not 2000/64") {
		t.Fatalf("eval at 0.19.0: %d %q %q", code, at19, errs)
	}
	code, at20, errs := cliRun(t, db, append(ev, "--deployed-version", "0.20.0")...)
	if code != 0 || strings.Contains(at20, "uncalibrated") || !strings.Contains(at20, "0.20.0") ||
		!strings.Contains(errs, "aicdb: note: --deployed-version 0.20.0 has no perf data of vllm on h200_sxm: priced at perf-data version 0.19.0 (0.20.0 → 0.19.0 (newest below))") {
		t.Fatalf("eval deployed 0.20.0: %d %q %q", code, at20, errs)
	}
	if ttft(at19) == "" || ttft(at19) == ttft(at20) {
		t.Errorf("TTFT deployed at 0.19.0 %q and at 0.20.0 %q: want each version's own fit", ttft(at19), ttft(at20))
	}
	// A layout the fits do not cover (a pipeline of 2) stays uncalibrated, naming
	// the labels of the deployed version's fits rather than other versions.
	code, out, errs = cliRun(t, db, append(ev, "--deployed-version", "0.19.0", "--pp", "2")...)
	if code != 0 || !strings.Contains(out, "uncalibrated: mix@") || !strings.Contains(out, "; pp]") ||
		!strings.Contains(out, "; tp] only") || strings.Contains(out, "pass --deployed-version") {
		t.Errorf("eval deployed 0.19.0 at pp 2: %d %q %q", code, out, errs)
	}
	// A calibrated sweep says how many of its points the calibration covers
	// (every one here: the sweep's layouts of a dense model are all tensor
	// parallel, and the fits are of its quantisation).
	code, out, errs = cliRun(t, db, "sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm",
		"--total-gpus", "2", "--isl", "2000", "--osl", "64", "--deployed-version", "0.19.0", "--calibration", "mix")
	if m := regexp.MustCompile(`(?m)^calibration mix: (\d+) of (\d+) points calibrated$`).FindStringSubmatch(out); code != 0 || m == nil || m[1] != m[2] || m[1] == "0" {
		t.Errorf("calibrated sweep: %d %q %q", code, out, errs)
	}
	// … and what its figures are worth on runs it was not fitted on (fitted
	// without folds here: how to measure it).
	if !strings.Contains(out, "\ncalibration mix: it was fitted without folds: 'aicdb calibrate --holdout K' measures its error on runs it has not seen\n") {
		t.Errorf("calibrated sweep without the calibration's held-out note: %q", out)
	}
	// best over the calibrated rows says the same of them.
	code, out, errs = cliRun(t, db, "best", "--model", "Qwen/Qwen3-32B", "--calibration", "mix", "--top", "1", "--format", "csv")
	if code != 0 || strings.Count(out, "\n") != 2 ||
		!strings.Contains(errs, "calibration mix: it was fitted without folds: 'aicdb calibrate --holdout K' measures its error on runs it has not seen\n") {
		t.Errorf("calibrated best: %d %q %q", code, out, errs)
	}
	code, out, errs = cliRun(t, db, append(ev, "--deployed-version", "0.21.0")...)
	if code != 0 || !strings.Contains(out, "uncalibrated: mix@") || !strings.Contains(out, "deployed as 0.21.0") ||
		!strings.Contains(out, "it has fits of runs deployed on 0.19.0, 0.20.0: pass --deployed-version") {
		t.Errorf("eval deployed 0.21.0: %d %q %q", code, out, errs)
	}
	code, _, errs = cliRun(t, db, "eval", "--timing", "linear", "--concurrency", "4", "--isl", "100", "--osl", "10", "--deployed-version", "0.20.0")
	if code != 1 || !strings.Contains(errs, "--deployed-version 0.20.0: only with --model") {
		t.Errorf("--deployed-version with --timing: %d %q", code, errs)
	}
}

// TestAccuracyMTP: accuracy --nextn N --nextn-accepted A predicts the selected
// TensorRT-LLM and vLLM rows (aggregated here) with MTP (their points carry nextn and
// nextn_accepted; the decode steps accept drafts, so the predicted TPOT falls),
// deploy launches them with it, and drafts without an acceptance are refused
// in one line.
func TestAccuracyMTP(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data and predicts measured runs")
	}
	db := initDB(t)
	dir := t.TempDir()
	write := func(name, backend string) string {
		return writeTestFile(t, dir, name, `{"backend": "`+backend+`", "model_id": "deepseek-ai/DeepSeek-V3", "num_prompts": 32, "max_concurrency": 8,
 "completed": 32, "total_input_tokens": 32768, "total_output_tokens": 8192, "duration": 20.0,
 "request_throughput": 1.6, "output_throughput": 409.6,
 "mean_ttft_ms": 80.0, "median_ttft_ms": 75.0, "p99_ttft_ms": 120.0,
 "mean_tpot_ms": 9.0, "median_tpot_ms": 8.9, "p99_tpot_ms": 10.0}`)
	}
	for _, imp := range [][]string{
		{"--backend", "trtllm", "--version", "1.3.0rc20", write("trt.json", "trtllm")},
		{"--backend", "vllm", "--version", "0.22.0", write("vllm.json", "vllm")},
	} {
		args := append([]string{"bench", "import", "--system", "h200_sxm", "--tp", "8"}, imp...)
		if code, out, errs := cliRun(t, db, args...); code != 0 {
			t.Fatalf("import %v: %d %q %q", imp, code, out, errs)
		}
	}
	tpot := func() string {
		return queryCSV(t, db, "select backend, predicted is not null, substr(reason, 1, 40) from accuracy where metric = 'tpot_mean' order by backend")
	}
	if code, _, errs := cliRun(t, db, "accuracy", "--quiet", "--metrics", "tpot_mean"); code != 0 {
		t.Fatalf("accuracy: %d %q", code, errs)
	}
	plain := queryCSV(t, db, "select predicted from accuracy where metric = 'tpot_mean' and backend = 'trtllm'")
	vplain := queryCSV(t, db, "select predicted from accuracy where metric = 'tpot_mean' and backend = 'vllm'")
	if code, _, errs := cliRun(t, db, "accuracy", "--quiet", "--metrics", "tpot_mean", "--nextn", "1", "--nextn-accepted", "0.85"); code != 0 {
		t.Fatalf("accuracy --nextn: %d %q", code, errs)
	}
	want := "backend,predicted is not null,\"substr(reason, 1, 40)\"\ntrtllm,1,\nvllm,1,"
	if got := tpot(); got != want {
		t.Errorf("accuracy --nextn 1:\n%s\nwant\n%s", got, want)
	}
	for _, b := range []struct{ backend, plain string }{{"trtllm", plain}, {"vllm", vplain}} {
		mtp := queryCSV(t, db, "select predicted from accuracy where metric = 'tpot_mean' and backend = '"+b.backend+"'")
		var p0, p1 float64
		if _, err := fmt.Sscanf(strings.TrimPrefix(b.plain, "predicted\n"), "%g", &p0); err != nil {
			t.Fatalf("%s plain TPOT %q: %v", b.backend, b.plain, err)
		}
		if _, err := fmt.Sscanf(strings.TrimPrefix(mtp, "predicted\n"), "%g", &p1); err != nil {
			t.Fatalf("%s MTP TPOT %q: %v", b.backend, mtp, err)
		}
		if !(p1 < 0.8*p0) {
			t.Errorf("%s: predicted TPOT with one draft at 0.85 accepted %v, without %v: want ≥ 20 %% lower", b.backend, p1, p0)
		}
	}
	if got := queryCSV(t, db, "select nextn, nextn_accepted from points where backend = 'trtllm' and nextn > 0"); got != "nextn,nextn_accepted\n1,0.85" {
		t.Errorf("the MTP point: %q", got)
	}
	if got := queryCSV(t, db, "select backend, nextn, nextn_accepted from accuracy where metric = 'tpot_mean' order by backend"); got != "backend,nextn,nextn_accepted\ntrtllm,1,0.85\nvllm,1,0.85" {
		t.Errorf("accuracy's MTP columns: %q", got)
	}
	// deploy launches them with MTP on.
	keyOf := func(backend string) string {
		return strings.TrimPrefix(queryCSV(t, db, "select substr(key, 1, 12) from points where nextn > 0 and backend = '"+backend+"'"), "\"substr(key, 1, 12)\"\n")
	}
	key := keyOf("trtllm")
	code, out, errs := cliRun(t, db, "deploy", key, "--backend-format", "yaml")
	if code != 0 || !strings.Contains(out, "speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: 1\n") ||
		!strings.Contains(out, "# MTP: 1 draft tokens per decode step, predicted at 0.85 accepted per step") {
		t.Errorf("deploy %s: %d %q %q", key, code, out, errs)
	}
	key = keyOf("vllm")
	code, out, errs = cliRun(t, db, "deploy", key, "--backend-format", "cli")
	if code != 0 || !strings.Contains(out, `--speculative-config '{"method": "mtp", "num_speculative_tokens": 1}'`) ||
		!strings.Contains(out, "# MTP: 1 draft tokens per decode step, predicted at 0.85 accepted per step") {
		t.Errorf("deploy %s (vLLM): %d %q %q", key, code, out, errs)
	}
	code, _, errs = cliRun(t, db, "accuracy", "--quiet", "--nextn", "1")
	if code != 1 || !strings.HasPrefix(errs, "aicdb: --nextn 1: give --nextn-accepted") || strings.Count(errs, "\n") != 1 {
		t.Errorf("accuracy --nextn without acceptance: %d %q", code, errs)
	}
}

// writeTestFile writes content to dir/name and returns the path.
func writeTestFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCalibrateHeldOutFigures: what a calibration's figures are worth, wherever
// they are shown.
//   - calibrate prints the row-weighted MAPE over all its groups and stores it in
//     the report; the cross-validated figure is the average of
//     |held_out / measured − 1| over calibration_rows, and a calibration without
//     folds (none asked, or no group with as many rows as folds) says so and
//     stores no such figure;
//   - --holdout-by folds by a column (recorded, quoted "(folds by shape)"; a
//     column with too few values gives no folds; bad uses refused in one line,
//     the store unchanged);
//   - accuracy names the rows that trained the calibration (in-sample) with its
//     held-out figure, and is silent on a row it never saw;
//   - eval carries the applied fit's rows, held-out MAPE and whether it saw the
//     point's shape, with a note naming the shapes it did when not.
func TestCalibrateHeldOutFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the embedded perf data and fits two measured runs")
	}
	db := benchDB(t)
	noCV := func(name, rows string) {
		t.Helper()
		got := queryCSV(t, db, "select json_type(report, '$.ttft_mape_pct_cv') is null as no_cv, json_extract(report, '$.rows') as n from calibrations where name = '"+name+"'")
		if got != "no_cv,n\n1,"+rows {
			t.Errorf("report of %s: %q, want no cross-validated figure", name, got)
		}
	}
	code, out, errs := cliRun(t, db, "calibrate", "--name", "one", "--holdout", "2")
	if code != 0 || !strings.Contains(out, "\nall 1 rows: TTFT / TPOT MAPE ") || !strings.Contains(out, "% fitted; no group has 2 rows for 2-fold cross-validation\n") {
		t.Fatalf("calibrate --holdout 2 on one row: %d %q %q", code, out, errs)
	}
	noCV("one", "1")
	if code, out, errs := cliRun(t, db, "bench", "import", measureTestdata+"aiperf.json", "--system", "h200_sxm", "--backend", "vllm",
		"--version", "0.22.0", "--tp", "2"); code != 0 {
		t.Fatalf("import aiperf: %d %q %q", code, out, errs)
	}
	code, out, errs = cliRun(t, db, "calibrate", "--name", "cv", "--holdout", "2")
	if code != 0 {
		t.Fatalf("calibrate --holdout 2: %d %q", code, errs)
	}
	line := regexp.MustCompile(`(?m)^all 2 rows: TTFT / TPOT MAPE [0-9.]+ / [0-9.]+ % uncalibrated, [0-9.]+ / [0-9.]+ % fitted; 2-fold cross-validated ([0-9.]+) / ([0-9.]+) % over the 2 rows in folds$`)
	m := line.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no overall line in %q", out)
	}
	printed := m[1] + "," + m[2]
	report := queryCSV(t, db, "select printf('%.2f,%.2f', json_extract(report, '$.ttft_mape_pct_cv'), json_extract(report, '$.tpot_mape_pct_cv')) as cv, json_extract(report, '$.cv_rows') as n from calibrations where name = 'cv'")
	if want := "cv,n\n\"" + printed + "\",2"; report != want {
		t.Errorf("report %q, want %q (the printed figures over 2 rows)", report, want)
	}
	rows := queryCSV(t, db, "select printf('%.2f,%.2f', avg(case when metric = 'ttft' then abs(held_out / measured - 1) end) * 100, avg(case when metric = 'tpot' then abs(held_out / measured - 1) end) * 100) as cv from calibration_rows where name = 'cv' and held_out is not null")
	if want := "cv\n\"" + printed + "\""; rows != want {
		t.Errorf("calibration_rows average %q, want %q (the printed figures)", rows, want)
	}
	// Folds by a column hold out its values whole; the two runs differ in shape
	// and concurrency, not in layout (tp 2 both).
	code, out, errs = cliRun(t, db, "calibrate", "--name", "byshape", "--holdout", "2", "--holdout-by", "shape")
	if code != 0 || !strings.Contains(out, "; 2-fold cross-validated (folds by shape) ") {
		t.Errorf("calibrate --holdout-by shape: %d %q %q", code, out, errs)
	}
	if got := queryCSV(t, db, "select json_extract(report, '$.holdout_by') as by from calibrations where name = 'byshape'"); got != "by\nshape" {
		t.Errorf("report of byshape: %q", got)
	}
	code, out, errs = cliRun(t, db, "calibrate", "--name", "bylayout", "--holdout", "2", "--holdout-by", "parallel")
	if code != 0 || !strings.Contains(out, "% fitted; no group has 2 layouts for 2-fold cross-validation\n") {
		t.Errorf("calibrate --holdout-by parallel: %d %q %q", code, out, errs)
	}
	for _, c := range []struct{ args, want string }{
		{"--holdout-by shape", "calibrate: --holdout-by shape needs --holdout K (k ≥ 2 folds)"},
		{"--holdout 2 --holdout-by model", `calibrate: --holdout-by "model": want shape, concurrency or parallel (default: every k-th row)`},
	} {
		code, _, errs := cliRun(t, db, append([]string{"calibrate", "--name", "byshape"}, strings.Fields(c.args)...)...)
		if code != 1 || strings.TrimSpace(errs) != "aicdb: "+c.want {
			t.Errorf("calibrate %s: %d %q, want exit 1 and %q", c.args, code, errs, c.want)
		}
	}
	if got := queryCSV(t, db, "select json_extract(report, '$.holdout_by') as by from calibrations where name = 'byshape'"); got != "by\nshape" {
		t.Errorf("a refused calibrate changed the stored byshape: %q", got)
	}

	code, out, errs = cliRun(t, db, "calibrate", "--name", "nocv")
	if code != 0 || !strings.Contains(out, "\nall 2 rows: ") || !strings.Contains(out, "% fitted; no cross-validation (--holdout K for K-fold)\n") {
		t.Fatalf("calibrate without folds: %d %q %q", code, out, errs)
	}
	noCV("nocv", "2")

	// accuracy under a calibration says which of its rows trained it: their
	// MAPE is in-sample; the cross-validated figure is what to expect elsewhere.
	inSample := func(name, where, want string) {
		t.Helper()
		args := []string{"accuracy", "--calibration", name, "--metrics", "ttft_mean"}
		if where != "" {
			args = append(args, "--measurements", where)
		}
		code, _, errs := cliRun(t, db, args...)
		if code != 0 {
			t.Fatalf("accuracy --calibration %s: %d %q", name, code, errs)
		}
		i := strings.Index(errs, "calibration "+name+": ")
		j := strings.LastIndex(errs, "calibration "+name+": ")
		if i < 0 {
			t.Fatalf("accuracy --calibration %s: no coverage line in %q", name, errs)
		}
		got := ""
		if i != j { // the coverage line, then the in-sample one
			got = strings.TrimSpace(errs[j:])
		}
		if got != want {
			t.Errorf("accuracy --calibration %s (%q): in-sample note %q, want %q", name, where, got, want)
		}
	}
	inSample("cv", "", "calibration cv: 2 of the 2 predicted rows trained it, so their MAPE below is in-sample (the fit's); on runs it has not seen expect its 2-fold cross-validated TTFT / TPOT MAPE, "+m[1]+" / "+m[2]+" % over 2 rows")
	inSample("nocv", "", "calibration nocv: 2 of the 2 predicted rows trained it, so their MAPE below is in-sample (the fit's); it was fitted without folds: 'aicdb calibrate --holdout K' measures its error on runs it has not seen")
	inSample("one", "id = (select max(id) from measurements)", "") // the AIPerf run came after: it did not train "one"
	// (its two folds hold the same rows as by rows: the same figures, said to be by shape)
	inSample("byshape", "", "calibration byshape: 2 of the 2 predicted rows trained it, so their MAPE below is in-sample (the fit's); on runs it has not seen expect its 2-fold cross-validated (folds by shape) TTFT / TPOT MAPE, "+m[1]+" / "+m[2]+" % over 2 rows")

	// eval under a calibration carries what the applied fit is worth: its rows
	// and, fitted with folds, its cross-validated MAPE (calibration_params').
	ev := []string{"eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--version", "0.22.0", "--tp", "2",
		"--concurrency", "16", "--isl", "2000", "--osl", "64", "--format", "csv", "--calibration"}
	evalCols := func(name string) map[string]string {
		t.Helper()
		code, out, errs := cliRun(t, db, append(ev, name)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(lines) != 2 {
			t.Fatalf("eval --calibration %s: %d %q %q", name, code, out, errs)
		}
		cols := map[string]string{}
		vals := strings.Split(lines[1], ",")
		for i, k := range strings.Split(lines[0], ",") {
			cols[k] = vals[i]
		}
		return cols
	}
	want := queryCSV(t, db, "select rows || ',' || ttft_mape_cv || ',' || tpot_mape_cv as q from calibration_params where name = 'cv'")
	if c := evalCols("cv"); "q\n\""+c["calibration_rows"]+","+c["calibration_ttft_cv_mape_pct"]+","+c["calibration_tpot_cv_mape_pct"]+"\"" != want {
		t.Errorf("eval --calibration cv: rows and CV %q, %q, %q; calibration_params %q", c["calibration_rows"], c["calibration_ttft_cv_mape_pct"], c["calibration_tpot_cv_mape_pct"], want)
	}
	if c := evalCols("nocv"); c["calibration_rows"] != "2" || c["calibration_ttft_cv_mape_pct"] != "" || c["calibration_shape_measured"] != "true" {
		t.Errorf("eval --calibration nocv: rows %q, CV %q, shape measured %q; want 2 rows, no CV, the measured isl 2000 / osl 64",
			c["calibration_rows"], c["calibration_ttft_cv_mape_pct"], c["calibration_shape_measured"])
	}
	// A shape the fit was not trained on (isl 3000) is said to be so: a column
	// and a note naming the shapes it was.
	unseen := slices.Clone(ev)
	unseen[slices.Index(unseen, "2000")] = "3000"
	code, out, errs = cliRun(t, db, append(unseen, "nocv")...)
	if code != 0 || !strings.HasSuffix(strings.TrimSpace(out), ",2,false") || !strings.Contains(errs, "aicdb: note: calibration nocv@") ||
		!strings.Contains(errs, "'s fit for this deployment was trained on isl/osl 1024/64, 2000/64, not 3000/64: its TTFT correction may not carry") {
		t.Errorf("eval --calibration nocv at an unmeasured shape: %d %q %q", code, out, errs)
	}
}
