package queueing

import (
	"context"
	"fmt"
	"math"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
)

// simReq is one request slot-instance of the recursion. The fields every pass
// that carries the request reads or writes (the calendars' decode rows,
// complete, the stretch) come first and fill one 64-byte line; the whole is
// 128 bytes, two lines, so a pass over the running requests touches one line
// of each.
type simReq struct {
	isl, osl int
	// c is the prompt position: tokens of the prompt already scheduled (computed or
	// served from the prefix cache). vLLM/SGLang start it at prefix on admission
	// (cached tokens cost no budget); TRT-LLM starts it at 0 and applies reuse after
	// budgeting (§4.4).
	c int
	// gSched counts output tokens already scheduled (sampled or in flight); gOut
	// counts output tokens emitted.
	gSched, gOut int
	blocks       int     // KV blocks held (TRT-LLM: the GUARANTEED_NO_EVICT reservation)
	rec          int     // outputs folded into the prompt phase by a recompute (kv.go)
	last         float64 // emission time of the latest token
	first        float64 // emission time of the first token
	prefix       int
	arrival      float64
	done         float64
	slot, gen    int32
	preempts     int32 // preemptions / retractions suffered (kv.go)
	steps        int32 // decode steps scheduled (engine.StepTokens numbers them; MTP only)
	specIn       int32 // vLLM MTP: drafts scheduled in r's latest step (V-S2: counted computed until its output)
	// bucket is the ITL accumulator of the request's gaps (closed loop: its
	// generation, so the steady window can be chosen after the fact; open loop: 0
	// for steady requests), or −1 for none.
	bucket    int32
	finished  bool
	steady    bool
	transient bool
}

// entry is one scheduled item of a pass.
type entry struct {
	r      int32
	n      int32 // tokens computed (0 for a TRT-LLM chunk fully covered by reuse)
	decode bool
	emits  bool // this entry samples an output token at the end of the pass
}

// draftOut is an MTP decode step's output beyond its sampled token: the accepted
// drafts of request r (kept beside the entries: an entry stays a four-field
// struct the compiler keeps in registers).
type draftOut struct {
	r    int32
	more int32
}

// simPass is a scheduled pass: its entries and the timing view.
type simPass struct {
	entries []entry
	extra   []draftOut // MTP steps that emit accepted drafts (addDraftStep)
	tp      timing.Pass
}

func (p *simPass) reset() {
	p.entries, p.extra = p.entries[:0], p.extra[:0]
	p.tp.Reset()
}

