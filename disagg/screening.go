package disagg

import (
	"errors"
	"fmt"
	"math"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// Screener prices tandem operating points in closed form (microseconds each),
// reusing its scratch buffers; not safe for concurrent use.
type Screener struct {
	pass timing.Pass
	rows []int
}

// Screening is the tandem's closed form with a fresh Screener.
func Screening(w workload.Spec, c Config) (*Report, error) {
	var s Screener
	return s.Screen(w, c)
}

// prefillMs prices b prompts of isl tokens on the prefill pool, chunked by the
// engine budget with the computed context carried across chunks (the last partial
// chunk at its real size); b prompts share each pass.
func (s *Screener) prefillMs(c *Config, isl, b int) (float64, error) {
	budget := engineBudget(c.Prefill.Engine)
	per := isl
	if budget > 0 {
		per = max(1, min(isl, budget/max(b, 1)))
	}
	if e := c.Prefill.Engine; e.Traits().ThresholdChunks && e.LongPrefillTokenThreshold > 0 {
		per = max(1, min(per, e.LongPrefillTokenThreshold)) // V-R3 caps a request's chunk, chunked or not
	}
	total := 0.0
	for done := 0; done < isl; done += per {
		n := min(per, isl-done)
		s.pass.Reset()
		for i := 0; i < b; i++ {
			s.pass.Prefill = append(s.pass.Prefill, timing.Chunk{Tokens: n, Computed: done})
		}
		ms, err := c.Prefill.Timing.PassMs(&s.pass)
		if err != nil {
			return 0, fmt.Errorf("disagg screening: pricing the prefill pass of %d prompts × %d tokens after %d computed: %w", b, n, done, err)
		}
		total += ms
	}
	return total, nil
}

// splitPrefillMs prices the prompt alone in the fewest passes any chunking allows
// with two other partitions than the engine's lone chunking: the remainder first
// then full chunks, and near-equal chunks (larger first). Under load a request's
// chunks are whatever budget the others leave; for a timing whose pass cost is a
// maximum of a compute and a memory term (roofline) either can undercut the lone
// chunking, and the bracket's lo takes the least (as queueing's screening does).
func (s *Screener) splitPrefillMs(c *Config, isl int) (float64, error) {
	per := isl
	if budget := engineBudget(c.Prefill.Engine); budget > 0 {
		per = min(isl, budget)
	}
	if e := c.Prefill.Engine; e.Traits().ThresholdChunks && e.LongPrefillTokenThreshold > 0 {
		per = min(per, e.LongPrefillTokenThreshold)
	}
	per = max(per, 1)
	n := (isl + per - 1) / per
	var err error
	price := func(sizes func(i int) int) float64 {
		total, done := 0.0, 0
		for i := 0; i < n && err == nil; i++ {
			k := sizes(i)
			s.pass.Reset()
			s.pass.Prefill = append(s.pass.Prefill, timing.Chunk{Tokens: k, Computed: done})
			var ms float64
			if ms, err = c.Prefill.Timing.PassMs(&s.pass); err != nil {
				err = fmt.Errorf("disagg screening: pricing the prefill chunk of %d tokens after %d computed: %w", k, done, err)
			}
			total += ms
			done += k
		}
		return total
	}
	first := isl - (n-1)*per
	rf := price(func(i int) int {
		if i == 0 {
			return first
		}
		return per
	})
	q, r := isl/n, isl%n
	eq := price(func(i int) int {
		if i < r {
			return q + 1
		}
		return q
	})
	return math.Min(rf, eq), err
}

// decodeMs prices one decode-only pass of b rows at context ctx.
func (s *Screener) decodeMs(c *Config, b, ctx int) (float64, error) {
	s.pass.Reset()
	s.rows = s.rows[:0]
	for i := 0; i < b; i++ {
		s.rows = append(s.rows, ctx)
	}
	s.pass.Decode = s.rows
	d, err := c.Decode.Timing.PassMs(&s.pass)
	s.pass.Decode = nil
	if err != nil {
		return 0, fmt.Errorf("disagg screening: pricing the decode pass of %d rows at context %d: %w", b, ctx, err)
	}
	return d, nil
}

// engineBudget is the per-pass token budget of e (0: none).
func engineBudget(e engine.Spec) int {
	if e.EnableChunkedPrefill {
		return e.TokenBudget()
	}
	return 0
}

// seqCapOf is the running-request cap of a pool's worker (κ given: the prefill
// pool's, Config.prefillKappa; 0 for the decode pool).
func seqCapOf(p Pool, kappa int) int {
	n := p.seats()
	if kappa > 0 {
		n = min(n, kappa)
	}
	return max(n, 1)
}

// Screen prices w on c in closed form (QUEUEING.md §5 adapted to §6):
//
//   - pure prefill p₁ = the prompt alone through its chunks; handoff T₁ = isl ×
//     kv_bytes / (link × efficiency), stretched by the fan-in of the pools
//     (max(1, nP/nD) concurrent flows per decode NIC when the flows overlap);
//   - decode pass t_d(b) at the decode batch b (per worker, capped by the
//     engine, the batch cap and the KV capacity), context isl + osl/2;
//   - throughput: the closed loop X = C / (E2E + turnaround), capped by the
//     prefill pool (nP·κ'/(p(κ') + T₁): a slot is held until pulled), the decode
//     pool (nD·b/((osl−1)·t_d(b) + T₁): KV is reserved from the transfer) and the
//     fabric (min(nP, nD)/T₁), solved by a damped fixed point; open loop X = λ
//     (unstable at or beyond the cap);
//   - TTFT = stage + p₁ + W_res + W_q: the residual of a prefill pass in flight
//     (busy fraction ρ_P, uniform residual) and, when a cap binds, the Little's-law
//     queue C/X − (E2E + turnaround) in front of the prefill pool;
//   - ITL: two masses — t_d (osl − 2 gaps) and the first gap T + t_d (the handoff
//     lands in it unless handoff_in_ttft).
//
// The bracket: lo = stage + p₁ is certain (no request prefills faster than alone);
// in a closed loop hi is the structural upper bound ttftHi on every steady TTFT
// (Diagnostics.BracketCertain = true, so a row may be declared certain-pass on it);
// elsewhere (open loop, shape mixtures, ttftHi's other conditions) hi is the
// estimate's p99 and BracketCertain is false.
func (s *Screener) Screen(w workload.Spec, c Config) (*Report, error) {
	if err := c.Validate(w); err != nil {
		return nil, &queueing.InputError{Err: err}
	}
	closed := w.Concurrency > 0
	if closed == (w.RateRPS > 0) {
		return nil, &queueing.InputError{Err: errWorkload}
	}
	isl, osl := w.ISL, w.OSL
	nP, nD := float64(c.Prefill.Workers), float64(c.Decode.Workers)
	stage := c.Prefill.Engine.StageMs
	caps := c.linkCaps()
	link := caps[0]
	if r := c.route(0, 0); r[0] != 0 {
		link = caps[r[0]]
	}
	t1 := float64(isl) * c.KVBytesPerToken / link
	if osl <= 1 {
		t1 = 0
	}
	fanIn := math.Max(1, nP/nD)
	p1, err := s.prefillMs(&c, isl, 1)
	if err != nil {
		return nil, err
	}
	kP := seqCapOf(c.Prefill, c.prefillKappa())
	capD := seqCapOf(c.Decode, 0)
	if kv := c.Decode.KVCapacityTokens; kv > 0 {
		capD = max(1, min(capD, c.decodeKVTokens()/c.reserveTokens(isl, osl)))
	}
	// MTP (TensorRT-LLM one-model MTP, SGLang EAGLE): a decode step emits
	// engine.StepTokens tokens, so a request's osl − 1 decode-side tokens take
	// steps ≤ osl − 1 passes (queueing.DecodeSteps); on an engine whose decode rows
	// share the token budget a row takes 1 + drafts of it (T-R3).
	de := c.Decode.Engine
	steps := osl - 1
	if de.DraftTokens > 0 && osl > 1 {
		steps = queueing.DecodeSteps(de.DraftAccepted, 0, osl-1)
		if de.Traits().SharedBudget {
			capD = max(1, min(capD, de.TokenBudget()/(1+de.DraftTokens)))
		}
	}
	slots := c.decodeSlots() // S-D2: requests a decode worker holds from their preallocation on
	ctx := isl + max(osl/2, 1)
	demand := math.Inf(1)
	if closed {
		demand = float64(w.Concurrency)
	}
	// Prefill batch per worker and decode batch per worker, by a damped fixed point.
	bP := max(1, min(kP, int(math.Ceil(math.Min(demand, 1e9)/nP))))
	bD := max(1, min(capD, int(math.Ceil(math.Min(demand, 1e9)/nD))))
	var x, capX, pB, tD, tx, e2e0 float64
	for it := 0; it < 24; it++ {
		if pB, err = s.prefillMs(&c, isl, bP); err != nil {
			return nil, err
		}
		if tD, err = s.decodeMs(&c, bD, ctx); err != nil {
			return nil, err
		}
		tx = t1 * math.Min(fanIn, math.Max(1, float64(bP)))
		dec := float64(steps) * tD
		xP := nP * float64(bP) / (pB + tx)
		xD := nD * float64(bD) / math.Max(dec+tx, 1e-9)
		if slots > 0 { // a slot is held through the prefill as well (S-D2)
			xD = math.Min(xD, nD*float64(slots)/math.Max(pB+tx+dec, 1e-9))
		}
		xF := math.Inf(1)
		if t1 > 0 {
			xF = math.Min(nP, nD) / t1
		}
		e2e0 = stage + p1 + tx + dec
		capX = math.Min(math.Min(xP, xD), xF)
		x = capX
		if closed {
			x = math.Min(x, demand/(e2e0+w.TurnaroundMs))
		} else if lam := w.RateRPS / 1000; lam < x {
			x = lam
		}
		// batches implied by X (Little's law per stage), damped toward the new value
		nbP := max(1, min(kP, int(math.Ceil(x*pB/nP))))
		nbD := max(1, min(capD, int(math.Ceil(x*(dec+tx)/nD))))
		if nbP == bP && nbD == bD {
			break
		}
		bP, bD = (bP+nbP+1)/2, (bD+nbD+1)/2
	}
	rep := &Report{DHeadroomMin: 1}
	rep.Tier, rep.Fidelity = queueing.TierScreening, w.Fidelity()
	if !closed && w.RateRPS/1000 >= capX*(1-1e-9) {
		rep.Unstable = true
		rep.UnstableReason = "unstable at this rate: the tandem's capacity (screening) is below the offered load; lower the rate or rebalance the pools"
		return rep, nil
	}
	// TTFT: residual of a prefill pass in flight plus the queue in front of the pool.
	rhoP := math.Min(1, x*pB/(nP*float64(bP)))
	if closed { // a client does not wait for its own previous request
		rhoP *= (demand - 1) / demand
	}
	wq := 0.0
	if closed {
		wq = math.Max(0, demand/x-(e2e0+w.TurnaroundMs))
	} else if rhoP < 1 { // M/D/1 waiting time on the prefill pass as the server
		wq = rhoP * pB / (2 * (1 - rhoP))
	}
	base := stage + p1 + wq
	// S-D4: SGLang's first token reaches the client from the decode server, after
	// the transfer, at the next decode pass start (on average half a pass later).
	fromDecode := c.Decode.Engine.Traits().FirstTokenFromDecode
	visibleLate := c.HandoffInTTFT || fromDecode
	if visibleLate {
		base += tx
	}
	if fromDecode {
		base += tD / 2
	}
	const k = 16
	atoms := make([]queueing.Atom, 0, k+1)
	atoms = append(atoms, queueing.Atom{Value: base, Weight: 1 - rhoP})
	for i := 0; i < k; i++ {
		atoms = append(atoms, queueing.Atom{Value: base + (float64(i)+0.5)/k*pB, Weight: rhoP / k})
	}
	ttft, err := queueing.NewDistribution(atoms)
	if err != nil {
		return nil, err
	}
	rep.TTFTSteady, rep.TTFTTransient = ttft, ttft
	// Transient: the burst's staircase on one prefill worker (ceil(C/nP) prompts in
	// batches of κ').
	if closed {
		steps := math.Ceil(math.Ceil(demand/nP) / float64(kP))
		tb, err := s.prefillMs(&c, isl, min(kP, int(math.Ceil(demand/nP))))
		if err != nil {
			return nil, err
		}
		rep.TTFTTransient, _ = queueing.NewDistribution([]queueing.Atom{{Value: stage + tb, Weight: 1}, {Value: stage + steps*tb, Weight: 1}})
	}
	first := tD
	if !visibleLate {
		first += tx
	}
	switch {
	case osl <= 1:
		rep.ITL = queueing.PointMass(0)
	case steps < osl-1: // MTP: a step's accepted drafts arrive with its token (gaps of 0)
		atoms := []queueing.Atom{{Value: first, Weight: 1}, {Value: 0, Weight: float64(osl - 1 - steps)}}
		if steps > 1 {
			atoms = append(atoms, queueing.Atom{Value: tD, Weight: float64(steps - 1)})
		}
		rep.ITL, _ = queueing.NewDistribution(atoms)
	case osl == 2:
		rep.ITL = queueing.PointMass(first)
	default:
		rep.ITL, _ = queueing.NewDistribution([]queueing.Atom{{Value: tD, Weight: float64(osl - 2)}, {Value: first, Weight: 1}})
	}
	tpot := 0.0
	if osl > 1 {
		tpot = (float64(steps-1)*tD + first) / float64(osl-1)
	}
	rep.TPOT = queueing.PointMass(tpot)
	e2e := ttft.Mean() + float64(osl-1)*tpot
	if visibleLate {
		e2e = ttft.Mean() + float64(steps)*tD
	}
	rep.E2E = queueing.PointMass(e2e)
	rep.KVTransfer = queueing.PointMass(tx)
	rep.PQueueMsP99 = wq + pB*rhoP
	rep.ThroughputRPS = x * 1000
	rep.OutputTokensPerS = x * 1000 * float64(osl)
	if kv := c.Decode.KVCapacityTokens; kv > 0 {
		rep.DHeadroomMin = math.Max(0, 1-float64(bD*c.reserveTokens(isl, osl))/float64(c.decodeKVTokens()))
	}
	split, err := s.splitPrefillMs(&c, isl)
	if err != nil {
		return nil, err
	}
	rep.TTFTSteadyP99Lo = stage + math.Min(p1, split)
	rep.TTFTSteadyP99Hi = math.Max(ttft.Quantile(0.99), rep.TTFTSteadyP99Lo)
	hi, certain, err := s.ttftHi(&c, w)
	if err != nil {
		return nil, err
	}
	if certain {
		// A relative margin of 1e-9 keeps lo ≤ hi where they are the same prices
		// summed another way (C = 1).
		rep.TTFTSteadyP99Hi = math.Max(hi*(1+1e-9), rep.TTFTSteadyP99Lo)
		rep.Diagnostics.BracketCertain = true
	}
	rep.Diagnostics.Rho = rhoP
	rep.Diagnostics.OwnPrefillMs = p1
	rep.Diagnostics.TGenMs = tD
	// Every column derives from these scalars: checking them is checking the
	// columns, without building the column map (most of a screening's cost).
	for _, v := range []float64{x, pB, tD, tx, wq, rhoP, tpot, e2e, rep.TTFTSteadyP99Lo, rep.TTFTSteadyP99Hi, rep.DHeadroomMin,
		rep.TTFTTransient.Max(), rep.ITL.Max(), ttft.Max()} {
		if !finite(v) {
			return nil, errors.New("disagg: screening column is not finite (internal)")
		}
	}
	return rep, nil
}

// progress returns, for a prefill worker of engine e serving prompts of isl
// tokens with no decode rows, the least number of prompt tokens a pass gives the
// earliest running prompt of those ahead of a request (min(rest, g)), the most
// prompt tokens a pass carries, and whether the engine is sure to schedule a
// waiting prompt that has a free slot (a whole prompt must fit the budget).
func progress(e engine.Spec, isl int) (g, tokMax int, ok bool) {
	bs := max(e.BlockSize, 1)
	switch e.Backend {
	case engine.TRTLLM:
		// T-R3: contexts sized FCFS, a cut chunk rounded down to a block.
		if e.EnableChunkedPrefill {
			return e.MaxNumTokens / bs * bs, e.MaxNumTokens, e.MaxNumTokens >= bs
		}
		return isl, e.MaxNumTokens, isl <= e.MaxNumTokens
	case engine.SGLang:
		tokMax = max(e.ChunkedPrefillSize, e.MaxPrefillTokens)
		if e.EnableChunkedPrefill {
			g = e.ChunkedPrefillSize / bs * bs
			return g, tokMax, g >= 1
		}
		return isl, tokMax, isl <= e.MaxPrefillTokens
	}
	// vLLM (V-R2/V-R3): running prompts first, each min(rest, budget left,
	// threshold); the threshold chunks even with chunked prefill off.
	b := e.MaxNumBatchedTokens
	switch {
	case e.LongPrefillTokenThreshold > 0 && e.EnableChunkedPrefill:
		return min(e.LongPrefillTokenThreshold, b), b, b >= 1
	case e.LongPrefillTokenThreshold > 0: // a threshold chunk must fit whole
		g = min(e.LongPrefillTokenThreshold, isl)
		return g, b, g <= b
	case e.EnableChunkedPrefill:
		return b, b, b >= 1
	}
	return isl, b, isl <= b
}

// worstPrefillPass bounds the price of any pass of a prefill worker: at most
// tokMax prompt tokens in at most k chunks of prompts of isl tokens, each chunk
// priced at the deepest context it can end at (a timing non-decreasing in tokens
// and context). Three shapes: k equal tails ending at isl, whole prompts from 0,
// one chunk ending at isl.
func (s *Screener) worstPrefillPass(t timing.Timing, isl, k, tokMax int) (float64, error) {
	tok := max(1, min(tokMax, k*isl))
	m := max(1, min(k, tok))
	worst := 0.0
	var err error
	price := func(fill func()) {
		if err != nil {
			return
		}
		s.pass.Reset()
		fill()
		var ms float64
		if ms, err = t.PassMs(&s.pass); err != nil {
			err = fmt.Errorf("disagg screening: pricing a worst-case prefill pass (%d tokens in %d chunks): %w", s.pass.PrefillTokens(), len(s.pass.Prefill), err)
		}
		worst = math.Max(worst, ms)
	}
	price(func() { // m equal tails, the remainder on the first
		n := tok / m
		for i := 0; i < m; i++ {
			ni := n
			if i == 0 {
				ni += tok - n*m
			}
			s.pass.Prefill = append(s.pass.Prefill, timing.Chunk{Tokens: ni, Computed: max(0, isl-ni)})
		}
	})
	price(func() { // whole prompts from position 0
		for left := tok; left > 0; left -= isl {
			s.pass.Prefill = append(s.pass.Prefill, timing.Chunk{Tokens: min(left, isl)})
		}
	})
	price(func() { // one chunk ending at isl
		n := min(tok, isl)
		s.pass.Prefill = append(s.pass.Prefill, timing.Chunk{Tokens: n, Computed: isl - n})
	})
	return worst, err
}

// ttftHi is the structural upper bound on any steady TTFT of the tandem in a
// closed loop of C clients (certain = false, and hi meaningless, outside its
// conditions: open loop, a shape mixture, a whole prompt that does not fit the
// prefill budget, decode rows beyond the decode budget). Timing non-decreasing in
// tokens, rows and context, as for the aggregated bracket (queueing.bracketHi).
//
// The argument. R becomes visible to its prefill worker p at a. At most C − 1
// other requests exist (one per client), so at most C − 1 are ahead of R on p in
// FCFS order (round-robin can route every live request to p), each with ≤ isl
// prompt tokens left; nothing behind R is admitted before it.
//
//   - Passes. Until R's first token, p is either running a pass or idle. A pass is
//     the one in flight at a, the asynchronous engine's pre-scheduled one (V-R10,
//     T overlap executor), or a pass that advances the earliest running prompt of
//     R and those ahead by ≥ min(rest, g) (progress): ≤ C·⌈isl/g⌉ of them. Each
//     costs ≤ worstPrefillPass. With C = 1 p is idle at a (the previous request of
//     the only client left p when its KV landed).
//   - Idle time. p idles with R unfinished only when no slot is free (a waiting
//     prompt with a free slot is scheduled: progress's ok), i.e. all K slots are
//     held by prompts waiting to be pulled (pull connectors; push frees the slot at
//     send). Each held slot is released within H of its prompt's completion, so an
//     idle stretch lasts ≤ H, and each ends with an admission of R or a request
//     ahead; blocking needs K held + R waiting, so there are ≤ C − K of them.
//   - H = pull wait + transfer. Transfer: under max-min fairness a flow's rate is
//     ≥ min over its links of cap/(flows on it); a prefill egress carries ≤ min(C,
//     K) flows under pull (each holds a slot), a decode ingress ≤ min(C, N) when
//     the decode KV holds N reservations (pull reserves before the first byte),
//     else C: T ≤ isl·kv_bytes·F/cap_min. The decode KV holds M requests' final KV
//     at once: ⌊kv/(isl+osl)⌋, N = M (TRT-LLM, SGLang: the whole KV reserved);
//     vLLM's kernel counts whole blocks, a pull reserving the prompt's P blocks
//     and a request growing to Q = ⌈(isl+osl−2)/bs⌉ (V-D2, V-D4), so M =
//     ⌊blocks/Q⌋ and N = ⌊blocks/P⌋. Pull wait on decode worker d (FCFS pending
//     queue): the j-th request ahead starts within ⌊j/M⌋·(T + D),
//     D the decode residence: FCFS on bD running slots, each running request
//     gains a token per pass, so ≤ (⌊(n_d − 1)/bD⌋ + 1)·(osl − 1) + 1 + async
//     passes of ≤ bD rows at context isl + osl (vLLM: plus ≤ bD one-token
//     recompute chunks, V-D4).
//   - handoff_in_ttft adds R's own pull wait and transfer.
func (s *Screener) ttftHi(c *Config, w workload.Spec) (float64, bool, error) {
	C := w.Concurrency
	isl, osl := w.ISL, w.OSL
	if C < 1 || len(w.ISLQuantiles) > 0 || len(w.OSLQuantiles) > 0 {
		return 0, false, nil
	}
	e := c.Prefill.Engine
	g, tokMax, ok := progress(e, isl)
	if !ok || g < 1 {
		return 0, false, nil
	}
	K := seqCapOf(c.Prefill, c.prefillKappa())
	tauP, err := s.worstPrefillPass(c.Prefill.Timing, isl, min(K, C), tokMax) // ≤ C prompts exist
	if err != nil {
		return 0, false, err
	}
	extra := 1
	if e.AsyncScheduling {
		extra++
	}
	if C == 1 {
		extra = 0
	}
	passes := C * ((isl + g - 1) / g)
	hi := c.Prefill.Engine.StageMs + float64(passes+extra)*tauP

	if osl > 1 { // a handoff exists
		eff := c.Fabric.Efficiency
		if eff == 0 {
			eff = DefaultEfficiency
		}
		capMin := c.Fabric.InterNodeGBps * eff * 1e6
		if c.Fabric.IntraNodeGBps > 0 && c.Fabric.GPUsPerNode > 0 {
			capMin = math.Min(capMin, c.Fabric.IntraNodeGBps*eff*1e6)
		}
		need := isl + osl
		kv := c.Decode.KVCapacityTokens
		egress, ingress, onD := C, C, C
		fitD := 0 // pull: requests whose final KV a decode worker holds at once
		if !c.Push {
			egress = min(C, K)
			if kv > 0 {
				fitD = c.decodeKVTokens() / c.reserveTokens(isl, osl) // whole blocks, as the tandem counts them
				ingress = fitD
				if c.Decode.Engine.Backend == engine.VLLM {
					// The tandem's vLLM decode kernel counts whole blocks (V-D2): a
					// pull reserves its prompt's P blocks, and a request grows to Q
					// blocks by its last pass (isl + osl − 2 tokens, V-D4).
					bs := max(c.Decode.Engine.BlockSize, 1)
					p := (isl + bs - 1) / bs
					capB := kv / bs
					fitD, ingress = capB/max((isl+osl-2+bs-1)/bs, p), capB/p
					if fitD < C {
						// The C requests' decodes can outgrow the pool and preempt by
						// recompute (V-R6): a recomputed request's passes carry
						// prompt chunks and it re-enters the waiting queue, which
						// the pass and residence bounds below do not cover.
						return 0, false, nil
					}
				}
				if fitD < 1 {
					return 0, false, nil // a request's KV never fits (the tandem deadlocks)
				}
				ingress = min(C, ingress)
				onD = ingress
			}
		}
		tx := float64(isl) * c.KVBytesPerToken * float64(max(egress, ingress)) / capMin
		wait := 0.0
		if !c.Push && kv > 0 {
			bD := seqCapOf(c.Decode, 0)
			rows := min(bD, onD)
			de := c.Decode.Engine
			if de.Traits().SharedBudget && rows*(1+de.DraftTokens) > de.TokenBudget() {
				return 0, false, nil // not every running row gets its step each pass (T-R3: 1 + drafts tokens)
			}
			asyncD := 0
			if de.AsyncScheduling {
				asyncD = 1
			}
			tauD, err := s.decodeMs(c, rows, need)
			if err != nil {
				return 0, false, err
			}
			if de.Traits().DecodeRecomputesFirstToken {
				// V-D4: a pulled request's first decode-side pass recomputes its last
				// prompt token, so a pass may carry up to rows one-token chunks besides
				// the decode rows (priced as both, a bound by monotonicity).
				s.pass.Reset()
				for i := 0; i < rows; i++ {
					s.pass.Prefill = append(s.pass.Prefill, timing.Chunk{Tokens: 1, Computed: isl - 1})
				}
				s.pass.Decode = s.rows[:rows]
				for i := range s.pass.Decode {
					s.pass.Decode[i] = need
				}
				ms, err := c.Decode.Timing.PassMs(&s.pass)
				s.pass.Decode = nil
				if err != nil {
					return 0, false, fmt.Errorf("disagg screening: pricing the decode pass of %d rows and %d recompute chunks: %w", rows, rows, err)
				}
				tauD = math.Max(tauD, ms)
			}
			d := float64(((onD-1)/bD+1)*(osl-1)+1+asyncD) * tauD
			wait = float64((C-1)/fitD) * (tx + d)
		}
		if !c.Push && C > K {
			hi += float64(C-K) * (wait + tx)
		}
		hiP := hi // a request's prefill side, from its admission to its first token
		fromDecode := c.Decode.Engine.Traits().FirstTokenFromDecode
		if c.HandoffInTTFT || fromDecode {
			hi += wait + tx
		}
		if fromDecode {
			// S-D4: the first token is visible when the decode worker admits the
			// landed request: FIFO for a seat of bD (S-R2), ≤ C − 1 requests ahead.
			// Every running request gains a token per pass (SGLang's decode rows
			// take no budget), so each ⌊(C − 1)/bD⌋ round frees its seats within
			// osl − 1 passes, + 1 with the overlap scheduler (a request finishing
			// in the pass in flight keeps its seat, §3.2); then the request joins
			// the pass after the one in flight (two with the overlap scheduler:
			// the next one was formed when that one launched). Passes of ≤
			// min(bD, C) rows at context isl + osl.
			bD := seqCapOf(c.Decode, 0)
			tauD, err := s.decodeMs(c, min(bD, C), need)
			if err != nil {
				return 0, false, err
			}
			async := 0
			if c.Decode.Engine.AsyncScheduling {
				async = 1
			}
			seat := float64((C-1)/bD*(osl-1+async)+1+async) * tauD
			hi += seat
			// S-D2: the request first waits for a decode slot (and its KV), FIFO:
			// S requests hold them at once (engine.DecodeSlots; with a decode KV,
			// no more than fitD), each from its preallocation to its finish — its
			// prefill side, its transfer and pull wait, its seat wait and osl − 1
			// passes — so ≤ ⌊(C − 1)/S⌋ such residences pass before its turn.
			if S := c.decodeSlots(); S > 0 {
				if kv > 0 {
					S = min(S, fitD)
				}
				hi += float64((C-1)/S) * (hiP + wait + tx + seat + float64(osl-1)*tauD)
			}
		}
	}
	return hi, finite(hi), nil
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
