package refine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/store"
)

// KV pressure of agg points (issue 12 part 2, QUEUEING.md §3). Every agg point is
// evaluated with the KV pool of one worker from the memory model (perfdb
// KVCapacityTokens: GPU memory × the engine's memory fraction − weights,
// activations and reserves, in whole blocks), not an unbounded pool.
//
// The point's demand is C·⌈(isl + osl)/block⌉ blocks: its C = batch running
// requests all at full length. When the pool holds it, no engine can run out of
// blocks, so no request is ever preempted (vLLM V-R6), retracted (SGLang S-R5) or
// paused (TRT-LLM MAX_UTILIZATION), and SGLang's admission reservation (S-R4) never
// binds: the pool changes nothing and the screening tier's closed form stands.
// When it does not (the point is KV-tight), the per-pass engines preempt, which
// the closed form does not model: the screening row says so (no preemption count,
// bracket_certain = false) and the sweep stores the quantitative tier, whose
// calendar does model it. TRT-LLM GUARANTEED_NO_EVICT reserves isl + osl at
// admission (T-R1) and never evicts; the screening tier models its admission cap.

// kvPlan is how one agg point meets its KV pool.
type kvPlan struct {
	capTokens    int  // the pool (tokens, whole blocks)
	capBlocks    int  // the pool in blocks
	perReq       int  // blocks of one request at full length
	demandBlocks int  // C · perReq
	tight        bool // demandBlocks > capBlocks
	perPass      bool // the engine allocates blocks pass by pass (and can preempt)
}

// planKV sizes e's KV pool as the engine deploys it (DeployedPool over pt's
// memory model; SGLang's by SGLang's own rule, perfdb SGLangKVPoolTokens) and
// sets e.KVCapacityTokens. A pool the engine config set is a cap, not the pool,
// on TensorRT-LLM (kv_cache_config.max_tokens: the engine takes the smaller of
// it and its memory fraction's pool) and SGLang (max_total_tokens: min with
// the profiled pool); vLLM's num_gpu_blocks_override replaces the profiled
// pool, but vLLM still profiles its memory first, so a worker whose weights do
// not fit is OOM under the override too (as eval --kv-capacity-tokens auto
// and trace replay size it: one rule, EnginePool after KVPoolTokens). A worker
// whose weights + the KV of one request do not fit gives an error wrapping
// perfdb.ErrOOM with the memory arithmetic. Without pt (no memory model) the
// pool is the one e records.
func planKV(pt *perfdb.PassTiming, in store.PointInputs, e *engine.Spec) (kvPlan, error) {
	bs := max(e.BlockSize, 1)
	switch {
	case pt != nil:
		n, err := DeployedPool(pt.Estimator(), *e, in.EngineProfile, queueing.ProfileInput{Batch: in.Batch, ISL: in.ISL, OSL: in.OSL}, in.ISL, in.OSL)
		if err != nil {
			return kvPlan{}, err
		}
		e.KVCapacityTokens = n
	case e.KVCapacityTokens <= 0:
		return kvPlan{}, fmt.Errorf("KV pool of %s %s: no memory model to size it from and none recorded (internal)", in.Mode, in.Parallel())
	}
	k := kvPlan{capTokens: e.KVCapacityTokens, capBlocks: e.KVCapacityTokens / bs, perReq: ceilDivInt(in.ISL+in.OSL, bs),
		perPass: e.Traits().PerPassKV}
	if k.perReq > k.capBlocks {
		// A pool set by the point's engine config (the memory model's always holds
		// one request): every request would be preempted forever (V-R6).
		return k, fmt.Errorf("%w: the KV pool of %d tokens (%d blocks of %d) cannot hold one request of isl %d + osl %d (%d blocks); raise the pool or shorten the request",
			perfdb.ErrOOM, e.KVCapacityTokens, k.capBlocks, bs, in.ISL, in.OSL, k.perReq)
	}
	k.demandBlocks = in.Batch * k.perReq
	k.tight = KVTight(e.KVCapacityTokens, bs, in.Batch, in.ISL, in.OSL)
	return k, nil
}

