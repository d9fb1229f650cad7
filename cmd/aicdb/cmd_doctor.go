package main

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// doctorCommand re-evaluates a deterministic sample of the stored quantitative
// rows and reports those that differ from a fresh evaluation (issue 8: a cache
// keyed by less than every input once stored another model's numbers).
func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "re-evaluate a sample of stored quantitative rows and report mismatches (exit 1 if any)",
		Description: `Checks the stored quantitative results against a fresh evaluation of the same point,
one fresh evaluator per model/system/backend/version. The sample is the first N rows in key
order (keys are hashes: deterministic and unbiased). Rows from another evaluator version are
counted as stale, not compared. Nothing is written. --format table|csv|json|jsonl prints the
mismatches as rows on stdout and the summary line on stderr.
Example:
   aicdb doctor --sample 100`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "sample", Value: 50, Usage: "rows to re-evaluate `N`"},
			&cli.BoolFlag{Name: "all", Usage: "re-evaluate every stored quantitative row"},
			formatFlag(formatText, formatText),
			quietFlag(),
		},
		Action: runDoctor,
	}
}

func runDoctor(c *cli.Context) error {
	if c.Int("sample") <= 0 {
		return userErrorf("--sample %d: must be > 0 (or use --all)", c.Int("sample"))
	}
	format := c.String("format")
	if err := checkFormat(format, formatText); err != nil {
		return err
	}
	ctx := c.Context
	st, err := store.Open(ctx, c.String("db"), store.Options{MustExist: true})
	if err != nil {
		return asUser(err)
	}
	defer st.Close()
	fresh := func() (refine.Evaluator, error) {
		ev, err := newEvaluator(ctx, st)
		if err != nil {
			return nil, err
		}
		return refine.WithTraces(ev, st), nil // trace rows re-replay their trace
	}
	bar := newProgress(c, "doctor", "rows")
	rep, err := refine.Doctor(ctx, st, fresh, refine.DoctorOptions{Sample: c.Int("sample"), All: c.Bool("all"), Progress: bar.Update})
	bar.Done()
	if err != nil {
		return err
	}
	summary := fmt.Sprintf("doctor: %d of %d stored quantitative rows re-evaluated, %d mismatch a fresh evaluation, %d from another evaluator version not compared",
		rep.Checked, rep.Total, len(rep.Mismatches), rep.Stale)
	sumW := c.App.Writer // text: the summary ends stdout; row formats keep stdout to the rows
	if format == formatText {
		for _, m := range rep.Mismatches {
			fmt.Fprintln(c.App.Writer, "mismatch "+m.String())
		}
	} else {
		sumW = c.App.ErrWriter
		if err := writeMismatches(c.App.Writer, format, rep.Mismatches); err != nil {
			return err
		}
	}
	if len(rep.Mismatches) > 0 {
		return cli.Exit(summary, exitUser)
	}
	fmt.Fprintln(sumW, summary)
	return nil
}

// writeMismatches prints doctor's mismatches as rows: the stored point, the first
// queueing column that differs with both values, or the re-evaluation error.
func writeMismatches(w io.Writer, format string, ms []refine.Mismatch) error {
	cols := []string{"key", "model", "system", "backend", "version", "parallel", "batch", "ctx_tokens", "column", "stored", "fresh", "error"}
	data := make([][]any, 0, len(ms))
	for _, m := range ms {
		p := &m.Point
		r := []any{p.Key, p.Model, p.System, p.Backend, p.Version, p.Parallel(), int64(p.Batch), int64(p.CtxTokens), nil, nil, nil, nil}
		if m.Err != nil {
			r[11] = m.Err.Error()
		} else {
			r[8], r[9], r[10] = m.Column, m.Stored, m.Fresh
		}
		data = append(data, r)
	}
	return writeRows(w, format, cols, data)
}
