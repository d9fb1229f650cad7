package refine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/engineconf"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
	"github.com/aicdb/aicdb/store"
)

// PerfSource is where the perfdb evaluator reads perf data and models: the store
// (StoreSource, the default) or an aiconfigurator directory tree (DirSource, for
// tests and benchmarks on ../shared data without an import).
type PerfSource interface {
	Systems(ctx context.Context) ([]string, error)
	Backends(ctx context.Context, system string) ([]string, error)
	Versions(ctx context.Context, system, backend string) ([]string, error)
	// Data loads the perf data; opts select the loading rules (perfdb.ForMode: EMPIRICAL
	// and SOL read the requested version only, as aiconfigurator does).
	Data(ctx context.Context, system, backend, version string, opts ...perfdb.LoadOption) (*perfdb.Data, error)
	// Model returns the model with id, or an error listing the known ids.
	Model(ctx context.Context, id string) (*perfdb.Model, error)
}

// StoreSource reads perf data and models from the store (after `aicdb init` or
// `aicdb perfdb import`).
type StoreSource struct{ St *store.Store }

// Systems implements PerfSource.
func (s StoreSource) Systems(ctx context.Context) ([]string, error) {
	return perfdb.ListSystems(ctx, s.St)
}

// Backends implements PerfSource.
func (s StoreSource) Backends(ctx context.Context, system string) ([]string, error) {
	return perfdb.ListBackends(ctx, s.St, system)
}

// Versions implements PerfSource.
func (s StoreSource) Versions(ctx context.Context, system, backend string) ([]string, error) {
	return perfdb.ListVersions(ctx, s.St, system, backend)
}

// Data implements PerfSource.
func (s StoreSource) Data(ctx context.Context, system, backend, version string, opts ...perfdb.LoadOption) (*perfdb.Data, error) {
	return perfdb.LoadStore(ctx, s.St, system, backend, version, opts...)
}

// GPUMemBytes returns one GPU's memory capacity on system from the store's
// system spec (gpu.mem_capacity), without loading its perf data.
func (s StoreSource) GPUMemBytes(ctx context.Context, system string) (float64, error) {
	r, err := s.St.System(ctx, system)
	if err != nil {
		return 0, fmt.Errorf("store: read system %s: %w", system, err)
	}
	return r.MemCapacity, nil
}

// Model implements PerfSource: perfdb.LoadModel (an unknown id is an error
// listing the stored ones).
func (s StoreSource) Model(ctx context.Context, id string) (*perfdb.Model, error) {
	return perfdb.LoadModel(ctx, s.St, id)
}

// DirSource reads an aiconfigurator systems directory and a model_configs
// directory of <org>--<name>_config.json files.
type DirSource struct{ SystemsDir, ModelsDir string }

// Systems implements PerfSource.
func (s DirSource) Systems(context.Context) ([]string, error) {
	return perfdb.ListSystemsDir(s.SystemsDir)
}

// Backends implements PerfSource.
func (s DirSource) Backends(_ context.Context, system string) ([]string, error) {
	return perfdb.ListBackendsDir(s.SystemsDir, system)
}

// Versions implements PerfSource.
func (s DirSource) Versions(_ context.Context, system, backend string) ([]string, error) {
	return perfdb.ListVersionsDir(s.SystemsDir, system, backend)
}

// Data implements PerfSource.
func (s DirSource) Data(ctx context.Context, system, backend, version string, opts ...perfdb.LoadOption) (*perfdb.Data, error) {
	return perfdb.LoadDir(ctx, s.SystemsDir, system, backend, version, opts...)
}

// Model implements PerfSource.
func (s DirSource) Model(_ context.Context, id string) (*perfdb.Model, error) {
	base := filepath.Join(s.ModelsDir, strings.ReplaceAll(id, "/", "--"))
	cfg, err := os.ReadFile(base + "_config.json")
	if err != nil {
		return nil, fmt.Errorf("--model %q: no %s_config.json in %s", id, strings.ReplaceAll(id, "/", "--"), s.ModelsDir)
	}
	q, _ := os.ReadFile(base + "_hf_quant_config.json")
	return perfdb.ParseHFConfig(id, base+"_config.json", cfg, q)
}

// PerfdbEvaluator is the real evaluator: legacy estimates from perfdb (agg: run_agg;
// disagg: composed from static numbers, PERFDB.md §2.4), the screening and
// quantitative tiers from queueing (agg) or the disagg tandem (disagg rows, each
// pool at its own parallelism) over perfdb.PassTiming. Perf data, models and
// estimators are loaded once per key and shared (all are safe for concurrent use).
type PerfdbEvaluator struct {
	src PerfSource

	// cal, when set, calibrates the points it covers (SetCalibrator).
	cal Calibrator

	mu       sync.Mutex
	data     map[[4]string]*perfdb.Data
	queriers map[querierKey]*perfdb.Querier
	models   map[string]*perfdb.Model
	ests     map[estKey]*estEntry
	quants   map[quantKey]*quantEntry

	// simulations counts agg quantitative-tier calendar runs (queueing.Quantitative);
	// tests read it to check that an identical input is reused (quantKey).
	simulations atomic.Int64
}

// estKey is every input of one worker's estimator and pass timing: the model and
// system as well as the full perfdb.Config (backend, version, parallelism, quant
// modes, MTP, database mode). The builder (buildEstimator) reads nothing but the
// key, so two workers that differ in anything that changes the numbers can never
// share an entry (issue 8: a Config-only key let Qwen3-32B rows be priced with
// Llama-3.1-8B's estimator).
type estKey struct {
	Model, System string
	Cfg           perfdb.Config
}

// querierKey: one shared Querier per data set and database mode (building one
// costs ~0.1–0.4 s; an estimator on it microseconds).
type querierKey struct {
	data [3]string
	mode perfdb.DatabaseMode
}

