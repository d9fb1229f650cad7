package main

// aicdb plot timeline (issue 10, "Plots"): a stored trace replay as three stacked
// panels over time — throughput, queue length and TTFT p99 per window — from the
// replay's per-request rows (the same series as `trace replay --by`).

import (
	"errors"
	"fmt"
	"image/color"

	"github.com/urfave/cli/v2"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/trace"
)

func plotTimelineCommand(common []cli.Flag) *cli.Command {
	return &cli.Command{
		Name:  "timeline",
		Usage: "throughput, queue length and TTFT p99 over time of a stored trace replay",
		Description: `Reads the per-request rows of one replay (aicdb trace replay stores them; the newest
replay unless --replay names one; aicdb query "select id, trace_id, tier from replays" lists
them) and plots, per window of --by, finished requests per second, the time-average number of
requests waiting for their first token, and the p99 TTFT of the requests arriving in the window.`,
		Flags: append(common,
			&cli.Int64Flag{Name: "replay", Usage: "the replay's `ID` (default: the newest)"},
			&cli.StringFlag{Name: "by", Usage: "window `WIDTH`: second, minute or hour (default: minute, or second for a replay shorter than 10 minutes)"},
		),
		Action: runPlotTimeline,
	}
}

func runPlotTimeline(c *cli.Context) error {
	out, ext, w, h, err := plotOut(c)
	if err != nil {
		return err
	}
	if c.IsSet("replay") && c.Int64("replay") <= 0 {
		return userErrorf("plot timeline: --replay %d: give a replay id > 0 (aicdb query \"select id from replays\")", c.Int64("replay"))
	}
	st, err := store.Open(c.Context, c.String("db"), store.Options{ReadOnly: true, MustExist: true})
	if err != nil {
		return asUser(err)
	}
	defer st.Close()
	rec, rows, err := st.Replay(c.Context, c.Int64("replay"))
	if errors.Is(err, store.ErrNoReplay) {
		if c.IsSet("replay") {
			return userErrorf("plot timeline: --replay %d: no such replay (aicdb query \"select id from replays\" lists them)", c.Int64("replay"))
		}
		return userErrorf("plot timeline: the store has no replay: run aicdb trace replay first")
	}
	if err != nil {
		return err
	}
	outcomes := replayOutcomes(rows)
	width, err := timelineWidth(c.String("by"), outcomes)
	if err != nil {
		return userErrorf("plot timeline: %v", err)
	}
	series := trace.Series(outcomes, width)
	if len(series) == 0 {
		return userErrorf("plot timeline: replay %d has no requests", rec.ID)
	}
	title := fmt.Sprintf("Replay %d (%s tier, %s, %d requests), windows of %s", rec.ID, rec.Tier, rec.WorkloadFidelity, len(rows), widthName(width))
	panels, err := timelinePanels(series, title)
	if err != nil {
		return err
	}
	if err := saveCanvas(out, ext, w, h, func(dc draw.Canvas) {
		tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadY: vg.Points(6)}
		col := make([][]*plot.Plot, len(panels))
		for i, p := range panels {
			col[i] = []*plot.Plot{p}
		}
		for i, cs := range plot.Align(col, tiles, dc) {
			panels[i].Draw(cs[0])
		}
	}); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "wrote %s (replay %d, %d windows)\n", out, rec.ID, len(series))
	return nil
}

// replayOutcomes turns stored replay rows into the time series' outcomes (first
// token at arrival + TTFT, finish at arrival + E2E).
func replayOutcomes(rows []store.ReplayRow) []trace.Outcome {
	out := make([]trace.Outcome, len(rows))
	for i, r := range rows {
		out[i] = trace.Outcome{ArrivalMs: r.ArrivalMs, FirstTokenMs: r.ArrivalMs + r.TTFTMs, FinishMs: r.ArrivalMs + r.E2EMs}
	}
	return out
}

// timelineWidth resolves --by: the named width, or by default a minute (a second
// when the replay spans less than ten minutes, so it has more than one window).
func timelineWidth(by string, out []trace.Outcome) (float64, error) {
	if by != "" {
		return trace.ByWidth(by)
	}
	lo, hi := 0.0, 0.0
	for i, o := range out {
		if i == 0 || o.ArrivalMs < lo {
			lo = o.ArrivalMs
		}
		hi = max(hi, o.FinishMs)
	}
	if hi-lo < 600e3 {
		return 1000, nil
	}
	return 60e3, nil
}

func widthName(ms float64) string {
	switch ms {
	case 1000:
		return "a second"
	case 60e3:
		return "a minute"
	}
	return "an hour"
}

// timelinePanels builds the three panels sharing the time axis (seconds).
func timelinePanels(ws []trace.Window, title string) ([]*plot.Plot, error) {
	specs := []struct {
		label string
		y     func(trace.Window) float64
		c     color.RGBA
		// arrivalsOnly: a window without arrivals has no TTFT; it is left out (the
		// points mark the windows that have one) instead of drawn as 0.
		arrivalsOnly bool
	}{
		{"finished (req/s)", func(w trace.Window) float64 { return w.ThroughputRPS }, color.RGBA{R: 31, G: 119, B: 180, A: 255}, false},
		{"waiting for 1st token", func(w trace.Window) float64 { return w.QueueLen }, color.RGBA{R: 255, G: 127, B: 14, A: 255}, false},
		{"TTFT p99 (ms)", func(w trace.Window) float64 { return *w.TTFTP99Ms }, color.RGBA{R: 214, G: 39, B: 40, A: 255}, true},
	}
	x0, x1 := ws[0].StartS, ws[len(ws)-1].StartS
	out := make([]*plot.Plot, len(specs))
	for i, s := range specs {
		xy := make(plotter.XYs, 0, len(ws))
		for _, w := range ws {
			if !s.arrivalsOnly || w.Arrivals > 0 {
				xy = append(xy, plotter.XY{X: w.StartS, Y: s.y(w)})
			}
		}
		p := plot.New()
		p.Add(plotter.NewGrid())
		if len(xy) > 0 {
			l, pts, err := plotter.NewLinePoints(xy)
			if err != nil {
				return nil, fmt.Errorf("plot timeline %s: %w", s.label, err)
			}
			l.LineStyle.Color, pts.Color = s.c, s.c
			l.LineStyle.Width = vg.Points(1.5)
			pts.Radius = vg.Points(1.5)
			if !s.arrivalsOnly {
				pts.Radius = 0
			}
			p.Add(l, pts)
		}
		p.X.Min, p.X.Max = x0, x1
		p.Y.Label.Text = s.label
		p.Y.Min = 0
		if i == 0 {
			p.Title.Text = title
		}
		if i == len(specs)-1 {
			p.X.Label.Text = "time from the trace origin (s)"
		}
		out[i] = p
	}
	return out, nil
}
