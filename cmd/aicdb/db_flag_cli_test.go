package main

import (
	"path/filepath"
	"testing"
)

// TestDBFlagAfterCommand: the global --db is accepted after the command (and after
// its positional arguments) too, and wins over the one before it (U16); without
// it the global value (flag or AICDB_DB) is used as before.
func TestDBFlagAfterCommand(t *testing.T) {
	db := newStore(t, filepath.Join(t.TempDir(), "a.sqlite"))
	missing := filepath.Join(t.TempDir(), "missing.sqlite")
	for _, args := range [][]string{
		{"query", "select 1 as one", "--db", db},
		{"query", "--db", db, "select 1 as one"},
		{"perfdb", "ls", "systems", "--db", db},
		{"perfdb", "--db", db, "ls", "systems"},
		{"perfdb", "ls", "--db=" + db, "systems"},
		{"trace", "ls", "--db", db},
		{"deploy", "1", "--db", db},
	} {
		code, _, errs := cliRun(t, missing, args...)
		want := 0
		if args[0] == "deploy" {
			want = 1 // the store is found: no such row
		}
		if code != want || (want == 0 && errs != "") || (want == 1 && errs != "aicdb: deploy row 1: no such operating point; list rows with aicdb query\n") {
			t.Errorf("%v: exit %d stderr %q", args, code, errs)
		}
	}
	t.Setenv("AICDB_DB", db)
	if code, _, errs := runPerfdbCLI(t, "query", "select 1"); code != 0 {
		t.Errorf("AICDB_DB without --db: exit %d stderr %q", code, errs)
	}
}