// sim is the state of one limit-cycle recursion. The calendar (schedule*) decides
// each pass; the driver (run) owns the clock, arrivals and completions.
type sim struct {
	e      engine.Spec
	t      timing.Timing
	rules  backendRules // e.Backend's scheduling hooks (rules.go)
	budget int
	seqCap int
	// runCap, when runCapOn (a Kernel with an in-flight cap κ), caps the running
	// requests counted whole: κ less the held ones (Kernel.capSeats). seqCap is
	// already at most runCap; runCap matters only where a seat is freed early
	// (seatsTaken).
	runCap   int
	runCapOn bool
	// selfHits: a vLLM recompute hits the victim's own cached blocks
	// (Options.PrefixCaching, trace replay).
	selfHits bool
	// prefillSide: a disaggregated prefill kernel (KernelOptions.Prefill), whose
	// finished prompts are handed off instead of joining a running batch (SGLang
	// S-R2 under the overlap scheduler).
	prefillSide bool
	// holdKV: a prefill kernel that keeps a finished request's blocks until its
	// pull releases them (Kernel.Release: V-P3 finished_sending), so held prompts
	// fill the pool the scheduler allocates from (V-R3, V-R6).
	holdKV bool
	// evictions counts the preemptions by recompute (kvEvict) so far: a schedule
	// that evicted and scheduled nothing changed the state the next one sees.
	evictions int
	// early: an asynchronous engine's next pass is already scheduled (next()),
	// at the start of the pass in flight (scheduleEarly: a Kernel, whose outside
	// events between a pass's start and end must meet the state that schedule
	// left); finishPass then does not schedule it again.
	early bool

	reqs     []simReq
	incoming []int32 // created requests not yet visible to the scheduler, by arrival
	inHead   int
	waiting  []int32 // FCFS queue, head at wHead
	wHead    int
	running  []int32 // admission order

	chunked int32 // SGLang: the request whose prefill is in progress, or -1
	kvFree  int   // free KV blocks, when a capacity is set (kv.go)
	kv      kvState
	share   *kvShare // prefix blocks shared among running requests (kv_share.go), or nil

	now float64 // the clock: end of the last completed pass
	// The pass in flight over [curStart, curEnd] when busy (pass[curIdx]: s.cur()),
	// and the scratch pass an asynchronous engine schedules while it runs
	// (s.next()). They trade places by index, not by copying (a copy of their
	// slice headers costs write barriers while the GC marks).
	pass             [2]simPass
	curIdx           uint8
	busy             bool
	curStart, curEnd float64
	// prefilled[r] marks requests whose prompt KV arrived from elsewhere
	// (Kernel.Inject); nil in the evaluator's runs.
	prefilled []bool
	// barrier: fastForward leaves in flight the pass that would end at or beyond
	// it, so the driver sees the state at that pass end (+Inf: none).
	barrier   float64
	passes    int
	maxPasses int
	finBuf    []int32
	decBuf    []int32   // SGLang decoders of the pass being built
	chunkList []int32   // TRT-LLM contexts to size after the scan
	ctxList   []ctxItem // TRT-LLM contexts batch waiting decides (T-R6)
	// trtHeld is TensorRT-LLM's batch_wait_iters_count: the schedules that held
	// their contexts since batch waiting last let them through (T-R6).
	trtHeld int
	// SGLang's request receipt (S-R7, SchedulerRecvInterval): recvEvery > 0
	// skips it after decode-only batches until recvCount reaches recvEvery;
	// lastKind is the kind of the latest schedule's batch.
	recvEvery, recvCount int
	lastKind             batchKind
	rowBuf               []bucketRows
	draftBuf             []draftRow // fastForwardDrafts' rows
	posBuf               []int32    // runningPositions' scratch: running position per request, −1 elsewhere
	orderBuf             []int32    // stateOrder's scratch
	// tokens[r] are the emission times of request r, when recorded (kept out of
	// simReq so that the request slice holds no pointers: no write barriers or GC
	// scanning on the hot path).
	tokens [][]float64

	// fast, when set, receives the ITL gaps of decode stretches run by
	// fastForward (rows of the pass counted per ITL bucket).
	fast func(gap float64, rows []bucketRows)

	// col, when set, receives the ITL gaps of every completed pass (the
	// quantitative collector; the same records as collector.onPass as a hook).
	col *collector
	// hooks of the driver
	onFinish func(s *sim, r int32, now float64)
	onPass   func(s *sim, p *simPass, start, end float64)
	record   bool
	// summary: report builds no RequestRecords (QuantitativeFiniteSummary).
	summary bool
	// tr is e.Traits(), resolved once: the KV paths ask for it every pass.
	tr engine.Traits
}

// noProgress explains a calendar that can schedule nothing while work remains:
// the head of waiting is a preempted request whose recompute (prompt + outputs so
// far) no longer fits the engine's budget with chunked prefill off (V-R3, T-R3:
// the engine can never schedule it either), or the KV refusal that stopped the
// schedule, else errNoProgress.
func (s *sim) noProgress() error {
	if s.kv.err != nil { // the schedule stopped on a refused KV state (SGLang EAGLE)
		return s.kv.err
	}
	if s.waitingLen() > 0 && len(s.running) == 0 && !s.e.EnableChunkedPrefill {
		if r := &s.reqs[s.waiting[s.wHead]]; r.rec > 0 && r.promptLen()-r.prefix > s.budget {
			return inputErr(fmt.Errorf("engine token budget = %d with chunked prefill off: a preempted request must recompute %d tokens (isl %d + %d outputs) in one pass, so the engine can never schedule it again; enable chunked prefill, raise the budget or give the engine more KV",
				s.budget, r.promptLen()-r.prefix, r.isl, r.rec))
		}
	}
	return errNoProgress
}

