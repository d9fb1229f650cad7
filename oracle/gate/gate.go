// Package gate is the validation gate (QUEUEING.md §8): it drives the queueing model's
// quantitative evaluator and the oracle's discrete-event simulation with identical
// synthetic timing over families of configurations, and reports per-metric residuals
// against fixed tolerances. It is the only place that imports both sides.
package gate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// Family is one gated configuration: a workload and an engine given to both sides,
// and the timing they share.
type Family struct {
	Name   string
	Spec   workload.Spec
	Engine engine.Spec
	// Timing prices passes on both sides: linear in the gate's own families, perf
	// data for a stored point (PointDistributions).
	Timing timing.Timing
	// KnownFailing, when set, keeps the family in the table but out of the verdict,
	// with this reason (the lead decides what goes here; it is printed, never silent).
	KnownFailing string
	// OracleKVTokens, when > 0, gives the DES a KV pool of this many tokens that the
	// model does not see (a regime the model does not cover, shown with its residual).
	OracleKVTokens int
	// Closed-loop client semantics given to both sides (queueing.Options): the
	// stagger mixture over StaggerPhases client phases (0: the burst) and the client
	// round trip of a replacement request.
	StaggerPhases int
	ClientRTTMs   float64
}

// Row is the outcome of one family.
type Row struct {
	Family   Family
	Model    Metrics
	Oracle   Metrics
	Resid    []float64 // per metric, (model − oracle)/oracle
	Failures []string  // metrics over tolerance
	Err      error     // a side failed to evaluate
}

// RunFamily evaluates one family on both sides.
func RunFamily(ctx context.Context, f Family) Row {
	row := Row{Family: f}
	model, rep, err := runModel(ctx, f)
	if err != nil {
		row.Err = err
		return row
	}
	orc, err := runOracle(ctx, f, rep)
	if err != nil {
		row.Err = fmt.Errorf("oracle: %w", err)
		return row
	}
	row.Model, row.Oracle = model, orc
	row.Resid, row.Failures = compare(model.values(), orc.values(), tolerances, metricNames)
	return row
}

// runModel evaluates the family with the quantitative evaluator. The gated values are
// the report's own (what the product stores); the per-request records are measured
// too, as a consistency check of the report's aggregation. It also returns the
// report, whose steady windows and stagger cycle drive the oracle the same way.
func runModel(ctx context.Context, f Family) (Metrics, *queueing.Report, error) {
	opt := queueing.Options{RecordTokenTimes: true, StaggerPhases: f.StaggerPhases, ClientRTTMs: f.ClientRTTMs}
	rep, err := queueing.QuantitativeWith(ctx, f.Spec, f.Engine, f.Timing, opt)
	if err != nil {
		return Metrics{}, nil, fmt.Errorf("model: %w", err)
	}
	if rep.Unstable {
		return Metrics{}, nil, fmt.Errorf("model: unstable: %s", rep.UnstableReason)
	}
	phases := map[int][]rec{}
	var trans []rec
	for _, r := range rep.Requests {
		x := rec{slot: r.Slot, gen: r.Generation, arrival: r.ArrivalMs, ttft: r.TTFTMs, e2e: r.E2EMs, tokens: r.TokenMs}
		if r.Transient {
			trans = append(trans, x)
		} else {
			phases[r.Phase] = append(phases[r.Phase], x)
		}
	}
	groups := make([][]rec, 0, len(phases))
	for i := 0; i <= f.StaggerPhases; i++ {
		if g, ok := phases[i]; ok {
			groups = append(groups, g)
		}
	}
	openEnd := 0.0
	if f.Spec.Concurrency <= 0 {
		openEnd = rep.Diagnostics.WindowEndMs
	}
	fromRecords, err := measure(groups, trans, f.Spec.TurnaroundMs+cycleRTT(f), openEnd)
	if err != nil {
		return fromRecords, nil, fmt.Errorf("model records: %w", err)
	}
	reported := Metrics{
		TTFTMean: rep.TTFTSteady.Mean(), TTFTP50: rep.TTFTSteady.Quantile(0.5), TTFTP99: rep.TTFTSteady.Quantile(0.99),
		TransMean: rep.TTFTTransient.Mean(), TransMax: rep.TTFTTransient.Max(),
		ITLP50: rep.ITL.Quantile(0.5), ITLP99: rep.ITL.Quantile(0.99), TPOTMean: rep.TPOT.Mean(),
		TPOTP50: rep.TPOT.Quantile(0.5), TPOTP99: rep.TPOT.Quantile(0.99),
		ThroughputRPS: rep.ThroughputRPS,
	}
	for i, v := range reported.values() {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return reported, nil, fmt.Errorf("model: reported %s = %v: not finite", metricNames[i], v)
		}
	}
	if err := consistent(reported, fromRecords); err != nil {
		return reported, nil, fmt.Errorf("model: %w", err)
	}
	return reported, rep, nil
}

