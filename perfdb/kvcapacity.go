package perfdb

import (
	"fmt"
	"math"
)

// KVCapacityTokens returns the KV pool of one worker in tokens, from the same
// memory model and KV budget rule the OOM check uses (memory, kvBudgetParams):
//
//	non-KV  = weights + activations + nccl + others          (one GPU, GiB)
//	budget  = capacity·fraction·scale − non-KV               (vLLM gpu_memory_utilization, SGLang mem_fraction_static)
//	budget  = (capacity − non-KV)·fraction·scale             (TRT-LLM free_gpu_memory_fraction of the free pool)
//	budget  = kv_cache_memory_bytes                          (vLLM, when set: KVPoolKnobs)
//	tokens  = ⌊budget / KVBytesPerToken / blockSize⌋·blockSize
//
// scale = (1 − reserved)·(1 − tolerance) as in checkOOM. SGLang's fraction is
// mem_fraction_static as SGLang derives it from the GPU's capacity and the
// parallelism (SGLangMemFractionStatic). Activations are sized for one
// request's prefill of isl tokens (memory's default step). Every GPU of the
// worker holds its shard of the same tokens, so the per-GPU budget is the
// worker's pool. A worker whose weights + the KV of one request of isl + osl
// tokens (plus its constant state) do not fit gives an ErrOOM error showing
// the arithmetic in GiB per GPU.
func (e *Estimator) KVCapacityTokens(isl, osl, blockSize int) (int, error) {
	return e.KVCapacityTokensWith(isl, osl, blockSize, KVPoolKnobs{})
}

// KVPoolKnobs are the memory keys of an engine's own config that size its KV
// pool (engine.Spec MemFraction, KVCacheMemoryBytes, CUDAGraphMaxBS); the zero
// value keeps the engine's defaults.
type KVPoolKnobs struct {
	// MemFraction > 0 replaces the engine's memory fraction in the budget rule
	// (kvBudgetParams' fraction: vLLM gpu_memory_utilization, TensorRT-LLM
	// free_gpu_memory_fraction of the free memory, SGLang mem_fraction_static).
	MemFraction float64
	// KVCacheBytes > 0 is the KV budget per GPU in bytes (vLLM
	// kv_cache_memory_bytes), in place of the fraction rule.
	KVCacheBytes float64
	// GraphMaxBS > 0 is SGLang's cuda_graph_max_bs, from which it derives its
	// default mem_fraction_static (SGLangMemFractionStatic); unused when
	// MemFraction is set. 0 = the capacity tier's default.
	GraphMaxBS int
}

// KVCapacityTokensWith is KVCapacityTokens under an engine config's memory
// keys k: the fraction replaced by k.MemFraction, or the budget by
// k.KVCacheBytes.
func (e *Estimator) KVCapacityTokensWith(isl, osl, blockSize int, k KVPoolKnobs) (int, error) {
	n, _, err := e.kvCapacity(isl, osl, blockSize, k)
	return n, err
}

