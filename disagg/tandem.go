package disagg

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// PrefillHoldsError is a quantitative run stopped where a prefill worker took a
// prompt while holding, for prompts waiting for their decode worker, KV that
// with the prompt's exceeds its pool (the prefill Pool's KVCapacityTokens): the
// engine would have stalled that prefill, which the tandem does not model. The
// check is sufficient, not complete: running prompts' partial KV is not counted.
type PrefillHoldsError struct {
	NeedTokens int // the held KV plus the prompt's, whole prefill blocks
	PoolTokens int // the prefill worker's pool
}

func (e *PrefillHoldsError) Error() string {
	return fmt.Sprintf("a prefill worker took a prompt while holding the KV of prompts waiting for their decode worker, %d tokens in all, above its pool of %d: the prefill engine would have stalled, which the tandem does not model",
		e.NeedTokens, e.PoolTokens)
}

// PromptsHeld is how many prompts of isl tokens, in whole blocks of bs tokens, a
// prefill pool of e.PoolTokens holds: an in-flight cap (κ) at or below it keeps
// the holds within the pool.
func (e *PrefillHoldsError) PromptsHeld(isl, bs int) int {
	return e.PoolTokens / wholeBlocks(isl, bs)
}

// Options tunes a quantitative tandem evaluation; the zero value selects the
// defaults.
type Options struct {
	// WarmupGenerations (closed loop): requests per client before the window
	// (default 4).
	WarmupGenerations int
	// WindowGenerations (closed loop): steady requests per client (default
	// max(8, ceil(128/C))).
	WindowGenerations int
	// OpenLoopRequests: open-loop requests when the workload does not set
	// NumRequests (default workload.ArrivalStrata).
	OpenLoopRequests int
	// NoMultiStability skips the second (staggered-start) run that detects
	// multi-stability.
	NoMultiStability bool
	// Progress, if set, is called by a trace replay (QuantitativeTrace,
	// QuantitativeSessions) after each finished request with the requests
	// finished and the trace's requests: for a progress report. It does not
	// change the replay.
	Progress func(done, total int)

	spreadMs float64 // closed loop: initial spread of the clients (internal)
}

// Report is a tandem evaluation: the aggregated report's distributions and
// throughput plus the handoff diagnostics.
type Report struct {
	queueing.Report
	// KVTransfer is the distribution of the steady requests' KV flow durations (ms,
	// from the transfer start to its last byte).
	KVTransfer queueing.Distribution
	// PQueueMsP99 is the p99 of the prefill-side queueing delay (visibility → the
	// start of the request's first prefill pass).
	PQueueMsP99 float64
	// DHeadroomMin is the smallest free share of a decode worker's KV (0..1) seen at
	// a transfer decision in the window (1 when the decode KV is unbounded).
	DHeadroomMin float64
	// PrefillAdmitPeakTokens is the most KV (tokens, whole prefill blocks) a
	// prefill worker needed when it took a prompt: the KV it held for prompts it
	// had finished and not yet sent plus the new prompt's. The tandem does not
	// model the prefill pool; a run given one (the prefill Pool's
	// KVCapacityTokens) stops at the first admission above it (PrefillHoldsError).
	PrefillAdmitPeakTokens int
	// MultiStable flags two steady regimes reached from different starts (the burst
	// and a staggered start disagree on throughput by more than 2 %); the report's
	// steady numbers are then the flagged mixture of both.
	MultiStable bool
	// BurstThroughputRPS and StaggeredThroughputRPS are the two starts'
	// throughputs (closed loop with the multi-stability check; else 0).
	BurstThroughputRPS, StaggeredThroughputRPS float64

	// pQueue is the distribution behind PQueueMsP99 (pooled by an open run's paths).
	pQueue queueing.Distribution
}

// Columns returns the aggregated columns (queueing.Report.Columns) plus
// kv_transfer_ms_mean, kv_transfer_ms_p99, p_queue_ms_p99, d_headroom_min,
// multi_stable and, when both starts ran, throughput_rps_burst and
// throughput_rps_staggered.
func (r *Report) Columns(gpus int) map[string]any {
	m := r.Report.Columns(gpus)
	if r.Unstable {
		return m
	}
	m["kv_transfer_ms_mean"] = r.KVTransfer.Mean()
	m["kv_transfer_ms_p99"] = r.KVTransfer.Quantile(0.99)
	m["p_queue_ms_p99"] = r.PQueueMsP99
	m["d_headroom_min"] = r.DHeadroomMin
	m["multi_stable"] = r.MultiStable
	if r.BurstThroughputRPS > 0 {
		m["throughput_rps_burst"] = r.BurstThroughputRPS
		m["throughput_rps_staggered"] = r.StaggeredThroughputRPS
	}
	return m
}

