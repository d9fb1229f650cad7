package perfdb

import (
	"fmt"
	"math"
)

// Throughput is the throughput block every static/agg/disagg row carries.
type Throughput struct {
	SeqPerS           float64 `json:"seq_per_s"`
	TokensPerSPerGPU  float64 `json:"tokens_per_s_per_gpu"`
	TokensPerSPerUser float64 `json:"tokens_per_s_per_user"`
	MemoryGiB         float64 `json:"memory_gib"`
}

// StaticInput is one static-batching point (BaseBackend.run_static).
type StaticInput struct {
	Batch, ISL, OSL, Prefix int
	Stride                  int // generation quadrature stride (golden harness: 1; run_static default 32)
}

// StaticResult is a static row: phase latencies rounded to 3 decimals as the
// reference summary row is; Total is the sum of the two rounded phases.
type StaticResult struct {
	ContextMs    float64 `json:"context_latency_ms"`
	GenerationMs float64 `json:"generation_latency_ms"`
	RequestMs    float64 `json:"request_latency"`
	TTFTMs       float64 `json:"ttft"`
	TPOTMs       float64 `json:"tpot"`
	Throughput
}

// validateShape checks the request shape flags.
func validateShape(batch, isl, osl, prefix int) error {
	switch {
	case batch <= 0:
		return fmt.Errorf("--batch %d: must be ≥ 1", batch)
	case isl <= 0:
		return fmt.Errorf("--isl %d: must be ≥ 1", isl)
	case osl <= 0:
		return fmt.Errorf("--osl %d: must be ≥ 1", osl)
	case prefix < 0:
		return fmt.Errorf("--prefix %d: must be ≥ 0", prefix)
	case prefix >= isl:
		return fmt.Errorf("--prefix %d must be smaller than --isl %d", prefix, isl)
	}
	return nil
}

// Static is run_static(mode="static"): context + generation at batch b.
// ttft = context, tpot = generation/(osl−1), request = ttft + tpot·(osl−1);
// seq/s = b·dp/request·1000·pp, tokens/s = seq/s·osl, per GPU ÷ tp·pp·dp.
func (e *Estimator) Static(in StaticInput) (StaticResult, error) {
	if err := validateShape(in.Batch, in.ISL, in.OSL, in.Prefix); err != nil {
		return StaticResult{}, err
	}
	ctx, err := e.ContextMs(in.Batch, in.ISL, in.Prefix)
	if err != nil {
		return StaticResult{}, err
	}
	gen, err := e.GenerationMs(in.Batch, in.ISL, in.OSL, in.Stride)
	if err != nil {
		return StaticResult{}, err
	}
	r := StaticResult{ContextMs: round3(ctx.LatencyMs), GenerationMs: round3(gen.LatencyMs)}
	tpot := 0.0
	if in.OSL > 1 {
		tpot = gen.LatencyMs / float64(in.OSL-1)
	}
	req := ctx.LatencyMs + tpot*float64(in.OSL-1)
	r.TTFTMs, r.TPOTMs, r.RequestMs = round3(ctx.LatencyMs), round3(tpot), round3(req)
	seq := float64(in.Batch*e.cfg.DP) / req * 1000 * float64(e.cfg.PP)
	r.SeqPerS = round3(seq)
	r.TokensPerSPerGPU = round3(seq * float64(in.OSL) / float64(e.gpus()))
	if tpot > 0 {
		r.TokensPerSPerUser = round3(1000 / tpot)
	}
	mem, err := e.Memory(in.Batch, in.ISL, in.OSL, in.Prefix, 0)
	if err != nil {
		return StaticResult{}, err
	}
	r.MemoryGiB = round3(mem.TotalGiB)
	return r, finiteAll(r.ContextMs, r.GenerationMs, r.RequestMs, r.SeqPerS)
}

// StaticTotal is the golden static_total: the sum of the two rounded phases.
func (r StaticResult) StaticTotal() float64 { return r.ContextMs + r.GenerationMs }

