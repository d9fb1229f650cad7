package refine

import (
	"fmt"
	"math"
	"slices"

	"github.com/aicdb/aicdb/queueing/engineconf"
	"github.com/aicdb/aicdb/store"
)

// SweepSpec is what `aicdb sweep` asks for. Zero-valued lists take aiconfigurator's
// default search space (PERFDB.md §2.3–§2.4, sdk/sweep.py at 095f58a5).
type SweepSpec struct {
	Model   string `json:"model"`
	System  string `json:"system"`
	Backend string `json:"backend"`
	Version string `json:"version,omitempty"`
	// Deployed is the engine version deployed when it is not Version (the
	// perf-data version the points are priced at): every point records it
	// (store.PointInputs.Deployed) and a calibration applies its fit of runs
	// measured on it.
	Deployed string `json:"deployed_version,omitempty"`
	// NextN and NextNAccepted run every point with MTP (TensorRT-LLM one-model
	// MTP, SGLang EAGLE/NEXTN): draft tokens per decode step and the mean accepted
	// (aggregated only).
	NextN         int     `json:"nextn,omitempty"`
	NextNAccepted float64 `json:"nextn_accepted,omitempty"`

	TotalGPUs int `json:"total_gpus"`
	ISL       int `json:"isl"`
	OSL       int `json:"osl"`
	Prefix    int `json:"prefix"`
	// Modes: "agg", "disagg" (default: agg).
	Modes []string `json:"modes,omitempty"`
	// TPs: tensor-parallel sizes (default 1, 2, 4, 8; kept if they divide TotalGPUs
	// and the model's heads).
	TPs []int `json:"tp,omitempty"`
	// Batches: agg per-worker batch sizes (default _DEFAULT_AGG_BATCH_SCHEDULE).
	Batches []int `json:"batch,omitempty"`
	// CtxTokens: agg prefill budgets (default _agg_ctx_tokens_list(isl, 512, chunked)).
	CtxTokens []int `json:"ctx_tokens,omitempty"`
	// ChunkedPrefill: aiconfigurator's enable_chunked_prefill (default off).
	ChunkedPrefill bool `json:"chunked_prefill"`
	// DecodeBatches: disagg decode batch sizes (default _DEFAULT_DECODE_BATCH_SCHEDULE).
	DecodeBatches []int `json:"decode_batch,omitempty"`
	// MaxWorkers caps the P and D worker counts of disagg rows (default 32).
	MaxWorkers int `json:"max_workers,omitempty"`
	// EngineProfile configures each point's engine (queueing.ProfileDefaults or
	// queueing.ProfileAIConfigurator; "" = defaults); see resolveEngines.
	EngineProfile string `json:"engine_profile,omitempty"`
	// EngineConfig is the engine's own config file applied over the profile on
	// every point (--engine-config), nil for none.
	EngineConfig *engineconf.Config `json:"engine_config,omitempty"`
	// Trace, when set, is the workload of every point instead of ISL/OSL/Prefix
	// (W3, W4 with sessions; refine/trace_sweep.go): Sweep fills ISL/OSL with the
	// slice's mean lengths.
	Trace *TraceSpec `json:"trace,omitempty"`
}

// DefaultTPs is aiconfigurator's dense tp list (task_v2.py).
var DefaultTPs = []int{1, 2, 4, 8}

// DefaultAggBatches is sweep.py's _DEFAULT_AGG_BATCH_SCHEDULE.
func DefaultAggBatches() []int {
	var b []int
	b = appendRange(b, 1, 16, 1)
	b = appendRange(b, 16, 32, 4)
	b = appendRange(b, 32, 64, 8)
	b = appendRange(b, 64, 256, 16)
	b = appendRange(b, 256, 512, 32)
	b = appendRange(b, 512, 1024, 256)
	return append(b, 1024)
}

// DefaultDecodeBatches is sweep.py's _DEFAULT_DECODE_BATCH_SCHEDULE.
func DefaultDecodeBatches() []int {
	var b []int
	b = appendRange(b, 1, 16, 1)
	b = appendRange(b, 16, 32, 2)
	b = appendRange(b, 32, 128, 4)
	b = appendRange(b, 128, 512, 8)
	return append(b, 512)
}

func appendRange(b []int, from, to, step int) []int {
	for v := from; v < to; v += step {
		b = append(b, v)
	}
	return b
}

