package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSweepCLIInterruptExit sends SIGINT (Ctrl-C) to a sweep in a child process:
// it exits 1 (not 2, an internal error) with one line saying it was interrupted and
// how to resume, records status interrupted, and the rerun resumes it.
func TestSweepCLIInterruptExit(t *testing.T) {
	db := newStore(t, filepath.Join(t.TempDir(), "i.sqlite"))
	args, _ := json.Marshal(append(append([]string{"--db", db}, sweepArgs...), "--commit-every", "16", "--workers", "2"))
	cmd := exec.Command(os.Args[0], "-test.run=^TestSweepChildProcess$")
	cmd.Env = append(os.Environ(), "AICDB_EVALUATOR=synthetic", "AICDB_SWEEP_CHILD=1",
		"AICDB_SYNTHETIC_DELAY=3ms", "AICDB_SWEEP_ARGS="+string(args))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitForRows(t, cmd, db, 32)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	werr := cmd.Wait()
	var ee *exec.ExitError
	if werr == nil {
		t.Skipf("the sweep finished before SIGINT: %s", stdout.String())
	}
	if !errors.As(werr, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("interrupted sweep: %v, want exit code 1; stderr %q", werr, stderr.String())
	}
	// The child is the test binary: keep only aicdb's own line.
	var lines []string
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.HasPrefix(l, "aicdb: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "interrupted") || !strings.Contains(lines[0], "re-run the same command to resume") {
		t.Fatalf("stderr %q: want one line saying interrupted and how to resume", stderr.String())
	}
	code, out, _ := cliRun(t, db, "query", "--format", "csv", "select status, ended_at is not null from sweeps")
	if code != 0 || out != "status,ended_at is not null\ninterrupted,1\n" {
		t.Fatalf("sweeps table after Ctrl-C: %q", out)
	}
	t.Setenv("AICDB_EVALUATOR", "synthetic")
	code, out, errs := cliRun(t, db, sweepArgs...)
	if code != 0 || !strings.Contains(out, "already stored") || strings.Contains(out, "0 already stored") || errs != "" {
		t.Fatalf("rerun after Ctrl-C: code %d out %q err %q", code, out, errs)
	}
	_, out, _ = cliRun(t, db, "query", "--format", "csv", "select group_concat(status, ' ') as s from sweeps")
	if out != "s\ninterrupted done\n" {
		t.Fatalf("sweeps after resume: %q", out)
	}
}
