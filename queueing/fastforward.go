package queueing

import (
	"context"
	"math"

	"github.com/aicdb/aicdb/engine"
)

// fastForward runs a quiescent decode stretch without the per-pass bookkeeping.
//
// cur is scheduled and in flight over [start, end]. If it is a decode-only pass
// carrying every running request, nobody waits and no request can finish within
// the next k passes (k = min over rows of the outputs left to schedule: the k-th
// carries a final token and is left in flight, so no request finishes inside the
// stretch, and an asynchronous schedule of pass i ≤ k, made while pass i − 1 runs,
// still sees every row with an output left to schedule, V-R12), then
// every following pass is the same rows with each context one longer — under any
// calendar — until an arrival becomes visible to a schedule (at a pass start when
// synchronous, one pass earlier when asynchronous). fastForward completes cur
// normally, prices those passes in turn (contexts + 1) recording only their
// lengths, and leaves the last of them in flight as the new cur, so the regular
// loop resumes with exactly the state the pass-by-pass recursion would have.
// TensorRT-LLM contexts left out of cur stay out of the stretch's passes
// (trtContextsOut), batch waiting holding them for at most holdLimit passes.
func (s *sim) fastForward(ctx context.Context, cur *simPass, start, end *float64) error {
	// MTP steps emit a varying number of tokens per row: a stretch only in a
	// summary run (no ITL recorded), by fastForwardDrafts — not for vLLM, whose
	// steps are cut by the budget left and skipped or discarded by the async
	// rules (V-S1, V-S3): pass by pass.
	if s.record || (s.e.DraftTokens > 0 && (!s.summary || s.e.Backend == engine.VLLM)) || s.chunked >= 0 || (s.waitingLen() > 0 && !s.kvQueueBlocked(cur)) || len(cur.tp.Prefill) > 0 ||
		len(cur.entries) != len(cur.tp.Decode) {
		return nil
	}
	tA, ok := s.nextArrival()
	if !ok {
		tA = math.Inf(1)
	}
	barrier := s.barrier
	unseen := s.arrivalUnseen(tA)
	// A pass may not end at or beyond the driver's barrier (an open-loop stability
	// check instant): the driver observes the state at the first pass end there.
	// (Tested before the rows: an arrival ends most attempts here.)
	if !unseen(0, *start, *end) || *end >= barrier {
		return nil
	}
	if len(cur.entries) != len(s.running) && !s.trtContextsOut(cur) && !s.sglSpentOnly(cur) { // (these visit the rows)
		return nil
	}
	if s.e.DraftTokens > 0 {
		return s.fastForwardDrafts(ctx, cur, start, end, unseen)
	}
	k := math.MaxInt
	rows := s.rowBuf[:0] // the stretch's rows per ITL bucket (the rows never change)
	for _, en := range cur.entries {
		r := &s.reqs[en.r]
		if !en.decode {
			return nil
		}
		if !en.emits {
			continue // a spent row (sglSpentOnly): not in the stretch's passes
		}
		k = min(k, r.osl-r.gSched)
		if !s.summary { // rows feed s.fast, a no-op in a summary run
			rows = addBucketRow(rows, r.bucket, 1)
		}
	}
	s.rowBuf = rows
	if k = s.kvStretch(cur, min(k, s.holdLimit())); k < 2 {
		return nil
	}
	if err := s.countPass(ctx); err != nil {
		return err
	}
	s.complete(cur, *start, *end) // no row finishes: each has ≥ 2 outputs left
	s.now = *end
	if len(cur.entries) != len(s.running) {
		s.sglDropSpent(cur)
	}
	// A timing that prices a decode-only pass from its row count and summed context
	// prices the stretch without visiting the rows: pass j has every context j
	// longer, so X grows by D per pass (integers: the sums the rows would give).
	dp, block := s.t.(decodeOnlyPricer)
	block = block && s.kv.err == nil
	// A span pricer's price holds while X ≤ spanEnd: asked once per span.
	sp, _ := s.t.(decodeSpanPricer)
	spanEnd, spanMs := -1, 0.0
	D, X := len(cur.tp.Decode), cur.tp.DecodeContext()
	shift := 0 // block: contexts not yet advanced in cur.tp.Decode
	j := 0
	ps, pe := *start, *end
	collect := !s.summary // pass lengths feed s.fast (a summary run's records nothing)
	for j < k && unseen(j, ps, pe) && pe < barrier {
		if j > 0 { // the previous stretch pass completes in bulk
			if err := s.countPass(ctx); err != nil {
				return err
			}
			if collect {
				s.fast(pe-ps, rows)
			}
		}
		if block && X+D <= spanEnd { // inside the priced span: spanMs, checked when it was priced
			shift++
			X += D
			ps, pe = pe, pe+spanMs
			j++
			if !collect { // the span's next passes move only the clock: counted in bulk
				n := 0
				for j < k && unseen(j, ps, pe) && pe < barrier && X+D <= spanEnd {
					n++
					shift++
					X += D
					ps, pe = pe, pe+spanMs
					j++
				}
				if err := s.countPasses(ctx, n); err != nil {
					return err
				}
			}
			continue
		}
		var dt float64
		var err error
		if block {
			shift++
			X += D
			if sp != nil {
				dt, spanEnd, err = sp.DecodeOnlySpanMs(D, X)
				spanMs = dt
			} else {
				dt, err = dp.DecodeOnlyMs(D, X)
			}
			if err != nil || !(dt > 0) || math.IsInf(dt, 0) { // s.price's error, on the pass itself
				spanEnd = -1
				advanceContexts(cur, shift)
				shift = 0
				dt, err = s.price(cur)
			}
		} else {
			advanceContexts(cur, 1)
			dt, err = s.price(cur)
		}
		if err != nil {
			return err
		}
		ps, pe = pe, pe+dt
		j++
	}
	advanceContexts(cur, shift)
	// j passes were scheduled (the last is in flight over [ps, pe]); j−1 completed.
	s.kvAdvance(cur, j)
	s.recvAdvance(j) // each a schedule after a decode-only batch that received nothing (S-R7)
	s.holdAdvance(j)
	for _, en := range cur.entries {
		r := &s.reqs[en.r]
		r.gSched += j
		if j > 1 {
			r.gOut += j - 1
			r.last = ps
		}
	}
	s.now = ps
	*start, *end = ps, pe
	return nil
}

