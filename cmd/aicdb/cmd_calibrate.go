package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/refine/calibrate"
	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/measure"
)

// calibrateCommand fits per-deployment pass-timing calibrations to measured runs
// (issue 9 part 4) and stores them under a name for --calibration.
func calibrateCommand() *cli.Command {
	return &cli.Command{
		Name:      "calibrate",
		Usage:     "fit pass-timing calibrations (prefill/decode scales, per-pass and per-request overheads) to measured runs, one per system, backend, version, deployed version, model, quantisation and layout (tp, adp: attention data parallel, pp)",
		UsageText: `aicdb calibrate --name b200 --measurements "system = 'b200_sxm' and backend = 'vllm'" --holdout 5`,
		Flags: append([]cli.Flag{
			runFlag(),
			versionFallbackFlag(),
			&cli.StringFlag{Name: "name", Required: true, Usage: "calibration `NAME` (replaces one of the same name)"},
			&cli.StringFlag{Name: "measurements", Usage: "SQL predicate over the measurements table (default: all)"},
			&cli.IntFlag{Name: "holdout", Usage: "report k-fold cross-validated MAPE (k ≥ 2; 0 = none)"},
			&cli.StringFlag{Name: "holdout-by", Usage: "with --holdout: what a fold holds out whole — shape (isl, osl, prefix), concurrency or parallel (the layout) — so each held-out prediction is of a configuration the fit has not seen (default: every k-th row)"},
			&cli.StringFlag{Name: "objective", Value: "quantitative", Usage: "tier the fit minimises: quantitative | screening (fast, less accurate); reported errors are quantitative"},
			&cli.IntFlag{Name: "descent-clients", Value: calibrate.DefaultDescentClients, Usage: "the descent's quantitative objective averages a desync run of C clients over ⌈N / C⌉ client phases (at least 1; fewer than the evaluator's 4 only for C > N/4: cheaper where runs cost most); reported errors and stored predictions use the evaluator's phases; 0: the descent uses them too"},
			&cli.StringFlag{Name: "loss", Value: calibrate.DefaultLoss, Usage: "what the fit minimises over the relative TTFT and TPOT errors: l1 (their mean absolute value, the reported MAPE) | l2 (their squares, least squares)"},
			&cli.StringFlag{Name: "engine-profile", Value: calibrate.ProfileAIConfigurator, Usage: "engine configuration of measurements that do not state one: aiconfigurator | defaults"},
			formatFlag(formatTable),
			quietFlag(),
		}, mtpFlags()...),
		Action: runCalibrate,
	}
}