type estEntry struct {
	once sync.Once
	e    *perfdb.Estimator
	pt   *perfdb.PassTiming
	err  error
}

// NewPerfdbEvaluator returns an evaluator over the perf data and models of src.
func NewPerfdbEvaluator(src PerfSource) *PerfdbEvaluator {
	return &PerfdbEvaluator{src: src, data: map[[4]string]*perfdb.Data{}, queriers: map[querierKey]*perfdb.Querier{},
		models: map[string]*perfdb.Model{}, ests: map[estKey]*estEntry{}, quants: map[quantKey]*quantEntry{}}
}

// Name implements Evaluator: "perfdb-3+kv+q<fingerprint>" (2: passes priced on
// monotone kernel curves, perfdb.Querier.Monotone; 3: a drafting worker's KV
// pool holds its drafter's layer, perfdb's drafter). Bump the number when
// the perfdb side of the numbers changes; the queueing side is fingerprinted
// automatically (queueingFingerprint), so a change of the queueing model gives new
// row keys and Sweep replaces the stale rows instead of reusing them. "+kv": agg
// points are evaluated with the memory model's KV pool (planKV), so rows of the
// evaluator that assumed an unbounded pool are replaced.
func (p *PerfdbEvaluator) Name() string {
	if p.cal != nil {
		return "perfdb-3+kv+q" + modelFingerprint() + "+cal:" + p.cal.Name()
	}
	return "perfdb-3+kv+q" + modelFingerprint()
}

// SetCalibrator makes the evaluator apply c to the points it covers (call before
// the evaluator is used; nil = uncalibrated). The calibration's name goes into
// Name, so calibrated rows get their own keys.
func (p *PerfdbEvaluator) SetCalibrator(c Calibrator) { p.cal = c }

// adjustment returns the calibration of in (identity when none covers it).
func (p *PerfdbEvaluator) adjustment(in store.PointInputs) PassAdjust {
	if p.cal == nil {
		return Identity()
	}
	if a, ok := p.cal.For(in); ok {
		return a
	}
	return Identity()
}

// queueingFingerprint hashes both tiers of the queueing model at fixed probe points
// (each backend, synthetic linear timing): any change of their numbers changes it.
// Computed once per process (~ms), deterministic.
var queueingFingerprint = sync.OnceValue(func() string {
	h := sha256.New()
	t := timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.1, CtxMsPerToken: 0.0001}
	for _, backend := range []engine.Backend{engine.VLLM, engine.TRTLLM, engine.SGLang} {
		in := store.PointInputs{Backend: string(backend), ISL: 2048, OSL: 64, Prefix: 256, Batch: 8, CtxTokens: 4096}
		e, err := pointEngine(in)
		if err != nil {
			fmt.Fprintf(h, "%s: %v;", backend, err)
			continue
		}
		w := workload.Spec{ISL: in.ISL, OSL: in.OSL, Prefix: in.Prefix, Concurrency: in.Batch}
		for _, eval := range []func() (*queueing.Report, error){
			func() (*queueing.Report, error) { return queueing.Screening(w, e, t) },
			func() (*queueing.Report, error) { return queueing.Quantitative(context.Background(), w, e, t) },
			// Measured rows are predicted as finite runs (perfdb_finite.go): their
			// semantics must rename the evaluator too.
			func() (*queueing.Report, error) {
				return queueing.QuantitativeFinite(context.Background(), w, e, t, queueing.DefaultOptions(), queueing.FiniteRun{Requests: 3 * w.Concurrency})
			},
			// Open-loop measured runs (finite_open.go): Poisson sends under a
			// client concurrency bound, two paths.
			func() (*queueing.Report, error) {
				return queueing.QuantitativeFinite(context.Background(), w, e, t, queueing.DefaultOptions(),
					queueing.FiniteRun{Requests: 3 * w.Concurrency, Open: true, RateRPS: 8, MaxConcurrency: w.Concurrency / 2, Paths: 2})
			},
			func() (*queueing.Report, error) {
				// Gamma sends (burstiness ½): the strata cost ~2 ms to build and do not
				// depend on the backend, so one backend probes them.
				if backend != engine.VLLM {
					return nil, errSkipProbe
				}
				return queueing.QuantitativeFinite(context.Background(), w, e, t, queueing.DefaultOptions(),
					queueing.FiniteRun{Requests: 3 * w.Concurrency, Open: true, RateRPS: 8, GammaShape: 0.5})
			},
		} {
			r, err := eval()
			if errors.Is(err, errSkipProbe) {
				continue
			}
			if err != nil {
				fmt.Fprintf(h, "%s: %v;", backend, err)
				continue
			}
			b, _ := json.Marshal(r.Columns(1)) // map keys are sorted: stable
			h.Write(b)
		}
		// KV pressure: half the pool C requests at full length need (the
		// calendars' preemption and retraction, QUEUEING.md §3).
		if e.Traits().AdmissionReservesKV { // T-R1 reserves; pressure needs T-R2
			e.CapacityPolicy = engine.PolicyMaxUtilization
		}
		e.KVCapacityTokens = in.Batch * (in.ISL + in.OSL) / 2
		w.Prefix = 0
		if r, err := queueing.Quantitative(context.Background(), w, e, t); err != nil {
			fmt.Fprintf(h, "%s kv: %v;", backend, err)
		} else {
			fmt.Fprintf(h, "%s kv: %v %v;", backend, r.KVUtilPeak, r.PreemptionsPerRequest)
			b, _ := json.Marshal(r.Columns(1))
			h.Write(b)
		}
	}
	// The scheduler-state cycle window (queueing/statecycle.go): a KV-tight vLLM loop
	// (16 clients, pool 90 % of their full length) whose state repeats every 1501
	// passes while no generation repeats.
	sc := store.PointInputs{Backend: string(engine.VLLM), ISL: 512, OSL: 64, Batch: 16, CtxTokens: 4096}
	if e, err := pointEngine(sc); err != nil {
		fmt.Fprintf(h, "state cycle: %v;", err)
	} else {
		e.KVCapacityTokens = sc.Batch * (sc.ISL + sc.OSL) * 9 / 10
		w := workload.Spec{ISL: sc.ISL, OSL: sc.OSL, Concurrency: sc.Batch}
		if r, err := queueing.QuantitativeWith(context.Background(), w, e, t, queueing.Options{ClientRTTMs: 1}); err != nil {
			fmt.Fprintf(h, "state cycle: %v;", err)
		} else {
			b, _ := json.Marshal(r.Columns(1))
			h.Write(b)
		}
	}
	for _, pr := range ruleProbes {
		e, err := engine.Defaults(pr.backend, "")
		var r *queueing.Report
		if err == nil {
			pr.set(&e)
			if pr.requests > 0 {
				r, err = queueing.QuantitativeFinite(context.Background(), pr.w, e, t, queueing.Options{ClientRTTMs: pr.rttMs}, queueing.FiniteRun{Requests: pr.requests})
			} else {
				r, err = queueing.QuantitativeWith(context.Background(), pr.w, e, t, queueing.Options{ClientRTTMs: pr.rttMs})
			}
		}
		if err != nil {
			fmt.Fprintf(h, "%s: %v;", pr.name, err)
			continue
		}
		b, _ := json.Marshal(r.Columns(1))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:8]
})

