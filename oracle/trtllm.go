package oracle

import "github.com/aicdb/aicdb/engine"

// The TensorRT-LLM scheduler (SCHEDULERS.md §4), PyTorch backend: the
// GUARANTEED_NO_EVICT capacity scheduler (T-R1), the micro-batch scheduler (T-R3),
// whole-prompt KV allocation at the first context chunk, block reuse applied after
// budgeting (T-R5, full blocks only), and the overlap executor as a two-deep batch
// queue (§4.2). Beam width 1, no disaggregation. One-model MTP (engine.Spec
// DraftTokens): a generation request costs 1 + drafts against max_num_tokens
// (T-R3) and its m-th decode step emits engine.StepTokens(DraftAccepted, m) tokens
// (at most those left); the reservation has no draft term (T-R1).
//
// State mapping: s.waiting holds requests that never got a context chunk (no KV);
// s.running holds started requests (KV allocated) in arrival order. Together they are
// active_requests. r.c counts tokens computed or in flight (prompt position, then one
// per scheduled decode).

// trtCtx is r's context length: its prompt plus the outputs it had when its context
// (re)started (a paused request restarts as context over prompt + outputs, T-R2).
func trtCtx(r *req) int {
	if r.st != stRunning {
		return r.p + r.g // not started (or paused): the context it will start with
	}
	return r.p + r.gStart
}

// trtOutSched is the number of output tokens r has scheduled (sampled or in flight).
func trtOutSched(r *req) int {
	if r.c < trtCtx(r) {
		return r.gStart
	}
	return r.gStart + r.c - trtCtx(r) + 1
}

// trtRemainingBlocks is remaining_blocks_to_completion (T-R1):
// ceil((P + max_new_tokens) / tokens_per_block) − blocks already allocated.
func (s *Sim) trtRemainingBlocks(r *req) int {
	return max((r.p+r.maxTokens+s.bs-1)/s.bs-len(r.table), 0)
}

