package refine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/trace"
)

// TraceSpec is a sweep's trace workload (`aicdb sweep --trace NAME`): the stored
// trace, its slice (--window/--scale-rate/--limit, applied in SQL as in `trace
// replay`) and, for W4, sessions (--sessions [--max-sessions N]).
type TraceSpec struct {
	Name        string           `json:"name"`
	Slice       store.TraceSlice `json:"slice"`
	Sessions    bool             `json:"sessions,omitempty"`
	MaxSessions int              `json:"max_sessions,omitempty"`
	// Filled in by Sweep from the stored trace: its content hash and the slice's
	// longest request.
	SHA256         string `json:"sha256,omitempty"`
	MaxISL, MaxOSL int    `json:"-"`
	// MeanISL and MeanOSL are the slice's mean lengths (the rows' isl and osl).
	MeanISL, MeanOSL int `json:"-"`
}

// TraceWorkloadID is the identity of a trace workload as rows store it
// (PointInputs.Workload, operating_points.workload): the trace's name and content
// hash (a re-import of other content under the same name is another workload), the
// slice, W4's session knobs, and the number of replicas the deployment spreads the
// trace over (each replica sees a different share of it). Its JSON encoding (field
// order fixed) is canonical.
type TraceWorkloadID struct {
	Trace       string  `json:"trace"`
	SHA256      string  `json:"sha256"`
	StartMs     float64 `json:"start_ms"`
	EndMs       float64 `json:"end_ms"`
	Scale       float64 `json:"scale"`
	Limit       int     `json:"limit"`
	Sessions    bool    `json:"sessions"`
	MaxSessions int     `json:"max_sessions"`
	Replicas    int     `json:"replicas"`
}

// String returns the canonical JSON encoding.
func (id TraceWorkloadID) String() string {
	b, _ := json.Marshal(id) // plain fields: cannot fail
	return string(b)
}

// Slice returns the trace slice the identity names.
func (id TraceWorkloadID) Slice() store.TraceSlice {
	return store.TraceSlice{StartMs: id.StartMs, EndMs: id.EndMs, Scale: id.Scale, Limit: id.Limit}
}

// Fidelity is W4 for sessions, else W3.
func (id TraceWorkloadID) Fidelity() string {
	if id.Sessions {
		return "W4"
	}
	return "W3"
}

// ParseTraceWorkload reads a PointInputs.Workload back.
func ParseTraceWorkload(s string) (TraceWorkloadID, error) {
	var id TraceWorkloadID
	if err := json.Unmarshal([]byte(s), &id); err != nil || id.Trace == "" || id.Replicas < 1 {
		return id, fmt.Errorf("workload %.60q: not a trace workload identity", s)
	}
	return id, nil
}

// TraceWorkload is a stored trace slice loaded for replay: every request in arrival
// order, its hash ids (prefix-cache block identities, flat), and W4 session numbers.
type TraceWorkload struct {
	Info  store.TraceInfo
	Slice store.TraceSlice
	// Reqs have Prefix 0: per-request hits come from the reuse oracle at replay.
	Reqs []queueing.TraceRequest
	Seqs []int64 // trace_requests.seq of each request
	ids  []int64
	end  []int // ids of request i are ids[end[i-1]:end[i]]

	// MeanISL and MeanOSL are the slice's mean lengths rounded to whole tokens (≥ 1),
	// MaxISL and MaxOSL its longest.
	MeanISL, MeanOSL, MaxISL, MaxOSL int
}

// ErrEmptySlice is returned (wrapped) by LoadTraceWorkload for a slice with no
// request.
var ErrEmptySlice = errors.New("the slice holds no requests")

