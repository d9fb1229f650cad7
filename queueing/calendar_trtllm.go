package queueing

import "github.com/aicdb/aicdb/engine"

// scheduleTRT is the TRT-LLM fused calendar (SCHEDULERS.md §4.3–§4.4) at slot
// level.
//
// Capacity (T-R1, GUARANTEED_NO_EVICT): waiting requests are admitted FCFS while
// fewer than max_batch_size are active and, when a KV capacity is set, the
// reservation ceil((isl + osl)/tokens_per_block) blocks fits the free blocks;
// the first that does not fit stops admission (head-of-line). Reservations are
// released at finish. Without a KV capacity only max_batch_size caps admission
// (under either policy). MAX_UTILIZATION with a KV capacity pauses instead
// (T-R2, trtMaxUtilFit).
//
// Micro-batch (T-R3), over active requests in arrival order with budget
// max_num_tokens: a generation request costs 1 + draft tokens (beam width 1; MTP
// drafts engine.Spec.DraftTokens for every request at every step); with chunking off a context
// costs its whole remaining prompt and one that does not fit stops the scan;
// with chunking on contexts are sized after the scan from the budget left, FCFS,
// a cut chunk rounded down to a multiple of tokens_per_block, and contexts with a
// zero chunk sit out. Reuse is applied after budgeting (§4.4): the budget is
// charged from the prompt position; a first chunk then moves past the reused
// prefix and keeps its size, its end floored to a block unless it reaches the
// prompt's end (TensorRT-LLM's setPrepopulatedPromptLen, T-R5).
func (s *sim) scheduleTRT(p *simPass) {
	var act []int32
	if s.kv.on && s.e.CapacityPolicy == engine.PolicyMaxUtilization {
		act = s.trtMaxUtilFit()
	} else {
		s.trtAdmitNoEvict()
		act = s.running
	}
	s.trtMicroBatch(p, act)
	s.kvNote()
}

// trtAdmitNoEvict is the T-R1 capacity step: admit from the waiting queue.
func (s *sim) trtAdmitNoEvict() {
	if s.waitingLen() == 0 {
		return
	}
	taken := len(s.running) // seatsTaken, with the final-token trim in the same pass
	if s.e.AsyncScheduling {
		if n := s.trtTrimFinal(); s.tr.FinalFreesSeat {
			taken -= n
		}
	}
	for ; s.waitingLen() > 0 && s.seatFree(taken); taken++ {
		ri := s.waiting[s.wHead]
		r := &s.reqs[ri]
		if s.kv.on {
			need := ceilDiv(r.isl+r.osl, s.e.BlockSize)
			if need > s.kvFree {
				break
			}
			s.kvFree -= need
			r.blocks = need
			if s.kv.ctx != nil { // the reservation counts as blocks in use (T-R1)
				s.kvCtxTake(ri)
			}
		}
		s.popWaiting()
		r.c = 0
		s.running = append(s.running, ri)
	}
}

// trtTrimFinal counts the running requests whose final token is in flight
// (they free their seat, engine.Traits.FinalFreesSeat: seatsTaken) and, with a
// KV pool, releases what the overlap executor no longer reserves for them: the
// capacity scheduler skips such a request (noScheduleAfterState
// GENERATION_TO_COMPLETE) before it sums the blocks the scheduled requests
// need to completion (T-R1), so it keeps only the blocks it has allocated,
// ⌈(isl + osl − 1)/tokens_per_block⌉ (its final token's KV is never written),
// not its reservation ⌈(isl + osl)/tokens_per_block⌉.
func (s *sim) trtTrimFinal() int {
	n, kv := 0, s.kv.on
	for _, ri := range s.running {
		r := &s.reqs[ri]
		if r.gSched < r.osl {
			continue
		}
		n++
		if kv {
			s.trtKeepWritten(r)
		}
	}
	return n
}

// trtKeepWritten lowers r's KV from its reservation ⌈(isl + osl)/tokens_per_block⌉
// to the blocks it has written, ⌈(isl + osl − 1)/tokens_per_block⌉ (its final
// token's KV is never written), the difference back to the free blocks: once
// its final token is in flight (trtTrimFinal) or, on a prefill hold kernel,
// once it finished and waits for its pull (T-D1; the DES's context-only
// request holds its table, the prompt's blocks).
func (s *sim) trtKeepWritten(r *simReq) {
	if keep := ceilDiv(r.isl+r.osl-1, s.e.BlockSize); r.blocks > 0 && keep < r.blocks {
		s.kvFree += r.blocks - keep
		r.blocks = keep
	}
}

