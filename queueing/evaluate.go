package queueing

import (
	"context"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// Options tunes a quantitative evaluation. The zero value is the exact burst
// semantics (every client sends at t = 0, a replacement reaches the scheduler at
// completion + turnaround, no client round trip); DefaultOptions are the product
// defaults (desynchronised clients, a 1 ms client round trip) that Quantitative uses.
type Options struct {
	// WarmupGenerations is ignored for closed loops since issue 9: the steady
	// window starts on the detected limit cycle (cycle.go, Report.Diagnostics.Windows).
	WarmupGenerations int
	// WindowGenerations (closed loop): steady generations per slot (default
	// max(8, ⌈128/C⌉), rounded up to whole limit-cycle periods; each stagger phase
	// measures ⌈W/K⌉ of them).
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
	// equal mixture over that many limit cycles started with the clients at
	// independent random phases of one request cycle (ClientPhases, phase i =
	// 1..K) instead of the burst alone
	// (QUEUEING.md §4, multi-stability; stagger.go); the transient stays the
	// burst's. Diagnostics.StaggerPhases flags it. 0 is the burst.
	StaggerPhases int
	// ClientRTTMs (closed loop) is the client round trip of a replacement request:
	// it reaches the scheduler at completion + turnaround + ClientRTTMs (+ stages).
	// A real engine starts its next pass microseconds after a completion, while the
	// replacement first crosses detokenisation, streaming, the client, HTTP and
	// tokenisation; so it joins the schedule one pass later (two with async
	// scheduling, V-R10/V-R11), not the very next one as at 0 (the exact boundary
	// semantics, where the replacement is visible to the schedule at the completing
	// pass's end: V-R1/S-R1/T-R1 schedule at the pass boundary). It counts in the
	// client cycle (throughput), not in TTFT/E2E, which start at the scheduler.
	ClientRTTMs float64
	// PrefixCaching (trace replay, vLLM) says the engine caches KV blocks: a request
	// preempted under KV pressure keeps its computed blocks cached (V-R6 frees them
	// with their hashes, V-R8) and its recompute hits them, so it restarts from its
	// last computed full block, not from its prefix (kv.go kvEvict). Off, or in the
	// synthetic-workload calendars, a recompute starts from the prefix.
	PrefixCaching bool
	// HashBlock (trace replay) is the prompt tokens one TraceRequest.HashIDs id
	// covers (Mooncake: 512); required when a request names hash ids.
	HashBlock int
	// Progress, if set, is called by a trace replay (QuantitativeTrace,
	// QuantitativeSessions) after each finished request with the requests
	// finished and the trace's requests: for a progress report of a long replay.
	// It does not change the replay.
	Progress func(done, total int)

	spreadMs      float64 // initial spread of the closed-loop clients (internal)
	phase         int     // stagger phase whose ClientPhases place them (internal)
	transientOnly bool    // closed loop, finite run: stop once generation 0 has finished (internal)
	// summary: collect no ITL gaps and build no request records (internal: the
	// steady part of a desync QuantitativeFiniteSummary)
	summary bool
	// closed loop, tests: no scheduler-state rule (noStateCycle), or at least
	// statePeriods whole state periods in its window (statecycle.go)
	noStateCycle bool
	statePeriods int
}

// Product defaults of a closed loop (issue 9): clients desynchronise (a mixture
// over DefaultStaggerPhases initial phases) and a replacement request crosses a
// DefaultClientRTTMs client round trip before the scheduler sees it.
const (
	DefaultStaggerPhases = 4
	DefaultClientRTTMs   = 1.0
)

// DefaultOptions returns the product defaults of the quantitative tier.
func DefaultOptions() Options {
	return Options{StaggerPhases: DefaultStaggerPhases, ClientRTTMs: DefaultClientRTTMs}
}

// Quantitative evaluates w on engine e with pass timing t by the limit-cycle
// recursion of the backend's calendar (QUEUEING.md §4) with DefaultOptions.
func Quantitative(ctx context.Context, w workload.Spec, e engine.Spec, t timing.Timing) (*Report, error) {
	return QuantitativeWith(ctx, w, e, t, DefaultOptions())
}
