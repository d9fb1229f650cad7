package queueing

import (
	"errors"
	"fmt"
	"math"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/workload"
)

// KV-capacity bookkeeping shared by the calendars (QUEUEING.md §3, SCHEDULERS.md
// V-R6, S-R4/S-R5, T-R1). Blocks are the engine's granularity (vLLM block_size,
// SGLang page_size, TRT-LLM tokens_per_block): a request holds r.blocks blocks and
// s.kvFree blocks are free. Without a KV capacity nothing here runs and the
// calendars behave exactly as before.

// SGLang new_token_ratio tracker defaults (S-R5, SCHEDULERS.md §3.5).
const (
	sglInitRatio    = 0.7                                // init = 0.7 × schedule_conservativeness 1.0
	sglMinRatio     = sglInitRatio * 0.14                // min = init × 0.14
	sglDecay        = (sglInitRatio - sglMinRatio) / 600 // per decode step
	sglClipMaxNew   = 4096                               // SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
	sglRetractSteps = 20                                 // retract_decode_steps
)

// kvState is the KV state of one recursion beyond the free-block count.
type kvState struct {
	on        bool // a KV capacity is set
	capBlocks int
	peakUsed  int // peak blocks in use
	// TRT-LLM MAX_UTILIZATION buffers (T-R2).
	list, fit, paused []int32
	// SGLang (S-R4/S-R5).
	ratio     float64 // new_token_ratio
	batchFull bool    // running_batch.batch_is_full (sticky)
	runLen    int     // len(running) after the last schedule (finishes shrink it)
	chunkRan  bool    // the last pass carried a non-final chunk (S-R2 filter)
	err       error   // a KV state the engine itself fails on
	// W4 session contexts (QuantitativeSessions, kvCtxTake): ctx[r] is the blocks of
	// the previous turn's context later turn r is assumed to find cached, counted in
	// ctxBlocks from that turn's finish until r holds KV itself; peakDemand is the
	// peak of the blocks in use + ctxBlocks, at peakAtMs. nil ctx: not tracked.
	ctx        []int32
	ctxBlocks  int
	peakDemand int
	peakAtMs   float64
}

// initKV sets up the KV state for capacity blocks (0: unbounded, nothing tracked).
func (s *sim) initKV(capacityTokens int) {
	if capacityTokens <= 0 {
		return
	}
	s.kvFree = capacityTokens / s.e.BlockSize
	s.kv = kvState{on: true, capBlocks: s.kvFree, ratio: sglInitRatio}
}

// promptLen is the prompt-phase length of r: its prompt, plus the outputs folded
// into it by a recompute after preemption (V-R6) or retraction (S-R5).
func (r *simReq) promptLen() int { return r.isl + r.rec }

// kvGrow makes r hold the blocks of its first tokens tokens; it reports false (and
// changes nothing) when the free blocks do not suffice (allocate_slots, V-R9).
func (s *sim) kvGrow(ri int32, tokens int) bool {
	// The held blocks cover tokens (⌈tokens/bs⌉ ≤ blocks): checked here, small
	// enough to inline into the calendars' per-row loops; taking blocks is kvTake.
	if tokens <= s.reqs[ri].blocks*s.e.BlockSize {
		return true
	}
	return s.kvTake(ri, tokens)
}

// kvTake is kvGrow when r needs blocks beyond those it holds.
func (s *sim) kvTake(ri int32, tokens int) bool {
	r := &s.reqs[ri]
	need := ceilDiv(tokens, s.e.BlockSize) - r.blocks
	if s.plainPool() { // every block needed is a free one
		return s.kvTakeFree(r, need)
	}
	take := need // free blocks taken: a hit on a block another running request holds takes none (V-R9)
	shared := s.share != nil && r.blocks < int(s.share.keyed[ri])
	if shared {
		take -= s.kvShareHeld(ri, r.blocks, r.blocks+need)
	}
	if take > s.kvFree {
		return false
	}
	if shared {
		s.kvShareTake(ri, r.blocks, r.blocks+need)
	}
	s.kvFree -= take
	r.blocks += need
	if s.kv.ctx != nil {
		s.kvCtxTake(ri)
	}
	return true
}

// plainPool reports a KV pool without shared prefix blocks or session
// contexts: a request's blocks are its own, all taken from the free ones.
func (s *sim) plainPool() bool { return s.share == nil && s.kv.ctx == nil }

