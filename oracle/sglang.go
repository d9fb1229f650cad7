package oracle

import (
	"fmt"

	"github.com/aicdb/aicdb/engine"
)

// The SGLang scheduler (SCHEDULERS.md §3), FCFS: prefill priority (S-R3), the
// PrefillAdder admission with token reservations (S-R4), at most one chunked
// request, optional mixed chunk, decode memory check with retraction and the
// new_token_ratio tracker (S-R5), the radix cache modelled by the block pool with
// block = page (S-R4 prefix match of (input + output)[: len − 1], locked =
// referenced, evictable = cached and unreferenced).
//
// Event loops (§3.2): the normal loop (AsyncScheduling false,
// --disable-overlap-schedule) processes batch k's results before it forms batch
// k+1; the overlap loop (AsyncScheduling true, SGLang's default) forms and
// launches batch k+1 first — the batch queue two deep (sim.go) — so batch k+1 is
// formed without k's results: a request that finishes in batch k is still in
// batch k+1 (its extra token is discarded, its pages are freed with the rest when
// k's results are processed), and a request retracted while batch k samples for
// it loses that token (process_batch_result skips retracted requests).
//
// State mapping: s.waiting is waiting_queue; s.running is running_batch (decoders);
// s.sgl.chunked is chunked_req. Requests whose prompt completes in a prefill batch
// join s.running when the next batch is formed (S-R2 merge of last_batch), unless
// that batch's results already showed them finished (normal loop only).

// SGLang defaults (§3.5).
const (
	sglInitRatio    = 0.7                                // init new_token_ratio (0.7 × schedule_conservativeness 1.0)
	sglMinRatio     = sglInitRatio * 0.14                // min new_token_ratio
	sglDecay        = (sglInitRatio - sglMinRatio) / 600 // per decode step
	sglClipMaxNew   = 4096                               // SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
	sglRetractSteps = 20                                 // retract_decode_steps
	sglInf          = int(^uint(0) >> 2)                 // "no cap"
)

// sglState is the SGLang core's state.
type sglState struct {
	chunked   int32   // chunked_req, or -1
	ratio     float64 // new_token_ratio
	batchFull bool    // running_batch.batch_is_full (sticky, S-R4/S-R5)
	// last holds the requests whose prompt completed in the last formed batch
	// (last_batch's sampling extends): S-R2 merges them into running_batch when
	// the next batch is formed.
	last []int32
	// lastChunked: the last formed batch carried the chunked request, which S-R2
	// filters out of it when the next batch is formed (batch_is_full := false).
	lastChunked bool
	// landed (disaggregated decode side) holds the requests whose prompt KV has
	// arrived and that wait, FIFO, for a seat in the running batch (S-R2 on a
	// decode server: get_new_prebuilt_batch).
	landed []int32
	// recvCount counts the schedules after decode-only batches since requests
	// were last received (S-R7, scheduler_recv_interval); lastKind is the
	// latest schedule's batch.
	recvCount int
	lastKind  sglBatchKind
}

// sglBatchKind is what a schedule formed, as SGLang's request receipt weighs
// the last batch (S-R7).
type sglBatchKind uint8

const (
	sglNoBatch     sglBatchKind = iota // none (the loop idles)
	sglDecodeBatch                     // decode rows only (DECODE, TARGET_VERIFY)
	sglExtendBatch                     // with a prompt chunk (EXTEND, MIXED)
)

// sglReserve is min(max_new − out, 4096): the output tokens a request may still need.
func sglReserve(r *req) int { return min(r.maxTokens-r.g, sglClipMaxNew) }

// sglOnIdle is SGLang's on_idle: an event-loop iteration with no batch to run and
// none in flight resets new_token_ratio to its initial value (S-R5, §3.2).
func (s *Sim) sglOnIdle() { s.sgl.ratio = sglInitRatio }

