package queueing

import "math"

// scheduleSGLang is the SGLang calendar (SCHEDULERS.md §3.3–§3.5) at slot level.
//
// A prefill (extend) batch is formed first (S-R4): the in-progress chunked request
// continues with min(rest, chunk budget left); then waiting requests FCFS while
// fewer than max_running_requests are running: a prompt (prefix-cached tokens
// free) is taken whole if its page-rounded length fits the chunk budget left, else
// truncated to a page multiple and becomes the one chunked request; a prompt that
// reaches max_prefill_tokens stops admission unless the batch is empty. With
// chunked prefill off the chunk budget is unbounded.
//
// Mixed chunk (the product default): the decode rows of every running request join
// the prefill batch and debit both budgets (rem_chunk = chunked_prefill_size −
// running_bs). Mixed chunk off: a pass that can form a prefill batch runs it alone
// and decoders stall (S-R3); otherwise a decode-only pass runs every decoder.
//
// With a KV capacity (pages of page_size tokens): admission is also bounded by
// rem_total = free tokens − Σ_decoders min(osl − out, 4096)·new_token_ratio, every
// admitted extend charging its page-rounded length to rem_total, rem_input and
// rem_chunk (SGLang's ceil_paged_tokens, so the reservations cover the pages the
// allocator hands out), a request needing extend + min(osl − out, 4096) ≥ rem_total setting the sticky
// batch_is_full (S-R4), which finishes, retraction and a chunked request's filter
// clear (S-R2/S-R5); a decode-only step first runs the decode memory check —
// retract decoders (fewest outputs first, ties the longest prompt) to the waiting
// tail until retract_decode_steps tokens per remaining request are free, never
// the last, and reset new_token_ratio — else decays new_token_ratio (S-R5); it is
// reset when idle (§3.2).
//
// Overlap scheduler (AsyncScheduling, §3.2, SGLang's default): batch k+1 is
// formed at the start of batch k (sim.finishPass), before k's results are
// processed. Requests whose prompt completes in k are decoders of k+1 (S-R2
// merges last_batch before its results); a request whose final token k samples
// is still in running, so k+1 carries a decode row for it whose token is
// discarded (sglAddDecode); a decoder retracted while k samples for it loses
// that token (sglRetract). A disaggregated prefill kernel (Prefill) has no running
// batch to merge into: its finished prompts are not decoders.
func (s *sim) scheduleSGLang(p *simPass) {
	const inf = int(^uint(0) >> 2)
	kv := s.kv.on
	s.sglFilterBatch()
	// The decoders — prompt complete before this pass (S-R2) — and, when a
	// continuation or an admission will read it, S-R4's rem_total in tokens: a
	// base (the free pages less each decoder's reservation, in running order)
	// minus what this batch adds. One pass over running for both.
	page := s.e.BlockSize
	avail, added := math.Inf(1), 0
	reserve := kv && (s.chunked >= 0 || s.waitingLen() > 0)
	if reserve {
		avail = float64(s.kvFree * page)
	}
	dec, reqs, ratio := s.decBuf[:0], s.reqs, s.kv.ratio
	for _, ri := range s.running {
		if r := &reqs[ri]; r.c >= r.promptLen() && !(s.prefillSide && r.gSched >= r.osl) {
			dec = append(dec, ri)
			if reserve {
				avail -= float64(sglReserve(r)) * ratio
			}
		}
	}
	s.decBuf = dec
	decoders := len(dec)
	remChunk, remInput := inf, s.e.MaxPrefillTokens
	if s.e.EnableChunkedPrefill {
		remChunk = s.e.ChunkedPrefillSize
	}
	if s.e.EnableMixedChunk {
		remChunk -= decoders
		remInput -= decoders
	}
	remTotal := func() float64 { return avail - float64(added) }
	took := 0
	// A sticky batch_is_full skips the waiting queue unless a chunked request is in
	// progress (the early return of get_new_batch_prefill, S-R4).
	blocked := kv && s.kv.batchFull && s.chunked < 0
	if s.chunked >= 0 && remChunk > 0 { // add_chunked_req
		ri := s.chunked
		r := &s.reqs[ri]
		n := min(r.promptLen()-r.c, remChunk)
		if kv {
			n = min(n, max(int(remTotal()), 0))
		}
		if n > 0 {
			s.kvGrow(ri, r.c+n) // reserved at admission (S-R4)
			s.addPrompt(p, ri, n)
			took++
			pn := ceilDiv(n, page) * page // _update_prefill_budget charges whole pages (S-R4)
			added += pn
			remChunk -= pn
			remInput -= pn
		}
		if r.c < r.promptLen() {
			remChunk = 0 // still chunked: nothing else this pass
		} else {
			s.chunked = -1
			added += sglReserve(r)
		}
	}
	for !blocked && remChunk > 0 && remInput > 0 && remTotal() > 0 && s.waitingLen() > 0 && s.chunked < 0 {
		if len(s.running) >= s.seqCap { // no free request slot
			s.kv.batchFull = true
			break
		}
		ri := s.waiting[s.wHead]
		r := &s.reqs[ri]
		extend := r.promptLen() - r.prefix
		if kv && float64(extend+sglReserve(r)) >= remTotal() {
			s.kv.batchFull = true // NO_TOKEN
			break
		}
		pe := ceilDiv(extend, page) * page
		if pe >= remInput && took > 0 {
			break
		}
		r.c = r.prefix
		if pe <= remChunk {
			s.popWaiting()
			s.running = append(s.running, ri)
			s.kvGrow(ri, r.c+extend)
			s.addPrompt(p, ri, extend)
			remChunk -= pe // the whole extend, charged in whole pages (S-R4)
			remInput -= pe
			added += pe + sglReserve(r)
		} else {
			trunc := remChunk / page * page
			if trunc <= 0 {
				break
			}
			s.popWaiting()
			s.running = append(s.running, ri)
			s.kvGrow(ri, r.c+trunc)
			s.addPrompt(p, ri, trunc)
			s.chunked = ri
			remChunk = 0
			remInput -= trunc
			added += trunc
		}
		took++
		if remTotal() <= 0 {
			s.kv.batchFull = true // the reservations used up the pool
			break
		}
	}
	if kv && s.chunked >= 0 && took > 0 {
		s.kv.chunkRan = true
	}
	defer s.sglNote()
	if took > 0 && !s.e.EnableMixedChunk {
		return // prefill-only pass; decoders stall (S-R3)
	}
	if took == 0 && kv {
		if len(dec) == 0 {
			// on_idle (§3.2) runs only when no batch is in flight either: not at an
			// asynchronous engine's early schedule, made while a pass runs.
			if !s.busy {
				s.kv.ratio = sglInitRatio
			}
			return
		}
		switch {
		case s.e.DraftTokens > 0 && !s.sglDraftsFit():
			return // s.kv.err: the run stops
		case s.e.DraftTokens == 0 && s.sglRetract(): // S-R5 decode memory check
			dec = s.decBuf
		default:
			s.kv.ratio = math.Max(s.kv.ratio-sglDecay, sglMinRatio)
		}
	}
	if s.e.DraftTokens > 0 { // EAGLE: a decode-only step (mixed chunk is off, SetDrafts)
		for _, ri := range dec {
			s.sglAddDraftStep(p, ri)
		}
		return
	}
	// Decode rows: mixed into the batch, or a decode step (a decoder whose final
	// token is in flight: appendSpentRow), the pass's slices kept in locals
	// across the loop.
	entries, rows := p.entries, p.tp.Decode
	// A plain pool of one-token pages (SGLang's default) grows each decoder
	// without kvGrow's call: its blocks are its tokens (kvTake's plain path).
	unitKV := kv && page == 1 && s.plainPool()
	for _, ri := range dec {
		r := &s.reqs[ri]
		grown := true
		if unitKV {
			if need := decodeKVTokens(r) - r.blocks; need > 0 {
				grown = s.kvTakeFree(r, need)
			}
		} else if kv {
			grown = s.kvGrow(ri, decodeKVTokens(r))
		}
		if !grown && s.kv.err == nil {
			// SGLang does not memory-check the decoders of a mixed batch.
			s.kv.err = inputErr(errSGLMixedKV)
		}
		if r.gSched < r.osl {
			entries, rows = appendDecodeRow(entries, rows, ri, r)
		} else {
			entries, rows = appendSpentRow(entries, rows, ri, r)
		}
	}
	p.entries, p.tp.Decode = entries, rows
}

