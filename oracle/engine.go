package oracle

import (
	"fmt"

	"github.com/aicdb/aicdb/engine"
)

// ValidateEngine reports the first knob of e the oracle cannot simulate with.
// The knobs are the engine's own checks (engine.Spec.Validate: ranges, then the
// backend calendar's), so the oracle and the queueing model accept the same
// engines; the oracle adds only its KV pool: e.GPUBlocks() blocks of e.BlockSize
// tokens (for vLLM block 0 is the null block, so usable = GPUBlocks − 1), which,
// unlike the queueing model's, is always bounded. Scenario files name some knobs
// their own way (SGLang max_running_requests, capacity_policy in capitals): their
// reader checks those spellings before this.
func ValidateEngine(e engine.Spec) error {
	if err := e.Validate(); err != nil {
		return err
	}
	if n := e.GPUBlocks(); n < 2 {
		return fmt.Errorf("engine num_gpu_blocks = %d: must be ≥ 2 (block 0 is the null block)", n)
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
