package calibrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/measure"
)

// ParamNames name PassAdjust's fields in fit order.
var ParamNames = [4]string{"prefill_scale", "decode_scale", "pass_overhead_ms", "request_overhead_ms"}

// Sample is one training observation: a measurement's point and its measured TTFT
// and TPOT (the mean where measured, else the median) with the matching predicted
// column.
type Sample struct {
	MeasurementID int64
	In            store.PointInputs
	TTFT, TPOT    float64
	ttftCol       int
	tpotCol       int
	Fold          int
	// Run is the benchmark run the measurement came from (nil: the steady state).
	Run *queueing.FiniteRun
}

// Samples turns predicted targets into training samples (targets with a reason or
// without a measured TTFT and TPOT are skipped).
func Samples(ts []Target) []Sample {
	var out []Sample
	for _, t := range ts {
		if t.Reason != "" {
			continue
		}
		m := &t.Row.Measurement
		s := Sample{MeasurementID: t.Row.ID, In: t.In, ttftCol: store.QTTFTSteadyMean, tpotCol: store.QTPOTMean, Run: t.Run}
		switch {
		case m.Has[measure.TTFTMean]:
			s.TTFT = m.Values[measure.TTFTMean]
		case m.Has[measure.TTFTP50]:
			s.TTFT, s.ttftCol = m.Values[measure.TTFTP50], store.QTTFTSteadyP50
		}
		switch {
		case m.Has[measure.TPOTMean]:
			s.TPOT = m.Values[measure.TPOTMean]
		case m.Has[measure.TPOTP50]:
			s.TPOT, s.tpotCol = m.Values[measure.TPOTP50], store.QTPOTP50
		}
		if s.TTFT > 0 && s.TPOT > 0 {
			out = append(out, s)
		}
	}
	return out
}

// GroupFit is the calibration of one deployment key with its quality.
type GroupFit struct {
	System, Backend, Version, Model string
	Deployed                        string // engine version of the group's measurements (PointInputs.DeployedVersion)
	Quant                           string // store.QuantLabel of the group's points
	Layout                          string // store.LayoutLabel of the group's points
	Adjust                          refine.PassAdjust
	Samples                         []Sample
	// Per sample (same order): predictions uncalibrated, fitted, and held out
	// (cross-validation; zero without it). [i][0] TTFT, [i][1] TPOT.
	Before, Fitted, HeldOut [][2]float64
	TTFTBefore, TPOTBefore  float64 // MAPE %, uncalibrated
	TTFTFit, TPOTFit        float64 // MAPE %, fitted on all rows
	TTFTCV, TPOTCV          float64 // MAPE %, k-fold cross-validated (HasCV)
	HasCV                   bool
	// Unidentified lists the parameters the rows could not identify (kept at
	// their identity value by the fit's weak prior), with why.
	Unidentified []string
}

// FitOptions tune a fit.
type FitOptions struct {
	Holdout int // k-fold cross-validation (0 = none; ≥ 2)
	// HoldoutBy is what a fold holds out whole (CheckHoldoutBy): HoldoutRows
	// (every k-th row by measurement id, the default), or all the rows of a
	// shape, a concurrency or a parallel layout — so each held-out prediction is
	// of a configuration the fit has not seen.
	HoldoutBy string
	Workers   int
	// MaxIter caps the Levenberg–Marquardt iterations (default 6; under LossL1
	// twice that per reweighted descent, which converges only linearly).
	MaxIter int
	// Objective is the tier whose relative errors the fit minimises:
	// "quantitative" (default: the limit-cycle tier, ms per point) or "screening"
	// (the closed form, µs per point: fast, but its optimum is the screening
	// tier's, which can be far from the quantitative one — on the model-made test
	// rows it fits worse than no calibration). Every reported error —
	// uncalibrated, fitted, cross-validated — is quantitative.
	Objective string
	// SimplexEvals caps the Nelder–Mead polish's cost evaluations (default 10;
	// < 0: none). Every fit, a fold's refit too, starts from the identity (a
	// warm start from the full fit would leak the held-out rows).
	SimplexEvals int
	// Loss is what the fit minimises over the relative TTFT and TPOT errors
	// r = p/m − 1 (plus the weak prior): LossL1 (Σ|r|, the MAPE every report
	// states; rows the four corrections cannot fit pull it less) or LossL2 (Σr²,
	// least squares). "" is DefaultLoss.
	Loss string
	// Progress, if set, is called after each fit with (done, total): one fit per
	// group, plus one per fold of a cross-validated group.
	Progress func(done, total int)
	// DescentClients > 0 lets the descent's objective average a desync run's
	// steady part over fewer client phases (queueing.FiniteRun.StaggerPhases)
	// than the evaluator's: ⌈DescentClients / C⌉ of them for C clients, at least
	// one — the same model, with at least DescentClients client starts in the
	// average instead of the evaluator's phases × C, at a fraction of the cost
	// where C is large (a run's cost grows as C², docs/validation.md Round 27).
	// Every reported number — uncalibrated, fitted, held out — and every stored
	// prediction is evaluated with the evaluator's phases. 0: the descent uses
	// them too.
	DescentClients int
}

// DefaultDescentClients is calibrate's FitOptions.DescentClients: a run of C
// ≥ 16 clients is descended over one client phase, of 8 over two, of ≤ 5 over
// the evaluator's four (docs/validation.md Round 29: on the B200 rows the
// calibration runs 1.9–2.8× faster and its held-out errors move by under half
// a point).
const DefaultDescentClients = 16

