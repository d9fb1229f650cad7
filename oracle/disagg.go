package oracle

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
)

// The disaggregated DES: nP prefill and nD decode engine instances, each the real
// scheduler of its backend driven under one outside clock (Step / NextEventMs), KV
// blocks on both sides, an independent fluid fabric (disagg_fabric.go), static
// round-robin routing, pull or push connectors (SCHEDULERS.md §2.9, §4.6,
// QUEUEING.md §6).

// DefaultFabricEfficiency is the share of a link's nominal bandwidth KV transfers
// achieve when DisaggFabric.Efficiency is 0 (QUEUEING.md §6).
const DefaultFabricEfficiency = 0.8

// DisaggPool is one side of a disaggregated deployment: Workers identical engine
// instances priced by Timing (each pool its own parallelism and GPU system).
type DisaggPool struct {
	Engine  engine.Spec
	Timing  timing.Timing
	Workers int
	// GPUsPerWorker places the workers on nodes (prefill workers first, then
	// decode, packed in order); 0 means 1.
	GPUsPerWorker int
	// InFlightCap (prefill only) is κ: requests routed to a prefill worker and not
	// yet handed off (pulled, or sent by a push connector); the rest wait in front of
	// the worker in arrival order. 0: no cap. An engine with handoff buffers of
	// its own lowers it (SGLang: 2 per running slot, S-D1).
	InFlightCap int
}

// DisaggFabric is the KV-transfer network.
type DisaggFabric struct {
	// InterNodeGBps is one worker's NIC bandwidth per direction, GB/s (10⁹ B/s).
	InterNodeGBps float64
	// IntraNodeGBps is a worker's NVLink bandwidth, used when sender and receiver
	// sit wholly on one node (0: always the NICs).
	IntraNodeGBps float64
	// Efficiency scales both (0: DefaultFabricEfficiency).
	Efficiency float64
	// GPUsPerNode places workers on nodes (0: each worker on its own node).
	GPUsPerNode int
}

// DisaggConfig is a disaggregated deployment for the DES.
type DisaggConfig struct {
	Prefill DisaggPool
	Decode  DisaggPool
	Fabric  DisaggFabric
	// KVBytesPerToken is the KV handed off per prompt token, bytes.
	KVBytesPerToken float64
	// Push selects push connectors: the prefill worker sends at prompt completion
	// (its in-flight slot frees at send, its KV when the last byte left) and the
	// decode worker takes the KV on arrival. Default: pull (the decode worker
	// reserves the KV first, V-D2 / T-D3; the prefill worker holds it until read,
	// V-P3 / T-D1).
	Push bool
	// HandoffInTTFT makes the first token visible when the KV has landed (frontends
	// that attach on decode); default: when the prefill worker emits it. An SGLang
	// decode pool always shows it from the decode server, at the start of the
	// request's first decode pass (S-D4).
	HandoffInTTFT bool
	// Progress, if set, is called where a run polls its context (every 1,024
	// events) with the requests finished and the requests of the run (a trace's
	// turns, an open loop's arrivals; 0 for a closed loop): for a progress report
	// of a long run. It does not change the run.
	Progress func(done, total int)
}

