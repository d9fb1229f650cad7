package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// sweepCommand evaluates aiconfigurator's default search space into the store
// (incremental, parallel, whole-row batches) and prints the best configs when SLA
// flags are given.
func sweepCommand() *cli.Command {
	flags := slices.Concat(sweepDeployment.flags(), []cli.Flag{&cli.IntFlag{Name: "total-gpus", Usage: "GPU budget `N`", Required: true}},
		sweepShape.flags(), []cli.Flag{
			&cli.StringFlag{Name: "mode", Aliases: []string{"modes"}, Value: "agg", Usage: "`MODE`: agg, disagg, all or a list (agg,disagg = all); disagg rows are priced by the prefill/decode tandem"},
		}, sweepListFlags(), []cli.Flag{
			&cli.BoolFlag{Name: "chunked-prefill", Usage: "aiconfigurator's enable_chunked_prefill for the ctx_tokens grid"},
			engineProfileFlag(queueing.ProfileAIConfigurator), engineConfigFlag(),
			&cli.IntFlag{Name: "workers", Usage: "parallel evaluations (default: all cores)"},
			&cli.IntFlag{Name: "commit-every", Value: 256, Usage: "rows per transaction"},
			&cli.IntFlag{Name: "top", Value: 5, Usage: "configs to print when SLA flags are given"},
			formatFlag("table"),
			quietFlag(),
			calibrationFlag(),
			deployedVersionFlag(deployedVersionUsage),
			&cli.IntFlag{Name: "nextn", Usage: "run every point with MTP (TensorRT-LLM one-model MTP, SGLang EAGLE/NEXTN): N draft tokens per decode step (a disaggregated point: both pools; needs --nextn-accepted)"},
			&cli.Float64Flag{Name: "nextn-accepted", Usage: "with --nextn: the mean drafts accepted per decode step, 0..nextn (measured for the model and data)"},
		}, traceWorkloadFlags("workload: the stored trace `NAME` (W3: its arrivals, lengths and prefix reuse) instead of --isl/--osl/--prefix; agg only",
			"with --trace, W4: a session's later turn arrives at its previous turn's completion + think time",
			"with --sessions: at most `N` sessions in progress per replica (0 = no cap)"))
	flags = append(flags, sliceFlags()...)
	return &cli.Command{
		Name:  "sweep",
		Usage: "evaluate the default search space into the store (incremental; prints best configs with SLA flags)",
		Description: `Example:
   aicdb sweep --model Qwen/Qwen3-32B --system h200_sxm --backend vllm --total-gpus 8 --isl 4000 --osl 500
   aicdb sweep --model Qwen/Qwen3-32B --system h200_sxm --backend vllm --total-gpus 8 --trace conv --window 0..600
Points already stored are not evaluated again; an interrupted sweep resumes when rerun.
With --trace the workload of every point is the stored trace (slice: --window,
--scale-rate, --limit; --sessions for W4): the deployment is --total-gpus / (tp·pp)
replicas, the trace's requests routed over them round-robin at arrival
(docs/traces.md).`,
		Flags:  append(flags, slaFlags()...),
		Action: runSweep,
	}
}

// The deployment and shape flags of sweep (the parallelism is a search space:
// --tp is a list).
var (
	sweepDeployment = deploymentSpec{model: "model `ID` known to the store", system: "GPU `SYSTEM` (e.g. h200_sxm)",
		backend: "`BACKEND`: " + engine.List(", ", " or "), version: "backend `VERSION` (default: newest in the store)",
		required: []string{"model", "system", "backend"}}
	sweepShape = shapeSpec{isl: "prompt length `N` in tokens (required unless --trace)",
		osl: "output length `N` in tokens (required unless --trace)", prefix: "prefix-cached prompt tokens `N`"}
)

