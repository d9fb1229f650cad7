package queueing

import (
	"fmt"
	"math"

	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// Discretisation of the screening distributions (atoms per continuous component).
const residualAtoms = 24

// pricer prices the few passes the closed form needs, reusing one Pass.
type pricer struct {
	t     timing.Timing
	p     timing.Pass
	chunk [1]timing.Chunk
	err   error
	// Decode[:filled] already holds fillCtx.
	filled, fillCtx int
	tails           []timing.Chunk // scratch of priceTails
	tailsBuf        [32]timing.Chunk
	decBuf          [64]int
}

// price returns the duration of a pass with one prefill chunk (tokens at
// position from, prefix cached) and rows decode rows of context ctx each.
func (pr *pricer) price(tokens, from, prefix, rows, ctx int) float64 {
	pr.p.Prefill = pr.chunk[:0]
	if tokens > 0 {
		pr.p.Prefill = append(pr.p.Prefill, timing.Chunk{Tokens: tokens, Computed: from, Prefix: prefix})
	}
	if cap(pr.p.Decode) < rows {
		pr.p.Decode = make([]int, rows)
		pr.filled = 0
	}
	if pr.fillCtx != ctx {
		pr.filled, pr.fillCtx = 0, ctx
	}
	pr.p.Decode = pr.p.Decode[:rows]
	for i := pr.filled; i < rows; i++ {
		pr.p.Decode[i] = ctx
	}
	pr.filled = max(pr.filled, rows)
	if tokens == 0 && rows == 0 {
		return 0
	}
	v := pr.t.PassMs(&pr.p)
	if !(v > 0) || math.IsInf(v, 0) {
		if pr.err == nil {
			pr.err = inputErr(fmt.Errorf("timing: pass priced at %v ms (prefill %d tokens, %d decode rows); a timing must return a finite value > 0", v, tokens, rows))
		}
		return 1
	}
	return v
}

// priceTails prices a pass of tok prefill tokens split into m chunks, each the
// tail of a prompt of length isl (cached prefix prefix), plus rows decode rows of
// context ctx.
func (pr *pricer) priceTails(tok, m, isl, prefix, rows, ctx int) float64 {
	chunks := pr.tails[:0]
	for i := 0; i < m; i++ {
		n := tok / m
		if i < tok%m {
			n++
		}
		from := max(prefix, isl-n)
		chunks = append(chunks, timing.Chunk{Tokens: n, Computed: from, Prefix: prefix})
	}
	v := pr.price(0, 0, 0, rows, ctx) // fills the decode rows
	pr.p.Prefill = chunks
	v = pr.t.PassMs(&pr.p)
	pr.tails = chunks
	pr.p.Prefill = pr.chunk[:0]
	if !(v > 0) || math.IsInf(v, 0) {
		if pr.err == nil {
			pr.err = inputErr(fmt.Errorf("timing: pass priced at %v ms (%d prefill chunks, %d decode rows); a timing must return a finite value > 0", v, m, rows))
		}
		return 1
	}
	return v
}

// alonePrefillMs prices the prompt of a request alone in the engine, chunk by
// chunk as its calendar schedules it (calendar_*.go with no other request).
func alonePrefillMs(pr *pricer, e EngineSpec, isl, prefix int) float64 {
	ms := 0.0
	switch e.Backend {
	case BackendVLLM:
		step := isl
		if e.EnableChunkedPrefill {
			step = e.MaxNumBatchedTokens
		}
		if t := e.LongPrefillTokenThreshold; t > 0 {
			step = min(step, t)
		}
		ms, _ = pr.prefillMs(isl, prefix, prefix, max(step, 1), 0, 0)
	case BackendTRTLLM:
		// Charged from position 0, reuse applied after budgeting (T-R3, §4.4).
		for pos := 0; pos < isl; {
			n := isl - pos
			if e.EnableChunkedPrefill && n > e.MaxNumTokens {
				n = e.MaxNumTokens / e.BlockSize * e.BlockSize
			}
			from, to := max(pos, prefix), max(pos+n, prefix)
			if to > from {
				ms += pr.price(to-from, from, prefix, 0, 0)
			}
			pos = to
		}
	case BackendSGLang:
		extend, page := isl-prefix, e.BlockSize
		if !e.EnableChunkedPrefill || ceilDiv(extend, page)*page <= e.ChunkedPrefillSize {
			return pr.price(extend, prefix, prefix, 0, 0)
		}
		first := e.ChunkedPrefillSize / page * page // truncated new prompt (S-R4)
		ms = pr.price(first, prefix, prefix, 0, 0)
		rest, _ := pr.prefillMs(isl, prefix+first, prefix, e.ChunkedPrefillSize, 0, 0) // continuation, unrounded
		ms += rest
	}
	return ms
}

// remainderFirstMs prices the prompt in the fewest passes any chunking allows
// with the chunk boundaries as early as possible (the remainder first, then full
// chunks): under load a request's chunks can be any sizes up to the largest chunk,
// and for a timing that charges each chunk its context (roofline KV reads) this
// is the cheapest such partition; for linear timing it equals the lone chunking.
func remainderFirstMs(pr *pricer, e EngineSpec, isl, prefix int) float64 {
	maxChunk := isl - prefix
	switch e.Backend {
	case BackendVLLM:
		if e.EnableChunkedPrefill {
			maxChunk = e.MaxNumBatchedTokens
		}
		if t := e.LongPrefillTokenThreshold; t > 0 {
			maxChunk = min(maxChunk, t)
		}
	case BackendTRTLLM:
		if e.EnableChunkedPrefill {
			maxChunk = e.MaxNumTokens
		}
	case BackendSGLang:
		if e.EnableChunkedPrefill {
			maxChunk = e.ChunkedPrefillSize
		}
	}
	maxChunk = max(1, maxChunk)
	total := isl - prefix
	n := ceilDiv(total, maxChunk)
	first := total - (n-1)*maxChunk
	ms := pr.price(first, prefix, prefix, 0, 0)
	rest, _ := pr.prefillMs(isl, prefix+first, prefix, maxChunk, 0, 0)
	return ms + rest
}

// prefillMs prices a request's own prompt: chunks of at most chunk tokens from
// position from to isl (prefix cached), each pass also carrying rows decode rows of
// context ctx (rows = 0: the pure prefill).
func (pr *pricer) prefillMs(isl, from, prefix, chunk, rows, ctx int) (ms float64, passes int) {
	for pos := from; pos < isl; {
		n := min(chunk, isl-pos)
		ms += pr.price(n, pos, prefix, rows, ctx)
		pos += n
		passes++
	}
	return ms, passes
}

// scr holds the derived quantities of one screening evaluation (docs/queueing.md).
type scr struct {
	c          float64 // requests in service
	I, O       float64 // mean uncached prompt, mean output length
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
func Screening(w workload.Spec, e EngineSpec, t timing.Timing) (*Report, error) {
	b, err := checkInputs(w, e, t)
	if err != nil {
		return nil, err
	}
	pr := &pricer{t: t}
	pr.tails, pr.p.Decode = pr.tailsBuf[:0], pr.decBuf[:0]
	rep, err := screen(pr, w, e, b)
	if err != nil {
		return nil, err
	}
	if pr.err != nil {
		return nil, pr.err
	}
	return rep, finite(rep)
}

// prefillRoom is the prompt budget of a pass carrying rows decode rows, shared by
// all the prompts in it.
func prefillRoom(e EngineSpec, rows int) int {
	switch e.Backend {
	case BackendVLLM:
		return e.MaxNumBatchedTokens - rows
	case BackendTRTLLM:
		return e.MaxNumTokens - rows
	}
	r := e.MaxPrefillTokens
	if e.EnableChunkedPrefill {
		r = min(r, e.ChunkedPrefillSize)
	}
	if e.EnableMixedChunk {
		r -= rows
	}
	return r
}

// chunkCap returns the largest prompt chunk one request can get in a pass with
// rows decode rows (0 when none), and whether prompts are whole (chunking off).
func chunkCap(e EngineSpec, rows int) (int, bool) {
	switch e.Backend {
	case BackendVLLM:
		// V-R3 caps n at the threshold before the chunked-prefill check, so a
		// threshold chunks prompts even with chunked prefill off.
		if thr := e.LongPrefillTokenThreshold; thr > 0 {
			return min(thr, e.MaxNumBatchedTokens-rows), false
		}
		if !e.EnableChunkedPrefill {
			return e.MaxNumBatchedTokens, true
		}
		return e.MaxNumBatchedTokens - rows, false
	case BackendTRTLLM:
		if !e.EnableChunkedPrefill {
			return e.MaxNumTokens, true
		}
		return (e.MaxNumTokens - rows) / e.BlockSize * e.BlockSize, false
	}
	if !e.EnableChunkedPrefill {
		return math.MaxInt32, true
	}
	c := e.ChunkedPrefillSize
	if e.EnableMixedChunk {
		c -= rows
	}
	return c / e.BlockSize * e.BlockSize, false
}

func screen(pr *pricer, w workload.Spec, e EngineSpec, b shapeBounds) (*Report, error) {
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
	O := b.meanOSL
	osl := int(math.Round(O))
	ctxDec := isl + max(osl/2, 1) // mean context of a decode row
	S := effSeqCap(e, isl, prefix, osl)
	alternating := e.Backend == BackendSGLang && !e.EnableMixedChunk
	async := e.AsyncScheduling

	// lo: the shortest prompt prefilled alone, chunked exactly as the calendar
	// chunks a lone request (no decode rows, no waiting): every steady TTFT is at
	// least this (docs/queueing.md §4.6).
	lo := stage + math.Min(alonePrefillMs(pr, e, b.minISL, prefix), remainderFirstMs(pr, e, b.minISL, prefix))

	if rep, ok := lockedCohort(pr, e, w, b, isl, prefix, osl, lo); ok {
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

	// Waiting for a slot (closed loop, C > max running): Little's law on the cycle.
	wait := 0.0
	thr := 0.0
	if !open {
		C := float64(w.Concurrency)
		if C > c {
			thr = c / s.tcyc
			wait = math.Max(0, C/thr-s.tcyc-w.TurnaroundMs)
		} else {
			thr = C / (s.tcyc + w.TurnaroundMs)
		}
		rho = s.nmix * s.tmix / s.tcyc
	} else {
		thr = lambda
	}

	// ITL: two masses through the weighted-quantile rule (osl ≤ 1: no gaps).
	var itl, tpot Distribution
	tpotMean := 0.0
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
		tpot = PointMass(tpotMean)
	} else {
		itl, tpot = PointMass(0), PointMass(0)
	}
	// The residual of the pass in flight at arrival.
	var res Distribution
	switch {
	case open && S == 1:
		res = PointMass(0) // inside the M/D/1 wait
	case open || w.TurnaroundMs > 0:
		res = residual(s, async)
	case async && c > 1:
		// Pass-aligned arrival, seen one pass late (V-R10): one whole pass.
		res = twoAtoms(s.tgen, s.ngen, s.tmix, s.nmix)
	default:
		res = PointMass(0)
	}
	shift := stage + wait + s.own + s.ride
	if !open && s.nmix > float64(s.np)+O-1 {
		// Prefill-bound cycle: every pass carries prompt work, so a request waits for
		// the other prompts; by Little's law the cycle minus the own decode gaps.
		shift += math.Max(0, s.tcyc-(O-1)*tpotMean-(s.own+s.ride))
	}
	ttft := res.Shift(shift)
	if open && S > 1 {
		ttft = wq.Shift(shift + res.Mean())
	} else if open {
		ttft = wq.Shift(shift)
	}

	e2e := ttft.Shift((O - 1) * tpotMean)

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
			tpot = PointMass(tpotMean)
		}
		e2e = ttft.Shift((O - 1) * tpotMean)
		gens := 0.0
		if O > 1 {
			gens = (O - 1) * s.tgen
		}
		thr = float64(w.Concurrency) / (stretch + gens + w.TurnaroundMs) // one stretch + decode per cycle
	}
	hi, certain := bracketHi(pr, e, w, b, async, alternating)
	p99 := ttft.Quantile(0.99)
	if !certain {
		hi = math.Max(hi, p99)
	}
	lo = math.Min(lo, ttft.Min())
	rep := &Report{
		TTFTSteady: ttft, TTFTTransient: trans, ITL: itl, TPOT: tpot, E2E: e2e,
		TTFTSteadyP99Lo: lo, TTFTSteadyP99Hi: hi,
		ThroughputRPS: thr * 1000, OutputTokensPerS: thr * 1000 * O,
		Tier: TierScreening, Fidelity: w.Fidelity(),
		Diagnostics: Diagnostics{BracketCertain: certain, Rho: rho, TMixMs: s.tmix, TGenMs: s.tgen, NMix: s.nmix, NGen: s.ngen,
			OwnPrefillMs: s.own, RideMs: s.ride},
	}
	return rep, nil
}

