package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// evalCommand evaluates one operating point with the pass-calendar model (issue 3):
// the screening closed form, the quantitative limit-cycle evaluator, or both. The
// pass timing is either synthetic (--timing linear) or the perf database
// (--model/--system/--backend/--tp …). All model logic lives in package queueing.
func evalCommand() *cli.Command {
	return &cli.Command{
		Name:  "eval",
		Usage: "latency distributions and throughput of one aggregated operating point (pass-calendar model)",
		UsageText: "aicdb eval --timing linear --base-ms 5 --prefill-ms-per-token 0.02 --decode-ms-per-row 0.05 --concurrency 32 --isl 4096 --osl 256 --format json\n" +
			"   aicdb eval --model Qwen/Qwen3-32B --system h200_sxm --backend vllm --tp 2 --rate 3 --isl 4000 --osl 500 --tier both",
		Flags: append([]cli.Flag{
			// perf-database timing
			&cli.StringFlag{Name: "model", Usage: "model `ID` known to the store, or a path to a config.json"},
			&cli.StringFlag{Name: "system", Usage: "GPU system `NAME` (with --model)"},
			&cli.StringFlag{Name: "backend", Usage: "vllm | trtllm | sglang (with --model: perf data and engine semantics)"},
			&cli.StringFlag{Name: "version", Usage: "backend `VERSION` (default: the newest available)"},
			&cli.IntFlag{Name: "tp", Usage: "tensor parallel size (with --model)"},
			&cli.IntFlag{Name: "pp", Value: 1, Usage: "pipeline parallel size"},
			&cli.IntFlag{Name: "dp", Value: 1, Usage: "attention data parallel size"},
			&cli.IntFlag{Name: "moe-tp", Value: 1, Usage: "MoE tensor parallel size"},
			&cli.IntFlag{Name: "moe-ep", Value: 1, Usage: "MoE expert parallel size"},
			&cli.StringFlag{Name: "database-mode", Value: "SILICON", Usage: "SILICON | HYBRID | EMPIRICAL | SOL"},
			&cli.StringFlag{Name: "gemm-quant", Usage: "GEMM quant mode (default: from the model)"},
			&cli.StringFlag{Name: "kv-quant", Usage: "KV cache quant mode (default: from the model)"},
			&cli.StringFlag{Name: "fmha-quant", Usage: "FMHA quant mode (default: from the model and backend)"},
			&cli.StringFlag{Name: "moe-quant", Usage: "MoE quant mode (default: from the model)"},
			&cli.BoolFlag{Name: "wide-ep", Usage: "the all-to-all (wide-EP) MoE path: SGLang DeepEP for DeepSeek MLA models; refused where the data has none"},
			// synthetic timing
			&cli.StringFlag{Name: "timing", Usage: "synthetic timing `KIND`: linear | roofline (instead of --model)"},
			&cli.Float64Flag{Name: "base-ms", Usage: "linear timing: ms per pass"},
			&cli.Float64Flag{Name: "prefill-ms-per-token", Usage: "linear timing: ms per prefill token"},
			&cli.Float64Flag{Name: "decode-ms-per-row", Usage: "linear timing: ms per decode row"},
			&cli.Float64Flag{Name: "ctx-ms-per-token", Usage: "linear timing: ms per context token of the decode rows"},
			&cli.Float64Flag{Name: "weights-ms", Usage: "roofline timing: weight read per pass, ms"},
			&cli.Float64Flag{Name: "token-ms", Usage: "roofline timing: GEMM compute per token, ms"},
			&cli.Float64Flag{Name: "attn-ms-per-pair", Usage: "roofline timing: attention per (query, key) pair, ms"},
			&cli.Float64Flag{Name: "kv-ms-per-token", Usage: "roofline timing: KV read per context token, ms"},
			&cli.StringFlag{Name: "backend-engine", Usage: "engine semantics with --timing: vllm | trtllm | sglang (default vllm)"},
			&cli.IntFlag{Name: "gpus", Usage: "GPUs of the deployment for output_tokens_per_s_per_gpu (default tp·pp·dp, or 1 with --timing)"},
			// workload
			&cli.IntFlag{Name: "concurrency", Usage: "closed loop: number of clients"},
			&cli.Float64Flag{Name: "turnaround-ms", Usage: "closed loop: client delay between a completion and the next request"},
			&cli.Float64Flag{Name: "rate", Usage: "open loop: request rate (requests/s)"},
			&cli.IntFlag{Name: "num-requests", Usage: "open loop: requests to simulate (default 4096)"},
			&cli.IntFlag{Name: "isl", Usage: "input sequence length (tokens)"},
			&cli.IntFlag{Name: "osl", Usage: "output sequence length (tokens)"},
			&cli.IntFlag{Name: "prefix", Usage: "prompt tokens served from the prefix cache (< isl)"},
			&cli.StringFlag{Name: "isl-quantiles", Usage: "W2: equally weighted isl quantile points `a,b,..`"},
			&cli.StringFlag{Name: "osl-quantiles", Usage: "W2: equally weighted osl quantile points `a,b,..`"},
			&cli.Float64Flag{Name: "stage-ms", Usage: "additive per-request stages (encoder + dispatch), ms"},
			// engine knobs over --engine-profile and --engine-config (SCHEDULERS.md §6)
			&cli.IntFlag{Name: "max-num-batched-tokens", Usage: "vLLM token budget"},
			&cli.IntFlag{Name: "max-num-seqs", Usage: "vLLM max_num_seqs / SGLang max_running_requests"},
			&cli.BoolFlag{Name: "chunked-prefill", Usage: "chunked prefill on/off (--chunked-prefill=false)"},
			&cli.IntFlag{Name: "long-prefill-token-threshold", Usage: "vLLM per-request chunk cap (0 = off)"},
			&cli.BoolFlag{Name: "async-scheduling", Usage: "vLLM async scheduling / TRT-LLM overlap executor"},
			&cli.IntFlag{Name: "block-size", Usage: "KV block / page size (tokens)"},
			kvCapacityFlag(),
			&cli.IntFlag{Name: "chunked-prefill-size", Usage: "SGLang chunk budget"},
			&cli.IntFlag{Name: "max-prefill-tokens", Usage: "SGLang max_prefill_tokens"},
			&cli.BoolFlag{Name: "mixed-chunk", Usage: "SGLang enable_mixed_chunk (--mixed-chunk=false)"},
			&cli.IntFlag{Name: "max-batch-size", Usage: "TRT-LLM max_batch_size"},
			&cli.IntFlag{Name: "max-num-tokens", Usage: "TRT-LLM max_num_tokens"},
			&cli.StringFlag{Name: "capacity-policy", Usage: "TRT-LLM guaranteed_no_evict | max_utilization"},
			engineProfileFlag(queueing.ProfileAIConfigurator), engineConfigFlag(),
			// output
			&cli.StringFlag{Name: "tier", Value: "quantitative", Usage: "screening | quantitative | both"},
			&cli.IntFlag{Name: "stagger-phases", Value: queueing.DefaultStaggerPhases, Usage: "closed loop, quantitative: mix the steady state over N initial client staggers (desynchronised clients); 0 = the burst's locked cycle"},
			&cli.Float64Flag{Name: "client-rtt-ms", Value: queueing.DefaultClientRTTMs, Usage: "closed loop: client round trip before a replacement request reaches the scheduler (0 = visible to the very next schedule)"},
			formatFlag(formatJSON),
			calibrationFlag(),
		}, evalDisaggFlags()...),
		Action: runEval,
	}
}

