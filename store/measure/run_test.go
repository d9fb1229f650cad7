package measure

import "testing"

func TestBenchmarkRun(t *testing.T) {
	for _, c := range []struct {
		m       Measurement
		workers int
		want    Run
		ok      bool
	}{
		{Measurement{Format: FormatAICSilicon, Concurrency: 64, Deployment: Deployment{Mode: "agg"}}, 1, Run{Requests: 1280, Warmup: 128}, true},
		{Measurement{Format: FormatAICSilicon, Concurrency: 64, Deployment: Deployment{Mode: "agg"}}, 2, Run{Requests: 640, Warmup: 64}, true},
		{Measurement{Format: FormatVLLMBench, Concurrency: 32, NumPrompts: 320, Deployment: Deployment{Mode: "agg"}}, 1, Run{Requests: 320}, true},
		{Measurement{Format: FormatAIPerf, Concurrency: 8, NumPrompts: 0, Deployment: Deployment{Mode: "agg"}}, 1, Run{}, false},
		{Measurement{Format: FormatVLLMBench, RequestRate: 4, NumPrompts: 100, Deployment: Deployment{Mode: "agg"}}, 1, Run{}, false},
		// A disaggregated deployment is one tandem: the whole run, 20·C requests.
		{Measurement{Format: FormatAICSilicon, Concurrency: 64, Deployment: Deployment{Mode: "disagg"}}, 1, Run{Requests: 1280, Warmup: 128}, true},
		{Measurement{Format: FormatAICSilicon, Concurrency: 64, Deployment: Deployment{Mode: "static"}}, 1, Run{}, false},
		// A deployment file's benchmark: its rounds per client (InferenceMAX's 10,
		// no warm-up), a file's own request count still winning.
		{Measurement{Format: FormatAICSilicon, Concurrency: 64, Deployment: Deployment{Mode: "agg", Benchmark: &Benchmark{Rounds: 10}}}, 1, Run{Requests: 640}, true},
		{Measurement{Format: FormatAICSilicon, Concurrency: 64, Deployment: Deployment{Mode: "agg", Benchmark: &Benchmark{Rounds: 10, WarmupRounds: 1}}}, 2, Run{Requests: 320, Warmup: 32}, true},
		{Measurement{Format: FormatVLLMBench, Concurrency: 32, NumPrompts: 320, Deployment: Deployment{Mode: "agg", Benchmark: &Benchmark{Rounds: 5, WarmupRounds: 2}}}, 1, Run{Requests: 320, Warmup: 64}, true},
		{Measurement{Format: FormatAIPerf, Concurrency: 8, Deployment: Deployment{Mode: "agg", Benchmark: &Benchmark{Rounds: 5}}}, 1, Run{Requests: 40}, true},
	} {
		got, ok := c.m.BenchmarkRun(c.workers)
		got.Source = ""
		if ok != c.ok || got != c.want {
			t.Errorf("%s c%d n%d workers %d: %+v %v, want %+v %v", c.m.Format, c.m.Concurrency, c.m.NumPrompts, c.workers, got, ok, c.want, c.ok)
		}
	}
}
