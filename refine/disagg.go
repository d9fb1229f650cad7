package refine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/aicdb/aicdb/disagg"
	"github.com/aicdb/aicdb/engine"
	"github.com/aicdb/aicdb/perfdb"
	"github.com/aicdb/aicdb/queueing"
	"github.com/aicdb/aicdb/queueing/timing"
	"github.com/aicdb/aicdb/queueing/workload"
	"github.com/aicdb/aicdb/store"
)

// disaggSetup builds the tandem of a disaggregated row (QUEUEING.md §6): each pool
// priced by its own perf data at its own parallelism, the engines the row
// recorded (resolveEngines: the profile's prefill and decode roles with the
// sweep's --engine-config applied over both; rows that recorded none get the
// original rule's, PointResolved), the fabric of the system spec and the KV
// handoff of the model. With attention DP a pass priced by the perf data is one
// rank's (perfdb's PassTiming), so each attention-DP rank of a worker is a
// tandem worker of its own: w × dp workers of tp × pp GPUs, each running as
// many requests as its engine's running cap (the row's per-rank batch p_batch,
// d_batch × pp unless the config set another) — aiconfigurator's batch is per
// rank (its decode concurrency is d_batch × d_workers × d_pp × d_dp). Sweep
// rows have p_dp = d_dp = 1. The closed loop runs at the row's concurrency
// d_batch × d_workers × d_pp × d_dp, as the legacy row.
//
// Each pool's KV pool is the one its engine deploys, sized by the one agg rule
// (planKV: DeployedPool with the engine's memory keys, then a pool its config
// set): a worker that cannot hold one request is an error wrapping
// perfdb.ErrOOM (an OOM row). The decode pool bounds the tandem's decode
// workers (pull reservations, vLLM's block growth and preemption) when it can
// bind — its running requests at full length (Config.DecodeRunning, as the
// tandem counts them) need more blocks than it has; otherwise it cannot change a
// pass and the tandem runs without it. The prefill pool is modelled for vLLM
// and TensorRT-LLM prefill workers of a pull connector (a held prompt keeps its
// blocks until pulled, V-P3, T-D1); elsewhere (SGLang) it is checked, not
// modelled: a quantitative run whose prefill holds would exceed it has no
// quantitative tier (quantitativeDisagg).
func (p *PerfdbEvaluator) disaggSetup(ctx context.Context, in store.PointInputs, adj PassAdjust) (workload.Spec, disagg.Config, kvPlan, error) {
	if err := adj.Validate(); err != nil {
		return workload.Spec{}, disagg.Config{}, kvPlan{}, err
	}
	var c disagg.Config
	var dk kvPlan
	pmTP, pmEP, err := p.poolMoE(ctx, in, in.PTP, in.PDP)
	if err != nil {
		return workload.Spec{}, c, dk, err
	}
	dmTP, dmEP, err := p.poolMoE(ctx, in, in.DTP, in.DDP)
	if err != nil {
		return workload.Spec{}, c, dk, err
	}
	pre, ppt, err := p.estimator(ctx, in, in.PTP, in.PPP, in.PDP, pmTP, pmEP)
	if err != nil {
		return workload.Spec{}, c, dk, err
	}
	_, dpt, err := p.estimator(ctx, in, in.DTP, in.DPP, in.DDP, dmTP, dmEP)
	if err != nil {
		return workload.Spec{}, c, dk, err
	}
	pe, de, err := disaggEngines(in)
	if err != nil {
		return workload.Spec{}, c, dk, err
	}
	// MTP is the point's, on both pools as aiconfigurator's generator deploys it
	// (speculative_config on the prefill and the decode engine): the decode
	// engine schedules the drafts and their acceptance (T-R3, S-R3 under EAGLE),
	// and each pool's pass timing prices the MTP layers (WorkerConfig's Nextn).
	for _, e := range []*engine.Spec{&pe, &de} {
		e.SetDrafts(in.NextN, in.NextNAccepted)
		if in.NextN > 0 {
			if err := e.Validate(); err != nil {
				return workload.Spec{}, c, dk, fmt.Errorf("disagg %s: %w", in.Parallel(), err)
			}
		}
	}
	kvb, err := disagg.KVBytesPerLink(pre, in.PTP, in.DTP)
	if err != nil {
		return workload.Spec{}, c, dk, err
	}
	w := workload.Spec{ISL: in.ISL, OSL: in.OSL, Concurrency: in.DBatch * in.DWorkers * in.DPP * in.DDP}
	// The prefill worker holds a prompt and its first token until the pull.
	pk, err := poolKV(ppt, in, pe, in.PBatch*max(in.PPP, 1), in.ISL, 1)
	if err != nil {
		return workload.Spec{}, c, dk, fmt.Errorf("disagg %s prefill pool: %w", in.Parallel(), err)
	}
	if dk, err = poolKV(dpt, in, de, in.DBatch*max(in.DPP, 1), in.ISL, in.OSL); err != nil {
		return workload.Spec{}, c, dk, fmt.Errorf("disagg %s decode pool: %w", in.Parallel(), err)
	}
	c = disagg.Config{
		// The prefill pool: modelled for vLLM and TensorRT-LLM pull connectors,
		// else checked (disagg.PrefillHoldsError).
		Prefill:         disagg.Pool{Engine: pe, Timing: ppt, Workers: in.PWorkers * in.PDP, GPUsPerWorker: in.PTP * in.PPP, KVCapacityTokens: pk.capTokens},
		Decode:          disagg.Pool{Engine: de, Timing: dpt, Workers: in.DWorkers * in.DDP, GPUsPerWorker: in.DTP * in.DPP},
		Fabric:          disagg.FabricOf(pre.System()),
		KVBytesPerToken: kvb,
	}
	if in.EngineProfile == "" {
		// The original rule caps both pools at the row's batch; rows recorded
		// before it set the prefill engine's running cap carry the defaults'.
		c.Prefill.BatchCap, c.Decode.BatchCap = in.PBatch*max(in.PPP, 1), in.DBatch*max(in.DPP, 1)
	}
	// A calibration corrects each pool's pass timing as it corrects an aggregated
	// worker's (the same kernels, PassAdjust); its per-request overhead is the
	// frontend's and counts once, in the stage the tandem takes from the prefill
	// engine.
	c.Prefill.Timing = adj.Apply(&c.Prefill.Engine, c.Prefill.Timing)
	da := adj
	da.RequestOverheadMs = 0
	c.Decode.Timing = da.Apply(&c.Decode.Engine, c.Decode.Timing)
	// A decode worker's running requests at full length against its pool, counted
	// as the tandem counts them (Config.DecodeRunning: its running cap, at most C).
	dk.demandBlocks = max(c.DecodeRunning(w), 1) * dk.perReq
	dk.tight = dk.demandBlocks > dk.capBlocks
	if dk.tight {
		if de.Backend == engine.TRTLLM && de.CapacityPolicy == engine.PolicyMaxUtilization {
			// The tandem reserves a TensorRT-LLM decode request's final KV at the
			// pull (T-D3), which is guaranteed_no_evict's rule (T-R1), not
			// max_utilization's pausing (T-R2).
			return workload.Spec{}, c, dk, &roleKeyError{fmt.Sprintf("disagg %s decode pool: --engine-config capacity_scheduler_policy %s cannot apply to the decode role of a KV-tight pool (%d requests at full length need %d > %d blocks): the tandem reserves each request's final KV at the pull (T-D3); use guaranteed_no_evict or give the decode pool more KV",
				in.Parallel(), de.CapacityPolicy, dk.demandBlocks/max(dk.perReq, 1), dk.demandBlocks, dk.capBlocks)}
		}
		c.Decode.KVCapacityTokens = dk.capTokens
	}
	return w, c, dk, nil
}