// evalSpec is everything one evaluation needs.
type evalSpec struct {
	w      workload.Spec
	e      queueing.EngineSpec
	t      timing.Timing
	gpus   int
	pt     *perfdb.PassTiming // set on the perf-database path (its Err is checked)
	tiers  []queueing.Tier
	format string
}

func runEval(c *cli.Context) error {
	switch c.String("mode") {
	case "agg":
		if err := checkAggFlags(c); err != nil {
			return err
		}
	case "disagg":
		return runEvalDisagg(c)
	default:
		return userErrorf("--mode %q: use agg or disagg", c.String("mode"))
	}
	spec, err := parseEval(c)
	if err != nil {
		return err
	}
	cal, err := calibrateEval(c, spec)
	if err != nil {
		return err
	}
	out := map[string]any{}
	for _, tier := range spec.tiers {
		var rep *queueing.Report
		opt := queueing.Options{StaggerPhases: c.Int("stagger-phases"), ClientRTTMs: c.Float64("client-rtt-ms")}
		if tier == queueing.TierScreening {
			rep, err = queueing.ScreeningWith(spec.w, spec.e, spec.t, opt)
		} else {
			rep, err = queueing.QuantitativeWith(c.Context, spec.w, spec.e, spec.t, opt)
		}
		if err == nil && spec.pt != nil {
			if perr := spec.pt.Err(); perr != nil {
				err = fmt.Errorf("pass timing: %w", perr)
			}
		}
		if err != nil {
			if queueing.IsInputError(err) {
				return asUser(err)
			}
			return err
		}
		if tier == queueing.TierQuantitative {
			noSteadyState(spec.w, rep)
		}
		cols := rep.Columns(spec.gpus)
		if tier == queueing.TierQuantitative && spec.e.KVCapacityTokens > 0 && !rep.Unstable {
			cols["kv_util_peak"], cols["preemptions_per_request"] = rep.KVUtilPeak, rep.PreemptionsPerRequest
		}
		if spec.e.KVCapacityTokens > 0 && !rep.Unstable {
			cols["kv_capacity_tokens"] = spec.e.KVCapacityTokens
		}
		if cal != "" {
			cols["calibration"] = cal
		}
		out[string(tier)] = cols
	}
	return writeEval(c.App.Writer, spec.format, spec.tiers, out)
}

