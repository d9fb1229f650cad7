package queueing

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/aicdb/aicdb/engine"
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
	// Session numbers the conversation the turn belongs to (W4; 0 = none). Turns of a
	// session are in trace order.
	Session int
	// ThinkMs is the client's think time before this turn (W4): a session's later turn
	// arrives at its previous turn's completion + ThinkMs.
	ThinkMs float64
	// HashIDs optionally names the prompt's leading blocks of Options.HashBlock tokens
	// by content (a trace's hash ids, e.g. Mooncake's: the content of block k is fixed
	// by ids 0..k). With a KV capacity and Options.PrefixCaching (vLLM), a prompt
	// block of the cached prefix that another running request holds is counted once
	// in the pool (ref-counted, V-R9; kv_share.go), as the engine holds it. Ids past
	// the prompt (more than ⌈ISL / HashBlock⌉) are ignored.
	HashIDs []int64
}

// SessionOptions are the W4 knobs of QuantitativeSessions.
type SessionOptions struct {
	// MaxSessions caps the sessions in progress at once (0 = no cap): a session whose
	// first turn arrives while the cap is reached starts when one ends.
	MaxSessions int
	// NoPrefixCache: the engine caches no prefixes (enable_prefix_caching off), so a
	// later turn finds none of its previous context cached and prefills it whole, as
	// in the DES; its own Prefix still applies.
	NoPrefixCache bool

	clientRTTMs float64 // Options.ClientRTTMs
}

// ErrSessionContextsEvicted marks (errors.Is) a W4 replay the quantitative calendar
// refuses: with a KV capacity, the running requests' blocks plus the cached contexts
// of the sessions between turns exceed the pool at some instant, so the engine
// evicts contexts (LRU of the free blocks, V-R8; SGLang's radix leaves; TRT-LLM's
// reuse pool) and later turns prefill them again — which the calendar, keeping
// every context cached, does not model (its TTFT would be optimistic). The DES
// (oracle.Sim.RunSessions) models the eviction. The error is a *SessionKVError.
var ErrSessionContextsEvicted = errors.New("W4 session contexts do not stay cached in the KV pool")

// SessionKVError is QuantitativeSessions' refusal of a KV-pressured W4 replay
// (ErrSessionContextsEvicted): the peak demand — blocks in use plus the cached
// contexts of the sessions between turns — against the pool, in blocks of
// BlockSize tokens, first reached at AtMs (calendar time).
type SessionKVError struct {
	PeakBlocks, PoolBlocks, BlockSize int
	AtMs                              float64
}

func (e *SessionKVError) Error() string {
	return fmt.Sprintf("%v: the running requests plus the cached contexts of the sessions between turns need %d KV blocks (%d tokens) at %.0f ms but the pool holds %d (%d tokens); the engine evicts contexts and later turns prefill again, which the quantitative calendar does not model",
		ErrSessionContextsEvicted, e.PeakBlocks, e.PeakBlocks*e.BlockSize, e.AtMs, e.PoolBlocks, e.PoolBlocks*e.BlockSize)
}

// Unwrap makes errors.Is(err, ErrSessionContextsEvicted) hold.
func (e *SessionKVError) Unwrap() error { return ErrSessionContextsEvicted }

// QuantitativeTrace replays reqs (arrival order) through the engine's calendar: the
// same recursion as Quantitative, with the trace's own arrival instants and per-request
// shapes instead of a workload Spec. Every request is measured (no warm-up is
// dropped: a trace's start is part of it). Throughput is requests / (last finish −
// first arrival), the same definition as the oracle's summary, because a trace need
// not be stationary. The report's fidelity is W3; Report.Requests holds every request
// in trace order.
func QuantitativeTrace(ctx context.Context, reqs []TraceRequest, e engine.Spec, t timing.Timing, o Options) (*Report, error) {
	return replayTrace(ctx, reqs, e, t, o, nil)
}

