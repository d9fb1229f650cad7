package oracle

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// Scenario is a hand-written oracle case (issue 4 item 3): an engine, a timing and an
// explicit request list.
type Scenario struct {
	Engine   engine.Spec
	Timing   timing.Timing
	Requests []workload.Request
	// Shared[i] is request i's shared prompt prefix (prefix_group/prefix_len or
	// hash_ids); nil when no request has one.
	Shared []SharedPrefix
	// Disagg, when set, is a disaggregated deployment (disagg_scenario.go); Engine
	// and Timing are then unused (RunDisagg).
	Disagg *DisaggScenario
}

// DefaultScenarioHashBlock is the tokens per hash id when a scenario gives hash_ids
// without hash_block (Mooncake's 512).
const DefaultScenarioHashBlock = 512

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
	// MTP (optional): drafts per decode step and the mean accepted
	// (engine.StepTokens) — TensorRT-LLM's one-model MTP, or SGLang's EAGLE with
	// async_scheduling and enable_mixed_chunk false (engine.Spec.SetDrafts).
	DraftTokens   *int     `json:"draft_tokens"`
	DraftAccepted *float64 `json:"draft_accepted"`
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
	PrefixGroup  *int64   `json:"prefix_group"`
	PrefixLen    *int     `json:"prefix_len"`
	HashIDs      []int64  `json:"hash_ids"`
}

// ParseScenario decodes and validates a scenario held in memory (see ReadScenario).
func ParseScenario(data []byte) (*Scenario, error) {
	return ReadScenario(bytes.NewReader(data))
}

// ReadScenario decodes and validates a scenario as a stream: the requests array is
// read one element at a time, so only the compact requests are held, never the text.
// Unknown fields, missing knobs and non-positive sizes are one-line errors naming
// the field.
func ReadScenario(r io.Reader) (*Scenario, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := expectDelim(dec, '{', "a JSON object"); err != nil {
		return nil, err
	}
	var (
		eng       *rawEngine
		tim       *rawTiming
		dis       *rawDisagg
		hashBlock *int
		sc        = &Scenario{}
		seenKey   = map[string]bool{}
		seenID    = map[string]bool{}
		anyShared bool
	)
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("scenario: %w", err)
		}
		key, _ := t.(string)
		if seenKey[key] {
			return nil, fmt.Errorf("scenario: field %s is given twice", key)
		}
		seenKey[key] = true
		switch key {
		case "engine":
			err = dec.Decode(&eng)
		case "timing":
			err = dec.Decode(&tim)
		case "hash_block":
			err = dec.Decode(&hashBlock)
		case "requests":
			// readRequests words its own errors ("scenario: requests…").
			if err := readRequests(dec, sc, seenID, &anyShared); err != nil {
				return nil, err
			}
		case "disagg":
			// readDisagg words its own errors ("scenario: disagg…").
			if dis, err = readDisagg(dec); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("scenario: json: unknown field %q", key)
		}
		if err != nil {
			return nil, fmt.Errorf("scenario: %w", err)
		}
	}
	if err := expectDelim(dec, '}', "the end of the object"); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("scenario: trailing data after the JSON object")
	}
	if dis != nil {
		return disaggScenario(sc, dis, eng, tim, anyShared)
	}
	if eng == nil {
		return nil, errors.New("scenario: missing field engine")
	}
	if tim == nil {
		return nil, errors.New("scenario: missing field timing")
	}
	if len(sc.Requests) == 0 {
		return nil, errors.New("scenario: requests is empty; give at least one request")
	}
	var err error
	if sc.Engine, err = eng.engine(); err != nil {
		return nil, err
	}
	if sc.Timing, err = tim.timing(); err != nil {
		return nil, err
	}
	hb := DefaultScenarioHashBlock
	if hashBlock != nil {
		if *hashBlock < 1 || *hashBlock > 1<<20 {
			return nil, fmt.Errorf("scenario: hash_block = %d: must be in 1..1048576", *hashBlock)
		}
		hb = *hashBlock
	}
	if !anyShared {
		sc.Shared = nil
		return sc, nil
	}
	for i := range sc.Shared {
		sp := &sc.Shared[i]
		if sp.HashIDs == nil {
			continue
		}
		sp.HashBlock = hb
		if p := sc.Requests[i].PromptLen; len(sp.HashIDs) > (p+hb-1)/hb {
			return nil, fmt.Errorf("scenario: requests[%d].hash_ids: %d ids for prompt_len %d: at most one per hash_block = %d tokens", i, len(sp.HashIDs), p, hb)
		}
	}
	return sc, nil
}

