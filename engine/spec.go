// Package engine holds the scheduler configuration of one serving-engine instance
// (Spec) and the registry of the backends the calendars and the oracle simulate
// (vLLM, TRT-LLM, SGLang). It is a leaf package: the queueing model, the oracle,
// refine, the gate and the CLI read the same Spec and the same registry.
package engine

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// TRT-LLM capacity scheduler policies (SCHEDULERS.md §4.3): T-R1 reserves a
// request's whole KV at admission, T-R2 pauses requests when the pool runs out.
const (
	PolicyGuaranteedNoEvict = "guaranteed_no_evict"
	PolicyMaxUtilization    = "max_utilization"
)

// Spec is the scheduler configuration of one engine instance, shared by the
// queueing model and the oracle. Only the fields of the selected Backend are
// read; the others are ignored (but must not be negative).
//
// vLLM reads MaxNumBatchedTokens, MaxNumSeqs, EnableChunkedPrefill,
// LongPrefillTokenThreshold, AsyncScheduling, BlockSize, KVCapacityTokens.
// vLLM also reads DraftTokens and DraftAccepted (MTP speculative decoding,
// speculative_config). TRT-LLM reads MaxBatchSize, MaxNumTokens, EnableChunkedPrefill, AsyncScheduling
// (the overlap executor), BlockSize (tokens_per_block), KVCapacityTokens,
// CapacityPolicy, DraftTokens and DraftAccepted (MTP). SGLang reads ChunkedPrefillSize, MaxPrefillTokens,
// EnableChunkedPrefill, EnableMixedChunk, MaxNumSeqs (max_running_requests),
// AsyncScheduling (the overlap scheduler), SchedulerRecvInterval, BlockSize (page_size),
// KVCapacityTokens, DraftTokens and DraftAccepted (EAGLE / NEXTN). The oracle also reads
// EnablePrefixCaching.
type Spec struct {
	Backend Backend `json:"backend"` // "vllm" | "trtllm" | "sglang"

	// vLLM (V-R1..V-R12).
	MaxNumBatchedTokens       int  `json:"max_num_batched_tokens,omitempty"` // V-R1 token budget per pass
	MaxNumSeqs                int  `json:"max_num_seqs,omitempty"`           // V-R3 vLLM max_num_seqs; S-R4 SGLang max_running_requests
	EnableChunkedPrefill      bool `json:"enable_chunked_prefill"`
	LongPrefillTokenThreshold int  `json:"long_prefill_token_threshold,omitempty"` // V-R2/V-R3 per-request chunk cap (0 = off)
	// AsyncScheduling: vLLM async scheduling (V-R10..V-R12), the TRT-LLM overlap
	// executor (same effect, §4.2) or the SGLang overlap scheduler (§3.2, off with
	// --disable-overlap-schedule): pass k+1 is scheduled before pass k's outputs
	// are processed.
	AsyncScheduling bool `json:"async_scheduling"`
	// BlockSize is the KV block (vLLM block_size, TRT-LLM tokens_per_block, SGLang
	// page_size) in tokens.
	BlockSize int `json:"block_size,omitempty"`
	// KVCapacityTokens is the KV pool in tokens (whole blocks count); 0 = unbounded
	// for the queueing model. The oracle needs a bounded pool: it holds
	// GPUBlocks() = KVCapacityTokens/BlockSize + 1 blocks (block 0 is vLLM's null
	// block; the scenario knob num_gpu_blocks). The quantitative tier models vLLM
	// recompute preemption (V-R6), SGLang reservation and retraction (S-R4/S-R5),
	// TRT-LLM GUARANTEED_NO_EVICT reservations (T-R1) and MAX_UTILIZATION pausing
	// (T-R2); the screening tier only GUARANTEED_NO_EVICT.
	KVCapacityTokens int `json:"kv_capacity_tokens,omitempty"`
	// EnablePrefixCaching shares cached prompt blocks between requests in the
	// oracle's KV pool (the queueing model takes prefix caching from its options).
	EnablePrefixCaching bool `json:"enable_prefix_caching,omitempty"`
	// MaxModelLen is the longest request, prompt plus output tokens, the engine
	// accepts (vLLM max_model_len, TensorRT-LLM max_seq_len, SGLang
	// context_length): each rejects a longer one at the API, which the model does
	// not represent, so queueing's input check refuses a workload that has one.
	// 0 = not set by the config.
	MaxModelLen int `json:"max_model_len,omitempty"`
	// NoPrefixReuse: the engine's prefix cache is turned off by its config (vLLM
	// enable_prefix_caching false, TensorRT-LLM kv_cache_config.enable_block_reuse
	// false, SGLang disable_radix_cache): nothing is reused, so a workload's
	// shared prefix is computed like the rest of its prompt. The model reads a
	// workload prefix as cached, so it refuses the two together (queueing's input
	// check); false is every engine's default, a prefix cache on.
	NoPrefixReuse bool `json:"no_prefix_reuse,omitempty"`

	// SGLang (S-R1..S-R7).
	ChunkedPrefillSize int  `json:"chunked_prefill_size,omitempty"` // S-R4 shared per-pass prompt budget
	MaxPrefillTokens   int  `json:"max_prefill_tokens,omitempty"`   // S-R4 second prompt cap
	EnableMixedChunk   bool `json:"enable_mixed_chunk"`             // S-R4 decodes ride along prefill batches
	// SchedulerRecvInterval is SGLang's scheduler_recv_interval (S-R7): after a
	// decode-only batch the scheduler receives new requests only every that many
	// iterations. 0 or 1: every iteration (the default).
	SchedulerRecvInterval int `json:"scheduler_recv_interval,omitempty"`

	// TRT-LLM (T-R1..T-R3).
	MaxBatchSize   int    `json:"max_batch_size,omitempty"`  // T-R1/T-R3
	MaxNumTokens   int    `json:"max_num_tokens,omitempty"`  // T-R3 token budget
	CapacityPolicy string `json:"capacity_policy,omitempty"` // "guaranteed_no_evict" | "max_utilization"
	// BatchWaitTimeoutIters and BatchWaitMaxTokensRatio are TensorRT-LLM's batch
	// waiting (T-R6; batch_wait_timeout_iters, batch_wait_max_tokens_ratio): the
	// executor holds back a schedule's context requests while generation
	// requests run, until the schedule's tokens reach BatchWaitMaxTokensRatio ×
	// max_num_tokens or it has held contexts BatchWaitTimeoutIters times since
	// it last let them through. It waits only when both are > 0 (BatchWaiting);
	// 0 is the engine's default, no waiting.
	BatchWaitTimeoutIters   int     `json:"batch_wait_timeout_iters,omitempty"`
	BatchWaitMaxTokensRatio float64 `json:"batch_wait_max_tokens_ratio,omitempty"`
	// DraftTokens is the MTP draft length of one decode step: vLLM's MTP
	// speculative decoding (speculative_config num_speculative_tokens), where a
	// decode step schedules 1 + DraftTokens tokens against the token budget,
	// truncated to what is left of it, with KV lookahead slots for the drafts
	// (V-S1..V-S4, docs/queueing.md); TensorRT-LLM's
	// one-model MTP or EAGLE3 (speculative_config num_nextn_predict_layers /
	// max_draft_len), where every decode step of every request verifies 1 + DraftTokens tokens and
	// T-R3 charges them all to max_num_tokens; or SGLang's EAGLE chain
	// (speculative_algorithm NEXTN / EAGLE, speculative_num_steps, topk 1), whose
	// decode step verifies 1 + DraftTokens tokens per request in a decode-only
	// batch (SetDrafts: the overlap scheduler and mixed chunk are off). 0 = no
	// speculative decoding. Validate refuses drafts elsewhere.
	DraftTokens int `json:"draft_tokens,omitempty"`
	// DraftAccepted is the mean number of drafts accepted per decode step, in
	// [0, DraftTokens]: a property of the model and the data (aiconfigurator's
	// nextn_accepted), not of the scheduler. StepTokens turns it into each step's
	// output.
	DraftAccepted float64 `json:"draft_accepted,omitempty"`
	// DraftMethod and DraftModel name a separate drafter: an EAGLE or EAGLE3
	// head (vLLM speculative_config method "eagle" / "eagle3" and its model;
	// SGLang speculative_algorithm EAGLE / EAGLE3 and speculative_draft_model_path;
	// TensorRT-LLM speculative_config decoding_type Eagle, one-model, and its
	// speculative_model_dir). vLLM schedules its drafts exactly as MTP's (the
	// same proposer path: V-S1..V-S4), SGLang as NEXTN's (the same EAGLE worker,
	// S-R3), TensorRT-LLM as one-model MTP's (the one-model EAGLE3 mode shares
	// every scheduling property with it: overlap scheduler, KV rewind of rejected
	// drafts, drafts against max_num_tokens, T-R3), and the pass timing prices
	// each draft as aiconfigurator prices any draft, one target-sized layer
	// (mtp_scale_factor), which such a one-layer head is. "" = the target's own
	// MTP layers (or no drafts).
	DraftMethod string `json:"draft_method,omitempty"`
	DraftModel  string `json:"draft_model,omitempty"`

	// Memory keys of the engine's own config (queueing/engineconf) that size the
	// KV pool when it is derived from GPU memory (refine.KVPoolTokens, perfdb
	// KVPoolKnobs); the zero value keeps the engine's default. A KVCapacityTokens
	// the config set replaces (vLLM) or caps (TensorRT-LLM, SGLang) the pool
	// they size (refine.EnginePool).
	//
	// MemFraction is vLLM gpu_memory_utilization, TensorRT-LLM
	// free_gpu_memory_fraction or SGLang mem_fraction_static, in (0, 1].
	MemFraction float64 `json:"mem_fraction,omitempty"`
	// KVCacheMemoryBytes is vLLM kv_cache_memory_bytes: the KV pool per GPU in
	// bytes, in place of the fraction rule.
	KVCacheMemoryBytes int64 `json:"kv_cache_memory_bytes,omitempty"`
	// CUDAGraphMaxBS is SGLang's cuda_graph_max_bs (max of cuda_graph_bs), from
	// which SGLang derives its default mem_fraction_static.
	CUDAGraphMaxBS int `json:"cuda_graph_max_bs,omitempty"`
	// DisableCUDAGraph is SGLang's disable_cuda_graph (vLLM's enforce_eager,
	// TensorRT-LLM's cuda_graph_config: null or use_cuda_graph: false):
	// passes launch without CUDA graphs. No scheduling rule reads it, nor the KV
	// pool: SGLang 0.5.x reserves cuda_graph_max_bs·2 MiB in its default
	// mem_fraction_static whether it captures graphs or not, and vLLM sizes its
	// pool from gpu_memory_utilization either way. It is recorded so a deployment launches
	// what was predicted, and the CLI warns that decode timing, measured with
	// graphs, may be optimistic (engineconf.Config.TimingLine).
	DisableCUDAGraph bool `json:"disable_cuda_graph,omitempty"`
	// KVCacheDtype is the config's KV-cache dtype as a perf-data KV quant
	// (bfloat16, fp8, int8); "" = auto (the model's). It must agree with the
	// KV quant the point is timed with (engineconf.CheckKVQuant).
	KVCacheDtype string `json:"kv_cache_dtype,omitempty"`

	// StageMs is the additive per-request stage time (encoder latency + request
	// dispatch overhead) added to TTFT and E2E (QUEUEING.md §4). 0 by default.
	StageMs float64 `json:"stage_ms,omitempty"`
}

