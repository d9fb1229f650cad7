package perfdb

import (
	"bytes"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

func TestReadParquetByNameAndWidth(t *testing.T) {
	var a, b bytes.Buffer
	// Same table, different column orders and int widths.
	if err := parquet.Write(&a, []fxGemm{{Kernel: "k", Dtype: "fp8", M: 3, N: 5, K: 7, Latency: 1.5}}); err != nil {
		t.Fatal(err)
	}
	if err := parquet.Write(&b, []fxGemmPower{{K: 7, Latency: 1.5, Power: 2, Dtype: "fp8", M: 3, N: 5, Kernel: "k"}}); err != nil {
		t.Fatal(err)
	}
	for _, data := range [][]byte{a.Bytes(), b.Bytes()} {
		tab, err := readParquet("t", data, gemmKind.cols)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := gemmKind.fromParquet(tab)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].M != 3 || rows[0].N != 5 || rows[0].K != 7 || rows[0].Latency != 1.5 || rows[0].Dtype != "fp8" {
			t.Errorf("rows = %+v", rows)
		}
	}
	// A missing required column names the file and the column.
	tab, _ := readParquet("f.parquet", a.Bytes(), []string{"m"})
	if _, err := gemmKind.fromParquet(tab); err == nil || err.Error() != "parquet file f.parquet: missing column gemm_dtype" {
		t.Errorf("missing column error = %v", err)
	}
}

// FuzzReadParquet: arbitrary bytes never panic; errors name the file on one line.
func FuzzReadParquet(f *testing.F) {
	var buf bytes.Buffer
	if err := parquet.Write(&buf, []fxGemm{{Kernel: "k", Dtype: "bfloat16", M: 1, N: 2, K: 3, Latency: 0.5}, {Kernel: "k", Dtype: "fp8", M: 4, N: 5, K: 6, Latency: 0.25}}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte("PAR1PAR1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := readParquet("z.parquet", data, gemmKind.cols)
		if err == nil {
			_, err = gemmKind.fromParquet(tab)
		}
		if err != nil && (!strings.HasPrefix(err.Error(), "parquet file z.parquet: ") || strings.Contains(err.Error(), "\n")) {
			t.Fatalf("bad error %q", err)
		}
	})
}

// FuzzImportModelConfig: the config path of an import (id from the file name,
// ParseHFConfig) never panics and fails with an error naming the file.
func FuzzImportModelConfig(f *testing.F) {
	if data, err := readEmbedded("model_configs/Qwen--Qwen3-30B-A3B_config.json"); err == nil {
		f.Add("Qwen--Qwen3-30B-A3B_config.json", data)
	}
	f.Add("a--b_config.json", []byte(`{"architectures":["LlamaForCausalLM"],"num_hidden_layers":1,"hidden_size":8,"num_attention_heads":2}`))
	f.Add("config.json", []byte(`{}`))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		id := modelIDFromFile(name)
		if id != "" && (!strings.Contains(id, "/") || strings.HasSuffix(id, "_hf_quant")) {
			t.Fatalf("bad id %q from %q", id, name)
		}
		if id == "" {
			id = "x/y"
		}
		m, err := ParseHFConfig(id, name, data, nil)
		if err != nil {
			if !strings.Contains(err.Error(), name) {
				t.Fatalf("error does not name the file: %q", err)
			}
			return
		}
		if m.ID != id || m.Layers <= 0 || m.Hidden <= 0 || m.Heads <= 0 {
			t.Fatalf("accepted invalid model %+v", m)
		}
	})
}
