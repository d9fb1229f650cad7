package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/engineconf"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
	"github.com/aicdb/aicdb/refine"
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
		Flags: slices.Concat(perfTimingFlags("", " (with --model)", "model `ID` known to the store, or a path to a config.json",
			"vllm | trtllm | sglang (with --model: perf data and engine semantics)"), []cli.Flag{
			// synthetic timing
			&cli.StringFlag{Name: "timing", Usage: "synthetic timing `KIND`: linear | roofline (instead of --model)"},
			&cli.Float64Flag{Name: "base-ms", Usage: "linear and roofline timing (required by both): ms per pass", DefaultText: "none"},
			&cli.Float64Flag{Name: "prefill-ms-per-token", Usage: "linear timing (required): ms per prefill token", DefaultText: "none"},
			&cli.Float64Flag{Name: "decode-ms-per-row", Usage: "linear timing (required): ms per decode row", DefaultText: "none"},
			&cli.Float64Flag{Name: "ctx-ms-per-token", Usage: "linear timing (optional): ms per context token of the decode rows"},
			&cli.Float64Flag{Name: "weights-ms", Usage: "roofline timing (required): weight read per pass, ms", DefaultText: "none"},
			&cli.Float64Flag{Name: "token-ms", Usage: "roofline timing (required): GEMM compute per token, ms", DefaultText: "none"},
			&cli.Float64Flag{Name: "attn-ms-per-pair", Usage: "roofline timing (required): attention per (query, key) pair, ms", DefaultText: "none"},
			&cli.Float64Flag{Name: "kv-ms-per-token", Usage: "roofline timing (required): KV read per context token, ms", DefaultText: "none"},
			&cli.StringFlag{Name: "backend-engine", Usage: "engine semantics with --timing: vllm | trtllm | sglang (default vllm)"},
			&cli.IntFlag{Name: "gpus", Usage: "GPUs of the deployment for output_tokens_per_s_per_gpu", DefaultText: "tp·pp·dp, or 1 with --timing"},
			// workload
			&cli.IntFlag{Name: "concurrency", Usage: "closed loop: number of clients"},
			&cli.Float64Flag{Name: "turnaround-ms", Usage: "closed loop: client delay between a completion and the next request"},
			&cli.Float64Flag{Name: "rate", Usage: "open loop: request rate (requests/s)"},
			&cli.IntFlag{Name: "num-requests", Usage: "open loop: requests to simulate", DefaultText: "4096"},
			// a benchmark run instead of the steady state
			&cli.IntFlag{Name: "benchmark-requests", Usage: "quantitative: predict one benchmark run of `N` requests as vllm bench serve / aiperf run it (from an idle engine, statistics over all N) instead of the steady state: with --concurrency the clients' loop, with --rate Poisson sends", DefaultText: "the steady state"},
			&cli.IntFlag{Name: "max-concurrency", Usage: "with --rate and --benchmark-requests: at most `C` requests in flight (vllm bench serve --max-concurrency); the engine profile deploys at batch C, as for C clients", DefaultText: "no bound"},
			&cli.Float64Flag{Name: "burstiness", Usage: "with --rate and --benchmark-requests: gamma-distributed sends of shape `B` (vllm bench serve --burstiness; 1 = Poisson)", DefaultText: "1"},
			&cli.StringFlag{Name: "ramp-up-strategy", Usage: "with --rate and --benchmark-requests: the rate ramps up from --rate (vllm bench serve --ramp-up-start-rps) to --ramp-up-end-rps, `linear` or exponential in the request's progress", DefaultText: "no ramp"},
			&cli.Float64Flag{Name: "ramp-up-end-rps", Usage: "with --ramp-up-strategy: the rate the ramp reaches at the last request (`R` requests/s)", DefaultText: "none"},
		}, shapeSpec{isl: "input sequence length (tokens)", osl: "output sequence length (tokens)",
			prefix: "prompt tokens served from the prefix cache (< isl)"}.flags(), []cli.Flag{
			&cli.StringFlag{Name: "isl-quantiles", Usage: "W2: equally weighted isl quantile points `a,b,..`"},
			&cli.StringFlag{Name: "osl-quantiles", Usage: "W2: equally weighted osl quantile points `a,b,..`"},
			stageMsFlag(),
		}, engineKnobFlags(), []cli.Flag{
			// output
			&cli.StringFlag{Name: "tier", Value: "quantitative", Usage: "screening | quantitative | both"},
			&cli.IntFlag{Name: "stagger-phases", Value: queueing.DefaultStaggerPhases, Usage: "closed loop, quantitative: mix the steady state over N draws of independent random client phases (desynchronised clients); 0 = the burst's locked cycle"},
			&cli.Float64Flag{Name: "client-rtt-ms", Value: queueing.DefaultClientRTTMs, Usage: "closed loop: client round trip before a replacement request reaches the scheduler (0 = visible to the very next schedule)"},
			formatFlag(formatJSON),
			calibrationFlag(),
			deployedVersionFlag(deployedVersionUsage + " (with --model)"),
		}, evalDisaggFlags()),
		Action: runEval,
	}
}

