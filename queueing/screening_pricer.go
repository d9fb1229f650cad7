// Pass pricing for the screening tier: the few passes the closed form needs.

package queueing

import (
	"fmt"
	"math"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
)

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

// reset readies pr for a new point priced by t, keeping its scratch arrays.
func (pr *pricer) reset(t timing.Timing) {
	pr.t, pr.err = t, nil
	pr.filled, pr.fillCtx = 0, 0
	pr.p = timing.Pass{Decode: pr.decBuf[:0]}
	pr.tails = pr.tailsBuf[:0]
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
	v, err := pr.t.PassMs(&pr.p)
	return pr.check(v, err, tokens, len(pr.p.Prefill), rows)
}

// check returns a priced pass's duration, or records the evaluation's first
// pricing error (a timing's own error, or a value not finite and > 0) naming the
// pass and returns 1: the caller's result is discarded once pr.err is set.
func (pr *pricer) check(v float64, err error, tokens, chunks, rows int) float64 {
	if err == nil && v > 0 && !math.IsInf(v, 0) {
		return v
	}
	if pr.err == nil {
		if err != nil {
			pr.err = fmt.Errorf("screening: pricing the pass of %d prefill tokens in %d chunks and %d decode rows: %w", tokens, chunks, rows, err)
		} else {
			pr.err = inputErr(fmt.Errorf("timing: pass priced at %v ms (prefill %d tokens in %d chunks, %d decode rows); a timing must return a finite value > 0", v, tokens, chunks, rows))
		}
	}
	return 1
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
	pr.price(0, 0, 0, rows, ctx) // fills the decode rows
	pr.p.Prefill = chunks
	v, err := pr.t.PassMs(&pr.p)
	pr.tails = chunks
	pr.p.Prefill = pr.chunk[:0]
	return pr.check(v, err, tok, m, rows)
}

// alonePrefillMs prices the prompt of a request alone in the engine, chunk by
// chunk as its calendar schedules it (calendar_*.go with no other request).
func alonePrefillMs(pr *pricer, e engine.Spec, isl, prefix int) float64 {
	return rulesFor(e.Backend).alonePrefillMs(pr, e, isl, prefix)
}

func (vllmRules) alonePrefillMs(pr *pricer, e engine.Spec, isl, prefix int) float64 {
	step := isl
	if e.EnableChunkedPrefill {
		step = e.MaxNumBatchedTokens
	}
	if t := e.LongPrefillTokenThreshold; t > 0 {
		step = min(step, t)
	}
	ms, _ := pr.prefillMs(isl, prefix, prefix, max(step, 1), 0, 0)
	return ms
}

// alonePrefillMs (TRT-LLM): chunked as the calendar chunks a lone request
// (trtMicroBatch): the budget is charged from position 0 and reuse applied after
// budgeting (T-R3, §4.4); a cut first chunk moves past the reused prefix and keeps
// its size, its end floored to a block unless it reaches the prompt's end (T-R5).
// Charging it from position 0 instead (a first chunk shortened by the prefix)
// priced a split the evaluator never runs, above its minimum for a roofline
// timing (the property test's isl 1009, prefix 1, budget 169).
func (trtRules) alonePrefillMs(pr *pricer, e engine.Spec, isl, prefix int) float64 {
	ms := 0.0
	unit := max(e.BlockSize, 1)
	for pos := 0; pos < isl; {
		rest := isl - pos
		n := rest
		if e.EnableChunkedPrefill && n > e.MaxNumTokens {
			n = e.MaxNumTokens / unit * unit // ≥ one block: Validate refuses a smaller budget
		}
		to := max(pos+n, prefix)
		if pos == 0 && prefix > 0 && n < rest {
			to = trtFirstChunkEnd(prefix, n, isl, unit)
		}
		if from := max(pos, prefix); to > from {
			ms += pr.price(to-from, from, prefix, 0, 0)
		}
		pos = to
	}
	return ms
}

func (sglangRules) alonePrefillMs(pr *pricer, e engine.Spec, isl, prefix int) float64 {
	extend, page := isl-prefix, e.BlockSize
	if !e.EnableChunkedPrefill || ceilDiv(extend, page)*page <= e.ChunkedPrefillSize {
		return pr.price(extend, prefix, prefix, 0, 0)
	}
	first := e.ChunkedPrefillSize / page * page // truncated new prompt (S-R4)
	ms := pr.price(first, prefix, prefix, 0, 0)
	rest, _ := pr.prefillMs(isl, prefix+first, prefix, e.ChunkedPrefillSize, 0, 0) // continuation, unrounded
	return ms + rest
}

func (noRules) alonePrefillMs(*pricer, engine.Spec, int, int) float64 { return 0 }

// remainderFirstMs prices the prompt in the fewest passes any chunking allows
// with the chunk boundaries as early as possible (the remainder first, then full
// chunks): under load a request's chunks can be any sizes up to the largest chunk,
// and for a timing that charges each chunk its context (roofline KV reads) this
// is the cheapest such partition; for linear timing it equals the lone chunking.
func remainderFirstMs(pr *pricer, e engine.Spec, isl, prefix int) float64 {
	maxChunk := isl - prefix
	if e.EnableChunkedPrefill {
		maxChunk = e.TokenBudget()
	}
	if t := e.LongPrefillTokenThreshold; e.Traits().ThresholdChunks && t > 0 {
		maxChunk = min(maxChunk, t) // V-R3: the threshold caps a chunk, chunked or not
	}
	maxChunk = max(1, maxChunk)
	total := isl - prefix
	n := ceilDiv(total, maxChunk)
	first := total - (n-1)*maxChunk
	ms := pr.price(first, prefix, prefix, 0, 0)
	rest, _ := pr.prefillMs(isl, prefix+first, prefix, maxChunk, 0, 0)
	return math.Min(ms+rest, equalSplitMs(pr, isl, prefix, n))
}

// equalSplitMs prices the prompt in n passes of near-equal chunks (the larger ones
// first). Under load a request's chunks are whatever budget the others leave, and
// for a timing whose pass cost is a maximum of a compute and a memory term (a
// roofline), a split that keeps every chunk compute-bound is cheaper than one with a
// tiny memory-bound remainder: the property test found lone and remainder-first
// both above the evaluator's minimum for such a timing (isl 65, chunk 64).
func equalSplitMs(pr *pricer, isl, prefix, n int) float64 {
	total := isl - prefix
	ms := 0.0
	for i, pos := 0, prefix; i < n; i++ {
		c := total / n
		if i < total%n {
			c++
		}
		ms += pr.price(c, pos, prefix, 0, 0)
		pos += c
	}
	return ms
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
