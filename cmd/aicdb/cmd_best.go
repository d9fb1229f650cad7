package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// bestCommand prints the best stored configurations under percentile SLAs
// (QUEUEING.md §7), one per parallel configuration, highest tokens/s/gpu first.
func bestCommand() *cli.Command {
	flags := slices.Concat(bestDeployment.flags(), []cli.Flag{&cli.StringFlag{Name: "mode", Usage: "only this `MODE`: agg or disagg"}},
		bestShape.flags(), []cli.Flag{
			&cli.IntFlag{Name: "top", Value: 5, Usage: "number of configs `N`"},
			&cli.BoolFlag{Name: "allow-preemption", Usage: "also rank points whose steady state preempts under the memory model's KV pool (vLLM preemption, SGLang retraction); they are flagged in the tier column"},
			formatFlag("table"),
			calibrationFlag(),
			deployedVersionFlag("only rows deployed at engine `VERSION` (sweep --deployed-version, or the priced version)"),
		}, traceWorkloadFlags("only rows swept under the stored trace `NAME` (sweep --trace; same slice and session flags), ranked by its replay's percentiles",
			"with --trace: the W4 rows (sweep --trace --sessions)", "with --trace --sessions: the rows swept with this cap `N`"),
		[]cli.Flag{&cli.IntFlag{Name: "total-gpus", Usage: "with --trace: only deployments of `N` GPUs in all"}})
	flags = append(flags, sliceFlags()...)
	return &cli.Command{
		Name:  "best",
		Usage: "best stored configurations under (percentile) SLAs, one per parallel configuration",
		Description: `Examples:
   aicdb best --ttft 200 --ttft-percentile p99 --itl 40 --top 5
   aicdb best --ttft 1000 --tpot 30          (legacy mean semantics: no percentile given)
Percentile SLAs are resolved with the evaluator where the stored screening numbers
cannot decide them (results are persisted); --no-refine skips that: undecided rows
are then listed after the decided ones, marked "unresolved", and only when the
numbers shown for them meet the SLA. Without any SLA flag best ranks the stored
rows as they are (nothing is undecided); --sla-refine then evaluates the reported
screening-tier rows at quantitative tier. --format csv|json|jsonl use fixed snake_case keys.
Points whose steady state preempts (KV pool from the memory model too small for
their concurrency: vLLM preemption, SGLang retraction) are left out; with
--allow-preemption they are ranked too, marked "preempts N/req" in the tier column.`,
		Flags:  append(append(flags, quietFlag()), slaFlags()...),
		Action: runBest,
	}
}

// The filter flags of best: the deployment and shape flags, as filters.
var (
	bestDeployment = deploymentSpec{model: "only this model `ID`", system: "only this `SYSTEM`", backend: "only this `BACKEND`",
		version: "only this backend `VERSION`"}
	bestShape = shapeSpec{isl: "only this prompt length `N`", osl: "only this output length `N`", prefix: "only this prefix `N`"}
)

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
		&cli.BoolFlag{Name: "sla-refine", Usage: "resolve bracket straddlers with the evaluator and report quantitative-tier rows (the default; kept for compatibility)"},
		&cli.BoolFlag{Name: "no-refine", Usage: "do not run the evaluator: undecided rows are reported after decided ones, marked unresolved"},
		&cli.IntFlag{Name: "max-evals", Usage: "cap the refinement's evaluations (0 = no cap)"},
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
	if c.Bool("no-refine") && c.Bool("sla-refine") {
		return s, userErrorf("--no-refine and --sla-refine contradict each other: give one")
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
	sh := readShape(c)
	if err := checkAtLeast(0, namedInt{"isl", sh.ISL}, namedInt{"osl", sh.OSL}, namedInt{"prefix", sh.Prefix}); err != nil {
		return err
	}
	// Writable: the refinement persists what it evaluates. A store this process
	// cannot write is answered read-only without refinement, as query does.
	st, err := store.Open(ctx, c.String("db"), store.Options{MustExist: true})
	if errors.Is(err, store.ErrReadOnly) && !c.Bool("no-refine") {
		fmt.Fprintf(c.App.ErrWriter, "aicdb: refinement skipped: store %s is read-only; undecided rows are reported after decided ones, marked unresolved\n", c.String("db"))
		if err := c.Set("no-refine", "true"); err != nil {
			return err
		}
		st, err = store.Open(ctx, c.String("db"), store.Options{ReadOnly: true, MustExist: true})
	}
	if err != nil {
		return asUser(err)
	}
	defer st.Close()
	dep := readDeployment(c)
	f := store.PointFilter{Model: dep.Model, System: dep.System, Backend: dep.Backend,
		Version: dep.Version, Deployed: dep.Deployed, Mode: c.String("mode"), ISL: sh.ISL, OSL: sh.OSL,
		Prefix: sh.Prefix, PrefixSet: sh.set.given("prefix")}
	if err := bestTraceFilter(c, st, &f); err != nil {
		return err
	}
	bar := newProgress(c, "refine", "points")
	ev, err := calibratedBest(c, st, &f, bar)
	if err != nil {
		return err
	}
	if name := c.String("calibration"); name != "" { // what the calibrated rows' figures are worth
		if err := noteCalibrationUnseen(c, st, name, c.App.ErrWriter); err != nil {
			return err
		}
	}
	return printBest(c, st, refine.WithTraces(ev, st), f, sla)
}