// errSkipProbe marks a fingerprint probe that does not apply to a backend.
var errSkipProbe = errors.New("probe skipped")

// ruleProbe is an engine-rule corner the queueing fingerprint evaluates, so that
// a change of that rule renames the evaluator: the backend's defaults adjusted by
// set, the workload w, and a finite run of requests (0: the steady state) under
// the client round trip rttMs.
type ruleProbe struct {
	name     string
	backend  engine.Backend
	set      func(e *engine.Spec)
	w        workload.Spec
	requests int
	rttMs    float64
}

// ruleProbes are the corners the oracle gate pins (stop 21).
var ruleProbes = []ruleProbe{
	// TensorRT-LLM's running cap and a GUARANTEED_NO_EVICT pool binding under the
	// overlap executor, replacements at the completion instant: a waiting request
	// takes the seat, and the never-written last block, of one whose final token
	// is in flight (T-R1; TestTRTOverlapFinalTokenKV).
	{name: "trtllm seats", backend: engine.TRTLLM, w: workload.Spec{ISL: 18, OSL: 15, Concurrency: 3}, set: func(e *engine.Spec) {
		e.AsyncScheduling, e.EnableChunkedPrefill = true, false
		e.MaxNumTokens, e.MaxBatchSize, e.KVCapacityTokens = 256, 2, 2*64
	}},
	// SGLang's on_idle under the overlap loop, a binding pool and idle gaps between
	// requests: new_token_ratio resets only with no batch in flight (§3.2;
	// TestSGLangOnIdleAgainstDES).
	{name: "sglang idle", backend: engine.SGLang, w: workload.Spec{ISL: 16, OSL: 10, Concurrency: 2}, requests: 43, rttMs: 7.5, set: func(e *engine.Spec) {
		e.AsyncScheduling, e.EnableMixedChunk = true, false
		e.ChunkedPrefillSize, e.MaxPrefillTokens, e.MaxNumSeqs, e.BlockSize, e.KVCapacityTokens = 256, 256, 2, 16, 64
	}},
	// TensorRT-LLM max_utilization under the overlap executor with one-token
	// outputs: a request whose last token is in flight is never paused (T-R2;
	// TestTRTMaxUtilFinalTokenNotPaused).
	{name: "trtllm max_utilization", backend: engine.TRTLLM,
		w: workload.Spec{ISL: 30, OSL: 4, Concurrency: 3, ISLQuantiles: []int{16, 30}, OSLQuantiles: []int{1, 4}}, set: func(e *engine.Spec) {
			e.AsyncScheduling, e.CapacityPolicy = true, engine.PolicyMaxUtilization
			e.MaxNumTokens, e.MaxBatchSize, e.KVCapacityTokens = 256, 3, 2*64
		}},
	// TensorRT-LLM chunked context over a reused prefix: the first chunk moves past
	// it and keeps its size (T-R5, setPrepopulatedPromptLen; TestTRTReusedPrefixMovesChunk).
	{name: "trtllm reuse", backend: engine.TRTLLM, w: workload.Spec{ISL: 5000, OSL: 8, Prefix: 2048, Concurrency: 2}, set: func(e *engine.Spec) {
		e.EnableChunkedPrefill, e.MaxNumTokens = true, 4096
	}},
}

// loadData loads (once) the perf data of (system, backend, version) as database
// mode sees it: the shared layer only where aiconfigurator applies it.
func (p *PerfdbEvaluator) loadData(ctx context.Context, system, backend, version string, mode perfdb.DatabaseMode) (*perfdb.Data, error) {
	shared := "shared"
	if !perfdb.SharedLayerEnabled(mode) {
		shared = "own"
	}
	k := [4]string{system, backend, version, shared}
	p.mu.Lock()
	defer p.mu.Unlock()
	if d, ok := p.data[k]; ok {
		return d, nil
	}
	d, err := p.src.Data(ctx, system, backend, version, perfdb.ForMode(mode))
	if err != nil {
		return nil, err
	}
	p.data[k] = d
	return d, nil
}

// gpuMemReader is a perf source that reads a system's GPU memory from its system
// spec alone, without loading the perf data.
type gpuMemReader interface {
	GPUMemBytes(ctx context.Context, system string) (float64, error)
}

