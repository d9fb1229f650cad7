package disagg

import (
	"fmt"
	"math"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
)

// DefaultEfficiency is the share of the nominal link bandwidth KV transfers
// achieve (QUEUEING.md §6).
const DefaultEfficiency = 0.8

// Pool is one side of the tandem: Workers identical engine instances.
type Pool struct {
	Engine engine.Spec
	// Timing prices this pool's passes (its own parallelism and GPU system).
	Timing  timing.Timing
	Workers int
	// GPUsPerWorker places workers on nodes (prefill workers first, then decode,
	// packed in order); default 1.
	GPUsPerWorker int
	// BatchCap, when > 0, caps the running requests of each worker below the
	// engine's own limit (the per-worker batch of the deployment).
	BatchCap int
	// InFlightCap (prefill only) is κ: requests admitted by a prefill worker and not
	// yet pulled (0 = no cap beyond BatchCap and the engine's). An engine with
	// handoff buffers of its own lowers it (SGLang: 2 per running slot, S-D1).
	InFlightCap int
	// KVCapacityTokens is each worker's KV pool in tokens (0 = unbounded). On the
	// decode pool it binds: pull transfers reserve room in it before they start.
	// On the prefill pool it is checked, not modelled: the tandem's prefill
	// workers take a prompt whatever KV they hold for prompts waiting for their
	// decode worker, where the engine would stall, so a quantitative run whose
	// holds plus the prompt exceed it fails with a *PrefillHoldsError.
	KVCapacityTokens int
}

// Fabric is the KV-transfer network.
type Fabric struct {
	// InterNodeGBps is the bandwidth of one worker's NIC (each direction) in GB/s
	// (10⁹ bytes/s), used when the two workers sit on different nodes.
	InterNodeGBps float64
	// IntraNodeGBps is the NVLink bandwidth of one worker when the two share a node
	// (0: every pair is treated as inter-node).
	IntraNodeGBps float64
	// Efficiency scales both bandwidths (0 → DefaultEfficiency).
	Efficiency float64
	// GPUsPerNode places workers on nodes (0: every worker on its own node).
	GPUsPerNode int
}

// Config is one disaggregated deployment.
type Config struct {
	Prefill Pool
	Decode  Pool
	Fabric  Fabric
	// KVBytesPerToken is the KV handoff per prompt token (model, KV quant and
	// parallel layout), bytes.
	KVBytesPerToken float64
	// Push selects push-style connectors: the prefill worker sends the KV at prompt
	// completion and frees its slot; no decode-side reservation gates the transfer.
	// Default (false): pull (vLLM NIXL, SGLang Mooncake/NIXL, TRT-LLM UCX).
	Push bool
	// HandoffInTTFT makes the first token visible only after the KV transfer
	// (frontends that attach on decode, TRT-LLM native disagg). Default: the
	// prefill worker's first token is the TTFT and the handoff lands in the first
	// ITL gap. An SGLang decode pool always shows the first token from the decode
	// server, at the start of the request's first decode pass (S-D4).
	HandoffInTTFT bool
}

// GPUs returns the GPUs of the deployment.
func (c *Config) GPUs() int {
	return c.Prefill.Workers*max(c.Prefill.GPUsPerWorker, 1) + c.Decode.Workers*max(c.Decode.GPUsPerWorker, 1)
}

