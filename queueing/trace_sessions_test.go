package queueing

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestQuantitativeSessions (W4): a later turn arrives at its previous turn's
// completion + think time with the previous context as cached prefix; the cap on
// sessions delays a session's first turn to the end of one in progress; a trace
// without sessions replays as QuantitativeTrace does (only the fidelity differs).
func TestQuantitativeSessions(t *testing.T) {
	ctx := context.Background()
	e := EngineSpec{Backend: BackendVLLM, MaxNumBatchedTokens: 2048, MaxNumSeqs: 64, EnableChunkedPrefill: true, BlockSize: 16}
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
	// an engine without prefix caching: turn 2 prefills its whole context
	nc, err := QuantitativeSessions(ctx, reqs, e, tm, Options{}, SessionOptions{NoPrefixCache: true})
	if err != nil {
		t.Fatal(err)
	}
	if p := nc.Requests[2].Prefix; p != 0 || nc.Requests[2].TTFTMs <= r2.TTFTMs {
		t.Fatalf("no prefix cache: turn 2 prefix %d (want 0), TTFT %v (want above %v)", p, nc.Requests[2].TTFTMs, r2.TTFTMs)
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

// TestQuantitativeSessionsKVPressure: with a KV capacity, the calendar counts the
// cached context of a session between turns (turn 1's 1,049 computed tokens: 65
// whole blocks) beside the running requests' blocks; session 2's first turn (800 +
// 20 − 1 tokens: 52 blocks) runs while session 1 thinks, so the demand peaks at 117
// blocks. A 100-block pool cannot keep the context: the replay is refused
// (ErrSessionContextsEvicted, an input error); a 200-block pool keeps it and the
// replay is the one without a KV capacity.
func TestQuantitativeSessionsKVPressure(t *testing.T) {
	ctx := context.Background()
	e := EngineSpec{Backend: BackendVLLM, MaxNumBatchedTokens: 2048, MaxNumSeqs: 64, EnableChunkedPrefill: true, BlockSize: 16}
	tm := timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.01, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.00001}
	reqs := []TraceRequest{
		{ArrivalMs: 0, ISL: 1000, OSL: 50, Session: 1},
		{ArrivalMs: 400, ISL: 800, OSL: 20, Session: 2},
		{ArrivalMs: 500, ISL: 1100, OSL: 10, Session: 1, ThinkMs: 1000},
	}
	free, err := QuantitativeSessions(ctx, reqs, e, tm, Options{}, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if end := free.Requests[0].ArrivalMs + free.Requests[0].E2EMs; end >= 400 || free.Requests[2].Prefix != 1040 {
		t.Fatalf("turn 1 ends at %v ms (want before session 2's 400 ms), turn 2's prefix %d (want 1040)", end, free.Requests[2].Prefix)
	}
	e.KVCapacityTokens = 100 * 16
	_, err = QuantitativeSessions(ctx, reqs, e, tm, Options{}, SessionOptions{})
	var ke *SessionKVError
	if !errors.Is(err, ErrSessionContextsEvicted) || !errors.As(err, &ke) || !IsInputError(err) {
		t.Fatalf("100-block pool: %v; want a *SessionKVError input error", err)
	}
	if ke.PeakBlocks != 117 || ke.PoolBlocks != 100 || ke.BlockSize != 16 || ke.AtMs < 400 || ke.AtMs > free.Requests[1].ArrivalMs+free.Requests[1].E2EMs {
		t.Fatalf("100-block pool: %+v; want a peak of 117 blocks (65 cached + 52 running) against 100, during session 2", *ke)
	}
	if want := "W4 session contexts do not stay cached in the KV pool: the running requests plus the cached contexts of the sessions between turns need 117 KV blocks (1872 tokens) at "; !strings.HasPrefix(err.Error(), want) ||
		!strings.HasSuffix(err.Error(), " ms but the pool holds 100 (1600 tokens); the engine evicts contexts and later turns prefill again, which the quantitative calendar does not model") {
		t.Fatalf("100-block pool: message %q", err)
	}
	e.KVCapacityTokens = 200 * 16
	roomy, err := QuantitativeSessions(ctx, reqs, e, tm, Options{}, SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	roomy.KVUtilPeak = free.KVUtilPeak
	if !reflect.DeepEqual(free, roomy) {
		t.Fatalf("200-block pool: the replay differs from the one without a KV capacity")
	}
}