// GPUMemBytes returns one GPU's memory capacity on system (the system spec's
// gpu.mem_capacity): from the source's system spec when it reads one alone (the
// store), so a sweep with nothing to evaluate loads no perf data; otherwise from
// the perf data.
func (p *PerfdbEvaluator) GPUMemBytes(ctx context.Context, system, backend, version string) (float64, error) {
	if g, ok := p.src.(gpuMemReader); ok {
		return g.GPUMemBytes(ctx, system)
	}
	d, err := p.loadData(ctx, system, backend, version, perfdb.ModeSilicon)
	if err != nil {
		return 0, err
	}
	return d.System.MemCapacity, nil
}

func (p *PerfdbEvaluator) loadModel(ctx context.Context, id string) (*perfdb.Model, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.models[id]; ok {
		return m, nil
	}
	m, err := p.src.Model(ctx, id)
	if err != nil {
		return nil, err
	}
	p.models[id] = m
	return m, nil
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none (run 'aicdb init')"
	}
	return strings.Join(s, ", ")
}

// Resolve implements Evaluator.
func (p *PerfdbEvaluator) Resolve(ctx context.Context, model, system, backend, version string) (Resolved, error) {
	systems, err := p.src.Systems(ctx)
	if err != nil {
		return Resolved{}, err
	}
	if !slices.Contains(systems, system) {
		return Resolved{}, fmt.Errorf("--system %q is not in the store: known systems are %s", system, listOrNone(systems))
	}
	backends, err := p.src.Backends(ctx, system)
	if err != nil {
		return Resolved{}, err
	}
	if !slices.Contains(backends, backend) {
		return Resolved{}, fmt.Errorf("--backend %q has no perf data for %s: known backends are %s", backend, system, listOrNone(backends))
	}
	versions, err := p.src.Versions(ctx, system, backend)
	if err != nil {
		return Resolved{}, err
	}
	if version == "" {
		vs := slices.Clone(versions)
		slices.SortFunc(vs, perfdb.CompareVersions)
		if len(vs) == 0 {
			return Resolved{}, fmt.Errorf("--backend %s on %s has no versions in the store", backend, system)
		}
		version = vs[len(vs)-1]
	} else if !slices.Contains(versions, version) {
		return Resolved{}, fmt.Errorf("--version %q of %s on %s is not in the store: known versions are %s", version, backend, system, listOrNone(versions))
	}
	m, err := p.loadModel(ctx, model)
	if err != nil {
		return Resolved{}, err
	}
	if m.Family == "" {
		return Resolved{}, fmt.Errorf("--model %s: architecture %s is not supported yet", model, m.Architecture)
	}
	// ResolveQuant reads the perf data only for nvfp4 checkpoints (the system's SM
	// version) and for a non-bf16 fmha off vLLM (the attention table's slices);
	// otherwise skip loading it, so a repeated sweep with nothing to evaluate stays
	// cheap.
	d := &perfdb.Data{System: &perfdb.System{SMVersion: 100}}
	if m.GemmQuant == string(perfdb.GemmNVFP4) || m.MoEQuant == string(perfdb.MoENVFP4) ||
		(backend != "vllm" && m.FMHAQuant != string(perfdb.FMHABF16)) {
		if d, err = p.loadData(ctx, system, backend, version, perfdb.ModeSilicon); err != nil {
			return Resolved{}, err
		}
	}
	cfg := perfdb.ResolveQuant(d, m, perfdb.Config{Backend: backend, Version: version, TP: 1, PP: 1, DP: 1, MoETP: 1, MoEEP: 1}, true)
	return resolved(version, m, cfg), nil
}

// resolved is Resolve's answer for model m at version under the resolved
// quantisation cfg (silicon data); its quant columns come from QuantInputs.
func resolved(version string, m *perfdb.Model, cfg perfdb.Config) Resolved {
	q := QuantInputs(cfg)
	return Resolved{Version: version, Heads: m.Heads, KVHeads: m.KVHeads, MoE: m.NumExperts > 0, MaxPos: m.MaxPos,
		DatabaseMode: string(perfdb.ModeSilicon), GemmQuant: q.GemmQuant, KVCacheQuant: q.KVCacheQuant,
		FMHAQuant: q.FMHAQuant, MoEQuant: q.MoEQuant, CommQuant: q.CommQuant}
}

// estimator returns the (cached) estimator and pass timing of one worker of in.
func (p *PerfdbEvaluator) estimator(ctx context.Context, in store.PointInputs, tp, pp, dp, moeTP, moeEP int) (*perfdb.Estimator, *perfdb.PassTiming, error) {
	cfg, err := WorkerConfig(in, Worker{TP: tp, PP: pp, DP: dp, MoETP: moeTP, MoEEP: moeEP})
	if err != nil {
		return nil, nil, err
	}
	k := estKey{Model: in.Model, System: in.System, Cfg: cfg}
	p.mu.Lock()
	ent, ok := p.ests[k]
	if !ok {
		ent = &estEntry{}
		p.ests[k] = ent
	}
	p.mu.Unlock()
	ent.once.Do(func() { ent.e, ent.pt, ent.err = p.buildEstimator(ctx, k) })
	return ent.e, ent.pt, ent.err
}

// buildEstimator builds the estimator and pass timing of k from k alone (the
// cache key is the builder's only input).
func (p *PerfdbEvaluator) buildEstimator(ctx context.Context, k estKey) (*perfdb.Estimator, *perfdb.PassTiming, error) {
	d, err := p.loadData(ctx, k.System, k.Cfg.Backend, k.Cfg.Version, k.Cfg.Mode)
	if err != nil {
		return nil, nil, err
	}
	m, err := p.loadModel(ctx, k.Model)
	if err != nil {
		return nil, nil, err
	}
	q, err := p.querier(k.System, k.Cfg.Backend, k.Cfg.Version, d, k.Cfg.Mode)
	if err != nil {
		return nil, nil, err
	}
	return WorkerTiming(q, d, m, k.Cfg)
}

