package perfdb

import "math"

// SGLangKVPoolTokens is the KV pool SGLang allocates for this worker
// (ModelRunner.profile_max_num_token), in tokens, whole blocks:
//
//	rest   = total·mem_fraction_static − weights
//	total  = capacity − NCCL − others   (the memory free before the weights load)
//	tokens = ⌊rest / KVBytesPerToken / blockSize⌋·blockSize
//
// with SGLang's default fraction for the GPU (SGLangMemFractionStatic;
// k.GraphMaxBS > 0 is the launch's cuda_graph_max_bs, 0 the capacity tier's),
// or the launch's mem_fraction_static (k.MemFraction > 0).
// Activations and CUDA graphs are not taken from the pool: they live in the
// 1 − fraction SGLang reserves for them, so the pool is larger than
// KVCapacityTokens' budget (aiconfigurator's OOM rule, which subtracts the
// prefill's activations and a 2 % tolerance) and does not depend on isl. A worker
// whose weights and one request do not fit gives KVCapacityTokens' ErrOOM. Models
// with per-request state (Qwen3.5's GDN layers: SGLang splits the rest between a
// mamba pool and the KV pool) get KVCapacityTokens' pool, as does a result below
// it.
func (e *Estimator) SGLangKVPoolTokens(isl, osl, blockSize int, k KVPoolKnobs) (int, error) {
	k.KVCacheBytes = 0 // a vLLM key
	budget, u, err := e.kvCapacity(isl, osl, blockSize, k)
	if err != nil {
		return 0, err
	}
	if e.KVStateBytesPerRequest() > 0 {
		return budget, nil
	}
	const gib = 1 << 30
	capB := e.sys.MemCapacity
	f := k.MemFraction
	if !(f > 0) {
		f = SGLangMemFractionStatic(capB, e.cfg.TP, e.cfg.PP, e.cfg.DP, k.GraphMaxBS)
	}
	dW, dKV := e.drafter(u) // the drafter's layer, as kvCapacity counts it
	rest := (capB-(u.NCCLGiB+u.OthersGiB)*gib)*f - (u.WeightsGiB+dW)*gib
	tokens := math.Floor(rest / (e.KVBytesPerToken() + dKV)) // > 0: KVCapacityTokens checked it
	if !(tokens > float64(budget)) || tokens > 1<<40 {
		return budget, nil
	}
	return int(tokens) / blockSize * blockSize, nil
}