// sglFilterBatch is the start of a schedule with a KV pool: the running batch
// filtered of what left it since the last schedule clears a sticky
// batch_is_full — a request finished, or the chunked one was filtered (S-R2).
func (s *sim) sglFilterBatch() {
	if !s.kv.on {
		return
	}
	if len(s.running) < s.kv.runLen || s.kv.chunkRan {
		s.kv.batchFull = false
	}
	s.kv.chunkRan = false
}

// sglAddDraftStep schedules decoder ri's next EAGLE step (SGLang speculative
// decoding, topk 1): the step verifies 1 + k tokens and emits
// engine.StepTokens of its number, at most the outputs left (addDraftStep); the
// KV keeps the step's input token and its accepted drafts — what the step emits
// less the bonus token, whose KV the next step writes (the rejected drafts' slots
// are freed after the verify). The engine is synchronous (SetDrafts), so no
// output of ri is in flight.
func (s *sim) sglAddDraftStep(p *simPass, ri int32) {
	s.addDraftStep(p, ri)
	if r := &s.reqs[ri]; s.kv.on {
		// (isl + outputs before the step) + the accepted drafts; sglDraftsFit
		// checked that the verify's slots fit.
		s.kvGrow(ri, r.isl+r.gSched-1)
	}
}

// sglDraftsFit is the decode memory check under EAGLE: every decoder's verify
// writes KV for its input token and k drafts, so the step needs the pages of
// isl + out + k tokens per decoder. Whether SGLang then retracts, and how its
// admission counts the draft slots, is not modelled: a step that would not fit
// stops the run with errSGLDraftKV (never an optimistic answer).
func (s *sim) sglDraftsFit() bool {
	need := 0
	for _, ri := range s.decBuf {
		need += s.sglVerifyBlocks(ri, s.reqs[ri].gSched)
	}
	if need <= s.kvFree {
		return true
	}
	if s.kv.err == nil {
		s.kv.err = inputErr(errSGLDraftKV)
	}
	return false
}

