package perfdb

// passtiming.go adapts an Estimator to queueing/timing.Timing: it prices an
// arbitrary engine pass (prefill chunks with their computed context, decode
// rows with their context lengths) as ONE fused pass, the way
// aiconfigurator's mixed step composes one (Engine::mixed_step_breakdown):
//
//   - token-major work (GEMMs, norms, MoE, all-reduces): the context op list
//     without context_attention, at batch 1 over P + D tokens (P prefill
//     tokens, D decode rows), as mixed pass 1 — including its convention that
//     the logits GEMM runs at m = 1 in a mixed pass (kept so a mixed pass
//     prices exactly as aiconfigurator's t_mix);
//   - prefill attention per chunk: context_attention at batch 1, s = the
//     chunk's tokens, prefix = its already-computed tokens (the table's
//     prefix correction charges exactly the chunk's share of the causal
//     triangle); equal chunks are batched;
//   - decode attention: generation_attention at batch D and KV length = the
//     rows' mean context length, as mixed pass 3 (decode attention is
//     memory-bound, linear in the summed context).
//
// With attention DP the pass is one rank's; the MoE op sees its tokens × dp
// (every rank equally loaded, aiconfigurator's MoE convention).
//
// A decode-only pass is the full generation op list at batch D (the gen-only
// step), so a pass of the agg shapes prices t_mix (MixedMs with ctx = isl)
// and t_gen (GenOnlyMs) exactly whenever its context lengths lie on the
// bucket grid below (otherwise within the bucketing error).
//
// Caching: a pass is keyed by its exact chunk token counts, its bucketed
// chunk contexts, its exact decode count and its bucketed mean decode
// context. bucket(x) keeps x exact up to 64 and above rounds it to the
// nearest multiple of 2^(⌊log2 x⌋−4) (16 buckets per octave, ≤ 1.6 %
// relative error), and the pass is priced AT the bucketed values, so the
// result is a pure function of the key (order-independent, deterministic).

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync"

	"github.com/aicdb/aicdb/queueing/timing"
)

// PassTiming prices engine passes for the queueing layer. It is safe for
// concurrent use.
type PassTiming struct {
	e  *Estimator // the estimator given (Estimator: memory, config)
	pe *Estimator // e over monotone kernel curves (Querier.Monotone): what passes are priced with

	mu    sync.RWMutex
	cache map[passKey]float64
}

// maxCachedPasses bounds the cache; when full it is cleared (prices are a
// pure function of the key, so this changes timing only, never results).
const maxCachedPasses = 1 << 20

var _ timing.Timing = (*PassTiming)(nil)

// NewPassTiming wraps an estimator and probes it at a small and a large pass
// so a data gap surfaces here, not mid-simulation.
func NewPassTiming(e *Estimator) (*PassTiming, error) {
	if e == nil {
		return nil, errors.New("pass timing: nil estimator")
	}
	pt := &PassTiming{e: e, pe: e.monotone(), cache: make(map[passKey]float64)}
	probes := []timing.Pass{
		{Decode: []int{1025}},
		{Prefill: []timing.Chunk{{Tokens: 512, Computed: 512}}, Decode: []int{2048, 4096}},
	}
	for i := range probes {
		if _, err := pt.PassMs(&probes[i]); err != nil {
			return nil, fmt.Errorf("pass timing: probe pass %d: %w", i, err)
		}
	}
	return pt, nil
}

// PassMs implements timing.Timing: the fused-pass latency in ms, or an error
// naming the failing query or the invalid pass (a miss matches IsMiss); an
// empty pass costs 0.
func (pt *PassTiming) PassMs(p *timing.Pass) (float64, error) {
	if len(p.Prefill) == 0 && len(p.Decode) == 0 {
		return 0, nil
	}
	k, err := makePassKey(p)
	if err != nil {
		return 0, err
	}
	if v, ok := pt.lookup(k); ok {
		return v, nil
	}
	v, err := pt.price(p)
	if err != nil {
		return 0, err
	}
	pt.store(k, v)
	return v, nil
}

