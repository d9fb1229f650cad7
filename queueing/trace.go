package queueing

import (
	"context"
	"fmt"
	"math"

	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TraceRequest is one request of an exact trace replay (W3, issue 13): its arrival
// (ms from the trace origin), prompt length, prompt tokens served from the prefix
// cache (e.g. the reuse oracle's hit; < ISL) and output tokens.
type TraceRequest struct {
	ArrivalMs float64
	ISL       int
	Prefix    int
	OSL       int
}

// QuantitativeTrace replays reqs (arrival order) through the engine's calendar: the
// same recursion as Quantitative, with the trace's own arrival instants and per-request
// shapes instead of a workload Spec. Every request is measured (no warm-up is
// dropped: a trace's start is part of it). Throughput is requests / (last finish −
// first arrival), the same definition as the oracle's summary, because a trace need
// not be stationary. The report's fidelity is W3; Report.Requests holds every request
// in trace order.
func QuantitativeTrace(ctx context.Context, reqs []TraceRequest, e EngineSpec, t timing.Timing, o Options) (*Report, error) {
	if err := checkTrace(reqs, e, t); err != nil {
		return nil, inputErr(err)
	}
	s := &sim{e: e, t: t, budget: e.budget(), seqCap: e.seqCap(), chunked: -1, record: o.RecordTokenTimes, barrier: math.Inf(1)}
	if e.Backend == BackendSGLang && !e.EnableChunkedPrefill {
		s.budget = e.MaxPrefillTokens
	}
	if e.KVCapacityTokens > 0 {
		s.kvFree = e.KVCapacityTokens / e.BlockSize
	}
	col := &collector{stage: e.StageMs}
	s.onPass = col.onPass
	if !o.RecordTokenTimes && !o.NoFastForward {
		s.fast = col.onFast
	}
	// guard: each request's own passes (prefill chunks of the budget, then decode),
	// as cyclePasses estimates them; bound: a pass advances some request by ≥ 1 token.
	estimate, bound := 0.0, 64.0
	b := float64(max(s.budget, 1))
	for _, r := range reqs {
		estimate += math.Ceil(float64(r.ISL-r.Prefix)/b) + float64(r.OSL)
		bound += float64(r.ISL - r.Prefix + r.OSL + 2)
	}
	if err := s.workGuard(len(reqs), estimate, 0); err != nil {
		return nil, err
	}
	s.maxPasses = int(min(bound, math.MaxInt32))
	s.reqs = make([]simReq, 0, len(reqs))
	for i, r := range reqs {
		s.reqs = append(s.reqs, simReq{slot: -1, gen: i, arrival: r.ArrivalMs + e.StageMs, isl: r.ISL, prefix: r.Prefix, osl: r.OSL, steady: true})
		s.incoming = append(s.incoming, int32(i))
	}
	done := 0
	s.onFinish = func(*sim, int32, float64) { done++ }
	if err := s.run(ctx, func() bool { return done == len(reqs) }); err != nil {
		return nil, err
	}
	rep, err := s.report(col, workload.Spec{}, -1, -1)
	if err != nil {
		return nil, err
	}
	rep.ITL = col.itlOf(0, 1) // every request is measured: ITL bucket 0 (simReq.bucket)
	rep.Fidelity = workload.W3
	last, toks := 0.0, 0.0
	for i := range s.reqs {
		last = math.Max(last, s.reqs[i].done)
		toks += float64(s.reqs[i].osl)
	}
	if span := last - s.reqs[0].arrival; span > 0 {
		rep.ThroughputRPS = float64(len(reqs)) / span * 1000
		rep.OutputTokensPerS = toks / span * 1000
	}
	rep.Diagnostics.WindowStartMs, rep.Diagnostics.WindowEndMs = s.reqs[0].arrival-e.StageMs, last-e.StageMs
	return rep, finite(rep)
}

// checkTrace validates a trace replay's inputs.
func checkTrace(reqs []TraceRequest, e EngineSpec, t timing.Timing) error {
	if t == nil {
		return fmt.Errorf("timing: none given; pass a timing model")
	}
	if v, ok := t.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return err
		}
	}
	if err := e.Validate(); err != nil {
		return err
	}
	if len(reqs) == 0 {
		return fmt.Errorf("trace: no requests")
	}
	prev := 0.0
	for i, r := range reqs {
		switch {
		case math.IsNaN(r.ArrivalMs) || math.IsInf(r.ArrivalMs, 0) || r.ArrivalMs < prev:
			return fmt.Errorf("trace request %d: arrival %v ms: arrivals must be finite, ≥ 0 and non-decreasing", i, r.ArrivalMs)
		case r.ISL <= 0 || r.ISL > maxTokens:
			return fmt.Errorf("trace request %d: isl = %d: must be in 1..%d tokens", i, r.ISL, maxTokens)
		case r.OSL <= 0 || r.OSL > maxTokens:
			return fmt.Errorf("trace request %d: osl = %d: must be in 1..%d tokens", i, r.OSL, maxTokens)
		case r.Prefix < 0 || r.Prefix >= r.ISL:
			return fmt.Errorf("trace request %d: prefix = %d: must be in 0..isl − 1 = %d", i, r.Prefix, r.ISL-1)
		}
		prev = r.ArrivalMs
	}
	return nil
}