// roleKeyError is an engine config key that cannot apply to one pool of a
// disaggregated row (bad input: CheckDisagg refuses the sweep before it stores
// anything).
type roleKeyError struct{ msg string }

func (e *roleKeyError) Error() string { return e.msg }

// disaggEngines are the prefill and decode engines of a disaggregated row: the
// ones it recorded, else the original rule's (PointResolved).
func disaggEngines(in store.PointInputs) (engine.Spec, engine.Spec, error) {
	r, _, err := PointResolved(in)
	if err != nil {
		return engine.Spec{}, engine.Spec{}, fmt.Errorf("disagg %s: %w", in.Parallel(), err)
	}
	if r.Prefill == nil || r.Decode == nil {
		return engine.Spec{}, engine.Spec{}, fmt.Errorf("disagg %s: its engine config records no prefill and decode engine (internal)", in.Parallel())
	}
	return *r.Prefill, *r.Decode, nil
}

// poolKV is planKV for one pool of a disaggregated row: the pool engine e
// deploys on a worker priced by pt for requests of isl + osl tokens, under the
// profile's rules read at the pool's per-worker batch (resolveEngines' rules
// batch: SGLang's graph reserve, CUDAGraphMaxBS); e itself is left as
// recorded. Its demand and tightness are planKV's at the rules batch; the
// decode pool's are recounted per worker by disaggSetup (Config.DecodeRunning).
func poolKV(pt *perfdb.PassTiming, in store.PointInputs, e engine.Spec, rulesBatch, isl, osl int) (kvPlan, error) {
	q := in
	q.Batch, q.ISL, q.OSL = max(rulesBatch, 1), isl, osl
	return planKV(pt, q, &e)
}