var errWorkload = errors.New("workload: give exactly one of concurrency (closed loop, ≥ 1) or rate (open loop, > 0)")

// Limits of one evaluation.
const (
	maxRequests = 1 << 18
	maxEvents   = 5e7
)

// Quantitative evaluates w on the tandem c by a deterministic event recursion
// over the pools' pass calendars (queueing.Kernel), the fluid fabric and the
// connectors (QUEUEING.md §6).
//
// Closed loop: a tandem started as a burst keeps the cohorts of its first
// prefill passes (prompts completing together fan into the decode NICs together),
// started with the clients at independent phases over one request cycle
// (queueing.ClientPhases) it settles elsewhere.
// Unless opted out, both starts are run and the steady distributions are their
// equal mixture (QUEUEING.md §4); MultiStable flags throughputs more than 2 %
// apart, and both throughputs are reported. The transient is the burst's.
func Quantitative(ctx context.Context, w workload.Spec, c Config, o Options) (*Report, error) {
	if err := c.Validate(w); err != nil {
		return nil, &queueing.InputError{Err: err}
	}
	if (w.Concurrency > 0) == (w.RateRPS > 0) {
		return nil, &queueing.InputError{Err: errWorkload}
	}
	rep, err := run(ctx, w, c, o)
	if err != nil || w.Concurrency == 0 || o.NoMultiStability || rep.Unstable {
		return rep, err
	}
	o2 := o
	o2.spreadMs = rep.E2E.Mean() + w.TurnaroundMs
	alt, err := run(ctx, w, c, o2)
	if err != nil {
		return nil, err
	}
	return mixture(rep, alt)
}

// mixture is the equal mixture of the burst run b and the staggered run s.
func mixture(b, s *Report) (*Report, error) {
	mix := func(x, y queueing.Distribution, perRun bool) (queueing.Distribution, error) {
		var a []queueing.Atom
		for _, d := range []queueing.Distribution{x, y} {
			wt := 1.0
			if perRun {
				wt = 1 / math.Max(d.TotalWeight(), 1e-300)
			}
			for _, at := range d.Atoms() {
				a = append(a, queueing.Atom{Value: at.Value, Weight: at.Weight * wt})
			}
		}
		return queueing.NewDistribution(a)
	}
	r := &Report{Report: b.Report}
	var err error
	for _, f := range []struct {
		dst    *queueing.Distribution
		x, y   queueing.Distribution
		perRun bool
	}{
		{&r.TTFTSteady, b.TTFTSteady, s.TTFTSteady, true}, {&r.ITL, b.ITL, s.ITL, true},
		{&r.TPOT, b.TPOT, s.TPOT, true}, {&r.E2E, b.E2E, s.E2E, true}, {&r.KVTransfer, b.KVTransfer, s.KVTransfer, true},
	} {
		if *f.dst, err = mix(f.x, f.y, f.perRun); err != nil {
			return nil, fmt.Errorf("disagg: mixture: %w", err)
		}
	}
	r.ThroughputRPS = (b.ThroughputRPS + s.ThroughputRPS) / 2
	r.OutputTokensPerS = (b.OutputTokensPerS + s.OutputTokensPerS) / 2
	r.BurstThroughputRPS, r.StaggeredThroughputRPS = b.ThroughputRPS, s.ThroughputRPS
	r.MultiStable = math.Abs(b.ThroughputRPS-s.ThroughputRPS) > 0.02*math.Max(b.ThroughputRPS, s.ThroughputRPS)
	r.PQueueMsP99 = math.Max(b.PQueueMsP99, s.PQueueMsP99)
	r.DHeadroomMin = math.Min(b.DHeadroomMin, s.DHeadroomMin)
	r.PrefillAdmitPeakTokens = max(b.PrefillAdmitPeakTokens, s.PrefillAdmitPeakTokens)
	r.KVUtilPeak = math.Max(b.KVUtilPeak, s.KVUtilPeak)
	r.PreemptionsPerRequest = (b.PreemptionsPerRequest + s.PreemptionsPerRequest) / 2
	p99 := r.TTFTSteady.Quantile(0.99)
	r.TTFTSteadyP99Lo, r.TTFTSteadyP99Hi = p99, p99
	r.Diagnostics.Passes += s.Diagnostics.Passes
	r.Diagnostics.SteadyRequests += s.Diagnostics.SteadyRequests
	r.Diagnostics.StaggerPhases = 1
	return r, finiteReport(r)
}