func runCalibrate(c *cli.Context) error {
	name := strings.TrimSpace(c.String("name"))
	if name == "" || strings.ContainsAny(name, "@+ ") {
		return userErrorf("calibrate: --name %q: want a non-empty name without '@', '+' or spaces", c.String("name"))
	}
	format := c.String("format")
	if err := checkFormat(format); err != nil {
		return err
	}
	k := c.Int("holdout")
	if k == 1 || k < 0 {
		return userErrorf("calibrate: --holdout %d: want 0 (none) or k ≥ 2 folds", k)
	}
	by := c.String("holdout-by")
	if err := calibrate.CheckHoldoutBy(by); err != nil {
		return userErrorf("calibrate: %v", err)
	}
	if by != "" && k < 2 {
		return userErrorf("calibrate: --holdout-by %s needs --holdout K (k ≥ 2 folds)", by)
	}
	loss := c.String("loss")
	if err := calibrate.CheckLoss(loss); err != nil {
		return userErrorf("calibrate: %v", err)
	}
	if n := c.Int("descent-clients"); n < 0 {
		return userErrorf("calibrate: --descent-clients %d: want the client starts the descent averages over (%d by default), or 0 for the evaluator's phases", n, calibrate.DefaultDescentClients)
	}
	if err := calibrate.CheckObjective(c.String("objective")); err != nil {
		return userErrorf("calibrate: %v", err)
	}
	st, err := store.Open(c.Context, c.String("db"), store.Options{MustExist: true})
	if err != nil {
		return asUser(err)
	}
	defer st.Close()
	where := c.String("measurements")
	rows, err := measure.Select(c.Context, st, where)
	if err != nil {
		return userErrorf("calibrate: --measurements: %v", err)
	}
	if len(rows) == 0 {
		return userErrorf("calibrate: no measurements match %q: list them with aicdb query \"select id, backend, model, system from measurements\", or import some with 'aicdb bench import'", where)
	}
	ev := refine.NewPerfdbEvaluator(refine.StoreSource{St: st})
	res, err := calibrate.NewResolver(c.Context, st, ev, c.String("engine-profile"))
	if err != nil {
		return asUser(err)
	}
	if err := resolverFlags(c, res); err != nil {
		return err
	}
	// The uncalibrated predictions are persisted for the accuracy view as a side effect.
	bar := newProgress(c, "calibrate: predict", "rows")
	preds, err := calibrate.Predict(c.Context, st, ev, res, rows, "", calibrate.PredictOptions{Progress: bar.Update})
	if err != nil {
		bar.Done()
		return err
	}
	bar.Done() // the measurement counts are the summary line's below: printed once
	targets := make([]calibrate.Target, len(preds))
	for i := range preds {
		targets[i] = preds[i].Target
	}
	samples := calibrate.Samples(targets)
	if len(samples) == 0 {
		return userErrorf("calibrate: none of the %d measurements matching %q can be predicted (see 'aicdb query \"select reason, count(*) from accuracy group by 1\"')", len(rows), where)
	}
	fitBar := newProgress(c, "calibrate: fit", "fits")
	fo := calibrate.FitOptions{Holdout: k, HoldoutBy: by, Objective: c.String("objective"), Loss: loss, Progress: fitBar.Update, DescentClients: c.Int("descent-clients")}
	fits, err := calibrate.Fit(c.Context, ev, samples, fo)
	if err != nil {
		fitBar.Done()
		return err
	}
	cv := "no cross-validation"
	if k >= 2 {
		cv = fmt.Sprintf("%d-fold cross-validation", k)
	}
	fitBar.Summary("%s", cv) // the group and sample counts are the summary line's below
	digest, err := calibrate.Save(c.Context, st, name, where, ev.Name(), res.Profile, fo, fits, time.Now().UTC().Format(time.RFC3339))
	if err != nil {
		return err
	}
	// The summary line heads the table; csv, json and jsonl carry only the rows
	// (each naming the calibration), so the line goes to stderr for them.
	sum := c.App.Writer
	if format != formatTable {
		sum = c.App.ErrWriter
	}
	fmt.Fprintf(sum, "calibration %s@%s: %d groups from %d of %d measurements (%d without a prediction)\n", name, digest, len(fits), len(samples), len(rows), len(rows)-len(samples))
	fmt.Fprintln(sum, overallLine(calibrate.OverallOf(fits), k, by))
	return writeCalibration(c.App.Writer, format, name+"@"+digest, fits)
}

// overallLine is calibrate's second summary line: the row-weighted TTFT / TPOT
// MAPE over every group, uncalibrated, fitted and (with --holdout) held out.
func overallLine(o calibrate.Overall, k int, by string) string {
	l := fmt.Sprintf("all %d rows: TTFT / TPOT MAPE %.2f / %.2f %% uncalibrated, %.2f / %.2f %% fitted", o.Rows, o.TTFTBefore, o.TPOTBefore, o.TTFTFit, o.TPOTFit)
	units := "rows"
	if by != "" {
		units = map[string]string{calibrate.HoldoutShape: "shapes", calibrate.HoldoutConcurrency: "concurrencies", calibrate.HoldoutParallel: "layouts"}[by]
	}
	folds := foldsLabel(by)
	switch {
	case k < 2:
		return l + "; no cross-validation (--holdout K for K-fold)"
	case o.CVRows == 0:
		return l + fmt.Sprintf("; no group has %d %s for %d-fold cross-validation", k, units, k)
	}
	return l + fmt.Sprintf("; %d-fold cross-validated%s %.2f / %.2f %% over the %d rows in folds", k, folds, o.TTFTCV, o.TPOTCV, o.CVRows)
}

// foldsLabel names what a cross-validated figure's folds held out when it is
// not every k-th row (by: calibrate --holdout-by, "" or "rows" for the default).
func foldsLabel(by string) string {
	if by == "" || by == "rows" {
		return ""
	}
	return " (folds by " + by + ")"
}

