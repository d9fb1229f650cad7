package queueing

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// Defaults of the quantitative evaluator.
const (
	defaultWindowMin  = 8
	defaultWindowReqs = 128
	// defaultOpenPeriods W1 stream periods of the open loop when the workload
	// does not set NumRequests: one warm-up period and 3 measured ones, so the p99
	// rests on ≥ 100 requests beyond it (3·4096·0.01 = 123).
	defaultOpenPeriods = 4
)

// collector accumulates the steady statistics while the recursion runs.
type collector struct {
	itl   bucketBins // ITL gaps, binned per bucket (simReq.bucket)
	stage float64
	doneN int
	pool  []bucketRows
	gaps  []bucketGap // complete's scratch: the unpooled gaps of one pass
	// poolAt[b] is 1 + the index of bucket b in pool during complete, 0 when absent
	// (maxBuckets entries, allocated on first use, zero between passes).
	poolAt []int32
}

// bucketGap is one ITL gap of a request of ITL bucket `bucket`.
type bucketGap struct {
	bucket int32
	gap    float64
}

// gap records, in complete, the gap of a row of bucket b that was not in the
// previous pass (added to the bins after the pass's loop, in entry order).
func (c *collector) gap(b int32, v float64) {
	c.gaps = append(c.gaps, bucketGap{b, v})
}

// poolRows adds, in complete, n rows of bucket b whose gap is the pass length to
// the pass's pool (a bucket's first rows append it: first-seen order). The counts
// are integers, so adding them a run at a time gives the pool the same float64
// weights as adding one row at a time.
func (c *collector) poolRows(b int32, n int) {
	if n == 0 {
		return
	}
	if i := c.poolAt[b]; i > 0 {
		c.pool[i-1].n += float64(n)
		return
	}
	c.pool = append(c.pool, bucketRows{bucket: b, n: float64(n)})
	c.poolAt[b] = int32(len(c.pool))
}

// onPass records the ITL gaps produced by pass p: every emitting decode entry of a
// measured request that already had a token, and a gap of 0 per accepted MTP draft. A gap equal to the pass length (the
// request was in the previous pass) is pooled into one atom per pass and bucket.
func (c *collector) onPass(s *sim, p *simPass, start, end float64) {
	pool := c.pool[:0]
	for _, x := range p.extra { // MTP: each step's accepted drafts, gaps of 0
		if b := s.reqs[x.r].bucket; b >= 0 {
			c.itl.add(b, 0, float64(x.more))
		}
	}
	for _, en := range p.entries {
		if !en.emits {
			continue
		}
		r := &s.reqs[en.r]
		if r.bucket < 0 || r.gOut < 1 {
			continue
		}
		if r.last == start {
			pool = addBucketRow(pool, r.bucket, 1)
		} else {
			c.itl.add(r.bucket, end-r.last, 1)
		}
	}
	c.itl.addRows(pool, end-start)
	c.pool = pool
}

// onFast records the gaps of one fast-forwarded decode pass.
func (c *collector) onFast(gap float64, rows []bucketRows) {
	c.itl.addRows(rows, gap)
}

// itlOf is the ITL distribution of the buckets [lo, hi).
func (c *collector) itlOf(lo, hi int) Distribution { return orNoGaps(c.itl.dist(lo, hi)) }

// orNoGaps is the ITL distribution d, or a point mass at 0 when d is empty (osl ≤ 1:
// no gaps).
func orNoGaps(d Distribution) Distribution {
	if d.Len() == 0 {
		return PointMass(0)
	}
	return d
}