// treq is one request of the tandem.
type treq struct {
	slot, gen    int
	arrival      float64 // visible to the prefill scheduler
	isl, osl     int
	pw, pid      int // prefill worker, id there
	dw, did      int
	pStart       float64 // start of its first prefill pass
	first        float64 // prefill emits the first token
	xStart, xEnd float64 // KV flow
	visible      float64 // first token visible to the client
	done         float64
	finished     bool
	steady       bool
	need         int // decode KV reservation (tokens; 0 when the decode kernel keeps the KV)
	heldTok      int // prefill KV it holds from its prompt's end until sent (whole prefill blocks; 0 once released)
}

// tandem is the state of one run.
type tandem struct {
	c       *Config
	w       *workload.Spec
	stage   float64
	pre     []*queueing.Kernel
	dec     []*queueing.Kernel
	pIDs    [][]int // kernel id → request, per prefill worker
	dIDs    [][]int
	fab     fabric
	reqs    []treq
	pending [][]int // per decode worker: requests waiting for KV headroom (FIFO)
	pHead   []int
	kvUsed  []int
	// prealloc: the decode worker reserves a request's slot and KV when it
	// arrives, before its prefill (S-D2; pull connectors): slotCap > 0. slots
	// counts the requests each decode worker holds from then to their finish.
	prealloc bool
	slots    []int
	slotCap  int
	// fromDecode: the first token is visible when the decode worker admits the
	// request (S-D4).
	fromDecode bool
	future     []int // created, not yet visible: by arrival (from fHead)
	fHead      int
	nextP      int // round-robin cursors
	nextD      int
	err        error

	held      []int // per prefill worker: KV held for finished prompts not yet sent (tokens)
	admitPeak int   // Report.PrefillAdmitPeakTokens
	itl       map[float64]float64
	gap, gapW float64 // the run of equal gaps not yet in itl (a pass's rows share one)
	xfer      []queueing.Atom
	headMin   float64
	onDone    func(t *tandem, ri int, now float64)
	doneBuf   []int
	finished  int
}

func newTandem(c *Config, w *workload.Spec) (*tandem, error) {
	t := &tandem{c: c, w: w, stage: c.Prefill.Engine.StageMs, itl: map[float64]float64{}, headMin: 1,
		slotCap: c.decodeSlots(), fromDecode: c.Decode.Engine.Traits().FirstTokenFromDecode}
	t.prealloc = t.slotCap > 0
	nP, nD := c.Prefill.Workers, c.Decode.Workers
	t.fab.caps = c.linkCaps()
	// A vLLM or TensorRT-LLM prefill worker of a pull connector keeps a finished
	// prompt's blocks until the pull (V-P3, T-D1): its kernel models the pool, so
	// held prompts delay the admissions behind them as the engine does
	// (KernelOptions.KVCapacityTokens). Elsewhere the pool is checked, not
	// modelled (PrefillHoldsError).
	poolModelled := c.prefillPoolModelled()
	po := queueing.KernelOptions{SeqCap: c.Prefill.BatchCap, InFlightCap: c.prefillKappa(), Hold: !c.Push, Prefill: true}
	if poolModelled {
		po.KVCapacityTokens = c.Prefill.KVCapacityTokens
	}
	for i := 0; i < nP; i++ {
		k, err := queueing.NewKernel(c.Prefill.Engine, c.Prefill.Timing, po)
		if err != nil {
			return nil, fmt.Errorf("prefill engine: %w", err)
		}
		wi := i
		k.OnToken = func(id int, prev, at float64) {
			r := &t.reqs[t.pIDs[wi][id]]
			r.first = at
		}
		k.OnFinish = func(id int, at float64) { t.prefilled(t.pIDs[wi][id], at) }
		k.OnEntry = func(id int, start float64) {
			if r := &t.reqs[t.pIDs[wi][id]]; r.pStart < 0 {
				r.pStart = start
				need := t.held[wi] + t.prefillTokens(r.isl)
				t.admitPeak = max(t.admitPeak, need)
				if pool := c.Prefill.KVCapacityTokens; pool > 0 && need > pool && !poolModelled && t.err == nil {
					t.err = &PrefillHoldsError{NeedTokens: need, PoolTokens: pool}
				}
			}
		}
		t.pre = append(t.pre, k)
	}
	t.pIDs, t.held = make([][]int, nP), make([]int, nP)
	for i := 0; i < nD; i++ {
		o := queueing.KernelOptions{SeqCap: c.Decode.BatchCap}
		if c.Decode.Engine.Backend == engine.VLLM {
			// vLLM's decode KV lives in the kernel: blocks grow per token and a step
			// that cannot allocate preempts by recompute (V-R6), as in the agg calendar.
			o.KVCapacityTokens = c.Decode.KVCapacityTokens
		}
		k, err := queueing.NewKernel(c.Decode.Engine, c.Decode.Timing, o)
		if err != nil {
			return nil, fmt.Errorf("decode engine: %w", err)
		}
		wi := i
		k.OnToken = func(id int, prev, at float64) {
			r := &t.reqs[t.dIDs[wi][id]]
			if prev < 0 || prev == r.xEnd {
				prev = r.visible // the first decode token: its gap runs from the first visible token
			}
			if r.steady {
				t.addGap(at - prev)
			}
		}
		k.OnFinish = func(id int, at float64) { t.complete(t.dIDs[wi][id], at) }
		if t.fromDecode {
			// S-D4: the decode server streams the first token when the landed
			// request joins its running batch, at the start of its first pass.
			k.OnEntry = func(id int, start float64) {
				if r := &t.reqs[t.dIDs[wi][id]]; r.visible < 0 {
					r.visible = start
				}
			}
		}
		t.dec = append(t.dec, k)
	}
	t.dIDs = make([][]int, nD)
	t.pending = make([][]int, nD)
	t.pHead = make([]int, nD)
	t.kvUsed = make([]int, nD)
	t.slots = make([]int, nD)
	return t, nil
}

