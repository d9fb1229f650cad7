package oracle

import (
	"context"
	"fmt"
	"math"

	"github.com/aicdb/aicdb/queueing/workload"
)

// SessionTurn is one request of a session replay (W4, issue 13).
type SessionTurn struct {
	// Request is the turn's prompt length (no token ids), max_tokens and, for a first
	// turn or a request without a session, its arrival instant; a later turn's
	// ArrivalMs is ignored.
	Request workload.Request
	// Prefix optionally names a shared head of the prompt (hash ids or a prefix
	// group, as AddShared); the zero value is none.
	Prefix SharedPrefix
	// Session numbers the conversation the turn belongs to (0 = none); a session's
	// turns are in trace order.
	Session int
	// ThinkMs is the client's think time before this turn (a later turn only).
	ThinkMs float64
}

// Sessions is the W4 driver: a session's first turn arrives at its instant (or, under
// MaxSessions, when a session in progress ends); each later turn arrives at its
// previous turn's completion + ThinkMs + ClientRTTMs, its prompt holding the previous
// turns' prompts and outputs (context growth). That context is served by the engine's
// own prefix cache — vLLM block LRU, SGLang radix pages, TRT-LLM block reuse — so it
// is a hit only while its blocks survive KV pressure. The identities are those of
// queueing.QuantitativeSessions, whose calendar keeps every context cached.
type Sessions struct {
	Turns []SessionTurn
	// ClientRTTMs is the client round trip before a later turn (or a capped session's
	// first turn) reaches the scheduler, as ClosedLoop.ClientRTTMs.
	ClientRTTMs float64
	// MaxSessions caps the sessions in progress (0 = no cap); a request without a
	// session counts as a one-turn session.
	MaxSessions int
}

// RunSessions simulates a session replay. Result.Requests are in Turns order, each
// with its actual arrival.
func (s *Sim) RunSessions(ctx context.Context, ss Sessions) (*Result, error) {
	switch {
	case ss.MaxSessions < 0:
		return nil, fmt.Errorf("sessions: max sessions %d: must be ≥ 0 (0 = no cap)", ss.MaxSessions)
	case !(ss.ClientRTTMs >= 0) || math.IsInf(ss.ClientRTTMs, 0):
		return nil, fmt.Errorf("sessions: client_rtt_ms = %v: must be a finite number ≥ 0", ss.ClientRTTMs)
	case len(s.reqs) > 0:
		return nil, fmt.Errorf("sessions: the simulator already holds %d requests; run sessions on a new one", len(s.reqs))
	}
	s.Reserve(len(ss.Turns))
	s.deferArrivals = true
	for k, t := range ss.Turns {
		if t.Session < 0 || !(t.ThinkMs >= 0) || math.IsInf(t.ThinkMs, 0) {
			return nil, fmt.Errorf("sessions: turn %d: session %d, think_ms %v: want session ≥ 0 and a finite think time ≥ 0", k, t.Session, t.ThinkMs)
		}
		var err error
		if t.Prefix.HashIDs != nil || t.Prefix.Len > 0 {
			_, err = s.AddShared(t.Request, t.Prefix)
		} else {
			_, err = s.Add(t.Request)
		}
		if err != nil {
			return nil, fmt.Errorf("sessions: %w", err)
		}
		if t.Session != 0 {
			s.reqs[k].sess = uint64(t.Session)
		}
	}
	s.deferArrivals = false

	next := make([]int32, len(ss.Turns)) // the session's next turn, -1 = last
	firstOf := map[int]int32{}
	for i := len(ss.Turns) - 1; i >= 0; i-- {
		next[i] = -1
		if sid := ss.Turns[i].Session; sid != 0 {
			if j, ok := firstOf[sid]; ok {
				next[i] = j
			}
			firstOf[sid] = int32(i)
		}
	}
	var firsts []int32 // first turns and session-less requests, in trace order
	for i, t := range ss.Turns {
		if t.Session == 0 || firstOf[t.Session] == int32(i) {
			firsts = append(firsts, int32(i))
		}
	}
	active, k := 0, 0
	start := func(ri int32, at float64) {
		r := &s.reqs[ri]
		r.arrival = max(r.arrival, at)
		s.pushArrival(r.arrival, ri)
		active++
	}
	for ; k < len(firsts) && (ss.MaxSessions == 0 || active < ss.MaxSessions); k++ {
		start(firsts[k], 0)
	}
	s.onFinish = func(s *Sim, ri int32, t float64) {
		if j := next[ri]; j >= 0 {
			s.inheritContext(ri, j)
			s.reqs[j].arrival = t + ss.Turns[j].ThinkMs + ss.ClientRTTMs
			s.pushArrival(s.reqs[j].arrival, j)
			return
		}
		active--
		if k < len(firsts) {
			start(firsts[k], t+ss.ClientRTTMs)
			k++
		}
	}
	return s.Run(ctx)
}

// inheritContext gives turn j the block hashes of its finished previous turn p for
// the leading blocks of j's prompt that hold p's prompt and outputs (context growth):
// the same content is the same block, whatever j's own hash ids say, so j hits p's
// blocks still cached — full blocks up to p's last computed token.
func (s *Sim) inheritContext(p, j int32) {
	if !s.eng.EnablePrefixCaching {
		return
	}
	prev, r := &s.reqs[p], &s.reqs[j]
	nb := min(prev.numTokens(), r.p) / s.bs
	if nb == 0 {
		return
	}
	prev.ensureHashes(nb, s.bs)
	h := r.hashes[:0]
	if s.opt.SummaryOnly {
		h = s.bufs.takeHashes()
	}
	if h == nil {
		h = make([]uint64, 0, max(nb, (r.p+r.maxTokens)/s.bs))
	}
	r.hashes = append(h, prev.hashes[:nb]...)
}
