package queueing

import (
	"context"
	"fmt"
	"math"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
)

// Kernel is one engine's pass calendar driven by an outside clock: the building
// block of multi-engine models (the disaggregated tandem, disagg/). It holds the
// same state as the limit-cycle recursion (sim) and schedules passes with the same
// calendars (scheduleVLLM, scheduleTRT, scheduleSGLang), but the driver owns time:
//
//	for t := k.NextEventMs(); !math.IsInf(t, 1); t = k.NextEventMs() {
//		k.Step(t) // complete the pass ending at t, start the next one at t
//	}
//
// Several kernels (and other event sources) share one clock by always stepping the
// one with the earliest NextEventMs. Work enters with Inject; a request finishing
// on a kernel built with Hold keeps its KV (and its κ slot) until Release.
type Kernel struct {
	s sim
	// wake is when an idle kernel next tries to schedule: work entered or a slot
	// was released (+Inf: nothing new since its last attempt).
	wake float64
	hold bool
	held int
	// tie holds the requests injected while a pass was in flight with an arrival at
	// that pass's very start: they reached the engine after it launched the pass
	// and scheduled the next one (an asynchronous engine), so that schedule does not
	// see them; every later one does.
	tie []int32
	// seats is the running cap (the engine's, lowered by SeqCap); kappa, when > 0,
	// caps running + held requests (InFlightCap).
	seats, kappa int
	// staged counts KV blocks taken by ReserveKV for requests not yet injected.
	staged int

	// OnToken, when set, is called for every emitted output token of request id at
	// time t; prev is the time of its previous token (−1 for its first). Under MTP
	// (engine.Spec.DraftTokens: vLLM's and TensorRT-LLM's MTP, SGLang's EAGLE) a
	// decode step's accepted drafts arrive with its token, each with prev = t.
	OnToken func(id int, prev, t float64)
	// OnFinish, when set, is called when request id emits its last token at t.
	OnFinish func(id int, t float64)
	// OnEntry, when set, is called for every entry of a completed pass with the
	// pass start (e.g. to find when a request was first scheduled).
	OnEntry func(id int, start float64)
}

// KernelRequest is one request given to a Kernel.
type KernelRequest struct {
	// ArrivalMs is when the request becomes visible to the scheduler (≥ the kernel's
	// clock at Inject).
	ArrivalMs float64
	ISL       int
	Prefix    int // prompt tokens served from the prefix cache (< ISL)
	// OSL is the number of output tokens the request emits on this kernel counting
	// the first (1 = a prefill-only request: it finishes at prompt completion).
	OSL int
	// Prefilled marks a request whose whole prompt is already in KV and whose first
	// token was emitted elsewhere (a decode worker's handoff): it needs only a
	// running slot and OSL − 1 decode rows (context isl + 1 onwards).
	Prefilled bool
	// ReservedKV (KV kernels) marks a request whose prompt blocks ReserveKV took
	// before it arrived (V-D2: a pull allocates them before the transfer): it
	// enters holding ceil(ISL / block_size) blocks.
	ReservedKV bool
}

// KernelOptions tunes a Kernel.
type KernelOptions struct {
	// SeqCap, when > 0, lowers the engine's cap on running requests (a per-worker
	// batch cap).
	SeqCap int
	// InFlightCap, when > 0, is κ: running requests plus those held for their pull
	// (Hold) never exceed it.
	InFlightCap int
	// Hold keeps a finished request's KV until Release (prefill-side hold of pull
	// connectors, QUEUEING.md §6): it counts against InFlightCap but takes no seat
	// of the engine — the request leaves the running set when its prompt is done
	// (V-P3, T-D1). It implies Prefill.
	Hold bool
	// Prefill marks a disaggregated prefill worker (push or pull connector): a
	// request whose prompt completes never joins a running batch, so the SGLang
	// overlap scheduler runs no discarded decode pass for it (S-R2, §3.2), as in
	// the oracle's prefill instances.
	Prefill bool
	// KVCapacityTokens, when > 0, gives a vLLM kernel the engine's KV pool: every
	// scheduled item allocates its blocks pass by pass and a running item that
	// cannot preempts by recompute (V-R6, V-R9) — the aggregated calendar's KV
	// model (kv.go). On a Hold kernel (a prefill worker of a pull connector) a
	// finished prompt keeps its blocks until Release (V-P3: vLLM's connector
	// delays the free until finished_sending; T-D1: TensorRT-LLM keeps a context
	// request's KV until its transfer completes), so the prompts held for their
	// pull fill the pool: a vLLM admission that does not fit waits head-of-line
	// for a release (V-R3) and a prompt chunk that does not fit preempts (V-R6); a
	// TensorRT-LLM context request is admitted only when its reservation to
	// completion fits (T-R1, or T-R2's one-step need under MAX_UTILIZATION). A
	// TensorRT-LLM decode kernel and SGLang kernels do not take it (the tandem
	// keeps their KV).
	KVCapacityTokens int
}