// Worker is the parallelism of one worker (an agg replica or one disagg pool's
// worker).
type Worker struct{ TP, PP, DP, MoETP, MoEEP int }

// WorkerConfig is the one builder of a worker's perfdb.Config: the point's
// backend, version, database mode, quant modes (empty = from the model, resolved
// by the estimator) and MTP draft tokens at parallelism w. The sweep evaluator,
// `aicdb eval`, `estimate` and `trace replay` all price through it, so a point
// priced on the command line and the same point in a sweep get the same Config.
func WorkerConfig(in store.PointInputs, w Worker) (perfdb.Config, error) {
	mode, err := perfdb.ParseDatabaseMode(in.DatabaseMode)
	if err != nil {
		return perfdb.Config{}, err
	}
	return perfdb.Config{Backend: in.Backend, Version: in.Version,
		TP: w.TP, PP: w.PP, DP: w.DP, MoETP: w.MoETP, MoEEP: w.MoEEP, Nextn: in.NextN, SeparateDrafter: separateDrafter(in),
		GemmQuant: perfdb.GemmQuant(in.GemmQuant), KVQuant: perfdb.KVQuant(in.KVCacheQuant),
		FMHAQuant: perfdb.FMHAQuant(in.FMHAQuant), MoEQuant: perfdb.MoEQuant(in.MoEQuant),
		CommQuant: perfdb.CommQuant(in.CommQuant), Mode: mode}, nil
}

// separateDrafter reports a point with drafts whose recorded engine proposes
// them with a separate drafter (engineconf.Resolved.Drafter: an EAGLE / EAGLE3
// head). A record that does not decode reports false: its error comes when
// the engine is resolved.
func separateDrafter(in store.PointInputs) bool {
	// Only a recorded drafter method names one: MTP rows (most drafted rows)
	// skip decoding their engine, ~5 µs per priced worker.
	if in.NextN == 0 || !strings.Contains(in.Engine, `"draft_method"`) {
		return false
	}
	r, ok, err := engineconf.DecodeResolved(in.Engine)
	return err == nil && ok && r.Drafter() != nil
}

// QuantInputs is cfg's quantisation as a point's quant columns (every other
// field zero): the one conversion from perfdb.Config's quant modes to the
// strings a point, a calibration key (store.QuantLabel) and Resolved carry, and
// the inverse of WorkerConfig's, which reads them back (TestQuantInputsRoundTrip
// fails when a quant mode is added to one side only).
func QuantInputs(cfg perfdb.Config) store.PointInputs {
	return store.PointInputs{GemmQuant: string(cfg.GemmQuant), KVCacheQuant: string(cfg.KVQuant),
		FMHAQuant: string(cfg.FMHAQuant), MoEQuant: string(cfg.MoEQuant), CommQuant: string(cfg.CommQuant)}
}

// WorkerTiming builds the estimator and pass timing of cfg (from WorkerConfig)
// for model m on the perf data d; q is a querier shared across workers of the
// same data and mode, or nil to build one for cfg.Mode.
func WorkerTiming(q *perfdb.Querier, d *perfdb.Data, m *perfdb.Model, cfg perfdb.Config) (*perfdb.Estimator, *perfdb.PassTiming, error) {
	if cfg.Nextn > 0 && !cfg.SeparateDrafter && m.MTPLayers() == 0 {
		hint := ""
		switch cfg.Backend {
		case "vllm":
			hint = ", or draft with an EAGLE / EAGLE3 head (eval or sweep --engine-config: speculative_config method eagle3, model and num_speculative_tokens)"
		case "sglang":
			hint = ", or draft with an EAGLE / EAGLE3 head (eval or sweep --engine-config: --speculative-algorithm EAGLE3 --speculative-draft-model-path HEAD --speculative-num-steps N)"
		case "trtllm":
			hint = ", or draft with an EAGLE3 head (eval or sweep --engine-config: speculative_config decoding_type Eagle, max_draft_len and speculative_model_dir)"
		}
		return nil, nil, fmt.Errorf("--nextn %d: %s has no MTP layers (its config names no num_nextn_predict_layers, mtp_num_hidden_layers or num_mtp_modules), so it cannot run MTP / NEXTN speculative decoding; drop --nextn%s", cfg.Nextn, m.ID, hint)
	}
	var e *perfdb.Estimator
	var err error
	if q == nil {
		e, err = perfdb.NewEstimator(d, m, cfg)
	} else {
		e, err = perfdb.NewEstimatorWith(q, d, m, cfg)
	}
	if err != nil {
		return nil, nil, err
	}
	pt, err := perfdb.NewPassTiming(e)
	return e, pt, err
}

func (p *PerfdbEvaluator) querier(system, backend, version string, d *perfdb.Data, mode perfdb.DatabaseMode) (*perfdb.Querier, error) {
	k := querierKey{[3]string{system, backend, version}, mode}
	p.mu.Lock()
	defer p.mu.Unlock()
	if q, ok := p.queriers[k]; ok {
		return q, nil
	}
	q, err := perfdb.NewQuerier(d, mode)
	if err != nil {
		return nil, err
	}
	p.queriers[k] = q
	return q, nil
}