// AggInput is one continuous-batching point (BaseBackend.run_agg).
type AggInput struct {
	Batch, CtxTokens, ISL, OSL, Prefix int
	// DecodeTokensPerIter is the MTP acceptance: output tokens one decode
	// iteration yields on average, in [1, nextn+1] (run_agg's
	// decode_tokens_per_iteration); 0 means 1 (no speculative progress).
	// Every decode iteration still verifies nextn+1 rows per request.
	DecodeTokensPerIter float64
}

// AggResult is an agg row (unrounded, as the reference result dict).
type AggResult struct {
	TTFTMs      float64 `json:"ttft"`
	TPOTMs      float64 `json:"tpot"`
	RequestMs   float64 `json:"request_latency"`
	MixedStepMs float64 `json:"mixed_step_ms"`
	GenOnlyMs   float64 `json:"genonly_step_ms"`
	NumMix      float64 `json:"num_mix_steps"`
	NumGenOnly  float64 `json:"num_genonly_steps"`
	Concurrency int     `json:"concurrency"`
	Throughput
}

// trtllmMaxNumTokens is TRT-LLM's default BuildConfig.max_num_tokens, which
// sizes its agg activation memory.
const trtllmMaxNumTokens = 8192

// hooks are the per-backend agg hooks (backends/*_backend.py).
type hooks struct{ backend string }

// mixGenTokens is _mix_step_gen_tokens: decode requests riding a mix step.
// vLLM (max_num_partial_prefills = 1, V-R-rule of SCHEDULERS.md: one partial
// prefill per pass): max(1, b − ⌈ctx/isl⌉); others split by the ratio of
// prefill steps to decode iterations.
func (h hooks) mixGenTokens(b, ctx, isl int, decodeIters float64) int {
	if h.backend != "vllm" {
		steps := math.Ceil(float64(isl*b) / float64(ctx))
		if steps >= decodeIters {
			return max(1, int(math.Floor(float64(b)/(steps/decodeIters))))
		}
	}
	return max(1, b-ceilDiv(ctx, isl))
}

// tpotMixSteps is _tpot_mix_steps: TRT-LLM and SGLang drop 3 drain steps.
func (h hooks) tpotMixSteps(n float64) float64 {
	if h.backend == "trtllm" || h.backend == "sglang" {
		return math.Max(1, n-3)
	}
	return n
}

// ttftQueuingFactor is _ttft_queuing_factor: vLLM 1 + log2(b)/8 capped at 2
// (1 at b ≤ 1); others the legacy min(2 + (steps − 3)/20, 4).
func (h hooks) ttftQueuingFactor(b int, steps float64) float64 {
	if h.backend == "vllm" {
		if b <= 1 {
			return 1
		}
		return math.Min(1+math.Log2(float64(b))/8, 2)
	}
	return math.Min(2+(steps-3)/2/10, 4)
}

// dispatchOverheadMs is _prefill_dispatch_overhead_ms: vLLM 0.8 ms per layer.
func (h hooks) dispatchOverheadMs(layers int) float64 {
	if h.backend == "vllm" {
		return float64(layers) * 0.8
	}
	return 0
}

// throughputCap is _throughput_cap: vLLM caps at the Little's-law rate
// b·(osl−1)·1000/(ttft + tpot·(osl−1)).
func (h hooks) throughputCap(step, ttft, tpot float64, b, osl int) float64 {
	if h.backend != "vllm" {
		return step
	}
	req := ttft + tpot*float64(max(osl-1, 0))
	if req <= 0 {
		return step
	}
	return math.Min(step, float64(b*max(osl-1, 0))*1000/req)
}

// tokensPerIter checks an MTP acceptance a (output tokens one decode iteration
// yields on average) against the estimator's nextn: 0 means 1 (no MTP), and
// it must lie in [1, nextn + 1].
func (e *Estimator) tokensPerIter(a float64) (float64, error) {
	if a == 0 {
		return 1, nil
	}
	if math.IsNaN(a) || a < 1 || a > float64(e.cfg.Nextn+1) {
		return 0, fmt.Errorf("decode tokens per iteration %v: must lie in [1, nextn+1 = %d]; raise --nextn or lower the acceptance", a, e.cfg.Nextn+1)
	}
	return a, nil
}