// evalSpec is everything one evaluation needs.
type evalSpec struct {
	w      workload.Spec
	e      engine.Spec
	t      timing.Timing
	gpus   int
	pt     *perfdb.PassTiming // set on the perf-database path (its memory model sizes the KV pool)
	tiers  []queueing.Tier
	format string
	dep    deploymentOpts // with Version resolved on the perf-database path
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
	run, err := parseBenchmarkRun(c, spec.w, true)
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
		switch {
		case tier == queueing.TierScreening:
			rep, err = queueing.ScreeningWith(spec.w, spec.e, spec.t, opt)
		case run != nil:
			rep, err = queueing.QuantitativeFinite(c.Context, spec.w, spec.e, spec.t, opt, *run)
		default:
			rep, err = queueing.QuantitativeWith(c.Context, spec.w, spec.e, spec.t, opt)
		}
		if err != nil {
			if queueing.IsInputError(err) {
				return asUser(err)
			}
			return err
		}
		if tier == queueing.TierQuantitative && run == nil {
			noSteadyState(spec.w, rep)
			if rep.Unstable && spec.w.RateRPS > 0 { // the screening tier's reason states its own bound
				rep.UnstableReason += openLoopCapacity(spec.w, spec.e, spec.t)
			}
		}
		cols := rep.Columns(spec.gpus)
		if run != nil {
			cols["run"] = run.Label()
		}
		if tier == queueing.TierQuantitative && spec.e.KVCapacityTokens > 0 && !rep.Unstable {
			cols["kv_util_peak"], cols["preemptions_per_request"] = rep.KVUtilPeak, rep.PreemptionsPerRequest
		}
		if spec.e.KVCapacityTokens > 0 && !rep.Unstable {
			cols["kv_capacity_tokens"] = spec.e.KVCapacityTokens
		}
		cal.columns(cols)
		if spec.dep.Deployed != "" {
			cols["deployed_version"], cols["priced_version"] = spec.dep.Deployed, spec.dep.Version
		}
		draftColumns(cols, spec.e)
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

// openLoopCapacity names the stable rate bound of an unstable open loop: an open
// loop is stable only below the throughput of the saturated engine, i.e. the
// closed loop of as many clients as the engine has seats (SeatCap), each
// resubmitting at once — no arrival process keeps the engine busier (the
// throughput of a closed loop grows with its clients up to that point). It is
// computed at the screening tier (closed form, µs) and returned as a clause for
// the unstable reason ("" when it cannot be computed).
//
// With a KV pool, no more requests run at once than it holds at full length
// (fewer seats are then the bound: a preempting engine does not even reach it).
func openLoopCapacity(w workload.Spec, e engine.Spec, t timing.Timing) string {
	sat := workload.Spec{Concurrency: e.SeatCap(), ISL: w.ISL, OSL: w.OSL, Prefix: w.Prefix}
	held := ""
	if e.KVCapacityTokens > 0 {
		isl, osl := w.MaxShape()
		if n := max(refine.KVHeld(e.KVCapacityTokens, max(e.BlockSize, 1), isl, osl), 1); n < sat.Concurrency {
			sat.Concurrency, held = n, ", as many as the KV pool holds at full length"
		}
		e.KVCapacityTokens = 0 // the pool is in the bound; the closed form prices no preemption
	}
	rep, err := queueing.ScreeningWith(sat, e, t, queueing.Options{})
	if err != nil || rep.Unstable || !(rep.ThroughputRPS > 0) || math.IsInf(rep.ThroughputRPS, 0) {
		return ""
	}
	return fmt.Sprintf("; capacity ≈ %.3g rps (the saturated engine: %d concurrent requests of isl %d, osl %d%s, screening tier): use --rate below it",
		rep.ThroughputRPS, sat.Concurrency, w.ISL, w.OSL, held)
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

	dep, par := readDeployment(c), readParallel(c)
	if err := checkMTPFlags(c); err != nil {
		return nil, err
	}
	synthetic := c.IsSet("timing")
	if synthetic == dep.set.given("model") {
		return nil, userErrorf("timing: give either --timing linear|roofline (synthetic) or --model with --system, --backend and --tp (perf database)")
	}
	backend, version := dep.Backend, dep.Version
	if synthetic && dep.Deployed != "" {
		return nil, userErrorf("--deployed-version %s: only with --model (the perf-database timing is priced per version; --timing is not)", dep.Deployed)
	}
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
			backend = string(engine.VLLM)
		}
		s.gpus = 1
	}
	// --nextn, else the engine config's drafts: the engine runs them and, with
	// the perf database, they price each decode row (read once here).
	dep.NextN, dep.SeparateDrafter = evalDrafts(c, backend)
	if !synthetic {
		if err := dep.requirePerf(par, "--model: --%s is required with the perf-database timing"); err != nil {
			return nil, err
		}
		if c.IsSet("backend-engine") && c.String("backend-engine") != backend {
			return nil, userErrorf("--backend-engine %q: with --model the engine is --backend (%s)", c.String("backend-engine"), backend)
		}
		pt, v, err := evalPassTiming(c.Context, c.String("db"), dep, readQuant(c), par, w, c.App.ErrWriter)
		if err != nil {
			return nil, err
		}
		s.t, s.pt, s.gpus, version = pt, pt, par.gpus(), v
	}
	if c.IsSet("gpus") {
		if c.Int("gpus") < 1 {
			return nil, userErrorf("--gpus %d: must be ≥ 1", c.Int("gpus"))
		}
		s.gpus = c.Int("gpus")
	}
	s.dep = dep
	s.dep.Version = version
	in := queueing.ProfileInput{Backend: backend, Version: version, Role: queueing.RoleAgg, Batch: profileBatch(c, w), ISL: w.ISL, OSL: w.OSL,
		Drafts: dep.NextN}
	if s.pt != nil {
		in.GPUMemBytes = s.pt.Estimator().System().MemCapacity // SGLang sizes chunked_prefill_size from it
	}
	e, cfg, err := resolveEngine(c, in)
	if err != nil {
		return nil, err
	}
	if err := checkKVDtype(s.pt, e); err != nil {
		return nil, err
	}
	if err := checkConfigLayout(c, cfg, s.pt, false); err != nil {
		return nil, err
	}
	if err := checkConfigDrafts(c, e); err != nil {
		return nil, err
	}
	if err := applyEngineFlags(c, &e); err != nil {
		return nil, err
	}
	if s.pt != nil && e.DraftTokens != s.dep.NextN {
		return nil, fmt.Errorf("eval: the engine runs %d MTP drafts, the pass timing priced %d (configDrafts disagrees with resolveEngine)", e.DraftTokens, s.dep.NextN)
	}
	if err := resolveKVCapacity(c, s.pt, w, &e); err != nil {
		return nil, err
	}
	if err := defaultKVCapacity(c, s.pt, w, &e); err != nil {
		return nil, err
	}
	s.e = e
	return s, nil
}

