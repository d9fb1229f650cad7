package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/engineconf"
	"github.com/aicdb/aicdb/queueing/workload"
	"github.com/aicdb/aicdb/refine"
)

// engineProfileFlag declares --engine-profile. def is the command's default: eval
// and sweep default to aiconfigurator (how aiconfigurator's recommendations are
// deployed, and how the measured silicon rows were run); oracle run has none (the
// scenario's engine as written).
func engineProfileFlag(def string) cli.Flag {
	usage := "engine configuration `PROFILE`: defaults (the engines' bare defaults) or aiconfigurator (aiconfigurator's generator rules: budget batch + isl + 1500, running cap = batch, …)"
	if def == "" {
		usage += "; default: the scenario's engine as written"
	}
	return &cli.StringFlag{Name: "engine-profile", Value: def, Usage: usage}
}

// engineConfigFlag declares --engine-config.
func engineConfigFlag() cli.Flag {
	return &cli.StringFlag{Name: "engine-config", Usage: "the engine's own config `FILE` (vLLM CLI args or YAML, TensorRT-LLM extra_llm_api_options YAML, SGLang server args), applied over --engine-profile"}
}

// readEngineConfig parses --engine-config for backend (nil when not given),
// lists the keys it ignores on stderr in one line, and warns in another of the
// keys applied whose timing the perf data cannot price (TimingLine).
func readEngineConfig(c *cli.Context, backend string) (*engineconf.Config, error) {
	path := c.String("engine-config")
	if path == "" {
		return nil, nil
	}
	cfg, err := engineconf.ParseFile(backend, path)
	if err != nil {
		return nil, userErrorf("--engine-config: %v", err)
	}
	if line := cfg.IgnoredLine(); line != "" {
		fmt.Fprintf(c.App.ErrWriter, "aicdb: %s\n", line)
	}
	if line := cfg.TimingLine(); line != "" {
		fmt.Fprintf(c.App.ErrWriter, "aicdb: warning: %s\n", line)
	}
	return cfg, nil
}

// checkProfile names --engine-profile in its error.
func checkProfile(p string) error {
	if p != queueing.ProfileDefaults && p != queueing.ProfileAIConfigurator {
		return userErrorf("--engine-profile %q: unknown; use %s or %s", p, queueing.ProfileDefaults, queueing.ProfileAIConfigurator)
	}
	return nil
}

// resolveEngine is the engine of eval: --engine-profile, then --engine-config over
// it (the explicit engine flags are applied over both by the caller), and the
// config read (nil without one).
func resolveEngine(c *cli.Context, in queueing.ProfileInput) (engine.Spec, *engineconf.Config, error) {
	es, cfg, err := resolveEngines(c, in)
	if err != nil {
		return engine.Spec{}, nil, err
	}
	return es[0], cfg, nil
}

// resolveEngines is resolveEngine for each worker role of one deployment (eval
// --mode disagg: the prefill and the decode pool), the config file read once.
func resolveEngines(c *cli.Context, ins ...queueing.ProfileInput) ([]engine.Spec, *engineconf.Config, error) {
	if _, err := engine.Defaults(ins[0].Backend, ins[0].Version); err != nil {
		return nil, nil, userErrorf("--backend: %v", err)
	}
	if err := checkProfile(c.String("engine-profile")); err != nil {
		return nil, nil, err
	}
	var cfg *engineconf.Config
	out := make([]engine.Spec, len(ins))
	for i, in := range ins {
		e, err := queueing.ProfileEngine(c.String("engine-profile"), in)
		if err != nil {
			return nil, nil, userErrorf("--engine-profile %s: %v", c.String("engine-profile"), err)
		}
		if i == 0 {
			if cfg, err = readEngineConfig(c, string(e.Backend)); err != nil {
				return nil, nil, err
			}
		}
		if cfg != nil {
			if err := cfg.Apply(&e); err != nil {
				return nil, nil, userErrorf("--engine-config %s: %v", c.String("engine-config"), err)
			}
		}
		out[i] = e
	}
	return out, cfg, nil
}

