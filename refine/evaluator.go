package refine

import (
	"context"
	"errors"

	"github.com/aicdb/aicdb/store"
)

// ErrNoQuantitative is returned (wrapped) by Evaluator.Quantitative for points that
// have no quantitative tier yet (disaggregated rows with a prefix, which the tandem
// does not model and which stay composed);
// the funnel keeps such rows at their stored tier.
var ErrNoQuantitative = errors.New("no quantitative tier for this point")

// Resolved is what the evaluator knows about a (model, system, backend, version)
// before a sweep: the version actually used and the model's shape and defaults.
type Resolved struct {
	Version                                                 string
	Heads                                                   int  // attention heads (tp must divide them)
	KVHeads                                                 int  // key/value heads
	MoE                                                     bool // the model has experts
	MaxPos                                                  int  // context length (max_position_embeddings; 0 = unknown)
	DatabaseMode                                            string
	GemmQuant, KVCacheQuant, FMHAQuant, MoEQuant, CommQuant string
	// GPUMemBytes is one GPU's memory (0 = not known). Sweep sets it for SGLang
	// under the aiconfigurator profile: SGLang sizes its chunked_prefill_size
	// from it (queueing.ProfileInput.GPUMemBytes).
	GPUMemBytes float64
}

// Evaluator prices operating points. Implementations must be safe for concurrent
// use, deterministic (the same inputs give bit-identical results) and never return
// NaN or Inf (an error instead).
type Evaluator interface {
	// Name identifies the evaluator and its version; it goes into every row key.
	Name() string
	// Resolve checks model, system, backend and version (empty = newest) against what
	// the store holds; an unknown one is an error listing what is available.
	Resolve(ctx context.Context, model, system, backend, version string) (Resolved, error)
	// Legacy returns aiconfigurator's legacy estimate (agg: run_agg; disagg: composed
	// from static numbers). A point that does not fit in memory returns Legacy{OOM: true}
	// and a nil error.
	Legacy(ctx context.Context, in store.PointInputs) (store.Legacy, error)
	// Screen returns the screening-tier queueing columns and bracket of a point
	// (Valid=false with Tier "composed" when no queueing model applies yet).
	Screen(ctx context.Context, in store.PointInputs) (store.Queueing, error)
	// Quantitative returns the quantitative-tier columns and distributions (Key is
	// filled in by the caller) or an error wrapping ErrNoQuantitative.
	Quantitative(ctx context.Context, in store.PointInputs) (store.Quantitative, error)
}

// EvaluationObserver is implemented by an Evaluator that reports the progress of a
// refinement: before resolving straddlers, the funnel (Best, PrepareQuery) tells it
// how many rows it may evaluate at most (the lazy funnel may stop earlier).
type EvaluationObserver interface {
	ExpectEvaluations(n int)
}

// expectEvaluations tells ev, when it observes progress, that up to n rows may be
// evaluated.
func expectEvaluations(ev Evaluator, n int) {
	if o, ok := ev.(EvaluationObserver); ok && n > 0 {
		o.ExpectEvaluations(n)
	}
}