// defaultKVCapacity sizes a perf-data run's KV pool as the sweep does when
// --kv-capacity-tokens is not given (refine.DeployedPool: the pool the engine
// deploys on its GPUs): a deployment whose weights do not fit is refused
// (ErrOOM), and a pool that cannot hold the requests that may run at once at
// full length (KV-tight) is applied, with a note, so the calendars preempt,
// retract or pause as the engine does (an unbounded pool answered such a point
// as if the memory were there). Those requests are a closed loop's C clients,
// and an open loop's running cap (engine.Spec.SeatCap: its arrivals can fill
// every seat). A pool that holds them changes no pass, so the run stays
// unbounded, as before. Synthetic timings keep the unbounded pool.
func defaultKVCapacity(c *cli.Context, pt *perfdb.PassTiming, w workload.Spec, e *engine.Spec) error {
	if c.IsSet("kv-capacity-tokens") || pt == nil {
		return nil
	}
	n, err := evalPool(c, pt, w, *e, "eval: %v (or give --kv-capacity-tokens N to evaluate a pool of your choosing)")
	if err != nil {
		return err
	}
	isl, osl := w.MaxShape()
	bs := max(e.BlockSize, 1)
	at, which := w.Concurrency, "requests"
	if at <= 0 {
		at, which = e.SeatCap(), "requests its running cap admits"
	}
	if !refine.KVTight(n, bs, at, isl, osl) {
		return nil
	}
	e.KVCapacityTokens = n
	fmt.Fprintf(c.App.ErrWriter, "aicdb: note: KV-tight: the KV pool the engine deploys (%d tokens, from GPU memory) holds %d of the %d %s at full length (isl %d + osl %d); modelled with the engine's preemption (--kv-capacity-tokens 0 for an unbounded pool)\n",
		n, refine.KVHeld(n, bs, isl, osl), at, which, isl, osl)
	return nil
}

