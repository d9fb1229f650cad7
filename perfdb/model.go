package perfdb

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Model is a model definition parsed from a HuggingFace config.json (PERFDB.md §3).
// Field semantics follow aiconfigurator's _parse_hf_config_json.
type Model struct {
	ID           string `json:"id"`           // e.g. "Qwen/Qwen3-32B"
	Architecture string `json:"architecture"` // architectures[0]
	Family       string `json:"family"`       // LLAMA | MOE | … (ARCHITECTURE_TO_MODEL_FAMILY)

	Layers     int `json:"num_hidden_layers"`
	Hidden     int `json:"hidden_size"`
	Heads      int `json:"num_attention_heads"`
	KVHeads    int `json:"num_key_value_heads"`
	HeadDim    int `json:"head_dim"`
	Inter      int `json:"intermediate_size"`
	Vocab      int `json:"vocab_size"`
	MaxPos     int `json:"max_position_embeddings"`
	NumExperts int `json:"num_experts"`           // 0 for dense models
	TopK       int `json:"num_experts_per_tok"`   // 0 for dense models
	MoEInter   int `json:"moe_intermediate_size"` // moe_intermediate_size, else intermediate_size for MoE models

	// UseQKNorm is set for architectures whose attention normalises Q and K per
	// layer (aiconfigurator utils.py: Qwen3, Qwen3-MoE, MiniMax-M2).
	UseQKNorm bool `json:"use_qk_norm"`
	// SlidingWindow is the banded-attention window of gpt-oss (aiconfigurator
	// hard-codes 128 and alternates banded/full layers); 0 for full attention.
	SlidingWindow int `json:"sliding_window"`

	// MLA geometry (DeepSeek-V3/R1, Kimi-K2.5; 0 for other families):
	// the latent KV rank and RoPE dims of the compressed KV cache, and the
	// q/k/v projection widths (aiconfigurator utils.py extra_params).
	QLoraRank     int `json:"q_lora_rank,omitempty"`
	KVLoraRank    int `json:"kv_lora_rank,omitempty"`
	QKNopeHeadDim int `json:"qk_nope_head_dim,omitempty"`
	QKRopeHeadDim int `json:"qk_rope_head_dim,omitempty"`
	VHeadDim      int `json:"v_head_dim,omitempty"`
	// DSA indexer (DeepSeek-V3.2, GLM-5): head dim and heads of the
	// lightning indexer; IndexTopKFreq > 1 (GLM-5.2) shares one top-k index
	// across layers.
	IndexHeadDim  int `json:"index_head_dim,omitempty"`
	IndexHeads    int `json:"index_n_heads,omitempty"`
	IndexTopKFreq int `json:"index_topk_freq,omitempty"`

	// Qwen3.5 hybrid (QWEN35): per-layer "linear_attention" (Gated DeltaNet)
	// or "full_attention" (GQA), the GDN geometry and the shared expert.
	LayerTypes        []string `json:"layer_types,omitempty"`
	LinearKHeads      int      `json:"linear_num_key_heads,omitempty"`
	LinearKHeadDim    int      `json:"linear_key_head_dim,omitempty"`
	LinearVHeads      int      `json:"linear_num_value_heads,omitempty"`
	LinearVHeadDim    int      `json:"linear_value_head_dim,omitempty"`
	LinearConvKernel  int      `json:"linear_conv_kernel_dim,omitempty"`
	SharedExpertInter int      `json:"shared_expert_intermediate_size,omitempty"`

	// QuantAlgo is the checkpoint's normalised weight quantization algorithm
	// ("", "fp8", "fp8_block", "nvfp4", "mxfp4", "int4_wo", …); KVQuantAlgo its KV
	// cache algorithm ("", "fp8", "bfloat16"); QuantDynamic the activation scheme
	// (nil when the config does not say).
	QuantAlgo    string `json:"quant_algo,omitempty"`
	KVQuantAlgo  string `json:"kv_cache_quant_algo,omitempty"`
	QuantDynamic *bool  `json:"quant_dynamic,omitempty"`

	// Default quant modes inferred from quantization_config / hf_quant_config
	// (gemm, kvcache, fmha, moe, comm), e.g. "bfloat16", "fp8_block", "half".
	GemmQuant string `json:"gemm_quant"`
	KVQuant   string `json:"kvcache_quant"`
	FMHAQuant string `json:"fmha_quant"`
	MoEQuant  string `json:"moe_quant"`
	CommQuant string `json:"comm_quant"`

	// Raw is the config.json as given; RawQuant the *_hf_quant_config.json (may be nil).
	Raw      json.RawMessage `json:"-"`
	RawQuant json.RawMessage `json:"-"`
}