// Validate reports the first invalid input of c for workload w as a one-line
// error naming it and the fix.
func (c *Config) Validate(w workload.Spec) error {
	for _, p := range []struct {
		name string
		p    *Pool
	}{{"prefill", &c.Prefill}, {"decode", &c.Decode}} {
		if p.p.Workers < 1 || p.p.Workers > 1024 {
			return fmt.Errorf("%s workers = %d: must be in 1..1024", p.name, p.p.Workers)
		}
		if p.p.Timing == nil {
			return fmt.Errorf("%s timing: none given", p.name)
		}
		if v, ok := p.p.Timing.(interface{ Validate() error }); ok {
			if err := v.Validate(); err != nil {
				return fmt.Errorf("%s %w", p.name, err)
			}
		}
		if err := p.p.Engine.Validate(); err != nil {
			return fmt.Errorf("%s %w", p.name, err)
		}
		if p.p.GPUsPerWorker < 0 || p.p.BatchCap < 0 || p.p.InFlightCap < 0 || p.p.KVCapacityTokens < 0 {
			return fmt.Errorf("%s pool: gpus per worker, batch cap, in-flight cap and KV capacity must be ≥ 0", p.name)
		}
	}
	if c.Decode.InFlightCap != 0 {
		return fmt.Errorf("decode in-flight cap = %d: κ applies to the prefill pool only", c.Decode.InFlightCap)
	}
	f := c.Fabric
	if !(f.InterNodeGBps > 0) || math.IsInf(f.InterNodeGBps, 0) {
		return fmt.Errorf("fabric inter-node bandwidth = %v GB/s: must be a finite number > 0", f.InterNodeGBps)
	}
	if !(f.IntraNodeGBps >= 0) || math.IsInf(f.IntraNodeGBps, 0) {
		return fmt.Errorf("fabric intra-node bandwidth = %v GB/s: must be a finite number ≥ 0", f.IntraNodeGBps)
	}
	if !(f.Efficiency >= 0 && f.Efficiency <= 1) {
		return fmt.Errorf("fabric efficiency = %v: must be in (0, 1] (0 selects %v)", f.Efficiency, DefaultEfficiency)
	}
	if f.GPUsPerNode < 0 {
		return fmt.Errorf("fabric gpus per node = %d: must be ≥ 0", f.GPUsPerNode)
	}
	if !(c.KVBytesPerToken > 0) || math.IsInf(c.KVBytesPerToken, 0) {
		return fmt.Errorf("kv bytes per token = %v: must be a finite number > 0", c.KVBytesPerToken)
	}
	if w.Prefix != 0 {
		return fmt.Errorf("workload prefix = %d: prefix caching is not modelled by the disaggregated tandem yet; use prefix 0", w.Prefix)
	}
	isl, osl := w.MaxShape()
	if kv := c.Decode.KVCapacityTokens; kv > 0 && c.Decode.Engine.Backend != engine.VLLM && c.reserveTokens(isl, osl) > c.decodeKVTokens() {
		return fmt.Errorf("decode kv_capacity_tokens = %d: cannot hold one request of isl %d + osl %d tokens (in whole blocks of %d); give the decode pool more KV (more GPUs per worker, a smaller model or KV quant)", kv, isl, osl, max(c.Decode.Engine.BlockSize, 1))
	}
	if e := c.Decode.Engine; e.Backend == engine.TRTLLM && e.CapacityPolicy == engine.PolicyMaxUtilization && c.Decode.KVCapacityTokens > 0 {
		// The tandem reserves a TensorRT-LLM decode request's final KV at the pull
		// (T-D3), guaranteed_no_evict's rule (T-R1); max_utilization's pausing (T-R2)
		// is not modelled on the decode role, so a pool that cannot hold its running
		// requests at full length is refused rather than answered under the other
		// policy (the sweep refuses the same rows before it stores anything).
		running := c.DecodeRunning(w)
		bs := max(e.BlockSize, 1)
		need, have := running*((isl+osl+bs-1)/bs), c.Decode.KVCapacityTokens/bs
		if need > have {
			return fmt.Errorf("decode capacity_scheduler_policy %s: %d running requests per decode worker at full length need %d KV blocks > %d: the tandem reserves each request's final KV at the pull (T-D3); use guaranteed_no_evict or give the decode pool more KV", e.CapacityPolicy, running, need, have)
		}
	}
	if e := c.Decode.Engine; e.Backend == engine.VLLM && c.Decode.KVCapacityTokens > 0 && e.BlockSize > 0 {
		// vLLM's decode KV is allocated in whole blocks (V-R9); a request whose last
		// step (isl + osl − 2 tokens: the decode side emits osl − 1, V-D4) needs more
		// blocks than the pool has would be preempted and recomputed forever (V-R6).
		kv, bs := c.Decode.KVCapacityTokens, e.BlockSize
		if need := (isl + osl - 2 + bs - 1) / bs; need > kv/bs {
			return fmt.Errorf("decode kv_capacity_tokens = %d: %d blocks of %d tokens, one request of isl %d + osl %d needs %d for its last step; give the decode pool more KV", kv, kv/bs, bs, isl, osl, need)
		}
	}
	return nil
}

// DecodeRunning returns the most requests one decode worker can run at once
// under w: its engine's running cap lowered by BatchCap and, in a closed loop, by
// the clients C. Round-robin routing does not keep a worker to ⌈C / decode
// workers⌉ at every instant, so the whole C is the bound. Both the tandem's
// refusal of a KV-tight max_utilization decode pool and refine's KV plan count
// it so.
func (c *Config) DecodeRunning(w workload.Spec) int {
	running := c.Decode.seats()
	if w.Concurrency > 0 {
		running = min(running, w.Concurrency)
	}
	return running
}