// QuantitativeWith is Quantitative with explicit options.
func QuantitativeWith(ctx context.Context, w workload.Spec, e engine.Spec, t timing.Timing, o Options) (*Report, error) {
	b, err := checkInputs(w, e, t)
	if err != nil {
		return nil, err
	}
	if o.StaggerPhases < 0 || o.StaggerPhases > maxStaggerPhases {
		return nil, inputErr(fmt.Errorf("options stagger_phases = %d: must be in 0..%d", o.StaggerPhases, maxStaggerPhases))
	}
	if err := CheckClientRTT(o.ClientRTTMs); err != nil {
		return nil, inputErr(fmt.Errorf("options %w", err))
	}
	if o.StaggerPhases > 0 && w.Concurrency > 0 {
		return staggered(ctx, w, e, t, o, b)
	}
	return quantitativeRun(ctx, w, e, t, o, b, nil)
}

// runScratch holds the large buffers of a closed-loop run — the request slice, the
// ITL bins and the state-cycle checkpoints — for the next run of the same
// evaluation (the burst transient and the stagger phases run one after another),
// so each run does not allocate and grow them anew. A run leaves nothing in them
// that the next one reads: each is emptied (or overwritten) before use.
//
// Ownership is explicit: lend moves the buffers into a run (the scratch holds
// none of them while the run has them), reclaim moves them back once the run's
// report is built, on every return path (evalClosed), and a report never
// aliases them (TestRunScratchReportsSurviveReuse).
type runScratch struct {
	reqs   []simReq
	bins   bucketBins
	poolAt []int32 // collector.poolAt (all zero between passes)
	ckpts  []stateCkpt
}

// lend gives a closed-loop run its buffers: col's ITL bins (emptied) and pool
// index, the request slice (empty) when it holds reqCap requests, and the
// checkpoints as sc's spares (sc nil: the state rule is off, they stay). A nil
// scratch lends nothing.
func (scr *runScratch) lend(s *sim, col *collector, sc *stateCycle, reqCap int) {
	if scr == nil {
		return
	}
	col.itl, col.poolAt = scr.bins.emptied(), scr.poolAt
	scr.bins, scr.poolAt = bucketBins{}, nil
	if cap(scr.reqs) >= reqCap {
		s.reqs = scr.reqs[:0] // newReq writes every request whole
	}
	scr.reqs = nil
	if sc != nil {
		sc.spare, scr.ckpts = scr.ckpts, nil
	}
}

// reclaim takes back what lend gave the run, grown: the request slice, the ITL
// bins and pool index, and every checkpoint of sc (nil: none). Called once the
// run is over and its report built, whatever the outcome.
func (scr *runScratch) reclaim(s *sim, col *collector, sc *stateCycle) {
	if scr == nil {
		return
	}
	scr.reqs, s.reqs = s.reqs, nil
	scr.bins, scr.poolAt = col.itl, col.poolAt
	col.itl, col.poolAt = bucketBins{}, nil
	if sc != nil {
		scr.ckpts = sc.buffers()
	}
}

// quantitativeRun is one limit-cycle evaluation (closed-loop clients start at
// stage + ClientPhases(C, phase, spread); a burst when the spread is 0). scr, when not nil, lends
// its buffers to a closed-loop run and gets them back at its end (evalClosed).
func quantitativeRun(ctx context.Context, w workload.Spec, e engine.Spec, t timing.Timing, o Options, b shapeBounds, scr *runScratch) (*Report, error) {
	s := new(sim)
	*s = newSim(e, t)
	s.record = o.RecordTokenTimes
	s.initKV(e.KVCapacityTokens)
	col := &collector{stage: e.StageMs}
	s.col = col
	if !o.RecordTokenTimes && !o.NoFastForward {
		s.fast = col.onFast
	}
	if o.summary {
		s.summarise()
	}
	// Every pass advances some request by ≥ 1 token (a TRT-LLM reuse jump by ≥ 1
	// position, once per request): a request needs at most its uncached prompt
	// (chunk depth at worst one token per pass) + its outputs + 1 passes.
	perReq := b.maxISL - w.Prefix + b.maxOSL + 2
	if w.Concurrency > 0 {
		return evalClosed(ctx, s, col, w, o, perReq, scr)
	}
	return evalOpen(ctx, s, col, w, o, perReq)
}