// expectDelim reads the next token and checks it is d.
func expectDelim(dec *json.Decoder, d json.Delim, what string) error {
	t, err := dec.Token()
	if err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	if t != d {
		return fmt.Errorf("scenario: want %s, got %v", what, t)
	}
	return nil
}

// readRequests streams the requests array into sc; every error it returns is
// worded "scenario: requests…".
func readRequests(dec *json.Decoder, sc *Scenario, seen map[string]bool, anyShared *bool) error {
	t, err := dec.Token()
	if err != nil {
		return fmt.Errorf("scenario: requests: %w", err)
	}
	if t == nil { // "requests": null
		return nil
	}
	if t != json.Delim('[') {
		return errors.New("scenario: requests: want an array of requests")
	}
	for i := 0; dec.More(); i++ {
		var rr rawRequest
		if err := dec.Decode(&rr); err != nil {
			return fmt.Errorf("scenario: requests[%d]: %w", i, err)
		}
		r, sp, err := rr.request(i)
		if err != nil {
			return err
		}
		if seen[r.ID] {
			return fmt.Errorf("scenario: requests[%d].id %q is used twice; ids must be unique", i, r.ID)
		}
		seen[r.ID] = true
		sc.Requests = append(sc.Requests, r)
		sc.Shared = append(sc.Shared, sp)
		*anyShared = *anyShared || sp.Len > 0 || sp.HashIDs != nil
	}
	if _, err := dec.Token(); err != nil { // ']'
		return fmt.Errorf("scenario: requests: %w", err)
	}
	return nil
}

func (re *rawEngine) engine() (engine.Spec, error) {
	var e engine.Spec
	if re.Backend == nil {
		return e, fmt.Errorf("scenario: missing engine knob engine.backend (%s)", engine.List(", ", " or "))
	}
	e.Backend = engine.Backend(*re.Backend)
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
	case engine.VLLM:
		err = need(append([]knob{{"max_num_batched_tokens", re.MaxNumBatchedTokens != nil},
			{"max_num_seqs", re.MaxNumSeqs != nil}}, append(common,
			knob{"enable_chunked_prefill", re.EnableChunkedPrefill != nil},
			knob{"long_prefill_token_threshold", re.LongPrefillTokenThreshold != nil},
			knob{"async_scheduling", re.AsyncScheduling != nil})...)...)
	case engine.SGLang:
		err = need(append([]knob{{"chunked_prefill_size", re.ChunkedPrefillSize != nil},
			{"max_prefill_tokens", re.MaxPrefillTokens != nil}, {"enable_mixed_chunk", re.EnableMixedChunk != nil},
			{"max_running_requests", re.MaxRunningRequests != nil},
			{"enable_chunked_prefill", re.EnableChunkedPrefill != nil}}, common...)...)
	case engine.TRTLLM:
		err = need(append([]knob{{"max_batch_size", re.MaxBatchSize != nil},
			{"max_num_tokens", re.MaxNumTokens != nil}, {"enable_chunked_prefill", re.EnableChunkedPrefill != nil},
			{"capacity_policy", re.CapacityPolicy != nil}}, common...)...)
	default:
		return e, fmt.Errorf("scenario: engine.backend = %q: must be %s", e.Backend, engine.List(", ", " or "))
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
	e.SetGPUBlocks(geti(re.NumGPUBlocks))
	e.EnableChunkedPrefill = getb(re.EnableChunkedPrefill)
	e.LongPrefillTokenThreshold = geti(re.LongPrefillTokenThreshold)
	e.EnablePrefixCaching = getb(re.EnablePrefixCaching)
	e.AsyncScheduling = getb(re.AsyncScheduling)
	e.ChunkedPrefillSize = geti(re.ChunkedPrefillSize)
	e.MaxPrefillTokens = geti(re.MaxPrefillTokens)
	e.EnableMixedChunk = getb(re.EnableMixedChunk)
	if e.Backend == engine.SGLang { // SGLang names its seat cap max_running_requests (S-R4)
		if e.MaxNumSeqs = geti(re.MaxRunningRequests); e.MaxNumSeqs <= 0 {
			return e, fmt.Errorf("scenario: engine max_running_requests = %d: must be > 0", e.MaxNumSeqs)
		}
	}
	e.MaxBatchSize = geti(re.MaxBatchSize)
	e.MaxNumTokens = geti(re.MaxNumTokens)
	if re.CapacityPolicy != nil {
		if e.CapacityPolicy, err = capacityPolicy(*re.CapacityPolicy); err != nil {
			return e, err
		}
	}
	e.DraftTokens = geti(re.DraftTokens)
	if re.DraftAccepted != nil {
		e.DraftAccepted = *re.DraftAccepted
	}
	if err := ValidateEngine(e); err != nil {
		return e, fmt.Errorf("scenario: %w", err)
	}
	return e, nil
}

