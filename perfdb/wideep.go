package perfdb

// wideep.go: wide-EP (aiconfigurator's "large EP") — attention data parallelism
// with the MoE experts spread by expert parallelism and the tokens moved by an
// all-to-all (dispatch/combine; TRT-LLM adds a prepare phase) instead of the fused
// path's all-gather / reduce-scatter (compose.go dispatch). The reference selects
// it per phase from its comm-backend registry (sdk/operations/moe_comm.py
// MOE_A2A_BACKENDS) when the deployment is feasible for a backend and that
// backend's all-to-all table covers its moe-ep; it then prices the MoE block from
// the all-to-all table (moe_a2a, with the legacy wideep_deepep_normal/ll and
// TRT-LLM alltoall adapters) and the expert-compute table (moe_expert_compute,
// with the legacy wideep_context/generation_moe and TRT-LLM wideep_moe adapters),
// and on SGLang swaps in its DeepEP attention stack (wideep_context/
// generation_mla). aicdb loads SGLang's tables (wideep_tables.go) and prices
// its DeepSeek graph (ops_deepseek_wideep.go); whatever the data does not
// cover is refused with one line naming what is missing — never priced on
// the fused path instead.

import (
	"fmt"
	"slices"
)

// moeA2ABackend is one entry of the reference's all-to-all registry.
type moeA2ABackend struct {
	name     string
	backends []string // serving frameworks it runs on
	phases   []string // inference phases it serves
	minSM    int
	// tables are the perf tables the reference prices the phase from (the
	// all-to-all table first, then the expert compute of that framework).
	tables []string
}

// moeA2ABackends is the registry in the reference's order: the first entry
// covering a phase wins.
var moeA2ABackends = []moeA2ABackend{
	{name: "deepep_ht", backends: []string{"sglang", "vllm"}, phases: []string{"context"},
		tables: []string{"wideep_deepep_normal_perf", "wideep_context_moe_perf"}},
	{name: "deepep_ll", backends: []string{"sglang", "vllm"}, phases: []string{"generation"},
		tables: []string{"wideep_deepep_ll_perf", "wideep_generation_moe_perf"}},
	{name: "nvlink_two_sided", backends: []string{"trtllm"}, phases: []string{"context", "generation"}, minSM: 100,
		tables: []string{"trtllm_alltoall_perf", "wideep_moe_perf"}},
	{name: "nvlink_one_sided", backends: []string{"trtllm"}, phases: []string{"context", "generation"}, minSM: 100,
		tables: []string{"trtllm_alltoall_perf", "wideep_moe_perf"}},
}

// maxA2ATopK is the registry's top-k bound of every all-to-all backend.
const maxA2ATopK = 8

// WideEPBackends returns, per inference phase, the all-to-all backend the
// reference would price a wide-EP deployment with (the first feasible registry
// entry serving the phase), or an error naming the first rule the deployment
// breaks. The rules are the registry's feasibility (moe-tp 1, 1 < moe-ep ≤
// experts, experts divisible by moe-ep, top-k ≤ 8, the backend's minimum SM)
// and TRT-LLM's attention-DP requirement (validate_trtllm_large_ep).
func WideEPBackends(m *Model, cfg Config, smVersion int) (map[string]string, error) {
	if m.NumExperts == 0 {
		return nil, fmt.Errorf("wide-EP: %s has no routed experts (family %s)", m.ID, m.Family)
	}
	switch {
	case cfg.MoETP != 1:
		return nil, fmt.Errorf("wide-EP: --moe-tp %d: the all-to-all needs moe-tp 1 (experts split by expert parallelism only)", cfg.MoETP)
	case cfg.MoEEP <= 1 || cfg.MoEEP > m.NumExperts || m.NumExperts%cfg.MoEEP != 0:
		return nil, fmt.Errorf("wide-EP: --moe-ep %d: want 1 < moe-ep ≤ %d dividing the %d experts of %s", cfg.MoEEP, m.NumExperts, m.NumExperts, m.ID)
	case m.TopK > maxA2ATopK:
		return nil, fmt.Errorf("wide-EP: %s routes to %d experts per token; the all-to-all backends serve top-k ≤ %d", m.ID, m.TopK, maxA2ATopK)
	case cfg.Backend == "trtllm" && cfg.DP <= 1:
		return nil, fmt.Errorf("wide-EP on trtllm needs attention data parallelism: --dp %d, want > 1", cfg.DP)
	}
	out := map[string]string{}
	for _, phase := range []string{"context", "generation"} {
		for _, b := range moeA2ABackends {
			if slices.Contains(b.backends, cfg.Backend) && slices.Contains(b.phases, phase) && smVersion >= b.minSM {
				out[phase] = b.name
				break
			}
		}
		if out[phase] == "" {
			return nil, fmt.Errorf("wide-EP: no all-to-all backend serves the %s phase on %s at SM %d", phase, cfg.Backend, smVersion)
		}
	}
	return out, nil
}

