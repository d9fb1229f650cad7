package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/oracle/gate"
)

// oracleCommand wires `aicdb oracle run|validate` (issue 4). The simulation and the gate
// live in package oracle; this file only reads flags and prints.
func oracleCommand() *cli.Command {
	return &cli.Command{
		Name:  "oracle",
		Usage: "discrete-event simulation of the engines' real schedulers, and the validation gate",
		Subcommands: []*cli.Command{
			{
				Name:  "run",
				Usage: "simulate a scenario file (engine, timing, requests) and print its summary",
				Description: `Prints the run's summary (counters and the 15 latency/throughput columns, docs/oracle.md)
by default. --log FILE also writes the per-pass and per-request log as JSON Lines;
--format json|table prints that log (pretty JSON or a table) instead of the summary.`,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "scenario", Required: true, Usage: "scenario JSON `FILE` (read as a stream)"},
					&cli.StringFlag{Name: "format", Value: "summary", Usage: "output `FORMAT`: summary (JSON), json (the whole log) or table"},
					&cli.StringFlag{Name: "log", Usage: "write the per-pass and per-request log to `FILE` as JSON Lines"},
					engineProfileFlag(""), engineConfigFlag(),
				},
				Action: oracleRun,
			},
			oracleValidateCommand(),
		},
	}
}

// oracleRun runs one scenario and prints its summary (default) or its per-pass log and
// per-request records (--format json|table); --log streams the log to a file.
func oracleRun(c *cli.Context) error {
	path := c.String("scenario")
	format := c.String("format")
	if format != "summary" && format != "json" && format != "table" {
		return userErrorf("--format %q: must be summary, json or table", format)
	}
	f, err := os.Open(path)
	if err != nil {
		return userErrorf("--scenario %s: %v", path, err)
	}
	sc, err := oracle.ReadScenario(bufio.NewReaderSize(f, 1<<16))
	f.Close()
	if err != nil {
		return userErrorf("--scenario %s: %v", path, err)
	}
	if err := oracleEngineFlags(c, sc); err != nil {
		return err
	}
	logPath := c.String("log")
	res, err := sc.Simulate(c.Context, oracle.Options{PassLog: logPath != "" || format != "summary"})
	if err != nil {
		return userErrorf("--scenario %s: %v", path, err)
	}
	if logPath != "" {
		lf, err := os.Create(logPath)
		if err != nil {
			return userErrorf("--log %s: %v", logPath, err)
		}
		err = res.WriteLog(lf)
		if cerr := lf.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("oracle run: writing --log %s: %w", logPath, err)
		}
	}
	w := c.App.Writer
	if format == "summary" {
		sum, err := res.Summary()
		if err != nil {
			return err
		}
		b, err := json.MarshalIndent(sum, "", "  ")
		if err != nil {
			return fmt.Errorf("oracle run: encoding summary: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	out := res.Output()
	switch format {
	case "json":
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return fmt.Errorf("oracle run: encoding output: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "table":
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "pass\tstart_ms\tend_ms\tscheduled\tpreempted\tfree_blocks")
		for _, p := range out.Passes {
			s, _ := p.Scheduled.MarshalJSON()
			fmt.Fprintf(tw, "%d\t%g\t%g\t%s\t%v\t%d\n", p.Index, p.StartMs, p.EndMs, s, p.Preempted, p.FreeBlocks)
		}
		fmt.Fprintln(tw, "\nrequest\tttft_ms\tfinish_ms\ttokens\tpreemptions\tcached_tokens")
		for _, r := range out.Requests {
			fmt.Fprintf(tw, "%s\t%g\t%g\t%d\t%d\t%d\n", r.ID, r.TTFTMs, r.FinishMs, len(r.TokenTimesMs), r.NumPreemptions, r.NumCachedTokens)
		}
		return tw.Flush()
	default:
		return userErrorf("--format %q: must be summary, json or table", format)
	}
}

// oracleValidateCommand prints the gate's residual table.
func oracleValidateCommand() *cli.Command {
	return &cli.Command{
		Name:  "validate",
		Usage: "run the validation gate (model vs oracle) and print the residual table",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "family", Usage: "run only families whose name contains `TEXT`"},
		},
		Action: func(c *cli.Context) error {
			fams := gate.Families()
			if sub := c.String("family"); sub != "" {
				var keep []gate.Family
				for _, f := range fams {
					if strings.Contains(f.Name, sub) {
						keep = append(keep, f)
					}
				}
				if len(keep) == 0 {
					return userErrorf("--family %q: matches no family; run without it to list them all", sub)
				}
				fams = keep
			}
			rows, err := gate.Run(c.Context, fams)
			if err != nil {
				return fmt.Errorf("oracle validate: %w", err)
			}
			if err := gate.WriteTable(c.App.Writer, rows); err != nil {
				return err
			}
			if err := gate.Verdict(rows); err != nil {
				return cli.Exit(oneLine(err.Error()), exitUser)
			}
			return nil
		},
	}
}