// scheduleTRT forms one pass (T-R1 capacity, then T-R3 micro-batch, then
// prepare_resources).
func (s *Sim) scheduleTRT(pb *passBuf) {
	e := &s.eng
	var fit []int32
	if e.CapacityPolicy == engine.PolicyMaxUtilization {
		fit = s.trtCapacityMaxUtil(pb)
	} else {
		fit = s.trtCapacityNoEvict()
	}

	// T-R3 micro-batch over the fitting list, order preserved.
	tokens, count := 0, 0
	gen := 1 + e.DraftTokens // a generation request's tokens: beam width + drafts (T-R3)
	chunks := s.trt.chunks[:0]
	sched := s.trt.sched[:0]
	for _, ri := range fit {
		r := &s.reqs[ri]
		if r.c >= trtCtx(r) { // generation
			if tokens+gen > e.MaxNumTokens {
				break
			}
			sched = append(sched, trtItem{ri, 1})
			tokens += gen
		} else if !e.EnableChunkedPrefill {
			t := trtCtx(r) - r.c
			if tokens+t > e.MaxNumTokens {
				break
			}
			sched = append(sched, trtItem{ri, t})
			tokens += t
		} else {
			chunks = append(chunks, ri)
		}
		count++
		if count >= e.MaxBatchSize {
			break
		}
	}
	if len(chunks) > 0 {
		capacity := e.MaxNumTokens - tokens
		rest := 0
		for _, ri := range chunks {
			rest += trtCtx(&s.reqs[ri]) - s.reqs[ri].c
		}
		for _, ri := range chunks {
			r := &s.reqs[ri]
			c := trtCtx(r) - r.c
			if rest > e.MaxNumTokens-tokens { // FIRST_COME_FIRST_SERVED
				c = min(c, capacity)
				if c < trtCtx(r)-r.c {
					c = c / s.bs * s.bs // chunk_unit_size = tokens_per_block
				}
				capacity -= c
			}
			if c > 0 {
				sched = append(sched, trtItem{ri, c})
			}
		}
	}
	sched = s.trtBatchWait(sched)
	s.trt.chunks, s.trt.sched = chunks, sched

	// prepare_resources and the pass entries.
	for _, it := range sched {
		r := &s.reqs[it.r]
		first := r.st == stWaiting
		if first { // first context chunk: addSequence
			s.waiting.remove(it.r)
			s.running = append(s.running, it.r)
			s.insertRunningOrdered()
			r.st = stRunning
			r.gStart = r.g
			s.ensureTable(it.r)
			hits := s.computedBlocksTRT(it.r)
			for _, b := range hits {
				s.pool.touch(b)
				r.table = append(r.table, b)
			}
			r.nCachedBl = len(hits)
			r.hits = len(hits) * s.bs
			if r.numCached < 0 {
				r.numCached = r.hits
			}
			for need := (trtCtx(r) + s.bs - 1) / s.bs; len(r.table) < need; {
				r.table = append(r.table, s.popBlock())
			}
		}
		from := r.c
		end := r.c + it.n
		if r.c < trtCtx(r) { // context chunk: reuse applied after budgeting (§4.4)
			if ctx := trtCtx(r); first && r.hits > 0 && e.EnableChunkedPrefill && end < ctx {
				// setPrepopulatedPromptLen: the context position jumps to the reused
				// length and the chunk keeps its size, its end floored to a block
				// unless it is the prompt's last chunk (T-R5).
				if end = r.hits + it.n; end < ctx {
					end = end / s.bs * s.bs
				} else {
					end = ctx
				}
			}
			from = max(r.c, r.hits)
			r.c = max(end, r.hits)
		} else { // generation: slots for the step's tokens
			out := 1
			if e.DraftTokens > 0 { // the m-th MTP step emits StepTokens(m), at most the outputs left
				r.steps++
				out = min(engine.StepTokens(e.DraftAccepted, r.steps), r.maxTokens-trtOutSched(r))
			}
			for need := (r.c + out + s.bs - 1) / s.bs; len(r.table) < need; {
				r.table = append(r.table, s.popBlock())
			}
			r.c += out
			pb.entries = append(pb.entries, entry{r: it.r, more: int32(out - 1), n: 1, from: from, samples: true})
			continue
		}
		pb.entries = append(pb.entries, entry{r: it.r, n: max(end-from, 0), from: from, samples: r.c >= trtCtx(r)})
	}
}

// trtBatchWait is PyExecutor._schedule's batch waiting (T-R6,
// _waiting_requests), applied to the micro-batch's items when the engine has it
// (engine.Spec.BatchWaiting): when the items hold both contexts and generation
// requests, it keeps the contexts only if the schedule's tokens — each context's
// whole token list (get_tokens(0): its prompt, and the outputs a paused one
// recomputes, trtCtx) plus 1 + drafts per generation request — reach
// batch_wait_max_tokens_ratio × max_num_tokens, or if contexts have been held
// batch_wait_timeout_iters times since they last went (the count is reset
// then); otherwise it drops them from this pass (they stay active) and counts
// the hold. The generation items are unchanged either way.
func (s *Sim) trtBatchWait(sched []trtItem) []trtItem {
	e := &s.eng
	if !e.BatchWaiting() {
		return sched
	}
	ctx, gen := 0, 0
	for _, it := range sched {
		if r := &s.reqs[it.r]; r.c < trtCtx(r) {
			ctx += trtCtx(r)
		} else {
			gen += 1 + e.DraftTokens
		}
	}
	if ctx == 0 || gen == 0 {
		return sched
	}
	if s.trt.held >= e.BatchWaitTimeoutIters || float64(ctx+gen) >= e.BatchWaitMaxTokensRatio*float64(e.MaxNumTokens) {
		s.trt.held = 0
		return sched
	}
	s.trt.held++
	k := 0
	for _, it := range sched {
		if r := &s.reqs[it.r]; r.c >= trtCtx(r) {
			sched[k] = it
			k++
		}
	}
	return sched[:k]
}