// Losses of FitOptions.Loss.
const (
	LossL1 = "l1"
	LossL2 = "l2"
	// DefaultLoss is the loss of FitOptions.Loss "".
	DefaultLoss = LossL1
)

// Values of FitOptions.HoldoutBy.
const (
	HoldoutRows        = ""            // row i of a group (by measurement id) in fold i mod k
	HoldoutShape       = "shape"       // the rows of one (isl, osl, prefix) together
	HoldoutConcurrency = "concurrency" // the rows of one concurrency together
	HoldoutParallel    = "parallel"    // the rows of one parallel layout (every pool's tp, pp, dp, moe_tp, moe_ep) together
)

// CheckHoldoutBy validates a FitOptions.HoldoutBy.
func CheckHoldoutBy(by string) error {
	switch by {
	case HoldoutRows, HoldoutShape, HoldoutConcurrency, HoldoutParallel:
		return nil
	}
	return fmt.Errorf("--holdout-by %q: want %s, %s or %s (default: every k-th row)", by, HoldoutShape, HoldoutConcurrency, HoldoutParallel)
}

// foldKey is what HoldoutBy by keeps together in one fold, as a string that
// sorts in the column's order (zero-padded integers).
func foldKey(by string, in *store.PointInputs) string {
	switch by {
	case HoldoutShape:
		return fmt.Sprintf("%09d/%09d/%09d", in.ISL, in.OSL, in.Prefix)
	case HoldoutConcurrency:
		return fmt.Sprintf("%09d/%09d", in.Batch, in.DBatch*max(in.DWorkers, 1))
	}
	return fmt.Sprintf("%04d/%04d/%04d/%04d/%04d p%04d/%04d/%04d d%04d/%04d/%04d", in.TP, in.PP, in.DP, in.MoETP, in.MoEEP,
		in.PTP, in.PPP, in.PDP, in.DTP, in.DPP, in.DDP)
}

// assignFolds sets the fold of every sample of g (sorted by measurement id)
// for k-fold cross-validation and reports whether g can be cross-validated:
// by rows, row i in fold i mod k, given at least k rows; by a column, the
// column's distinct values in order, value j's rows in fold j mod k, given at
// least k values.
func assignFolds(g []Sample, k int, by string) bool {
	if by == HoldoutRows {
		if len(g) < k {
			return false
		}
		for i := range g {
			g[i].Fold = i % k
		}
		return true
	}
	keys := make([]string, len(g))
	for i := range g {
		keys[i] = foldKey(by, &g[i].In)
	}
	vals := slices.Compact(slices.Sorted(slices.Values(keys)))
	if len(vals) < k {
		return false
	}
	for i := range g {
		j, _ := slices.BinarySearch(vals, keys[i])
		g[i].Fold = j % k
	}
	return true
}

// CheckLoss validates a FitOptions.Loss ("" is DefaultLoss).
func CheckLoss(loss string) error {
	switch loss {
	case "", LossL1, LossL2:
		return nil
	}
	return fmt.Errorf("--loss %q: want l1 (mean absolute relative error, the reported MAPE) or l2 (squared relative error)", loss)
}

// CheckObjective refuses a fit objective other than the quantitative ("" too)
// or the screening tier.
func CheckObjective(objective string) error {
	switch objective {
	case "", store.TierQuantitative, store.TierScreening:
		return nil
	}
	return fmt.Errorf("--objective %q: want quantitative or screening", objective)
}

// evalFn predicts (TTFT, TPOT) of every sample under adj.
type evalFn func(ctx context.Context, ss []Sample, adj refine.PassAdjust) ([][2]float64, error)

// quantEval evaluates through the evaluator's quantitative tier, in parallel;
// descentClients > 0 evaluates each desync run's steady part over fewer client
// phases (FitOptions.DescentClients).
func quantEval(ev Evaluator, workers, descentClients int) evalFn {
	return func(ctx context.Context, ss []Sample, adj refine.PassAdjust) ([][2]float64, error) {
		return evalDistinct(ctx, ss, workers, func(ctx context.Context, s *Sample) (store.Quantitative, error) {
			if s.Run != nil {
				run := *s.Run
				if k := s.descentPhases(descentClients); k > 0 {
					run.StaggerPhases = k
				}
				return ev.QuantitativeRunSummaryAdjusted(ctx, s.In, adj, run)
			}
			return ev.QuantitativeAdjusted(ctx, s.In, adj)
		}, func(q *store.Quantitative, s *Sample) [2]float64 { return [2]float64{q.V[s.ttftCol], q.V[s.tpotCol]} })
	}
}

// descentPhases is the client phases a descent evaluates a desync run of c
// clients with under FitOptions.DescentClients: ⌈clients / c⌉, at least 1; 0
// (the evaluator's phases) when that is not fewer than the evaluator's
// queueing.DefaultStaggerPhases, or clients or c is 0.
func descentPhases(clients, c int) int {
	if clients <= 0 || c <= 0 {
		return 0
	}
	if k := (clients + c - 1) / c; k < queueing.DefaultStaggerPhases {
		return k
	}
	return 0
}

// descentPhases is the client phases a descent evaluates s with under
// DescentClients clients (the package's descentPhases at its batch): 0 unless s
// is a desync run.
func (s *Sample) descentPhases(clients int) int {
	if s.Run == nil || !s.Run.Desync {
		return 0
	}
	return descentPhases(clients, s.In.Batch)
}