// addGap records one ITL gap; the rows of one decode pass come in a run of equal
// gaps, pooled before they reach the map.
func (t *tandem) addGap(g float64) {
	if g == t.gap {
		t.gapW++
		return
	}
	if t.gapW > 0 {
		t.itl[t.gap] += t.gapW
	}
	t.gap, t.gapW = g, 1
}

// submit creates a request visible to the prefill pool at arrival; it is routed
// when it becomes visible (route), not when it is created: a staggered client's
// first request is created at 0 but seen later, after other clients' replacements.
func (t *tandem) submit(slot, gen int, arrival float64, steady bool) {
	k := len(t.reqs)
	isl, osl := t.w.Shape(k)
	t.reqs = append(t.reqs, treq{slot: slot, gen: gen, arrival: arrival, isl: isl, osl: osl, pw: -1, dw: -1, steady: steady, pStart: -1})
	f := append(t.future, k) // kept sorted by arrival (ties in creation order)
	for i := len(f) - 1; i > t.fHead && t.reqs[f[i-1]].arrival > arrival; i-- {
		f[i], f[i-1] = f[i-1], f[i]
	}
	t.future = f
}

// route sends the next visible request to a prefill worker, round-robin (static,
// in visibility order, at the visibility instant). Under S-D2 it also picks the
// decode worker, round-robin, and the request waits for its preallocation there
// before it reaches the prefill worker.
func (t *tandem) route() {
	k := t.future[t.fHead]
	t.fHead++
	if t.fHead == len(t.future) {
		t.future, t.fHead = t.future[:0], 0
	}
	r := &t.reqs[k]
	p := t.nextP
	t.nextP = (t.nextP + 1) % len(t.pre)
	r.pw = p
	if t.prealloc {
		d := t.nextD
		t.nextD = (t.nextD + 1) % len(t.dec)
		r.dw = d
		r.need = t.c.reserveTokens(r.isl, r.osl)
		t.pending[d] = append(t.pending[d], k)
		t.pull(d, r.arrival)
		return
	}
	t.admitPrefill(k, r.arrival)
}

// admitPrefill gives request k to its prefill worker at now.
func (t *tandem) admitPrefill(k int, now float64) {
	r := &t.reqs[k]
	p := r.pw
	id, err := t.pre[p].Inject(queueing.KernelRequest{ArrivalMs: now, ISL: r.isl, OSL: 1})
	if err != nil && t.err == nil {
		t.err = err
	}
	r.pid = id
	t.pIDs[p] = append(t.pIDs[p], k)
}

// prefillTokens is a prompt of isl tokens in whole blocks of the prefill engine.
func (t *tandem) prefillTokens(isl int) int {
	return wholeBlocks(isl, t.c.Prefill.Engine.BlockSize)
}

