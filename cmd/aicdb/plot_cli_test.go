package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"image/png"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/storetest"
)

// checkPNG fails the test unless path is a PNG that decodes to w × h pixels.
func checkPNG(t *testing.T, path string, w, h int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatalf("%s does not decode as PNG: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != w || b.Dy() != h {
		t.Fatalf("%s is %dx%d, want %dx%d", path, b.Dx(), b.Dy(), w, h)
	}
}

// sweptDB is a synthetic store with the sweepArgs sweep in it.
func sweptDB(t *testing.T) string {
	t.Helper()
	db := syntheticDB(t)
	if code, out, errs := cliRun(t, db, sweepArgs...); code != 0 {
		t.Fatalf("sweep: code %d out %q err %q", code, out, errs)
	}
	return db
}

func TestPlotParetoPNGAndSVG(t *testing.T) {
	db := sweptDB(t)
	dir := t.TempDir()
	pngPath := filepath.Join(dir, "p.png")
	code, out, errs := cliRun(t, db, "plot", "pareto", "--out", pngPath, "--width", "640", "--height", "420")
	if code != 0 || !strings.HasPrefix(out, "wrote "+pngPath) {
		t.Fatalf("plot pareto png: code %d out %q err %q", code, out, errs)
	}
	checkPNG(t, pngPath, 640, 420)

	// Deterministic: the same store and flags give the same bytes.
	again := filepath.Join(dir, "again.png")
	if code, _, errs := cliRun(t, db, "plot", "pareto", "--out", again, "--width", "640", "--height", "420"); code != 0 {
		t.Fatalf("second plot: %s", errs)
	}
	a, _ := os.ReadFile(pngPath)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Fatal("two renders of the same plot differ")
	}

	svgPath := filepath.Join(dir, "p.svg")
	if code, out, errs := cliRun(t, db, "plot", "pareto", "--out", svgPath, "--ttft", "1e9"); code != 0 {
		t.Fatalf("plot pareto svg: code %d out %q err %q", code, out, errs)
	}
	data, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	dec := xml.NewDecoder(bytes.NewReader(data))
	var root string
	for root == "" {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("SVG is not XML: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			root = se.Name.Local
		}
	}
	if root != "svg" {
		t.Fatalf("SVG root element %q, want svg", root)
	}
	for {
		if _, err := dec.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("SVG does not parse to the end: %v", err)
			}
			break
		}
	}
	if !bytes.Contains(data, []byte("rows filtered by SLA TTFT p99")) {
		t.Fatalf("SVG title does not say the SLA filtered the rows")
	}
	// The SQL first and the flags after it, as one types them.
	sqlPath := filepath.Join(dir, "q.png")
	if code, out, errs := cliRun(t, db, "plot", "pareto", "select tokens_per_s_per_gpu, tokens_per_s_per_user, mode from pareto", "--out", sqlPath); code != 0 || !strings.Contains(out, "wrote "+sqlPath) {
		t.Fatalf("plot pareto SQL --out: code %d out %q err %q", code, out, errs)
	}
}

// TestPlotParetoPointsAreTheView checks that the plotted points are exactly the
// pareto view's rows.
func TestPlotParetoPointsAreTheView(t *testing.T) {
	db := sweptDB(t)
	ctx := context.Background()
	st, err := store.Open(ctx, db, store.Options{ReadOnly: true, MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pts, err := paretoPoints(ctx, st, store.ParetoQuery)
	if err != nil {
		t.Fatal(err)
	}
	var want []plotPoint
	if err := storetest.DB(t, st).SelectContext(ctx, &want, `SELECT tokens_per_s_per_user AS x, tokens_per_s_per_gpu AS y, mode FROM pareto`); err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("the synthetic sweep left the pareto view empty")
	}
	key := func(p []plotPoint) []plotPoint {
		q := append([]plotPoint{}, p...)
		sort.Slice(q, func(i, j int) bool {
			if q[i].X != q[j].X {
				return q[i].X < q[j].X
			}
			return q[i].Y < q[j].Y
		})
		return q
	}
	g, w := key(pts), key(want)
	if len(g) != len(w) {
		t.Fatalf("plotted %d points, the pareto view has %d rows", len(g), len(w))
	}
	for i := range g {
		if g[i] != w[i] {
			t.Fatalf("point %d: plotted %+v, view row %+v", i, g[i], w[i])
		}
	}
}

func TestPlotErrors(t *testing.T) {
	db := sweptDB(t)
	empty := newStore(t, filepath.Join(t.TempDir(), "empty.sqlite"))
	dir := t.TempDir()
	cases := []struct {
		name string
		db   string
		args []string
		want string
	}{
		{"extension", db, []string{"plot", "pareto", "--out", filepath.Join(dir, "p.jpg")}, `the extension must be .png or .svg`},
		{"no points", empty, []string{"plot", "pareto", "--out", filepath.Join(dir, "p.png")}, `has no points: run aicdb sweep first`},
		{"empty result", db, []string{"plot", "pareto", "--out", filepath.Join(dir, "p.png"), "--ttft", "0.000001"}, `returned no plottable rows`},
		{"missing column", db, []string{"plot", "pareto", "--out", filepath.Join(dir, "p.png"), "select mode from pareto"}, `returns no column tokens_per_s_per_user`},
		{"write SQL", db, []string{"plot", "pareto", "--out", filepath.Join(dir, "p.png"), "delete from operating_points"}, `must be read-only`},
		{"cdf no selector", db, []string{"plot", "cdf", "--out", filepath.Join(dir, "c.png")}, `exactly one of --key PREFIX or --rowid N`},
		{"cdf unknown", db, []string{"plot", "cdf", "--out", filepath.Join(dir, "c.png"), "--rowid", "999999"}, `no such point`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errs := cliRun(t, c.db, c.args...)
			if code != exitUser || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
				t.Fatalf("code %d stderr %q, want exit %d and one line containing %q", code, errs, exitUser, c.want)
			}
		})
	}
}

