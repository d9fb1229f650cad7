package main

// aicdb plot (issue 10, "Plots"): the Pareto frontier of a store and the latency
// CDF of one stored point, as PNG or SVG (by the --out extension), drawn with
// gonum.org/v1/plot.

import (
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/aicdb/aicdb/store"
)

func plotCommand() *cli.Command {
	common := func() []cli.Flag {
		return []cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "the image `FILE` (.png or .svg); required"}, // checked by plotOut, after flags that follow plot pareto's SQL
			&cli.IntFlag{Name: "width", Value: 800, Usage: "image width in `PX` (SVG: points)"},
			&cli.IntFlag{Name: "height", Value: 500, Usage: "image height in `PX` (SVG: points)"},
		}
	}
	return &cli.Command{
		Name:  "plot",
		Usage: "draw the Pareto frontier, one point's latency CDF or a replay's timeline as PNG or SVG",
		Subcommands: []*cli.Command{
			{
				Name:      "pareto",
				Usage:     "tokens/s/GPU vs tokens/s/user of the pareto view (or of SQL returning those columns and mode)",
				ArgsUsage: "[SQL]",
				Description: `Plots the rows of the pareto view, agg and disagg marked differently.
SQL, if given, must return the columns tokens_per_s_per_user, tokens_per_s_per_gpu and mode.
An SLA cannot be drawn on throughput axes: --ttft/--itl filter the pareto rows by
ttft_steady_p99/itl_p99 instead, and the title says so. As in aicdb query, rows whose
screening bracket straddles a threshold are resolved first (persisted in the store).`,
				Flags: append(common(),
					&cli.Float64Flag{Name: "ttft", Usage: "keep only rows with ttft_steady_p99 ≤ `MS`"},
					&cli.Float64Flag{Name: "itl", Usage: "keep only rows with itl_p99 ≤ `MS`"},
					quietFlag(),
				),
				Action: runPlotPareto,
			},
			{
				Name:  "cdf",
				Usage: "the TTFT (and ITL) CDF of one point from its stored quantitative distributions, the screening tier's TTFT p99 bracket and, with --oracle, the DES's CDFs",
				Flags: append(common(),
					&cli.StringFlag{Name: "key", Usage: "the point's key or a unique `PREFIX` of it"},
					&cli.Int64Flag{Name: "rowid", Usage: "the point's rowid in operating_points"},
					&cli.BoolFlag{Name: "oracle", Usage: "also simulate the point in the oracle (the DES, driven as the gate drives it) and draw its steady TTFT and ITL CDFs dashed"},
				),
				Action: runPlotCDF,
			},
			plotTimelineCommand(common()),
		},
	}
}

// plotOut checks the output flags: the extension ("png" or "svg") and the size.
func plotOut(c *cli.Context) (path, ext string, w, h int, err error) {
	path = c.String("out")
	if path == "" {
		return "", "", 0, 0, userErrorf("--out is required: the image FILE (.png or .svg)")
	}
	ext = strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	if ext != "png" && ext != "svg" {
		return "", "", 0, 0, userErrorf("--out %q: the extension must be .png or .svg", path)
	}
	w, h = c.Int("width"), c.Int("height")
	if w < 100 || h < 100 || w > 10000 || h > 10000 {
		return "", "", 0, 0, userErrorf("--width %d --height %d: each must be in [100, 10000]", w, h)
	}
	return path, ext, w, h, nil
}

// openPlotStore opens the store read-only and refuses one without points.
func openPlotStore(ctx context.Context, path string) (*store.Store, error) {
	st, err := store.Open(ctx, path, store.Options{ReadOnly: true, MustExist: true})
	if err != nil {
		return nil, asUser(err)
	}
	n, err := st.PointCount(ctx)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("count points: %w", err)
	}
	if n == 0 {
		st.Close()
		return nil, userErrorf("store %s has no points: run aicdb sweep first", path)
	}
	return st, nil
}

// plotPoint is one plotted frontier point.
type plotPoint struct {
	X, Y float64 // tokens/s/user, tokens/s/GPU
	Mode string
}