// Validate reports the first invalid field of c, naming it.
func (c *DisaggConfig) Validate() error {
	for _, p := range []struct {
		name string
		p    *DisaggPool
	}{{"prefill", &c.Prefill}, {"decode", &c.Decode}} {
		if p.p.Workers < 1 || p.p.Workers > 1024 {
			return fmt.Errorf("disagg %s workers = %d: must be in 1..1024", p.name, p.p.Workers)
		}
		if p.p.Timing == nil {
			return fmt.Errorf("disagg %s timing: none given", p.name)
		}
		if err := ValidateEngine(p.p.Engine); err != nil {
			return fmt.Errorf("disagg %s %w", p.name, err)
		}
		if p.p.Engine.EnablePrefixCaching {
			return fmt.Errorf("disagg %s engine enable_prefix_caching: prefix caching is not simulated in disaggregated runs; set it to false", p.name)
		}
		if p.p.GPUsPerWorker < 0 || p.p.InFlightCap < 0 {
			return fmt.Errorf("disagg %s gpus_per_worker = %d, in_flight_cap = %d: must be ≥ 0", p.name, p.p.GPUsPerWorker, p.p.InFlightCap)
		}
	}
	if c.Decode.InFlightCap != 0 {
		return fmt.Errorf("disagg decode in_flight_cap = %d: κ applies to the prefill pool only", c.Decode.InFlightCap)
	}
	f := c.Fabric
	switch {
	case !(f.InterNodeGBps > 0) || math.IsInf(f.InterNodeGBps, 0):
		return fmt.Errorf("disagg fabric inter_node_gbps = %v: must be a finite number > 0", f.InterNodeGBps)
	case !(f.IntraNodeGBps >= 0) || math.IsInf(f.IntraNodeGBps, 0):
		return fmt.Errorf("disagg fabric intra_node_gbps = %v: must be a finite number ≥ 0", f.IntraNodeGBps)
	case !(f.Efficiency >= 0 && f.Efficiency <= 1):
		return fmt.Errorf("disagg fabric efficiency = %v: must be in (0, 1] (0 selects %v)", f.Efficiency, DefaultFabricEfficiency)
	case f.GPUsPerNode < 0:
		return fmt.Errorf("disagg fabric gpus_per_node = %d: must be ≥ 0", f.GPUsPerNode)
	case !(c.KVBytesPerToken > 0) || math.IsInf(c.KVBytesPerToken, 0):
		return fmt.Errorf("disagg fabric kv_bytes_per_token = %v: must be a finite number > 0", c.KVBytesPerToken)
	}
	return nil
}

// DisaggRecord is the outcome of one request of a disaggregated run (ms, absolute).
type DisaggRecord struct {
	Client, Generation int // closed loop; open loop: -1 and the request index
	ArrivalMs          float64
	ISL, OSL           int
	PrefillWorker      int
	DecodeWorker       int     // -1 when osl = 1 (no handoff)
	PrefillStartMs     float64 // start of its first prefill pass
	FirstTokenMs       float64 // the prefill worker emits the first token
	XferStartMs        float64 // KV flow start (= end when there is no handoff)
	XferEndMs          float64
	VisibleMs          float64 // the first token reaches the client
	FinishMs           float64
	// TokenTimesMs are the client-visible token times: the first at VisibleMs,
	// then every token the decode worker emits.
	TokenTimesMs []float64
	// Headroom is the smallest free share of its decode worker's KV (0..1) seen
	// when its pull was tried; 1 with push connectors.
	Headroom float64
	Done     bool
}

// DisaggResult is the outcome of a disaggregated run; Requests in creation order.
type DisaggResult struct {
	Requests      []DisaggRecord
	EndMs         float64
	NumPasses     int // non-empty passes over every worker
	ScheduledToks int // Σ tokens scheduled over every pass
	Preemptions   int // decode-side preemptions (V-R6, S-R5, T-R2)
}

// dreq is the DES state of one request beyond its record.
type dreq struct {
	pid, did int32 // index on its prefill / decode worker
}

// DisaggSim is one disaggregated deployment under simulation. Build it with
// NewDisagg and run it once.
type DisaggSim struct {
	c    DisaggConfig
	pre  []*Sim
	dec  []*Sim
	pIdx [][]int32 // per prefill worker: engine request → DES request
	dIdx [][]int32
	fab  kvFabric
	recs []DisaggRecord
	st   []dreq

	pend     [][]int32 // per decode worker: requests waiting for KV (FIFO)
	pendHead []int
	kq       [][]int32 // per prefill worker: requests waiting for κ (FIFO)
	kqHead   []int
	inflight []int
	// kappa is κ of each prefill worker: InFlightCap lowered to the engine's
	// own handoff buffers (SGLang's metadata buffers, S-D1); 0 = none.
	kappa int
	// prealloc: a decode worker takes a request's slot and KV when it arrives,
	// before its prefill (S-D2, pull connectors): slotCap > 0. slots counts the
	// requests each decode worker holds from then to their finish.
	prealloc bool
	slots    []int
	slotCap  int
	// fromDecode: the first token is visible when the decode worker admits the
	// request (S-D4).
	fromDecode bool
	nextP      int
	nextD      int

	arr    []darr // future arrivals, sorted by time then creation
	onDone func(ri int32, t float64)
	done   []int32
	err    error
	fin    int
	total  int // requests of the run when known up front (DisaggConfig.Progress)
}