// cycle derives the pass structure of one request cycle with c requests in
// service (docs/queueing.md §2).
func cycle(pr *pricer, e EngineSpec, c, I, O float64, isl, prefix, ctxDec int, alternating, pack bool) scr {
	ch0, whole0 := chunkCap(e, 0)
	np0 := 1
	if !whole0 {
		np0 = int(math.Ceil(I / float64(max(ch0, 1))))
	}
	// Decode rows of a mixed pass: the others decode in (O−1) of the P_cyc passes
	// of a cycle; start from P_cyc ≈ n_p + O − 1 and iterate (P_cyc depends on the
	// chunk the rows leave).
	pcyc := float64(np0) + O - 1
	var s scr
	for it, d := 0, -1; it < 4; it++ {
		nd := 0
		if O > 1 && !alternating {
			nd = int(math.Round((c - 1) * (O - 1) / pcyc))
		}
		if nd == d {
			break
		}
		d = nd
		s = cycleWith(pr, e, c, I, O, isl, prefix, ctxDec, alternating, pack, d)
		pcyc = s.nmix + s.ngen
	}
	return s
}

// cycleWith derives the cycle for d decode rows per mixed pass.
func cycleWith(pr *pricer, e EngineSpec, c, I, O float64, isl, prefix, ctxDec int, alternating, pack bool, d int) scr {
	s := scr{c: c, I: I, O: O}
	ci := int(math.Ceil(c))
	ch, whole := chunkCap(e, d)
	ch = max(ch, 1)
	if whole {
		ch = int(I)
	}
	s.pmix = min(ch, int(I))
	from := prefix
	if room := prefillRoom(e, d); pack && !whole && int(I) < room {
		// Closed loops return in cohorts (requests finishing in the same pass come
		// back together), so chunked prompts pack the pass's prompt room (a prompt
		// that does not fit continues in the next pass): fluid packing.
		s.pmix = int(math.Min(float64(room), c*I))
	} else if room := prefillRoom(e, d); pack && whole && int(I) < room {
		s.pmix = int(I) * max(1, min(int(c), room/int(I))) // whole prompts: ⌊room/I⌋ of them
	} else if int(I) > s.pmix {
		from = prefix + (int(I)-s.pmix)/2 // a chunk of a long prompt: mid-prompt context on average
	}
	s.dmix = d
	// The own-prefill term is the pure prefill of the request's own chunks (never
	// a mixed-pass price, QUEUEING.md §9); the fused engine's decode rows that
	// ride in those passes are a separate, explicit term.
	s.own, s.np = pr.prefillMs(isl, prefix, prefix, ch, 0, 0)
	withRows, _ := pr.prefillMs(isl, prefix, prefix, ch, d, ctxDec)
	s.ride = math.Max(0, withRows-s.own)
	s.tmix = pr.price(s.pmix, from, prefix, d, ctxDec)
	s.nmix = c * I / float64(s.pmix)
	pcyc := math.Max(float64(s.np)+O-1, s.nmix)
	s.ngen = pcyc - s.nmix
	s.dgen = max(1, int(math.Round(c*(O-1)/pcyc)))
	if alternating {
		s.dgen = max(1, ci-1)
	}
	s.tgen = pr.price(0, 0, 0, s.dgen, ctxDec)
	if O <= 1 {
		s.ngen, s.tgen = 0, s.tmix
	}
	s.tcyc = s.nmix*s.tmix + s.ngen*s.tgen
	return s
}

