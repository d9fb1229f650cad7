package gate

import (
	"fmt"

	"github.com/aicdb/aicdb/disagg"
	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing/timing"
)

// disaggKVBytes is the handoff per prompt token of the gated families (a 32B-class
// model with a BF16 GQA KV, 8 KV heads × 128 × 2 × 64 layers ≈ 0.26 MB; 0.16 MB
// here, as with an FP8 KV).
const disaggKVBytes = 1.6e5

// decodeTP2 is the decode pool's timing in the heterogeneous family: a tp 2 decode
// worker (weights and KV split over two GPUs: the per-pass base and the per-row
// and per-context costs shrink, the prefill rate doubles).
var decodeTP2 = timing.Linear{BaseMs: 3.5, PrefillMsPerToken: 0.0125, DecodeMsPerRow: 0.022, CtxMsPerToken: 0.000016}

// holdPrefill and holdDecode are the prefill-hold coupling families' timing
// (QUEUEING.md §6): batching prompts is nearly free on the prefill side, the decode
// pass is short, so the handoff and the decode KV decide the throughput.
var (
	holdPrefill = timing.Linear{BaseMs: 40, PrefillMsPerToken: 0.005}
	holdDecode  = timing.Linear{BaseMs: 3, DecodeMsPerRow: 0.1}
)

// DisaggKappas are the prefill in-flight caps κ of the prefill-hold coupling
// families (the non-monotone throughput curve of docs/validation.md).
var DisaggKappas = []int{1, 2, 4, 8}

func trtEngine() engine.Spec {
	e, err := engine.Defaults(engine.TRTLLM, "")
	if err != nil {
		panic(fmt.Sprintf("gate: default trtllm engine: %v", err))
	}
	return e
}

// batchWait is e with TensorRT-LLM batch waiting (T-R6): held at most iters
// times, until ratio × max_num_tokens tokens are scheduled.
func batchWait(e engine.Spec, iters int, ratio float64) engine.Spec {
	e.BatchWaitTimeoutIters, e.BatchWaitMaxTokensRatio = iters, ratio
	return e
}

// recvEvery is SGLang engine e receiving requests every n iterations after
// decode-only batches (S-R7, scheduler_recv_interval).
func recvEvery(e engine.Spec, n int) engine.Spec {
	e.SchedulerRecvInterval = n
	return e
}

func sglEngine() engine.Spec {
	e, err := engine.Defaults(engine.SGLang, "")
	if err != nil {
		panic(fmt.Sprintf("gate: default sglang engine: %v", err))
	}
	return e
}

// tandemConfig is nP prefill and nD decode workers of engine e, both priced by the
// gate's roofline, over NICs of gbps GB/s.
func tandemConfig(nP, nD int, e engine.Spec, gbps float64) disagg.Config {
	return disagg.Config{
		Prefill:         disagg.Pool{Engine: e, Timing: roofline, Workers: nP},
		Decode:          disagg.Pool{Engine: e, Timing: roofline, Workers: nD},
		Fabric:          disagg.Fabric{InterNodeGBps: gbps},
		KVBytesPerToken: disaggKVBytes,
	}
}

// HoldFamily is the prefill-hold coupling family at κ: 2P1D TRT-LLM
// (GUARANTEED_NO_EVICT reserves the decode KV to completion on both sides, T-D3),
// a decode KV of 8 requests, 4 GB/s NICs (32 ms per handoff alone), isl 1024,
// osl 64, C = 32, pull.
func HoldFamily(kappa int) DisaggFamily {
	e := trtEngine()
	c := tandemConfig(2, 1, e, 4)
	c.Prefill.Timing, c.Decode.Timing = holdPrefill, holdDecode
	c.Prefill.InFlightCap = kappa
	c.Decode.KVCapacityTokens = 8 * (1024 + 64)
	c.KVBytesPerToken = 1e5
	return DisaggFamily{Name: fmt.Sprintf("prefill-hold 2P1D trtllm κ%d c32 isl1024 osl64 kv8req 4GB/s", kappa), Spec: closed(1024, 64, 0, 32), Config: c}
}