// newReq appends a request of w's k-th shape (k = creation index) and returns it.
func (s *sim) newReq(w *workload.Spec, slot, gen int, arrival float64) int32 {
	k := len(s.reqs)
	isl, osl := w.Shape(k)
	s.reqs = append(s.reqs, simReq{slot: int32(slot), gen: int32(gen), arrival: arrival, isl: isl, prefix: w.Prefix, osl: osl, bucket: -1})
	// Keep the pending arrivals sorted by time, ties in creation order (the oracle's
	// arrival heap): a staggered client's first request can arrive after another
	// client's replacement was created.
	in := append(s.incoming, int32(k))
	i := len(in) - 1
	for i > s.inHead && s.reqs[in[i-1]].arrival > arrival {
		in[i] = in[i-1]
		i--
	}
	in[i] = int32(k)
	s.incoming = in
	return int32(k)
}

// evalClosed runs the closed loop: C slots, sending their first requests at
// stage + ClientPhases(C, phase, spread) (all at once: the transient burst); each completion sends
// the slot's next request, which reaches the scheduler after the turnaround, the
// client round trip and the additive stages. The steady window is chosen by the
// limit-cycle rule (cycle.go) as generations complete; the recursion keeps
// spawning (the load stays on) until every window request has finished.
func evalClosed(ctx context.Context, s *sim, col *collector, w workload.Spec, o Options, perReq int, scr *runScratch) (*Report, error) {
	C := w.Concurrency
	win := windowGenerations(C, o)
	horizon := settleGenerations + win
	if o.spreadMs > 0 {
		horizon = phaseSettleGenerations + win
	}
	if o.transientOnly {
		horizon = 1
	}
	stage := s.e.StageMs
	delay := w.TurnaroundMs + o.ClientRTTMs + stage
	if err := s.workGuard(C*(horizon+3), float64(horizon+1)*cyclePasses(s, w, C), C); err != nil {
		return nil, err
	}
	// A stagger phase settles within a few generations (cycle.go): its slice starts
	// at 8 and append grows it when needed (no pointer into s.reqs is held across
	// newReq); a burst may run to its horizon.
	gens := horizon + 3
	if o.spreadMs > 0 {
		gens = min(gens, 8)
	}
	// The scheduler-state rule (statecycle.go) while no generation window is decided.
	var sc *stateCycle
	if len(w.ISLQuantiles) == 0 && len(w.OSLQuantiles) == 0 && !o.noStateCycle && !o.transientOnly {
		sc = &stateCycle{horizon: horizon, clients: C, win: win, minPeriods: max(o.statePeriods, 1), every: 1,
			cks: make([]stateCkpt, 0, stateCheckpoints+1)}
	}
	scr.lend(s, col, sc, C*gens)
	if s.reqs == nil {
		s.reqs = make([]simReq, 0, C*gens)
	}
	rep, err := runClosed(ctx, s, col, w, o, sc, closedPlan{win: win, horizon: horizon, perReq: perReq, delay: delay})
	// Every buffer goes back only now, on every path: the report is built and
	// holds none of them.
	scr.reclaim(s, col, sc)
	return rep, err
}

// closedPlan is what evalClosed decided for a closed-loop run: the generation
// window and horizon, the pass bound per request and the delay from a
// completion to the slot's next arrival.
type closedPlan struct {
	win, horizon, perReq int
	delay                float64
}