// DecodeOnlyMs prices a decode-only pass of rows decode rows whose context
// lengths sum to ctx: the same key, the same bucketed price and so the same
// float64 as PassMs of any such pass (it reads only the row count and the
// mean context), without visiting the rows (queueing's decode stretches).
func (pt *PassTiming) DecodeOnlyMs(rows, ctx int) (float64, error) {
	if rows <= 0 || ctx < rows {
		return 0, fmt.Errorf("decode-only pass of %d rows with context sum %d: want ≥ 1 row, each context > 0", rows, ctx)
	}
	mean := meanContext(ctx, rows)
	k := decodeKey(0, 0, 0, rows, mean)
	if v, ok := pt.lookup(k); ok {
		return v, nil
	}
	v, err := pt.priceDecodeOnly(rows, mean)
	if err != nil {
		return 0, err
	}
	pt.store(k, v)
	return v, nil
}

// DecodeOnlySpanMs is DecodeOnlyMs(rows, ctx) together with the largest
// summed context maxCtx ≥ ctx whose decode-only pass of rows rows has the same
// key, hence the same price (its bucketed mean context is ctx's): queueing's
// decode stretches price once per span of contexts, not once per pass.
func (pt *PassTiming) DecodeOnlySpanMs(rows, ctx int) (float64, int, error) {
	v, err := pt.DecodeOnlyMs(rows, ctx)
	if err != nil {
		return 0, 0, err
	}
	// meanContext(x, rows) = bucket(⌊(x + rows/2)/rows⌋) is non-decreasing in x:
	// the span ends at the last x whose rounded mean is at most the last mean of
	// ctx's bucket.
	m := bucketEnd(meanContext(ctx, rows))
	return v, (m+1)*rows - rows/2 - 1, nil
}

// lookup returns the cached price of key k.
func (pt *PassTiming) lookup(k passKey) (float64, bool) {
	pt.mu.RLock()
	v, ok := pt.cache[k]
	pt.mu.RUnlock()
	return v, ok
}

// store caches price v under key k (clearing a full cache first).
func (pt *PassTiming) store(k passKey, v float64) {
	pt.mu.Lock()
	if len(pt.cache) >= maxCachedPasses {
		clear(pt.cache)
	}
	pt.cache[k] = v
	pt.mu.Unlock()
}

// price computes a pass at its bucketed shape (uncached).
func (pt *PassTiming) price(p *timing.Pass) (float64, error) {
	e := pt.pe
	nextn := e.cfg.Nextn + 1
	d := len(p.Decode)
	var meanCtx int
	if d > 0 {
		sum := 0
		for _, c := range p.Decode {
			sum += c
		}
		meanCtx = meanContext(sum, d)
	}
	if len(p.Prefill) == 0 {
		return pt.priceDecodeOnly(d, meanCtx)
	}
	type shape struct{ tokens, ctx int }
	counts := map[shape]int{}
	var order []shape
	tokens := 0
	for _, c := range p.Prefill {
		s := shape{c.Tokens, bucket(c.Computed)}
		if counts[s] == 0 {
			order = append(order, s)
		}
		counts[s]++
		tokens += c.Tokens
	}
	total, err := runContext(e.ks, e.ops.ctx, 1, tokens+d*nextn, 0, skipContextAttention)
	if err != nil {
		return 0, err
	}
	ms := total.LatencyMs
	slices.SortFunc(order, func(a, b shape) int {
		if a.tokens != b.tokens {
			return a.tokens - b.tokens
		}
		return a.ctx - b.ctx
	})
	for _, s := range order {
		a, err := runContext(e.ks, e.ops.ctx, counts[s], s.tokens, s.ctx, onlyContextAttention)
		if err != nil {
			return 0, err
		}
		ms += a.LatencyMs
	}
	if d > 0 {
		a, err := runGenStep(e.ks, e.ops.gen, d*nextn, max(meanCtx, 1), true)
		if err != nil {
			return 0, err
		}
		ms += a.LatencyMs
	}
	return ms, finite("pass", ms)
}

// priceDecodeOnly is a decode-only pass of d rows at bucketed mean context
// meanCtx: the full generation op list at batch d (the gen-only step).
func (pt *PassTiming) priceDecodeOnly(d, meanCtx int) (float64, error) {
	r, err := runGenStep(pt.pe.ks, pt.pe.ops.gen, d*(pt.pe.cfg.Nextn+1), max(meanCtx, 1), false)
	if err != nil {
		return 0, err
	}
	return r.LatencyMs, finite("pass", r.LatencyMs)
}

