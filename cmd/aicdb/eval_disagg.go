package main

import (
	"errors"
	"fmt"
	"math"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/disagg"
	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/workload"
	"github.com/aicdb/aicdb/refine"
)

// evalDisaggFlags are the flags of `aicdb eval --mode disagg` (the prefill/decode
// tandem, package disagg).
func evalDisaggFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "mode", Value: "agg", Usage: "agg | disagg (prefill/decode tandem)"},
		&cli.IntFlag{Name: "prefill-tp", Usage: "disagg: prefill worker tp", DefaultText: "--tp"},
		&cli.IntFlag{Name: "prefill-workers", Value: 1, Usage: "disagg: prefill workers"},
		&cli.IntFlag{Name: "decode-tp", Usage: "disagg: decode worker tp", DefaultText: "--tp"},
		&cli.IntFlag{Name: "decode-workers", Value: 1, Usage: "disagg: decode workers"},
		&cli.IntFlag{Name: "prefill-batch-cap", Usage: "disagg: running requests per prefill worker (0 = the engine's cap)"},
		&cli.IntFlag{Name: "decode-batch-cap", Usage: "disagg: running requests per decode worker (0 = the engine's cap)"},
		&cli.IntFlag{Name: "prefill-inflight-cap", Usage: "disagg: κ, requests a prefill worker holds until pulled (0 = none; SGLang holds at most 2 × its running cap, its metadata buffers)"},
		&cli.IntFlag{Name: "decode-kv-capacity-tokens", Usage: "disagg: KV tokens per decode worker (default: the perf database's memory budget; 0 with --timing = unbounded)"},
		&cli.StringFlag{Name: "connector", Value: "pull", Usage: "disagg: pull (decode reserves KV, prefill holds until pulled) | push"},
		&cli.BoolFlag{Name: "handoff-in-ttft", Usage: "disagg: first token visible only after the KV transfer (decode-attach frontends; SGLang always streams it from the decode server, at the request's first decode pass)"},
		&cli.Float64Flag{Name: "kv-bytes-per-token", Usage: "disagg: KV handoff bytes per prompt token per link (default: from the model with --model)"},
		&cli.Float64Flag{Name: "inter-node-gbps", Usage: "disagg: NIC bandwidth per GPU, GB/s (default: the system's inter_node_bw)"},
		&cli.Float64Flag{Name: "intra-node-gbps", Usage: "disagg: NVLink bandwidth per GPU, GB/s (default: the system's intra_node_bw; 0 = always the NIC)"},
		&cli.IntFlag{Name: "gpus-per-node", Usage: "disagg: GPUs per node for placement (default: the system's)"},
		&cli.Float64Flag{Name: "kv-efficiency", Value: disagg.DefaultEfficiency, Usage: "disagg: achieved share of the link bandwidth"},
	}
}

// disaggOnlyFlags lists the flags that only --mode disagg reads.
var disaggOnlyFlags = []string{"prefill-tp", "prefill-workers", "decode-tp", "decode-workers", "prefill-batch-cap",
	"decode-batch-cap", "prefill-inflight-cap", "decode-kv-capacity-tokens", "connector", "handoff-in-ttft",
	"kv-bytes-per-token", "inter-node-gbps", "intra-node-gbps", "gpus-per-node", "kv-efficiency"}

// checkAggFlags refuses disagg-only flags in agg mode (they would be ignored).
func checkAggFlags(c *cli.Context) error {
	for _, f := range disaggOnlyFlags {
		if c.IsSet(f) {
			return userErrorf("--%s: only with --mode disagg", f)
		}
	}
	return nil
}