// runClosed simulates the closed loop set up by evalClosed (s.reqs empty, sc the
// scheduler-state rule or nil) and builds its report.
func runClosed(ctx context.Context, s *sim, col *collector, w workload.Spec, o Options, sc *stateCycle, p closedPlan) (*Report, error) {
	C, win, horizon, delay := w.Concurrency, p.win, p.horizon, p.delay
	stage := s.e.StageMs
	s.maxPasses = C*(horizon+4)*p.perReq + 64
	for slot, at := range ClientPhases(C, o.phase, o.spreadMs) {
		ri := s.newReq(&w, slot, 0, stage+at)
		s.reqs[ri].transient = true
	}
	det := newCycleDetector(C, win, horizon)
	gen0 := 0
	s.onFinish = func(s *sim, ri int32, now float64) {
		r := s.reqs[ri]
		if r.gen == 0 {
			gen0++
		} else {
			det.add(int(r.slot), int(r.gen), r.arrival, r.first-r.arrival, r.done-r.arrival)
		}
		nri := s.newReq(&w, int(r.slot), int(r.gen)+1, now+delay)
		if r.gen+1 < maxBuckets {
			s.reqs[nri].bucket = int32(r.gen + 1)
		}
	}
	stop := func() bool {
		if det.ready() {
			return true
		}
		return sc != nil && !det.decided && gen0 == C && sc.observe(s, col)
	}
	if o.transientOnly {
		stop = func() bool { return gen0 == C }
	}
	if err := s.run(ctx, stop); err != nil {
		return nil, err
	}
	// A window of whole state periods, unless the generation rule's window was
	// complete first (its horizon came before the periods did).
	if sc != nil && sc.done {
		return stateCycleReport(s, col, w, sc, delay, o.spreadMs, o.phase)
	}
	if o.transientOnly {
		rep, err := s.report(col, w, -1, -1)
		if err != nil {
			return nil, err
		}
		return rep, finite(rep)
	}
	win0, win1 := det.w.Start, det.w.Start+det.w.Length
	rep, err := s.report(col, w, win0, win1)
	if err != nil {
		return nil, err
	}
	if err := s.slotThroughput(rep, C, delay); err != nil {
		return nil, err
	}
	wd := det.w
	wd.SpreadMs, wd.Phase = o.spreadMs, o.phase
	rep.Diagnostics.Windows = []Window{wd}
	rep.Diagnostics.LimitCycle = limitCycleNote(rep.Diagnostics.Windows)
	return rep, finite(rep)
}

// slotThroughput sets rep's throughputs and window instants from the steady
// requests of a closed loop of C slots. Each slot's steady requests run back to
// back (the next request is sent at completion + turnaround and reaches the
// scheduler a round trip later), so slot s serves its n_s steady requests between
// the completion before its first one (that arrival − delay) and its last steady
// completion; the slot rates add up.
func (s *sim) slotThroughput(rep *Report, C int, delay float64) error {
	first := make([]float64, C)
	last := make([]float64, C)
	toks := make([]float64, C)
	n := make([]int, C)
	for i := range s.reqs {
		r := &s.reqs[i]
		if !r.steady {
			continue
		}
		if n[r.slot] == 0 || r.arrival-delay < first[r.slot] {
			first[r.slot] = r.arrival - delay
		}
		last[r.slot] = math.Max(last[r.slot], r.done)
		n[r.slot]++
		toks[r.slot] += float64(r.osl)
	}
	x, tok := 0.0, 0.0
	for sl := 0; sl < C; sl++ {
		d := last[sl] - first[sl]
		if n[sl] == 0 || !(d > 0) {
			return fmt.Errorf("queueing: empty measurement window for slot %d (internal)", sl)
		}
		x += float64(n[sl]) / d
		tok += toks[sl] / d
	}
	rep.ThroughputRPS = x * 1000
	rep.OutputTokensPerS = tok * 1000
	rep.Diagnostics.WindowStartMs = minOf(first)
	rep.Diagnostics.WindowEndMs = maxOf(last)
	return nil
}

