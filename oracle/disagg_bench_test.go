package oracle

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/engine"
)

// BenchmarkDisaggClosed is the disaggregated DES per simulated request (target ≤
// 20 µs): 2P2D vLLM, C = 64, isl 2048, osl 256, 16 generations per client
// (1024 requests, 262k output tokens). ns/op is per request.
func BenchmarkDisaggClosed(b *testing.B) {
	c := disaggTest(2, 2, engine.VLLM)
	c.Prefill.Engine.SetGPUBlocks(64 * 150)
	c.Decode.Engine.SetGPUBlocks(64 * 150)
	c.Fabric.InterNodeGBps = 50
	cl := ClosedLoop{Shape: Shape{ISL: 2048, OSL: 256}, Clients: 64, Generations: 16, KeepBusy: true}
	n := 0
	b.ReportAllocs()
	for b.Loop() {
		d, err := NewDisagg(c)
		if err != nil {
			b.Fatal(err)
		}
		res, err := d.RunClosedLoop(context.Background(), cl)
		if err != nil {
			b.Fatal(err)
		}
		n += len(res.Requests)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/request")
	b.ReportMetric(float64(n)/float64(b.N), "requests/op")
}