// prefilled handles a prompt completing on its prefill worker at now.
func (t *tandem) prefilled(ri int, now float64) {
	r := &t.reqs[ri]
	r.first = now
	if r.osl > 1 { // its KV stays on the prefill worker until sent (release)
		r.heldTok = t.prefillTokens(r.isl)
		t.held[r.pw] += r.heldTok
	}
	if r.osl <= 1 { // nothing to decode: no handoff
		r.visible, r.xStart, r.xEnd = now, now, now
		t.release(ri, now)
		d := r.dw
		r.dw = -1 // no decode worker (an S-D2 preallocation is returned unused)
		t.complete(ri, now)
		if d >= 0 {
			t.leaveDecode(r, d, now)
		}
		return
	}
	if t.prealloc { // S-D2, S-D3: the decode KV is there; the send starts at once
		t.startFlow(ri, now)
		return
	}
	d := t.nextD
	t.nextD = (t.nextD + 1) % len(t.dec)
	r.dw = d
	if t.dec[d].KVCapBlocks() == 0 {
		r.need = t.c.reserveTokens(r.isl, r.osl)
	}
	if t.c.Push {
		t.startFlow(ri, now)
		return
	}
	t.pending[d] = append(t.pending[d], ri)
	t.pull(d, now)
}

// pull starts the transfers decode worker d has KV headroom for, FCFS, head-of-line
// on failure. vLLM (a KV kernel) allocates the prompt's blocks in the decode
// worker's pool before the first byte moves (V-D2): headroom = capacity − running
// KV − staged, none while a preempted request heads the waiting queue (V-R3); the
// running decodes then grow by blocks and preempt by recompute (V-R6). TRT-LLM
// reserves the request's final KV (isl + osl, in whole blocks) to completion
// (T-D3). SGLang preallocates instead (S-D2, pull connectors): the queue holds
// arrived requests, each needs a free decode slot (engine.DecodeSlots) besides
// its KV, charged as TensorRT-LLM's (SGLang's own admission test is not
// modelled, SCHEDULERS.md §3.9), and a preallocated request then reaches its
// prefill worker.
func (t *tandem) pull(d int, now float64) {
	capKV := t.c.decodeKVTokens()
	k := t.dec[d]
	for t.pHead[d] < len(t.pending[d]) {
		ri := t.pending[d][t.pHead[d]]
		r := &t.reqs[ri]
		if cb := k.KVCapBlocks(); cb > 0 {
			if r.steady && !t.c.Push { // a push reports no headroom wait (the DES's 1)
				t.headMin = math.Min(t.headMin, float64(k.PullableKVBlocks())/float64(cb))
			}
			if !k.ReserveKV(r.isl) {
				return
			}
		} else if capKV > 0 {
			free := capKV - t.kvUsed[d]
			if r.steady {
				t.headMin = math.Min(t.headMin, float64(free)/float64(capKV))
			}
			if free < r.need {
				return
			}
		}
		if t.prealloc {
			if t.slots[d] >= t.slotCap {
				return
			}
			t.slots[d]++
		}
		t.kvUsed[d] += r.need
		t.pHead[d]++
		switch {
		case t.prealloc:
			t.admitPrefill(ri, now)
		case t.c.Push:
			t.inject(ri, now) // a landed push (KV kernel): its blocks are taken
		default:
			t.startFlow(ri, now)
		}
	}
	t.pending[d], t.pHead[d] = t.pending[d][:0], 0
}

func (t *tandem) startFlow(ri int, now float64) {
	r := &t.reqs[ri]
	r.xStart = now
	if t.c.Push {
		t.release(ri, now) // push: the prefill slot frees at send
	}
	t.fab.add(now, ri, t.c.route(r.pw, r.dw), float64(r.isl)*t.c.KVBytesPerToken)
}

// landed handles the last byte of request ri's KV arriving at now.
func (t *tandem) landed(ri int, now float64) {
	r := &t.reqs[ri]
	r.xEnd = now
	switch {
	case t.fromDecode:
		r.visible = -1 // set when the decode worker admits it (S-D4)
	case t.c.HandoffInTTFT:
		r.visible = now
	default:
		r.visible = r.first
	}
	if r.steady {
		t.xfer = append(t.xfer, queueing.Atom{Value: now - r.xStart, Weight: 1})
	}
	if !t.c.Push {
		t.release(ri, now)
	}
	d := r.dw
	if t.c.Push {
		if t.dec[d].KVCapBlocks() > 0 {
			// vLLM takes a pushed prompt's blocks when it lands, FIFO and
			// head-of-line as a pull's (V-D2, the DES's rule): it waits in pending.
			t.pending[d] = append(t.pending[d], ri)
			t.pull(d, now)
			return
		}
		t.kvUsed[d] += r.need
	}
	t.inject(ri, now)
}