// stateCycleReport measures a closed loop on whole periods of its scheduler-state
// cycle (statecycle.go), which ended at the clock: the steady requests are those
// that finished in them (after the checkpoint's pass end, up to now; at least the
// generation window's number per slot), the ITL every gap emitted in them, the
// throughput the slots' rates over those requests (slotThroughput, as for a
// generation window). Window reports the generations of those requests, Found with
// the period in passes and ms (the generation Period stays 0) and the horizon the
// generation rule had.
func stateCycleReport(s *sim, col *collector, w workload.Spec, sc *stateCycle, delay, spreadMs float64, phase int) (*Report, error) {
	t0, t1 := sc.ck.now, s.now
	g0, g1 := math.MaxInt, -1
	for i := range s.reqs {
		r := &s.reqs[i]
		r.steady = r.finished && r.done > t0 && r.done <= t1
		if r.steady {
			g0, g1 = min(g0, int(r.gen)), max(g1, int(r.gen))
		}
	}
	if g1 < 0 {
		return nil, fmt.Errorf("queueing: a scheduler-state period with no completion (internal)")
	}
	rep, err := s.report(col, w, -1, -1)
	if err != nil {
		return nil, err
	}
	rep.ITL = orNoGaps(col.itl.distSince(sc.ck.bins, sc.ck.minGen))
	if err := s.slotThroughput(rep, sc.clients, delay); err != nil {
		return nil, err
	}
	rep.Diagnostics.Windows = []Window{{Start: g0, Length: g1 - g0 + 1, Found: true, Horizon: sc.horizon, SpreadMs: spreadMs, Phase: phase,
		StatePeriodPasses: sc.periodPasses, StatePeriodMs: sc.periodMs, StatePeriods: sc.periods, StateFromMs: t0, StateToMs: t1}}
	return rep, finite(rep)
}

// limitCycleNote is the diagnostic of runs whose limit cycle was not found ("" when
// every run found one).
func limitCycleNote(ws []Window) string {
	var miss []string
	for i, w := range ws {
		if !w.Found {
			miss = append(miss, fmt.Sprintf("run %d: no limit cycle within %d generations, measured generations [%d, %d)", i, w.Horizon, w.Start, w.Start+w.Length))
		}
	}
	return strings.Join(miss, "; ")
}

