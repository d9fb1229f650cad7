package oracle

import (
	"github.com/aicdb/aicdb/engine"
)

// engineRules are the per-backend steps of the oracle's engine loop: the
// scheduler of one iteration, the update of its outputs, and the backend's
// handling of a disaggregated decode side's pulls. One value per backend, chosen
// once in New (rulesFor), so Sim dispatches without switching on the backend.
// Knobs that are traits (overlap, per-pass KV, first-token recompute …) stay in
// engine.Calendar. This is the oracle's own seam, independent of queueing's.
type engineRules interface {
	// init prepares the backend's state on a new Sim.
	init(s *Sim)
	// schedule forms the next pass into pb.
	schedule(s *Sim, pb *passBuf)
	// update applies the outputs of a finished pass.
	update(s *Sim, pb *passBuf)
	// pending reports backend-held work outside running and waiting (SGLang: the
	// chunked request, last_batch's completed prompts and, on a decode server,
	// the transferred requests waiting for a seat, S-R2).
	pending(s *Sim) bool
	// remoteNeed returns the blocks a decode-side pull of prompt p and maxTokens
	// outputs must find before it starts (V-D2, T-D3).
	remoteNeed(s *Sim, p, maxTokens int) int
	// remoteAvail returns the blocks a new pull can take (V-R3 head-of-line, T-R1).
	remoteAvail(s *Sim) int
	// reserved accounts a pull's reservation to completion once r holds its
	// prompt blocks (TRT-LLM T-D3); a no-op elsewhere.
	reserved(s *Sim, r *req)
	// landRemote admits a landed request ri at a pass boundary (V-D4, T-D4, S-R2).
	landRemote(s *Sim, ri int32)
	// idle runs when the engine loop has no batch to run and none in flight
	// (SGLang's on_idle, §3.2); a no-op elsewhere.
	idle(s *Sim)
}

// vllmRules: vLLM V1 (V-R*, V-D*).
type vllmRules struct{}

// trtRules: TRT-LLM (T-R*, T-D*).
type trtRules struct{}

// sglangRules: SGLang (S-R*).
type sglangRules struct{}

// rulesFor returns b's engine rules from an immutable table built per call (no
// package state); nil when the oracle has no rules for b.
func rulesFor(b engine.Backend) engineRules {
	table := [...]struct {
		b engine.Backend
		r engineRules
	}{{engine.VLLM, vllmRules{}}, {engine.TRTLLM, trtRules{}}, {engine.SGLang, sglangRules{}}}
	for _, t := range table {
		if t.b == b {
			return t.r
		}
	}
	return nil
}

func (vllmRules) idle(*Sim)     {}
func (trtRules) idle(*Sim)      {}
func (sglangRules) idle(s *Sim) { s.sglOnIdle() }

func (vllmRules) init(*Sim) {}
func (trtRules) init(*Sim)  {}
func (sglangRules) init(s *Sim) {
	s.sgl.chunked = -1
	s.sgl.ratio = sglInitRatio
}

func (vllmRules) schedule(s *Sim, pb *passBuf)   { s.scheduleVLLM(pb) }
func (trtRules) schedule(s *Sim, pb *passBuf)    { s.scheduleTRT(pb) }
func (sglangRules) schedule(s *Sim, pb *passBuf) { s.scheduleSGLang(pb) }

func (vllmRules) update(s *Sim, pb *passBuf)   { s.updateVLLM(pb) }
func (trtRules) update(s *Sim, pb *passBuf)    { s.updateTRT(pb) }
func (sglangRules) update(s *Sim, pb *passBuf) { s.updateSGLang(pb) }

func (vllmRules) pending(*Sim) bool { return false }
func (trtRules) pending(*Sim) bool  { return false }
func (sglangRules) pending(s *Sim) bool {
	return s.sgl.chunked >= 0 || len(s.sgl.last) > 0 || len(s.sgl.landed) > 0
}

// remoteNeed: vLLM allocates the whole prompt's blocks (V-D2); SGLang
// preallocates the prompt's pages when the request arrives (S-D2; its own
// allocatable-token test is not modelled, SCHEDULERS.md §3.9); TRT-LLM reserves
// blocks to completion (T-D3).
func (vllmRules) remoteNeed(s *Sim, p, _ int) int   { return (p + s.bs - 1) / s.bs }
func (sglangRules) remoteNeed(s *Sim, p, _ int) int { return (p + s.bs - 1) / s.bs }
func (trtRules) remoteNeed(s *Sim, p, maxTokens int) int {
	return (p + maxTokens + s.bs - 1) / s.bs
}

// remoteAvail (vLLM, SGLang): V-D1/V-D2 run in the waiting phase (V-R3),
// head-of-line: a preempted request at the head that does not fit stops every
// allocation behind it.
func (vllmRules) remoteAvail(s *Sim) int   { return headOfLineAvail(s) }
func (sglangRules) remoteAvail(s *Sim) int { return headOfLineAvail(s) }

func headOfLineAvail(s *Sim) int {
	if s.waiting.len() > 0 && !s.dis.remote[s.waiting.at(0)] {
		return 0
	}
	return s.pool.nfree
}

// remoteAvail (TRT-LLM GUARANTEED_NO_EVICT): the free blocks less those the
// running generation requests and the transfers in flight have reserved to
// completion (T-R1, T-D3).
func (trtRules) remoteAvail(s *Sim) int {
	avail := s.pool.nfree - s.dis.xferBlocks
	for _, ri := range s.running {
		if r := &s.reqs[ri]; r.st != stFinished { // finished this pass: freed, not yet dropped
			avail -= s.trtRemainingBlocks(r)
		}
	}
	return avail
}

func (vllmRules) reserved(*Sim, *req)    {}
func (sglangRules) reserved(*Sim, *req)  {}
func (trtRules) reserved(s *Sim, r *req) { s.dis.xferBlocks += s.trtRemainingBlocks(r) }

// landRemote (vLLM): re-queued as WAITING (V-D4), admitted by admitRemoteVLLM.
func (vllmRules) landRemote(s *Sim, ri int32) {
	s.reqs[ri].st = stWaiting
	s.enqueueArrival(ri)
}

// landRemote (SGLang): the transferred request joins the decode server's
// waiting queue, FIFO; sglAdmitLanded moves it into the running batch when the
// next batch is formed and a seat is free (S-R2: get_new_prebuilt_batch).
func (sglangRules) landRemote(s *Sim, ri int32) {
	s.sgl.landed = append(s.sgl.landed, ri)
}

// landRemote (TRT-LLM): joins the running batch as a generation request with the
// first token appended (T-D4); its reservation leaves the transfers in flight.
func (trtRules) landRemote(s *Sim, ri int32) {
	s.landRunning(ri)
	s.dis.xferBlocks -= s.trtRemainingBlocks(&s.reqs[ri])
	s.running = append(s.running, ri)
	s.insertRunningOrdered()
}