// arrivalUnseen returns the test a stretch makes before each schedule: that the
// schedule of the pass after stretch pass j (cur is pass 0), with pass j in
// flight over [ps, pe], receives no new request, tA being the next arrival.
// That schedule is made at pe when synchronous, at ps when asynchronous (V-R10),
// and absorbs what arrived by then — unless SGLang's receipt interval (S-R7)
// skips it: every schedule of the stretch follows a decode-only batch, so the
// (j+1)-th counts the interval once more from its count now and receives only
// when that count comes round to a multiple of the interval (recv). An arrival
// already due therefore waits for that schedule while the stretch runs on.
func (s *sim) arrivalUnseen(tA float64) func(j int, ps, pe float64) bool {
	async, every, count := s.e.AsyncScheduling, s.recvEvery, s.recvCount
	return func(j int, ps, pe float64) bool {
		t := pe
		if async {
			t = ps
		}
		return t < tA || every > 0 && (count+j+1)%every != 0 // not yet arrived, or a skipped receipt (S-R7)
	}
}

// trtContextsOut reports that every running request cur does not carry is a
// TensorRT-LLM context (prompt not complete) that the stretch's passes leave
// out as cur did: with cur's decode rows unchanged, each stretch schedule's
// micro-batch (T-R3) charges the same generation tokens and leaves the same
// budget, so a context that got no chunk gets none again, a whole prompt that
// did not fit does not fit again, and contexts that batch waiting held (T-R6)
// are held again on the same tokens, until its count reaches the timeout
// (holdLimit). Not under MAX_UTILIZATION with a KV pool, whose fit (T-R2) moves
// with every pass's blocks, nor for another backend.
func (s *sim) trtContextsOut(cur *simPass) bool {
	if s.e.Backend != engine.TRTLLM || s.kvPerPass() {
		return false
	}
	out := len(s.running) - len(cur.entries)
	for _, ri := range s.running {
		if r := &s.reqs[ri]; r.c < r.promptLen() {
			out--
		}
	}
	return out == 0
}

// sglSpentOnly reports that what cur carries beyond the running requests is
// spent rows (appendSpentRow) of requests that finished since cur was
// scheduled, and nobody waits while some run: SGLang's overlap scheduler ran cur's schedule
// while their final tokens were in flight, so cur computes a row for each that
// samples nothing (§3.2); the schedules after it no longer see them (they left
// running), so the stretch's passes carry cur's other rows (sglDropSpent).
func (s *sim) sglSpentOnly(cur *simPass) bool {
	if s.e.Backend != engine.SGLang || !s.e.AsyncScheduling || s.waitingLen() > 0 || len(s.running) == 0 {
		return false // (with nobody running, no pass follows cur)
	}
	extra := len(cur.entries) - len(s.running)
	for _, en := range cur.entries {
		if en.decode && !en.emits && s.reqs[en.r].finished {
			extra--
		}
	}
	return extra == 0
}

