package queueing

import (
	"context"
	"testing"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// TestRecvIntervalDelaysArrivals: SGLang with scheduler_recv_interval N (S-R7)
// receives a request that arrives during decode-only passes at the count's
// next multiple, so the steady TTFT of a lightly loaded closed loop (desync
// clients: arrivals at every phase of the count) grows by about half the
// interval of decode passes — between a quarter and the whole of it — while N
// = 1 is the engine without it, bit for bit.
func TestRecvIntervalDelaysArrivals(t *testing.T) {
	lin := timing.Linear{BaseMs: 2, PrefillMsPerToken: 0.004, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.00002}
	w := workload.Spec{ISL: 1024, OSL: 256, Concurrency: 4}
	eval := func(n int) *Report {
		t.Helper()
		e, err := engine.Defaults(engine.SGLang, "")
		if err != nil {
			t.Fatal(err)
		}
		e.SchedulerRecvInterval = n
		r, err := QuantitativeWith(context.Background(), w, e, lin, DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	off, one, on := eval(0), eval(1), eval(30)
	if one.TTFTSteady.Mean() != off.TTFTSteady.Mean() || one.ThroughputRPS != off.ThroughputRPS {
		t.Errorf("interval 1: TTFT %v, throughput %v; want the default's %v, %v", one.TTFTSteady.Mean(), one.ThroughputRPS, off.TTFTSteady.Mean(), off.ThroughputRPS)
	}
	pass := 2 + 3*0.05 + 3*1100*0.00002 // a decode-only pass of the other three
	extra := (on.TTFTSteady.Mean() - off.TTFTSteady.Mean()) / pass
	if extra < 30.0/4 || extra > 30 {
		t.Errorf("interval 30: TTFT %.3f → %.3f ms, %.1f decode passes more; want between 7.5 and 30", off.TTFTSteady.Mean(), on.TTFTSteady.Mean(), extra)
	}
}

// TestRecvIntervalRefusedInPools: a disaggregated pool's kernel refuses the
// skipped receipt, whose requests also arrive through a transfer queue.
func TestRecvIntervalRefusedInPools(t *testing.T) {
	e, err := engine.Defaults(engine.SGLang, "")
	if err != nil {
		t.Fatal(err)
	}
	e.SchedulerRecvInterval = 10
	_, err = NewKernel(e, benchLin, KernelOptions{})
	if err == nil || err.Error() != "engine scheduler_recv_interval = 10: SGLang's skipped request receipt (S-R7) is modelled for aggregated engines only, not for a disaggregated pool, whose requests also arrive through its transfer queue; drop it for the pools" {
		t.Errorf("kernel: %v", err)
	}
}
