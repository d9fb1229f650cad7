package refine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/store"
)

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// ErrAmbiguousWorkload is returned by Best when the filtered points belong to more
// than one workload (configurations are only compared for one workload).
var ErrAmbiguousWorkload = errors.New("more than one workload")

// BestOptions ask for the top configurations under an SLA.
type BestOptions struct {
	Filter store.PointFilter
	SLA    SLA
	// TopK parallel configurations to report (default 5).
	TopK int
	// Refine resolves straddlers with the evaluator (stage 2) and upgrades the reported
	// rows to quantitative tier; it never changes what stage 1 eliminates.
	Refine bool
	// MaxEvals caps stage-2 evaluations (0 = no cap); rows left unresolved are kept at
	// screening tier.
	MaxEvals int
	// AllowPreemption keeps rows whose steady state preempts (store.KV.Preempts:
	// vLLM V-R6, SGLang S-R5 under the memory model's KV pool); by default they are
	// no answer (a deployment that thrashes) and counted in BestResult.Preempting.
	AllowPreemption bool
}

// BestResult is the funnel's answer.
type BestResult struct {
	// Rows are the best row per parallel configuration, at most TopK: first the rows
	// proven to meet the SLA, highest tokens_per_s_per_gpu first, then the undecided
	// ones (Verdicts Straddle) whose stored numbers meet it, in the same order.
	Rows []store.Point
	// Verdicts[i] is what the stored numbers prove about Rows[i] (Pass or Straddle).
	Verdicts   []Verdict
	Candidates int // rows read
	Eliminated int // stage 1 (and stage 2) eliminations
	Evaluated  int // quantitative evaluations performed (and persisted)
	Unresolved int // straddlers reported at screening tier (after every resolved row)
	// Hidden counts undecided configurations not reported because the numbers that
	// would be printed for them (their screening estimates) miss the SLA.
	Hidden int
	// NoQueueing counts candidates without queueing columns (composed disagg rows,
	// OOM rows): a percentile constraint cannot pass them.
	NoQueueing int
	// Preempting counts rows left out because their steady state preempts (stored,
	// or found by the refinement); 0 with AllowPreemption.
	Preempting int
	// SessionsEvicted counts W4 trace rows the refinement could not evaluate because
	// their session contexts do not stay cached in the replica's KV pool
	// (queueing.ErrSessionContextsEvicted: they keep their screening tier);
	// FirstSessionsEvicted is the first such refusal.
	SessionsEvicted      int
	FirstSessionsEvicted string
	// Points, only when no row is reported (Rows empty), are every candidate row
	// (Candidates of them, in the store's order) with the funnel's stored
	// quantitative results put in by upgrade, as in Rows: their queueing values
	// and tiers are what a new read of the filter gives, for best's closest miss.
	// When some row is reported nothing reads them: nil, and no work is spent on
	// them (no evaluation happens for them in either case).
	Points []store.Point
}

