package queueing

import (
	"math"
	"slices"
)

// The scheduler-state limit cycle of a closed loop. The generation rule (cycle.go)
// finds a cycle when whole generations repeat; a loop whose requests rotate through
// the positions of its cycle never repeats a generation although it is exactly
// periodic. `aicdb eval` of the KV-tight tp8 batch-1024 point (Qwen3-32B on
// h200_sxm, vLLM, isl 4000, osl 500, budget 6524, a pool of ~840 full-length
// requests, ~300 waiting) settles by generation 3 and then repeats its whole
// scheduler state every 4499 passes (≈ 6.4 generations; the default sweep's row at
// ctx 8000: 1008 passes, reached at generations 10–34 depending on the stagger
// phase), each slot taking the place of another: generation g and g − p never
// agree (they differ by one pass of a rotating slot, ~1e-3 of the E2E), so the run
// went to its horizon (50 generations, ~29k passes of ~730 rows per phase) and was
// measured there with the "no limit cycle" diagnostic.
//
// The rule below detects the exact repetition of the state the calendars act on —
// running (admission order), waiting (FCFS order) and in-flight requests with their
// prompt position, outputs, blocks, recompute and shape, the arrival offsets of the
// requests not yet visible, the free KV blocks and the SGLang admission state —
// and of the times the report measures (each request's arrival, first and latest
// token as offsets from the clock). The recursion is deterministic given that
// state, so once it repeats (offsets within cycleTol of the clock) the loop and
// every measured time are periodic from there: whole state periods hold the steady
// distributions exactly (each request of the cycle once per period). The window is
// the requests that finish in whole periods from the matched checkpoint — at least
// the generation window's number per slot, so the per-slot throughput rests on as
// many cycles as before — with every ITL gap emitted in them. Repetition is found
// by comparing the live state with a bounded set of earlier states (stateCycle),
// exactly — no hashing.
//
// The generation rule keeps precedence: the state rule is consulted only while no
// generation window is decided; a repetition that shifts every slot's generations
// alike within the horizon leaves the decision to the generation rule
// (generationsRepeat); and a state window that is not complete when the generation
// rule's window is gives way to it. Those runs are measured as before, bit for bit.
//
// An asynchronous engine (V-R10) has a pass in flight at the observation: its
// entries (by running position, tokens, kind) and its length are part of the state.
// Observed only with fixed request shapes (a W2 shape sequence depends on the
// request count, not on the state) and once generation 0 has finished (its gaps are
// not measured).

// stateCheckpoints bounds the checkpoints a run keeps (each is one copy of the
// state and of the ITL bins: ~10 values per request in the system).
const stateCheckpoints = 16

// stateCycle applies the rule online, one observation per pass end at which a
// request finished (the decode fast path never runs over those, so the
// observations, and everything decided from them, are the same with and without
// it: TestFastForwardIsExact). The state is
// kept at every `every`-th observation (a checkpoint) and the live state is compared
// with each checkpoint (header first); when more than stateCheckpoints are held,
// `every` doubles and every other one is dropped. The first match is with the first
// checkpoint on the cycle, one minimal period later (a later checkpoint c' can only
// match from c' + period on), so the cycle is found within transient + every +
// period observations, with bounded memory.
type stateCycle struct {
	horizon    int // the generation rule's horizon
	clients    int
	win        int // steady requests per slot the window holds at least (the generation window)
	minPeriods int // whole periods the window holds at least (1; tests ask for more)
	obs, every int // obs: the index of the next observation; every: the checkpoint spacing (≥ 1)
	lastPasses int // s.passes at the last observation (one observation per pass end)
	cks        []stateCkpt
	spare      []stateCkpt // dropped checkpoints, their buffers reused
	// The live state's encoding at the current observation (stateEncode; liveOK:
	// the state is observable), scratch between observations.
	ints     []int64
	fl       []float64
	liveOK   bool
	found    bool
	done     bool      // the window of whole periods is complete (windowDone)
	deferred bool      // the repetition shifts whole generations within the horizon: the generation rule decides
	ck       stateCkpt // the checkpoint the live state repeats (once found)
	// Once found: the period in observations, passes and ms, and the whole periods
	// measured (windowDone).
	period, periodPasses, periods int
	periodMs                      float64
}

// stateCkpt is the state at one observation: the header, the rest of the encoding
// (stateEncode's integers and offsets), the clock, the pass count and the ITL bins.
type stateCkpt struct {
	obs    int
	hdr    [stateHeaderLen]int64
	slots  []int32 // slot and generation of the request at each position (stateOrder)
	gens   []int32
	ints   []int64
	fl     []float64
	now    float64
	passes int
	// bins: the ITL bins of the generations ≥ minGen (those in the system or later:
	// the only ones gaps can still go to).
	bins   []binSnap
	minGen int32
}