// QuantitativeSessions replays a trace of sessions (W4): a session's first turn
// arrives at its trace instant (or, under SessionOptions.MaxSessions, when a session
// ends), each later turn at its previous turn's completion + its ThinkMs, and its
// prompt holds the previous turn's prompt and output as a cached prefix (context
// growth; the calendar has no KV eviction, so the previous context stays cached,
// unless SessionOptions.NoPrefixCache):
// its prefix is max(its own Prefix, the previous turn's cached context): its ISL + OSL
// − 1 tokens (the last sampled token's KV is never computed), capped at ISL − 1 and
// rounded down to whole blocks (pages), as the caches hold only full ones (V-R8,
// §3.6, T-R5) — the hit the DES's engines give when nothing is evicted.
// Later turns (and capped first turns) reach the scheduler Options.ClientRTTMs after
// the client sends them, as in the closed loop. Requests without a session arrive at
// their trace instants. The report's fidelity is W4.
//
// With a KV capacity (engine.Spec.KVCapacityTokens > 0) the replay also tracks the KV
// it assumes resident: the running requests' blocks plus, for every session between
// turns (from a turn's finish until its next turn holds KV), the blocks of that
// cached context as the next turn's hit counts them. If that ever exceeds the pool,
// the contexts cannot all stay cached and the replay is refused with a
// *SessionKVError (ErrSessionContextsEvicted, an InputError) instead of an
// optimistic report. For TRT-LLM GUARANTEED_NO_EVICT the blocks in use are the
// admission reservations (T-R1), so the check is conservative there.
func QuantitativeSessions(ctx context.Context, reqs []TraceRequest, e engine.Spec, t timing.Timing, o Options, so SessionOptions) (*Report, error) {
	if so.MaxSessions < 0 {
		return nil, inputErr(fmt.Errorf("max sessions %d: must be ≥ 0 (0 = no cap)", so.MaxSessions))
	}
	if err := CheckClientRTT(o.ClientRTTMs); err != nil {
		return nil, inputErr(fmt.Errorf("options %w", err))
	}
	so.clientRTTMs = o.ClientRTTMs
	return replayTrace(ctx, reqs, e, t, o, &so)
}

// replayTrace is QuantitativeTrace (so == nil) and QuantitativeSessions.
func replayTrace(ctx context.Context, reqs []TraceRequest, e engine.Spec, t timing.Timing, o Options, so *SessionOptions) (*Report, error) {
	if err := checkTrace(reqs, e, t); err != nil {
		return nil, inputErr(err)
	}
	if err := checkHashIDs(reqs, o.HashBlock); err != nil {
		return nil, inputErr(err)
	}
	s := new(sim)
	*s = newSim(e, t)
	s.record, s.selfHits = o.RecordTokenTimes, o.PrefixCaching && s.rules.kvSelfHits() && e.KVCapacityTokens > 0
	if e.KVCapacityTokens > 0 {
		s.initKV(e.KVCapacityTokens)
		if so != nil {
			s.kv.ctx = make([]int32, len(reqs))
		}
		if s.selfHits && o.HashBlock > 0 { // vLLM prefix caching: shared prompt blocks held once
			s.share = newKVShare(reqs, o.HashBlock, e.BlockSize)
		}
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
		s.reqs = append(s.reqs, simReq{slot: -1, gen: int32(i), arrival: r.ArrivalMs + e.StageMs, isl: r.ISL, prefix: r.Prefix, osl: r.OSL, steady: true})
	}
	done := 0
	hit0 := make([]int, len(reqs)) // each request's cached prefix at its first admission
	for i, r := range reqs {
		hit0[i] = r.Prefix
	}
	s.onFinish = func(*sim, int32, float64) { done++ }
	if so == nil {
		for i := range reqs {
			s.incoming = append(s.incoming, int32(i))
		}
	} else {
		s.onFinish = sessionDriver(s, reqs, *so, &done, hit0)
	}
	if o.Progress != nil {
		finish := s.onFinish
		s.onFinish = func(s *sim, r int32, t float64) {
			finish(s, r, t)
			o.Progress(done, len(reqs))
		}
	}
	if err := s.run(ctx, func() bool { return done == len(reqs) }); err != nil {
		return nil, err
	}
	if s.kv.on { // every request finished: every block is free again
		held := 0
		if s.share != nil {
			held = len(s.share.heads) - len(s.share.spare)
		}
		if s.kvFree != s.kv.capBlocks || held != 0 {
			return nil, fmt.Errorf("queueing: KV still held after the replay: %d of %d blocks, %d shared chains (internal)", s.kv.capBlocks-s.kvFree, s.kv.capBlocks, held)
		}
	}
	if s.kv.ctx != nil && s.kv.peakDemand > s.kv.capBlocks {
		return nil, inputErr(&SessionKVError{PeakBlocks: s.kv.peakDemand, PoolBlocks: s.kv.capBlocks, BlockSize: e.BlockSize, AtMs: s.kv.peakAtMs - e.StageMs})
	}
	rep, err := s.report(col, workload.Spec{}, -1, -1)
	if err != nil {
		return nil, err
	}
	rep.ITL = col.itlOf(0, 1)     // every request is measured: ITL bucket 0 (simReq.bucket)
	for i := range rep.Requests { // not a recompute's own-block hit (Options.PrefixCaching)
		rep.Requests[i].Prefix = hit0[i]
	}
	rep.Fidelity = workload.W3
	if so != nil {
		rep.Fidelity = workload.W4
	}
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
func checkTrace(reqs []TraceRequest, e engine.Spec, t timing.Timing) error {
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
		if err := CheckRequestFits(e, r.ISL, r.OSL, r.Prefix, fmt.Sprintf("trace request %d:", i)); err != nil {
			return err
		}
		prev = r.ArrivalMs
	}
	return checkTraceKV(reqs, e)
}

