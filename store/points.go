package store

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Point modes.
const (
	ModeAgg    = "agg"
	ModeDisagg = "disagg"
)

// Queueing tiers (the precision class of a row's queueing columns).
const (
	TierScreening    = "screening"
	TierQuantitative = "quantitative"
	TierStatic       = "static"
	TierComposed     = "composed"
	TierNone         = "none" // no queueing model applies (e.g. an OOM row)
)

// PointInputs are every input of an operating point: the row key is their hash.
// Disaggregated points set the P*/D* fields and leave Batch/CtxTokens to the decode
// side's values; aggregated points leave P*/D* at zero.
type PointInputs struct {
	Model, System, Backend, Version, Mode string

	ISL, OSL, Prefix int

	TP, PP, DP, MoETP, MoEEP int

	// Batch is the per-worker batch (agg: concurrency per replica / (pp·dp)).
	Batch int
	// CtxTokens is the per-iteration prefill token budget of aiconfigurator's agg sweep.
	CtxTokens int
	// Engine knobs the queueing layer reads (0 = backend default).
	MaxNumBatchedTokens int
	MaxNumSeqs          int
	ChunkedPrefill      bool

	DatabaseMode                                            string
	GemmQuant, KVCacheQuant, FMHAQuant, MoEQuant, CommQuant string
	// NextN is the MTP draft length (vLLM MTP or an EAGLE head its engine config
	// names, TensorRT-LLM one-model MTP, SGLang EAGLE/NEXTN; 0 = none) and
	// NextNAccepted the mean drafts accepted per decode step, in [0, NextN]
	// (aiconfigurator's nextn / nextn_accepted); the latter is in the key only
	// when NextN > 0.
	NextN         int
	NextNAccepted float64

	// Disaggregated shape: workers, batch and parallelism of each pool.
	PWorkers, PBatch, PTP, PPP, PDP int
	DWorkers, DBatch, DTP, DPP, DDP int

	// Evaluator names the code that produced the row's numbers; a new evaluator
	// version gives new keys instead of silently reusing stale rows.
	Evaluator string

	// EngineProfile names how the point's engine was configured when that is not
	// the sweep's original rule: "" = the engines' defaults with the sweep's
	// budget (ctx_tokens + batch) and running cap (batch); otherwise the profile
	// ("aiconfigurator", …) with "+config" when an engine config file was applied.
	// When set, it and Engine go into the row key (rows of the original rule keep
	// their keys).
	EngineProfile string
	// Engine is the resolved engine configuration as JSON (engineconf.Resolved),
	// stored as operating_points.engine_config; "" = not recorded.
	Engine string
	// Workload identifies a trace workload (W3/W4, refine.TraceWorkloadID, canonical
	// JSON: trace name, content hash, slice, sessions, replicas); "" for a fixed
	// shape (ISL/OSL/Prefix). When set it goes into the row key and the group, and
	// ISL/OSL hold the trace slice's mean lengths (the legacy estimate's shape).
	Workload string
	// Deployed is the engine version the point is deployed at when it is not
	// Version, the perf-data version it is priced at ("" = Version; never equal
	// to it, see DeployedAs). A measurement of an engine version without perf
	// data of its own is priced at the nearest version that has
	// (perfdb.NearestVersion) and keeps its own here: calibrations are keyed by it
	// (migration 00015). When set it goes into the row key.
	Deployed string
}

// DeployedAs is PointInputs.Deployed for a point of engine version deployed
// priced at perf-data version version: "" when they are the same or deployed
// is not stated.
func DeployedAs(deployed, version string) string {
	if deployed == version {
		return ""
	}
	return deployed
}

// DeployedVersion is the engine version the point is deployed at: Deployed, or
// Version when that is unset.
func (p *PointInputs) DeployedVersion() string {
	if p.Deployed != "" {
		return p.Deployed
	}
	return p.Version
}