// observe records the state of s at a pass end and reports that it repeats a
// checkpoint's (the state limit cycle is found: sc.ck, one period before now).
func (sc *stateCycle) observe(s *sim, col *collector) bool {
	if sc.deferred || s.passes == sc.lastPasses || len(s.finBuf) == 0 || s.kv.err != nil || s.kv.ctx != nil || s.prefilled != nil {
		return false
	}
	sc.lastPasses = s.passes
	o := sc.obs
	sc.obs++
	if sc.found {
		return sc.windowDone(s, o)
	}
	// The live state is encoded (into sc.ints, sc.fl) at most once per observation:
	// when some checkpoint's header matches, or to take a checkpoint.
	hdr := s.stateHeader()
	live := false
	for i := range sc.cks {
		c := &sc.cks[i]
		if c.hdr != hdr {
			continue
		}
		if !live {
			sc.ints, sc.fl, sc.liveOK = s.stateEncode(sc.ints[:0], sc.fl[:0])
			live = true
		}
		if sc.liveOK && c.equals(sc.ints, sc.fl, cycleTol*math.Max(1, s.now)) {
			if sc.generationsRepeat(s, c) {
				sc.deferred = true
				return false
			}
			sc.found, sc.ck = true, *c
			sc.period, sc.periodPasses, sc.periodMs = o-c.obs, s.passes-c.passes, s.now-c.now
			return sc.windowDone(s, o)
		}
	}
	if o%sc.every == 0 {
		var c stateCkpt
		if n := len(sc.spare); n > 0 {
			c, sc.spare = sc.spare[n-1], sc.spare[:n-1]
		}
		if !live {
			sc.ints, sc.fl, sc.liveOK = s.stateEncode(sc.ints[:0], sc.fl[:0])
		}
		// The checkpoint takes the live encoding; its former buffers become the
		// scratch of the next one.
		c.ints, sc.ints = sc.ints, c.ints[:0]
		c.fl, sc.fl = sc.fl, c.fl[:0]
		if sc.liveOK {
			c.obs, c.hdr, c.now, c.passes = o, hdr, s.now, s.passes
			order := s.stateOrder()
			c.slots, c.gens = slices.Grow(c.slots[:0], len(order)), slices.Grow(c.gens[:0], len(order))
			c.minGen = math.MaxInt32
			for _, ri := range order {
				c.slots, c.gens = append(c.slots, int32(s.reqs[ri].slot)), append(c.gens, int32(s.reqs[ri].gen))
				c.minGen = min(c.minGen, int32(s.reqs[ri].gen))
			}
			c.bins = col.itl.snapFrom(c.bins[:0], c.minGen)
			sc.cks = append(sc.cks, c)
		} else {
			sc.spare = append(sc.spare, c)
		}
	}
	if len(sc.cks) > stateCheckpoints {
		sc.every *= 2
		k := 0
		for _, c := range sc.cks {
			if c.obs%sc.every == 0 {
				sc.cks[k] = c
				k++
			} else {
				sc.spare = append(sc.spare, c)
			}
		}
		sc.cks = sc.cks[:k]
	}
	return false
}

// buffers returns every checkpoint the rule holds, for another run to reuse as
// spares (their contents are overwritten before use); sc takes no checkpoint
// afterwards.
func (sc *stateCycle) buffers() []stateCkpt {
	b := append(sc.spare, sc.cks...)
	sc.cks, sc.spare = nil, nil
	return b
}

// windowDone reports, at observation o after the cycle was found, that the window
// is complete: o ends a whole number (≥ minPeriods) of periods since the checkpoint
// and every slot has finished at least `win` requests since the checkpoint — the
// generation window's requests per slot, so the per-slot throughput
// (slotThroughput) rests on as many cycles of each slot as a generation window's
// (a period shorter than that needs several).
func (sc *stateCycle) windowDone(s *sim, o int) bool {
	if k := o - sc.ck.obs; k%sc.period != 0 || k/sc.period < sc.minPeriods {
		return false
	}
	n := make([]int, sc.clients)
	short := sc.clients
	for i := len(s.reqs) - 1; i >= 0 && short > 0; i-- {
		r := &s.reqs[i]
		if r.finished && r.done > sc.ck.now && r.slot >= 0 && int(r.slot) < sc.clients {
			if n[r.slot]++; n[r.slot] == sc.win {
				short--
			}
		}
	}
	if short > 0 {
		return false
	}
	sc.periods = (o - sc.ck.obs) / sc.period
	sc.done = true
	return true
}

