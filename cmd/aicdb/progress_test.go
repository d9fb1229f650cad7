package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func testReporter(tty, quiet bool) (*progressReporter, *strings.Builder, *fakeClock) {
	var b strings.Builder
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	return &progressReporter{w: &b, what: "sweep", unit: "points", interval: 5 * time.Second, now: clk.now, begun: clk.t, tty: tty, quiet: quiet}, &b, clk
}

// TestProgressLines: without a terminal, one line per interval with done/total,
// the rate of new work since the start and the ETA; nothing between.
func TestProgressLines(t *testing.T) {
	p, b, clk := testReporter(false, false)
	p.Update(200, 1200) // 200 already stored
	clk.advance(2 * time.Second)
	p.Update(300, 1200) // within the interval: nothing
	clk.advance(3 * time.Second)
	p.Update(450, 1200) // 5 s: 250 new points → 50/s, 750 left → 15 s
	clk.advance(4 * time.Second)
	p.Update(600, 1200) // 4 s after the last line: nothing
	clk.advance(11 * time.Second)
	p.Update(1200, 1200) // 20 s, 1000 new points → 50/s
	p.Done()
	want := "aicdb: sweep: 450/1200 points (37.5%), 50 points/s, ETA 15s\n" +
		"aicdb: sweep: 1200/1200 points (100.0%), 50 points/s, ETA 0s\n"
	if b.String() != want {
		t.Fatalf("progress output:\n%q\nwant\n%q", b.String(), want)
	}
}

// TestProgressShortWorkQuiet: work that ends within the first interval prints
// nothing; a slow start says ETA unknown, a slow rate keeps two decimals.
func TestProgressShortWorkQuiet(t *testing.T) {
	p, b, clk := testReporter(false, false)
	p.Update(0, 10)
	clk.advance(time.Second)
	p.Update(10, 10)
	p.Done()
	if b.String() != "" {
		t.Fatalf("short work printed %q", b.String())
	}
	p, b, clk = testReporter(false, false)
	p.Update(0, 10)
	clk.advance(6 * time.Second)
	p.Update(0, 10)
	clk.advance(10 * time.Second)
	p.Update(1, 10)
	want := "aicdb: sweep: 0/10 points (0.0%), ETA unknown\n" +
		"aicdb: sweep: 1/10 points (10.0%), 0.06 points/s, ETA 2m24s\n"
	if b.String() != want {
		t.Fatalf("slow work:\n%q\nwant\n%q", b.String(), want)
	}
}

// TestProgressQuietAndBig: --quiet silences the lines; work over 100k items is
// stated at its start, quiet or not.
func TestProgressQuietAndBig(t *testing.T) {
	p, b, clk := testReporter(false, true)
	p.Update(1000, 250_000)
	for i := range 10 {
		clk.advance(10 * time.Second)
		p.Update(1000+i*1000, 250_000)
	}
	p.Done()
	want := "aicdb: sweep: 250000 points, 1000 already done; progress on stderr every 5s (--quiet silences it)\n"
	if b.String() != want {
		t.Fatalf("quiet big work printed %q, want %q", b.String(), want)
	}
	p, b, _ = testReporter(false, false)
	p.Update(0, 100_000)
	if b.String() != "" {
		t.Fatalf("100k points stated: %q", b.String())
	}
	var nilp *progressReporter
	nilp.Update(1, 2)
	nilp.Done()
}

// TestProgressTerminal: on a terminal one line is redrawn in place (at most every
// 250 ms, and at the end) and ended by Done.
func TestProgressTerminal(t *testing.T) {
	p, b, clk := testReporter(true, false)
	p.Update(0, 100)
	clk.advance(time.Second)
	p.Update(50, 100)
	clk.advance(100 * time.Millisecond)
	p.Update(60, 100) // within 250 ms: not drawn
	clk.advance(100 * time.Millisecond)
	p.Update(100, 100) // the end is always drawn
	p.Done()
	want := "\rsweep: 50/100 points (50.0%), 50 points/s, ETA 1s" +
		"\rsweep: 100/100 points (100.0%), 83 points/s, ETA 0s\n"
	if b.String() != want {
		t.Fatalf("terminal output:\n%q\nwant\n%q", b.String(), want)
	}
}

