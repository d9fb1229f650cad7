package refine

import (
	"context"
	"errors"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
	"github.com/aicdb/aicdb/store"
)

// PointModel is what the quantitative tier evaluates for one aggregated point:
// its workload, engine and pass timing (calibrated when the evaluator's
// calibration covers the point), for tools that drive the same configuration
// elsewhere (the oracle curve of `aicdb plot cdf --oracle`).
type PointModel struct {
	Workload workload.Spec
	Engine   engine.Spec
	Timing   timing.Timing
	pt       *perfdb.PassTiming // the uncalibrated pricing (its estimator's memory model)
}

// PointModel builds the quantitative tier's inputs for an aggregated point, the
// engine with the KV pool the quantitative tier runs (planKV).
func (p *PerfdbEvaluator) PointModel(ctx context.Context, in store.PointInputs) (*PointModel, error) {
	return p.pointModel(ctx, in, true)
}

// pointModel is PointModel, without the KV pool unless kv.
func (p *PerfdbEvaluator) pointModel(ctx context.Context, in store.PointInputs, kv bool) (*PointModel, error) {
	if in.Mode == store.ModeDisagg {
		return nil, errors.New("point model: a disaggregated point is a tandem of two pools, not one engine")
	}
	adj := p.adjustment(in)
	if err := adj.Validate(); err != nil {
		return nil, err
	}
	if !kv {
		w, e, tm, t, err := p.setupBase(ctx, in, adj)
		if err != nil {
			return nil, err
		}
		return &PointModel{Workload: w, Engine: e, Timing: tm, pt: t}, nil
	}
	w, e, tm, t, k, err := p.setup(ctx, in, adj)
	if err != nil {
		return nil, err
	}
	if e, err = k.quantitativeEngine(e, in.Prefix); err != nil {
		return nil, err
	}
	return &PointModel{Workload: w, Engine: e, Timing: tm, pt: t}, nil
}
