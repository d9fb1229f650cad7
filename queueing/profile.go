package queueing

import (
	"fmt"

	"github.com/aicdb/aicdb/engine"
)

// Engine profiles: how an engine instance was configured.
const (
	ProfileDefaults       = "defaults"       // DefaultEngine: the engines' bare defaults
	ProfileAIConfigurator = "aiconfigurator" // aiconfigurator's generator rules (benchmark rules)
)

// Worker roles a profile distinguishes (aiconfigurator's rule scopes agg, prefill,
// decode).
const (
	RoleAgg     = "agg"
	RolePrefill = "prefill"
	RoleDecode  = "decode"
)

// ProfileInput is what a profile's rules read.
type ProfileInput struct {
	Backend, Version string
	Role             string // "agg" | "prefill" | "decode"
	Batch            int    // max batch size per worker (client concurrency for agg benchmarks)
	ISL, OSL         int
	// GPUMemBytes is one GPU's memory capacity (0 = not known). SGLang sizes its
	// default chunked_prefill_size from it (engine.SGLangChunkedPrefillSize); the
	// other backends do not read it.
	GPUMemBytes float64
	// Drafts is the MTP draft length the deployment runs (0 = none). Under the
	// defaults profile SGLang's server arguments reset an unset
	// max_running_requests to 48 for EAGLE / NEXTN (_handle_speculative_decoding:
	// "Max running requests is reset to 48 for speculative decoding"); an explicit
	// value (a config key, a flag) is applied over it.
	Drafts int
}

// sglSpecMaxRunning is SGLang's max_running_requests under speculative decoding
// when none is given (ProfileInput.Drafts).
const sglSpecMaxRunning = 48

// aicHeadroom is the token headroom aiconfigurator's benchmark rules add to the
// prompt length when they size a worker's token budget ("SlaConfig.isl + 1500" in
// rule_plugin/benchmark/{vllm,sglang,trtllm}.rule).
const aicHeadroom = 1500

// aicDefaultBatch and aicPrefillBatch are the rules' max_batch_size when the
// caller gives none: 128 for agg and decode workers, 1 for prefill workers
// ("prefill max_batch_size = (max_batch_size if max_batch_size else 1)",
// "agg_decode max_batch_size = (max_batch_size if max_batch_size else 128)").
const (
	aicDefaultBatch = 128
	aicPrefillBatch = 1
)

// aicTokensPerBlock is TRT-LLM's tokens_per_block under the rules
// ("agg_prefill_decode tokens_per_block = (tokens_per_block if tokens_per_block
// else 32)"); max_num_tokens is rounded up to a multiple of it.
const aicTokensPerBlock = 32

// ProfileEngine resolves the engine.Spec of profile for in.
//
// ProfileDefaults returns engine.Defaults(in.Backend, in.Version) and reads nothing
// else. ProfileAIConfigurator starts from the same defaults and applies
// aiconfigurator's benchmark generator rules (rule_plugin/benchmark/*.rule, the
// rules the silicon sample was deployed with) for the worker role: the keys the
// rules leave unset keep the engine's own default, as they do in a generated
// launch (the templates emit only the keys the rules set). The result passes
// Validate.
func ProfileEngine(profile string, in ProfileInput) (engine.Spec, error) {
	switch profile {
	case ProfileDefaults, ProfileAIConfigurator:
	default:
		return engine.Spec{}, fmt.Errorf("engine profile %q: unknown; use %s or %s", profile, ProfileDefaults, ProfileAIConfigurator)
	}
	e, err := engine.Defaults(in.Backend, in.Version)
	if err != nil {
		return engine.Spec{}, err
	}
	if profile == ProfileDefaults {
		if in.Drafts > 0 && e.Backend == engine.SGLang {
			e.MaxNumSeqs = sglSpecMaxRunning
		}
		return e, nil
	}
	switch in.Role {
	case RoleAgg, RolePrefill, RoleDecode:
	default:
		return engine.Spec{}, fmt.Errorf("engine role %q: unknown; use agg, prefill or decode", in.Role)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"batch", in.Batch}, {"isl", in.ISL}, {"osl", in.OSL}} {
		if f.v < 0 {
			return engine.Spec{}, fmt.Errorf("engine profile %s: %s = %d must be ≥ 0", profile, f.name, f.v)
		}
	}
	if in.ISL > 1<<30 || in.Batch > 1<<30 {
		return engine.Spec{}, fmt.Errorf("engine profile %s: isl %d / batch %d out of range (≤ 2^30)", profile, in.ISL, in.Batch)
	}
	aicApply(&e, in)
	if err := e.Validate(); err != nil {
		return engine.Spec{}, fmt.Errorf("engine profile %s for %s %s: %w", profile, e.Backend, in.Role, err)
	}
	return e, nil
}