// trtCapacityNoEvict is GUARANTEED_NO_EVICT (T-R1): generation requests first,
// reserving their blocks to completion, then contexts in arrival order (started ones
// first: they arrived earlier), head-of-line on the first that does not fit.
func (s *Sim) trtCapacityNoEvict() []int32 {
	e := &s.eng
	fit := s.trt.fit[:0]
	avail := s.pool.nfree
	if s.dis != nil {
		avail -= s.dis.xferBlocks // gen-init transfers in flight hold reservations (T-D3)
	}
	for _, ri := range s.running {
		r := &s.reqs[ri]
		if r.c < trtCtx(r) {
			continue // a partially chunked context: pending (pass 2)
		}
		if len(fit) >= e.MaxBatchSize {
			break
		}
		if trtOutSched(r) >= r.maxTokens {
			continue // overlap: its last token is in flight (anticipated length stop)
		}
		fit = append(fit, ri)
		avail -= s.trtRemainingBlocks(r)
	}
	stopped := false
	for _, ri := range s.running {
		r := &s.reqs[ri]
		if r.c >= trtCtx(r) {
			continue
		}
		if len(fit) >= e.MaxBatchSize {
			stopped = true
			break
		}
		need := s.trtRemainingBlocks(r)
		if need > avail {
			stopped = true
			break
		}
		avail -= need
		fit = append(fit, ri)
	}
	for i := 0; !stopped && i < s.waiting.len(); i++ {
		wi := s.waiting.at(i)
		r := &s.reqs[wi]
		if len(fit) >= e.MaxBatchSize {
			break
		}
		need := s.trtRemainingBlocks(r)
		if need > avail {
			break
		}
		avail -= need
		fit = append(fit, wi)
	}
	s.trt.fit = fit
	return fit
}

// trtCapacityMaxUtil is MAX_UTILIZATION (T-R2): walk the active requests in order
// (started ones, then never-started, both in arrival order), scheduling each whose
// next-step blocks fit (a first context chunk needs its whole context, a generation
// step the block of its next token); when one does not fit, pause the last started
// request not yet passed (its blocks count as freed), move the end marker before it
// and retry; with none left, stop. Paused requests lose their KV and restart later as
// context over prompt + outputs.
func (s *Sim) trtCapacityMaxUtil(pb *passBuf) []int32 {
	e := &s.eng
	// A started request whose last token is in flight (overlap) is skipped before
	// the walk (noScheduleAfterState, T-R1/T-R2): neither scheduled nor a pause victim.
	list := s.trt.list[:0]
	for _, ri := range s.running {
		if r := &s.reqs[ri]; !(r.c >= trtCtx(r) && trtOutSched(r) >= r.maxTokens) {
			list = append(list, ri)
		}
	}
	nStarted := len(list)
	for i := 0; i < s.waiting.len(); i++ {
		list = append(list, s.waiting.at(i))
	}
	s.trt.list = list
	fit := s.trt.fit[:0]
	free, used := s.pool.nfree, 0
	end := len(list)
	paused := s.trt.paused[:0]
	for i := 0; i < end; {
		ri := list[i]
		r := &s.reqs[ri]
		if len(fit) >= e.MaxBatchSize {
			break
		}
		need := 0
		switch {
		case i >= nStarted: // first context chunk: the whole context
			need = (r.numTokens() + s.bs - 1) / s.bs
		case r.c >= trtCtx(r): // generation: the block of the next token
			need = max((r.c+1+s.bs-1)/s.bs-len(r.table), 0)
		}
		if used+need <= free {
			used += need
			fit = append(fit, ri)
			i++
			continue
		}
		j := min(end, nStarted) - 1 // the last started request in [i, end)
		if j < i {
			break
		}
		paused = append(paused, list[j])
		for _, b := range s.reqs[list[j]].table {
			if s.pool.ref[b] == 1 { // blocks shared with others stay in use
				free++
			}
		}
		end = j
	}
	s.trt.paused = paused
	for _, vi := range paused { // last started first: pushing at the head keeps arrival order
		for k, ri := range s.running {
			if ri == vi {
				s.running = append(s.running[:k], s.running[k+1:]...)
				break
			}
		}
		v := &s.reqs[vi]
		s.freeTable(vi)
		v.st, v.c, v.hits = stWaiting, 0, 0
		v.preemptions++
		s.waiting.pushFront(vi)
		pb.preempted = append(pb.preempted, vi)
	}
	s.trt.fit = fit
	return fit
}

