package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/refine/calibrate"
	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/measure"
)

// accuracyCommand predicts the stored measurements (on demand, persisted) and
// prints MAPE per metric and group beside aiconfigurator's legacy estimate.
func accuracyCommand() *cli.Command {
	return &cli.Command{
		Name:  "accuracy",
		Usage: "MAPE of the predictions of measured runs (and of aiconfigurator's legacy estimate on the same rows)",
		Flags: append([]cli.Flag{
			runFlag(),
			versionFallbackFlag(),
			&cli.StringFlag{Name: "by", Usage: "group by these accuracy-view columns, comma-separated: " + strings.Join(calibrate.GroupColumns, ", ")},
			&cli.StringFlag{Name: "metrics", Value: "ttft_mean,ttft_p50,ttft_p99,tpot_mean,tpot_p50,tpot_p99,itl_p99,output_tokens_per_s", Usage: "metrics to report"},
			&cli.StringFlag{Name: "measurements", Usage: "SQL predicate over the measurements table (default: all)"},
			&cli.StringFlag{Name: "calibration", Usage: "apply the stored calibration `NAME` (default: uncalibrated)"},
			&cli.StringFlag{Name: "engine-profile", Value: calibrate.ProfileAIConfigurator, Usage: "engine configuration of measurements that do not state one: aiconfigurator | defaults"},
			formatFlag(formatTable),
			quietFlag(),
		}, mtpFlags()...),
		Action: runAccuracy,
	}
}

func runAccuracy(c *cli.Context) error {
	format := c.String("format")
	if err := checkFormat(format); err != nil {
		return err
	}
	var by []string
	if s := strings.TrimSpace(c.String("by")); s != "" {
		for _, b := range strings.Split(s, ",") {
			by = append(by, strings.TrimSpace(b))
		}
	}
	// Checked before any row is predicted: a bad flag leaves the store as it was.
	if err := calibrate.CheckGroupBy(by); err != nil {
		return userErrorf("accuracy: %v", err)
	}
	metrics := strings.Split(c.String("metrics"), ",")
	for i := range metrics {
		metrics[i] = strings.TrimSpace(metrics[i])
		if !validMetric(metrics[i]) {
			return userErrorf("accuracy: --metrics %s: want some of %s", metrics[i], strings.Join(measure.MetricColumns[:], ", "))
		}
	}
	st, err := store.Open(c.Context, c.String("db"), store.Options{MustExist: true})
	if err != nil {
		return asUser(err)
	}
	defer st.Close()
	where := c.String("measurements")
	rows, err := measure.Select(c.Context, st, where)
	if err != nil {
		return userErrorf("accuracy: --measurements: %v", err)
	}
	if len(rows) == 0 {
		return userErrorf("accuracy: no measurements match: import some with 'aicdb bench import'")
	}
	ev := refine.NewPerfdbEvaluator(refine.StoreSource{St: st})
	calName := c.String("calibration")
	if calName != "" {
		cal, err := calibrate.Load(c.Context, st, calName)
		if err != nil {
			return asUser(err)
		}
		ev.SetCalibrator(cal)
	}
	res, err := calibrate.NewResolver(c.Context, st, ev, c.String("engine-profile"))
	if err != nil {
		return asUser(err)
	}
	if err := resolverFlags(c, res); err != nil {
		return err
	}
	bar := newProgress(c, "accuracy", "rows")
	preds, err := calibrate.Predict(c.Context, st, ev, res, rows, calName, calibrate.PredictOptions{Progress: bar.Update})
	if err != nil {
		bar.Done()
		return err
	}
	bar.Summary("%s", predictionCounts(preds))
	if calName != "" { // the predicted points the calibration covers (the others are predicted uncalibrated)
		keys, ids := []string{}, []int64{} // not nil: a filter without keys would count every point
		for _, p := range preds {
			if p.Reason == "" {
				keys, ids = append(keys, p.Key), append(ids, p.Row.ID)
			}
		}
		if err := noteCalibrationCoverage(c, st, store.PointFilter{Keys: keys}, calName, c.App.ErrWriter); err != nil {
			return err
		}
		if err := noteInSample(c, st, calName, ids); err != nil {
			return err
		}
	}
	rep, err := calibrate.Report(c.Context, st, by, metrics, calName, where)
	if err != nil {
		return asUser(err)
	}
	return printAccuracy(c, by, rep, format)
}

// noteInSample says, on stderr, how many of the predicted rows (measurement
// ids) trained the calibration name: their calibrated MAPE is the fit's own,
// in-sample, and what to expect on runs it has not seen is its cross-validated
// figure (calibrationUnseen). Nothing when no predicted row trained it.
func noteInSample(c *cli.Context, st *store.Store, name string, ids []int64) error {
	trained, err := st.CalibrationTrained(c.Context, name, ids)
	if err != nil || trained == 0 {
		return err
	}
	unseen, err := calibrationUnseen(c, st, name)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.App.ErrWriter, "calibration %s: %d of the %d predicted rows trained it, so their MAPE below is in-sample (the fit's); %s\n", name, trained, len(ids), unseen)
	return err
}

