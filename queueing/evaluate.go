package queueing

import (
	"context"

	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// Options tunes a quantitative evaluation. The zero value selects the defaults.
type Options struct {
	// WarmupGenerations (closed loop): requests of a slot before its steady window
	// (default 4; the first generation is always the transient).
	WarmupGenerations int
	// WindowGenerations (closed loop): steady requests per slot (default
	// max(8, ceil(256/C))).
	WindowGenerations int
	// OpenLoopRequests: open-loop requests when the workload does not set
	// NumRequests (default workload.ArrivalStrata: one whole stream period, so
	// the windowed rate is exact).
	OpenLoopRequests int
	// RecordTokenTimes fills RequestRecord.TokenMs.
	RecordTokenTimes bool
	// NoFastForward disables the decode-stretch fast path (fastforward.go); the
	// results are identical up to floating-point summation order.
	NoFastForward bool
	// StaggerPhases (closed loop), when > 0, reports the steady distributions as an
	// equal mixture over that many limit cycles started with the clients spread
	// uniformly over i/K of one request cycle (i = 1..K) instead of the burst alone
	// (QUEUEING.md §4, multi-stability); the transient stays the burst's.
	// Diagnostics.StaggerPhases flags it. 0 (default) is the burst, as the oracle
	// gate assumes.
	StaggerPhases int

	spreadMs float64 // initial spread of the closed-loop clients (internal)
}

// Quantitative evaluates w on engine e with pass timing t by the limit-cycle
// recursion of the backend's calendar (QUEUEING.md §4) with default options.
func Quantitative(ctx context.Context, w workload.Spec, e EngineSpec, t timing.Timing) (*Report, error) {
	return QuantitativeWith(ctx, w, e, t, Options{})
}