// MTPLayers is the number of multi-token-prediction modules the checkpoint
// carries — num_nextn_predict_layers (DeepSeek, Kimi, GLM), mtp_num_hidden_layers
// (Qwen3.5), num_mtp_modules when use_mtp (MiniMax-M2) — at the top level or in
// text_config; 0 when its config names none. A model without them cannot run
// TensorRT-LLM's one-model MTP or SGLang's NEXTN (both draft with those modules).
func (m *Model) MTPLayers() int {
	var raw map[string]any
	if json.Unmarshal(m.Raw, &raw) != nil {
		return 0
	}
	for _, c := range []map[string]any{raw, asMap(raw["text_config"])} {
		for _, k := range []string{"num_nextn_predict_layers", "mtp_num_hidden_layers"} {
			if v, ok := c[k].(float64); ok && v > 0 {
				return int(v)
			}
		}
		if use, _ := c["use_mtp"].(bool); use {
			if v, ok := c["num_mtp_modules"].(float64); ok && v > 0 {
				return int(v)
			}
		}
	}
	return 0
}

// asMap is v as a JSON object, or nil.
func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// ParseHFConfig parses a HuggingFace config.json (and optional hf_quant_config.json)
// into a Model with the given id. name is used in error messages (a file path).
func ParseHFConfig(id, name string, config, quantConfig []byte) (*Model, error) {
	var raw map[string]any
	if err := json.Unmarshal(config, &raw); err != nil {
		return nil, fmt.Errorf("model config %s: not valid JSON: %w", name, err)
	}
	if tc, ok := raw["text_config"].(map[string]any); ok {
		// Multimodal wrappers: the language model lives in text_config.
		for k, v := range tc {
			if _, exists := raw[k]; !exists || k != "architectures" {
				raw[k] = v
			}
		}
	}
	m := &Model{ID: id, Raw: append(json.RawMessage(nil), config...)}
	if quantConfig != nil {
		m.RawQuant = append(json.RawMessage(nil), quantConfig...)
	}
	archs, _ := raw["architectures"].([]any)
	if len(archs) == 0 {
		return nil, fmt.Errorf("model config %s: no architectures field", name)
	}
	m.Architecture, _ = archs[0].(string)
	geti := func(keys ...string) int {
		for _, k := range keys {
			if v, ok := raw[k].(float64); ok {
				return int(v)
			}
		}
		return 0
	}
	m.Layers = geti("num_hidden_layers")
	m.Hidden = geti("hidden_size")
	m.Heads = geti("num_attention_heads")
	m.KVHeads = geti("num_key_value_heads")
	if m.KVHeads == 0 {
		m.KVHeads = m.Heads
	}
	m.HeadDim = geti("head_dim")
	if m.HeadDim == 0 && m.Heads > 0 {
		m.HeadDim = m.Hidden / m.Heads
	}
	m.Inter = geti("intermediate_size")
	m.Vocab = geti("vocab_size")
	m.MaxPos = geti("max_position_embeddings")
	m.NumExperts = geti("num_local_experts", "n_routed_experts", "num_experts")
	m.TopK = geti("num_experts_per_tok", "experts_per_token")
	m.MoEInter = geti("moe_intermediate_size")
	if m.MoEInter == 0 && m.NumExperts > 0 {
		m.MoEInter = m.Inter // utils.py: moe_intermediate_size or intermediate_size
	}
	if m.Layers <= 0 || m.Hidden <= 0 || m.Heads <= 0 {
		return nil, fmt.Errorf("model config %s: num_hidden_layers, hidden_size and num_attention_heads must be > 0", name)
	}
	m.Family = familyOf(m.Architecture)
	if m.Family == "DEEPSEEK" || m.Family == "KIMIK25" || m.Family == "DEEPSEEKV32" {
		m.QLoraRank, m.KVLoraRank = geti("q_lora_rank"), geti("kv_lora_rank")
		m.QKNopeHeadDim, m.QKRopeHeadDim, m.VHeadDim = geti("qk_nope_head_dim"), geti("qk_rope_head_dim"), geti("v_head_dim")
	}
	if m.Family == "QWEN35" {
		lt, _ := raw["layer_types"].([]any)
		for _, v := range lt {
			sv, _ := v.(string)
			m.LayerTypes = append(m.LayerTypes, sv)
		}
		if len(m.LayerTypes) != m.Layers {
			return nil, fmt.Errorf("model config %s: Qwen3.5 layer_types has %d entries for %d layers", name, len(m.LayerTypes), m.Layers)
		}
		m.LinearKHeads, m.LinearKHeadDim = geti("linear_num_key_heads"), geti("linear_key_head_dim")
		m.LinearVHeads, m.LinearVHeadDim = geti("linear_num_value_heads"), geti("linear_value_head_dim")
		m.LinearConvKernel, m.SharedExpertInter = geti("linear_conv_kernel_dim"), geti("shared_expert_intermediate_size")
	}
	if m.Family == "DEEPSEEKV32" {
		m.IndexHeadDim, m.IndexHeads, m.IndexTopKFreq = geti("index_head_dim"), geti("index_n_heads"), geti("index_topk_freq")
		if _, ok := raw["index_topk_pattern"]; ok && m.IndexTopKFreq <= 1 {
			m.IndexTopKFreq = 2 // a per-layer skip pattern: shared-index layers exist
		}
	}
	switch m.Architecture {
	case "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "MiniMaxM2ForCausalLM":
		m.UseQKNorm = true
	case "GptOssForCausalLM":
		m.SlidingWindow = gptOSSWindow
	}
	var quantRaw map[string]any
	if quantConfig != nil {
		if err := json.Unmarshal(quantConfig, &quantRaw); err != nil {
			return nil, fmt.Errorf("model quant config for %s: not valid JSON: %w", name, err)
		}
	}
	m.QuantAlgo, m.KVQuantAlgo, m.QuantDynamic = inferQuantization(raw, quantRaw)
	m.GemmQuant, m.KVQuant, m.FMHAQuant, m.MoEQuant, m.CommQuant = defaultQuantModes(m.QuantAlgo, m.KVQuantAlgo, m.QuantDynamic)
	return m, nil
}