// trtMicroBatch is the T-R3 micro-batch over the capacity step's list act,
// then batch waiting (T-R6) when the engine has it: the generation rows go
// into the pass as the scan meets them (they are the micro-batch's whether the
// contexts are held or not), the scheduled contexts are listed (s.ctxList)
// and put in the pass after them only if trtHoldContexts lets them go.
// Without batch waiting each context goes in as the scan meets it.
func (s *sim) trtMicroBatch(p *simPass, act []int32) {
	tokens, count := 0, 0
	gen := 1 + s.e.DraftTokens // a generation request's tokens (T-R3)
	drafts := gen > 1
	wait := s.e.BatchWaiting()
	s.chunkList, s.ctxList = s.chunkList[:0], s.ctxList[:0]
	for _, ri := range act {
		r := &s.reqs[ri]
		if r.gSched >= r.osl {
			continue // async/overlap: final token in flight
		}
		if r.c >= r.promptLen() {
			if tokens+gen > s.budget {
				break
			}
			if s.kv.on && s.e.CapacityPolicy == engine.PolicyMaxUtilization {
				s.kvGrow(ri, decodeKVTokens(r)) // the block of its next token (fit, T-R2)
			}
			if drafts {
				s.addDraftStep(p, ri)
			} else {
				s.addDecode(p, ri)
			}
			tokens += gen
		} else if !s.e.EnableChunkedPrefill {
			t := r.promptLen() - r.c
			if tokens+t > s.budget {
				break
			}
			s.trtContext(p, ctxItem{r: ri, n: int32(t), rest: int32(t)}, wait)
			tokens += t
		} else {
			s.chunkList = append(s.chunkList, ri)
		}
		count++
		if count >= s.seqCap {
			break
		}
	}
	capacity := s.budget - tokens
	for _, ri := range s.chunkList {
		r := &s.reqs[ri]
		rest := r.promptLen() - r.c
		chunk := min(rest, capacity)
		if chunk < rest {
			chunk = chunk / s.e.BlockSize * s.e.BlockSize
		}
		if chunk <= 0 {
			continue
		}
		capacity -= chunk
		s.trtContext(p, ctxItem{r: ri, n: int32(chunk), rest: int32(rest)}, wait)
	}
	if len(s.ctxList) == 0 || s.trtHoldContexts(len(p.entries)*gen) { // p holds only generation rows here
		return
	}
	for _, c := range s.ctxList {
		s.trtAddContext(p, c)
	}
}

// ctxItem is a context the micro-batch scheduled: request r, n budgeted
// tokens, and the rest of its prompt when it was sized.
type ctxItem struct {
	r       int32
	n, rest int32
}

// trtContext schedules context c (trtAddContext), or with wait lists it in
// s.ctxList for batch waiting to decide (trtHoldContexts).
func (s *sim) trtContext(p *simPass, c ctxItem, wait bool) {
	if wait {
		s.ctxList = append(s.ctxList, c)
		return
	}
	s.trtAddContext(p, c)
}

// trtAddContext puts context c in p: its first chunk starts it (trtStart); a
// cut first chunk of a prompt with a reused prefix moves past the prefix
// keeping its size (trtFirstChunkEnd: the budget was charged c.n tokens all
// the same).
func (s *sim) trtAddContext(p *simPass, c ctxItem) {
	s.trtStart(c.r)
	n := int(c.n)
	if r := &s.reqs[c.r]; r.c == 0 && r.prefix > 0 && c.n < c.rest {
		n = trtFirstChunkEnd(r.prefix, n, r.promptLen(), s.e.BlockSize)
	}
	s.addPrompt(p, c.r, n)
}

// trtHoldContexts is TensorRT-LLM's batch waiting (T-R6, PyExecutor
// _waiting_requests, called from _schedule) for the contexts of s.ctxList
// scheduled beside generation rows of genTokens tokens (1 + drafts each): with
// no generation row nothing is held ("no need to wait, to avoid dead
// waiting"); otherwise the contexts go when the schedule's tokens — each
// context's whole token list (get_tokens: its prompt, plus the outputs a
// paused one recomputes), whatever its chunk, and the generation rows' — reach
// batch_wait_max_tokens_ratio × max_num_tokens, or when the executor has held
// contexts batch_wait_timeout_iters times since it last let them through (the
// count is reset only then); else they are held this pass — they stay
// admitted (T-R1) — and the count grows. It reports whether they are held.
func (s *sim) trtHoldContexts(genTokens int) bool {
	if genTokens == 0 {
		return false
	}
	tokens := genTokens
	for _, c := range s.ctxList {
		tokens += s.reqs[c.r].promptLen()
	}
	if s.trtHeld >= s.e.BatchWaitTimeoutIters || float64(tokens) >= s.e.BatchWaitMaxTokensRatio*float64(s.budget) {
		s.trtHeld = 0
		return false
	}
	s.trtHeld++
	return true
}

// trtFirstChunkEnd is where a cut first chunk of chunk budgeted tokens ends for
// a prompt of promptLen tokens whose first prefix tokens are reused
// (setPrepopulatedPromptLen, T-R5): it starts after the prefix and keeps its
// size, its end floored to a block of unit tokens unless it reaches the prompt's
// end. The calendar (trtMicroBatch) and the screening tier's lone prompt
// (alonePrefillMs) chunk with it.
func trtFirstChunkEnd(prefix, chunk, promptLen, unit int) int {
	if end := prefix + chunk; end < promptLen {
		return end / unit * unit
	}
	return promptLen
}