// sessionDriver enqueues the first turns (up to the cap) and returns the completion
// hook that sends each session's next turn, or starts a waiting session.
func sessionDriver(s *sim, reqs []TraceRequest, so SessionOptions, done *int, hit0 []int) func(*sim, int32, float64) {
	next := make([]int32, len(reqs)) // the session's next turn, -1 = last
	firstOf := map[int]int32{}       // session → its first turn (filled backwards)
	var firsts []int32               // first turns (and session-less requests), in trace order
	for i := len(reqs) - 1; i >= 0; i-- {
		next[i] = -1
		if sid := reqs[i].Session; sid != 0 {
			if j, ok := firstOf[sid]; ok {
				next[i] = j
			}
			firstOf[sid] = int32(i)
		}
	}
	for i, r := range reqs {
		if r.Session == 0 || firstOf[r.Session] == int32(i) {
			firsts = append(firsts, int32(i))
		}
	}
	active := 0
	start := func(ri int32, now float64) {
		s.reqs[ri].arrival = max(s.reqs[ri].arrival, now)
		s.insertIncoming(ri)
		active++
	}
	k := 0
	for ; k < len(firsts) && (so.MaxSessions == 0 || active < so.MaxSessions); k++ {
		start(firsts[k], 0)
	}
	return func(s *sim, ri int32, now float64) {
		*done++
		if j := next[ri]; j >= 0 {
			prev, r := &s.reqs[ri], &s.reqs[j]
			r.arrival = now + reqs[j].ThinkMs + so.clientRTTMs + s.e.StageMs
			c := 0
			if !so.NoPrefixCache {
				c = sessionContext(s.e, prev.isl+prev.osl-1, r.isl)
			}
			r.prefix = max(r.prefix, c)
			hit0[j] = r.prefix
			if s.kv.ctx != nil && c > 0 { // cached until turn j holds KV (kvCtxTake)
				s.kv.ctx[j] = int32(c / s.e.BlockSize)
				s.kv.ctxBlocks += c / s.e.BlockSize
			}
			s.insertIncoming(j)
			return
		}
		active--
		if k < len(firsts) {
			start(firsts[k], now+so.clientRTTMs+s.e.StageMs)
			k++
		}
	}
}

// sessionContext is the cached prefix a later turn of isl tokens finds after a turn
// whose KV held ctx tokens: at most isl − 1 (one token is always computed), in whole
// blocks — vLLM (V-R8), SGLang pages (§3.6) and TRT-LLM blocks (T-R5 without
// partial-block reuse, as the DES: docs/oracle.md).
func sessionContext(e engine.Spec, ctx, isl int) int {
	n := min(ctx, isl-1)
	if bs := e.BlockSize; bs > 0 {
		n = n / bs * bs
	}
	return max(n, 0)
}

// insertIncoming queues request ri among the not yet visible requests, by arrival
// (after those arriving at the same instant).
func (s *sim) insertIncoming(ri int32) {
	a := s.reqs[ri].arrival
	pending := s.incoming[s.inHead:]
	k := s.inHead + sort.Search(len(pending), func(j int) bool { return s.reqs[pending[j]].arrival > a })
	s.incoming = append(s.incoming, 0)
	copy(s.incoming[k+1:], s.incoming[k:])
	s.incoming[k] = ri
}