// familyOf maps an HF architecture to aiconfigurator's model family ("" if unsupported).
func familyOf(arch string) string {
	switch arch {
	case "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MiMoForCausalLM":
		return "LLAMA"
	case "MixtralForCausalLM", "GptOssForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "MiniMaxM2ForCausalLM":
		return "MOE"
	case "DeepSeekForCausalLM", "DeepseekV3ForCausalLM":
		return "DEEPSEEK"
	case "KimiK25ForConditionalGeneration":
		return "KIMIK25"
	case "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM":
		return "DEEPSEEKV32"
	case "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration":
		return "QWEN35"
	}
	return ""
}

// gptOSSWindow is the banded-attention window aiconfigurator uses for gpt-oss
// (models/moe.py _GPTOSS_WINDOW_SIZE); half the layers use it.
const gptOSSWindow = 128

// IsMoE reports whether the model has routed experts.
func (m *Model) IsMoE() bool { return m.NumExperts > 0 && m.TopK > 0 }

// inferQuantization reads the checkpoint's quantization the way aiconfigurator's
// utils.py _infer_quantization_fields does: the hf_quant_config "quantization"
// section (or the file itself when it is flat) wins over config.json's
// quantization_config; fp8 with weight_block_size is fp8_block.
func inferQuantization(raw, hfQuant map[string]any) (algo, kv string, dynamic *bool) {
	qc, _ := raw["quantization_config"].(map[string]any)
	hq := map[string]any{}
	if hfQuant != nil {
		if sec, ok := hfQuant["quantization"].(map[string]any); ok {
			hq = sec
		} else {
			hq = hfQuant
		}
	}
	str := func(ms ...any) string {
		for _, v := range ms {
			if s, ok := v.(string); ok && s != "" {
				return strings.ToLower(strings.TrimSpace(s))
			}
		}
		return ""
	}
	algo = str(hq["quant_algo"], qc["quant_algo"], qc["quant_method"], qc["quantization_method"])
	switch algo {
	case "w4a16_mxfp4":
		algo = "mxfp4"
	case "mixed-precision", "mixedprecision":
		algo = "mixed_precision"
	case "compressed-tensors":
		algo = compressedTensorsAlgo(qc)
	}
	kv = str(hq["kv_cache_quant_algo"], qc["kv_cache_quant_algo"], qc["kv_cache_quant_method"], qc["kv_cache_dtype"])
	if kv == "" {
		if sch, ok := qc["kv_cache_scheme"].(map[string]any); ok {
			t := str(sch["type"])
			bits, _ := sch["num_bits"].(float64)
			switch {
			case strings.Contains(t, "fp8"):
				kv = "fp8"
			case t == "float" && bits > 0 && bits <= 8:
				kv = "fp8"
			case t == "float" && bits >= 16:
				kv = "bfloat16"
			}
		} else if s, ok := qc["kv_cache_scheme"].(string); ok && strings.Contains(strings.ToLower(s), "fp8") {
			kv = "fp8"
		}
	}
	switch kv {
	case "e4m3", "e5m2":
		kv = "fp8"
	case "fp16", "float16", "bf16":
		kv = "bfloat16"
	}
	if wbs, ok := qc["weight_block_size"].([]any); ok && len(wbs) > 0 && algo == "fp8" {
		algo = "fp8_block"
	}
	if as := str(qc["activation_scheme"]); as == "dynamic" || as == "static" {
		d := as == "dynamic"
		dynamic = &d
	} else if groups, ok := qc["config_groups"].(map[string]any); ok {
		found, anyDyn := false, false
		for _, g := range groups {
			gm, _ := g.(map[string]any)
			for _, key := range []string{"input_activations", "weights"} {
				if item, ok := gm[key].(map[string]any); ok {
					if d, ok := item["dynamic"].(bool); ok {
						found = true
						anyDyn = anyDyn || d
					}
				}
			}
		}
		if found {
			dynamic = &anyDyn
		}
	}
	return algo, kv, dynamic
}

