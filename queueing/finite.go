package queueing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// A benchmark run as it was run (issue 9 acceptance on measured rows). Closed-loop
// benchmarks do not measure the limit cycle: `vllm bench serve --max-concurrency C
// --num-prompts N` and `aiperf profile --concurrency C --request-count N` send C
// requests at once on an idle engine (every client's first request is ready before
// the first schedule: a burst), send the next request as each one completes until
// N have been sent, and report statistics over all N requests. aiconfigurator's
// generated benchmark (bench_run.sh) runs aiperf with N = 20·C and a warm-up of
// 2·C requests that aiperf completes (it waits for every warm-up response) and
// excludes before the profiling phase starts, so the measured run starts on an idle
// engine again. With a few requests per client the burst's queued prefills weigh
// 1/(N/C) of the mean TTFT, and the cohorts the burst forms persist for most of
// the run (QUEUEING.md §4: they take 8–30 generations to dissolve); the
// steady-state mean is the limit of N → ∞ only.

// FiniteRun is the request schedule of one closed-loop benchmark run.
type FiniteRun struct {
	// Requests is the number of measured requests (num_prompts / request count).
	Requests int `json:"requests"`
	// Warmup is the number of warm-up requests completed (and drained) before the
	// measured run; they are excluded from the statistics. The measured run starts
	// on an idle engine either way and the model carries no state over from the
	// warm-up: it assumes no prompt repeats (no prefix-cache hit across requests).
	// That is an assumption, not a client rule: aiperf's synthetic dataset is
	// --num-dataset-entries prompts (default 100), each request — warm-up or
	// profiled — drawing one uniformly at random, so with the engine's prefix cache
	// on (vLLM V1's default; aiconfigurator leaves it on for vLLM and renders
	// TensorRT-LLM's enable_block_reuse false) a repeated prompt would skip its
	// prefill; the measured rows contradict a 100-entry pool (docs/validation.md,
	// "Round 3 (vLLM)"). Recorded for provenance.
	Warmup int `json:"warmup,omitempty"`
	// Desync is how the run is modelled, not how it was run: the clients
	// desynchronise after the burst instead of staying locked for the whole run
	// (QuantitativeFinite, finiteDesync). The tandem's finite run has no such
	// model and refuses it.
	Desync bool `json:"desync,omitempty"`
	// StaggerPhases > 0 evaluates a Desync run's steady part over that many
	// client phases instead of Options.StaggerPhases: a cheaper objective for a
	// calibration's descent (refine/calibrate FitOptions.DescentClients); every
	// prediction aicdb reports or stores uses the options'. Not in Label.
	StaggerPhases int `json:"stagger_phases,omitempty"`

	// Open marks an open-loop run (finite_open.go): the requests are sent at the
	// instants of an arrival process, not by clients in a loop — `vllm bench
	// serve --request-rate R` (with or without --max-concurrency), its default
	// request rate inf without --max-concurrency (every request at once), and
	// `aiperf profile --request-rate R`. The fields below are read only then.
	Open bool `json:"open,omitempty"`
	// RateRPS is the Poisson rate of the sends (requests/s, the W1 stream's
	// exponential gaps); 0: every request is sent at time 0 (rate inf).
	RateRPS float64 `json:"rate_rps,omitempty"`
	// MaxConcurrency > 0 bounds the requests in flight (the client's semaphore,
	// vllm bench serve --max-concurrency): a request whose instant comes while
	// MaxConcurrency are in flight waits, first come first served, and is sent when
	// one completes; its TTFT counts from its send. 0: no bound.
	MaxConcurrency int `json:"max_concurrency,omitempty"`
	// GammaShape > 0 (≠ 1) draws the gaps from a gamma distribution of that
	// shape and the same mean (vllm bench serve --burstiness, AIPerf
	// --arrival-pattern gamma --arrival-smoothness); 0 or 1: Poisson.
	GammaShape float64 `json:"gamma_shape,omitempty"`
	// Constant sends the requests 1/RateRPS apart (AIPerf --arrival-pattern
	// constant): one deterministic path.
	Constant bool `json:"constant,omitempty"`
	// Ramp, when set, makes the rate change during the run (vllm bench serve
	// --ramp-up-strategy linear|exponential --ramp-up-start-rps RateRPS
	// --ramp-up-end-rps RampEndRPS): request j's gap is drawn at the rate reached
	// at progress j/(Requests − 1) — start + (end − start)·p linearly, start ·
	// (end/start)^p exponentially — as the client draws it (rampRate).
	Ramp       string  `json:"ramp,omitempty"`
	RampEndRPS float64 `json:"ramp_end_rps,omitempty"`
	// Paths > 1 pools that many independent arrival paths (workload.ArrivalPaths
	// FirstPath … FirstPath+Paths−1): one measured run samples one Poisson path,
	// and the prediction is the expectation over them, not one path's sampling
	// error. 0 or 1: path FirstPath alone.
	Paths     int `json:"paths,omitempty"`
	FirstPath int `json:"first_path,omitempty"`

	// Shapes, when set, are the run's request lengths as equally weighted
	// quantile points (W2: workload.Spec ISLQuantiles / OSLQuantiles), encoded by
	// EncodeShapes: a benchmark's dataset is part of how it was run (vllm bench
	// serve --save-detailed lists every request's lengths). The workload's ISL and
	// OSL stay the means. Closed and open runs alike. A string, not slices, so a
	// FiniteRun stays comparable (the calibration fit keys its runs by value).
	Shapes string `json:"shapes,omitempty"`
}