// residual is the renewal residual of the pass in flight at a random arrival: a
// pass of type i is hit with probability ∝ n_i·t_i and the residual is uniform on
// [0, t_i]; asynchronous scheduling adds the already-scheduled next pass.
func residual(s scr, async bool) Distribution {
	wg, wm := s.ngen*s.tgen, s.nmix*s.tmix
	atoms := make([]Atom, 0, 2*residualAtoms)
	// Merge the two midpoint grids in value order (no sort needed).
	i, j := 0, 0
	at := func(k int, t, w float64) Atom {
		return Atom{Value: (float64(k) + 0.5) / residualAtoms * t, Weight: w / residualAtoms}
	}
	for i < residualAtoms || j < residualAtoms {
		switch {
		case wg <= 0:
			i = residualAtoms
		case wm <= 0:
			j = residualAtoms
		}
		if i >= residualAtoms && j >= residualAtoms {
			break
		}
		if j >= residualAtoms || (i < residualAtoms && at(i, s.tgen, wg).Value <= at(j, s.tmix, wm).Value) {
			atoms = append(atoms, at(i, s.tgen, wg))
			i++
		} else {
			atoms = append(atoms, at(j, s.tmix, wm))
			j++
		}
	}
	d := fromAtomsOwned(atoms)
	if async {
		d = d.Shift((s.ngen*s.tgen + s.nmix*s.tmix) / math.Max(s.ngen+s.nmix, 1e-12))
	}
	return d
}