// KVTight reports whether a pool of capTokens, in blocks of bs tokens, cannot
// hold batch running requests of isl + osl tokens all at full length: a
// KV-tight point, where the engines preempt, retract or pause (planKV; eval's
// default pool).
func KVTight(capTokens, bs, batch, isl, osl int) bool {
	return batch > KVHeld(capTokens, bs, isl, osl)
}

// KVHeld is how many requests of isl + osl tokens a pool of capTokens, in
// blocks of bs tokens, holds at full length.
func KVHeld(capTokens, bs, isl, osl int) int {
	return capTokens / bs / ceilDivInt(isl+osl, bs)
}

// DeployedPool is the KV pool (tokens) an agg worker of engine e runs with when
// deployed under engine profile profile by rules that read rules' batch, isl
// and osl, for requests of up to isl + osl tokens: SGLang's graph reserve
// (CUDAGraphMaxBS), the pool its memory holds (KVPoolTokens, with e's memory
// keys), then a pool e's config set (EnginePool). The sweep (planKV, both
// pools of a disaggregated row too), trace replay against a sweep point
// (PointSetup), eval's --kv-capacity-tokens auto and eval --mode disagg's
// config memory keys size pools with it.
func DeployedPool(est *perfdb.Estimator, e engine.Spec, profile string, rules queueing.ProfileInput, isl, osl int) (int, error) {
	rules.Backend, rules.Role = string(e.Backend), queueing.RoleAgg
	graphBS, err := CUDAGraphMaxBS(profile, rules)
	if err != nil {
		return 0, err
	}
	n, err := KVPoolTokens(est, e, isl, osl, graphBS)
	if err != nil {
		return 0, err
	}
	return EnginePool(e, n), nil
}

// EnginePool is the KV pool engine e runs with when its memory holds memTokens
// (KVPoolTokens): a pool e's config set (e.KVCapacityTokens > 0) replaces it on
// vLLM (num_gpu_blocks_override) and caps it on TensorRT-LLM
// (kv_cache_config.max_tokens: the engine takes the smaller) and SGLang
// (max_total_tokens: min with the profiled pool).
func EnginePool(e engine.Spec, memTokens int) int {
	switch {
	case e.KVCapacityTokens <= 0:
		return memTokens
	case e.Backend == engine.VLLM:
		return e.KVCapacityTokens
	}
	return min(e.KVCapacityTokens, memTokens)
}

// KVPoolTokens is the KV pool (tokens, whole blocks of e's block size) est's
// worker allocates under engine e: SGLang sizes its own (profile_max_num_token,
// perfdb SGLangKVPoolTokens; graphMaxBS > 0 is its cuda_graph_max_bs, 0 the
// capacity tier's), the other engines get the memory model's budget (perfdb
// KVCapacityTokensWith). The memory keys of e's config apply (perfdb
// KVPoolKnobs): its memory fraction, vLLM's kv_cache_memory_bytes, and SGLang's
// cuda_graph_max_bs, which replaces graphMaxBS (the config's keys apply over
// the profile's launch).
func KVPoolTokens(est *perfdb.Estimator, e engine.Spec, isl, osl, graphMaxBS int) (int, error) {
	bs := max(e.BlockSize, 1)
	k := perfdb.KVPoolKnobs{MemFraction: e.MemFraction, GraphMaxBS: graphMaxBS}
	if e.CUDAGraphMaxBS > 0 {
		k.GraphMaxBS = e.CUDAGraphMaxBS
	}
	if e.Backend == engine.SGLang {
		return est.SGLangKVPoolTokens(isl, osl, bs, k)
	}
	k.KVCacheBytes = float64(e.KVCacheMemoryBytes)
	return est.KVCapacityTokensWith(isl, osl, bs, k)
}