// inject gives request ri, whose KV is on decode worker r.dw, to that worker's
// kernel at now.
func (t *tandem) inject(ri int, now float64) {
	r := &t.reqs[ri]
	d := r.dw
	kr := queueing.KernelRequest{ArrivalMs: now, ISL: r.isl, OSL: r.osl, Prefilled: true}
	if t.c.Decode.Engine.Traits().DecodeRecomputesFirstToken {
		// V-D4/V-D5: vLLM's decode side takes the pulled prompt as computed up to its
		// last token, recomputes that token (a one-token chunk, one budget token and a
		// running slot at admission) and samples the next output itself. It brings
		// the prompt blocks reserved for it (V-D2).
		kr = queueing.KernelRequest{ArrivalMs: now, ISL: r.isl, Prefix: r.isl - 1, OSL: r.osl - 1,
			ReservedKV: t.dec[d].KVCapBlocks() > 0}
	}
	id, err := t.dec[d].Inject(kr)
	if err != nil && t.err == nil {
		t.err = err
	}
	r.did = id
	t.dIDs[d] = append(t.dIDs[d], ri)
}

// release frees the prefill worker's slot held by ri (pull) at now.
func (t *tandem) release(ri int, now float64) {
	r := &t.reqs[ri]
	if r.heldTok > 0 {
		t.held[r.pw] -= r.heldTok
		r.heldTok = 0
	}
	if t.c.Push {
		return // push kernels do not hold
	}
	if err := t.pre[r.pw].Release(r.pid, now); err != nil && t.err == nil {
		t.err = err
	}
}

// complete handles request ri's last token at now.
func (t *tandem) complete(ri int, now float64) {
	r := &t.reqs[ri]
	r.done, r.finished = now, true
	t.finished++
	if r.dw >= 0 {
		t.leaveDecode(r, r.dw, now)
	}
	if t.onDone != nil {
		t.onDone(t, ri, now)
	}
}

// leaveDecode returns what r held on decode worker d — its KV charge and, under
// S-D2, its slot — at now, and starts the pulls waiting there.
func (t *tandem) leaveDecode(r *treq, d int, now float64) {
	t.kvUsed[d] -= r.need
	if t.prealloc {
		t.slots[d]--
	}
	t.pull(d, now)
}

// loop steps the earliest event source until stop() holds.
func (t *tandem) loop(ctx context.Context, stop func() bool) error {
	events := 0
	for !stop() {
		if t.err != nil {
			return t.err
		}
		best, src := math.Inf(1), -1
		if t.fHead < len(t.future) { // arrivals first at a tie: visible before the pass boundary
			best, src = t.reqs[t.future[t.fHead]].arrival, -2
		}
		for i, k := range t.pre {
			if v := k.NextEventMs(); v < best {
				best, src = v, i
			}
		}
		if v := t.fab.next(); v < best {
			best, src = v, len(t.pre)
		}
		for i, k := range t.dec {
			if v := k.NextEventMs(); v < best {
				best, src = v, len(t.pre)+1+i
			}
		}
		if math.IsInf(best, 1) {
			return fmt.Errorf("disagg: no event left before the measurement completed (deadlock): the decode KV or the prefill slots cannot move the work; check the pool caps against the request shape")
		}
		events++
		if events > maxEvents {
			return fmt.Errorf("disagg: event bound %d hit before the measurement window completed; the configuration makes no steady progress", int(maxEvents))
		}
		if events&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("disagg: evaluation cancelled: %w", err)
			}
		}
		var err error
		switch {
		case src == -2:
			t.route()
		case src < len(t.pre):
			err = t.pre[src].Step(best)
		case src == len(t.pre):
			t.doneBuf = t.fab.pop(best, t.doneBuf[:0])
			for _, ri := range t.doneBuf {
				t.landed(ri, best)
			}
		default:
			err = t.dec[src-len(t.pre)-1].Step(best)
		}
		if err != nil {
			return err
		}
	}
	return t.err
}

// run is one evaluation (a burst start, or the clients at independent phases
// over o.spreadMs: queueing.ClientPhases).
func run(ctx context.Context, w workload.Spec, c Config, o Options) (*Report, error) {
	t, err := newTandem(&c, &w)
	if err != nil {
		return nil, &queueing.InputError{Err: err}
	}
	if w.Concurrency > 0 {
		return t.closed(ctx, o)
	}
	return t.open(ctx, o)
}