// scheduleSGLang forms one pass: a prefill (extend) batch if one can be formed, else a
// decode step over the running batch (S-R3).
func (s *Sim) scheduleSGLang(pb *passBuf) {
	s.sglMergeLast()
	s.sglAdmitLanded()
	if s.sglPrefill(pb) {
		s.sglNoteLast(pb)
		return
	}
	if len(s.running) == 0 {
		if s.qlen <= 1 { // nothing else in flight (pushPass counted this pass)
			s.sglOnIdle()
		}
		return
	}
	if s.eng.DraftTokens > 0 { // EAGLE / NEXTN: a decode-only step (SetDrafts: synchronous, no mixed chunk)
		if !s.sglDraftsFit() {
			return
		}
		for _, ri := range s.running {
			s.sglAddDraftStep(pb, ri)
		}
		s.sgl.ratio = max(s.sgl.ratio-sglDecay, sglMinRatio)
		return
	}
	s.sglDecodeMemCheck(pb) // S-R5
	for _, ri := range s.running {
		s.sglAddDecode(pb, ri)
	}
	if len(pb.preempted) == 0 {
		s.sgl.ratio = max(s.sgl.ratio-sglDecay, sglMinRatio)
	}
}

// sglMergeLast is S-R2: last_batch, less its finished requests, merges into
// running_batch. Under the overlap loop last_batch's results are not processed
// yet, so a request that finished there still merges (and decodes once more).
func (s *Sim) sglMergeLast() {
	if s.sgl.lastChunked {
		s.sgl.batchFull = false
		s.sgl.lastChunked = false
	}
	for _, ri := range s.sgl.last {
		if s.reqs[ri].st == stRunning {
			s.running = append(s.running, ri)
		}
	}
	s.sgl.last = s.sgl.last[:0]
}

// sglAdmitLanded is get_new_prebuilt_batch on a disaggregated decode server
// (S-R2): transferred requests wait in the waiting queue and, when a batch is
// formed, at most max_running_requests − len(running_batch) of them join the
// running batch, FIFO, their prompt computed and the prefill worker's first
// token appended. Under the overlap loop running_batch still holds the requests
// that finish in the batch in flight (their results are not processed yet), so
// their seats are not free. The rest keep waiting for a later batch.
func (s *Sim) sglAdmitLanded() {
	k := 0
	for ; k < len(s.sgl.landed) && len(s.running) < s.eng.MaxNumSeqs; k++ {
		ri := s.sgl.landed[k]
		s.landRunning(ri)
		s.running = append(s.running, ri)
	}
	s.sgl.landed = s.sgl.landed[:copy(s.sgl.landed, s.sgl.landed[k:])]
}

// sglNoteLast records the requests whose prompt completes in prefill batch pb
// (none on a disaggregated prefill worker).
func (s *Sim) sglNoteLast(pb *passBuf) {
	hold := s.dis != nil && s.dis.holdKV
	for _, en := range pb.entries {
		switch {
		case !en.samples:
			s.sgl.lastChunked = true
		case !en.dec && !hold:
			s.sgl.last = append(s.sgl.last, en.r)
		}
	}
}