// Key returns the row key: the sha256 hex of a canonical encoding of every input.
// The encoding is versioned and field-ordered; TestKeyGolden pins it.
func (p *PointInputs) Key() string {
	h := sha256.New()
	b := make([]byte, 0, 512)
	b = append(b, "aicdb-point-v1"...)
	str := func(name, v string) {
		b = append(b, 0)
		b = append(b, name...)
		b = append(b, '=')
		b = strconv.AppendQuote(b, v)
	}
	num := func(name string, v int) {
		b = append(b, 0)
		b = append(b, name...)
		b = append(b, '=')
		b = strconv.AppendInt(b, int64(v), 10)
	}
	str("model", p.Model)
	str("system", p.System)
	str("backend", p.Backend)
	str("version", p.Version)
	str("mode", p.Mode)
	num("isl", p.ISL)
	num("osl", p.OSL)
	num("prefix", p.Prefix)
	num("tp", p.TP)
	num("pp", p.PP)
	num("dp", p.DP)
	num("moe_tp", p.MoETP)
	num("moe_ep", p.MoEEP)
	num("batch", p.Batch)
	num("ctx_tokens", p.CtxTokens)
	num("max_num_batched_tokens", p.MaxNumBatchedTokens)
	num("max_num_seqs", p.MaxNumSeqs)
	num("enable_chunked_prefill", b2i(p.ChunkedPrefill))
	str("database_mode", p.DatabaseMode)
	str("gemm_quant", p.GemmQuant)
	str("kvcache_quant", p.KVCacheQuant)
	str("fmha_quant", p.FMHAQuant)
	str("moe_quant", p.MoEQuant)
	str("comm_quant", p.CommQuant)
	num("nextn", p.NextN)
	num("p_workers", p.PWorkers)
	num("p_batch", p.PBatch)
	num("p_tp", p.PTP)
	num("p_pp", p.PPP)
	num("p_dp", p.PDP)
	num("d_workers", p.DWorkers)
	num("d_batch", p.DBatch)
	num("d_tp", p.DTP)
	num("d_pp", p.DPP)
	num("d_dp", p.DDP)
	str("evaluator", p.Evaluator)
	if p.EngineProfile != "" {
		str("engine_profile", p.EngineProfile)
		str("engine", p.Engine)
	}
	if p.Workload != "" {
		str("workload", p.Workload)
	}
	if p.Deployed != "" {
		str("deployed_version", p.Deployed)
	}
	if p.NextN > 0 {
		str("nextn_accepted", strconv.FormatFloat(p.NextNAccepted, 'g', -1, 64))
	}
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Parallel returns aiconfigurator's parallel label: tp4pp1dp1etp1ep1 for agg,
// "p<workers>x<label>-d<workers>x<label>" for disagg.
func (p *PointInputs) Parallel() string {
	if p.Mode == ModeDisagg {
		return fmt.Sprintf("p%dxtp%dpp%ddp%d-d%dxtp%dpp%ddp%d",
			p.PWorkers, p.PTP, p.PPP, p.PDP, p.DWorkers, p.DTP, p.DPP, p.DDP)
	}
	return fmt.Sprintf("tp%dpp%ddp%detp%dep%d", p.TP, p.PP, p.DP, p.MoETP, p.MoEEP)
}

// NumGPUs returns the GPUs one replica of the point occupies.
func (p *PointInputs) NumGPUs() int {
	if p.Mode == ModeDisagg {
		return p.PWorkers*p.PTP*p.PPP*p.PDP + p.DWorkers*p.DTP*p.DPP*p.DDP
	}
	return p.TP * p.PP * p.DP
}

// Group returns the point's workload group (the pareto partition).
func (p *PointInputs) Group() Group {
	return Group{Model: p.Model, System: p.System, Backend: p.Backend, Version: p.Version,
		Mode: p.Mode, ISL: p.ISL, OSL: p.OSL, Prefix: p.Prefix, Workload: p.Workload, Deployed: p.Deployed}
}

// Validate reports the first input that cannot describe a point.
func (p *PointInputs) Validate() error {
	switch {
	case p.Model == "" || p.System == "" || p.Backend == "" || p.Version == "":
		return errors.New("point: model, system, backend and version must be set")
	case p.Mode != ModeAgg && p.Mode != ModeDisagg:
		return fmt.Errorf("point: mode %q: want agg or disagg", p.Mode)
	case p.ISL <= 0 || p.OSL <= 0:
		return fmt.Errorf("point: isl %d, osl %d: must be > 0", p.ISL, p.OSL)
	case p.Prefix < 0 || p.Prefix >= p.ISL:
		return fmt.Errorf("point: prefix %d: must be in [0, isl)", p.Prefix)
	case p.TP <= 0 || p.PP <= 0 || p.DP <= 0 || p.MoETP <= 0 || p.MoEEP <= 0:
		return errors.New("point: tp, pp, dp, moe_tp and moe_ep must be > 0")
	case p.Batch <= 0:
		return fmt.Errorf("point: batch %d: must be > 0", p.Batch)
	case p.Mode == ModeDisagg && (p.PWorkers <= 0 || p.DWorkers <= 0 || p.PTP <= 0 || p.DTP <= 0 ||
		p.PPP <= 0 || p.DPP <= 0 || p.PDP <= 0 || p.DDP <= 0 || p.PBatch <= 0 || p.DBatch <= 0):
		return errors.New("point: disagg needs workers, batch, tp, pp and dp > 0 on both pools")
	case p.Evaluator == "":
		return errors.New("point: evaluator must be set")
	case p.Engine != "" && !json.Valid([]byte(p.Engine)):
		return fmt.Errorf("point: engine config %.40q is not JSON", p.Engine)
	case p.EngineProfile != "" && p.Engine == "":
		return fmt.Errorf("point: engine profile %q without its resolved engine config", p.EngineProfile)
	case p.Workload != "" && !json.Valid([]byte(p.Workload)):
		return fmt.Errorf("point: workload %.40q is not JSON", p.Workload)
	case p.Deployed != "" && p.Deployed == p.Version:
		return fmt.Errorf("point: deployed version %q equals the priced version: leave it empty (store.DeployedAs)", p.Deployed)
	case p.NextN < 0 || !(p.NextNAccepted >= 0 && p.NextNAccepted <= float64(p.NextN)):
		return fmt.Errorf("point: nextn %d, nextn_accepted %v: want nextn ≥ 0 and 0 ≤ nextn_accepted ≤ nextn", p.NextN, p.NextNAccepted)
	}
	return nil
}

// Group is a workload group: the partition of the pareto frontier.
type Group struct {
	Model, System, Backend, Version, Mode string
	ISL, OSL, Prefix                      int
	// Workload is PointInputs.Workload ("" for fixed-shape rows).
	Workload string `json:",omitempty"`
	// Deployed is PointInputs.Deployed ("" = deployed at Version): deployments of
	// different engine versions have their own frontiers, as versions do.
	Deployed string `json:",omitempty" db:"deployed_version"`
}

// Legacy holds aiconfigurator's legacy estimate of a point (ms unless named).
type Legacy struct {
	OOM bool
	// Concurrency is the per-replica concurrency (aiconfigurator's `concurrency`).
	Concurrency int

	TTFT, TPOT, RequestLatency, RequestRate float64
	SeqPerS, SeqPerSPerGPU                  float64
	TokensPerS, TokensPerSPerGPU            float64
	TokensPerSPerUser, MemoryGiB            float64
}

func (l *Legacy) values() []float64 {
	return []float64{l.TTFT, l.TPOT, l.RequestLatency, l.RequestRate, l.SeqPerS, l.SeqPerSPerGPU,
		l.TokensPerS, l.TokensPerSPerGPU, l.TokensPerSPerUser, l.MemoryGiB}
}

// legacyColumns name Legacy.values in order.
var legacyColumns = []string{"ttft", "tpot", "request_latency", "request_rate", "seq_per_s",
	"seq_per_s_per_gpu", "tokens_per_s", "tokens_per_s_per_gpu", "tokens_per_s_per_user", "memory_gib"}

// Indices of Queueing.V: the queueing columns shared by the screening and the
// quantitative tier, named by QueueingColumns (the eval JSON keys).
const (
	QTTFTSteadyMean = iota
	QTTFTSteadyP50
	QTTFTSteadyP75
	QTTFTSteadyP90
	QTTFTSteadyP95
	QTTFTSteadyP99
	QTTFTSteadyP999
	QTTFTTransientMean
	QTTFTTransientMax
	QITLMean
	QITLP50
	QITLP99
	QTPOTMean
	QTPOTP50
	QTPOTP99
	QE2EMean
	QE2EP50
	QE2EP99
	NumQ
)

// QueueingColumns names the entries of Queueing.V (column names = eval JSON keys).
var QueueingColumns = [NumQ]string{
	"ttft_steady_mean", "ttft_steady_p50", "ttft_steady_p75", "ttft_steady_p90",
	"ttft_steady_p95", "ttft_steady_p99", "ttft_steady_p999",
	"ttft_transient_mean", "ttft_transient_max",
	"itl_mean", "itl_p50", "itl_p99",
	"tpot_mean", "tpot_p50", "tpot_p99",
	"e2e_mean", "e2e_p50", "e2e_p99",
}

// QueueingIndex returns the index of a queueing column name, or -1.
func QueueingIndex(col string) int {
	for i, c := range QueueingColumns {
		if c == col {
			return i
		}
	}
	return -1
}

// Queueing holds a point's queueing columns at one tier.
type Queueing struct {
	// Valid is false when the row has no queueing model (columns stored NULL).
	Valid    bool
	Tier     string
	Fidelity string
	V        [NumQ]float64
	// P99Lo and P99Hi bracket the steady TTFT (screening tier only; see QUEUEING.md §5):
	// P99Lo ≤ every steady TTFT of the quantitative evaluator; P99Hi ≥ its p99 when
	// HiCertain (otherwise P99Hi is an estimate and cannot prove a pass).
	P99Lo, P99Hi float64
	HasBracket   bool
	HiCertain    bool
	// H is the KV handoff of a disaggregated row at this tier (migration 00011).
	H Handoff
	// KV holds the row's KV-pressure columns at this tier.
	KV KV
}

// KV is a row's KV pressure (QUEUEING.md §3; migration 00012): the KV pool the
// point was evaluated with and what the queueing model says happens in it.
type KV struct {
	// CapacityTokens is the KV pool of one worker in tokens (0 = unbounded or not
	// computed: stored NULL).
	CapacityTokens int
	// UtilPeak is the peak fraction of the pool in use, in [0, 1] (valid when
	// HasUtil).
	UtilPeak float64
	HasUtil  bool
	// PreemptionsPerRequest is the mean number of preemptions (vLLM V-R6) or
	// retractions (SGLang S-R5) of a steady request (valid when HasPreemptions).
	PreemptionsPerRequest float64
	HasPreemptions        bool
	// Note says how the values were obtained or why they are absent (operating
	// points only).
	Note string
}

// Preempts reports that the row's steady state is known to preempt.
func (k *KV) Preempts() bool { return k.HasPreemptions && k.PreemptionsPerRequest > 0 }

// validate rejects values that cannot be stored.
func (k *KV) validate() error {
	switch {
	case k.CapacityTokens < 0:
		return fmt.Errorf("kv_capacity_tokens %d: must be ≥ 0", k.CapacityTokens)
	case k.HasUtil && (!finite(k.UtilPeak) || k.UtilPeak < 0 || k.UtilPeak > 1):
		return fmt.Errorf("kv_util_peak = %v: must be in [0, 1]", k.UtilPeak)
	case k.HasPreemptions && (!finite(k.PreemptionsPerRequest) || k.PreemptionsPerRequest < 0):
		return fmt.Errorf("preemptions_per_request = %v: must be finite and ≥ 0", k.PreemptionsPerRequest)
	}
	return nil
}

// args are the stored values of the kv_capacity_tokens, kv_util_peak and
// preemptions_per_request columns (NULL when absent).
func (k *KV) args() []any {
	var c any
	if k.CapacityTokens > 0 {
		c = k.CapacityTokens
	}
	return []any{c, nullable(k.UtilPeak, k.HasUtil), nullable(k.PreemptionsPerRequest, k.HasPreemptions)}
}

// Handoff holds a disaggregated row's KV-handoff metrics (QUEUEING.md §6) at the
// row's tier. Valid is false on aggregated and composed rows: the columns are then
// stored NULL.
type Handoff struct {
	Valid bool
	// KVTransferMsMean and KVTransferMsP99 are the KV flow's duration (ms);
	// HasKVTransferP99 is false on quantitative rows backfilled by migration 00011.
	KVTransferMsMean, KVTransferMsP99 float64
	HasKVTransferP99                  bool
	// PQueueMsP99 is the p99 of the prefill-side queueing delay (ms).
	PQueueMsP99 float64
	// DHeadroomMin is the smallest free share of a decode worker's KV (0..1).
	DHeadroomMin float64
	// MultiStable flags two steady regimes (quantitative tier; false on screening).
	MultiStable bool
}

// validate checks a handoff before it is written.
func (h *Handoff) validate() error {
	if !h.Valid {
		return nil
	}
	for _, c := range []struct {
		name string
		v    float64
	}{{"kv_transfer_ms_mean", h.KVTransferMsMean}, {"kv_transfer_ms_p99", h.KVTransferMsP99}, {"p_queue_ms_p99", h.PQueueMsP99}, {"d_headroom_min", h.DHeadroomMin}} {
		if !finite(c.v) || c.v < 0 {
			return fmt.Errorf("%s = %v: must be finite and ≥ 0", c.name, c.v)
		}
	}
	if h.DHeadroomMin > 1 {
		return fmt.Errorf("d_headroom_min = %v: must be in [0, 1]", h.DHeadroomMin)
	}
	return nil
}

// args are the handoff columns' values (NULL when not valid).
func (h *Handoff) args() []any {
	if !h.Valid {
		return []any{nil, nil, nil, nil, nil}
	}
	return []any{h.KVTransferMsMean, nullable(h.KVTransferMsP99, h.HasKVTransferP99), h.PQueueMsP99, h.DHeadroomMin, b2i(h.MultiStable)}
}

// handoffColumns name Handoff.args in order.
var handoffColumns = []string{"kv_transfer_ms_mean", "kv_transfer_ms_p99", "p_queue_ms_p99", "d_headroom_min", "multi_stable"}

// FromMap fills q.V from a flat column map keyed by QueueingColumns; every column
// must be present.
func (q *Queueing) FromMap(m map[string]float64) error {
	for i, c := range QueueingColumns {
		v, ok := m[c]
		if !ok {
			return fmt.Errorf("queueing result: column %s missing", c)
		}
		q.V[i] = v
	}
	return nil
}

// Point is one operating_points row.
type Point struct {
	PointInputs
	Key    string
	Legacy Legacy
	Q      Queueing
	// IsPareto is read back from the store (maintained by RefreshPareto).
	IsPareto bool
}

// NewPoint builds a row from its inputs and results, computing the key.
func NewPoint(in PointInputs, l Legacy, q Queueing) Point {
	return Point{PointInputs: in, Key: in.Key(), Legacy: l, Q: q}
}

// Validate checks a row before it is written: valid inputs, finite results, a
// consistent bracket. No NaN/Inf is ever stored.
func (p *Point) Validate() error {
	if err := p.PointInputs.Validate(); err != nil {
		return err
	}
	if p.Key != p.PointInputs.Key() {
		return fmt.Errorf("point %s: key does not match its inputs", p.Key)
	}
	if !p.Legacy.OOM {
		for i, v := range p.Legacy.values() {
			if !finite(v) || v < 0 {
				return fmt.Errorf("point %s: %s = %v: must be finite and ≥ 0", p.Parallel(), legacyColumns[i], v)
			}
		}
		if p.Legacy.Concurrency <= 0 {
			return fmt.Errorf("point %s: concurrency %d: must be > 0", p.Parallel(), p.Legacy.Concurrency)
		}
	}
	if p.Q.Valid {
		if err := p.Q.validate(); err != nil {
			return fmt.Errorf("point %s: %w", p.Parallel(), err)
		}
	}
	if err := p.Q.KV.validate(); err != nil {
		return fmt.Errorf("point %s: %w", p.Parallel(), err)
	}
	return nil
}

func (q *Queueing) validate() error {
	for i, v := range q.V {
		if !finite(v) || v < 0 {
			return fmt.Errorf("%s = %v: must be finite and ≥ 0", QueueingColumns[i], v)
		}
	}
	if q.HasBracket {
		if !finite(q.P99Lo) || !finite(q.P99Hi) || q.P99Lo > q.P99Hi || q.P99Lo < 0 {
			return fmt.Errorf("bracket [%v, %v]: must be finite with 0 ≤ lo ≤ hi", q.P99Lo, q.P99Hi)
		}
	}
	if q.Tier == "" || q.Fidelity == "" {
		return errors.New("queueing tier and workload fidelity must be set")
	}
	return q.H.validate()
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Quantitative is one quantitative_results row: the evaluator's columns for a point
// and its full distributions as JSON ({"ttft_steady": [[x, w], ...], ...}).
type Quantitative struct {
	Key              string
	V                [NumQ]float64
	ThroughputRPS    float64
	OutputTokensPerS float64
	Fidelity         string
	Distributions    string
	// Evaluator is the fingerprint (Evaluator.Name) of the code that computed the
	// row; rows written before migration 00005 have none and were deleted by it.
	Evaluator string
	// H is the KV handoff of a disaggregated point (not valid on agg points).
	H Handoff
	// KV is the KV pool the row was computed with and its measured pressure
	// (Note unused).
	KV KV
}

// Validate checks a quantitative row before it is written.
func (r *Quantitative) Validate() error {
	if len(r.Key) != 64 {
		return fmt.Errorf("quantitative result: key %q is not a point key", r.Key)
	}
	for i, v := range r.V {
		if !finite(v) || v < 0 {
			return fmt.Errorf("quantitative result %s: %s = %v: must be finite and ≥ 0", r.Key[:12], QueueingColumns[i], v)
		}
	}
	if !finite(r.ThroughputRPS) || !finite(r.OutputTokensPerS) || r.ThroughputRPS < 0 || r.OutputTokensPerS < 0 {
		return fmt.Errorf("quantitative result %s: throughput must be finite and ≥ 0", r.Key[:12])
	}
	if r.Fidelity == "" {
		return fmt.Errorf("quantitative result %s: workload fidelity must be set", r.Key[:12])
	}
	if r.Evaluator == "" {
		return fmt.Errorf("quantitative result %s: evaluator fingerprint must be set", r.Key[:12])
	}
	if err := r.KV.validate(); err != nil {
		return fmt.Errorf("quantitative result %s: %w", r.Key[:12], err)
	}
	if r.Distributions == "" {
		r.Distributions = "{}"
	}
	if err := r.H.validate(); err != nil {
		return fmt.Errorf("quantitative result %s: %w", r.Key[:12], err)
	}
	return nil
}