// decodeKVNote is the kv_note of a disaggregated row's screening tier: how its
// decode pool meets the running requests (k from poolKV, which refuses a pool
// that cannot hold one request).
func decodeKVNote(k kvPlan) string {
	n := k.demandBlocks / max(k.perReq, 1)
	if k.tight {
		return fmt.Sprintf("screening: decode KV-tight (%d requests per decode worker at full length need %d > %d blocks): the tandem bounds each decode worker's pool", n, k.demandBlocks, k.capBlocks)
	}
	return fmt.Sprintf("screening: a decode worker's pool holds its %d requests at full length (%d of %d blocks): the tandem runs without a bound", n, k.demandBlocks, k.capBlocks)
}

// screenDisagg is Screen for a disaggregated row: the tandem's closed form. Rows
// with a prefix stay composed (the tandem does not model prefix caching yet).
func (p *PerfdbEvaluator) screenDisagg(ctx context.Context, in store.PointInputs, adj PassAdjust) (store.Queueing, error) {
	if in.Prefix > 0 {
		return store.Queueing{Tier: store.TierComposed}, nil
	}
	w, c, dk, err := p.disaggSetup(ctx, in, adj)
	if err != nil {
		return store.Queueing{}, err
	}
	r, err := disagg.Screening(w, c)
	if err != nil {
		return store.Queueing{}, fmt.Errorf("disagg %s: %w", in.Parallel(), err)
	}
	q := store.Queueing{Valid: true, Tier: string(r.Tier), Fidelity: string(r.Fidelity), HasBracket: true,
		P99Lo: r.TTFTSteadyP99Lo, P99Hi: r.TTFTSteadyP99Hi, HiCertain: r.Diagnostics.BracketCertain}
	if err := fillColumns(&q.V, &r.Report); err != nil {
		return store.Queueing{}, err
	}
	q.H = handoffOf(r)
	q.KV.Note = decodeKVNote(dk)
	return q, nil
}

// handoffOf is the row's handoff columns from a tandem report (migration 00011).
func handoffOf(r *disagg.Report) store.Handoff {
	if r.Unstable {
		return store.Handoff{}
	}
	return store.Handoff{Valid: true, KVTransferMsMean: r.KVTransfer.Mean(), KVTransferMsP99: r.KVTransfer.Quantile(0.99),
		HasKVTransferP99: true, PQueueMsP99: r.PQueueMsP99, DHeadroomMin: r.DHeadroomMin, MultiStable: r.MultiStable}
}

// quantitativeDisagg is Quantitative for a disaggregated row: the tandem's event
// recursion, its steady state, or the benchmark run when run is set
// (disagg.QuantitativeFinite under the default client round trip, as the
// aggregated rows' runs).
func (p *PerfdbEvaluator) quantitativeDisagg(ctx context.Context, in store.PointInputs, adj PassAdjust, run *queueing.FiniteRun, summary bool) (store.Quantitative, error) {
	if in.Prefix > 0 {
		return store.Quantitative{}, fmt.Errorf("disagg %s with prefix %d: %w (the tandem does not model prefix caching yet)", in.Parallel(), in.Prefix, ErrNoQuantitative)
	}
	w, c, _, err := p.disaggSetup(ctx, in, adj)
	if err != nil {
		return store.Quantitative{}, err
	}
	var r *disagg.Report
	switch {
	case run != nil && summary:
		r, err = disagg.QuantitativeFiniteSummary(ctx, w, c, *run, queueing.DefaultClientRTTMs)
	case run != nil:
		r, err = disagg.QuantitativeFinite(ctx, w, c, *run, queueing.DefaultClientRTTMs)
	default:
		r, err = disagg.Quantitative(ctx, w, c, disagg.Options{})
	}
	if held := (*disagg.PrefillHoldsError)(nil); errors.As(err, &held) {
		return store.Quantitative{}, fmt.Errorf("disagg %s: %w: %v", in.Parallel(), ErrNoQuantitative, held)
	}
	if err != nil {
		return store.Quantitative{}, fmt.Errorf("disagg %s: %w", in.Parallel(), err)
	}
	var out store.Quantitative
	if err := fillColumns(&out.V, &r.Report); err != nil {
		return out, err
	}
	out.ThroughputRPS, out.OutputTokensPerS, out.Fidelity = r.ThroughputRPS, r.OutputTokensPerS, string(r.Fidelity)
	out.H = handoffOf(r)
	if summary { // the fit's objective: never stored, no distributions
		return out, nil
	}
	d, err := json.Marshal(map[string]any{"ttft_steady": r.TTFTSteady, "ttft_transient": r.TTFTTransient,
		"itl": r.ITL, "tpot": r.TPOT, "e2e": r.E2E, "kv_transfer": r.KVTransfer,
		"p_queue_ms_p99": r.PQueueMsP99, "d_headroom_min": r.DHeadroomMin, "multi_stable": r.MultiStable})
	if err != nil {
		return out, fmt.Errorf("encode distributions: %w", err)
	}
	out.Distributions = string(d)
	return out, nil
}

