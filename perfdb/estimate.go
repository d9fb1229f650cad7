package perfdb

// estimate.go reproduces aiconfigurator's legacy estimates with its exact
// semantics (PERFDB.md §2.2–§2.4; golden_inputs.json notes): static (context,
// generation with stride, total), the mixed step, agg (mix and gen-only steps
// with the per-backend hooks) and disagg (correction scales, autoscale TTFT
// factor, rate matching). Rounding follows the reference: static and disagg
// rows are rounded to 3 decimals (InferenceSummary DataFrame.round(3)); agg
// and mixed values are not.

import (
	"errors"
	"fmt"
	"math"

	"github.com/aicdb/aicdb/engine"
)

// Config is one worker's deployment: backend, parallelism and quant modes.
// Zero quant fields take the model's defaults resolved for the backend
// (ResolveQuant); zero sizes default to 1.
type Config struct {
	Backend string // vllm | trtllm | sglang
	Version string
	TP      int
	PP      int
	DP      int // attention data parallel
	MoETP   int
	MoEEP   int
	Nextn   int // MTP draft tokens (0 = none)
	// SeparateDrafter: the Nextn drafts come from a separate drafter (an EAGLE /
	// EAGLE3 head on vLLM or SGLang), priced as aiconfigurator prices any draft, one
	// target-sized layer each (mtp_scale_factor); without it the model must
	// carry MTP layers of its own (refine.WorkerTiming).
	SeparateDrafter bool

	GemmQuant GemmQuant
	KVQuant   KVQuant
	FMHAQuant FMHAQuant
	MoEQuant  MoEQuant
	CommQuant CommQuant

	// Mode is the database mode kernels are answered in (default SILICON).
	Mode DatabaseMode

	// WideEP asks for the all-to-all MoE path (wideep.go): checked for
	// feasibility, then priced where the data covers it (SGLang DeepEP,
	// DeepSeek MLA families) and refused in one line otherwise.
	WideEP bool

	sys *System
}

// Estimator prices one model on one worker configuration. It is immutable
// after construction and safe for concurrent use (the kernels source is).
type Estimator struct {
	ks    kernels
	sys   *System
	model *Model
	cfg   Config
	ops   opLists
}

// monotone returns e pricing from monotone kernel curves (Querier.Monotone)
// when its kernels are a Querier; e itself otherwise.
func (e *Estimator) monotone() *Estimator {
	q, ok := e.ks.(*Querier)
	if !ok {
		return e
	}
	m := *e
	m.ks = q.Monotone()
	return &m
}

// ErrUnsupportedFamily marks models whose family has no op list here.
var ErrUnsupportedFamily = errors.New("model family not supported")

