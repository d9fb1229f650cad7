package perfdb

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseSystemYAMLH200(t *testing.T) {
	data, err := readEmbedded("systems/h200_sxm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSystemYAML("h200_sxm", "h200_sxm.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	// Verbatim values of PERFDB.md §1.6.
	want := &System{Name: "h200_sxm", DataDir: "data/h200_sxm", MemBW: 4.8e12, MemBWEmpiricalScalingFactor: 0.8,
		MemEmpiricalConstantLatency: 3e-6, MemCapacity: 151397597184, BF16TCFlops: 989e12, INT8TCFlops: 1978e12,
		FP8TCFlops: 1978e12, Power: 700, SMVersion: 90, NumGPUsPerNode: 8, InterNodeBW: 50e9, IntraNodeBW: 450e9,
		PCIeBW: 64e9, P2PLatency: 1e-5, NCCLMem: map[int]float64{1: 0, 2: 358612992, 4: 411041792, 8: 411041792},
		OtherMem: 3758096384, NCCLVersion: "2.26.2"}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("parsed\n%+v\nwant\n%+v", s, want)
	}
}

func TestParseSystemYAMLVariants(t *testing.T) {
	base := "data_dir: d\ngpu: {mem_bw: 1e12, float16_tc_flops: 5e14}\nnode: {num_gpus_per_node: 72, inter_node_bw: 1, intra_node_bw: 2, num_gpus_per_rack: 72, inter_rack_bw: 3}\nmisc: {nccl_version: 2.23}\n"
	s, err := ParseSystemYAML("gb", "gb.yaml", []byte(base))
	if err != nil {
		t.Fatal(err)
	}
	// Old float16_tc_flops spelling, unquoted nccl_version, rack keys, scaling default 1.
	if s.BF16TCFlops != 5e14 || s.NCCLVersion != "2.23" || s.NumGPUsPerRack != 72 || s.InterRackBW != 3 || s.MemBWEmpiricalScalingFactor != 1 {
		t.Errorf("parsed %+v", s)
	}
	for _, c := range []struct{ yaml, want string }{
		{"gpu: [", "system spec x.yaml: not valid YAML"},
		{"data_dir: d\n", "system spec x.yaml: gpu.mem_bw is missing; node.inter_node_bw is missing; node.intra_node_bw is missing; node.num_gpus_per_node is missing"},
		{strings.Replace(base, "1e12", "-1", 1), "system spec x.yaml: gpu.mem_bw must be > 0; gpu.mem_bw must be a finite number ≥ 0"},
		{strings.Replace(base, "72, inter_node", "0, inter_node", 1), "system spec x.yaml: node.num_gpus_per_node must be > 0"},
		{base + "  nccl_mem: {x: 1}\n", "system spec x.yaml: not valid YAML"},
		{strings.Replace(base, "nccl_version: 2.23", "nccl_mem: {two: 1}", 1), `system spec x.yaml: misc.nccl_mem key "two" is not a GPU count`},
	} {
		_, err := ParseSystemYAML("x", "x.yaml", []byte(c.yaml))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("yaml %q: error %v, want prefix %q", c.yaml, err, c.want)
		}
	}
}

// FuzzParseSystemYAML: any input gives a system or a one-line error naming the file; never a panic.
func FuzzParseSystemYAML(f *testing.F) {
	if data, err := readEmbedded("systems/h200_sxm.yaml"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(fxSystemYAML))
	f.Add([]byte("gpu: {mem_bw: .nan}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSystemYAML("s", "s.yaml", data)
		if err != nil {
			if !strings.Contains(err.Error(), "s.yaml") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error does not name the file on one line: %q", err)
			}
			return
		}
		if s.MemBW <= 0 || s.NumGPUsPerNode <= 0 || s.DataDir == "" {
			t.Fatalf("accepted an invalid spec: %+v", s)
		}
	})
}

// FuzzParseReuseYAML: strict parse; errors name the file on one line.
func FuzzParseReuseYAML(f *testing.F) {
	f.Add([]byte("schema_version: 1\nreuse:\n- table: gemm_perf\n  from_version: 0.24.0\n  reason: r\n  approved_by: a\n"))
	f.Add([]byte("reuse: []\n"))
	f.Add([]byte("reuse: [1]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := parseReuseYAML("r.yaml", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "reuse file r.yaml: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("bad error %q", err)
			}
			return
		}
		for _, e := range es {
			if strings.TrimSpace(e.Table) == "" || strings.TrimSpace(e.FromVersion) == "" {
				t.Fatalf("accepted empty entry %+v", e)
			}
		}
	})
}