// Legacy implements Evaluator.
func (p *PerfdbEvaluator) Legacy(ctx context.Context, in store.PointInputs) (store.Legacy, error) {
	if in.Mode == store.ModeDisagg {
		pmTP, pmEP, err := p.poolMoE(ctx, in, in.PTP, in.PDP)
		if err != nil {
			return store.Legacy{}, err
		}
		dmTP, dmEP, err := p.poolMoE(ctx, in, in.DTP, in.DDP)
		if err != nil {
			return store.Legacy{}, err
		}
		pre, _, err := p.estimator(ctx, in, in.PTP, in.PPP, in.PDP, pmTP, pmEP)
		if err != nil {
			return store.Legacy{}, err
		}
		dec, _, err := p.estimator(ctx, in, in.DTP, in.DPP, in.DDP, dmTP, dmEP)
		if err != nil {
			return store.Legacy{}, err
		}
		di := perfdb.DisaggInput{ISL: in.ISL, OSL: in.OSL, Prefix: in.Prefix,
			PrefillBatch: in.PBatch, PrefillWorkers: in.PWorkers, DecodeBatch: in.DBatch, DecodeWorkers: in.DWorkers}
		if in.NextN > 0 { // the decode summary's MTP projection: 1 + accepted tokens per iteration
			di.DecodeTokensPerIter = 1 + in.NextNAccepted
		}
		r, err := perfdb.Disagg(pre, dec, di)
		if errors.Is(err, perfdb.ErrOOM) {
			return store.Legacy{OOM: true, Concurrency: in.DBatch * in.DWorkers}, nil
		}
		if err != nil {
			return store.Legacy{}, err
		}
		return legacyRow(in, r.TTFTMs, r.TPOTMs, r.RequestMs, in.DBatch*in.DWorkers*in.DPP*in.DDP, r.Throughput)
	}
	e, _, err := p.estimator(ctx, in, in.TP, in.PP, in.DP, in.MoETP, in.MoEEP)
	if err != nil {
		return store.Legacy{}, err
	}
	ai := perfdb.AggInput{Batch: in.Batch, CtxTokens: in.CtxTokens, ISL: in.ISL, OSL: in.OSL, Prefix: in.Prefix}
	if in.NextN > 0 { // run_agg's MTP: (osl − 1)/(1 + accepted) decode iterations
		ai.DecodeTokensPerIter = 1 + in.NextNAccepted
	}
	r, err := e.Agg(ai)
	if errors.Is(err, perfdb.ErrOOM) {
		return store.Legacy{OOM: true, Concurrency: in.Batch * in.PP * in.DP}, nil
	}
	if err != nil {
		return store.Legacy{}, err
	}
	return legacyRow(in, r.TTFTMs, r.TPOTMs, r.RequestMs, r.Concurrency, r.Throughput)
}

// poolMoE returns the MoE layout of one disaggregated pool with attention width
// tp·dp. A disagg row's moe_tp/moe_ep columns describe the decode pool (like its tp
// and batch); each pool keeps the row's expert-parallel degree moe_ep and takes
// moe_tp = tp·dp / moe_ep, so both pools satisfy aiconfigurator's MoE invariant
// tp·dp = moe_tp·moe_ep (PERFDB.md §2.1, Attention-DP). Dense models keep the row's
// values (1, 1).
func (p *PerfdbEvaluator) poolMoE(ctx context.Context, in store.PointInputs, tp, dp int) (int, int, error) {
	m, err := p.loadModel(ctx, in.Model)
	if err != nil {
		return 0, 0, err
	}
	if m.NumExperts == 0 {
		return in.MoETP, in.MoEEP, nil
	}
	return PoolMoELayout(tp, dp, in.MoEEP)
}

// PoolMoELayout is a disaggregated MoE pool's expert split (tp·dp / moeEP,
// moeEP), the same expert-parallel size in both pools, or an error when moeEP does not divide
// the pool's width (Enumerate never emits such a row).
func PoolMoELayout(tp, dp, moeEP int) (int, int, error) {
	if moeEP <= 0 || (tp*dp)%moeEP != 0 {
		return 0, 0, fmt.Errorf("disagg pool tp %d × dp %d: moe_ep %d does not divide it", tp, dp, moeEP)
	}
	return tp * dp / moeEP, moeEP, nil
}

// legacyRow maps a perfdb row onto the legacy columns: tokens/s = tokens/s/gpu ×
// GPUs of one replica, seq/s/gpu = seq/s ÷ GPUs, request_rate = seq/s.
func legacyRow(in store.PointInputs, ttft, tpot, req float64, conc int, t perfdb.Throughput) (store.Legacy, error) {
	g := float64(in.NumGPUs())
	l := store.Legacy{Concurrency: conc, TTFT: ttft, TPOT: tpot, RequestLatency: req, RequestRate: t.SeqPerS,
		SeqPerS: t.SeqPerS, SeqPerSPerGPU: t.SeqPerS / g, TokensPerS: t.TokensPerSPerGPU * g,
		TokensPerSPerGPU: t.TokensPerSPerGPU, TokensPerSPerUser: t.TokensPerSPerUser, MemoryGiB: t.MemoryGiB}
	for _, v := range []float64{ttft, tpot, req, t.SeqPerS, t.TokensPerSPerGPU, t.TokensPerSPerUser, t.MemoryGiB} {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return store.Legacy{}, fmt.Errorf("legacy estimate of %s is not finite", in.Parallel())
		}
	}
	return l, nil
}

// pointEngine builds the queueing engine of an agg point from the backend's defaults
// (SCHEDULERS.md §6) with the point's knobs: the per-pass token budget
// max_num_batched_tokens (V-R1 max_num_batched_tokens, T-R1 max_num_tokens, S-R1
// chunked_prefill_size; the sweep sets ctx_tokens + batch) and the running cap
// max_num_seqs (V-R2 max_num_seqs, T-R1 max_batch_size, S-R2 max_running_requests;
// the sweep sets batch). Chunked prefill is on when asked or when a prompt would not
// fit the budget (queueing.FirstPassTokens). A point that recorded its engine (resolveEngines) runs that one.
func pointEngine(in store.PointInputs) (engine.Spec, error) {
	e, err := pointEngineKnobs(in)
	// MTP is the point's (its draft length also prices each decode row,
	// WorkerConfig): the engine schedules its drafts and their acceptance.
	e.SetDrafts(in.NextN, in.NextNAccepted)
	if err == nil && in.NextN > 0 {
		err = e.Validate()
	}
	if in.DP > 1 && e.Backend == engine.TRTLLM {
		// TensorRT-LLM skips batch waiting under attention DP (T-R6: _schedule
		// calls _waiting_requests only without enable_attention_dp).
		e.BatchWaitTimeoutIters, e.BatchWaitMaxTokensRatio = 0, 0
	}
	return e, err
}