// cycleRTT is the client round trip of a closed-loop family (part of each slot's
// cycle, not of its TTFT/E2E).
func cycleRTT(f Family) float64 {
	if f.Spec.Concurrency > 0 {
		return f.ClientRTTMs
	}
	return 0
}

// consistent checks that the model's reported metrics equal what its own per-request
// records give, to 1e-4 relative (records may be rounded): a mis-aggregation, e.g. an
// ITL quantile taken by branching instead of from the gap atoms, fails here.
func consistent(got, m Metrics) error {
	gv, mv := got.values(), m.values()
	for i := range gv {
		if r := residual(gv[i], mv[i]); math.IsNaN(r) || math.Abs(r) > 1e-4 {
			return fmt.Errorf("report %s = %v but its own records give %v", metricNames[i], gv[i], mv[i])
		}
	}
	return nil
}

// oracleEngine is the family's engine spec with the oracle's KV pool: large
// enough that no request is ever preempted unless the family sets a KV capacity
// (then both sides get it, families_kv.go), and prefix caching on exactly when the
// workload has a prefix.
func oracleEngine(f Family, inflight int) (engine.Spec, error) {
	e := f.Engine
	if _, ok := e.Backend.Calendar(); !ok {
		return e, fmt.Errorf("backend %s: the oracle core is not built", e.Backend)
	}
	bs := max(e.BlockSize, 1)
	blocksPer := (maxOf(f.Spec.ISL, f.Spec.ISLQuantiles) + maxOf(f.Spec.OSL, f.Spec.OSLQuantiles) + bs) / bs
	oe := e
	oe.BlockSize, oe.EnablePrefixCaching = bs, f.Spec.Prefix > 0
	blocks := inflight*blocksPer + f.Spec.Prefix/bs + 16
	if e.Traits().RatioAdmission {
		// SGLang admits against token reservations (S-R4); the model has no KV, so the
		// pool must hold every in-flight request's prompt + output reservation twice.
		blocks = 2*blocks + max(e.ChunkedPrefillSize, e.MaxPrefillTokens)/bs
	}
	if e.KVCapacityTokens > 0 {
		blocks = e.KVCapacityTokens/bs + 1 // + the reserved block 0
	}
	if f.OracleKVTokens > 0 {
		blocks = f.OracleKVTokens/bs + 1
	}
	oe.SetGPUBlocks(blocks)
	return oe, nil
}

// desGenerations is how many generations the DES runs for a model window: through
// the window, and when the model found a cycle, through the generation whose pattern
// repeated (Start + Period), so the DES's own limit-cycle search can see the same
// repetition — a period longer than the window (e.g. 15 generations at C 16 under
// KV pressure) otherwise leaves the DES measuring a fallback window.
func desGenerations(w queueing.Window) int {
	n := w.Start + w.Length
	if w.Found {
		n = max(n, w.Start+w.Period+1)
	}
	if w.StatePeriodPasses > 0 {
		// A state-cycle window ends at a time: every slot's next generation runs
		// past it, so the DES emits every gap of the window.
		n++
	}
	return n
}