// darr is a future arrival of a closed-loop client or an open-loop request.
type darr struct {
	t        float64
	client   int
	gen      int
	isl, osl int
	seq      int
}

// NewDisagg builds the DES for c.
func NewDisagg(c DisaggConfig) (*DisaggSim, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	d := &DisaggSim{c: c, kappa: engine.PrefillInFlightCap(c.Prefill.Engine, c.Prefill.Engine.SeatCap(), c.Prefill.InFlightCap)}
	for i := 0; i < c.Prefill.Workers; i++ {
		s, err := newDisSim(c.Prefill.Engine, c.Prefill.Timing, true)
		if err != nil {
			return nil, fmt.Errorf("disagg prefill %w", err)
		}
		w := i
		s.onFinish = func(_ *Sim, r int32, t float64) { d.prefilled(w, r, t) }
		d.pre = append(d.pre, s)
	}
	for i := 0; i < c.Decode.Workers; i++ {
		s, err := newDisSim(c.Decode.Engine, c.Decode.Timing, false)
		if err != nil {
			return nil, fmt.Errorf("disagg decode %w", err)
		}
		w := i
		s.onFinish = func(_ *Sim, r int32, t float64) { d.decoded(w, r, t) }
		d.dec = append(d.dec, s)
	}
	nP, nD := c.Prefill.Workers, c.Decode.Workers
	d.pIdx, d.dIdx = make([][]int32, nP), make([][]int32, nD)
	d.pend, d.pendHead = make([][]int32, nD), make([]int, nD)
	d.kq, d.kqHead, d.inflight = make([][]int32, nP), make([]int, nP), make([]int, nP)
	if !c.Push {
		d.slotCap = engine.DecodeSlots(c.Decode.Engine, c.Decode.Engine.SeatCap())
	}
	d.prealloc, d.slots = d.slotCap > 0, make([]int, nD)
	d.fromDecode = c.Decode.Engine.Traits().FirstTokenFromDecode
	eff := c.Fabric.Efficiency
	if eff == 0 {
		eff = DefaultFabricEfficiency
	}
	nic, nvl := c.Fabric.InterNodeGBps*eff*1e6, c.Fabric.IntraNodeGBps*eff*1e6 // bytes per ms
	for i := 0; i < nP+nD; i++ {
		d.fab.ports = append(d.fab.ports, nic)
	}
	for i := 0; i < nP+nD; i++ {
		d.fab.ports = append(d.fab.ports, nvl)
	}
	return d, nil
}

// ports returns a flow's sender and receiver ports: NVLink when both workers sit
// wholly on the same node and NVLink bandwidth is given, else the NICs (port p:
// prefill worker p, nP + q: decode worker q; NVLink ports follow, nP + nD on).
func (d *DisaggSim) ports(p, q int) (int, int) {
	nP, nD := d.c.Prefill.Workers, d.c.Decode.Workers
	g := d.c.Fabric.GPUsPerNode
	if d.c.Fabric.IntraNodeGBps > 0 && g > 0 {
		gp, gd := max(d.c.Prefill.GPUsPerWorker, 1), max(d.c.Decode.GPUsPerWorker, 1)
		node := func(first, n int) int { // the node of GPUs [first, first+n), or -1 when split
			if first/g != (first+n-1)/g {
				return -1
			}
			return first / g
		}
		a, b := node(p*gp, gp), node(nP*gp+q*gd, gd)
		if a >= 0 && a == b {
			return nP + nD + p, nP + nD + nP + q
		}
	}
	return p, nP + q
}