// noSteadyState marks an open-loop quantitative report unstable when the run
// never reached a steady state: its mean time in system W exceeds the window over
// which the measured requests arrive, i.e. by Little's law (L = λ·W) more requests
// would be in the system than were simulated. Requests then arrive faster than any
// of them completes — at --rate 1e9 all of them arrive within microseconds — and
// the "throughput" of the window is the arrival rate, not a service rate. The
// simulator's own check compares the backlog at two arrival instants, which a
// burst shorter than one pass never separates.
func noSteadyState(w workload.Spec, rep *queueing.Report) {
	if w.RateRPS <= 0 || rep.Unstable {
		return
	}
	window := rep.Diagnostics.WindowEndMs - rep.Diagnostics.WindowStartMs
	if mean := rep.E2E.Mean(); mean >= window {
		rep.Unstable = true
		rep.UnstableReason = fmt.Sprintf("unstable at rate %.4g rps: a request stays %.4g ms in the system on average, longer than the %.4g ms over which the measured requests arrive (Little's law: %.3g requests would be in the system, more than were simulated); lower the rate, or raise --num-requests if the engine keeps up",
			w.RateRPS, mean, window, w.RateRPS*mean/1000)
	}
}

// parseEval validates the flags into an evalSpec. Every error names the flag.
func parseEval(c *cli.Context) (*evalSpec, error) {
	s := &evalSpec{format: c.String("format")}
	if err := checkFormat(s.format); err != nil {
		return nil, err
	}
	switch c.String("tier") {
	case "screening":
		s.tiers = []queueing.Tier{queueing.TierScreening}
	case "quantitative":
		s.tiers = []queueing.Tier{queueing.TierQuantitative}
	case "both":
		s.tiers = []queueing.Tier{queueing.TierScreening, queueing.TierQuantitative}
	default:
		return nil, userErrorf("--tier %q: unknown; use screening, quantitative or both", c.String("tier"))
	}
	w, err := parseWorkload(c)
	if err != nil {
		return nil, err
	}
	s.w = w

	synthetic := c.IsSet("timing")
	if synthetic == c.IsSet("model") {
		return nil, userErrorf("timing: give either --timing linear|roofline (synthetic) or --model with --system, --backend and --tp (perf database)")
	}
	backend := c.String("backend")
	if synthetic {
		t, err := syntheticTiming(c)
		if err != nil {
			return nil, err
		}
		s.t = t
		if be := c.String("backend-engine"); be != "" {
			backend = be
		}
		if backend == "" {
			backend = queueing.BackendVLLM
		}
		s.gpus = 1
	} else {
		for _, f := range []string{"system", "backend", "tp"} {
			if !c.IsSet(f) {
				return nil, userErrorf("--model: --%s is required with the perf-database timing", f)
			}
		}
		if c.IsSet("backend-engine") && c.String("backend-engine") != backend {
			return nil, userErrorf("--backend-engine %q: with --model the engine is --backend (%s)", c.String("backend-engine"), backend)
		}
		pt, version, gpus, err := evalPassTiming(c, w)
		if err != nil {
			return nil, err
		}
		s.t, s.pt, s.gpus = pt, pt, gpus
		if err := c.Set("version", version); err != nil {
			return nil, fmt.Errorf("eval: %w", err)
		}
	}
	if c.IsSet("gpus") {
		if c.Int("gpus") < 1 {
			return nil, userErrorf("--gpus %d: must be ≥ 1", c.Int("gpus"))
		}
		s.gpus = c.Int("gpus")
	}
	e, err := resolveEngine(c, queueing.ProfileInput{Backend: backend, Version: c.String("version"), Role: queueing.RoleAgg,
		Batch: w.Concurrency, ISL: w.ISL, OSL: w.OSL})
	if err != nil {
		return nil, err
	}
	if err := applyEngineFlags(c, &e); err != nil {
		return nil, err
	}
	if err := resolveKVCapacity(c, s.pt, w, &e); err != nil {
		return nil, err
	}
	s.e = e
	return s, nil
}

