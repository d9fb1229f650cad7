// Package timing defines the only thing the scheduling layers know about hardware:
// the latency of one engine pass. It is shared by the queueing model (queueing/...),
// the oracle (oracle/) and the perf database adapter (perfdb/), so that the model and
// the oracle can be driven with identical timing.
package timing

import (
	"errors"
	"fmt"
	"math"
)

// Chunk is one prefill entry of a pass: a slice of a prompt (or a recompute after
// preemption) scheduled in this pass.
type Chunk struct {
	// Tokens is the number of tokens this entry computes in the pass (> 0).
	Tokens int
	// Computed is the number of the request's tokens already in KV before this pass,
	// prefix-cache hits included (the context this chunk attends to besides itself).
	Computed int
	// Prefix is the part of Computed that came from the prefix cache (never computed
	// by this request).
	Prefix int
}

// Pass is one engine iteration: its prefill chunks and its decode rows.
//
// An entry is a decode row iff its request had computed its whole prompt before the
// pass and the entry schedules exactly one token. Its context length is the request's
// computed tokens before the pass + 1 (the KV length it attends, the new token
// included). Every other entry is a Chunk.
type Pass struct {
	Prefill []Chunk
	// Decode holds the context length of every decode row.
	Decode []int
}

// PrefillTokens returns Σ Tokens over the prefill chunks (P of the linear model).
func (p *Pass) PrefillTokens() int {
	n := 0
	for _, c := range p.Prefill {
		n += c.Tokens
	}
	return n
}

// DecodeContext returns Σ context length over the decode rows (X of the linear model).
func (p *Pass) DecodeContext() int {
	n := 0
	for _, c := range p.Decode {
		n += c
	}
	return n
}

// Reset empties the pass for reuse without freeing its slices.
func (p *Pass) Reset() {
	p.Prefill = p.Prefill[:0]
	p.Decode = p.Decode[:0]
}

// Timing prices a pass in milliseconds. Implementations must return a finite value
// > 0 for any non-empty pass, or an error when they cannot price it (a perf-data
// gap, an invalid pass); the caller stops at the first error and wraps it with the
// pass it was pricing. They must be safe for concurrent use if shared between
// goroutines. A fused mixed pass is priced once as a whole where the source can.
// Linear, Constant and Roofline never fail.
type Timing interface {
	PassMs(p *Pass) (float64, error)
}

// Linear is the synthetic timing kind "linear", with exactly this meaning, shared by
// the model and the oracle:
//
//	pass_ms = BaseMs + PrefillMsPerToken·P + DecodeMsPerRow·D + CtxMsPerToken·X
//
// where P is the number of prefill tokens in the pass, D the number of decode rows and
// X the sum of their context lengths.
type Linear struct {
	BaseMs            float64 `json:"base_ms"`
	PrefillMsPerToken float64 `json:"prefill_ms_per_token"`
	DecodeMsPerRow    float64 `json:"decode_ms_per_row"`
	CtxMsPerToken     float64 `json:"ctx_ms_per_token"`
}

// PassMs implements Timing.
func (l Linear) PassMs(p *Pass) (float64, error) {
	return l.ms(p.PrefillTokens(), len(p.Decode), p.DecodeContext()), nil
}

// DecodeOnlyMs prices a decode-only pass of rows decode rows whose context lengths
// sum to ctx: exactly PassMs of any such pass (the linear model reads nothing
// else), without visiting its rows.
func (l Linear) DecodeOnlyMs(rows, ctx int) (float64, error) {
	return l.ms(0, rows, ctx), nil
}

// ms is the linear model at P prefill tokens, D decode rows and X summed context.
func (l Linear) ms(P, D, X int) float64 {
	return l.BaseMs + l.PrefillMsPerToken*float64(P) + l.DecodeMsPerRow*float64(D) + l.CtxMsPerToken*float64(X)
}

// Validate reports a coefficient that is negative or non-finite, or a model that
// prices some non-empty pass at zero.
func (l Linear) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"base_ms", l.BaseMs}, {"prefill_ms_per_token", l.PrefillMsPerToken},
		{"decode_ms_per_row", l.DecodeMsPerRow}, {"ctx_ms_per_token", l.CtxMsPerToken}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("timing %s = %v: must be a finite number ≥ 0", f.name, f.v)
		}
	}
	if l.BaseMs == 0 && (l.PrefillMsPerToken == 0 || (l.DecodeMsPerRow == 0 && l.CtxMsPerToken == 0)) {
		return errors.New("timing: base_ms is 0 and some pass would take no time; set base_ms > 0")
	}
	return nil
}

// Constant prices every pass at PassMs (timing kind "constant").
type Constant struct {
	Ms float64 `json:"pass_ms"`
}

// PassMs implements Timing.
func (c Constant) PassMs(*Pass) (float64, error) { return c.Ms, nil }

// Validate reports a non-positive or non-finite pass time.
func (c Constant) Validate() error {
	if !(c.Ms > 0) || math.IsInf(c.Ms, 0) {
		return fmt.Errorf("timing pass_ms = %v: must be a finite number > 0", c.Ms)
	}
	return nil
}

// Func adapts a function to Timing (the callback adapter).
type Func func(p *Pass) (float64, error)

// PassMs implements Timing.
func (f Func) PassMs(p *Pass) (float64, error) { return f(p) }
