package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/oracle/gate"
)

// gateSuites are the suites of `aicdb oracle validate --suite`, in the order "all"
// runs them: the closed/open-loop families (with the long-prompt tail families),
// the KV-pressure families, the finite benchmark runs, the disaggregated tandem,
// and the trace replays (need --traces).
var gateSuites = []string{"agg", "kv", "finite", "disagg", "replay"}

// oracleValidateCommand runs the validation gate (what `make gate` runs) and prints
// its residuals.
func oracleValidateCommand() *cli.Command {
	return &cli.Command{
		Name:  "validate",
		Usage: "run the validation gate (model vs oracle) and print the residuals",
		Description: `Runs the gate's suites: agg (closed and open loops, burst and staggered clients,
long-prompt tails), kv (vLLM preemption, SGLang retraction, TRT-LLM pausing under KV
pressure), finite (benchmark runs of N requests from a burst, and open-loop runs at a
request rate, with or without a client concurrency bound, as measured rows are
predicted), disagg (the prefill/decode tandem against the disaggregated DES) and replay
(2,000-request slices of the sample traces, model vs DES, aggregated and disaggregated;
give the folder of the sample traces with --traces). The table format prints each suite's
residual table; csv, json and jsonl print one row per family and metric. Exit code 1
when a gated family fails (known-failing families are listed, not gated).`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "family", Usage: "run only families whose name contains `TEXT`"},
			&cli.StringFlag{Name: "suite", Value: "agg", Usage: "`SUITE`: " + strings.Join(gateSuites, ", ") + " or all"},
			&cli.StringFlag{Name: "traces", Usage: "the sample traces `DIR` of the replay suite (shared/data/traces)"},
			formatFlag(formatTable),
			quietFlag(),
		},
		Action: runOracleValidate,
	}
}

func runOracleValidate(c *cli.Context) error {
	format := c.String("format")
	if err := checkFormat(format); err != nil {
		return err
	}
	suites, err := pickSuites(c.String("suite"))
	if err != nil {
		return err
	}
	sub := c.String("family")
	var recs []gate.Record
	var fails []string
	matched := 0
	bar := newProgress(c, "oracle validate", "suites")
	defer bar.Done()
	for i, suite := range suites {
		bar.Update(i, len(suites))
		var o suiteOutcome
		switch suite {
		case "agg", "kv":
			fams := gate.Families()
			if suite == "kv" {
				fams = gate.KVFamilies()
			}
			fams = filterFamilies(fams, func(f gate.Family) string { return f.Name }, sub)
			o = outcomeOf(suite, fams, func(f []gate.Family) []gate.Row { return gate.Run(c.Context, f) }, gate.WriteTable, gate.Verdict)
		case "finite":
			fams := filterFamilies(append(gate.FiniteFamilies(), gate.OpenFiniteFamilies()...), func(f gate.FiniteFamily) string { return f.Family.Name }, sub)
			o = outcomeOf(suite, fams, func(f []gate.FiniteFamily) []gate.Row { return gate.RunFinite(c.Context, f) }, gate.WriteTable, gate.Verdict)
		case "disagg":
			fams := filterFamilies(gate.DisaggFamilies(), func(f gate.DisaggFamily) string { return f.Name }, sub)
			o = outcomeOf(suite, fams, func(f []gate.DisaggFamily) []gate.DisaggRow { return gate.RunDisagg(c.Context, f) },
				gate.WriteDisaggTable, gate.DisaggVerdict)
		case "replay":
			dir := c.String("traces")
			if dir == "" {
				return userErrorf("oracle validate --suite %s: the replay suite needs --traces DIR (the sample traces folder, shared/data/traces)", c.String("suite"))
			}
			fams := filterFamilies(gate.ReplayFamilies(), func(f gate.ReplayFamily) string { return f.Name }, sub)
			dfams := filterFamilies(gate.ReplayDisaggFamilies(), func(f gate.ReplayDisaggFamily) string { return f.Name }, sub)
			if len(fams)+len(dfams) == 0 {
				continue
			}
			// One table for both kinds of replay: the agg and the disaggregated rows.
			both := func([]struct{}) []gate.ReplayRow {
				return append(gate.RunReplays(c.Context, dir, fams), gate.RunReplayDisaggs(c.Context, dir, dfams)...)
			}
			o = outcomeOf(suite, []struct{}{{}}, both, gate.WriteReplayTable, gate.ReplayVerdict)
		}
		if len(o.rows) == 0 {
			continue
		}
		bar.Done() // end a terminal progress line before the suite's table
		rows, table, verdict := o.rows, o.table, o.verdict
		matched += len(rows)
		recs = append(recs, rows...)
		if verdict != nil {
			fails = append(fails, oneLine(verdict.Error()))
		}
		if format == formatTable {
			if matched > len(rows) {
				fmt.Fprintln(c.App.Writer)
			}
			fmt.Fprintf(c.App.Writer, "suite %s\n", suite)
			if err := table(c.App.Writer); err != nil {
				return err
			}
		}
	}
	if matched == 0 {
		return userErrorf("--family %q: matches no family of suite %s; run without it to list them all", sub, c.String("suite"))
	}
	if format != formatTable {
		if err := writeRecords(c.App.Writer, format, recs); err != nil {
			return err
		}
	}
	if len(fails) > 0 {
		return cli.Exit("aicdb: "+strings.Join(fails, "; "), exitUser)
	}
	return nil
}

