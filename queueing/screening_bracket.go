// The structural upper bound of the screening bracket.

package queueing

import (
	"math"

	"github.com/aicdb/aicdb/queueing/workload"
)

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
