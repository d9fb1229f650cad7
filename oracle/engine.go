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
	if err := positiveKnob("block_size", e.BlockSize); err != nil {
		return err
	}
	if n := e.GPUBlocks(); n < 2 {
		return fmt.Errorf("engine num_gpu_blocks = %d: must be ≥ 2 (block 0 is the null block)", n)
	}
	r, ok := rulesFor(e.Backend)
	if !ok {
		return fmt.Errorf("engine backend = %q: must be vllm, sglang or trtllm", string(e.Backend))
	}
	return r.validate(&e)
}

// positiveKnob reports engine knob name = v unless v > 0.
func positiveKnob(name string, v int) error {
	if v <= 0 {
		return fmt.Errorf("engine %s = %d: must be > 0", name, v)
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
