// Package calibrate predicts measured deployments through refine's evaluator (the
// same code path as eval and sweep points), persists the predictions for the
// accuracy view, and fits per-deployment pass-timing calibrations (issue 9 parts
// 3 and 4).
package calibrate

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"

	"go.yaml.in/yaml/v3"
	"golang.org/x/sync/errgroup"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/engineconf"
	"github.com/aicdb/aicdb/refine"
	"github.com/aicdb/aicdb/store"
	"github.com/aicdb/aicdb/store/measure"
)

// Engine profiles: how a measured deployment's engine was configured when the
// measurement does not say.
const (
	ProfileDefaults       = queueing.ProfileDefaults       // the backend's bare defaults (SCHEDULERS.md §6)
	ProfileAIConfigurator = queueing.ProfileAIConfigurator // aiconfigurator's generator rules (how the silicon rows were deployed)
)

// Evaluator is what prediction needs of refine's perfdb evaluator.
type Evaluator interface {
	refine.Evaluator
	QuantitativeAdjusted(ctx context.Context, in store.PointInputs, adj refine.PassAdjust) (store.Quantitative, error)
	ScreenAdjusted(ctx context.Context, in store.PointInputs, adj refine.PassAdjust) (store.Queueing, error)
	QuantitativeRunAdjusted(ctx context.Context, in store.PointInputs, adj refine.PassAdjust, run queueing.FiniteRun) (store.Quantitative, error)
	// QuantitativeRunSummaryAdjusted is QuantitativeRunAdjusted's TTFT, TPOT and
	// E2E columns at less cost (the fit's objective; never stored).
	QuantitativeRunSummaryAdjusted(ctx context.Context, in store.PointInputs, adj refine.PassAdjust, run queueing.FiniteRun) (store.Quantitative, error)
}

// RunEvaluator predicts one benchmark run as it was run (queueing.FiniteRun)
// under the evaluator's own calibration (refine.PerfdbEvaluator).
type RunEvaluator interface {
	QuantitativeRun(ctx context.Context, in store.PointInputs, run queueing.FiniteRun) (store.Quantitative, error)
}

// runTag marks a point evaluated as a finite benchmark run: the evaluator name of
// its inputs becomes "<evaluator>+run:<FiniteRun.Label>", so its stored
// quantitative row (keyed by the inputs) never stands in for the steady state's.
const runTag = "+run:"

// Target is a measurement resolved to the operating point that predicts it, or the
// reason it cannot be predicted.
type Target struct {
	Row            measure.Row
	In             store.PointInputs // valid when Reason == ""
	ModelUsed      string
	VersionUsed    string
	VersionMapping string
	Reason         string
	// Run is the benchmark run that produced the measurement (per worker), nil
	// when the measurement does not say or the resolver predicts steady states:
	// then the prediction is the steady state.
	Run *queueing.FiniteRun

	// fallbacks are the other perf-data versions to price the measurement at, in
	// order, when VersionUsed has no perf data for its point (FallbackVersions);
	// gap marks a Reason that is such a miss (set only with a Reason).
	fallbacks []string
	gap       bool
	fellBack  bool
}

// FellBack reports that the target is priced at a fallback version
// (Resolver.VersionFallback): its mapped version had no perf data for its point.
func (t Target) FellBack() bool { return t.fellBack }

// Resolver maps measurements onto operating points: model ids (exact, or the same
// name without an org's "Meta-" prefix), the nearest perf-data version of the
// backend on the system (PEP 440 order), the engine knobs of the profile.
type Resolver struct {
	Src     refine.PerfSource
	Ev      refine.Evaluator
	Profile string
	// Run is how a measured closed-loop row is predicted (RunBenchmark, the zero
	// value: the run that produced it).
	Run RunMode
	// VersionFallback prices a measurement whose mapped perf-data version has no
	// data for its point at the nearest other version that has
	// (FallbackVersions), recording each step in the version mapping; off, such a
	// measurement keeps the miss as its reason.
	VersionFallback bool
	// NextN and NextNAccepted assume MTP for the rows predicted (no row records
	// it): drafts per decode step and the mean accepted — vLLM's MTP, TensorRT-LLM's
	// one-model MTP, SGLang's EAGLE/NEXTN. Every row of a backend that models them
	// (engine.DraftsModelled) is predicted with them (a disaggregated row's on both
	// pools); any other row keeps the reason it cannot be. 0 drafts: no MTP.
	NextN         int
	NextNAccepted float64

	models []string
	gpuMem map[string]float64 // system → one GPU's memory (bytes), for SGLang's GPU-sized defaults
}

