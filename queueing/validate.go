package queueing

import (
	"fmt"
	"math"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// Upper limits that keep one evaluation bounded in memory and time.
const (
	maxTokens   = 1 << 24
	maxOpenLoop = 1 << 21
)

// MaxConcurrency is the most closed-loop clients one evaluation takes, for a
// front end to check the flag before it prints anything else.
const MaxConcurrency = 1 << 16

// shapeBounds are the extreme request shapes of a workload.
type shapeBounds struct {
	minISL, maxISL, maxOSL int
	meanOSL                float64
}

// checkInputs validates w and e for the calendars and returns the shape extremes.
// Every error is one line naming the input and how to fix it.
func checkInputs(w workload.Spec, e engine.Spec, t timing.Timing) (shapeBounds, error) {
	b, err := checkInputsRaw(w, e, t)
	return b, inputErr(err)
}

func checkInputsRaw(w workload.Spec, e engine.Spec, t timing.Timing) (shapeBounds, error) {
	var b shapeBounds
	if t == nil {
		return b, fmt.Errorf("timing: none given; pass a timing model (e.g. --timing linear)")
	}
	if v, ok := t.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return b, err
		}
	}
	if err := e.Validate(); err != nil {
		return b, err
	}
	if w.ISL <= 0 || w.ISL > maxTokens {
		return b, fmt.Errorf("workload isl = %d: must be in 1..%d tokens", w.ISL, maxTokens)
	}
	if w.OSL <= 0 || w.OSL > maxTokens {
		return b, fmt.Errorf("workload osl = %d: must be in 1..%d tokens", w.OSL, maxTokens)
	}
	if w.Prefix < 0 {
		return b, fmt.Errorf("workload prefix = %d: must be ≥ 0", w.Prefix)
	}
	closed, open := w.Concurrency != 0, w.RateRPS != 0
	switch {
	case closed && open:
		return b, fmt.Errorf("workload: both concurrency (%d) and rate (%v) given; set exactly one", w.Concurrency, w.RateRPS)
	case !closed && !open:
		return b, fmt.Errorf("workload: neither concurrency nor rate given; set exactly one (> 0)")
	case closed && (w.Concurrency < 0 || w.Concurrency > MaxConcurrency):
		return b, fmt.Errorf("workload concurrency = %d: must be in 1..%d", w.Concurrency, MaxConcurrency)
	case open && (!(w.RateRPS > 0) || math.IsInf(w.RateRPS, 0)):
		return b, fmt.Errorf("workload rate = %v: must be a finite number > 0 (requests per second)", w.RateRPS)
	}
	if math.IsNaN(w.TurnaroundMs) || math.IsInf(w.TurnaroundMs, 0) || w.TurnaroundMs < 0 {
		return b, fmt.Errorf("workload turnaround_ms = %v: must be a finite number ≥ 0", w.TurnaroundMs)
	}
	if w.NumRequests < 0 || w.NumRequests > maxOpenLoop {
		return b, fmt.Errorf("workload num_requests = %d: must be in 0..%d (0 = default)", w.NumRequests, maxOpenLoop)
	}
	b = shapeBounds{minISL: w.ISL, maxISL: w.ISL, maxOSL: w.OSL, meanOSL: float64(w.OSL)}
	if len(w.ISLQuantiles) > 0 {
		b.minISL, b.maxISL = math.MaxInt, 0
		for _, v := range w.ISLQuantiles {
			if v <= 0 || v > maxTokens {
				return b, fmt.Errorf("workload isl quantile %d: must be in 1..%d tokens", v, maxTokens)
			}
			b.minISL, b.maxISL = min(b.minISL, v), max(b.maxISL, v)
		}
	}
	if len(w.OSLQuantiles) > 0 {
		b.maxOSL, b.meanOSL = 0, 0
		for _, v := range w.OSLQuantiles {
			if v <= 0 || v > maxTokens {
				return b, fmt.Errorf("workload osl quantile %d: must be in 1..%d tokens", v, maxTokens)
			}
			b.maxOSL = max(b.maxOSL, v)
			b.meanOSL += float64(v)
		}
		b.meanOSL /= float64(len(w.OSLQuantiles))
	}
	if w.Prefix >= b.minISL {
		return b, fmt.Errorf("workload prefix = %d: must be < isl (%d); at least one prompt token is always computed", w.Prefix, b.minISL)
	}
	if err := CheckRequestFits(e, b.maxISL, b.maxOSL, w.Prefix, "workload"); err != nil {
		return b, err
	}
	switch {
	case e.Traits().PerPassKV: // preemption (V-R6), retraction (S-R5), pausing (T-R2)
		if err := checkKVFit(w, e, b, b.maxISL+b.maxOSL-1, "its last token"); err != nil {
			return b, err
		}
	case e.KVCapacityTokens > 0: // reservation at admission (T-R1)
		need := ceilDiv(b.maxISL+b.maxOSL, e.BlockSize)
		if need > e.KVCapacityTokens/e.BlockSize {
			return b, fmt.Errorf("engine kv_capacity_tokens = %d: one request needs %d blocks of %d tokens (isl %d + osl %d) under guaranteed_no_evict; raise the KV capacity", e.KVCapacityTokens, need, e.BlockSize, b.maxISL, b.maxOSL)
		}
	}
	first := FirstPassTokens(e, b.maxISL, w.Prefix)
	switch e.Backend {
	case engine.VLLM:
		if !e.EnableChunkedPrefill && first > e.MaxNumBatchedTokens {
			return b, fmt.Errorf("engine max_num_batched_tokens = %d: with chunked prefill off it must hold a whole prompt (%d uncached tokens); raise it or enable chunked prefill", e.MaxNumBatchedTokens, first)
		}
	case engine.TRTLLM:
		if !e.EnableChunkedPrefill && first > e.MaxNumTokens {
			return b, fmt.Errorf("engine max_num_tokens = %d: with chunked prefill off it must hold a whole prompt (%d tokens); raise it or enable chunked prefill", e.MaxNumTokens, first)
		}
	}
	return b, nil
}