// bestTraceFilter narrows f to the rows of --trace (its current content, slice and
// sessions; --total-gpus); without --trace its companion flags are errors.
func bestTraceFilter(c *cli.Context, st *store.Store, f *store.PointFilter) error {
	tw := readTraceWorkload(c)
	if !tw.set.given("trace") {
		for _, n := range []string{"window", "scale-rate", "limit", "sessions", "max-sessions", "total-gpus"} {
			if c.IsSet(n) {
				return userErrorf("--%s selects trace rows: give --trace NAME, or drop --%s", n, n)
			}
		}
		return nil
	}
	sh := readShape(c)
	for _, n := range []string{"isl", "osl", "prefix"} {
		if sh.set.given(n) {
			return userErrorf("--trace %s is the workload: it replaces --isl/--osl/--prefix; drop --%s", tw.Name, n)
		}
	}
	if c.Int("total-gpus") < 0 || tw.MaxSessions < 0 {
		return userErrorf("--total-gpus and --max-sessions must be ≥ 0")
	}
	sl, err := traceSlice(c)
	if err != nil {
		return err
	}
	info, err := st.Trace(c.Context, tw.Name)
	if errors.Is(err, store.ErrNotFound) {
		return userErrorf("best: --trace %s: %v", tw.Name, err)
	}
	if err != nil {
		return err
	}
	refine.TraceFilter(f, refine.TraceSpec{Name: info.Name, SHA256: info.SHA256, Slice: sl, Sessions: tw.Sessions,
		MaxSessions: tw.MaxSessions}, c.Int("total-gpus"))
	return nil
}

// storedTraceSlices names, as the flags that select them, the slices of trace name
// that stored rows were swept under ("" when none): what best --trace must be given.
func storedTraceSlices(ctx context.Context, st *store.Store, name string) string {
	ws, err := st.Workloads(ctx)
	if err != nil {
		return ""
	}
	var out []string
	for _, w := range ws {
		id, err := refine.ParseTraceWorkload(w)
		if err != nil || id.Trace != name {
			continue
		}
		var f []string
		if id.StartMs != 0 || id.EndMs > 0 {
			end := ""
			if id.EndMs > 0 {
				end = strconv.FormatFloat(id.EndMs/1000, 'f', -1, 64)
			}
			f = append(f, "--window "+strconv.FormatFloat(id.StartMs/1000, 'f', -1, 64)+".."+end)
		}
		if id.Scale != 0 && id.Scale != 1 {
			f = append(f, "--scale-rate "+strconv.FormatFloat(id.Scale, 'f', -1, 64))
		}
		if id.Limit > 0 {
			f = append(f, "--limit "+strconv.Itoa(id.Limit))
		}
		if id.Sessions {
			f = append(f, "--sessions")
		}
		if id.MaxSessions > 0 {
			f = append(f, "--max-sessions "+strconv.Itoa(id.MaxSessions))
		}
		if len(f) == 0 {
			f = append(f, "the whole trace")
		}
		out = append(out, strings.Join(f, " "))
	}
	return strings.Join(slices.Compact(out), "; ")
}