// seats is the running cap of one of p's workers: its engine's, lowered by
// BatchCap.
func (p *Pool) seats() int {
	n := p.Engine.SeatCap()
	if p.BatchCap > 0 {
		n = min(n, p.BatchCap)
	}
	return n
}

// decodeSlots is the requests one decode worker holds from their S-D2
// preallocation to their finish (engine.DecodeSlots at its running cap); 0 when
// its engine does not preallocate or the connector pushes (the request reaches
// the decode side only at its send).
func (c *Config) decodeSlots() int {
	if c.Push {
		return 0
	}
	return engine.DecodeSlots(c.Decode.Engine, c.Decode.seats())
}

// prefillPoolModelled reports a prefill pool the tandem's prefill kernels model
// (KernelOptions.KVCapacityTokens on a Hold kernel): a vLLM (V-P3) or
// TensorRT-LLM (T-D1, T-R1) prefill worker of a pull connector given a pool.
// SGLang prefill workers (S-D1..S-D3) and push connectors keep the check
// (PrefillHoldsError).
func (c *Config) prefillPoolModelled() bool {
	return c.Prefill.KVCapacityTokens > 0 && !c.Push && queueing.KernelModelsKV(c.Prefill.Engine.Backend, true)
}

// prefillKappa is κ of each prefill worker: the pool's InFlightCap lowered to
// the engine's own handoff buffers for its running cap (SGLang's metadata
// buffers, S-D1); 0 = no cap.
func (c *Config) prefillKappa() int {
	return engine.PrefillInFlightCap(c.Prefill.Engine, c.Prefill.seats(), c.Prefill.InFlightCap)
}

// reserveTokens is the decode KV a pull reserves to completion on a decode worker
// that does not keep its KV in its kernel (not vLLM: TensorRT-LLM, T-D3; SGLang is
// charged the same, tandem.pull): the request's isl + osl tokens in whole blocks of the
// decode engine, as its KV manager allocates them (T-R1) and the DES counts them.
func (c *Config) reserveTokens(isl, osl int) int {
	return wholeBlocks(isl+osl, c.Decode.Engine.BlockSize)
}

// wholeBlocks is tokens rounded up to whole KV blocks of bs tokens (bs < 1: 1).
func wholeBlocks(tokens, bs int) int {
	bs = max(bs, 1)
	return (tokens + bs - 1) / bs * bs
}

// decodeKVTokens is a decode worker's KV capacity in whole blocks (0 = unbounded).
func (c *Config) decodeKVTokens() int {
	bs := max(c.Decode.Engine.BlockSize, 1)
	return c.Decode.KVCapacityTokens / bs * bs
}

// links returns the fabric links of a flow from prefill worker p to decode worker
// d and appends link capacities (bytes/ms) on first use: links 0..nP−1 are
// prefill NIC egress, nP..nP+nD−1 decode NIC ingress, then the NVLink ports of
// the same workers.
func (c *Config) linkCaps() []float64 {
	nP, nD := c.Prefill.Workers, c.Decode.Workers
	eff := c.Fabric.Efficiency
	if eff == 0 {
		eff = DefaultEfficiency
	}
	inter := c.Fabric.InterNodeGBps * eff * 1e6 // bytes per ms
	intra := c.Fabric.IntraNodeGBps * eff * 1e6
	caps := make([]float64, 0, 2*(nP+nD))
	for i := 0; i < nP+nD; i++ {
		caps = append(caps, inter)
	}
	for i := 0; i < nP+nD; i++ {
		caps = append(caps, intra)
	}
	return caps
}

// route returns the two links of a flow from prefill worker p to decode worker d:
// NVLink ports when both sit wholly on one node and NVLink bandwidth is given,
// else the NICs.
func (c *Config) route(p, d int) [2]int {
	nP, nD := c.Prefill.Workers, c.Decode.Workers
	if c.Fabric.IntraNodeGBps > 0 && c.Fabric.GPUsPerNode > 0 {
		gp, gd := max(c.Prefill.GPUsPerWorker, 1), max(c.Decode.GPUsPerWorker, 1)
		g := c.Fabric.GPUsPerNode
		p0, p1 := p*gp, p*gp+gp-1
		d0 := nP*gp + d*gd
		d1 := d0 + gd - 1
		if p0/g == p1/g && d0/g == d1/g && p0/g == d0/g {
			return [2]int{nP + nD + p, nP + nD + nP + d}
		}
	}
	return [2]int{p, nP + d}
}
