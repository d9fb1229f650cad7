package queueing

import "github.com/aicdb/aicdb/engine"

// trtMaxUtilFit is the TRT-LLM MAX_UTILIZATION capacity step with a KV capacity
// (T-R2, SCHEDULERS.md §4.3): walk the active requests in order — started ones
// (holding KV) in arrival order, then never-started ones from the waiting queue —
// scheduling each whose next-step blocks fit the free blocks (a first context chunk
// needs its whole context, a generation step the block of its next token, a later
// context chunk nothing: its context was allocated at its first chunk); when one
// does not fit, pause the last started request not yet passed (its blocks count as
// freed), move the end marker before it and retry; with none left, stop. Paused
// requests lose their KV, go back to the head of waiting in arrival order and
// restart later as context over prompt + outputs so far. It returns the fitting
// requests for the micro-batch (T-R3); the first chunk of a waiting one starts it
// (trtStart).
func (s *sim) trtMaxUtilFit() []int32 {
	bs := s.e.BlockSize
	s.trtDropFinishedWaiting()
	// A started request whose last token is in flight (overlap) is skipped before
	// the walk (noScheduleAfterState, T-R1/T-R2): neither scheduled nor a pause victim.
	list := s.kv.list[:0]
	for _, ri := range s.running {
		if r := &s.reqs[ri]; !(r.c >= r.promptLen() && r.gSched >= r.osl) {
			list = append(list, ri)
		}
	}
	nStarted := len(list)
	list = append(list, s.waiting[s.wHead:]...)
	s.kv.list = list
	fit, paused := s.kv.fit[:0], s.kv.paused[:0]
	free, used, end := s.kvFree, 0, len(list)
	for i := 0; i < end; {
		ri := list[i]
		r := &s.reqs[ri]
		if len(fit) >= s.seqCap {
			break
		}
		gen := i < nStarted && r.c >= r.promptLen()
		need := 0
		switch {
		case i >= nStarted:
			need = ceilDiv(r.promptLen(), bs)
		case gen:
			need = max(ceilDiv(decodeKVTokens(r), bs)-r.blocks, 0)
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
		free += s.reqs[list[j]].blocks
		end = j
	}
	for _, vi := range paused { // last started first: pushing at the head keeps arrival order
		for k, ri := range s.running {
			if ri == vi {
				s.removeRunning(k)
				break
			}
		}
		s.kvEvict(vi)
		s.pushWaitingFront(vi)
	}
	s.kv.fit, s.kv.paused = fit, paused
	return fit
}

// trtStart is prepare_resources for a request's first context chunk under
// MAX_UTILIZATION with a KV capacity: it leaves the waiting queue, joins the
// started requests in arrival order and gets the blocks of its whole context (the
// capacity step checked they fit). A no-op otherwise.
func (s *sim) trtStart(ri int32) {
	r := &s.reqs[ri]
	if !s.kv.on || s.e.CapacityPolicy != engine.PolicyMaxUtilization || r.blocks > 0 {
		return
	}
	for k := s.wHead; k < len(s.waiting); k++ {
		if s.waiting[k] == ri {
			s.waiting = append(s.waiting[:k], s.waiting[k+1:]...)
			break
		}
	}
	if s.wHead == len(s.waiting) {
		s.waiting, s.wHead = s.waiting[:0], 0
	}
	s.running = append(s.running, ri)
	for k := len(s.running) - 1; k > 0 && s.arrivedBefore(s.running[k], s.running[k-1]); k-- {
		s.running[k], s.running[k-1] = s.running[k-1], s.running[k]
	}
	r.c = 0
	s.kvGrow(ri, r.promptLen())
}

// trtDropFinishedWaiting removes paused requests whose last token landed while
// they waited (overlap executor).
func (s *sim) trtDropFinishedWaiting() {
	k := s.wHead
	for _, ri := range s.waiting[s.wHead:] {
		if !s.reqs[ri].finished {
			s.waiting[k] = ri
			k++
		}
	}
	s.waiting = s.waiting[:k]
	if s.wHead == len(s.waiting) {
		s.waiting, s.wHead = s.waiting[:0], 0
	}
}

// arrivedBefore orders requests as TensorRT-LLM's request ids do: by arrival, ties
// in creation order (a staggered client's first request is created ahead of time,
// so creation order alone is not arrival order).
func (s *sim) arrivedBefore(a, b int32) bool {
	ra, rb := s.reqs[a].arrival, s.reqs[b].arrival
	return ra < rb || (ra == rb && a < b)
}