// syntheticTiming builds the --timing linear|roofline model from its flags.
func syntheticTiming(c *cli.Context) (timing.Timing, error) {
	kind := c.String("timing")
	var need []string
	switch kind {
	case "linear":
		need = []string{"base-ms", "prefill-ms-per-token", "decode-ms-per-row"}
	case "roofline":
		need = []string{"base-ms", "weights-ms", "token-ms", "attn-ms-per-pair", "kv-ms-per-token"}
	default:
		return nil, userErrorf("--timing %q: unknown; use linear or roofline", kind)
	}
	for _, f := range need {
		if !c.IsSet(f) {
			return nil, userErrorf("--timing %s: --%s is required", kind, f)
		}
	}
	if kind == "linear" {
		lin := timing.Linear{BaseMs: c.Float64("base-ms"), PrefillMsPerToken: c.Float64("prefill-ms-per-token"),
			DecodeMsPerRow: c.Float64("decode-ms-per-row"), CtxMsPerToken: c.Float64("ctx-ms-per-token")}
		if err := lin.Validate(); err != nil {
			return nil, userErrorf("--timing linear: %v", err)
		}
		return lin, nil
	}
	rf := timing.Roofline{BaseMs: c.Float64("base-ms"), WeightsMs: c.Float64("weights-ms"), TokenMs: c.Float64("token-ms"),
		AttnMsPerPair: c.Float64("attn-ms-per-pair"), KVMsPerToken: c.Float64("kv-ms-per-token")}
	if err := rf.Validate(); err != nil {
		return nil, userErrorf("--timing roofline: %v", err)
	}
	return rf, nil
}

