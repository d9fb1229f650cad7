package queueing

import (
	"fmt"
	"math"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// Discretisation of the screening distributions (atoms per continuous component).
const residualAtoms = 24

// scr holds the derived quantities of one screening evaluation (docs/queueing.md).
type scr struct {
	c          float64 // requests in service
	I, O       float64 // mean uncached prompt, mean output length in passes (1 + decode steps)
	tok        float64 // mean output length in tokens (O but under MTP, whose steps emit several)
	np         int     // own prefill passes
	pmix       int     // prefill tokens of a mixed pass
	dmix, dgen int     // decode rows of a mixed / decode-only pass
	nmix, ngen float64 // passes per request cycle
	tmix, tgen float64
	own        float64 // the own prompt's pure prefill (its chunks alone, no decode rows)
	ride       float64 // the other requests' decode rows riding in those own passes
	tcyc       float64 // one request cycle (all c requests served once)
}

// Screening evaluates w on engine e with pass timing t by the closed form of
// QUEUEING.md §5 (derived in docs/queueing.md): a handful of timing calls, no
// simulation.
func Screening(w workload.Spec, e engine.Spec, t timing.Timing) (*Report, error) {
	return new(Screener).ScreenWith(w, e, t, DefaultOptions())
}

// ScreeningWith is Screening under explicit options: only Options.ClientRTTMs is
// read (the client round trip lengthens the closed-loop cycle like a turnaround,
// and a replacement arriving off the pass boundary waits for the pass in flight).
func ScreeningWith(w workload.Spec, e engine.Spec, t timing.Timing, o Options) (*Report, error) {
	return new(Screener).ScreenWith(w, e, t, o)
}

// Screener evaluates screening points reusing its scratch space between calls, for
// hot loops (sweeps) that screen many points. The zero value is ready; a Screener
// must not be used by two goroutines at once. Results equal Screening's exactly.
type Screener struct {
	pr pricer
}

// Screen is Screening with s's scratch space.
func (s *Screener) Screen(w workload.Spec, e engine.Spec, t timing.Timing) (*Report, error) {
	return s.ScreenWith(w, e, t, DefaultOptions())
}

// ScreenWith is ScreeningWith with s's scratch space.
func (s *Screener) ScreenWith(w workload.Spec, e engine.Spec, t timing.Timing, o Options) (*Report, error) {
	b, err := checkInputs(w, e, t)
	if err != nil {
		return nil, err
	}
	if err := CheckClientRTT(o.ClientRTTMs); err != nil {
		return nil, inputErr(fmt.Errorf("options %w", err))
	}
	if w.Concurrency > 0 {
		w.TurnaroundMs += o.ClientRTTMs // the closed form sees the round trip as client delay
	}
	if e.KVCapacityTokens > 0 && e.Traits().PerPassKV {
		return nil, inputErr(fmt.Errorf("engine kv_capacity_tokens = %d: the screening tier does not model %s KV pressure (preemption/retraction); use the quantitative tier, which does, or drop the KV capacity", e.KVCapacityTokens, e.Backend))
	}
	pr := &s.pr
	pr.reset(t)
	rep, err := screen(pr, w, e, b)
	perr := pr.err
	pr.t = nil       // do not keep the timing alive between calls
	if perr != nil { // the first pricing error is the cause of any later one
		return nil, perr
	}
	if err != nil {
		return nil, err
	}
	return rep, finite(rep)
}

func screen(pr *pricer, w workload.Spec, e engine.Spec, b shapeBounds) (*Report, error) {
	stage := e.StageMs
	meanISL := float64(w.ISL)
	if len(w.ISLQuantiles) > 0 {
		meanISL = 0
		for _, v := range w.ISLQuantiles {
			meanISL += float64(v)
		}
		meanISL /= float64(len(w.ISLQuantiles))
	}
	isl := int(math.Round(meanISL))
	prefix := w.Prefix
	I := float64(isl - prefix)
	// Tokens and passes: O counts a request's output passes (its first token, then
	// one per decode step) and tok its output tokens; they differ under MTP, whose
	// steps emit engine.StepTokens each (DecodeSteps). Pass counts read O; KV,
	// contexts and token rates read tok.
	tok := b.meanOSL
	O := outputPasses(e, w, tok)
	osl := int(math.Round(tok))
	ctxDec := isl + max(osl/2, 1) // mean context of a decode row
	S := effSeqCap(e, isl, prefix, osl)
	alternating := e.Traits().Alternating
	async := e.AsyncScheduling

	// lo: the shortest prompt prefilled alone, chunked exactly as the calendar
	// chunks a lone request (no decode rows, no waiting): every steady TTFT is at
	// least this (docs/queueing.md §4.6).
	lo := stage + math.Min(alonePrefillMs(pr, e, b.minISL, prefix), remainderFirstMs(pr, e, b.minISL, prefix))

	if rep, ok := lockedCohort(pr, e, w, b, isl, prefix, osl, int(math.Round(O))-1, lo); ok && !promptsHeld(e, b.minISL) {
		return rep, nil
	}

	var s scr
	open := w.RateRPS > 0
	lambda := w.RateRPS / 1000 // requests per ms
	var wq Distribution
	rho := 0.0
	unstableReason := ""
	if !open {
		s = cycle(pr, e, float64(min(w.Concurrency, S)), I, O, isl, prefix, ctxDec, alternating, len(w.ISLQuantiles) == 0 && len(w.OSLQuantiles) == 0)
	} else {
		// Open loop: the in-service population n solves n = λ·(time in service).
		n := 1.0
		for it := 0; it < 12; it++ {
			s = cycle(pr, e, n, I, O, isl, prefix, ctxDec, alternating, false)
			inService := s.own + s.ride + (O-1)*s.tcyc/math.Max(s.nmix+s.ngen, 1)
			next := math.Max(1, lambda*inService)
			if next > float64(S) || next > 1e6 {
				unstableReason = fmt.Sprintf("unstable at rate %.4g rps: the requests in service would exceed the engine cap (%d); lower the rate", w.RateRPS, S)
				break
			}
			n = next
		}
		if unstableReason == "" {
			// The prefill server: M/D/1 on the own-prefill time (the whole request
			// when one sequence runs at a time).
			svc := s.own + s.ride
			if S == 1 {
				svc += (O - 1) * s.tgen
			}
			rho = lambda * svc
			if rho >= 1 {
				unstableReason = fmt.Sprintf("unstable at rate %.4g rps: the prefill load ρ = %.3g ≥ 1 (capacity about %.4g rps); lower the rate", w.RateRPS, rho, 1000/svc)
			} else {
				wq = md1Wait(rho, svc)
			}
		}
	}
	if unstableReason != "" {
		return &Report{Tier: TierScreening, Fidelity: w.Fidelity(), Unstable: true, UnstableReason: unstableReason,
			Diagnostics: Diagnostics{Rho: rho}}, nil
	}
	c := s.c
	s.tok = tok
	hold := heldMs(e, c, s.tgen, b.minISL)

	// Waiting for a slot (closed loop, C > max running): Little's law on the cycle
	// (a request's cycle includes its batch-waiting hold).
	wait := 0.0
	thr := 0.0
	if !open {
		C := float64(w.Concurrency)
		if C > c {
			thr = c / (s.tcyc + hold)
			wait = math.Max(0, C/thr-s.tcyc-hold-w.TurnaroundMs)
		} else {
			thr = C / (s.tcyc + hold + w.TurnaroundMs)
		}
		rho = s.nmix * s.tmix / s.tcyc
	} else {
		thr = lambda
	}

	// ITL: two masses through the weighted-quantile rule (osl ≤ 1: no gaps), over
	// a request's O − 1 decode passes; decodeMs is their sum (E2E − TTFT).
	var itl, tpot Distribution
	tpotMean, decodeMs := 0.0, 0.0
	if O > 1 {
		gaps := O - 1
		var mixGap, mixW float64
		if alternating {
			// A prefill stretch stalls every decoder for the whole chunked prefill.
			mixGap, mixW = s.tgen+float64(s.np)*s.tmix, math.Min(gaps, math.Max(c-1, 0))
		} else {
			mixGap, mixW = s.tmix, math.Min(gaps, s.nmix*(c-1)/c)
		}
		genW := gaps - mixW
		itl = twoAtoms(s.tgen, genW, mixGap, mixW)
		tpotMean = itl.Mean()
		decodeMs = gaps * tpotMean
		if tok > O { // MTP: a step's accepted drafts arrive with its token
			itl = withDraftGaps(itl, gaps, tok-O)
			tpotMean = decodeMs / (tok - 1)
		}
		tpot = PointMass(tpotMean)
	} else {
		itl, tpot = PointMass(0), PointMass(0)
	}
	// The residual of the pass in flight at arrival.
	var res Distribution
	switch {
	case open && S == 1:
		res = PointMass(0) // inside the M/D/1 wait
	case !open && w.Concurrency == 1 && async && e.Traits().FinishedRunsAgain:
		// One client under the SGLang overlap scheduler: the request waits out its
		// predecessor's discarded pass.
		res = PointMass(discardedPassWait(pr, e, w, 1, isl+osl))
		thr = 1 / (s.tcyc + w.TurnaroundMs + res.Mean())
	case !open && w.Concurrency == 1:
		res = PointMass(0) // one client: its request finds the engine idle, whatever its delay
	case open || w.TurnaroundMs > 0 || hold > 0:
		// A held prompt (T-R6) starts with the decode passes of the hold, not
		// aligned with a returning cohort: the residual of a random arrival.
		res = residual(s, async)
	case async && c > 1 && len(w.ISLQuantiles) == 0 && len(w.OSLQuantiles) == 0:
		// Pass-aligned arrival, seen one pass late (V-R10): one whole pass. With a
		// fixed shape the cohort returns while the previous cohort's prompts are
		// being prefilled: that pass is a mixed pass.
		res = PointMass(s.tmix)
	case async && c > 1:
		res = twoAtoms(s.tgen, s.ngen, s.tmix, s.nmix)
	default:
		res = PointMass(0)
	}
	// The own prefill phase: the pure prefill of the own chunks plus the decode rows
	// riding in them (own + ride); at least the packed mixed pass when a returning
	// cohort shares it (closed loop, fixed shape); at least, by Little's law, the
	// cycle minus the own decode gaps when the cycle is prefill-bound (every pass
	// carries prompt work, so a request waits for the other prompts). Each term is
	// explicit; the largest binds.
	phase := s.own + s.ride
	if !open && len(w.ISLQuantiles) == 0 && len(w.OSLQuantiles) == 0 && float64(s.pmix) > I {
		phase = math.Max(phase, s.tmix)
	}
	if !open && s.nmix > float64(s.np)+O-1 {
		phase = math.Max(phase, s.tcyc-decodeMs)
	}
	shift := stage + wait + phase + hold
	ttft := res.Shift(shift)
	if open && S > 1 {
		ttft = wq.Shift(shift + res.Mean())
	} else if open {
		ttft = wq.Shift(shift)
	}

	e2e := ttft.Shift(decodeMs)

	// Transient: the admission staircase of the burst (request k waits for the k
	// prompts before it; beyond the running cap, for whole cycles).
	trans := PointMass(lo)
	if !open {
		trans = staircase(pr, e, w, s, lo, isl, prefix)
	}

	if alternating && !open && len(w.ISLQuantiles) == 0 && len(w.OSLQuantiles) == 0 && w.Concurrency <= S {
		// SGLang with mixed chunk off locks the whole closed loop: prefill has
		// priority (S-R3), so every request decodes after the same prefill stretch,
		// all finish in the same pass and return together. The steady TTFT is the
		// burst staircase; a request's first gap also waits for the rest of the
		// stretch, the other gaps are decode-only passes.
		stretch := math.Max(0, trans.Max()-stage)
		ttft = trans
		if O > 1 {
			itl = twoAtoms(s.tgen, O-2, s.tgen+stretch/2, 1)
			tpotMean = itl.Mean()
			decodeMs = (O - 1) * tpotMean
			if tok > O { // EAGLE: a step's accepted drafts arrive with its token
				itl = withDraftGaps(itl, O-1, tok-O)
				tpotMean = decodeMs / (tok - 1)
			}
			tpot = PointMass(tpotMean)
		}
		e2e = ttft.Shift(decodeMs)
		gens := 0.0
		if O > 1 {
			gens = (O - 1) * s.tgen
		}
		thr = float64(w.Concurrency) / (stretch + gens + w.TurnaroundMs) // one stretch + decode per cycle
	}
	hi, certain := bracketHi(pr, e, w, b, async, alternating)
	certain = certain && hold == 0 // the hold is a bound, not the calendar's replay
	p99 := ttft.Quantile(0.99)
	if !certain {
		hi = math.Max(hi, p99)
	}
	lo = math.Min(lo, ttft.Min())
	rep := &Report{
		TTFTSteady: ttft, TTFTTransient: trans, ITL: itl, TPOT: tpot, E2E: e2e,
		TTFTSteadyP99Lo: lo, TTFTSteadyP99Hi: hi,
		ThroughputRPS: thr * 1000, OutputTokensPerS: thr * 1000 * tok,
		Tier: TierScreening, Fidelity: w.Fidelity(),
		Diagnostics: Diagnostics{BracketCertain: certain, Rho: rho, TMixMs: s.tmix, TGenMs: s.tgen, NMix: s.nmix, NGen: s.ngen,
			OwnPrefillMs: s.own, RideMs: s.ride},
	}
	return rep, nil
}

// heldMs is the screening tier's bound on what an engine holds a new request
// back beside running ones, added to every TTFT and cycle (0 with c ≤ 1: no
// decode rows run beside it): TensorRT-LLM's batch waiting (T-R6) holds a
// prompt at most batch_wait_timeout_iters passes, and SGLang's skipped
// receipt (S-R7) receives it within scheduler_recv_interval passes, each at
// least a decode-only pass of tgen. The whole count is an upper bound (a
// request that arrives during a hold, or with others that reach the ratio,
// waits less), so the tier's TTFT errs high, never optimistic; the
// quantitative tier replays the rules.
func heldMs(e engine.Spec, c, tgen float64, minISL int) float64 {
	switch {
	case c <= 1 || !promptsHeld(e, minISL):
		return 0
	case e.RecvEvery() > 0:
		return float64(e.RecvEvery()) * tgen
	}
	return float64(e.BatchWaitTimeoutIters) * tgen
}

// promptsHeld reports whether e can hold back a prompt of minISL tokens or
// more beside running requests: SGLang's skipped receipt (S-R7), or batch
// waiting (T-R6) whose shortest schedule with a context — that prompt and one
// generation row — stays below the ratio's threshold. A locked cohort
// (lockedCohort) is then not the steady state the tier may assume.
func promptsHeld(e engine.Spec, minISL int) bool {
	if e.RecvEvery() > 0 {
		return true
	}
	return e.BatchWaiting() && float64(minISL+1+e.DraftTokens) < e.BatchWaitMaxTokensRatio*float64(e.TokenBudget())
}