// checkKVDtype rejects an engine whose config's KV-cache dtype contradicts the
// KV quant pt times and sizes the pool with (engineconf.CheckKVQuant); a
// synthetic timing (pt nil) has no KV quant.
func checkKVDtype(pt *perfdb.PassTiming, e engine.Spec) error {
	if pt == nil {
		return nil
	}
	if err := engineconf.CheckKVQuant(e, string(pt.Estimator().Config().KVQuant)); err != nil {
		return userErrorf("--engine-config: %v; give --kv-quant %s, or drop the key", err, e.KVCacheDtype)
	}
	return nil
}

// sweepEngineFlags puts --engine-profile and --engine-config into the sweep spec.
func sweepEngineFlags(c *cli.Context, s *refine.SweepSpec) error {
	if err := checkProfile(c.String("engine-profile")); err != nil {
		return err
	}
	s.EngineProfile = c.String("engine-profile")
	cfg, err := readEngineConfig(c, s.Backend)
	if err != nil {
		return err
	}
	if !c.IsSet("nextn") {
		// The drafts price every row (--nextn); the config may name their drafter
		// (an EAGLE / EAGLE3 head), not their acceptance.
		if err := noConfigDrafts(c, cfg, s.Backend, "sweep: give --nextn N --nextn-accepted A with it"); err != nil {
			return err
		}
	}
	// Refused before the sweep starts, what queueing's input check would refuse
	// at every point.
	if probe, ok := configProbe(cfg, s.Backend); ok {
		if err := queueing.CheckRequestFits(probe, s.ISL, s.OSL, s.Prefix, "workload"); err != nil {
			return userErrorf("--engine-config %s: %v", c.String("engine-config"), err)
		}
	}
	if cfg != nil {
		if err := sweepConfigLayout(c, cfg, s); err != nil {
			return err
		}
	}
	s.EngineConfig = cfg
	return nil
}

// checkConfigLayout refuses an engine config cfg (nil: none) whose parallelism
// keys deploy another layout than the pass timing pt prices
// (engineconf.CheckLayout): the prediction would be of another deployment than
// the file launches. The fix names eval's flags, or, for a disaggregated
// deployment (one file for both pools), the pools'. A synthetic timing (pt
// nil) prices no layout: the keys are noted as not applied.
func checkConfigLayout(c *cli.Context, cfg *engineconf.Config, pt *perfdb.PassTiming, disagg bool) error {
	if cfg == nil {
		return nil
	}
	if pt == nil {
		if cfg.NamesLayout() {
			fmt.Fprintln(c.App.ErrWriter, "aicdb: note: engine config: parallelism keys not applied: --timing gives the pass timing")
		}
		return nil
	}
	k := pt.Estimator().Config()
	l := engineconf.Layout{TP: k.TP, PP: k.PP, DP: k.DP, MoETP: k.MoETP, MoEEP: k.MoEEP}
	var lm *engineconf.LayoutMismatch
	if err := cfg.CheckLayout(l, pt.Estimator().Model().IsMoE()); errors.As(err, &lm) {
		fix := fmt.Sprintf("pass %s, or drop those keys", lm.Got.Flags(lm.MoE))
		if disagg {
			fix = "give both pools that layout (--prefill-tp, --decode-tp), or drop those keys"
		}
		return userErrorf("--engine-config %s: %v; %s", c.String("engine-config"), err, fix)
	}
	return nil
}