// insertRunningOrdered keeps s.running in arrival order after an append (a request
// started later may have arrived earlier than some started ones only if it was
// skipped, which head-of-line admission prevents, or if it was created after them:
// a staggered closed loop creates its clients' first requests ahead of time).
func (s *Sim) insertRunningOrdered() {
	for i := len(s.running) - 1; i > 0 && s.arrivedBefore(s.running[i], s.running[i-1]); i-- {
		s.running[i], s.running[i-1] = s.running[i-1], s.running[i]
	}
}

// arrivedBefore orders requests as TensorRT-LLM's request ids do: by arrival, ties
// in creation order. Creation order alone is not arrival order when a driver creates
// a request ahead of time (a staggered client's first request arriving after another
// client's replacement was created).
func (s *Sim) arrivedBefore(a, b int32) bool {
	ra, rb := s.reqs[a].arrival, s.reqs[b].arrival
	return ra < rb || (ra == rb && a < b)
}

// computedBlocksTRT is the reuse lookup of addSequence (T-R5): full blocks of the
// first P − 1 prompt tokens found in the reuse tree (partial-block reuse not modelled).
func (s *Sim) computedBlocksTRT(ri int32) []int32 {
	s.hitBuf = s.hitBuf[:0]
	if !s.eng.EnablePrefixCaching {
		return s.hitBuf
	}
	r := &s.reqs[ri]
	nb := (trtCtx(r) - 1) / s.bs
	for i := 0; i < nb; i++ {
		b := s.lookupBlock(ri, i)
		if b < 0 {
			break
		}
		s.hitBuf = append(s.hitBuf, b)
	}
	return s.hitBuf
}

// updateTRT applies a pass's outputs: contexts whose last chunk ran produce their
// first token and store their context blocks for reuse; finished requests store the
// rest and free their KV.
func (s *Sim) updateTRT(pb *passBuf) {
	anyFinished := false
	for _, en := range pb.entries {
		r := &s.reqs[en.r]
		if r.st == stFinished || !en.samples {
			continue
		}
		if r.g == r.gStart {
			s.storeBlocks(en.r, trtCtx(r)) // context blocks become reusable after the context phase
		}
		for k := int32(0); k <= en.more; k++ { // the sampled token, then the step's accepted drafts
			if s.appendToken(en.r, pb.end) {
				s.storeBlocks(en.r, r.p+r.g-1) // the rest on release (computed tokens only)
				anyFinished = true
				s.finishReq(en.r, pb.end)
				break
			}
		}
	}
	if anyFinished {
		s.dropFinished()
	}
}

// storeBlocks registers r's full blocks up to upTo tokens in the reuse tree.
func (s *Sim) storeBlocks(ri int32, upTo int) {
	if s.eng.EnablePrefixCaching {
		s.cacheBlocks(ri, upTo)
	}
}

// trtItem is one micro-batch item: request and tokens charged to the budget.
type trtItem struct {
	r int32
	n int
}

// trtState holds the TRT-LLM core's reusable buffers.
type trtState struct {
	list   []int32
	paused []int32
	fit    []int32
	chunks []int32
	sched  []trtItem
	// held is PyExecutor's batch_wait_iters_count: schedules that held their
	// contexts since batch waiting last let them through (T-R6).
	held int
}
