package calibrate

import (
	"context"
	"fmt"
	"strings"

	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
)

// deployKey is what a calibration is fitted per: (system, backend, version, model)
// of the predicted point (the perf-data version the measurements were mapped to).
type deployKey struct{ System, Backend, Version, Model string }

// Calibration is a stored calibration: one PassAdjust per deployment key. It
// implements refine.Calibrator.
type Calibration struct {
	name   string
	digest string
	params map[deployKey]refine.PassAdjust
}

// Name implements refine.Calibrator: NAME@digest of the fitted parameters, so a
// refit under the same name gives new row keys.
func (c *Calibration) Name() string { return c.name + "@" + c.digest }

// For implements refine.Calibrator.
func (c *Calibration) For(in store.PointInputs) (refine.PassAdjust, bool) {
	a, ok := c.params[deployKey{in.System, in.Backend, in.Version, in.Model}]
	return a, ok
}

// Load reads the calibration NAME from the store.
func Load(ctx context.Context, st *store.Store, name string) (*Calibration, error) {
	var digest string
	if err := st.DB.GetContext(ctx, &digest, `SELECT digest FROM calibrations WHERE name = ?`, name); err != nil {
		var names []string
		_ = st.DB.SelectContext(ctx, &names, `SELECT name FROM calibrations ORDER BY name`)
		if len(names) == 0 {
			return nil, fmt.Errorf("--calibration %q: the store has no calibrations: fit one with 'aicdb calibrate --name %s'", name, name)
		}
		return nil, fmt.Errorf("--calibration %q is not in the store: known calibrations are %s", name, strings.Join(names, ", "))
	}
	rows, err := st.DB.QueryContext(ctx, `SELECT system, backend, version, model, prefill_scale, decode_scale,
		pass_overhead_ms, request_overhead_ms FROM calibration_params WHERE name = ? ORDER BY system, backend, version, model`, name)
	if err != nil {
		return nil, fmt.Errorf("read calibration %s: %w", name, err)
	}
	defer rows.Close()
	c := &Calibration{name: name, digest: digest, params: map[deployKey]refine.PassAdjust{}}
	for rows.Next() {
		var k deployKey
		var a refine.PassAdjust
		if err := rows.Scan(&k.System, &k.Backend, &k.Version, &k.Model, &a.PrefillScale, &a.DecodeScale, &a.PassOverheadMs, &a.RequestOverheadMs); err != nil {
			return nil, fmt.Errorf("read calibration %s: %w", name, err)
		}
		c.params[k] = a
	}
	return c, rows.Err()
}
