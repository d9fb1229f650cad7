package measure

import (
	"encoding/json"
	"fmt"
	"strings"
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
// open loop — a request rate, with or without a concurrency bound: see
// OpenArrivals — or a vllm-bench / AIPerf file without a request count): then the
// steady state is what can be predicted. aic-silicon rows were measured by
// aiconfigurator's benchmark (AICBenchRounds rounds per client); vllm bench serve
// and AIPerf files state their own num_prompts / request_count (no warm-up known).
func (m *Measurement) BenchmarkRun(workers int) (Run, bool) {
	if m.Concurrency <= 0 || m.RequestRate > 0 || (m.Mode != "agg" && m.Mode != "disagg") {
		return Run{}, false
	}
	workers = max(workers, 1)
	perWorker := func(n int) int { return (n + workers - 1) / workers }
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

// OpenArrivals reports whether m is an open-loop run (a finite request rate, with
// or without a client concurrency bound) and, for one, why its sends cannot be
// predicted as Poisson arrivals ("" when they can): vllm bench serve's
// burstiness other than 1 (gamma gaps) or a ramp-up strategy (a rate that
// changes during the run), AIPerf's arrival pattern other than poisson.
func (m *Measurement) OpenArrivals() (open bool, why string) {
	if m.RequestRate <= 0 {
		return false, ""
	}
	if b, ok := m.Extra["burstiness"]; ok && b != nil {
		// A parsed file holds a json.Number, a stored row a float64.
		f, ok := b.(float64)
		if n, isNum := b.(json.Number); isNum {
			var err error
			f, err = n.Float64()
			ok = err == nil
		}
		if !ok || f != 1 {
			return true, fmt.Sprintf("burstiness %v: gamma-distributed sends are not modelled (Poisson sends, burstiness 1, are)", b)
		}
	}
	if r, ok := m.Extra["ramp_up_strategy"]; ok && r != nil {
		return true, fmt.Sprintf("ramp_up_strategy %v: a request rate that changes during the run is not modelled", r)
	}
	for _, k := range []string{"arrival_pattern", "request_rate_mode"} {
		if p, ok := m.Extra[k].(string); ok && !strings.EqualFold(p, "poisson") {
			return true, fmt.Sprintf("%s %s: only Poisson sends are modelled", k, p)
		}
	}
	return true, ""
}
