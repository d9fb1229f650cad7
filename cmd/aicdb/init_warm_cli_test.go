package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestInitWarmsSnapshots: init builds the perf-data snapshot of each backend's
// newest embedded version and says so on stderr; an eval of that version then
// reads it (no snapshot of its own written); --no-warm builds none, and
// --quiet keeps the line off stderr.
func TestInitWarmsSnapshots(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "w.sqlite")
	snaps := func() []string {
		m, err := filepath.Glob(db + ".perfcache/*.snap")
		if err != nil {
			t.Fatal(err)
		}
		for i := range m {
			m[i] = filepath.Base(m[i])
		}
		return m
	}
	code, _, stderr := runPerfdbCLI(t, "--db", db, "init")
	want := "aicdb: init: perf-data snapshots of h200_sxm: vllm 0.24.0, trtllm 1.3.0rc20, sglang 0.5.14 ("
	if code != 0 || !strings.Contains(stderr, want) {
		t.Fatalf("init: code %d stderr %q, want a line with %q", code, stderr, want)
	}
	warm := strings.Join(snaps(), " ")
	if warm != "h200_sxm_sglang_0.5.14_shared_all.snap h200_sxm_trtllm_1.3.0rc20_shared_all.snap h200_sxm_vllm_0.24.0_shared_all.snap" {
		t.Errorf("snapshots after init: %s", warm)
	}
	if code, _, stderr := runPerfdbCLI(t, "--db", db, "eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm",
		"--backend", "vllm", "--tp", "2", "--concurrency", "4", "--isl", "512", "--osl", "32"); code != 0 {
		t.Fatalf("eval: code %d stderr %q", code, stderr)
	}
	if got := strings.Join(snaps(), " "); got != warm {
		t.Errorf("eval after init wrote a snapshot: %s, want %s", got, warm)
	}

	quiet := filepath.Join(dir, "q.sqlite")
	if code, _, stderr := runPerfdbCLI(t, "--db", quiet, "init", "--quiet"); code != 0 || strings.Contains(stderr, "snapshots") {
		t.Errorf("init --quiet: code %d stderr %q", code, stderr)
	}
	db = filepath.Join(dir, "n.sqlite")
	if code, _, stderr := runPerfdbCLI(t, "--db", db, "init", "--no-warm"); code != 0 || strings.Contains(stderr, "snapshots") {
		t.Errorf("init --no-warm: code %d stderr %q", code, stderr)
	}
	if got := snaps(); len(got) != 0 {
		t.Errorf("init --no-warm built snapshots %v", got)
	}
}