// runOracle simulates the family and measures it with the same conventions. A
// closed loop is driven as the model's report says: the burst (generation 0 gives
// the transient), then each measured run — the burst itself, or each stagger phase
// with the clients' first requests spread as in the model's run (Window.SpreadMs) —
// for as many generations as the model simulated for it; the DES records choose
// their own steady window by the evaluator's limit-cycle rule
// (queueing.SteadyWindow), so a model settling into another cycle shows.
func runOracle(ctx context.Context, f Family, rep *queueing.Report) (Metrics, error) {
	w := f.Spec
	shape := shapeOf(w)
	if w.Concurrency <= 0 {
		return runOracleOpen(ctx, f, shape)
	}
	groups, trans, err := oracleClosedRuns(ctx, f, rep, shape)
	if err != nil {
		return Metrics{}, err
	}
	return measure(groups, trans, w.TurnaroundMs+f.ClientRTTMs, 0)
}

// shapeOf is the DES request shape of a workload: the largest isl/osl, the shared
// prefix pre-warmed, and the model's W2 stream when the workload has strata
// (drawn by creation index as in the evaluator).
func shapeOf(w workload.Spec) oracle.Shape {
	shape := oracle.Shape{ISL: maxOf(w.ISL, w.ISLQuantiles), OSL: maxOf(w.OSL, w.OSLQuantiles), Prefix: w.Prefix, Prewarm: w.Prefix > 0}
	if len(w.ISLQuantiles) > 0 || len(w.OSLQuantiles) > 0 {
		shape.Draw = w.Shape
	}
	return shape
}

// oracleClosedRuns drives the DES as runOracle describes for a closed loop and
// returns each measured run's steady records and the burst's transient records.
func oracleClosedRuns(ctx context.Context, f Family, rep *queueing.Report, shape oracle.Shape) ([][]rec, []rec, error) {
	w := f.Spec
	C := w.Concurrency
	run := func(gens int, start []float64) (*oracle.Result, error) {
		eng, err := oracleEngine(f, C)
		if err != nil {
			return nil, err
		}
		s, err := oracle.New(eng, f.Timing, oracle.Options{})
		if err != nil {
			return nil, err
		}
		return s.RunClosedLoop(ctx, oracle.ClosedLoop{Shape: shape, Clients: C, Generations: gens, KeepBusy: true,
			TurnaroundMs: w.TurnaroundMs, ClientRTTMs: f.ClientRTTMs, StartMs: start})
	}
	toRec := func(r oracle.RequestRecord) rec {
		return rec{slot: r.Client, gen: r.Generation, arrival: r.ArrivalMs, ttft: r.TTFTMs, e2e: r.FinishMs - r.ArrivalMs, tokens: r.TokenTimesMs}
	}
	steadyOf := func(res *oracle.Result, win queueing.Window, phases int) []rec {
		if win.StatePeriodPasses > 0 {
			return stateCycleRecs(res, win, toRec)
		}
		var samples []queueing.LoopSample
		for _, r := range res.Requests {
			samples = append(samples, queueing.LoopSample{Slot: r.Client, Generation: r.Generation, ArrivalMs: r.ArrivalMs, TTFTMs: r.TTFTMs, E2EMs: r.FinishMs - r.ArrivalMs})
		}
		ow := queueing.SteadyWindow(samples, C, queueing.WindowGenerations(C, phases), win.Horizon)
		var out []rec
		for _, r := range res.Requests {
			if r.Generation >= ow.Start && r.Generation < ow.Start+ow.Length {
				out = append(out, toRec(r))
			}
		}
		return out
	}
	windows := rep.Diagnostics.Windows
	var trans []rec
	var groups [][]rec
	if f.StaggerPhases == 0 {
		if len(windows) != 1 {
			return nil, nil, fmt.Errorf("model report has %d steady windows, want 1", len(windows))
		}
		res, err := run(desGenerations(windows[0]), nil)
		if err != nil {
			return nil, nil, err
		}
		for _, r := range res.Requests {
			if r.Generation == 0 {
				trans = append(trans, toRec(r))
			}
		}
		groups = append(groups, steadyOf(res, windows[0], 0))
	} else {
		if len(windows) != f.StaggerPhases {
			return nil, nil, fmt.Errorf("model report has %d steady windows, want %d phases", len(windows), f.StaggerPhases)
		}
		res, err := run(1, nil) // the burst's generation 0: the transient
		if err != nil {
			return nil, nil, err
		}
		for _, r := range res.Requests {
			if r.Generation == 0 {
				trans = append(trans, toRec(r))
			}
		}
		for _, win := range windows {
			start := queueing.ClientPhases(C, win.Phase, win.SpreadMs) // as the model drove its own run
			res, err := run(desGenerations(win), start)
			if err != nil {
				return nil, nil, err
			}
			groups = append(groups, steadyOf(res, win, f.StaggerPhases))
		}
	}
	return groups, trans, nil
}

