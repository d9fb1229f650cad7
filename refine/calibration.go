package refine

import (
	"fmt"
	"math"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/store"
)

// PassAdjust is a calibration of one deployment's pass timing and client path
// (issue 9 part 4), applied inside the model — never to its outputs:
//
//	pass_ms' = PassOverheadMs + PrefillScale·T(prefill chunks alone)
//	                          + DecodeScale·max(0, T(pass) − T(prefill chunks alone))
//
// (a decode-only pass is PassOverheadMs + DecodeScale·T(pass)), and
// RequestOverheadMs is added to the engine's per-request stage time (tokenisation,
// HTTP, detokenisation: it delays a request's arrival at the scheduler and adds to
// its TTFT and E2E, QUEUEING.md §4). The zero value is not the identity: use
// Identity().
type PassAdjust struct {
	PrefillScale      float64 `json:"prefill_scale"`
	DecodeScale       float64 `json:"decode_scale"`
	PassOverheadMs    float64 `json:"pass_overhead_ms"`
	RequestOverheadMs float64 `json:"request_overhead_ms"`
}

// Identity is the adjustment that changes nothing.
func Identity() PassAdjust { return PassAdjust{PrefillScale: 1, DecodeScale: 1} }

// IsIdentity reports an adjustment that changes nothing.
func (a PassAdjust) IsIdentity() bool { return a == Identity() }

// Validate reports a parameter that is not finite, a scale ≤ 0 or an overhead < 0.
func (a PassAdjust) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
		pos  bool
	}{{"prefill_scale", a.PrefillScale, true}, {"decode_scale", a.DecodeScale, true},
		{"pass_overhead_ms", a.PassOverheadMs, false}, {"request_overhead_ms", a.RequestOverheadMs, false}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 || (f.pos && f.v == 0) || f.v > 1e6 {
			return fmt.Errorf("calibration %s = %v: must be finite and %s", f.name, f.v, map[bool]string{true: "> 0", false: "≥ 0"}[f.pos])
		}
	}
	return nil
}

// Apply adjusts an engine and its pass timing in place of the uncalibrated ones.
func (a PassAdjust) Apply(e *engine.Spec, t timing.Timing) timing.Timing {
	if a.IsIdentity() {
		return t
	}
	e.StageMs += a.RequestOverheadMs
	x := &adjustedTiming{a: a, t: t}
	if d, ok := t.(decodeOnlyPricer); ok {
		if sp, ok := t.(decodeSpanPricer); ok {
			return adjustedSpanTiming{adjustedDecodeTiming{x, d}, sp}
		}
		return adjustedDecodeTiming{x, d}
	}
	return x
}

// decodeOnlyPricer is a timing that prices a decode-only pass from its row count
// and summed context alone (perfdb.PassTiming, timing.Linear): queueing prices
// decode stretches through it without visiting the rows.
type decodeOnlyPricer interface {
	DecodeOnlyMs(rows, ctx int) (float64, error)
}

// adjustedDecodeTiming is adjustedTiming over a decodeOnlyPricer: it keeps the
// fast path, with the decode-only price adjusted exactly as PassMs adjusts it.
type adjustedDecodeTiming struct {
	*adjustedTiming
	d decodeOnlyPricer
}

// DecodeOnlyMs implements queueing's decode-only pricer (the same float64 as
// PassMs of a decode-only pass of rows rows whose contexts sum to ctx).
func (x adjustedDecodeTiming) DecodeOnlyMs(rows, ctx int) (float64, error) {
	total, err := x.d.DecodeOnlyMs(rows, ctx)
	if err != nil {
		return 0, err
	}
	return x.a.PassOverheadMs + x.a.DecodeScale*total, nil
}

// decodeSpanPricer is a decodeOnlyPricer that also reports the last summed
// context priced the same (perfdb.PassTiming): queueing's decode stretches ask
// it once per span instead of once per pass.
type decodeSpanPricer interface {
	DecodeOnlySpanMs(rows, ctx int) (float64, int, error)
}

// adjustedSpanTiming is adjustedDecodeTiming over a decodeSpanPricer: the
// adjusted decode-only price is a function of the uncalibrated one, so it
// keeps the same span.
type adjustedSpanTiming struct {
	adjustedDecodeTiming
	sp decodeSpanPricer
}

// DecodeOnlySpanMs implements queueing's span pricer: DecodeOnlyMs's float64
// and the wrapped timing's span.
func (x adjustedSpanTiming) DecodeOnlySpanMs(rows, ctx int) (float64, int, error) {
	total, maxCtx, err := x.sp.DecodeOnlySpanMs(rows, ctx)
	if err != nil {
		return 0, 0, err
	}
	return x.a.PassOverheadMs + x.a.DecodeScale*total, maxCtx, nil
}

// adjustedTiming is one evaluation's calibrated timing (an evaluation prices its
// passes sequentially; pre is scratch for the prefill-alone pass).
type adjustedTiming struct {
	a   PassAdjust
	t   timing.Timing
	pre timing.Pass
}

// PassMs implements timing.Timing.
func (x *adjustedTiming) PassMs(p *timing.Pass) (float64, error) {
	if len(p.Prefill) == 0 && len(p.Decode) == 0 {
		return 0, nil
	}
	total, err := x.t.PassMs(p)
	if err != nil {
		return 0, err
	}
	if len(p.Prefill) == 0 {
		return x.a.PassOverheadMs + x.a.DecodeScale*total, nil
	}
	pre := total
	if len(p.Decode) > 0 {
		x.pre.Prefill = p.Prefill
		pre, err = x.t.PassMs(&x.pre)
		x.pre.Prefill = nil
		if err != nil {
			return 0, fmt.Errorf("calibration: pricing the pass's prefill chunks alone: %w", err)
		}
	}
	return x.a.PassOverheadMs + x.a.PrefillScale*pre + x.a.DecodeScale*math.Max(0, total-pre), nil
}

// Calibrator gives the calibration of a point (ok=false: the point is not covered
// and stays uncalibrated).
type Calibrator interface {
	// Name identifies the calibration (and its content) in evaluator names.
	Name() string
	For(in store.PointInputs) (PassAdjust, bool)
}
