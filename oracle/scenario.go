package oracle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// Scenario is a hand-written oracle case (issue 4 item 3): an engine, a timing and an
// explicit request list.
type Scenario struct {
	Engine   Engine
	Timing   timing.Timing
	Requests []workload.Request
}

// rawScenario mirrors the JSON with pointers so a missing knob is detectable.
type rawScenario struct {
	Engine   *rawEngine   `json:"engine"`
	Timing   *rawTiming   `json:"timing"`
	Requests []rawRequest `json:"requests"`
}

type rawEngine struct {
	Backend                   *string `json:"backend"`
	MaxNumBatchedTokens       *int    `json:"max_num_batched_tokens"`
	MaxNumSeqs                *int    `json:"max_num_seqs"`
	BlockSize                 *int    `json:"block_size"`
	NumGPUBlocks              *int    `json:"num_gpu_blocks"`
	EnableChunkedPrefill      *bool   `json:"enable_chunked_prefill"`
	LongPrefillTokenThreshold *int    `json:"long_prefill_token_threshold"`
	EnablePrefixCaching       *bool   `json:"enable_prefix_caching"`
	AsyncScheduling           *bool   `json:"async_scheduling"`
	ChunkedPrefillSize        *int    `json:"chunked_prefill_size"`
	MaxPrefillTokens          *int    `json:"max_prefill_tokens"`
	EnableMixedChunk          *bool   `json:"enable_mixed_chunk"`
	MaxRunningRequests        *int    `json:"max_running_requests"`
	MaxBatchSize              *int    `json:"max_batch_size"`
	MaxNumTokens              *int    `json:"max_num_tokens"`
	CapacityPolicy            *string `json:"capacity_policy"`
}

type rawTiming struct {
	Kind              *string  `json:"kind"`
	PassMs            *float64 `json:"pass_ms"`
	BaseMs            *float64 `json:"base_ms"`
	PrefillMsPerToken *float64 `json:"prefill_ms_per_token"`
	DecodeMsPerRow    *float64 `json:"decode_ms_per_row"`
	CtxMsPerToken     *float64 `json:"ctx_ms_per_token"`
}

type rawRequest struct {
	ID           *string  `json:"id"`
	ArrivalMs    *float64 `json:"arrival_ms"`
	PromptLen    *int     `json:"prompt_len"`
	PromptTokens []int    `json:"prompt_tokens"`
	MaxTokens    *int     `json:"max_tokens"`
	EOSAt        *int     `json:"eos_at"`
}

// ParseScenario decodes and validates a scenario. Unknown fields, missing knobs and
// non-positive sizes are one-line errors naming the field.
func ParseScenario(data []byte) (*Scenario, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var raw rawScenario
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("scenario: trailing data after the JSON object")
	}
	if raw.Engine == nil {
		return nil, errors.New("scenario: missing field engine")
	}
	if raw.Timing == nil {
		return nil, errors.New("scenario: missing field timing")
	}
	if len(raw.Requests) == 0 {
		return nil, errors.New("scenario: requests is empty; give at least one request")
	}
	sc := &Scenario{}
	var err error
	if sc.Engine, err = raw.Engine.engine(); err != nil {
		return nil, err
	}
	if sc.Timing, err = raw.Timing.timing(); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for i, rr := range raw.Requests {
		r, err := rr.request(i)
		if err != nil {
			return nil, err
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("scenario: requests[%d].id %q is used twice; ids must be unique", i, r.ID)
		}
		seen[r.ID] = true
		sc.Requests = append(sc.Requests, r)
	}
	return sc, nil
}

