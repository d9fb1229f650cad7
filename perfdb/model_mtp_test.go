package perfdb

import "testing"

// TestMTPLayers reads a checkpoint's MTP modules under each family's key, at
// the top level or in a multimodal text_config, and 0 where none is named.
func TestMTPLayers(t *testing.T) {
	base := `"architectures": ["X"], "num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2`
	for _, c := range []struct {
		name, extra string
		want        int
	}{
		{"DeepSeek", `, "num_nextn_predict_layers": 1`, 1},
		{"Kimi-K2.5 (none)", `, "num_nextn_predict_layers": 0`, 0},
		{"Qwen3.5", `, "mtp_num_hidden_layers": 1`, 1},
		{"Qwen3.5 in text_config", `, "text_config": {"mtp_num_hidden_layers": 2}`, 2},
		{"MiniMax-M2", `, "use_mtp": true, "num_mtp_modules": 3`, 3},
		{"MiniMax-M2 with use_mtp off", `, "use_mtp": false, "num_mtp_modules": 3`, 0},
		{"Llama (no key)", ``, 0},
	} {
		m, err := ParseHFConfig("m", c.name, []byte("{"+base+c.extra+"}"), nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := m.MTPLayers(); got != c.want {
			t.Errorf("%s: MTPLayers() = %d, want %d", c.name, got, c.want)
		}
	}
}