// sweepConfigLayout reads the layout an engine config deploys into the sweep:
// the sweep prices tp from its --tp list at pp 1, dp 1 and a MoE model's
// experts tensor-parallel (moe-tp = tp), so a file naming another pipeline,
// data or expert split is refused, a --tp list other than the file's tensor
// size is refused, and without --tp the sweep runs the file's (noted on
// stderr).
func sweepConfigLayout(c *cli.Context, cfg *engineconf.Config, s *refine.SweepSpec) error {
	l, ok := cfg.Layout()
	if !ok {
		return nil
	}
	path := c.String("engine-config")
	if l.PP != 1 || l.DP != 1 || l.MoEEP != 1 {
		return userErrorf("--engine-config %s: deploys pp %d, dp %d, moe-ep %d, but a sweep prices pp 1, dp 1 and a MoE model's experts tensor-parallel over the tp GPUs; drop those keys, or price that layout with eval",
			path, l.PP, l.DP, l.MoEEP)
	}
	if len(s.TPs) == 0 {
		s.TPs = []int{l.TP}
		fmt.Fprintf(c.App.ErrWriter, "aicdb: note: sweep: --tp %d from --engine-config's tensor-parallel size\n", l.TP)
		return nil
	}
	for _, tp := range s.TPs {
		if tp != l.TP {
			return userErrorf("--tp %d: --engine-config %s deploys tp %d; pass --tp %d, or drop its tensor-parallel size", tp, path, l.TP, l.TP)
		}
	}
	return nil
}

// noConfigDrafts refuses an engine config that sets MTP drafts where the
// command takes them elsewhere (fix names where): their acceptance is not a
// config key.
func noConfigDrafts(c *cli.Context, cfg *engineconf.Config, backend, fix string) error {
	if n := configDrafts(cfg, backend); n > 0 {
		return userErrorf("--engine-config %s: sets %d MTP draft tokens per decode step (speculative decoding); %s", c.String("engine-config"), n, fix)
	}
	return nil
}

// configDrafts is the number of MTP draft tokens engine config cfg sets for
// backend (its speculative_config); 0 without a config, or when the backend or
// the config does not apply (their errors come when the engine is resolved).
func configDrafts(cfg *engineconf.Config, backend string) int {
	probe, _ := configProbe(cfg, backend)
	return probe.DraftTokens
}

// configProbe is backend's default engine with cfg applied (Config.Probe), for
// reading what the config sets; ok false without a config, or when the backend
// or the config does not apply (their errors come when the engine is resolved).
func configProbe(cfg *engineconf.Config, backend string) (engine.Spec, bool) {
	if cfg == nil || cfg.Backend != engine.Backend(backend) {
		return engine.Spec{}, false
	}
	probe, err := cfg.Probe()
	return probe, err == nil
}

// oracleEngineFlags applies --engine-profile and --engine-config to a scenario's
// engine; without them the scenario runs as written. The profile's inputs come
// from the scenario: batch = the number of requests (every request may be in
// flight), isl and osl = the longest prompt and output. The KV pool (blocks,
// prefix caching) stays the scenario's.
func oracleEngineFlags(c *cli.Context, sc *oracle.Scenario) error {
	if !c.IsSet("engine-profile") && !c.IsSet("engine-config") {
		return nil
	}
	e := sc.Engine
	e.KVCapacityTokens = 0 // the pool stays the scenario's unless the config sets one
	if c.IsSet("engine-profile") {
		if err := checkProfile(c.String("engine-profile")); err != nil {
			return err
		}
		in := queueing.ProfileInput{Backend: string(e.Backend), Role: queueing.RoleAgg, Batch: len(sc.Requests)}
		for _, r := range sc.Requests {
			in.ISL, in.OSL = max(in.ISL, r.PromptLen, len(r.PromptTokens)), max(in.OSL, r.MaxTokens)
		}
		pe, err := queueing.ProfileEngine(c.String("engine-profile"), in)
		if err != nil {
			return userErrorf("--engine-profile %s: %v", c.String("engine-profile"), err)
		}
		e = pe
	}
	cfg, err := readEngineConfig(c, string(e.Backend))
	if err != nil {
		return err
	}
	if err := noConfigDrafts(c, cfg, string(e.Backend), "set draft_tokens and draft_accepted in the scenario's engine instead"); err != nil {
		return err
	}
	if cfg != nil && cfg.NamesLayout() {
		fmt.Fprintf(c.App.ErrWriter, "aicdb: note: engine config: parallelism keys not applied: the scenario gives the pass timing\n")
	}
	if cfg != nil {
		if err := cfg.Apply(&e); err != nil {
			return userErrorf("--engine-config %s: %v", c.String("engine-config"), err)
		}
	}
	// The KV pool keeps its size in tokens (or takes the config's), in whole
	// blocks of the new block size; prefix caching stays the scenario's.
	if e.KVCapacityTokens == 0 {
		e.KVCapacityTokens = sc.Engine.KVCapacityTokens
	}
	if e.BlockSize > 0 {
		e.SetGPUBlocks(e.GPUBlocks())
	}
	e.EnablePrefixCaching, e.StageMs = sc.Engine.EnablePrefixCaching, sc.Engine.StageMs
	sc.Engine = e
	if err := oracle.ValidateEngine(sc.Engine); err != nil {
		return userErrorf("--engine-profile/--engine-config: %v", err)
	}
	return nil
}

