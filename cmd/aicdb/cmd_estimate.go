package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"

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
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Required: true, Usage: "model `ID` known to the store, or a path to a config.json"},
			&cli.StringFlag{Name: "system", Value: "h200_sxm", Usage: "GPU system `NAME`"},
			&cli.StringFlag{Name: "backend", Value: "vllm", Usage: "vllm | trtllm | sglang"},
			&cli.StringFlag{Name: "version", Usage: "backend `VERSION` (default: the newest available)"},
			&cli.StringFlag{Name: "mode", Value: "static", Usage: "static | mixed | agg | disagg"},
			&cli.IntFlag{Name: "isl", Value: 1024, Usage: "input sequence length (tokens)"},
			&cli.IntFlag{Name: "osl", Value: 2, Usage: "output sequence length (tokens)"},
			&cli.IntFlag{Name: "prefix", Value: 0, Usage: "cached prefix tokens (part of isl)"},
			&cli.IntFlag{Name: "tp", Value: 8, Usage: "tensor parallel size"},
			&cli.IntFlag{Name: "pp", Value: 1, Usage: "pipeline parallel size"},
			&cli.IntFlag{Name: "dp", Value: 1, Usage: "attention data parallel size"},
			&cli.IntFlag{Name: "moe-tp", Value: 1, Usage: "MoE tensor parallel size"},
			&cli.IntFlag{Name: "moe-ep", Value: 8, Usage: "MoE expert parallel size"},
			&cli.StringFlag{Name: "database-mode", Value: "SILICON", Usage: "SILICON | HYBRID | EMPIRICAL | SOL"},
			&cli.StringFlag{Name: "gemm-quant", Usage: "GEMM quant mode (default: from the model)"},
			&cli.StringFlag{Name: "kv-quant", Usage: "KV cache quant mode (default: from the model)"},
			&cli.StringFlag{Name: "fmha-quant", Usage: "FMHA quant mode (default: from the model and backend)"},
			&cli.StringFlag{Name: "moe-quant", Usage: "MoE quant mode (default: from the model)"},
			&cli.IntFlag{Name: "nextn", Value: 0, Usage: "MTP draft tokens"},
			&cli.BoolFlag{Name: "wide-ep", Usage: "the all-to-all (wide-EP) MoE path: SGLang DeepEP for DeepSeek MLA models; refused where the data has none"},
			formatFlag(formatJSON, formatText),
			&cli.IntFlag{Name: "batch", Usage: "static batch (default 1) or agg concurrency per worker (default 2)"},
			&cli.IntFlag{Name: "stride", Value: 1, Usage: "static generation stride (decode steps priced per sample)"},
			&cli.IntFlag{Name: "ctx-tokens", Usage: "prefill tokens per mixed/agg step (default: isl)"},
			&cli.IntFlag{Name: "gen-tokens", Value: 1, Usage: "decode rows of the mixed step"},
			&cli.IntFlag{Name: "prefill-batch", Value: 1, Usage: "disagg prefill worker batch"},
			&cli.IntFlag{Name: "prefill-workers", Value: 1, Usage: "disagg prefill workers"},
			&cli.IntFlag{Name: "decode-batch", Value: 4, Usage: "disagg decode worker batch"},
			&cli.IntFlag{Name: "decode-workers", Value: 1, Usage: "disagg decode workers"},
			&cli.IntFlag{Name: "prefill-tp", Usage: "disagg prefill worker tp (default: --tp)"},
			&cli.IntFlag{Name: "decode-tp", Usage: "disagg decode worker tp (default: --tp)"},
			&cli.Float64Flag{Name: "prefill-correction", Value: 1.1, Usage: "disagg prefill latency correction"},
			&cli.Float64Flag{Name: "decode-correction", Value: 1.08, Usage: "disagg decode latency correction"},
		},
		Action: func(c *cli.Context) error {
			out, err := runEstimate(c.Context, c)
			if err != nil {
				return err
			}
			return writeRecord(c.App.Writer, c.String("format"), out)
		},
	}
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
	return userErrorf("--system %q: not in the store; available: %s (import it with 'aicdb perfdb import')", system, strings.Join(systems, ", "))
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
func runEstimate(ctx context.Context, c *cli.Context) (any, error) {
	src, err := openEstimateSource(ctx, c.String("db"))
	if err != nil {
		return nil, asUser(err)
	}
	defer src.close()
	system, backend, version := c.String("system"), c.String("backend"), c.String("version")
	if version == "" {
		vs, err := src.versions(ctx, system, backend)
		if err != nil {
			return nil, asUser(err)
		}
		if len(vs) == 0 {
			return nil, src.unknownSystemBackend(ctx, system, backend)
		}
		sort.Slice(vs, func(i, j int) bool { return perfdb.CompareVersions(vs[i], vs[j]) < 0 })
		version = vs[len(vs)-1]
	}
	mode, err := perfdb.ParseDatabaseMode(c.String("database-mode"))
	if err != nil {
		return nil, userErrorf("--database-mode: %v", err)
	}
	for _, f := range []string{"isl", "osl", "tp", "pp", "dp", "moe-tp", "moe-ep", "stride", "prefill-batch",
		"prefill-workers", "decode-batch", "decode-workers"} {
		if c.Int(f) <= 0 {
			return nil, userErrorf("--%s %d: must be ≥ 1", f, c.Int(f))
		}
	}
	for _, f := range []string{"prefix", "nextn", "gen-tokens", "batch", "ctx-tokens", "prefill-tp", "decode-tp"} {
		if c.Int(f) < 0 {
			return nil, userErrorf("--%s %d: must be ≥ 0", f, c.Int(f))
		}
	}
	isl, osl, prefix := c.Int("isl"), c.Int("osl"), c.Int("prefix")
	if prefix >= isl {
		return nil, userErrorf("--prefix %d must be smaller than --isl %d", prefix, isl)
	}
	m, err := src.model(ctx, c.String("model"))
	if err != nil {
		return nil, asUser(err)
	}
	if err := checkContextLength(m, isl, osl); err != nil {
		return nil, err
	}
	cfg := perfdb.Config{Backend: backend, Version: version, TP: c.Int("tp"), PP: c.Int("pp"), DP: c.Int("dp"),
		MoETP: c.Int("moe-tp"), MoEEP: c.Int("moe-ep"), Nextn: c.Int("nextn"), Mode: mode,
		GemmQuant: perfdb.GemmQuant(c.String("gemm-quant")), KVQuant: perfdb.KVQuant(c.String("kv-quant")),
		FMHAQuant: perfdb.FMHAQuant(c.String("fmha-quant")), MoEQuant: perfdb.MoEQuant(c.String("moe-quant")),
		WideEP: c.Bool("wide-ep")}
	for _, tp := range []int{c.Int("prefill-tp"), c.Int("decode-tp")} {
		if tp > 0 && c.String("mode") == "disagg" {
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
	switch c.String("mode") {
	case "static", "mixed", "agg", "disagg":
	default:
		return nil, userErrorf("--mode %q: unknown; use static, mixed, agg or disagg", c.String("mode"))
	}
	if err := checkFormat(c.String("format"), formatText); err != nil {
		return nil, err
	}
	d, err := src.data(ctx, system, backend, version, perfdb.ForMode(mode), perfdb.ForModel(m))
	if err != nil {
		return nil, asUser(err)
	}
	ctxTokens := c.Int("ctx-tokens")
	if ctxTokens == 0 {
		ctxTokens = isl
	}
	switch c.String("mode") {
	case "static":
		e, err := perfdb.NewEstimator(d, m, cfg)
		if err != nil {
			return nil, asUser(err)
		}
		b := orDefault(c.Int("batch"), 1)
		if err := checkFits(e, d.System, "static", "--batch", b, isl, osl, prefix, 0); err != nil {
			return nil, err
		}
		r, err := e.Static(perfdb.StaticInput{Batch: b, ISL: isl, OSL: osl, Prefix: prefix, Stride: c.Int("stride")})
		return r, asUser(err)
	case "mixed":
		e, err := perfdb.NewEstimator(d, m, cfg)
		if err != nil {
			return nil, asUser(err)
		}
		// The mixed step holds the decode rows' requests and the prompts its prefill
		// tokens come from, each at isl + osl tokens of KV.
		resident := c.Int("gen-tokens") + (ctxTokens+isl-prefix-1)/(isl-prefix)
		if err := checkFits(e, d.System, "mixed", "--gen-tokens", resident, isl, osl, prefix, ctxTokens+c.Int("gen-tokens")); err != nil {
			return nil, err
		}
		v, err := e.MixedMs(ctxTokens, c.Int("gen-tokens"), isl, max(osl, 2), prefix)
		return map[string]float64{"mixed_step_ms": v}, asUser(err)
	case "agg":
		e, err := perfdb.NewEstimator(d, m, cfg)
		if err != nil {
			return nil, asUser(err)
		}
		r, err := e.Agg(perfdb.AggInput{Batch: orDefault(c.Int("batch"), 2), CtxTokens: ctxTokens, ISL: isl, OSL: osl, Prefix: prefix})
		return r, modeError("agg", err)
	case "disagg":
		pcfg, dcfg := cfg, cfg
		if v := c.Int("prefill-tp"); v > 0 {
			pcfg.TP = v
		}
		if v := c.Int("decode-tp"); v > 0 {
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
			PrefillBatch: c.Int("prefill-batch"), PrefillWorkers: c.Int("prefill-workers"),
			DecodeBatch: c.Int("decode-batch"), DecodeWorkers: c.Int("decode-workers"),
			PrefillCorrection: c.Float64("prefill-correction"), DecodeCorrection: c.Float64("decode-correction")})
		return r, modeError("disagg", err)
	}
	return nil, userErrorf("--mode %q: unknown; use static, mixed, agg or disagg", c.String("mode"))
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
