// The structural upper bound of the screening bracket.

package queueing

import (
	"math"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/workload"
)

// bracketHi is the structural upper bound on any steady TTFT of a closed loop with
// C ≤ the running cap (docs/queueing.md §4 item 7), for a timing non-decreasing in
// tokens, rows and contexts. certain is false where the bound does not hold (open
// loop, C above the cap, KV-capped admission, a budget the decode rows can
// exhaust); hi is then the same formula as an estimate.
//
// The argument. Let R arrive at the scheduler at time a. At most C − 1 other
// requests exist (one per client), so at most C − 1 are ahead of R in FCFS order,
// each with ≤ pos prompt tokens left; every pass carries ≤ C − 1 decode rows
// besides R.
//
//   - Passes before the first one that can carry R: if R arrives strictly inside a
//     pass (turnaround or stages > 0), that pass in flight (one pass). With
//     turnaround = stages = 0 R arrives exactly at the end of the pass that finished
//     its predecessor; synchronous scheduling schedules the next pass at that
//     instant with R waiting (sim.run absorbs arrivals ≤ now): no pass.
//     Asynchronous scheduling (V-R10) already scheduled the next pass without R:
//     one more pass. It cannot be folded into the counts below: it was scheduled
//     before requests that arrived ahead of R but after its scheduling instant, so
//     it may consume less than those counts assume (TestBracketHiGrid: vLLM async,
//     C 5, isl 3000, B 8192, osl 1 takes three passes where the fluid count gives
//     two). At C = 1 nothing else exists: the engine is idle when R arrives
//     (async: the pre-scheduled pass is empty, V-R12, and not run): no pass —
//     except under the SGLang overlap scheduler, whose pre-scheduled pass still
//     carries R's predecessor and runs (its token discarded, §3.2), and under vLLM
//     MTP, whose pre-scheduled step of the predecessor runs when the drafts of the
//     step before it ended the predecessor (V-S3): one pass.
//   - Passes from there until R's first token: each advances the earliest
//     unfinished prompt (of those ahead of R and R) by ≥ min(rest, b_req), b_req =
//     chunk(C − 1): ≤ C·⌈pos/b_req⌉. Where the budget left after the decode rows is
//     packed greedily across prompts (vLLM chunked without a per-request threshold,
//     TRT-LLM chunked FCFS) each pass also consumes a fixed share of the ≤ C·pos
//     tokens of R and those ahead, or finishes R (the fluid branch below, per
//     backend). Where
//     whole prompts are admitted FCFS while they fit (vLLM chunked prefill off
//     without a threshold, V-R3; TRT-LLM chunking off, T-R3) each pass admits ≥ k =
//     ⌊(B − (C − 1))/cost⌋ waiting prompts (cost = the largest prompt's budget
//     charge): ≤ ⌈C/k⌉ passes. Every request ahead of R arrived before R, so every
//     pass from the first that can carry R sees them all.
//   - Every pass is priced at its worst shape (the max below).
func bracketHi(pr *pricer, e engine.Spec, w workload.Spec, b shapeBounds, async, alternating bool) (float64, bool) {
	C := max(w.Concurrency, 1)
	certain := w.Concurrency > 0 && C <= e.SeatCap()
	rows := C - 1
	if alternating {
		rows = 0
	}
	iMax := b.maxISL - w.Prefix
	tr := e.Traits()
	pos := iMax // prompt positions to cover per request
	if tr.BudgetsCachedPrefix {
		pos = b.maxISL // the budget is charged from position 0 (reuse after budgeting)
	}
	breq, whole := chunkCap(e, rows)
	rowTok := rowTokens(e, rows) // the budget the decode rows take (T-R3 drafts)
	pmax := e.TokenBudget()      // prefill tokens of the worst pass
	switch {
	case whole:
		// A whole prompt is admitted once it fits beside the decode rows.
		fits := true
		if tr.SharedBudget {
			fits = pos+rowTok <= e.TokenBudget()
		}
		certain = certain && fits
		breq = max(pos, 1)
		pmax = max(pmax, iMax)
	case breq < 1:
		certain = false
		breq = 1
	}
	if e.Backend == engine.VLLM && !e.EnableChunkedPrefill && min(iMax, e.LongPrefillTokenThreshold) > e.MaxNumBatchedTokens-rowTok {
		certain = false // the head prompt may not fit beside the decode rows (V-R3 break)
	}
	if tr.AdmissionReservesKV && e.KVCapacityTokens > 0 {
		certain = certain && C*ceilDiv(b.maxISL+b.maxOSL, e.BlockSize) <= e.KVCapacityTokens/e.BlockSize
	}
	// Each pass advances the earliest unfinished prompt by ≥ min(rest, b_req). Where
	// the budget left after the decode rows is packed greedily across prompts
	// (vLLM chunked without a per-request threshold, TRT-LLM chunked FCFS), each
	// pass also consumes a fixed share of the remaining prompt work: fluid bound.
	passes := C * ceilDiv(pos, breq)
	// packed: the budget goes to the prompts FCFS with no per-request chunk cap
	// (vLLM without a threshold, TRT-LLM).
	packed := tr.SharedBudget && (!tr.ThresholdChunks || e.LongPrefillTokenThreshold == 0)
	if fluid := !whole && packed; fluid {
		// TRT-LLM sizes the contexts FCFS after the generation rows, a cut chunk
		// rounded down to a block (T-R3): a pass that can carry R either serves R
		// and every prompt ahead whole (R done) or leaves < one block of the budget,
		// so it consumes ≥ B − (C − 1) − (block − 1) of their ≤ C·pos tokens (not
		// b_req: a whole rest that is no block multiple can precede the cut).
		full := max(e.TokenBudget()-rowTok-(e.BlockSize-1), 1)
		f := C*pos/full + 1
		if !tr.BlockAlignedChunks {
			// V-R2/V-R3 hand every prompt min(rest, budget left) in FCFS order, so a
			// pass that can carry R consumes ≥ min(work left, b_req) of the ≤ C·pos
			// tokens of R and those ahead: ⌈C·pos/b_req⌉ exactly, no rounding pass.
			f = ceilDiv(C*pos, breq)
		}
		passes = min(passes, f)
	}
	if tr.ThresholdChunks && e.EnableChunkedPrefill && e.LongPrefillTokenThreshold > 0 {
		// Threshold-capped chunks (V-R2/V-R3, chunked on). A pass that can carry R
		// either spends its whole prompt budget (≥ B − (C − 1)) on R and the prompts
		// ahead of it (they precede every later request in running order), at most
		// ⌊C·pos/(B − C + 1)⌋ such passes; or it leaves budget over, so no prompt of
		// theirs was cut by the budget and R got min(rest, threshold): at most
		// ⌈pos/threshold⌉ such passes.
		if full := e.MaxNumBatchedTokens - rowTok; full >= 1 {
			passes = min(passes, C*pos/full+ceilDiv(pos, e.LongPrefillTokenThreshold))
		}
	}
	if whole && C > 1 && packed {
		// FCFS whole-prompt packing (V-R3 / T-R3): k prompts per pass at least.
		if k := (e.TokenBudget() - rowTok) / max(pos, 1); k > 1 {
			passes = min(passes, ceilDiv(C, k))
		}
	}
	// The pass in flight at arrival (none when a closed-loop request reaches the
	// scheduler exactly at a pass end: zero turnaround and stages) and the async
	// pre-scheduled pass; neither at C = 1 in a closed loop (the engine is idle).
	extra := 1
	if w.Concurrency > 0 && w.TurnaroundMs == 0 && e.StageMs == 0 {
		extra = 0
	}
	if async {
		extra++
	}
	if w.Concurrency == 1 {
		extra = 0
		if async && (tr.FinishedRunsAgain || e.Backend == engine.VLLM && e.DraftTokens > 0) {
			extra = 1 // the predecessor's discarded pass (§3.2; vLLM MTP: a step its drafts made moot, V-S3)
		}
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
	// Without an extra pass (C = 1) the bound can equal lo (the same prices
	// summed another way) and fall below it by rounding: a relative margin of 1e-9
	// keeps lo ≤ hi.
	return (e.StageMs + float64(passes+extra)*tmax) * (1 + 1e-9), certain
}