// maxShapePoints bounds the quantile points per side of FiniteRun.Shapes.
const maxShapePoints = 64

// EncodeShapes returns FiniteRun.Shapes for prompt and output quantile points
// ("i1,i2,…;o1,o2,…"; either side may be empty; "" when both are).
func EncodeShapes(isl, osl []int) string {
	if len(isl) == 0 && len(osl) == 0 {
		return ""
	}
	join := func(x []int) string {
		parts := make([]string, len(x))
		for i, v := range x {
			parts[i] = strconv.Itoa(v)
		}
		return strings.Join(parts, ",")
	}
	return join(isl) + ";" + join(osl)
}

// shapeQuantiles decodes f.Shapes (nil, nil when unset).
func (f FiniteRun) shapeQuantiles() (isl, osl []int, err error) {
	if f.Shapes == "" {
		return nil, nil, nil
	}
	sides := strings.Split(f.Shapes, ";")
	if len(sides) != 2 {
		return nil, nil, fmt.Errorf("finite run shapes %q: want prompt points;output points", f.Shapes)
	}
	var out [2][]int
	for i, side := range sides {
		if side == "" {
			continue
		}
		for _, p := range strings.Split(side, ",") {
			v, err := strconv.Atoi(p)
			if err != nil || v < 1 || v > 1<<24 {
				return nil, nil, fmt.Errorf("finite run shapes %q: %q is not a length in 1..%d", f.Shapes, p, 1<<24)
			}
			out[i] = append(out[i], v)
		}
		if len(out[i]) > maxShapePoints {
			return nil, nil, fmt.Errorf("finite run shapes: %d points, at most %d per side", len(out[i]), maxShapePoints)
		}
	}
	return out[0], out[1], nil
}

// WithShapes returns w with f's shape quantiles (W2) when f states them.
func (f FiniteRun) WithShapes(w workload.Spec) (workload.Spec, error) {
	isl, osl, err := f.shapeQuantiles()
	if err != nil {
		return w, err
	}
	if len(isl) > 0 {
		w.ISLQuantiles = isl
	}
	if len(osl) > 0 {
		w.OSLQuantiles = osl
	}
	return w, nil
}