// NewKernel returns an idle kernel at time 0 for engine e priced by t. e's own KV
// capacity is ignored: the kernel models KV only when o.KVCapacityTokens is set
// (vLLM); otherwise callers that need KV accounting keep it themselves. e must
// otherwise validate.
func NewKernel(e engine.Spec, t timing.Timing, o KernelOptions) (*Kernel, error) {
	if t == nil {
		return nil, inputErr(fmt.Errorf("timing: none given"))
	}
	if err := e.Validate(); err != nil {
		return nil, inputErr(err)
	}
	if o.SeqCap < 0 || o.InFlightCap < 0 {
		return nil, inputErr(fmt.Errorf("kernel seq cap = %d, in-flight cap = %d: must be ≥ 0", o.SeqCap, o.InFlightCap))
	}
	if e.RecvEvery() > 0 {
		return nil, inputErr(fmt.Errorf("engine scheduler_recv_interval = %d: SGLang's skipped request receipt (S-R7) is modelled for aggregated engines only, not for a disaggregated pool, whose requests also arrive through its transfer queue; drop it for the pools", e.SchedulerRecvInterval))
	}
	if o.KVCapacityTokens < 0 || (o.KVCapacityTokens > 0 && (!rulesFor(e.Backend).kernelKV(o.Hold) || o.KVCapacityTokens < e.BlockSize)) {
		return nil, inputErr(fmt.Errorf("kernel kv capacity = %d tokens: a kernel models KV only for vLLM and a TensorRT-LLM prefill hold, at least one block of %d tokens", o.KVCapacityTokens, e.BlockSize))
	}
	e.KVCapacityTokens = 0
	k := &Kernel{hold: o.Hold, wake: math.Inf(1)}
	k.s = newSim(e, t)
	k.s.maxPasses, k.s.prefillSide = math.MaxInt, o.Prefill || o.Hold
	if o.SeqCap > 0 && o.SeqCap < k.s.seqCap {
		k.s.seqCap = o.SeqCap
	}
	k.seats, k.kappa = k.s.seqCap, o.InFlightCap
	k.capSeats()
	k.s.initKV(o.KVCapacityTokens)
	k.s.holdKV = o.Hold && k.s.kv.on
	k.s.onPass = k.onPass
	k.s.onFinish = k.onFinish
	return k, nil
}

// capSeats sets the running cap: the seats, and with κ no more than κ less the
// requests held for their pull (a held request takes no seat, V-P3/T-D1).
func (k *Kernel) capSeats() {
	k.s.seqCap = k.seats
	k.s.runCapOn = k.kappa > 0
	if k.kappa > 0 {
		k.s.runCap = max(k.kappa-k.held, 0)
		k.s.seqCap = min(k.seats, k.s.runCap)
	}
}

// Now returns the kernel's clock: the last time it was stepped to.
func (k *Kernel) Now() float64 { return k.s.now }

// Passes returns the number of passes completed.
func (k *Kernel) Passes() int { return k.s.passes }