// submit makes request ri visible at t: routed round-robin (static, in visibility
// order), then queued for κ or given to its prefill worker. Under S-D2 its decode
// worker is picked too (round-robin) and it first waits for its preallocation
// there.
func (d *DisaggSim) submit(ri int32, t float64) {
	p := d.nextP
	d.nextP = (d.nextP + 1) % len(d.pre)
	d.recs[ri].PrefillWorker = p
	if d.prealloc {
		q := d.nextD
		d.nextD = (d.nextD + 1) % len(d.dec)
		d.recs[ri].DecodeWorker = q
		d.pend[q] = append(d.pend[q], ri)
		d.pull(q, t)
		return
	}
	d.admitPrefill(ri, t)
}

// admitPrefill queues request ri for κ or gives it to its prefill worker at t.
func (d *DisaggSim) admitPrefill(ri int32, t float64) {
	p := d.recs[ri].PrefillWorker
	if k := d.kappa; k > 0 && d.inflight[p] >= k {
		d.kq[p] = append(d.kq[p], ri)
		return
	}
	d.inject(p, ri, t)
}

func (d *DisaggSim) inject(p int, ri int32, t float64) {
	d.inflight[p]++
	d.st[ri].pid = d.pre[p].addPrefill(t, d.recs[ri].ISL)
	d.pIdx[p] = append(d.pIdx[p], ri)
}

// handedOff frees prefill worker p's κ slot at t and admits the next waiting
// request.
func (d *DisaggSim) handedOff(p int, t float64) {
	d.inflight[p]--
	if d.kqHead[p] < len(d.kq[p]) {
		ri := d.kq[p][d.kqHead[p]]
		d.kqHead[p]++
		d.inject(p, ri, t)
		if d.kqHead[p] == len(d.kq[p]) {
			d.kq[p], d.kqHead[p] = d.kq[p][:0], 0
		}
	}
}

// prefilled handles request pr finishing its prompt on prefill worker p at t.
func (d *DisaggSim) prefilled(p int, pr int32, t float64) {
	ri := d.pIdx[p][pr]
	r := &d.recs[ri]
	r.FirstTokenMs = t
	r.PrefillStartMs = d.pre[p].dis.firstStart[pr]
	if r.OSL <= 1 { // nothing to decode: the KV is freed at once (V-P4)
		d.pre[p].releaseHeld(pr, t)
		d.handedOff(p, t)
		r.XferStartMs, r.XferEndMs, r.VisibleMs, r.Headroom = t, t, t, 1
		r.TokenTimesMs = []float64{t}
		q := r.DecodeWorker
		r.DecodeWorker = -1 // no decode worker (an S-D2 preallocation is returned unused)
		d.complete(ri, t)
		if q >= 0 {
			d.dec[q].cancelRemote(d.st[ri].did, t)
			d.leaveDecode(q, t)
		}
		return
	}
	if d.prealloc { // S-D2, S-D3: the decode KV is there; the send starts at once
		d.flow(ri, t)
		return
	}
	q := d.nextD
	d.nextD = (d.nextD + 1) % len(d.dec)
	r.DecodeWorker = q
	if d.c.Push {
		r.Headroom = 1
		d.flow(ri, t)
		d.handedOff(p, t) // push: the slot frees at send
		return
	}
	d.pend[q] = append(d.pend[q], ri)
	d.pull(q, t)
}

// pull starts, in FIFO order, the transfers decode worker q has KV for (V-D2:
// allocate the prompt's blocks, head-of-line on failure; T-D3: reserve to
// completion). With push connectors the queue holds landed requests waiting for KV.
// Under S-D2 it holds arrived requests: each needs a free decode slot besides
// its KV, and a preallocated request then reaches its prefill worker.
func (d *DisaggSim) pull(q int, t float64) {
	s := d.dec[q]
	usable := float64(usableBlocks(&s.eng))
	for d.pendHead[q] < len(d.pend[q]) {
		ri := d.pend[q][d.pendHead[q]]
		r := &d.recs[ri]
		avail := s.remoteAvail()
		r.Headroom = math.Min(r.Headroom, math.Max(float64(avail), 0)/usable)
		if s.remoteNeed(r.ISL, r.OSL) > avail {
			return
		}
		if d.prealloc {
			if d.slots[q] >= d.slotCap {
				return
			}
			d.slots[q]++
		}
		d.pendHead[q]++
		d.st[ri].did = s.reserveRemote(t, r.ISL, r.OSL)
		d.dIdx[q] = append(d.dIdx[q], ri)
		if d.prealloc {
			d.admitPrefill(ri, t)
		} else if d.c.Push {
			r.Headroom = 1
			s.land(d.st[ri].did, t)
		} else {
			d.flow(ri, t)
		}
	}
	d.pend[q], d.pendHead[q] = d.pend[q][:0], 0
}

