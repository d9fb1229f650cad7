package queueing

import (
	"cmp"
	"math"
	"slices"
)

// The steady window of a closed loop is measured on its limit cycle (issue 9,
// part 1). A fixed-shape closed loop is a deterministic dynamical system: once the
// per-slot pattern of one generation (arrival offset inside the generation, TTFT,
// E2E of every slot) repeats that of an earlier generation up to a time shift, the
// loop is periodic from there on (period p generations) and its steady
// distributions are those of whole periods. Started as a burst, cohorts take 8–30
// generations to dissolve, so a fixed warm-up (the former generations [4, 4 + W))
// measured part of the transient. The rule below is shared by the evaluator (online,
// as generations complete) and the oracle gate (offline, on the DES records), so the
// gate can catch a model that settles into a different cycle.

// settleGenerations is the settling allowance of the limit-cycle search: with no
// repetition among generations 1 … settle + W − 1 the window is the last W
// generations before that horizon and Window.Found is false (a diagnostic). A
// burst needs up to ~35 generations to dissolve its cohorts (vLLM C 32, isl 4096,
// budget 8192: generation 33; the old fixed window [4, 12) measured a TTFT mean of
// ≈ 370 ms there against the cycle's 176.8 ms), and a stagger phase whose clients
// start spread over a small part of the cycle is nearly a burst (the same point:
// phases ¼ and ½ settle at generations 28 and 18–20). Shorter allowances were tried
// (4, 16 for the phases) and measured transients at this point.
const (
	settleGenerations      = 48
	phaseSettleGenerations = 48
)

// cycleTol is the relative tolerance of "the pattern repeats": two generations
// match when every slot's offset, TTFT and E2E agree within cycleTol × the largest
// E2E of the generation (the recursion's times carry summation rounding only).
const cycleTol = 1e-9

// LoopSample is one finished closed-loop request as the limit-cycle rule sees it:
// its slot (client), generation (0 = the slot's first request), arrival at the
// scheduler, TTFT and E2E (ms).
type LoopSample struct {
	Slot, Generation         int
	ArrivalMs, TTFTMs, E2EMs float64
}

// Window is the steady measurement window of one closed-loop run: generations
// [Start, Start+Length) of every slot. Found reports that a limit cycle of Period
// generations was detected at Start (Length is then a whole number of periods ≥ the
// requested window); otherwise Start = horizon − Length (no repetition before the
// horizon). SpreadMs and Phase place the first requests of that run's clients
// (ClientPhases; spread 0: the burst).
type Window struct {
	Start    int     `json:"start"`
	Length   int     `json:"length"`
	Period   int     `json:"period,omitempty"`
	Found    bool    `json:"limit_cycle"`
	Horizon  int     `json:"horizon"`
	SpreadMs float64 `json:"spread_ms,omitempty"`
	Phase    int     `json:"phase,omitempty"`
	// StatePeriodPasses and StatePeriodMs are the period of the scheduler-state cycle
	// the run was measured on (statecycle.go; 0 when the generation rule decided):
	// the steady requests are those that finished in StatePeriods such periods and
	// Start, Length span their generations (Period is 0: no generation repeats).
	StatePeriodPasses int     `json:"state_period_passes,omitempty"`
	StatePeriodMs     float64 `json:"state_period_ms,omitempty"`
	StatePeriods      int     `json:"state_periods,omitempty"`
	// StateFromMs and StateToMs bound those periods (scheduler clock): the steady
	// requests finished in (StateFromMs, StateToMs], the ITL is every gap emitted
	// in it.
	StateFromMs float64 `json:"state_from_ms,omitempty"`
	StateToMs   float64 `json:"state_to_ms,omitempty"`
}

// cycleDetector applies the rule online: samples arrive in completion order and
// each generation is checked as soon as all of its slots have finished
// (generations complete in order: a slot's generation g finishes before its g+1).
type cycleDetector struct {
	c, win, horizon int
	sig             [][]float64 // per generation: 3 values per slot (arrival, ttft, e2e)
	srt             [][]float64 // per generation: the sorted pattern (lazily)
	scale           []float64   // per generation with a sorted pattern: match's tolerance scale
	have            []int       // slots filled per generation
	complete        int         // generations 0 … complete−1 are complete
	w               Window
	decided         bool
}

func newCycleDetector(c, win, horizon int) *cycleDetector {
	return &cycleDetector{c: c, win: win, horizon: horizon, complete: 1} // generation 0 is the transient
}

// add records one finished request of generation ≥ 1.
func (d *cycleDetector) add(slot, gen int, arrival, ttft, e2e float64) {
	for len(d.sig) <= gen {
		d.sig = append(d.sig, make([]float64, 3*d.c))
		d.have = append(d.have, 0)
	}
	s := d.sig[gen]
	s[3*slot], s[3*slot+1], s[3*slot+2] = arrival, ttft, e2e
	d.have[gen]++
	for d.complete < len(d.have) && d.have[d.complete] == d.c {
		d.check(d.complete)
		d.complete++
	}
}