// TestSweepCLIQuiet: sweep takes --quiet (its progress reporter reads it).
func TestSweepCLIQuiet(t *testing.T) {
	db := syntheticDB(t)
	code, out, errs := cliRun(t, db, append(sweepArgs, "--quiet")...)
	if code != 0 || errs != "" || !strings.Contains(out, "352 evaluated") {
		t.Fatalf("sweep --quiet: code %d out %q err %q", code, out, errs)
	}
}

// TestRefineProgress: a refinement reports its quantitative evaluations against
// the number of straddlers the funnel announced (refine.EvaluationObserver).
func TestRefineProgress(t *testing.T) {
	p, b, clk := testReporter(false, false)
	p.what = "refine"
	l := newLazyEvaluator(nil).withProgress(p)
	l.once.Do(func() { l.ev = refine.Synthetic{} })
	var ev refine.Evaluator = l
	if _, ok := ev.(refine.EvaluationObserver); !ok {
		t.Fatal("the CLI's lazy evaluator does not observe refinement progress")
	}
	l.ExpectEvaluations(4)
	in := store.PointInputs{Model: "m", System: "s", Backend: "vllm", Mode: store.ModeAgg, TP: 1, PP: 1, DP: 1, MoETP: 1, MoEEP: 1, Batch: 1, ISL: 100, OSL: 10}
	for range 4 {
		clk.advance(3 * time.Second)
		_, _ = l.Quantitative(context.Background(), in) // the count, not the result, is under test
	}
	p.Done()
	want := "aicdb: refine: 2/4 points (50.0%), 0.33 points/s, ETA 6s\n" +
		"aicdb: refine: 4/4 points (100.0%), 0.33 points/s, ETA 0s\n"
	if b.String() != want {
		t.Fatalf("refine progress:\n%q\nwant\n%q", b.String(), want)
	}
}

// TestImportCLIQuietFlag: init and perfdb import accept --quiet (perfdb import also
// after PATH) and print nothing on stderr. That a quiet reporter prints no progress
// however long the work is, is TestProgressQuietAndBig's.
func TestImportCLIQuietFlag(t *testing.T) {
	db := filepath.Join(t.TempDir(), "q.sqlite")
	if code, _, errs := runPerfdbCLI(t, "--db", db, "init", "--quiet"); code != 0 || errs != "" {
		t.Fatalf("init --quiet: code %d stderr %q", code, errs)
	}
	fx := filepath.Join("..", "..", "testdata", "aic", "systems")
	for _, args := range [][]string{{"perfdb", "import", "--quiet", fx}, {"perfdb", "import", fx, "--quiet"}} {
		if code, out, errs := runPerfdbCLI(t, append([]string{"--db", db}, args...)...); code != 0 || errs != "" || !strings.Contains(out, "systems [fx]") {
			t.Fatalf("%v: code %d out %q stderr %q", args, code, out, errs)
		}
	}
}

// TestProgressSummary: the final line states the counts and the wall time since
// the reporter was made, after ending a terminal line; --quiet prints nothing.
func TestProgressSummary(t *testing.T) {
	p, b, clk := testReporter(false, false)
	p.what = "trace replay conv"
	clk.advance(1500 * time.Millisecond)
	p.Summary("%d requests, %d unfinished", 120, 0)
	if want := "aicdb: trace replay conv: 120 requests, 0 unfinished; 1.5 s wall\n"; b.String() != want {
		t.Fatalf("summary %q, want %q", b.String(), want)
	}
	p, b, clk = testReporter(true, false)
	p.Update(0, 10)
	clk.advance(time.Second)
	p.Update(10, 10)
	p.Summary("%d points", 10)
	if want := "\rsweep: 10/10 points (100.0%), 10 points/s, ETA 0s\naicdb: sweep: 10 points; 1.0 s wall\n"; b.String() != want {
		t.Fatalf("terminal summary %q, want %q", b.String(), want)
	}
	p, b, _ = testReporter(false, true)
	p.Summary("%d points", 10)
	var nilp *progressReporter
	nilp.Summary("x")
	if b.String() != "" {
		t.Fatalf("quiet summary printed %q", b.String())
	}
}
