package queueing

import "github.com/aicdb/aicdb/engine"

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
//
// Under MTP speculative decoding (engine.Spec.DraftTokens k > 0) a decode row is
// vllmSpecPlan / vllmSpecAdd (V-S1..V-S4); every running item also allocates k
// lookahead slots (V-S2); under async scheduling a running item whose slots do
// not fit ends the run with errVLLMDraftKV instead of preempting.
func (s *sim) scheduleVLLM(p *simPass) {
	budget := s.budget
	thr := s.e.LongPrefillTokenThreshold
	kv := s.kv.on
	k := s.e.DraftTokens
	preempted := false
	i := 0
	if !kv && k == 0 {
		// The leading decode rows without a KV pool (each one token of budget) in a
		// loop that makes no call; the loop below takes over from the first other row.
		i, budget = s.addDecodeRun(p, budget)
	}
	for ; i < len(s.running) && budget > 0; i++ { // V-R2
		ri := s.running[i]
		r := &s.reqs[ri]
		decode := r.c >= r.promptLen()
		spec := k > 0 && decode // an MTP decode step (V-S1)
		var n, ctx, tokens int
		if spec {
			var skip bool
			if n, ctx, skip = s.vllmSpecPlan(r, budget); skip {
				continue
			}
			tokens = ctx - 1 + n + k // V-S2
		} else {
			if r.gSched >= r.osl {
				continue // async: its final token is in flight (V-R12)
			}
			n = 1
			if !decode {
				n = r.promptLen() - r.c
				if thr > 0 && n > thr {
					n = thr
				}
				n = min(n, budget)
			}
			tokens = r.c + n
			if decode {
				tokens = decodeKVTokens(r)
			}
			tokens += k // V-S2: a running prompt chunk's lookahead slots
		}
		if kv {
			if k > 0 && s.e.AsyncScheduling && !s.kvGrow(ri, tokens) {
				s.vllmDraftRefuse() // preemption with an MTP step in flight is not modelled
				return
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
		switch {
		case spec:
			s.vllmSpecAdd(p, ri, n, ctx)
		case decode:
			s.addDecode(p, ri)
		default:
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

// vllmSpecPlan plans request r's next decode step under vLLM MTP speculative
// decoding (docs/queueing.md V-S1..V-S4) with budget tokens left: the tokens n it
// schedules and charges, the row's context ctx, or skip. vllmSpecAdd schedules it
// once its KV slots (ctx − 1 + n + k tokens, V-S2) are taken.
//
//   - V-S1: the step schedules the sampled token and the k drafts proposed after
//     r's previous step (num_tokens_with_spec + placeholders − num_computed = 1 + k),
//     capped by long_prefill_token_threshold and by the budget left; the drafts cut
//     off are not verified (scheduled drafts s = n − 1). It emits
//     1 + min(accepted, s) tokens, accepted = engine.StepTokens(a, m) − 1 for its
//     decode step number m, at most the outputs left.
//   - V-S2: allocate_slots takes the KV of num_computed + n + k lookahead tokens,
//     where num_computed counts every token of a step in flight (its rejected
//     drafts are subtracted only when its output arrives) and the last sampled
//     token is not yet computed: ctx − 1. A request that does not fit preempts the
//     last of running (V-R6) when scheduling is synchronous; with a step in flight
//     (async) that is not modelled and refuses the run.
//   - V-S3 (V-R12 with drafts): with a step of r in flight (async scheduling) the
//     scheduler knows only the one token every step guarantees, so it skips r when
//     outputs so far + 1 reach max_tokens; otherwise it schedules the step even
//     when the drafts of the step in flight end r — that row runs, and its outputs
//     are discarded (r finished before they arrive).
//   - V-S4: the rejected drafts leave num_computed at the step's output (the next
//     step's context counts accepted tokens only).
func (s *sim) vllmSpecPlan(r *simReq, budget int) (n, ctx int, skip bool) {
	inflight := r.gSched > r.gOut // a step of r is in flight (async)
	if inflight && r.gOut+1 >= r.osl {
		return 0, 0, true // V-S3: the step in flight reaches max_tokens
	}
	n = 1 + s.e.DraftTokens // V-S1
	if thr := s.e.LongPrefillTokenThreshold; thr > 0 && n > thr {
		n = thr
	}
	n = min(n, budget)
	ctx = r.isl + r.gOut // computed before the step + 1 (V-S2, V-S4)
	if inflight {
		ctx += 1 + int(r.specIn)
	}
	return n, ctx, false
}

// vllmSpecAdd schedules the decode step vllmSpecPlan planned for request ri: n
// tokens (n − 1 drafts verified), context ctx.
func (s *sim) vllmSpecAdd(p *simPass, ri int32, n, ctx int) {
	r := &s.reqs[ri]
	p.tp.Decode = append(p.tp.Decode, ctx)
	if r.gSched >= r.osl { // V-S3: the step in flight ends r; this row's outputs are discarded
		p.entries = append(p.entries, entry{r: ri, n: 1, decode: true})
		return
	}
	spec := n - 1
	r.steps++
	out := min(1+min(engine.StepTokens(s.e.DraftAccepted, int(r.steps))-1, spec), r.osl-r.gSched)
	r.gSched += out
	r.specIn = int32(spec)
	p.entries = append(p.entries, entry{r: ri, n: 1, decode: true, emits: true})
	if out > 1 {
		p.extra = append(p.extra, draftOut{r: ri, more: int32(out - 1)})
	}
}

// vllmDraftRefuse stops the run with errVLLMDraftKV: vLLM preempts when a running
// request's slots do not fit, and with an MTP step in flight (async scheduling)
// that path (the placeholders and drafts of a preempted step) is not modelled.
func (s *sim) vllmDraftRefuse() {
	if s.kv.err == nil {
		s.kv.err = inputErr(errVLLMDraftKV)
	}
}