// md1Wait is the M/D/1 waiting time with load rho and service svc: no wait with
// probability 1−ρ, else an exponential tail with the Pollaczek–Khinchine mean
// ρ·svc/(2(1−ρ)) (docs/queueing.md §4), as midpoint atoms.
func md1Wait(rho, svc float64) Distribution {
	mean := rho * svc / (2 * (1 - rho))
	if rho <= 0 {
		return PointMass(0)
	}
	condMean := mean / rho
	atoms := make([]Atom, 0, 65)
	atoms = append(atoms, Atom{Value: 0, Weight: 1 - rho})
	const k = 64
	for j := 0; j < k; j++ {
		u := (float64(j) + 0.5) / k
		atoms = append(atoms, Atom{Value: -condMean * math.Log1p(-u), Weight: rho / k})
	}
	return fromAtomsOwned(atoms)
}

// twoAtoms returns the two-mass distribution (a with weight wa, b with weight wb).
func twoAtoms(a, wa, b, wb float64) Distribution {
	atoms := make([]Atom, 0, 2)
	if wa > 0 {
		atoms = append(atoms, Atom{Value: a, Weight: wa})
	}
	if wb > 0 {
		atoms = append(atoms, Atom{Value: b, Weight: wb})
	}
	if len(atoms) == 0 {
		return PointMass(a)
	}
	return fromAtomsOwned(atoms)
}