// CheckRequestFits refuses a request (what names it: the workload, a trace
// request) that engine e's config makes the model unable to answer: a cached
// prefix while the config turns the prefix cache off (the model reads a prefix
// as cached), or isl + osl tokens longer than its max_model_len (the engine
// rejects such a request at the API, which no calendar represents). The sweep
// calls it before it starts.
func CheckRequestFits(e engine.Spec, isl, osl, prefix int, what string) error {
	if prefix > 0 && e.NoPrefixReuse {
		return fmt.Errorf("%s prefix = %d: the engine config turns the prefix cache off, so nothing is reused, while the model reads a prefix as cached; pass prefix 0 (every prompt computed whole) or turn the cache on", what, prefix)
	}
	if e.MaxModelLen > 0 && isl+osl > e.MaxModelLen {
		return fmt.Errorf("%s isl %d + osl %d = %d tokens: longer than the engine config's max_model_len %d (max_seq_len, context_length), so the engine rejects it; raise it or shorten the requests", what, isl, osl, isl+osl, e.MaxModelLen)
	}
	return nil
}

// FirstPassTokens is the token budget a prompt of isl tokens, prefix of them
// cached, needs in one pass on e with chunked prefill off: TensorRT-LLM budgets
// the whole prompt and applies reuse after (T-R3); vLLM its uncached tokens,
// capped by long_prefill_token_threshold before the fit check (V-R1, V-R3);
// SGLang its uncached tokens.
func FirstPassTokens(e engine.Spec, isl, prefix int) int {
	switch e.Backend {
	case engine.TRTLLM:
		return isl
	case engine.VLLM:
		if t := e.LongPrefillTokenThreshold; t > 0 && t < isl-prefix {
			return t
		}
	}
	return isl - prefix
}

func ceilDiv(a, b int) int {
	if b == 1 { // SGLang's default page size: every decode row takes a block, no division
		return a
	}
	return (a + b - 1) / b
}