// kvCapacityAuto is the --kv-capacity-tokens value that sizes the KV pool from
// the perf database's memory model.
const kvCapacityAuto = "auto"

// kvCapacityFlag declares --kv-capacity-tokens auto|N.
func kvCapacityFlag() cli.Flag {
	return &cli.StringFlag{Name: "kv-capacity-tokens", Usage: "KV pool per engine: `auto|N` tokens (0 = unbounded; unset, a --model closed loop gets auto's pool when it cannot hold C requests at full length, and a deployment that does not fit is refused; auto = GPU memory × the engine's memory fraction − weights, activations, NCCL and other reserves, in whole blocks, from the perf database's memory model; SGLang: the memory free before the weights × its mem_fraction_static − weights, as SGLang sizes it; needs --model): vLLM preemption, SGLang retraction, TRT-LLM no-evict/pausing (quantitative tier; screening: TRT-LLM no-evict only)"}
}

// kvCapacityTokensFlag reads --kv-capacity-tokens (unset: 0, not auto).
func kvCapacityTokensFlag(c *cli.Context) (n int, auto bool, err error) {
	if !c.IsSet("kv-capacity-tokens") {
		return 0, false, nil
	}
	return parseKVCapacity(c.String("kv-capacity-tokens"))
}

// parseKVCapacity parses a --kv-capacity-tokens value: auto, or N ≥ 0 tokens.
func parseKVCapacity(v string) (n int, auto bool, err error) {
	if v == kvCapacityAuto {
		return 0, true, nil
	}
	n, err = strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, false, userErrorf("--kv-capacity-tokens %q: want auto or a token count ≥ 0", v)
	}
	return n, false, nil
}

// resolveKVCapacity sets e.KVCapacityTokens for --kv-capacity-tokens auto from
// pt's memory model (refine.KVPoolTokens) at the workload's longest request
// and e's block size and memory keys, under a pool e's engine config set
// (refine.EnginePool); pt is nil with a synthetic timing, which has no memory
// model. Other values were applied by applyEngineFlags.
func resolveKVCapacity(c *cli.Context, pt *perfdb.PassTiming, w workload.Spec, e *engine.Spec) error {
	_, auto, err := kvCapacityTokensFlag(c)
	if err != nil {
		return err
	}
	if !auto {
		// Unset on a perf-data run, the pool is eval's default
		// (defaultKVCapacity), which the memory keys size.
		sized := !c.IsSet("kv-capacity-tokens") && pt != nil
		if e.KVCapacityTokens <= 0 && hasMemoryKeys(*e) && !sized {
			fmt.Fprintln(c.App.ErrWriter, "aicdb: engine config: its memory keys size the KV pool only under --kv-capacity-tokens auto; this run's pool is unbounded")
		}
		return nil
	}
	if pt == nil {
		return userErrorf("--kv-capacity-tokens auto: --timing %s has no GPU memory model to size the KV pool from; give the capacity in tokens, or use --model with --system, --backend and --tp", c.String("timing"))
	}
	n, err := evalPool(c, pt, w, *e, "--kv-capacity-tokens auto: %v")
	if err != nil {
		return err
	}
	e.KVCapacityTokens = n
	return nil
}