func (d *DisaggSim) flow(ri int32, t float64) {
	r := &d.recs[ri]
	r.XferStartMs = t
	a, b := d.ports(r.PrefillWorker, r.DecodeWorker)
	d.fab.start(t, ri, a, b, float64(r.ISL)*d.c.KVBytesPerToken)
}

// landed handles the last byte of ri's KV arriving at t.
func (d *DisaggSim) landed(ri int32, t float64) {
	r := &d.recs[ri]
	r.XferEndMs = t
	r.VisibleMs = r.FirstTokenMs
	if d.c.HandoffInTTFT || d.fromDecode {
		r.VisibleMs = t // S-D4: until the decode worker admits it (result)
	}
	d.pre[r.PrefillWorker].releaseHeld(d.st[ri].pid, t) // V-P3 finished_sending, T-D1
	q := r.DecodeWorker
	if d.c.Push {
		d.pend[q] = append(d.pend[q], ri)
		d.pull(q, t)
		return
	}
	d.handedOff(r.PrefillWorker, t)
	d.dec[q].land(d.st[ri].did, t)
}

// decoded handles request dr's last token on decode worker q at t.
func (d *DisaggSim) decoded(q int, dr int32, t float64) {
	d.complete(d.dIdx[q][dr], t)
	d.leaveDecode(q, t)
}

// leaveDecode returns a request's slot on decode worker q (S-D2) at t, its KV
// being free, and starts the pulls waiting there.
func (d *DisaggSim) leaveDecode(q int, t float64) {
	if d.prealloc {
		d.slots[q]--
	}
	d.pull(q, t)
}

func (d *DisaggSim) complete(ri int32, t float64) {
	r := &d.recs[ri]
	r.FinishMs, r.Done = t, true
	d.fin++
	if d.onDone != nil {
		d.onDone(ri, t)
	}
}

// schedule queues a future arrival (kept sorted by time, ties in creation order).
func (d *DisaggSim) schedule(a darr) {
	a.seq = len(d.recs) + len(d.arr)
	d.arr = append(d.arr, a)
	for i := len(d.arr) - 1; i > 0 && d.arr[i].t < d.arr[i-1].t; i-- {
		d.arr[i], d.arr[i-1] = d.arr[i-1], d.arr[i]
	}
}

// arrive creates the head arrival's request at its time.
func (d *DisaggSim) arrive() {
	a := d.arr[0]
	d.arr = d.arr[1:]
	ri := int32(len(d.recs))
	d.recs = append(d.recs, DisaggRecord{Client: a.client, Generation: a.gen, ArrivalMs: a.t, ISL: a.isl, OSL: a.osl, DecodeWorker: -1, PrefillStartMs: -1, Headroom: 1})
	d.st = append(d.st, dreq{pid: -1, did: -1})
	d.submit(ri, a.t)
}

// maxDisaggEvents bounds a run; hitting it is an error, never a hang.
const maxDisaggEvents = 200_000_000

