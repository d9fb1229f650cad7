package oracle

import (
	"fmt"

	"github.com/aicdb/aicdb/engine"
)

// The vLLM v1 scheduler (SCHEDULERS.md §2), FCFS policy, no connector, full
// attention, max_model_len unbounded; MTP speculative decoding as
// docs/queueing.md's V-S1..V-S4 state it (the scheduler's spec_token_ids,
// lookahead slots and rejection rollback), preempting under it only when
// scheduling is synchronous.

// scheduleVLLM forms one pass (Scheduler.schedule, V-R1..V-R5, V-R11).
func (s *Sim) scheduleVLLM(pb *passBuf) {
	e := &s.eng
	budget := e.MaxNumBatchedTokens // V-R1
	thr := e.LongPrefillTokenThreshold

	// V-R2 running phase: running requests first, in admission order.
	for i := 0; i < len(s.running) && budget > 0; {
		ri := s.running[i]
		r := &s.reqs[ri]
		// V-R12: async skip when the in-flight passes provably reach max_tokens.
		if r.ph > 0 && r.c+2-r.ph >= r.p+r.maxTokens {
			i++
			continue
		}
		// V-S1: num_tokens_with_spec + placeholders − num_computed.
		n := r.numTokens() + r.spec + r.ph - r.c
		if thr > 0 && n > thr {
			n = thr
		}
		n = min(n, budget)
		if n <= 0 {
			i++ // skip, not break (§2.11)
			continue
		}
		ahead := e.DraftTokens // V-S2: k lookahead slots for every running request
		if ahead > 0 && e.AsyncScheduling && !s.allocRunning(ri, n, ahead) {
			if s.fatal == nil {
				s.fatal = fmt.Errorf("oracle run: vLLM speculative decoding: request %s's KV slots (with %d lookahead) do not fit the %d free blocks, so vLLM would preempt, which is not simulated under speculative decoding with async scheduling; raise num_gpu_blocks, lower the load or turn async scheduling off", r.id, ahead, s.pool.nfree)
			}
			return
		}
		ok := false
		for {
			if s.allocRunning(ri, n, ahead) {
				ok = true
				break
			}
			// V-R6: FCFS victim = last of running (most recently admitted).
			v := s.running[len(s.running)-1]
			s.running = s.running[:len(s.running)-1]
			s.preemptVLLM(v)
			pb.preempted = append(pb.preempted, v)
			if v == ri {
				break
			}
		}
		if !ok {
			break // stop the running phase entirely
		}
		en := entry{r: ri, n: n}
		if r.spec > 0 { // an MTP decode step (V-S1): the drafts the budget left room for
			en.verify = true
			en.spec = int32(min(r.spec, max(0, n+r.c-r.numTokens()-r.ph)))
			r.spec = 0 // update_draft_token_ids proposes the next ones
		}
		pb.entries = append(pb.entries, en)
		budget -= n
		i++
	}

	// V-R3 waiting phase: only if nothing was preempted in this pass.
	if len(pb.preempted) == 0 {
		for s.waiting.len() > 0 && budget > 0 {
			if len(s.running) == e.MaxNumSeqs {
				break
			}
			wi := s.waiting.at(0)
			if s.admitRemoteVLLM(pb, wi) { // V-D4: pulled prompt KV, one token to recompute
				budget--
				continue
			}
			w := &s.reqs[wi]
			hits := s.computedBlocks(wi) // V-R8 (w.c == 0 always: no connector)
			h := len(hits) * s.bs
			n := w.numTokens() - h
			if thr > 0 && n > thr {
				n = thr
			}
			if !e.EnableChunkedPrefill && n > budget {
				break
			}
			n = min(n, budget)
			if !s.allocNew(wi, h, n, hits) {
				break // head-of-line: no skipping
			}
			s.waiting.popFront()
			s.running = append(s.running, wi)
			w.st = stRunning
			w.c = h
			w.hits = h
			if w.numCached < 0 {
				w.numCached = h
			}
			pb.entries = append(pb.entries, entry{r: wi, n: n})
			budget -= n
		}
	}

	// V-R5 / V-R11 _update_after_schedule.
	for k := range pb.entries {
		en := &pb.entries[k]
		r := &s.reqs[en.r]
		en.from = r.c
		r.c += en.n
		prefillChunk := r.c < r.numTokens()+r.ph
		en.samples = !prefillChunk
		if s.eng.AsyncScheduling && !prefillChunk {
			r.ph += 1 + int(en.spec)   // V-S1: the sampled token and the drafts, as placeholders
			r.spec = s.eng.DraftTokens // the drafts' placeholders for the next step
		}
	}
}

// computedBlocks is get_computed_blocks (V-R8): the longest run of cached full blocks
// of w's tokens, capped so at least the last token is recomputed (num_tokens − 1).
func (s *Sim) computedBlocks(wi int32) []int32 {
	s.hitBuf = s.hitBuf[:0]
	if !s.eng.EnablePrefixCaching {
		return s.hitBuf
	}
	w := &s.reqs[wi]
	maxHit := w.numTokens() - 1
	nb := maxHit / s.bs
	for i := 0; i < nb; i++ {
		b := s.lookupBlock(wi, i)
		if b < 0 {
			break
		}
		s.hitBuf = append(s.hitBuf, b)
	}
	return s.hitBuf
}