// aicBatch is the rules' max_batch_size of a worker of role (see aicDefaultBatch).
func aicBatch(in ProfileInput) int {
	switch {
	case in.Batch > 0:
		return in.Batch
	case in.Role == RolePrefill:
		return aicPrefillBatch
	}
	return aicDefaultBatch
}

// roundUp rounds n up to a multiple of m (m > 0).
func roundUp(n, m int) int { return (n + m - 1) / m * m }

// aicApply sets the fields aiconfigurator's benchmark rules set for in.Role on e
// (which holds the backend's defaults). The parameter names map onto engine keys
// through aiconfigurator's generator/config/backend_config_mapping.yaml:
// max_batch_size → vLLM max-num-seqs, SGLang max-running-requests, TRT-LLM
// max_batch_size; max_num_tokens → vLLM max-num-batched-tokens, TRT-LLM
// max_num_tokens (SGLang has no mapping for it).
func aicApply(e *engine.Spec, in ProfileInput) {
	rulesFor(e.Backend).aicApply(e, in, aicBatch(in))
}

func (vllmRules) aicApply(e *engine.Spec, in ProfileInput, mbs int) {
	// benchmark/vllm.rule:
	//   prefill max_num_tokens = isl + 1500
	//   decode  max_num_tokens = max_batch_size
	//   agg     max_num_tokens = max_batch_size + isl + 1500
	//   agg     max_seq_len    = isl + osl + 1500 (max-model-len: an admission
	//           limit, not a scheduling knob; no engine.Spec field)
	// The rules never emit --enable-chunked-prefill or --async-scheduling, so
	// vLLM's defaults stay (chunked prefill on in V1, V-R1; async per V-R10).
	e.MaxNumSeqs = mbs
	switch in.Role {
	case RolePrefill:
		e.MaxNumBatchedTokens = in.ISL + aicHeadroom
	case RoleDecode:
		e.MaxNumBatchedTokens = mbs
	default:
		e.MaxNumBatchedTokens = mbs + in.ISL + aicHeadroom
	}
}

func (trtRules) aicApply(e *engine.Spec, in ProfileInput, mbs int) {
	// benchmark/trtllm.rule, with tokens_per_block 32 so that
	// max_num_tokens % tokens_per_block == 0:
	//   prefill max_num_tokens = ⌈(isl + 1500) / 32⌉·32
	//   decode  max_num_tokens = ⌈max_batch_size / 32⌉·32
	//   agg     max_num_tokens = ⌈(max_batch_size + isl + 1500) / 32⌉·32
	//   prefill disable_overlap_scheduler = true; agg, decode = false (T-R3)
	// extra_engine_args.yaml.j2 renders enable_chunked_prefill with
	// default(false) and no rule sets it: chunked context stays off (T-R2).
	e.BlockSize = aicTokensPerBlock
	e.MaxBatchSize = mbs
	e.EnableChunkedPrefill = false
	switch in.Role {
	case RolePrefill:
		e.MaxNumTokens = roundUp(in.ISL+aicHeadroom, aicTokensPerBlock)
		e.AsyncScheduling = false
	case RoleDecode:
		e.MaxNumTokens = roundUp(mbs, aicTokensPerBlock)
		e.AsyncScheduling = true
	default:
		e.MaxNumTokens = roundUp(mbs+in.ISL+aicHeadroom, aicTokensPerBlock)
		e.AsyncScheduling = true
	}
}

func (sglangRules) aicApply(e *engine.Spec, in ProfileInput, mbs int) {
	// benchmark/sglang.rule:
	//   agg_prefill_decode max_prefill_tokens = isl + 1500 (S-R1)
	//   agg enable_mixed_chunk = true (S-R3); SGLang's own default (false)
	//   stays on prefill and decode workers
	// chunked-prefill-size is emitted only when a rule sets
	// enable_chunked_prefill, which none does: SGLang's default stays, and
	// SGLang derives that default from the GPU's memory (ServerArgs
	// _handle_gpu_memory_settings), so it is applied when the GPU is known.
	// No SGLang rule sets disable_overlap_scheduler (only trtllm.rule does, for
	// prefill workers; the sglang templates emit --disable-overlap-schedule only
	// when it is set): the overlap scheduler stays on for every role, as the
	// defaults have it (§3.2).
	e.MaxNumSeqs = mbs
	e.MaxPrefillTokens = in.ISL + aicHeadroom
	e.EnableMixedChunk = in.Role == RoleAgg
	if n := engine.SGLangChunkedPrefillSize(in.GPUMemBytes); n > 0 && e.EnableChunkedPrefill {
		e.ChunkedPrefillSize = n
	}
}

func (noRules) aicApply(*engine.Spec, ProfileInput, int) {}