// kvCapacity is KVCapacityTokensWith with the one-request footprint it
// computed, for callers (SGLangKVPoolTokens) that size a pool from the same
// footprint.
func (e *Estimator) kvCapacity(isl, osl, blockSize int, k KVPoolKnobs) (int, MemoryUsage, error) {
	if isl <= 0 || osl <= 0 || blockSize <= 0 {
		return 0, MemoryUsage{}, fmt.Errorf("kv capacity: isl %d, osl %d, block size %d: all must be ≥ 1", isl, osl, blockSize)
	}
	capGiB := e.sys.MemCapacity / (1 << 30)
	if !(capGiB > 0) {
		return 0, MemoryUsage{}, fmt.Errorf("kv capacity: system %s has no gpu.mem_capacity", e.sys.Name)
	}
	perTok := e.KVBytesPerToken()
	if !(perTok > 0) {
		return 0, MemoryUsage{}, fmt.Errorf("kv capacity: model %s gives %v KV bytes per token", e.model.ID, perTok)
	}
	u, err := e.memory(1, isl, osl, 0, memOpts{})
	if err != nil {
		return 0, MemoryUsage{}, fmt.Errorf("kv capacity: %w", err)
	}
	static := e.cfg.Backend == "sglang" // SGLang derives mem_fraction_static from the capacity
	f, ofFree, reserved, tol := kvBudgetParams(e.cfg.Backend, e.cfg.Version, static, e.sys.MemCapacity, e.cfg.TP, e.cfg.PP, e.cfg.DP)
	if k.MemFraction > 0 {
		f = k.MemFraction
	}
	scale := (1 - reserved) * (1 - tol)
	// A drafter's layer (aiconfigurator's memory model leaves it out): its
	// weights beside the target's, its KV per token beside theirs.
	dW, dKV := e.drafter(u)
	nonKV := u.TotalGiB - u.KVCacheGiB + dW
	if dKV > 0 {
		u.KVCacheGiB *= (perTok + dKV) / perTok
		perTok += dKV
	}
	budget := capGiB*f*scale - nonKV
	if ofFree {
		budget = (capGiB - nonKV) * f * scale
	}
	if k.KVCacheBytes > 0 {
		budget = k.KVCacheBytes / (1 << 30)
		if free := capGiB - nonKV; budget > free {
			return 0, MemoryUsage{}, fmt.Errorf("%w: %s kv_cache_memory_bytes %.0f (%.2f GiB) > the %.2f GiB per GPU left after weights %.2f + activations %.2f + nccl %.2f + others %.2f GiB on %s tp %d; lower it",
				ErrOOM, e.cfg.Backend, k.KVCacheBytes, budget, free, u.WeightsGiB, u.ActivationsGiB, u.NCCLGiB, u.OthersGiB, e.sys.Name, e.cfg.TP)
		}
	}
	if u.KVCacheGiB > budget || u.TotalGiB >= capGiB {
		u.WeightsGiB += dW // the arithmetic shows the drafter's weights with the target's
		arith := fmt.Sprintf("%.2f GiB × %.3g × %.4g − (weights %.2f + activations %.2f + nccl %.2f + others %.2f GiB)",
			capGiB, f, scale, u.WeightsGiB, u.ActivationsGiB, u.NCCLGiB, u.OthersGiB)
		switch {
		case k.KVCacheBytes > 0:
			arith = fmt.Sprintf("kv_cache_memory_bytes %.0f", k.KVCacheBytes)
		case ofFree:
			arith = fmt.Sprintf("(%.2f GiB − (weights %.2f + activations %.2f + nccl %.2f + others %.2f GiB)) × %.3g × %.4g",
				capGiB, u.WeightsGiB, u.ActivationsGiB, u.NCCLGiB, u.OthersGiB, f, scale)
		}
		return 0, MemoryUsage{}, fmt.Errorf("%w: %s KV budget %s = %.2f GiB per GPU < the KV of one request of isl %d + osl %d (%.2f GiB) on %s tp %d; raise --tp/--pp or shorten the request",
			ErrOOM, e.cfg.Backend, arith, budget, isl, osl, u.KVCacheGiB, e.sys.Name, e.cfg.TP)
	}
	tokens := math.Floor(budget * (1 << 30) / perTok)
	blocks := int(tokens) / blockSize
	return blocks * blockSize, u, nil
}

// drafter is what a drafter adds to one GPU of this worker when it drafts
// (Nextn > 0): weights (GiB) and KV bytes per token. An MTP module or an EAGLE
// head is priced as one target-sized layer (mtp_scale_factor = (nextn + L)/L),
// and its memory is counted the same way: one average layer's weights (all of
// them on the GPU of the pipeline stage that runs it) and one attention layer's
// KV per token — the engines give the drafter's layer a slot for every token of
// the shared pool (vLLM's KV cache groups, SGLang's draft token pool of the
// target's size, TensorRT-LLM's MTP layers in its cache manager).
// aiconfigurator's memory model leaves it out; its OOM check (legacy estimates)
// does too, so only the KV pools the queueing tiers run count it.
func (e *Estimator) drafter(u MemoryUsage) (weightsGiB, kvPerTok float64) {
	m := e.model
	if e.cfg.Nextn <= 0 || m.Layers <= 0 {
		return 0, 0
	}
	kvLayers := m.Layers
	if m.Family == "QWEN35" { // its per-token KV is the full-attention layers' (kvBytesPerToken)
		_, kvLayers = m.layerCounts()
	}
	return u.WeightsGiB * float64(max(e.cfg.PP, 1)) / float64(m.Layers), e.KVBytesPerToken() / float64(max(kvLayers, 1))
}
