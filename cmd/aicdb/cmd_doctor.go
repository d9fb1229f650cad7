package main

import (
	"fmt"

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
counted as stale, not compared. Nothing is written.
Example:
   aicdb doctor --sample 100`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "sample", Value: 50, Usage: "rows to re-evaluate `N`"},
			&cli.BoolFlag{Name: "all", Usage: "re-evaluate every stored quantitative row"},
		},
		Action: runDoctor,
	}
}

func runDoctor(c *cli.Context) error {
	if c.NArg() > 0 {
		return userErrorf("doctor: takes no arguments (got %q); see 'aicdb doctor --help'", c.Args().First())
	}
	if c.Int("sample") <= 0 {
		return userErrorf("--sample %d: must be > 0 (or use --all)", c.Int("sample"))
	}
	ctx := c.Context
	st, err := store.Open(ctx, c.String("db"), store.Options{MustExist: true})
	if err != nil {
		return asUser(err)
	}
	defer st.Close()
	fresh := func() (refine.Evaluator, error) { return newEvaluator(ctx, st) }
	rep, err := refine.Doctor(ctx, st, fresh, refine.DoctorOptions{Sample: c.Int("sample"), All: c.Bool("all")})
	if err != nil {
		return err
	}
	for _, m := range rep.Mismatches {
		fmt.Fprintln(c.App.Writer, "mismatch "+m.String())
	}
	summary := fmt.Sprintf("doctor: %d of %d stored quantitative rows re-evaluated, %d mismatch a fresh evaluation, %d from another evaluator version not compared",
		rep.Checked, rep.Total, len(rep.Mismatches), rep.Stale)
	if len(rep.Mismatches) > 0 {
		return cli.Exit(summary, exitUser)
	}
	fmt.Fprintln(c.App.Writer, summary)
	return nil
}