// Inject adds request r and returns its id (dense, from 0). r.ArrivalMs must not
// precede the kernel's clock.
func (k *Kernel) Inject(r KernelRequest) (int, error) {
	if r.ArrivalMs < k.s.now || math.IsNaN(r.ArrivalMs) || math.IsInf(r.ArrivalMs, 0) {
		return 0, fmt.Errorf("queueing: kernel inject at %v ms before its clock %v ms (internal)", r.ArrivalMs, k.s.now)
	}
	if r.ISL <= 0 || r.OSL <= 0 || r.Prefix < 0 || r.Prefix >= r.ISL {
		return 0, inputErr(fmt.Errorf("kernel request isl %d, osl %d, prefix %d: want isl ≥ 1, osl ≥ 1, 0 ≤ prefix < isl", r.ISL, r.OSL, r.Prefix))
	}
	if r.Prefilled && r.OSL < 2 {
		return 0, inputErr(fmt.Errorf("kernel request: a prefilled request needs osl ≥ 2 (its first token came with the prompt), got %d", r.OSL))
	}
	id := len(k.s.reqs)
	q := simReq{slot: -1, arrival: r.ArrivalMs, isl: r.ISL, prefix: r.Prefix, osl: r.OSL}
	if r.ReservedKV {
		nb := ceilDiv(r.ISL, k.s.e.BlockSize)
		if !k.s.kv.on || r.Prefilled || nb > k.staged {
			return 0, fmt.Errorf("queueing: kernel inject of a request with %d reserved KV blocks: %d staged (internal)", nb, k.staged)
		}
		k.staged -= nb
		q.blocks = nb
	}
	if r.Prefilled {
		q.prefix, q.c, q.gSched, q.gOut = r.ISL, r.ISL, 1, 1
		q.first, q.last = r.ArrivalMs, r.ArrivalMs
	}
	k.s.reqs = append(k.s.reqs, q)
	k.s.prefilled = append(k.s.prefilled, r.Prefilled)
	if k.s.busy && k.s.e.AsyncScheduling && r.ArrivalMs == k.s.curStart {
		k.tie = append(k.tie, int32(id))
		return id, nil
	}
	k.enqueue(int32(id))
	k.wake = math.Min(k.wake, r.ArrivalMs)
	return id, nil
}

// enqueue adds request id to the requests not yet visible, kept sorted by
// arrival (stable for ties).
func (k *Kernel) enqueue(id int32) {
	in := append(k.s.incoming, id)
	i := len(in) - 1
	for i > k.s.inHead && k.s.reqs[in[i-1]].arrival > k.s.reqs[id].arrival {
		in[i] = in[i-1]
		i--
	}
	in[i] = id
	k.s.incoming = in
}

// KVCapBlocks returns the kernel's KV pool in blocks (0: no KV modelled).
func (k *Kernel) KVCapBlocks() int { return k.s.kv.capBlocks }

// KVFreeBlocks returns the free KV blocks (blocks staged by ReserveKV are not free).
func (k *Kernel) KVFreeBlocks() int { return k.s.kvFree }

// KVPeakBlocks returns the most KV blocks in use (staged included) after any
// schedule or reservation so far.
func (k *Kernel) KVPeakBlocks() int { return k.s.kv.peakUsed }

// Preempts returns how many times request id was preempted (V-R6).
func (k *Kernel) Preempts(id int) int { return int(k.s.reqs[id].preempts) }

// PullableKVBlocks returns the free KV blocks a pull may allocate now. vLLM runs
// the remote allocation (V-D2) inside the waiting phase (V-R3), head-of-line: a
// preempted request at the head of waiting — it holds no blocks, a pulled one
// holds its prompt's — stops every allocation behind it (0).
func (k *Kernel) PullableKVBlocks() int {
	s := &k.s
	if !s.kv.on {
		return 0
	}
	if s.waitingLen() > 0 && s.reqs[s.waiting[s.wHead]].blocks == 0 {
		return 0
	}
	return s.kvFree
}

// ReserveKV takes, now, the blocks of a prompt of isl tokens for a request to be
// injected later with ReservedKV (V-D2); it reports false and changes nothing when
// PullableKVBlocks cannot cover them.
func (k *Kernel) ReserveKV(isl int) bool {
	nb := ceilDiv(isl, max(k.s.e.BlockSize, 1))
	if isl <= 0 || nb > k.PullableKVBlocks() {
		return false
	}
	k.s.kvFree -= nb
	k.staged += nb
	k.s.kvNote()
	return true
}

// Release frees, at time at (≥ the kernel's clock), what a finished request holds
// for its pull (Hold kernels): its KV (when the kernel models it) and its κ slot.
func (k *Kernel) Release(id int, at float64) error {
	// blocks = −1 marks a released hold; without a KV model a held request holds 0.
	if !k.hold || id < 0 || id >= len(k.s.reqs) || !k.s.reqs[id].finished || k.s.reqs[id].blocks < 0 ||
		(!k.s.kv.on && k.s.reqs[id].blocks != 0) || at < k.s.now {
		return fmt.Errorf("queueing: kernel release of request %d at %v ms: it holds no slot or the time precedes the clock %v ms (internal)", id, at, k.s.now)
	}
	if k.s.reqs[id].blocks > 0 {
		k.s.kvRelease(int32(id)) // V-P3: finished_sending frees the held blocks
	}
	k.s.reqs[id].blocks = -1
	k.held--
	k.capSeats()
	k.wake = math.Min(k.wake, at)
	return nil
}