// FiniteAdmitGapMs is how far apart a benchmark run's requests that are sent at
// the same instant reach the scheduler. An engine's HTTP frontend prepares the
// requests it receives one at a time (one event loop: chat template, tokenisation)
// and the engine loop steps as soon as one request is waiting — vLLM's core loop
// absorbs arrivals and runs a pass whenever a request exists (SCHEDULERS.md §2.2),
// TensorRT-LLM's executor fetches new requests every iteration (§4.2), SGLang's
// event loop receives them every round (§3.2). So the burst on an idle engine does
// not enter the first pass together: the first request runs alone and the rest
// join the following schedules. Simultaneous sends are admitted first come, first
// served, FiniteAdmitGapMs apart (a tie-breaker far below any pass time, not a
// fitted delay: the outcome does not depend on its value while C·gap is shorter
// than a pass). On a busy engine it moves a request only when a pass boundary
// falls inside the gap.
const FiniteAdmitGapMs = 1e-3

// FiniteAdmission spaces the sends of one benchmark run as the frontend admits
// them (FiniteAdmitGapMs): sends are made in time order, and one made at t
// reaches the scheduler at max(t, the previous one's + FiniteAdmitGapMs). The
// zero value is ready. The calendar, the tandem and both DES drivers share it.
type FiniteAdmission struct {
	last float64
	used bool
}

// At returns when a send made at t reaches the scheduler.
func (a *FiniteAdmission) At(t float64) float64 {
	if a.used {
		t = math.Max(t, a.last+FiniteAdmitGapMs)
	}
	a.last, a.used = t, true
	return t
}

// maxFiniteRequests bounds FiniteRun.Requests (the work guard bounds passes).
const maxFiniteRequests = 1 << 18

// Validate checks the run's counts.
func (f FiniteRun) Validate() error {
	if f.Requests < 1 || f.Requests > maxFiniteRequests {
		return fmt.Errorf("finite run requests = %d: must be in 1..%d (the benchmark's num_prompts / request count)", f.Requests, maxFiniteRequests)
	}
	if f.Warmup < 0 || f.Warmup > maxFiniteRequests {
		return fmt.Errorf("finite run warmup = %d: must be in 0..%d", f.Warmup, maxFiniteRequests)
	}
	if f.StaggerPhases < 0 || f.StaggerPhases > maxStaggerPhases || (f.StaggerPhases > 0 && !f.Desync) {
		return fmt.Errorf("finite run stagger_phases = %d: must be in 0..%d, and only on a desync run", f.StaggerPhases, maxStaggerPhases)
	}
	if _, _, err := f.shapeQuantiles(); err != nil {
		return err
	}
	if !f.Open {
		if f.RateRPS != 0 || f.MaxConcurrency != 0 || f.Paths != 0 || f.FirstPath != 0 || f.GammaShape != 0 || f.Constant || f.Ramp != "" || f.RampEndRPS != 0 {
			return fmt.Errorf("finite run: rate_rps, max_concurrency, gamma_shape, constant, ramp, ramp_end_rps, paths and first_path describe an open-loop run (open: true)")
		}
		return nil
	}
	switch {
	case f.Desync:
		return fmt.Errorf("finite run: desync applies to closed loops (an open run's sends are already independent)")
	case math.IsNaN(f.RateRPS) || math.IsInf(f.RateRPS, 0) || f.RateRPS < 0:
		return fmt.Errorf("finite run rate_rps = %v: must be a finite number ≥ 0 (0: every request at once)", f.RateRPS)
	case f.MaxConcurrency < 0:
		return fmt.Errorf("finite run max_concurrency = %d: must be ≥ 0 (0: no bound)", f.MaxConcurrency)
	case f.RateRPS == 0 && f.MaxConcurrency > 0:
		return fmt.Errorf("finite run: every request at once with max_concurrency %d is the closed loop of %d clients: run it closed (open: false)", f.MaxConcurrency, f.MaxConcurrency)
	case f.Paths < 0 || f.Paths > maxOpenPaths:
		return fmt.Errorf("finite run paths = %d: must be in 0..%d", f.Paths, maxOpenPaths)
	case f.FirstPath < 0 || f.FirstPath > 1<<20:
		return fmt.Errorf("finite run first_path = %d: must be in 0..%d", f.FirstPath, 1<<20)
	case math.IsNaN(f.GammaShape) || f.GammaShape < 0 || f.GammaShape > 1e4:
		return fmt.Errorf("finite run gamma_shape = %v: must be in [0, 1e4] (0: Poisson sends)", f.GammaShape)
	case (f.GammaShape != 0 || f.Constant) && f.RateRPS == 0:
		return fmt.Errorf("finite run: gamma_shape and constant space the sends of a request rate: give rate_rps")
	case f.Constant && (f.GammaShape != 0 || f.Paths > 1 || f.FirstPath != 0):
		return fmt.Errorf("finite run: constant sends are one deterministic path: no gamma_shape, paths or first_path")
	case f.Paths*f.Requests > maxFiniteRequests:
		return fmt.Errorf("finite run: %d paths of %d requests exceed %d simulated requests", f.Paths, f.Requests, maxFiniteRequests)
	}
	return f.validateRamp()
}