// Best runs the two-stage funnel (QUEUEING.md §7) over the stored points that match
// opt.Filter. Stage 1 drops rows the stored numbers eliminate (for TTFT: bracket
// lower bound above the target). Stage 2 (opt.Refine) walks the survivors in
// tokens_per_s_per_gpu order, evaluates straddlers lazily until TopK parallel
// configurations are confirmed, persists every evaluation, and reports each
// configuration's best confirmed row. Without Refine (or where the evaluator has no
// quantitative tier), straddlers are reported after every confirmed row, visibly
// undecided, and only when the numbers shown for them meet the SLA.
func Best(ctx context.Context, st *store.Store, ev Evaluator, opt BestOptions) (BestResult, error) {
	var res BestResult
	if opt.TopK <= 0 {
		opt.TopK = 5
	}
	cands, err := st.SelectPoints(ctx, opt.Filter)
	if err != nil {
		return res, err
	}
	res.Candidates = len(cands)
	// Configurations are compared for one workload (model, isl, osl, prefix).
	workloads := map[string]bool{}
	for i := range cands {
		p := &cands[i]
		workloads[workloadLabel(p)] = true
	}
	if len(workloads) > 1 {
		ws := sortedKeys(workloads)
		if len(ws) > 4 {
			ws = append(ws[:4], "…")
		}
		return res, fmt.Errorf("%w: the stored points span %d workloads (%s): narrow with --model, --isl, --osl, --prefix, or --trace and --total-gpus",
			ErrAmbiguousWorkload, len(workloads), strings.Join(ws, "; "))
	}
	var survivors []store.Point
	var verdicts []Verdict
	for i := range cands {
		if !cands[i].Q.Valid {
			res.NoQueueing++
		}
		v := opt.SLA.Check(&cands[i])
		if v == Pass && !opt.SLA.ValuesMeet(&cands[i]) {
			// The bracket proves a pass the stored screening value contradicts: the row
			// would be printed with a value above the target, so it is undecided (as
			// for query's undecided rows) until evaluated.
			v = Straddle
		}
		if v == Fail {
			res.Eliminated++
			continue
		}
		if !opt.AllowPreemption && cands[i].Q.KV.Preempts() {
			res.Preempting++
			continue
		}
		survivors = append(survivors, cands[i])
		verdicts = append(verdicts, v)
	}
	if opt.Refine && opt.SLA.PercentileMode {
		n := 0
		for _, v := range verdicts {
			if v == Straddle {
				n++
			}
		}
		expectEvaluations(ev, n)
	}
	var quant []store.Quantitative
	taken := map[string]bool{}
	// Rows the stored numbers (or the evaluator) leave undecided are reported after
	// every resolved row, one per parallel configuration not resolved otherwise, and
	// only if the numbers printed for them meet the SLA (issue 8: a straddler whose
	// screening TTFT p99 was 549.5 ms ranked first under a 200 ms target).
	var unresolved []store.Point
	unresolvedPar, hiddenPar := map[string]bool{}, map[string]bool{}
	budget := opt.MaxEvals
	workers := runtime.GOMAXPROCS(0)
	cache := map[int]evalResult{}
	consumed := map[int]bool{}
	for i := range survivors {
		if len(res.Rows) == opt.TopK {
			break
		}
		p := &survivors[i]
		par := p.Parallel()
		if taken[par] {
			continue
		}
		v := verdicts[i]
		if v == Straddle && opt.Refine && opt.SLA.PercentileMode && (opt.MaxEvals == 0 || budget > 0) {
			if _, ok := cache[i]; !ok {
				// Evaluate this straddler and the next ones of untaken configurations in
				// parallel (speculative lookahead; every result is persisted).
				idx := []int{i}
				for j := i + 1; j < len(survivors) && len(idx) < workers; j++ {
					if opt.MaxEvals > 0 && len(idx) >= budget {
						break
					}
					if verdicts[j] == Straddle && !taken[survivors[j].Parallel()] {
						idx = append(idx, j)
					}
				}
				evalParallel(ctx, ev, survivors, idx, cache)
			}
			r := cache[i]
			consumed[i] = true
			q, err := r.q, r.err
			switch {
			case errors.Is(err, ErrNoQuantitative):
				if errors.Is(err, queueing.ErrSessionContextsEvicted) {
					if res.SessionsEvicted++; res.FirstSessionsEvicted == "" {
						res.FirstSessionsEvicted = err.Error()
					}
				}
			case err != nil:
				return res, err
			default:
				budget--
				res.Evaluated++
				quant = append(quant, q)
				upgrade(p, q)
				v = opt.SLA.Check(p)
			}
		}
		if !opt.AllowPreemption && p.Q.KV.Preempts() {
			res.Preempting++
			continue
		}
		if v == Fail {
			res.Eliminated++
			continue
		}
		if v == Straddle {
			if unresolvedPar[par] {
				continue
			}
			if opt.SLA.ValuesMeet(p) {
				unresolvedPar[par] = true
				unresolved = append(unresolved, *p)
			} else {
				hiddenPar[par] = true
			}
			continue
		}
		taken[par] = true
		res.Rows = append(res.Rows, *p)
		res.Verdicts = append(res.Verdicts, v)
	}
	for i := range unresolved {
		if len(res.Rows) == opt.TopK {
			break
		}
		if taken[unresolved[i].Parallel()] {
			continue
		}
		res.Unresolved++
		res.Rows = append(res.Rows, unresolved[i])
		res.Verdicts = append(res.Verdicts, Straddle)
	}
	for par := range hiddenPar {
		if !taken[par] && !unresolvedPar[par] {
			res.Hidden++
		}
	}
	// Speculative evaluations the walk did not reach are persisted too (index order).
	for i := range survivors {
		if r, ok := cache[i]; ok && !consumed[i] && r.err == nil {
			res.Evaluated++
			quant = append(quant, r.q)
		}
	}
	// --sla-refine also upgrades the reported rows themselves (QUEUEING.md §7).
	if opt.Refine {
		for i := range res.Rows {
			p := &res.Rows[i]
			// Only rows proven to pass: an undecided row left at screening tier (no
			// quantitative tier, or --max-evals spent) stays as it was reported.
			if p.Q.Tier != store.TierScreening || res.Verdicts[i] != Pass {
				continue
			}
			q, err := evaluate(ctx, ev, p)
			if errors.Is(err, ErrNoQuantitative) {
				continue
			}
			if err != nil {
				return res, err
			}
			res.Evaluated++
			quant = append(quant, q)
			upgrade(p, q)
		}
		if !opt.AllowPreemption {
			res.dropPreempting()
		}
	}
	if len(quant) > 0 {
		if err := st.InsertQuantitative(ctx, quant); err != nil {
			return res, err
		}
	}
	if len(res.Rows) == 0 {
		res.Points = withResults(cands, quant)
	}
	return res, nil
}