// NextEventMs returns the time of the kernel's next event: the end of the pass in
// flight, or — when idle — the instant new work can be scheduled (+Inf: none until
// something is injected or released).
func (k *Kernel) NextEventMs() float64 {
	if k.s.busy {
		return k.s.curEnd
	}
	return math.Max(k.wake, k.s.now)
}

// Step advances the kernel to time t, which must be its NextEventMs (or any time
// ≥ its clock while it is idle): the pass ending at t completes (tokens and
// finishes are reported through the callbacks), then, when idle, the next pass is
// scheduled at t. Synchronous engines schedule at a pass end; asynchronous ones
// (V-R10, the TRT-LLM overlap executor, the SGLang overlap scheduler) schedule
// pass k+1 at the start of pass k, seeing arrivals up to that instant — the one
// pass lifecycle of sim.run (schedulePass, finishPass).
func (k *Kernel) Step(t float64) error {
	s := &k.s
	if s.busy {
		if t != s.curEnd {
			return fmt.Errorf("queueing: kernel stepped to %v ms while its pass ends at %v ms (internal)", t, s.curEnd)
		}
		// An asynchronous engine scheduled the next pass at this pass's start
		// (scheduleEarly), before what happened since (releases, pulls).
		started, err := s.finishPass(context.Background())
		for _, id := range k.tie { // visible from here on (their arrival has passed)
			k.enqueue(id)
		}
		k.tie = k.tie[:0]
		if err != nil || started {
			k.scheduleEarly()
			return err
		}
	} else {
		if t < s.now {
			return fmt.Errorf("queueing: kernel stepped back from %v to %v ms (internal)", s.now, t)
		}
		s.now = t
	}
	k.wake = math.Inf(1)
	ok, err := k.schedule()
	if err == nil && !ok {
		if t, ok := s.nextArrival(); ok {
			k.wake = t // try again when the next request becomes visible
		}
	}
	if ok {
		k.scheduleEarly()
	}
	return err
}

// scheduleEarly schedules, at the start of the pass just put in flight, the
// pass an asynchronous engine launches after it (V-R10, the TRT-LLM overlap
// executor, the SGLang overlap scheduler): releases, pulls and injections before
// that pass ends meet the state its schedule left, as in the engines.
func (k *Kernel) scheduleEarly() {
	if k.s.busy && k.s.e.AsyncScheduling {
		k.s.scheduleEarly()
	}
}

// schedule schedules a pass at the clock. A schedule that preempted and
// scheduled nothing (a running prompt chunk evicted itself: the blocks it needed
// are held for pulls, V-R6) admits nothing in that pass (V-R3), but the engine
// loop schedules again at once: the victim, at the head of waiting, may fit
// now that its own blocks are free — as the DES's engine does.
func (k *Kernel) schedule() (bool, error) {
	for {
		ev := k.s.evictions
		ok, err := k.s.schedulePass()
		if err != nil || ok || k.s.evictions == ev {
			return ok, err
		}
	}
}

func (k *Kernel) onPass(s *sim, p *simPass, start, end float64) {
	if k.OnEntry != nil {
		for _, en := range p.entries {
			k.OnEntry(int(en.r), start)
		}
	}
	if k.OnToken == nil {
		return
	}
	for _, en := range p.entries {
		if !en.emits {
			continue
		}
		r := &s.reqs[en.r]
		prev := -1.0
		if r.gOut >= 1 {
			prev = r.last
		}
		k.OnToken(int(en.r), prev, end)
	}
	for _, x := range p.extra { // MTP: each step's accepted drafts, with its token (emitMore)
		for range x.more {
			k.OnToken(int(x.r), end, end)
		}
	}
}

func (k *Kernel) onFinish(s *sim, ri int32, now float64) {
	if k.hold {
		k.held++
		k.capSeats()
	}
	if k.OnFinish != nil {
		k.OnFinish(int(ri), now)
	}
}