// descendsCheaper reports whether some desync run of ss is descended over
// fewer client phases under DescentClients clients (descentPhases); when none
// is, the descent's objective is the quantitative evaluation itself and shares
// its remembered predictions (the identity's, the fit's) instead of
// evaluating them again.
func descendsCheaper(ss []Sample, clients int) bool {
	for i := range ss {
		if ss[i].descentPhases(clients) > 0 {
			return true
		}
	}
	return false
}

// evalDistinct evaluates each distinct (point, run) of ss once (one, at the
// first sample of each; at most workers at a time) and gives every sample its
// point's columns (cols: a sample names its measured statistics). An
// evaluation is deterministic, so every copy gets the prediction its own
// evaluation would. The error reported is the first failing point's in sample
// order, wrapped with its measurement.
func evalDistinct[Q any](ctx context.Context, ss []Sample, workers int, one func(context.Context, *Sample) (Q, error), cols func(*Q, *Sample) [2]float64) ([][2]float64, error) {
	first, uniq := distinctRuns(ss)
	qs := make([]Q, len(uniq))
	errs := make([]error, len(uniq))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for u, i := range uniq {
		g.Go(func() error {
			q, err := one(gctx, &ss[i])
			if err != nil {
				errs[u] = fmt.Errorf("measurement %d: %w", ss[i].MeasurementID, err)
				return errs[u] // cancels the others
			}
			qs[u] = q
			return nil
		})
	}
	_ = g.Wait()
	if err := firstError(ctx, errs); err != nil {
		return nil, err
	}
	out := make([][2]float64, len(ss))
	for i := range ss {
		out[i] = cols(&qs[first[i]], &ss[i])
	}
	return out, nil
}

// distinctRuns maps each sample of ss to its distinct (point, run) — first[i]
// indexes uniq — and lists the first sample of each, in sample order.
func distinctRuns(ss []Sample) (first, uniq []int) {
	type runKey struct {
		in     store.PointInputs
		run    queueing.FiniteRun
		steady bool // no run: the steady state
	}
	seen := make(map[runKey]int, len(ss))
	first = make([]int, len(ss))
	for i := range ss {
		k := runKey{in: ss[i].In, steady: ss[i].Run == nil}
		if ss[i].Run != nil {
			k.run = *ss[i].Run
		}
		u, ok := seen[k]
		if !ok {
			u = len(uniq)
			seen[k] = u
			uniq = append(uniq, i)
		}
		first[i] = u
	}
	return first, uniq
}

// memoOn returns f for the one sample set ss, remembering the predictions at
// each adjustment it is asked for: a fit revisits points (both descents start
// at the identity, the uncalibrated prediction; a descent's last iterate starts
// the next descent and the simplex; the reported fit is the best iterate), and a
// quantitative evaluation is the fit's whole cost. Evaluations are
// deterministic, so a remembered prediction is the one a new evaluation would
// give. Asked for another sample set, it evaluates without remembering.
func memoOn(ss []Sample, f evalFn) evalFn {
	seen := map[refine.PassAdjust][][2]float64{}
	return func(ctx context.Context, s []Sample, adj refine.PassAdjust) ([][2]float64, error) {
		same := len(s) == len(ss) && (len(s) == 0 || &s[0] == &ss[0])
		if p, ok := seen[adj]; ok && same {
			return p, nil
		}
		p, err := f(ctx, s, adj)
		if err == nil && same {
			seen[adj] = p
		}
		return p, err
	}
}

// screenEval evaluates through the screening tier (µs per point): the fit's
// Jacobian and the mapped descent's surrogate (surrogateDescend); every
// accepted step and every reported number is quantitative. Like quantEval it
// evaluates each distinct point once, in parallel.
func screenEval(ev Evaluator, workers int) evalFn {
	return func(ctx context.Context, ss []Sample, adj refine.PassAdjust) ([][2]float64, error) {
		return evalDistinct(ctx, ss, workers, func(ctx context.Context, s *Sample) (store.Queueing, error) {
			return ev.ScreenAdjusted(ctx, s.In, adj)
		}, func(q *store.Queueing, s *Sample) [2]float64 { return [2]float64{q.V[s.ttftCol], q.V[s.tpotCol]} })
	}
}