// check decides the window at the completion of generation g (once).
func (d *cycleDetector) check(g int) {
	if d.decided {
		return
	}
	for p := 1; g-p >= 1; p++ { // the smallest period first; generation 0 is the transient
		if d.match(g, g-p) {
			d.w = Window{Start: g - p, Period: p, Length: p * ceilDiv(d.win, p), Found: true, Horizon: d.horizon}
			d.decided = true
			return
		}
	}
	if g+1 >= d.horizon {
		d.w = Window{Start: d.horizon - d.win, Length: d.win, Horizon: d.horizon}
		d.decided = true
	}
}

// match reports that generations a and b have the same pattern up to a time shift
// and a relabelling of the slots (requests that return together may swap slots
// from one period to the next): the (arrival offset, TTFT, E2E) triples, sorted,
// agree within the tolerance.
func (d *cycleDetector) match(a, b int) bool {
	sa, sb := d.sorted(a), d.sorted(b)
	tol := cycleTol * d.scale[a]
	for i := range sa {
		if math.Abs(sa[i]-sb[i]) > tol {
			return false
		}
	}
	return true
}

// sorted returns generation g's triples with arrivals relative to the earliest,
// sorted by (offset, TTFT, E2E), and notes its tolerance scale — the largest
// offset or E2E, at least 1 (computed once per generation).
func (d *cycleDetector) sorted(g int) []float64 {
	for len(d.srt) <= g {
		d.srt = append(d.srt, nil)
		d.scale = append(d.scale, 0)
	}
	if d.srt[g] != nil {
		return d.srt[g]
	}
	s := d.sig[g]
	m := math.Inf(1)
	for i := 0; i < d.c; i++ {
		m = math.Min(m, s[3*i])
	}
	idx := make([]int, d.c)
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(x, y int) int {
		for k := 0; k < 3; k++ {
			if c := cmp.Compare(s[3*x+k], s[3*y+k]); c != 0 {
				return c
			}
		}
		return 0
	})
	out := make([]float64, 3*d.c)
	for j, i := range idx {
		out[3*j], out[3*j+1], out[3*j+2] = s[3*i]-m, s[3*i+1], s[3*i+2]
	}
	scale := 1.0
	for i := 0; i < d.c; i++ {
		scale = math.Max(scale, math.Max(out[3*i+2], out[3*i]))
	}
	d.srt[g], d.scale[g] = out, scale
	return out
}

// ready reports that the window is decided and all its generations have finished.
func (d *cycleDetector) ready() bool {
	return d.decided && d.complete >= d.w.Start+d.w.Length
}

// SteadyWindow applies the evaluator's limit-cycle rule to the finished requests of
// a closed loop of `clients` slots: the first generation g ≥ 2 whose per-slot
// pattern repeats an earlier generation g − p ≥ 1 (smallest p) starts the window
// at g − p, Length = p·⌈window/p⌉; with no repetition among the generations below
// horizon, the window is [horizon − window, horizon). Generations that are not
// complete (some slot missing) end the search, as in the evaluator.
func SteadyWindow(samples []LoopSample, clients, window, horizon int) Window {
	d := newCycleDetector(clients, window, horizon)
	maxGen := -1
	for _, s := range samples {
		maxGen = max(maxGen, s.Generation)
	}
	d.sig = make([][]float64, maxGen+1)
	d.have = make([]int, maxGen+1)
	for g := range d.sig {
		d.sig[g] = make([]float64, 3*clients)
	}
	for _, s := range samples {
		if s.Slot < 0 || s.Slot >= clients || s.Generation < 1 {
			continue
		}
		sg := d.sig[s.Generation]
		sg[3*s.Slot], sg[3*s.Slot+1], sg[3*s.Slot+2] = s.ArrivalMs, s.TTFTMs, s.E2EMs
		d.have[s.Generation]++
	}
	for d.complete < len(d.have) && d.have[d.complete] == clients && !d.decided {
		d.check(d.complete)
		d.complete++
	}
	if !d.decided { // the records end before the horizon: the last complete generations
		start := max(1, d.complete-window)
		return Window{Start: start, Length: d.complete - start, Horizon: d.complete}
	}
	return d.w
}

// windowGenerations is the requested steady window per slot of a closed loop of C
// clients: max(8, ⌈128/C⌉) generations (≥ 128 steady requests), or o's override.
func windowGenerations(c int, o Options) int {
	if o.WindowGenerations > 0 {
		return o.WindowGenerations
	}
	return max(defaultWindowMin, ceilDiv(defaultWindowReqs, c))
}

// WindowGenerations is the steady window requested per run of a closed loop of c
// clients under the default options: max(8, ⌈128/c⌉) generations for the burst
// (phases = 0), ⌈that/phases⌉ for each stagger phase (before rounding up to whole
// limit-cycle periods). The oracle gate measures the DES with the same numbers.
func WindowGenerations(c, phases int) int {
	w := windowGenerations(c, Options{})
	if phases > 0 {
		w = ceilDiv(w, phases)
	}
	return w
}