// printBest runs the funnel and prints the table. Headers name what they show:
// TTFT(avg) is the legacy blended-mean estimate in legacy mode, TTFT(P<q>) the
// steady quantile in percentile mode; ITL(P99) (or the ITL constraint's percentile);
// TPOT(avg) unless a TPOT percentile is constrained.
func printBest(c *cli.Context, st *store.Store, ev refine.Evaluator, f store.PointFilter, sla refine.SLA) error {
	refineOn := !c.Bool("no-refine")
	if sla.PercentileMode && !refineOn {
		for _, k := range sla.Constraints {
			if k.Metric == refine.TPOT || k.Metric == refine.RequestLatency {
				fmt.Fprintf(c.App.ErrWriter, "aicdb: note: %s is enforced on screening estimates only (QUEUEING.md §7: TPOT and request-latency percentiles need the evaluator); drop --no-refine to resolve them\n", k.Label())
			}
		}
	}
	// Without an SLA no row is undecided: refining would only upgrade the reported
	// rows to quantitative tier (QUEUEING.md §7), seconds of evaluation that no
	// constraint needs, so only an explicit --sla-refine asks for it.
	upgradeOnly := sla.Empty() && !c.Bool("sla-refine")
	res, err := refine.Best(c.Context, st, ev, refine.BestOptions{Filter: f, SLA: sla, TopK: c.Int("top"),
		Refine: refineOn && !upgradeOnly, MaxEvals: c.Int("max-evals"), AllowPreemption: c.Bool("allow-preemption")})
	inner := ev
	if t, ok := ev.(*refine.TraceEvaluator); ok {
		inner = t.Evaluator
	}
	if l, ok := inner.(*lazyEvaluator); ok {
		l.progress.Done() // end a terminal progress line before the table
	}
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
		if tw := readTraceWorkload(c); tw.Name != "" {
			if have := storedTraceSlices(c.Context, st, tw.Name); have != "" {
				return userErrorf("best: --trace %s: no stored rows for this slice; the store has rows for %s: pass the same slice flags", tw.Name, have)
			}
		}
		return userErrorf("best: no stored points match the filters: run 'aicdb sweep' first or relax --model/--system/--isl/…")
	}
	var err2 error
	if c.String("format") != formatTable {
		err2 = writeBestRecords(c, res)
	} else {
		err2 = writeBestTable(c, res, sla)
	}
	if err2 != nil {
		return err2
	}
	if len(res.Rows) == 0 {
		msg := "aicdb: no stored configuration meets the SLA"
		if sla.PercentileMode && res.NoQueueing > 0 {
			msg += fmt.Sprintf(" (%d of %d candidates have no queueing distributions — composed disagg rows: a prefix, or an evaluator without the tandem — so percentile constraints cannot pass them)",
				res.NoQueueing, res.Candidates)
		}
		fmt.Fprintln(c.App.ErrWriter, msg)
		if miss := closestMiss(res.Points, sla); miss != "" {
			fmt.Fprintln(c.App.ErrWriter, "aicdb: closest miss: "+miss)
		}
	}
	if upgradeOnly && refineOn && slices.ContainsFunc(res.Rows, func(p store.Point) bool { return p.Q.Tier == store.TierScreening }) {
		fmt.Fprintln(c.App.ErrWriter, "aicdb: rows ranked as stored (no SLA given); --sla-refine evaluates the screening-tier ones at quantitative tier")
	}
	if res.Preempting > 0 {
		fmt.Fprintf(c.App.ErrWriter, "aicdb: %d points left out: their steady state preempts (KV pool too small for their concurrency); --allow-preemption shows them\n", res.Preempting)
	}
	if res.Evaluated > 0 || res.Unresolved > 0 || res.Hidden > 0 {
		msg := fmt.Sprintf("aicdb: %d candidates, %d eliminated, %d evaluated, %d reported unresolved at screening tier",
			res.Candidates, res.Eliminated, res.Evaluated, res.Unresolved)
		if res.Hidden > 0 {
			hint := "drop --no-refine to resolve them"
			if refineOn {
				hint = "the evaluator has no quantitative tier for them, or --max-evals ran out"
			}
			msg += fmt.Sprintf("; %d undecided configurations not shown: their screening estimates miss the SLA (%s)", res.Hidden, hint)
		}
		fmt.Fprintln(c.App.ErrWriter, msg)
	}
	if res.SessionsEvicted > 0 {
		fmt.Fprintf(c.App.ErrWriter, "aicdb: %d W4 rows kept at screening tier: the quantitative tier refuses them, their session contexts do not stay cached in the KV pool (first: %s); 'aicdb trace replay --sessions --tier oracle' models the eviction\n",
			res.SessionsEvicted, res.FirstSessionsEvicted)
	}
	return nil
}

