package oracle

import (
	"math"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
)

// The engine side of disaggregated serving: what a prefill-only or decode-only
// engine instance does differently from an aggregated one (SCHEDULERS.md §2.9,
// §4.6). The DES of disagg.go drives these engines; an aggregated Sim has dis == nil
// and none of this runs.

// disState is the disaggregation state of one engine instance.
type disState struct {
	// holdKV (prefill side): a request that finished its prompt keeps its KV blocks
	// until the decode side has pulled them (V-P3, T-D1); it leaves the running set
	// (no slot, no budget).
	holdKV bool
	held   int // finished requests still holding KV
	// blocked: the engine could not schedule anything because held KV fills its pool;
	// it waits for a release (NextEventMs is +Inf until then).
	blocked bool
	// remote[r] (decode side): request r's prompt KV was (or is being) pulled from a
	// prefill worker; cleared when it is admitted.
	remote []bool
	// xferBlocks (TRT-LLM decode side): blocks reserved to completion by gen-init
	// requests whose transfer is in flight, beyond the prompt blocks they already
	// hold (T-D3); the capacity scheduler counts them as used.
	xferBlocks int
	// firstStart[r] is the start of request r's first pass (-1 before), for the
	// prefill queueing delay.
	firstStart []float64
}

// newDisSim returns an engine instance for one side of a disaggregated deployment.
func newDisSim(eng engine.Spec, t timing.Timing, prefill bool) (*Sim, error) {
	s, err := New(eng, t, Options{})
	if err != nil {
		return nil, err
	}
	s.dis = &disState{holdKV: prefill}
	return s, nil
}

// advanceTo moves an engine's clock to t when an outside event (a release, a
// landing) reaches it: the driver steps sources in time order, so the engine has
// nothing to do before t.
func (s *Sim) advanceTo(t float64) {
	s.now = math.Max(s.now, t)
}

// addPrefill queues a prefill-only request (max_tokens 1, V-P1/T-D1) arriving at at.
func (s *Sim) addPrefill(at float64, p int) int32 {
	ri := s.add("", at, p, nil, 0, 1, 0, -1)
	s.dis.grow(len(s.reqs))
	return ri
}

func (d *disState) grow(n int) {
	for len(d.firstStart) < n {
		d.firstStart = append(d.firstStart, -1)
		d.remote = append(d.remote, false)
	}
}

// noteLaunch records the first pass start of every request of pb.
func (s *Sim) noteLaunch(pb *passBuf) {
	for _, e := range pb.entries {
		if s.dis.firstStart[e.r] < 0 {
			s.dis.firstStart[e.r] = pb.start
		}
	}
}

// releaseHeld frees the KV a finished prefill request held for its pull (V-P3:
// finished_sending; T-D1: transfer complete) at t.
func (s *Sim) releaseHeld(ri int32, t float64) {
	s.advanceTo(t)
	s.freeTable(ri)
	s.dis.held--
	s.dis.blocked = false
	// SGLang: freed KV clears batch_is_full as a finishing request does (S-R2);
	// the send's completion returns the KV of the inflight queue (S-D3), and
	// without this a NO_TOKEN stop would never be retried.
	s.sgl.batchFull = false
}

// remoteNeed returns the blocks a decode-side request of prompt p and maxTokens
// outputs must find before its pull starts: vLLM allocates the whole prompt's blocks
// (V-D2), TRT-LLM reserves blocks to completion (T-D3), SGLang preallocates the
// prompt's pages when the request arrives (S-D2; SGLang's own allocatable-token
// test is not modelled: the pages must be free).
func (s *Sim) remoteNeed(p, maxTokens int) int { return s.rules.remoteNeed(s, p, maxTokens) }

// remoteAvail returns the blocks a new pull can take: the free blocks, less (for
// TRT-LLM GUARANTEED_NO_EVICT) the blocks the running generation requests and the
// transfers in flight have reserved to completion (T-R1, T-D3).
func (s *Sim) remoteAvail() int { return s.rules.remoteAvail(s) }

