package disagg

import (
	"fmt"
	"math"

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
func engineBudget(e queueing.EngineSpec) int {
	switch e.Backend {
	case queueing.BackendTRTLLM:
		if e.EnableChunkedPrefill {
			return e.MaxNumTokens
		}
		return 0
	case queueing.BackendSGLang:
		if e.EnableChunkedPrefill {
			return e.ChunkedPrefillSize
		}
		return 0
	}
	if e.EnableChunkedPrefill {
		return e.MaxNumBatchedTokens
	}
	return 0
}

// seqCapOf is the running-request cap of a pool's worker.
func seqCapOf(p Pool) int {
	n := p.Engine.MaxNumSeqs
	if p.Engine.Backend == queueing.BackendTRTLLM {
		n = p.Engine.MaxBatchSize
	}
	if p.BatchCap > 0 {
		n = min(n, p.BatchCap)
	}
	if p.InFlightCap > 0 {
		n = min(n, p.InFlightCap)
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
// hi is an estimate (Diagnostics.BracketCertain = false): no structural upper
// bound on the tandem's TTFT p99 has been proved.
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
	kP := seqCapOf(c.Prefill)
	capD := seqCapOf(c.Decode)
	if kv := c.Decode.KVCapacityTokens; kv > 0 {
		capD = max(1, min(capD, kv/(isl+osl)))
	}
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
		dec := float64(osl-1) * tD
		xP := nP * float64(bP) / (pB + tx)
		xD := nD * float64(bD) / math.Max(dec+tx, 1e-9)
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
	if c.HandoffInTTFT {
		base += tx
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
	if !c.HandoffInTTFT {
		first += tx
	}
	switch {
	case osl <= 1:
		rep.ITL = queueing.PointMass(0)
	case osl == 2:
		rep.ITL = queueing.PointMass(first)
	default:
		rep.ITL, _ = queueing.NewDistribution([]queueing.Atom{{Value: tD, Weight: float64(osl - 2)}, {Value: first, Weight: 1}})
	}
	tpot := 0.0
	if osl > 1 {
		tpot = (float64(osl-2)*tD + first) / float64(osl-1)
	}
	rep.TPOT = queueing.PointMass(tpot)
	e2e := ttft.Mean() + float64(osl-1)*tpot
	if c.HandoffInTTFT {
		e2e = ttft.Mean() + float64(osl-1)*tD
	}
	rep.E2E = queueing.PointMass(e2e)
	rep.KVTransfer = queueing.PointMass(tx)
	rep.PQueueMsP99 = wq + pB*rhoP
	rep.ThroughputRPS = x * 1000
	rep.OutputTokensPerS = x * 1000 * float64(osl)
	if kv := c.Decode.KVCapacityTokens; kv > 0 {
		rep.DHeadroomMin = math.Max(0, 1-float64(bD*(isl+osl))/float64(kv))
	}
	rep.TTFTSteadyP99Lo = stage + p1
	rep.TTFTSteadyP99Hi = math.Max(ttft.Quantile(0.99), rep.TTFTSteadyP99Lo)
	rep.Diagnostics.BracketCertain = false
	rep.Diagnostics.Rho = rhoP
	rep.Diagnostics.OwnPrefillMs = p1
	rep.Diagnostics.TGenMs = tD
	return rep, finiteReport(rep)
}