// pointEngineKnobs is the point's engine as recorded, or as the sweep's rule
// derives it from the inputs.
func pointEngineKnobs(in store.PointInputs) (engine.Spec, error) {
	if e, ok, err := recordedEngine(in); ok || err != nil {
		return e, err
	}
	e, err := engine.Defaults(in.Backend, in.Version)
	if err != nil {
		return e, err
	}
	budget := in.MaxNumBatchedTokens
	if budget <= 0 {
		budget = in.CtxTokens + in.Batch
	}
	seqs := in.MaxNumSeqs
	if seqs <= 0 {
		seqs = in.Batch
	}
	chunked := in.ChunkedPrefill || budget < queueing.FirstPassTokens(e, in.ISL, in.Prefix)
	e.SetTokenBudget(budget)
	e.SetSeatCap(seqs)
	e.EnableChunkedPrefill = chunked
	return e, nil
}

// setupBase builds one agg evaluation without a KV pool: the workload, the
// point's engine (as recorded or derived) and the (calibrated) timing.
func (p *PerfdbEvaluator) setupBase(ctx context.Context, in store.PointInputs, adj PassAdjust) (workload.Spec, engine.Spec, timing.Timing, *perfdb.PassTiming, error) {
	w := workload.Spec{ISL: in.ISL, OSL: in.OSL, Prefix: in.Prefix, Concurrency: in.Batch}
	_, pt, err := p.estimator(ctx, in, in.TP, in.PP, in.DP, in.MoETP, in.MoEEP)
	if err != nil {
		return w, engine.Spec{}, nil, nil, err
	}
	e, err := pointEngine(in)
	tm := adj.Apply(&e, pt) // before e is returned: Apply sets e.StageMs
	return w, e, tm, pt, err
}

// setup is setupBase with the engine's KV pool from the memory model (planKV).
func (p *PerfdbEvaluator) setup(ctx context.Context, in store.PointInputs, adj PassAdjust) (workload.Spec, engine.Spec, timing.Timing, *perfdb.PassTiming, kvPlan, error) {
	w, e, tm, t, err := p.setupBase(ctx, in, adj)
	if err != nil {
		return w, e, tm, t, kvPlan{}, err
	}
	k, err := planKV(t, in, &e)
	if err != nil {
		return w, e, tm, t, k, fmt.Errorf("%s %s b%d: %w", in.Mode, in.Parallel(), in.Batch, err)
	}
	return w, e, tm, t, k, nil
}

// Screen implements Evaluator (agg points: the calendar's closed form; disagg rows:
// the tandem's, refine/disagg.go).
func (p *PerfdbEvaluator) Screen(ctx context.Context, in store.PointInputs) (store.Queueing, error) {
	return p.ScreenAdjusted(ctx, in, p.adjustment(in))
}

// ScreenAdjusted is Screen under an explicit calibration (the fit's Jacobian).
func (p *PerfdbEvaluator) ScreenAdjusted(ctx context.Context, in store.PointInputs, adj PassAdjust) (store.Queueing, error) {
	if in.Mode == store.ModeDisagg {
		return p.screenDisagg(ctx, in, adj)
	}
	if err := adj.Validate(); err != nil {
		return store.Queueing{}, err
	}
	w, e, tm, _, k, err := p.setup(ctx, in, adj)
	if err != nil {
		return store.Queueing{}, err
	}
	r, err := queueing.Screening(w, k.screeningEngine(e), tm)
	if err != nil {
		return store.Queueing{}, err
	}
	kv, certain := k.screening()
	q := store.Queueing{Valid: true, Tier: string(r.Tier), Fidelity: string(r.Fidelity), HasBracket: true,
		P99Lo: r.TTFTSteadyP99Lo, P99Hi: r.TTFTSteadyP99Hi, HiCertain: r.Diagnostics.BracketCertain && certain, KV: kv}
	if err := fillColumns(&q.V, r); err != nil {
		return store.Queueing{}, err
	}
	return q, nil
}

// fillColumns copies the report's flat column map (queueing.Report.Columns, the
// eval JSON keys) into v.
func fillColumns(v *[store.NumQ]float64, r *queueing.Report) error {
	cols := r.Columns(1)
	for i, name := range store.QueueingColumns {
		x, ok := cols[name].(float64)
		if !ok {
			return fmt.Errorf("queueing report: column %s missing", name)
		}
		v[i] = x
	}
	return nil
}

// Quantitative implements Evaluator. An agg point whose queueing inputs (quantKey)
// equal those of a point already evaluated by this evaluator gets that result
// without a new calendar run: rows that differ only in what the queueing tier does
// not read (ctx_tokens under a recorded engine that does not derive its budget
// from it: the aiconfigurator profile's batch + isl + 1500) share one simulation.
func (p *PerfdbEvaluator) Quantitative(ctx context.Context, in store.PointInputs) (store.Quantitative, error) {
	return p.quantitative(ctx, in, p.adjustment(in), true)
}

// QuantitativeAdjusted is Quantitative under an explicit calibration (the fit in
// refine/calibrate tries candidate adjustments through it). It does not reuse
// results: a fit's candidate adjustments rarely repeat, and keeping every
// candidate's result would grow without bound.
func (p *PerfdbEvaluator) QuantitativeAdjusted(ctx context.Context, in store.PointInputs, adj PassAdjust) (store.Quantitative, error) {
	return p.quantitative(ctx, in, adj, false)
}

