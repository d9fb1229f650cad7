package perfdb

import (
	"encoding/json"
	"fmt"
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
	NumExperts int `json:"num_experts"`       // 0 for dense models
	TopK       int `json:"num_experts_per_tok"` // 0 for dense models
	MoEInter   int `json:"moe_intermediate_size"`

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
	if m.Layers <= 0 || m.Hidden <= 0 || m.Heads <= 0 {
		return nil, fmt.Errorf("model config %s: num_hidden_layers, hidden_size and num_attention_heads must be > 0", name)
	}
	m.Family = familyOf(m.Architecture)
	m.GemmQuant, m.KVQuant, m.FMHAQuant, m.MoEQuant, m.CommQuant = "bfloat16", "bfloat16", "bfloat16", "bfloat16", "half"
	return m, nil
}

// familyOf maps an HF architecture to aiconfigurator's model family ("" if unsupported).
func familyOf(arch string) string {
	switch arch {
	case "LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MiMoForCausalLM":
		return "LLAMA"
	case "MixtralForCausalLM", "GptOssForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", "MiniMaxM2ForCausalLM":
		return "MOE"
	}
	return ""
}