// validateRamp checks a ramp-up: linear or exponential from rate_rps > 0 (the
// client divides by the start rate) up to a finite ramp_end_rps ≥ it, on a
// request rate's sends (not constant ones); no end rate without a ramp.
func (f FiniteRun) validateRamp() error {
	switch {
	case f.Ramp == "" && f.RampEndRPS != 0:
		return fmt.Errorf("finite run ramp_end_rps = %v without ramp: give ramp linear or exponential, or drop it", f.RampEndRPS)
	case f.Ramp == "":
		return nil
	case f.Ramp != RampLinear && f.Ramp != RampExponential:
		return fmt.Errorf("finite run ramp = %q: want %s or %s", f.Ramp, RampLinear, RampExponential)
	case !(f.RateRPS > 0):
		return fmt.Errorf("finite run: a %s ramp starts at rate_rps > 0 (vllm bench serve --ramp-up-start-rps; it divides by the start rate), got %v", f.Ramp, f.RateRPS)
	case math.IsNaN(f.RampEndRPS) || math.IsInf(f.RampEndRPS, 0) || f.RampEndRPS < f.RateRPS:
		return fmt.Errorf("finite run ramp_end_rps = %v: must be a finite rate ≥ rate_rps = %v (the ramp's start)", f.RampEndRPS, f.RateRPS)
	case f.Constant:
		return fmt.Errorf("finite run: a ramp spaces a request rate's random sends; constant sends have none")
	}
	return nil
}

// The ramp-up strategies of FiniteRun.Ramp (vllm bench serve --ramp-up-strategy).
const (
	RampLinear      = "linear"
	RampExponential = "exponential"
)

// rampRate is the rate (requests/s) at which ramp f draws request j's gap, j of
// n: vllm bench serve's progress p = j / max(n − 1, 1), start + (end − start)·p
// (linear) or start·(end/start)^p (exponential).
func (f FiniteRun) rampRate(j, n int) float64 {
	p := float64(j) / float64(max(n-1, 1))
	if f.Ramp == RampExponential {
		return f.RateRPS * math.Pow(f.RampEndRPS/f.RateRPS, p)
	}
	return f.RateRPS + (f.RampEndRPS-f.RateRPS)*p
}

// PeakRateRPS is the highest rate of f's sends: the ramp's end rate, else
// RateRPS.
func (f FiniteRun) PeakRateRPS() float64 {
	if f.Ramp != "" {
		return f.RampEndRPS
	}
	return f.RateRPS
}

// ValidateClosedLoop checks the run's counts and that w, the workload it runs,
// is a closed loop.
func (f FiniteRun) ValidateClosedLoop(w workload.Spec) error {
	if w.Concurrency <= 0 {
		return fmt.Errorf("workload: a finite benchmark run needs a closed loop (concurrency > 0), got concurrency %d", w.Concurrency)
	}
	if f.Open {
		return fmt.Errorf("finite run: an open-loop run (request rate or every request at once) where a closed loop is needed")
	}
	return f.Validate()
}

// CheckClientRTT checks a client round trip of ms milliseconds: a finite number in
// [0, 1e6].
func CheckClientRTT(ms float64) error {
	if ms < 0 || math.IsNaN(ms) || math.IsInf(ms, 0) || ms > 1e6 {
		return fmt.Errorf("client_rtt_ms = %v: must be a finite number in [0, 1e6] ms", ms)
	}
	return nil
}

