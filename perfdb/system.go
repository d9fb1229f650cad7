package perfdb

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// systemYAML mirrors the on-disk schema of an aiconfigurator system spec
// (aic-core/src/aiconfigurator_core/systems/<name>.yaml). Pointers tell absent
// keys from zero values.
type systemYAML struct {
	DataDir string `yaml:"data_dir"`
	GPU     struct {
		MemBW                       *float64 `yaml:"mem_bw"`
		MemBWEmpiricalScalingFactor *float64 `yaml:"mem_bw_empirical_scaling_factor"`
		MemEmpiricalConstantLatency *float64 `yaml:"mem_empirical_constant_latency"`
		MemCapacity                 *float64 `yaml:"mem_capacity"`
		BF16TCFlops                 *float64 `yaml:"bfloat16_tc_flops"`
		FP16TCFlops                 *float64 `yaml:"float16_tc_flops"` // pre-v0.9 spelling
		INT8TCFlops                 *float64 `yaml:"int8_tc_flops"`
		FP8TCFlops                  *float64 `yaml:"fp8_tc_flops"`
		FP4TCFlops                  *float64 `yaml:"fp4_tc_flops"`
		Power                       *float64 `yaml:"power"`
		SMVersion                   *float64 `yaml:"sm_version"`
	} `yaml:"gpu"`
	Node struct {
		NumGPUsPerNode *float64 `yaml:"num_gpus_per_node"`
		InterNodeBW    *float64 `yaml:"inter_node_bw"`
		IntraNodeBW    *float64 `yaml:"intra_node_bw"`
		PCIeBW         *float64 `yaml:"pcie_bw"`
		P2PLatency     *float64 `yaml:"p2p_latency"`
		NumGPUsPerRack *float64 `yaml:"num_gpus_per_rack"`
		InterRackBW    *float64 `yaml:"inter_rack_bw"`
	} `yaml:"node"`
	Misc struct {
		NCCLMem     map[string]float64 `yaml:"nccl_mem"`
		OtherMem    *float64           `yaml:"other_mem"`
		NCCLVersion yaml.Node          `yaml:"nccl_version"`
	} `yaml:"misc"`
}

// ParseSystemYAML parses an aiconfigurator system spec. name is the system name
// (the file stem, e.g. "h200_sxm"); file names the input in error messages.
// Required keys: data_dir, gpu.mem_bw, node.num_gpus_per_node,
// node.inter_node_bw, node.intra_node_bw (as aiconfigurator's SystemSpec);
// mem_bw_empirical_scaling_factor defaults to 1 like aiconfigurator's.
func ParseSystemYAML(name, file string, data []byte) (*System, error) {
	var y systemYAML
	if err := yaml.Unmarshal(data, &y); err != nil {
		return nil, fmt.Errorf("system spec %s: not valid YAML: %s", file, oneLineErr(err))
	}
	if name == "" {
		return nil, fmt.Errorf("system spec %s: empty system name", file)
	}
	var bad []string
	req := func(key string, v *float64) float64 {
		if v == nil {
			bad = append(bad, key+" is missing")
			return 0
		}
		return *v
	}
	opt := func(v *float64, def float64) float64 {
		if v == nil {
			return def
		}
		return *v
	}
	s := &System{
		Name:                        name,
		DataDir:                     strings.TrimSpace(y.DataDir),
		MemBW:                       req("gpu.mem_bw", y.GPU.MemBW),
		MemBWEmpiricalScalingFactor: opt(y.GPU.MemBWEmpiricalScalingFactor, 1),
		MemEmpiricalConstantLatency: opt(y.GPU.MemEmpiricalConstantLatency, 0),
		MemCapacity:                 opt(y.GPU.MemCapacity, 0),
		BF16TCFlops:                 opt(y.GPU.BF16TCFlops, opt(y.GPU.FP16TCFlops, 0)),
		INT8TCFlops:                 opt(y.GPU.INT8TCFlops, 0),
		FP8TCFlops:                  opt(y.GPU.FP8TCFlops, 0),
		FP4TCFlops:                  opt(y.GPU.FP4TCFlops, 0),
		Power:                       opt(y.GPU.Power, 0),
		SMVersion:                   int(opt(y.GPU.SMVersion, 0)),
		NumGPUsPerNode:              int(req("node.num_gpus_per_node", y.Node.NumGPUsPerNode)),
		InterNodeBW:                 req("node.inter_node_bw", y.Node.InterNodeBW),
		IntraNodeBW:                 req("node.intra_node_bw", y.Node.IntraNodeBW),
		PCIeBW:                      opt(y.Node.PCIeBW, 0),
		P2PLatency:                  opt(y.Node.P2PLatency, 0),
		NumGPUsPerRack:              int(opt(y.Node.NumGPUsPerRack, 0)),
		InterRackBW:                 opt(y.Node.InterRackBW, 0),
		OtherMem:                    opt(y.Misc.OtherMem, 0),
		NCCLMem:                     map[int]float64{},
	}
	if s.DataDir == "" {
		bad = append(bad, "data_dir is missing")
	}
	if y.Misc.NCCLVersion.Kind == yaml.ScalarNode {
		s.NCCLVersion = y.Misc.NCCLVersion.Value
	} else if y.Misc.NCCLVersion.Kind != 0 {
		bad = append(bad, "misc.nccl_version must be a string")
	}
	for k, v := range y.Misc.NCCLMem {
		n, err := strconv.Atoi(k)
		if err != nil || n < 0 {
			bad = append(bad, fmt.Sprintf("misc.nccl_mem key %q is not a GPU count", k))
			continue
		}
		s.NCCLMem[n] = v
	}
	for key, v := range map[string]float64{
		"gpu.mem_bw": s.MemBW, "gpu.mem_bw_empirical_scaling_factor": s.MemBWEmpiricalScalingFactor,
		"gpu.mem_empirical_constant_latency": s.MemEmpiricalConstantLatency, "gpu.mem_capacity": s.MemCapacity,
		"gpu.bfloat16_tc_flops": s.BF16TCFlops, "gpu.int8_tc_flops": s.INT8TCFlops, "gpu.fp8_tc_flops": s.FP8TCFlops,
		"gpu.fp4_tc_flops": s.FP4TCFlops, "gpu.power": s.Power, "node.inter_node_bw": s.InterNodeBW,
		"node.intra_node_bw": s.IntraNodeBW, "node.pcie_bw": s.PCIeBW, "node.p2p_latency": s.P2PLatency,
		"node.inter_rack_bw": s.InterRackBW, "misc.other_mem": s.OtherMem,
	} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			bad = append(bad, key+" must be a finite number ≥ 0")
		}
	}
	for _, v := range s.NCCLMem {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			bad = append(bad, "misc.nccl_mem values must be finite numbers ≥ 0")
			break
		}
	}
	if y.Node.NumGPUsPerNode != nil && s.NumGPUsPerNode <= 0 {
		bad = append(bad, "node.num_gpus_per_node must be > 0")
	}
	if y.GPU.MemBW != nil && s.MemBW <= 0 {
		bad = append(bad, "gpu.mem_bw must be > 0")
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return nil, fmt.Errorf("system spec %s: %s", file, strings.Join(bad, "; "))
	}
	return s, nil
}

// oneLineErr folds a multi-line error (yaml reports one line per problem) onto one line.
func oneLineErr(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