// Agg is run_agg for one (b, ctx_tokens) point: with MTP acceptance a
// (DecodeTokensPerIter) the osl − 1 decode tokens take (osl − 1)/a
// iterations and TPOT is the per-iteration time / a.
func (e *Estimator) Agg(in AggInput) (AggResult, error) {
	if err := validateShape(in.Batch, in.ISL, in.OSL, in.Prefix); err != nil {
		return AggResult{}, err
	}
	if in.CtxTokens <= 0 {
		return AggResult{}, fmt.Errorf("--ctx-tokens %d: must be ≥ 1", in.CtxTokens)
	}
	accept, err := e.tokensPerIter(in.DecodeTokensPerIter)
	if err != nil {
		return AggResult{}, err
	}
	h := hooks{e.cfg.Backend}
	b, isl, osl, ctx := in.Batch, in.ISL, in.OSL, in.CtxTokens
	decodeIters := 1 + float64(max(osl-1, 0))/accept
	steps := math.Ceil(float64(isl*b) / float64(ctx))
	var nMix, nGen, nMixTPOT float64
	var mixGen, genTokens int
	if b > 1 {
		mixGen = h.mixGenTokens(b, ctx, isl, decodeIters)
		nMix = steps
		if steps >= decodeIters {
			nMixTPOT = nMix
		} else {
			nGen = decodeIters - nMix
			genTokens = b
			nMixTPOT = h.tpotMixSteps(nMix)
		}
	} else {
		nMix, nGen, genTokens = 1, math.Max(decodeIters-1, 0), 1
	}
	mix, err := e.MixedMs(ctx, mixGen, isl, osl, in.Prefix)
	if err != nil {
		return AggResult{}, err
	}
	genOnly, err := e.GenOnlyMs(genTokens, isl, osl)
	if err != nil {
		return AggResult{}, err
	}
	r := AggResult{MixedStepMs: mix, GenOnlyMs: genOnly, NumMix: nMix, NumGenOnly: nGen}
	r.TTFTMs = (mix*math.Ceil(float64(isl)/float64(ctx)) + h.dispatchOverheadMs(e.model.Layers)) * h.ttftQueuingFactor(b, steps)
	if n := nMixTPOT + nGen; n > 0 {
		r.TPOTMs = (mix*nMixTPOT + genOnly*nGen) / n / accept
	}
	r.RequestMs = r.TTFTMs + r.TPOTMs*float64(osl-1)
	total := nMix*mix + nGen*genOnly
	step := 0.0
	if osl > 1 && total > 0 {
		step = 1000 / total * float64(b*(osl-1))
	}
	out := h.throughputCap(step, r.TTFTMs, r.TPOTMs, b, osl) * float64(e.cfg.PP*e.cfg.DP)
	r.Concurrency = b * e.cfg.PP * e.cfg.DP
	if osl > 1 {
		r.SeqPerS = out / float64(osl-1)
	}
	r.TokensPerSPerGPU = out / float64(e.gpus())
	if r.TPOTMs > 0 {
		r.TokensPerSPerUser = 1000 / r.TPOTMs
	}
	// Memory (run_agg): activations for the mix step's tokens (decode share
	// = the decode rows); b = 1 also checks the decode step. TRT-LLM sizes
	// activations by max_num_tokens (8192) with the legacy full MTP multiplier.
	numTokens, share := ctx, 0
	numGenReq := b - ceilDiv(ctx, isl)
	if b > 1 {
		numTokens, share = numGenReq+ctx, numGenReq
	} else {
		numGenReq = 1
	}
	if e.cfg.Backend == "trtllm" {
		numTokens, share = trtllmMaxNumTokens, -1
	}
	mem, err := e.memory(b, isl, osl, in.Prefix, memOpts{numTokens: numTokens, decodeShare: share})
	if err != nil {
		return AggResult{}, err
	}
	if b == 1 && osl > 1 && e.cfg.Backend != "trtllm" {
		dm, err := e.memory(b, isl, osl, in.Prefix, memOpts{numTokens: numGenReq, decodeShare: -1})
		if err != nil {
			return AggResult{}, err
		}
		if dm.TotalGiB > mem.TotalGiB {
			mem = dm
		}
	}
	r.MemoryGiB = mem.TotalGiB
	if err := e.checkOOM(mem, false); err != nil {
		return AggResult{}, err
	}
	return r, finiteAll(r.TTFTMs, r.TPOTMs, r.RequestMs, r.SeqPerS)
}