// Fit fits one PassAdjust per (system, backend, version, model, quant) of the samples,
// through ev's quantitative tier (the same path as eval and sweep points), and
// with opt.Holdout ≥ 2 reports k-fold cross-validated MAPE. Deterministic: groups
// in key order, folds by measurement id.
func Fit(ctx context.Context, ev Evaluator, ss []Sample, opt FitOptions) ([]GroupFit, error) {
	if opt.Holdout == 1 || opt.Holdout < 0 {
		return nil, fmt.Errorf("--holdout %d: want 0 (none) or k ≥ 2 folds", opt.Holdout)
	}
	if opt.Workers <= 0 {
		opt.Workers = runtime.GOMAXPROCS(0)
	}
	if opt.SimplexEvals == 0 {
		opt.SimplexEvals = 10
	}
	if err := CheckLoss(opt.Loss); err != nil {
		return nil, err
	}
	if opt.Loss == "" {
		opt.Loss = DefaultLoss
	}
	if opt.MaxIter <= 0 {
		opt.MaxIter = 6
	}
	f := quantEval(ev, opt.Workers, 0)
	fd := f // the descent's objective (DescentClients)
	if opt.DescentClients > 0 {
		fd = quantEval(ev, opt.Workers, opt.DescentClients)
	}
	fj := screenEval(ev, opt.Workers)
	if err := CheckObjective(opt.Objective); err != nil {
		return nil, err
	}
	// evalsOn returns the quantitative evaluation of the sample set ss,
	// remembered (memoOn), and the fit's objective over ss: that same
	// evaluation, or the screening tier.
	evalsOn := func(ss []Sample) (quant, objective evalFn) {
		quant = memoOn(ss, f)
		switch {
		case opt.Objective == store.TierScreening:
			return quant, fj
		case descendsCheaper(ss, opt.DescentClients):
			return quant, memoOn(ss, fd)
		}
		return quant, quant
	}
	// The quantitative objective is descended through the screening tier mapped
	// onto it (surrogateDescend); the screening objective is fj itself.
	mapped := opt.Objective != store.TierScreening
	groups := map[deployKey][]Sample{}
	for _, s := range ss {
		k := keyOf(s.In)
		groups[k] = append(groups[k], s)
	}
	keys := make([]deployKey, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	if err := CheckHoldoutBy(opt.HoldoutBy); err != nil {
		return nil, err
	}
	total, done := 0, 0 // total: len(jobs), set once they are listed
	var mu sync.Mutex
	fitted := func() {
		mu.Lock()
		defer mu.Unlock()
		done++
		if opt.Progress != nil {
			opt.Progress(done, total)
		}
	}
	// The fits are independent — each group's, and each fold's of a
	// cross-validated group — so they run concurrently (at most opt.Workers at
	// a time, each evaluating its rows on opt.Workers more): one slow row no
	// longer idles the other cores until the next step. Each fit is
	// deterministic and writes only its own slots, so the result is the
	// sequential one; the error reported is the first fit's in group order.
	out := make([]GroupFit, len(keys))
	type job struct {
		group, fold int // fold −1: the group's fit on all its rows
	}
	var jobs []job
	for gi, k := range keys {
		g := groups[k]
		slices.SortFunc(g, func(a, b Sample) int { return int(a.MeasurementID - b.MeasurementID) })
		out[gi] = GroupFit{System: k.System, Backend: k.Backend, Version: k.Version, Deployed: k.Deployed, Model: k.Model, Quant: k.Quant, Layout: k.Layout, Samples: g}
		jobs = append(jobs, job{gi, -1})
		if k := opt.Holdout; k >= 2 && assignFolds(g, k, opt.HoldoutBy) {
			out[gi].HeldOut = make([][2]float64, len(g))
			out[gi].HasCV = true
			for fold := range k {
				jobs = append(jobs, job{gi, fold})
			}
		}
	}
	total = len(jobs)
	run := func(ctx context.Context, j job) error {
		gf := &out[j.group]
		g := gf.Samples
		if j.fold < 0 {
			fg, fog := evalsOn(g)
			var err error
			if gf.Before, err = fg(ctx, g, refine.Identity()); err != nil {
				return err
			}
			adj, jac, err := levenbergMarquardt(ctx, fog, fj, g, [4]float64{}, opt.Loss, opt.MaxIter, opt.SimplexEvals, mapped)
			if err != nil {
				return err
			}
			gf.Adjust = adj
			if gf.Fitted, err = fg(ctx, g, adj); err != nil {
				return err
			}
			gf.Unidentified = unidentified(jac, len(g))
			fitted()
			return nil
		}
		var train, test []Sample
		var idx []int
		for i := range g {
			if g[i].Fold == j.fold {
				test = append(test, g[i])
				idx = append(idx, i)
			} else {
				train = append(train, g[i])
			}
		}
		_, fot := evalsOn(train)
		a, _, err := levenbergMarquardt(ctx, fot, fj, train, [4]float64{}, opt.Loss, opt.MaxIter, opt.SimplexEvals, mapped)
		if err != nil {
			return err
		}
		p, err := f(ctx, test, a)
		if err != nil {
			return err
		}
		for jj, i := range idx {
			gf.HeldOut[i] = p[jj]
		}
		fitted()
		return nil
	}
	errs := make([]error, len(jobs))
	eg, gctx := errgroup.WithContext(ctx)
	eg.SetLimit(opt.Workers)
	for i, j := range jobs {
		eg.Go(func() error {
			if errs[i] = gctx.Err(); errs[i] == nil {
				errs[i] = run(gctx, j)
			}
			return errs[i] // the first failure cancels the others
		})
	}
	_ = eg.Wait() // errs holds every job's error: the first in job order is reported
	if err := firstError(ctx, errs); err != nil {
		return nil, err
	}
	for i := range out {
		gf := &out[i]
		gf.TTFTBefore, gf.TPOTBefore = mape(gf.Samples, gf.Before)
		gf.TTFTFit, gf.TPOTFit = mape(gf.Samples, gf.Fitted)
		if gf.HasCV {
			gf.TTFTCV, gf.TPOTCV = mape(gf.Samples, gf.HeldOut)
		}
	}
	return out, nil
}

// firstError is the first error of errs that is not the cancellation the
// first failure caused in the others (ctx: the caller's, whose own
// cancellation is reported as is), else the first error.
func firstError(ctx context.Context, errs []error) error {
	for _, err := range errs {
		if err != nil && (ctx.Err() != nil || !errors.Is(err, context.Canceled)) {
			return err
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Overall is a calibration's accuracy over all its groups, every row weighing
// the same (the figure issue 9 states its acceptance in): the TTFT and TPOT
// MAPE (%) of the Rows fitted rows uncalibrated and fitted, and held out over
// the CVRows rows of the groups that had folds (0: none had as many rows as
// folds; the CV figures are then 0 and not reported).
type Overall struct {
	Rows, CVRows                     int
	TTFTBefore, TPOTBefore           float64
	TTFTFit, TPOTFit, TTFTCV, TPOTCV float64
}

// OverallOf is the Overall of fits: per-row errors summed across groups, as
// mape sums them within one (the same numbers an average of
// abs(held_out / measured − 1) over calibration_rows gives).
func OverallOf(fits []GroupFit) Overall {
	var o Overall
	var before, fit, cv [2]float64
	for _, g := range fits {
		for i := range g.Samples {
			s := &g.Samples[i]
			o.Rows++
			addAbsRel(&before, s, g.Before[i])
			addAbsRel(&fit, s, g.Fitted[i])
			if g.HasCV {
				o.CVRows++
				addAbsRel(&cv, s, g.HeldOut[i])
			}
		}
	}
	if o.Rows > 0 {
		n := float64(o.Rows)
		o.TTFTBefore, o.TPOTBefore = 100*before[0]/n, 100*before[1]/n
		o.TTFTFit, o.TPOTFit = 100*fit[0]/n, 100*fit[1]/n
	}
	if o.CVRows > 0 {
		n := float64(o.CVRows)
		o.TTFTCV, o.TPOTCV = 100*cv[0]/n, 100*cv[1]/n
	}
	return o
}

// mape is the TTFT and TPOT MAPE (%) of predictions p of samples ss.
func mape(ss []Sample, p [][2]float64) (ttft, tpot float64) {
	if len(ss) == 0 {
		return 0, 0
	}
	var acc [2]float64
	for i := range ss {
		addAbsRel(&acc, &ss[i], p[i])
	}
	n := float64(len(ss))
	return 100 * acc[0] / n, 100 * acc[1] / n
}

// addAbsRel adds the absolute relative errors of prediction p of sample s
// (TTFT, TPOT) to acc.
func addAbsRel(acc *[2]float64, s *Sample, p [2]float64) {
	acc[0] += math.Abs(p[0]/s.TTFT - 1)
	acc[1] += math.Abs(p[1]/s.TPOT - 1)
}

// Parameter space of the fit: x = (ln prefill_scale, ln decode_scale,
// pass_overhead_ms, request_overhead_ms), bounded so every candidate is a valid
// engine timing.
var (
	lower = [4]float64{math.Log(0.05), math.Log(0.05), 0, 0}
	upper = [4]float64{math.Log(20), math.Log(20), 50, 5000}
	// fdStep: finite-difference steps (a schedule is piecewise in the timing, so
	// the steps are not infinitesimal).
	fdStep = [4]float64{0.02, 0.02, 0.1, 2}
	// priorScale: the weak prior pulls each parameter toward the identity by
	// (x − x₀)/priorScale·priorWeight, so a parameter the rows cannot see stays there.
	priorScale  = [4]float64{1, 1, 10, 100}
	priorWeight = 0.03
)

func toAdjust(x [4]float64) refine.PassAdjust {
	return refine.PassAdjust{PrefillScale: math.Exp(x[0]), DecodeScale: math.Exp(x[1]), PassOverheadMs: x[2], RequestOverheadMs: x[3]}
}

func clampX(x [4]float64) [4]float64 {
	for i := range x {
		x[i] = math.Min(upper[i], math.Max(lower[i], x[i]))
	}
	return x
}

// residuals: relative TTFT and TPOT errors of every sample, then the prior terms.
func residuals(ctx context.Context, f evalFn, ss []Sample, x [4]float64) ([]float64, error) {
	p, err := f(ctx, ss, toAdjust(x))
	if err != nil {
		return nil, err
	}
	return residualsOf(ss, p, x)
}

// residualsOf is residuals of the predictions p made at x.
func residualsOf(ss []Sample, p [][2]float64, x [4]float64) ([]float64, error) {
	r := make([]float64, 0, 2*len(ss)+4)
	for i, s := range ss {
		r = append(r, p[i][0]/s.TTFT-1, p[i][1]/s.TPOT-1)
	}
	for i := range x {
		r = append(r, priorWeight*x[i]/priorScale[i])
	}
	for _, v := range r {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, errors.New("calibration fit: a prediction is not finite")
		}
	}
	return r, nil
}

func sumSq(r []float64) float64 {
	s := 0.0
	for _, v := range r {
		s += v * v
	}
	return s
}

// l1Floor is δ of the L1 fit's reweighting: a data residual's weight is
// 1/sqrt(2·max(|r|, δ)), so a row already matched within 1 % does not dominate
// the step.
const l1Floor = 0.01

// cost is the fit's objective over residuals r (n samples: 2n data residuals,
// then the prior terms): Σ|r| over the data under LossL1, Σr² under LossL2, plus
// the prior's squares either way (a smooth pull toward the identity).
func cost(r []float64, n int, loss string) float64 {
	if loss == LossL2 {
		return sumSq(r)
	}
	s := 0.0
	for _, v := range r[:2*n] {
		s += math.Abs(v)
	}
	return s + sumSq(r[2*n:])
}

// reweight returns the Jacobian and residuals of the least-squares problem whose
// step the LM takes at residuals r (n samples). Under LossL2 that is the problem
// itself. Under LossL1 it is iteratively reweighted least squares: data row i is
// scaled by 1/sqrt(2·max(|rᵢ|, δ)), so the weighted squares r²/(2|rᵢ|) + |rᵢ|/2
// majorise Σ|r| at the current iterate and a step that lowers them lowers the L1
// cost; the weights are recomputed at every iterate.
func reweight(jac [][4]float64, r []float64, n int, loss string) ([][4]float64, []float64) {
	if loss == LossL2 {
		return jac, r
	}
	jw := make([][4]float64, len(jac))
	rw := make([]float64, len(r))
	for i := range r {
		w := 1.0
		if i < 2*n {
			w = 1 / math.Sqrt(2*math.Max(math.Abs(r[i]), l1Floor))
		}
		for j := range 4 {
			jw[i][j] = w * jac[i][j]
		}
		rw[i] = w * r[i]
	}
	return jw, rw
}

// levenbergMarquardt minimises the loss of f's relative errors (the quantitative
// tier) over x from start: a descent, then a polish with at most nmEvals
// Nelder–Mead evaluations of the same cost. The descent maps the screening
// tier fj onto f (surrogateDescend) when mapped, else it takes
// Levenberg–Marquardt steps on f guided by fj's Jacobian (lmDescend; the
// screening objective, where f is fj). Under
// LossL1 the reweighted descent (2·maxIter iterations: reweighting converges
// only linearly) runs from two starts and the lower L1 cost is kept (the first
// on ties): start itself, and the least-squares iterate from start. From start
// alone it can stop short of the least-squares point's L1 cost (real rows with
// a broad misfit); from the least-squares point alone it stays where a gross
// outlier pulled it. Only the kept descent is polished: polishing both (the
// rule until Round 13) costs a quarter more of the fit's evaluations for
// cross-validated errors 0.1–0.5 points lower on the B200 desync runs
// (docs/validation.md Round 13). It returns the fitted adjustment and the
// Jacobian of the data residuals at the optimum (for identifiability).
func levenbergMarquardt(ctx context.Context, f, fj evalFn, ss []Sample, start [4]float64, loss string, maxIter, nmEvals int, mapped bool) (refine.PassAdjust, [][4]float64, error) {
	type candidate struct {
		x [4]float64
		c float64
	}
	iter := maxIter
	if loss == LossL1 {
		iter = 2 * maxIter
	}
	descend := func(x [4]float64, loss string, iter int) ([4]float64, float64, error) {
		if mapped {
			return surrogateDescend(ctx, f, fj, ss, x, loss, iter)
		}
		return lmDescend(ctx, f, fj, ss, x, loss, iter)
	}
	x, c, err := descend(start, loss, iter)
	if err != nil {
		return refine.PassAdjust{}, nil, err
	}
	cands := []candidate{{x, c}}
	if loss == LossL1 {
		xl2, _, err := descend(start, LossL2, maxIter)
		if err != nil {
			return refine.PassAdjust{}, nil, err
		}
		xb, cb, err := descend(xl2, LossL1, iter)
		if err != nil {
			return refine.PassAdjust{}, nil, err
		}
		cands = append(cands, candidate{xb, cb})
	}
	best := 0
	for i := range cands {
		if cands[i].c < cands[best].c {
			best = i
		}
	}
	// Polish on the quantitative cost itself (the screening Jacobian only
	// points the way; the schedule's pieces are found by the simplex).
	if nmEvals > 0 {
		xn, cn, err := nelderMead(ctx, f, ss, cands[best].x, loss, nmEvals)
		if err != nil {
			return refine.PassAdjust{}, nil, err
		}
		cands[best] = candidate{clampX(xn), cn}
	}
	x = cands[best].x
	jac, err := jacobian(ctx, fj, ss, x)
	if err != nil {
		return refine.PassAdjust{}, nil, err
	}
	return toAdjust(x), jac[:len(jac)-4], nil
}

// lmDescend takes at most maxIter Levenberg–Marquardt steps on the loss of f's
// relative errors from x (bounded, projected steps). The forward-difference
// Jacobian comes from fj (the screening tier's closed form of the same model:
// cheap and smooth, where the quantitative schedule is piecewise in the timing);
// under LossL1 each iteration reweights it at the current residuals (reweight);
// a step is accepted only when it lowers f's cost. It returns the last iterate
// and its cost.
func lmDescend(ctx context.Context, f, fj evalFn, ss []Sample, x [4]float64, loss string, maxIter int) ([4]float64, float64, error) {
	n := len(ss)
	r, err := residuals(ctx, f, ss, x)
	if err != nil {
		return x, 0, err
	}
	c0 := cost(r, n, loss)
	lambda := 1e-2
	for range maxIter {
		jac, err := jacobian(ctx, fj, ss, x)
		if err != nil {
			return x, 0, err
		}
		jw, rw := reweight(jac, r, n, loss)
		improved := false
		for range 6 {
			step, ok := lmStep(jw, rw, lambda)
			if !ok {
				lambda *= 10
				continue
			}
			var xn [4]float64
			for j := range 4 {
				xn[j] = x[j] + step[j]
			}
			xn = clampX(xn)
			rn, err := residuals(ctx, f, ss, xn)
			if err != nil {
				return x, 0, err
			}
			if c := cost(rn, n, loss); c < c0 {
				improved = c0-c > 1e-4*c0
				x, r, c0 = xn, rn, c
				lambda = math.Max(lambda/3, 1e-6)
				break
			}
			lambda *= 10
		}
		if !improved {
			break
		}
	}
	return x, c0, nil
}

// surrogateDescend minimises the loss of f's relative errors from x by output
// space mapping. At the current iterate the screening tier fj, scaled sample by
// sample to agree with f there (corrected), is descended to its own optimum by
// lmDescend (4·maxIter steps, screening evaluations only: µs each), and f is
// evaluated once at that optimum — or at 1/2, then 1/4 of the way, when the
// full step does not lower f's cost. The screening tier carries the timing's smooth
// dependence on the four corrections; the quantitative level it misses (the
// schedule's waits, the run's burst) is the per-sample factor, refreshed at
// every accepted iterate. A descent thus costs a handful of quantitative
// evaluations where lmDescend spends one per trial step. It stops when no step
// lowers f's cost by more than 1e-3 relative (the quantitative cost is
// piecewise in the timing: smaller gains are the schedule's steps, left to
// the simplex), or after maxIter steps, and returns the last iterate and its
// cost. Should the screening tier fail where the surrogate's descent led, the
// rest of the descent is lmDescend's from the current iterate.
func surrogateDescend(ctx context.Context, f, fj evalFn, ss []Sample, x [4]float64, loss string, maxIter int) ([4]float64, float64, error) {
	n := len(ss)
	q, err := f(ctx, ss, toAdjust(x)) // the iterate's predictions, kept to map the next surrogate
	if err != nil {
		return x, 0, err
	}
	r, err := residualsOf(ss, q, x)
	if err != nil {
		return x, 0, err
	}
	c0 := cost(r, n, loss)
	for range maxIter {
		at := toAdjust(x)
		s0, err := fj(ctx, ss, at)
		if err != nil {
			return x, 0, err
		}
		sur := memoOn(ss, corrected(fj, at, s0, q)) // a step's iterate is the next Jacobian's base
		xs, _, err := lmDescend(ctx, sur, sur, ss, x, loss, 4*maxIter)
		if err != nil {
			if ctx.Err() != nil {
				return x, 0, err
			}
			// The screening tier refused a point the surrogate wandered to: the
			// direct descent, from here, steps only where f is evaluated.
			return lmDescend(ctx, f, fj, ss, x, loss, maxIter)
		}
		improved := false
		for _, t := range [3]float64{1, 0.5, 0.25} {
			var xn [4]float64
			for j := range 4 {
				xn[j] = x[j] + t*(xs[j]-x[j])
			}
			if xn = clampX(xn); xn == x {
				break
			}
			qn, err := f(ctx, ss, toAdjust(xn))
			if err != nil {
				return x, 0, err
			}
			rn, err := residualsOf(ss, qn, xn)
			if err != nil {
				return x, 0, err
			}
			if c := cost(rn, n, loss); c < c0 {
				improved = c0-c > 1e-3*c0
				x, c0, q = xn, c, qn
				break
			}
		}
		if !improved {
			break
		}
	}
	return x, c0, nil
}

// corrected is the screening tier fj scaled per sample and metric to agree with
// the quantitative predictions q at the adjustment at, where fj predicted s0:
// fj(adj)·q/s0, or fj(adj) + q − s0 where s0 is not positive. At at itself it
// scales s0 instead of asking fj again (the same values: fj is deterministic).
func corrected(fj evalFn, at refine.PassAdjust, s0, q [][2]float64) evalFn {
	return func(ctx context.Context, ss []Sample, adj refine.PassAdjust) ([][2]float64, error) {
		var p [][2]float64
		if adj == at {
			p = slices.Clone(s0)
		} else {
			var err error
			if p, err = fj(ctx, ss, adj); err != nil {
				return nil, err
			}
		}
		for i := range p {
			for k := range 2 {
				if s0[i][k] > 0 {
					p[i][k] *= q[i][k] / s0[i][k]
				} else {
					p[i][k] += q[i][k] - s0[i][k]
				}
			}
		}
		return p, nil
	}
}

// jacobian is the forward-difference Jacobian of f's residuals at x.
func jacobian(ctx context.Context, f evalFn, ss []Sample, x [4]float64) ([][4]float64, error) {
	r, err := residuals(ctx, f, ss, x)
	if err != nil {
		return nil, err
	}
	jac := make([][4]float64, len(r))
	for j := range 4 {
		xp := x
		h := fdStep[j]
		if xp[j]+h > upper[j] {
			h = -h
		}
		xp[j] += h
		rp, err := residuals(ctx, f, ss, xp)
		if err != nil {
			return nil, err
		}
		for i := range r {
			jac[i][j] = (rp[i] - r[i]) / h
		}
	}
	return jac, nil
}

// nelderMead minimises the quantitative cost (under loss) over x from start (deterministic
// simplex; the schedule is piecewise in the timing, so no derivatives), at most
// maxEval cost evaluations.
func nelderMead(ctx context.Context, f evalFn, ss []Sample, start [4]float64, loss string, maxEval int) ([4]float64, float64, error) {
	costAt := func(x [4]float64) (float64, error) {
		r, err := residuals(ctx, f, ss, clampX(x))
		if err != nil {
			return 0, err
		}
		return cost(r, len(ss), loss), nil
	}
	type vertex struct {
		x [4]float64
		c float64
	}
	simplex := make([]vertex, 5)
	init := [4]float64{0.15, 0.15, 0.5, 5}
	for i := range simplex {
		x := start
		if i > 0 {
			x[i-1] += init[i-1]
		}
		x = clampX(x)
		c, err := costAt(x)
		if err != nil {
			return start, 0, err
		}
		simplex[i] = vertex{x, c}
	}
	evals := 5
	sortS := func() {
		sort.SliceStable(simplex, func(i, j int) bool { return simplex[i].c < simplex[j].c })
	}
	for evals < maxEval {
		sortS()
		if simplex[4].c-simplex[0].c <= 1e-9*(1+simplex[0].c) {
			break
		}
		var cen [4]float64
		for i := range 4 {
			for j := range 4 {
				cen[j] += simplex[i].x[j] / 4
			}
		}
		at := func(t float64) [4]float64 {
			var x [4]float64
			for j := range 4 {
				x[j] = cen[j] + t*(simplex[4].x[j]-cen[j])
			}
			return clampX(x)
		}
		xr := at(-1)
		cr, err := costAt(xr)
		if err != nil {
			return start, 0, err
		}
		evals++
		switch {
		case cr < simplex[0].c:
			xe := at(-2)
			ce, err := costAt(xe)
			if err != nil {
				return start, 0, err
			}
			evals++
			if ce < cr {
				simplex[4] = vertex{xe, ce}
			} else {
				simplex[4] = vertex{xr, cr}
			}
		case cr < simplex[3].c:
			simplex[4] = vertex{xr, cr}
		default:
			t := 0.5
			if cr < simplex[4].c {
				t = -0.5
			}
			xc := at(t)
			cc, err := costAt(xc)
			if err != nil {
				return start, 0, err
			}
			evals++
			if cc < math.Min(cr, simplex[4].c) {
				simplex[4] = vertex{xc, cc}
				continue
			}
			for i := 1; i < 5; i++ {
				for j := range 4 {
					simplex[i].x[j] = simplex[0].x[j] + 0.5*(simplex[i].x[j]-simplex[0].x[j])
				}
				if simplex[i].c, err = costAt(simplex[i].x); err != nil {
					return start, 0, err
				}
				evals++
			}
		}
	}
	sortS()
	return simplex[0].x, simplex[0].c, nil
}

// lmStep solves (JᵀJ + λ·diag(JᵀJ) + λ·I)·δ = −Jᵀr (4×4, Gaussian elimination
// with partial pivoting).
func lmStep(jac [][4]float64, r []float64, lambda float64) ([4]float64, bool) {
	var a [4][5]float64
	for i := range jac {
		for p := range 4 {
			for q := range 4 {
				a[p][q] += jac[i][p] * jac[i][q]
			}
			a[p][4] -= jac[i][p] * r[i]
		}
	}
	for p := range 4 {
		a[p][p] += lambda*a[p][p] + lambda
	}
	for c := range 4 {
		piv := c
		for k := c + 1; k < 4; k++ {
			if math.Abs(a[k][c]) > math.Abs(a[piv][c]) {
				piv = k
			}
		}
		if a[piv][c] == 0 {
			return [4]float64{}, false
		}
		a[c], a[piv] = a[piv], a[c]
		for k := c + 1; k < 4; k++ {
			m := a[k][c] / a[c][c]
			for q := c; q < 5; q++ {
				a[k][q] -= m * a[c][q]
			}
		}
	}
	var x [4]float64
	for c := 3; c >= 0; c-- {
		s := a[c][4]
		for q := c + 1; q < 4; q++ {
			s -= a[c][q] * x[q]
		}
		x[c] = s / a[c][c]
		if math.IsNaN(x[c]) || math.IsInf(x[c], 0) {
			return [4]float64{}, false
		}
	}
	return x, true
}

// unidentified names the parameters the data residuals barely depend on
// (sensitivity: a parameter's typical change moves the RMS relative error by
// < 0.1 %), and pairs that move the residuals almost identically (|correlation of
// their Jacobian columns| > 0.99: only a combination is identified).
func unidentified(jac [][4]float64, n int) []string {
	var out []string
	if len(jac) == 0 {
		return []string{"all: no rows"}
	}
	var norm [4]float64
	for j := range 4 {
		s := 0.0
		for i := range jac {
			s += jac[i][j] * jac[i][j]
		}
		norm[j] = math.Sqrt(s / float64(len(jac)))
	}
	weak := [4]bool{}
	for j := range 4 {
		if norm[j]*priorScale[j] < 1e-3 {
			weak[j] = true
			out = append(out, ParamNames[j]+": no effect on these rows (absorbed by the wait for the next pass)")
		}
	}
	for p := range 4 {
		for q := p + 1; q < 4; q++ {
			if weak[p] || weak[q] {
				continue
			}
			dot := 0.0
			for i := range jac {
				dot += jac[i][p] * jac[i][q]
			}
			c := dot / (norm[p] * norm[q] * float64(len(jac)))
			if math.Abs(c) > 0.99 {
				out = append(out, fmt.Sprintf("%s and %s: not separately identified (correlation %.3f)", ParamNames[p], ParamNames[q], c))
			}
		}
	}
	if n < 4 {
		out = append(out, fmt.Sprintf("all: %d rows for 4 parameters", n))
	}
	return out
}
