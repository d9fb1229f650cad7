package disagg

import (
	"context"
	"math"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// kvRoofline is the disaggregated gate's pass timing (oracle/gate).
var kvRoofline = timing.Linear{BaseMs: 6, PrefillMsPerToken: 0.025, DecodeMsPerRow: 0.04, CtxMsPerToken: 0.00003}

// kvConfig is nP prefill and nD decode vLLM workers (block 16, budget 8192, 256
// seqs) with a decode KV of kv tokens per worker, over 50 GB/s NICs.
func kvConfig(nP, nD, kv int) Config {
	e := engine.Spec{Backend: engine.VLLM, MaxNumBatchedTokens: 8192, MaxNumSeqs: 256, EnableChunkedPrefill: true, BlockSize: 16}
	return Config{
		Prefill:         Pool{Engine: e, Timing: kvRoofline, Workers: nP},
		Decode:          Pool{Engine: e, Timing: kvRoofline, Workers: nD, KVCapacityTokens: kv},
		Fabric:          Fabric{InterNodeGBps: 50},
		KVBytesPerToken: 1.6e5,
	}
}

// TestVLLMDecodePreemption: the headroom-bound 2P1D vLLM family of the
// disaggregated gate (decode KV of 8 requests of isl 2048 + osl 256, C 32). The
// pulls allocate the prompts only (V-D2), so more than 8 requests decode at once
// and outgrow the pool: the decode side preempts by recompute (V-R6), the headroom
// reaches 0, and the numbers are the DES's (docs/validation.md, gate table).
func TestVLLMDecodePreemption(t *testing.T) {
	w := workload.Spec{ISL: 2048, OSL: 256, Concurrency: 32}
	r, err := Quantitative(context.Background(), w, kvConfig(2, 1, 8*(2048+256)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("X %.4f rps, TPOT p99 %.4f ms, TTFT mean %.3f ms, preemptions/request %.4f, KV peak %.4f, headroom min %.3f",
		r.ThroughputRPS, r.TPOT.Quantile(0.99), r.TTFTSteady.Mean(), r.PreemptionsPerRequest, r.KVUtilPeak, r.DHeadroomMin)
	if !(r.PreemptionsPerRequest > 0) || r.KVUtilPeak > 1 || r.DHeadroomMin != 0 {
		t.Fatalf("preemptions/request %v, KV peak %v, headroom min %v: want > 0, ≤ 1, 0", r.PreemptionsPerRequest, r.KVUtilPeak, r.DHeadroomMin)
	}
	if math.Abs(r.ThroughputRPS-4.496) > 0.0005 { // the DES's 4.496 rps
		t.Fatalf("throughput %v rps, want 4.496 (the disaggregated DES)", r.ThroughputRPS)
	}
	// TRT-LLM reserves to completion (T-D3): never more than 8 decoding, no preemption.
	c := kvConfig(2, 1, 8*(2048+256))
	for _, p := range []*Pool{&c.Prefill, &c.Decode} {
		e, err := engine.Defaults(engine.TRTLLM, "")
		if err != nil {
			t.Fatal(err)
		}
		p.Engine = e
	}
	tr, err := Quantitative(context.Background(), w, c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.PreemptionsPerRequest != 0 || tr.KVUtilPeak != 0 {
		t.Fatalf("trtllm: preemptions/request %v, KV peak %v; want 0 (reservation to completion, kept by the tandem)", tr.PreemptionsPerRequest, tr.KVUtilPeak)
	}
}

// TestVLLMDecodeKVBlocksError: a vLLM decode pool whose whole blocks cannot hold
// one request's last step (isl + osl − 2 tokens) is refused, naming the fix.
func TestVLLMDecodeKVBlocksError(t *testing.T) {
	w := workload.Spec{ISL: 64, OSL: 3, Concurrency: 1}
	_, err := Quantitative(context.Background(), w, kvConfig(1, 1, 67), Options{})
	want := "decode kv_capacity_tokens = 67: 4 blocks of 16 tokens, one request of isl 64 + osl 3 needs 5 for its last step; give the decode pool more KV"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}
}

// deadlockFreeKV returns kv (tokens) raised, for a vLLM decode pool with C
// requests in the system, to (C − 1)·P + R blocks (P prompt and R last-step blocks):
// below that, pulled prompts (V-D2) can hold the blocks a preempted head needs and
// the engine deadlocks (the DES too; TestPropertyVLLMDecodeKV). Other backends
// reserve to completion: kv is raised to one request's final KV in whole blocks.
func deadlockFreeKV(e engine.Spec, kv, isl, osl, C int) int {
	if kv <= 0 {
		return kv
	}
	if e.Backend != engine.VLLM { // one request's final KV in whole blocks (Config.reserveTokens)
		bs := max(e.BlockSize, 1)
		return max(kv, (isl+osl+bs-1)/bs*bs)
	}
	bs := e.BlockSize
	p, r := (isl+bs-1)/bs, (isl+osl-2+bs-1)/bs
	return max(kv, bs*((C-1)*p+r))
}

// TestPropertyVLLMDecodeKV: over random vLLM tandems whose decode KV binds, driven
// open loop until every request completed: at every event no decode worker uses
// more KV blocks than it has (staged pulls included), every request completes with
// its osl tokens, and at the end every block is free again.
//
// The pool is drawn in [(n − 1)·P + R, n·R) blocks for n requests of P prompt and
// R last-step blocks: too small for every request's final KV at once (so decodes
// can outgrow it and preempt, V-R6), large enough that a preempted request at the
// head of waiting always fits once the running ones are gone. Below (n − 1)·P + R,
// pulled prompts (V-D2) can hold the blocks a preempted head needs, and vLLM
// deadlocks — the disaggregated DES too (the tandem reports it as an error).
func TestPropertyVLLMDecodeKV(t *testing.T) {
	cases, preempted := 0, 0
	defer func() { t.Logf("%d of %d cases preempted", preempted, cases) }()
	rapid.Check(t, func(rt *rapid.T) {
		isl := rapid.IntRange(16, 600).Draw(rt, "isl")
		osl := rapid.IntRange(2, 300).Draw(rt, "osl")
		n := rapid.IntRange(2, 10).Draw(rt, "n")
		const bs = 16
		p, r := (isl+bs-1)/bs, (isl+osl-2+bs-1)/bs
		lo := (n-1)*p + r
		c := kvConfig(rapid.IntRange(1, 3).Draw(rt, "nP"), rapid.IntRange(1, 2).Draw(rt, "nD"), 0)
		c.Decode.KVCapacityTokens = bs * rapid.IntRange(lo, max(lo, n*r-1)).Draw(rt, "kvblocks")
		c.Decode.BatchCap = rapid.IntRange(0, 6).Draw(rt, "dcap")
		c.Prefill.InFlightCap = rapid.IntRange(0, 3).Draw(rt, "kappa")
		c.Decode.Engine.AsyncScheduling = rapid.Bool().Draw(rt, "async")
		c.Decode.Engine.MaxNumBatchedTokens = rapid.SampledFrom([]int{512, 2048, 8192}).Draw(rt, "budget")
		c.Push = rapid.Bool().Draw(rt, "push")
		c.Fabric.InterNodeGBps = rapid.Float64Range(1, 50).Draw(rt, "bw")
		rate := rapid.Float64Range(1, 200).Draw(rt, "rps")
		w := workload.Spec{ISL: isl, OSL: osl, RateRPS: rate, NumRequests: n}
		if err := c.Validate(w); err != nil {
			rt.Fatal(err)
		}
		tn, err := newTandem(&c, &w)
		if err != nil {
			rt.Fatal(err)
		}
		stream, err := workload.NewArrivalStream(rate)
		if err != nil {
			rt.Fatal(err)
		}
		for i := 0; i < n; i++ {
			tn.submit(-1, i, stream.Next(), true)
		}
		tokens := make([]int, n)
		for wi, k := range tn.dec {
			prev := k.OnToken
			k.OnToken = func(id int, p, at float64) {
				tokens[tn.dIDs[wi][id]]++
				prev(id, p, at)
			}
		}
		err = tn.loop(context.Background(), func() bool {
			for i, k := range tn.dec {
				if free := k.KVFreeBlocks(); free < 0 || free > k.KVCapBlocks() {
					rt.Fatalf("decode worker %d: %d free KV blocks of %d", i, free, k.KVCapBlocks())
				}
			}
			return tn.finished >= n
		})
		if err != nil {
			rt.Fatal(err)
		}
		for i := range tn.reqs {
			r := &tn.reqs[i]
			if !r.finished || (r.osl > 1 && tokens[i] != r.osl-1) {
				rt.Fatalf("request %d: finished %v, %d decode tokens of osl %d", i, r.finished, tokens[i], r.osl)
			}
		}
		cases++
		for i := range tn.reqs {
			if r := &tn.reqs[i]; r.dw >= 0 && tn.dec[r.dw].Preempts(r.did) > 0 {
				preempted++
				break
			}
		}
		for i, k := range tn.dec {
			if k.KVFreeBlocks() != k.KVCapBlocks() || k.KVPeakBlocks() > k.KVCapBlocks() {
				rt.Fatalf("decode worker %d at the end: %d of %d blocks free, peak %d", i, k.KVFreeBlocks(), k.KVCapBlocks(), k.KVPeakBlocks())
			}
		}
	})
}

// TestTRTLLMMaxUtilizationTightDecodeRefused: a TensorRT-LLM decode pool under
// max_utilization that cannot hold its running requests at full length is refused
// (the tandem would apply guaranteed_no_evict's reserve-at-pull, T-D3), as the
// sweep refuses it; one that holds them runs. A worker may run all C = 16 clients'
// requests at once (round-robin does not keep it to its share of 8), so the pool
// must hold 16 at full length: 512 blocks.
func TestTRTLLMMaxUtilizationTightDecodeRefused(t *testing.T) {
	e := engine.Spec{Backend: engine.TRTLLM, MaxBatchSize: 64, MaxNumTokens: 8192, AsyncScheduling: true, BlockSize: 32, CapacityPolicy: engine.PolicyMaxUtilization}
	c := kvConfig(1, 2, 0)
	c.Prefill.Engine, c.Decode.Engine = e, e
	w := workload.Spec{ISL: 1000, OSL: 24, Concurrency: 16} // ≤ 16 on a decode worker, 32 blocks each
	c.Decode.KVCapacityTokens = 511 * 32
	want := "decode capacity_scheduler_policy max_utilization: 16 running requests per decode worker at full length need 512 KV blocks > 511: the tandem reserves each request's final KV at the pull (T-D3); use guaranteed_no_evict or give the decode pool more KV"
	if err := c.Validate(w); err == nil || err.Error() != want {
		t.Errorf("tight: got %v\nwant %s", err, want)
	}
	c.Decode.KVCapacityTokens = 512 * 32
	if err := c.Validate(w); err != nil {
		t.Errorf("holds its requests: %v", err)
	}
	c.Decode.KVCapacityTokens = 255 * 32
	c.Decode.Engine.CapacityPolicy = engine.PolicyGuaranteedNoEvict
	if err := c.Validate(w); err != nil {
		t.Errorf("guaranteed_no_evict, tight: %v", err)
	}
}
