package oracle

import (
	"context"
	"runtime"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// BenchmarkReplayMooncakeDES replays the Mooncake conversation sample (12,031
// requests, hash ids as block identities) through the DES with SummaryOnly, as
// `aicdb trace replay --tier oracle` does (vLLM, 100,000 blocks, budget 8192, 256
// sequences). It reports the DES's memory per request beyond the trace itself:
// live_B/req is the heap the finished simulator and its result hold once the run
// is over, less an empty simulator's (the KV pool and its hash table, sized by
// num_gpu_blocks, not by the trace), over the requests; B/op and allocs/op are the
// allocation churn of one replay.
func BenchmarkReplayMooncakeDES(b *testing.B) {
	rows := readMooncakeConversation(b)
	eng := engine.Spec{Backend: engine.VLLM, MaxNumBatchedTokens: 8192, MaxNumSeqs: 256, BlockSize: 16, KVCapacityTokens: 99999 * 16,
		EnableChunkedPrefill: true, EnablePrefixCaching: true}
	tm := timing.Linear{BaseMs: 8, PrefillMsPerToken: 0.01, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.00002}
	b.ReportAllocs()
	var live float64
	for b.Loop() {
		b.StopTimer()
		base := heapLive()
		empty, err := New(eng, tm, Options{SummaryOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		fixed := heapLive() - base
		runtime.KeepAlive(empty)
		empty = nil
		base = heapLive()
		b.StartTimer()
		s, err := New(eng, tm, Options{SummaryOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		s.Reserve(len(rows))
		for _, r := range rows {
			if _, err := s.AddShared(workload.Request{ArrivalMs: r.At, PromptLen: r.In, MaxTokens: r.Out},
				SharedPrefix{HashIDs: r.IDs, HashBlock: 512}); err != nil {
				b.Fatal(err)
			}
		}
		res, err := s.Run(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if _, err := res.Summary(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		live = (heapLive() - base - fixed) / float64(len(rows))
		runtime.KeepAlive(s)
		runtime.KeepAlive(res)
		b.StartTimer()
	}
	b.ReportMetric(live, "live_B/req")
}

// heapLive is the live heap after a full collection, in bytes.
func heapLive() float64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc)
}
