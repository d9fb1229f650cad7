package oracle_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

var sessTiming = timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.01, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.00001}

func sessEngine(b engine.Backend, blocks int) engine.Spec {
	e := engine.Spec{Backend: b, BlockSize: 16, KVCapacityTokens: (blocks - 1) * 16, EnablePrefixCaching: true, EnableChunkedPrefill: true}
	switch b {
	case engine.VLLM:
		e.MaxNumBatchedTokens, e.MaxNumSeqs = 8192, 64
	case engine.SGLang:
		e.ChunkedPrefillSize, e.MaxPrefillTokens, e.MaxNumSeqs = 8192, 16384, 64
	case engine.TRTLLM:
		e.MaxBatchSize, e.MaxNumTokens, e.CapacityPolicy = 64, 8192, engine.PolicyGuaranteedNoEvict
	}
	return e
}

func runSessions(t *testing.T, e engine.Spec, ss oracle.Sessions) *oracle.Result {
	t.Helper()
	s, err := oracle.New(e, sessTiming, oracle.Options{SummaryOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.RunSessions(context.Background(), ss)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func turn(at float64, isl, osl, session int, think float64) oracle.SessionTurn {
	return oracle.SessionTurn{Request: workload.Request{ArrivalMs: at, PromptLen: isl, MaxTokens: osl}, Session: session, ThinkMs: think}
}

// TestRunSessions (W4 in the DES): a later turn arrives at its previous turn's
// completion + think time + client RTT and hits the previous context in the engine's
// own prefix cache — every full block of prompt + outputs but the last sampled token
// (whose KV is never computed), in every backend; first turns and session-less
// requests keep their instants.
func TestRunSessions(t *testing.T) {
	ss := oracle.Sessions{ClientRTTMs: 1, Turns: []oracle.SessionTurn{
		turn(0, 1000, 50, 1, 0),
		turn(10, 800, 20, 2, 0),
		turn(20, 1500, 40, 1, 300), // trace instant ignored
		turn(30, 600, 10, 0, 0),    // no session
	}}
	for _, b := range []engine.Backend{engine.VLLM, engine.SGLang, engine.TRTLLM} {
		res := runSessions(t, sessEngine(b, 2000), ss)
		r0, r2 := res.Requests[0], res.Requests[2]
		if want := r0.FinishMs + 300 + 1; r2.ArrivalMs != want {
			t.Errorf("%s: turn 2 arrives at %v, want turn 1's finish + 300 ms think + 1 ms RTT = %v", b, r2.ArrivalMs, want)
		}
		if want := (1000 + 50 - 1) / 16 * 16; r2.NumCachedTokens != want {
			t.Errorf("%s: turn 2 cached %d tokens, want %d (turn 1's full blocks)", b, r2.NumCachedTokens, want)
		}
		if res.Requests[1].ArrivalMs != 10 || res.Requests[3].ArrivalMs != 30 || res.Requests[3].NumCachedTokens != 0 {
			t.Errorf("%s: first turns and session-less requests keep their instants: %+v %+v", b, res.Requests[1], res.Requests[3])
		}
	}
	// hash ids name the head of both turns; the previous context (prompt + outputs)
	// is still the previous turn's content, whatever the later turn's ids say there.
	ids := []oracle.SessionTurn{turn(0, 1200, 80, 1, 0), turn(0, 1700, 60, 1, 1200)}
	ids[0].Prefix = oracle.SharedPrefix{HashIDs: []int64{1, 2, 3}, HashBlock: 512}
	ids[1].Prefix = oracle.SharedPrefix{HashIDs: []int64{1, 2, 3, 4}, HashBlock: 512}
	if got := runSessions(t, sessEngine(engine.VLLM, 2000), oracle.Sessions{Turns: ids}).Requests[1].NumCachedTokens; got != 1264 {
		t.Errorf("hash ids: turn 2 cached %d tokens, want 1264 (1279 computed tokens in whole blocks)", got)
	}
	// cap 1: session 2 waits for session 1's end (+ RTT), the session-less request
	// (a one-turn session) for session 2's.
	c := runSessions(t, sessEngine(engine.VLLM, 2000), oracle.Sessions{Turns: ss.Turns, ClientRTTMs: 1, MaxSessions: 1}).Requests
	if c[1].ArrivalMs != c[2].FinishMs+1 || c[3].ArrivalMs != c[1].FinishMs+1 {
		t.Errorf("cap 1: session 2 at %v (want %v), request 3 at %v (want %v)", c[1].ArrivalMs, c[2].FinishMs+1, c[3].ArrivalMs, c[1].FinishMs+1)
	}
}

// TestRunSessionsEviction: the previous context is a hit only while its blocks
// survive. A 3,000-token request during the think time takes the 133 never-used
// blocks and then the LRU head of the free queue — turn 1's blocks, freed in reverse
// order, so its tail goes first — leaving turn 1's leading 199 − 188 = 11 blocks.
func TestRunSessionsEviction(t *testing.T) {
	ss := oracle.Sessions{Turns: []oracle.SessionTurn{
		turn(0, 1000, 50, 1, 5000),
		turn(2000, 3000, 1, 0, 0),
		turn(0, 1500, 40, 1, 5000),
	}}
	res := runSessions(t, sessEngine(engine.VLLM, 200), ss)
	if got := res.Requests[2].NumCachedTokens; got != 11*16 {
		t.Fatalf("turn 2 cached %d tokens after the eviction, want %d", got, 11*16)
	}
	if got := runSessions(t, sessEngine(engine.VLLM, 2000), ss).Requests[2].NumCachedTokens; got != 1040 {
		t.Fatalf("ample pool: turn 2 cached %d tokens, want 1040", got)
	}
}

// TestRunSessionsWithoutSessions: a trace without sessions replays exactly as
// RunTrace; bad inputs are refused with the field named.
func TestRunSessionsWithoutSessions(t *testing.T) {
	var turns []oracle.SessionTurn
	var reqs []workload.Request
	for i := range 40 {
		r := workload.Request{ArrivalMs: float64(i * 7), PromptLen: 200 + 37*i%500, MaxTokens: 5 + i%30}
		turns = append(turns, oracle.SessionTurn{Request: r})
		reqs = append(reqs, r)
	}
	e := sessEngine(engine.VLLM, 400)
	a := runSessions(t, e, oracle.Sessions{Turns: turns})
	s, err := oracle.New(e, sessTiming, oracle.Options{SummaryOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.RunTrace(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	sa, _ := a.Summary()
	sb, _ := b.Summary()
	if !reflect.DeepEqual(a.Requests, b.Requests) || sa != sb {
		t.Fatalf("no sessions: the W4 driver differs from RunTrace")
	}
	for _, c := range []struct {
		ss   oracle.Sessions
		want string
	}{
		{oracle.Sessions{MaxSessions: -1}, "sessions: max sessions -1: must be ≥ 0 (0 = no cap)"},
		{oracle.Sessions{ClientRTTMs: -2}, "sessions: client_rtt_ms = -2: must be a finite number ≥ 0"},
		{oracle.Sessions{Turns: []oracle.SessionTurn{turn(0, 10, 1, 1, -1)}}, "sessions: turn 0: session 1, think_ms -1: want session ≥ 0 and a finite think time ≥ 0"},
		{oracle.Sessions{Turns: []oracle.SessionTurn{turn(0, 0, 1, 1, 0)}}, "sessions: request #0: prompt length 0: must be > 0"},
	} {
		s, err := oracle.New(e, sessTiming, oracle.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.RunSessions(context.Background(), c.ss); err == nil || err.Error() != c.want {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

// TestRunSessionsProperty (rapid): for random session traces on every backend, a later
// turn arrives exactly at its previous turn's finish + think + RTT, SummaryOnly and
// full runs agree, and with an ample pool a later turn hits exactly its previous
// turn's computed context in whole blocks (prompt + outputs − 1, at most isl − 1);
// under any pool no turn hits more than that bound.
func TestRunSessionsProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		b := rapid.SampledFrom([]engine.Backend{engine.VLLM, engine.SGLang, engine.TRTLLM}).Draw(rt, "backend")
		ample := rapid.Bool().Draw(rt, "ample")
		blocks := 2000
		if !ample {
			blocks = rapid.IntRange(120, 400).Draw(rt, "blocks")
		}
		n := rapid.IntRange(1, 12).Draw(rt, "turns")
		rtt := float64(rapid.IntRange(0, 3).Draw(rt, "rtt"))
		var turns []oracle.SessionTurn
		at := 0.0
		for i := range n {
			at += float64(rapid.IntRange(0, 50).Draw(rt, fmt.Sprint("gap", i)))
			turns = append(turns, turn(at, rapid.IntRange(20, 900).Draw(rt, fmt.Sprint("isl", i)), rapid.IntRange(1, 60).Draw(rt, fmt.Sprint("osl", i)),
				rapid.IntRange(0, 3).Draw(rt, fmt.Sprint("sess", i)), float64(rapid.IntRange(0, 100).Draw(rt, fmt.Sprint("think", i)))))
		}
		e := sessEngine(b, blocks)
		run := func(o oracle.Options) *oracle.Result {
			s, err := oracle.New(e, sessTiming, o)
			if err != nil {
				rt.Fatal(err)
			}
			res, err := s.RunSessions(context.Background(), oracle.Sessions{Turns: turns, ClientRTTMs: rtt})
			if err != nil {
				rt.Fatal(err)
			}
			return res
		}
		res, full := run(oracle.Options{SummaryOnly: true}), run(oracle.Options{})
		for i := range res.Requests {
			a, f := res.Requests[i], full.Requests[i]
			if a.ArrivalMs != f.ArrivalMs || a.FinishMs != f.FinishMs || a.NumCachedTokens != f.NumCachedTokens {
				rt.Fatalf("turn %d: SummaryOnly %+v vs full %+v", i, a, f)
			}
		}
		prev := map[int]int{}
		for i, tr := range turns {
			r := res.Requests[i]
			p, ok := prev[tr.Session]
			if tr.Session != 0 {
				prev[tr.Session] = i
			}
			if tr.Session == 0 || !ok {
				continue
			}
			q := res.Requests[p]
			if want := q.FinishMs + tr.ThinkMs + rtt; r.ArrivalMs != want {
				rt.Fatalf("turn %d arrives at %v, want %v", i, r.ArrivalMs, want)
			}
			bound := min(q.PromptLen+q.MaxTokens-1, r.PromptLen-1) / 16 * 16
			if r.NumCachedTokens > bound || (ample && r.NumCachedTokens != bound) {
				rt.Fatalf("turn %d (%s, %d blocks): cached %d, context bound %d", i, b, blocks, r.NumCachedTokens, bound)
			}
		}
	})
}
