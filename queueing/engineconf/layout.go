package engineconf

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aicdb/aicdb/engine"
)

// Layout is one worker's parallelism in aicdb's terms (perfdb.Config's, the
// flags --tp --pp --dp --moe-tp --moe-ep): TP the attention tensor-parallel
// size, PP the pipeline stages, DP the attention data-parallel ranks and, for a
// MoE model, MoETP × MoEEP = TP × DP the experts' split. The engines spell it
// differently (engineLayout, Render):
//   - vLLM: tensor_parallel_size TP, data_parallel_size DP, pipeline_parallel_size
//     PP; a MoE model's experts are tensor-parallel over the TP·DP GPUs, or
//     expert-parallel over them with enable_expert_parallel;
//   - TensorRT-LLM: tensor_parallel_size is the world of the TP group (TP·DP),
//     and enable_attention_dp runs attention data-parallel over it at attention
//     tp 1; moe_tensor_parallel_size × moe_expert_parallel_size = that world
//     (TensorRT-LLM's Mapping; without them the experts are tensor-parallel);
//   - SGLang: tp_size is the world (TP·DP) and dp_size with enable_dp_attention
//     splits attention into DP ranks of tp_size / dp_size; ep_size splits the
//     experts (moe-tp = tp_size / ep_size).
type Layout struct{ TP, PP, DP, MoETP, MoEEP int }

// Flags writes l as the flags that price it.
func (l Layout) Flags(moe bool) string {
	s := fmt.Sprintf("--tp %d --pp %d --dp %d", l.TP, l.PP, l.DP)
	if moe {
		s += fmt.Sprintf(" --moe-tp %d --moe-ep %d", l.MoETP, l.MoEEP)
	}
	return s
}

// sameAs reports whether l and o price the same layout (the MoE split only for
// a MoE model).
func (l Layout) sameAs(o Layout, moe bool) bool {
	if l.TP != o.TP || l.PP != o.PP || l.DP != o.DP {
		return false
	}
	return !moe || (l.MoETP == o.MoETP && l.MoEEP == o.MoEEP)
}

// Layout dimensions a key names (rule.layout).
const (
	dimTP    = "tp"     // tensor parallel size (the engine's own meaning: engineLayout)
	dimPP    = "pp"     // pipeline stages
	dimDP    = "dp"     // data-parallel ranks
	dimADP   = "adp"    // attention data parallel on (TensorRT-LLM, SGLang)
	dimEP    = "ep"     // vLLM enable_expert_parallel
	dimMoETP = "moe_tp" // TensorRT-LLM moe_tensor_parallel_size
	dimMoEEP = "moe_ep" // expert-parallel size
	dimCP    = "cp"     // context parallelism, not priced: only 1
)

// layoutKey is the rule of a key that names one dimension of the worker's
// parallelism: checked here, not applied to engine.Spec (the layout is the
// prediction's --tp … flags, which Config.CheckLayout compares it with).
func layoutKey(dim string) rule {
	if dim == dimADP || dim == dimEP {
		return rule{class: classLayout, isBool: true, layout: dim, check: func(v string) (string, error) {
			b, err := parseBool(v)
			return strconv.FormatBool(b), err
		}}
	}
	return rule{class: classLayout, layout: dim, check: func(v string) (string, error) {
		if strings.TrimSpace(v) == "-1" && (dim == dimMoETP || dim == dimMoEEP || dim == dimCP) {
			return "0", nil // TensorRT-LLM's "unset" (its Mapping derives it)
		}
		n, err := parseInt(v, 1)
		if err == nil && dim == dimCP && n != 1 {
			return "", fmt.Errorf("context parallelism splits each prompt over %d GPUs, which the perf data does not time; set 1 or remove it", n)
		}
		return strconv.Itoa(n), err
	}}
}

// NamesLayout reports whether the file names any parallelism key.
func (c *Config) NamesLayout() bool { return len(c.LayoutKeys) > 0 }

// Layout is the worker layout the file deploys, the keys it omits at the
// engine's defaults (read once, by Parse); ok is false when it names none.
func (c *Config) Layout() (Layout, bool) {
	if c.layout == nil {
		return Layout{}, false
	}
	return *c.layout, true
}

// readLayout derives the layout the parallelism keys deploy (nil when the file
// names none), or why the engine would not start with them.
func (c *Config) readLayout() (*Layout, error) {
	if !c.NamesLayout() {
		return nil, nil
	}
	var l Layout
	n := map[string]int{}
	on := map[string]bool{}
	given := map[string]string{} // dimension → the key that set it
	for _, s := range c.LayoutKeys {
		r, _ := lookup(c.Backend, s.Key)
		given[r.layout] = s.Key
		if r.isBool {
			on[r.layout] = s.Value == "true"
		} else {
			n[r.layout], _ = strconv.Atoi(s.Value)
		}
	}
	get := func(dim string) int { return max(n[dim], 1) }
	l.PP = get(dimPP)
	switch c.Backend {
	case engine.VLLM:
		l.TP, l.DP = get(dimTP), get(dimDP)
		if on[dimEP] {
			l.MoETP, l.MoEEP = 1, l.TP*l.DP
		} else {
			l.MoETP, l.MoEEP = l.TP*l.DP, 1
		}
	case engine.TRTLLM:
		world := get(dimTP)
		l.TP, l.DP = world, 1
		if on[dimADP] {
			l.TP, l.DP = 1, world
		}
		mtp, mep := n[dimMoETP], n[dimMoEEP]
		switch {
		case mtp == 0 && mep == 0:
			mtp, mep = world, 1
		case mtp == 0 && world%mep == 0:
			mtp = world / mep
		case mep == 0 && world%mtp == 0:
			mep = world / mtp
		}
		if mtp*mep != world {
			return nil, fmt.Errorf("moe_tensor_parallel_size × moe_expert_parallel_size must be tensor_parallel_size %d (TensorRT-LLM's Mapping); got %s × %s",
				world, orUnset(n[dimMoETP]), orUnset(n[dimMoEEP]))
		}
		l.MoETP, l.MoEEP = mtp, mep
	case engine.SGLang:
		world, dp := get(dimTP), get(dimDP)
		switch {
		case dp > 1 && !on[dimADP]:
			return nil, fmt.Errorf("%s %d without enable_dp_attention runs %d independent replicas behind SGLang's data-parallel router, which aicdb does not model as one worker; predict one replica (drop %s) at its share of the load",
				given[dimDP], dp, dp, given[dimDP])
		case world%dp != 0:
			return nil, fmt.Errorf("%s %d: %s %d must divide it (attention runs at tp_size / dp_size)", given[dimTP], world, given[dimDP], dp)
		}
		l.TP, l.DP = world/dp, dp
		ep := get(dimMoEEP)
		if world%ep != 0 {
			return nil, fmt.Errorf("%s %d must divide the tp size %d (the experts' tensor-parallel split is tp_size / ep_size)", given[dimMoEEP], ep, world)
		}
		l.MoETP, l.MoEEP = world/ep, ep
	}
	return &l, nil
}