func validMetric(m string) bool {
	for _, c := range measure.MetricColumns {
		if c == m {
			return true
		}
	}
	return false
}

// printAccuracy prints one row per group and metric through the output layer:
// the group columns, then the metric, its MAPE (%) and the legacy estimate's on
// the rows it covers. A MAPE over no rows is null (never 0).
func printAccuracy(c *cli.Context, by []string, rep []calibrate.MAPERow, format string) error {
	cols := append(append([]string{}, by...), "metric", "n", "mape_pct", "legacy_n", "legacy_mape_pct", "mape_pct_same_rows", "unpredicted")
	pct := func(v float64, n int) any {
		if n == 0 {
			return nil
		}
		return v
	}
	data := make([][]any, 0, len(rep))
	for _, r := range rep {
		row := make([]any, 0, len(cols))
		for _, g := range r.Group {
			row = append(row, g)
		}
		data = append(data, append(row, r.Metric, int64(r.N), pct(r.MAPE, r.N), int64(r.LegacyN),
			pct(r.LegacyMAPE, r.LegacyN), pct(r.MAPESame, r.LegacyN), int64(r.Unpredicted)))
	}
	return writeRows(c.App.Writer, format, cols, data)
}

// runFlag selects what a measured closed-loop row is compared with (accuracy,
// calibrate): the benchmark run that produced it — its clients desynchronised
// after the burst (the default since Round 13: closer to every measured
// backend whose timing is not biased low, docs/validation.md) or locked for the
// whole run —, or the steady state.
func runFlag() cli.Flag {
	return &cli.StringFlag{Name: "run", Value: "desync", Usage: "predict each measured closed-loop row as the `RUN` that produced it: desync (burst start, the file's request count — aic-silicon: aiconfigurator's aiperf benchmark, 20·C requests —, the clients desynchronised after the burst: the stagger mixture; disaggregated rows as benchmark) | benchmark (the same run with the clients locked for the whole run) | steady (the limit cycle, as eval and sweep)"}
}

// versionFallbackFlag lets a measured row whose mapped perf-data version cannot
// price its point fall back to the nearest version that can (accuracy, calibrate).
func versionFallbackFlag() cli.Flag {
	return &cli.BoolFlag{Name: "version-fallback", Usage: "price a row whose mapped perf-data version has no data for its point at the nearest other version that has (nearest first, the newer of two equally near); the row's version_mapping records each step; off, such a row stays unpredicted with the miss as its reason"}
}

// mtpFlags declares accuracy's and calibrate's --nextn and --nextn-accepted.
func mtpFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "nextn", Usage: "assume MTP with N draft tokens per decode step for the rows predicted (no row records it; vLLM rows: MTP, TensorRT-LLM rows: one-model MTP, SGLang rows: EAGLE/NEXTN, aggregated or disaggregated (both pools); needs --nextn-accepted)"},
		&cli.Float64Flag{Name: "nextn-accepted", Usage: "with --nextn: the mean drafts accepted per decode step, 0..nextn"},
	}
}

// resolverFlags reads --run, --version-fallback, --nextn and --nextn-accepted
// (runFlag, versionFallbackFlag, mtpFlags: accuracy, calibrate) into res.
func resolverFlags(c *cli.Context, res *calibrate.Resolver) error {
	res.VersionFallback = c.Bool("version-fallback")
	n, a, err := readMTP(c)
	if err != nil {
		return err
	}
	res.NextN, res.NextNAccepted = n, a
	switch r := c.String("run"); r {
	case "benchmark":
		res.Run = calibrate.RunBenchmark
	case "desync":
		res.Run = calibrate.RunDesync
	case "steady":
		res.Run = calibrate.RunSteady
	default:
		return userErrorf("%s: --run %q: want desync, benchmark or steady", c.Command.Name, r)
	}
	return nil
}

// predictionCounts is the summary of calibrate.Predict's rows: how many
// measurements, how many predicted, how many without a prediction.
func predictionCounts(ps []calibrate.Prediction) string {
	un, fb := 0, 0
	for _, p := range ps {
		switch {
		case p.Reason != "":
			un++
		case p.FellBack():
			fb++
		}
	}
	s := fmt.Sprintf("%d measurements, %d predicted, %d without a prediction", len(ps), len(ps)-un, un)
	if fb > 0 {
		s += fmt.Sprintf(" (%d predicted at a fallback perf-data version: see version_mapping)", fb)
	}
	return s
}