// sweepLists are sweep's search-space lists: flag, usage and the spec field.
var sweepLists = []struct {
	name, usage string
	dst         func(s *refine.SweepSpec) *[]int
}{
	{"tp", "tensor-parallel sizes `LIST` (default 1,2,4,8)", func(s *refine.SweepSpec) *[]int { return &s.TPs }},
	{"batch", "agg batch sizes `LIST` (default: aiconfigurator's schedule)", func(s *refine.SweepSpec) *[]int { return &s.Batches }},
	{"ctx-tokens", "agg prefill budgets `LIST` (default: aiconfigurator's list for --isl)", func(s *refine.SweepSpec) *[]int { return &s.CtxTokens }},
	{"decode-batch", "disagg decode batch sizes `LIST` (default: aiconfigurator's schedule)", func(s *refine.SweepSpec) *[]int { return &s.DecodeBatches }},
}

// sweepListFlags declares the search-space lists.
func sweepListFlags() []cli.Flag {
	out := make([]cli.Flag, len(sweepLists))
	for i, l := range sweepLists {
		out[i] = &cli.StringFlag{Name: l.name, Usage: l.usage}
	}
	return out
}

func parseList(c *cli.Context, name string) ([]int, error) {
	s := strings.TrimSpace(c.String(name))
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v <= 0 {
			return nil, userErrorf("--%s %q: want a comma-separated list of integers > 0", name, s)
		}
		out = append(out, v)
	}
	return out, nil
}

// sweepMode reads --mode (alias --modes): agg, disagg, all, or a comma list of agg
// and disagg (both = all).
func sweepMode(m string) (string, error) {
	agg, dis := false, false
	for _, part := range strings.Split(m, ",") {
		switch strings.TrimSpace(part) {
		case "agg":
			agg = true
		case "disagg":
			dis = true
		case "all":
			agg, dis = true, true
		default:
			return "", userErrorf("--mode %q: use agg, disagg, all or agg,disagg", m)
		}
	}
	switch {
	case agg && dis:
		return "all", nil
	case dis:
		return "disagg", nil
	}
	return "agg", nil
}

func sweepSpec(c *cli.Context) (refine.SweepSpec, error) {
	dep, sh := readDeployment(c), readShape(c)
	if err := resolveDeployed(c.Context, c.String("db"), &dep, c.App.ErrWriter); err != nil {
		return refine.SweepSpec{}, err
	}
	s := refine.SweepSpec{Model: dep.Model, System: dep.System, Backend: dep.Backend,
		Version: dep.Version, Deployed: dep.Deployed, TotalGPUs: c.Int("total-gpus"), ISL: sh.ISL, OSL: sh.OSL,
		Prefix: sh.Prefix, ChunkedPrefill: c.Bool("chunked-prefill")}
	mode, err := sweepMode(c.String("mode"))
	if err != nil {
		return s, err
	}
	if s.NextN, s.NextNAccepted, err = readMTP(c); err != nil {
		return s, err
	}
	if s.NextN > 0 && !engine.DraftsModelled(engine.Backend(s.Backend)) {
		return s, userErrorf("--nextn %d: MTP is not modelled for --backend %s; drop --nextn", s.NextN, s.Backend)
	}
	s.Modes = []string{mode}
	if mode == "all" {
		s.Modes = []string{"agg", "disagg"}
	}
	for _, l := range sweepLists {
		if *l.dst(&s), err = parseList(c, l.name); err != nil {
			return s, err
		}
	}
	if mode == "disagg" && (s.Batches != nil || s.CtxTokens != nil) {
		return s, userErrorf("--batch/--ctx-tokens apply to agg rows but --mode is disagg: use --decode-batch, or --mode all")
	}
	if mode == "agg" && s.DecodeBatches != nil {
		return s, userErrorf("--decode-batch applies to disagg rows but --mode is agg: use --mode disagg or all")
	}
	if c.Int("workers") < 0 || c.Int("commit-every") <= 0 || c.Int("top") <= 0 {
		return s, userErrorf("--workers must be ≥ 0, --commit-every and --top > 0")
	}
	if err := sweepTraceFlags(c, &s); err != nil {
		return s, err
	}
	return s, sweepEngineFlags(c, &s)
}