// kvTakeFree gives r need more blocks from the free ones of a plain pool (no
// shared blocks, no session contexts); it reports false, changing nothing,
// when fewer are free.
func (s *sim) kvTakeFree(r *simReq, need int) bool {
	if need > s.kvFree {
		return false
	}
	s.kvFree -= need
	r.blocks += need
	return true
}

// kvCtxTake notes that request ri just took blocks (W4 session contexts): its
// session's cached context, if it was waiting for it, is now counted in its own
// blocks (a revived cached block takes a free block, V-R9), and the demand — the
// blocks in use plus the contexts of the sessions between turns — may peak here
// (it grows only when blocks are taken; a finish frees at least the context it
// leaves cached).
func (s *sim) kvCtxTake(ri int32) {
	if c := s.kv.ctx[ri]; c > 0 {
		s.kv.ctxBlocks -= int(c)
		s.kv.ctx[ri] = 0
	}
	if d := s.kv.capBlocks - s.kvFree + s.kv.ctxBlocks; d > s.kv.peakDemand {
		s.kv.peakDemand, s.kv.peakAtMs = d, s.now
	}
}

// kvEvict frees r's blocks and resets it to recompute prompt + outputs so far from
// scratch (V-R6 preempt, S-R5 retract): c := 0, its scheduled outputs fold into the
// prompt phase; with s.selfHits (vLLM prefix caching) the recompute starts from its
// last computed full block, which the calendar assumes still cached (the victim's
// blocks go to the free queue's tail; under pressure the DES evicts some of them). In async vLLM a token of r may still be in flight; it is emitted
// before r can be re-admitted (no admission in a pass that preempted, V-R3), so
// folding gSched (not gOut) is what the recompute sees. A cached prefix is lost
// with the blocks: under KV pressure the calendars see no prefix cache
// (checkKVFit), and a pulled prompt (V-D4, Kernel) is recomputed whole.
func (s *sim) kvEvict(ri int32) {
	r := &s.reqs[ri]
	computed := r.c // KV computed so far: the prompt position, or prompt + outputs
	if r.c >= r.promptLen() {
		computed = r.isl + r.gSched - 1
	}
	s.kvRelease(ri)
	r.c = 0
	r.prefix = 0
	r.rec = r.gSched
	r.preempts++
	s.evictions++
	if s.selfHits { // its full blocks stay cached (V-R6, V-R8): the recompute hits them
		r.prefix = max(r.prefix, min(computed, r.promptLen()-1)/s.e.BlockSize*s.e.BlockSize)
	}
}

// kvRelease frees request ri's blocks (finish, preemption): all of them but those
// another running request still references (shared prefix blocks, kv_share.go).
func (s *sim) kvRelease(ri int32) {
	r := &s.reqs[ri]
	freed := r.blocks
	if s.share != nil {
		freed -= s.kvShareDrop(ri)
	}
	s.kvFree += freed
	r.blocks = 0
}

// kvNote records the blocks in use after a schedule.
func (s *sim) kvNote() {
	if s.kv.on {
		s.kv.peakUsed = max(s.kv.peakUsed, s.kv.capBlocks-s.kvFree)
	}
}

// pushWaitingFront puts ri at the head of the waiting queue (V-R6).
func (s *sim) pushWaitingFront(ri int32) {
	if s.wHead > 0 {
		s.wHead--
		s.waiting[s.wHead] = ri
		return
	}
	s.waiting = append(s.waiting, 0)
	copy(s.waiting[1:], s.waiting)
	s.waiting[0] = ri
}

// removeRunning drops the i-th running request, keeping the order.
func (s *sim) removeRunning(i int) {
	s.running = append(s.running[:i], s.running[i+1:]...)
}

// decodeKVTokens is the KV a decode row of r needs: every token up to and including
// the last sampled one (context isl + outputs scheduled so far).
func decodeKVTokens(r *simReq) int { return r.isl + r.gSched }

// kvStretch bounds fastForward's decode stretch of cur (k passes after it) so that
// the stretch allocates no more blocks than are free: no preemption, retraction or
// mixed-chunk shortage can occur inside it, and the scheduled passes are those of
// the pass-by-pass recursion. Without a KV capacity, or for TRT-LLM
// GUARANTEED_NO_EVICT (reservations taken at admission, T-R1), k is unchanged.
func (s *sim) kvStretch(cur *simPass, k int) int {
	if !s.kvPerPass() {
		return k
	}
	// The blocks grow with j, so when all k passes fit (a pool not near full: the
	// common case) that is the answer without the search.
	if s.kvStretchBlocks(cur, k) <= s.kvFree {
		return k
	}
	lo, hi := 0, k-1 // the largest j in [0, k) whose blocks fit
	for lo < hi {
		j := (lo + hi + 1) / 2
		if s.kvStretchBlocks(cur, j) <= s.kvFree {
			lo = j
		} else {
			hi = j - 1
		}
	}
	return lo
}