// calibrationUnseen is what a calibration's figures are worth on runs it was
// not fitted on: its cross-validated MAPE from its report, or, fitted without
// folds, how to measure it.
func calibrationUnseen(c *cli.Context, st *store.Store, name string) (string, error) {
	cv, ok, err := st.CalibrationCrossValidated(c.Context, name)
	if err != nil || !ok {
		return "it was fitted without folds: 'aicdb calibrate --holdout K' measures its error on runs it has not seen", err
	}
	return fmt.Sprintf("on runs it has not seen expect its %d-fold cross-validated%s TTFT / TPOT MAPE, %.2f / %.2f %% over %d rows", cv.K, foldsLabel(cv.By), cv.TTFT, cv.TPOT, cv.Rows), nil
}

// noteCalibrationUnseen prints calibrationUnseen's line for a calibrated
// sweep's or best's rows on w.
func noteCalibrationUnseen(c *cli.Context, st *store.Store, name string, w io.Writer) error {
	unseen, err := calibrationUnseen(c, st, name)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "calibration %s: %s\n", name, unseen)
	return err
}

// calibrationColumns are the keys of calibrate's rows: the deployment key
// (version: the perf-data version the rows are priced at; deployed_version: the
// engine version they were measured on; quant: store.QuantLabel of the group's
// points; layout: their store.LayoutLabel), the
// fitted parameters, and the TTFT and TPOT MAPE (%) before the fit, after it and
// cross-validated (null without --holdout).
var calibrationColumns = []string{"calibration", "system", "backend", "version", "deployed_version", "model", "quant", "layout", "rows",
	"prefill_scale", "decode_scale", "pass_overhead_ms", "request_overhead_ms",
	"ttft_mape_pct_before", "ttft_mape_pct_fit", "ttft_mape_pct_cv",
	"tpot_mape_pct_before", "tpot_mape_pct_fit", "tpot_mape_pct_cv", "unidentified"}

// writeCalibration prints one row per fitted deployment through the output layer.
func writeCalibration(w io.Writer, format, name string, fits []calibrate.GroupFit) error {
	data := make([][]any, 0, len(fits))
	for _, g := range fits {
		a := g.Adjust
		var ttftCV, tpotCV, un any
		if g.HasCV {
			ttftCV, tpotCV = g.TTFTCV, g.TPOTCV
		}
		if len(g.Unidentified) > 0 {
			un = strings.Join(g.Unidentified, "; ")
		}
		data = append(data, []any{name, g.System, g.Backend, g.Version, g.Deployed, g.Model, g.Quant, g.Layout, int64(len(g.Samples)),
			a.PrefillScale, a.DecodeScale, a.PassOverheadMs, a.RequestOverheadMs,
			g.TTFTBefore, g.TTFTFit, ttftCV, g.TPOTBefore, g.TPOTFit, tpotCV, un})
	}
	return writeRows(w, format, calibrationColumns, data)
}

// calibrationFlag is eval/sweep/best's --calibration.
func calibrationFlag() cli.Flag {
	return &cli.StringFlag{Name: "calibration", Usage: "apply the stored calibration `NAME` (aicdb calibrate) to the points it covers; others stay uncalibrated"}
}

// calibrationSetter is an evaluator that can apply a calibration (refine's perfdb
// evaluator).
type calibrationSetter interface {
	SetCalibrator(refine.Calibrator)
}

// withCalibration applies --calibration to ev (unchanged without the flag). The
// calibration's name goes into the evaluator name, so every row records it.
func withCalibration(c *cli.Context, st *store.Store, ev refine.Evaluator) (refine.Evaluator, error) {
	name := c.String("calibration")
	if name == "" {
		return ev, nil
	}
	cal, err := calibrate.Load(c.Context, st, name)
	if err != nil {
		return nil, asUser(err)
	}
	s, ok := ev.(calibrationSetter)
	if !ok {
		return nil, userErrorf("--calibration %s: the %s evaluator cannot be calibrated (use the perf-database evaluator)", name, ev.Name())
	}
	s.SetCalibrator(cal)
	return ev, nil
}

// calibratedBest is best's evaluator: the lazy one reporting on bar, or with
// --calibration the calibrated one, and then only rows computed with that
// calibration are read.
func calibratedBest(c *cli.Context, st *store.Store, f *store.PointFilter, bar *progressReporter) (refine.Evaluator, error) {
	if c.String("calibration") == "" {
		return newLazyEvaluator(st).withProgress(bar), nil
	}
	ev, err := newEvaluator(c.Context, st)
	if err != nil {
		return nil, err
	}
	if ev, err = withCalibration(c, st, ev); err != nil {
		return nil, err
	}
	f.Where, f.WhereArgs = "evaluator = ?", []any{ev.Name()}
	return ev, nil
}

