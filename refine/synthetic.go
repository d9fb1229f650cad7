package refine

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/store"
)

// Synthetic is a deterministic stand-in evaluator with a roofline-shaped closed
// form, for tests, benchmarks and demos without perf data (AICDB_EVALUATOR=synthetic).
// Its numbers mean nothing about real hardware. It honours the contracts the funnel
// relies on: the screening bracket satisfies lo ≤ the quantitative minimum steady
// TTFT and hi ≥ the quantitative p99, and the quantitative tier deviates from the
// screening tier by a per-point factor (a pure function of the key), so straddlers
// really are undecided until evaluated.
type Synthetic struct {
	// Delay is added to every Legacy call (to test interruption); zero in normal use.
	Delay time.Duration
	// Models the synthetic catalog knows (default: Qwen/Qwen3-32B, 64 heads).
	Models map[string]int
	// NoDataTP, when > 0, makes every agg point with that tensor-parallel size a perf
	// data gap (a *perfdb.MissError from Legacy), to test how sweeps skip such points.
	NoDataTP int
}

// Name implements Evaluator.
func (s Synthetic) Name() string { return "synthetic-1" }

func (s Synthetic) models() map[string]int {
	if s.Models != nil {
		return s.Models
	}
	return map[string]int{"Qwen/Qwen3-32B": 64, "meta-llama/Meta-Llama-3.1-8B": 32}
}

// Resolve implements Evaluator.
func (s Synthetic) Resolve(_ context.Context, model, system, backend, version string) (Resolved, error) {
	heads, ok := s.models()[model]
	if !ok {
		return Resolved{}, fmt.Errorf("--model %q is not in the store: known models are %v", model, sortedKeys(s.models()))
	}
	if system != "h200_sxm" {
		return Resolved{}, fmt.Errorf("--system %q is not in the store: known systems are [h200_sxm]", system)
	}
	if _, ok := engine.Backend(backend).Calendar(); !ok {
		return Resolved{}, fmt.Errorf("--backend %q: known backends for h200_sxm are [sglang trtllm vllm]", backend)
	}
	if version == "" {
		version = "synthetic"
	}
	return Resolved{Version: version, Heads: heads, KVHeads: 8, DatabaseMode: "SILICON",
		GemmQuant: "bfloat16", KVCacheQuant: "bfloat16", FMHAQuant: "bfloat16", MoEQuant: "bfloat16", CommQuant: "half"}, nil
}

type synthTimes struct {
	prefill, mix, gen float64 // ms
	chunks            int
}

func (s Synthetic) times(in store.PointInputs) synthTimes {
	tp := float64(in.TP)
	eff := float64(in.ISL - in.Prefix)
	budget := in.CtxTokens
	if budget <= 0 {
		budget = in.ISL
	}
	chunks := int(math.Ceil(eff / float64(budget)))
	perTok := 0.04 / math.Pow(tp, 0.85)
	prefill := 3 + perTok*eff
	b := float64(in.Batch)
	gen := 6/math.Pow(tp, 0.7) + 0.015*b + 0.000004*b*float64(in.ISL+in.OSL/2)
	mix := gen + perTok*math.Min(float64(budget), eff)
	return synthTimes{prefill: prefill, mix: mix, gen: gen, chunks: chunks}
}

// Legacy implements Evaluator.
func (s Synthetic) Legacy(ctx context.Context, in store.PointInputs) (store.Legacy, error) {
	if s.Delay > 0 {
		select {
		case <-time.After(s.Delay):
		case <-ctx.Done():
			return store.Legacy{}, ctx.Err()
		}
	}
	if s.NoDataTP > 0 && in.Mode == store.ModeAgg && in.TP == s.NoDataTP {
		return store.Legacy{}, &perfdb.MissError{Msg: fmt.Sprintf("synthetic: no perf data for tp%d", in.TP)}
	}
	if in.Mode == store.ModeDisagg {
		pin, din := in, in
		pin.TP, pin.Batch = in.PTP, in.PBatch
		din.TP, din.Batch = in.DTP, in.DBatch
		pt, dt := s.times(pin), s.times(din)
		ttft := pt.prefill * 1.1 * 1.8
		tpot := dt.gen * 1.08
		pSeq := 1000 / (pt.prefill * 1.1) * float64(in.PBatch)
		dSeq := 1000 / (tpot * float64(in.OSL)) * float64(in.DBatch)
		seq := math.Min(pSeq*float64(in.PWorkers)*0.9, dSeq*float64(in.DWorkers)*0.92)
		gpus := float64(in.NumGPUs())
		return store.Legacy{Concurrency: in.DBatch * in.DWorkers, TTFT: ttft, TPOT: tpot,
			RequestLatency: ttft + tpot*float64(in.OSL-1), RequestRate: seq, SeqPerS: seq, SeqPerSPerGPU: seq / gpus,
			TokensPerS: seq * float64(in.OSL), TokensPerSPerGPU: seq * float64(in.OSL) / gpus,
			TokensPerSPerUser: 1000 / tpot, MemoryGiB: 64/float64(in.DTP) + 0.0002*float64(in.DBatch*(in.ISL+in.OSL))/float64(in.DTP)}, nil
	}
	t := s.times(in)
	mem := 64/float64(in.TP) + 0.0002*float64(in.Batch*(in.ISL+in.OSL))/float64(in.TP)
	if mem > 141 {
		return store.Legacy{OOM: true, Concurrency: in.Batch}, nil
	}
	ttft := (t.mix*float64(t.chunks) + 0.8*64) * (1 + math.Log2(float64(in.Batch))/8)
	tpot := t.gen + (t.mix-t.gen)*float64(t.chunks)/float64(in.OSL)
	e2e := ttft + tpot*float64(in.OSL-1)
	seq := float64(in.Batch) * 1000 / e2e
	gpus := float64(in.NumGPUs())
	return store.Legacy{Concurrency: in.Batch, TTFT: ttft, TPOT: tpot, RequestLatency: e2e, RequestRate: seq,
		SeqPerS: seq, SeqPerSPerGPU: seq / gpus, TokensPerS: seq * float64(in.OSL), TokensPerSPerGPU: seq * float64(in.OSL) / gpus,
		TokensPerSPerUser: 1000 / tpot, MemoryGiB: mem}, nil
}