func (t *tandem) closed(ctx context.Context, o Options) (*Report, error) {
	w := t.w
	C := w.Concurrency
	warm := o.WarmupGenerations
	if warm <= 0 {
		warm = 4
	}
	win := o.WindowGenerations
	if win <= 0 {
		win = max(8, (128+C-1)/C)
	}
	if C*(warm+win+2) > maxRequests {
		return nil, &queueing.InputError{Err: fmt.Errorf("workload concurrency = %d: the tandem would simulate %d requests (limit %d); use the screening tier or a smaller window", C, C*(warm+win+2), maxRequests)}
	}
	t.reqs = make([]treq, 0, C*(warm+win+2))
	for s, at := range queueing.ClientPhases(C, 1, o.spreadMs) { // the burst when spreadMs is 0
		t.submit(s, 0, t.stage+at, warm == 0)
	}
	target, doneN := C*win, 0
	t.onDone = func(t *tandem, ri int, now float64) {
		r := t.reqs[ri]
		if r.steady {
			doneN++
		}
		g := r.gen + 1
		t.submit(r.slot, g, now+w.TurnaroundMs+t.stage, g >= warm && g < warm+win)
	}
	if err := t.loop(ctx, func() bool { return doneN >= target }); err != nil {
		return nil, err
	}
	rep, err := t.report()
	if err != nil {
		return nil, err
	}
	first, last, toks := make([]float64, C), make([]float64, C), make([]float64, C)
	for i := range t.reqs {
		r := &t.reqs[i]
		if !r.steady {
			continue
		}
		if r.gen == warm {
			first[r.slot] = r.arrival - t.stage
		}
		if r.gen == warm+win-1 {
			last[r.slot] = r.done + w.TurnaroundMs
		}
		toks[r.slot] += float64(r.osl)
	}
	x, tok := 0.0, 0.0
	for s := 0; s < C; s++ {
		d := last[s] - first[s]
		if !(d > 0) {
			return nil, fmt.Errorf("disagg: empty measurement window for client %d (internal)", s)
		}
		x += float64(win) / d
		tok += toks[s] / d
	}
	rep.ThroughputRPS, rep.OutputTokensPerS = x*1000, tok*1000
	return rep, finiteReport(rep)
}

func (t *tandem) open(ctx context.Context, o Options) (*Report, error) {
	w := t.w
	n := w.NumRequests
	if n == 0 {
		n = o.OpenLoopRequests
	}
	if n <= 0 {
		n = workload.ArrivalStrata
	}
	if n > maxRequests {
		return nil, &queueing.InputError{Err: fmt.Errorf("workload num_requests = %d: at most %d for the tandem", n, maxRequests)}
	}
	stream, err := workload.NewArrivalStream(w.RateRPS)
	if err != nil {
		return nil, &queueing.InputError{Err: err}
	}
	warm := n / 10
	t.reqs = make([]treq, 0, n)
	for i := 0; i < n; i++ {
		t.submit(-1, i, stream.Next()+t.stage, i >= warm)
	}
	mid, end := t.reqs[n/2].arrival, t.reqs[n-1].arrival
	inSys := func(at float64) int {
		a := sort.Search(n, func(i int) bool { return t.reqs[i].arrival > at })
		return a - t.finished
	}
	// Stability: step to the middle and the last arrival and compare the backlog.
	phase, lMid, doneMid := 0, 0, 0
	unstable := false
	var lEnd, doneEnd int
	stop := func() bool {
		if t.finished >= n {
			return true
		}
		now := t.clock()
		if phase == 0 && now >= mid {
			phase, lMid, doneMid = 1, inSys(now), t.finished
		}
		if phase == 1 && now >= end {
			phase, lEnd, doneEnd = 2, inSys(now), t.finished
			grow := lEnd - lMid
			if float64(grow) > math.Max(8, 0.02*float64(n)) && float64(doneEnd-doneMid) < 0.98*float64(n-1-n/2) {
				unstable = true
				return true
			}
		}
		return false
	}
	if err := t.loop(ctx, stop); err != nil {
		return nil, err
	}
	if unstable {
		return &Report{Report: queueing.Report{Tier: queueing.TierQuantitative, Fidelity: w.Fidelity(), Unstable: true,
			UnstableReason: fmt.Sprintf("unstable at rate %.4g rps: requests accumulate in the tandem (in system %d → %d over the second half of the arrivals); lower the rate or rebalance the pools", w.RateRPS, lMid, lEnd)}}, nil
	}
	rep, err := t.report()
	if err != nil {
		return nil, err
	}
	a0, a1 := t.reqs[warm].arrival, t.reqs[n-1].arrival
	toks := 0.0
	for i := warm; i < n; i++ {
		toks += float64(t.reqs[i].osl)
	}
	if a1 > a0 {
		rep.ThroughputRPS = float64(n-1-warm) / (a1 - a0) * 1000
		rep.OutputTokensPerS = rep.ThroughputRPS * toks / float64(n-warm)
	}
	return rep, finiteReport(rep)
}

