package gate

import (
	"fmt"
	"math"
	"sort"

	"github.com/aicdb/aicdb/queueing"
)

// rec is one request as both sides report it: absolute arrival, first-token and finish
// times and every output token's emission time (ms).
type rec struct {
	slot    int // closed loop: client slot; open loop: -1
	gen     int // closed loop: generation within the slot; open loop: request index
	arrival float64
	ttft    float64 // first token − arrival
	e2e     float64 // finish − arrival
	tokens  []float64
	// gaps, when set, are the ITL gaps the record contributes instead of every
	// gap of tokens (a scheduler-state cycle window counts the gaps emitted in
	// it, queueing.Window.StateFromMs); gapsOnly marks a record that contributes
	// only such gaps (it did not finish in the window).
	gaps     []float64
	gapsOnly bool
}

// itlGaps returns the ITL gaps r contributes: gaps when set, else every gap of
// its token times.
func (r *rec) itlGaps() []float64 {
	if r.gaps != nil {
		return r.gaps
	}
	g := make([]float64, 0, max(len(r.tokens)-1, 0))
	for i := 1; i < len(r.tokens); i++ {
		g = append(g, r.tokens[i]-r.tokens[i-1])
	}
	return g
}

// gapCount is len(r.itlGaps()), without building them.
func (r *rec) gapCount() int {
	if r.gaps != nil {
		return len(r.gaps)
	}
	return max(len(r.tokens)-1, 0)
}

// Metrics are the gated quantities (QUEUEING.md §8), measured identically on both
// sides from per-request records (see docs/validation.md for the conventions).
type Metrics struct {
	TTFTMean, TTFTP50, TTFTP99 float64 // steady requests
	TransMean, TransMax        float64 // transient (initial burst) requests
	ITLP50, ITLP99             float64 // every gap of every steady request
	TPOTMean                   float64 // per steady request (e2e − ttft)/(osl − 1)
	TPOTP50, TPOTP99           float64 // the per-request TPOT distribution
	ThroughputRPS              float64 // steady requests / steady span
}

// metricNames are the columns of the residual table, in Metrics order.
var metricNames = []string{"ttft_mean", "ttft_p50", "ttft_p99", "trans_mean", "trans_max", "itl_p50", "itl_p99", "tpot_mean", "tpot_p50", "tpot_p99", "throughput"}

// tolerances per metric (relative), in Metrics order.
var tolerances = []float64{0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.05, 0.03, 0.05, 0.05, 0.02}

func (m Metrics) values() []float64 {
	return []float64{m.TTFTMean, m.TTFTP50, m.TTFTP99, m.TransMean, m.TransMax, m.ITLP50, m.ITLP99, m.TPOTMean, m.TPOTP50, m.TPOTP99, m.ThroughputRPS}
}