// runEvalDisagg evaluates one disaggregated operating point.
func runEvalDisagg(c *cli.Context) error {
	for _, f := range []string{"stagger-phases", "dp", "kv-capacity-tokens", "calibration", "deployed-version"} {
		if c.IsSet(f) {
			return userErrorf("--%s: not read by --mode disagg (see aicdb eval --help for the disagg flags)", f)
		}
	}
	if err := checkMTPFlags(c); err != nil {
		return err
	}
	if err := checkFormat(c.String("format")); err != nil {
		return err
	}
	w, err := parseWorkload(c)
	if err != nil {
		return err
	}
	var tiers []queueing.Tier
	switch c.String("tier") {
	case "screening":
		tiers = []queueing.Tier{queueing.TierScreening}
	case "quantitative":
		tiers = []queueing.Tier{queueing.TierQuantitative}
	case "both":
		tiers = []queueing.Tier{queueing.TierScreening, queueing.TierQuantitative}
	default:
		return userErrorf("--tier %q: unknown; use screening, quantitative or both", c.String("tier"))
	}
	run, err := parseBenchmarkRun(c, w, false) // the tandem runs its clients locked
	if err != nil {
		return err
	}
	cfg, _, gpus, err := parseDisagg(c, w)
	if err != nil {
		return err
	}
	out := map[string]any{}
	isl, _ := w.MaxShape()
	for _, tier := range tiers {
		var rep *disagg.Report
		switch {
		case tier == queueing.TierScreening:
			rep, err = disagg.Screening(w, cfg)
		case run != nil:
			rep, err = disagg.QuantitativeFinite(c.Context, w, cfg, *run, c.Float64("client-rtt-ms"))
		default:
			rep, err = disagg.Quantitative(c.Context, w, cfg, disagg.Options{})
		}
		if held := (*disagg.PrefillHoldsError)(nil); errors.As(err, &held) {
			return userErrorf("--mode disagg --tier quantitative: %v; bound the holds as the engine's pool does with --prefill-inflight-cap %d (the prompts its pool holds), or give the decode pool more room (--decode-workers, --decode-kv-capacity-tokens)",
				held, held.PromptsHeld(isl, cfg.Prefill.Engine.BlockSize))
		}
		if err != nil {
			if queueing.IsInputError(err) {
				return asUser(err)
			}
			return err
		}
		if tier == queueing.TierQuantitative && run == nil {
			noSteadyState(w, &rep.Report)
		}
		cols := rep.Columns(gpus)
		if run != nil {
			cols["run"] = run.Label()
		}
		draftColumns(cols, cfg.Decode.Engine)
		out[string(tier)] = cols
	}
	return writeEval(c.App.Writer, c.String("format"), tiers, out)
}

// parseDisagg builds the tandem from the flags: each pool's engine
// (disaggEngines), timing per pool (synthetic: shared; perf
// database: each pool at its own tp through evalPassTiming), the fabric and the
// KV sizing. It returns the pass timings to check after evaluation and the GPUs.
func parseDisagg(c *cli.Context, w workload.Spec) (disagg.Config, []*perfdb.PassTiming, int, error) {
	cfg, err := disaggPoolFlags(c)
	if err != nil {
		return cfg, nil, 0, err
	}

	dep := readDeployment(c)
	synthetic := c.IsSet("timing")
	if synthetic == dep.set.given("model") {
		return cfg, nil, 0, userErrorf("timing: give either --timing linear|roofline (synthetic) or --model with --system, --backend and --prefill-tp/--decode-tp (perf database)")
	}
	backend, version := dep.Backend, dep.Version
	if synthetic {
		if be := c.String("backend-engine"); be != "" {
			backend = be
		}
		if backend == "" {
			backend = string(engine.VLLM)
		}
	}
	// --nextn, else the engine config's drafts: MTP on both pools, as
	// aiconfigurator's generator deploys it (speculative_config on the prefill
	// and the decode engine); with the perf database each pool's pass timing
	// prices the MTP layers and the decode rows' drafts.
	dep.NextN, dep.SeparateDrafter = evalDrafts(c, backend)
	var pts []*perfdb.PassTiming
	gpus := 0
	if synthetic {
		t, err := syntheticTiming(c)
		if err != nil {
			return cfg, nil, 0, err
		}
		cfg.Prefill.Timing, cfg.Decode.Timing = t, t
		for _, f := range []string{"kv-bytes-per-token", "inter-node-gbps"} {
			if !c.IsSet(f) {
				return cfg, nil, 0, userErrorf("--mode disagg --timing: --%s is required", f)
			}
		}
		cfg.Prefill.GPUsPerWorker, cfg.Decode.GPUsPerWorker = max(c.Int("prefill-tp"), 1), max(c.Int("decode-tp"), 1)
	} else {
		var err error
		pts, version, err = disaggPerfTiming(c, dep, w, &cfg)
		if err != nil {
			return cfg, nil, 0, err
		}
	}
	gpus = cfg.GPUs()
	if c.IsSet("gpus") {
		if c.Int("gpus") < gpus {
			return cfg, nil, 0, userErrorf("--prefill-workers %d × %d GPUs + --decode-workers %d × %d GPUs = %d GPUs exceed --gpus %d; use fewer or narrower workers",
				cfg.Prefill.Workers, cfg.Prefill.GPUsPerWorker, cfg.Decode.Workers, cfg.Decode.GPUsPerWorker, gpus, c.Int("gpus"))
		}
		gpus = c.Int("gpus")
	}
	if c.IsSet("kv-capacity-tokens") {
		return cfg, nil, 0, userErrorf("--kv-capacity-tokens: with --mode disagg use --decode-kv-capacity-tokens")
	}
	if err := disaggEngines(c, backend, version, dep.NextN, w, pts, &cfg); err != nil {
		return cfg, nil, 0, err
	}
	if err := cfg.Validate(w); err != nil {
		return cfg, nil, 0, userErrorf("%v", err)
	}
	return cfg, pts, gpus, nil
}

