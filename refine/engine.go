package refine

import (
	"fmt"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/engineconf"
	"github.com/aicdb/aicdb/store"
)

// checkEngineSpec validates the sweep's engine profile and config file.
func (s *SweepSpec) checkEngineSpec() error {
	switch s.EngineProfile {
	case "", queueing.ProfileDefaults, queueing.ProfileAIConfigurator:
	default:
		return fmt.Errorf("--engine-profile %q: unknown; use %s or %s", s.EngineProfile, queueing.ProfileDefaults, queueing.ProfileAIConfigurator)
	}
	if s.EngineConfig != nil && string(s.EngineConfig.Backend) != s.Backend {
		return fmt.Errorf("--engine-config: the file is read as %s's but --backend is %s", s.EngineConfig.Backend, s.Backend)
	}
	return nil
}

// resolveEngines records on every point the engine its deployment launches
// (store.PointInputs.Engine, engineconf.Resolved) and, unless it is the sweep's
// original rule, the profile that made it (EngineProfile, part of the row key).
//
//   - Profile defaults (or none) without a config file: the original rule —
//     the backend's defaults with budget ctx_tokens + batch and running cap
//     batch (engine below). Rows keep their keys.
//   - Profile aiconfigurator: queueing.ProfileEngine with the point's batch, isl
//     and osl, as aiconfigurator's generator would deploy the row (its rules do
//     not read ctx_tokens, which stays a knob of the legacy estimate only). The
//     row's max_num_batched_tokens / max_num_seqs / enable_chunked_prefill
//     columns then show the resolved budget, running cap and chunking.
//   - A config file (--engine-config) is applied over the profile's engine on
//     every point (and over both pools of a disagg point).
//
// gpuMem is one GPU's memory (0 = not known), from which the profile sizes
// SGLang's chunked_prefill_size.
//
// Disagg points record a prefill and a decode engine — the engines the tandem
// runs (disaggSetup) — by the roles of the profile's rules with each pool's
// per-worker batch (p_batch, d_batch, × pp) as the rules' max_batch_size;
// under defaults the backend's defaults with the running cap at that batch
// and, on the prefill pool, chunked prefill on when a prompt would not fit
// the budget (the agg rule of pointEngine; T-R3). A config file applies over
// both.
func resolveEngines(s SweepSpec, pts []store.PointInputs, gpuMem float64) error {
	profile := s.EngineProfile
	if profile == "" {
		profile = queueing.ProfileDefaults
	}
	rowProfile := ""
	if profile != queueing.ProfileDefaults {
		rowProfile = profile
	}
	var cfgKeys []engineconf.Setting
	if s.EngineConfig != nil {
		cfgKeys = s.EngineConfig.Settings
		if rowProfile == "" {
			rowProfile = profile
		}
		rowProfile += "+config"
	}
	apply := func(e *engine.Spec) error {
		if s.EngineConfig == nil {
			return nil
		}
		return s.EngineConfig.Apply(e)
	}
	for i := range pts {
		p := &pts[i]
		r := engineconf.Resolved{Profile: profile, Config: cfgKeys}
		role := func(role string, batch int) (engine.Spec, error) {
			e, err := queueing.ProfileEngine(profile, queueing.ProfileInput{Backend: p.Backend, Version: profileVersion(p.Backend, p.Version),
				Role: role, Batch: batch, ISL: p.ISL, OSL: p.OSL, GPUMemBytes: gpuMem})
			if err != nil {
				return e, err
			}
			if profile == queueing.ProfileDefaults {
				e.SetSeatCap(batch)
				if role == queueing.RolePrefill && e.TokenBudget() < queueing.FirstPassTokens(e, p.ISL, p.Prefix) {
					e.EnableChunkedPrefill = true // a prompt beyond the budget must be chunked (T-R3)
				}
			}
			return e, apply(&e)
		}
		switch p.Mode {
		case store.ModeAgg:
			var e engine.Spec
			var err error
			if profile == queueing.ProfileDefaults {
				q := *p
				q.Version = profileVersion(q.Backend, q.Version)
				e, err = pointEngine(q)
				if err == nil {
					err = apply(&e)
				}
			} else {
				e, err = role(queueing.RoleAgg, p.Batch)
			}
			if err != nil {
				return fmt.Errorf("engine of %s b%d ctx%d: %w", p.Parallel(), p.Batch, p.CtxTokens, err)
			}
			if p.NextN > 0 && e.Backend == engine.SGLang {
				// EAGLE: the recorded engine is the one that runs, overlap
				// scheduler and mixed chunk off (SetDrafts; pointEngine sets the
				// drafts of every backend).
				e.SetDrafts(p.NextN, p.NextNAccepted)
			}
			r.Engine = &e
			if rowProfile != "" {
				p.MaxNumBatchedTokens, p.MaxNumSeqs, p.ChunkedPrefill = e.TokenBudget(), e.SeatCap(), e.EnableChunkedPrefill
			}
		case store.ModeDisagg:
			// A worker runs batch × pp requests (each pipeline stage holds a batch).
			pe, err := role(queueing.RolePrefill, p.PBatch*max(p.PPP, 1))
			if err != nil {
				return fmt.Errorf("prefill engine of %s: %w", p.Parallel(), err)
			}
			de, err := role(queueing.RoleDecode, p.DBatch*max(p.DPP, 1))
			if err != nil {
				return fmt.Errorf("decode engine of %s: %w", p.Parallel(), err)
			}
			if p.NextN > 0 && de.Backend == engine.SGLang {
				// EAGLE on both servers, as in an agg row: the recorded engines are
				// the ones that run (SetDrafts; disaggSetup sets the drafts of
				// every backend).
				pe.SetDrafts(p.NextN, p.NextNAccepted)
				de.SetDrafts(p.NextN, p.NextNAccepted)
			}
			r.Prefill, r.Decode = &pe, &de
		}
		if err := wholePromptFits(r, *p); err != nil {
			return err
		}
		for _, e := range []*engine.Spec{r.Engine, r.Prefill, r.Decode} {
			if e == nil {
				continue
			}
			if err := engineconf.CheckKVQuant(*e, p.KVCacheQuant); err != nil {
				return fmt.Errorf("--engine-config: %w; a sweep times %s at its own KV quant: drop the key or set it to auto", err, p.Model)
			}
		}
		js, err := r.Encode()
		if err != nil {
			return err
		}
		p.Engine, p.EngineProfile = js, rowProfile
	}
	return nil
}

