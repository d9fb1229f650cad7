package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// queryCommand runs SQL on the store: read-only unless --write (one SELECT, WITH or
// VALUES statement, on a mode=ro connection under a read-only authorizer). Filters
// on queueing percentile columns are answered right for screening-tier rows: the
// straddlers of the query's thresholds are resolved first (refine.PrepareQuery).
func queryCommand() *cli.Command {
	return &cli.Command{
		Name:      "query",
		Usage:     "run SQL on the store (read-only unless --write); percentile filters resolve straddlers",
		ArgsUsage: "SQL",
		Description: `Examples:
   aicdb query "select * from pareto where ttft_steady_p99 < 200"
   aicdb query --format csv "select parallel, batch, tokens_per_s_per_gpu from best_configs"
Flags may also follow the SQL: aicdb query "select 1" --format json`,
		Flags: []cli.Flag{
			shortFormatFlag("table"),
			&cli.BoolFlag{Name: "write", Usage: "allow the SQL to change the store"},
			quietFlag(),
			&cli.BoolFlag{Name: "refine", Value: true, Usage: "resolve rows whose screening bracket straddles a percentile threshold in the SQL (persisted)"},
			&cli.IntFlag{Name: "max-evals", Usage: "cap the evaluations of the refinement pass (0 = no cap; unresolved rows stay at screening tier)"},
		},
		Action: runQuery,
	}
}

type queryOpts struct {
	format   string
	write    bool
	refine   bool
	maxEvals int
}

// queryArgs returns the SQL and the options, also reading flags placed after the
// SQL (urfave/cli v2 stops parsing flags at the first positional argument).
func queryArgs(c *cli.Context) (string, queryOpts, error) {
	o := queryOpts{format: c.String("format"), write: c.Bool("write"), refine: c.Bool("refine"), maxEvals: c.Int("max-evals")}
	args := c.Args().Slice()
	if len(args) == 0 {
		return "", o, userErrorf("query: missing SQL: aicdb query \"select * from pareto\"")
	}
	sql := args[0]
	if len(args) > 1 {
		fs := flag.NewFlagSet("query", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.StringVar(&o.format, "format", o.format, "")
		fs.StringVar(&o.format, "f", o.format, "")
		fs.BoolVar(&o.write, "write", o.write, "")
		fs.BoolVar(&o.refine, "refine", o.refine, "")
		fs.IntVar(&o.maxEvals, "max-evals", o.maxEvals, "")
		setDB := trailingDB(c, fs)
		if err := fs.Parse(args[1:]); err != nil {
			return "", o, userErrorf("query: %v", err)
		}
		if err := setDB(); err != nil {
			return "", o, err
		}
		if fs.NArg() > 0 {
			return "", o, userErrorf("query: one SQL argument expected, got extra %q (quote the SQL)", fs.Arg(0))
		}
	}
	if err := checkFormat(o.format); err != nil {
		return "", o, err
	}
	if o.maxEvals < 0 {
		return "", o, userErrorf("--max-evals %d: must be ≥ 0", o.maxEvals)
	}
	if strings.TrimSpace(sql) == "" {
		return "", o, userErrorf("query: the SQL is empty")
	}
	return sql, o, nil
}

func runQuery(c *cli.Context) error {
	ctx := c.Context
	sql, o, err := queryArgs(c)
	if err != nil {
		return err
	}
	if !o.write {
		if err := store.CheckReadOnlySQL(sql); err != nil {
			return userErrorf("query: read-only without --write: %v; pass --write to change the store", err)
		}
	}
	path := c.String("db")
	if o.refine && len(refine.ExtractThresholds(sql)) > 0 {
		// Pass 1: resolve straddlers on a writable handle (aicdb's own write, not the
		// user's SQL), then close it before the user's SQL runs.
		if err := prepareQuery(ctx, c, path, sql, o.maxEvals); err != nil {
			return err
		}
	}
	st, err := store.Open(ctx, path, store.Options{ReadOnly: !o.write, MustExist: true})
	if err != nil {
		return asUser(err)
	}
	defer st.Close()
	var cols []string
	var data [][]any
	if o.write {
		cols, data, err = st.QueryWrite(ctx, sql)
	} else {
		// The user's statement runs on a mode=ro connection under SQLite's
		// read-only authorizer (store.QueryReadOnly).
		cols, data, err = st.QueryReadOnly(ctx, sql)
		if errors.Is(err, store.ErrDenied) {
			return userErrorf("query: read-only without --write: %v; pass --write to change the store", err)
		}
	}
	if err != nil {
		if stale, serr := st.ViewsStale(ctx); serr == nil && stale {
			return userErrorf("query: %v (this store's views were made by another aicdb version: 'aicdb init --db %s' refreshes them, nothing else changes)", err, path)
		}
		return userErrorf("query: %v", err)
	}
	if n := dropNonFinite(data); n > 0 {
		fmt.Fprintf(c.App.ErrWriter, "aicdb: warning: %d non-finite value(s) (NaN or ±Inf) printed as null\n", n)
	}
	return writeRows(c.App.Writer, o.format, cols, data)
}

func prepareQuery(ctx context.Context, c *cli.Context, path, sql string, maxEvals int) error {
	st, err := store.Open(ctx, path, store.Options{MustExist: true})
	if errors.Is(err, store.ErrReadOnly) {
		fmt.Fprintf(c.App.ErrWriter, "aicdb: refinement skipped: store %s is read-only; rows whose screening bracket straddles a threshold are answered at screening tier\n", path)
		return nil
	}
	if err != nil {
		return asUser(err)
	}
	defer st.Close()
	bar := newProgress(c, "refine", "points")
	ev := newLazyEvaluator(st).withProgress(bar)
	qs, err := refine.PrepareQuery(ctx, st, refine.WithTraces(ev, st), sql, maxEvals, 0) // trace rows replay their trace
	bar.Done()
	if err != nil {
		return err
	}
	if !qs.Settled || qs.Unresolved > 0 {
		fmt.Fprintf(c.App.ErrWriter, "aicdb: %d of %d straddling rows left at screening tier (--max-evals %d, or no quantitative tier); the answer may include screening estimates\n",
			qs.Skipped+qs.Unresolved, qs.Straddlers, maxEvals)
	}
	return nil
}