func (re *rawEngine) engine() (Engine, error) {
	var e Engine
	if re.Backend == nil {
		return e, errors.New("scenario: missing engine knob engine.backend (vllm, sglang or trtllm)")
	}
	e.Backend = Backend(*re.Backend)
	type knob struct {
		name string
		set  bool
	}
	need := func(ks ...knob) error {
		for _, k := range ks {
			if !k.set {
				return fmt.Errorf("scenario: missing engine knob engine.%s (required for backend %s)", k.name, e.Backend)
			}
		}
		return nil
	}
	common := []knob{{"block_size", re.BlockSize != nil}, {"num_gpu_blocks", re.NumGPUBlocks != nil},
		{"enable_prefix_caching", re.EnablePrefixCaching != nil}}
	var err error
	switch e.Backend {
	case VLLM:
		err = need(append([]knob{{"max_num_batched_tokens", re.MaxNumBatchedTokens != nil},
			{"max_num_seqs", re.MaxNumSeqs != nil}}, append(common,
			knob{"enable_chunked_prefill", re.EnableChunkedPrefill != nil},
			knob{"long_prefill_token_threshold", re.LongPrefillTokenThreshold != nil},
			knob{"async_scheduling", re.AsyncScheduling != nil})...)...)
	case SGLang:
		err = need(append([]knob{{"chunked_prefill_size", re.ChunkedPrefillSize != nil},
			{"max_prefill_tokens", re.MaxPrefillTokens != nil}, {"enable_mixed_chunk", re.EnableMixedChunk != nil},
			{"max_running_requests", re.MaxRunningRequests != nil},
			{"enable_chunked_prefill", re.EnableChunkedPrefill != nil}}, common...)...)
	case TRTLLM:
		err = need(append([]knob{{"max_batch_size", re.MaxBatchSize != nil},
			{"max_num_tokens", re.MaxNumTokens != nil}, {"enable_chunked_prefill", re.EnableChunkedPrefill != nil},
			{"capacity_policy", re.CapacityPolicy != nil}}, common...)...)
	default:
		return e, fmt.Errorf("scenario: engine.backend = %q: must be vllm, sglang or trtllm", e.Backend)
	}
	if err != nil {
		return e, err
	}
	geti := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	getb := func(p *bool) bool { return p != nil && *p }
	e.MaxNumBatchedTokens = geti(re.MaxNumBatchedTokens)
	e.MaxNumSeqs = geti(re.MaxNumSeqs)
	e.BlockSize = geti(re.BlockSize)
	e.NumGPUBlocks = geti(re.NumGPUBlocks)
	e.EnableChunkedPrefill = getb(re.EnableChunkedPrefill)
	e.LongPrefillTokenThreshold = geti(re.LongPrefillTokenThreshold)
	e.EnablePrefixCaching = getb(re.EnablePrefixCaching)
	e.AsyncScheduling = getb(re.AsyncScheduling)
	e.ChunkedPrefillSize = geti(re.ChunkedPrefillSize)
	e.MaxPrefillTokens = geti(re.MaxPrefillTokens)
	e.EnableMixedChunk = getb(re.EnableMixedChunk)
	e.MaxRunningRequests = geti(re.MaxRunningRequests)
	e.MaxBatchSize = geti(re.MaxBatchSize)
	e.MaxNumTokens = geti(re.MaxNumTokens)
	if re.CapacityPolicy != nil {
		e.CapacityPolicy = *re.CapacityPolicy
	}
	if err := e.Validate(); err != nil {
		return e, fmt.Errorf("scenario: %w", err)
	}
	return e, nil
}

func (rt *rawTiming) timing() (timing.Timing, error) {
	if rt.Kind == nil {
		return nil, errors.New("scenario: missing field timing.kind (constant or linear)")
	}
	switch *rt.Kind {
	case "constant":
		if rt.BaseMs != nil || rt.PrefillMsPerToken != nil || rt.DecodeMsPerRow != nil || rt.CtxMsPerToken != nil {
			return nil, errors.New("scenario: timing kind constant takes only pass_ms; remove the linear coefficients")
		}
		if rt.PassMs == nil {
			return nil, errors.New("scenario: missing field timing.pass_ms (kind constant)")
		}
		c := timing.Constant{Ms: *rt.PassMs}
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("scenario: %w", err)
		}
		return c, nil
	case "linear":
		if rt.PassMs != nil {
			return nil, errors.New("scenario: timing kind linear does not take pass_ms; use base_ms")
		}
		for _, f := range []struct {
			n string
			p *float64
		}{{"base_ms", rt.BaseMs}, {"prefill_ms_per_token", rt.PrefillMsPerToken},
			{"decode_ms_per_row", rt.DecodeMsPerRow}, {"ctx_ms_per_token", rt.CtxMsPerToken}} {
			if f.p == nil {
				return nil, fmt.Errorf("scenario: missing field timing.%s (kind linear)", f.n)
			}
		}
		l := timing.Linear{BaseMs: *rt.BaseMs, PrefillMsPerToken: *rt.PrefillMsPerToken,
			DecodeMsPerRow: *rt.DecodeMsPerRow, CtxMsPerToken: *rt.CtxMsPerToken}
		if err := l.Validate(); err != nil {
			return nil, fmt.Errorf("scenario: %w", err)
		}
		return l, nil
	default:
		return nil, fmt.Errorf("scenario: timing.kind = %q: must be constant or linear", *rt.Kind)
	}
}