// staircase is the transient of the initial burst: request k (k = 0..C−1) waits
// for the prompts of the k requests before it at the burst's prefill rate, and
// for ⌊k/S⌋ whole cycles beyond the running cap S. Returned as two atoms with the
// staircase's mean and maximum.
func staircase(pr *pricer, e EngineSpec, w workload.Spec, s scr, first float64, isl, prefix int) Distribution {
	C := float64(w.Concurrency)
	S := float64(effSeqCap(e, isl, prefix, int(math.Round(s.O))))
	inWave := math.Min(C, S)
	if inWave <= 1 && C <= 1 {
		return PointMass(first)
	}
	// During the burst about half the admitted prompts are already decoding.
	d := 0
	if s.O > 1 && !(e.Backend == BackendSGLang && !e.EnableMixedChunk) { // alternating: prefill passes carry no rows
		d = int((inWave - 1) / 2)
	}
	ch, whole := chunkCap(e, d)
	if whole || ch < 1 {
		ch = int(s.I)
	}
	pb := min(ch, int(s.I)*int(inWave))
	if room := prefillRoom(e, d); whole && room > int(s.I) {
		pb = int(s.I) * max(1, min(int(inWave), room/int(s.I))) // whole prompts packed
	}
	from := prefix
	if int(s.I) > pb {
		from = prefix + (int(s.I)-pb)/2 // chunks of a long prompt: mid-prompt context on average
	}
	tb := pr.price(pb, from, prefix, d, isl)
	perPrompt := s.I / float64(pb) * tb // pass time per prompt at the burst rate
	meanStep := (inWave - 1) / 2 * perPrompt
	maxStep := (inWave - 1) * perPrompt
	// Waves beyond S: Σ_k ⌊k/S⌋ over k < C.
	q := math.Floor(C / S)
	r := C - q*S
	waves := (S*q*(q-1)/2 + r*q) / C
	mean := first + meanStep + waves*s.tcyc
	mx := first + maxStep + math.Max(0, math.Ceil(C/S)-1)*s.tcyc
	if mx <= mean {
		return PointMass(mean)
	}
	// Two atoms at first and mx with the staircase mean.
	wMax := (mean - first) / (mx - first)
	if !(wMax > 0) {
		return PointMass(first)
	}
	return twoAtoms(first, 1-wMax, mx, wMax)
}

