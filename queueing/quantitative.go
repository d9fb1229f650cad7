package queueing

import (
	"context"
	"fmt"
	"math"

	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// Defaults of the quantitative evaluator.
const (
	defaultWarmup       = 4
	defaultWindowMin    = 8
	defaultWindowReqs   = 128
	defaultOpenRequests = workload.ArrivalStrata
)

// collector accumulates the steady statistics while the recursion runs.
type collector struct {
	itl   bins // ITL gaps, binned
	stage float64
	doneN int
}

// onPass records the ITL gaps produced by pass p: every emitting decode entry of a
// steady request that already had a token. A gap equal to the pass length (the
// request was in the previous pass) is pooled into one atom per pass.
func (c *collector) onPass(s *sim, p *simPass, start, end float64) {
	pooled := 0.0
	for _, en := range p.entries {
		if !en.emits {
			continue
		}
		r := &s.reqs[en.r]
		if !r.steady || r.gOut < 1 {
			continue
		}
		if r.last == start {
			pooled++
		} else {
			c.itl.add(end-r.last, 1)
		}
	}
	if pooled > 0 {
		c.itl.add(end-start, pooled)
	}
}

// QuantitativeWith is Quantitative with explicit options.
func QuantitativeWith(ctx context.Context, w workload.Spec, e EngineSpec, t timing.Timing, o Options) (*Report, error) {
	b, err := checkInputs(w, e, t)
	if err != nil {
		return nil, err
	}
	if o.StaggerPhases < 0 || o.StaggerPhases > maxStaggerPhases {
		return nil, inputErr(fmt.Errorf("options stagger_phases = %d: must be in 0..%d", o.StaggerPhases, maxStaggerPhases))
	}
	if o.StaggerPhases > 0 && w.Concurrency > 0 {
		return staggered(ctx, w, e, t, o, b)
	}
	return quantitativeRun(ctx, w, e, t, o, b)
}

// quantitativeRun is one limit-cycle evaluation (closed-loop clients start at
// stage + slot·SpreadMs/C; a burst when the spread is 0).
func quantitativeRun(ctx context.Context, w workload.Spec, e EngineSpec, t timing.Timing, o Options, b shapeBounds) (*Report, error) {
	s := &sim{e: e, t: t, budget: e.budget(), seqCap: e.seqCap(), chunked: -1, record: o.RecordTokenTimes, barrier: math.Inf(1)}
	if e.Backend == BackendSGLang && !e.EnableChunkedPrefill {
		s.budget = e.MaxPrefillTokens
	}
	s.initKV(e.KVCapacityTokens)
	col := &collector{stage: e.StageMs}
	s.onPass = col.onPass
	if !o.RecordTokenTimes && !o.NoFastForward {
		s.fast = col.itl.add
	}
	// Every pass advances some request by ≥ 1 token (a TRT-LLM reuse jump by ≥ 1
	// position, once per request): a request needs at most its uncached prompt
	// (chunk depth at worst one token per pass) + its outputs + 1 passes.
	perReq := b.maxISL - w.Prefix + b.maxOSL + 2
	if w.Concurrency > 0 {
		return evalClosed(ctx, s, col, w, o, perReq)
	}
	return evalOpen(ctx, s, col, w, o, perReq)
}

// newReq appends a request of w's k-th shape (k = creation index) and returns it.
func (s *sim) newReq(w *workload.Spec, slot, gen int, arrival float64) int32 {
	k := len(s.reqs)
	isl, osl := w.Shape(k)
	s.reqs = append(s.reqs, simReq{slot: slot, gen: gen, arrival: arrival, isl: isl, prefix: w.Prefix, osl: osl})
	s.incoming = append(s.incoming, int32(k))
	return int32(k)
}

// evalClosed runs the closed loop: C slots, all sending at 0 (the transient burst);
// each completion sends the slot's next request after the turnaround (it reaches
// the scheduler after the additive stages too). Generations [warm, warm+win) of
// every slot form the steady window.
func evalClosed(ctx context.Context, s *sim, col *collector, w workload.Spec, o Options, perReq int) (*Report, error) {
	C := w.Concurrency
	warm := o.WarmupGenerations
	if warm <= 0 {
		warm = defaultWarmup
	}
	win := o.WindowGenerations
	if win <= 0 {
		win = max(defaultWindowMin, ceilDiv(defaultWindowReqs, C))
	}
	stage := s.e.StageMs
	if err := s.workGuard(C*(warm+win+3), float64(warm+win+1)*cyclePasses(s, w, C), C); err != nil {
		return nil, err
	}
	s.reqs = make([]simReq, 0, C*(warm+win+3))
	s.maxPasses = C*(warm+win+4)*perReq + 64
	for slot := 0; slot < C; slot++ {
		ri := s.newReq(&w, slot, 0, stage+float64(slot)*o.spreadMs/float64(C))
		s.reqs[ri].transient = true
		s.reqs[ri].steady = warm == 0
	}
	target := C * win
	s.onFinish = func(s *sim, ri int32, now float64) {
		r := s.reqs[ri]
		if r.steady {
			col.doneN++
		}
		nri := s.newReq(&w, r.slot, r.gen+1, now+w.TurnaroundMs+stage)
		nr := &s.reqs[nri]
		nr.steady = nr.gen >= warm && nr.gen < warm+win
	}
	if err := s.run(ctx, func() bool { return col.doneN >= target }); err != nil {
		return nil, err
	}
	rep, err := s.report(col, w)
	if err != nil {
		return nil, err
	}
	// Throughput: each slot's window spans its steady requests back to back (the
	// next request is sent at completion + turnaround), so slot s serves win
	// requests in Σ (E2E + turnaround); the slot rates add up.
	first := make([]float64, C)
	last := make([]float64, C)
	toks := make([]float64, C)
	for i := range s.reqs {
		r := &s.reqs[i]
		if !r.steady {
			continue
		}
		if r.gen == warm {
			first[r.slot] = r.arrival - stage
		}
		if r.gen == warm+win-1 {
			last[r.slot] = r.done + w.TurnaroundMs
		}
		toks[r.slot] += float64(r.osl)
	}
	x, tok := 0.0, 0.0
	for sl := 0; sl < C; sl++ {
		d := last[sl] - first[sl]
		if !(d > 0) {
			return nil, fmt.Errorf("queueing: empty measurement window for slot %d (internal)", sl)
		}
		x += float64(win) / d
		tok += toks[sl] / d
	}
	rep.ThroughputRPS = x * 1000
	rep.OutputTokensPerS = tok * 1000
	rep.Diagnostics.WindowStartMs = minOf(first)
	rep.Diagnostics.WindowEndMs = maxOf(last)
	return rep, finite(rep)
}

// evalOpen runs the open loop on the W1 stream: N requests, the first N/10 are
// warm-up. An unstable rate (the in-system population grows between the middle and
// the last arrival while completions fall behind arrivals) stops at the last
// arrival with an Unstable report.
func evalOpen(ctx context.Context, s *sim, col *collector, w workload.Spec, o Options, perReq int) (*Report, error) {
	n := w.NumRequests
	if n == 0 {
		n = o.OpenLoopRequests
	}
	if n <= 0 {
		n = defaultOpenRequests
	}
	stream, err := workload.NewArrivalStream(w.RateRPS)
	if err != nil {
		return nil, err
	}
	warm := n / 10
	if err := s.workGuard(n, float64(n)*cyclePasses(s, w, 1), 0); err != nil {
		return nil, err
	}
	s.reqs = make([]simReq, 0, n)
	s.maxPasses = n*perReq + 64
	for i := 0; i < n; i++ {
		ri := s.newReq(&w, -1, i, stream.Next()+s.e.StageMs)
		s.reqs[ri].steady = i >= warm
	}
	target := n - warm
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
	rep, err := s.report(col, w)
	if err != nil {
		return nil, err
	}
	// A stable open loop serves what arrives: throughput is the arrival rate of the
	// steady requests.
	a0, a1 := s.reqs[warm].arrival, s.reqs[n-1].arrival
	toks := 0.0
	for i := warm; i < n; i++ {
		toks += float64(s.reqs[i].osl)
	}
	if a1 > a0 {
		k := float64(n - 1 - warm)
		rep.ThroughputRPS = k / (a1 - a0) * 1000
		rep.OutputTokensPerS = rep.ThroughputRPS * toks / float64(n-warm)
	}
	rep.Diagnostics.WindowStartMs, rep.Diagnostics.WindowEndMs = a0, a1
	return rep, finite(rep)
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
	isl, osl := w.ISL, w.OSL
	for _, v := range w.ISLQuantiles {
		isl = max(isl, v)
	}
	for _, v := range w.OSLQuantiles {
		osl = max(osl, v)
	}
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

// report builds the distributions of the steady and transient requests.
func (s *sim) report(col *collector, w workload.Spec) (*Report, error) {
	stage := col.stage
	n := 0
	for i := range s.reqs {
		if r := &s.reqs[i]; (r.steady || r.transient) && r.finished {
			n++
		}
	}
	ttft, e2e, tpot := make([]Atom, 0, n), make([]Atom, 0, n), make([]Atom, 0, n)
	var trans []Atom
	recs := make([]RequestRecord, 0, n)
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
		recs = append(recs, RequestRecord{Slot: r.slot, Generation: r.gen, ArrivalMs: r.arrival - stage,
			ISL: r.isl, Prefix: r.prefix, OSL: r.osl, TTFTMs: tt, E2EMs: ee, TokenMs: r.tokens,
			Transient: r.transient && !r.steady})
	}
	if len(ttft) == 0 {
		return nil, fmt.Errorf("queueing: no steady request completed (internal)")
	}
	rep := &Report{Tier: TierQuantitative, Fidelity: w.Fidelity(), Requests: recs}
	rep.TTFTSteady = fromAtomsOwned(ttft)
	rep.E2E = fromAtomsOwned(e2e)
	rep.TPOT = fromAtomsOwned(tpot)
	rep.TTFTTransient = fromAtomsOwned(trans)
	if col.itl.empty() {
		rep.ITL = PointMass(0) // osl ≤ 1: no gaps
	} else {
		rep.ITL = col.itl.dist()
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