// disaggEngines sets each pool's engine as eval resolves an agg one
// (--engine-profile's prefill and decode roles, whose max_batch_size is the
// pool's --prefill-batch-cap / --decode-batch-cap or the rules' default, then
// --engine-config over both, then the explicit engine flags over both). With
// the perf database (pts: prefill, decode), a config's memory keys (memory
// fraction, vLLM kv_cache_memory_bytes or num_gpu_blocks_override, TensorRT-LLM
// max_tokens, SGLang max_total_tokens or cuda_graph_max_bs) size each pool as
// a sweep's row (refine.DeployedPool): a worker that cannot hold one request
// is refused, and the decode pool replaces the disagg rule's unless
// --decode-kv-capacity-tokens is given. Both pools run drafts MTP draft tokens
// per decode step (--nextn or the config's speculative_config, with
// --nextn-accepted), which the perf database's pass timings (pts) priced.
func disaggEngines(c *cli.Context, backend, version string, drafts int, w workload.Spec, pts []*perfdb.PassTiming, cfg *disagg.Config) error {
	in := queueing.ProfileInput{Backend: backend, Version: version, ISL: w.ISL, OSL: w.OSL, Drafts: drafts}
	if len(pts) > 0 {
		in.GPUMemBytes = pts[0].Estimator().System().MemCapacity // SGLang sizes chunked_prefill_size from it
	}
	pin, din := in, in
	pin.Role, pin.Batch = queueing.RolePrefill, c.Int("prefill-batch-cap")
	din.Role, din.Batch = queueing.RoleDecode, c.Int("decode-batch-cap")
	es, engCfg, err := resolveEngines(c, pin, din)
	if err != nil {
		return err
	}
	for i, pt := range pts {
		if err := checkConfigLayout(c, engCfg, pt, true); err != nil {
			return userErrorf("%s pool: %v", []string{"prefill", "decode"}[i], err)
		}
	}
	isl, osl := w.MaxShape()
	pools := []struct {
		name  string
		e     *engine.Spec
		rules queueing.ProfileInput
		osl   int
	}{{"prefill", &es[0], pin, 1}, {"decode", &es[1], din, osl}}
	if err := checkConfigDrafts(c, es[1]); err != nil {
		return err
	}
	for i, p := range pools {
		if len(pts) > 0 {
			if err := checkKVDtype(pts[i], *p.e); err != nil {
				return err
			}
		}
		if err := applyEngineFlags(c, p.e); err != nil {
			return err
		}
		if len(pts) > 0 && p.e.DraftTokens != drafts {
			return fmt.Errorf("eval: the %s engine runs %d MTP drafts, the pass timing priced %d (configDrafts disagrees with resolveEngines)", p.name, p.e.DraftTokens, drafts)
		}
		if !hasMemoryKeys(*p.e) && (p.name == "decode" || len(pts) == 0) {
			continue
		}
		if len(pts) == 0 {
			fix := "--timing leaves its KV to --decode-kv-capacity-tokens"
			if p.name == "prefill" {
				fix = "--timing ignores them (its prefill workers run without a KV pool)"
			}
			fmt.Fprintf(c.App.ErrWriter, "aicdb: engine config: its memory keys size the %s pool only with the perf database's memory model (--model); %s\n", p.name, fix)
			continue
		}
		// The prefill worker holds a prompt and its first token until the pull.
		n, err := refine.DeployedPool(pts[i].Estimator(), *p.e, c.String("engine-profile"), p.rules, isl, p.osl)
		if err != nil {
			if errors.Is(err, perfdb.ErrOOM) {
				return userErrorf("--engine-config: the %s pool: %v", p.name, err)
			}
			return asUser(err)
		}
		switch {
		case p.name == "prefill":
			cfg.Prefill.KVCapacityTokens = n // vLLM/TensorRT-LLM pull: modelled; else checked (disagg.PrefillHoldsError)
		case !c.IsSet("decode-kv-capacity-tokens"):
			cfg.Decode.KVCapacityTokens = n
		}
	}
	cfg.Prefill.Engine, cfg.Decode.Engine = es[0], es[1]
	return nil
}