// Validate reports the first invalid field of s as a one-line error naming it.
// It checks ranges only; calendar-specific restrictions (a KV capacity one request
// cannot fit, a prompt that cannot fit a chunked-prefill-off budget) are reported
// by the evaluators, which know the workload.
func (s Spec) Validate() error {
	neg := []struct {
		name string
		v    int
	}{
		{"max_num_batched_tokens", s.MaxNumBatchedTokens}, {"max_num_seqs", s.MaxNumSeqs},
		{"long_prefill_token_threshold", s.LongPrefillTokenThreshold}, {"block_size", s.BlockSize},
		{"kv_capacity_tokens", s.KVCapacityTokens}, {"chunked_prefill_size", s.ChunkedPrefillSize},
		{"max_prefill_tokens", s.MaxPrefillTokens}, {"max_batch_size", s.MaxBatchSize},
		{"max_num_tokens", s.MaxNumTokens}, {"cuda_graph_max_bs", s.CUDAGraphMaxBS},
		{"draft_tokens", s.DraftTokens}, {"max_model_len", s.MaxModelLen},
		{"batch_wait_timeout_iters", s.BatchWaitTimeoutIters}, {"scheduler_recv_interval", s.SchedulerRecvInterval},
	}
	for _, f := range neg {
		if f.v < 0 {
			return fmt.Errorf("engine %s = %d: must be ≥ 0", f.name, f.v)
		}
	}
	if !(s.MemFraction >= 0 && s.MemFraction <= 1) {
		return fmt.Errorf("engine mem_fraction = %v: must be in (0, 1] (0 = the engine's default)", s.MemFraction)
	}
	if !(s.BatchWaitMaxTokensRatio >= 0 && s.BatchWaitMaxTokensRatio <= 1) {
		return fmt.Errorf("engine batch_wait_max_tokens_ratio = %v: must be in [0, 1] (a fraction of max_num_tokens; 0 = no batch waiting)", s.BatchWaitMaxTokensRatio)
	}
	if s.KVCacheMemoryBytes < 0 {
		return fmt.Errorf("engine kv_cache_memory_bytes = %d: must be ≥ 0", s.KVCacheMemoryBytes)
	}
	if !(s.StageMs >= 0) || s.StageMs > 1e12 {
		return fmt.Errorf("engine stage_ms = %v: must be a finite number ≥ 0", s.StageMs)
	}
	if err := s.validateDrafts(); err != nil {
		return err
	}
	if s.NoPrefixReuse && s.EnablePrefixCaching {
		return fmt.Errorf("engine no_prefix_reuse and enable_prefix_caching are both set: the prefix cache is either on or off; drop one")
	}
	c, ok := s.Backend.Calendar()
	if !ok {
		return fmt.Errorf("engine backend %q: unknown; use %s", string(s.Backend), nameList())
	}
	return c.Validate(s)
}

