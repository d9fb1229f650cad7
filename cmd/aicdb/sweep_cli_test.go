package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// sweepArgs is the acceptance sweep (synthetic evaluator in tests).
var sweepArgs = []string{"sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm",
	"--total-gpus", "8", "--isl", "4000", "--osl", "500"}

// cliRun runs the CLI in-process against db and returns exit code, stdout, stderr.
func cliRun(t *testing.T, db string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"aicdb", "--db", db}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// syntheticDB returns a new, empty store (only init creates one from the CLI; the
// synthetic evaluator needs no perf data).
func syntheticDB(t *testing.T) string {
	t.Helper()
	t.Setenv("AICDB_EVALUATOR", "synthetic")
	return newStore(t, filepath.Join(t.TempDir(), "a.sqlite"))
}

// newStore creates an empty store at path, as 'aicdb init' would without its data.
func newStore(t *testing.T, path string) string {
	t.Helper()
	st, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	return path
}

func TestSweepCLIIncremental(t *testing.T) {
	db := syntheticDB(t)
	code, out, errs := cliRun(t, db, sweepArgs...)
	if code != 0 || !strings.Contains(out, "352 evaluated, 0 already stored") {
		t.Fatalf("first sweep: code %d out %q err %q", code, out, errs)
	}
	if errs != "" {
		t.Fatalf("sweep wrote to stderr off a terminal: %q", errs)
	}
	code, out, _ = cliRun(t, db, sweepArgs...)
	if code != 0 || !strings.Contains(out, "0 evaluated, 352 already stored") {
		t.Fatalf("repeated sweep: code %d out %q", code, out)
	}
	// SLA flags make sweep print the best configs with named headers.
	code, out, errs = cliRun(t, db, append(sweepArgs, "--ttft", "150", "--ttft-percentile", "p99", "--itl", "200", "--top", "2")...)
	if code != 0 || !strings.Contains(out, "TTFT p99 (ms)") || !strings.Contains(out, "ITL p99 (ms)") || !strings.Contains(out, "TPOT mean (ms)") {
		t.Fatalf("sweep with SLA: code %d out %q err %q", code, out, errs)
	}
}

func TestSweepCLIBadInput(t *testing.T) {
	db := syntheticDB(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "--model", "nope/X", "--system", "h200_sxm", "--backend", "vllm", "--total-gpus", "8", "--isl", "10", "--osl", "5"}, "Qwen/Qwen3-32B"},
		{[]string{"sweep", "--model", "Qwen/Qwen3-32B", "--system", "b999", "--backend", "vllm", "--total-gpus", "8", "--isl", "10", "--osl", "5"}, "h200_sxm"},
		{append(sweepArgs[:len(sweepArgs):len(sweepArgs)], "--mode", "both"), "--mode"},
		{append(sweepArgs[:len(sweepArgs):len(sweepArgs)], "--tp", "2,x"), "--tp"},
		{append(sweepArgs[:len(sweepArgs):len(sweepArgs)], "--mode", "disagg", "--batch", "4"), "--mode is disagg"},
		{append(sweepArgs[:len(sweepArgs):len(sweepArgs)], "--prefix", "4000"), "--prefix"},
		{append(sweepArgs[:len(sweepArgs):len(sweepArgs)], "--ttft", "-5"), "--ttft -5"},
	} {
		code, _, errs := cliRun(t, db, c.args...)
		if code != 1 || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: code %d stderr %q, want exit 1 with one line naming %q", c.args, code, errs, c.want)
		}
	}
}