// NewResolver lists the store's models and its systems' GPU memory once.
func NewResolver(ctx context.Context, st *store.Store, ev refine.Evaluator, profile string) (*Resolver, error) {
	if profile == "" {
		profile = ProfileAIConfigurator
	}
	if profile != ProfileDefaults && profile != ProfileAIConfigurator {
		return nil, fmt.Errorf("--engine-profile %q: want %s or %s", profile, ProfileDefaults, ProfileAIConfigurator)
	}
	r := &Resolver{Src: refine.StoreSource{St: st}, Ev: ev, Profile: profile}
	var err error
	if r.models, err = st.ModelIDs(ctx); err != nil {
		return nil, fmt.Errorf("list models: %w", err)
	}
	systems, err := st.SystemSummaries(ctx)
	if err != nil {
		return nil, fmt.Errorf("list systems: %w", err)
	}
	r.gpuMem = make(map[string]float64, len(systems))
	for _, sys := range systems {
		r.gpuMem[sys.Name] = sys.Mem
	}
	return r, nil
}

// modelID finds the store's model for a measured model id.
func (r *Resolver) modelID(id string) (string, bool) {
	if slices.Contains(r.models, id) {
		return id, true
	}
	norm := func(s string) string {
		s = strings.ToLower(s)
		if i := strings.LastIndexByte(s, '/'); i >= 0 {
			s = s[i+1:]
		}
		return strings.TrimPrefix(s, "meta-")
	}
	for _, m := range r.models {
		if norm(m) == norm(id) && org(m) == org(id) {
			return m, true
		}
	}
	return r.requantisedBase(id)
}

// requantisedBase maps NVIDIA's re-quantised checkpoint of a model whose own config
// the store does not hold ("nvidia/DeepSeek-R1-NVFP4") onto the one stored model of
// that name in any organisation ("deepseek-ai/DeepSeek-R1"): the same architecture,
// with the precision carried by the measurement's quant label (nvfp4), which
// overrides the checkpoint's in Resolve. Two stored models of that name: no mapping.
func (r *Resolver) requantisedBase(id string) (string, bool) {
	o, name, ok := strings.Cut(id, "/")
	if !ok || !strings.EqualFold(o, "nvidia") {
		return "", false
	}
	base := ""
	for _, suf := range []string{"-NVFP4", "-FP8", "-FP4"} {
		if len(name) > len(suf) && strings.EqualFold(name[len(name)-len(suf):], suf) {
			base = name[:len(name)-len(suf)]
		}
	}
	if base == "" {
		return "", false
	}
	found := ""
	for _, m := range r.models {
		if _, n, _ := strings.Cut(m, "/"); strings.EqualFold(n, base) {
			if found != "" {
				return "", false
			}
			found = m
		}
	}
	return found, found != ""
}

// renamedOrgs maps a Hugging Face organisation's former name to its current one:
// aiconfigurator's silicon sample names GLM-5 "zhipuai/GLM-5", its model configs
// (and the Hub today) "zai-org/GLM-5".
var renamedOrgs = map[string]string{"zhipuai": "zai-org"}

// org is the organisation of a model id, lower case, under its current name.
func org(id string) string {
	o, _, _ := strings.Cut(id, "/")
	o = strings.ToLower(o)
	if cur, ok := renamedOrgs[o]; ok {
		return cur
	}
	return o
}

// FallbackVersions orders the perf-data versions other than primary for a
// measurement that primary cannot price (its tables lack the point's shapes,
// e.g. a sliding-window attention or an expert count collected only in other
// releases): nearest to primary first in PEP 440 order, the newer of two equally
// near first. Development snapshots are left out (perfdb.IsRelease).
func FallbackVersions(primary string, available []string) []string {
	vs := slices.Clone(available)
	slices.SortFunc(vs, perfdb.CompareVersions)
	vs = slices.Compact(vs)
	at := slices.Index(vs, primary)
	var out []string
	for d := 1; at >= 0 && d < len(vs); d++ {
		for _, i := range []int{at + d, at - d} {
			if i >= 0 && i < len(vs) && perfdb.IsRelease(vs[i]) {
				out = append(out, vs[i])
			}
		}
	}
	return out
}

// shortMiss is the first clause of a perf-data miss, for a version mapping's text.
func shortMiss(why string) string {
	why = strings.TrimPrefix(why, "no perf data for this point: ")
	why = strings.TrimSuffix(why, ": "+refine.ErrNoPerfData.Error()) // a wrapped sentinel
	if i := strings.LastIndex(why, ": "); i >= 0 && i+2 < len(why) {
		why = why[i+2:]
	}
	if r := []rune(why); len(r) > 160 {
		why = string(r[:157]) + "..."
	}
	return why
}

