package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aicdb/aicdb/store"
)

// TestSweepCLITwoAtOnce runs the same sweep twice at once on one store, in two child
// processes (the re-executed test binary), the second started while the first is
// mid-way: every point is evaluated once in total (the sweeps' points_evaluated sum
// to the point count), both end done (neither is marked interrupted with a "killed
// process" note), and the second says on one stderr line that it waited and reused
// the first's rows.
func TestSweepCLITwoAtOnce(t *testing.T) {
	db := filepath.Join(t.TempDir(), "two.sqlite")
	st, err := store.Open(context.Background(), db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	child := func(delay string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
		args, _ := json.Marshal(append(append([]string{"--db", db}, sweepArgs...), "--commit-every", "16", "--workers", "2"))
		cmd := exec.Command(os.Args[0], "-test.run=^TestSweepChildProcess$")
		cmd.Env = append(os.Environ(), "AICDB_EVALUATOR=synthetic", "AICDB_SWEEP_CHILD=1",
			"AICDB_SYNTHETIC_DELAY="+delay, "AICDB_SWEEP_ARGS="+string(args))
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &stdout, &stderr
	}
	first, out1, err1 := child("6ms") // about 1 s of work left when the second starts
	waitForRows(t, first, db, 16)
	// points_total is recorded when the sweep starts (main set it only at the end).
	if code, out, _ := cliRun(t, db, "query", "--format", "csv", "select status, points_total from sweeps"); code != 0 || out != "status,points_total\nrunning,352\n" {
		t.Errorf("sweeps while the first runs: %q, want running,352", out)
	}
	second, out2, err2 := child("3ms")
	if err := second.Wait(); err != nil {
		t.Fatalf("second sweep: %v\n%s%s", err, out2, err2)
	}
	if err := first.Wait(); err != nil {
		t.Fatalf("first sweep: %v\n%s%s", err, out1, err1)
	}
	code, out, _ := cliRun(t, db, "query", "--format", "csv",
		"select group_concat(status, ' ') as s, sum(points_evaluated) as evaluated, sum(error is not null) as errors, min(points_total) as total from sweeps")
	if code != 0 || out != "s,evaluated,errors,total\ndone done,352,0,352\n" {
		t.Fatalf("sweeps after two at once: %q (want both done, 352 points evaluated in total)", out)
	}
	if strings.Contains(err1.String()+err2.String(), "killed") {
		t.Fatalf("a live sweep was reported killed:\n%s\n%s", err1, err2)
	}
	var notes []string
	for _, l := range strings.Split(err2.String(), "\n") {
		if strings.HasPrefix(l, "aicdb: ") {
			notes = append(notes, l)
		}
	}
	if len(notes) == 0 {
		// On a loaded machine the first sweep may end before the second starts: then
		// there is nothing to wait for, and the second started after the first ended.
		st, err := store.Open(context.Background(), db, store.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		sw, err := st.Sweeps(context.Background())
		st.Close()
		if err != nil || len(sw) != 2 || parseTime(t, sw[1].StartedAt).Before(parseTime(t, sw[0].EndedAt)) {
			t.Fatalf("the second sweep overlapped the first without waiting: %+v %v", sw, err)
		}
		t.Logf("the first sweep ended before the second started: %+v", sw)
	} else if len(notes) != 1 || !strings.Contains(notes[0], "waiting for it to finish, then reusing its rows") {
		t.Fatalf("second sweep's stderr %q: want one line saying it waits and reuses the rows", err2)
	}
	if !strings.Contains(out2.String(), "0 evaluated, 352 already stored") {
		t.Fatalf("second sweep's stdout %q", out2)
	}
}

func parseTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