func TestPlotCDF(t *testing.T) {
	db := sweptDB(t)
	// Resolve the quantitative tier of the agg rows (the synthetic evaluator's
	// straddlers) through a percentile filter, then plot one stored point.
	if code, out, errs := cliRun(t, db, "query", "--format", "csv", "select count(*) from points where ttft_steady_p99 < 1e9"); code != 0 {
		t.Fatalf("query: code %d out %q err %q", code, out, errs)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, db, store.Options{ReadOnly: true, MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	err = storetest.DB(t, st).SelectContext(ctx, &keys, `SELECT key FROM quantitative_results ORDER BY key LIMIT 1`)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Skip("no quantitative row stored by the synthetic sweep")
	}
	out := filepath.Join(t.TempDir(), "c.png")
	if code, o, errs := cliRun(t, db, "plot", "cdf", "--out", out, "--key", keys[0][:10]); code != 0 {
		t.Fatalf("plot cdf: code %d out %q err %q", code, o, errs)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("PNG does not decode: %v", err)
	}
	if b := img.Bounds(); b.Dx() != 800 || b.Dy() != 500 {
		t.Fatalf("PNG is %dx%d, want the default 800x500", b.Dx(), b.Dy())
	}
}

func TestCDFOf(t *testing.T) {
	xy, ok := cdfOf([]storedAtom{{30, 1}, {10, 3}, {20, 0}})
	if !ok {
		t.Fatal("cdfOf refused valid atoms")
	}
	want := []float64{10, 0, 10, 0.75, 30, 0.75, 30, 1}
	if len(xy) != 4 {
		t.Fatalf("got %d steps, want 4: %v", len(xy), xy)
	}
	for i, p := range xy {
		if p.X != want[2*i] || p.Y != want[2*i+1] {
			t.Fatalf("step %d = %v, want (%v, %v)", i, p, want[2*i], want[2*i+1])
		}
	}
	var both map[string][]storedAtom
	if err := json.Unmarshal([]byte(`{"a":[[1,0.5]],"b":[{"value":2,"weight":0.25}]}`), &both); err != nil {
		t.Fatalf("stored atom shapes do not decode: %v", err)
	}
	if both["a"][0] != (storedAtom{1, 0.5}) || both["b"][0] != (storedAtom{2, 0.25}) {
		t.Fatalf("decoded %v", both)
	}
	if err := json.Unmarshal([]byte(`[{"value":2}]`), new([]storedAtom)); err == nil {
		t.Fatal("an atom without weight decoded")
	}
	if _, ok := cdfOf(nil); ok {
		t.Fatal("cdfOf accepted no atoms")
	}
}

// TestPlotCDFDisagg: a disaggregated row's stored distributions sit beside
// scalars (p_queue_ms_p99, d_headroom_min, multi_stable); plot cdf draws its
// TTFT and ITL instead of failing to decode them (it exited 2).
func TestPlotCDFDisagg(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a perf-data sweep")
	}
	db := initDB(t)
	if code, out, errs := cliRun(t, db, "sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--total-gpus", "2",
		"--isl", "1000", "--osl", "100", "--tp", "1", "--mode", "disagg", "--decode-batch", "4", "--quiet"); code != 0 {
		t.Fatalf("sweep: %d %q %q", code, out, errs)
	}
	// best reports its rows at the quantitative tier (stored).
	if code, out, errs := cliRun(t, db, "best", "--ttft", "100000", "--top", "2"); code != 0 {
		t.Fatalf("best: %d %q %q", code, out, errs)
	}
	code, out, _ := cliRun(t, db, "query", "--format", "csv",
		"select o.key from operating_points o join quantitative_results q on q.key = o.key where o.mode = 'disagg' limit 1")
	key := strings.TrimSpace(strings.TrimPrefix(out, "key\n"))
	if code != 0 || len(key) < 12 {
		t.Fatalf("no disaggregated quantitative row: %q", out)
	}
	png := filepath.Join(t.TempDir(), "d.png")
	if code, o, errs := cliRun(t, db, "plot", "cdf", "--out", png, "--key", key[:12]); code != 0 || !strings.Contains(o, "wrote "+png) {
		t.Fatalf("plot cdf of a disaggregated row: code %d out %q err %q", code, o, errs)
	}
}
