package queueing

import (
	"encoding/json"

	"github.com/aicdb/aicdb/queueing/workload"
)

// Tier is the precision class of a report's numbers.
type Tier string

// Precision tiers. Screening and Quantitative come from this package; Static and
// Composed are set by callers that fill a Report from other sources (legacy scalar
// estimates, disaggregated composition).
const (
	TierScreening    Tier = "screening"
	TierQuantitative Tier = "quantitative"
	TierStatic       Tier = "static"
	TierComposed     Tier = "composed"
)

// RequestRecord is one steady (or, when Transient is set, initial-burst) request of
// a quantitative evaluation. Times are in ms from the start of the evaluation.
type RequestRecord struct {
	Slot       int     `json:"slot"`       // closed loop: client slot; open loop: -1
	Generation int     `json:"generation"` // closed loop: index of the request within its slot
	ArrivalMs  float64 `json:"arrival_ms"`
	ISL        int     `json:"isl"`
	Prefix     int     `json:"prefix"`
	OSL        int     `json:"osl"`
	TTFTMs     float64 `json:"ttft_ms"`
	E2EMs      float64 `json:"e2e_ms"`
	// TokenMs holds the emission time of every output token (len = OSL), only when
	// requested through Options.RecordTokenTimes.
	TokenMs   []float64 `json:"token_ms,omitempty"`
	Transient bool      `json:"transient,omitempty"`
	// Phase is the stagger phase (1..K) of a steady record of a mixture, or the
	// arrival path (1..Paths) of an open finite run pooling several; 0 otherwise.
	Phase int `json:"phase,omitempty"`
}

// Diagnostics describes how a report was obtained.
type Diagnostics struct {
	// Quantitative: passes simulated, steady requests measured, the measurement
	// window [WindowStartMs, WindowEndMs] used for throughput.
	Passes         int     `json:"passes,omitempty"`
	SteadyRequests int     `json:"steady_requests,omitempty"`
	WindowStartMs  float64 `json:"window_start_ms,omitempty"`
	WindowEndMs    float64 `json:"window_end_ms,omitempty"`
	// BracketCertain reports that TTFTSteadyP99Hi is a structural upper bound (the
	// row may be declared certain-pass on it); otherwise hi is an estimate.
	BracketCertain bool `json:"bracket_certain"`
	// Rho is the screening estimate of the offered load (open loop) or of the
	// prefill share of pass time (closed loop).
	Rho float64 `json:"rho,omitempty"`
	// Screening pass model: the mixed and decode-only pass times and their counts
	// per request cycle.
	TMixMs float64 `json:"t_mix_ms,omitempty"`
	// OwnPrefillMs is the screening TTFT's own-prefill term: the pure prefill of
	// the request's own chunks; RideMs the decode rows riding in those passes.
	OwnPrefillMs float64 `json:"own_prefill_ms,omitempty"`
	RideMs       float64 `json:"ride_ms,omitempty"`
	TGenMs       float64 `json:"t_gen_ms,omitempty"`
	NMix         float64 `json:"n_mix,omitempty"`
	NGen         float64 `json:"n_gen,omitempty"`
	// StaggerPhases > 0 flags a steady mixture over that many initial staggers.
	StaggerPhases int `json:"stagger_phases,omitempty"`
	// StaggerCycleMs is the request cycle the stagger phases spread the clients over.
	StaggerCycleMs float64 `json:"stagger_cycle_ms,omitempty"`
	// Windows (closed loop, quantitative) are the steady windows of the runs
	// measured: the burst's, or one per stagger phase (cycle.go).
	Windows []Window `json:"windows,omitempty"`
	// LimitCycle is empty when every run's limit cycle was found, else the
	// diagnostic of the runs measured at the horizon instead.
	LimitCycle string `json:"limit_cycle,omitempty"`
	// QuantileSE (open loop, quantitative) is the batch-means standard error of
	// each reported quantile, keyed by its column name (ttft_steady_p99, e2e_p50 …).
	QuantileSE map[string]float64 `json:"quantile_se,omitempty"`
	// Backlog is the open-loop number of requests waiting for admission at the last
	// arrival.
	Backlog int `json:"backlog,omitempty"`
	// FiniteRun (closed loop, quantitative) is set when the report is one
	// benchmark run as it was run (finite.go): statistics over all its requests.
	FiniteRun *FiniteRun `json:"finite_run,omitempty"`
}