// CUDAGraphMaxBS is the cuda_graph_max_bs SGLang sizes mem_fraction_static with
// (KVPoolTokens) for a worker deployed under engine profile profile (a point's
// EngineProfile, "+config" suffix included, or eval's --engine-profile) whose
// rules read in (backend, role and batch). aiconfigurator's rules launch SGLang
// with --cuda-graph-bs 1…max_batch_size (benchmark/sglang.rule,
// cuda_graph_batch_sizes), and SGLang sets cuda_graph_max_bs = max(cuda_graph_bs)
// when the list is given (ServerArgs._handle_gpu_memory_settings, before it
// derives mem_fraction_static; max_running_requests does not enter it): the
// rules' max_batch_size, whatever an engine config or flag later makes of
// max_running_requests (SGLang captures no graph above that, but the memory
// reserve is already fixed). 0 — the capacity tier's default — under any other
// profile or for another backend.
func CUDAGraphMaxBS(profile string, in queueing.ProfileInput) (int, error) {
	if engine.Backend(in.Backend) != engine.SGLang {
		return 0, nil
	}
	if profile != queueing.ProfileAIConfigurator && !strings.HasPrefix(profile, queueing.ProfileAIConfigurator+"+") {
		return 0, nil
	}
	// The rules' engine: its max_running_requests is their max_batch_size, the
	// same value the --cuda-graph-bs list runs to.
	e, err := queueing.ProfileEngine(queueing.ProfileAIConfigurator, in)
	if err != nil {
		return 0, fmt.Errorf("cuda_graph_max_bs: %w", err)
	}
	return max(e.SeatCap(), 0), nil
}

func ceilDivInt(a, b int) int { return (a + b - 1) / b }

// screeningEngine is e as the screening tier takes it: the per-pass engines'
// capacity dropped (the closed form has none; kvPlan decides whether that loses
// anything), TRT-LLM GUARANTEED_NO_EVICT's kept (its admission cap is modelled).
func (k kvPlan) screeningEngine(e engine.Spec) engine.Spec {
	if k.perPass {
		e.KVCapacityTokens = 0
	}
	return e
}

// screening returns the screening row's KV columns and whether its bracket may
// stay certain.
func (k kvPlan) screening() (store.KV, bool) {
	kv := store.KV{CapacityTokens: k.capTokens}
	switch {
	case !k.tight:
		kv.UtilPeak, kv.HasUtil = float64(k.demandBlocks)/float64(k.capBlocks), true
		kv.HasPreemptions = true
		kv.Note = fmt.Sprintf("screening: C requests at full length need %d of %d blocks: no preemption possible; kv_util_peak is that bound", k.demandBlocks, k.capBlocks)
		return kv, true
	case !k.perPass:
		admitted := k.capBlocks / k.perReq
		kv.UtilPeak, kv.HasUtil = float64(admitted*k.perReq)/float64(k.capBlocks), true
		kv.HasPreemptions = true
		kv.Note = fmt.Sprintf("screening: KV-tight (%d > %d blocks): guaranteed_no_evict admits %d requests at a time and never evicts (T-R1)", k.demandBlocks, k.capBlocks, admitted)
		return kv, true
	}
	kv.Note = fmt.Sprintf("screening: KV-tight (C requests at full length need %d > %d blocks): preemption has no closed form; evaluate at quantitative tier", k.demandBlocks, k.capBlocks)
	return kv, false
}

// quantitativeEngine is e for the quantitative tier, or an error wrapping
// ErrNoQuantitative when the calendar cannot model the point's pressure: a cached
// prefix under a per-pass engine's KV pressure is not modelled (checkKVFit). A
// point that is not tight cannot feel its pool, so it runs without one.
func (k kvPlan) quantitativeEngine(e engine.Spec, prefix int) (engine.Spec, error) {
	if prefix > 0 && k.perPass {
		if k.tight {
			return e, fmt.Errorf("%w: KV-tight (%d > %d blocks) with a cached prefix of %d tokens: KV pressure with a cached prefix is not modelled",
				ErrNoQuantitative, k.demandBlocks, k.capBlocks, prefix)
		}
		e.KVCapacityTokens = 0
	}
	return e, nil
}

// quantitative returns the quantitative row's KV columns: measured by the
// calendar when it ran with the pool (ran), else (a point that fits, run without
// its pool) the screening bound.
func (k kvPlan) quantitative(r *queueing.Report, ran bool) store.KV {
	if !ran {
		kv, _ := k.screening()
		kv.Note = ""
		return kv
	}
	return store.KV{CapacityTokens: k.capTokens, UtilPeak: min(r.KVUtilPeak, 1), HasUtil: true,
		PreemptionsPerRequest: r.PreemptionsPerRequest, HasPreemptions: true}
}

// isKVOOM reports a point whose worker cannot hold one request (planKV).
func isKVOOM(err error) bool { return errors.Is(err, perfdb.ErrOOM) }