// bracketHi is the structural upper bound on any steady TTFT of a closed loop with
// C ≤ the running cap (docs/queueing.md §3): the pass in flight at arrival (+1 when
// scheduling is asynchronous) and, at worst, the prompts of all C clients served
// one after another, the earliest unfinished prompt gaining at least b_req tokens
// per pass; every pass priced at its worst shape. certain is false where the bound
// does not hold (open loop, C above the cap, KV-capped admission, a budget the
// decode rows can exhaust); hi is then the same formula as an estimate.
func bracketHi(pr *pricer, e EngineSpec, w workload.Spec, b shapeBounds, async, alternating bool) (float64, bool) {
	C := max(w.Concurrency, 1)
	certain := w.Concurrency > 0 && C <= e.seqCap()
	rows := C - 1
	if alternating {
		rows = 0
	}
	iMax := b.maxISL - w.Prefix
	pos := iMax // prompt positions to cover per request
	if e.Backend == BackendTRTLLM {
		pos = b.maxISL // the budget is charged from position 0 (reuse after budgeting)
	}
	breq, whole := chunkCap(e, rows)
	pmax := e.budget() // prefill tokens of the worst pass
	switch {
	case whole:
		// A whole prompt is admitted once it fits beside the decode rows.
		fits := true
		switch e.Backend {
		case BackendVLLM:
			fits = iMax+rows <= e.MaxNumBatchedTokens
		case BackendTRTLLM:
			fits = b.maxISL+rows <= e.MaxNumTokens
		}
		certain = certain && fits
		breq = max(pos, 1)
		pmax = max(pmax, iMax)
	case breq < 1:
		certain = false
		breq = 1
	}
	if e.Backend == BackendVLLM && !e.EnableChunkedPrefill && min(iMax, e.LongPrefillTokenThreshold) > e.MaxNumBatchedTokens-rows {
		certain = false // the head prompt may not fit beside the decode rows (V-R3 break)
	}
	if e.Backend == BackendTRTLLM && e.KVCapacityTokens > 0 {
		certain = certain && C*ceilDiv(b.maxISL+b.maxOSL, e.BlockSize) <= e.KVCapacityTokens/e.BlockSize
	}
	// Each pass advances the earliest unfinished prompt by ≥ min(rest, b_req). Where
	// the budget left after the decode rows is packed greedily across prompts
	// (vLLM chunked without a per-request threshold, TRT-LLM chunked FCFS), each
	// pass also consumes ≥ b_req tokens of the remaining prompt work: fluid bound.
	passes := C * ceilDiv(pos, breq)
	fluid := !whole && ((e.Backend == BackendVLLM && e.LongPrefillTokenThreshold == 0) || e.Backend == BackendTRTLLM)
	if fluid {
		passes = min(passes, ceilDiv(C*pos, breq)+1)
	}
	extra := 1
	if async {
		extra++
	}
	tok := min(pmax, iMax*C)
	from := max(w.Prefix, b.maxISL-tok)
	if from+tok > b.maxISL {
		from = w.Prefix
	}
	ctx := b.maxISL + b.maxOSL
	tmax := math.Max(pr.price(tok, from, w.Prefix, rows, ctx), pr.price(0, 0, 0, C, ctx))
	// The same tokens split into up to C chunks, each ending at the deepest prompt
	// position (tails of different prompts attend to more context per token).
	if m := min(C, tok); m > 1 {
		tmax = math.Max(tmax, pr.priceTails(tok, m, b.maxISL, w.Prefix, rows, ctx))
	}
	return e.StageMs + float64(passes+extra)*tmax, certain
}