// evalOpen runs the open loop on the W1 stream. With n ≥ 2 stream periods the
// first period warms up and the measured window is the following whole periods (a
// period visits every inter-arrival stratum once, so the window's arrival rate is
// exactly the nominal one; requests after the last whole period are load only);
// below that, the first n/10 requests warm up and the rest are measured (the
// window then realises the rate of its sample). An unstable rate (the in-system
// population grows between the middle and the last arrival while completions fall
// behind arrivals) stops at the last arrival with an Unstable report.
func evalOpen(ctx context.Context, s *sim, col *collector, w workload.Spec, o Options, perReq int) (*Report, error) {
	const K = workload.ArrivalStrata
	n := w.NumRequests
	if n == 0 {
		n = o.OpenLoopRequests
	}
	if n <= 0 {
		n = defaultOpenPeriods * K
	}
	stream, err := workload.NewArrivalStream(w.RateRPS)
	if err != nil {
		return nil, err
	}
	warm, nw := OpenWindow(n)
	if err := s.workGuard(n, float64(n)*cyclePasses(s, w, 1), 0); err != nil {
		return nil, err
	}
	s.reqs = make([]simReq, 0, n)
	s.maxPasses = n*perReq + 64
	for i := 0; i < n; i++ {
		ri := s.newReq(&w, -1, i, stream.Next()+s.e.StageMs)
		s.reqs[ri].steady = i >= warm && i < warm+nw
		if s.reqs[ri].steady {
			s.reqs[ri].bucket = 0
		}
	}
	after := stream.Next() + s.e.StageMs // the arrival after the last simulated one
	target := nw
	mid, end := s.reqs[n/2].arrival, s.reqs[n-1].arrival
	var lMid, doneMid int
	midSeen, checked, unstable := false, false, false
	var lEnd, doneEnd int
	finished := 0
	s.onFinish = func(s *sim, ri int32, now float64) {
		finished++
		if s.reqs[ri].steady {
			col.doneN++
		}
	}
	inSystem := func(t float64) int { // arrived by t, not finished
		a := arrivedBy(s.reqs, t)
		return a - finished
	}
	s.barrier = mid // the fast path stops at the check instants (fastforward.go)
	stop := func() bool {
		if col.doneN >= target {
			return true
		}
		now := s.clock()
		if !midSeen && now >= mid {
			midSeen, lMid, doneMid = true, inSystem(now), finished
			s.barrier = end
		}
		if !checked && now >= end {
			checked, lEnd, doneEnd = true, inSystem(now), finished
			s.barrier = math.Inf(1)
			grow := lEnd - lMid
			arrivals := float64(n - 1 - n/2)
			completions := float64(doneEnd - doneMid)
			if float64(grow) > math.Max(8, 0.02*float64(n)) && completions < 0.98*arrivals {
				unstable = true
				return true
			}
		}
		return false
	}
	if err := s.run(ctx, stop); err != nil {
		return nil, err
	}
	if unstable {
		capRPS := float64(doneEnd-doneMid) / math.Max(end-mid, 1e-9) * 1000
		return &Report{
			Tier: TierQuantitative, Fidelity: w.Fidelity(), Unstable: true,
			UnstableReason: fmt.Sprintf("unstable at rate %.4g rps: requests accumulate (in system %d → %d over the second half of the arrivals, %.3g rps completed); lower the rate",
				w.RateRPS, lMid, lEnd, capRPS),
			Diagnostics: Diagnostics{Passes: s.passes, Backlog: lEnd},
		}, nil
	}
	rep, err := s.report(col, w, -1, -1)
	if err != nil {
		return nil, err
	}
	rep.ITL = col.itlOf(0, 1)
	// A stable open loop serves what arrives: throughput is the arrival rate of the
	// steady requests, nw arrivals over the nw gaps that follow the first (whole
	// periods: exactly the nominal rate).
	a0, a1 := s.reqs[warm].arrival, after
	if warm+nw < n {
		a1 = s.reqs[warm+nw].arrival
	}
	toks := 0.0
	for i := warm; i < warm+nw; i++ {
		toks += float64(s.reqs[i].osl)
	}
	if a1 > a0 {
		rep.ThroughputRPS = float64(nw) / (a1 - a0) * 1000
		rep.OutputTokensPerS = rep.ThroughputRPS * toks / float64(nw)
	}
	rep.Diagnostics.WindowStartMs, rep.Diagnostics.WindowEndMs = a0, a1
	batches := 4
	if nw >= 2*K {
		batches = nw / K // one batch per stream period
	}
	rep.Diagnostics.QuantileSE = batchSE(s.reqs[warm:warm+nw], s.e.StageMs, batches)
	return rep, finite(rep)
}

// OpenWindow returns the open loop's warm-up and measured request counts for n
// requests: with n ≥ 2 W1 stream periods, one warm-up period and the following
// whole periods; below that the first n/10 requests warm up and the rest are
// measured. The oracle gate measures the DES with the same window.
func OpenWindow(n int) (warm, measured int) {
	const K = workload.ArrivalStrata
	if n >= 2*K {
		return K, (n - K) / K * K
	}
	return n / 10, n - n/10
}

// Limits of one quantitative evaluation (memory and time): requests simulated and
// an estimate of the passes (about 3·10⁷ passes is tens of seconds).
const (
	maxSimRequests = 1 << 19
	maxSimPasses   = 3e7
)

// cyclePasses estimates the passes of one request cycle with c requests in
// service: its own prefill and decode passes, or the prefill work of all c prompts
// when that is longer.
func cyclePasses(s *sim, w workload.Spec, c int) float64 {
	isl, osl := w.MaxShape()
	b := float64(max(s.budget, 1))
	i := float64(isl - w.Prefix)
	return math.Max(math.Ceil(i/b)+float64(osl), float64(c)*i/b)
}