// sglPrefill is get_new_batch_prefill (S-R4); it reports whether a batch was formed.
func (s *Sim) sglPrefill(pb *passBuf) bool {
	e := &s.eng
	sg := &s.sgl
	if (sg.batchFull || s.waiting.len() == 0) && sg.chunked < 0 {
		return false
	}
	if len(s.running) >= e.MaxNumSeqs && sg.chunked < 0 {
		sg.batchFull = true
		return false
	}
	page := s.bs
	remChunk, remInput := sglInf, e.MaxPrefillTokens
	if e.EnableChunkedPrefill {
		remChunk = e.ChunkedPrefillSize
	}
	decoders := len(s.running)
	if e.EnableMixedChunk {
		remChunk -= decoders
		remInput -= decoders
	}
	reservedRunning := 0.0
	for _, ri := range s.running {
		reservedRunning += float64(sglReserve(&s.reqs[ri])) * sg.ratio
	}
	// rem_total counts free + evictable tokens as they were before this batch: the
	// pages of the batch's own extends are allocated after admission, so they are
	// charged through `added` only; locking an evictable matched prefix removes it.
	avail0 := s.pool.nfree * s.bs
	added := 0 // Σ reservations of requests taken this pass, and newly locked evictable tokens
	remTotal := func() float64 {
		return float64(avail0) - reservedRunning - float64(added)
	}
	canRun := 0
	if sg.chunked >= 0 && remChunk > 0 { // add_chunked_req
		ri := sg.chunked
		r := &s.reqs[ri]
		n := min(r.numTokens()-r.c, remChunk, max(int(remTotal()), 0))
		if n > 0 {
			s.sglAllocExtend(ri, n)
			pb.entries = append(pb.entries, entry{r: ri, n: n, from: r.c})
			r.c += n
			pn := ceilPage(n, page) // _update_prefill_budget charges whole pages (S-R4)
			added += pn
			remChunk -= pn
			remInput -= pn
			canRun++
		}
		if r.c < r.numTokens() {
			remChunk = 0 // still chunked: nothing else this pass
		} else {
			sg.chunked = -1
			added += sglReserve(r)
		}
	}
	for remChunk > 0 && remInput > 0 && remTotal() > 0 && s.waiting.len() > 0 && sg.chunked < 0 {
		if canRun >= e.MaxNumSeqs-len(s.running) {
			sg.batchFull = true
			break
		}
		wi := s.waiting.at(0)
		w := &s.reqs[wi]
		hits := s.computedBlocks(wi) // radix match of (input + output)[: len − 1]
		h := len(hits) * s.bs
		extend := w.numTokens() - h
		if float64(extend+sglReserve(w)) >= remTotal() {
			sg.batchFull = true // NO_TOKEN
			break
		}
		pe := ceilPage(extend, page)
		if pe >= remInput && canRun > 0 {
			break // OTHER
		}
		// _lock_node takes the matched prefix out of the evictable pool before the
		// NO_TOKEN check is repeated ("rem_total may decrease after the lock
		// acquisition", S-R4): a request whose evictable hits would leave too few
		// pages for its extend waits; the lock is released with it.
		lock := 0
		for _, b := range hits {
			if s.pool.ref[b] == 0 {
				lock += s.bs
			}
		}
		if float64(extend+sglReserve(w)) >= remTotal()-float64(lock) {
			sg.batchFull = true // NO_TOKEN
			break
		}
		n := extend
		if pe > remChunk {
			n = remChunk / page * page
			if n == 0 {
				break
			}
		}
		s.waiting.popFront()
		s.ensureTable(wi)
		added += lock
		for _, b := range hits { // lock the matched prefix
			s.pool.touch(b)
			w.table = append(w.table, b)
		}
		w.nCachedBl = len(hits)
		w.c, w.hits = h, h
		if w.numCached < 0 {
			w.numCached = h
		}
		w.st = stRunning
		s.sglAllocExtend(wi, n)
		pb.entries = append(pb.entries, entry{r: wi, n: n, from: w.c})
		w.c += n
		canRun++
		if n < extend { // n is a page multiple
			sg.chunked = wi
			remChunk = 0
			remInput -= n
			added += n
		} else { // the whole extend, charged in whole pages (S-R4)
			remChunk -= pe
			remInput -= pe
			added += pe + sglReserve(w)
		}
		if remTotal() <= 0 {
			sg.batchFull = true // the reservations used up the pool
			break
		}
	}
	if len(pb.entries) == 0 {
		return false
	}
	for k := range pb.entries {
		r := &s.reqs[pb.entries[k].r]
		pb.entries[k].samples = r.c >= r.numTokens()
	}
	if e.EnableMixedChunk {
		for _, ri := range s.running { // decoders ride along as 1-token extends
			s.sglAddDecode(pb, ri)
		}
	}
	return true
}

// ceilPage is n tokens rounded up to whole pages of page tokens: SGLang's
// PrefillAdder charges every admitted extend this way (ceil_paged_tokens in
// _update_prefill_budget), so its reservations cover the pages the allocator
// hands out (page_size 1, the default, charges n).
func ceilPage(n, page int) int { return (n + page - 1) / page * page }

