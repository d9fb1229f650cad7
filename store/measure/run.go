package measure

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// How a measured closed-loop run was run: its request count and warm-up, so the
// prediction is of that run (queueing.FiniteRun) rather than of the steady state.

// aiconfigurator's generated benchmark (generator/config/backend_templates/
// benchmark/bench_run.sh.j2 at the commit PROVENANCE.md names): for each client
// concurrency C, `aiperf profile --concurrency C --num-requests C·20
// --warmup-request-count C·2` (BENCH_MULTI_ROUND defaults to 20). aiperf waits for
// every warm-up response before the profiling phase, which starts with C requests
// at once and reports statistics over the C·20 profiled requests.
const (
	AICBenchRounds       = 20
	AICBenchWarmupRounds = 2
)

// Run is the request schedule of a measured closed-loop run, per aggregated
// worker: Requests measured after Warmup drained warm-up requests. Source says
// where the counts come from.
type Run struct {
	Requests, Warmup int
	Source           string
}

// BenchmarkRun returns the run that produced m, per worker of pp·dp = workers
// (the clients split evenly over them; a disaggregated deployment is one tandem,
// workers = 1), or false when the file does not say (an
// open loop — OpenLoop — or a vllm-bench / AIPerf file without a request
// count): then the
// steady state is what can be predicted. aic-silicon rows were measured by
// aiconfigurator's benchmark (AICBenchRounds rounds per client); vllm bench serve
// and AIPerf files state their own num_prompts / request_count (no warm-up known).
// A deployment file's benchmark (Deployment.Benchmark) overrides the rounds and
// warm-up; a file's own request count still wins.
func (m *Measurement) BenchmarkRun(workers int) (Run, bool) {
	if m.Concurrency <= 0 || m.OpenLoop() || (m.Mode != "agg" && m.Mode != "disagg") {
		return Run{}, false
	}
	workers = max(workers, 1)
	perWorker := func(n int) int { return (n + workers - 1) / workers }
	if b := m.Benchmark; b != nil && b.Rounds > 0 {
		// The deployment file says how the run was driven (Benchmark): its rounds
		// per client, unless the file counts its requests itself.
		c := perWorker(m.Concurrency)
		run := Run{Requests: b.Rounds * c, Warmup: b.WarmupRounds * c,
			Source: fmt.Sprintf("deployment file benchmark %s(%d rounds, %d warm-up rounds)", toolLabel(b.Tool), b.Rounds, b.WarmupRounds)}
		if m.Format != FormatAICSilicon && m.NumPrompts > 0 {
			run.Requests = perWorker(m.NumPrompts)
		}
		return run, true
	}
	switch m.Format {
	case FormatAICSilicon:
		c := perWorker(m.Concurrency)
		return Run{Requests: AICBenchRounds * c, Warmup: AICBenchWarmupRounds * c, Source: "aiconfigurator benchmark (aiperf, 20 rounds, 2 warm-up rounds)"}, true
	case FormatVLLMBench, FormatAIPerf:
		if m.NumPrompts <= 0 {
			return Run{}, false
		}
		return Run{Requests: perWorker(m.NumPrompts), Source: m.Format + " request count"}, true
	}
	return Run{}, false
}

// OpenLoop reports a run whose requests were sent by an arrival process rather
// than by clients in a loop: a finite request rate (with or without a client
// concurrency bound, OpenBound), or every request at once (AllAtOnce).
func (m *Measurement) OpenLoop() bool { return m.RequestRate > 0 || m.AllAtOnce() || m.Ramped() }

// Ramped reports a run whose request rate ramped up (vllm bench serve
// --ramp-up-strategy with --ramp-up-start-rps / --ramp-up-end-rps; its
// request_rate is inf): an open-loop run, its sends spaced by OpenArrivals.
func (m *Measurement) Ramped() bool {
	r, ok := m.Extra["ramp_up_strategy"]
	return ok && r != nil
}

// OpenBound is an open-loop run's client concurrency bound (vllm bench serve
// --max-concurrency beside a request rate or a ramp), 0 without one.
func (m *Measurement) OpenBound() int {
	if m.RequestRate > 0 || m.Ramped() {
		return m.Concurrency
	}
	return 0
}

// AllAtOnce reports a run that sent every request at once (vllm bench serve's
// default load: request rate inf without --max-concurrency), stored as the
// closed loop of num_prompts clients that it is: an open run at an infinite
// rate, its in-flight requests bounded by the engine alone.
func (m *Measurement) AllAtOnce() bool {
	b, _ := m.Extra["all_at_once"].(bool)
	return b
}

// Arrivals is how an open-loop run spaced its sends: Poisson (the zero value),
// gamma gaps of GammaShape (vllm bench serve --burstiness, AIPerf
// --arrival-pattern gamma --arrival-smoothness), or Constant (AIPerf
// --arrival-pattern constant); at a ramped rate when Ramp is set (vllm bench
// serve --ramp-up-strategy linear|exponential from RampStartRPS to RampEndRPS,
// queueing.FiniteRun.Ramp).
type Arrivals struct {
	GammaShape               float64
	Constant                 bool
	Ramp                     string
	RampStartRPS, RampEndRPS float64
}

