package queueing

// scheduleSGLang is the SGLang calendar (SCHEDULERS.md §3.3–§3.4) at slot level.
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
func (s *sim) scheduleSGLang(p *simPass) {
	const inf = int(^uint(0) >> 2)
	dec := s.decBuf[:0] // decoders: prompt complete before this pass (S-R2)
	for _, ri := range s.running {
		if s.reqs[ri].c >= s.reqs[ri].isl {
			dec = append(dec, ri)
		}
	}
	s.decBuf = dec
	decoders := len(dec)
	page := s.e.BlockSize
	remChunk, remInput := inf, s.e.MaxPrefillTokens
	if s.e.EnableChunkedPrefill {
		remChunk = s.e.ChunkedPrefillSize
	}
	if s.e.EnableMixedChunk {
		remChunk -= decoders
		remInput -= decoders
	}
	took := 0
	if s.chunked >= 0 && remChunk > 0 { // add_chunked_req
		ri := s.chunked
		r := &s.reqs[ri]
		n := min(r.isl-r.c, remChunk)
		s.addPrompt(p, ri, n)
		took++
		remChunk -= n
		remInput -= n
		if r.c < r.isl {
			remChunk = 0 // still chunked: nothing else this pass
		} else {
			s.chunked = -1
		}
	}
	for remChunk > 0 && remInput > 0 && s.waitingLen() > 0 && s.chunked < 0 {
		if len(s.running) >= s.seqCap { // no free request slot
			break
		}
		ri := s.waiting[s.wHead]
		r := &s.reqs[ri]
		extend := r.isl - r.prefix
		pe := ceilDiv(extend, page) * page
		if pe >= remInput && took > 0 {
			break
		}
		r.c = r.prefix
		if pe <= remChunk {
			s.popWaiting()
			s.running = append(s.running, ri)
			s.addPrompt(p, ri, extend)
			remChunk -= extend
			remInput -= extend
		} else {
			trunc := remChunk / page * page
			if trunc <= 0 {
				break
			}
			s.popWaiting()
			s.running = append(s.running, ri)
			s.addPrompt(p, ri, trunc)
			s.chunked = ri
			remChunk = 0
			remInput -= trunc
		}
		took++
	}
	if took > 0 && !s.e.EnableMixedChunk {
		return // prefill-only pass; decoders stall (S-R3)
	}
	for _, ri := range dec { // decode rows: mixed into the batch, or a decode step
		s.addDecode(p, ri)
	}
}