// stateCycleRecs measures the DES records on a scheduler-state cycle window as
// the model does (queueing.stateCycleReport): the requests that finished in
// (StateFromMs, StateToMs] are steady, with the gaps they emitted in it, and every
// other request contributes the gaps it emitted in it.
func stateCycleRecs(res *oracle.Result, win queueing.Window, toRec func(oracle.RequestRecord) rec) []rec {
	t0, t1 := win.StateFromMs, win.StateToMs
	var out []rec
	for _, r := range res.Requests {
		x := toRec(r)
		x.gaps = []float64{}
		for i := 1; i < len(x.tokens); i++ {
			if t := x.tokens[i]; t > t0 && t <= t1 {
				x.gaps = append(x.gaps, t-x.tokens[i-1])
			}
		}
		if done := r.FinishMs; !(done > t0 && done <= t1) { // an unfinished request has FinishMs 0
			if len(x.gaps) == 0 {
				continue
			}
			x.gapsOnly = true
		}
		out = append(out, x)
	}
	return out
}

// runOracleOpen replays the model's W1 arrival stream (the same arrival instants) in
// the DES and measures the evaluator's window (queueing.OpenWindow: whole stream
// periods after a warm-up period when n ≥ 2 periods, else after n/10 requests).
func runOracleOpen(ctx context.Context, f Family, shape oracle.Shape) (Metrics, error) {
	w := f.Spec
	n := w.NumRequests
	if n <= 0 {
		return Metrics{}, errors.New("open-loop family: set num_requests")
	}
	stream, err := workload.NewArrivalStream(w.RateRPS)
	if err != nil {
		return Metrics{}, err
	}
	times := make([]float64, n)
	for i := range times {
		times[i] = stream.Next()
	}
	warm, nw := queueing.OpenWindow(n)
	end := stream.Next() // the arrival after the last one
	if warm+nw < n {
		end = times[warm+nw]
	}
	eng, err := oracleEngine(f, max(f.Engine.MaxNumSeqs, f.Engine.MaxBatchSize, 1))
	if err != nil {
		return Metrics{}, err
	}
	s, err := oracle.New(eng, f.Timing, oracle.Options{})
	if err != nil {
		return Metrics{}, err
	}
	res, err := s.RunOpenLoop(ctx, oracle.OpenLoop{Shape: shape, ArrivalsMs: times})
	if err != nil {
		return Metrics{}, err
	}
	var steady []rec
	for i, r := range res.Requests {
		if i >= warm && i < warm+nw {
			steady = append(steady, rec{slot: -1, gen: i, arrival: r.ArrivalMs, ttft: r.TTFTMs, e2e: r.FinishMs - r.ArrivalMs, tokens: r.TokenTimesMs})
		}
	}
	return measure([][]rec{steady}, nil, 0, end)
}

// Run evaluates every family; an evaluation error is kept in its row (and fails the
// verdict), never skipped.
func Run(ctx context.Context, fams []Family) []Row {
	rows := make([]Row, 0, len(fams))
	for _, f := range fams {
		rows = append(rows, RunFamily(ctx, f))
	}
	return rows
}

// Verdict returns an error listing every gated family that failed (a metric over
// tolerance, a non-finite value, or an evaluation error); known-failing families are
// listed in the table but not here.
func Verdict(rows []Row) error { return failing("gate", outcomes(rows, Row.outcome)) }