// generationsRepeat reports that the repetition of checkpoint c's state shifts
// whole generations soon enough for the generation rule to see it before its
// horizon; the rule then decides as before, so a loop whose generations repeat is
// measured exactly as without this rule. Each slot holds one request in the system
// (running, waiting or not yet visible); one period maps the slot at a position now
// to the slot at that position at c, advanced by the difference of their
// generations. After k periods every slot has advanced A_k(slot); when all A_k are
// equal (to D) the state equals c's with every generation + D, so generation g + D
// repeats generation g from the generations created after c on: the generation rule
// finds that (or a shorter) cycle by generation max gen at c + 1 + D. Otherwise the
// slots rotate through the cycle's positions and no generation repeats before
// A_k exceeds the horizon (the KV-tight point: one orbit of all 1024 slots, 6523
// generations). An undecided case (the iteration budget runs out) also defers.
func (sc *stateCycle) generationsRepeat(s *sim, c *stateCkpt) bool {
	order := s.stateOrder()
	C := len(order)
	if C != len(c.slots) {
		return true
	}
	// prev[u]: the slot whose place slot u takes after one period (u's position now
	// held c.slots[i]); adv[u]: u's generation gain over it.
	prev, adv := make([]int, C), make([]int, C)
	gmin, gmax := math.MaxInt, 0
	for i, ri := range order {
		u := int(s.reqs[ri].slot)
		if u < 0 || u >= C {
			return true
		}
		prev[u] = int(c.slots[i])
		adv[u] = int(s.reqs[ri].gen) - int(c.gens[i])
		gmin, gmax = min(gmin, int(c.gens[i])), max(gmax, int(c.gens[i]))
	}
	limit := sc.horizon - gmax - 1 // a shift D ≥ limit is not seen before the horizon
	if limit <= 0 {
		return false
	}
	// A_k(u) = Σ_{j<k} adv(prev^j(u)): u's generation at c + k periods less the
	// generation at c of the slot whose place it took, so A_k(u) ≥ u's own gain −
	// (gmax − gmin), and u's own gain never decreases.
	cur, tot := make([]int, C), make([]int, C)
	for u := range cur {
		cur[u] = u
	}
	const budget = 1 << 22 // slot steps
	for k := 1; k*C <= budget; k++ {
		lo, hi := math.MaxInt, math.MinInt
		for u := range cur {
			tot[u] += adv[cur[u]]
			cur[u] = prev[cur[u]]
			lo, hi = min(lo, tot[u]), max(hi, tot[u])
		}
		if lo == hi && lo > 0 {
			return lo < limit
		}
		if lo-(gmax-gmin) >= limit { // every later A_k exceeds the limit too
			return false
		}
	}
	return true
}

// stateOrder lists the requests in the system in the state's order: running,
// waiting, not yet visible (s.stateOrder's slice is scratch).
func (s *sim) stateOrder() []int32 {
	o := append(s.orderBuf[:0], s.running...)
	o = append(o, s.waiting[s.wHead:]...)
	o = append(o, s.incoming[s.inHead:]...)
	s.orderBuf = o
	return o
}

// equals reports that the live state's encoding (ints, fl: stateEncode) is the
// checkpoint's: every integer equal, every time offset within tol.
func (c *stateCkpt) equals(ints []int64, fl []float64, tol float64) bool {
	if len(fl) != len(c.fl) || !slices.Equal(ints, c.ints) {
		return false
	}
	for i, v := range fl {
		if math.Abs(c.fl[i]-v) > tol {
			return false
		}
	}
	return true
}

const stateHeaderLen = 13

// stateHeader is the cheap part of the state: counts, free blocks, the SGLang
// admission state, TensorRT-LLM's batch-waiting count (T-R6), SGLang's
// receipt count and last batch kind (S-R7), and a signature of the running requests' progress
// (runSig). Equal states have equal headers, so a header that differs from a
// checkpoint's rejects it without encoding the live state.
func (s *sim) stateHeader() [stateHeaderLen]int64 {
	inFlight := int64(-1)
	if s.busy {
		inFlight = int64(len(s.cur().entries))
	}
	return [stateHeaderLen]int64{int64(len(s.running)), int64(s.waitingLen()), int64(len(s.incoming) - s.inHead), inFlight,
		int64(s.kvFree), b2i(s.kv.batchFull), int64(s.kv.runLen), b2i(s.kv.chunkRan), int64(math.Float64bits(s.kv.ratio)),
		s.runSig(), int64(s.trtHeld), int64(s.recvCount), int64(s.lastKind)}
}