// sweepTraceFlags reads --trace and its slice and session flags: the trace
// replaces the fixed shape, so --isl/--osl/--prefix conflict with it, and a
// disaggregated sweep cannot replay one.
func sweepTraceFlags(c *cli.Context, s *refine.SweepSpec) error {
	traceOnly := []string{"window", "scale-rate", "limit", "sessions", "max-sessions"}
	tw, sh := readTraceWorkload(c), readShape(c)
	if !tw.set.given("trace") {
		for _, n := range traceOnly {
			if c.IsSet(n) {
				return userErrorf("--%s applies to a trace workload: give --trace NAME, or drop --%s", n, n)
			}
		}
		if !sh.set.given("isl") || !sh.set.given("osl") {
			return userErrorf("--isl and --osl are required (or give a stored trace as the workload with --trace NAME)")
		}
		return nil
	}
	for _, n := range []string{"isl", "osl", "prefix"} {
		if sh.set.given(n) {
			return userErrorf("--trace %s is the workload: it replaces --isl/--osl/--prefix; drop --%s", tw.Name, n)
		}
	}
	if m, err := sweepMode(c.String("mode")); err != nil || m != "agg" {
		return userErrorf("--trace: disaggregated deployments are not replayed under a trace yet (the prefill/decode tandem has no trace driver): use --mode agg")
	}
	if tw.set.given("max-sessions") && !tw.Sessions {
		return userErrorf("--max-sessions needs --sessions")
	}
	if tw.MaxSessions < 0 {
		return userErrorf("--max-sessions %d: must be ≥ 0 (0 = no cap)", tw.MaxSessions)
	}
	sl, err := traceSlice(c)
	if err != nil {
		return err
	}
	s.Trace = &refine.TraceSpec{Name: tw.Name, Slice: sl, Sessions: tw.Sessions, MaxSessions: tw.MaxSessions}
	return nil
}

func runSweep(c *cli.Context) error {
	ctx := c.Context
	spec, err := sweepSpec(c)
	if err != nil {
		return err
	}
	sla, err := slaFromFlags(c)
	if err != nil {
		return err
	}
	if err := checkFormat(c.String("format")); err != nil {
		return err
	}
	st, err := store.Open(ctx, c.String("db"), store.Options{MustExist: true})
	if err != nil {
		return asUser(err)
	}
	defer st.Close()
	ev, err := newEvaluator(ctx, st)
	if err != nil {
		return err
	}
	if ev, err = withCalibration(c, st, ev); err != nil {
		return err
	}
	opt := refine.SweepOptions{Workers: c.Int("workers"), BatchSize: c.Int("commit-every"), Arguments: spec}
	bar := newProgress(c, "sweep", "points")
	opt.Progress = bar.Update
	opt.OnWait = func(h store.SweepLease) {
		fmt.Fprintf(c.App.ErrWriter, "aicdb: note: sweep %d (pid %d on %s) is evaluating these points; waiting for it to finish, then reusing its rows\n",
			h.SweepID, h.PID, h.Host)
	}
	res, err := refine.Sweep(ctx, st, ev, spec, opt)
	bar.Done()
	if res.Abandoned > 0 {
		fmt.Fprintf(c.App.ErrWriter, "aicdb: note: %d earlier sweep(s) left running by a killed process marked interrupted in the sweeps table\n", res.Abandoned)
	}
	if err != nil && ctx.Err() != nil {
		// Ctrl-C / SIGTERM: the committed batches are whole rows; not an internal error.
		if res.SweepID == 0 {
			return userErrorf("sweep interrupted before it evaluated any point: re-run the same command to start it")
		}
		return userErrorf("sweep %d interrupted after %d of %d points (%d already stored, %d evaluated now; committed rows are kept): re-run the same command to resume",
			res.SweepID, res.Skipped+res.Evaluated+res.NoPerfData, res.Total, res.Skipped, res.Evaluated)
	}
	if err != nil {
		if res.SweepID == 0 || errors.Is(err, refine.ErrNoPerfData) || errors.Is(err, store.ErrNotFound) {
			// Rejected before any work (bad input), or the perf data prices no point
			// of it (a model/system/backend combination the data does not cover).
			return asUser(err)
		}
		return err
	}
	// With a machine format (csv, json, jsonl) stdout holds the best configs
	// only; the sweep's own lines go to stderr.
	sumW := c.App.Writer
	if c.String("format") != formatTable {
		sumW = c.App.ErrWriter
	}
	shape := fmt.Sprintf("isl %d, osl %d", spec.ISL, spec.OSL)
	if spec.Trace != nil {
		fid := "W3"
		if spec.Trace.Sessions {
			fid = "W4"
		}
		shape = fmt.Sprintf("trace %s, %s, mean isl %d, osl %d", spec.Trace.Name, fid, spec.Trace.MeanISL, spec.Trace.MeanOSL)
	}
	fmt.Fprintf(sumW, "sweep %d: %d points for %s on %s %s %s (%s): %d evaluated, %d already stored, %d OOM, %d no perf data\n",
		res.SweepID, res.Total, spec.Model, spec.System, spec.Backend, res.Version, shape, res.Evaluated, res.Skipped, res.OOM, res.NoPerfData)
	if res.NoPerfData > 0 {
		fmt.Fprintf(c.App.ErrWriter, "aicdb: note: %d points skipped for lack of perf data (not stored; aiconfigurator skips them too), first: %s\n",
			res.NoPerfData, oneLine(res.FirstNoPerfData))
	}
	if res.KVTight > 0 {
		fmt.Fprintf(sumW, "%d KV-tight points (the KV pool cannot hold C requests at full length) evaluated at quantitative tier: %d preempt, left off the pareto front (best --allow-preemption shows them)\n",
			res.KVTight, res.Preempting)
	}
	if res.Replaced > 0 {
		fmt.Fprintf(sumW, "replaced %d stored rows made by an older evaluator version (%s is current)\n", res.Replaced, ev.Name())
	}
	f := store.PointFilter{Model: spec.Model, System: spec.System, Backend: spec.Backend, Version: res.Version, Deployed: cmp.Or(spec.Deployed, res.Version),
		ISL: spec.ISL, OSL: spec.OSL, Prefix: spec.Prefix, PrefixSet: spec.Trace == nil, WorkloadSet: spec.Trace == nil}
	if len(spec.Modes) == 1 {
		f.Mode = spec.Modes[0]
	}
	if spec.Trace != nil {
		refine.TraceFilter(&f, *spec.Trace, spec.TotalGPUs)
	}
	if name := c.String("calibration"); name != "" {
		cf := f
		cf.Where, cf.WhereArgs = "evaluator = ?", []any{ev.Name()}
		if err := noteCalibrationCoverage(c, st, cf, name, sumW); err != nil {
			return err
		}
		if err := noteCalibrationUnseen(c, st, name, sumW); err != nil {
			return err
		}
	}
	if sla.Empty() {
		return nil
	}
	if spec.Trace != nil {
		return printBest(c, st, refine.WithTraces(ev, st), f, sla)
	}
	return printBest(c, st, ev, f, sla)
}