// errNoProgress reports a calendar that can schedule nothing while work remains.
var errNoProgress = inputErr(fmt.Errorf("queueing: the calendar cannot schedule any request while work remains (deadlock); check the engine caps against the request shape"))

// absorb moves created requests that arrived at or before t into the waiting queue.
func (s *sim) absorb(t float64) {
	for s.inHead < len(s.incoming) && s.reqs[s.incoming[s.inHead]].arrival <= t {
		s.waiting = append(s.waiting, s.incoming[s.inHead])
		s.inHead++
	}
	if s.inHead == len(s.incoming) {
		s.incoming, s.inHead = s.incoming[:0], 0
	}
}

func (s *sim) waitingLen() int { return len(s.waiting) - s.wHead }

func (s *sim) popWaiting() int32 {
	r := s.waiting[s.wHead]
	s.wHead++
	if s.wHead == len(s.waiting) {
		s.waiting, s.wHead = s.waiting[:0], 0
	}
	return r
}

// nextArrival returns the arrival time of the next created request not yet visible.
func (s *sim) nextArrival() (float64, bool) {
	if s.inHead < len(s.incoming) {
		return s.reqs[s.incoming[s.inHead]].arrival, true
	}
	return 0, false
}

// addPrompt schedules charge prompt positions of r from r.c (positions below the
// prefix are reused, not computed) and advances r.c.
func (s *sim) addPrompt(p *simPass, ri int32, charge int) {
	r := &s.reqs[ri]
	r.specIn = 0 // a prompt chunk carries no drafts
	from := max(r.c, r.prefix)
	// TRT-LLM charges the budget from position 0 and applies reuse afterwards: the
	// position jumps over the reused prefix; a chunk that ends inside it computes
	// nothing this pass (it sits out, §4.4).
	to := max(r.c+charge, r.prefix)
	r.c = to
	n := to - from
	emits := r.c >= r.promptLen()
	if emits {
		r.gSched = r.rec + 1 // a recompute samples the next output (V-R6)
	}
	if n == 1 && from >= r.isl {
		// One token past the original prompt (a recompute's last output, V-R6): a
		// decode row by the timing.Pass rule, context = computed before + 1.
		p.tp.Decode = append(p.tp.Decode, from+1)
	} else if n > 0 {
		p.tp.Prefill = append(p.tp.Prefill, timing.Chunk{Tokens: n, Computed: from, Prefix: r.prefix})
	} else {
		n = 0
	}
	p.entries = append(p.entries, entry{r: ri, n: int32(n), emits: emits})
}

// addDecode schedules one decode row of r (context = computed tokens before the
// pass + 1 = isl + outputs scheduled so far).
func (s *sim) addDecode(p *simPass, ri int32) {
	p.entries, p.tp.Decode = appendDecodeRow(p.entries, p.tp.Decode, ri, &s.reqs[ri])
}

// addDraftStep is addDecode under MTP (TensorRT-LLM's one-model MTP, SGLang's
// EAGLE chain): the row is r's next decode step, which emits engine.StepTokens of
// its number, at most the outputs left.
func (s *sim) addDraftStep(p *simPass, ri int32) {
	r := &s.reqs[ri]
	r.steps++
	more := min(engine.StepTokens(s.e.DraftAccepted, int(r.steps)), r.osl-r.gSched) - 1
	p.entries, p.tp.Decode = appendDecodeRow(p.entries, p.tp.Decode, ri, r)
	if more > 0 {
		r.gSched += more
		p.extra = append(p.extra, draftOut{r: ri, more: int32(more)})
	}
}

// appendDecodeRow appends the decode row of request ri (r) to a pass's entries
// and decode contexts and counts its output as scheduled (addDecode on slices a
// caller holds in locals).
func appendDecodeRow(entries []entry, dec []int, ri int32, r *simReq) ([]entry, []int) {
	dec = append(dec, r.isl+r.gSched)
	r.gSched++
	return append(entries, entry{r: ri, n: 1, decode: true, emits: true}), dec
}