// wideEPPlan builds the wide-EP op lists of a feasible deployment (backends
// from WideEPBackends) or refuses it in one line naming what is missing:
// aicdb prices SGLang's DeepEP graph for the DeepSeek MLA families on
// silicon tables; TRT-LLM lacks trtllm_alltoall_perf in the data and vLLM
// has no DeepEP tables at all. Every wide-EP kernel is probed once so a
// table that does not cover the deployment is refused here, not mid-sweep.
func wideEPPlan(ks kernels, m *Model, cfg *Config, backends map[string]string) (opLists, error) {
	const drop = "drop --wide-ep to price the fused all-gather/reduce-scatter path"
	switch {
	case cfg.Backend == "trtllm":
		return opLists{}, fmt.Errorf("wide-EP on trtllm is not priced: its nvlink all-to-all needs trtllm_alltoall_perf, which aicdb does not load (absent from the b200/h200 data, which has only wideep_moe_perf); %s", drop)
	case cfg.Backend != "sglang":
		return opLists{}, fmt.Errorf("wide-EP on %s is not priced: no %s DeepEP tables exist (wideep_deepep_normal/ll_perf and wideep_context/generation_moe_perf are collected for sglang only); %s", cfg.Backend, cfg.Backend, drop)
	case !isMLAFamily(m):
		return opLists{}, fmt.Errorf("wide-EP on sglang is priced for the DeepSeek MLA families (DEEPSEEK, KIMIK25); %s is family %s; %s", m.ID, m.Family, drop)
	case cfg.Mode != "" && cfg.Mode != ModeSilicon && cfg.Mode != ModeHybrid:
		return opLists{}, fmt.Errorf("wide-EP is priced from silicon tables only (database mode %s has no estimate for them); use SILICON or HYBRID", cfg.Mode)
	case cfg.TP > 1:
		return opLists{}, fmt.Errorf("wide-EP on sglang with --tp %d: the all-gather/reduce-scatter around a TP-sharded DeepEP attention is not modeled; use --tp 1 and --dp %d", cfg.TP, cfg.TP*cfg.DP)
	case cfg.PP > 1:
		return opLists{}, fmt.Errorf("wide-EP on sglang with --pp %d: pipeline parallelism is not part of the reference's wide-EP graph; use --pp 1", cfg.PP)
	}
	ls, err := buildDeepSeekWideEP(m, cfg, backends)
	if err != nil {
		return opLists{}, err
	}
	for _, list := range [][]op{ls.ctx, ls.gen} {
		for i := range list {
			o := &list[i]
			switch o.kind {
			case opMoEA2A, opWideEPExpert, opWideEPCtxMLA, opWideEPGenMLA:
				if _, err := o.query(ks, 1, 1, 0, 1); err != nil {
					return opLists{}, fmt.Errorf("wide-EP on sglang for %s at moe-ep %d cannot be priced: %w; %s", m.ID, cfg.MoEEP, err, drop)
				}
			}
		}
	}
	return ls, nil
}