// hasMemoryKeys reports an engine whose config set a key that sizes its KV
// pool (engine.Spec's memory keys or a pool in tokens).
func hasMemoryKeys(e engine.Spec) bool {
	return e.MemFraction > 0 || e.KVCacheMemoryBytes > 0 || e.CUDAGraphMaxBS > 0 || e.KVCapacityTokens > 0
}

// disaggPoolFlags reads the pools' workers and caps, the connector, the handoff
// visibility, the fabric and the KV bytes per token (evalDisaggFlags; shared by eval
// and trace replay --mode disagg). Engines and timing are the caller's.
func disaggPoolFlags(c *cli.Context) (disagg.Config, error) {
	var cfg disagg.Config
	for _, f := range []string{"prefill-workers", "decode-workers"} {
		if c.Int(f) < 1 {
			return cfg, userErrorf("--%s %d: must be ≥ 1", f, c.Int(f))
		}
	}
	for _, f := range []string{"prefill-batch-cap", "decode-batch-cap", "prefill-inflight-cap", "decode-kv-capacity-tokens", "gpus-per-node"} {
		if c.Int(f) < 0 {
			return cfg, userErrorf("--%s %d: must be ≥ 0", f, c.Int(f))
		}
	}
	switch c.String("connector") {
	case "pull":
	case "push":
		cfg.Push = true
	default:
		return cfg, userErrorf("--connector %q: use pull or push", c.String("connector"))
	}
	cfg.HandoffInTTFT = c.Bool("handoff-in-ttft")
	cfg.Prefill.Workers, cfg.Decode.Workers = c.Int("prefill-workers"), c.Int("decode-workers")
	cfg.Prefill.BatchCap, cfg.Decode.BatchCap = c.Int("prefill-batch-cap"), c.Int("decode-batch-cap")
	cfg.Prefill.InFlightCap = c.Int("prefill-inflight-cap")
	cfg.Decode.KVCapacityTokens = c.Int("decode-kv-capacity-tokens")
	cfg.Fabric = disagg.Fabric{InterNodeGBps: c.Float64("inter-node-gbps"), IntraNodeGBps: c.Float64("intra-node-gbps"),
		Efficiency: c.Float64("kv-efficiency"), GPUsPerNode: c.Int("gpus-per-node")}
	if e := cfg.Fabric.Efficiency; !(e > 0 && e <= 1) {
		return cfg, userErrorf("--kv-efficiency %v: must be in (0, 1]", e)
	}
	for _, f := range []string{"inter-node-gbps", "intra-node-gbps", "kv-bytes-per-token"} {
		if v := c.Float64(f); c.IsSet(f) && (!(v > 0) || math.IsInf(v, 0)) {
			return cfg, userErrorf("--%s %v: must be a finite number > 0", f, v)
		}
	}
	cfg.KVBytesPerToken = c.Float64("kv-bytes-per-token")
	return cfg, nil
}