// evalCalibration is what eval's output records of --calibration: label is
// "NAME@digest", or "uncalibrated: …" when the calibration has no fit for the
// point ("" without the flag); q is the applied fit's Quality (applied).
type evalCalibration struct {
	label   string
	q       calibrate.Quality
	applied bool
	// shapeMeasured: the fit's training rows include the point's (isl, osl).
	shapeMeasured bool
}

// columns adds the calibration's columns to an eval row: its label and, for an
// applied fit, the rows it was fitted on and its cross-validated MAPE — the
// error to expect of the calibrated figures on runs it was not fitted on.
func (e evalCalibration) columns(cols map[string]any) {
	if e.label == "" {
		return
	}
	cols["calibration"] = e.label
	if !e.applied {
		return
	}
	cols["calibration_rows"], cols["calibration_shape_measured"] = e.q.Rows, e.shapeMeasured
	if e.q.HasCV {
		cols["calibration_ttft_cv_mape_pct"], cols["calibration_tpot_cv_mape_pct"] = e.q.TTFTCV, e.q.TPOTCV
	}
}

// calibrateEval applies --calibration to eval's perf-database timing through the
// same refine.PassAdjust as sweep points, and returns what the output records.
func calibrateEval(c *cli.Context, s *evalSpec) (evalCalibration, error) {
	name := c.String("calibration")
	if name == "" {
		return evalCalibration{}, nil
	}
	if !s.dep.set.given("model") {
		return evalCalibration{}, userErrorf("--calibration: calibrations apply to the perf-database timing (--model), not to --timing")
	}
	st, err := store.Open(c.Context, c.String("db"), store.Options{ReadOnly: true})
	if err != nil {
		return evalCalibration{}, asUser(err)
	}
	defer st.Close()
	cal, err := calibrate.Load(c.Context, st, name)
	if err != nil {
		return evalCalibration{}, asUser(err)
	}
	var in store.PointInputs
	if s.pt != nil { // the quantisation and layout the pass timing was built with (a calibration is keyed by them)
		cfg := s.pt.Estimator().Config()
		in = refine.QuantInputs(cfg)
		in.TP, in.PP, in.DP = cfg.TP, cfg.PP, cfg.DP
	}
	in.Model, in.System, in.Backend, in.Version = s.dep.Model, s.dep.System, s.dep.Backend, s.dep.Version
	in.Deployed = store.DeployedAs(s.dep.Deployed, s.dep.Version)
	adj, ok := cal.For(in)
	if !ok {
		at := in.Version
		if in.Deployed != "" {
			at += " deployed as " + in.Deployed
		}
		msg := fmt.Sprintf("uncalibrated: %s has no fit for %s %s %s %s [%s; %s]", cal.Name(), in.System, in.Backend, at, in.Model,
			store.QuantLabel(in), store.LayoutLabel(in))
		if ds := cal.Deployed(in); len(ds) > 0 && !slices.Contains(ds, in.DeployedVersion()) {
			msg += "; it has fits of runs deployed on " + strings.Join(ds, ", ") + ": pass --deployed-version"
		} else if ls := cal.Labels(in); len(ls) > 0 {
			msg += "; its fits of this deployment are for [" + strings.Join(ls, "], [") + "] only ('' = any)"
		}
		return evalCalibration{label: msg}, nil
	}
	s.t = adj.Apply(&s.e, s.t)
	q, _ := cal.QualityFor(in)
	trained, err := st.CalibrationShapes(c.Context, name)
	if err != nil {
		return evalCalibration{}, err
	}
	shapes := cal.Shapes(in, trained)
	measured := slices.Contains(shapes, [2]int{s.w.ISL, s.w.OSL})
	if !measured {
		seen := make([]string, len(shapes))
		for i, sh := range shapes {
			seen[i] = fmt.Sprintf("%d/%d", sh[0], sh[1])
		}
		fmt.Fprintf(c.App.ErrWriter, "aicdb: note: calibration %s's fit for this deployment was trained on isl/osl %s, not %d/%d: its TTFT correction may not carry to a shape it did not see (on the B200 rows it did not; its TPOT one did: docs/validation.md, Round 27)\n",
			cal.Name(), strings.Join(seen, ", "), s.w.ISL, s.w.OSL)
	}
	return evalCalibration{label: cal.Name(), q: q, applied: true, shapeMeasured: measured}, nil
}