// clock returns the latest time any source reached.
func (t *tandem) clock() float64 {
	now := t.fab.now
	for _, k := range t.pre {
		now = math.Max(now, k.Now())
	}
	for _, k := range t.dec {
		now = math.Max(now, k.Now())
	}
	return now
}

// report builds the distributions of the steady requests.
func (t *tandem) report() (*Report, error) {
	var ttft, e2e, tpot, pq []queueing.Atom
	var trans []queueing.Atom
	for i := range t.reqs {
		r := &t.reqs[i]
		if !r.finished {
			continue
		}
		tt := r.visible - r.arrival + t.stage
		if r.gen == 0 && r.slot >= 0 {
			trans = append(trans, queueing.Atom{Value: tt, Weight: 1})
		}
		if !r.steady {
			continue
		}
		ee := r.done - r.arrival + t.stage
		ttft = append(ttft, queueing.Atom{Value: tt, Weight: 1})
		e2e = append(e2e, queueing.Atom{Value: ee, Weight: 1})
		tp := 0.0
		if r.osl > 1 {
			tp = (ee - (r.first - r.arrival + t.stage)) / float64(r.osl-1)
		}
		tpot = append(tpot, queueing.Atom{Value: tp, Weight: 1})
		if r.pStart >= 0 {
			pq = append(pq, queueing.Atom{Value: r.pStart - r.arrival, Weight: 1})
		}
	}
	if len(ttft) == 0 {
		return nil, fmt.Errorf("disagg: no steady request completed (internal)")
	}
	rep := &Report{DHeadroomMin: t.headMin, PrefillAdmitPeakTokens: t.admitPeak}
	rep.Tier, rep.Fidelity = queueing.TierQuantitative, t.w.Fidelity()
	var err error
	mk := func(a []queueing.Atom) queueing.Distribution {
		if len(a) == 0 {
			return queueing.PointMass(0)
		}
		d, e := queueing.NewDistribution(a)
		if e != nil && err == nil {
			err = e
		}
		return d
	}
	rep.TTFTSteady, rep.E2E, rep.TPOT = mk(ttft), mk(e2e), mk(tpot)
	rep.TTFTTransient = mk(trans)
	if len(trans) == 0 {
		rep.TTFTTransient = rep.TTFTSteady
	}
	t.addGap(math.NaN()) // flush the pending run (NaN never equals a gap)
	t.gapW = 0
	itl := make([]queueing.Atom, 0, len(t.itl))
	for v, wt := range t.itl {
		itl = append(itl, queueing.Atom{Value: v, Weight: wt})
	}
	sort.Slice(itl, func(i, j int) bool { return itl[i].Value < itl[j].Value })
	rep.ITL = mk(itl)
	rep.KVTransfer = mk(t.xfer)
	rep.pQueue = mk(pq)
	rep.PQueueMsP99 = rep.pQueue.Quantile(0.99)
	if err != nil {
		return nil, fmt.Errorf("disagg: %w", err)
	}
	p99 := rep.TTFTSteady.Quantile(0.99)
	rep.TTFTSteadyP99Lo, rep.TTFTSteadyP99Hi = p99, p99
	t.kvDiagnostics(rep)
	rep.Diagnostics.SteadyRequests = len(ttft)
	rep.Diagnostics.BracketCertain = true
	for _, k := range t.pre {
		rep.Diagnostics.Passes += k.Passes()
	}
	for _, k := range t.dec {
		rep.Diagnostics.Passes += k.Passes()
	}
	return rep, nil
}

// kvDiagnostics fills the KV columns of a decode pool whose kernels keep the KV
// (vLLM): the peak share of a worker's pool in use and the decode-side
// preemptions (V-R6) per steady request.
func (t *tandem) kvDiagnostics(rep *Report) {
	n, p := 0, 0
	for _, k := range t.dec {
		if cb := k.KVCapBlocks(); cb > 0 {
			rep.KVUtilPeak = math.Max(rep.KVUtilPeak, float64(k.KVPeakBlocks())/float64(cb))
		}
	}
	if rep.KVUtilPeak == 0 {
		return
	}
	for i := range t.reqs {
		if r := &t.reqs[i]; r.steady && r.finished {
			n++
			if r.dw >= 0 && t.c.Decode.Engine.Backend == engine.VLLM {
				p += t.dec[r.dw].Preempts(r.did)
			}
		}
	}
	if n > 0 {
		rep.PreemptionsPerRequest = float64(p) / float64(n)
	}
}

// finiteReport rejects a non-finite column.
func finiteReport(r *Report) error {
	for k, v := range r.Columns(1) {
		if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			return fmt.Errorf("disagg: column %s is not finite (internal)", k)
		}
	}
	return nil
}
