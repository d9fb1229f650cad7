package queueing

// scheduleVLLM is the vLLM v1 fused calendar (SCHEDULERS.md §2.3) at slot level:
// one token budget per pass (V-R1); running requests first, in admission order —
// decode rows one token, partial prompts min(rest, threshold, budget left) (V-R2);
// then waiting requests FCFS while len(running) < max_num_seqs and budget remains,
// a prompt that does not fit stopping admission when chunked prefill is off (V-R3);
// prefix-cached tokens cost no budget (V-R8). Preemption (V-R6) is not modelled:
// KV capacity is rejected for this calendar. In async mode a request whose last
// token is already scheduled is skipped (V-R12).
func (s *sim) scheduleVLLM(p *simPass) {
	budget := s.budget
	thr := s.e.LongPrefillTokenThreshold
	for _, ri := range s.running { // V-R2
		if budget <= 0 {
			break
		}
		r := &s.reqs[ri]
		if r.gSched >= r.osl {
			continue // async: its final token is in flight (V-R12)
		}
		if r.c >= r.isl {
			s.addDecode(p, ri)
			budget--
			continue
		}
		n := r.isl - r.c
		if thr > 0 && n > thr {
			n = thr
		}
		n = min(n, budget)
		s.addPrompt(p, ri, n)
		budget -= n
	}
	for budget > 0 && s.waitingLen() > 0 { // V-R3
		if len(s.running) >= s.seqCap {
			break
		}
		ri := s.waiting[s.wHead]
		r := &s.reqs[ri]
		n := r.isl - r.prefix
		if thr > 0 && n > thr {
			n = thr
		}
		if !s.e.EnableChunkedPrefill && n > budget {
			break
		}
		n = min(n, budget)
		s.popWaiting()
		r.c = r.prefix
		s.running = append(s.running, ri)
		s.addPrompt(p, ri, n)
		budget -= n
	}
}