func TestQueryCLI(t *testing.T) {
	db := syntheticDB(t)
	if code, _, errs := cliRun(t, db, sweepArgs...); code != 0 {
		t.Fatal(errs)
	}
	// The acceptance query works and its answer is right at screening tier.
	code, out, errs := cliRun(t, db, "query", "select * from pareto where ttft_steady_p99 < 200")
	if code != 0 || !strings.Contains(out, "TTFT p99 (ms)") { // the table header of ttft_steady_p99
		t.Fatalf("query: code %d err %q", code, errs)
	}
	// Straddlers were resolved and persisted: a second run evaluates nothing new.
	var n1, n2 int
	s, _ := sql.Open("sqlite", db)
	s.QueryRow(`SELECT count(*) FROM quantitative_results`).Scan(&n1)
	cliRun(t, db, "query", "select * from pareto where ttft_steady_p99 < 200")
	s.QueryRow(`SELECT count(*) FROM quantitative_results`).Scan(&n2)
	s.Close()
	if n1 == 0 || n1 != n2 {
		t.Fatalf("quantitative rows after 1st/2nd query: %d/%d", n1, n2)
	}
	// Flags after the SQL work too.
	code, out, _ = cliRun(t, db, "query", "select parallel, batch from pareto order by key limit 2", "--format", "csv")
	if code != 0 || !strings.HasPrefix(out, "parallel,batch\n") || strings.Count(out, "\n") != 3 {
		t.Fatalf("csv: code %d out %q", code, out)
	}
	code, out, _ = cliRun(t, db, "query", "--format", "json", "select 1 as a, 'x' as b, null as c, 2.5 as d")
	var got []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &got) != nil || len(got) != 1 || got[0]["b"] != "x" || got[0]["c"] != nil || got[0]["d"] != 2.5 {
		t.Fatalf("json: code %d out %q", code, out)
	}
	// SQL errors: one line, exit 1.
	code, _, errs = cliRun(t, db, "query", "select * from nope")
	if code != 1 || !strings.Contains(errs, "no such table") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("bad SQL: code %d err %q", code, errs)
	}
	code, _, errs = cliRun(t, db, "query", "select 1", "--format", "xml")
	if code != 1 || !strings.Contains(errs, "--format") {
		t.Fatalf("bad format: code %d err %q", code, errs)
	}
}

func TestQueryCLIReadOnlyUnlessWrite(t *testing.T) {
	db := syntheticDB(t)
	if code, _, errs := cliRun(t, db, sweepArgs...); code != 0 {
		t.Fatal(errs)
	}
	code, _, errs := cliRun(t, db, "query", "insert into sweeps (arguments, started_at, status) values ('{}', 'x', 'done')")
	if code != 1 || !strings.Contains(strings.ToLower(errs), "readonly") && !strings.Contains(strings.ToLower(errs), "read-only") && !strings.Contains(errs, "query_only") {
		t.Fatalf("INSERT without --write: code %d err %q (want exit 1, read-only)", code, errs)
	}
	code, _, _ = cliRun(t, db, "query", "delete from operating_points")
	code2, out, _ := cliRun(t, db, "query", "--format", "csv", "select count(*) from operating_points")
	if code != 1 || code2 != 0 || out != "count(*)\n352\n" {
		t.Fatalf("DELETE without --write changed the store: code %d, count %q", code, out)
	}
	code, _, errs = cliRun(t, db, "query", "--write", "insert into sweeps (arguments, started_at, status) values ('{}', 'x', 'done')")
	_, out, _ = cliRun(t, db, "query", "--format", "csv", "select count(*) from sweeps")
	if code != 0 || out != "count(*)\n2\n" {
		t.Fatalf("INSERT with --write: code %d err %q count %q", code, errs, out)
	}
}