// suiteOutcome is one suite's run: its records, its table and its verdict.
type suiteOutcome struct {
	rows    []gate.Record
	table   func(io.Writer) error
	verdict error
}

// outcomeOf runs a suite's families (none: an empty outcome) and keeps its records,
// table printer and verdict.
func outcomeOf[F any, R interface{ Record(string) gate.Record }](suite string, fams []F, run func([]F) []R,
	table func(io.Writer, []R) error, verdict func([]R) error) suiteOutcome {
	if len(fams) == 0 {
		return suiteOutcome{}
	}
	res := run(fams)
	o := suiteOutcome{table: func(w io.Writer) error { return table(w, res) }, verdict: verdict(res)}
	for _, r := range res {
		o.rows = append(o.rows, r.Record(suite))
	}
	return o
}

// pickSuites resolves --suite.
func pickSuites(s string) ([]string, error) {
	if s == "all" {
		return gateSuites, nil
	}
	for _, g := range gateSuites {
		if s == g {
			return []string{s}, nil
		}
	}
	return nil, userErrorf("--suite %q: must be %s or all", s, strings.Join(gateSuites, ", "))
}

// filterFamilies keeps the families whose name contains sub (all when sub is "").
func filterFamilies[F any](fams []F, name func(F) string, sub string) []F {
	if sub == "" {
		return fams
	}
	var keep []F
	for _, f := range fams {
		if strings.Contains(name(f), sub) {
			keep = append(keep, f)
		}
	}
	return keep
}

// validateColumns are the columns of oracle validate's row formats: one row per
// family and metric (a failed family: one row with its error and no metric).
var validateColumns = []string{"suite", "family", "metric", "model", "oracle", "residual", "tolerance", "verdict", "known_failing", "error"}

// writeRecords prints the gate records as rows (the row writer prints a
// non-finite value as null, empty or "-").
func writeRecords(w io.Writer, format string, recs []gate.Record) error {
	rw := newRowWriter(w, format, validateColumns)
	for _, r := range recs {
		if len(r.Metrics) == 0 {
			if err := rw.Row([]any{r.Suite, r.Family, nil, nil, nil, nil, nil, r.Verdict, r.KnownFailing, r.Error}); err != nil {
				return err
			}
			continue
		}
		for _, m := range r.Metrics {
			if err := rw.Row([]any{r.Suite, r.Family, m.Name, m.Model, m.Oracle, m.Residual, m.Tolerance,
				r.Verdict, r.KnownFailing, r.Error}); err != nil {
				return err
			}
		}
	}
	return rw.Close()
}