// kvPerPass reports that decode rows allocate blocks pass by pass (vLLM, SGLang,
// TRT-LLM MAX_UTILIZATION), not by an admission reservation (GUARANTEED_NO_EVICT).
func (s *sim) kvPerPass() bool {
	return s.kv.on && s.tr.PerPassKV
}

// kvStretchBlocks is the number of new blocks the rows of cur (scheduled, gSched
// already counting cur's token) need over j more decode passes: pass i needs the KV
// of isl + gSched + i − 1 tokens.
func (s *sim) kvStretchBlocks(cur *simPass, j int) int {
	n := 0
	for _, en := range cur.entries {
		if !en.emits {
			continue // a spent row (sglSpentOnly): its request finished
		}
		r := &s.reqs[en.r]
		n += max(ceilDiv(decodeKVTokens(r)+j-1, s.e.BlockSize)-r.blocks, 0)
	}
	return n
}

// kvAdvance applies the KV effects of j stretch passes (before gSched advances):
// the rows' blocks, and for SGLang one new_token_ratio decay per decode step (S-R5).
func (s *sim) kvAdvance(cur *simPass, j int) {
	if !s.kvPerPass() || j <= 0 {
		return
	}
	for _, en := range cur.entries {
		s.kvGrow(en.r, decodeKVTokens(&s.reqs[en.r])+j-1)
	}
	if s.tr.RatioAdmission {
		// Step by step, the same floats as the pass-by-pass recursion, until the
		// floor, which further decays keep.
		for i := 0; i < j && s.kv.ratio > sglMinRatio; i++ {
			s.kv.ratio = math.Max(s.kv.ratio-sglDecay, sglMinRatio)
		}
	}
	s.kvNote()
}

// checkKVFit rejects a vLLM or SGLang KV capacity the calendars cannot serve: a
// cached prefix under KV pressure (shared prefix blocks and their eviction are not
// modelled), a request whose KV at its last token (tokens) exceeds the pool — it
// would be preempted and recomputed forever (V-R6) —, and for SGLang a request
// that an empty pool cannot admit (S-R4: extend + min(osl, 4096) < free tokens).
func checkKVFit(w workload.Spec, e engine.Spec, b shapeBounds, tokens int, what string) error {
	kv := e.KVCapacityTokens
	if kv <= 0 {
		return nil
	}
	if w.Prefix > 0 {
		return fmt.Errorf("engine kv_capacity_tokens = %d with workload prefix = %d: KV pressure with a cached prefix is not modelled for %s; drop one of them, or evaluate with the oracle (aicdb oracle)", kv, w.Prefix, e.Backend)
	}
	blocks := kv / e.BlockSize
	if need := ceilDiv(tokens, e.BlockSize); need > blocks {
		return fmt.Errorf("engine kv_capacity_tokens = %d: one request needs %d blocks of %d tokens for %s (isl %d + osl %d − 1) but the pool has %d; raise the KV capacity",
			kv, need, e.BlockSize, what, b.maxISL, b.maxOSL, blocks)
	}
	if e.Traits().RatioAdmission {
		if need := b.maxISL + min(b.maxOSL, sglClipMaxNew); need >= blocks*e.BlockSize {
			return fmt.Errorf("engine kv_capacity_tokens = %d: SGLang admits a request only if isl + min(osl, %d) = %d < the free KV tokens (%d when empty, S-R4); raise the KV capacity",
				kv, sglClipMaxNew, need, blocks*e.BlockSize)
		}
	}
	return nil
}

// errSGLDraftKV reports an EAGLE/NEXTN decode step whose verify slots do not fit
// the free pages: SGLang's retraction and admission under speculative decoding
// are not modelled, so the run is refused rather than answered.
var errSGLDraftKV = fmt.Errorf("queueing: SGLang: an EAGLE/NEXTN decode step's verify slots do not fit the free KV pages (SGLang's retraction and admission under speculative decoding are not modelled); raise kv_capacity_tokens or lower the concurrency")