// modelFingerprint folds the tandem's numbers at a probe point (both tiers,
// synthetic linear timing) into the queueing fingerprint, so a change of either
// model gives the evaluator a new name.
var modelFingerprint = sync.OnceValue(func() string {
	h := sha256.New()
	h.Write([]byte(queueingFingerprint()))
	// disaggSetup's mapping of a row onto the tandem (not probed below): bump on change.
	h.Write([]byte("disaggSetup v8: attention-DP ranks are tandem workers; the recorded prefill/decode engines; the decode pool's KV when it can bind, reserved in whole blocks; a calibration adjusts both pools; kernels hold back a replacement tying a pass start; prefill holds checked against the prefill pool; v8: a vLLM or TensorRT-LLM pull prefill pool modelled (held prompts keep their blocks), the engine loop rescheduling after a self-eviction, async kernels scheduling at the pass start;"))
	t := timing.Linear{BaseMs: 5, PrefillMsPerToken: 0.02, DecodeMsPerRow: 0.1, CtxMsPerToken: 0.0001}
	w := workload.Spec{ISL: 2048, OSL: 64, Concurrency: 8}
	// Each backend's own disaggregated rules (vLLM V-D4, SGLang S-D1/S-D4) are probed.
	for _, b := range []engine.Backend{engine.VLLM, engine.SGLang} {
		e, err := engine.Defaults(b, "")
		if err != nil {
			fmt.Fprintf(h, "%v;", err)
		}
		c := disagg.Config{Prefill: disagg.Pool{Engine: e, Timing: t, Workers: 2}, Decode: disagg.Pool{Engine: e, Timing: t, Workers: 1, KVCapacityTokens: 8 * 2112},
			Fabric: disagg.Fabric{InterNodeGBps: 5}, KVBytesPerToken: 1e5}
		if b == engine.SGLang {
			c.Decode.BatchCap = 2 // 6 decode slots for 8 clients: S-D2 binds
		}
		for _, eval := range []func() (*disagg.Report, error){
			func() (*disagg.Report, error) { return disagg.Screening(w, c) },
			func() (*disagg.Report, error) {
				return disagg.Quantitative(context.Background(), w, c, disagg.Options{})
			},
			// Measured runs: the closed loop's and an open loop's (two paths).
			func() (*disagg.Report, error) {
				return disagg.QuantitativeFinite(context.Background(), w, c, queueing.FiniteRun{Requests: 24}, queueing.DefaultClientRTTMs)
			},
			func() (*disagg.Report, error) {
				return disagg.QuantitativeFinite(context.Background(), w, c,
					queueing.FiniteRun{Requests: 24, Open: true, RateRPS: 20, MaxConcurrency: 6, Paths: 2}, queueing.DefaultClientRTTMs)
			},
		} {
			r, err := eval()
			if err != nil {
				fmt.Fprintf(h, "%v;", err)
				continue
			}
			js, _ := json.Marshal(r.Columns(1)) // map keys are sorted: stable
			h.Write(js)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:8]
})

// disaggFits refuses a sweep that asks for disaggregated rows when no prefill +
// decode pair of its tps fits the GPUs (nP·tp_P + nD·tp_D ≤ --total-gpus with
// nP, nD ≥ 1): bad input, said before anything is stored.
func disaggFits(s SweepSpec, tps []int) error {
	if !slices.Contains(s.Modes, store.ModeDisagg) || len(tps) == 0 {
		return nil
	}
	least := 2 * slices.Min(tps)
	if least <= s.TotalGPUs {
		return nil
	}
	return fmt.Errorf("--mode %s: the smallest disaggregated deployment (one prefill and one decode worker at tp %d) needs %d GPUs, above --total-gpus %d; give --total-gpus ≥ %d, a smaller --tp, or --mode agg",
		strings.Join(s.Modes, ","), slices.Min(tps), least, s.TotalGPUs, least)
}

// CheckDisagg refuses a disaggregated sweep that cannot produce one priced row
// (bad input, said before anything is stored): a system whose spec gives the KV
// fabric no bandwidth (inter_node_bw ≤ 0), a request that no decode worker's
// KV can hold at any decode tp of the sweep (aiconfigurator's disagg memory rule,
// disagg.DecodeKVCapacityTokens), or an engine config key that cannot apply to
// a pool of one of its rows (roleKeyError, found by setting up, per pool shape,
// the row of the most decode workers: its decode pool runs the most requests,
// so it is KV-tight whenever another row of the shape is). A decode tp that
// cannot hold one request while another can just gives OOM rows. Perf-data
// gaps are left to the points.
func (p *PerfdbEvaluator) CheckDisagg(ctx context.Context, pts []store.PointInputs) error {
	most := map[[5]int]int{} // pool shape → the index of its row of the most decode workers
	var order [][5]int
	for i, in := range pts {
		if in.Mode != store.ModeDisagg || in.Prefix > 0 {
			continue
		}
		k := [5]int{in.PTP, in.DTP, in.DPP, in.DDP, in.DBatch}
		j, ok := most[k]
		if !ok {
			order = append(order, k)
		}
		if !ok || in.DWorkers > pts[j].DWorkers {
			most[k] = i
		}
	}
	for _, k := range order {
		var re *roleKeyError
		if _, _, _, err := p.disaggSetup(ctx, pts[most[k]], Identity()); errors.As(err, &re) {
			return err
		}
	}
	// Every (prefill, decode) tp pair is tried: DecodeKVCapacityTokens prices a
	// prefill worker beside the decode one, and a prefill tp whose weights do not
	// fit makes every decode tp look KV-tight (a 671B model at prefill tp 1).
	seen := map[[2]int]bool{}
	var tps []int
	held := false
	for _, in := range pts {
		if in.Mode != store.ModeDisagg || seen[[2]int{in.PTP, in.DTP}] {
			continue
		}
		seen[[2]int{in.PTP, in.DTP}] = true
		if !slices.Contains(tps, in.DTP) {
			tps = append(tps, in.DTP)
		}
		pmTP, pmEP, err := p.poolMoE(ctx, in, in.PTP, in.PDP)
		if err != nil {
			held = true // not this check's business: the points report it
			continue
		}
		dmTP, dmEP, err := p.poolMoE(ctx, in, in.DTP, in.DDP)
		if err != nil {
			held = true
			continue
		}
		pre, _, err := p.estimator(ctx, in, in.PTP, in.PPP, in.PDP, pmTP, pmEP)
		if err != nil {
			held = true
			continue
		}
		if f := disagg.FabricOf(pre.System()); !(f.InterNodeGBps > 0) {
			return fmt.Errorf("--system %s: inter_node_bw is %v, so disaggregated rows have no KV fabric; fix the system spec (node.inter_node_bw) or use --mode agg", in.System, pre.System().InterNodeBW)
		}
		dec, _, err := p.estimator(ctx, in, in.DTP, in.DPP, in.DDP, dmTP, dmEP)
		if err != nil {
			held = true
			continue
		}
		if _, err := disagg.DecodeKVCapacityTokens(pre, dec, in.ISL, in.OSL); !errors.Is(err, disagg.ErrDecodeKV) {
			held = true
		}
	}
	if held || len(tps) == 0 {
		return nil
	}
	in := pts[len(pts)-1]
	return fmt.Errorf("--isl %d + --osl %d: a decode worker's KV cannot hold one request of %s on %s at any decode tp of the sweep %v; shorten the request, allow a larger --tp, or use --mode agg",
		in.ISL, in.OSL, in.Model, in.System, tps)
}

// disaggChecker is an evaluator that can refuse a disaggregated sweep before it
// stores anything (PerfdbEvaluator.CheckDisagg).
type disaggChecker interface {
	CheckDisagg(ctx context.Context, pts []store.PointInputs) error
}