// sglVerifyBlocks is the blocks beyond those it holds that an EAGLE verify of
// request ri needs with scheduled outputs scheduled so far: the KV of isl +
// scheduled tokens (decodeKVTokens) and the k drafts.
func (s *sim) sglVerifyBlocks(ri int32, scheduled int) int {
	r := &s.reqs[ri]
	return max(0, ceilDiv(r.isl+scheduled+s.e.DraftTokens, s.e.BlockSize)-r.blocks)
}

// appendSpentRow appends the decode row of decoder r whose final token is in
// flight. Under the overlap scheduler such a decoder (it finishes in the batch
// being processed) still runs in this batch: the row is computed — context isl
// + osl, its KV taken — but samples nothing (§3.2: the extra token is discarded).
func appendSpentRow(entries []entry, dec []int, ri int32, r *simReq) ([]entry, []int) {
	return append(entries, entry{r: ri, n: 1, decode: true}), append(dec, r.isl+r.gSched)
}

// sglDropInFlight discards the token the pass in flight samples for ri, which is
// being retracted (overlap scheduler: process_batch_result skips a retracted
// request, so that token is recomputed later). The retraction then folds only the
// outputs ri emitted. Synchronous engines have no pass in flight while scheduling.
func (s *sim) sglDropInFlight(ri int32) {
	if !s.busy || !s.e.AsyncScheduling {
		return
	}
	cur := s.cur()
	for i := range cur.entries {
		if en := &cur.entries[i]; en.r == ri && en.emits {
			en.emits = false
			s.reqs[ri].gSched--
			return
		}
	}
}

// sglNote records the KV state after an SGLang schedule.
func (s *sim) sglNote() {
	if s.kv.on {
		s.kv.runLen = len(s.running)
		s.kvNote()
	}
}

// sglReserve is min(osl − out, 4096): the output tokens r may still need (S-R4).
func sglReserve(r *simReq) int { return min(r.osl-r.gOut, sglClipMaxNew) }

// sglRetract is the decode memory check of update_running_batch (S-R5) over the
// decoders in s.decBuf (SGLang's running batch; a chunked request is not in it). If
// the pages this step starts exceed the free ones, decoders are retracted — fewest
// outputs first, ties the longest prompt, the last in order among equals — at least
// one, until retract_decode_steps tokens per remaining decoder are free, never the
// last one; they go to the tail of waiting and will recompute prompt + outputs.
// new_token_ratio := min(1, (Σ out + 20·remaining)/(Σ osl + 1)). It reports
// whether it retracted; s.decBuf then holds the remaining decoders.
func (s *sim) sglRetract() bool {
	page := s.e.BlockSize
	dec := s.decBuf
	if len(dec) <= s.kvFree {
		return false // a decoder starts at most one page this step: they all fit
	}
	need := 0
	for _, ri := range dec {
		if decodeKVTokens(&s.reqs[ri]) > s.reqs[ri].blocks*page {
			need++
		}
	}
	if need <= s.kvFree {
		return false
	}
	for first := true; len(dec) > 1 && (first || s.kvFree*page < sglRetractSteps*len(dec)); first = false {
		v := 0
		for i := 1; i < len(dec); i++ {
			a, b := &s.reqs[dec[i]], &s.reqs[dec[v]]
			if a.gOut < b.gOut || (a.gOut == b.gOut && a.isl >= b.isl) {
				v = i
			}
		}
		vi := dec[v]
		dec = append(dec[:v], dec[v+1:]...)
		s.sglDropInFlight(vi)
		for i, ri := range s.running {
			if ri == vi {
				s.removeRunning(i)
				break
			}
		}
		s.kvEvict(vi)
		s.waiting = append(s.waiting, vi)
	}
	s.decBuf = dec
	out, maxNew := 0, 0
	for _, ri := range dec {
		out += s.reqs[ri].gOut
		maxNew += s.reqs[ri].osl
	}
	s.kv.ratio = math.Min(1, float64(out+sglRetractSteps*len(dec))/float64(maxNew+1))
	s.kv.batchFull = false
	return true
}
