package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// bestCommand prints the best stored configurations under percentile SLAs
// (QUEUEING.md §7), one per parallel configuration, highest tokens/s/gpu first.
func bestCommand() *cli.Command {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "model", Usage: "only this model `ID`"},
		&cli.StringFlag{Name: "system", Usage: "only this `SYSTEM`"},
		&cli.StringFlag{Name: "backend", Usage: "only this `BACKEND`"},
		&cli.StringFlag{Name: "version", Usage: "only this backend `VERSION`"},
		&cli.StringFlag{Name: "mode", Usage: "only this `MODE`: agg or disagg"},
		&cli.IntFlag{Name: "isl", Usage: "only this prompt length `N`"},
		&cli.IntFlag{Name: "osl", Usage: "only this output length `N`"},
		&cli.IntFlag{Name: "prefix", Usage: "only this prefix `N`"},
		&cli.IntFlag{Name: "top", Value: 5, Usage: "number of configs `N`"},
		&cli.StringFlag{Name: "format", Value: "table", Usage: "`FORMAT`: table, csv or json"},
		calibrationFlag(),
	}
	return &cli.Command{
		Name:  "best",
		Usage: "best stored configurations under (percentile) SLAs, one per parallel configuration",
		Description: `Examples:
   aicdb best --ttft 200 --ttft-percentile p99 --itl 40 --sla-refine --top 5
   aicdb best --ttft 1000 --tpot 30          (legacy mean semantics: no percentile given)`,
		Flags:  append(flags, slaFlags()...),
		Action: runBest,
	}
}

// slaFlags are the SLA flags shared by best and sweep.
func slaFlags() []cli.Flag {
	pct := "percentile `P`: avg, p50, p75, p90, p95, p99 or p999"
	return []cli.Flag{
		&cli.Float64Flag{Name: "ttft", Usage: "TTFT target `MS`"},
		&cli.StringFlag{Name: "ttft-percentile", Usage: "TTFT " + pct + " (default p50 in percentile mode)"},
		&cli.Float64Flag{Name: "tpot", Usage: "TPOT target `MS`"},
		&cli.StringFlag{Name: "tpot-percentile", Usage: "TPOT percentile `P`: avg, p50 or p99 (default p50 in percentile mode)"},
		&cli.Float64Flag{Name: "itl", Usage: "ITL target `MS` (switches to percentile mode)"},
		&cli.StringFlag{Name: "itl-percentile", Usage: "ITL percentile `P`: avg, p50 or p99 (default p99)"},
		&cli.Float64Flag{Name: "request-latency", Usage: "request latency target `MS`"},
		&cli.StringFlag{Name: "request-latency-percentile", Usage: "request latency percentile `P`: avg, p50 or p99 (default p50 in percentile mode)"},
		&cli.BoolFlag{Name: "sla-refine", Usage: "resolve bracket straddlers with the evaluator and report quantitative-tier rows (never changes what is eliminated)"},
		&cli.IntFlag{Name: "max-evals", Usage: "cap --sla-refine evaluations (0 = no cap)"},
	}
}

func slaFromFlags(c *cli.Context) (refine.SLA, error) {
	in := refine.SLAInput{
		TTFT: c.Float64("ttft"), TTFTSet: c.IsSet("ttft"), TTFTPct: c.String("ttft-percentile"),
		TPOT: c.Float64("tpot"), TPOTSet: c.IsSet("tpot"), TPOTPct: c.String("tpot-percentile"),
		ITL: c.Float64("itl"), ITLSet: c.IsSet("itl"), ITLPct: c.String("itl-percentile"),
		RequestLatency: c.Float64("request-latency"), RequestLatencySet: c.IsSet("request-latency"),
		RequestLatencyPct: c.String("request-latency-percentile"),
	}
	s, err := in.Build()
	if err != nil {
		return s, asUser(err)
	}
	if c.Int("max-evals") < 0 {
		return s, userErrorf("--max-evals %d: must be ≥ 0", c.Int("max-evals"))
	}
	return s, nil
}

func runBest(c *cli.Context) error {
	ctx := c.Context
	sla, err := slaFromFlags(c)
	if err != nil {
		return err
	}
	if err := checkFormat(c.String("format")); err != nil {
		return err
	}
	if c.Int("top") <= 0 {
		return userErrorf("--top %d: must be > 0", c.Int("top"))
	}
	if m := c.String("mode"); m != "" && m != store.ModeAgg && m != store.ModeDisagg {
		return userErrorf("--mode %q: use agg or disagg", m)
	}
	for _, n := range []string{"isl", "osl", "prefix"} {
		if c.Int(n) < 0 {
			return userErrorf("--%s %d: must be ≥ 0", n, c.Int(n))
		}
	}
	// Writable: --sla-refine persists what it evaluates.
	st, err := store.Open(ctx, c.String("db"), store.Options{MustExist: true})
	if err != nil {
		return asUser(err)
	}
	defer st.Close()
	f := store.PointFilter{Model: c.String("model"), System: c.String("system"), Backend: c.String("backend"),
		Version: c.String("version"), Mode: c.String("mode"), ISL: c.Int("isl"), OSL: c.Int("osl"),
		Prefix: c.Int("prefix"), PrefixSet: c.IsSet("prefix")}
	ev, err := calibratedBest(c, st, &f)
	if err != nil {
		return err
	}
	return printBest(c, st, ev, f, sla)
}