// capacityPolicy reads a scenario's capacity_policy (GUARANTEED_NO_EVICT or
// MAX_UTILIZATION) as the engine's policy; any other value is an error in the
// scenario's spelling (the engine's own check would name its lower-case one).
func capacityPolicy(s string) (string, error) {
	switch s {
	case scenarioNoEvict:
		return engine.PolicyGuaranteedNoEvict, nil
	case scenarioMaxUtilization:
		return engine.PolicyMaxUtilization, nil
	}
	return "", fmt.Errorf("scenario: engine capacity_policy = %q: must be %s or %s", s, scenarioNoEvict, scenarioMaxUtilization)
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

func (rr *rawRequest) request(i int) (workload.Request, SharedPrefix, error) {
	r, err := rr.plain(i)
	if err != nil {
		return r, SharedPrefix{}, err
	}
	return rr.shared(i, r)
}

func (rr *rawRequest) plain(i int) (workload.Request, error) {
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

// shared reads the request's shared-prefix fields: prefix_len (with an optional
// prefix_group, default 0) or hash_ids, each only with prompt_len.
func (rr *rawRequest) shared(i int, r workload.Request) (workload.Request, SharedPrefix, error) {
	var sp SharedPrefix
	f := func(field string) string { return fmt.Sprintf("requests[%d].%s", i, field) }
	if rr.PrefixLen == nil && rr.PrefixGroup == nil && rr.HashIDs == nil {
		return r, sp, nil
	}
	if rr.PromptLen == nil {
		return r, sp, fmt.Errorf("scenario: %s: a shared prefix (prefix_group, prefix_len, hash_ids) needs %s, not prompt_tokens", f("prompt_tokens"), f("prompt_len"))
	}
	if rr.HashIDs != nil {
		if rr.PrefixLen != nil || rr.PrefixGroup != nil {
			return r, sp, fmt.Errorf("scenario: %s and %s are both set; give one", f("hash_ids"), f("prefix_len"))
		}
		for _, h := range rr.HashIDs {
			if h < 0 {
				return r, sp, fmt.Errorf("scenario: %s has id %d: ids must be ≥ 0", f("hash_ids"), h)
			}
		}
		sp.HashIDs = rr.HashIDs
		if sp.HashIDs == nil {
			sp.HashIDs = []int64{}
		}
		return r, sp, nil
	}
	if rr.PrefixLen == nil {
		return r, sp, fmt.Errorf("scenario: %s is set without %s", f("prefix_group"), f("prefix_len"))
	}
	if *rr.PrefixLen < 0 || *rr.PrefixLen > r.PromptLen {
		return r, sp, fmt.Errorf("scenario: %s = %d: must be in 0..prompt_len = %d", f("prefix_len"), *rr.PrefixLen, r.PromptLen)
	}
	if rr.PrefixGroup != nil {
		if *rr.PrefixGroup < 0 {
			return r, sp, fmt.Errorf("scenario: %s = %d: must be ≥ 0", f("prefix_group"), *rr.PrefixGroup)
		}
		sp.Group = uint64(*rr.PrefixGroup)
	}
	sp.Len = *rr.PrefixLen
	return r, sp, nil
}

// Run simulates the scenario with the per-pass log on.
func (sc *Scenario) Run(ctx context.Context) (*Result, error) {
	return sc.Simulate(ctx, Options{PassLog: true})
}

// Simulate runs the scenario with the given options (PassLog off for large runs).
func (sc *Scenario) Simulate(ctx context.Context, opt Options) (*Result, error) {
	s, err := New(sc.Engine, sc.Timing, opt)
	if err != nil {
		return nil, err
	}
	for i, r := range sc.Requests {
		if sc.Shared != nil && (sc.Shared[i].Len > 0 || sc.Shared[i].HashIDs != nil) {
			_, err = s.AddShared(r, sc.Shared[i])
		} else {
			_, err = s.Add(r)
		}
		if err != nil {
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

// Summary is the default output of `aicdb oracle run`: run counters and the 15
// latency/throughput columns, with the evaluator's one quantile rule
// (queueing.Distribution: smallest value whose cumulative weight reaches q).
// TTFT = first token − arrival; ITL = every gap between consecutive tokens of every
// request; TPOT = (finish − first token)/(tokens − 1) per request with ≥ 2 tokens;
// E2E = finish − arrival; throughput = requests / (last finish − first arrival).
type Summary struct {
	Requests        int     `json:"requests"`
	OutputTokens    int     `json:"output_tokens"`
	Passes          int     `json:"passes"`
	ScheduledTokens int     `json:"scheduled_tokens"`
	Preemptions     int     `json:"preemptions"`
	CachedTokens    int     `json:"cached_tokens"`
	EndMs           float64 `json:"end_ms"`

	TTFTMean         float64 `json:"ttft_mean"`
	TTFTP50          float64 `json:"ttft_p50"`
	TTFTP90          float64 `json:"ttft_p90"`
	TTFTP99          float64 `json:"ttft_p99"`
	TTFTP999         float64 `json:"ttft_p999"`
	ITLMean          float64 `json:"itl_mean"`
	ITLP50           float64 `json:"itl_p50"`
	ITLP99           float64 `json:"itl_p99"`
	TPOTMean         float64 `json:"tpot_mean"`
	TPOTP50          float64 `json:"tpot_p50"`
	TPOTP99          float64 `json:"tpot_p99"`
	E2EMean          float64 `json:"e2e_mean"`
	E2EP50           float64 `json:"e2e_p50"`
	E2EP99           float64 `json:"e2e_p99"`
	ThroughputRPS    float64 `json:"throughput_rps"`
	OutputTokensPerS float64 `json:"output_tokens_per_s"`
}

// distOf builds a Distribution from vals (sorted in place; equal values merged
// before the atoms are built).
func distOf(vals []float64) (queueing.Distribution, error) {
	slices.Sort(vals)
	var atoms []queueing.Atom
	for i, v := range vals {
		if i > 0 && v == vals[i-1] {
			atoms[len(atoms)-1].Weight++
			continue
		}
		atoms = append(atoms, queueing.Atom{Value: v, Weight: 1})
	}
	return queueing.NewDistribution(atoms)
}

// valueCounts counts float64 values: open addressing on the value's bits (linear
// probing, load ≤ ½, slot 0 of the key space kept for "empty" by storing bits+1).
// The ITL list is millions of gaps but few distinct pass-time differences, so this
// stays in cache where a Go map or a sort of every gap does not.
type valueCounts struct {
	keys []uint64 // bits(value)+1; 0 = empty
	cnt  []float64
	n    int
}

func (c *valueCounts) add(v, w float64) {
	if 2*(c.n+1) > len(c.keys) {
		c.grow()
	}
	k := math.Float64bits(v) + 1
	mask := uint64(len(c.keys) - 1)
	for i := (k * 0x9E3779B97F4A7C15) >> 20 & mask; ; i = (i + 1) & mask {
		switch c.keys[i] {
		case k:
			c.cnt[i] += w
			return
		case 0:
			c.keys[i], c.cnt[i] = k, w
			c.n++
			return
		}
	}
}

func (c *valueCounts) grow() {
	old, oldCnt := c.keys, c.cnt
	n := max(1024, 2*len(old))
	c.keys, c.cnt, c.n = make([]uint64, n), make([]float64, n), 0
	for i, k := range old {
		if k != 0 {
			c.add(math.Float64frombits(k-1), oldCnt[i])
		}
	}
}

// dist returns the counted values as a Distribution.
func (c *valueCounts) dist() (queueing.Distribution, error) {
	atoms := make([]queueing.Atom, 0, c.n)
	for i, k := range c.keys {
		if k != 0 {
			atoms = append(atoms, queueing.Atom{Value: math.Float64frombits(k - 1), Weight: c.cnt[i]})
		}
	}
	slices.SortFunc(atoms, func(a, b queueing.Atom) int { return cmp.Compare(a.Value, b.Value) })
	return queueing.NewDistribution(atoms)
}

// Summary computes the run's Summary.
func (res *Result) Summary() (Summary, error) {
	s := Summary{Requests: len(res.Requests), Passes: res.NumPasses, ScheduledTokens: res.ScheduledToks, EndMs: res.EndMs}
	n := len(res.Requests)
	ttft, e2e, tpot := make([]float64, 0, n), make([]float64, 0, n), make([]float64, 0, n)
	var own valueCounts
	itl := res.gaps // SummaryOnly: counted as the tokens came
	if itl == nil {
		itl = &own
	}
	first := math.Inf(1)
	for _, r := range res.Requests {
		first = min(first, r.ArrivalMs)
		s.Preemptions += r.NumPreemptions
		s.CachedTokens += r.NumCachedTokens
		k := r.NumTokens
		s.OutputTokens += k
		if k == 0 {
			continue
		}
		ttft = append(ttft, r.TTFTMs)
		e2e = append(e2e, r.FinishMs-r.ArrivalMs)
		for j := 1; j < len(r.TokenTimesMs); j++ {
			own.add(r.TokenTimesMs[j]-r.TokenTimesMs[j-1], 1)
		}
		if k > 1 {
			tpot = append(tpot, (r.FinishMs-r.FirstTokenMs)/float64(k-1))
		}
	}
	itlDist, err := itl.dist()
	if err != nil {
		return s, fmt.Errorf("oracle summary: %w", err)
	}
	for _, d := range []struct {
		vals []float64
		dist *queueing.Distribution
		mean *float64
		qs   []float64
		out  []*float64
	}{
		{ttft, nil, &s.TTFTMean, []float64{0.5, 0.9, 0.99, 0.999}, []*float64{&s.TTFTP50, &s.TTFTP90, &s.TTFTP99, &s.TTFTP999}},
		{nil, &itlDist, &s.ITLMean, []float64{0.5, 0.99}, []*float64{&s.ITLP50, &s.ITLP99}},
		{tpot, nil, &s.TPOTMean, []float64{0.5, 0.99}, []*float64{&s.TPOTP50, &s.TPOTP99}},
		{e2e, nil, &s.E2EMean, []float64{0.5, 0.99}, []*float64{&s.E2EP50, &s.E2EP99}},
	} {
		dist, err := itlDist, error(nil)
		if d.dist == nil {
			dist, err = distOf(d.vals)
		}
		if err != nil {
			return s, fmt.Errorf("oracle summary: %w", err)
		}
		*d.mean = dist.Mean()
		for i, q := range d.qs {
			*d.out[i] = dist.Quantile(q)
		}
	}
	if span := res.EndMs - first; n > 0 && span > 0 {
		s.ThroughputRPS = float64(n) / (span / 1000)
		s.OutputTokensPerS = float64(s.OutputTokens) / (span / 1000)
	}
	return s, nil
}

// WriteLog writes the per-pass log (when the run recorded it) and the per-request
// records as JSON Lines, one object per line, streamed to w:
//
//	{"pass":1,"start_ms":0,"end_ms":1,"scheduled":{"A":8},"preempted":[],"free_blocks":98}
//	{"request":"A","arrival_ms":0,"ttft_ms":1,"finish_ms":4,"num_preemptions":0,"num_cached_tokens":0,"token_times_ms":[1,2,4]}
func (res *Result) WriteLog(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	var b []byte
	num := func(v float64) { b = strconv.AppendFloat(b, v, 'g', -1, 64) }
	str := func(s string) {
		q, _ := json.Marshal(s)
		b = append(b, q...)
	}
	for _, p := range res.Passes {
		b = fmt.Appendf(b[:0], `{"pass":%d,"start_ms":`, p.Index)
		num(p.StartMs)
		b = append(b, `,"end_ms":`...)
		num(p.EndMs)
		b = append(b, `,"scheduled":{`...)
		for i, e := range p.Scheduled {
			if i > 0 {
				b = append(b, ',')
			}
			str(res.Requests[e.Req].ID)
			b = append(b, ':')
			b = strconv.AppendInt(b, int64(e.Tokens), 10)
		}
		b = append(b, `},"preempted":[`...)
		for i, v := range p.Preempted {
			if i > 0 {
				b = append(b, ',')
			}
			str(res.Requests[v].ID)
		}
		b = fmt.Appendf(b, `],"free_blocks":%d}`+"\n", p.FreeBlocks)
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	for _, r := range res.Requests {
		b = append(b[:0], `{"request":`...)
		str(r.ID)
		b = append(b, `,"arrival_ms":`...)
		num(r.ArrivalMs)
		b = append(b, `,"ttft_ms":`...)
		num(r.TTFTMs)
		b = append(b, `,"finish_ms":`...)
		num(r.FinishMs)
		b = fmt.Appendf(b, `,"num_preemptions":%d,"num_cached_tokens":%d,"token_times_ms":[`, r.NumPreemptions, r.NumCachedTokens)
		for i, t := range r.TokenTimesMs {
			if i > 0 {
				b = append(b, ',')
			}
			num(t)
		}
		b = append(b, "]}\n"...)
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadSetup reads a scenario header without requests — {"engine": {...}, "timing":
// {...}}, the same knobs as a scenario — for replaying a stored trace. The timing may
// be omitted (nil is returned) when the caller times passes from perf data.
func ReadSetup(r io.Reader) (engine.Spec, timing.Timing, error) {
	var raw struct {
		Engine *rawEngine `json:"engine"`
		Timing *rawTiming `json:"timing"`
	}
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return engine.Spec{}, nil, fmt.Errorf("scenario: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return engine.Spec{}, nil, errors.New("scenario: trailing data after the JSON object")
	}
	if raw.Engine == nil {
		return engine.Spec{}, nil, errors.New("scenario: missing field engine")
	}
	e, err := raw.Engine.engine()
	if err != nil || raw.Timing == nil {
		return e, nil, err
	}
	t, err := raw.Timing.timing()
	return e, t, err
}
