package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestPlotTimeline: a stored replay plots as PNG and SVG with one point per window
// of the series `trace replay --by second` prints; renders are deterministic; a
// missing replay, a bad id and a bad --by are one-line errors.
func TestPlotTimeline(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.sqlite")
	eng := linearVLLMEngine(t, dir)
	if code, _, errs := runTraceCLI(t, "--db", db, "trace", "import", "../../trace/testdata/mooncake_conversation_head.jsonl", "--name", "conv"); code != 0 {
		t.Fatal(errs)
	}
	pngPath := filepath.Join(dir, "t.png")
	code, _, errs := runTraceCLI(t, "--db", db, "plot", "timeline", "--out", pngPath)
	if want := "aicdb: plot timeline: the store has no replay: run aicdb trace replay first\n"; code != 1 || errs != want {
		t.Fatalf("no replay: exit %d %q, want %q", code, errs, want)
	}
	code, out, errs := runTraceCLI(t, "--db", db, "trace", "replay", "conv", "--engine", eng, "--limit", "60", "--by", "second")
	var rep struct {
		Series []json.RawMessage `json:"series"`
	}
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || len(rep.Series) < 2 {
		t.Fatalf("replay: exit %d %v\n%s%s", code, err, out, errs)
	}
	code, out, errs = runTraceCLI(t, "--db", db, "plot", "timeline", "--out", pngPath, "--by", "second", "--width", "600", "--height", "700")
	if want := fmt.Sprintf("wrote %s (replay 1, %d windows)\n", pngPath, len(rep.Series)); code != 0 || out != want {
		t.Fatalf("plot timeline: exit %d\n got %q\nwant %q\n%s", code, out, want, errs)
	}
	checkPNG(t, pngPath, 600, 700)
	again := filepath.Join(dir, "again.png")
	if code, _, errs := runTraceCLI(t, "--db", db, "plot", "timeline", "--replay", "1", "--out", again, "--by", "second", "--width", "600", "--height", "700"); code != 0 {
		t.Fatal(errs)
	}
	a, _ := os.ReadFile(pngPath)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Fatal("two renders of the same timeline differ")
	}
	svgPath := filepath.Join(dir, "t.svg")
	if code, _, errs := runTraceCLI(t, "--db", db, "plot", "timeline", "--out", svgPath); code != 0 {
		t.Fatal(errs)
	}
	raw, _ := os.ReadFile(svgPath)
	if err := xml.Unmarshal(raw, new(struct{})); err != nil || !bytes.Contains(raw, []byte("TTFT p99 (ms)")) {
		t.Fatalf("SVG does not parse or lacks the TTFT panel: %v", err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--replay", "7"}, "aicdb: plot timeline: --replay 7: no such replay (aicdb query \"select id from replays\" lists them)\n"},
		{[]string{"--replay", "0"}, "aicdb: plot timeline: --replay 0: give a replay id > 0 (aicdb query \"select id from replays\")\n"},
		{[]string{"--by", "day"}, "aicdb: plot timeline: --by \"day\": must be second, minute or hour\n"},
	} {
		code, _, errs := runTraceCLI(t, append([]string{"--db", db, "plot", "timeline", "--out", pngPath}, c.args...)...)
		if code != 1 || errs != c.want {
			t.Errorf("%v: exit %d\n got %q\nwant %q", c.args, code, errs, c.want)
		}
	}
}
