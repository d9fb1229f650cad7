package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/oracle"
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
by default, as --format says (json by default, or table, csv, jsonl). --show log prints the
per-pass log and per-request records instead (json: the whole log; table: the passes, then
the requests; csv and jsonl: the per-request records). --log FILE also writes the log as JSON Lines.`,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "scenario", Required: true, Usage: "scenario JSON `FILE` (read as a stream)"},
					formatFlag(formatJSON),
					&cli.StringFlag{Name: "show", Value: showSummary, Usage: "`WHAT` to print: summary or log (the per-pass log and per-request records)"},
					&cli.StringFlag{Name: "log", Usage: "write the per-pass and per-request log to `FILE` as JSON Lines"},
					engineProfileFlag(""), engineConfigFlag(), quietFlag(),
				},
				Action: oracleRun,
			},
			oracleValidateCommand(),
		},
	}
}

// What oracle run prints (--show): the summary or the log.
const (
	showSummary = "summary"
	showLog     = "log"
)

// oracleRun runs one scenario and prints its summary (default) or, with --show
// log, its per-pass log and per-request records, as --format says; --log streams
// the log to a file.
func oracleRun(c *cli.Context) error {
	path := c.String("scenario")
	format := c.String("format")
	if err := checkFormat(format); err != nil {
		return err
	}
	show := c.String("show")
	if show != showSummary && show != showLog {
		return userErrorf("--show %q: use summary or log", show)
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
	if sc.Disagg != nil {
		return oracleRunDisagg(c, path, sc)
	}
	if err := oracleEngineFlags(c, sc); err != nil {
		return err
	}
	logPath := c.String("log")
	bar := newProgress(c, "oracle run", "requests")
	// The summary alone needs no per-token times: the gaps are counted as they come.
	summaryOnly := logPath == "" && show == showSummary
	res, err := sc.Simulate(c.Context, oracle.Options{PassLog: !summaryOnly, SummaryOnly: summaryOnly, Progress: bar.Update})
	bar.Done()
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
	if show == showSummary {
		sum, err := res.Summary()
		if err != nil {
			return err
		}
		return writeRecord(w, format, sum)
	}
	return writeOracleLog(w, format, res.Output())
}

// oracleRunDisagg runs a disaggregated scenario (a disagg section) through the
// disaggregated DES and prints its summary: the 15 columns plus
// kv_transfer_ms_mean/p99, p_queue_ms_p99 and d_headroom_min.
func oracleRunDisagg(c *cli.Context, path string, sc *oracle.Scenario) error {
	switch {
	case c.String("show") != showSummary:
		return userErrorf("--show %s: a disaggregated scenario prints its summary only; drop --show", c.String("show"))
	case c.IsSet("log"):
		return userErrorf("--log: a disaggregated scenario has no per-pass log; drop --log")
	case c.IsSet("engine-profile") || c.IsSet("engine-config"):
		return userErrorf("--engine-profile/--engine-config: a disaggregated scenario gives each pool its engine in the file; drop the flag")
	}
	res, err := sc.RunDisagg(c.Context)
	if err != nil {
		return userErrorf("--scenario %s: %v", path, err)
	}
	sum, err := res.Summary()
	if err != nil {
		return err
	}
	return writeRecord(c.App.Writer, c.String("format"), sum)
}

// writeOracleLog prints the log of an oracle run: json is the whole log as one
// document; table the per-pass log then the per-request records; csv and jsonl
// the per-request records (the per-pass log is in --log and --format json).
func writeOracleLog(w io.Writer, format string, out *oracle.ScenarioOutput) error {
	if format == formatJSON {
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			return fmt.Errorf("oracle run: encoding output: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	if format == formatTable {
		passes := make([][]any, 0, len(out.Passes))
		for _, p := range out.Passes {
			s, err := p.Scheduled.MarshalJSON()
			if err != nil {
				return fmt.Errorf("oracle run: encoding pass %d: %w", p.Index, err)
			}
			var pre any // nil ("-") when nothing was preempted
			if len(p.Preempted) > 0 {
				pre = strings.Join(p.Preempted, " ")
			}
			passes = append(passes, []any{int64(p.Index), p.StartMs, p.EndMs, json.RawMessage(s), pre, int64(p.FreeBlocks)})
		}
		if err := writeRows(w, format, []string{"pass", "start_ms", "end_ms", "scheduled", "preempted", "free_blocks"}, passes); err != nil {
			return err
		}
		if _, err := fmt.Fprintln(w); err != nil {
			return err
		}
	}
	reqs := make([][]any, 0, len(out.Requests))
	for _, r := range out.Requests {
		reqs = append(reqs, []any{r.ID, r.TTFTMs, r.FinishMs, int64(len(r.TokenTimesMs)), int64(r.NumPreemptions), int64(r.NumCachedTokens)})
	}
	return writeRows(w, format, []string{"request", "ttft_ms", "finish_ms", "tokens", "preemptions", "cached_tokens"}, reqs)
}