// newEstimator validates cfg and builds the op lists.
func newEstimator(ks kernels, sys *System, m *Model, cfg Config) (*Estimator, error) {
	if sys == nil || m == nil || ks == nil {
		return nil, errors.New("estimator: system, model and kernels are required")
	}
	for _, p := range []*int{&cfg.TP, &cfg.PP, &cfg.DP, &cfg.MoETP, &cfg.MoEEP} {
		if *p == 0 {
			*p = 1
		}
	}
	if err := ValidateConfig(m, cfg); err != nil {
		return nil, err
	}
	if cfg.GemmQuant == "" {
		cfg.GemmQuant = GemmQuant(m.GemmQuant)
	}
	if cfg.KVQuant == "" {
		cfg.KVQuant = KVQuant(m.KVQuant)
	}
	if cfg.FMHAQuant == "" {
		cfg.FMHAQuant = FMHAQuant(m.FMHAQuant)
	}
	if cfg.MoEQuant == "" {
		cfg.MoEQuant = MoEQuant(m.MoEQuant)
	}
	if cfg.CommQuant == "" {
		cfg.CommQuant = CommHalf
	}
	if _, err := cfg.KVQuant.Mapping(); err != nil {
		return nil, err
	}
	if _, err := cfg.FMHAQuant.Mapping(); err != nil {
		return nil, err
	}
	cfg.sys = sys
	if cfg.WideEP {
		backends, err := WideEPBackends(m, cfg, sys.SMVersion)
		if err != nil {
			return nil, err
		}
		ls, err := wideEPPlan(ks, m, &cfg, backends)
		if err != nil {
			return nil, err
		}
		return &Estimator{ks: ks, sys: sys, model: m, cfg: cfg, ops: ls}, nil
	}
	var ls opLists
	var err error
	switch m.Family {
	case "LLAMA":
		ls, err = buildLlama(m, &cfg)
	case "MOE":
		ls, err = buildMoE(m, &cfg)
	case "DEEPSEEK", "KIMIK25":
		ls, err = buildDeepSeek(m, &cfg)
	case "DEEPSEEKV32":
		ls, err = buildDeepSeekV32(m, &cfg)
	case "QWEN35":
		ls, err = buildQwen35(m, &cfg)
	default:
		return nil, fmt.Errorf("%w: %s (architecture %s) is family %q; supported: LLAMA, MOE, DEEPSEEK, KIMIK25, DEEPSEEKV32, QWEN35",
			ErrUnsupportedFamily, m.ID, m.Architecture, m.Family)
	}
	if err != nil {
		return nil, err
	}
	return &Estimator{ks: ks, sys: sys, model: m, cfg: cfg, ops: ls}, nil
}

// ValidateConfig checks cfg against the model without touching perf data:
// positive sizes, tp dividing the attention heads, a known backend and, for
// MoE models, tp·dp = moe-tp·moe-ep. Errors name the flag.
func ValidateConfig(m *Model, cfg Config) error {
	for _, p := range []*int{&cfg.TP, &cfg.PP, &cfg.DP, &cfg.MoETP, &cfg.MoEEP} {
		if *p == 0 {
			*p = 1
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"tp", cfg.TP}, {"pp", cfg.PP}, {"dp", cfg.DP}, {"moe-tp", cfg.MoETP}, {"moe-ep", cfg.MoEEP}} {
		if f.v < 0 {
			return fmt.Errorf("--%s %d: must be ≥ 1", f.name, f.v)
		}
	}
	if cfg.Nextn < 0 {
		return fmt.Errorf("--nextn %d: must be ≥ 0", cfg.Nextn)
	}
	if m.Heads%cfg.TP != 0 {
		return fmt.Errorf("--tp %d does not divide the %d attention heads of %s; use a divisor", cfg.TP, m.Heads, m.ID)
	}
	if _, err := engine.Lookup(cfg.Backend); err != nil {
		return err
	}
	switch m.Family {
	case "MOE":
		return validateMoE(m, &cfg)
	case "DEEPSEEK", "KIMIK25", "DEEPSEEKV32":
		return validateDeepSeek(m, &cfg)
	case "QWEN35":
		return validateQwen35(m, &cfg)
	}
	return nil
}

// Config returns the resolved configuration (quant defaults filled in).
func (e *Estimator) Config() Config { return e.cfg }

// Model returns the model the estimator prices.
func (e *Estimator) Model() *Model { return e.model }

// gpus is the worker's GPU count tp·pp·dp.
func (e *Estimator) gpus() int { return e.cfg.TP * e.cfg.PP * e.cfg.DP }

// ContextMs is the context phase (Engine::run_context_phase): every context op
// once at batch b, s = isl − prefix, prefix; unrounded.
func (e *Estimator) ContextMs(batch, isl, prefix int) (Perf, error) {
	if prefix >= isl {
		return Perf{}, fmt.Errorf("isl must be greater than 0 after removing prefix, but got %d", isl-prefix)
	}
	return runContext(e.ks, e.ops.ctx, batch, isl-prefix, prefix, allOps)
}