// maxDraftTokens bounds DraftTokens (a step's output fits an entry's counter).
const maxDraftTokens = 64

// validateDrafts checks the speculative-decoding knobs: a draft length in
// [0, 64], an acceptance in [0, DraftTokens], and drafts only where they are
// modelled — vLLM's MTP (V-S1..V-S4; a step whose KV slots would preempt is
// refused at run time), TensorRT-LLM's one-model MTP or EAGLE3 under GUARANTEED_NO_EVICT, whose
// reservation has no draft term (T-R1; MAX_UTILIZATION's one-step need of
// 1 + drafts blocks, T-R2, is not), and SGLang's EAGLE chain with the overlap
// scheduler and mixed chunk off, as SGLang's server arguments turn them off for
// it (SetDrafts).
func (s Spec) validateDrafts() error {
	if s.DraftTokens > maxDraftTokens {
		return fmt.Errorf("engine draft_tokens = %d: must be ≤ %d", s.DraftTokens, maxDraftTokens)
	}
	if !(s.DraftAccepted >= 0 && s.DraftAccepted <= float64(s.DraftTokens)) {
		return fmt.Errorf("engine draft_accepted = %v: must be in [0, draft_tokens = %d] (the mean drafts accepted per decode step)", s.DraftAccepted, s.DraftTokens)
	}
	if err := s.validateDrafter(); err != nil {
		return err
	}
	if s.DraftTokens == 0 {
		return nil
	}
	if !DraftsModelled(s.Backend) {
		return fmt.Errorf("engine draft_tokens = %d: speculative decoding is modelled for vLLM's MTP, TensorRT-LLM's one-model MTP and SGLang's EAGLE/NEXTN only, not for %s; drop the drafts", s.DraftTokens, s.Backend)
	}
	switch s.Backend {
	case TRTLLM:
		if s.CapacityPolicy == PolicyMaxUtilization {
			return fmt.Errorf("engine draft_tokens = %d: MTP under capacity_policy max_utilization is not modelled (its one-step KV need counts the drafts, T-R2); use guaranteed_no_evict", s.DraftTokens)
		}
	case SGLang:
		if s.AsyncScheduling || s.EnableMixedChunk {
			return fmt.Errorf("engine draft_tokens = %d: SGLang runs EAGLE/NEXTN speculative decoding without the overlap scheduler and without mixed chunk (its server arguments turn both off); set async_scheduling false and enable_mixed_chunk false", s.DraftTokens)
		}
	}
	return nil
}