// meanContext is the bucketed mean decode context of d > 0 rows whose contexts
// sum to sum (the rounded mean, bucketed): what a pass's key and price read of
// its decode rows.
func meanContext(sum, d int) int {
	n := sum + d/2
	if n >= 0 && n <= math.MaxUint32 && d <= math.MaxUint32 {
		// The same quotient by a 32-bit division (several times cheaper than a
		// 64-bit one on x86): every pass key takes one.
		return bucket(int(uint32(n) / uint32(d)))
	}
	return bucket(n / d)
}

// bucket quantizes a context length: exact up to 64, then 16 buckets per
// octave (nearest multiple of 2^(⌊log2 x⌋−4)).
func bucket(x int) int {
	if x <= 64 {
		return x
	}
	step := 1 << (bits.Len(uint(x)) - 1 - 4)
	return (x + step/2) / step * step
}

// bucketEnd is the largest x with bucket(x) = b, for b a bucket value
// (bucket(b) = b). Below 64 buckets are exact. From 64 on, b is a multiple of
// its octave's step s = 2^(⌊log2 b⌋−4) and x rounds to it up to b + s/2 − 1
// (x ≥ b + s/2 rounds to the next multiple, still in b's octave or its first
// value 2^(⌊log2 b⌋+1), whose step is 2s); bucket is non-decreasing
// (TestBucketEnd).
func bucketEnd(b int) int {
	if b < 64 {
		return b
	}
	return b + 1<<(bits.Len(uint(b))-1-4)/2 - 1
}

// passKey identifies a pass's bucketed shape: two independent 64-bit hashes
// of the order-independent multiset of chunks plus the decode summary.
type passKey struct{ a, b uint64 }

// makePassKey hashes a pass without allocating. Chunks are combined with a
// commutative sum of per-chunk mixes so their order does not matter.
func makePassKey(p *timing.Pass) (passKey, error) {
	var sa, sb uint64
	for _, c := range p.Prefill {
		if c.Tokens <= 0 || c.Computed < 0 || c.Prefix < 0 || c.Prefix > c.Computed {
			return passKey{}, fmt.Errorf("pass chunk %+v: tokens must be > 0 and 0 ≤ prefix ≤ computed", c)
		}
		v := uint64(c.Tokens)<<32 | uint64(bucket(c.Computed))
		sa += mix64(v)
		sb += mix64(v ^ 0x9e3779b97f4a7c15)
	}
	d := len(p.Decode)
	mean := 0
	if d > 0 {
		sum := 0
		for _, c := range p.Decode {
			if c <= 0 {
				return passKey{}, fmt.Errorf("pass decode row context %d: must be > 0", c)
			}
			sum += c
		}
		mean = meanContext(sum, d)
	}
	return decodeKey(sa, sb, len(p.Prefill), d, mean), nil
}

// decodeKey completes a pass key from the chunk hashes (sa, sb) and count, the
// decode row count d and the bucketed mean decode context.
func decodeKey(sa, sb uint64, chunks, d, mean int) passKey {
	dv := uint64(d)<<32 | uint64(mean)
	return passKey{mix64(sa^mix64(dv)) + uint64(chunks), mix64(sb+0x632be59bd9b4e019) ^ mix64(dv^0xbf58476d1ce4e5b9)}
}

// mix64 is the splitmix64 finalizer.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// TMixMs is the screening tier's t_mix: the agg mix step with ctxTokens
// prefill tokens and genTokens decode rows (Estimator.MixedMs).
func (pt *PassTiming) TMixMs(ctxTokens, genTokens, isl, osl, prefix int) (float64, error) {
	return pt.pe.MixedMs(ctxTokens, genTokens, isl, osl, prefix)
}

// TGenMs is the screening tier's t_gen: the gen-only step at batch b
// (Estimator.GenOnlyMs).
func (pt *PassTiming) TGenMs(b, isl, osl int) (float64, error) {
	return pt.pe.GenOnlyMs(b, isl, osl)
}
