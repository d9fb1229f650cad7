package queueing

import (
	"context"
	"reflect"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestQuantitativeSessions (W4): a later turn arrives at its previous turn's
// completion + think time with the previous context as cached prefix; the cap on
// sessions delays a session's first turn to the end of one in progress; a trace
// without sessions replays as QuantitativeTrace does (only the fidelity differs).
func TestQuantitativeSessions(t *testing.T) {
	ctx := context.Background()
	e := engine.Spec{Backend: engine.VLLM, MaxNumBatchedTokens: 2048, MaxNumSeqs: 64, EnableChunkedPrefill: true, BlockSize: 16}
	tm := timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.01, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.00001}
	reqs := []TraceRequest{
		{ArrivalMs: 0, ISL: 1000, OSL: 50, Session: 1},
		{ArrivalMs: 10, ISL: 800, OSL: 20, Session: 2},
		{ArrivalMs: 20, ISL: 1500, OSL: 40, Session: 1, ThinkMs: 300}, // trace instant ignored
		{ArrivalMs: 30, ISL: 600, OSL: 10},                            // no session
	}
	rep, err := QuantitativeSessions(ctx, reqs, e, tm, Options{}, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Fidelity != workload.W4 || len(rep.Requests) != 4 {
		t.Fatalf("fidelity %s, %d records", rep.Fidelity, len(rep.Requests))
	}
	r0, r2 := rep.Requests[0], rep.Requests[2]
	if want := r0.ArrivalMs + r0.E2EMs + 300; r2.ArrivalMs != want || r2.Prefix != 1040 {
		t.Fatalf("turn 2: arrival %v prefix %d; want %v (turn 1's completion + 300 ms think), 1040 (turn 1's context: 1049 computed tokens, whole 16-token blocks)", r2.ArrivalMs, r2.Prefix, want)
	}
	rtt, err := QuantitativeSessions(ctx, reqs, e, tm, Options{ClientRTTMs: 2}, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := rtt.Requests[2], rtt.Requests[0]; a.ArrivalMs != b.ArrivalMs+b.E2EMs+300+2 {
		t.Fatalf("client RTT 2 ms: turn 2 at %v, want %v", a.ArrivalMs, b.ArrivalMs+b.E2EMs+302)
	}
	if rep.Requests[1].ArrivalMs != 10 || rep.Requests[3].ArrivalMs != 30 {
		t.Fatalf("first turns and session-less requests keep their instants: %v, %v", rep.Requests[1].ArrivalMs, rep.Requests[3].ArrivalMs)
	}
	// cap 1: session 2 (and the session-less request, a one-turn session) wait
	capped, err := QuantitativeSessions(ctx, reqs, e, tm, Options{}, SessionOptions{MaxSessions: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := capped.Requests
	if end := c[2].ArrivalMs + c[2].E2EMs; c[1].ArrivalMs != end || c[3].ArrivalMs != c[1].ArrivalMs+c[1].E2EMs {
		t.Fatalf("cap 1: session 2 at %v (want session 1's end %v), request 3 at %v", c[1].ArrivalMs, end, c[3].ArrivalMs)
	}
	// no sessions: the same replay as W3
	plain := []TraceRequest{{ArrivalMs: 0, ISL: 1000, OSL: 50}, {ArrivalMs: 5, ISL: 700, Prefix: 100, OSL: 30}, {ArrivalMs: 5, ISL: 300, OSL: 8}}
	a, err := QuantitativeTrace(ctx, plain, e, tm, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := QuantitativeSessions(ctx, plain, e, tm, Options{}, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Fidelity = a.Fidelity
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("no sessions: W4 replay differs from W3")
	}
	if _, err := QuantitativeSessions(ctx, plain, e, tm, Options{}, SessionOptions{MaxSessions: -1}); err == nil || err.Error() != "max sessions -1: must be ≥ 0 (0 = no cap)" {
		t.Fatalf("cap -1: %v", err)
	}
}