// BatchWaiting reports whether a TensorRT-LLM engine holds back context
// requests (T-R6): only with both batch_wait_timeout_iters and
// batch_wait_max_tokens_ratio above 0 — with either at 0 the executor's stop
// test (iterations held ≥ the timeout, or tokens ≥ ratio × max_num_tokens)
// holds at once.
func (s Spec) BatchWaiting() bool {
	return s.Backend == TRTLLM && s.BatchWaitTimeoutIters > 0 && s.BatchWaitMaxTokensRatio > 0
}

// RecvEvery is the iteration interval of an SGLang engine's request receipt
// after decode-only batches (S-R7, scheduler_recv_interval), or 0 when it
// receives at every iteration (another backend, or an interval of 0 or 1).
func (s Spec) RecvEvery() int {
	if s.Backend != SGLang || s.SchedulerRecvInterval <= 1 {
		return 0
	}
	return s.SchedulerRecvInterval
}

// DraftMethods are the separate drafters modelled (Spec.DraftMethod: vLLM's
// speculative_config methods, SGLang's speculative_algorithm with a draft model;
// TensorRT-LLM's decoding_type Eagle is eagle3).
var DraftMethods = []string{"eagle", "eagle3"}

// SeparateDrafter reports drafts proposed by a separate drafter (DraftMethod)
// rather than the target's own MTP layers.
func (s Spec) SeparateDrafter() bool { return s.DraftMethod != "" }