func TestBestCLI(t *testing.T) {
	db := syntheticDB(t)
	if code, _, errs := cliRun(t, db, sweepArgs...); code != 0 {
		t.Fatal(errs)
	}
	code, out, errs := cliRun(t, db, "best", "--ttft", "200", "--ttft-percentile", "p99", "--itl", "150", "--sla-refine", "--top", "3")
	if code != 0 {
		t.Fatalf("best: %d %q", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || len(lines) > 4 || !strings.Contains(lines[0], "TTFT p99 (ms)") || !strings.Contains(lines[0], "ITL p99 (ms)") || !strings.Contains(lines[0], "TPOT mean (ms)") {
		t.Fatalf("best table:\n%s", out)
	}
	for _, l := range lines[1:] {
		if !strings.HasSuffix(l, "quantitative") {
			t.Fatalf("--sla-refine row not at quantitative tier: %q", l)
		}
	}
	code, out, _ = cliRun(t, db, "best", "--ttft", "300", "--tpot", "30", "--top", "2")
	if code != 0 || !strings.Contains(out, "TTFT legacy est. (ms)") { // aiconfigurator's mean, labelled as such
		t.Fatalf("legacy best: %d\n%s", code, out)
	}
	// A second workload in the store: best must be told which one.
	if code, _, errs := cliRun(t, db, append(sweepArgs[:len(sweepArgs)-2:len(sweepArgs)-2], "--osl", "300")...); code != 0 {
		t.Fatal(errs)
	}
	code, _, errs = cliRun(t, db, "best", "--ttft", "300")
	if code != 1 || !strings.Contains(errs, "2 workloads") || !strings.Contains(errs, "--osl") {
		t.Fatalf("ambiguous workload: code %d err %q", code, errs)
	}
	if code, _, errs = cliRun(t, db, "best", "--ttft", "300", "--osl", "300"); code != 0 {
		t.Fatalf("best --osl 300: code %d err %q", code, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"best", "--ttft", "200", "--ttft-percentile", "p98"}, "unknown percentile"},
		{[]string{"best", "--ttft", "-1"}, "--ttft -1"},
		{[]string{"best", "--ttft-percentile", "p99"}, "without --ttft"},
		{[]string{"best", "--tpot", "20", "--tpot-percentile", "p90"}, "not stored"},
		{[]string{"best", "--top", "0"}, "--top"},
		{[]string{"best", "--model", "nope"}, "no stored points"},
	} {
		code, _, errs := cliRun(t, db, c.args...)
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: code %d err %q, want exit 1 naming %q", c.args, code, errs, c.want)
		}
	}
}