// workGuard rejects an evaluation too large to simulate, with the way out.
func (s *sim) workGuard(requests int, passes float64, c int) error {
	if requests > maxSimRequests || passes > maxSimPasses {
		return inputErr(fmt.Errorf("workload: the quantitative tier would simulate %d requests and about %.3g passes (limits %d, %.0g); use the screening tier, fewer requests or a smaller concurrency (%d)",
			requests, passes, maxSimRequests, maxSimPasses, c))
	}
	return nil
}

// arrivedBy counts requests (sorted by arrival) that arrived at or before t.
func arrivedBy(reqs []simReq, t float64) int {
	lo, hi := 0, len(reqs)
	for lo < hi {
		m := (lo + hi) / 2
		if reqs[m].arrival <= t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// report builds the distributions of the steady and transient requests. A closed
// loop passes its window [win0, win1) of generations (the requests of those
// generations become steady, their ITL buckets are merged); the open loop and a
// transient-only run pass −1 and keep the flags set at creation.
func (s *sim) report(col *collector, w workload.Spec, win0, win1 int) (*Report, error) {
	stage := col.stage
	if win0 >= 0 {
		for i := range s.reqs {
			r := &s.reqs[i]
			r.steady = int(r.gen) >= win0 && int(r.gen) < win1
		}
	}
	n := 0
	for i := range s.reqs {
		if r := &s.reqs[i]; (r.steady || r.transient) && r.finished {
			n++
		}
	}
	ttft, e2e, tpot := make([]Atom, 0, n), make([]Atom, 0, n), make([]Atom, 0, n)
	var trans []Atom
	var recs []RequestRecord
	if !s.summary {
		recs = make([]RequestRecord, 0, n)
	}
	for i := range s.reqs {
		r := &s.reqs[i]
		if !(r.steady || r.transient) || !r.finished {
			continue
		}
		tt := r.first - r.arrival + stage
		ee := r.done - r.arrival + stage
		if r.transient {
			trans = append(trans, Atom{Value: tt, Weight: 1})
		}
		if r.steady {
			ttft = append(ttft, Atom{Value: tt, Weight: 1})
			e2e = append(e2e, Atom{Value: ee, Weight: 1})
			tp := 0.0
			if r.osl > 1 {
				tp = (ee - tt) / float64(r.osl-1)
			}
			tpot = append(tpot, Atom{Value: tp, Weight: 1})
		}
		if s.summary {
			continue
		}
		var toks []float64
		if s.record && i < len(s.tokens) {
			toks = s.tokens[i]
		}
		recs = append(recs, RequestRecord{Slot: int(r.slot), Generation: int(r.gen), ArrivalMs: r.arrival - stage,
			ISL: r.isl, Prefix: r.prefix, OSL: r.osl, TTFTMs: tt, E2EMs: ee, TokenMs: toks,
			Transient: r.transient && !r.steady})
	}
	if len(ttft) == 0 && len(trans) == 0 {
		return nil, fmt.Errorf("queueing: no steady request completed (internal)")
	}
	rep := &Report{Tier: TierQuantitative, Fidelity: w.Fidelity(), Requests: recs}
	rep.TTFTSteady = fromAtomsOwned(ttft)
	rep.E2E = fromAtomsOwned(e2e)
	rep.TPOT = fromAtomsOwned(tpot)
	rep.TTFTTransient = fromAtomsOwned(trans)
	if win0 >= 0 {
		rep.ITL = col.itlOf(win0, win1)
	} else {
		rep.ITL = PointMass(0)
	}
	p99 := rep.TTFTSteady.Quantile(0.99)
	rep.TTFTSteadyP99Lo, rep.TTFTSteadyP99Hi = p99, p99
	rep.Diagnostics.Passes = s.passes
	rep.Diagnostics.SteadyRequests = len(ttft)
	s.kvReport(rep)
	rep.Diagnostics.BracketCertain = true
	return rep, nil
}

// finite rejects a report carrying a non-finite number (without building the
// column map).
func finite(r *Report) error {
	for _, d := range []struct {
		name string
		d    Distribution
	}{{"ttft_steady", r.TTFTSteady}, {"ttft_transient", r.TTFTTransient}, {"itl", r.ITL}, {"tpot", r.TPOT}, {"e2e", r.E2E}} {
		for _, v := range []float64{d.d.Min(), d.d.Max(), d.d.Mean()} {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return fmt.Errorf("queueing: %s is not finite (internal)", d.name)
			}
		}
	}
	for _, v := range []float64{r.TTFTSteadyP99Lo, r.TTFTSteadyP99Hi, r.ThroughputRPS, r.OutputTokensPerS} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("queueing: a throughput or bracket column is not finite (internal)")
		}
	}
	return nil
}