// validateDrafter checks the separate drafter: a DraftMethods method (on
// TensorRT-LLM EAGLE3 only: its one-model EAGLE mode), with its checkpoint and
// drafts; a checkpoint only with a method.
func (s Spec) validateDrafter() error {
	switch {
	case s.DraftMethod == "" && s.DraftModel != "":
		return fmt.Errorf("engine draft_model = %q without draft_method: a drafter checkpoint runs only as an EAGLE / EAGLE3 drafter (the MTP drafter is the model's own layers); set draft_method or drop draft_model", s.DraftModel)
	case s.DraftMethod == "":
		return nil
	case !slices.Contains(DraftMethods, s.DraftMethod):
		return fmt.Errorf("engine draft_method = %q: unknown; use %s (or none for the model's own MTP layers)", s.DraftMethod, strings.Join(DraftMethods, ", "))
	case s.Backend == TRTLLM && s.DraftMethod != "eagle3":
		return fmt.Errorf("engine draft_method = %q: TensorRT-LLM's PyTorch flow drafts with an EAGLE3 head (speculative_config decoding_type Eagle); use eagle3", s.DraftMethod)
	case s.DraftModel == "":
		return fmt.Errorf("engine draft_method = %q: needs draft_model, the drafter's checkpoint (vLLM speculative_config model, SGLang speculative_draft_model_path, TensorRT-LLM speculative_config speculative_model_dir)", s.DraftMethod)
	case s.DraftTokens == 0:
		return fmt.Errorf("engine draft_method = %q: needs draft_tokens ≥ 1 (vLLM speculative_config num_speculative_tokens, SGLang speculative_num_steps, TensorRT-LLM speculative_config max_draft_len)", s.DraftMethod)
	}
	return nil
}