// outcome is what the verdict, the verdict column and the table's summary read of a
// row of any gate suite.
type outcome struct {
	name, known string
	err         error
	failures    []string
	resid       []float64
}

func (r Row) outcome() outcome {
	return outcome{r.Family.Name, r.Family.KnownFailing, r.Err, r.Failures, r.Resid}
}

// outcomes maps a suite's rows to their outcomes.
func outcomes[R any](rows []R, of func(R) outcome) []outcome {
	out := make([]outcome, len(rows))
	for i, r := range rows {
		out[i] = of(r)
	}
	return out
}

// failing lists every gated outcome that failed; what names the gate in the error.
func failing(what string, os []outcome) error {
	var bad []string
	for _, o := range os {
		if o.known != "" {
			continue
		}
		switch {
		case o.err != nil:
			bad = append(bad, fmt.Sprintf("%s: %v", o.name, o.err))
		case len(o.failures) > 0:
			bad = append(bad, fmt.Sprintf("%s: %s over tolerance", o.name, strings.Join(o.failures, ", ")))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s: %d families fail: %s", what, len(bad), strings.Join(bad, "; "))
	}
	return nil
}

// writeSummary prints, below a residual table, the median and max |residual| of
// the gated rows (what names them) and each row's error or known-failing reason.
func writeSummary(w io.Writer, what string, os []outcome) {
	var all []float64
	for _, o := range os {
		if o.err != nil || o.known != "" {
			continue
		}
		for _, x := range o.resid {
			if !math.IsNaN(x) && !math.IsInf(x, 0) {
				all = append(all, math.Abs(x))
			}
		}
	}
	if len(all) > 0 {
		sort.Float64s(all)
		fmt.Fprintf(w, "\n%s: median |residual| %.3f%%, max %.3f%% over %d residuals\n", what, 100*all[len(all)/2], 100*all[len(all)-1], len(all))
	}
	for _, o := range os {
		switch {
		case o.err != nil:
			fmt.Fprintf(w, "%s: error: %v\n", o.name, o.err)
		case o.known != "":
			fmt.Fprintf(w, "%s: known-failing: %s\n", o.name, o.known)
		}
	}
}

// WriteTable prints the residual table (percent, model vs oracle) and a summary.
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 4, 1, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "family\t")
	for _, n := range metricNames {
		fmt.Fprintf(tw, "%s\t", n)
	}
	fmt.Fprintf(tw, "verdict\t\n")
	fmt.Fprintf(tw, "tolerance\t")
	for _, t := range tolerances {
		fmt.Fprintf(tw, "%.0f%%\t", t*100)
	}
	fmt.Fprintf(tw, "\t\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t", r.Family.Name)
		if r.Err != nil {
			for range metricNames {
				fmt.Fprintf(tw, "-\t")
			}
			fmt.Fprintf(tw, "%s\t\n", verdictOf(r))
			continue
		}
		for _, x := range r.Resid {
			fmt.Fprintf(tw, "%s\t", pct(x))
		}
		fmt.Fprintf(tw, "%s\t\n", verdictOf(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	writeSummary(w, "gated families", outcomes(rows, Row.outcome))
	return nil
}

// verdictOf is the verdict column of a row.
func verdictOf(r Row) string { return r.outcome().verdict() }

// verdict is the verdict column of an outcome.
func (o outcome) verdict() string {
	ok := o.err == nil && len(o.failures) == 0
	switch {
	case o.known != "" && ok:
		return "pass (known-failing listed)"
	case o.known != "":
		return "KNOWN-FAILING"
	case o.err != nil:
		return "ERROR"
	case ok:
		return "pass"
	default:
		return "FAIL"
	}
}

func pct(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return fmt.Sprint(x)
	}
	return fmt.Sprintf("%+.2f%%", 100*x)
}

// maxOf is the largest of v and the quantile points.
func maxOf(v int, qs []int) int {
	for _, q := range qs {
		v = max(v, q)
	}
	return v
}