// sglDropSpent removes cur's spent rows (sglSpentOnly) once it completed, so
// that cur's rows are the stretch's, and leaves the state the first stretch
// schedule would (scheduleSGLang): the finishes since cur's schedule shrank
// running, which clears a sticky batch_is_full (sglFilterBatch), and the
// schedule notes the running length (sglNote).
func (s *sim) sglDropSpent(cur *simPass) {
	k := 0
	for i, en := range cur.entries {
		if en.emits {
			cur.entries[k], cur.tp.Decode[k] = en, cur.tp.Decode[i]
			k++
		}
	}
	cur.entries, cur.tp.Decode = cur.entries[:k], cur.tp.Decode[:k]
	s.sglFilterBatch()
	s.sglNote()
}

// holdLimit is the passes a stretch may schedule while TensorRT-LLM batch
// waiting holds the contexts cur's schedule held (T-R6, trtHoldContexts;
// s.ctxList is that schedule's, and a decode-only cur means they were held):
// the m-th schedule after it holds them again while the count, h after cur's,
// is below the timeout — h + m − 1 < batch_wait_timeout_iters — and lets them
// through at the next. Without held contexts, no limit.
func (s *sim) holdLimit() int {
	if !s.holding() {
		return math.MaxInt
	}
	return s.e.BatchWaitTimeoutIters - s.trtHeld
}

// holdAdvance counts n stretch schedules that held cur's contexts (holdLimit).
func (s *sim) holdAdvance(n int) {
	if s.holding() {
		s.trtHeld += n
	}
}

// holding reports that the latest schedule, a decode-only cur's, held
// contexts back (T-R6): it listed some for batch waiting to decide.
func (s *sim) holding() bool { return s.e.BatchWaiting() && len(s.ctxList) > 0 }

// decodeOnlyPricer is a timing that prices a decode-only pass from its number of
// rows and the sum of their context lengths alone (timing.Linear), exactly as its
// PassMs prices any such pass.
type decodeOnlyPricer interface {
	DecodeOnlyMs(rows, ctx int) (float64, error)
}

// decodeSpanPricer is a decodeOnlyPricer that also reports how far the summed
// context may grow with the same price (perfdb.PassTiming prices a bucket of
// mean contexts at one value): DecodeOnlySpanMs(rows, ctx) returns
// DecodeOnlyMs(rows, ctx) and the largest maxCtx ≥ ctx such that DecodeOnlyMs
// gives that same float64 for every summed context in [ctx, maxCtx]. A stretch
// then prices its passes once per span, not once per pass.
type decodeSpanPricer interface {
	DecodeOnlySpanMs(rows, ctx int) (ms float64, maxCtx int, err error)
}

// advanceContexts makes every decode row of p n tokens longer.
func advanceContexts(p *simPass, n int) {
	if n == 0 {
		return
	}
	for i := range p.tp.Decode {
		p.tp.Decode[i] += n
	}
}

// bucketRows counts the rows of a pass that belong to one ITL bucket.
type bucketRows struct {
	bucket int32
	n      float64
}

// addBucketRow adds n rows of bucket b (b < 0: not measured) to rows.
func addBucketRow(rows []bucketRows, b int32, n float64) []bucketRows {
	if b < 0 {
		return rows
	}
	if k := len(rows) - 1; k >= 0 && rows[k].bucket == b { // the common case: the bucket added last
		rows[k].n += n
		return rows
	}
	for i := range rows {
		if rows[i].bucket == b {
			rows[i].n += n
			return rows
		}
	}
	return append(rows, bucketRows{bucket: b, n: n})
}

// draftRow is one row of an MTP stretch: its request, the step number of its
// last scheduled step, the outputs it has left to schedule, and the tokens of
// its latest scheduled step.
type draftRow struct {
	r       int32
	m, left int
	last    int
}