// printBest runs the funnel and prints the table. Headers name what they show:
// TTFT(avg) is the legacy blended-mean estimate in legacy mode, TTFT(P<q>) the
// steady quantile in percentile mode; ITL(P99) (or the ITL constraint's percentile);
// TPOT(avg) unless a TPOT percentile is constrained.
func printBest(c *cli.Context, st *store.Store, ev refine.Evaluator, f store.PointFilter, sla refine.SLA) error {
	if sla.PercentileMode && !c.Bool("sla-refine") {
		for _, k := range sla.Constraints {
			if k.Metric == refine.TPOT || k.Metric == refine.RequestLatency {
				fmt.Fprintf(c.App.ErrWriter, "aicdb: note: %s is enforced on screening estimates only (QUEUEING.md §7: TPOT and request-latency percentiles need the evaluator); add --sla-refine to resolve them\n", k.Label())
			}
		}
	}
	res, err := refine.Best(c.Context, st, ev, refine.BestOptions{Filter: f, SLA: sla, TopK: c.Int("top"),
		Refine: c.Bool("sla-refine"), MaxEvals: c.Int("max-evals")})
	if err != nil {
		if errors.Is(err, refine.ErrAmbiguousWorkload) {
			return asUser(err)
		}
		return err
	}
	if res.Candidates == 0 {
		if has, err := st.HasPoints(c.Context); err == nil && !has {
			return userErrorf("best: the store has no swept points yet: run 'aicdb sweep --model M --system S --backend B --total-gpus N --isl N --osl N' first (aicdb sweep --help lists the options)")
		}
		return userErrorf("best: no stored points match the filters: run 'aicdb sweep' first or relax --model/--system/--isl/…")
	}
	ttftPct, itlPct, tpotPct := refine.Avg, refine.P99, refine.Avg
	if sla.PercentileMode {
		ttftPct = refine.P99
	}
	for _, k := range sla.Constraints {
		if k.Legacy {
			continue
		}
		switch k.Metric {
		case refine.TTFT:
			ttftPct = k.Pct
		case refine.ITL:
			itlPct = k.Pct
		case refine.TPOT:
			tpotPct = k.Pct
		}
	}
	label := func(m refine.Metric, p refine.Percentile) string {
		return refine.Constraint{Metric: m, Pct: p}.Label()
	}
	cols := []string{"rank", "mode", "parallel", "batch", "ctx_tokens", "tokens/s/gpu", "tokens/s/user",
		label(refine.TTFT, ttftPct), label(refine.ITL, itlPct), label(refine.TPOT, tpotPct), "request_latency", "concurrency", "num_gpus", "tier"}
	var data [][]any
	for i, p := range res.Rows {
		ttft := queueingValue(&p, "ttft_steady_", ttftPct)
		if !sla.PercentileMode {
			ttft = p.Legacy.TTFT
		}
		tpot := queueingValue(&p, "tpot_", tpotPct)
		if !sla.PercentileMode || tpot == nil {
			tpot = p.Legacy.TPOT
		}
		tier := p.Q.Tier
		if res.Verdicts[i] == refine.Straddle {
			tier += " (unresolved)"
		}
		data = append(data, []any{int64(i + 1), p.Mode, p.Parallel(), int64(p.Batch), int64(p.CtxTokens),
			p.Legacy.TokensPerSPerGPU, p.Legacy.TokensPerSPerUser, ttft, queueingValue(&p, "itl_", itlPct), tpot,
			p.Legacy.RequestLatency, int64(p.Legacy.Concurrency), int64(p.NumGPUs()), tier})
	}
	if err := writeRows(c.App.Writer, c.String("format"), cols, data); err != nil {
		return err
	}
	if len(res.Rows) == 0 {
		msg := "aicdb: no stored configuration meets the SLA"
		if sla.PercentileMode && res.NoQueueing > 0 {
			msg += fmt.Sprintf(" (%d of %d candidates have no queueing distributions — composed disagg rows until the tandem lands — so percentile constraints cannot pass them)",
				res.NoQueueing, res.Candidates)
		}
		fmt.Fprintln(c.App.ErrWriter, msg)
	}
	if res.Evaluated > 0 || res.Unresolved > 0 {
		fmt.Fprintf(c.App.ErrWriter, "aicdb: %d candidates, %d eliminated, %d evaluated, %d reported unresolved at screening tier\n",
			res.Candidates, res.Eliminated, res.Evaluated, res.Unresolved)
	}
	return nil
}

// queueingValue reads prefix+stat (mean for avg) from the row, nil when absent.
func queueingValue(p *store.Point, prefix string, pct refine.Percentile) any {
	stat := string(pct)
	if pct == refine.Avg {
		stat = "mean"
	}
	i := store.QueueingIndex(prefix + stat)
	if i < 0 || !p.Q.Valid {
		return nil
	}
	return p.Q.V[i]
}
