package oracle

import (
	"context"
	"fmt"
	"math"
)

// DisaggTurn is one request of a disaggregated trace replay (W3/W4, issue 13).
type DisaggTurn struct {
	// ArrivalMs is the trace instant (a later turn of a session: ignored under
	// RunSessions).
	ArrivalMs float64
	ISL, OSL  int
	// Session numbers the conversation (0 = none); a session's turns are in trace
	// order.
	Session int
	// ThinkMs is the client's think time before a later turn.
	ThinkMs float64
}

// DisaggSessions is the W4 driver of the disaggregated DES: a session's first turn
// arrives at its instant, each later turn at its previous turn's finish + ThinkMs +
// ClientRTTMs (the closed loop's client semantics, RunClosedLoop). Its ISL holds the
// grown context, recomputed by the prefill pool: prefix caching is not simulated in
// disaggregated runs (DisaggConfig.Validate).
type DisaggSessions struct {
	Turns       []DisaggTurn
	ClientRTTMs float64
}

// RunTrace replays turns at their own instants with their own lengths (W3); sessions
// are ignored. DisaggResult.Requests are in turns order, Generation = the index.
func (d *DisaggSim) RunTrace(ctx context.Context, turns []DisaggTurn) (*DisaggResult, error) {
	return d.replay(ctx, DisaggSessions{Turns: turns}, false)
}

// RunSessions replays ss (W4). DisaggResult.Requests are in turns order, each with
// its actual arrival, Generation = the index.
func (d *DisaggSim) RunSessions(ctx context.Context, ss DisaggSessions) (*DisaggResult, error) {
	if !(ss.ClientRTTMs >= 0) || math.IsInf(ss.ClientRTTMs, 0) {
		return nil, fmt.Errorf("disagg sessions: client_rtt_ms = %v: must be a finite number ≥ 0", ss.ClientRTTMs)
	}
	return d.replay(ctx, ss, true)
}

// replay is RunTrace (sessions = false) and RunSessions.
func (d *DisaggSim) replay(ctx context.Context, ss DisaggSessions, sessions bool) (*DisaggResult, error) {
	turns := ss.Turns
	if len(turns) == 0 {
		return nil, fmt.Errorf("disagg trace: no requests")
	}
	if len(d.recs) > 0 || len(d.arr) > 0 {
		return nil, fmt.Errorf("disagg trace: the simulator already holds requests; replay on a new one")
	}
	d.total = len(turns)
	next := make([]int, len(turns)) // the session's next turn, -1 = none
	first := make([]bool, len(turns))
	nextOf := map[int]int{}
	for i := len(turns) - 1; i >= 0; i-- {
		t := &turns[i]
		if err := d.validShape(&Shape{ISL: t.ISL, OSL: t.OSL}); err != nil {
			return nil, fmt.Errorf("disagg trace request %d: %w", i, err)
		}
		if !(t.ArrivalMs >= 0) || math.IsInf(t.ArrivalMs, 0) || (i > 0 && t.ArrivalMs < turns[i-1].ArrivalMs) {
			return nil, fmt.Errorf("disagg trace request %d: arrival %v ms: must be finite, ≥ 0 and non-decreasing", i, t.ArrivalMs)
		}
		if t.Session < 0 || !(t.ThinkMs >= 0) || math.IsInf(t.ThinkMs, 0) {
			return nil, fmt.Errorf("disagg trace request %d: session %d, think_ms %v: want session ≥ 0 and a finite think time ≥ 0", i, t.Session, t.ThinkMs)
		}
		next[i], first[i] = -1, true
		if sid := t.Session; sessions && sid != 0 {
			if j, ok := nextOf[sid]; ok {
				next[i], first[j] = j, false
			}
			nextOf[sid] = i
		}
	}
	d.arr = make([]darr, 0, len(turns))
	d.recs = make([]DisaggRecord, 0, len(turns))
	for i, t := range turns {
		if first[i] {
			d.arr = append(d.arr, darr{t: t.ArrivalMs, client: -1, gen: i, isl: t.ISL, osl: t.OSL, seq: len(d.arr)})
		}
	}
	if sessions {
		d.onDone = func(ri int32, t float64) {
			if j := next[d.recs[ri].Generation]; j >= 0 {
				tj := &turns[j]
				d.schedule(darr{t: t + tj.ThinkMs + ss.ClientRTTMs, client: -1, gen: j, isl: tj.ISL, osl: tj.OSL})
			}
		}
	}
	if err := d.loop(ctx, func() bool { return d.fin == len(turns) }); err != nil {
		return nil, err
	}
	res := d.result()
	byTurn := make([]DisaggRecord, len(turns))
	for _, r := range res.Requests {
		byTurn[r.Generation] = r
	}
	res.Requests = byTurn
	return res, nil
}