// compressedTensorsAlgo maps a compressed-tensors config to its base weight
// algorithm (utils.py parse_compressed_tensors_quant); "" when unknown.
func compressedTensorsAlgo(qc map[string]any) string {
	groups, _ := qc["config_groups"].(map[string]any)
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		w, _ := gm["weights"].(map[string]any)
		bits, _ := w["num_bits"].(float64)
		t, _ := w["type"].(string)
		t = strings.ToLower(t)
		switch {
		case bits == 4 && strings.Contains(t, "int"):
			return "int4_wo"
		case bits == 8 && strings.Contains(t, "int"):
			return "int8_wo"
		case bits == 8 && strings.Contains(t, "float"):
			if s, _ := w["strategy"].(string); strings.ToLower(s) == "block" || w["block_structure"] != nil {
				return "fp8_block"
			}
			return "fp8"
		case bits == 4 && strings.Contains(t, "float"):
			return "w4a16_mxfp4"
		}
	}
	return ""
}

// defaultQuantModes maps the checkpoint quantization to aiconfigurator's
// default (gemm, kvcache, fmha, moe, comm) modes before backend resolution
// (golden_inputs.json notes, QUANT): fp8+block → fp8_block/fp8_block; fp8
// per-tensor → gemm fp8_static (fp8 when dynamic), moe fp8; nvfp4 → nvfp4;
// mxfp4 → gemm bfloat16, moe w4a16_mxfp4; compressed-tensors int4 → moe int4_wo;
// fp8/fp8_block/nvfp4 checkpoints also set kvcache and fmha to fp8.
func defaultQuantModes(algo, kv string, dynamic *bool) (gemm, kvq, fmha, moe, comm string) {
	gemm, kvq, fmha, moe, comm = "bfloat16", "bfloat16", "bfloat16", "bfloat16", "half"
	switch algo {
	case "fp8_block":
		gemm, moe, kvq, fmha = "fp8_block", "fp8_block", "fp8", "fp8"
	case "fp8":
		gemm = "fp8_static"
		if dynamic != nil && *dynamic {
			gemm = "fp8"
		}
		moe, kvq, fmha = "fp8", "fp8", "fp8"
	case "nvfp4":
		gemm, moe, kvq, fmha = "nvfp4", "nvfp4", "fp8", "fp8"
	case "mxfp4", "w4a16_mxfp4":
		moe = "w4a16_mxfp4"
	case "int4_wo":
		moe = "int4_wo"
	}
	if kv == "fp8" || kv == "bfloat16" {
		kvq = kv
	}
	return gemm, kvq, fmha, moe, comm
}
