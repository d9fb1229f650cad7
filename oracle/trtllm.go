package oracle

// The TensorRT-LLM scheduler (SCHEDULERS.md §4), PyTorch backend: the
// GUARANTEED_NO_EVICT capacity scheduler (T-R1), the micro-batch scheduler (T-R3),
// whole-prompt KV allocation at the first context chunk, block reuse applied after
// budgeting (T-R5, full blocks only), and the overlap executor as a two-deep batch
// queue (§4.2). Beam width 1, no draft tokens, no disaggregation.
//
// State mapping: s.waiting holds requests that never got a context chunk (no KV);
// s.running holds started requests (KV allocated) in arrival order. Together they are
// active_requests. r.c counts tokens computed or in flight (prompt position, then one
// per scheduled decode).

// trtOutSched is the number of output tokens r has scheduled (sampled or in flight).
func trtOutSched(r *req) int {
	if r.c < r.p {
		return 0
	}
	return r.c - r.p + 1
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
	fit := s.trt.fit[:0]
	// T-R1 pass 1: generation requests in order, reserving their blocks to completion.
	avail := s.pool.nfree
	for _, ri := range s.running {
		r := &s.reqs[ri]
		if r.c < r.p {
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
	// T-R1 pass 2: contexts in arrival order (started ones first: they arrived
	// earlier), head-of-line on the first that does not fit.
	ctxStart := len(fit)
	stopped := false
	for _, ri := range s.running {
		r := &s.reqs[ri]
		if r.c >= r.p {
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

	// T-R3 micro-batch over the fitting list, order preserved.
	tokens, count := 0, 0
	chunks := s.trt.chunks[:0]
	sched := s.trt.sched[:0]
	for k, ri := range fit {
		r := &s.reqs[ri]
		if k < ctxStart { // generation
			if tokens+1 > e.MaxNumTokens {
				break
			}
			sched = append(sched, trtItem{ri, 1})
			tokens++
		} else if !e.EnableChunkedPrefill {
			t := r.p - r.c
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
			rest += s.reqs[ri].p - s.reqs[ri].c
		}
		for _, ri := range chunks {
			r := &s.reqs[ri]
			c := r.p - r.c
			if rest > e.MaxNumTokens-tokens { // FIRST_COME_FIRST_SERVED
				c = min(c, capacity)
				if c < r.p-r.c {
					c = c / s.bs * s.bs // chunk_unit_size = tokens_per_block
				}
				capacity -= c
			}
			if c > 0 {
				sched = append(sched, trtItem{ri, c})
			}
		}
	}
	s.trt.chunks, s.trt.sched = chunks, sched

	// prepare_resources and the pass entries.
	for _, it := range sched {
		r := &s.reqs[it.r]
		if r.st == stWaiting { // first context chunk: addSequence
			s.waiting.remove(it.r)
			s.running = append(s.running, it.r)
			s.insertRunningOrdered()
			r.st = stRunning
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
			for need := (r.p + s.bs - 1) / s.bs; len(r.table) < need; {
				r.table = append(r.table, s.pool.popFree())
			}
		}
		from := r.c
		end := r.c + it.n
		if r.c < r.p { // context chunk: reuse applied after budgeting (§4.4)
			from = max(r.c, r.hits)
			r.c = max(end, r.hits)
		} else { // generation: slot for the new token
			for need := (r.c + 1 + s.bs - 1) / s.bs; len(r.table) < need; {
				r.table = append(r.table, s.pool.popFree())
			}
			r.c = end
		}
		pb.entries = append(pb.entries, entry{r: it.r, n: max(end-from, 0), from: from, samples: r.c >= r.p})
	}
}

// insertRunningOrdered keeps s.running in arrival order after an append (a request
// started later may have arrived earlier than some started ones only if it was
// skipped, which head-of-line admission prevents; kept for safety).
func (s *Sim) insertRunningOrdered() {
	for i := len(s.running) - 1; i > 0 && s.running[i] < s.running[i-1]; i-- {
		s.running[i], s.running[i-1] = s.running[i-1], s.running[i]
	}
}

// computedBlocksTRT is the reuse lookup of addSequence (T-R5): full blocks of the
// first P − 1 prompt tokens found in the reuse tree (partial-block reuse not modelled).
func (s *Sim) computedBlocksTRT(ri int32) []int32 {
	s.hitBuf = s.hitBuf[:0]
	if !s.eng.EnablePrefixCaching {
		return s.hitBuf
	}
	r := &s.reqs[ri]
	nb := (r.p - 1) / s.bs
	r.ensureHashes(nb, s.bs)
	for i := 0; i < nb; i++ {
		b := s.pool.lookup(r.hashes[i])
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
		if r.g == 0 {
			s.storeBlocks(en.r, r.p) // context blocks become reusable after the context phase
		}
		if s.appendToken(en.r, pb.end) {
			s.storeBlocks(en.r, r.p+r.g-1) // the rest on release (computed tokens only)
			anyFinished = true
			s.finishReq(en.r, pb.end)
		}
	}
	if anyFinished {
		k := 0
		for _, ri := range s.running {
			if s.reqs[ri].st != stFinished {
				s.running[k] = ri
				k++
			}
		}
		s.running = s.running[:k]
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
	fit    []int32
	chunks []int32
	sched  []trtItem
}
