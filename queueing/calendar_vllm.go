package queueing

// scheduleVLLM is the vLLM v1 fused calendar (SCHEDULERS.md §2.3) at slot level:
// one token budget per pass (V-R1); running requests first, in admission order —
// decode rows one token, partial prompts min(rest, threshold, budget left) (V-R2);
// then waiting requests FCFS while len(running) < max_num_seqs and budget remains,
// a prompt that does not fit stopping admission when chunked prefill is off (V-R3);
// prefix-cached tokens cost no budget (V-R8). In async mode a request whose last
// token is already scheduled is skipped (V-R12).
//
// With a KV capacity (blocks of block_size tokens), every scheduled item first
// allocates the blocks of its tokens (allocate_slots, V-R9). A running item that
// does not fit preempts the last request of running (FCFS victim, V-R6) until it
// fits — or is itself the victim, which ends the running phase; a victim frees its
// blocks, goes to the head of waiting and later recomputes prompt + outputs so far
// (recompute mode, V-R6). A pass that preempted admits nothing (V-R3); an admission
// that does not fit stops admission (head-of-line, V-R3).
func (s *sim) scheduleVLLM(p *simPass) {
	budget := s.budget
	thr := s.e.LongPrefillTokenThreshold
	kv := s.kv.on
	preempted := false
	i := 0
	if !kv {
		// The leading decode rows without a KV pool (each one token of budget) in a
		// loop that makes no call; the loop below takes over from the first other row.
		i, budget = s.addDecodeRun(p, budget)
	}
	for ; i < len(s.running) && budget > 0; i++ { // V-R2
		ri := s.running[i]
		r := &s.reqs[ri]
		if r.gSched >= r.osl {
			continue // async: its final token is in flight (V-R12)
		}
		decode := r.c >= r.promptLen()
		n := 1
		if !decode {
			n = r.promptLen() - r.c
			if thr > 0 && n > thr {
				n = thr
			}
			n = min(n, budget)
		}
		if kv {
			tokens := r.c + n
			if decode {
				tokens = decodeKVTokens(r)
			}
			self := false
			for !s.kvGrow(ri, tokens) { // V-R6: preempt the last of running
				v := s.running[len(s.running)-1]
				s.running = s.running[:len(s.running)-1]
				s.kvEvict(v)
				s.pushWaitingFront(v)
				preempted = true
				if v == ri {
					self = true
					break
				}
			}
			if self {
				break // r itself was the victim: stop the running phase
			}
		}
		if decode {
			s.addDecode(p, ri)
		} else {
			s.addPrompt(p, ri, n)
		}
		budget -= n
	}
	for !preempted && budget > 0 && s.waitingLen() > 0 { // V-R3
		if len(s.running) >= s.seqCap {
			break
		}
		ri := s.waiting[s.wHead]
		r := &s.reqs[ri]
		if r.finished { // async: its last token landed while preempted
			s.popWaiting()
			continue
		}
		n := r.promptLen() - r.prefix
		if thr > 0 && n > thr {
			n = thr
		}
		if !s.e.EnableChunkedPrefill && n > budget {
			break
		}
		n = min(n, budget)
		if kv && !s.kvGrow(ri, r.prefix+n) {
			break // head-of-line: no skipping (V-R3)
		}
		s.popWaiting()
		r.c = r.prefix
		s.running = append(s.running, ri)
		s.addPrompt(p, ri, n)
		budget -= n
	}
	s.kvNote()
}

// addDecodeRun schedules, from the head of running, the rows that are decode rows
// (or skipped: their final token in flight, V-R12) while budget remains — what
// scheduleVLLM's running phase does with them when no KV pool is modelled — and
// returns the position of the first other row and the budget left.
func (s *sim) addDecodeRun(p *simPass, budget int) (int, int) {
	running, reqs := s.running, s.reqs
	entries, dec := p.entries, p.tp.Decode
	i := 0
	for ; i < len(running) && budget > 0; i++ {
		ri := running[i]
		r := &reqs[ri]
		if r.gSched >= r.osl {
			continue
		}
		if r.c < r.promptLen() {
			break
		}
		entries, dec = appendDecodeRow(entries, dec, ri, r)
		budget--
	}
	p.entries, p.tp.Decode = entries, dec
	return i, budget
}