func minOf(x []float64) float64 {
	m := x[0]
	for _, v := range x {
		m = math.Min(m, v)
	}
	return m
}

func maxOf(x []float64) float64 {
	m := x[0]
	for _, v := range x {
		m = math.Max(m, v)
	}
	return m
}

// openQuantiles are the open-loop statistics reported with a standard error.
var openQuantiles = []struct {
	key string
	q   float64 // < 0: the mean
	e2e bool
}{{"ttft_steady_mean", -1, false}, {"ttft_steady_p50", 0.5, false}, {"ttft_steady_p90", 0.9, false}, {"ttft_steady_p99", 0.99, false},
	{"e2e_p50", 0.5, true}, {"e2e_p99", 0.99, true}}

// batchSE estimates the standard error of each open-loop quantile by batch means:
// the measured requests (in arrival order) are cut into `batches` contiguous
// batches (one per W1 stream period when the window has ≥ 2), the quantile is
// taken in each, and SE = sd over batches / √batches. Queueing correlates
// neighbouring requests, so an i.i.d. formula would understate the error; whole
// periods are the natural batches of the stream.
func batchSE(reqs []simReq, stage float64, batches int) map[string]float64 {
	if batches < 2 || len(reqs) < 2*batches {
		return nil
	}
	// qs[j][b] is statistic j (openQuantiles order) of batch b. Each batch's TTFTs
	// and E2Es are sorted once for all of their quantiles.
	qs := make([][]float64, len(openQuantiles))
	for j := range qs {
		qs[j] = make([]float64, batches)
	}
	vals := make([]float64, 0, len(reqs)/batches+1)
	for _, e2e := range []bool{false, true} {
		for b := 0; b < batches; b++ {
			lo, hi := b*len(reqs)/batches, (b+1)*len(reqs)/batches
			vals = vals[:0]
			for i := lo; i < hi; i++ {
				r := &reqs[i]
				v := r.first - r.arrival + stage
				if e2e {
					v = r.done - r.arrival + stage
				}
				vals = append(vals, v)
			}
			sorted := false
			for j, oq := range openQuantiles {
				if oq.e2e != e2e {
					continue
				}
				if oq.q < 0 { // the mean, summed in arrival order
					sum := 0.0
					for _, v := range vals {
						sum += v
					}
					qs[j][b] = sum / float64(len(vals))
					continue
				}
				if !sorted {
					slices.Sort(vals)
					sorted = true
				}
				k := int(math.Ceil(oq.q*float64(len(vals)))) - 1 // the Distribution's rule on equal weights
				qs[j][b] = vals[max(k, 0)]
			}
		}
	}
	out := make(map[string]float64, len(openQuantiles))
	for j, oq := range openQuantiles {
		mean := 0.0
		for _, v := range qs[j] {
			mean += v
		}
		mean /= float64(batches)
		ss := 0.0
		for _, v := range qs[j] {
			ss += (v - mean) * (v - mean)
		}
		out[oq.key] = math.Sqrt(ss/float64(batches-1)) / math.Sqrt(float64(batches))
	}
	return out
}