// paretoPoints runs q (read-only) and returns its rows as points, in the query's
// order; q must return tokens_per_s_per_user, tokens_per_s_per_gpu and mode.
// Rows with a NULL or non-finite throughput are skipped (never plotted).
func paretoPoints(ctx context.Context, st *store.Store, q string) ([]plotPoint, error) {
	if err := store.CheckReadOnlySQL(q); err != nil {
		return nil, userErrorf("plot pareto: the SQL must be read-only: %v", err)
	}
	cols, data, err := st.QueryReadOnly(ctx, q)
	if err != nil {
		return nil, userErrorf("plot pareto: %v", err)
	}
	ix := map[string]int{"tokens_per_s_per_user": -1, "tokens_per_s_per_gpu": -1, "mode": -1}
	for i, c := range cols {
		if _, ok := ix[c]; ok {
			ix[c] = i
		}
	}
	for _, k := range []string{"tokens_per_s_per_user", "tokens_per_s_per_gpu", "mode"} {
		if ix[k] < 0 {
			return nil, userErrorf("plot pareto: the SQL returns no column %s (return tokens_per_s_per_user, tokens_per_s_per_gpu and mode)", k)
		}
	}
	var pts []plotPoint
	for _, vals := range data {
		x, okx := asFloat(vals[ix["tokens_per_s_per_user"]])
		y, oky := asFloat(vals[ix["tokens_per_s_per_gpu"]])
		if !okx || !oky {
			continue
		}
		pts = append(pts, plotPoint{X: x, Y: y, Mode: fmt.Sprint(asText(vals[ix["mode"]]))})
	}
	return pts, nil
}

// paretoSubject names what the pareto view's rows are of — "Qwen/Qwen3-32B on
// h200_sxm vllm, isl 4000 / osl 500" — when they share one model, system, backend
// and shape ("" otherwise: the title then stays generic).
func paretoSubject(ctx context.Context, st *store.Store) (string, error) {
	subs, err := st.ParetoSubjects(ctx)
	if err != nil {
		return "", fmt.Errorf("plot pareto: read the rows' deployment: %w", err)
	}
	if len(subs) != 1 {
		return "", nil
	}
	s := subs[0]
	return fmt.Sprintf("%s on %s %s, isl %d / osl %d", s.Model, s.System, s.Backend, s.ISL, s.OSL), nil
}

// asFloat converts a scanned SQLite value to a finite float64.
func asFloat(v any) (float64, bool) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int64:
		f = float64(x)
	default:
		return 0, false
	}
	return f, !math.IsNaN(f) && !math.IsInf(f, 0)
}

// asText converts a scanned SQLite text value ([]byte or string) to a string.
func asText(v any) string {
	switch x := v.(type) {
	case []byte:
		return string(x)
	case nil:
		return ""
	default:
		return fmt.Sprint(x)
	}
}

