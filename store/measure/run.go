package measure

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
// open loop, or a vllm-bench / AIPerf file without a request count): then the
// steady state is what can be predicted. aic-silicon rows were measured by
// aiconfigurator's benchmark (AICBenchRounds rounds per client); vllm bench serve
// and AIPerf files state their own num_prompts / request_count (no warm-up known).
func (m *Measurement) BenchmarkRun(workers int) (Run, bool) {
	if m.Concurrency <= 0 || (m.Mode != "agg" && m.Mode != "disagg") {
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