// orUnset writes a size or "unset".
func orUnset(n int) string {
	if n == 0 {
		return "unset"
	}
	return strconv.Itoa(n)
}

// CheckLayout reports a file whose parallelism keys deploy another layout than
// want, the one the prediction prices (moe: the model is MoE, so the experts'
// split counts too), as a *LayoutMismatch. A file that names no layout key
// passes: its layout is the flags'.
func (c *Config) CheckLayout(want Layout, moe bool) error {
	got, ok := c.Layout()
	if !ok || got.sameAs(want, moe) {
		return nil
	}
	keys := make([]string, len(c.LayoutKeys))
	for i, s := range c.LayoutKeys {
		keys[i] = s.Key + " " + s.Value
	}
	return &LayoutMismatch{Keys: strings.Join(keys, ", "), Got: got, Want: want, MoE: moe}
}

// LayoutMismatch is CheckLayout's error: the file's parallelism keys (Keys)
// deploy Got, the prediction prices Want. The caller appends the fix its
// command offers (eval: the flags of Got, Got.Flags).
type LayoutMismatch struct {
	Keys      string
	Got, Want Layout
	MoE       bool
}

func (e *LayoutMismatch) Error() string {
	return fmt.Sprintf("its parallelism (%s) deploys %s, but the prediction prices %s", e.Keys, e.Got.describe(e.MoE), e.Want.describe(e.MoE))
}

// describe writes l for an error message.
func (l Layout) describe(moe bool) string {
	s := fmt.Sprintf("tp %d, pp %d, dp %d", l.TP, l.PP, l.DP)
	if moe {
		s += fmt.Sprintf(", moe-tp %d, moe-ep %d", l.MoETP, l.MoEEP)
	}
	return s
}

// layoutKVs are the launch keys of layout l on backend (Render's), or why the
// engine cannot run it: the inverse of Config.Layout.
func layoutKVs(backend engine.Backend, l Layout) ([]renderKV, error) {
	tp, pp, dp := max(l.TP, 1), max(l.PP, 1), max(l.DP, 1)
	mtp, mep := max(l.MoETP, 1), max(l.MoEEP, 1)
	moe := mtp > 1 || mep > 1 // a dense model's split is 1 × 1
	switch backend {
	case engine.VLLM:
		if mtp > 1 && mep > 1 {
			return nil, fmt.Errorf("layout moe-tp %d × moe-ep %d: vLLM splits a MoE model's experts either by tensor parallelism or by expert parallelism (enable_expert_parallel) over all tp·dp GPUs, not both", mtp, mep)
		}
		kv := []renderKV{{key: "tensor-parallel-size", value: itoa(tp)}, {key: "pipeline-parallel-size", value: itoa(pp)}}
		if dp > 1 {
			kv = append(kv, renderKV{key: "data-parallel-size", value: itoa(dp)})
		}
		if mep > 1 {
			kv = append(kv, renderKV{key: "enable-expert-parallel", flagOnly: true})
		}
		return kv, nil
	case engine.TRTLLM:
		if tp > 1 && dp > 1 {
			return nil, fmt.Errorf("layout tp %d × dp %d: TensorRT-LLM's attention data parallelism runs attention at tp 1 (enable_attention_dp over tensor_parallel_size ranks)", tp, dp)
		}
		kv := []renderKV{{key: "tensor_parallel_size", value: itoa(tp * dp)}, {key: "pipeline_parallel_size", value: itoa(pp)}}
		if moe {
			kv = append(kv, renderKV{key: "moe_expert_parallel_size", value: itoa(mep)}, renderKV{key: "moe_tensor_parallel_size", value: itoa(mtp)})
		}
		if dp > 1 {
			kv = append(kv, renderKV{key: "enable_attention_dp", value: "true"})
		}
		return kv, nil
	case engine.SGLang:
		kv := []renderKV{{key: "tp-size", value: itoa(tp * dp)}, {key: "pp-size", value: itoa(pp)}}
		if dp > 1 {
			kv = append(kv, renderKV{key: "dp-size", value: itoa(dp)}, renderKV{key: "enable-dp-attention", flagOnly: true})
		}
		if mep > 1 {
			kv = append(kv, renderKV{key: "ep-size", value: itoa(mep)})
		}
		return kv, nil
	}
	return nil, fmt.Errorf("backend %q: no layout keys", backend)
}