// loop steps the earliest event source (arrivals, prefill workers, the fabric,
// decode workers; ties in that order) until stop holds.
func (d *DisaggSim) loop(ctx context.Context, stop func() bool) error {
	nP := len(d.pre)
	for ev := 0; !stop(); ev++ {
		if d.err != nil {
			return d.err
		}
		if ev&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("disagg oracle: %w", err)
			}
			if d.c.Progress != nil {
				d.c.Progress(d.fin, d.total)
			}
		}
		if ev > maxDisaggEvents {
			return fmt.Errorf("disagg oracle: no completion after %d events (%d requests finished); the deployment makes no progress", ev, d.fin)
		}
		best, src := math.Inf(1), -2
		if len(d.arr) > 0 {
			best, src = d.arr[0].t, -1
		}
		for i, s := range d.pre {
			if v := s.NextEventMs(); v < best {
				best, src = v, i
			}
		}
		if v := d.fab.next(); v < best {
			best, src = v, nP
		}
		for i, s := range d.dec {
			if v := s.NextEventMs(); v < best {
				best, src = v, nP+1+i
			}
		}
		var err error
		switch {
		case src == -2:
			return fmt.Errorf("disagg oracle: deadlock with %d of %d requests finished: no event left (held prefill KV, decode KV or κ cannot move the work); check the pools' KV against the request shape", d.fin, len(d.recs))
		case src == -1:
			d.arrive()
		case src < nP:
			err = d.pre[src].Step(best)
		case src == nP:
			d.done = d.fab.complete(best, d.done[:0])
			for _, ri := range d.done {
				d.landed(ri, best)
			}
		default:
			err = d.dec[src-nP-1].Step(best)
		}
		if err != nil {
			return fmt.Errorf("disagg oracle: %w", err)
		}
	}
	return d.err
}

// validShape checks a driver shape against both pools' KV.
func (d *DisaggSim) validShape(sh *Shape) error {
	if sh.Prefix != 0 || sh.Prewarm {
		return fmt.Errorf("disagg driver prefix = %d: prefix caching is not simulated in disaggregated runs; use 0", sh.Prefix)
	}
	if err := sh.validate(&d.c.Prefill.Engine); err != nil {
		return fmt.Errorf("disagg prefill: %w", err)
	}
	s := d.dec[0]
	if need := s.remoteNeed(sh.ISL, sh.OSL); need > usableBlocks(&s.eng) {
		return fmt.Errorf("disagg decode num_gpu_blocks = %d: one request of isl %d + osl %d needs %d blocks of %d tokens; give the decode pool more KV", s.eng.GPUBlocks(), sh.ISL, sh.OSL, need, s.bs)
	}
	return nil
}

// RunClosedLoop simulates cl (the aggregated driver's client semantics: each
// client's next request arrives at the previous one's finish + TurnaroundMs +
// ClientRTTMs; StartMs staggers the first ones; KeepBusy keeps the population full
// until every request of generations < Generations finished).
func (d *DisaggSim) RunClosedLoop(ctx context.Context, cl ClosedLoop) (*DisaggResult, error) {
	if err := d.validShape(&cl.Shape); err != nil {
		return nil, err
	}
	switch {
	case cl.Clients <= 0:
		return nil, fmt.Errorf("closed loop concurrency = %d: must be > 0", cl.Clients)
	case cl.Generations <= 0:
		return nil, fmt.Errorf("closed loop generations = %d: must be > 0", cl.Generations)
	case !(cl.TurnaroundMs >= 0) || math.IsInf(cl.TurnaroundMs, 0):
		return nil, fmt.Errorf("closed loop turnaround_ms = %v: must be a finite number ≥ 0", cl.TurnaroundMs)
	case !(cl.ClientRTTMs >= 0) || math.IsInf(cl.ClientRTTMs, 0):
		return nil, fmt.Errorf("closed loop client_rtt_ms = %v: must be a finite number ≥ 0", cl.ClientRTTMs)
	case cl.StartMs != nil && len(cl.StartMs) != cl.Clients:
		return nil, fmt.Errorf("closed loop start_ms: %d values for %d clients; give one per client", len(cl.StartMs), cl.Clients)
	}
	for i, t := range cl.StartMs {
		if !(t >= 0) || math.IsInf(t, 0) {
			return nil, fmt.Errorf("closed loop start_ms[%d] = %v: must be a finite number ≥ 0", i, t)
		}
	}
	cs := clientSends{d: d, sh: &cl.Shape, sent: make([]int, cl.Clients)}
	for c := 0; c < cl.Clients; c++ {
		at := 0.0
		if cl.StartMs != nil {
			at = cl.StartMs[c]
		}
		cs.send(c, at)
	}
	pending := cl.Clients * cl.Generations
	d.onDone = func(ri int32, t float64) {
		r := &d.recs[ri]
		if r.Generation < cl.Generations {
			pending--
		}
		if cs.sent[r.Client] < cl.Generations || (cl.KeepBusy && pending > 0) {
			cs.send(r.Client, t+cl.TurnaroundMs+cl.ClientRTTMs)
		}
	}
	if err := d.loop(ctx, func() bool { return pending == 0 || cs.err != nil }); err != nil {
		return nil, err
	}
	if cs.err != nil {
		return nil, cs.err
	}
	return d.result(), nil
}

