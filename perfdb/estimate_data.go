package perfdb

import "fmt"

// NewEstimator builds an estimator for model m on the perf data d (one
// resolved system/backend/version) with cfg's parallelism; zero quant fields
// are resolved from the model for the backend (ResolveQuant, CLI path).
func NewEstimator(d *Data, m *Model, cfg Config) (*Estimator, error) {
	if d == nil || d.System == nil {
		return nil, fmt.Errorf("estimator: perf data without a system spec")
	}
	if cfg.Backend == "" {
		cfg.Backend = d.Backend
	}
	if cfg.Version == "" {
		cfg.Version = d.Version
	}
	if cfg.Mode == "" {
		cfg.Mode = ModeSilicon
	}
	q, err := NewQuerier(d, cfg.Mode)
	if err != nil {
		return nil, err
	}
	return NewEstimatorWith(q, d, m, cfg)
}

// NewEstimatorWith is NewEstimator on a shared Querier (built once per data
// set and mode; building one costs ~0.1 s, an estimator microseconds). The
// querier's mode wins over cfg.Mode. Sweeps should share one querier.
func NewEstimatorWith(q *Querier, d *Data, m *Model, cfg Config) (*Estimator, error) {
	if q == nil || d == nil || d.System == nil {
		return nil, fmt.Errorf("estimator: nil querier or perf data")
	}
	if cfg.Backend == "" {
		cfg.Backend = d.Backend
	}
	if cfg.Version == "" {
		cfg.Version = d.Version
	}
	cfg.Mode = q.Mode()
	cfg = ResolveQuant(d, m, cfg, true)
	return newEstimator(q, d.System, m, cfg)
}

// ResolveQuant fills cfg's empty quant modes from the model's checkpoint
// defaults, then applies aiconfigurator's backend rules (golden_inputs.json
// notes, QUANT): vLLM always runs fmha in bfloat16; other backends keep an
// fp8 fmha only when the context-attention table has an fp8-fmha slice with
// the same KV dtype; on the CLI path (cliPath) systems before Blackwell
// (sm < 100) remap nvfp4 to nvfp4_wo for gemm and moe — the engine-direct
// path (mixed surface) does not. Explicit fields are kept as given.
func ResolveQuant(d *Data, m *Model, cfg Config, cliPath bool) Config {
	explicitFMHA := cfg.FMHAQuant != ""
	if cfg.GemmQuant == "" {
		cfg.GemmQuant = GemmQuant(m.GemmQuant)
		if cliPath && cfg.GemmQuant == GemmNVFP4 && d.System.SMVersion < 100 {
			cfg.GemmQuant = GemmNVFP4WO
		}
	}
	if cfg.KVQuant == "" {
		cfg.KVQuant = KVQuant(m.KVQuant)
	}
	if cfg.FMHAQuant == "" {
		cfg.FMHAQuant = FMHAQuant(m.FMHAQuant)
	}
	if cfg.MoEQuant == "" {
		cfg.MoEQuant = MoEQuant(m.MoEQuant)
		if cliPath && cfg.MoEQuant == MoENVFP4 && d.System.SMVersion < 100 {
			cfg.MoEQuant = MoENVFP4WO
		}
	}
	if cfg.CommQuant == "" {
		cfg.CommQuant = CommQuant(m.CommQuant)
	}
	if !explicitFMHA && cfg.FMHAQuant != FMHABF16 {
		keep := false
		switch {
		case cfg.Backend == "vllm" || m.Family == "DEEPSEEKV32":
			// vLLM and DSA (DeepSeek-V3.2, GLM-5) always end with a bf16 fmha.
		case isMLAFamily(m):
			// MLA: the context MLA tables (op-level and module) decide, jointly
			// with the KV dtype; no information at all keeps the checkpoint's.
			seen := map[string]bool{}
			for i := range d.MLAContext {
				if r := &d.MLAContext[i]; r.KVDtype == string(cfg.KVQuant) {
					seen[r.FMHA] = true
				}
			}
			for i := range d.MLAContextModule {
				if r := &d.MLAContextModule[i]; r.KVDtype == string(cfg.KVQuant) {
					seen[r.FMHA] = true
				}
			}
			keep = len(seen) == 0 || seen[string(cfg.FMHAQuant)] || !seen[string(FMHABF16)]
		default:
			for i := range d.ContextAttention {
				r := &d.ContextAttention[i]
				if r.AttnDtype == string(cfg.FMHAQuant) && r.KVDtype == string(cfg.KVQuant) {
					keep = true
					break
				}
			}
		}
		if !keep {
			cfg.FMHAQuant = FMHABF16
		}
	}
	return cfg
}