// writeBestTable prints the table. Its latency columns are the SLA's statistics
// under their view keys (ttft_steady_p99, itl_p99, …; headers "TTFT p99 (ms)"),
// or aiconfigurator's legacy means (ttft, tpot, request_latency; "TTFT legacy
// est. (ms)") where the SLA is a legacy one: one source per column, never mixed
// across rows. csv, json and jsonl use bestJSONColumns' fixed keys instead.
func writeBestTable(c *cli.Context, res refine.BestResult, sla refine.SLA) error {
	ttftPct, itlPct, tpotPct := refine.Avg, refine.P99, refine.Avg
	var e2ePct refine.Percentile // set when a request-latency percentile is constrained
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
		case refine.RequestLatency:
			e2ePct = k.Pct
		}
	}
	ttftKey, tpotKey, reqKey := "ttft", "tpot", "request_latency" // the legacy means
	if sla.PercentileMode {
		ttftKey, tpotKey = queueingKey("ttft_steady_", ttftPct), queueingKey("tpot_", tpotPct)
	}
	if e2ePct != "" {
		reqKey = queueingKey("e2e_", e2ePct) // the constrained statistic, not the legacy mean
	}
	cols := []string{"rank", "mode", "parallel", "batch", "ctx_tokens", "tokens_per_s_per_gpu", "tokens_per_s_per_user",
		ttftKey, queueingKey("itl_", itlPct), tpotKey, reqKey, "concurrency", "num_gpus", "queueing_tier"}
	var data [][]any
	for i, p := range res.Rows {
		var ttft, tpot, req any = p.Legacy.TTFT, p.Legacy.TPOT, p.Legacy.RequestLatency
		if sla.PercentileMode {
			ttft, tpot = queueingValue(&p, "ttft_steady_", ttftPct), queueingValue(&p, "tpot_", tpotPct)
		}
		if e2ePct != "" {
			req = queueingValue(&p, "e2e_", e2ePct)
		}
		tier := p.Q.Tier
		if res.Verdicts[i] == refine.Straddle {
			tier += " (unresolved)"
		}
		if p.Q.KV.Preempts() {
			tier += fmt.Sprintf(" (preempts %.3g/req)", p.Q.KV.PreemptionsPerRequest)
		}
		data = append(data, []any{int64(i + 1), p.Mode, p.Parallel(), int64(p.Batch), int64(p.CtxTokens),
			p.Legacy.TokensPerSPerGPU, p.Legacy.TokensPerSPerUser, ttft, queueingValue(&p, "itl_", itlPct), tpot,
			req, int64(p.Legacy.Concurrency), int64(p.NumGPUs()), tier})
	}
	cols, data = withFidelity(res, cols, data)
	return writeRows(c.App.Writer, c.String("format"), cols, data)
}

// queueingKey is the queueing column of a statistic: prefix+stat, mean for avg.
func queueingKey(prefix string, pct refine.Percentile) string {
	if pct == refine.Avg {
		return prefix + "mean"
	}
	return prefix + string(pct)
}

// withFidelity adds a workload_fidelity column (W3, W4, …) and a replicas column
// when some row was swept under a trace: its numbers are the trace replay's.
func withFidelity(res refine.BestResult, cols []string, data [][]any) ([]string, [][]any) {
	trace := false
	for i := range res.Rows {
		trace = trace || res.Rows[i].Workload != ""
	}
	if !trace {
		return cols, data
	}
	for i := range data {
		p := &res.Rows[i]
		var replicas any
		if id, err := refine.ParseTraceWorkload(p.Workload); err == nil {
			replicas = int64(id.Replicas)
		}
		data[i] = append(data[i], p.Q.Fidelity, replicas)
	}
	return append(cols, "workload_fidelity", "replicas"), data
}

