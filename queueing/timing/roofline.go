package timing

import (
	"errors"
	"fmt"
	"math"
)

// Roofline is the synthetic timing kind "roofline": a pass is bound by compute or
// by memory traffic, whichever is slower, plus a fixed cost:
//
//	pass_ms   = BaseMs + max(compute, memory)
//	compute   = TokenMs·(P + D) + AttnMsPerPair·(Σ_chunks n·(computed + (n+1)/2) + X)
//	memory    = WeightsMs + KVMsPerToken·(Σ_chunks (computed + n) + X)
//
// P = prefill tokens, D = decode rows, X = Σ decode-row context lengths; a chunk of n
// tokens after `computed` tokens attends to its carried context and causally to
// itself (so later chunks of a prompt cost more, and a last partial chunk costs its
// real size). It is non-decreasing in tokens, rows and context lengths, the
// property the screening bracket relies on.
type Roofline struct {
	BaseMs        float64 `json:"base_ms"`
	WeightsMs     float64 `json:"weights_ms"`       // weight read per pass
	TokenMs       float64 `json:"token_ms"`         // GEMM compute per token (prefill or decode)
	AttnMsPerPair float64 `json:"attn_ms_per_pair"` // attention compute per (query, key) pair
	KVMsPerToken  float64 `json:"kv_ms_per_token"`  // KV read per attended context token
}

// PassMs implements Timing.
func (r Roofline) PassMs(p *Pass) (float64, error) {
	pairs, kv := 0.0, 0.0
	for _, c := range p.Prefill {
		n, done := float64(c.Tokens), float64(c.Computed)
		pairs += n * (done + (n+1)/2)
		kv += done + n
	}
	return r.ms(pairs, kv, p.PrefillTokens(), len(p.Decode), p.DecodeContext()), nil
}

// DecodeOnlyMs prices a decode-only pass of rows decode rows whose context lengths
// sum to ctx: exactly PassMs of any such pass, without visiting its rows.
func (r Roofline) DecodeOnlyMs(rows, ctx int) (float64, error) {
	return r.ms(0, 0, 0, rows, ctx), nil
}

// ms completes a pass's price from its prefill chunks' attention pairs and KV reads,
// P prefill tokens, D decode rows and X summed decode context.
func (r Roofline) ms(pairs, kv float64, P, D, X int) float64 {
	x := float64(X)
	pairs += x
	kv += x
	compute := r.TokenMs*float64(P+D) + r.AttnMsPerPair*pairs
	memory := r.WeightsMs + r.KVMsPerToken*kv
	return r.BaseMs + math.Max(compute, memory)
}

// Validate reports a coefficient that is negative or non-finite, or a model that
// prices some non-empty pass at zero.
func (r Roofline) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"base_ms", r.BaseMs}, {"weights_ms", r.WeightsMs}, {"token_ms", r.TokenMs},
		{"attn_ms_per_pair", r.AttnMsPerPair}, {"kv_ms_per_token", r.KVMsPerToken}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("timing %s = %v: must be a finite number ≥ 0", f.name, f.v)
		}
	}
	if r.BaseMs == 0 && r.WeightsMs == 0 && r.TokenMs == 0 && r.AttnMsPerPair == 0 && r.KVMsPerToken == 0 {
		return errors.New("timing: base_ms and weights_ms are 0 and some pass would take no time; set base_ms > 0")
	}
	return nil
}