// clientSends creates the requests of a closed population of clients: the next
// request of client c, its shape drawn by creation index, arrives at at. The
// first draw error is kept in err.
type clientSends struct {
	d       *DisaggSim
	sh      *Shape
	created int
	sent    []int // requests sent per client
	err     error
}

func (s *clientSends) send(c int, at float64) {
	isl, osl, err := s.sh.draw(s.created)
	if err != nil && s.err == nil {
		s.err = err
	}
	s.created++
	s.d.schedule(darr{t: at, client: c, gen: s.sent[c], isl: isl, osl: osl})
	s.sent[c]++
}

// RunOpenLoop simulates ol (explicit ArrivalsMs, else a Poisson stream of RateRPS
// seeded by Seed, as the aggregated driver).
func (d *DisaggSim) RunOpenLoop(ctx context.Context, ol OpenLoop) (*DisaggResult, error) {
	if err := d.validShape(&ol.Shape); err != nil {
		return nil, err
	}
	times := ol.ArrivalsMs
	if times == nil {
		if !(ol.RateRPS > 0) || math.IsInf(ol.RateRPS, 0) {
			return nil, fmt.Errorf("open loop rate = %v rps: must be a finite number > 0", ol.RateRPS)
		}
		if ol.NumRequests <= 0 {
			return nil, fmt.Errorf("open loop num_requests = %d: must be > 0", ol.NumRequests)
		}
		rng := rand.New(rand.NewPCG(ol.Seed, 0x6f7261636c65))
		times = make([]float64, ol.NumRequests)
		t := 0.0
		for i := range times {
			times[i] = t
			t += rng.ExpFloat64() * 1000 / ol.RateRPS
		}
	}
	for i, t := range times {
		if !(t >= 0) || math.IsInf(t, 0) || (i > 0 && t < times[i-1]) {
			return nil, fmt.Errorf("open loop arrivals_ms[%d] = %v: must be finite, ≥ 0 and non-decreasing", i, t)
		}
	}
	d.arr = make([]darr, 0, len(times))
	for i, t := range times {
		isl, osl, err := ol.draw(i)
		if err != nil {
			return nil, err
		}
		d.arr = append(d.arr, darr{t: t, client: -1, gen: i, isl: isl, osl: osl, seq: i})
	}
	d.recs = make([]DisaggRecord, 0, len(times))
	d.total = len(times)
	if err := d.loop(ctx, func() bool { return d.fin == len(times) }); err != nil {
		return nil, err
	}
	return d.result(), nil
}

// result collects the records: token times from the decode workers.
func (d *DisaggSim) result() *DisaggResult {
	res := &DisaggResult{Requests: d.recs}
	for _, s := range append(append([]*Sim(nil), d.pre...), d.dec...) {
		res.NumPasses += s.nPasses
		res.ScheduledToks += s.schedTk
		for i := range s.reqs {
			res.Preemptions += s.reqs[i].preemptions
		}
	}
	for ri := range d.recs {
		r := &d.recs[ri]
		res.EndMs = math.Max(res.EndMs, r.FinishMs)
		if !r.Done || r.DecodeWorker < 0 {
			continue
		}
		dec := d.dec[r.DecodeWorker]
		if d.fromDecode {
			// S-D4: the decode server streams the first token when the landed
			// request joins its running batch, at the start of its first pass.
			r.VisibleMs = dec.dis.firstStart[d.st[ri].did]
		}
		dr := &dec.reqs[d.st[ri].did]
		r.TokenTimesMs = make([]float64, 0, len(dr.tokTimes)+1)
		r.TokenTimesMs = append(r.TokenTimesMs, r.VisibleMs)
		r.TokenTimesMs = append(r.TokenTimesMs, dr.tokTimes...)
	}
	return res
}