// draftColumns says in an eval row how its decode steps drafted (speculative
// decoding; nothing without drafts): nextn and nextn_accepted as the stored
// points name them, and drafter as the points view does (eagle, eagle3 or mtp).
func draftColumns(cols map[string]any, e engine.Spec) {
	if e.DraftTokens == 0 {
		return
	}
	drafter := e.DraftMethod
	if drafter == "" {
		drafter = "mtp"
	}
	cols["nextn"], cols["nextn_accepted"], cols["drafter"] = e.DraftTokens, e.DraftAccepted, drafter
}

// evalDrafts is the MTP draft length eval runs — --nextn, else the engine
// config's (0 when it cannot be read: resolveEngine reports that, with its
// warnings) — and whether the engine config proposes them with a separate
// drafter (an EAGLE / EAGLE3 head: engine.Spec.SeparateDrafter).
func evalDrafts(c *cli.Context, backend string) (int, bool) {
	if !c.IsSet("engine-config") {
		return c.Int("nextn"), false
	}
	cfg, err := engineconf.ParseFile(backend, c.String("engine-config"))
	if err != nil {
		return c.Int("nextn"), false
	}
	probe, _ := configProbe(cfg, backend)
	if c.IsSet("nextn") {
		return c.Int("nextn"), probe.SeparateDrafter()
	}
	return probe.DraftTokens, probe.SeparateDrafter()
}

// checkMTPFlags checks --nextn and --nextn-accepted: drafts need an acceptance
// (there is no built-in one: it depends on the model and the data), an
// acceptance needs drafts and lies in [0, nextn], and MTP is modelled for the
// backend (engine.DraftsModelled).
func checkMTPFlags(c *cli.Context) error {
	if c.IsSet("engine-config") && !c.IsSet("nextn") {
		return nil // the drafts may come from the config: checkConfigDrafts, once it is read
	}
	n, _, err := readMTP(c)
	if err != nil {
		return err
	}
	if b := c.String("backend"); n > 0 && !c.IsSet("timing") && !engine.DraftsModelled(engine.Backend(b)) {
		return userErrorf("--nextn %d: MTP is not modelled for --backend %s; drop --nextn", n, b)
	}
	if b := c.String("backend-engine"); n > 0 && c.IsSet("timing") && !engine.DraftsModelled(engine.Backend(b)) {
		return userErrorf("--nextn %d: MTP is not modelled for --backend-engine %s; drop --nextn", n, b)
	}
	return nil
}

