// The screening pass cycle: chunk and room per pass, running cap, cycle counts.

package queueing

import (
	"math"

	"github.com/aicdb/aicdb/engine"
)

// prefillRoom is the prompt budget of a pass carrying rows decode rows, shared by
// all the prompts in it.
func prefillRoom(e engine.Spec, rows int) int {
	if e.Traits().SharedBudget { // V-R1, T-R3
		return e.TokenBudget() - rowTokens(e, rows)
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
func chunkCap(e engine.Spec, rows int) (int, bool) {
	return rulesFor(e.Backend).chunkCap(e, rows)
}

func (vllmRules) chunkCap(e engine.Spec, rows int) (int, bool) {
	// V-R3 caps n at the threshold before the chunked-prefill check, so a
	// threshold chunks prompts even with chunked prefill off.
	// The decode rows go first (V-R2): one token each, 1 + drafts under MTP (V-S1).
	if thr := e.LongPrefillTokenThreshold; thr > 0 {
		return min(thr, e.MaxNumBatchedTokens-rowTokens(e, rows)), false
	}
	if !e.EnableChunkedPrefill {
		return e.MaxNumBatchedTokens, true
	}
	return e.MaxNumBatchedTokens - rowTokens(e, rows), false
}

func (trtRules) chunkCap(e engine.Spec, rows int) (int, bool) {
	if !e.EnableChunkedPrefill {
		return e.MaxNumTokens, true
	}
	return (e.MaxNumTokens - rowTokens(e, rows)) / e.BlockSize * e.BlockSize, false
}

// rowTokens is the budget rows decode rows take at most: one token each, 1 +
// drafts under MTP (TensorRT-LLM T-R3; vLLM V-S1, where long_prefill_token_threshold
// caps a decode step too).
func rowTokens(e engine.Spec, rows int) int {
	per := 1 + e.DraftTokens
	if thr := e.LongPrefillTokenThreshold; e.Backend == engine.VLLM && thr > 0 {
		per = min(per, thr)
	}
	return rows * per
}

func (sglangRules) chunkCap(e engine.Spec, rows int) (int, bool) {
	if !e.EnableChunkedPrefill {
		return math.MaxInt32, true
	}
	c := e.ChunkedPrefillSize
	if e.EnableMixedChunk {
		c -= rows
	}
	return c / e.BlockSize * e.BlockSize, false
}

// chunkCap of an unregistered backend: SGLang's, as the former default branch.
func (noRules) chunkCap(e engine.Spec, rows int) (int, bool) { return sglangRules{}.chunkCap(e, rows) }

// cycle derives the pass structure of one request cycle with c requests in
// service (docs/queueing.md §2).
func cycle(pr *pricer, e engine.Spec, c, I, O float64, isl, prefix, ctxDec int, alternating, pack bool) scr {
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
func cycleWith(pr *pricer, e engine.Spec, c, I, O float64, isl, prefix, ctxDec int, alternating, pack bool, d int) scr {
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

// effSeqCap is the number of requests that can run at once: the running cap;
// under TRT-LLM GUARANTEED_NO_EVICT with a KV capacity ⌊blocks / reservation⌋
// (T-R1); with chunked prefill off, a whole prompt (vLLM: its threshold-capped
// first chunk) must fit beside the decode rows (V-R3, T-R3 break), so at most
// B − n decoders plus the newcomer run.
func effSeqCap(e engine.Spec, isl, prefix, osl int) int {
	S := e.SeatCap()
	tr := e.Traits()
	if tr.AdmissionReservesKV && e.KVCapacityTokens > 0 {
		S = min(S, max(1, (e.KVCapacityTokens/e.BlockSize)/ceilDiv(isl+osl, e.BlockSize)))
	}
	if tr.SharedBudget && !e.EnableChunkedPrefill {
		first := isl - prefix
		if tr.BudgetsCachedPrefix {
			first = isl // charged from position 0
		} else if t := e.LongPrefillTokenThreshold; tr.ThresholdChunks && t > 0 {
			first = min(first, t)
		}
		S = min(S, max(1, (e.TokenBudget()-first)/(1+e.DraftTokens)+1))
	}
	return S
}