// effSeqCap is the number of requests that can run at once: the running cap;
// under TRT-LLM GUARANTEED_NO_EVICT with a KV capacity ⌊blocks / reservation⌋
// (T-R1); with chunked prefill off, a whole prompt (vLLM: its threshold-capped
// first chunk) must fit beside the decode rows (V-R3, T-R3 break), so at most
// B − n decoders plus the newcomer run.
func effSeqCap(e EngineSpec, isl, prefix, osl int) int {
	S := e.seqCap()
	if e.Backend == BackendTRTLLM && e.KVCapacityTokens > 0 {
		S = min(S, max(1, (e.KVCapacityTokens/e.BlockSize)/ceilDiv(isl+osl, e.BlockSize)))
	}
	switch {
	case e.Backend == BackendVLLM && !e.EnableChunkedPrefill:
		first := isl - prefix
		if t := e.LongPrefillTokenThreshold; t > 0 {
			first = min(first, t)
		}
		S = min(S, max(1, e.MaxNumBatchedTokens-first+1))
	case e.Backend == BackendTRTLLM && !e.EnableChunkedPrefill:
		S = min(S, max(1, e.MaxNumTokens-isl+1)) // charged from position 0
	}
	return S
}

// lockedCohort is the closed form of a fully locked closed loop: with a fixed shape
// (W0) and C ≤ the running cap, if the burst's C prompts all fit one pass they are
// prefilled together, decode together, finish in the same pass and return
// together (the turnaround is the same for all) — forever. The cycle is one pass of
// C·(isl − prefix) prefill tokens and osl − 1 decode-only passes of C rows; every
// TTFT is that prefill pass and every gap that decode pass.
func lockedCohort(pr *pricer, e EngineSpec, w workload.Spec, b shapeBounds, isl, prefix, osl int, lo float64) (*Report, bool) {
	C := w.Concurrency
	if C <= 0 || len(w.ISLQuantiles) > 0 || len(w.OSLQuantiles) > 0 || C > effSeqCap(e, isl, prefix, osl) {
		return nil, false
	}
	I := isl - prefix
	switch e.Backend {
	case BackendVLLM:
		if C*I > e.MaxNumBatchedTokens || (e.LongPrefillTokenThreshold > 0 && I > e.LongPrefillTokenThreshold) {
			return nil, false
		}
	case BackendTRTLLM:
		if C*isl > e.MaxNumTokens {
			return nil, false
		}
	case BackendSGLang:
		pe := ceilDiv(I, e.BlockSize) * e.BlockSize
		if (e.EnableChunkedPrefill && C*pe > e.ChunkedPrefillSize) || (C > 1 && C*pe >= e.MaxPrefillTokens) {
			return nil, false
		}
	}
	chunks := make([]timing.Chunk, C)
	for i := range chunks {
		chunks[i] = timing.Chunk{Tokens: I, Computed: prefix, Prefix: prefix}
	}
	pr.p.Prefill, pr.p.Decode = chunks, pr.p.Decode[:0]
	tPre := pr.t.PassMs(&pr.p)
	pr.p.Prefill = pr.chunk[:0]
	if !(tPre > 0) || math.IsInf(tPre, 0) {
		return nil, false
	}
	itl, tGen := PointMass(0), 0.0
	if osl > 1 {
		tGen = pr.price(0, 0, 0, C, isl+osl/2)
		itl = PointMass(tGen)
	}
	ttft := PointMass(e.StageMs + tPre)
	cyc := tPre + float64(osl-1)*tGen + w.TurnaroundMs
	x := float64(C) / cyc
	hi, certain := bracketHi(pr, e, w, b, e.AsyncScheduling, e.Backend == BackendSGLang && !e.EnableMixedChunk)
	hi = math.Max(hi, ttft.Max())
	return &Report{
		TTFTSteady: ttft, TTFTTransient: ttft, ITL: itl, TPOT: itl, E2E: ttft.Shift(float64(osl-1) * tGen),
		TTFTSteadyP99Lo: math.Min(lo, ttft.Min()), TTFTSteadyP99Hi: hi,
		ThroughputRPS: x * 1000, OutputTokensPerS: x * 1000 * float64(osl),
		Tier: TierScreening, Fidelity: w.Fidelity(),
		Diagnostics: Diagnostics{BracketCertain: certain, TMixMs: tPre, TGenMs: tGen, NMix: 1, NGen: float64(osl - 1),
			OwnPrefillMs: tPre},
	}, true
}
