package queueing

import (
	"context"
	"math"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestKernelMatchesRecursion: a Kernel stepped by an outside clock and fed the
// open-loop evaluator's arrivals reproduces every recorded request's TTFT and
// E2E, for each backend, synchronous and asynchronous (SGLang: the overlap
// scheduler on and off) — the stepping API adds no semantics of its own.
func TestKernelMatchesRecursion(t *testing.T) {
	tm := timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.01, DecodeMsPerRow: 0.05, CtxMsPerToken: 1e-5}
	for _, be := range []engine.Backend{engine.VLLM, engine.TRTLLM, engine.SGLang} {
		for _, async := range []bool{false, true} {
			e, err := engine.Defaults(be, "")
			if err != nil {
				t.Fatal(err)
			}
			e.AsyncScheduling = async
			if be == engine.TRTLLM {
				e.EnableChunkedPrefill = true
			}
			e.MaxNumBatchedTokens, e.MaxNumTokens, e.ChunkedPrefillSize = 2048, 2048, 2048
			w := workload.Spec{ISL: 3000, OSL: 40, RateRPS: 8, NumRequests: 200}
			rep, err := QuantitativeWith(context.Background(), w, e, tm, Options{NoFastForward: true})
			if err != nil {
				t.Fatal(err)
			}
			k, err := NewKernel(e, tm, KernelOptions{})
			if err != nil {
				t.Fatal(err)
			}
			first := map[int]float64{}
			done := map[int]float64{}
			k.OnToken = func(id int, prev, at float64) {
				if prev < 0 {
					first[id] = at
				}
			}
			k.OnFinish = func(id int, at float64) { done[id] = at }
			stream, err := workload.NewArrivalStream(w.RateRPS)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < w.NumRequests; i++ {
				if _, err := k.Inject(KernelRequest{ArrivalMs: stream.Next(), ISL: w.ISL, OSL: w.OSL}); err != nil {
					t.Fatal(err)
				}
			}
			for at := k.NextEventMs(); !math.IsInf(at, 1); at = k.NextEventMs() {
				if err := k.Step(at); err != nil {
					t.Fatal(err)
				}
			}
			if len(done) != w.NumRequests {
				t.Fatalf("%s async=%v: %d of %d finished", be, async, len(done), w.NumRequests)
			}
			if len(rep.Requests) < 150 {
				t.Fatalf("%s: only %d records to compare", be, len(rep.Requests))
			}
			for _, r := range rep.Requests {
				id := r.Generation // open loop: the creation index
				if math.Abs(first[id]-r.ArrivalMs-r.TTFTMs) > 1e-6 || math.Abs(done[id]-r.ArrivalMs-r.E2EMs) > 1e-6 {
					t.Fatalf("%s async=%v request %d: kernel TTFT %v E2E %v, recursion %v %v", be, async, id,
						first[id]-r.ArrivalMs, done[id]-r.ArrivalMs, r.TTFTMs, r.E2EMs)
				}
			}
		}
	}
}

// TestKernelPrefillNoDiscardedPass: under the SGLang overlap scheduler (§3.2) a
// request that finishes in pass k still runs in pass k+1 — on an aggregated
// kernel. A disaggregated prefill worker's finished prompts never join a running
// batch (S-R2), with a pull (Hold) or a push connector alike: one lone prompt of
// one output token is one pass there, two passes elsewhere.
func TestKernelPrefillNoDiscardedPass(t *testing.T) {
	tm := timing.Linear{BaseMs: 4, PrefillMsPerToken: 0.01, DecodeMsPerRow: 0.05}
	e, err := engine.Defaults(engine.SGLang, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		o      KernelOptions
		passes int
	}{
		{"aggregated", KernelOptions{}, 2},
		{"prefill, push", KernelOptions{Prefill: true}, 1},
		{"prefill, pull", KernelOptions{Prefill: true, Hold: true}, 1},
	} {
		k, err := NewKernel(e, tm, c.o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := k.Inject(KernelRequest{ISL: 100, OSL: 1}); err != nil {
			t.Fatal(err)
		}
		for at := k.NextEventMs(); !math.IsInf(at, 1); at = k.NextEventMs() {
			if err := k.Step(at); err != nil {
				t.Fatal(err)
			}
		}
		if k.Passes() != c.passes {
			t.Errorf("%s: %d passes, want %d", c.name, k.Passes(), c.passes)
		}
	}
}