// evalPool is the KV pool (tokens) e deploys on pt's GPUs for eval's workload w
// (refine.DeployedPool: the rules read w as given, the pool holds its longest
// request). A deployment that does not fit is a user error worded by oom (one
// %v: the memory arithmetic).
func evalPool(c *cli.Context, pt *perfdb.PassTiming, w workload.Spec, e engine.Spec, oom string) (int, error) {
	isl, osl := w.MaxShape()
	n, err := refine.DeployedPool(pt.Estimator(), e, c.String("engine-profile"),
		queueing.ProfileInput{Batch: profileBatch(c, w), ISL: w.ISL, OSL: w.OSL}, isl, osl)
	if errors.Is(err, perfdb.ErrOOM) {
		return 0, userErrorf(oom, err)
	}
	return n, asUser(err)
}

// engineKnob is one explicit engine flag of eval (SCHEDULERS.md §6), applied over
// --engine-profile and --engine-config: its name, usage and the engine.Spec field it
// sets (field returns a *int, *bool, *string or *float64 into e).
type engineKnob struct {
	name, usage string
	min         int // ints: the smallest value accepted
	field       func(e *engine.Spec) any
}

// engineKnobs are eval's engine flags in their help order; --kv-capacity-tokens
// (auto|N) follows --block-size and is read by kvCapacityTokensFlag.
var engineKnobs = []engineKnob{
	{name: "max-num-batched-tokens", usage: "vLLM token budget", min: 1, field: func(e *engine.Spec) any { return &e.MaxNumBatchedTokens }},
	{name: "max-num-seqs", usage: "vLLM max_num_seqs / SGLang max_running_requests", min: 1, field: func(e *engine.Spec) any { return &e.MaxNumSeqs }},
	{name: "chunked-prefill", usage: "chunked prefill on/off (--chunked-prefill=false)", field: func(e *engine.Spec) any { return &e.EnableChunkedPrefill }},
	{name: "long-prefill-token-threshold", usage: "vLLM per-request chunk cap (0 = off)", field: func(e *engine.Spec) any { return &e.LongPrefillTokenThreshold }},
	{name: "async-scheduling", usage: "vLLM async scheduling / TRT-LLM overlap executor / SGLang overlap scheduler", field: func(e *engine.Spec) any { return &e.AsyncScheduling }},
	{name: "block-size", usage: "KV block / page size (tokens)", min: 1, field: func(e *engine.Spec) any { return &e.BlockSize }},
	{name: "chunked-prefill-size", usage: "SGLang chunk budget", min: 1, field: func(e *engine.Spec) any { return &e.ChunkedPrefillSize }},
	{name: "max-prefill-tokens", usage: "SGLang max_prefill_tokens", min: 1, field: func(e *engine.Spec) any { return &e.MaxPrefillTokens }},
	{name: "mixed-chunk", usage: "SGLang enable_mixed_chunk (--mixed-chunk=false)", field: func(e *engine.Spec) any { return &e.EnableMixedChunk }},
	{name: "max-batch-size", usage: "TRT-LLM max_batch_size", min: 1, field: func(e *engine.Spec) any { return &e.MaxBatchSize }},
	{name: "max-num-tokens", usage: "TRT-LLM max_num_tokens", min: 1, field: func(e *engine.Spec) any { return &e.MaxNumTokens }},
	{name: "capacity-policy", usage: "TRT-LLM guaranteed_no_evict | max_utilization", field: func(e *engine.Spec) any { return &e.CapacityPolicy }},
	{name: "nextn", usage: "MTP draft tokens per decode step: vLLM speculative_config num_speculative_tokens, TRT-LLM num_nextn_predict_layers, SGLang EAGLE/NEXTN speculative_num_steps (turns SGLang's overlap scheduler and mixed chunk off); needs --nextn-accepted", field: func(e *engine.Spec) any { return &e.DraftTokens }},
	{name: "nextn-accepted", usage: "mean MTP drafts accepted per decode step, 0..nextn (measured for the model and data)", field: func(e *engine.Spec) any { return &e.DraftAccepted }},
	{name: "stage-ms", usage: "additive per-request stages (encoder + dispatch), ms", field: func(e *engine.Spec) any { return &e.StageMs }},
}