// reserveRemote creates the decode-side request of a pull (prompt p, maxTokens
// output tokens counting the first, which the prefill worker emitted) and
// allocates its prompt KV now, before the transfer (V-D2, T-D3). The caller has
// checked remoteAvail ≥ remoteNeed. The request is not schedulable until land.
func (s *Sim) reserveRemote(at float64, p, maxTokens int) int32 {
	i := int32(len(s.reqs))
	nb := (p+maxTokens)/s.bs + 2
	g := 1 // the prefill worker's first token is already appended (T-D4)
	mt := maxTokens
	if s.eng.Traits().DecodeRecomputesFirstToken {
		// V-D4/V-D5: the decode side recomputes the last prompt token and samples
		// the next token itself; it emits the maxTokens − 1 tokens after the first.
		g, mt = 0, maxTokens-1
	}
	s.reqs = append(s.reqs, req{
		id: idOr("", i), uid: uint64(i) + 1, arrival: at, p: p, maxTokens: mt, g: g,
		group: 1, numCached: -1, client: -1, st: stPending,
		table: make([]int32, 0, nb), tokTimes: make([]float64, 0, maxTokens),
	})
	s.dis.grow(len(s.reqs))
	s.dis.remote[i] = true
	r := &s.reqs[i]
	for need := (p + s.bs - 1) / s.bs; len(r.table) < need; {
		r.table = append(r.table, s.popBlock())
	}
	s.rules.reserved(s, r)
	return i
}

// cancelRemote drops a reserved decode-side request whose prompt needs no decode
// (a one-token output finished on its prefill worker): its KV returns at t.
func (s *Sim) cancelRemote(ri int32, t float64) {
	s.advanceTo(t)
	s.freeTable(ri)
	s.dis.remote[ri] = false
	s.reqs[ri].st = stFinished
}

// land makes a pulled request visible to the decode scheduler at t: the transfer's
// completion is seen at the next pass boundary (V-D3), as an arrival.
func (s *Sim) land(ri int32, t float64) {
	s.advanceTo(t)
	s.reqs[ri].arrival = t
	s.pushArrival(t, ri)
}

// absorbRemote admits a landed request at a pass boundary and reports whether ri
// was one: vLLM re-queues it as WAITING (V-D4, admitted by admitRemoteVLLM); TRT-LLM
// joins the running batch as a generation request with the first token appended
// (T-D4); SGLang queues it FIFO for a seat in the running batch, which it joins
// the same way when a batch is formed (S-R2, sglAdmitLanded).
func (s *Sim) absorbRemote(ri int32) bool {
	if s.dis == nil || !s.dis.remote[ri] {
		return false
	}
	s.rules.landRemote(s, ri)
	return true
}

// landRunning marks a landed request ri running with its prompt computed and the
// prefill worker's first token appended (T-D4); the caller adds it to running.
func (s *Sim) landRunning(ri int32) {
	r := &s.reqs[ri]
	s.dis.remote[ri] = false
	r.st, r.c, r.gStart = stRunning, r.p, 0
	r.numCached = r.p
}

// admitRemoteVLLM admits the waiting head wi into pb if its prompt KV was pulled
// (V-D4): c := num_tokens − 1 (the pulled blocks cover the prompt), admitted with
// n = 1 — the last prompt token is recomputed and the next token sampled (V-D5). It
// costs one token of budget and a running slot (the caller checked both). It
// reports whether wi was such a request.
func (s *Sim) admitRemoteVLLM(pb *passBuf, wi int32) bool {
	if s.dis == nil || !s.dis.remote[wi] {
		return false
	}
	w := &s.reqs[wi]
	s.dis.remote[wi] = false
	s.waiting.popFront()
	s.running = append(s.running, wi)
	w.st = stRunning
	w.c, w.hits = w.p-1, w.p-1
	if w.numCached < 0 {
		w.numCached = w.p - 1
	}
	pb.entries = append(pb.entries, entry{r: wi, n: 1})
	return true
}