// disaggPerfTiming prices each pool from the perf database at its own tp (the
// eval pass-timing builder, once per pool), and derives the KV handoff size, the
// fabric from the system spec and, unless given, the decode KV capacity from
// aiconfigurator's disagg memory rule.
func disaggPerfTiming(c *cli.Context, dep deploymentOpts, w workload.Spec, cfg *disagg.Config) ([]*perfdb.PassTiming, string, error) {
	for _, f := range []string{"system", "backend"} {
		if !dep.set.given(f) {
			return nil, "", userErrorf("--model: --%s is required with the perf-database timing", f)
		}
	}
	par := readParallel(c)
	tps := [2]int{c.Int("prefill-tp"), c.Int("decode-tp")}
	for i, f := range []string{"prefill-tp", "decode-tp"} {
		if !c.IsSet(f) {
			if !par.set.given("tp") {
				return nil, "", userErrorf("--mode disagg --model: give --%s (or --tp for both pools)", f)
			}
			tps[i] = par.TP
		}
		if tps[i] < 1 {
			return nil, "", userErrorf("--%s %d: must be ≥ 1", f, tps[i])
		}
	}
	var pts []*perfdb.PassTiming
	q := readQuant(c)
	for i := range tps {
		par.TP = tps[i]
		pt, version, err := evalPassTiming(c.Context, c.String("db"), dep, q, par, w, c.App.ErrWriter)
		if err != nil {
			return nil, "", err
		}
		dep.Version = version
		pts = append(pts, pt)
		if i == 0 {
			cfg.Prefill.Timing, cfg.Prefill.GPUsPerWorker = pt, par.gpus()
		} else {
			cfg.Decode.Timing, cfg.Decode.GPUsPerWorker = pt, par.gpus()
		}
	}
	pre, dec := pts[0].Estimator(), pts[1].Estimator()
	sys := pre.System()
	def := disagg.FabricOf(sys)
	if !c.IsSet("inter-node-gbps") {
		cfg.Fabric.InterNodeGBps = def.InterNodeGBps
	}
	if !c.IsSet("intra-node-gbps") {
		cfg.Fabric.IntraNodeGBps = def.IntraNodeGBps
	}
	if !c.IsSet("gpus-per-node") {
		cfg.Fabric.GPUsPerNode = def.GPUsPerNode
	}
	if !(cfg.Fabric.InterNodeGBps > 0) {
		return nil, "", userErrorf("--system %s: inter_node_bw is %v; give --inter-node-gbps > 0", sys.Name, sys.InterNodeBW)
	}
	isl, osl := w.MaxShape()
	if !c.IsSet("kv-bytes-per-token") {
		b, err := disagg.KVBytesPerLink(pre, tps[0], tps[1])
		if err != nil {
			return nil, "", asUser(err)
		}
		cfg.KVBytesPerToken = b
	}
	if !c.IsSet("decode-kv-capacity-tokens") {
		kv, err := disagg.DecodeKVCapacityTokens(pre, dec, isl, osl)
		if errors.Is(err, disagg.ErrDecodeKV) {
			return nil, "", userErrorf("--decode-tp %d: a decode worker's KV cannot hold one request of isl %d + osl %d on %s; raise --decode-tp or shorten the request", tps[1], isl, osl, sys.Name)
		}
		if err != nil {
			return nil, "", asUser(err)
		}
		cfg.Decode.KVCapacityTokens = kv
	}
	return pts, dep.Version, nil
}