// Screen implements Evaluator: TTFT_steady = own prefill + a residual uniform on
// [0, t_mix]; lo = own prefill; hi = own prefill + 1.25·t_mix.
func (s Synthetic) Screen(_ context.Context, in store.PointInputs) (store.Queueing, error) {
	if in.Mode == store.ModeDisagg {
		return store.Queueing{Tier: store.TierComposed}, nil
	}
	t := s.times(in)
	q := store.Queueing{Valid: true, Tier: store.TierScreening, Fidelity: "W0", HasBracket: true}
	base := t.prefill + float64(t.chunks-1)*t.mix
	fill(&q.V, base, t, 1, 1)
	q.P99Lo, q.P99Hi = base, base+1.25*t.mix
	// Some brackets are declared estimates only, as the real closed form does where
	// it cannot bound the tail.
	q.HiCertain = factor(in.Key(), 3, 0, 1) >= 0.2
	return q, nil
}

// fill writes the columns of a TTFT residual scaled by f and an ITL scaled by g.
func fill(v *[store.NumQ]float64, base float64, t synthTimes, f, g float64) {
	for i, qq := range []float64{0.5, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999} {
		v[store.QTTFTSteadyMean+i] = base + qq*t.mix*f
	}
	v[store.QTTFTTransientMean] = base + 2*t.mix
	v[store.QTTFTTransientMax] = base + 4*t.mix
	v[store.QITLMean], v[store.QITLP50], v[store.QITLP99] = t.gen*g*1.1, t.gen*g, t.mix*g
	v[store.QTPOTMean], v[store.QTPOTP50], v[store.QTPOTP99] = t.gen*g*1.1, t.gen*g*1.1, t.gen*g*1.2
	v[store.QE2EMean], v[store.QE2EP50], v[store.QE2EP99] = base+500, base+500, base+600
}

// factor is a deterministic value in [lo, hi) from the point's key.
func factor(key string, salt byte, lo, hi float64) float64 {
	h := sha256.Sum256(append([]byte(key), salt))
	u := float64(binary.BigEndian.Uint64(h[:8])>>11) / (1 << 53)
	return lo + u*(hi-lo)
}

// Quantitative implements Evaluator: the residual's scale and the ITL deviate from
// the screening tier by key-derived factors in [0.2, 1.2] and [0.8, 1.2].
func (s Synthetic) Quantitative(_ context.Context, in store.PointInputs) (store.Quantitative, error) {
	if in.Mode == store.ModeDisagg {
		return store.Quantitative{}, fmt.Errorf("disagg %s: %w (the tandem is not built yet)", in.Parallel(), ErrNoQuantitative)
	}
	t := s.times(in)
	key := in.Key()
	base := t.prefill + float64(t.chunks-1)*t.mix
	var r store.Quantitative
	f, g := factor(key, 1, 0.2, 1.2), factor(key, 2, 0.8, 1.2)
	fill(&r.V, base, t, f, g)
	r.ThroughputRPS = float64(in.Batch) * 1000 / (base + float64(in.OSL)*t.gen)
	r.OutputTokensPerS = r.ThroughputRPS * float64(in.OSL)
	r.Fidelity = "W0"
	atoms := [][2]float64{{base, 0.5}, {base + f*t.mix, 0.5}}
	d, _ := json.Marshal(map[string]any{"ttft_steady": atoms})
	r.Distributions = string(d)
	return r, nil
}

// PointSetup implements PointTimer: the point's engine and a linear pass timing
// with the synthetic closed form's coefficients (base 6/tp^0.7 ms, 0.04/tp^0.85 ms
// per prefill token, 0.015 ms per decode row, 4e-6 ms per token of decode
// context), and the KV pool its memory formula leaves (141 GiB − 64/tp GiB of
// weights at 0.0002/tp GiB per token).
func (s Synthetic) PointSetup(_ context.Context, in store.PointInputs, _, _ int) (PointSetup, error) {
	e, err := pointEngine(in)
	if err != nil {
		return PointSetup{}, err
	}
	tp := float64(in.TP)
	t := timing.Linear{BaseMs: 6 / math.Pow(tp, 0.7), PrefillMsPerToken: 0.04 / math.Pow(tp, 0.85),
		DecodeMsPerRow: 0.015, CtxMsPerToken: 0.000004}
	return PointSetup{Engine: e, Timing: t, KVTokens: int((141 - 64/tp) * tp / 0.0002)}, nil
}