// PoolFamily is the prefill-pool family: the prefill-hold coupling on vLLM (a
// decode KV of 8 requests, 4 GB/s NICs, isl 3000, osl 64, C 32, pull) with a
// prefill pool of three prompts and no κ, so the prompts held for their pull
// fill the prefill worker's KV and its admissions wait for releases (V-P3,
// V-R3) — synchronous at a budget of 8192, or asynchronous at 1024, where
// prompts run in chunks that can preempt one another (V-R6) and a release
// during a pass is not seen by the schedule made at its start (V-R10).
func PoolFamily(async bool, budget int) DisaggFamily {
	v := vllm(budget, 256)
	v.AsyncScheduling = async
	c := poolConfig(v)
	mode := "sync"
	if async {
		mode = "async"
	}
	return DisaggFamily{Name: fmt.Sprintf("prefill-pool 2P1D vllm %s b%d c32 isl3000 osl64 pkv3req kv8req 4GB/s", mode, budget),
		Spec: closed(3000, 64, 0, 32), Config: c}
}

// poolConfig is the prefill-pool families' 2P1D deployment of engine e: the
// hold timings, a decode KV of 8 requests, a prefill pool of three prompts of
// isl 3000 (3,008 tokens each in whole blocks), 4 GB/s NICs.
func poolConfig(e engine.Spec) disagg.Config {
	c := tandemConfig(2, 1, e, 4)
	c.Prefill.Timing, c.Decode.Timing = holdPrefill, holdDecode
	c.Decode.KVCapacityTokens = 8 * (3000 + 64)
	c.Prefill.KVCapacityTokens = 3 * 3008
	c.KVBytesPerToken = 1e5
	return c
}

// TRTPoolFamily is PoolFamily on TensorRT-LLM: the overlap executor, chunked
// contexts of max_num_tokens 1024, a prefill pool of three prompts whose held
// contexts keep their KV until their transfer completes (T-D1), so a context
// is admitted only when its reservation fits beside them (T-R1).
func TRTPoolFamily() DisaggFamily {
	e := trtEngine()
	e.EnableChunkedPrefill, e.MaxNumTokens = true, 1024
	return DisaggFamily{Name: "prefill-pool 2P1D trtllm overlap chunked1024 c32 isl3000 osl64 pkv3req kv8req 4GB/s",
		Spec: closed(3000, 64, 0, 32), Config: poolConfig(e)}
}

// DisaggFamilies returns the gated disaggregated families (issue 11): 1P1D per
// backend, fan-in 2P1D, bandwidth-tight 2P1D, 2P2D, a headroom-bound decode pool,
// the prefill-hold coupling sweep over κ, heterogeneous P/D timing, a push
// connector, handoff in TTFT and open loop (W1).
func DisaggFamilies() []DisaggFamily {
	var fs []DisaggFamily
	add := func(name string, f DisaggFamily) {
		f.Name = name
		fs = append(fs, f)
	}
	v := vllm(8192, 256)
	add("1P1D vllm c16 isl2048 osl256 50GB/s", DisaggFamily{Spec: closed(2048, 256, 0, 16), Config: tandemConfig(1, 1, v, 50)})
	add("1P1D trtllm c16 isl2048 osl256 50GB/s", DisaggFamily{Spec: closed(2048, 256, 0, 16), Config: tandemConfig(1, 1, trtEngine(), 50)})
	add("1P1D sglang c16 isl2048 osl256 50GB/s", DisaggFamily{Spec: closed(2048, 256, 0, 16), Config: tandemConfig(1, 1, sglEngine(), 50)})
	add("fan-in 2P1D vllm c32 isl2048 osl256 50GB/s", DisaggFamily{Spec: closed(2048, 256, 0, 32), Config: tandemConfig(2, 1, v, 50)})
	add("bandwidth-tight 2P1D vllm c32 isl4096 osl128 5GB/s", DisaggFamily{Spec: closed(4096, 128, 0, 32), Config: tandemConfig(2, 1, v, 5)})
	add("2P2D vllm c64 isl2048 osl256 50GB/s", DisaggFamily{Spec: closed(2048, 256, 0, 64), Config: tandemConfig(2, 2, v, 50)})
	c := tandemConfig(2, 1, trtEngine(), 50)
	c.Decode.KVCapacityTokens = 8 * (2048 + 256)
	add("headroom-bound 2P1D trtllm c32 isl2048 osl256 kv8req", DisaggFamily{Spec: closed(2048, 256, 0, 32), Config: c})
	c = tandemConfig(2, 1, v, 50)
	c.Decode.KVCapacityTokens = 8 * (2048 + 256)
	// vLLM's decode side allocates the prompt's blocks at the pull (V-D2), grows by
	// blocks and preempts by recompute when the running decodes outgrow the pool
	// (V-R6): the tandem's decode kernels run the same KV model.
	add("headroom-bound 2P1D vllm c32 isl2048 osl256 kv8req", DisaggFamily{Spec: closed(2048, 256, 0, 32), Config: c})
	for _, k := range DisaggKappas {
		fs = append(fs, HoldFamily(k))
	}
	fs = append(fs, PoolFamily(false, 8192), PoolFamily(true, 1024), TRTPoolFamily())
	c = tandemConfig(1, 2, v, 50)
	c.Decode.Timing = decodeTP2
	add("heterogeneous 1P2D vllm P tp1 D tp2 c32 isl2048 osl512", DisaggFamily{Spec: closed(2048, 512, 0, 32), Config: c})
	c = tandemConfig(2, 1, v, 10)
	c.Push = true
	add("push 2P1D vllm c32 isl2048 osl256 10GB/s", DisaggFamily{Spec: closed(2048, 256, 0, 32), Config: c})
	c = tandemConfig(1, 1, trtEngine(), 25)
	c.HandoffInTTFT = true
	add("handoff-in-ttft 1P1D trtllm c16 isl2048 osl256 25GB/s", DisaggFamily{Spec: closed(2048, 256, 0, 16), Config: c})
	add("open 1P1D vllm 6rps isl2048 osl256", DisaggFamily{Spec: open(2048, 256, 0, 6, 2048), Config: tandemConfig(1, 1, v, 50)})
	// SGLang's decode server preallocates a request's slot before its prefill
	// (S-D2): with a running cap of 4 it holds 12 requests (DecodeSlots), so at
	// C 16 four wait for a decode slot before they reach the prefill worker.
	c = tandemConfig(1, 1, sglEngine(), 50)
	c.Decode.BatchCap = 4
	add("decode-slot-bound 1P1D sglang c16 isl2048 osl256 dcap4", DisaggFamily{Spec: closed(2048, 256, 0, 16), Config: c})
	fs = append(fs, DisaggMTPFamilies()...)
	return fs
}

