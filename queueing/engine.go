package queueing

import (
	"fmt"
	"strings"
)

// Backends known to the calendars.
const (
	BackendVLLM   = "vllm"
	BackendTRTLLM = "trtllm"
	BackendSGLang = "sglang"
)

// TRT-LLM capacity scheduler policies (SCHEDULERS.md §4.3).
const (
	PolicyGuaranteedNoEvict = "guaranteed_no_evict"
	PolicyMaxUtilization    = "max_utilization"
)

// EngineSpec is the scheduler configuration of one engine instance. Only the fields
// of the selected Backend are read by the calendars; the others are ignored (but
// must not be negative).
//
// vLLM reads MaxNumBatchedTokens, MaxNumSeqs, EnableChunkedPrefill,
// LongPrefillTokenThreshold, AsyncScheduling, BlockSize, KVCapacityTokens.
// TRT-LLM reads MaxBatchSize, MaxNumTokens, EnableChunkedPrefill, AsyncScheduling
// (the overlap executor), BlockSize (tokens_per_block), KVCapacityTokens,
// CapacityPolicy. SGLang reads ChunkedPrefillSize, MaxPrefillTokens,
// EnableChunkedPrefill, EnableMixedChunk, MaxNumSeqs (max_running_requests),
// BlockSize (page_size), KVCapacityTokens.
type EngineSpec struct {
	Backend string `json:"backend"` // "vllm" | "trtllm" | "sglang"

	// vLLM (V-R1..V-R12).
	MaxNumBatchedTokens       int  `json:"max_num_batched_tokens,omitempty"`
	MaxNumSeqs                int  `json:"max_num_seqs,omitempty"` // vLLM max_num_seqs; SGLang max_running_requests
	EnableChunkedPrefill      bool `json:"enable_chunked_prefill"`
	LongPrefillTokenThreshold int  `json:"long_prefill_token_threshold,omitempty"`
	// AsyncScheduling: vLLM async scheduling (V-R10..V-R12) or the TRT-LLM overlap
	// executor (same effect, §4.2): pass k+1 is scheduled before pass k's outputs
	// are processed. Not modelled for SGLang (rejected there).
	AsyncScheduling bool `json:"async_scheduling"`
	// BlockSize is the KV block (vLLM block_size, TRT-LLM tokens_per_block, SGLang
	// page_size) in tokens.
	BlockSize int `json:"block_size,omitempty"`
	// KVCapacityTokens is the KV pool in tokens (whole blocks count); 0 = unbounded.
	// The quantitative tier models vLLM recompute preemption (V-R6), SGLang
	// reservation and retraction (S-R4/S-R5), TRT-LLM GUARANTEED_NO_EVICT
	// reservations (T-R1) and MAX_UTILIZATION pausing (T-R2); the screening tier
	// only GUARANTEED_NO_EVICT.
	KVCapacityTokens int `json:"kv_capacity_tokens,omitempty"`

	// SGLang (S-R1..S-R6).
	ChunkedPrefillSize int  `json:"chunked_prefill_size,omitempty"`
	MaxPrefillTokens   int  `json:"max_prefill_tokens,omitempty"`
	EnableMixedChunk   bool `json:"enable_mixed_chunk"`

	// TRT-LLM (T-R1..T-R3).
	MaxBatchSize   int    `json:"max_batch_size,omitempty"`
	MaxNumTokens   int    `json:"max_num_tokens,omitempty"`
	CapacityPolicy string `json:"capacity_policy,omitempty"` // "guaranteed_no_evict" | "max_utilization"

	// StageMs is the additive per-request stage time (encoder latency + request
	// dispatch overhead) added to TTFT and E2E (QUEUEING.md §4). 0 by default.
	StageMs float64 `json:"stage_ms,omitempty"`
}

// DefaultEngine returns the scheduler defaults of backend at version
// (SCHEDULERS.md §6, the H100/H200-class row: ≥ 70 GiB, non-A100). version may be
// empty (latest known) or a dotted version like "0.11.0"; the defaults encoded here
// are the 2025–26 ones and do not vary by version yet, but a malformed version is
// rejected so that a later version table cannot silently misread it.
//
// SGLang's enable_mixed_chunk is true: the product's default deployment rule
// (QUEUEING.md §3), not the engine's own default (false). SGLang's overlap
// scheduler is not modelled, so AsyncScheduling is false for it.
func DefaultEngine(backend, version string) (EngineSpec, error) {
	if err := checkVersion(version); err != nil {
		return EngineSpec{}, err
	}
	switch strings.ToLower(backend) {
	case BackendVLLM:
		return EngineSpec{
			Backend:              BackendVLLM,
			MaxNumBatchedTokens:  8192, // API server, ≥ 70 GiB non-A100
			MaxNumSeqs:           1024,
			EnableChunkedPrefill: true,
			AsyncScheduling:      true, // resolves to true when compatible (V-R10)
			BlockSize:            16,
		}, nil
	case BackendTRTLLM:
		return EngineSpec{
			Backend:              BackendTRTLLM,
			MaxBatchSize:         2048,
			MaxNumTokens:         8192,
			EnableChunkedPrefill: false,
			AsyncScheduling:      true, // overlap executor on by default (§4.2)
			BlockSize:            32,
			CapacityPolicy:       PolicyGuaranteedNoEvict,
		}, nil
	case BackendSGLang:
		return EngineSpec{
			Backend:              BackendSGLang,
			ChunkedPrefillSize:   8192,
			MaxPrefillTokens:     16384,
			EnableChunkedPrefill: true,
			EnableMixedChunk:     true,
			MaxNumSeqs:           2048,
			BlockSize:            1,
		}, nil
	}
	return EngineSpec{}, fmt.Errorf("backend %q: unknown; use vllm, trtllm or sglang", backend)
}

