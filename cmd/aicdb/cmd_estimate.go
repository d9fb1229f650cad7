package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/store"
)

// estimateCommand prices one operating point with aiconfigurator's legacy
// estimates (static, mixed, agg, disagg). Defaults are those of the golden
// harness (golden_inputs.json "defaults"), except --system, which defaults to
// the embedded h200_sxm, and --version, which defaults to the newest version
// of the backend.
func estimateCommand() *cli.Command {
	return &cli.Command{
		Name:      "estimate",
		Usage:     "price one operating point with aiconfigurator's static/mixed/agg/disagg estimates",
		UsageText: "aicdb estimate --model Qwen/Qwen3-32B --system h200_sxm --backend vllm --version 0.22.0 --isl 1024 --osl 2 --tp 8 --mode agg --batch 2",
		Flags: slices.Concat(estimateDeployment.flags(),
			[]cli.Flag{&cli.StringFlag{Name: "mode", Value: "static", Usage: "static | mixed | agg | disagg"}},
			estimateShape.flags(), estimateParallel.flags(), quantFlags(""), []cli.Flag{
				&cli.IntFlag{Name: "nextn", Value: 0, Usage: "MTP draft tokens"},
				wideEPFlag(""),
				formatFlag(formatJSON, formatText),
				&cli.IntFlag{Name: "batch", Usage: "static batch or agg concurrency per worker (default 1 static, 2 agg)"},
				&cli.IntFlag{Name: "stride", Value: 1, Usage: "static generation stride (decode steps priced per sample)"},
				&cli.IntFlag{Name: "ctx-tokens", Usage: "prefill tokens per mixed/agg step (default: isl)"},
				&cli.IntFlag{Name: "gen-tokens", Value: 1, Usage: "decode rows of the mixed step"},
				&cli.IntFlag{Name: "prefill-batch", Value: 1, Usage: "disagg prefill worker batch"},
				&cli.IntFlag{Name: "prefill-workers", Value: 1, Usage: "disagg prefill workers"},
				&cli.IntFlag{Name: "decode-batch", Value: 4, Usage: "disagg decode worker batch"},
				&cli.IntFlag{Name: "decode-workers", Value: 1, Usage: "disagg decode workers"},
				&cli.IntFlag{Name: "prefill-tp", Usage: "disagg prefill worker tp", DefaultText: "--tp"},
				&cli.IntFlag{Name: "decode-tp", Usage: "disagg decode worker tp", DefaultText: "--tp"},
				&cli.Float64Flag{Name: "prefill-correction", Value: 1.1, Usage: "disagg prefill latency correction"},
				&cli.Float64Flag{Name: "decode-correction", Value: 1.08, Usage: "disagg decode latency correction"},
			}),
		Action: func(c *cli.Context) error {
			o := readEstimate(c)
			out, err := runEstimate(c.Context, o)
			if err != nil {
				return err
			}
			return writeRecord(c.App.Writer, o.format, out)
		},
	}
}

// The deployment, shape and parallelism flags of estimate: the golden harness's
// defaults (golden_inputs.json "defaults"), --system the embedded h200_sxm.
var (
	estimateDeployment = deploymentSpec{model: "model `ID` known to the store, or a path to a config.json",
		system: "GPU system `NAME`", backend: engine.List(" | ", " | "), version: "backend `VERSION` (default: the newest available)",
		systemDefault: "h200_sxm", backendDefault: "vllm", required: []string{"model"}}
	estimateShape = shapeSpec{isl: "input sequence length (tokens)", osl: "output sequence length (tokens)",
		prefix: "cached prefix tokens (part of isl)", def: shapeOpts{ISL: 1024, OSL: 2}}
	estimateParallel = parallelSpec{def: parallelOpts{TP: 8, PP: 1, DP: 1, MoETP: 1, MoEEP: 8}, moeDerived: true}
)