// errVLLMDraftKV reports a vLLM running request whose KV slots (with the
// speculative lookahead) do not fit under async scheduling: vLLM would preempt,
// and preemption with an MTP step in flight is not modelled, so the run is
// refused rather than answered.
var errVLLMDraftKV = errors.New("queueing: vLLM: a running request's KV slots (with the drafts' lookahead) do not fit the free blocks, so vLLM would preempt, which is not modelled under speculative decoding with async scheduling; raise kv_capacity_tokens, lower the concurrency or turn async scheduling off")

// errSGLMixedKV reports a mixed-chunk batch whose decode rows find no free page:
// SGLang does not memory-check them and fails the same way.
var errSGLMixedKV = fmt.Errorf("queueing: SGLang: no free KV page for a decode row (the engine does not memory-check mixed-chunk batches, and one request may outgrow the pool alone); raise kv_capacity_tokens or disable enable_mixed_chunk")

// kvReport fills the KV columns of rep: the peak pool utilisation and the
// preemptions (or retractions) per steady request.
func (s *sim) kvReport(rep *Report) {
	if s.kv.on && s.kv.capBlocks > 0 {
		rep.KVUtilPeak = float64(s.kv.peakUsed) / float64(s.kv.capBlocks)
	}
	n, p := 0, 0
	for i := range s.reqs {
		if r := &s.reqs[i]; r.steady && r.finished {
			n++
			p += int(r.preempts)
		}
	}
	if n > 0 {
		rep.PreemptionsPerRequest = float64(p) / float64(n)
	}
}

// kvQueueBlocked reports that the waiting queue provably admits nobody during a
// decode stretch after cur (so fastForward may run with requests waiting): no
// request finishes and kvStretch forbids preemption, so free blocks only shrink.
// vLLM: the head's first chunk — min(rest, threshold, budget − decode rows) — needs
// more blocks than are free now, or max_num_seqs is reached (V-R3, head-of-line);
// SGLang: the sticky batch_is_full is set and no request is chunked (S-R4).
func (s *sim) kvQueueBlocked(cur *simPass) bool {
	return s.kv.on && s.rules.kvQueueBlocked(s, cur)
}

// kvQueueBlockedVLLM is kvQueueBlocked for vLLM (s.kv.on).
func (s *sim) kvQueueBlockedVLLM(cur *simPass) bool {
	if len(s.running) >= s.seqCap {
		return true
	}
	ri := s.waiting[s.wHead]
	r := &s.reqs[ri]
	if r.finished {
		return false
	}
	n := r.promptLen() - r.prefix
	if t := s.e.LongPrefillTokenThreshold; t > 0 && n > t {
		n = t
	}
	left := s.budget - len(cur.entries)
	if left <= 0 || (!s.e.EnableChunkedPrefill && n > left) {
		return true
	}
	need := ceilDiv(r.prefix+min(n, left), s.e.BlockSize)
	if s.share != nil && s.share.keyed[ri] > 0 {
		need -= s.kvShareHeld(ri, 0, need)
	}
	return need > s.kvFree
}

// screeningKVFree is e without a KV capacity the screening tier does not model
// (vLLM, SGLang, TRT-LLM MAX_UTILIZATION): the stagger phases take their spread from
// the screening cycle, which must not fall back to the burst transient merely
// because a KV capacity is set (an ample pool then changes nothing).
func screeningKVFree(e engine.Spec) engine.Spec {
	if e.Traits().PerPassKV {
		e.KVCapacityTokens = 0
	}
	return e
}

// checkTraceKV applies checkKVFit to a trace under a per-pass KV model (vLLM,
// SGLang, TRT-LLM MAX_UTILIZATION): its longest request must fit. A trace request's
// cached prefix is allowed (unlike a workload's prefix shared by every request):
// it is the reuse oracle's per-request hit, and its blocks count as the request's
// own (a revived cached block takes a free block, V-R9), except, for vLLM with
// prefix caching and hash ids, a block another running request holds (kv_share.go).
func checkTraceKV(reqs []TraceRequest, e engine.Spec) error {
	if e.KVCapacityTokens <= 0 || e.Traits().AdmissionReservesKV {
		return nil
	}
	var b shapeBounds
	for _, r := range reqs { // the longest request (isl + osl) decides the fit
		if r.ISL+r.OSL > b.maxISL+b.maxOSL {
			b.maxISL, b.maxOSL = r.ISL, r.OSL
		}
	}
	return checkKVFit(workload.Spec{}, e, b, b.maxISL+b.maxOSL-1, "its last token")
}