// checkVersion accepts "", "latest" or a dotted version whose components start
// with a digit in the first two components ("0.11.0", "v1.3.0rc20", "0.5.14.post1").
func checkVersion(v string) error {
	if v == "" || v == "latest" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(v, "v"), ".")
	ok := len(parts) >= 2
	for i, p := range parts {
		if p == "" || (i < 2 && (p[0] < '0' || p[0] > '9')) {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("version %q: want a dotted version such as 0.11.0 (or empty for the latest defaults)", v)
	}
	return nil
}

// Validate reports the first invalid field of e as a one-line error naming it.
// It checks ranges only; calendar-specific restrictions (a KV capacity one request
// cannot fit, a prompt that cannot fit a
// chunked-prefill-off budget) are reported by the evaluators, which know the
// workload.
func (e EngineSpec) Validate() error {
	neg := []struct {
		name string
		v    int
	}{
		{"max_num_batched_tokens", e.MaxNumBatchedTokens}, {"max_num_seqs", e.MaxNumSeqs},
		{"long_prefill_token_threshold", e.LongPrefillTokenThreshold}, {"block_size", e.BlockSize},
		{"kv_capacity_tokens", e.KVCapacityTokens}, {"chunked_prefill_size", e.ChunkedPrefillSize},
		{"max_prefill_tokens", e.MaxPrefillTokens}, {"max_batch_size", e.MaxBatchSize},
		{"max_num_tokens", e.MaxNumTokens},
	}
	for _, f := range neg {
		if f.v < 0 {
			return fmt.Errorf("engine %s = %d: must be ≥ 0", f.name, f.v)
		}
	}
	if !(e.StageMs >= 0) || e.StageMs > 1e12 {
		return fmt.Errorf("engine stage_ms = %v: must be a finite number ≥ 0", e.StageMs)
	}
	pos := func(name string, v int) error {
		if v <= 0 {
			return fmt.Errorf("engine %s = %d: must be > 0 for backend %s", name, v, e.Backend)
		}
		return nil
	}
	var err error
	switch e.Backend {
	case BackendVLLM:
		for _, f := range []struct {
			n string
			v int
		}{{"max_num_batched_tokens", e.MaxNumBatchedTokens}, {"max_num_seqs", e.MaxNumSeqs}, {"block_size", e.BlockSize}} {
			if err = pos(f.n, f.v); err != nil {
				return err
			}
		}
	case BackendTRTLLM:
		for _, f := range []struct {
			n string
			v int
		}{{"max_batch_size", e.MaxBatchSize}, {"max_num_tokens", e.MaxNumTokens}, {"block_size", e.BlockSize}} {
			if err = pos(f.n, f.v); err != nil {
				return err
			}
		}
		if e.EnableChunkedPrefill && e.MaxNumTokens < e.BlockSize {
			return fmt.Errorf("engine max_num_tokens = %d: with chunked prefill a chunk is a multiple of block_size (%d); raise max_num_tokens", e.MaxNumTokens, e.BlockSize)
		}
		switch e.CapacityPolicy {
		case PolicyGuaranteedNoEvict, PolicyMaxUtilization:
		default:
			return fmt.Errorf("engine capacity_policy %q: use guaranteed_no_evict or max_utilization", e.CapacityPolicy)
		}
	case BackendSGLang:
		for _, f := range []struct {
			n string
			v int
		}{{"max_num_seqs", e.MaxNumSeqs}, {"block_size", e.BlockSize}, {"max_prefill_tokens", e.MaxPrefillTokens}} {
			if err = pos(f.n, f.v); err != nil {
				return err
			}
		}
		if e.EnableChunkedPrefill {
			if err = pos("chunked_prefill_size", e.ChunkedPrefillSize); err != nil {
				return err
			}
			if e.ChunkedPrefillSize < e.BlockSize {
				return fmt.Errorf("engine chunked_prefill_size = %d: must be ≥ block_size (page size) %d", e.ChunkedPrefillSize, e.BlockSize)
			}
		}
		if e.AsyncScheduling {
			return fmt.Errorf("engine async_scheduling: the SGLang overlap scheduler is not modelled by the calendar; set async_scheduling=false")
		}
	default:
		return fmt.Errorf("engine backend %q: unknown; use vllm, trtllm or sglang", e.Backend)
	}
	return nil
}

// budget returns the per-pass token budget of the engine (vLLM
// max_num_batched_tokens, TRT-LLM max_num_tokens, SGLang chunked_prefill_size, or
// max_prefill_tokens when SGLang chunking is off).
func (e EngineSpec) budget() int {
	switch e.Backend {
	case BackendTRTLLM:
		return e.MaxNumTokens
	case BackendSGLang:
		if e.EnableChunkedPrefill {
			return e.ChunkedPrefillSize
		}
		return e.MaxPrefillTokens
	}
	return e.MaxNumBatchedTokens
}

// SeatCap is the cap on requests in the running set (vLLM/SGLang max_num_seqs,
// TRT-LLM max_batch_size): the concurrency of a saturated engine.
func (e EngineSpec) SeatCap() int { return e.seqCap() }

// seqCap returns the cap on requests in the running set.
func (e EngineSpec) seqCap() int {
	if e.Backend == BackendTRTLLM {
		return e.MaxBatchSize
	}
	return e.MaxNumSeqs
}