// parseWorkload reads the workload flags.
func parseWorkload(c *cli.Context) (workload.Spec, error) {
	var w workload.Spec
	for _, f := range []string{"isl", "osl"} {
		if !c.IsSet(f) {
			return w, userErrorf("--%s is required", f)
		}
		if c.Int(f) <= 0 {
			return w, userErrorf("--%s %d: must be ≥ 1", f, c.Int(f))
		}
	}
	w.ISL, w.OSL, w.Prefix = c.Int("isl"), c.Int("osl"), c.Int("prefix")
	if w.Prefix < 0 || w.Prefix >= w.ISL {
		return w, userErrorf("--prefix %d: must be in 0..isl−1 (%d)", w.Prefix, w.ISL-1)
	}
	closed, open := c.IsSet("concurrency"), c.IsSet("rate")
	if closed == open {
		return w, userErrorf("workload: give exactly one of --concurrency (closed loop) or --rate (open loop)")
	}
	if closed {
		w.Concurrency, w.TurnaroundMs = c.Int("concurrency"), c.Float64("turnaround-ms")
		if w.Concurrency <= 0 {
			return w, userErrorf("--concurrency %d: must be ≥ 1", w.Concurrency)
		}
		if c.IsSet("num-requests") {
			return w, userErrorf("--num-requests: only with --rate (open loop)")
		}
	} else {
		w.RateRPS, w.NumRequests = c.Float64("rate"), c.Int("num-requests")
		if !(w.RateRPS > 0) {
			return w, userErrorf("--rate %v: must be > 0 requests/s", w.RateRPS)
		}
		if c.IsSet("turnaround-ms") {
			return w, userErrorf("--turnaround-ms: only with --concurrency (closed loop)")
		}
		if c.IsSet("num-requests") && w.NumRequests <= 0 {
			return w, userErrorf("--num-requests %d: must be ≥ 1", w.NumRequests)
		}
	}
	if w.TurnaroundMs < 0 {
		return w, userErrorf("--turnaround-ms %v: must be ≥ 0", w.TurnaroundMs)
	}
	var err error
	if w.ISLQuantiles, err = parseQuantiles(c.String("isl-quantiles")); err != nil {
		return w, userErrorf("--isl-quantiles: %v", err)
	}
	if w.OSLQuantiles, err = parseQuantiles(c.String("osl-quantiles")); err != nil {
		return w, userErrorf("--osl-quantiles: %v", err)
	}
	return w, nil
}

// parseQuantiles parses "a,b,.." into positive token counts (empty → nil).
func parseQuantiles(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > 4096 {
		return nil, fmt.Errorf("%d points: at most 4096", len(parts))
	}
	out := make([]int, 0, len(parts))
	for _, p := range parts {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer; want comma-separated token counts such as 512,1024,4096", p)
		}
		out = append(out, v)
	}
	return out, nil
}

// applyEngineFlags overrides the backend defaults with the engine flags given.
func applyEngineFlags(c *cli.Context, e *queueing.EngineSpec) error {
	ints := []struct {
		flag string
		dst  *int
	}{
		{"max-num-batched-tokens", &e.MaxNumBatchedTokens}, {"max-num-seqs", &e.MaxNumSeqs},
		{"long-prefill-token-threshold", &e.LongPrefillTokenThreshold}, {"block-size", &e.BlockSize},
		{"chunked-prefill-size", &e.ChunkedPrefillSize},
		{"max-prefill-tokens", &e.MaxPrefillTokens}, {"max-batch-size", &e.MaxBatchSize},
		{"max-num-tokens", &e.MaxNumTokens},
	}
	for _, f := range ints {
		if !c.IsSet(f.flag) {
			continue
		}
		v := c.Int(f.flag)
		minV := 1
		if f.flag == "long-prefill-token-threshold" {
			minV = 0
		}
		if v < minV {
			return userErrorf("--%s %d: must be ≥ %d", f.flag, v, minV)
		}
		*f.dst = v
	}
	if n, auto, err := kvCapacityTokensFlag(c); err != nil {
		return err
	} else if c.IsSet("kv-capacity-tokens") && !auto {
		e.KVCapacityTokens = n
	}
	if c.IsSet("chunked-prefill") {
		e.EnableChunkedPrefill = c.Bool("chunked-prefill")
	}
	if c.IsSet("async-scheduling") {
		e.AsyncScheduling = c.Bool("async-scheduling")
	}
	if c.IsSet("mixed-chunk") {
		e.EnableMixedChunk = c.Bool("mixed-chunk")
	}
	if c.IsSet("capacity-policy") {
		e.CapacityPolicy = c.String("capacity-policy")
	}
	if c.IsSet("stage-ms") {
		e.StageMs = c.Float64("stage-ms")
	}
	if err := e.Validate(); err != nil {
		return userErrorf("%v", err)
	}
	return nil
}