// engineKnobFlags declares the engine flags (all but --stage-ms, which eval lists
// with the workload), then --engine-profile and --engine-config.
func engineKnobFlags() []cli.Flag {
	var out []cli.Flag
	for _, k := range engineKnobs {
		var f cli.Flag
		switch k.field(&engine.Spec{}).(type) {
		case *int:
			f = &cli.IntFlag{Name: k.name, Usage: k.usage}
		case *bool:
			f = &cli.BoolFlag{Name: k.name, Usage: k.usage}
		case *string:
			f = &cli.StringFlag{Name: k.name, Usage: k.usage}
		case *float64:
			if k.name == "stage-ms" {
				continue // declared by stageMsFlag
			}
			f = &cli.Float64Flag{Name: k.name, Usage: k.usage}
		default:
			continue
		}
		out = append(out, f)
		if k.name == "block-size" {
			out = append(out, kvCapacityFlag())
		}
	}
	return append(out, engineProfileFlag(queueing.ProfileAIConfigurator), engineConfigFlag())
}

// stageMsFlag declares --stage-ms (an engine knob listed with the workload).
func stageMsFlag() cli.Flag {
	k := engineKnobs[len(engineKnobs)-1]
	return &cli.Float64Flag{Name: k.name, Usage: k.usage}
}

// engineKnobOpts are the engine flags given, as values of an engine.Spec overlay.
type engineKnobOpts struct {
	vals  engine.Spec
	given []engineKnob
}

// readEngineKnobs reads the engine flags given, rejecting an int below its minimum
// and a malformed --kv-capacity-tokens (auto is resolved later: resolveKVCapacity).
func readEngineKnobs(c *cli.Context) (engineKnobOpts, error) {
	var o engineKnobOpts
	for _, k := range engineKnobs {
		if !c.IsSet(k.name) {
			continue
		}
		switch p := k.field(&o.vals).(type) {
		case *int:
			if *p = c.Int(k.name); *p < k.min {
				return o, userErrorf("--%s %d: must be ≥ %d", k.name, *p, k.min)
			}
		case *bool:
			*p = c.Bool(k.name)
		case *string:
			*p = c.String(k.name)
		case *float64:
			*p = c.Float64(k.name)
		}
		o.given = append(o.given, k)
	}
	n, auto, err := kvCapacityTokensFlag(c)
	if err != nil {
		return o, err
	}
	if c.IsSet("kv-capacity-tokens") && !auto {
		o.vals.KVCapacityTokens = n
		o.given = append(o.given, engineKnob{name: "kv-capacity-tokens", field: func(e *engine.Spec) any { return &e.KVCapacityTokens }})
	}
	return o, nil
}

// apply sets e's fields of the flags given.
func (o engineKnobOpts) apply(e *engine.Spec) {
	for _, k := range o.given {
		switch dst := k.field(e).(type) {
		case *int:
			*dst = *k.field(&o.vals).(*int)
		case *bool:
			*dst = *k.field(&o.vals).(*bool)
		case *string:
			*dst = *k.field(&o.vals).(*string)
		case *float64:
			*dst = *k.field(&o.vals).(*float64)
		}
	}
}