// dumpPoints returns every operating_points row, key-ordered, as text.
func dumpPoints(t *testing.T, path string) (string, int) {
	t.Helper()
	st, err := store.Open(context.Background(), path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := storetest.DB(t, st).Queryx(`SELECT * FROM operating_points ORDER BY key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	n := 0
	for rows.Next() {
		v, err := rows.SliceScan()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(&b, v...)
		n++
	}
	return b.String(), n
}

// TestSweepChildProcess is not a test: TestSweepKill9Resume re-executes the test
// binary with AICDB_SWEEP_CHILD=1 to run the CLI in a child process it can SIGKILL.
func TestSweepChildProcess(t *testing.T) {
	if os.Getenv("AICDB_SWEEP_CHILD") != "1" {
		t.Skip("child-process entry point of TestSweepKill9Resume")
	}
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv("AICDB_SWEEP_ARGS")), &args); err != nil {
		t.Fatal(err)
	}
	// Like main: SIGINT/SIGTERM cancel the context (TestSweepCLIInterruptExit).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, append([]string{"aicdb"}, args...), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// TestSweepKill9Resume runs a sweep in a child process (the re-executed test binary),
// SIGKILLs it mid-way, reruns it, and compares the final content with an
// uninterrupted sweep: no duplicate or partial rows.
func TestSweepKill9Resume(t *testing.T) {
	dir := t.TempDir()
	env := append(os.Environ(), "AICDB_EVALUATOR=synthetic", "AICDB_SWEEP_CHILD=1")
	runBin := func(db string, extra ...string) *exec.Cmd {
		args := append(append([]string{"--db", db}, sweepArgs...), extra...)
		cmd := exec.Command(os.Args[0], "-test.run=^TestSweepChildProcess$")
		enc, _ := json.Marshal(args)
		cmd.Env = append(env, "AICDB_SWEEP_ARGS="+string(enc))
		return cmd
	}
	ref := newStore(t, filepath.Join(dir, "ref.sqlite"))
	if out, err := runBin(ref).CombinedOutput(); err != nil {
		t.Fatalf("reference sweep: %v\n%s", err, out)
	}
	want, total := dumpPoints(t, ref)

	db := newStore(t, filepath.Join(dir, "killed.sqlite"))
	cmd := runBin(db, "--commit-every", "16", "--workers", "2")
	cmd.Env = append(cmd.Env, "AICDB_SYNTHETIC_DELAY=3ms")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once some batches are committed.
	waitForRows(t, cmd, db, 48)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	_, n := dumpPoints(t, db)
	if n == total {
		t.Skipf("the sweep finished before SIGKILL (%v)", werr)
	}
	t.Logf("SIGKILL left %d of %d rows (%v)", n, total, werr)
	if n%16 != 0 {
		t.Fatalf("killed sweep left %d rows: not whole batches of 16", n)
	}
	out, err := runBin(db).CombinedOutput()
	if err != nil || !strings.Contains(string(out), fmt.Sprintf("%d evaluated, %d already stored", total-n, n)) {
		t.Fatalf("rerun after kill at %d rows: %v\n%s", n, err, out)
	}
	if got, _ := dumpPoints(t, db); got != want {
		t.Fatal("content after kill -9 and rerun differs from an uninterrupted sweep")
	}
	// The killed sweep is not left "running": the rerun marked it interrupted
	// (ended_at unknown, NULL) and said so.
	if !strings.Contains(string(out), "1 earlier sweep(s) left running by a killed process marked interrupted") {
		t.Fatalf("rerun did not report the abandoned sweep:\n%s", out)
	}
	st, err := store.Open(context.Background(), db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	sw, err := st.Sweeps(context.Background())
	if err != nil || len(sw) != 2 || sw[0].Status != store.SweepInterrupted || sw[0].EndedAt != "" ||
		sw[0].Error != store.AbandonedSweepError || sw[1].Status != store.SweepDone {
		t.Fatalf("sweeps after kill -9 and rerun: %+v %v", sw, err)
	}
}

// TestQueryDuringSweep runs `aicdb query` (in-process) while a sweep runs in a child
// process: every query succeeds and sees whole committed batches only.
func TestQueryDuringSweep(t *testing.T) {
	t.Setenv("AICDB_EVALUATOR", "synthetic")
	db := filepath.Join(t.TempDir(), "c.sqlite")
	// Create the store first so the reader never races the migrations.
	st, err := store.Open(context.Background(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	args, _ := json.Marshal(append(append([]string{"--db", db}, sweepArgs...), "--commit-every", "32", "--workers", "2"))
	cmd := exec.Command(os.Args[0], "-test.run=^TestSweepChildProcess$")
	cmd.Env = append(os.Environ(), "AICDB_EVALUATOR=synthetic", "AICDB_SWEEP_CHILD=1",
		"AICDB_SYNTHETIC_DELAY=2ms", "AICDB_SWEEP_ARGS="+string(args))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	seen := map[string]bool{}
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("sweep: %v", err)
			}
			code, out, errs := cliRun(t, db, "query", "--format", "csv", "select count(*) from operating_points")
			if code != 0 || out != "count(*)\n352\n" {
				t.Fatalf("after the sweep: code %d out %q err %q", code, out, errs)
			}
			t.Logf("queries during the sweep saw counts %v", seen)
			return
		default:
		}
		code, out, errs := cliRun(t, db, "query", "--format", "csv",
			"select count(*) || '/' || sum(oom = 0 and (ttft is null or ttft_steady_p99 is null)) from operating_points")
		if code != 0 {
			t.Fatalf("query during the sweep: code %d err %q", code, errs)
		}
		v := strings.TrimSpace(strings.TrimPrefix(out, strings.SplitN(out, "\n", 2)[0]+"\n"))
		v = strings.Trim(v, `"`) // a lone NULL prints as "" (a CSV row, not a blank line)
		var n, partial int
		if v != "" && v != "0/" {
			if _, err := fmt.Sscanf(v, "%d/%d", &n, &partial); err != nil {
				t.Fatalf("parse %q: %v", v, err)
			}
		}
		if partial != 0 || (n%32 != 0 && n != 352) {
			t.Fatalf("query during the sweep saw %d rows, %d partial: want whole batches of 32", n, partial)
		}
		seen[v] = true
		time.Sleep(10 * time.Millisecond)
	}
}

// waitForRows polls the store db (written by the child cmd) until it holds at least
// n operating points; it kills the child and fails after 20 s.
func waitForRows(t *testing.T, cmd *exec.Cmd, db string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the sweep never committed a batch")
		}
		time.Sleep(20 * time.Millisecond)
		s, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(1000)")
		if err != nil {
			continue
		}
		var got int
		err = s.QueryRow(`SELECT count(*) FROM operating_points`).Scan(&got)
		s.Close()
		if err == nil && got >= n {
			return
		}
	}
}