func (rr *rawRequest) request(i int) (workload.Request, error) {
	var r workload.Request
	f := func(field string) string { return fmt.Sprintf("requests[%d].%s", i, field) }
	if rr.ID == nil || *rr.ID == "" {
		return r, fmt.Errorf("scenario: missing field %s", f("id"))
	}
	r.ID = *rr.ID
	if rr.ArrivalMs == nil {
		return r, fmt.Errorf("scenario: missing field %s", f("arrival_ms"))
	}
	r.ArrivalMs = *rr.ArrivalMs
	if r.ArrivalMs < 0 {
		return r, fmt.Errorf("scenario: %s = %v: must be ≥ 0", f("arrival_ms"), r.ArrivalMs)
	}
	switch {
	case rr.PromptLen != nil && rr.PromptTokens != nil:
		return r, fmt.Errorf("scenario: %s and %s are both set; give one", f("prompt_len"), f("prompt_tokens"))
	case rr.PromptLen != nil:
		if *rr.PromptLen <= 0 {
			return r, fmt.Errorf("scenario: %s = %d: must be > 0", f("prompt_len"), *rr.PromptLen)
		}
		r.PromptLen = *rr.PromptLen
	case rr.PromptTokens != nil:
		if len(rr.PromptTokens) == 0 {
			return r, fmt.Errorf("scenario: %s is empty: give at least one token", f("prompt_tokens"))
		}
		for _, t := range rr.PromptTokens {
			if t < 0 {
				return r, fmt.Errorf("scenario: %s has token id %d: ids must be ≥ 0", f("prompt_tokens"), t)
			}
		}
		r.PromptTokens = rr.PromptTokens
	default:
		return r, fmt.Errorf("scenario: missing field %s (or %s)", f("prompt_len"), f("prompt_tokens"))
	}
	if rr.MaxTokens == nil {
		return r, fmt.Errorf("scenario: missing field %s", f("max_tokens"))
	}
	if *rr.MaxTokens <= 0 {
		return r, fmt.Errorf("scenario: %s = %d: must be > 0", f("max_tokens"), *rr.MaxTokens)
	}
	r.MaxTokens = *rr.MaxTokens
	if rr.EOSAt != nil {
		if *rr.EOSAt <= 0 {
			return r, fmt.Errorf("scenario: %s = %d: must be > 0 (omit it for no EOS)", f("eos_at"), *rr.EOSAt)
		}
		r.EOSAt = *rr.EOSAt
	}
	return r, nil
}

// Run simulates the scenario with the per-pass log on.
func (sc *Scenario) Run(ctx context.Context) (*Result, error) {
	s, err := New(sc.Engine, sc.Timing, Options{PassLog: true})
	if err != nil {
		return nil, err
	}
	for _, r := range sc.Requests {
		if _, err := s.Add(r); err != nil {
			return nil, fmt.Errorf("scenario: %w", err)
		}
	}
	return s.Run(ctx)
}

// ScenarioOutput is the JSON printed by `aicdb oracle run --format json`.
type ScenarioOutput struct {
	Passes   []PassOut    `json:"passes"`
	Requests []RequestOut `json:"requests"`
}

// PassOut is one pass of ScenarioOutput.
type PassOut struct {
	Index      int         `json:"index"`
	StartMs    float64     `json:"start_ms"`
	EndMs      float64     `json:"end_ms"`
	Scheduled  OrderedToks `json:"scheduled"`
	Preempted  []string    `json:"preempted"`
	FreeBlocks int         `json:"free_blocks"`
}

// OrderedToks maps request id to tokens, marshalled as a JSON object in schedule order.
type OrderedToks []IDTokens

// IDTokens is one entry of OrderedToks.
type IDTokens struct {
	ID     string
	Tokens int
}

// MarshalJSON writes the entries as an object in order.
func (o OrderedToks) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(e.ID)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Tokens))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// RequestOut is one request of ScenarioOutput.
type RequestOut struct {
	ID              string    `json:"id"`
	TTFTMs          float64   `json:"ttft_ms"`
	TokenTimesMs    []float64 `json:"token_times_ms"`
	FinishMs        float64   `json:"finish_ms"`
	NumPreemptions  int       `json:"num_preemptions"`
	NumCachedTokens int       `json:"num_cached_tokens"`
}

// Output converts a result to the scenario JSON shape.
func (res *Result) Output() *ScenarioOutput {
	out := &ScenarioOutput{Passes: []PassOut{}, Requests: []RequestOut{}}
	for _, p := range res.Passes {
		po := PassOut{Index: p.Index, StartMs: p.StartMs, EndMs: p.EndMs, FreeBlocks: p.FreeBlocks,
			Scheduled: OrderedToks{}, Preempted: []string{}}
		for _, e := range p.Scheduled {
			po.Scheduled = append(po.Scheduled, IDTokens{res.Requests[e.Req].ID, e.Tokens})
		}
		for _, v := range p.Preempted {
			po.Preempted = append(po.Preempted, res.Requests[v].ID)
		}
		out.Passes = append(out.Passes, po)
	}
	for _, r := range res.Requests {
		tt := r.TokenTimesMs
		if tt == nil {
			tt = []float64{}
		}
		out.Requests = append(out.Requests, RequestOut{ID: r.ID, TTFTMs: r.TTFTMs, TokenTimesMs: tt,
			FinishMs: r.FinishMs, NumPreemptions: r.NumPreemptions, NumCachedTokens: r.NumCachedTokens})
	}
	return out
}