// DisaggInput is one disaggregated point (DisaggInferenceSession.run_disagg).
type DisaggInput struct {
	ISL, OSL, Prefix             int
	PrefillBatch, PrefillWorkers int
	DecodeBatch, DecodeWorkers   int
	PrefillCorrection            float64 // default 1.1
	DecodeCorrection             float64 // default 1.08
	Stride                       int     // static stride of both workers (default 32)
	// DecodeTokensPerIter is the MTP acceptance, as AggInput's: output tokens
	// one decode iteration yields on average, in [1, nextn+1]; 0 means 1. The
	// decode worker's iteration is priced at nextn + 1 rows per request and its
	// row projected as aiconfigurator projects a decode summary
	// (SpeculativeDecodingProfile.project_summary, role decode): TPOT divided,
	// seq/s and tokens/s/user multiplied by it, rounded to 3 decimals again.
	DecodeTokensPerIter float64
}

// DisaggResult is a disagg row (rounded to 3 decimals as the reference).
type DisaggResult struct {
	TTFTMs    float64 `json:"ttft"`
	TPOTMs    float64 `json:"tpot"`
	RequestMs float64 `json:"request_latency"`
	Throughput
	PrefillMemoryGiB float64 `json:"prefill_memory_gib"`
	DecodeMemoryGiB  float64 `json:"decode_memory_gib"`
}

// Disagg constants (inference_session.py, picking.py).
const (
	autoscaleTTFTFactor   = 1.8  // _AUTOSCALE_TTFT_CORRECTION_FACTOR
	prefillRateDegrade    = 0.9  // prefill pipeline bubbles
	decodeRateDegrade     = 0.92 // decode batch slots not saturated
	defaultPrefillCorrect = 1.1
	defaultDecodeCorrect  = 1.08
)