// quantKey is everything an agg quantitative evaluation reads once the point is
// set up: the worker's estimator and pass timing (estKey), the calibration, the
// workload's scalars (setupBase sets no quantiles), the engine exactly as the
// calendar runs it (token budget, seat cap, chunking, KV pool, StageMs; so a
// ctx_tokens that feeds the budget, pointEngine's ctx_tokens + batch, is in the
// key through it) and the KV plan that shapes the stored KV columns. Everything
// is derived from the point's inputs, never guessed from their names.
type quantKey struct {
	est                       estKey
	adj                       PassAdjust
	isl, osl, prefix, clients int
	eng                       engine.Spec
	kv                        kvPlan
}

// quantEntry is one quantKey's result; done is closed once q and err are set.
type quantEntry struct {
	done chan struct{}
	q    store.Quantitative
	err  error
}

func (p *PerfdbEvaluator) quantitative(ctx context.Context, in store.PointInputs, adj PassAdjust, reuse bool) (store.Quantitative, error) {
	if in.Mode == store.ModeDisagg {
		return p.quantitativeDisagg(ctx, in, adj, nil, false)
	}
	if err := adj.Validate(); err != nil {
		return store.Quantitative{}, err
	}
	w, e, tm, _, k, err := p.setup(ctx, in, adj)
	if err != nil {
		return store.Quantitative{}, err
	}
	if e, err = k.quantitativeEngine(e, in.Prefix); err != nil {
		return store.Quantitative{}, err
	}
	run := func() (store.Quantitative, error) {
		p.simulations.Add(1)
		r, err := queueing.Quantitative(ctx, w, e, tm)
		if err != nil {
			return store.Quantitative{}, err
		}
		out, err := quantitativeOf(r)
		out.KV = k.quantitative(r, e.KVCapacityTokens > 0)
		return out, err
	}
	if !reuse {
		return run()
	}
	cfg, err := WorkerConfig(in, Worker{TP: in.TP, PP: in.PP, DP: in.DP, MoETP: in.MoETP, MoEEP: in.MoEEP})
	if err != nil {
		return store.Quantitative{}, err
	}
	key := quantKey{est: estKey{Model: in.Model, System: in.System, Cfg: cfg}, adj: adj,
		isl: w.ISL, osl: w.OSL, prefix: w.Prefix, clients: w.Concurrency, eng: e, kv: k}
	return p.reuseQuantitative(ctx, key, run)
}

// reuseQuantitative returns key's result, running run only for the first caller
// of key; concurrent callers of the same key wait for it. A failed run is not
// kept (a cancelled context must not poison the key): its waiters run their own.
func (p *PerfdbEvaluator) reuseQuantitative(ctx context.Context, key quantKey, run func() (store.Quantitative, error)) (store.Quantitative, error) {
	p.mu.Lock()
	ent, ok := p.quants[key]
	if !ok {
		ent = &quantEntry{done: make(chan struct{})}
		p.quants[key] = ent
	}
	p.mu.Unlock()
	if !ok {
		ent.q, ent.err = run()
		if ent.err != nil {
			p.mu.Lock()
			delete(p.quants, key)
			p.mu.Unlock()
		}
		close(ent.done)
		return ent.q, ent.err
	}
	select {
	case <-ent.done:
	case <-ctx.Done():
		return store.Quantitative{}, ctx.Err()
	}
	if ent.err != nil {
		return run()
	}
	return ent.q, nil
}

// quantitativeOf copies a quantitative report into the stored columns and
// distributions.
func quantitativeOf(r *queueing.Report) (store.Quantitative, error) {
	out, err := quantitativeColumns(r)
	if err != nil {
		return out, err
	}
	d, err := json.Marshal(map[string]queueing.Distribution{"ttft_steady": r.TTFTSteady, "ttft_transient": r.TTFTTransient,
		"itl": r.ITL, "tpot": r.TPOT, "e2e": r.E2E})
	if err != nil {
		return out, fmt.Errorf("encode distributions: %w", err)
	}
	out.Distributions = string(d)
	return out, nil
}

// quantitativeColumns is quantitativeOf without the encoded distributions (a
// calibration fit's summary evaluation reads the columns only, many times per
// row).
func quantitativeColumns(r *queueing.Report) (store.Quantitative, error) {
	var out store.Quantitative
	if err := fillColumns(&out.V, r); err != nil {
		return out, err
	}
	out.ThroughputRPS, out.OutputTokensPerS, out.Fidelity = r.ThroughputRPS, r.OutputTokensPerS, string(r.Fidelity)
	return out, nil
}

// PointSetup implements PointTimer: the agg point's engine and (calibrated) pass
// timing, as Quantitative uses them (PointModel), and its KV pool as the engine
// deploys it (DeployedPool: the perf database's memory model with the engine
// config's memory keys, then a pool the config set — EnginePool) at the trace's
// longest request. A worker that cannot hold that request (perfdb.ErrOOM), or a
// pool the memory model cannot size, is an error naming the point and the
// request, never a replay with an unbounded pool: a sweep stores an OOM row, an
// on-demand evaluation fails.
func (p *PerfdbEvaluator) PointSetup(ctx context.Context, in store.PointInputs, maxISL, maxOSL int) (PointSetup, error) {
	// A trace's requests are not the point's isl/osl: the replay keeps its own KV
	// rule (no planKV pool).
	m, err := p.pointModel(ctx, in, false)
	if err != nil {
		return PointSetup{}, err
	}
	isl, osl := max(maxISL, 1), max(maxOSL, 1)
	n, err := DeployedPool(m.pt.Estimator(), m.Engine, in.EngineProfile, queueing.ProfileInput{Batch: in.Batch, ISL: in.ISL, OSL: in.OSL}, isl, osl)
	if err != nil {
		return PointSetup{}, fmt.Errorf("trace replay on %s %s b%d: the KV pool for the trace's longest request (isl %d + osl %d): %w",
			in.Mode, in.Parallel(), in.Batch, isl, osl, err)
	}
	return PointSetup{Engine: m.Engine, Timing: m.Timing, KVTokens: n}, nil
}