// estimateOpts are estimate's flags.
type estimateOpts struct {
	db                                                       string
	dep                                                      deploymentOpts
	shape                                                    shapeOpts
	par                                                      parallelOpts
	quant                                                    quantOpts
	mode, format                                             string
	nextn, batch, stride, ctxTokens, genTokens               int
	prefillBatch, prefillWorkers, decodeBatch, decodeWorkers int
	prefillTP, decodeTP                                      int
	prefillCorrection, decodeCorrection                      float64
	wideEP                                                   bool
}

// readEstimate reads estimate's flags.
func readEstimate(c *cli.Context) estimateOpts {
	return estimateOpts{db: c.String("db"), dep: readDeployment(c), shape: readShape(c), par: readParallel(c), quant: readQuant(c),
		mode: c.String("mode"), format: c.String("format"), nextn: c.Int("nextn"), batch: c.Int("batch"), stride: c.Int("stride"),
		ctxTokens: c.Int("ctx-tokens"), genTokens: c.Int("gen-tokens"), prefillBatch: c.Int("prefill-batch"),
		prefillWorkers: c.Int("prefill-workers"), decodeBatch: c.Int("decode-batch"), decodeWorkers: c.Int("decode-workers"),
		prefillTP: c.Int("prefill-tp"), decodeTP: c.Int("decode-tp"), prefillCorrection: c.Float64("prefill-correction"),
		decodeCorrection: c.Float64("decode-correction"), wideEP: c.Bool("wide-ep")}
}

// namedInt is an integer flag's value with its name, for range checks.
type namedInt struct {
	name string
	v    int
}

// checkAtLeast rejects the first value below lo, naming its flag.
func checkAtLeast(lo int, vs ...namedInt) error {
	for _, f := range vs {
		if f.v < lo {
			return userErrorf("--%s %d: must be ≥ %d", f.name, f.v, lo)
		}
	}
	return nil
}

// estimateSource resolves perf data and models: the store when it exists,
// else the embedded default data.
type estimateSource struct {
	st *store.Store
}