// sglAddDecode schedules one decode token of a running request.
func (s *Sim) sglAddDecode(pb *passBuf, ri int32) {
	r := &s.reqs[ri]
	if need := (r.c + 1 + s.bs - 1) / s.bs; len(r.table) < need {
		if s.pool.nfree == 0 {
			if s.fatal == nil {
				s.fatal = fmt.Errorf("oracle run: request %s: no free KV page for its next decode token (a mixed-chunk batch is not memory-checked by SGLang; not modelled)", r.id)
			}
			return
		}
		r.table = append(r.table, s.popBlock())
	}
	pb.entries = append(pb.entries, entry{r: ri, n: 1, from: r.c, samples: true, dec: true})
	r.c++
}

// sglAddDraftStep schedules r's next EAGLE step (topk 1): it verifies its input
// token and k drafts and emits engine.StepTokens of its number, at most the
// outputs left (the engine is synchronous: every output so far is processed); the
// KV keeps the input token and the accepted drafts (the rejected drafts' slots are
// freed after the verify, the bonus token's KV is the next step's input).
func (s *Sim) sglAddDraftStep(pb *passBuf, ri int32) {
	r := &s.reqs[ri]
	r.steps++
	out := min(engine.StepTokens(s.eng.DraftAccepted, r.steps), r.maxTokens-r.g)
	s.sglAllocExtend(ri, out) // sglDraftsFit: the verify's pages are free
	pb.entries = append(pb.entries, entry{r: ri, more: int32(out - 1), n: 1, from: r.c, samples: true, dec: true})
	r.c += out
}

// sglDraftsFit is the decode memory check under EAGLE: each running request's
// verify writes KV for its input token and k drafts, so the step needs the pages of
// r.c + 1 + k tokens each. SGLang's retraction and admission under speculative
// decoding are not simulated: a step whose verify would not fit stops the run.
func (s *Sim) sglDraftsFit() bool {
	need := 0
	for _, ri := range s.running {
		r := &s.reqs[ri]
		if n := (r.c+1+s.eng.DraftTokens+s.bs-1)/s.bs - len(r.table); n > 0 {
			need += n
		}
	}
	if need <= s.pool.nfree {
		return true
	}
	if s.fatal == nil {
		s.fatal = fmt.Errorf("oracle run: SGLang EAGLE/NEXTN: a decode step's verify slots need %d free KV pages, %d are free (retraction and admission under speculative decoding are not simulated); raise the KV pool or lower the concurrency", need, s.pool.nfree)
	}
	return false
}

// sglAllocExtend allocates the pages for n more tokens of r (a prefill chunk, or
// the tokens an EAGLE step keeps).
func (s *Sim) sglAllocExtend(ri int32, n int) {
	r := &s.reqs[ri]
	for need := (r.c + n + s.bs - 1) / s.bs; len(r.table) < need; {
		if s.pool.nfree == 0 {
			if s.fatal == nil {
				s.fatal = fmt.Errorf("oracle run: request %s: the KV pool ran out during a prefill chunk (admission reserved it; not expected)", r.id)
			}
			return
		}
		r.table = append(r.table, s.popBlock())
	}
}

