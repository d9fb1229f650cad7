package main

import (
	"context"
	gosql "database/sql"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"

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
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "table", Usage: "output `FORMAT`: table, csv or json"},
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
		if err := fs.Parse(args[1:]); err != nil {
			return "", o, userErrorf("query: %v", err)
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

func checkFormat(f string) error {
	switch f {
	case "table", "csv", "json":
		return nil
	}
	return userErrorf("--format %q: use table, csv or json", f)
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
	read := func(rows *gosql.Rows) error {
		var err error
		if cols, err = rows.Columns(); err != nil {
			return err
		}
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				return err
			}
			data = append(data, vals)
		}
		return rows.Err()
	}
	if o.write {
		err = queryRows(ctx, st.DB.DB, sql, read)
	} else {
		// The user's statement runs on a mode=ro connection under SQLite's
		// read-only authorizer (store.QueryReadOnly).
		err = st.QueryReadOnly(ctx, sql, read)
		if errors.Is(err, store.ErrDenied) {
			return userErrorf("query: read-only without --write: %v; pass --write to change the store", err)
		}
	}
	if err != nil {
		return userErrorf("query: %v", err)
	}
	if n := dropNonFinite(data); n > 0 {
		fmt.Fprintf(c.App.ErrWriter, "aicdb: warning: %d non-finite value(s) (NaN or ±Inf) printed as null\n", n)
	}
	return writeRows(c.App.Writer, o.format, cols, data)
}

// queryRows runs q on db and hands the rows to fn.
func queryRows(ctx context.Context, db *gosql.DB, q string, fn func(*gosql.Rows) error) error {
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return err
	}
	defer rows.Close()
	if err := fn(rows); err != nil {
		return err
	}
	return rows.Close()
}

// dropNonFinite replaces NaN and ±Inf values by NULL (printed as null, empty or
// "-" like any NULL: never NaN or Inf) and returns how many it replaced.
func dropNonFinite(data [][]any) int {
	n := 0
	for _, r := range data {
		for i, v := range r {
			if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
				r[i] = nil
				n++
			}
		}
	}
	return n
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
	qs, err := refine.PrepareQuery(ctx, st, ev, sql, maxEvals, 0)
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

// formatValue renders one SQL value; table output rounds floats to 3 decimals like
// aiconfigurator's reports, csv/json keep full precision. NULL and non-finite floats
// print as "-" (table) or "" (csv).
func formatValue(v any, table bool) string {
	if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		v = nil
	}
	switch x := v.(type) {
	case nil:
		if table {
			return "-"
		}
		return ""
	case []byte:
		return string(x)
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		if table {
			return strconv.FormatFloat(x, 'f', 3, 64)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		if x {
			return "1"
		}
		return "0"
	}
	return fmt.Sprint(v)
}

// writeRows prints a result as an aligned table, CSV, or a JSON array of objects
// whose keys keep the column order.
func writeRows(w io.Writer, format string, cols []string, data [][]any) error {
	switch format {
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write(cols)
		for _, r := range data {
			rec := make([]string, len(r))
			for i, v := range r {
				rec[i] = formatValue(v, false)
			}
			cw.Write(rec)
		}
		cw.Flush()
		return cw.Error()
	case "json":
		var b strings.Builder
		b.WriteString("[")
		for ri, r := range data {
			if ri > 0 {
				b.WriteString(",")
			}
			b.WriteString("\n  {")
			for i, v := range r {
				if i > 0 {
					b.WriteString(", ")
				}
				k, _ := json.Marshal(cols[i])
				b.Write(k)
				b.WriteString(": ")
				var enc []byte
				switch x := v.(type) {
				case []byte:
					enc, _ = json.Marshal(string(x))
				case float64:
					if math.IsNaN(x) || math.IsInf(x, 0) {
						enc = []byte("null")
						break
					}
					enc, _ = json.Marshal(x)
				default:
					var err error
					if enc, err = json.Marshal(x); err != nil {
						return fmt.Errorf("encode %s: %w", cols[i], err)
					}
				}
				b.Write(enc)
			}
			b.WriteString("}")
		}
		if len(data) > 0 {
			b.WriteString("\n")
		}
		b.WriteString("]\n")
		_, err := io.WriteString(w, b.String())
		return err
	default:
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
		for _, r := range data {
			rec := make([]string, len(r))
			for i, v := range r {
				rec[i] = formatValue(v, true)
			}
			fmt.Fprintln(tw, strings.Join(rec, "\t")+"\t")
		}
		return tw.Flush()
	}
}
