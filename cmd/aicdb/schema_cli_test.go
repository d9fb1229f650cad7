package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateSchema = flag.Bool("update-schema", false, "rewrite the generated section of docs/schema.md from 'aicdb schema'")

// Markers around the generated section of docs/schema.md.
const (
	schemaBegin = "<!-- BEGIN aicdb schema: generated, checked by TestSchemaDocUpToDate (go test ./cmd/aicdb -run TestSchemaDocUpToDate -update-schema rewrites it) -->\n"
	schemaEnd   = "<!-- END aicdb schema -->\n"
)

// TestSchemaDocUpToDate regenerates the schema reference with `aicdb schema`
// and compares it with the generated section of docs/schema.md.
func TestSchemaDocUpToDate(t *testing.T) {
	code, out, errOut := runCLI(t, "schema")
	if code != 0 {
		t.Fatalf("aicdb schema: exit %d: %s", code, errOut)
	}
	// Every table a migration creates and every view is listed.
	for _, want := range []string{"#### `operating_points` (`migrations/00003_points.sql`)", "#### `perf_sources` (`migrations/00002_perf.sql`)",
		"#### `pareto` (`views/100_points.sql`)", "#### `points` (`views/100_points.sql`)", "| `ttft_steady_p99` | REAL |"} {
		if !strings.Contains(out, want) {
			t.Errorf("aicdb schema lacks %q", want)
		}
	}
	if strings.Contains(out, "goose_db_version") {
		t.Error("aicdb schema lists goose's bookkeeping table")
	}
	path := filepath.Join("..", "..", "docs", "schema.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	i, j := strings.Index(text, schemaBegin), strings.Index(text, schemaEnd)
	if i < 0 || j < i {
		t.Fatalf("docs/schema.md has no generated section between %q and %q", schemaBegin, schemaEnd)
	}
	got := text[i+len(schemaBegin) : j]
	if got == out {
		return
	}
	if *updateSchema {
		if err := os.WriteFile(path, []byte(text[:i+len(schemaBegin)]+out+text[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("docs/schema.md is stale: its generated section differs from 'aicdb schema' (go test ./cmd/aicdb -run TestSchemaDocUpToDate -update-schema rewrites it)")
}
