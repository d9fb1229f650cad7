package perfdb

// interp.go holds the shared pieces of the perf_interp v2 engine (PERFDB.md
// §1.4; aiconfigurator aic-core/rust/aiconfigurator-core/src/perf_database/
// perf_interp.rs): measured leaves, query coordinates, the SOL hook, the
// value transforms and structured misses.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// maxAxes bounds the number of continuous axes of any table the engine
// resolves (attention: 3, GEMM: 3, comm/MoE curves: 1).
const maxAxes = 4

// pt is a query coordinate, outer axis first. Fixed-size so it is passed by
// value and never escapes to the heap.
type pt [maxAxes]float64

// leaf is one measured point: latency (ms), power (W) and energy
// (W·ms = power × measured latency, as aiconfigurator's loaders compute it).
type leaf struct {
	lat, power, energy float64
}

// newLeaf builds a leaf the way every aiconfigurator loader does:
// energy = power × latency.
func newLeaf(lat, power float64) leaf { return leaf{lat: lat, power: power, energy: power * lat} }

// blendPower is the average power every blend path uses (Rust
// LeafValue::blend_power): energy/latency when both are positive, else power.
func (l leaf) blendPower() float64 {
	if l.energy > 0 && l.lat > 0 {
		return l.energy / l.lat
	}
	return l.power
}

// resolved turns a blended (latency, power) pair into a leaf with
// energy = power × latency (the non-exact-hit contract of query_value).
func resolved(lat, power float64) leaf { return leaf{lat: lat, power: power, energy: power * lat} }

// solFn is an analytic speed-of-light latency (ms) at a coordinate in the
// table's axis order. Implementations are small precomputed structs so
// queries do not allocate.
type solFn interface {
	sol(c pt) float64
}

// MissError is a structured miss: the tables hold nothing to anchor the
// query on (perf_interp step 4, Rust AicError::PerfDatabase). HYBRID mode
// answers a MissError with the empirical estimate; SILICON returns it.
type MissError struct{ Msg string }

func (e *MissError) Error() string { return e.Msg }

// EmpiricalMissError means the empirical path found no utilization data to
// calibrate from (Rust AicError::EmpiricalNotImplemented). It is terminal in
// every mode.
type EmpiricalMissError struct{ Msg string }

func (e *EmpiricalMissError) Error() string { return e.Msg }

// IsMiss reports whether err is a structured table miss (see MissError).
func IsMiss(err error) bool {
	var m *MissError
	return errors.As(err, &m)
}

// missf builds a MissError.
func missf(format string, args ...any) error { return &MissError{Msg: fmt.Sprintf(format, args...)} }

// anchorMiss is the engine's structured miss naming the query coordinates.
func anchorMiss(axes []string, c pt, reason string) error {
	var b strings.Builder
	for i, a := range axes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%v", a, c[i])
	}
	return &MissError{Msg: fmt.Sprintf("perf_interp: no data to anchor query {%s} (%s)", b.String(), reason)}
}

// toSpace / fromSpace implement the per-axis value transform: sqrt(latency)
// linearises the ~s² growth of context attention along seq.
func toSpace(sqrtT bool, lat float64) float64 {
	if !sqrtT {
		return lat
	}
	if lat > 0 {
		return math.Sqrt(lat)
	}
	return 0
}

func fromSpace(sqrtT bool, v float64) float64 {
	if !sqrtT {
		return v
	}
	return v * v
}

// isExactKey reports whether c can be a table key (a non-negative integer),
// mirroring as_exact_key.
func isExactKey(c float64) bool {
	return c >= 0 && c <= math.MaxUint32 && c == math.Trunc(c)
}

// log2Floor is log2(max(v, 1e-12)), the engine's joint-log distance metric.
func log2Floor(v float64) float64 { return math.Log2(math.Max(v, 1e-12)) }

// median sorts vs in place and returns its median.
func median(vs []float64) float64 {
	slices.Sort(vs)
	n := len(vs)
	if n%2 == 1 {
		return vs[n/2]
	}
	return (vs[n/2-1] + vs[n/2]) / 2
}

// positiveFinite reports v > 0 and finite.
func positiveFinite(v float64) bool { return v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }
