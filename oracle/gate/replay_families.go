package gate

import (
	"fmt"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/trace"
)

// replayTiming is the synthetic linear timing of the replay families (docs/traces.md's
// Mooncake comparison): cheaper prefill than the roofline families so that the
// long-prompt traces (Mooncake: 12k-token prompts) stay below saturation.
var replayTiming = timing.Linear{BaseMs: 8, PrefillMsPerToken: 0.01, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.00002}

// ReplayN is the slice length of every replay family.
const ReplayN = 2000

// ReplayFamilies returns the gated trace replays (issue 13): the first 2,000 requests
// of each sample trace in ../shared/data/traces, vLLM budget 8192, 256 sequences,
// chunked prefill, a KV pool holding every block of the slice (not KV-bound); W4
// sessions synthesised from the Azure conversation slice for each engine (the
// 4,000-block one must be refused by the calendar, queueing.ErrSessionContextsEvicted);
// plus the KV-bound Mooncake case (kv20000blk).
func ReplayFamilies() []ReplayFamily {
	e := vllm(8192, 256)
	fam := func(name, path string, f trace.Format, scale float64) ReplayFamily {
		return ReplayFamily{Name: name, Path: path, Format: f, N: ReplayN, ScaleRate: scale, Engine: e, Timing: replayTiming}
	}
	fs := []ReplayFamily{
		fam("vllm/mooncake conversation 2000", "mooncake/conversation_trace.jsonl", trace.Mooncake, 1),
		fam("vllm/mooncake synthetic 2000", "mooncake/synthetic_trace.jsonl", trace.Mooncake, 1),
		fam("vllm/azure code 2000", "azure_llm_2023/AzureLLMInferenceTrace_code.csv", trace.Azure, 1),
		fam("vllm/azure conversation 2000", "azure_llm_2023/AzureLLMInferenceTrace_conv.csv", trace.Azure, 1),
		fam("vllm/servegen deepseek-r1 2000", "servegen/reason/deepseek-r1", trace.ServeGen, 1),
	}
	hot := fam("vllm/mooncake conversation 2000 rate×3", "mooncake/conversation_trace.jsonl", trace.Mooncake, 3)
	fs = append(fs, hot)
	for _, b := range []engine.Backend{engine.SGLang, engine.TRTLLM} {
		eb, err := engine.Defaults(b, "")
		if err != nil {
			panic(fmt.Sprintf("gate: default %s engine: %v", b, err))
		}
		f := fam(string(b)+"/azure conversation 2000 rate×4 defaults", "azure_llm_2023/AzureLLMInferenceTrace_conv.csv", trace.Azure, 4)
		f.Engine = eb
		fs = append(fs, f)
	}
	for _, b := range []engine.Backend{engine.VLLM, engine.SGLang, engine.TRTLLM} {
		f := fam(string(b)+"/azure conversation 2000 W4 4-turn sessions", "azure_llm_2023/AzureLLMInferenceTrace_conv.csv", trace.Azure, 1)
		if b != engine.VLLM {
			eb, err := engine.Defaults(b, "")
			if err != nil {
				panic(fmt.Sprintf("gate: default %s engine: %v", b, err))
			}
			// a grown context exceeds max_num_tokens = 8192: TRT-LLM needs chunking (T-R3)
			eb.EnableChunkedPrefill = true
			f.Engine = eb
		}
		f.SessionTurns, f.ThinkMs, f.ClientRTTMs = 4, 2000, queueing.DefaultClientRTTMs
		fs = append(fs, f)
		if b == engine.VLLM {
			// KV pressure: a few contexts evicted in the DES (8,000 blocks; the
			// calendar's demand stays within the pool), then most of them (4,000
			// blocks), which the calendar does not model
			mild, hard := f, f
			mild.Name, mild.KVTokens = f.Name+" kv8000blk", 8000*16
			hard.Name, hard.KVTokens = f.Name+" kv4000blk", 4000*16
			// the calendar keeps every context cached, so it must refuse (its TTFT was
			// 47–60 % low) while the DES, which evicts them, runs it
			hard.Refused = queueing.ErrSessionContextsEvicted
			fs = append(fs, mild, hard)
		}
	}
	kv := fam("vllm/mooncake conversation 2000 kv20000blk", "mooncake/conversation_trace.jsonl", trace.Mooncake, 1)
	kv.KVTokens = 20000 * 16
	// KV-bound with shared prefixes: the calendar gets the pool (its vLLM KV model:
	// preemption, recompute from the victim's cached blocks), hits from the reuse oracle
	// with running requests' KV pinned from their first token, and holds a prefix block
	// that several running requests hit once (every Mooncake conversation request
	// starts with one common 512-token block; V-R9 ref_cnt, queueing kv_share.go) —
	// counted once per request, fewer requests fit and it was known-failing (TTFT p50
	// +4.9 %, TPOT −3.4 %)
	return append(fs, kv)
}