// newSim is the sim of engine e (not changed afterwards) under timing t: the
// fields every driver sets alike — e's scheduling rules, token budget, seat cap
// and traits, no chunk in flight, no barrier.
func newSim(e engine.Spec, t timing.Timing) sim {
	return sim{e: e, tr: e.Traits(), t: t, rules: rulesFor(e.Backend), budget: e.TokenBudget(), seqCap: e.SeatCap(),
		chunked: -1, barrier: math.Inf(1), recvEvery: e.RecvEvery()}
}

// batchKind is what a schedule put in its pass, as SGLang's request receipt
// weighs the last batch (S-R7).
type batchKind uint8

const (
	batchNone   batchKind = iota // nothing scheduled (the engine idles)
	batchDecode                  // decode rows only (DECODE, TARGET_VERIFY)
	batchExtend                  // a prompt chunk in it (EXTEND, MIXED)
)

// kindOf is the batchKind of pass p.
func kindOf(p *simPass) batchKind {
	switch {
	case len(p.entries) == 0:
		return batchNone
	case len(p.tp.Prefill) > 0:
		return batchExtend
	}
	for _, en := range p.entries {
		if !en.decode {
			return batchExtend
		}
	}
	return batchDecode
}

// recv is SGLang's recv_requests at a schedule (S-R7): with a receipt
// interval, a schedule after a decode-only batch counts one iteration and
// receives only once the count reaches the interval (the count restarts);
// after a batch with a prompt chunk (weight 1000, above any interval used) or
// none (the idle loop spins through its count in microseconds) it receives
// at once. It then absorbs what arrived by t.
func (s *sim) recv(t float64) {
	if s.recvEvery > 0 {
		if s.lastKind == batchDecode {
			if s.recvCount++; s.recvCount < s.recvEvery {
				return
			}
		}
		s.recvCount = 0
	}
	s.absorb(t)
}

// recvAdvance counts n schedules after decode-only batches that received
// nothing (a decode stretch run in bulk): the count restarts at the interval.
func (s *sim) recvAdvance(n int) {
	if s.recvEvery > 0 {
		s.recvCount = (s.recvCount + n) % s.recvEvery
	}
}

// schedule builds the next pass into p from the current state.
func (s *sim) schedule(p *simPass) {
	p.reset()
	s.rules.schedule(s, p)
}

// complete applies the outputs of pass p, which ended at end: token emission,
// finishes (the slot and its KV are released), the driver's hooks.
func (s *sim) complete(p *simPass, start, end float64) {
	if s.onPass != nil {
		s.onPass(s, p, start, end)
	}
	col := s.col
	if col != nil {
		col.pool, col.gaps = col.pool[:0], col.gaps[:0]
		if col.poolAt == nil {
			col.poolAt = make([]int32, maxBuckets)
		}
	}
	s.finBuf = s.finBuf[:0]
	for _, x := range p.extra { // MTP: each step's accepted drafts, ahead of its token
		s.emitMore(x, end, col != nil)
	}
	reqs, record, measure := s.reqs, s.record, col != nil // no request is created inside the loop
	// The rows whose gap is the pass length are pooled per bucket (buckets in
	// first-seen order, addBucketRow's order), counted a run of equal buckets at a
	// time: curN rows of bucket curB not yet in col.pool. The rarer work (an
	// unpooled gap, a finish, a recorded token) is in calls, keeping this loop's
	// state in registers.
	curB, curN := int32(-1), 0
	for _, en := range p.entries {
		if !en.emits {
			continue
		}
		r := &reqs[en.r]
		// The ITL gap of a measured request that already had a token (collector.onPass,
		// fused into this loop: a request has one entry per pass).
		if measure && r.bucket >= 0 && r.gOut >= 1 {
			if r.last != start {
				col.gap(r.bucket, end-r.last)
			} else if r.bucket == curB {
				curN++
			} else {
				col.poolRows(curB, curN)
				curB, curN = r.bucket, 1
			}
		}
		r.gOut++
		if r.gOut == 1 {
			r.first = end
		}
		r.last = end
		if record {
			s.recordToken(en.r, end)
		}
		if r.gOut == r.osl {
			s.finish(en.r, end)
		}
	}
	if col != nil { // the gaps in entry order, then the pooled ones (collector.onPass)
		col.poolRows(curB, curN)
		for _, g := range col.gaps {
			col.itl.add(g.bucket, g.gap, 1)
		}
		col.itl.addRows(col.pool, end-start)
		for _, b := range col.pool {
			col.poolAt[b.bucket] = 0
		}
	}
	fin := s.finBuf
	if len(fin) == 0 {
		return
	}
	k := 0
	for _, ri := range s.running {
		if !s.reqs[ri].finished {
			s.running[k] = ri
			k++
		}
	}
	s.running = s.running[:k]
	if s.onFinish != nil {
		for _, ri := range fin {
			s.onFinish(s, ri, end)
		}
	}
}