// evalPassTiming builds the perf-database pass timing of --model/--system/--backend
// /--version/--tp…, returning the resolved version and the deployment's GPUs.
func evalPassTiming(c *cli.Context, w workload.Spec) (*perfdb.PassTiming, string, int, error) {
	ctx := c.Context
	src, err := openEstimateSource(ctx, c.String("db"))
	if err != nil {
		return nil, "", 0, asUser(err)
	}
	defer src.close()
	system, backend, version := c.String("system"), c.String("backend"), c.String("version")
	if version == "" {
		vs, err := src.versions(ctx, system, backend)
		if err != nil {
			return nil, "", 0, asUser(err)
		}
		if len(vs) == 0 {
			return nil, "", 0, userErrorf("--backend %s: no versions for system %s", backend, system)
		}
		sort.Slice(vs, func(i, j int) bool { return perfdb.CompareVersions(vs[i], vs[j]) < 0 })
		version = vs[len(vs)-1]
	}
	mode, err := perfdb.ParseDatabaseMode(c.String("database-mode"))
	if err != nil {
		return nil, "", 0, userErrorf("--database-mode: %v", err)
	}
	for _, f := range []string{"tp", "pp", "dp", "moe-tp", "moe-ep"} {
		if c.Int(f) <= 0 {
			return nil, "", 0, userErrorf("--%s %d: must be ≥ 1", f, c.Int(f))
		}
	}
	m, err := src.model(ctx, c.String("model"))
	if err != nil {
		return nil, "", 0, asUser(err)
	}
	isl, osl := w.ISL, w.OSL
	for _, v := range w.ISLQuantiles {
		isl = max(isl, v)
	}
	for _, v := range w.OSLQuantiles {
		osl = max(osl, v)
	}
	if err := checkContextLength(m, isl, osl); err != nil {
		return nil, "", 0, err
	}
	d, err := src.data(ctx, system, backend, version, perfdb.ForMode(mode), perfdb.ForModel(m))
	if err != nil {
		return nil, "", 0, asUser(err)
	}
	cfg := perfdb.Config{Backend: backend, Version: version, TP: c.Int("tp"), PP: c.Int("pp"), DP: c.Int("dp"),
		MoETP: c.Int("moe-tp"), MoEEP: c.Int("moe-ep"), Mode: mode,
		GemmQuant: perfdb.GemmQuant(c.String("gemm-quant")), KVQuant: perfdb.KVQuant(c.String("kv-quant")),
		FMHAQuant: perfdb.FMHAQuant(c.String("fmha-quant")), MoEQuant: perfdb.MoEQuant(c.String("moe-quant")),
		WideEP: c.Bool("wide-ep")}
	est, err := perfdb.NewEstimator(d, m, cfg)
	if err != nil {
		return nil, "", 0, asUser(err)
	}
	pt, err := perfdb.NewPassTiming(est)
	if err != nil {
		return nil, "", 0, asUser(err)
	}
	return pt, version, c.Int("tp") * c.Int("pp") * c.Int("dp"), nil
}
