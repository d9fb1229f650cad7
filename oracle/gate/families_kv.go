package gate

import (
	"fmt"

	"github.com/aicdb/aicdb/engine"
)

// KVFamilies returns the KV-pressure families (QUEUEING.md §3, issue 12): both sides
// get the same KV capacity, so the model's vLLM recompute preemption (V-R6) and
// SGLang admission reservation and retraction (S-R4/S-R5) are compared with the
// DES's block-level ones. The first two are the former known-failing families
// (a pool of 10 prompts, 8.9 full requests, for 32 clients); the others are long
// prompts at a concurrency whose running KV, C·(isl + osl), exceeds the pool by
// 10 %, 50 % and 200 %. Each is gated under the product defaults and under the burst
// semantics (bothSemantics). Six open-loop families follow (below).
func KVFamilies() []Family {
	var fs []Family
	add := func(name string, c, isl, osl int, e engine.Spec, kv int) {
		e.KVCapacityTokens = kv
		fs = append(fs, Family{Name: name, Spec: closed(isl, osl, 0, c), Engine: e, Timing: roofline})
	}
	add("vllm/c32 isl2048 osl256 kv10x2048 preemption", 32, 2048, 256, vllm(8192, 256), 10*2048)
	add("sglang/c32 isl2048 osl256 kv10x2048 retraction", 32, 2048, 256, sglEngine(), 10*2048)
	so := sglEngine()
	so.AsyncScheduling = false // the normal event loop (--disable-overlap-schedule, §3.2)
	add("sglang/c32 isl2048 osl256 kv10x2048 retraction overlap off", 32, 2048, 256, so, 10*2048)
	sp := sglEngine()
	sp.BlockSize = 64 // page_size 64 (the Blackwell MLA backends'): extends charged in whole pages (S-R4)
	add("sglang/c32 isl2000 osl256 kv10x2048 page64 retraction", 32, 2000, 256, sp, 10*2048)
	va := vllm(8192, 256)
	va.AsyncScheduling = true
	add("vllm/c32 isl2048 osl256 kv10x2048 preemption async", 32, 2048, 256, va, 10*2048)
	trt := func() engine.Spec { // MAX_UTILIZATION: the policy that pauses under KV pressure
		e := trtEngine()
		e.CapacityPolicy = engine.PolicyMaxUtilization
		return e
	}
	add("trtllm/c32 isl2048 osl256 kv10x2048 max_utilization pausing", 32, 2048, 256, trt(), 10*2048)
	tc := trt()
	tc.EnableChunkedPrefill, tc.MaxNumTokens, tc.AsyncScheduling = true, 2048, false
	add("trtllm/c32 isl2048 osl256 kv10x2048 max_utilization chunked overlap off", 32, 2048, 256, tc, 10*2048)
	const c, isl, osl = 16, 8192, 1024
	running := c * (isl + osl)
	for _, over := range []int{10, 50, 200} {
		kv := running * 100 / (100 + over)
		add(fmt.Sprintf("vllm/c%d isl%d osl%d kv over %d%%", c, isl, osl, over), c, isl, osl, vllm(8192, 256), kv)
		add(fmt.Sprintf("sglang/c%d isl%d osl%d kv over %d%%", c, isl, osl, over), c, isl, osl, sglEngine(), kv)
		if over == 50 {
			add(fmt.Sprintf("sglang/c%d isl%d osl%d kv over %d%% overlap off", c, isl, osl, over), c, isl, osl, so, kv)
		}
		tl := trt()
		tl.EnableChunkedPrefill = true // with chunking off an 8192 prompt never shares the 8192 budget with decoders
		add(fmt.Sprintf("trtllm/c%d isl%d osl%d kv over %d%% max_utilization chunked", c, isl, osl, over), c, isl, osl, tl, kv)
	}
	// Open loops under KV pressure (eval --rate sizes a KV-tight deployment's
	// pool by default): Poisson arrivals into a pool of 10 × 2048 tokens, short
	// prompts with long outputs near saturation (the running requests outgrow the
	// pool: vLLM preemption, SGLang retraction, TensorRT-LLM pausing, ~0.05–0.18
	// per request), and long prompts with short outputs filling it (admission
	// waits for blocks: a deep queue).
	openKV := func(name string, isl, osl int, rps float64, e engine.Spec) Family {
		e.KVCapacityTokens = 10 * 2048
		return Family{Name: name, Spec: open(isl, osl, 0, rps, 2000), Engine: e, Timing: roofline}
	}
	var ol []Family
	for _, b := range []struct {
		name string
		e    engine.Spec
	}{{"vllm", vllm(8192, 256)}, {"sglang", sglEngine()}, {"trtllm", trt()}} {
		ol = append(ol,
			openKV(b.name+"/open 0.5rps isl512 osl2048 kv10x2048 preemption", 512, 2048, 0.5, b.e),
			openKV(b.name+"/open 3.6rps isl2048 osl256 kv10x2048 pool full", 2048, 256, 3.6, b.e))
	}
	return append(bothSemantics(fs), ol...)
}