// bestJSONColumns are the fixed keys of `best --format csv|json|jsonl`: the same set and
// order whatever the SLA flags (issue 8), the points view's column names (one key
// per quantity across commands): ttft, tpot and request_latency are
// aiconfigurator's legacy (mean) estimates, then the queueing columns at the
// row's tier (queueing_tier) in their documented order, null where the row has none.
func bestJSONColumns() []string {
	cols := []string{"rank", "mode", "parallel", "batch", "ctx_tokens", "tokens_per_s_per_gpu", "tokens_per_s_per_user",
		"ttft", "tpot", "request_latency"}
	cols = append(cols, store.QueueingColumns[:]...)
	return append(cols, "concurrency", "num_gpus", "queueing_tier", "resolved", "kv_util_peak", "preemptions_per_request")
}

// writeBestRecords prints the rows with bestJSONColumns keys (csv, json, jsonl).
func writeBestRecords(c *cli.Context, res refine.BestResult) error {
	cols := bestJSONColumns()
	data := make([][]any, 0, len(res.Rows))
	for i, p := range res.Rows {
		r := []any{int64(i + 1), p.Mode, p.Parallel(), int64(p.Batch), int64(p.CtxTokens),
			p.Legacy.TokensPerSPerGPU, p.Legacy.TokensPerSPerUser, p.Legacy.TTFT, p.Legacy.TPOT, p.Legacy.RequestLatency}
		for j := range store.QueueingColumns {
			if p.Q.Valid {
				r = append(r, p.Q.V[j])
			} else {
				r = append(r, nil)
			}
		}
		r = append(r, int64(p.Legacy.Concurrency), int64(p.NumGPUs()), p.Q.Tier, res.Verdicts[i] == refine.Pass,
			nullableKV(p.Q.KV.UtilPeak, p.Q.KV.HasUtil), nullableKV(p.Q.KV.PreemptionsPerRequest, p.Q.KV.HasPreemptions))
		data = append(data, r)
	}
	cols, data = withFidelity(res, cols, data)
	return writeRows(c.App.Writer, c.String("format"), cols, data)
}

// queueingValue reads prefix+stat (mean for avg) from the row, nil when absent.
func queueingValue(p *store.Point, prefix string, pct refine.Percentile) any {
	i := store.QueueingIndex(queueingKey(prefix, pct))
	if i < 0 || !p.Q.Valid {
		return nil
	}
	return p.Q.V[i]
}

// nullableKV is v, or nil (JSON null) when the row does not know it.
func nullableKV(v float64, ok bool) any {
	if !ok {
		return nil
	}
	return v
}

// closestMiss describes the stored row of pts (the funnel's candidates,
// refine.BestResult.Points) that comes closest to the SLA when none meets it: the
// row whose worst constraint exceeds its target by the smallest factor (value ÷
// target), with every constrained value, its target and by how much it misses —
// so a user sees how far off the SLA is. Rows without a value for some constraint
// (OOM, composed rows) are skipped; "" when no row has them all. Ties go to the
// first row in the store's order.
func closestMiss(pts []store.Point, sla refine.SLA) string {
	best, bestRatio := -1, math.Inf(1)
	for i := range pts {
		worst := 0.0
		for _, k := range sla.Constraints {
			v, ok := k.Value(&pts[i])
			if !ok || !(k.TargetMs > 0) || math.IsNaN(v) || math.IsInf(v, 0) {
				worst = math.Inf(1)
				break
			}
			worst = max(worst, v/k.TargetMs)
		}
		if worst < bestRatio {
			best, bestRatio = i, worst
		}
	}
	if best < 0 {
		return ""
	}
	p := &pts[best]
	parts := make([]string, 0, len(sla.Constraints))
	for _, k := range sla.Constraints {
		v, _ := k.Value(p)
		verdict := "meets it"
		if v > k.TargetMs {
			verdict = fmt.Sprintf("misses by %.3g ms (+%.1f%%)", v-k.TargetMs, 100*(v/k.TargetMs-1))
		}
		parts = append(parts, fmt.Sprintf("%s %.4g ms (SLA ≤ %.4g: %s)", k.Label(), v, k.TargetMs, verdict))
	}
	tier := p.Q.Tier
	if tier == "" {
		tier = "legacy estimate"
	}
	return fmt.Sprintf("%s %s batch %d: %s; %s tier", p.Mode, p.Parallel(), p.Batch, strings.Join(parts, ", "), tier)
}