// AggCtxTokens is sweep.py's _agg_ctx_tokens_list(isl, ctx_stride, chunked).
func AggCtxTokens(isl, ctxStride int, chunked bool) []int {
	const maxNormal, multiple, smallSteps, steps = 8192, 2, 16, 8
	maxCtx := max(maxNormal, isl*multiple)
	stride := max(ctxStride, maxNormal/smallSteps)
	large := max(1024, stride, maxCtx/steps)
	if !chunked {
		stride = max(isl, stride)
		large = int(math.Ceil(float64(large)/float64(isl))) * isl
	}
	var out []int
	for c := 0; ; {
		if c < maxNormal {
			c += stride
		} else {
			c += large
		}
		if c > maxCtx {
			break
		}
		out = append(out, c)
	}
	for i := 1; i <= multiple; i++ {
		if v := isl * i; !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// validate checks the spec's numbers; bad input names the flag.
func (s *SweepSpec) validate() error {
	switch {
	case s.Model == "":
		return fmt.Errorf("--model is required")
	case s.System == "":
		return fmt.Errorf("--system is required")
	case s.Backend == "":
		return fmt.Errorf("--backend is required")
	case s.TotalGPUs <= 0:
		return fmt.Errorf("--total-gpus %d: must be > 0", s.TotalGPUs)
	case s.Trace != nil:
		if err := s.Trace.validate(s); err != nil {
			return err
		}
	case s.ISL <= 0:
		return fmt.Errorf("--isl %d: must be > 0", s.ISL)
	case s.OSL <= 0:
		return fmt.Errorf("--osl %d: must be > 0", s.OSL)
	case s.Prefix < 0 || s.Prefix >= s.ISL:
		return fmt.Errorf("--prefix %d: must be ≥ 0 and < --isl %d", s.Prefix, s.ISL)
	}
	if err := s.checkEngineSpec(); err != nil {
		return err
	}
	for _, m := range s.Modes {
		if m != store.ModeAgg && m != store.ModeDisagg {
			return fmt.Errorf("--mode %q: use agg, disagg or all", m)
		}
	}
	for _, l := range []struct {
		name string
		v    []int
	}{{"--tp", s.TPs}, {"--batch", s.Batches}, {"--ctx-tokens", s.CtxTokens}, {"--decode-batch", s.DecodeBatches}} {
		for _, x := range l.v {
			if x <= 0 {
				return fmt.Errorf("%s %d: every value must be > 0", l.name, x)
			}
		}
	}
	return nil
}

// Enumerate lists the sweep's points in a deterministic order: agg (tp, batch,
// ctx_tokens) with sweep.py's balance guards and capped-gen dedup, then disagg
// (prefill tp, decode tp, decode batch, P workers, D workers).
func Enumerate(s SweepSpec, r Resolved, evaluator string) ([]store.PointInputs, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	if err := s.Trace.checkContext(s.Model, r.MaxPos); err != nil {
		return nil, err
	}
	if r.MaxPos > 0 && s.ISL+s.OSL > r.MaxPos {
		return nil, fmt.Errorf("--isl %d + --osl %d = %d tokens exceeds the context length of %s (max_position_embeddings %d); lower --isl or --osl",
			s.ISL, s.OSL, s.ISL+s.OSL, s.Model, r.MaxPos)
	}
	tps := s.TPs
	if len(tps) == 0 {
		tps = DefaultTPs
	}
	var okTP []int
	for _, tp := range tps {
		if tp <= s.TotalGPUs && s.TotalGPUs%tp == 0 && (r.Heads == 0 || r.Heads%tp == 0) {
			okTP = append(okTP, tp)
		}
	}
	if len(okTP) == 0 {
		return nil, fmt.Errorf("--tp %v: no tp divides --total-gpus %d and the model's %d heads", tps, s.TotalGPUs, r.Heads)
	}
	if err := disaggFits(s, okTP); err != nil {
		return nil, err
	}
	modes := s.Modes
	if len(modes) == 0 {
		modes = []string{store.ModeAgg}
	}
	base := store.PointInputs{
		Model: s.Model, System: s.System, Backend: s.Backend, Version: r.Version,
		ISL: s.ISL, OSL: s.OSL, Prefix: s.Prefix, PP: 1, DP: 1, MoETP: 1, MoEEP: 1,
		ChunkedPrefill: s.ChunkedPrefill, DatabaseMode: r.DatabaseMode,
		GemmQuant: r.GemmQuant, KVCacheQuant: r.KVCacheQuant, FMHAQuant: r.FMHAQuant,
		MoEQuant: r.MoEQuant, CommQuant: r.CommQuant, Evaluator: evaluator, Deployed: store.DeployedAs(s.Deployed, r.Version),
		NextN: s.NextN, NextNAccepted: s.NextNAccepted,
	}
	var out []store.PointInputs
	for _, mode := range modes {
		switch mode {
		case store.ModeAgg:
			out = append(out, enumerateAgg(s, base, okTP, r.MoE)...)
		case store.ModeDisagg:
			out = append(out, enumerateDisagg(s, base, okTP, r.MoE)...)
		}
	}
	s.Trace.setWorkloads(s.TotalGPUs, out)
	if err := resolveEngines(s, out, r.GPUMemBytes); err != nil {
		return nil, err
	}
	return out, nil
}

func enumerateAgg(s SweepSpec, base store.PointInputs, tps []int, moe bool) []store.PointInputs {
	bs := s.Batches
	if len(bs) == 0 {
		bs = DefaultAggBatches()
	}
	ctxs := s.CtxTokens
	if len(ctxs) == 0 {
		ctxs = AggCtxTokens(s.ISL, 512, s.ChunkedPrefill)
	}
	isl := s.ISL
	var out []store.PointInputs
	for _, tp := range tps {
		var capped []int // sweep.py's capped_b, per parallel config
		for _, b := range bs {
			for _, ctx := range ctxs {
				need := int(math.Ceil(float64(ctx) / float64(isl)))
				// sweep.py balance guards (legacy semantics).
				if b-need < 0 || (b > 1 && b-need < 1) {
					break
				}
				// Skip equivalent gen_tokens slices (sweep.py dedup_gen_slices).
				if balance := float64(isl) * float64(b) / float64(ctx) / float64(s.OSL); balance > 1 {
					gen := int(math.Floor(float64(b) / balance))
					if gen > 1 && slices.Contains(capped, gen) {
						continue
					}
					capped = append(capped, gen)
				}
				p := base
				p.Mode = store.ModeAgg
				p.TP, p.Batch, p.CtxTokens = tp, b, ctx
				if moe {
					p.MoETP = tp
				}
				// The engine the queueing layer runs. aiconfigurator's mix step carries
				// ctx_tokens prefill tokens plus the decode rows (PERFDB.md §2.3), and
				// the engine budget counts both (V-R1, T-R1, S-R1: decode rows debit
				// it), so budget = ctx_tokens + batch; running cap = batch (V-R2).
				// Cf. aiconfigurator's generator rule agg max_num_tokens = b + isl + 1500.
				p.MaxNumBatchedTokens, p.MaxNumSeqs = ctx+b, b
				out = append(out, p)
			}
		}
	}
	return out
}

func enumerateDisagg(s SweepSpec, base store.PointInputs, tps []int, moe bool) []store.PointInputs {
	bds := s.DecodeBatches
	if len(bds) == 0 {
		bds = DefaultDecodeBatches()
	}
	maxW := s.MaxWorkers
	if maxW <= 0 {
		maxW = 32
	}
	var out []store.PointInputs
	for _, ptp := range tps {
		for _, dtp := range tps {
			for _, bd := range bds {
				for np := 1; np <= maxW && np*ptp+dtp <= s.TotalGPUs; np++ {
					for nd := 1; nd <= maxW && np*ptp+nd*dtp <= s.TotalGPUs; nd++ {
						p := base
						p.Mode = store.ModeDisagg
						// The row's tp/batch columns describe the decode side.
						p.TP, p.Batch = dtp, bd
						if moe {
							p.MoETP = dtp
						}
						p.PWorkers, p.PBatch, p.PTP, p.PPP, p.PDP = np, 1, ptp, 1, 1
						p.DWorkers, p.DBatch, p.DTP, p.DPP, p.DDP = nd, bd, dtp, 1, 1
						p.MaxNumSeqs = bd
						out = append(out, p)
					}
				}
			}
		}
	}
	return out
}