// Report is the result of evaluating one operating point. Times in ms.
type Report struct {
	TTFTSteady    Distribution `json:"-"`
	TTFTTransient Distribution `json:"-"`
	ITL           Distribution `json:"-"`
	TPOT          Distribution `json:"-"`
	E2E           Distribution `json:"-"`

	// TTFTSteadyP99Lo ≤ every steady TTFT of the quantitative evaluator;
	// TTFTSteadyP99Hi ≥ its p99 when Diagnostics.BracketCertain.
	TTFTSteadyP99Lo float64 `json:"ttft_steady_p99_lo"`
	TTFTSteadyP99Hi float64 `json:"ttft_steady_p99_hi"`

	ThroughputRPS    float64 `json:"throughput_rps"`
	OutputTokensPerS float64 `json:"output_tokens_per_s"`

	// KVUtilPeak is the peak fraction of the KV pool in use over the evaluation
	// (quantitative tier, with a KV capacity; 0 without one: nothing is tracked).
	KVUtilPeak float64 `json:"kv_util_peak"`
	// PreemptionsPerRequest is the mean number of times a steady request was
	// preempted (vLLM V-R6) or retracted (SGLang S-R5) and recomputed.
	PreemptionsPerRequest float64 `json:"preemptions_per_request"`

	Tier     Tier          `json:"queueing_tier"`
	Fidelity workload.Tier `json:"workload_fidelity"`

	// Unstable is set for an open-loop rate at or beyond capacity: the other fields
	// are then not meaningful (zero).
	Unstable       bool   `json:"unstable,omitempty"`
	UnstableReason string `json:"reason,omitempty"`

	// Requests holds the per-request records (quantitative tier only).
	Requests    []RequestRecord `json:"-"`
	Diagnostics Diagnostics     `json:"-"`
}

// ColumnKeys lists the keys of Columns in their documented order (the JSON keys of
// `aicdb eval`, shared with the sweep's point rows).
func ColumnKeys() []string {
	return []string{
		"ttft_steady_mean", "ttft_steady_p50", "ttft_steady_p75", "ttft_steady_p90",
		"ttft_steady_p95", "ttft_steady_p99", "ttft_steady_p999", "ttft_steady_p99_lo",
		"ttft_steady_p99_hi", "ttft_transient_mean", "ttft_transient_max", "itl_mean", "itl_p50",
		"itl_p99", "tpot_mean", "tpot_p50", "tpot_p99", "e2e_mean", "e2e_p50", "e2e_p99",
		"throughput_rps", "output_tokens_per_s", "output_tokens_per_s_per_gpu",
		"tokens_per_s_per_user", "queueing_tier", "workload_fidelity",
	}
}

// Columns returns the flat column map of r (the JSON object of `aicdb eval` and the
// sweep's point columns). gpus is the GPU count of the deployment (for
// output_tokens_per_s_per_gpu; values < 1 count as 1). An unstable report gives
// {"unstable": true, "reason": ...} only. Every float is finite.
func (r *Report) Columns(gpus int) map[string]any {
	if r.Unstable {
		return map[string]any{"unstable": true, "reason": r.UnstableReason}
	}
	if gpus < 1 {
		gpus = 1
	}
	perUser := 0.0
	if tp := r.TPOT.Mean(); tp > 0 {
		perUser = 1000 / tp
	}
	cols := map[string]any{
		"ttft_steady_mean":            r.TTFTSteady.Mean(),
		"ttft_steady_p50":             r.TTFTSteady.Quantile(0.50),
		"ttft_steady_p75":             r.TTFTSteady.Quantile(0.75),
		"ttft_steady_p90":             r.TTFTSteady.Quantile(0.90),
		"ttft_steady_p95":             r.TTFTSteady.Quantile(0.95),
		"ttft_steady_p99":             r.TTFTSteady.Quantile(0.99),
		"ttft_steady_p999":            r.TTFTSteady.Quantile(0.999),
		"ttft_steady_p99_lo":          r.TTFTSteadyP99Lo,
		"ttft_steady_p99_hi":          r.TTFTSteadyP99Hi,
		"ttft_transient_mean":         r.TTFTTransient.Mean(),
		"ttft_transient_max":          r.TTFTTransient.Max(),
		"itl_mean":                    r.ITL.Mean(),
		"itl_p50":                     r.ITL.Quantile(0.50),
		"itl_p99":                     r.ITL.Quantile(0.99),
		"tpot_mean":                   r.TPOT.Mean(),
		"tpot_p50":                    r.TPOT.Quantile(0.50),
		"tpot_p99":                    r.TPOT.Quantile(0.99),
		"e2e_mean":                    r.E2E.Mean(),
		"e2e_p50":                     r.E2E.Quantile(0.50),
		"e2e_p99":                     r.E2E.Quantile(0.99),
		"throughput_rps":              r.ThroughputRPS,
		"output_tokens_per_s":         r.OutputTokensPerS,
		"output_tokens_per_s_per_gpu": r.OutputTokensPerS / float64(gpus),
		"tokens_per_s_per_user":       perUser,
		"queueing_tier":               string(r.Tier),
		"workload_fidelity":           string(r.Fidelity),
	}
	for k, v := range r.Diagnostics.QuantileSE {
		cols[k+"_se"] = v // the open-loop sampling error beside its quantile
	}
	if r.Diagnostics.LimitCycle != "" {
		// The steady window was measured at the horizon, not on a detected cycle.
		cols["limit_cycle"] = r.Diagnostics.LimitCycle
	}
	return cols
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