// drafted is e with k MTP draft tokens per decode step and a of them accepted on
// average (engine.Spec.SetDrafts: SGLang's EAGLE also turns the overlap scheduler
// and mixed chunk off).
func drafted(e engine.Spec, k int, a float64) engine.Spec {
	e.SetDrafts(k, a)
	return e
}

// DisaggMTPFamilies are the disaggregated families with MTP on both pools, as
// aiconfigurator's generator deploys it (speculative_config on the prefill and
// the decode engine): a decode step emits engine.StepTokens tokens, the accepted
// drafts with its token; TensorRT-LLM charges a decode row 1 + drafts of
// max_num_tokens (T-R3), which the budget-bound family makes bind (the
// generator's decode max_num_tokens is the batch, rounded to a block).
func DisaggMTPFamilies() []DisaggFamily {
	t1 := drafted(trtEngine(), 1, 0.85)
	t3 := drafted(trtEngine(), 3, 1.7)
	s1 := drafted(sglEngine(), 1, 0.7)
	s2 := drafted(sglEngine(), 2, 1.2)
	budget := tandemConfig(2, 1, t3, 50)
	budget.Decode.Engine.MaxNumTokens = 32 // 8 rows of 1 + 3 tokens
	slots := tandemConfig(1, 1, s2, 50)
	slots.Decode.BatchCap = 4
	return []DisaggFamily{
		{Name: "MTP 1P1D trtllm k1 a0.85 c16 isl2048 osl256", Spec: closed(2048, 256, 0, 16), Config: tandemConfig(1, 1, t1, 50)},
		{Name: "MTP budget-bound 2P1D trtllm k3 a1.7 c32 isl2048 osl256 dtok32", Spec: closed(2048, 256, 0, 32), Config: budget},
		{Name: "EAGLE 1P1D sglang k1 a0.7 c16 isl2048 osl256", Spec: closed(2048, 256, 0, 16), Config: tandemConfig(1, 1, s1, 50)},
		{Name: "EAGLE decode-slot-bound 1P1D sglang k2 a1.2 c16 isl2048 osl256 dcap4", Spec: closed(2048, 256, 0, 16), Config: slots},
		{Name: "MTP open 1P1D trtllm k1 a0.85 6rps isl2048 osl256", Spec: open(2048, 256, 0, 6, 2048), Config: tandemConfig(1, 1, t1, 50)},
		{Name: "MTP 1P1D vllm k1 a0.7 c16 isl2048 osl256", Spec: closed(2048, 256, 0, 16), Config: tandemConfig(1, 1, drafted(vllm(8192, 256), 1, 0.7), 50)},
		{Name: "MTP 2P1D vllm k3 a1.7 c32 isl2048 osl256", Spec: closed(2048, 256, 0, 32), Config: tandemConfig(2, 1, drafted(vllm(8192, 256), 3, 1.7), 50)},
	}
}
