package oracle_test

import (
	"context"
	"syscall"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/oracle"
	"github.com/aicdb/aicdb/queueing/timing"
)

// benchEngine is an H100-class vLLM default (budget 8192, 256 seqs, block 16) with a
// pool that holds every running request.
func benchEngine() engine.Spec {
	return engine.Spec{Backend: engine.VLLM, MaxNumBatchedTokens: 8192, MaxNumSeqs: 256,
		BlockSize: 16, KVCapacityTokens: 39999 * 16, EnableChunkedPrefill: true, EnablePrefixCaching: true}
}

// benchTiming is a roofline-shaped synthetic pass time.
var benchTiming = timing.Linear{BaseMs: 8, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.00002}

var benchShape = oracle.Shape{ISL: 2048, OSL: 256, Prefix: 512, Prewarm: true}

// capacityRPS measures the saturated throughput (closed loop at max_num_seqs).
func capacityRPS(b *testing.B) float64 {
	s, err := oracle.New(benchEngine(), benchTiming, oracle.Options{})
	if err != nil {
		b.Fatal(err)
	}
	res, err := s.RunClosedLoop(context.Background(), oracle.ClosedLoop{Shape: benchShape, Clients: 256, Generations: 6})
	if err != nil {
		b.Fatal(err)
	}
	// completions in the second half of the run over its duration
	n, t0 := 0, res.EndMs/2
	for _, r := range res.Requests {
		if r.FinishMs > t0 {
			n++
		}
	}
	return float64(n) / ((res.EndMs - t0) / 1000)
}

// BenchmarkVLLM10k is the floor: 10,000 requests (isl 2048, osl 256, prefix
// caching on with a 512-token shared prefix), Poisson at 70 % of capacity. The goal
// is ~10 µs of CPU per simulated request (≤ 2 s per op is the floor).
func BenchmarkVLLM10k(b *testing.B) {
	rate := 0.7 * capacityRPS(b)
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	var outTok, simMs float64
	for i := 0; i < b.N; i++ {
		s, err := oracle.New(benchEngine(), benchTiming, oracle.Options{})
		if err != nil {
			b.Fatal(err)
		}
		res, err := s.RunOpenLoop(context.Background(), oracle.OpenLoop{Shape: benchShape, RateRPS: rate, NumRequests: 10000, Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		outTok, simMs = 0, res.EndMs
		for _, r := range res.Requests {
			outTok += float64(len(r.TokenTimesMs))
		}
	}
	b.ReportMetric(outTok/(simMs/1000), "sim_out_tok/s")
	b.ReportMetric(rate, "rate_rps")
	b.StopTimer()
	// process CPU time (user + system), robust to other processes sharing the cores
	b.ReportMetric((cpuTime()-cpu0)/float64(b.N)/10000*1e6, "cpu_us/req")
}

// cpuTime returns the process's user + system CPU seconds.
func cpuTime() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