// Disagg prices a prefill worker (pre) and a decode worker (dec): P =
// round(ctx(bp)·1.1, 3), T = round(gen(bd)·1.08/(osl−1), 3); ttft =
// round(P·1.8, 3), request = round(P·1.8 + T·(osl−1), 3); seq/s =
// min(P_seq/s·nP·0.9, D_seq/s·nD·0.92).
func Disagg(pre, dec *Estimator, in DisaggInput) (DisaggResult, error) {
	if pre.model != dec.model && pre.model.ID != dec.model.ID {
		return DisaggResult{}, fmt.Errorf("disagg: prefill and decode workers price different models")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"prefill-batch", in.PrefillBatch}, {"prefill-workers", in.PrefillWorkers},
		{"decode-batch", in.DecodeBatch}, {"decode-workers", in.DecodeWorkers}} {
		if f.v <= 0 {
			return DisaggResult{}, fmt.Errorf("--%s %d: must be ≥ 1", f.name, f.v)
		}
	}
	if err := validateShape(1, in.ISL, in.OSL, in.Prefix); err != nil {
		return DisaggResult{}, err
	}
	pc, dc := in.PrefillCorrection, in.DecodeCorrection
	if pc == 0 {
		pc = defaultPrefillCorrect
	}
	if dc == 0 {
		dc = defaultDecodeCorrect
	}
	if pc < 0 || dc < 0 {
		return DisaggResult{}, fmt.Errorf("--prefill-correction %v / --decode-correction %v: must be > 0", pc, dc)
	}
	progress, err := dec.tokensPerIter(in.DecodeTokensPerIter)
	if err != nil {
		return DisaggResult{}, err
	}
	stride := in.Stride
	if stride <= 0 {
		stride = 32
	}
	ctx, err := pre.ContextMs(in.PrefillBatch, in.ISL, in.Prefix)
	if err != nil {
		return DisaggResult{}, fmt.Errorf("prefill worker: %w", err)
	}
	gen, err := dec.GenerationMs(in.DecodeBatch, in.ISL, in.OSL, stride)
	if err != nil {
		return DisaggResult{}, fmt.Errorf("decode worker: %w", err)
	}
	P := round3(ctx.LatencyMs * pc)
	T := 0.0
	if in.OSL > 1 {
		T = round3(gen.LatencyMs * dc / float64(in.OSL-1))
		if progress > 1 {
			T = round3(T / progress)
		}
	}
	r := DisaggResult{TTFTMs: round3(P * autoscaleTTFTFactor), TPOTMs: T,
		RequestMs: round3(P*autoscaleTTFTFactor + T*float64(in.OSL-1))}
	// Rate matching (picking.py _build_disagg_summary_dict) on the workers'
	// rounded static rows: seq/s = global_bs/request_latency·1000·pp with the
	// prefill request latency = its scaled context latency and the decode one =
	// its scaled generation latency; tokens/s/user is the decode row's.
	pLat := ctx.LatencyMs * pc
	pSeq := round3(float64(in.PrefillBatch*pre.cfg.DP) / pLat * 1000 * float64(pre.cfg.PP))
	dSeq := math.Inf(1)
	if dLat := gen.LatencyMs * dc; in.OSL > 1 && dLat > 0 {
		dSeq = round3(float64(in.DecodeBatch*dec.cfg.DP) / dLat * 1000 * float64(dec.cfg.PP))
		r.TokensPerSPerUser = round3(1000 / (dLat / float64(in.OSL-1)))
		if progress > 1 {
			dSeq, r.TokensPerSPerUser = round3(dSeq*progress), round3(r.TokensPerSPerUser*progress)
		}
	}
	seq := math.Min(pSeq*float64(in.PrefillWorkers)*prefillRateDegrade, dSeq*float64(in.DecodeWorkers)*decodeRateDegrade)
	gpus := in.PrefillWorkers*pre.gpus() + in.DecodeWorkers*dec.gpus()
	r.SeqPerS = round3(seq) // the summary DataFrame is rounded to 3 decimals
	r.TokensPerSPerGPU = round3(seq * float64(in.OSL) / float64(gpus))
	// Memory (run_static): the prefill worker holds isl + 1 tokens per slot
	// with prefill-peak activations; the decode worker isl + osl with
	// activations for its batch (every token verifying nextn + 1 drafts).
	pm, err := pre.memory(in.PrefillBatch, in.ISL, 1, in.Prefix, memOpts{})
	if err != nil {
		return DisaggResult{}, err
	}
	dm, err := dec.memory(in.DecodeBatch, in.ISL, in.OSL, in.Prefix, memOpts{numTokens: in.DecodeBatch, decodeShare: -1})
	if err != nil {
		return DisaggResult{}, err
	}
	if err := pre.checkOOM(pm, true); err != nil {
		return DisaggResult{}, fmt.Errorf("prefill worker: %w", err)
	}
	if err := dec.checkOOM(dm, true); err != nil {
		return DisaggResult{}, fmt.Errorf("decode worker: %w", err)
	}
	r.PrefillMemoryGiB, r.DecodeMemoryGiB = round3(pm.TotalGiB), round3(dm.TotalGiB)
	r.MemoryGiB = math.Max(r.PrefillMemoryGiB, r.DecodeMemoryGiB)
	return r, finiteAll(r.TTFTMs, r.TPOTMs, r.RequestMs, r.SeqPerS)
}

// finiteAll reports the first NaN/Inf among results.
func finiteAll(vs ...float64) error {
	for _, v := range vs {
		if err := finite("estimate", v); err != nil {
			return err
		}
	}
	return nil
}