// TestSweepModeList: --mode (alias --modes) takes agg, disagg, all or a comma list;
// agg,disagg is all; anything else is a one-line error.
func TestSweepModeList(t *testing.T) {
	for in, want := range map[string]string{"agg": "agg", "disagg": "disagg", "all": "all", "agg,disagg": "all", "disagg, agg": "all", "agg,agg": "agg"} {
		if got, err := sweepMode(in); err != nil || got != want {
			t.Errorf("sweepMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	db := syntheticDB(t)
	code, _, errs := cliRun(t, db, "sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm",
		"--total-gpus", "8", "--isl", "4000", "--osl", "500", "--modes", "agg,static")
	if want := "aicdb: --mode \"agg,static\": use agg, disagg, all or agg,disagg\n"; code != 1 || errs != want {
		t.Fatalf("bad --modes: code %d err %q, want %q", code, errs, want)
	}
}

// TestSweepDeployedVersion: a sweep with --deployed-version stores its rows
// under new keys recording the engine version deployed; deploy names that
// engine; best --deployed-version reads only that version's rows (each
// version swept at its own prompt length, so the two rankings tell apart).
func TestSweepDeployedVersion(t *testing.T) {
	db := syntheticDB(t)
	args := append(slices.Clone(sweepArgs), "--version", "0.22.0") // isl 4000
	code, out, errs := cliRun(t, db, append(args, "--deployed-version", "0.17.0")...)
	if code != 0 || !strings.Contains(out, "352 evaluated, 0 already stored") {
		t.Fatalf("deployed sweep: code %d out %q err %q", code, out, errs)
	}
	code, out, errs = cliRun(t, db, append(args, "--isl", "2000")...)
	if code != 0 || !strings.Contains(out, "692 evaluated, 0 already stored") {
		t.Fatalf("sweep at the priced version: code %d out %q err %q", code, out, errs)
	}
	got := queryCSV(t, db, "select version, deployed_version, isl, count(*) from points group by 1, 2, 3 order by 2")
	if got != "version,deployed_version,isl,count(*)\n0.22.0,0.17.0,4000,352\n0.22.0,0.22.0,2000,692" {
		t.Errorf("stored rows by deployed version:\n%s", got)
	}
	row := strings.TrimPrefix(queryCSV(t, db, "select min(rowid) from operating_points where deployed_version = '0.17.0'"), "min(rowid)\n")
	code, out, errs = cliRun(t, db, "deploy", row)
	if code != 0 || !strings.Contains(out, "vllm 0.17.0 (priced at perf-data version 0.22.0)") {
		t.Errorf("deploy of a deployed-version row: %d %q %q, want it to name the engine deployed", code, out, errs)
	}
	code, _, errs = cliRun(t, db, "best", "--deployed-version", "0.18.0", "--ttft", "1e6", "--format", "csv")
	if code != 1 || !strings.Contains(errs, "no stored points match the filters") {
		t.Errorf("best --deployed-version 0.18.0 (no rows): %d %q", code, errs)
	}
	best := func(args ...string) string {
		t.Helper()
		code, out, errs := cliRun(t, db, append([]string{"best", "--ttft", "1e6", "--top", "1000", "--format", "csv"}, args...)...)
		if code != 0 || strings.Count(out, "\n") < 2 {
			t.Fatalf("best %v: %d %q %q", args, code, out, errs)
		}
		return out
	}
	at17, at22 := best("--deployed-version", "0.17.0"), best("--deployed-version", "0.22.0")
	if at17 != best("--isl", "4000") || at22 != best("--isl", "2000") || at17 == at22 {
		t.Errorf("best --deployed-version: 0.17.0 ranks\n%s0.22.0 ranks\n%swant each version's own rows (its sweep's prompt length)", at17, at22)
	}
}