// RecordEngines records on p the engines profile deploys for it, exactly as a
// sweep's row records them (resolveEngines): for a disaggregated point, the
// prefill and decode pools' engines at their per-worker batches, with the engine
// config cfg (nil: none) applied over them as a sweep's --engine-config is (the
// row records both, and its profile reads "<profile>+config"). gpuMem is one
// GPU's memory (0 = not known).
func RecordEngines(profile string, cfg *engineconf.Config, p *store.PointInputs, gpuMem float64) error {
	pts := []store.PointInputs{*p}
	if err := resolveEngines(SweepSpec{EngineProfile: profile, EngineConfig: cfg}, pts, gpuMem); err != nil {
		return err
	}
	*p = pts[0]
	return nil
}

// wholePromptFits refuses, before anything is evaluated, a point whose
// prefilling engine (agg: the engine; disagg: the prefill pool's) runs chunked
// prefill off with a budget below the point's prompt: the engine cannot
// schedule it (vLLM V-R1/V-R3, the threshold-capped prompt; TensorRT-LLM T-R3).
// Only a config file can do that: both profiles' rules fit the prompt. Trace
// rows keep the trace's own chunking rule (TraceEvaluator).
func wholePromptFits(r engineconf.Resolved, p store.PointInputs) error {
	e, role := r.Engine, ""
	if p.Mode == store.ModeDisagg {
		e, role = r.Prefill, "prefill "
	}
	if e == nil || e.EnableChunkedPrefill || p.Workload != "" {
		return nil
	}
	key := ""
	switch e.Backend {
	case engine.VLLM:
		key = "max_num_batched_tokens"
	case engine.TRTLLM:
		key = "max_num_tokens"
	default:
		return nil
	}
	if first, b := queueing.FirstPassTokens(*e, p.ISL, p.Prefix), e.TokenBudget(); first > b {
		return fmt.Errorf("--engine-config: the %sengine's %s %d cannot hold a whole prompt of %d tokens (isl %d) with chunked prefill off, so the engine could not schedule it; enable chunked prefill or raise %s",
			role, key, b, first, p.ISL, key)
	}
	return nil
}

// profileVersion maps the evaluator's version label onto one DefaultEngine
// accepts: labels that are not dotted versions (the synthetic evaluator's
// "synthetic", test labels) take the latest defaults. The version comes from the
// evaluator's Resolve, not from the user.
func profileVersion(backend, v string) string {
	if _, err := engine.Defaults(backend, v); err != nil {
		return ""
	}
	return v
}

// recordedEngine returns the agg engine a point recorded, if it recorded one.
func recordedEngine(in store.PointInputs) (engine.Spec, bool, error) {
	r, ok, err := engineconf.DecodeResolved(in.Engine)
	if err != nil || !ok || r.Engine == nil {
		return engine.Spec{}, false, err
	}
	return *r.Engine, true, nil
}

// PointResolved is the engine configuration of a stored point: the one it
// recorded (recorded = true), or for rows stored before engine configurations
// were recorded, the one the sweep's original rule gives its inputs.
func PointResolved(in store.PointInputs) (r engineconf.Resolved, recorded bool, err error) {
	r, ok, err := engineconf.DecodeResolved(in.Engine)
	if err != nil || ok {
		return r, ok, err
	}
	pts := []store.PointInputs{in}
	if err := resolveEngines(SweepSpec{Backend: in.Backend}, pts, 0); err != nil {
		return r, false, err
	}
	r, _, err = engineconf.DecodeResolved(pts[0].Engine)
	return r, false, err
}