// SetSpan completes a finite run's report: throughput is its n requests and toks
// output tokens over the span from the first send (time 0) to the last
// completion end (how the benchmarks report it), which is also the report's
// window, and the run is recorded.
func (r *Report) SetSpan(f FiniteRun, end, toks float64) {
	if end > 0 {
		r.ThroughputRPS = float64(f.Requests) / end * 1000
		r.OutputTokensPerS = toks / end * 1000
	}
	r.Diagnostics.WindowStartMs, r.Diagnostics.WindowEndMs = 0, end
	r.Diagnostics.FiniteRun = &f
}

// Label is the run's short description ("finite:n=1280,warmup=128"), used to key
// stored predictions of measured runs apart from steady-state ones.
func (f FiniteRun) Label() string {
	l := fmt.Sprintf("finite:n=%d", f.Requests)
	if f.Warmup > 0 {
		l += fmt.Sprintf(",warmup=%d", f.Warmup)
	}
	if f.Desync {
		l += ",desync"
	}
	if f.Shapes != "" {
		h := sha256.Sum256([]byte(f.Shapes))
		l += ",shapes=" + hex.EncodeToString(h[:4])
	}
	if f.Open {
		l += ",open"
		if f.RateRPS > 0 {
			l += ",rate=" + strconv.FormatFloat(f.RateRPS, 'g', -1, 64)
		}
		if f.Constant {
			l += ",constant"
		}
		if f.GammaShape != 0 && f.GammaShape != 1 {
			l += ",gamma=" + strconv.FormatFloat(f.GammaShape, 'g', -1, 64)
		}
		if f.Ramp != "" {
			l += ",ramp=" + f.Ramp + ":" + strconv.FormatFloat(f.RampEndRPS, 'g', -1, 64)
		}
		if f.MaxConcurrency > 0 {
			l += fmt.Sprintf(",cap=%d", f.MaxConcurrency)
		}
		if f.Paths > 1 {
			l += fmt.Sprintf(",paths=%d", f.Paths)
		}
		if f.FirstPath > 0 {
			l += fmt.Sprintf(",first_path=%d", f.FirstPath)
		}
	}
	return l
}

// QuantitativeFinite evaluates the closed loop w (w.Concurrency clients) as the
// benchmark run f: min(C, N) requests are sent together at the start and reach
// the scheduler FiniteAdmitGapMs apart (the additive stages after time 0), each completion sends one more request
// (reaching the scheduler after the turnaround, o.ClientRTTMs and the stages) until
// N have been sent, and the steady columns are the statistics over all N requests
// (TTFT, TPOT and E2E per request, every ITL gap); the transient is the first
// min(C, N) requests. Throughput is N over the run's span, from the first send to
// the last completion (how the benchmarks report it). o.StaggerPhases and the
// window options do not apply: the run is one deterministic burst-started path.
// A run marked f.Desync is the burst followed by desynchronised clients instead
// (finiteDesync).
func QuantitativeFinite(ctx context.Context, w workload.Spec, e engine.Spec, t timing.Timing, o Options, f FiniteRun) (*Report, error) {
	return quantitativeFinite(ctx, w, e, t, o, f, false)
}

// QuantitativeFiniteSummary is QuantitativeFinite without the parts a caller that
// reads only the per-request statistics does not need: the run's ITL
// distribution is not collected (Report.ITL is a point mass at 0) and
// Report.Requests is nil. The TTFT, TPOT and E2E distributions, the throughput
// and the diagnostics are bit-identical to QuantitativeFinite's, at less cost: a
// calibration fit's objective evaluates it many times per row. Not for stored
// results (their ITL columns would read 0); o.RecordTokenTimes is refused. A
// desync run's summary runs its steady part (the stagger mixture) the same way;
// its burst's records are its first requests' statistics, so the report keeps
// those (Requests: the burst's C records).
func QuantitativeFiniteSummary(ctx context.Context, w workload.Spec, e engine.Spec, t timing.Timing, o Options, f FiniteRun) (*Report, error) {
	if o.RecordTokenTimes {
		return nil, inputErr(fmt.Errorf("options record_token_times: a summary run keeps no request records"))
	}
	return quantitativeFinite(ctx, w, e, t, o, f, true)
}