// OpenArrivals is how a run at a request rate or a ramp spaced its sends (the
// zero value for any other run), or why they cannot be predicted ("" when they
// can): a ramp other than linear or exponential, or without its rates, from 0,
// downwards or beside a finite request rate (vllm bench serve refuses those), an
// arrival pattern other than poisson, gamma or constant, a gamma pattern without
// its smoothness, a shape outside (0, 1e4].
func (m *Measurement) OpenArrivals() (a Arrivals, why string) {
	if m.Ramped() {
		if a, why = m.rampArrivals(); why != "" {
			return a, why
		}
	} else if m.RequestRate <= 0 {
		return a, ""
	}
	shape := func(key string) (float64, string) {
		v, ok := extraNum(m.Extra[key])
		if !ok || !(v > 0) || v > 1e4 {
			return 0, fmt.Sprintf("%s %s: want a gamma shape in (0, 1e4]", key, quoteValue(m.Extra[key]))
		}
		return v, ""
	}
	if _, ok := m.Extra["burstiness"]; ok && m.Extra["burstiness"] != nil {
		b, why := shape("burstiness")
		if why != "" {
			return a, why
		}
		if b != 1 {
			a.GammaShape = b
		}
	}
	for _, k := range []string{"arrival_pattern", "request_rate_mode"} {
		p, ok := m.Extra[k].(string)
		if !ok {
			continue
		}
		switch strings.ToLower(p) {
		case "", "poisson":
		case "constant":
			a.Constant = true
		case "gamma":
			if _, ok := m.Extra["arrival_smoothness"]; !ok {
				return a, k + " gamma without arrival_smoothness: the gamma shape is not stated"
			}
			b, why := shape("arrival_smoothness")
			if why != "" {
				return a, why
			}
			if b != 1 {
				a.GammaShape = b
			}
		default:
			return a, fmt.Sprintf("%s %s: poisson, gamma and constant sends are modelled", k, quoteValue(p))
		}
	}
	return a, ""
}

// aiperfLoads are AIPerf load-generator options (input_config.loadgen) that
// send a measured run's requests in a way no FiniteRun represents, with what
// each does: kept in Extra by the reader, refused by LoadUnmodelled. Warm-up
// options are not among them (the warm-up is excluded from the statistics and
// drained first).
var aiperfLoads = []struct{ key, what string }{
	{"prefill_concurrency", "holds a request until fewer than that many wait for their first token"},
	{"concurrency_ramp_duration", "ramps the clients from 1 over that many seconds"},
	{"prefill_concurrency_ramp_duration", "ramps the prefill concurrency limit over that many seconds"},
	{"request_rate_ramp_duration", "ramps the rate over that many seconds of wall time"},
	{"user_centric_rate", "sends per-user sessions with fixed turn gaps"},
	{"request_cancellation_rate", "cancels that percentage of requests"},
}

// LoadUnmodelled says why the run's load cannot be predicted as it was sent
// ("" when it can): AIPerf's prefill concurrency limit, its time-based ramps of
// the clients or the rate (unlike vllm bench serve's ramp by request progress,
// Ramped), user-centric sessions, cancelled requests, and a fixed schedule
// replaying a dataset's timestamps (replay the trace instead).
func (m *Measurement) LoadUnmodelled() string {
	for _, l := range aiperfLoads {
		if v, ok := m.Extra[l.key]; ok && v != nil {
			return fmt.Sprintf("aiperf %s %s: %s, which the model does not represent", l.key, quoteValue(v), l.what)
		}
	}
	if m.Extra["fixed_schedule"] == true {
		return "aiperf fixed schedule (--fixed-schedule or a mooncake_trace dataset): the requests replay the dataset's timestamps; import the trace and replay it (aicdb trace) instead"
	}
	return ""
}

// rampArrivals reads a ramped run's strategy and rates (Ramped), or why they
// cannot be predicted.
func (m *Measurement) rampArrivals() (a Arrivals, why string) {
	r := m.Extra["ramp_up_strategy"]
	s, _ := r.(string)
	switch a.Ramp = strings.ToLower(s); a.Ramp {
	case "linear", "exponential":
	default:
		return Arrivals{}, fmt.Sprintf("ramp_up_strategy %s: linear and exponential ramps are modelled", quoteValue(r))
	}
	start, ok1 := extraNum(m.Extra["ramp_up_start_rps"])
	end, ok2 := extraNum(m.Extra["ramp_up_end_rps"])
	switch {
	case !ok1 || !ok2:
		return Arrivals{}, fmt.Sprintf("ramp_up_strategy %s without ramp_up_start_rps and ramp_up_end_rps: the ramp's rates are not stated", a.Ramp)
	case !(start > 0) || math.IsInf(start, 0):
		return Arrivals{}, fmt.Sprintf("ramp_up_start_rps %s: want a finite rate > 0 (vllm bench serve divides by it)", quoteValue(m.Extra["ramp_up_start_rps"]))
	case !(end >= start) || math.IsInf(end, 0):
		return Arrivals{}, fmt.Sprintf("ramp_up_end_rps %s: want a finite rate ≥ ramp_up_start_rps %s", quoteValue(m.Extra["ramp_up_end_rps"]), quoteValue(m.Extra["ramp_up_start_rps"]))
	case m.RequestRate > 0:
		return Arrivals{}, fmt.Sprintf("ramp_up_strategy %s beside request_rate %v: vllm bench serve runs a ramp at rate inf; the file contradicts itself", a.Ramp, m.RequestRate)
	}
	a.RampStartRPS, a.RampEndRPS = start, end
	return a, ""
}

// extraNum reads a number kept in Extra: a json.Number from a parsed file, a
// float64 from a stored row.
func extraNum(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// quoteValue prints a file's value in a one-line reason: numbers and plain words
// as they are, anything else quoted (a newline never reaches the reason).
func quoteValue(v any) string {
	s := fmt.Sprint(v)
	for _, r := range s {
		if !(r == '.' || r == '-' || r == '_' || r == '+' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// toolLabel is a benchmark tool's name and a space, or "" without one.
func toolLabel(tool string) string {
	if tool == "" {
		return ""
	}
	return tool + " "
}