// DraftsModelled reports whether MTP drafts are modelled on backend b: vLLM's
// MTP, TensorRT-LLM's one-model MTP and SGLang's EAGLE / NEXTN (validateDrafts).
func DraftsModelled(b Backend) bool { return b == VLLM || b == TRTLLM || b == SGLang }

// SetDrafts sets the MTP draft length k and the mean drafts accepted per decode
// step a. On SGLang, drafts (k > 0) also turn the overlap scheduler and mixed
// chunk off, as SGLang's server arguments do for EAGLE / NEXTN
// (_handle_speculative_decoding: "Overlap scheduler is disabled …" unless the
// beta SGLANG_ENABLE_SPEC_V2 is set, "Mixed chunked prefill is disabled because
// of using eagle speculative decoding"). Validate checks the values.
func (s *Spec) SetDrafts(k int, a float64) {
	s.DraftTokens, s.DraftAccepted = k, a
	if k > 0 && s.Backend == SGLang {
		s.AsyncScheduling, s.EnableMixedChunk = false, false
	}
}

// StepTokens is the number of output tokens the m-th decode step (m ≥ 1) of a
// request emits when accepted drafts per step average accepted:
// 1 + ⌊m·accepted⌋ − ⌊(m−1)·accepted⌋. Over m steps the accepted drafts sum to
// ⌊m·accepted⌋, so the mean acceptance is exact and the sequence is the same in
// the queueing model and the oracle (a deterministic stand-in for the random
// acceptance, as fixed lengths stand in for random ones). 1 without drafts.
func StepTokens(accepted float64, m int) int {
	if !(accepted > 0) || m < 1 {
		return 1
	}
	return 1 + int(math.Floor(float64(m)*accepted)) - int(math.Floor(float64(m-1)*accepted))
}

// TokenBudget is the per-pass token budget of the engine (vLLM
// max_num_batched_tokens, TRT-LLM max_num_tokens, SGLang chunked_prefill_size, or
// max_prefill_tokens when SGLang chunking is off). An unknown backend reads
// max_num_batched_tokens.
func (s Spec) TokenBudget() int {
	if c, ok := s.Backend.Calendar(); ok {
		return c.TokenBudget(s)
	}
	return s.MaxNumBatchedTokens
}

// SeatCap is the cap on requests in the running set. An unknown backend reads
// max_num_seqs.
func (s Spec) SeatCap() int {
	if c, ok := s.Backend.Calendar(); ok {
		return c.SeatCap(s)
	}
	return s.MaxNumSeqs
}

// SetTokenBudget sets s's per-pass token budget to n (see Calendar); nothing for
// an unknown backend.
func (s *Spec) SetTokenBudget(n int) {
	if c, ok := s.Backend.Calendar(); ok {
		c.SetTokenBudget(s, n)
	}
}

// SetSeatCap sets s's running-set cap to n (see Calendar); an unknown backend
// sets max_num_seqs.
func (s *Spec) SetSeatCap(n int) {
	if c, ok := s.Backend.Calendar(); ok {
		c.SetSeatCap(s, n)
		return
	}
	s.MaxNumSeqs = n
}

// Traits are the scheduling properties of s's backend under s's knobs; the zero
// Traits for an unknown backend.
func (s Spec) Traits() Traits {
	if c, ok := s.Backend.Calendar(); ok {
		return c.Traits(s)
	}
	return Traits{}
}

// GPUBlocks is the oracle's KV pool in blocks: the whole blocks of
// KVCapacityTokens plus vLLM's reserved null block 0. BlockSize must be > 0.
func (s Spec) GPUBlocks() int { return s.KVCapacityTokens/s.BlockSize + 1 }

// SetGPUBlocks sets the KV pool to n blocks of BlockSize tokens, block 0 being the
// reserved null block (the oracle scenario knob num_gpu_blocks).
func (s *Spec) SetGPUBlocks(n int) { s.KVCapacityTokens = (n - 1) * s.BlockSize }