// emitMore emits the accepted drafts x of an MTP step that ended at end: output
// tokens arriving with the step's sampled token, each an ITL gap of 0. complete
// applies them before the step's token (its first-token, gap and finish rules see
// the request's total; the drafts follow a first token that came from the prefill).
func (s *sim) emitMore(x draftOut, end float64, measure bool) {
	r := &s.reqs[x.r]
	r.gOut += int(x.more)
	if measure && r.bucket >= 0 {
		s.col.itl.add(r.bucket, 0, float64(x.more))
	}
	if s.record {
		for range x.more {
			s.recordToken(x.r, end)
		}
	}
}

// finish marks request ri finished at end (its last token), releases its KV
// blocks and lists it in s.finBuf (complete then frees its running slot).
func (s *sim) finish(ri int32, end float64) {
	r := &s.reqs[ri]
	r.finished = true
	r.done = end
	if r.blocks > 0 {
		if !s.holdKV {
			s.kvRelease(ri)
		} else {
			s.rules.holdFinished(s, r)
		}
	}
	s.finBuf = append(s.finBuf, ri)
}

// cur is the pass in flight (when busy).
func (s *sim) cur() *simPass { return &s.pass[s.curIdx] }

// next is the scratch pass an asynchronous engine schedules while cur runs.
func (s *sim) next() *simPass { return &s.pass[s.curIdx^1] }

// The pass lifecycle below is the one event loop of every engine model: run (the
// evaluator's recursion, which owns its clock) and Kernel.Step (an outside clock,
// step.go) are thin drivers over schedulePass, startPass and finishPass.
//
// Synchronous engines schedule each pass at the end of the previous one;
// asynchronous ones (V-R10, TRT-LLM overlap, the SGLang overlap scheduler §3.2)
// schedule pass k+1 at the start of pass k, seeing arrivals up to that instant and
// not yet the finishes of pass k (a length-capped request is not scheduled again,
// V-R12 — SGLang runs it once more, its token discarded — but keeps its slot until
// pass k's outputs are processed). If that early schedule is empty, the engine
// waits for pass k and schedules at its end.

// schedulePass schedules a pass at the clock from the requests visible by then and
// puts it in flight; it reports false (nothing in flight) when the calendar
// schedules nothing.
func (s *sim) schedulePass() (bool, error) {
	s.recv(s.now)
	s.admitPrefilled()
	s.schedule(s.cur())
	if s.recvEvery > 0 {
		s.lastKind = kindOf(s.cur())
	}
	if len(s.cur().entries) == 0 {
		return false, nil
	}
	return true, s.startPass()
}

// startPass prices s.cur and puts it in flight from the clock.
func (s *sim) startPass() error {
	dt, err := s.price(s.cur())
	if err != nil {
		return err
	}
	s.curStart, s.curEnd, s.busy = s.now, s.now+dt, true
	return nil
}