func runPlotPareto(c *cli.Context) error {
	args, err := interspersed(c) // "plot pareto SQL --out f.png" as well
	if err != nil {
		return err
	}
	out, ext, w, h, err := plotOut(c)
	if err != nil {
		return err
	}
	if len(args) > 1 {
		return userErrorf("plot pareto: one SQL argument expected, got %d (quote the SQL)", len(args))
	}
	q, title := store.ParetoQuery, "Pareto frontier"
	ttft, itl := c.Float64("ttft"), c.Float64("itl")
	for _, f := range []struct {
		name string
		v    float64
	}{{"ttft", ttft}, {"itl", itl}} {
		if c.IsSet(f.name) && (!(f.v > 0) || math.IsInf(f.v, 0)) {
			return userErrorf("--%s %v: must be a finite number of ms > 0", f.name, f.v)
		}
	}
	if len(args) == 1 {
		if c.IsSet("ttft") || c.IsSet("itl") {
			return userErrorf("plot pareto: --ttft/--itl filter the default query; put the filter in your SQL instead")
		}
		q, title = args[0], "aicdb plot pareto (user SQL)"
	} else {
		var conds, notes []string
		if c.IsSet("ttft") {
			conds = append(conds, fmt.Sprintf("ttft_steady_p99 <= %v", ttft))
			notes = append(notes, fmt.Sprintf("TTFT p99 ≤ %v ms", ttft))
		}
		if c.IsSet("itl") {
			conds = append(conds, fmt.Sprintf("itl_p99 <= %v", itl))
			notes = append(notes, fmt.Sprintf("ITL p99 ≤ %v ms", itl))
		}
		if len(conds) > 0 {
			q += " WHERE " + strings.Join(conds, " AND ")
			title += " — rows filtered by SLA " + strings.Join(notes, ", ")
		}
	}
	path := c.String("db")
	st, err := openPlotStore(c.Context, path)
	if err != nil {
		return err
	}
	st.Close()
	if c.IsSet("ttft") || c.IsSet("itl") {
		// Resolve the straddlers of the SLA thresholds first, as aicdb query does.
		if err := prepareQuery(c.Context, c, path, q, 0); err != nil {
			return err
		}
	}
	if st, err = openPlotStore(c.Context, path); err != nil {
		return err
	}
	defer st.Close()
	pts, err := paretoPoints(c.Context, st, q)
	if err != nil {
		return err
	}
	if len(pts) == 0 {
		return userErrorf("plot pareto: the query returned no plottable rows (widen the SLA or the SQL)")
	}
	if c.Args().Len() == 0 {
		if sub, err := paretoSubject(c.Context, st); err != nil {
			return err
		} else if sub != "" {
			title += " — " + sub
		}
	}
	p, err := paretoPlot(pts, title)
	if err != nil {
		return err
	}
	if err := savePlot(p, out, ext, w, h); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "wrote %s (%d points)\n", out, len(pts))
	return nil
}

// paretoPlot draws the points, one scatter series (and frontier line) per mode.
func paretoPlot(pts []plotPoint, title string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "tokens/s/user"
	p.Y.Label.Text = "tokens/s/GPU"
	p.Add(plotter.NewGrid())
	byMode := map[string]plotter.XYs{}
	for _, pt := range pts {
		byMode[pt.Mode] = append(byMode[pt.Mode], plotter.XY{X: pt.X, Y: pt.Y})
	}
	modes := make([]string, 0, len(byMode))
	for m := range byMode {
		modes = append(modes, m)
	}
	sort.Strings(modes)
	styles := []struct {
		glyph draw.GlyphDrawer
		color color.RGBA
	}{
		{draw.CircleGlyph{}, color.RGBA{R: 31, G: 119, B: 180, A: 255}},
		{draw.TriangleGlyph{}, color.RGBA{R: 214, G: 39, B: 40, A: 255}},
		{draw.SquareGlyph{}, color.RGBA{R: 44, G: 160, B: 44, A: 255}},
		{draw.CrossGlyph{}, color.RGBA{R: 148, G: 103, B: 189, A: 255}},
	}
	for i, m := range modes {
		xy := byMode[m]
		sort.SliceStable(xy, func(a, b int) bool { return xy[a].X < xy[b].X })
		s, err := plotter.NewScatter(xy)
		if err != nil {
			return nil, fmt.Errorf("plot %s points: %w", m, err)
		}
		sty := styles[i%len(styles)]
		s.GlyphStyle.Shape = sty.glyph
		s.GlyphStyle.Color = sty.color
		s.GlyphStyle.Radius = vg.Points(3.5)
		p.Add(s)
		name := m
		if name == "" {
			name = "(no mode)"
		}
		p.Legend.Add(name, s)
	}
	p.Legend.Top = true
	// A 5 % margin keeps the extreme points' glyphs inside the axes.
	for _, ax := range []*plot.Axis{&p.X, &p.Y} {
		pad := 0.05 * (ax.Max - ax.Min)
		if pad == 0 {
			pad = 0.05*math.Abs(ax.Max) + 1
		}
		ax.Min, ax.Max = ax.Min-pad, ax.Max+pad
	}
	return p, nil
}

// savePlot writes p to path as PNG (exactly w×h pixels) or SVG (w×h points).
func savePlot(p *plot.Plot, path, ext string, w, h int) error {
	return saveCanvas(path, ext, w, h, func(dc draw.Canvas) { p.Draw(dc) })
}