// measure computes Metrics from the steady records of one or more runs (a stagger
// mixture: each run weighs 1 in total — its requests 1/n each, its ITL gaps by count
// normalised to 1 — and the throughput is the runs' mean, as in the evaluator) and
// the transient records, with the one quantile rule of queueing.Distribution.
// Throughput follows the evaluator's definitions (QUEUEING.md §4): closed loop, Σ
// over slots of (steady requests of the slot) / (last steady finish + cycle delay −
// first steady arrival of the slot), where the cycle delay is the turnaround plus
// the client round trip; open loop, the arrival rate of the steady requests,
// n/(openEnd − first arrival), openEnd the arrival that follows the window.
func measure(runs [][]rec, transient []rec, cycleDelay, openEnd float64) (Metrics, error) {
	var m Metrics
	var ttft, itl, tpot []queueing.Atom
	tpotSum, thr := 0.0, 0.0
	for _, steady := range runs {
		if len(steady) == 0 {
			return m, fmt.Errorf("no steady requests")
		}
		wr, wg := runWeights(steady)
		t0, t1 := math.Inf(1), math.Inf(-1)
		type span struct {
			n      int
			t0, t1 float64
		}
		slots := map[int]*span{}
		for _, r := range steady {
			for _, g := range r.itlGaps() {
				itl = append(itl, queueing.Atom{Value: g, Weight: wg})
			}
			if r.gapsOnly {
				continue
			}
			if r.slot >= 0 {
				sp := slots[r.slot]
				if sp == nil {
					sp = &span{t0: math.Inf(1), t1: math.Inf(-1)}
					slots[r.slot] = sp
				}
				sp.n++
				sp.t0 = math.Min(sp.t0, r.arrival)
				sp.t1 = math.Max(sp.t1, r.arrival+r.e2e+cycleDelay)
			}
			ttft = append(ttft, queueing.Atom{Value: r.ttft, Weight: wr})
			tp := 0.0
			if n := len(r.tokens); n > 1 {
				tp = (r.e2e - r.ttft) / float64(n-1)
			}
			tpot = append(tpot, queueing.Atom{Value: tp, Weight: wr})
			tpotSum += tp * wr
			t0 = math.Min(t0, r.arrival)
			t1 = math.Max(t1, r.arrival)
		}
		x := 0.0
		if len(slots) > 0 {
			ids := make([]int, 0, len(slots))
			for id := range slots {
				ids = append(ids, id)
			}
			sort.Ints(ids) // a fixed summation order: bit-reproducible
			for _, id := range ids {
				sp := slots[id]
				if sp.t1 > sp.t0 {
					x += float64(sp.n) / ((sp.t1 - sp.t0) / 1000)
				}
			}
		} else if openEnd > t0 {
			x = float64(len(steady)) / ((openEnd - t0) / 1000)
		} else if t1 > t0 {
			x = float64(len(steady)-1) / ((t1 - t0) / 1000)
		}
		thr += x
	}
	if len(runs) == 0 {
		return m, fmt.Errorf("no steady requests")
	}
	k := float64(len(runs))
	d, err := queueing.NewDistribution(ttft)
	if err != nil {
		return m, err
	}
	m.TTFTMean, m.TTFTP50, m.TTFTP99 = d.Mean(), d.Quantile(0.5), d.Quantile(0.99)
	if len(itl) > 0 {
		if d, err = queueing.NewDistribution(itl); err != nil {
			return m, err
		}
		m.ITLP50, m.ITLP99 = d.Quantile(0.5), d.Quantile(0.99)
	}
	if d, err = queueing.NewDistribution(tpot); err != nil {
		return m, err
	}
	m.TPOTMean, m.TPOTP50, m.TPOTP99 = tpotSum/k, d.Quantile(0.5), d.Quantile(0.99)
	m.ThroughputRPS = thr / k
	if len(transient) > 0 {
		var tr []queueing.Atom
		for _, r := range transient {
			tr = append(tr, queueing.Atom{Value: r.ttft, Weight: 1})
		}
		if d, err = queueing.NewDistribution(tr); err != nil {
			return m, err
		}
		m.TransMean, m.TransMax = d.Mean(), d.Max()
	}
	for i, v := range m.values() {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return m, fmt.Errorf("metric %s = %v: not finite", metricNames[i], v)
		}
	}
	return m, nil
}

// runWeights are the atom weights of one measured run of a mixture: each request
// 1/n (TTFT, TPOT), each ITL gap 1/gaps, so every run weighs 1 in total.
func runWeights(steady []rec) (perRequest, perGap float64) {
	gaps, n := 0, 0
	for _, r := range steady {
		gaps += r.gapCount()
		if !r.gapsOnly {
			n++
		}
	}
	return 1 / float64(max(n, 1)), 1 / float64(max(gaps, 1))
}

// steadyDistributions are the steady TTFT and ITL distributions of a mixture's
// runs, weighted as measure weighs them.
func steadyDistributions(runs [][]rec) (ttft, itl queueing.Distribution, err error) {
	var ta, ia []queueing.Atom
	for _, steady := range runs {
		wr, wg := runWeights(steady)
		for _, r := range steady {
			for _, g := range r.itlGaps() {
				ia = append(ia, queueing.Atom{Value: g, Weight: wg})
			}
			if !r.gapsOnly {
				ta = append(ta, queueing.Atom{Value: r.ttft, Weight: wr})
			}
		}
	}
	if ttft, err = queueing.NewDistribution(ta); err != nil {
		return ttft, itl, fmt.Errorf("steady TTFT: %w", err)
	}
	if len(ia) > 0 {
		if itl, err = queueing.NewDistribution(ia); err != nil {
			return ttft, itl, fmt.Errorf("ITL: %w", err)
		}
	}
	return ttft, itl, nil
}

// compare returns the residual of every metric of model against oracle and the
// names of those that are not finite or exceed their tolerance.
func compare(model, oracle []float64, tol []float64, names []string) (resid []float64, failures []string) {
	for i := range model {
		r := residual(model[i], oracle[i])
		resid = append(resid, r)
		if math.IsNaN(r) || math.IsInf(r, 0) || math.Abs(r) > tol[i] {
			failures = append(failures, names[i])
		}
	}
	return resid, failures
}

// residual is (model − oracle)/oracle; both 0 is 0; a zero oracle with a non-zero
// model is +Inf (a failure).
func residual(model, oracle float64) float64 {
	if model == oracle {
		return 0
	}
	if oracle == 0 {
		return math.Inf(1)
	}
	return (model - oracle) / oracle
}