func quantitativeFinite(ctx context.Context, w workload.Spec, e engine.Spec, t timing.Timing, o Options, f FiniteRun, summary bool) (*Report, error) {
	w, err := f.WithShapes(w)
	if err != nil {
		return nil, inputErr(err)
	}
	if f.Open {
		return finiteOpen(ctx, w, e, t, o, f, summary)
	}
	if f.Desync {
		return finiteDesync(ctx, w, e, t, o, f, summary)
	}
	b, err := checkInputs(w, e, t)
	if err != nil {
		return nil, err
	}
	if err := f.ValidateClosedLoop(w); err != nil {
		return nil, inputErr(err)
	}
	if err := CheckClientRTT(o.ClientRTTMs); err != nil {
		return nil, inputErr(fmt.Errorf("options %w", err))
	}
	s, col := finiteSim(e, t, o, summary)
	perReq := b.maxISL - w.Prefix + b.maxOSL + 2
	N := f.Requests
	C := min(w.Concurrency, N)
	if err := s.workGuard(N, float64(ceilDiv(N, C)+1)*cyclePasses(s, w, C), C); err != nil {
		return nil, err
	}
	stage := e.StageMs
	delay := w.TurnaroundMs + o.ClientRTTMs + stage
	s.reqs = make([]simReq, 0, N)
	s.maxPasses = N*perReq + 64
	// Arrivals are created in time order (the burst, then completions in time
	// order plus a constant delay): admit them first come, first served.
	var adm FiniteAdmission
	for slot := 0; slot < C; slot++ {
		ri := s.newReq(&w, slot, 0, adm.At(stage))
		s.reqs[ri].transient, s.reqs[ri].steady, s.reqs[ri].bucket = true, true, 0
	}
	done, burstDone := 0, 0
	s.onFinish = func(s *sim, ri int32, now float64) {
		done++
		if s.reqs[ri].gen == 0 {
			burstDone++
		}
		if len(s.reqs) >= N {
			return
		}
		r := s.reqs[ri]
		nri := s.newReq(&w, int(r.slot), int(r.gen)+1, adm.At(now+delay))
		s.reqs[nri].steady, s.reqs[nri].bucket = true, 0
	}
	stop := func() bool { return done == N }
	if o.transientOnly { // finiteDesync: the burst's requests only (the run up to then is the same)
		stop = func() bool { return burstDone == C }
	}
	if err := s.run(ctx, stop); err != nil {
		return nil, err
	}
	rep, err := s.spanReport(col, w, f)
	if err != nil {
		return nil, err
	}
	return rep, finite(rep)
}

// finiteSim is a calendar for one benchmark run under o: token times when
// recorded, the fast path otherwise (unless o turns it off), a summary's
// collection when summary.
func finiteSim(e engine.Spec, t timing.Timing, o Options, summary bool) (*sim, *collector) {
	s := new(sim)
	*s = newSim(e, t)
	s.record = o.RecordTokenTimes
	s.initKV(e.KVCapacityTokens)
	col := &collector{stage: e.StageMs}
	s.onPass = col.onPass
	if !o.RecordTokenTimes && !o.NoFastForward {
		s.fast = col.onFast
	}
	if summary {
		s.summarise()
	}
	return s, col
}

// spanReport is a finished benchmark run's report: every request's statistics
// and ITL gaps, the run's span from the first send (time 0) to the last
// completion as the client sees it (the scheduler's completion + the additive
// stages − the stages before the scheduler: TTFT/E2E count the stages once).
func (s *sim) spanReport(col *collector, w workload.Spec, f FiniteRun) (*Report, error) {
	rep, err := s.report(col, w, -1, -1)
	if err != nil {
		return nil, err
	}
	rep.ITL = col.itlOf(0, 1)
	end, toks := 0.0, 0.0
	for i := range s.reqs {
		end = math.Max(end, s.reqs[i].done)
		toks += float64(s.reqs[i].osl)
	}
	rep.SetSpan(f, end, toks)
	return rep, nil
}