// noteCalibrationCoverage prints how many of the points f selects (a
// calibrated sweep's, accuracy's predictions) calibration name covers: a point
// whose system, backend, version, deployed version, model, quantisation or
// layout it has no fit for stays uncalibrated, and the note says how many and
// where to read which.
func noteCalibrationCoverage(c *cli.Context, st *store.Store, f store.PointFilter, name string, w io.Writer) error {
	f.IncludeOOM = true
	cal, uncal, err := st.CalibrationCoverage(c.Context, f)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "calibration %s: %d of %d points calibrated", name, cal, cal+uncal)
	if uncal > 0 {
		fmt.Fprintf(w, "; %d uncalibrated (no fit for their quantisation or layout: select * from point_calibrations where calibration_status like 'uncalibrated%%')", uncal)
	}
	fmt.Fprintln(w)
	return nil
}

// newEvaluator returns the evaluator the sweep, best and query commands use:
// the perf-database evaluator over the store, or with AICDB_EVALUATOR=synthetic the
// deterministic synthetic one (tests and demos without perf data;
// AICDB_SYNTHETIC_DELAY slows each point, for interruption tests;
// AICDB_SYNTHETIC_NODATA_TP=N makes agg points at tp N perf-data gaps).
func newEvaluator(ctx context.Context, st *store.Store) (refine.Evaluator, error) {
	switch v := os.Getenv("AICDB_EVALUATOR"); v {
	case "synthetic":
		var syn refine.Synthetic
		if s := os.Getenv("AICDB_SYNTHETIC_DELAY"); s != "" {
			var err error
			if syn.Delay, err = time.ParseDuration(s); err != nil {
				return nil, userErrorf("AICDB_SYNTHETIC_DELAY %q: %v", s, err)
			}
		}
		if s := os.Getenv("AICDB_SYNTHETIC_NODATA_TP"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n <= 0 {
				return nil, userErrorf("AICDB_SYNTHETIC_NODATA_TP %q: want a tensor-parallel size > 0", s)
			}
			syn.NoDataTP = n
		}
		return syn, nil
	case "", "perfdb":
		return perfdbEvaluator(ctx, st)
	default:
		return nil, userErrorf("AICDB_EVALUATOR %q: use perfdb or synthetic", v)
	}
}

