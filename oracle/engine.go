package oracle

import (
	"fmt"
)

// Backend names the engine whose scheduler the oracle simulates.
type Backend string

// Simulated backends.
const (
	VLLM   Backend = "vllm"
	SGLang Backend = "sglang"
	TRTLLM Backend = "trtllm"
)

// TRT-LLM capacity policies (SCHEDULERS.md §4.3).
const (
	GuaranteedNoEvict = "GUARANTEED_NO_EVICT"
	MaxUtilization    = "MAX_UTILIZATION"
)

// Engine holds the scheduler knobs of one engine instance. Sizes are in tokens unless
// named blocks. Only the knobs of the selected Backend are consulted.
type Engine struct {
	Backend Backend

	// vLLM v1 (SCHEDULERS.md §2).
	MaxNumBatchedTokens       int  // V-R1 token budget per pass
	MaxNumSeqs                int  // V-R3 cap on len(running)
	EnableChunkedPrefill      bool // V-R3
	LongPrefillTokenThreshold int  // V-R2/V-R3 per-request chunk cap (0 = off)
	AsyncScheduling           bool // V-R10..V-R12

	// KV pool, shared by all backends: NumGPUBlocks blocks of BlockSize tokens. For
	// vLLM block 0 is the null block, so usable = NumGPUBlocks − 1.
	BlockSize           int
	NumGPUBlocks        int
	EnablePrefixCaching bool

	// SGLang (SCHEDULERS.md §3).
	ChunkedPrefillSize int  // S-R4 shared per-pass prompt budget
	MaxPrefillTokens   int  // S-R4 second prompt cap
	EnableMixedChunk   bool // S-R4 decodes ride along prefill batches
	MaxRunningRequests int  // S-R4 request slots

	// TRT-LLM (SCHEDULERS.md §4).
	MaxBatchSize   int    // T-R1/T-R3
	MaxNumTokens   int    // T-R3 token budget
	CapacityPolicy string // T-R1 GUARANTEED_NO_EVICT | T-R2 MAX_UTILIZATION
}

// Validate reports the first knob that is out of range, naming it.
func (e *Engine) Validate() error {
	pos := func(name string, v int) error {
		if v <= 0 {
			return fmt.Errorf("engine %s = %d: must be > 0", name, v)
		}
		return nil
	}
	if err := pos("block_size", e.BlockSize); err != nil {
		return err
	}
	if e.NumGPUBlocks < 2 {
		return fmt.Errorf("engine num_gpu_blocks = %d: must be ≥ 2 (block 0 is the null block)", e.NumGPUBlocks)
	}
	switch e.Backend {
	case VLLM:
		if err := pos("max_num_batched_tokens", e.MaxNumBatchedTokens); err != nil {
			return err
		}
		if err := pos("max_num_seqs", e.MaxNumSeqs); err != nil {
			return err
		}
		if e.LongPrefillTokenThreshold < 0 {
			return fmt.Errorf("engine long_prefill_token_threshold = %d: must be ≥ 0 (0 = off)", e.LongPrefillTokenThreshold)
		}
	case SGLang:
		if e.EnableChunkedPrefill {
			if err := pos("chunked_prefill_size", e.ChunkedPrefillSize); err != nil {
				return err
			}
		}
		if err := pos("max_prefill_tokens", e.MaxPrefillTokens); err != nil {
			return err
		}
		if err := pos("max_running_requests", e.MaxRunningRequests); err != nil {
			return err
		}
	case TRTLLM:
		if err := pos("max_batch_size", e.MaxBatchSize); err != nil {
			return err
		}
		if err := pos("max_num_tokens", e.MaxNumTokens); err != nil {
			return err
		}
		if e.CapacityPolicy != GuaranteedNoEvict && e.CapacityPolicy != MaxUtilization {
			return fmt.Errorf("engine capacity_policy = %q: must be %s or %s", e.CapacityPolicy, GuaranteedNoEvict, MaxUtilization)
		}
	default:
		return fmt.Errorf("engine backend = %q: must be vllm, sglang or trtllm", e.Backend)
	}
	return nil
}

// usableBlocks is the number of blocks a request can ever hold.
func (e *Engine) usableBlocks() int { return e.NumGPUBlocks - 1 }