// Resolve maps one measurement onto its operating point (or a reason).
func (r *Resolver) Resolve(ctx context.Context, row measure.Row) Target {
	t := Target{Row: row}
	m := &row.Measurement
	if m.Mode != store.ModeAgg && m.Mode != store.ModeDisagg {
		t.Reason = fmt.Sprintf("mode %q: only agg and disagg deployments are predicted", m.Mode)
		return t
	}
	if m.Concurrency <= 0 && m.RequestRate <= 0 && !m.Ramped() {
		t.Reason = "neither a client concurrency nor a request rate: the run's load is not stated"
		return t
	}
	if why := m.LoadUnmodelled(); why != "" {
		t.Reason = "measured run: " + why
		return t
	}
	if _, why := m.OpenArrivals(); why != "" {
		t.Reason = "open-loop measurement: " + why
		return t
	}
	model, ok := r.modelID(m.Model)
	if !ok {
		t.Reason = fmt.Sprintf("model %s is not in the store (add its config with 'aicdb perfdb import')", m.Model)
		return t
	}
	t.ModelUsed = model
	systems, err := r.Src.Systems(ctx)
	if err != nil || !slices.Contains(systems, m.System) {
		t.Reason = fmt.Sprintf("no perf data for system %s", m.System)
		return t
	}
	backends, err := r.Src.Backends(ctx, m.System)
	if err != nil || !slices.Contains(backends, m.Backend) {
		t.Reason = fmt.Sprintf("no perf data for backend %s on %s", m.Backend, m.System)
		return t
	}
	versions, err := r.Src.Versions(ctx, m.System, m.Backend)
	if err != nil {
		t.Reason = fmt.Sprintf("list versions of %s on %s: %v", m.Backend, m.System, err)
		return t
	}
	v, mapping, ok := perfdb.NearestVersion(m.Version, versions)
	if !ok {
		t.Reason = fmt.Sprintf("no perf-data version of %s on %s", m.Backend, m.System)
		return t
	}
	if r.VersionFallback {
		t.fallbacks = FallbackVersions(v, versions)
	}
	t = r.resolveAt(ctx, t, v, mapping)
	if t.gap {
		t = r.fallBack(ctx, t, t.Reason)
	}
	return t
}

// fallBack re-resolves t, whose version has no perf data for its point (why), at
// the next of its fallback versions, and on to the next while a version cannot
// resolve it for want of data; the mapping records each step. Without fallbacks
// left t is returned as it is.
func (r *Resolver) fallBack(ctx context.Context, t Target, why string) Target {
	for len(t.fallbacks) > 0 {
		v := t.fallbacks[0]
		mapping := fmt.Sprintf("%s; no perf data at %s (%s) → %s", t.VersionMapping, t.VersionUsed, shortMiss(why), v)
		t = r.resolveAt(ctx, Target{Row: t.Row, ModelUsed: t.ModelUsed, fallbacks: t.fallbacks[1:], fellBack: true}, v, mapping)
		if !t.gap {
			break
		}
		why = t.Reason
	}
	return t
}

// resolveAt completes t (its row and model resolved) at perf-data version v,
// reached by mapping.
func (r *Resolver) resolveAt(ctx context.Context, t Target, v, mapping string) Target {
	m := &t.Row.Measurement
	model := t.ModelUsed
	t.VersionUsed, t.VersionMapping = v, mapping
	res, err := r.Ev.Resolve(ctx, model, m.System, m.Backend, v)
	if err != nil {
		t.Reason = oneLine(err.Error())
		if strings.Contains(t.Reason, "not supported yet") {
			t.Reason = "model family not modelled: " + t.Reason
		} else {
			t.gap = isGap(err)
		}
		return t
	}
	if r.NextN > 0 && !engine.DraftsModelled(engine.Backend(m.Backend)) {
		t.Reason = fmt.Sprintf("--nextn %d: MTP is not modelled for %s rows", r.NextN, m.Backend)
		return t
	}
	cfg, why := r.measuredConfig(m, res.MoE)
	if why != "" {
		t.Reason = why
		return t
	}
	if m.Mode == store.ModeDisagg {
		t = r.resolveDisagg(t, model, v, res)
		if t.Reason == "" {
			r.deployedPools(&t, cfg)
		}
		if t.Reason == "" {
			r.benchmarkRun(&t, 1) // one tandem runs the whole deployment's clients
		}
		return t
	}
	batch, why := r.pointBatch(m, v, m.PP*m.DP, "pp·dp")
	if why != "" {
		t.Reason = why
		return t
	}
	e, budget, err := engineKnobs(r.Profile, queueing.ProfileInput{Backend: m.Backend, Version: v,
		Role: queueing.RoleAgg, Batch: batch, ISL: m.ISL, OSL: m.OSL, GPUMemBytes: r.gpuMem[m.System]})
	if err != nil {
		t.Reason = "engine profile: " + oneLine(err.Error())
		return t
	}
	in := store.PointInputs{Model: model, System: m.System, Backend: m.Backend, Version: v, Mode: store.ModeAgg,
		ISL: m.ISL, OSL: m.OSL, Prefix: m.Prefix, TP: m.TP, PP: m.PP, DP: m.DP, MoETP: m.MoETP, MoEEP: m.MoEEP,
		Batch: batch, CtxTokens: max(budget-batch, m.ISL-m.Prefix), MaxNumBatchedTokens: budget, MaxNumSeqs: e.SeatCap(),
		ChunkedPrefill: e.EnableChunkedPrefill, DatabaseMode: res.DatabaseMode, GemmQuant: res.GemmQuant, KVCacheQuant: res.KVCacheQuant,
		FMHAQuant: res.FMHAQuant, MoEQuant: res.MoEQuant, CommQuant: res.CommQuant, Evaluator: r.Ev.Name(),
		Deployed: store.DeployedAs(m.Version, v), NextN: r.NextN, NextNAccepted: r.NextNAccepted}
	measuredQuant(&in, m, res)
	if cfg != nil {
		// The engine as deployed: the profile's, the measurement's own config
		// over it (as a sweep's --engine-config), recorded with the row.
		if err := cfg.CheckLayout(engineconf.Layout{TP: m.TP, PP: m.PP, DP: m.DP, MoETP: m.MoETP, MoEEP: m.MoEEP}, res.MoE); err != nil {
			t.Reason = "engine_config: " + oneLine(err.Error())
			return t
		}
		if err := refine.RecordEngines(r.Profile, cfg, &in, r.gpuMem[m.System]); err != nil {
			t.Reason = "engine_config: " + oneLine(err.Error())
			return t
		}
	} else if e.Backend == engine.SGLang {
		// SGLang has two prompt caps, chunked_prefill_size (the per-pass budget,
		// S-R4) and max_prefill_tokens (the rules' isl + 1500): one budget column
		// cannot carry both, so the point records its engine (and, through the
		// profile, a key of its own). ctx_tokens stays the legacy estimate's knob.
		// Under EAGLE the recorded engine is the one that runs: overlap
		// scheduler and mixed chunk off (SetDrafts).
		if r.NextN > 0 {
			e.SetDrafts(r.NextN, r.NextNAccepted)
		}
		js, err := engineconf.Resolved{Profile: r.Profile, Engine: &e}.Encode()
		if err != nil {
			t.Reason = "engine profile: " + oneLine(err.Error())
			return t
		}
		in.Engine, in.EngineProfile = js, r.Profile
		in.MaxNumBatchedTokens = e.TokenBudget()
	}
	if err := in.Validate(); err != nil {
		t.Reason = err.Error()
		return t
	}
	t.In = in
	r.benchmarkRun(&t, m.PP*m.DP)
	return t
}