// saveCanvas renders paint on a w × h PNG or SVG canvas (by ext) and writes it to path.
func saveCanvas(path, ext string, w, h int, paint func(draw.Canvas)) error {
	f, err := os.Create(path)
	if err != nil {
		return userErrorf("--out %s: %v", path, err)
	}
	var werr error
	switch ext {
	case "png":
		c := vgimg.NewWith(vgimg.UseImage(image.NewRGBA(image.Rect(0, 0, w, h))))
		paint(draw.New(c))
		_, werr = vgimg.PngCanvas{Canvas: c}.WriteTo(f)
	default:
		c := vgsvg.New(vg.Points(float64(w)), vg.Points(float64(h)))
		paint(draw.New(c))
		_, werr = c.WriteTo(f)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}

// cdfSeries is one empirical CDF: sorted values and cumulative probabilities.
type cdfSeries struct {
	Name string
	XY   plotter.XYs
}

// pointDistributions reads the stored quantitative distributions of the point named
// by a key prefix or a rowid: the point's key and its CDFs (ttft_steady, then
// ttft_transient and itl when stored).
func pointDistributions(ctx context.Context, st *store.Store, keyPrefix string, rowid int64, byRowid bool) (string, []cdfSeries, error) {
	var keys []string
	var err error
	if byRowid {
		keys, err = st.PointKeyByRowid(ctx, rowid)
	} else {
		keys, err = st.PointKeysByPrefix(ctx, keyPrefix)
	}
	if err != nil {
		return "", nil, fmt.Errorf("find point: %w", err)
	}
	what := fmt.Sprintf("--key %s", keyPrefix)
	if byRowid {
		what = fmt.Sprintf("--rowid %d", rowid)
	}
	switch len(keys) {
	case 0:
		return "", nil, userErrorf("plot cdf: %s: no such point (see aicdb query \"select rowid, key from operating_points\")", what)
	case 2:
		return "", nil, userErrorf("plot cdf: %s matches several points: give a longer key prefix", what)
	}
	key := keys[0]
	raw, err := st.Distributions(ctx, key)
	if err != nil {
		return "", nil, fmt.Errorf("read distributions of %s: %w", key[:12], err)
	}
	if len(raw) == 0 {
		return "", nil, userErrorf("plot cdf: point %s has no quantitative tier stored: resolve it first (e.g. aicdb query with a percentile filter, or aicdb best)", key[:12])
	}
	// The stored object holds the distributions beside scalars (a disaggregated
	// row's p_queue_ms_p99, d_headroom_min, multi_stable): only the drawn ones are
	// decoded as atoms.
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw[0]), &m); err != nil {
		return "", nil, fmt.Errorf("decode distributions of %s: %w", key[:12], err)
	}
	var out []cdfSeries
	for _, name := range []string{"ttft_steady", "ttft_transient", "itl"} {
		var atoms []storedAtom
		if b, ok := m[name]; ok {
			if err := json.Unmarshal(b, &atoms); err != nil {
				return "", nil, fmt.Errorf("decode distribution %s of %s: %w", name, key[:12], err)
			}
		}
		if s, ok := cdfOf(atoms); ok {
			out = append(out, cdfSeries{Name: name, XY: s})
		}
	}
	if len(out) == 0 {
		return "", nil, userErrorf("plot cdf: point %s has no stored TTFT or ITL distribution", key[:12])
	}
	return key, out, nil
}

// storedAtom is one [value, weight] atom of a stored distribution. Both stored
// shapes decode: queueing.Distribution's {"value": x, "weight": w} objects (the
// perf-database evaluator) and the [x, w] pairs of the migration's comment (the
// synthetic evaluator).
type storedAtom [2]float64

// UnmarshalJSON implements json.Unmarshaler.
func (a *storedAtom) UnmarshalJSON(b []byte) error {
	var pair [2]float64
	if err := json.Unmarshal(b, &pair); err == nil {
		*a = pair
		return nil
	}
	var o struct {
		Value  *float64 `json:"value"`
		Weight *float64 `json:"weight"`
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return fmt.Errorf("atom %s: want [value, weight] or {\"value\", \"weight\"}: %w", b, err)
	}
	if o.Value == nil || o.Weight == nil {
		return fmt.Errorf("atom %s: value or weight missing", b)
	}
	*a = storedAtom{*o.Value, *o.Weight}
	return nil
}

