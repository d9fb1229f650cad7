package oracle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/oracle"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// runScenarioFile runs one scenario file and returns its indented JSON output.
func runScenarioFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := oracle.ParseScenario(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	res, err := sc.Run(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out, err := json.MarshalIndent(res.Output(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, '\n')
}

// TestScenarioGolden runs every testdata/scenarios/*.json and compares its output with
// the hand-checked *.golden next to it (-update rewrites them; re-check by hand).
func TestScenarioGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/scenarios/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			got := runScenarioFile(t, f)
			golden := strings.TrimSuffix(f, ".json") + ".golden"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from %s:\n%s", f, golden, got)
			}
		})
	}
}