// openEstimateSource opens the store read-only if the file exists.
func openEstimateSource(ctx context.Context, dbPath string) (*estimateSource, error) {
	if _, err := os.Stat(dbPath); err != nil {
		return &estimateSource{}, nil
	}
	st, err := store.Open(ctx, dbPath, store.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	return &estimateSource{st: st}, nil
}

func (s *estimateSource) close() {
	if s.st != nil {
		s.st.Close()
	}
}

// versions lists the backend versions of a system.
func (s *estimateSource) versions(ctx context.Context, system, backend string) ([]string, error) {
	if s.st != nil {
		return perfdb.ListVersions(ctx, s.st, system, backend)
	}
	return embeddedVersions(ctx, system, backend)
}

// unknownSystemBackend names what the store holds when (system, backend)
// has no versions.
func (s *estimateSource) unknownSystemBackend(ctx context.Context, system, backend string) error {
	systems, err := perfdb.ListSystems(ctx, s.st)
	if err != nil {
		return err
	}
	for _, sys := range systems {
		if sys == system {
			bs, err := perfdb.ListBackends(ctx, s.st, system)
			if err != nil {
				return err
			}
			return userErrorf("--backend %q: no %s data in the store; available: %s", backend, system, strings.Join(bs, ", "))
		}
	}
	return userErrorf("--system %s: unknown system; stored: %s; import others with 'aicdb perfdb import'", system, strings.Join(systems, ", "))
}

// data loads the perf data of (system, backend, version); pass
// perfdb.ForMode(mode) to load what aiconfigurator loads for --database-mode
// (EMPIRICAL and SOL: the requested version's own files only).
func (s *estimateSource) data(ctx context.Context, system, backend, version string, opts ...perfdb.LoadOption) (*perfdb.Data, error) {
	if s.st != nil {
		return perfdb.LoadStore(ctx, s.st, system, backend, version, opts...)
	}
	return embeddedData(ctx, system, backend, version, opts...)
}

// model resolves --model: a path to a config.json, else an id in the store's
// models table (or the embedded configs).
func (s *estimateSource) model(ctx context.Context, ref string) (*perfdb.Model, error) {
	if st, err := os.Stat(ref); err == nil && !st.IsDir() {
		return modelFromFile(ref)
	}
	if s.st == nil {
		m, err := perfdb.EmbeddedModel(ref)
		return m, asUser(prefixModel(err))
	}
	m, err := perfdb.LoadModel(ctx, s.st, ref)
	return m, asUser(prefixModel(err))
}

// prefixModel names the --model flag in a model lookup error.
func prefixModel(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("--model: %w (or pass a path to a config.json)", err)
}

// modelFromFile reads a config.json and, when present beside it, the
// matching *_hf_quant_config.json or hf_quant_config.json.
func modelFromFile(path string) (*perfdb.Model, error) {
	cfg, err := os.ReadFile(path)
	if err != nil {
		return nil, userErrorf("--model %s: %v", path, err)
	}
	base := filepath.Base(path)
	id := strings.TrimSuffix(strings.TrimSuffix(base, ".json"), "_config")
	id = strings.ReplaceAll(id, "--", "/")
	var q []byte
	for _, cand := range []string{strings.TrimSuffix(path, "_config.json") + "_hf_quant_config.json",
		filepath.Join(filepath.Dir(path), "hf_quant_config.json")} {
		if cand != path {
			if b, err := os.ReadFile(cand); err == nil {
				q = b
				break
			}
		}
	}
	m, err := perfdb.ParseHFConfig(id, path, cfg, q)
	return m, asUser(err)
}

// runEstimate validates the flags and runs the requested mode.
func runEstimate(ctx context.Context, o estimateOpts) (any, error) {
	src, err := openEstimateSource(ctx, o.db)
	if err != nil {
		return nil, asUser(err)
	}
	defer src.close()
	version, err := src.resolveVersion(ctx, o.dep, io.Discard) // estimate has no --deployed-version
	if err != nil {
		return nil, err
	}
	mode, err := o.quant.mode()
	if err != nil {
		return nil, err
	}
	if err := checkAtLeast(1, namedInt{"isl", o.shape.ISL}, namedInt{"osl", o.shape.OSL}); err != nil {
		return nil, err
	}
	if err := o.par.check(); err != nil {
		return nil, err
	}
	if err := checkAtLeast(1, namedInt{"stride", o.stride}, namedInt{"prefill-batch", o.prefillBatch},
		namedInt{"prefill-workers", o.prefillWorkers}, namedInt{"decode-batch", o.decodeBatch}, namedInt{"decode-workers", o.decodeWorkers}); err != nil {
		return nil, err
	}
	if err := checkAtLeast(0, namedInt{"prefix", o.shape.Prefix}, namedInt{"nextn", o.nextn}, namedInt{"gen-tokens", o.genTokens},
		namedInt{"batch", o.batch}, namedInt{"ctx-tokens", o.ctxTokens}, namedInt{"prefill-tp", o.prefillTP}, namedInt{"decode-tp", o.decodeTP}); err != nil {
		return nil, err
	}
	isl, osl, prefix := o.shape.ISL, o.shape.OSL, o.shape.Prefix
	if prefix >= isl {
		return nil, userErrorf("--prefix %d must be smaller than --isl %d", prefix, isl)
	}
	m, err := src.model(ctx, o.dep.Model)
	if err != nil {
		return nil, asUser(err)
	}
	if err := checkContextLength(m, isl, osl); err != nil {
		return nil, err
	}
	if o.par, err = o.par.forModel(m); err != nil {
		return nil, err
	}
	cfg, err := workerConfig(o.dep, version, o.quant, o.nextn, o.par)
	if err != nil {
		return nil, err
	}
	cfg.WideEP = o.wideEP
	for _, tp := range []int{o.prefillTP, o.decodeTP} {
		if tp > 0 && o.mode == "disagg" {
			w := cfg
			w.TP = tp
			if err := perfdb.ValidateConfig(m, w); err != nil {
				return nil, asUser(err)
			}
		}
	}
	if err := perfdb.ValidateConfig(m, cfg); err != nil {
		return nil, asUser(err)
	}
	switch o.mode {
	case "static", "mixed", "agg", "disagg":
	default:
		return nil, userErrorf("--mode %q: unknown; use static, mixed, agg or disagg", o.mode)
	}
	if err := checkFormat(o.format, formatText); err != nil {
		return nil, err
	}
	d, err := src.data(ctx, o.dep.System, o.dep.Backend, version, perfdb.ForMode(mode), perfdb.ForModel(m))
	if err != nil {
		return nil, asUser(err)
	}
	ctxTokens := o.ctxTokens
	if ctxTokens == 0 {
		ctxTokens = isl
	}
	switch o.mode {
	case "static":
		e, err := perfdb.NewEstimator(d, m, cfg)
		if err != nil {
			return nil, asUser(err)
		}
		b := orDefault(o.batch, 1)
		if err := checkFits(e, d.System, "static", "--batch", b, isl, osl, prefix, 0); err != nil {
			return nil, err
		}
		r, err := e.Static(perfdb.StaticInput{Batch: b, ISL: isl, OSL: osl, Prefix: prefix, Stride: o.stride})
		return r, asUser(err)
	case "mixed":
		e, err := perfdb.NewEstimator(d, m, cfg)
		if err != nil {
			return nil, asUser(err)
		}
		// The mixed step holds the decode rows' requests and the prompts its prefill
		// tokens come from, each at isl + osl tokens of KV.
		resident := o.genTokens + (ctxTokens+isl-prefix-1)/(isl-prefix)
		if err := checkFits(e, d.System, "mixed", "--gen-tokens", resident, isl, osl, prefix, ctxTokens+o.genTokens); err != nil {
			return nil, err
		}
		v, err := e.MixedMs(ctxTokens, o.genTokens, isl, max(osl, 2), prefix)
		return map[string]float64{"mixed_step_ms": v}, asUser(err)
	case "agg":
		e, err := perfdb.NewEstimator(d, m, cfg)
		if err != nil {
			return nil, asUser(err)
		}
		r, err := e.Agg(perfdb.AggInput{Batch: orDefault(o.batch, 2), CtxTokens: ctxTokens, ISL: isl, OSL: osl, Prefix: prefix})
		return r, modeError("agg", err)
	case "disagg":
		pcfg, dcfg := cfg, cfg
		if v := o.prefillTP; v > 0 {
			pcfg.TP = v
		}
		if v := o.decodeTP; v > 0 {
			dcfg.TP = v
		}
		pe, err := perfdb.NewEstimator(d, m, pcfg)
		if err != nil {
			return nil, userErrorf("prefill worker: %v", err)
		}
		de, err := perfdb.NewEstimator(d, m, dcfg)
		if err != nil {
			return nil, userErrorf("decode worker: %v", err)
		}
		r, err := perfdb.Disagg(pe, de, perfdb.DisaggInput{ISL: isl, OSL: osl, Prefix: prefix,
			PrefillBatch: o.prefillBatch, PrefillWorkers: o.prefillWorkers,
			DecodeBatch: o.decodeBatch, DecodeWorkers: o.decodeWorkers,
			PrefillCorrection: o.prefillCorrection, DecodeCorrection: o.decodeCorrection})
		return r, modeError("disagg", err)
	}
	return nil, userErrorf("--mode %q: unknown; use static, mixed, agg or disagg", o.mode)
}

// resolveVersion is d's --version; without it, the perf-data version of the
// system's backend nearest d's --deployed-version (perfdb.NearestVersion, the
// rule that prices measured runs), which is the newest when none is deployed.
// A deployed version without perf data of its own gets a note on note naming
// the mapping. A (system, backend) without versions is an error naming what the
// store holds.
func (s *estimateSource) resolveVersion(ctx context.Context, d deploymentOpts, note io.Writer) (string, error) {
	if d.Version != "" {
		return d.Version, nil
	}
	vs, err := s.versions(ctx, d.System, d.Backend)
	if err != nil {
		return "", asUser(err)
	}
	v, mapping, ok := perfdb.NearestVersion(d.Deployed, vs)
	if !ok {
		return "", s.unknownSystemBackend(ctx, d.System, d.Backend)
	}
	if d.Deployed != "" && mapping != "exact" {
		fmt.Fprintf(note, "aicdb: note: --deployed-version %s has no perf data of %s on %s: priced at perf-data version %s (%s)\n",
			d.Deployed, d.Backend, d.System, v, mapping)
	}
	return v, nil
}

// modeError names the mode in an out-of-memory error (aiconfigurator's rule, applied
// by perfdb: the footprint reaches the GPU or the KV cache its budget).
func modeError(mode string, err error) error {
	if errors.Is(err, perfdb.ErrOOM) {
		return userErrorf("--mode %s: %v", mode, err)
	}
	return asUser(err)
}

// checkContextLength rejects a request longer than the model's context window
// (isl + osl > max_position_embeddings; 0 = unknown, not checked).
func checkContextLength(m *perfdb.Model, isl, osl int) error {
	if m.MaxPos > 0 && isl+osl > m.MaxPos {
		return userErrorf("--isl %d + --osl %d = %d tokens exceeds the context length of %s (max_position_embeddings %d); lower --isl or --osl",
			isl, osl, isl+osl, m.ID, m.MaxPos)
	}
	return nil
}

// checkFits rejects a worker whose memory estimate (batch requests of isl + osl
// tokens, activations for numTokens per step; 0 = the prefill peak) reaches the
// GPU's capacity, printing the arithmetic: an estimate of a deployment that cannot
// load is not an answer (agg and disagg apply aiconfigurator's own OOM rule).
func checkFits(e *perfdb.Estimator, sys *perfdb.System, mode, batchFlag string, batch, isl, osl, prefix, numTokens int) error {
	u, err := e.Memory(batch, isl, osl, prefix, numTokens)
	if err != nil {
		return asUser(err)
	}
	capGiB := sys.MemCapacity / (1 << 30)
	if capGiB <= 0 || u.TotalGiB < capGiB {
		return nil
	}
	cfg := e.Config()
	return userErrorf("--mode %s: out of memory: weights %.2f + KV cache %.2f + activations %.2f + NCCL %.2f + other %.2f = %.2f GiB per GPU (batch %d × %d tokens, tp %d pp %d) ≥ %s capacity %.2f GiB; lower %s, --isl or --osl, or raise --tp/--pp",
		mode, u.WeightsGiB, u.KVCacheGiB, u.ActivationsGiB, u.NCCLGiB, u.OthersGiB, u.TotalGiB, batch, isl+osl, cfg.TP, cfg.PP, sys.Name, capGiB, batchFlag)
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// embeddedVersions lists a backend's versions in the embedded data, naming
// what exists when the system or backend is unknown.
func embeddedVersions(_ context.Context, system, backend string) ([]string, error) {
	systems, err := perfdb.EmbeddedSystems()
	if err != nil {
		return nil, err
	}
	found := false
	for _, s := range systems {
		found = found || s == system
	}
	if !found {
		return nil, userErrorf("--system %q: not in the embedded data; available: %s (import others with 'aicdb perfdb import', then pass --db)",
			system, strings.Join(systems, ", "))
	}
	vs, err := perfdb.EmbeddedVersions(system, backend)
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, userErrorf("--backend %q: no embedded %s data; use vllm, trtllm or sglang", backend, system)
	}
	return vs, nil
}

// embeddedData loads the embedded perf data.
func embeddedData(ctx context.Context, system, backend, version string, opts ...perfdb.LoadOption) (*perfdb.Data, error) {
	return perfdb.LoadEmbedded(ctx, system, backend, version, opts...)
}