// cdfOf turns [value, weight] atoms into a step CDF (normalised weights, values
// sorted); false when there are no finite atoms with positive weight.
func cdfOf(atoms []storedAtom) (plotter.XYs, bool) {
	var a []storedAtom
	total := 0.0
	for _, at := range atoms {
		if at[1] > 0 && !math.IsInf(at[0], 0) && !math.IsNaN(at[0]) && !math.IsInf(at[1], 0) {
			a = append(a, at)
			total += at[1]
		}
	}
	if len(a) == 0 || !(total > 0) {
		return nil, false
	}
	sort.SliceStable(a, func(i, j int) bool { return a[i][0] < a[j][0] })
	xy := make(plotter.XYs, 0, 2*len(a))
	cum := 0.0
	for _, at := range a {
		xy = append(xy, plotter.XY{X: at[0], Y: cum / total})
		cum += at[1]
		xy = append(xy, plotter.XY{X: at[0], Y: math.Min(cum/total, 1)})
	}
	return xy, true
}

func runPlotCDF(c *cli.Context) error {
	out, ext, w, h, err := plotOut(c)
	if err != nil {
		return err
	}
	if c.IsSet("key") == c.IsSet("rowid") {
		return userErrorf("plot cdf: give exactly one of --key PREFIX or --rowid N")
	}
	prefix := c.String("key")
	if c.IsSet("key") && strings.TrimSpace(prefix) == "" {
		return userErrorf("plot cdf: --key is empty: give a key prefix")
	}
	st, err := openPlotStore(c.Context, c.String("db"))
	if err != nil {
		return err
	}
	defer st.Close()
	key, series, err := pointDistributions(c.Context, st, prefix, c.Int64("rowid"), c.IsSet("rowid"))
	if err != nil {
		return err
	}
	title := "Latency CDF of point " + key[:12] + " (quantitative tier)"
	bracket, err := screeningBracket(c.Context, st, key)
	if err != nil {
		return err
	}
	var oracleCurves []cdfSeries
	if c.Bool("oracle") {
		if oracleCurves, err = oracleSeries(c.Context, st, key); err != nil {
			return err
		}
		title = "Latency CDF of point " + key[:12] + " (quantitative tier solid, oracle dashed)"
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "latency (ms)"
	p.Y.Label.Text = "P(latency ≤ x)"
	p.Y.Min, p.Y.Max = 0, 1
	p.Add(plotter.NewGrid())
	colors := []color.RGBA{{R: 31, G: 119, B: 180, A: 255}, {R: 255, G: 127, B: 14, A: 255}, {R: 44, G: 160, B: 44, A: 255}}
	for i, s := range series {
		l, err := plotter.NewLine(s.XY)
		if err != nil {
			return fmt.Errorf("plot %s: %w", s.Name, err)
		}
		l.LineStyle.Color = colors[i%len(colors)]
		l.LineStyle.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.Name, l)
	}
	for _, s := range oracleCurves {
		l, err := plotter.NewLine(s.XY)
		if err != nil {
			return fmt.Errorf("plot %s: %w", s.Name, err)
		}
		l.LineStyle.Color = colors[seriesColor(series, s.Name)%len(colors)]
		l.LineStyle.Width = vg.Points(1.5)
		l.LineStyle.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		p.Add(l)
		p.Legend.Add("oracle "+s.Name, l)
	}
	if bracket != nil {
		p.Add(bracket)
		name := "screening TTFT p99 bracket"
		if !bracket.certain {
			name += " (upper end an estimate)"
		}
		p.Legend.Add(name, bracket)
	}
	// Bottom right: the CDFs climb on the left and end at the top.
	p.Legend.Top = false
	p.Legend.Left = false
	if err := savePlot(p, out, ext, w, h); err != nil {
		return err
	}
	note := ""
	if len(oracleCurves) > 0 {
		note = ", with the oracle"
	}
	fmt.Fprintf(c.App.Writer, "wrote %s (%s%s)\n", out, key[:12], note)
	return nil
}