// lazyEvaluator builds the evaluator on first use (loading perf data costs time a
// query without straddlers should not pay). With a progress reporter it reports
// the quantitative evaluations of a refinement (refine.EvaluationObserver).
type lazyEvaluator struct {
	st   *store.Store
	once sync.Once
	ev   refine.Evaluator
	err  error

	progress    *progressReporter
	done, total atomic.Int64
}

// ExpectEvaluations implements refine.EvaluationObserver.
func (l *lazyEvaluator) ExpectEvaluations(n int) {
	l.progress.Update(int(l.done.Load()), int(l.total.Add(int64(n))))
}

// withProgress reports this evaluator's quantitative evaluations on p.
func (l *lazyEvaluator) withProgress(p *progressReporter) *lazyEvaluator {
	l.progress = p
	return l
}

func newLazyEvaluator(st *store.Store) *lazyEvaluator { return &lazyEvaluator{st: st} }

func (l *lazyEvaluator) get(ctx context.Context) (refine.Evaluator, error) {
	l.once.Do(func() { l.ev, l.err = newEvaluator(ctx, l.st) })
	return l.ev, l.err
}

func (l *lazyEvaluator) Name() string {
	if ev, err := l.get(context.Background()); err == nil {
		return ev.Name()
	}
	return "unavailable"
}

func (l *lazyEvaluator) Resolve(ctx context.Context, model, system, backend, version string) (refine.Resolved, error) {
	ev, err := l.get(ctx)
	if err != nil {
		return refine.Resolved{}, err
	}
	return ev.Resolve(ctx, model, system, backend, version)
}

func (l *lazyEvaluator) Legacy(ctx context.Context, in store.PointInputs) (store.Legacy, error) {
	ev, err := l.get(ctx)
	if err != nil {
		return store.Legacy{}, err
	}
	return ev.Legacy(ctx, in)
}

func (l *lazyEvaluator) Screen(ctx context.Context, in store.PointInputs) (store.Queueing, error) {
	ev, err := l.get(ctx)
	if err != nil {
		return store.Queueing{}, err
	}
	return ev.Screen(ctx, in)
}

func (l *lazyEvaluator) Quantitative(ctx context.Context, in store.PointInputs) (store.Quantitative, error) {
	ev, err := l.get(ctx)
	if err != nil {
		return store.Quantitative{}, err
	}
	q, err := ev.Quantitative(ctx, in)
	l.progress.Update(int(l.done.Add(1)), int(max(l.total.Load(), l.done.Load())))
	return q, err
}

// PointSetup implements refine.PointTimer (trace rows) for the evaluator it wraps.
func (l *lazyEvaluator) PointSetup(ctx context.Context, in store.PointInputs, maxISL, maxOSL int) (refine.PointSetup, error) {
	ev, err := l.get(ctx)
	if err != nil {
		return refine.PointSetup{}, err
	}
	pt, ok := ev.(refine.PointTimer)
	if !ok {
		return refine.PointSetup{}, fmt.Errorf("evaluator %s cannot replay traces", ev.Name())
	}
	return pt.PointSetup(ctx, in, maxISL, maxOSL)
}

// perfdbEvaluator returns the perf-database evaluator over the perf data and models
// stored in st (by 'aicdb init' or 'aicdb perfdb import').
func perfdbEvaluator(_ context.Context, st *store.Store) (refine.Evaluator, error) {
	return refine.NewPerfdbEvaluator(refine.StoreSource{St: st}), nil
}