// checkConfigDrafts checks --nextn-accepted against the drafts of engine e
// (resolved from --engine-config's speculative_config, before the flags):
// drafts need an acceptance, an acceptance needs drafts, within [0, drafts].
func checkConfigDrafts(c *cli.Context, e engine.Spec) error {
	if !c.IsSet("engine-config") || c.IsSet("nextn") {
		return nil // checkMTPFlags checked the flags
	}
	n, a := e.DraftTokens, c.Float64("nextn-accepted")
	switch {
	case n > 0 && !c.IsSet("nextn-accepted"):
		return userErrorf("--engine-config %s: MTP with %d draft tokens per decode step: give --nextn-accepted, the mean drafts accepted per decode step (0..%d) measured for this model and data; aicdb assumes none", c.String("engine-config"), n, n)
	case n == 0 && c.IsSet("nextn-accepted"):
		return userErrorf("--nextn-accepted %v: only with MTP drafts (--nextn, or speculative_config in --engine-config)", a)
	case n > 0 && !(a >= 0 && a <= float64(n)):
		return userErrorf("--nextn-accepted %v: must be in [0, the config's %d draft tokens]", a, n)
	}
	return nil
}

// readMTP reads --nextn and --nextn-accepted (eval, accuracy, calibrate): drafts
// need an acceptance (there is no built-in one: it depends on the model and the
// data), an acceptance needs drafts and lies in [0, nextn].
func readMTP(c *cli.Context) (int, float64, error) {
	n, a := c.Int("nextn"), c.Float64("nextn-accepted")
	switch {
	case n < 0:
		return 0, 0, userErrorf("--nextn %d: must be ≥ 0", n)
	case n > 0 && !c.IsSet("nextn-accepted"):
		return 0, 0, userErrorf("--nextn %d: give --nextn-accepted, the mean drafts accepted per decode step (0..%d) measured for this model and data; aicdb assumes none", n, n)
	case c.IsSet("nextn-accepted") && n == 0:
		return 0, 0, userErrorf("--nextn-accepted %v: only with --nextn ≥ 1 (the MTP drafts per decode step)", a)
	case n > 0 && !(a >= 0 && a <= float64(n)):
		return 0, 0, userErrorf("--nextn-accepted %v: must be in [0, --nextn = %d]", a, n)
	}
	return n, a, nil
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
	var missing []string
	for _, f := range need {
		if !c.IsSet(f) {
			missing = append(missing, "--"+f)
		}
	}
	switch len(missing) {
	case 0:
	case 1:
		return nil, userErrorf("--timing %s: %s is required", kind, missing[0])
	default:
		return nil, userErrorf("--timing %s: %s are required", kind, strings.Join(missing, ", "))
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
	sh := readShape(c)
	for _, f := range []namedInt{{"isl", sh.ISL}, {"osl", sh.OSL}} {
		if !sh.set.given(f.name) {
			return w, userErrorf("--%s is required", f.name)
		}
		if err := checkAtLeast(1, f); err != nil {
			return w, err
		}
	}
	w.ISL, w.OSL, w.Prefix = sh.ISL, sh.OSL, sh.Prefix
	if w.Prefix < 0 || w.Prefix >= w.ISL {
		return w, userErrorf("--prefix %d: must be in 0..isl−1 (%d)", w.Prefix, w.ISL-1)
	}
	closed, open := c.IsSet("concurrency"), c.IsSet("rate")
	if closed == open {
		return w, userErrorf("workload: give exactly one of --concurrency (closed loop) or --rate (open loop)")
	}
	if closed {
		w.Concurrency, w.TurnaroundMs = c.Int("concurrency"), c.Float64("turnaround-ms")
		if w.Concurrency <= 0 || w.Concurrency > queueing.MaxConcurrency {
			return w, userErrorf("--concurrency %d: must be in 1..%d", w.Concurrency, queueing.MaxConcurrency)
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

// profileBatch is the batch the engine profile deploys eval's workload w at: a
// closed loop's clients, an open benchmark run's client bound
// (--max-concurrency: it holds at most that many in flight, as accuracy deploys
// a measured run with one), else 0 (the profile's own default).
func profileBatch(c *cli.Context, w workload.Spec) int {
	if w.Concurrency == 0 && c.IsSet("benchmark-requests") && c.Int("max-concurrency") > 0 {
		return c.Int("max-concurrency")
	}
	return w.Concurrency
}

// parseBenchmarkRun reads --benchmark-requests and the open run's
// --max-concurrency / --burstiness / --ramp-up-strategy into the run the quantitative tier predicts
// (nil: the steady state), as accuracy predicts a measured row: a closed loop's
// clients (desynchronised after the burst under the stagger phases, when desync
// is allowed: the tandem runs them locked) or an open loop's sends, pooling
// queueing.OpenPaths Poisson or gamma paths.
func parseBenchmarkRun(c *cli.Context, w workload.Spec, desync bool) (*queueing.FiniteRun, error) {
	openOnly := []string{"max-concurrency", "burstiness", "ramp-up-strategy", "ramp-up-end-rps"}
	if !c.IsSet("benchmark-requests") {
		for _, f := range openOnly {
			if c.IsSet(f) {
				return nil, userErrorf("--%s: only with --rate and --benchmark-requests (an open-loop benchmark run)", f)
			}
		}
		return nil, nil
	}
	if c.String("tier") != "quantitative" {
		return nil, userErrorf("--benchmark-requests: a benchmark run is predicted by the quantitative tier; use --tier quantitative")
	}
	if c.IsSet("num-requests") {
		return nil, userErrorf("--num-requests: the open loop's steady-state length; --benchmark-requests gives the run's requests")
	}
	run := queueing.FiniteRun{Requests: c.Int("benchmark-requests")}
	if w.Concurrency > 0 {
		for _, f := range openOnly {
			if c.IsSet(f) {
				return nil, userErrorf("--%s: only with --rate (a closed loop's clients are its bound)", f)
			}
		}
		run.Desync = desync && c.Int("stagger-phases") > 0
	} else {
		run.Open, run.RateRPS, run.Paths = true, w.RateRPS, queueing.OpenPaths(run.Requests)
		if c.IsSet("max-concurrency") {
			if run.MaxConcurrency = c.Int("max-concurrency"); run.MaxConcurrency < 1 {
				return nil, userErrorf("--max-concurrency %d: must be ≥ 1", run.MaxConcurrency)
			}
		}
		if b := c.Float64("burstiness"); c.IsSet("burstiness") && b != 1 {
			run.GammaShape = b
		}
		if c.IsSet("ramp-up-strategy") != c.IsSet("ramp-up-end-rps") {
			return nil, userErrorf("--ramp-up-strategy and --ramp-up-end-rps come together: the ramp runs from --rate to the end rate")
		}
		run.Ramp, run.RampEndRPS = strings.ToLower(c.String("ramp-up-strategy")), c.Float64("ramp-up-end-rps")
	}
	if err := run.Validate(); err != nil {
		return nil, userErrorf("--benchmark-requests: %v", err)
	}
	return &run, nil
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
func applyEngineFlags(c *cli.Context, e *engine.Spec) error {
	o, err := readEngineKnobs(c)
	if err != nil {
		return err
	}
	o.apply(e)
	if e.Backend == engine.SGLang && e.DraftTokens > 0 {
		// SGLang's server arguments turn the overlap scheduler and mixed chunk off
		// for EAGLE / NEXTN (engine.Spec.SetDrafts): an explicit request for either
		// is refused rather than silently overridden.
		for _, name := range []string{"async-scheduling", "mixed-chunk"} {
			if c.IsSet(name) && c.Bool(name) {
				return userErrorf("--%s: SGLang turns it off under EAGLE/NEXTN speculative decoding (%d draft tokens); drop --%s", name, e.DraftTokens, name)
			}
		}
		e.SetDrafts(e.DraftTokens, e.DraftAccepted)
	}
	if err := e.Validate(); err != nil {
		return userErrorf("%v", err)
	}
	return nil
}

// loadPhaseMemoryLimit bounds the heap while loadPhaseGC has the collector
// off: past it the collector runs as usual.
const loadPhaseMemoryLimit = 1 << 30

// gcPhaseOwner is held by the one phase (a load phase or a replay phase) that
// has changed the process-wide GC settings, so concurrent phases (parallel
// tests, disaggregated workers) never interleave their save and restore.
var gcPhaseOwner sync.Mutex

// gcPhase sets the GC percent to percent and, when limit ≥ 0, the memory limit
// to limit, and returns the function that restores both. A phase that starts
// while another holds the settings leaves them to that one.
func gcPhase(percent int, limit int64) (restore func()) {
	if !gcPhaseOwner.TryLock() {
		return func() {}
	}
	oldLimit := debug.SetMemoryLimit(limit) // a negative limit reads without changing
	oldPct := debug.SetGCPercent(percent)
	return func() {
		debug.SetGCPercent(oldPct)
		debug.SetMemoryLimit(oldLimit)
		gcPhaseOwner.Unlock()
	}
}

// loadPhaseGC turns the garbage collector off for the load phase of a
// single-point process (snapshot decode, querier and index building, pricing)
// and returns the function that restores it. That phase only grows the heap
// (~100 MB for DeepSeek-V3), so collections during it scan a growing live
// heap for almost nothing to free; the memory limit keeps a larger load
// bounded.
func loadPhaseGC() (restore func()) { return gcPhase(-1, loadPhaseMemoryLimit) }

// evalPassTiming builds the perf-database pass timing of one worker of dep at
// parallelism par through the sweep evaluator's builder (refine.WorkerConfig,
// refine.WorkerTiming), checked against the workload's longest request; it
// returns the resolved version (resolveVersion's notes go to note).
func evalPassTiming(ctx context.Context, db string, dep deploymentOpts, q quantOpts, par parallelOpts, w workload.Spec, note io.Writer) (*perfdb.PassTiming, string, error) {
	isl, osl := w.MaxShape()
	return perfPassTiming(ctx, db, dep, q, par, func(m *perfdb.Model) error { return checkContextLength(m, isl, osl) }, note)
}

// perfPassTiming is evalPassTiming with the workload's check against the model
// (its context window) given by the caller: fits names the request and the fix
// in the caller's terms (flags for eval, a trace line for trace replay).
func perfPassTiming(ctx context.Context, db string, dep deploymentOpts, q quantOpts, par parallelOpts, fits func(*perfdb.Model) error, note io.Writer) (*perfdb.PassTiming, string, error) {
	defer loadPhaseGC()()
	src, err := openEstimateSource(ctx, db)
	if err != nil {
		return nil, "", asUser(err)
	}
	defer src.close()
	version, err := src.resolveVersion(ctx, dep, note)
	if err != nil {
		return nil, "", err
	}
	mode, err := q.mode()
	if err != nil {
		return nil, "", err
	}
	if err := par.check(); err != nil {
		return nil, "", err
	}
	m, err := src.model(ctx, dep.Model)
	if err != nil {
		return nil, "", asUser(err)
	}
	if err := fits(m); err != nil {
		return nil, "", err
	}
	if par, err = par.forModel(m); err != nil {
		return nil, "", err
	}
	d, err := src.data(ctx, dep.System, dep.Backend, version, perfdb.ForMode(mode), perfdb.ForModel(m))
	if err != nil {
		return nil, "", asUser(err)
	}
	cfg, err := workerConfig(dep, version, q, dep.NextN, par)
	if err != nil {
		return nil, "", err
	}
	// The querier keeps its built GEMM site indexes beside the store's perf-data
	// snapshot, so a warm process reads them instead of rebuilding them.
	qmode := cfg.Mode
	if qmode == "" {
		qmode = perfdb.ModeSilicon
	}
	qr, err := perfdb.NewQuerierWithIndexCache(d, qmode, perfdb.IndexCacheDir(db))
	if err != nil {
		return nil, "", asUser(err)
	}
	_, pt, err := refine.WorkerTiming(qr, d, m, cfg)
	if err != nil {
		return nil, "", asUser(err)
	}
	return pt, version, nil
}
