package disagg

import (
	"context"
	"fmt"
	"math"

	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TraceRecord is one request of a tandem trace replay: the aggregated record
// (client-side arrival, TTFT and E2E from the client's send) plus its handoff.
type TraceRecord struct {
	queueing.RequestRecord
	PrefillWorker int
	DecodeWorker  int     // -1 when osl = 1 (no handoff)
	PQueueMs      float64 // visibility → the start of its first prefill pass
	KVTransferMs  float64 // KV flow start → last byte (0 without a handoff)
}

// TraceReport is a tandem trace replay: the report over every request (no warm-up
// is dropped: a trace's start is part of it) and the per-request records in trace
// order.
type TraceReport struct {
	Report
	Records []TraceRecord
}

// SessionOptions are the W4 knobs of QuantitativeSessions.
type SessionOptions struct {
	// ClientRTTMs is the client round trip before a later turn reaches the prefill
	// pool (as the closed loop's), finite in [0, 1e6].
	ClientRTTMs float64
}

// QuantitativeTrace replays reqs (arrival order) through the tandem (W3): the event
// loop of Quantitative with the trace's own arrival instants and per-request isl and
// osl instead of a workload Spec. Throughput is requests / (last finish − first
// arrival), as queueing.QuantitativeTrace. A cached prefix is rejected: prefix caching
// is not modelled on either side of a disaggregated deployment (as Config.Validate
// and the disaggregated DES).
func QuantitativeTrace(ctx context.Context, reqs []queueing.TraceRequest, c Config, o Options) (*TraceReport, error) {
	return replayTrace(ctx, reqs, c, o, nil)
}

// QuantitativeSessions replays a trace of sessions (W4) through the tandem: a
// session's first turn arrives at its trace instant, each later turn at its previous
// turn's completion + its ThinkMs + SessionOptions.ClientRTTMs (the turn's ISL holds
// the grown context). The prefill pool recomputes that context: prefix caching is
// not modelled in disaggregated runs (the DES rejects it too), so a later turn has no
// cached prefix. Requests without a session arrive at their trace instants. The
// report's fidelity is W4.
func QuantitativeSessions(ctx context.Context, reqs []queueing.TraceRequest, c Config, o Options, so SessionOptions) (*TraceReport, error) {
	if !(so.ClientRTTMs >= 0 && so.ClientRTTMs <= 1e6) {
		return nil, &queueing.InputError{Err: fmt.Errorf("sessions client_rtt_ms = %v: must be a finite number in [0, 1e6] ms", so.ClientRTTMs)}
	}
	return replayTrace(ctx, reqs, c, o, &so)
}

// checkTrace validates a tandem trace and returns the longest request as the
// workload Config.Validate checks the decode KV against.
func checkTrace(reqs []queueing.TraceRequest) (workload.Spec, error) {
	if len(reqs) == 0 {
		return workload.Spec{}, fmt.Errorf("trace: no requests")
	}
	if len(reqs) > maxRequests {
		return workload.Spec{}, fmt.Errorf("trace: %d requests: at most %d for the tandem; replay a slice (--limit)", len(reqs), maxRequests)
	}
	w := workload.Spec{}
	prev := 0.0
	for i, r := range reqs {
		switch {
		case math.IsNaN(r.ArrivalMs) || math.IsInf(r.ArrivalMs, 0) || r.ArrivalMs < prev:
			return w, fmt.Errorf("trace request %d: arrival %v ms: arrivals must be finite, ≥ 0 and non-decreasing", i, r.ArrivalMs)
		case r.ISL <= 0 || r.OSL <= 0:
			return w, fmt.Errorf("trace request %d: isl = %d, osl = %d: both must be ≥ 1", i, r.ISL, r.OSL)
		case r.Prefix != 0:
			return w, fmt.Errorf("trace request %d: prefix = %d: prefix caching is not modelled in disaggregated runs; replay with prefix 0", i, r.Prefix)
		case r.Session < 0 || !(r.ThinkMs >= 0) || math.IsInf(r.ThinkMs, 0):
			return w, fmt.Errorf("trace request %d: session %d, think_ms %v: want session ≥ 0 and a finite think time ≥ 0", i, r.Session, r.ThinkMs)
		}
		if r.ISL+r.OSL > w.ISL+w.OSL {
			w.ISL, w.OSL = r.ISL, r.OSL
		}
		prev = r.ArrivalMs
	}
	return w, nil
}

// replayTrace is QuantitativeTrace (so == nil) and QuantitativeSessions. Request k
// of the trace is tandem request gen = k; its isl and osl are set after submit (the
// workload Spec only bounds them).
func replayTrace(ctx context.Context, reqs []queueing.TraceRequest, c Config, o Options, so *SessionOptions) (*TraceReport, error) {
	w, err := checkTrace(reqs)
	if err == nil {
		err = c.Validate(w)
	}
	if err != nil {
		return nil, &queueing.InputError{Err: err}
	}
	t, err := newTandem(&c, &w)
	if err != nil {
		return nil, &queueing.InputError{Err: err}
	}
	t.reqs = make([]treq, 0, len(reqs))
	byTrace := make([]int, len(reqs)) // trace index → tandem request
	add := func(k int, arrival float64) {
		byTrace[k] = len(t.reqs)
		t.submit(-1, k, arrival, true)
		r := &t.reqs[len(t.reqs)-1]
		r.isl, r.osl = reqs[k].ISL, reqs[k].OSL
	}
	next, firstTurn := sessionNext(reqs)
	for k, r := range reqs {
		if so == nil || firstTurn[k] {
			add(k, r.ArrivalMs+t.stage)
		}
	}
	if so != nil {
		t.onDone = func(t *tandem, ri int, now float64) {
			if j := next[t.reqs[ri].gen]; j >= 0 {
				add(j, now+reqs[j].ThinkMs+so.ClientRTTMs+t.stage)
			}
		}
	}
	if o.Progress != nil {
		done := t.onDone
		t.onDone = func(t *tandem, ri int, now float64) {
			if done != nil {
				done(t, ri, now)
			}
			o.Progress(t.finished, len(reqs))
		}
	}
	if err := t.loop(ctx, func() bool { return t.finished == len(reqs) }); err != nil {
		return nil, err
	}
	rep, err := t.report()
	if err != nil {
		return nil, err
	}
	rep.Fidelity = workload.W3
	if so != nil {
		rep.Fidelity = workload.W4
	}
	out := &TraceReport{Report: *rep, Records: make([]TraceRecord, len(reqs))}
	first, last, toks := math.Inf(1), 0.0, 0.0
	for k, ri := range byTrace {
		r := &t.reqs[ri]
		send := r.arrival - t.stage
		rec := TraceRecord{RequestRecord: queueing.RequestRecord{Slot: -1, Generation: k, ArrivalMs: send, ISL: r.isl, OSL: r.osl,
			TTFTMs: r.visible - send, E2EMs: r.done - send}, PrefillWorker: r.pw, DecodeWorker: r.dw, KVTransferMs: r.xEnd - r.xStart}
		if r.pStart >= 0 {
			rec.PQueueMs = r.pStart - r.arrival
		}
		out.Records[k] = rec
		first, last = math.Min(first, send), math.Max(last, r.done-t.stage)
		toks += float64(r.osl)
	}
	if span := last - first; span > 0 {
		out.ThroughputRPS = float64(len(reqs)) / span * 1000
		out.OutputTokensPerS = toks / span * 1000
	}
	out.Diagnostics.WindowStartMs, out.Diagnostics.WindowEndMs = first, last
	return out, finiteReport(&out.Report)
}

// sessionNext returns each request's next turn in its session (-1 = none) and
// whether it opens its session (no earlier turn leads to it).
func sessionNext(reqs []queueing.TraceRequest) (next []int, first []bool) {
	next, first = make([]int, len(reqs)), make([]bool, len(reqs))
	nextOf := map[int]int{} // session → its earliest turn after i (filled backwards)
	for i := len(reqs) - 1; i >= 0; i-- {
		next[i], first[i] = -1, true
		if sid := reqs[i].Session; sid != 0 {
			if j, ok := nextOf[sid]; ok {
				next[i], first[j] = j, false
			}
			nextOf[sid] = i
		}
	}
	return next, first
}