// fastForwardDrafts is fastForward's stretch under MTP in a summary run. Each
// row's next steps emit engine.StepTokens of their numbers, so the rows' summed
// context grows by the tokens each pass scheduled, and the stretch stops at the
// pass that schedules some row's final token (left in flight), as the
// pass-by-pass recursion would run it: the same prices in the same order. No
// ITL is recorded (s.summary). Under TensorRT-LLM's GUARANTEED_NO_EVICT (its
// only draft policy) no KV moves inside the stretch; under SGLang EAGLE with a KV
// pool each step first checks the verify slots (sglDraftsFit; a step that does
// not fit ends the stretch, and the schedule refuses it), then keeps the input
// token and accepted drafts of every row, decays new_token_ratio and notes the
// peak, as scheduleSGLang does pass by pass (not with shared prefix blocks or
// session contexts: those stretches run pass by pass).
func (s *sim) fastForwardDrafts(ctx context.Context, cur *simPass, start, end *float64, unseen func(j int, ps, pe float64) bool) error {
	kvSteps := s.kvPerPass() // SGLang EAGLE: KV grows with every step
	if kvSteps && (s.share != nil || s.kv.ctx != nil) {
		return nil
	}
	a := s.e.DraftAccepted
	rows := s.draftBuf[:0]
	k := math.MaxInt
	for _, en := range cur.entries {
		r := &s.reqs[en.r]
		if !en.decode {
			return nil
		}
		// Steps after the in-flight one until the row schedules its final token.
		left := r.osl - r.gSched
		k = min(k, DecodeSteps(a, int(r.steps), left))
		rows = append(rows, draftRow{r: en.r, m: int(r.steps), left: left})
	}
	s.draftBuf = rows
	if k = min(k, s.holdLimit()); k < 2 {
		return nil
	}
	// The in-flight pass's own tokens: its rows' contexts grow by them first
	// (cur.extra lists its rows with accepted drafts in entry order).
	x := 0
	for i := range rows {
		rows[i].last = 1
		if x < len(cur.extra) && cur.extra[x].r == rows[i].r {
			rows[i].last += int(cur.extra[x].more)
			x++
		}
	}
	if kvSteps && !s.sglStretchFits(rows) {
		return nil // the first step's verify slots do not fit: the regular loop refuses it
	}
	if err := s.countPass(ctx); err != nil {
		return err
	}
	s.complete(cur, *start, *end) // no row finishes: its final token is ≥ 2 steps away
	s.now = *end
	dp, block := s.t.(decodeOnlyPricer)
	block = block && s.kv.err == nil
	D, X := len(cur.tp.Decode), cur.tp.DecodeContext()
	j := 0
	ps, pe := *start, *end
	barrier := s.barrier
	for j < k && unseen(j, ps, pe) && pe < barrier {
		if j > 0 {
			if kvSteps && !s.sglStretchFits(rows) {
				break // the pass in flight completes in the regular loop, whose next schedule refuses this step
			}
			if err := s.countPass(ctx); err != nil {
				return err
			}
		}
		// Schedule the next step of every row (rows[i] is cur.tp.Decode[i]): its
		// context grows by its latest step's tokens, and the new step emits
		// StepTokens (at most those left).
		grow := 0
		for i := range rows {
			w := &rows[i]
			grow += w.last
			cur.tp.Decode[i] += w.last
			w.m++
			w.last = min(engine.StepTokens(a, w.m), w.left)
			w.left -= w.last
		}
		if kvSteps {
			s.sglStretchKeep(rows)
		}
		X += grow
		var dt float64
		var err error
		if block {
			dt, err = dp.DecodeOnlyMs(D, X)
		}
		if !block || err != nil || !(dt > 0) || math.IsInf(dt, 0) {
			dt, err = s.price(cur)
		}
		if err != nil {
			return err
		}
		ps, pe = pe, pe+dt
		j++
	}
	// j steps were scheduled (the last in flight over [ps, pe]); j − 1 completed.
	s.recvAdvance(j) // each after a decode-only (verify) batch, receiving nothing (S-R7)
	s.holdAdvance(j)
	cur.extra = cur.extra[:0]
	for _, w := range rows {
		r := &s.reqs[w.r]
		r.steps = int32(w.m)
		r.gSched = r.osl - w.left
		if j > 1 {
			r.gOut = r.gSched - w.last
			r.last = ps
		}
		if w.last > 1 {
			cur.extra = append(cur.extra, draftOut{r: w.r, more: int32(w.last - 1)})
		}
	}
	s.now = ps
	*start, *end = ps, pe
	return nil
}

// sglStretchFits is sglDraftsFit for the next step of a stretch's rows (their
// scheduled outputs osl − left): the verify slots of every row fit the free
// blocks.
func (s *sim) sglStretchFits(rows []draftRow) bool {
	need := 0
	for _, w := range rows {
		need += s.sglVerifyBlocks(w.r, s.reqs[w.r].osl-w.left)
	}
	return need <= s.kvFree
}

// sglStretchKeep is one stretch step of scheduleSGLang's EAGLE decode after its
// rows were scheduled: each keeps the KV of its input token and accepted drafts
// (isl + scheduled outputs − 1, sglAddDraftStep; sglStretchFits checked the
// blocks), new_token_ratio decays (S-R5) and the pool's peak is noted (sglNote;
// the running batch is unchanged).
func (s *sim) sglStretchKeep(rows []draftRow) {
	for _, w := range rows {
		r := &s.reqs[w.r]
		s.kvGrow(w.r, r.isl+r.osl-w.left-1)
	}
	s.kv.ratio = math.Max(s.kv.ratio-sglDecay, sglMinRatio)
	s.kvNote()
}