// withResults puts the quantitative results quant into the rows they belong to
// (a later result for a key replaces an earlier one, as in the store) and
// returns rows.
func withResults(rows []store.Point, quant []store.Quantitative) []store.Point {
	if len(quant) == 0 {
		return rows
	}
	stored := make(map[string]store.Quantitative, len(quant))
	for _, q := range quant {
		stored[q.Key] = q
	}
	for i := range rows {
		if q, ok := stored[rows[i].Key]; ok {
			upgrade(&rows[i], q)
		}
	}
	return rows
}

// dropPreempting removes reported rows the final upgrade found to preempt (a row
// whose preemption was unknown until then: KV-tight with a cached prefix has no
// quantitative tier, so this only guards the invariant).
func (r *BestResult) dropPreempting() {
	rows, verdicts := r.Rows[:0], r.Verdicts[:0]
	for i := range r.Rows {
		if r.Rows[i].Q.KV.Preempts() {
			r.Preempting++
			continue
		}
		rows, verdicts = append(rows, r.Rows[i]), append(verdicts, r.Verdicts[i])
	}
	r.Rows, r.Verdicts = rows, verdicts
}

type evalResult struct {
	q   store.Quantitative
	err error
}

// evalParallel evaluates survivors[idx] concurrently into cache (results are
// deterministic; the order of completion does not matter).
func evalParallel(ctx context.Context, ev Evaluator, survivors []store.Point, idx []int, cache map[int]evalResult) {
	out := make([]evalResult, len(idx))
	var g errgroup.Group
	for k, i := range idx {
		g.Go(func() error {
			q, err := evaluate(ctx, ev, &survivors[i])
			out[k] = evalResult{q, err}
			return nil
		})
	}
	g.Wait()
	for k, i := range idx {
		cache[i] = out[k]
	}
}

func evaluate(ctx context.Context, ev Evaluator, p *store.Point) (store.Quantitative, error) {
	q, err := ev.Quantitative(ctx, p.PointInputs)
	if err != nil && ctx.Err() == nil && IsPerfDataGap(err) {
		// The perf data cannot price a pass the evaluator needs: like a point without a
		// quantitative tier, the row keeps its stored tier (reported unresolved).
		return q, fmt.Errorf("quantitative evaluation of %s b%d ctx%d: %w: %w", p.Parallel(), p.Batch, p.CtxTokens, ErrNoQuantitative, err)
	}
	if err != nil {
		return q, fmt.Errorf("quantitative evaluation of %s b%d ctx%d: %w", p.Parallel(), p.Batch, p.CtxTokens, err)
	}
	q.Key, q.Evaluator = p.Key, ev.Name()
	if err := q.Validate(); err != nil {
		return q, fmt.Errorf("evaluator %s: %w", ev.Name(), err)
	}
	return q, nil
}

// upgrade puts a quantitative result into a row read from the points view, as the
// view itself would present it.
func upgrade(p *store.Point, q store.Quantitative) {
	p.Q.V = q.V
	p.Q.Tier = store.TierQuantitative
	p.Q.Fidelity = q.Fidelity
	p.Q.Valid = true
	p.Q.H = q.H
	if q.KV.HasPreemptions || q.KV.CapacityTokens > 0 {
		p.Q.KV = q.KV
		p.Q.KV.Note = "quantitative"
	}
}

// Resolve evaluates the given rows (parallel, deterministic results), skipping rows
// without a quantitative tier, and persists the results in one transaction. It
// returns the number of rows evaluated.
func Resolve(ctx context.Context, st *store.Store, ev Evaluator, rows []store.Point, workers int) (int, error) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	out := make([]store.Quantitative, len(rows))
	ok := make([]bool, len(rows))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := range rows {
		g.Go(func() error {
			q, err := evaluate(gctx, ev, &rows[i])
			if errors.Is(err, ErrNoQuantitative) {
				return nil
			}
			if err != nil {
				return err
			}
			out[i], ok[i] = q, true
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	var keep []store.Quantitative
	for i := range out {
		if ok[i] {
			keep = append(keep, out[i])
		}
	}
	if len(keep) == 0 {
		return 0, nil
	}
	return len(keep), st.InsertQuantitative(ctx, slices.Clip(keep))
}
