package oracle

import (
	"fmt"

	"github.com/aicdb/aicdb/engine"
)

// ValidateEngine reports the first knob of e the oracle cannot simulate with,
// naming it as the scenario file does. Sizes are in tokens unless named blocks;
// the KV pool is e.GPUBlocks() blocks of e.BlockSize tokens (for vLLM block 0 is
// the null block, so usable = GPUBlocks − 1) and, unlike the queueing model's, is
// always bounded. Only the knobs of the selected backend are consulted.
func ValidateEngine(e engine.Spec) error {
	pos := func(name string, v int) error {
		if v <= 0 {
			return fmt.Errorf("engine %s = %d: must be > 0", name, v)
		}
		return nil
	}
	if err := pos("block_size", e.BlockSize); err != nil {
		return err
	}
	if n := e.GPUBlocks(); n < 2 {
		return fmt.Errorf("engine num_gpu_blocks = %d: must be ≥ 2 (block 0 is the null block)", n)
	}
	switch e.Backend {
	case engine.VLLM:
		if err := pos("max_num_batched_tokens", e.MaxNumBatchedTokens); err != nil {
			return err
		}
		if err := pos("max_num_seqs", e.MaxNumSeqs); err != nil {
			return err
		}
		if e.LongPrefillTokenThreshold < 0 {
			return fmt.Errorf("engine long_prefill_token_threshold = %d: must be ≥ 0 (0 = off)", e.LongPrefillTokenThreshold)
		}
	case engine.SGLang:
		if e.EnableChunkedPrefill {
			if err := pos("chunked_prefill_size", e.ChunkedPrefillSize); err != nil {
				return err
			}
		}
		if err := pos("max_prefill_tokens", e.MaxPrefillTokens); err != nil {
			return err
		}
		if err := pos("max_running_requests", e.MaxNumSeqs); err != nil {
			return err
		}
	case engine.TRTLLM:
		if err := pos("max_batch_size", e.MaxBatchSize); err != nil {
			return err
		}
		if err := pos("max_num_tokens", e.MaxNumTokens); err != nil {
			return err
		}
		if e.CapacityPolicy != engine.PolicyGuaranteedNoEvict && e.CapacityPolicy != engine.PolicyMaxUtilization {
			return fmt.Errorf("engine capacity_policy = %q: must be %s or %s", e.CapacityPolicy, scenarioNoEvict, scenarioMaxUtilization)
		}
	default:
		return fmt.Errorf("engine backend = %q: must be vllm, sglang or trtllm", string(e.Backend))
	}
	return nil
}

// The TRT-LLM capacity policies as oracle scenario files spell them (SCHEDULERS.md
// §4.3); they read as engine.PolicyGuaranteedNoEvict and engine.PolicyMaxUtilization.
const (
	scenarioNoEvict        = "GUARANTEED_NO_EVICT"
	scenarioMaxUtilization = "MAX_UTILIZATION"
)

// usableBlocks is the number of blocks a request can ever hold.
func usableBlocks(e *engine.Spec) int { return e.GPUBlocks() - 1 }