// finishPass completes the pass in flight at its end (the clock moves there). An
// asynchronous engine first schedules the next pass as of the completing pass's
// start and, when that schedule is not empty, puts it in flight at once (started
// reports it); otherwise nothing is in flight afterwards.
func (s *sim) finishPass(ctx context.Context) (started bool, err error) {
	if err := s.countPass(ctx); err != nil {
		return false, err
	}
	async := s.e.AsyncScheduling
	if async && !s.early {
		s.scheduleNext()
	}
	s.early = false
	s.complete(s.cur(), s.curStart, s.curEnd)
	s.now = s.curEnd
	s.busy = false
	if async && len(s.next().entries) > 0 {
		s.curIdx ^= 1
		return true, s.startPass()
	}
	return false, nil
}

// scheduleEarly schedules an asynchronous engine's next pass now, at the start
// of the pass in flight, as of that start (V-R10: the engine schedules and
// launches pass k+1 while pass k runs): finishPass's schedule made at once, so
// KV taken and seats filled by it are seen by what happens before pass k ends.
func (s *sim) scheduleEarly() {
	s.scheduleNext()
	s.early = true
}

// scheduleNext is an asynchronous engine's schedule of the pass after the one
// in flight, as of that pass's start (V-R10): finishPass's, or scheduleEarly's.
func (s *sim) scheduleNext() {
	s.recv(s.curStart)
	s.admitPrefilled()
	s.schedule(s.next())
	if s.recvEvery > 0 {
		s.lastKind = kindOf(s.next())
	}
}

// seatsTaken is the number of running requests that hold a seat of the running
// cap at this schedule: all of them, less — on an engine whose final token frees
// its seat (engine.Traits.FinalFreesSeat, TRT-LLM T-R1) under overlap — those
// whose final token is in flight.
func (s *sim) seatsTaken() int {
	n := len(s.running)
	if !s.e.AsyncScheduling || s.waitingLen() == 0 || !s.tr.FinalFreesSeat {
		return n
	}
	for _, ri := range s.running {
		if r := &s.reqs[ri]; r.gSched >= r.osl {
			n--
		}
	}
	return n
}

// seatFree reports whether a request can take a running seat when taken seats
// are held (seatsTaken): below the running cap, and with an in-flight cap κ,
// running requests counted whole below κ less the held ones (a request whose
// final token is in flight still counts against κ: it is about to be held).
func (s *sim) seatFree(taken int) bool {
	return taken < s.seqCap && (!s.runCapOn || len(s.running) < s.runCap)
}

// admitPrefilled moves prefilled requests (Kernel.Inject) at the head of the
// waiting queue into the running set while a slot is free (FCFS; their KV is
// already resident, so admission costs no budget — the engines' remote-KV
// admission). The evaluator's runs have none.
func (s *sim) admitPrefilled() {
	if s.prefilled == nil {
		return
	}
	for taken := s.seatsTaken(); s.waitingLen() > 0 && s.seatFree(taken); taken++ {
		ri := s.waiting[s.wHead]
		if !s.prefilled[ri] {
			return
		}
		s.popWaiting()
		s.running = append(s.running, ri)
	}
}

// recordToken appends emission time t to request r's token times.
func (s *sim) recordToken(r int32, t float64) {
	for int(r) >= len(s.tokens) {
		s.tokens = append(s.tokens, nil)
	}
	s.tokens[r] = append(s.tokens[r], t)
}

// run drives the recursion from time 0 until stop() is true (checked at every pass
// end), with the fast path over quiescent decode stretches when s.fast is set.
func (s *sim) run(ctx context.Context, stop func() bool) error {
	s.busy = false
	for !stop() {
		if !s.busy {
			ok, err := s.schedulePass()
			if err != nil {
				return err
			}
			if !ok {
				t, ok := s.nextArrival()
				if !ok {
					if len(s.running) == 0 && s.waitingLen() == 0 {
						return fmt.Errorf("queueing: no work left before the measurement completed (internal)")
					}
					return s.noProgress()
				}
				s.now = math.Max(s.now, t)
				continue
			}
		}
		if s.fast != nil {
			if err := s.fastForward(ctx, s.cur(), &s.curStart, &s.curEnd); err != nil {
				return err
			}
		}
		if _, err := s.finishPass(ctx); err != nil {
			return err
		}
	}
	return nil
}

