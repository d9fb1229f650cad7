package calibrate

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// deployKey is what a calibration is fitted per: (system, backend, version,
// deployed, model, quant, layout) of the predicted point (version: the
// perf-data version the measurements were mapped to; deployed: the engine
// version they were measured on, store.PointInputs.DeployedVersion — runs of
// engine versions priced at one perf-data version need different corrections;
// quant its store.QuantLabel: points of one model in different quantisations
// run different kernels, whose perf-data errors differ; layout its
// store.LayoutLabel: attention-DP ranks step in lockstep and pipelines run
// stages, which the one-rank kernel prices leave to the correction).
type deployKey struct{ System, Backend, Version, Deployed, Model, Quant, Layout string }

// keyOf is the deployment key of a point: the one rule every user of the key
// calls (the fit's groups, Calibration.For).
func keyOf(in store.PointInputs) deployKey {
	return deployKey{in.System, in.Backend, in.Version, in.DeployedVersion(), in.Model, store.QuantLabel(in), store.LayoutLabel(in)}
}

// String is the key's sort form (fields joined by NUL): Fit orders its groups by it.
func (k deployKey) String() string {
	return k.System + "\x00" + k.Backend + "\x00" + k.Version + "\x00" + k.Deployed + "\x00" + k.Model + "\x00" + k.Quant + "\x00" + k.Layout
}

// Calibration is a stored calibration: one PassAdjust per deployment key. It
// implements refine.Calibrator.
type Calibration struct {
	name    string
	digest  string
	params  map[deployKey]refine.PassAdjust
	quality map[deployKey]Quality
}

// Quality is what one fit of a calibration is worth: the rows it was fitted
// on and, when it had folds (HasCV), its cross-validated TTFT and TPOT MAPE
// (%), the error to expect on runs it was not fitted on.
type Quality struct {
	Rows           int
	HasCV          bool
	TTFTCV, TPOTCV float64
}

// Name implements refine.Calibrator: NAME@digest of the fitted parameters, so a
// refit under the same name gives new row keys.
func (c *Calibration) Name() string { return c.name + "@" + c.digest }

// For implements refine.Calibrator: the fit of the point's deployment key; else
// one stored with layout "" (any layout: fitted before migration 00018), quant
// "" (any quantisation: fitted before 00014), deployed version "" (any: fitted
// before 00015), or several of them, the deployed version's match first, then
// the quantisation's, then the layout's (the point_calibrations view's order).
func (c *Calibration) For(in store.PointInputs) (refine.PassAdjust, bool) {
	k, ok := c.find(in)
	return c.params[k], ok
}

// QualityFor is the Quality of the fit For applies to the point (false: none).
func (c *Calibration) QualityFor(in store.PointInputs) (Quality, bool) {
	k, ok := c.find(in)
	return c.quality[k], ok
}

// Shapes lists the (isl, osl) the fit For applies to the point was trained
// on, from the calibration's training shapes (store.CalibrationShapes, read by
// the one caller that asks: eval); nil when no fit applies. A fit's TTFT
// correction does not carry to shapes it did not see (docs/validation.md,
// Round 27: cross-validation by shape).
func (c *Calibration) Shapes(in store.PointInputs, trained []store.CalibrationShape) [][2]int {
	k, ok := c.find(in)
	if !ok {
		return nil
	}
	var out [][2]int
	for _, sh := range trained {
		if (deployKey{sh.System, sh.Backend, sh.Version, sh.Deployed, sh.Model, sh.Quant, sh.Layout}) == k {
			out = append(out, [2]int{sh.ISL, sh.OSL})
		}
	}
	return out
}

// find is the key of the fit that applies to the point, in For's order.
func (c *Calibration) find(in store.PointInputs) (deployKey, bool) {
	k := keyOf(in)
	for _, d := range [2]string{k.Deployed, ""} {
		for _, q := range [2]string{k.Quant, ""} {
			for _, l := range [2]string{k.Layout, ""} {
				f := deployKey{k.System, k.Backend, k.Version, d, k.Model, q, l}
				if _, ok := c.params[f]; ok {
					return f, true
				}
			}
		}
	}
	return deployKey{}, false
}

// Deployed lists the engine versions the calibration has fits for at the
// point's system, backend and model (any perf-data version and quantisation),
// sorted: what an uncalibrated point's note offers as --deployed-version (which
// prices at the version the fit was priced at).
func (c *Calibration) Deployed(in store.PointInputs) []string {
	var out []string
	for k := range c.params {
		if k.System == in.System && k.Backend == in.Backend && k.Model == in.Model &&
			k.Deployed != "" && !slices.Contains(out, k.Deployed) {
			out = append(out, k.Deployed)
		}
	}
	slices.Sort(out)
	return out
}

// Labels lists the "quant; layout" labels of the fits the calibration has at the
// point's system, backend, version, deployed version and model, sorted: what an
// uncalibrated point's note names when only its quantisation or layout has no
// fit.
func (c *Calibration) Labels(in store.PointInputs) []string {
	var out []string
	for k := range c.params {
		if k.System == in.System && k.Backend == in.Backend && k.Version == in.Version && k.Model == in.Model &&
			(k.Deployed == in.DeployedVersion() || k.Deployed == "") {
			if l := k.Quant + "; " + k.Layout; !slices.Contains(out, l) {
				out = append(out, l)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Load reads the calibration NAME from the store.
func Load(ctx context.Context, st *store.Store, name string) (*Calibration, error) {
	digest, err := st.CalibrationDigest(ctx, name)
	if err != nil {
		names, _ := st.CalibrationNames(ctx)
		if len(names) == 0 {
			return nil, fmt.Errorf("--calibration %q: the store has no calibrations: fit one with 'aicdb calibrate --name %s'", name, name)
		}
		return nil, fmt.Errorf("--calibration %q is not in the store: known calibrations are %s", name, strings.Join(names, ", "))
	}
	ps, err := st.CalibrationParams(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read calibration %s: %w", name, err)
	}
	c := &Calibration{name: name, digest: digest, params: map[deployKey]refine.PassAdjust{}, quality: map[deployKey]Quality{}}
	for _, p := range ps {
		k := deployKey{p.System, p.Backend, p.Version, p.Deployed, p.Model, p.Quant, p.Layout}
		c.params[k] = refine.PassAdjust{PrefillScale: p.PrefillScale,
			DecodeScale: p.DecodeScale, PassOverheadMs: p.PassOverheadMs, RequestOverheadMs: p.RequestOverheadMs}
		c.quality[k] = Quality{Rows: p.Rows, HasCV: p.HasCV, TTFTCV: p.TTFTMAPECV, TPOTCV: p.TPOTMAPECV}
	}
	return c, nil
}