// LoadTraceWorkload reads trace info's slice sl from st. Session ids become numbers
// 1, 2, … in order of first appearance.
func LoadTraceWorkload(ctx context.Context, st *store.Store, info store.TraceInfo, sl store.TraceSlice) (*TraceWorkload, error) {
	w := &TraceWorkload{Info: info, Slice: sl}
	sessions := map[string]int{}
	var buf []int64
	var isl, osl float64
	err := st.TraceRequests(ctx, info.ID, sl, func(r store.TraceRow) error {
		q := queueing.TraceRequest{ArrivalMs: r.ArrivalMs, ISL: r.ISL, OSL: r.OSL, ThinkMs: r.ThinkMs}
		if r.Session != "" {
			if q.Session = sessions[r.Session]; q.Session == 0 {
				q.Session = len(sessions) + 1
				sessions[r.Session] = q.Session
			}
		}
		var err error
		if buf, err = trace.DecodeHashIDs(buf, r.HashIDs); err != nil {
			return fmt.Errorf("trace %s request %d: %w", info.Name, r.Seq, err)
		}
		w.ids = append(w.ids, buf...)
		w.end = append(w.end, len(w.ids))
		w.Reqs = append(w.Reqs, q)
		w.Seqs = append(w.Seqs, r.Seq)
		isl += float64(r.ISL)
		osl += float64(r.OSL)
		w.MaxISL, w.MaxOSL = max(w.MaxISL, r.ISL), max(w.MaxOSL, r.OSL)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(w.Reqs) == 0 {
		return nil, fmt.Errorf("trace %s: %w", info.Name, ErrEmptySlice)
	}
	n := float64(len(w.Reqs))
	w.MeanISL, w.MeanOSL = max(1, int(math.Round(isl/n))), max(1, int(math.Round(osl/n)))
	return w, nil
}

// hashIDs returns request i's hash ids.
func (w *TraceWorkload) hashIDs(i int) []int64 {
	start := 0
	if i > 0 {
		start = w.end[i-1]
	}
	return w.ids[start:w.end[i]]
}

// RoundRobin routes the requests over r replicas at arrival: the k-th routing unit
// in arrival order goes to replica k mod r. The unit is the request, except with
// sessions (W4), where it is the session: all turns of a session go to the replica
// its first turn went to (its context is cached there), and session-less requests
// are units of their own. It returns each replica's request indices, in arrival
// order.
func (w *TraceWorkload) RoundRobin(r int, sessions bool) [][]int {
	out := make([][]int, r)
	home := map[int]int{}
	k := 0
	for i, q := range w.Reqs {
		if sessions && q.Session != 0 {
			h, ok := home[q.Session]
			if !ok {
				h = k % r
				home[q.Session] = h
				k++
			}
			out[h] = append(out[h], i)
			continue
		}
		out[k%r] = append(out[k%r], i)
		k++
	}
	return out
}

// TraceReplay configures one replica's replay.
type TraceReplay struct {
	Engine engine.Spec
	Timing timing.Timing
	// Reuse is the prefix cache the reuse oracle simulates (its backend policy, pool
	// and block size; HashBlock is taken from the trace); nil: no prefix cache, or
	// the trace has no hash ids.
	Reuse *oracle.ReuseConfig
	// Sessions replays W4 (queueing.QuantitativeSessions) with MaxSessions and the
	// client round trip ClientRTTMs before a later turn reaches the scheduler.
	Sessions    bool
	MaxSessions int
	ClientRTTMs float64
	// PrefixCaching: the engine caches KV blocks (queueing.Options.PrefixCaching: a
	// vLLM recompute after preemption hits the victim's own blocks).
	PrefixCaching bool
	// NoPrefixCache: the engine caches no prefixes, so a W4 later turn finds no
	// previous context cached (queueing.SessionOptions.NoPrefixCache).
	NoPrefixCache bool
	// Progress, if set, is called after each finished request with (done,
	// total) (queueing.Options.Progress); a KV-bound replay runs twice and so
	// reports 0..total twice.
	Progress func(done, total int)
}

// Replay replays the requests idx (nil: all) through the quantitative calendar
// (queueing.QuantitativeTrace, or QuantitativeSessions for W4), each request's
// cached tokens from the reuse oracle over c.Reuse run on exactly these requests
// (one replica's cache sees only its own traffic); when that replay is KV-bound
// (oracle.KVBoundUtil) the hits are recomputed with running requests pinning their
// KV (oracle.ReusePinned) and the requests replayed again. This is `aicdb trace
// replay --tier quantitative`'s replay.
func (w *TraceWorkload) Replay(ctx context.Context, idx []int, c TraceReplay) (*queueing.Report, error) {
	if idx == nil {
		idx = make([]int, len(w.Reqs))
		for i := range idx {
			idx[i] = i
		}
	}
	if len(idx) == 0 {
		return nil, fmt.Errorf("trace %s: %w", w.Info.Name, ErrEmptySlice)
	}
	reqs := make([]queueing.TraceRequest, len(idx))
	for k, i := range idx {
		reqs[k] = w.Reqs[i]
	}
	var rs *oracle.ReuseSim
	if c.Reuse != nil && w.Info.HashBlock > 0 {
		cfg := *c.Reuse
		cfg.HashBlock = w.Info.HashBlock
		var err error
		if rs, err = oracle.NewReuse(cfg); err != nil {
			return nil, fmt.Errorf("reuse oracle: %w", err)
		}
		// Announced before replayed, so the oracle registers only blocks someone
		// looks up again.
		for _, i := range idx {
			rs.Expect(w.hashIDs(i))
		}
		for k, i := range idx {
			reqs[k].Prefix = rs.Add(reqs[k].ISL, reqs[k].OSL, w.hashIDs(i))
			reqs[k].HashIDs = w.hashIDs(i) // blocks running requests share (queueing kv_share.go)
		}
	}
	o := queueing.Options{PrefixCaching: c.PrefixCaching, Progress: c.Progress, HashBlock: w.Info.HashBlock}
	run := func() (*queueing.Report, error) {
		if c.Sessions {
			o.ClientRTTMs = c.ClientRTTMs
			return queueing.QuantitativeSessions(ctx, reqs, c.Engine, c.Timing, o, queueing.SessionOptions{MaxSessions: c.MaxSessions, NoPrefixCache: c.NoPrefixCache})
		}
		return queueing.QuantitativeTrace(ctx, reqs, c.Engine, c.Timing, o)
	}
	rep, err := run()
	if err != nil || rs == nil || !(rep.KVUtilPeak > oracle.KVBoundUtil) {
		return rep, err
	}
	// KV-bound (running requests held over oracle.KVBoundUtil of the pool): the hits
	// again with every request pinning its KV over the run time just computed
	// (oracle.ReusePinned, here in the first cache's memory), then the replay with those hits.
	// A request looks its prefix up and holds KV from its admission (V-R3, V-R8), not
	// from its arrival: a queued request holds nothing and its prompt is in no cache
	// yet. The replay reports no admission instant; its first token, when the prompt's
	// KV is complete, is at most the prefill's passes later (a KV-bound queue is far
	// longer), so the pin starts there.
	rr := make([]oracle.ReuseRequest, len(idx))
	for k, i := range idx {
		r := rep.Requests[k]
		rr[k] = oracle.ReuseRequest{ArrivalMs: r.ArrivalMs + r.TTFTMs, FinishMs: r.ArrivalMs + r.E2EMs, ISL: r.ISL, OSL: r.OSL, HashIDs: w.hashIDs(i)}
	}
	hits, err := rs.Pinned(rr) // ReusePinned in the first pass's memory
	if err != nil {
		return nil, fmt.Errorf("reuse oracle: %w", err)
	}
	for k := range reqs {
		reqs[k].Prefix = hits[k]
	}
	return run()
}