// price returns the duration of p from the timing, rejecting non-finite or
// non-positive values.
func (s *sim) price(p *simPass) (float64, error) {
	if s.kv.err != nil {
		return 0, s.kv.err
	}
	if len(p.tp.Prefill) == 0 && len(p.tp.Decode) == 0 {
		return 0, nil // only reuse jumps: no forward pass
	}
	dt, err := s.t.PassMs(&p.tp)
	if err != nil {
		return 0, fmt.Errorf("queueing: pricing the pass at t=%.6g ms (prefill %d tokens in %d chunks, %d decode rows): %w", s.now, p.tp.PrefillTokens(), len(p.tp.Prefill), len(p.tp.Decode), err)
	}
	if !(dt > 0) || math.IsInf(dt, 0) {
		return 0, inputErr(fmt.Errorf("timing: pass priced at %v ms (prefill %d tokens, %d decode rows); a timing must return a finite value > 0", dt, p.tp.PrefillTokens(), len(p.tp.Decode)))
	}
	return dt, nil
}

// clock returns the simulated time.
func (s *sim) clock() float64 { return s.now }

// starvedPreempts is how many times a request must have been preempted or
// retracted without finishing for a run that hit the pass bound to be reported as
// starvation rather than as an internal fault.
const starvedPreempts = 8

// starved reports a run that made no progress because the engine starves a
// request: its KV pool is so small that the request is preempted (V-R6) or
// retracted (S-R5) again each time it is readmitted, as the engine itself would
// do (the DES shows the same cycle). That is the deployment's behaviour, not a
// fault of the model: an input error naming the pool.
func (s *sim) starved() error {
	worst := -1
	for i := range s.reqs {
		if r := &s.reqs[i]; !r.finished && r.preempts >= starvedPreempts && (worst < 0 || r.preempts > s.reqs[worst].preempts) {
			worst = i
		}
	}
	if worst < 0 {
		return nil
	}
	r := &s.reqs[worst]
	return inputErr(fmt.Errorf("engine kv_capacity_tokens = %d: a request of isl %d + osl %d was preempted %d times without finishing; the pool is too small for the running requests and the engine starves it; give the engine more KV or fewer clients",
		s.e.KVCapacityTokens, r.isl, r.osl, r.preempts))
}

// summarise makes s a summary run (QuantitativeFiniteSummary, a desync run's
// stagger phases): no ITL gap reaches a collector (the report's ITL is a point
// mass at 0) and the report builds no request records. The fast path stays on
// when it was, recording nothing.
func (s *sim) summarise() {
	s.summary, s.onPass, s.col = true, nil, nil
	if s.fast != nil {
		s.fast = func(float64, []bucketRows) {}
	}
}

// countPass counts one pass against the bound and polls ctx now and then.
func (s *sim) countPass(ctx context.Context) error {
	// The common pass needs neither check: this part inlines into the loops.
	if s.passes++; s.passes > s.maxPasses || s.passes&255 == 0 {
		return s.passChecks(ctx)
	}
	return nil
}

// countPasses is countPass for n ≥ 0 passes at once (a decode stretch run in
// bulk): ctx is polled when the count crosses a multiple of 256.
func (s *sim) countPasses(ctx context.Context, n int) error {
	before := s.passes
	s.passes += n
	if poll := s.passes>>8 != before>>8; poll || s.passes > s.maxPasses {
		return s.checks(ctx, poll)
	}
	return nil
}

// passChecks is countPass's rare part: the pass bound, and cancellation every
// 256 passes. Not inlined, so that countPass's common path inlines.
//
//go:noinline
func (s *sim) passChecks(ctx context.Context) error { return s.checks(ctx, s.passes&255 == 0) }

// checks enforces the pass bound and, when poll, reports a cancelled ctx.
func (s *sim) checks(ctx context.Context, poll bool) error {
	if s.passes > s.maxPasses {
		if err := s.starved(); err != nil {
			return err
		}
		return fmt.Errorf("queueing: pass bound %d hit before the measurement window completed; the configuration makes no steady progress (report it)", s.maxPasses)
	}
	if poll {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("queueing: evaluation cancelled: %w", err)
		}
	}
	return nil
}