// runSig is an order-sensitive hash of the running requests' prompt positions
// and outputs, both part of the encoded state (appendReqState) in running order:
// equal states give equal signatures. In a closed loop the counts and free
// blocks of the header repeat far more often than the state does; this keeps
// most of those observations from encoding the state only to find it differs.
func (s *sim) runSig() int64 {
	var h uint64
	for _, ri := range s.running {
		r := &s.reqs[ri]
		h = h*0x100000001b3 ^ (uint64(r.c)<<24 + uint64(r.gOut))
	}
	return int64(h)
}

// stateEncode appends the requests' part of the state of s after the header:
// integers to ints and time offsets from the clock (arrivals, first and latest
// token, the pass in flight) to fl. ok is false when the state is not observable
// (an SGLang chunked request outside running, an in-flight entry outside
// running: at a high C, a request whose final token is in flight makes most pass
// ends so); that is told first, before anything is encoded.
func (s *sim) stateEncode(ints []int64, fl []float64) (_ []int64, _ []float64, ok bool) {
	chunk := int64(-1)
	if s.chunked >= 0 {
		if chunk = int64(slices.Index(s.running, s.chunked)); chunk < 0 {
			return ints, fl, false
		}
	}
	// The pass in flight: each entry's request by its running position.
	var pos []int32
	if s.busy {
		pos = s.runningPositions()
		for _, en := range s.cur().entries {
			if pos[en.r] < 0 {
				s.clearPositions()
				return ints, fl, false
			}
		}
	}
	// Room for the whole state (9 integers and ≤ 3 offsets per request, 4 integers
	// per in-flight entry) up front, so the appends below do not grow.
	n := len(s.running) + s.waitingLen() + len(s.incoming) - s.inHead
	ints = slices.Grow(ints, 9*n+4*len(s.cur().entries)+1)
	fl = slices.Grow(fl, 3*n+2)
	for _, ri := range s.running {
		ints, fl = s.appendReqState(ints, fl, ri)
	}
	ints = append(ints, chunk)
	for _, ri := range s.waiting[s.wHead:] {
		ints, fl = s.appendReqState(ints, fl, ri)
	}
	for _, ri := range s.incoming[s.inHead:] {
		r := &s.reqs[ri]
		ints = append(ints, int64(r.isl), int64(r.osl))
		fl = append(fl, r.arrival-s.now)
	}
	if !s.busy {
		return ints, fl, true
	}
	for _, en := range s.cur().entries {
		ints = append(ints, int64(pos[en.r]), int64(en.n), b2i(en.decode), b2i(en.emits))
	}
	s.clearPositions()
	return ints, append(fl, s.curStart-s.now, s.curEnd-s.now), true
}

// runningPositions returns s.posBuf with each running request's position in
// running and −1 for every other request; clearPositions restores the −1s.
// posBuf keeps its length (every entry −1 between calls): it grows only by the
// requests created since the last call, not by all of them at every call.
func (s *sim) runningPositions() []int32 {
	pos := s.posBuf
	for len(pos) < len(s.reqs) {
		pos = append(pos, -1)
	}
	s.posBuf = pos
	for i, ri := range s.running {
		pos[ri] = int32(i)
	}
	return pos
}

func (s *sim) clearPositions() {
	for _, ri := range s.running {
		s.posBuf[ri] = -1
	}
}

// appendReqState appends request ri's part of the state: its scheduling
// integers and arrival offset, and — once it has a token — the offsets of its
// first and latest token (the measured times: a request in the system since
// before the checkpoint finishes in the period with these offsets: TTFT, ITL
// gaps, E2E).
func (s *sim) appendReqState(ints []int64, fl []float64, ri int32) ([]int64, []float64) {
	r := &s.reqs[ri]
	ints = append(ints, int64(r.c), int64(r.gSched), int64(r.gOut), int64(r.blocks), int64(r.rec),
		int64(r.prefix), int64(r.isl), int64(r.osl), b2i(r.finished))
	if s.e.DraftTokens > 0 { // the step number of StepTokens and a vLLM step's drafts in flight
		ints = append(ints, int64(r.steps), int64(r.specIn))
	}
	if r.gOut == 0 {
		return ints, append(fl, r.arrival-s.now)
	}
	return ints, append(fl, r.arrival-s.now, r.first-s.now, r.last-s.now)
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