// sglDecodeMemCheck is the decode memory check of update_running_batch (S-R5): if the
// pages needed for this step are not free (evictable cache counts as free), retract
// decoders — fewest output tokens first, ties to the longest prompt — until
// retract_decode_steps tokens per remaining request are free, never the last one.
func (s *Sim) sglDecodeMemCheck(pb *passBuf) {
	need := 0
	for _, ri := range s.running {
		if r := &s.reqs[ri]; r.c%s.bs == 0 {
			need++
		}
	}
	if s.pool.nfree >= need {
		return
	}
	for first := true; len(s.running) > 1 && (first || s.pool.nfree*s.bs < sglRetractSteps*len(s.running)); first = false {
		v := 0
		for i := 1; i < len(s.running); i++ {
			a, b := &s.reqs[s.running[i]], &s.reqs[s.running[v]]
			if a.g < b.g || (a.g == b.g && a.p >= b.p) { // ties: the last in order (stable reverse sort, pop)
				v = i
			}
		}
		vi := s.running[v]
		s.running = append(s.running[:v], s.running[v+1:]...)
		r := &s.reqs[vi]
		s.freeTable(vi) // released without inserting (newer SGLang)
		r.st, r.c, r.hits = stWaiting, 0, 0
		r.preemptions++
		s.waiting.pushBack(vi)
		pb.preempted = append(pb.preempted, vi)
	}
	out, maxNew := 0, 0
	for _, ri := range s.running {
		out += s.reqs[ri].g
		maxNew += s.reqs[ri].maxTokens
	}
	s.sgl.ratio = min(1, float64(out+sglRetractSteps*len(s.running))/float64(maxNew+1))
	s.sgl.batchFull = false
	n := 0
	for _, ri := range s.running {
		if r := &s.reqs[ri]; r.c%s.bs == 0 {
			n++
		}
	}
	if n > s.pool.nfree && s.fatal == nil {
		r := &s.reqs[s.running[0]]
		s.fatal = fmt.Errorf("oracle run: request %s can never finish: it alone needs more KV pages than the pool has (%d usable)", r.id, usableBlocks(&s.eng))
	}
}

// updateSGLang processes a batch's outputs (S-R6 = SCHEDULERS.md §3.7): completed prefills
// sample their first token and are inserted into the radix cache (they join the
// running batch when the next batch is formed, S-R2: sglMergeLast); the chunked
// request's computed prefix is inserted; decoders sample; finished requests insert
// their KV and release it.
func (s *Sim) updateSGLang(pb *passBuf) {
	shrank := false
	for _, en := range pb.entries {
		r := &s.reqs[en.r]
		if r.st != stRunning {
			// finished in the previous batch (overlap: the extra token is
			// discarded), or retracted after this batch was launched (overlap:
			// its token is dropped, S-R5)
			continue
		}
		if !en.samples {
			// cache_unfinished_req of the chunked request (its S-R2 filter, which
			// clears batch_is_full, runs when the next batch is formed: sglMergeLast)
			s.storeBlocks(en.r, r.c)
			continue
		}
		decoder := en.dec // was in the running batch before this pass
		if !decoder {
			s.storeBlocks(en.r, r.c)
		}
		for k := int32(0); k <= en.more; k++ { // the sampled token, then an EAGLE step's accepted drafts
			if s.appendToken(en.r, pb.end) {
				s.storeBlocks(en.r, r.p+r.g-1)
				s.finishReq(en.r, pb.end)
				shrank = true // overlap: a prompt finished here may already have merged
				break
			}
		}
	}
	if shrank {
		s.dropFinished()
		s.sgl.batchFull = false // S-R2/S-R5: the batch a finished request was in shrank
	}
}

// sglRecv is SGLang's recv_requests (S-R7): with scheduler_recv_interval N > 1
// a schedule after a decode-only batch (weight 1) receives only when its count
// reaches N; after a batch with a prompt chunk (EXTEND / MIXED, weight 1000)
// or none (the idle loop spins through the count) it receives at once. It
// reports whether the schedule receives.
func (s *Sim) sglRecv() bool {
	n := s.eng.RecvEvery()
	if n == 0 {
		return true
	}
	if s.sgl.lastKind == sglDecodeBatch {
		if s.sgl.recvCount++; s.sgl.recvCount < n {
			return false
		}
	}
	s.sgl.recvCount = 0
	return true
}

// sglNoteBatch records the kind of the batch a schedule formed (sglRecv):
// none, decode rows only, or with a prompt chunk.
func (s *Sim) sglNoteBatch(pb *passBuf) {
	if s.eng.RecvEvery() == 0 {
		return
	}
	k := sglNoBatch
	if pb != nil && len(pb.entries) > 0 {
		k = sglDecodeBatch
		for _, en := range pb.entries {
			if !en.dec {
				k = sglExtendBatch
				break
			}
		}
	}
	s.sgl.lastKind = k
}