// pointBatch is the per-worker batch of measurement m's point over its workers
// (aggregated: pp·dp; disaggregated: the decode pool's workers · pp · dp, named
// by unit), or why it has none. A closed loop's clients split exactly over the
// workers. An open-loop run (a request rate) holds at most its client
// concurrency bound in flight, split the same way (rounded up); without one, the
// running cap of the resolver's profile deployed without a batch at version v
// (aiconfigurator's generator: its default max_batch_size 128; the defaults: the
// engine's own cap), as eval runs an open loop (the point's engine takes its cap
// from the batch).
func (r *Resolver) pointBatch(m *measure.Measurement, v string, workers int, unit string) (int, string) {
	if !m.OpenLoop() {
		if m.Concurrency%workers != 0 {
			return 0, fmt.Sprintf("concurrency %d is not a multiple of %s = %d", m.Concurrency, unit, workers)
		}
		return m.Concurrency / workers, ""
	}
	if m.NumPrompts <= 0 {
		return 0, "open-loop measurement without its request count (num_prompts / request_count): an open run is predicted as it was run, N requests from an idle engine"
	}
	if r.Run == RunSteady {
		return 0, "open-loop measurement under --run steady: a stored steady state is a closed loop; predict it as its run (--run desync or benchmark)"
	}
	if b := m.OpenBound(); b > 0 {
		return ceilDiv(b, workers), ""
	}
	// No bound (every request at once included): the profile's engine as
	// deployed without a batch, as eval runs an open loop.
	e, err := queueing.ProfileEngine(r.Profile, queueing.ProfileInput{Backend: m.Backend, Version: v, Role: queueing.RoleAgg,
		ISL: m.ISL, OSL: m.OSL, GPUMemBytes: r.gpuMem[m.System]})
	if err != nil {
		return 0, "engine profile: " + oneLine(err.Error())
	}
	return e.SeatCap(), ""
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// measuredConfig is the engine config measurement m was deployed with (its
// engine_config keys, engineconf's rules for its backend), nil when it states
// none, or the reason the row cannot be predicted with it: a key the model
// does not represent, parallelism keys on a disaggregated row (its pools have
// their own layouts), or drafts (speculative decoding) the resolver was not
// given an acceptance for (--nextn with --nextn-accepted; the acceptance is not
// a config key).
func (r *Resolver) measuredConfig(m *measure.Measurement, moe bool) (*engineconf.Config, string) {
	if len(m.EngineConfig) == 0 {
		return nil, ""
	}
	text, err := yaml.Marshal(m.EngineConfig)
	if err != nil {
		return nil, "engine_config: " + oneLine(err.Error())
	}
	cfg, err := engineconf.Parse(m.Backend, text)
	if err != nil {
		return nil, "engine_config: " + oneLine(err.Error())
	}
	if _, ok := cfg.Layout(); ok && m.Mode == store.ModeDisagg {
		return nil, "engine_config: parallelism keys on a disaggregated row (its pools have their own layouts): drop them, the row's columns give each pool's"
	}
	probe, err := cfg.Probe()
	if err != nil {
		return nil, "engine_config: " + oneLine(err.Error())
	}
	if probe.DraftTokens > 0 && r.NextN == 0 {
		return nil, fmt.Sprintf("engine_config: %d draft tokens per decode step (speculative decoding): predict it with --nextn %d --nextn-accepted A (the acceptance is not a config key)", probe.DraftTokens, probe.DraftTokens)
	}
	return cfg, ""
}

// deployedPools records on a disaggregated point the engines its pools were
// deployed with under the resolver's profile, through the sweep's own rule
// (refine.RecordEngines: the profile's prefill and decode roles at each
// pool's per-worker batch × pp; aiconfigurator's generator: a prefill worker's
// budget isl + 1500 and its running cap p_batch, TensorRT-LLM's prefill overlap
// off, a decode worker's budget its batch, SGLang's mixed chunk off). Under the
// defaults profile the point keeps the original rule (the backends' defaults
// capped at each pool's batch), as a sweep's defaults rows do — unless the
// measurement states its engine config (cfg), which applies over both pools.
func (r *Resolver) deployedPools(t *Target, cfg *engineconf.Config) {
	if r.Profile == ProfileDefaults && cfg == nil {
		return
	}
	if err := refine.RecordEngines(r.Profile, cfg, &t.In, r.gpuMem[t.In.System]); err != nil {
		what := "engine profile: "
		if cfg != nil {
			what = "engine_config: "
		}
		t.Reason = what + oneLine(err.Error())
		return
	}
	if err := t.In.Validate(); err != nil {
		t.Reason = err.Error()
	}
}

// RunMode is how a Resolver predicts a measured closed-loop row (aicdb --run).
type RunMode int

const (
	// RunBenchmark predicts the benchmark run that produced the measurement
	// (measure.Measurement.BenchmarkRun): burst start, clients locked for the run.
	RunBenchmark RunMode = iota
	// RunDesync predicts an aggregated row's benchmark run as its burst followed
	// by desynchronised clients (queueing.QuantitativeFinite of a FiniteRun.Desync
	// run); disaggregated rows keep the locked run (the tandem has no
	// desynchronised one).
	RunDesync
	// RunSteady predicts every measurement by the steady state.
	RunSteady
)

// benchmarkRun sets t.Run to the benchmark run that produced the measurement, run
// by each of workers calendars (the clients split evenly over them), and tags the
// point's evaluator with it — unless the resolver predicts steady states, its
// evaluator cannot run a benchmark, or the measurement does not say how it was run.
func (r *Resolver) benchmarkRun(t *Target, workers int) {
	m := &t.Row.Measurement
	if _, ok := r.Ev.(RunEvaluator); !ok || r.Run == RunSteady {
		if m.OpenLoop() {
			t.Reason = "open-loop measurement: the evaluator cannot run a benchmark run, and a stored steady state is a closed loop"
		}
		return
	}
	if m.OpenLoop() {
		// An open-loop run (pointBatch checked its count and the run mode): its rate
		// and bound split evenly over the workers (random routing thins a Poisson
		// stream into Poisson streams; gamma and constant sends are taken as split
		// the same way), the expectation over its paths.
		n := ceilDiv(m.NumPrompts, workers)
		a, _ := m.OpenArrivals() // Resolve refused the sends it cannot space
		t.Run = &queueing.FiniteRun{Requests: n, Open: true, RateRPS: m.RequestRate / float64(workers), Paths: queueing.OpenPaths(n),
			GammaShape: a.GammaShape, Constant: a.Constant}
		if a.Ramp != "" { // each worker's share ramps along the same progress
			t.Run.RateRPS, t.Run.Ramp, t.Run.RampEndRPS = a.RampStartRPS/float64(workers), a.Ramp, a.RampEndRPS/float64(workers)
		}
		if a.Constant || m.AllAtOnce() {
			t.Run.Paths = 0 // one deterministic path (all at once: rate 0)
		}
		if b := m.OpenBound(); b > 0 {
			t.Run.MaxConcurrency = ceilDiv(b, workers)
		}
		t.Run.Shapes = queueing.EncodeShapes(m.ISLQuantiles, m.OSLQuantiles) // its dataset's lengths (W2)
		t.In.Evaluator += runTag + t.Run.Label()
		return
	}
	if run, ok := m.BenchmarkRun(workers); ok {
		t.Run = &queueing.FiniteRun{Requests: run.Requests, Warmup: run.Warmup, Desync: r.Run == RunDesync && t.In.Mode == store.ModeAgg,
			Shapes: queueing.EncodeShapes(m.ISLQuantiles, m.OSLQuantiles)}
		t.In.Evaluator += runTag + t.Run.Label()
	}
}

// measuredQuant applies the measured quant labels: they override the checkpoint's
// (the silicon rows label fp8/nvfp4 runs of one config id), except a native mxfp4
// checkpoint (gpt-oss), whose experts the label does not describe.
func measuredQuant(in *store.PointInputs, m *measure.Measurement, res refine.Resolved) {
	native := strings.Contains(res.MoEQuant, "mxfp4")
	// A gemm label equal to the checkpoint's own expert quant names the checkpoint
	// (Kimi-K2.5's rows say int4_wo for its int4 weight-only experts; its attention
	// and dense layers are bf16): the checkpoint's gemm mode stands.
	if q := fp8Scaling(quant(m.GemmQuant), res.GemmQuant, quant(m.MoEQuant)); q != "" && !native && !(res.MoE && q == res.MoEQuant) {
		in.GemmQuant = q
	}
	if q := fp8Scaling(quant(m.MoEQuant), res.MoEQuant, ""); q != "" && res.MoE && !native {
		in.MoEQuant = q
	}
}

// quant maps a measured quant label onto perfdb's names ("" = the model's own:
// an unquantised label says nothing the checkpoint does not).
func quant(s string) string {
	switch s = strings.ToLower(strings.TrimSpace(s)); s {
	case "", "bf16", "bfloat16", "fp16", "float16", "auto":
		return ""
	}
	return s
}

// fp8Scaling resolves a bare "fp8" label, which names the precision but not the
// scaling granularity: the checkpoint's own fp8 mode when it is one (DeepSeek-V3/R1
// ship fp8_block weights, so "fp8" on their rows is fp8_block, not per-tensor fp8);
// else the sibling label's block mode (the silicon rows label GLM-5-FP8 and
// DeepSeek on SGLang gemm "fp8" beside moe "fp8_block": the same block-quantised
// checkpoint). Any other label is returned unchanged.
func fp8Scaling(label, checkpoint, sibling string) string {
	if label != "fp8" {
		return label
	}
	switch {
	case strings.HasPrefix(checkpoint, "fp8_"):
		return checkpoint
	case strings.HasPrefix(sibling, "fp8_"):
		return sibling
	}
	return label
}

// engineKnobs resolves the engine of a measured deployment under an engine
// profile through queueing.ProfileEngine (aiconfigurator's generator rules, or
// the backend defaults; in.GPUMemBytes sizes SGLang's chunked_prefill_size) and
// the prompt budget a stored point carries (PointInputs.MaxNumBatchedTokens).
// Under the defaults profile the running cap is the client concurrency
// (in.Batch). The point's running cap is e.SeatCap() and its chunked prefill
// e.EnableChunkedPrefill. SGLang's budget is max_prefill_tokens: ctx_tokens, the
// legacy estimate's prefill budget, is derived from it; the other backends' is
// their per-pass budget. The profile's other agg settings (TRT-LLM's overlap
// scheduler on, 32-token blocks) equal the defaults refine's evaluator starts
// from.
func engineKnobs(profile string, in queueing.ProfileInput) (engine.Spec, int, error) {
	e, err := queueing.ProfileEngine(profile, in)
	if err != nil {
		return e, 0, err
	}
	budget := e.TokenBudget()
	if e.Backend == engine.SGLang {
		budget = e.MaxPrefillTokens
	}
	if profile == ProfileDefaults {
		e.SetSeatCap(in.Batch) // the client concurrency bounds the running requests
	}
	return e, budget, nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Prediction is a resolved target with its persisted point (Key) or reason.
type Prediction struct {
	Target
	Key   string
	Point store.Point
	Quant store.Quantitative
	// stored marks a fallback version's point already in the store (not
	// evaluated again).
	stored bool
}

// Predict resolves every row, evaluates the points not stored yet (legacy estimate
// and screening like a sweep point, then the quantitative tier like the funnel,
// through ev) and persists points, quantitative results and one
// measurement_predictions row per measurement — with its reason when it cannot be
// predicted. calibration names the calibration ev applies ("" = none).
func Predict(ctx context.Context, st *store.Store, ev refine.Evaluator, res *Resolver, rows []measure.Row, calibration string, opt PredictOptions) ([]Prediction, error) {
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	out := make([]Prediction, len(rows))
	for i := range rows {
		out[i].Target = res.Resolve(ctx, rows[i])
	}
	// Points already stored with a quantitative result are reused.
	have, err := quantKeys(ctx, st, out)
	if err != nil {
		return nil, err
	}
	var todo []*Prediction
	for i := range out {
		p := &out[i]
		if p.Reason != "" {
			continue
		}
		p.Key = p.In.Key()
		if !have[p.Key] {
			todo = append(todo, p)
		}
	}
	var done atomic.Int64
	report := func() {
		if opt.Progress != nil {
			opt.Progress(int(done.Add(1)), len(todo))
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, p := range todo {
		g.Go(func() error {
			defer report()
			err := evaluate(gctx, ev, p)
			// A version without perf data for the point: the next fallback version
			// that resolves (Resolver.fallBack), evaluated afresh.
			for err != nil && gctx.Err() == nil && isGap(err) && len(p.fallbacks) > 0 {
				t := res.fallBack(gctx, p.Target, reasonOf(err))
				if t.Reason != "" {
					p.Target, err = t, nil
					break
				}
				p.Target, p.Key = t, t.In.Key()
				stored, serr := st.QuantitativeKeys(gctx, []string{p.Key})
				if serr != nil {
					return serr
				}
				if p.stored = stored[p.Key]; p.stored {
					return nil
				}
				err = evaluate(gctx, ev, p)
			}
			if err != nil {
				if gctx.Err() != nil {
					return gctx.Err()
				}
				p.Reason = reasonOf(err)
				return nil
			}
			if p.Reason != "" {
				return nil
			}
			// The inputs' evaluator name: ev.Name(), plus the run tag of a benchmark
			// run (so `aicdb doctor` never re-checks it against the steady state).
			p.Quant.Key, p.Quant.Evaluator = p.Key, p.In.Evaluator
			if err := p.Quant.Validate(); err != nil {
				p.Reason = "evaluator: " + err.Error()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var pts []store.Point
	var qs []store.Quantitative
	seen := map[string]bool{}
	for i := range out {
		p := &out[i]
		if p.Reason != "" || have[p.Key] || p.stored || seen[p.Key] {
			continue
		}
		seen[p.Key] = true
		pts = append(pts, p.Point)
		qs = append(qs, p.Quant)
	}
	if len(pts) > 0 {
		if _, err := st.InsertPoints(ctx, pts); err != nil {
			return nil, err
		}
		if err := st.InsertQuantitative(ctx, qs); err != nil {
			return nil, err
		}
	}
	return out, savePredictions(ctx, st, out, calibration, ev.Name(), res.Profile)
}

// OOMReason is the reason of a measured row that aiconfigurator's memory model
// calls out of memory: the measurement shows the deployment ran, so the memory
// model is what is wrong for this row (the row stays unpredicted, as
// aiconfigurator prices no OOM point).
const OOMReason = "does not fit in GPU memory by aiconfigurator's memory model (OOM); measured run exists: memory model disagrees"

// PredictOptions tune Predict.
type PredictOptions struct {
	Workers int // parallel evaluations (0 = GOMAXPROCS)
	// Progress, if set, is called after each evaluated row with (done, total):
	// total counts the rows Predict evaluates (not those already stored or
	// unresolved). It may be called from several goroutines.
	Progress func(done, total int)
}

// evaluate prices p's point (legacy estimate and screening, then the quantitative
// tier through ev) into p.Point and p.Quant; an out-of-memory point gets
// OOMReason.
func evaluate(ctx context.Context, ev refine.Evaluator, p *Prediction) error {
	pt, err := refine.EvaluatePoint(ctx, ev, p.In)
	if err != nil {
		return err
	}
	if pt.Legacy.OOM && !unboundedOpen(p.Run) {
		p.Reason = OOMReason
		return nil
	}
	p.Point = pt
	p.Quant, err = quantitativeOf(ctx, ev, p.In, p.Run)
	return err
}

// unboundedOpen reports an open-loop run without a client concurrency bound. Its
// point's batch is only the engine's running cap (pointBatch), not requests
// resident together, so aiconfigurator's memory check of that many requests at
// full length, their prefills' activations at once, says nothing about it: the
// queueing tiers run the memory model's KV pool (refused only when one request
// does not fit) with the engine's preemption.
func unboundedOpen(run *queueing.FiniteRun) bool {
	return run != nil && run.Open && run.MaxConcurrency == 0
}

// isGap reports a perf-data miss another version's tables may cover (not a model
// family without an op list, which no version has).
func isGap(err error) bool {
	return refine.IsPerfDataGap(err) && !errors.Is(err, perfdb.ErrUnsupportedFamily)
}

// quantitativeOf evaluates in's quantitative tier under ev's own calibration:
// the benchmark run when run is set, else the steady state.
func quantitativeOf(ctx context.Context, ev refine.Evaluator, in store.PointInputs, run *queueing.FiniteRun) (store.Quantitative, error) {
	if re, ok := ev.(RunEvaluator); ok && run != nil {
		return re.QuantitativeRun(ctx, in, *run)
	}
	return ev.Quantitative(ctx, in)
}

func reasonOf(err error) string {
	s := oneLine(err.Error())
	switch {
	case errors.Is(err, perfdb.ErrUnsupportedFamily):
		return "model family not modelled: " + s
	case refine.IsPerfDataGap(err):
		return "no perf data for this point: " + s
	}
	return "not evaluated: " + s
}

func quantKeys(ctx context.Context, st *store.Store, ps []Prediction) (map[string]bool, error) {
	var keys []string
	for i := range ps {
		if ps[i].Reason == "" {
			keys = append(keys, ps[i].In.Key())
		}
	}
	have, err := st.QuantitativeKeys(ctx, keys)
	if err != nil {
		return nil, fmt.Errorf("look up stored predictions: %w", err)
	}
	return have, nil
}

func savePredictions(ctx context.Context, st *store.Store, ps []Prediction, calibration, evaluator, profile string) error {
	rows := make([]store.Prediction, len(ps))
	for i := range ps {
		p := &ps[i]
		// One prediction per measurement and calibration: the current evaluator's.
		rows[i] = store.Prediction{MeasurementID: p.Row.ID, Calibration: calibration, Evaluator: evaluator, PointKey: p.Key,
			ModelUsed: p.ModelUsed, VersionUsed: p.VersionUsed, VersionMapping: p.VersionMapping, EngineProfile: profile,
			Reason: p.Reason}
	}
	return st.SavePredictions(ctx, rows)
}

// resolveDisagg maps a disaggregated measurement onto the tandem point a sweep
// would store for it (refine.Enumerate's disagg rows, QUEUEING.md §6): the pools'
// workers and parallelism from the row's prefill_* / decode_* columns (pp and
// attention dp default to 1), the prefill per-worker batch (default 1, the
// generator's prefill max_batch_size), and the decode per-worker batch from the
// client concurrency, d_batch = concurrency / (d_workers · d_pp · d_dp) — the
// closed loop of refine's tandem runs at d_batch × d_workers × d_pp × d_dp, which
// must reproduce the measured concurrency exactly. The engines are the original
// rule's here (the backends' defaults capped at each pool's batch); the resolver's
// profile then records the deployed ones (Resolver.deployedPools). MoE layouts
// follow each pool's width with the decode pool's expert parallelism (the
// measurement keeps the decode pool's moe columns only). The resolver's assumed
// MTP (NextN, NextNAccepted) drafts on both pools, as refine's tandem runs it.
func (r *Resolver) resolveDisagg(t Target, model, version string, res refine.Resolved) Target {
	m := &t.Row.Measurement
	one := func(v int) int { return max(v, 1) }
	if m.PWorkers < 1 || m.DWorkers < 1 {
		t.Reason = "disaggregated deployment without its worker counts (prefill_num_workers / decode_num_workers not stated): the tandem needs them"
		return t
	}
	if m.PTP < 1 || m.DTP < 1 {
		t.Reason = "disaggregated deployment without its pools' tp (prefill_tp_size / decode_tp_size not stated)"
		return t
	}
	if m.Prefix > 0 {
		t.Reason = fmt.Sprintf("prefix %d: the disaggregated tandem does not model prefix caching yet", m.Prefix)
		return t
	}
	width := one(m.DWorkers) * one(m.DPP) * one(m.DDP)
	bd, why := r.pointBatch(m, version, width, "decode workers · pp · dp")
	if why != "" {
		t.Reason = why
		return t
	}
	// One expert-parallel size must lay out both pools (refine.PoolMoELayout
	// divides each pool's tp·dp by it); the measurement keeps the decode pool's.
	// Where it does not divide the prefill pool, the largest size dividing both
	// pools and the measured one stands in (documented approximation).
	ep := one(m.MoEEP)
	if pw, dw := m.PTP*one(m.PDP), m.DTP*one(m.DDP); pw%ep != 0 || dw%ep != 0 {
		ep = gcd(gcd(ep, pw), dw)
	}
	in := store.PointInputs{Model: model, System: m.System, Backend: m.Backend, Version: version, Mode: store.ModeDisagg,
		ISL: m.ISL, OSL: m.OSL, TP: m.DTP, PP: one(m.DPP), DP: one(m.DDP), MoETP: one(m.MoETP), MoEEP: ep,
		Batch: bd, MaxNumSeqs: bd,
		PWorkers: m.PWorkers, PBatch: one(m.PBatch), PTP: m.PTP, PPP: one(m.PPP), PDP: one(m.PDP),
		DWorkers: m.DWorkers, DBatch: bd, DTP: m.DTP, DPP: one(m.DPP), DDP: one(m.DDP),
		DatabaseMode: res.DatabaseMode, GemmQuant: res.GemmQuant, KVCacheQuant: res.KVCacheQuant,
		FMHAQuant: res.FMHAQuant, MoEQuant: res.MoEQuant, CommQuant: res.CommQuant, Evaluator: r.Ev.Name(),
		Deployed: store.DeployedAs(m.Version, version), NextN: r.NextN, NextNAccepted: r.NextNAccepted} // MTP: both pools (refine's disaggSetup)
	measuredQuant(&in, m, res)
	if err := in.Validate(); err != nil {
		t.Reason = err.Error()
		return t
	}
	t.In = in
	return t
}

// gcd is the greatest common divisor of a, b > 0.
func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
