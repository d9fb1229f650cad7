package gate

import (
	"fmt"
	"strings"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// roofline is the synthetic roofline-shaped pass timing both sides use: a fixed
// per-pass cost (weights read once), prefill tokens at compute rate, and decode rows
// whose cost grows with their KV context (memory bound).
var roofline = timing.Linear{BaseMs: 6, PrefillMsPerToken: 0.025, DecodeMsPerRow: 0.04, CtxMsPerToken: 0.00003}

// vllm returns a vLLM engine with budget b, max_num_seqs s, chunked prefill on, block 16.
func vllm(b, s int) engine.Spec {
	return engine.Spec{Backend: engine.VLLM, MaxNumBatchedTokens: b, MaxNumSeqs: s,
		EnableChunkedPrefill: true, BlockSize: 16}
}

func open(isl, osl, prefix int, rps float64, n int) workload.Spec {
	return workload.Spec{ISL: isl, OSL: osl, Prefix: prefix, RateRPS: rps, NumRequests: n}
}

func closed(isl, osl, prefix, c int) workload.Spec {
	return workload.Spec{ISL: isl, OSL: osl, Prefix: prefix, Concurrency: c}
}

// Families returns the gated families of QUEUEING.md §8: isl 512–8192 (and the
// long-prompt tail families, isl ≥ 8192 at budget 8192), osl 1–1024, C 1–256,
// budgets 512–16384, chunked on/off, prefix, max_num_seqs-capped queueing, deep
// staircases, async scheduling. Every closed-loop family is gated twice: under the
// product defaults (the stagger mixture over queueing.DefaultStaggerPhases client
// phases, a queueing.DefaultClientRTTMs round trip) and, suffixed "· burst", under
// the exact burst semantics (--stagger-phases 0 --client-rtt-ms 0). Families the
// oracle or the model cannot run yet are present with KnownFailing set (printed in
// the table with the reason).
func Families() []Family { return bothSemantics(baseFamilies()) }

// bothSemantics returns every closed-loop family of fs twice — under the product
// defaults and, suffixed "· burst", under the exact burst semantics — and the
// open-loop ones once.
func bothSemantics(fs []Family) []Family {
	var out []Family
	for _, f := range fs {
		if f.Spec.Concurrency <= 0 {
			out = append(out, f) // open loop: no client phases, no round trip
			continue
		}
		d := f
		d.StaggerPhases, d.ClientRTTMs = queueing.DefaultStaggerPhases, queueing.DefaultClientRTTMs
		b := f
		b.Name += " · burst"
		out = append(out, d, b)
	}
	return out
}

// LongPromptFamilies are the prefill-interference tail families (issue 9): prompts
// of 8k–16k tokens at budget 8192 beside running decodes, where the few decode steps
// that share a pass with a prefill chunk are long, so the per-request TPOT p99 is
// far above its p50 under the default (desynchronised) clients. They are part of
// Families; TestLongPromptTails asserts the spread.
func LongPromptFamilies() []Family {
	var fs []Family
	for _, f := range Families() {
		if strings.Contains(f.Name, "long-prompt") {
			fs = append(fs, f)
		}
	}
	return fs
}

func baseFamilies() []Family {
	var fs []Family
	add := func(name string, w workload.Spec, e engine.Spec) {
		fs = append(fs, Family{Name: name, Spec: w, Engine: e, Timing: roofline})
	}
	add("vllm/c1 isl2048 osl256 b8192", closed(2048, 256, 0, 1), vllm(8192, 256))
	add("vllm/c8 isl2048 osl256 b8192", closed(2048, 256, 0, 8), vllm(8192, 256))
	add("vllm/c32 isl4096 osl512 b8192", closed(4096, 512, 0, 32), vllm(8192, 256))
	add("vllm/c64 isl512 osl128 b2048", closed(512, 128, 0, 64), vllm(2048, 256))
	add("vllm/c256 isl512 osl64 b16384", closed(512, 64, 0, 256), vllm(16384, 256))
	add("vllm/c8 isl1024 osl1024 b4096", closed(1024, 1024, 0, 8), vllm(4096, 256))
	add("vllm/c32 isl2048 osl1 b8192", closed(2048, 1, 0, 32), vllm(8192, 256))
	add("vllm/c16 isl8192 osl256 b2048 staircase", closed(8192, 256, 0, 16), vllm(2048, 256))
	add("vllm/c64 isl4096 osl64 b512 deep staircase", closed(4096, 64, 0, 64), vllm(512, 256))
	e := vllm(4096, 256)
	e.EnableChunkedPrefill = false
	add("vllm/c16 isl2048 osl256 b4096 chunked off", closed(2048, 256, 0, 16), e)
	add("vllm/c16 isl4096 prefix2048 osl256 b8192", closed(4096, 256, 2048, 16), vllm(8192, 256))
	add("vllm/c64 isl1024 osl256 seqs16 capped", closed(1024, 256, 0, 64), vllm(8192, 16))
	e = vllm(8192, 256)
	e.LongPrefillTokenThreshold = 1024
	add("vllm/c16 isl4096 osl128 threshold1024", closed(4096, 128, 0, 16), e)
	e = vllm(8192, 256)
	e.AsyncScheduling = true
	add("vllm/c1 isl2048 osl256 async", closed(2048, 256, 0, 1), e)
	add("vllm/c32 isl2048 osl256 async", closed(2048, 256, 0, 32), e)
	// MTP speculative decoding (V-S1..V-S4): a decode step schedules 1 + drafts
	// against the budget and emits engine.StepTokens on both sides, the rejected
	// drafts rolled back; synchronous and async (V-S3: a step skipped, or run and
	// discarded, at the end of a request), a budget that cuts drafts (V-S1), short
	// outputs, a tracked KV pool the lookahead slots fit (V-S2), open loop.
	mtpV := func(k int, a float64, async bool) engine.Spec {
		e := vllm(8192, 256)
		e.AsyncScheduling = async
		return drafted(e, k, a)
	}
	add("vllm/c16 isl2048 osl256 mtp1 a0.7", closed(2048, 256, 0, 16), mtpV(1, 0.7, false))
	add("vllm/c32 isl2048 osl256 mtp3 a1.7 async", closed(2048, 256, 0, 32), mtpV(3, 1.7, true))
	add("vllm/c16 isl1024 osl8 mtp3 a2.5 async", closed(1024, 8, 0, 16), mtpV(3, 2.5, true))
	add("vllm/c16 isl1024 osl8 mtp1 a1 async", closed(1024, 8, 0, 16), mtpV(1, 1, true))
	e = mtpV(3, 1.7, false)
	e.MaxNumBatchedTokens = 510
	add("vllm/c200 isl32 osl256 mtp3 a1.7 b510 drafts cut", closed(32, 256, 0, 200), e)
	e = mtpV(2, 1.2, true)
	e.KVCapacityTokens = 16*(2048+256) + 16*64
	add("vllm/c16 isl2048 osl256 mtp2 a1.2 async kv", closed(2048, 256, 0, 16), e)
	e = mtpV(2, 1.2, false)
	e.KVCapacityTokens = 10 * (2048 + 256)
	add("vllm/c16 isl2048 osl256 mtp2 a1.2 kv10req preempt", closed(2048, 256, 0, 16), e)
	add("vllm/open ρ0.6 isl2048 osl256 mtp1 a0.7", open(2048, 256, 0, 0.6*11.9, 2048), mtpV(1, 0.7, false))
	// W2: isl/osl quantile strata drawn by the model's shape rotation (same k-th shape
	// on both sides).
	w2 := closed(2048, 512, 0, 32)
	w2.ISLQuantiles = []int{256, 512, 1024, 2048, 4096, 8192}
	w2.OSLQuantiles = []int{16, 64, 128, 256, 512, 1024}
	add("vllm/c32 W2 isl256–8192 osl16–1024 b4096", w2, vllm(4096, 256))
	w2o := open(2048, 512, 0, 6, 2048)
	w2o.ISLQuantiles, w2o.OSLQuantiles = w2.ISLQuantiles, w2.OSLQuantiles
	add("vllm/open 6rps W2 isl256–8192 osl16–1024", w2o, vllm(8192, 256))

	// Open loop on the model's W1 stream (the DES replays the same arrival instants).
	// ρ is relative to the DES closed-loop throughput at C = max_num_seqs = 256 (the
	// capacity): 11.9 rps for isl 2048/osl 256 at budget 8192, 26.2 rps for isl 1024/
	// osl 128 at budget 2048. One W1 stream period (4096 requests) lets the in-system
	// population reach its steady level before the measurement ends.
	for _, rho := range []float64{0.3, 0.6, 0.9} {
		add(fmt.Sprintf("vllm/open ρ%.1f isl2048 osl256 b8192", rho), open(2048, 256, 0, rho*11.9, 4096), vllm(8192, 256))
		add(fmt.Sprintf("vllm/open ρ%.1f isl1024 osl128 b2048", rho), open(1024, 128, 0, rho*26.2, 4096), vllm(2048, 256))
	}
	// Three stream periods: one warms up, two are measured (the evaluator's
	// whole-period window, queueing.OpenWindow).
	add("vllm/open ρ0.6 isl1024 osl128 b2048 3 periods", open(1024, 128, 0, 0.6*26.2, 3*workload.ArrivalStrata), vllm(2048, 256))
	e = vllm(8192, 256)
	e.AsyncScheduling = true
	add("vllm/open ρ0.6 isl2048 osl256 async", open(2048, 256, 0, 0.6*11.9, 2048), e)
	add("vllm/open ρ0.6 isl4096 prefix2048 osl256", open(4096, 256, 2048, 0.6*11.9, 2048), vllm(8192, 256))
	// TRT-LLM: defaults (chunking off, overlap executor on, max_num_tokens 8192, 32-token
	// blocks), chunking on, overlap off, block reuse, and the GUARANTEED_NO_EVICT KV cap.
	add("trtllm/c16 isl2048 osl256 defaults", closed(2048, 256, 0, 16), trtEngine())
	e = trtEngine()
	e.EnableChunkedPrefill, e.MaxNumTokens = true, 2048
	add("trtllm/c32 isl4096 osl256 chunked t2048", closed(4096, 256, 0, 32), e)
	e = trtEngine()
	e.AsyncScheduling = false
	add("trtllm/c8 isl1024 osl512 overlap off", closed(1024, 512, 0, 8), e)
	add("trtllm/c16 isl4096 prefix2048 osl128 reuse", closed(4096, 128, 2048, 16), trtEngine())
	e = trtEngine()
	e.KVCapacityTokens = 16 * (2048 + 256)
	add("trtllm/c64 isl2048 osl256 no-evict kv16req", closed(2048, 256, 0, 64), e)
	add("trtllm/open ρ0.6 isl2048 osl256", open(2048, 256, 0, 0.6*11.9, 2048), trtEngine())
	e = trtEngine()
	e.CapacityPolicy = engine.PolicyMaxUtilization
	add("trtllm/c32 isl2048 osl256 max_utilization", closed(2048, 256, 0, 32), e)
	// SGLang's skipped request receipt (S-R7, scheduler_recv_interval): after a
	// decode-only batch requests are received every 10 / 30 iterations;
	// overlap on and off, mixed chunk off, an open loop.
	e = recvEvery(sglEngine(), 10)
	add("sglang/c16 isl1024 osl256 recv 10", closed(1024, 256, 0, 16), e)
	e = recvEvery(sglEngine(), 30)
	e.AsyncScheduling = false
	add("sglang/c64 isl2048 osl128 recv 30 overlap off", closed(2048, 128, 0, 64), e)
	e = recvEvery(sglEngine(), 10)
	e.EnableMixedChunk = false
	add("sglang/c32 isl1024 osl256 recv 10 mixed off", closed(1024, 256, 0, 32), e)
	add("sglang/open ρ0.5 isl2048 osl256 recv 10", open(2048, 256, 0, 0.5*11.9, 2048), recvEvery(sglEngine(), 10))
	// Batch waiting (T-R6): contexts held beside generation rows until the
	// schedule's tokens reach ratio × max_num_tokens or 20 / 50 holds —
	// InferenceMAX's 1k/1k setting (the timeout binds), a ratio that two
	// prompts reach (the tokens bind), chunked, and an open loop.
	e = batchWait(trtEngine(), 20, 0.9)
	e.MaxNumTokens = 16384
	add("trtllm/c16 isl1024 osl256 batch wait 20 0.9 t16384", closed(1024, 256, 0, 16), e)
	e = batchWait(trtEngine(), 50, 0.45)
	add("trtllm/c64 isl2048 osl128 batch wait 50 0.45", closed(2048, 128, 0, 64), e)
	e = batchWait(trtEngine(), 10, 0.9)
	e.EnableChunkedPrefill, e.MaxNumTokens = true, 2048
	add("trtllm/c32 isl4096 osl256 batch wait 10 0.9 chunked t2048", closed(4096, 256, 0, 32), e)
	add("trtllm/open ρ0.5 isl2048 osl256 batch wait 20 0.9", open(2048, 256, 0, 0.5*11.9, 2048), batchWait(trtEngine(), 20, 0.9))
	// One-model MTP: drafts charged to max_num_tokens (T-R3), each decode step emitting
	// engine.StepTokens of the accepted-drafts mean on both sides: one draft at 0.85
	// and 0.5 accepted, three at 1.7 with chunking, overlap off, the no-evict KV cap
	// (no draft term, T-R1), open loop.
	mtp := func(k int, a float64) engine.Spec { return drafted(trtEngine(), k, a) }
	add("trtllm/c16 isl2048 osl256 mtp1 a0.85", closed(2048, 256, 0, 16), mtp(1, 0.85))
	e = mtp(3, 1.7)
	e.EnableChunkedPrefill, e.MaxNumTokens = true, 2048
	add("trtllm/c32 isl4096 osl256 mtp3 a1.7 chunked t2048", closed(4096, 256, 0, 32), e)
	e = mtp(1, 0.5)
	e.AsyncScheduling = false
	add("trtllm/c8 isl1024 osl512 mtp1 a0.5 overlap off", closed(1024, 512, 0, 8), e)
	e = mtp(1, 0.85)
	e.KVCapacityTokens = 16 * (2048 + 256)
	add("trtllm/c64 isl2048 osl256 mtp1 a0.85 no-evict kv16req", closed(2048, 256, 0, 64), e)
	add("trtllm/open ρ0.6 isl2048 osl256 mtp1 a0.85", open(2048, 256, 0, 0.6*11.9, 2048), mtp(1, 0.85))
	// SGLang: defaults (mixed chunk on — the product's deployment rule —, chunk 8192,
	// page 1), mixed chunk off (prefill priority: decoders stall), a long chunked prefill,
	// prefix, the max_running_requests cap, open loop.
	add("sglang/c16 isl2048 osl256 defaults", closed(2048, 256, 0, 16), sglEngine())
	e = sglEngine()
	e.EnableMixedChunk = false
	add("sglang/c16 isl2048 osl256 mixed off", closed(2048, 256, 0, 16), e)
	e = sglEngine()
	e.EnableMixedChunk, e.ChunkedPrefillSize = false, 2048
	add("sglang/c16 isl8192 osl128 chunk2048 mixed off", closed(8192, 128, 0, 16), e)
	e = sglEngine()
	e.ChunkedPrefillSize = 2048
	add("sglang/c32 isl4096 osl256 chunk2048 mixed", closed(4096, 256, 0, 32), e)
	add("sglang/c16 isl4096 prefix2048 osl256", closed(4096, 256, 2048, 16), sglEngine())
	e = sglEngine()
	e.MaxNumSeqs = 16
	add("sglang/c64 isl1024 osl256 running16 capped", closed(1024, 256, 0, 64), e)
	add("sglang/open ρ0.6 isl2048 osl256", open(2048, 256, 0, 0.6*11.9, 2048), sglEngine())
	e = sglEngine()
	e.EnableChunkedPrefill = false
	add("sglang/c16 isl4096 osl256 chunking off", closed(4096, 256, 0, 16), e)
	// EAGLE / NEXTN (topk 1): SetDrafts turns the overlap scheduler and mixed chunk
	// off as SGLang does; each decode-only step emits engine.StepTokens on both
	// sides: one draft at 0.85, three at 1.7 with a 2048 chunk, a tracked KV pool
	// the verify slots fit (EAGLE under KV pressure is refused), open loop.
	eagle := func(k int, a float64) engine.Spec { return drafted(sglEngine(), k, a) }
	add("sglang/c16 isl2048 osl256 eagle1 a0.85", closed(2048, 256, 0, 16), eagle(1, 0.85))
	e = eagle(3, 1.7)
	e.ChunkedPrefillSize = 2048
	add("sglang/c32 isl4096 osl256 eagle3 a1.7 chunk2048", closed(4096, 256, 0, 32), e)
	e = eagle(1, 0.85)
	e.KVCapacityTokens = 16*(2048+256) + 1024
	add("sglang/c16 isl2048 osl256 eagle1 a0.85 kv", closed(2048, 256, 0, 16), e)
	add("sglang/open ρ0.6 isl2048 osl256 eagle1 a0.85", open(2048, 256, 0, 0.6*11.9, 2048), eagle(1, 0.85))
	add("sglang/c32 W2 isl256–8192 osl16–1024", w2, sglEngine())
	// The families above run SGLang's overlap scheduler (its default, §3.2); these
	// run the normal event loop (--disable-overlap-schedule), mixed chunk on and off
	// and chunked, and short outputs, where the discarded extra pass of a finished
	// request (overlap) is a large share of each request's passes.
	e = sglEngine()
	e.AsyncScheduling = false
	add("sglang/c16 isl2048 osl256 overlap off", closed(2048, 256, 0, 16), e)
	e = sglEngine()
	e.AsyncScheduling, e.EnableMixedChunk, e.ChunkedPrefillSize = false, false, 2048
	add("sglang/c16 isl8192 osl128 chunk2048 mixed off overlap off", closed(8192, 128, 0, 16), e)
	e = sglEngine()
	e.AsyncScheduling, e.ChunkedPrefillSize = false, 2048
	add("sglang/c32 isl4096 osl256 chunk2048 mixed overlap off", closed(4096, 256, 0, 32), e)
	add("sglang/c16 isl1024 osl4 short outputs", closed(1024, 4, 0, 16), sglEngine())
	e = sglEngine()
	e.AsyncScheduling = false
	add("sglang/c16 isl1024 osl4 short outputs overlap off", closed(1024, 4, 0, 16), e)
	e = sglEngine()
	e.EnableMixedChunk = false
	add("sglang/c16 isl1024 osl4 short outputs mixed off", closed(1024, 4, 0, 16), e)
	// Open loop, one output token: every request's prefill pass is followed by its
	// discarded extra pass (overlap), which an arrival may have to wait out.
	add("sglang/open 8rps isl2048 osl1", open(2048, 1, 0, 8, 2048), sglEngine())
	e = sglEngine()
	e.AsyncScheduling = false
	add("sglang/open 8rps isl2048 osl1 overlap off", open(2048, 1, 0, 8, 2048), e)
	add("trtllm/c32 W2 isl256–8192 osl16–1024", w2, trtEngine())

	// Long-prompt tail families (issue 9): prompts ≥ 8k at budget 8192 beside running
	// decodes. A decode step that shares its pass with a prefill chunk costs the
	// chunk (≈ 0.2 s here) instead of a decode-only pass (≈ 7 ms), so a request's
	// TPOT depends on how many prefills its decode span overlaps: p99 ≫ p50.
	// The burst-started example of issue 9: cohorts dissolve until generation 8, then
	// a period-1 limit cycle with a steady TTFT mean of 6.598 ms (burst semantics).
	e = vllm(2048, 256)
	fs = append(fs, Family{Name: "vllm/c8 isl1024 osl128 b2048 sync limit-cycle", Spec: closed(1024, 128, 0, 8), Engine: e,
		Timing: timing.Linear{BaseMs: 2, PrefillMsPerToken: 0.004, DecodeMsPerRow: 0.05, CtxMsPerToken: 0.00002}})

	// Fixed shapes: every request's decode span overlaps the other C − 1 prefills
	// once per cycle, so the ITL has the tail and the TPOT does not; mixed output
	// lengths (W2, as in real traffic: many short answers, a few long ones) give short
	// requests whose few gaps overlap 0, 1 or 2 prefill passes: TPOT p99 3–7× its p50
	// (TestLongPromptTails). With osl strata spread evenly over 16–1024 the long
	// requests dominate the quantiles and the spread stays ≈ 1.2–1.4×.
	add("vllm/c16 isl8192 osl128 b8192 long-prompt", closed(8192, 128, 0, 16), vllm(8192, 256))
	shortLong := []int{4, 8, 16, 2048}
	for _, c := range []struct {
		c   int
		isl []int
	}{{16, []int{8192, 16384}}, {32, []int{8192, 16384}}, {16, []int{8192}}} {
		wx := closed(16384, 2048, 0, c.c)
		wx.ISLQuantiles, wx.OSLQuantiles = c.isl, shortLong
		add(fmt.Sprintf("vllm/c%d W2 isl%v osl%v b8192 long-prompt", c.c, c.isl, shortLong), wx, vllm(8192, 256))
	}
	wl := closed(16384, 2048, 0, 16)
	wl.ISLQuantiles, wl.OSLQuantiles = []int{8192, 16384}, shortLong
	e = sglEngine()
	e.ChunkedPrefillSize = 8192
	add(fmt.Sprintf("sglang/c16 W2 isl[8192 16384] osl%v chunk8192 long-prompt", shortLong), wl, e)
	e = trtEngine()
	e.EnableChunkedPrefill = true
	add(fmt.Sprintf("trtllm/c16 W2 isl[8192 16384] osl%v t8192 chunked long-prompt", shortLong), wl, e)
	e = sglEngine()
	e.ChunkedPrefillSize = 8192
	add("sglang/c16 isl8192 osl128 chunk8192 long-prompt", closed(8192, 128, 0, 16), e)
	e = trtEngine()
	e.EnableChunkedPrefill = true
	add("trtllm/c16 isl8192 osl128 t8192 chunked long-prompt", closed(8192, 128, 0, 16), e)

	// KV pressure (vLLM preemption, SGLang retraction, TRT-LLM pausing) is gated in
	// KVFamilies (families_kv.go).
	return fs
}