// GenerationMs is the generation phase (Engine::run_generation_phase_with):
// for i in range(0, osl−1, stride) one step at batch b·(nextn+1), KV length
// s = isl + i + 1, weighted by min(stride, osl−1−i); unrounded.
func (e *Estimator) GenerationMs(batch, isl, osl, stride int) (Perf, error) {
	stride = max(stride, 1)
	bs := batch * (e.cfg.Nextn + 1)
	total := Perf{}
	for i := 0; i < osl-1; i += stride {
		step, err := runGenStep(e.ks, e.ops.gen, bs, isl+i+1, false)
		if err != nil {
			return Perf{}, err
		}
		total = total.Plus(step.Scaled(float64(min(stride, osl-1-i))))
	}
	return total, nil
}

// MixedMs is Engine::mixed_step_latency: pass 1 every context op but
// context_attention at batch 1 over ctx + gen·(nextn+1) tokens with prefix
// prefix·⌊ctx/isl⌋; pass 2 context_attention at batch ⌈ctx/isl⌉, s = isl −
// prefix, divided by ⌈isl/ctx⌉; pass 3 generation_attention at batch
// gen·(nextn+1), KV length isl + osl/2 + 1 (skipped when gen = 0).
func (e *Estimator) MixedMs(ctxTokens, genTokens, isl, osl, prefix int) (float64, error) {
	if ctxTokens < 0 || genTokens < 0 {
		return 0, fmt.Errorf("ctx-tokens %d and gen-tokens %d must be ≥ 0", ctxTokens, genTokens)
	}
	if ctxTokens == 0 && genTokens == 0 {
		return 0, nil
	}
	isl = max(isl, 1)
	combined := ctxTokens + genTokens*(e.cfg.Nextn+1)
	prefix1 := prefix * (ctxTokens / isl)
	if prefix1 >= combined {
		return 0, fmt.Errorf("isl must be greater than 0 after removing prefix, but got %d", combined-prefix1)
	}
	p1, err := runContext(e.ks, e.ops.ctx, 1, combined-prefix1, prefix1, skipContextAttention)
	if err != nil {
		return 0, err
	}
	var p2 float64
	if ctxTokens > 0 {
		if prefix >= isl {
			return 0, fmt.Errorf("isl must be greater than 0 after removing prefix, but got %d", isl-prefix)
		}
		b2 := ceilDiv(ctxTokens, isl)
		scale2 := float64(ceilDiv(isl, ctxTokens))
		a, err := runContext(e.ks, e.ops.ctx, b2, isl-prefix, prefix, onlyContextAttention)
		if err != nil {
			return 0, err
		}
		p2 = a.LatencyMs / scale2
	}
	var p3 float64
	if genTokens > 0 {
		a, err := runGenStep(e.ks, e.ops.gen, genTokens*(e.cfg.Nextn+1), isl+osl/2+1, true)
		if err != nil {
			return 0, err
		}
		p3 = a.LatencyMs
	}
	v := p1.LatencyMs + p2 + p3
	return v, finite("mixed step", v)
}

// GenOnlyMs is Engine::decode_step_latency: the full generation op list at
// batch gen·(nextn+1), KV length isl + osl/2 + 1.
func (e *Estimator) GenOnlyMs(genTokens, isl, osl int) (float64, error) {
	if genTokens <= 0 {
		return 0, nil
	}
	r, err := runGenStep(e.ks, e.ops.gen, genTokens*(e.cfg.Nextn+1), max(isl, 1)+max(osl, 1)/2+1, false)
	return r.LatencyMs, err
}

// ceilDiv is ⌈a/b⌉ for positive ints.
func ceilDiv(a, b int) int { return (a + b - 1) / b }

// round3 is Python's round(x, 3) / DataFrame.round(3) (half-to-even on the
// decimal value, which float rounding reproduces except at exact ties).
func round3(x float64) float64 { return math.RoundToEven(x*1000) / 1000 }