// allocNew is allocate_slots for a request being admitted with prefix hits (V-R9).
// Nothing changes on failure.
func (s *Sim) allocNew(wi int32, h, n int, hits []int32) bool {
	w := &s.reqs[wi]
	need := (h + n + s.bs - 1) / s.bs
	evictable := 0
	for _, b := range hits {
		if s.pool.ref[b] == 0 {
			evictable++ // reviving a cached free block also consumes a free slot
		}
	}
	if need-len(hits)+evictable > s.pool.nfree {
		return false
	}
	s.ensureTable(wi)
	for _, b := range hits {
		s.pool.touch(b)
		w.table = append(w.table, b)
	}
	w.nCachedBl = len(hits)
	for len(w.table) < need {
		w.table = append(w.table, s.popBlock())
	}
	s.cacheBlocks(wi, min(h+n, w.numTokens()))
	return true
}

// allocRunning is allocate_slots for a running request (V-R9) with ahead
// lookahead slots (V-S2: blocks for num_computed + n + ahead tokens; only the
// tokens up to num_tokens are cached).
func (s *Sim) allocRunning(ri int32, n, ahead int) bool {
	r := &s.reqs[ri]
	need := (r.c + n + ahead + s.bs - 1) / s.bs
	if need-len(r.table) > s.pool.nfree {
		return false
	}
	for len(r.table) < need {
		r.table = append(r.table, s.popBlock())
	}
	s.cacheBlocks(ri, min(r.c+n, r.numTokens()))
	return true
}

// cacheBlocks registers every block of r that is full up to upTo tokens, at schedule
// time, before the pass computes it (V-R9: same-pass prefix sharing).
func (s *Sim) cacheBlocks(ri int32, upTo int) {
	if !s.eng.EnablePrefixCaching {
		return
	}
	r := &s.reqs[ri]
	full := min(upTo/s.bs, len(r.table))
	if full <= r.nCachedBl {
		return
	}
	for i := r.nCachedBl; i < full; i++ {
		if b := r.table[i]; !s.pool.hashed[b] {
			s.registerBlock(ri, i, b)
		}
	}
	r.nCachedBl = full
}

// preemptVLLM is _preempt_request (V-R6): free blocks (reverse order, hashes kept),
// c := 0, num_preemptions += 1, push at the head of waiting. Placeholders of passes
// already in flight are kept (§2.8).
func (s *Sim) preemptVLLM(vi int32) {
	v := &s.reqs[vi]
	s.freeTable(vi)
	v.st = stWaiting
	v.c = 0
	v.spec = 0 // spec_token_ids dropped: the recompute samples before new drafts
	v.preemptions++
	s.waiting.pushFront(vi)
	if need := (v.numTokens() + s.bs - 1) / s.bs; need > usableBlocks(&s.eng) && s.fatal == nil {
		// Its next token needs all num_tokens in KV: more blocks than exist.
		s.fatal = fmt.Errorf("oracle run: request %s can never finish: after %d output tokens it needs %d KV blocks for its next token but the pool has %d usable (num_gpu_blocks − 1); it would be preempted and recomputed forever",
			v.id, v.g, need, usableBlocks(&s.eng))
	}
}

// updateVLLM is update_from_output (V-R7) for one pass whose outputs arrived.
func (s *Sim) updateVLLM(pb *passBuf) {
	anyFinished := false
	for _, en := range pb.entries {
		r := &s.reqs[en.r]
		if r.st == stFinished || !en.samples {
			continue // finished while in flight (async), or a partial prefill: no token
		}
		wasRunning := r.st == stRunning
		emit := 1
		if en.verify { // V-S1, V-S4: 1 + accepted of the verified drafts; the rejected leave num_computed
			r.steps++
			acc := min(engine.StepTokens(s.eng.DraftAccepted, r.steps)-1, int(en.spec))
			r.c -= int(en.spec) - acc
			if s.eng.AsyncScheduling {
				r.ph -= int(en.spec) - acc
			}
			emit += acc
		}
		stopped := false
		done := 0
		for done < emit && !stopped { // appended one by one: a stop ends the step's tokens
			stopped = s.appendToken(en.r, pb.end)
			done++
		}
		if s.eng.AsyncScheduling {
			r.ph -= done
			if wasRunning {
				s.cacheBlocks(en.r, r.c-r.ph)
			}
		} else if s.eng.DraftTokens > 0 && !stopped {
			r.spec = s.eng.DraftTokens // the drafter's proposals for the next step
		}
		if stopped {
			if !wasRunning {
				s.waiting.remove(en.r) // stopped while preempted (async)
			}
			anyFinished = true
			s.finishReq(en.r, pb.end)
		}
	}
	if anyFinished {
		s.dropFinished()
	}
}
