// Closed forms of the screening tier: residual, M/D/1 wait, two-mass, staircase,
// locked cohort.

package queueing

import (
	"math"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

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
	switch {
	case !(wb > 0) && !(wa > 0):
		return PointMass(a)
	case !(wb > 0):
		return weighted1(a, wa)
	case !(wa > 0):
		return weighted1(b, wb)
	case a == b:
		return weighted1(a, wa+wb)
	}
	if b < a {
		a, wa, b, wb = b, wb, a, wa
	}
	// One allocation for atoms and cumulative weights, already sorted.
	s := new(struct {
		a [2]Atom
		c [2]float64
	})
	s.a[0], s.a[1] = Atom{Value: a, Weight: wa}, Atom{Value: b, Weight: wb}
	s.c[0], s.c[1] = wa, wa+wb
	return Distribution{atoms: s.a[:], cum: s.c[:]}
}

// weighted1 is a single atom of weight w > 0.
func weighted1(v, w float64) Distribution {
	s := new(struct {
		a [1]Atom
		c [1]float64
	})
	s.a[0], s.c[0] = Atom{Value: v, Weight: w}, w
	return Distribution{atoms: s.a[:], cum: s.c[:]}
}

// staircase is the transient of the initial burst: request k (k = 0..C−1) waits
// for the prompts of the k requests before it at the burst's prefill rate, and
// for ⌊k/S⌋ whole cycles beyond the running cap S. Returned as two atoms with the
// staircase's mean and maximum.
func staircase(pr *pricer, e engine.Spec, w workload.Spec, s scr, first float64, isl, prefix int) Distribution {
	C := float64(w.Concurrency)
	S := float64(effSeqCap(e, isl, prefix, int(math.Round(s.tok))))
	inWave := math.Min(C, S)
	if inWave <= 1 && C <= 1 {
		return PointMass(first)
	}
	// During the burst about half the admitted prompts are already decoding.
	d := 0
	if s.O > 1 && !e.Traits().Alternating { // alternating: prefill passes carry no rows
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

// lockedCohort is the closed form of a fully locked closed loop: with a fixed shape
// (W0) and C ≤ the running cap, if the burst's C prompts all fit one pass they are
// prefilled together, decode together, finish in the same pass and return
// together (the turnaround is the same for all) — forever. The cycle is one pass of
// C·(isl − prefix) prefill tokens and osl − 1 decode-only passes of C rows; every
// TTFT is that prefill pass and every gap that decode pass. steps is a request's
// decode steps: osl − 1, fewer under MTP (DecodeSteps).
func lockedCohort(pr *pricer, e engine.Spec, w workload.Spec, b shapeBounds, isl, prefix, osl, steps int, lo float64) (*Report, bool) {
	C := w.Concurrency
	if C <= 0 || len(w.ISLQuantiles) > 0 || len(w.OSLQuantiles) > 0 || C > effSeqCap(e, isl, prefix, osl) {
		return nil, false
	}
	I := isl - prefix
	if tr := e.Traits(); tr.SharedBudget {
		// Every prompt whole in one pass (V-R1/T-R3; TRT-LLM charges from position 0).
		cost := I
		if tr.BudgetsCachedPrefix {
			cost = isl
		}
		if C*cost > e.TokenBudget() || (tr.ThresholdChunks && e.LongPrefillTokenThreshold > 0 && I > e.LongPrefillTokenThreshold) {
			return nil, false
		}
	} else { // SGLang: whole pages within chunked_prefill_size and max_prefill_tokens (S-R4)
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
	tPre, err := pr.t.PassMs(&pr.p)
	pr.p.Prefill = pr.chunk[:0]
	if err != nil {
		pr.check(tPre, err, C*I, C, 0)
		return nil, false
	}
	if !(tPre > 0) || math.IsInf(tPre, 0) {
		return nil, false
	}
	itl, tpot, tGen := PointMass(0), PointMass(0), 0.0
	if osl > 1 {
		tGen = pr.price(0, 0, 0, C, isl+osl/2)
		itl, tpot = PointMass(tGen), PointMass(tGen)
		if steps < osl-1 { // MTP: a step's accepted drafts arrive with its token
			itl = withDraftGaps(itl, float64(steps), float64(osl-1-steps))
			tpot = PointMass(float64(steps) * tGen / float64(osl-1))
		}
	}
	// The cohort's next prompts wait out its discarded pass (SGLang overlap).
	wait := discardedPassWait(pr, e, w, C, isl+osl)
	ttft := PointMass(e.StageMs + wait + tPre)
	// The burst's cohort has no predecessor: no discarded pass to wait out.
	trans := PointMass(e.StageMs + tPre)
	cyc := wait + tPre + float64(steps)*tGen + w.TurnaroundMs
	x := float64(C) / cyc
	hi, certain := bracketHi(pr, e, w, b, e.AsyncScheduling, e.Traits().Alternating)
	hi = math.Max(hi, ttft.Max())
	return &Report{
		TTFTSteady: ttft, TTFTTransient: trans, ITL: itl, TPOT: tpot, E2E: ttft.Shift(float64(steps) * tGen),
		TTFTSteadyP99Lo: math.Min(lo, ttft.Min()), TTFTSteadyP99Hi: hi,
		ThroughputRPS: x * 1000, OutputTokensPerS: x * 1000 * float64(osl),
		Tier: TierScreening, Fidelity: w.Fidelity(),
		Diagnostics: Diagnostics{BracketCertain: certain, TMixMs: tPre, TGenMs: tGen, NMix: 1, NGen: float64(steps),
			OwnPrefillMs: tPre},
	}, true
}

// outputPasses is a request's mean number of output passes — its first token's and
// one per decode step — for mean output length tok: tok without MTP; with drafts
// 1 + DecodeSteps of each output length (averaged over the W2 strata).
func outputPasses(e engine.Spec, w workload.Spec, tok float64) float64 {
	if e.DraftTokens == 0 {
		return tok
	}
	if len(w.OSLQuantiles) == 0 {
		return float64(1 + DecodeSteps(e.DraftAccepted, 0, w.OSL-1))
	}
	sum := 0
	for _, o := range w.OSLQuantiles {
		sum += DecodeSteps(e.DraftAccepted, 0, o-1)
	}
	return 1 + float64(sum)/float64(len(w.OSLQuantiles))
}

// DecodeSteps is the number of MTP decode steps after step m that schedule n
// more tokens when the i-th step emits engine.StepTokens(accepted, i), the last
// one capped (the calendars' rule): the smallest j with
// j + ⌊(m + j)·a⌋ − ⌊m·a⌋ ≥ n (0 when n ≤ 0).
func DecodeSteps(accepted float64, m, n int) int {
	if n <= 0 {
		return 0
	}
	base := int(math.Floor(float64(m) * accepted))
	emitted := func(j int) int { return j + int(math.Floor(float64(m+j)*accepted)) - base }
	lo, hi := 1, n // emitted(n) ≥ n
	for lo < hi {
		mid := (lo + hi) / 2
		if emitted(mid) >= n {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// withDraftGaps adds to d, the ITL of a request's gaps decode passes, the zeros
// accepted drafts it emits besides them (MTP): each arrives with its step's token,
// an ITL gap of 0. d itself when zeros ≤ 0.
func withDraftGaps(d Distribution, gaps, zeros float64) Distribution {
	if !(zeros > 0) || !(gaps > 0) {
		return d
	}
	return fromAtomsOwned(append(d.Atoms(), Atom{Value: 0, Weight: d.TotalWeight() * zeros / gaps}))
}

// discardedPassWait is what a closed loop's returning requests wait at the
// scheduler under the SGLang overlap scheduler (§3.2): the c requests that
// finished together run once more (c decode rows at context ctx = isl + osl,
// their tokens discarded), and their successors, back after the client delay
// and the stages, wait out the rest of that pass. 0 on other engines.
func discardedPassWait(pr *pricer, e engine.Spec, w workload.Spec, c, ctx int) float64 {
	if !e.AsyncScheduling || !e.Traits().FinishedRunsAgain {
		return 0
	}
	return math.Max(0, pr.price(0, 0, 0, c, ctx)-w.TurnaroundMs-e.StageMs)
}
