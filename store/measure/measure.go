// Package measure parses measured serving benchmarks — `vllm bench serve` result
// JSON, AIPerf / genai-perf profile exports and aiconfigurator's silicon CSV — into
// Measurement rows, and stores them in the measurements table (migration 00007):
// idempotent by the file's content hash, all-or-nothing per file.
package measure

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Formats a file can be imported as.
const (
	FormatVLLMBench  = "vllm-bench"
	FormatAIPerf     = "aiperf"
	FormatAICSilicon = "aic-silicon"
)

// Formats lists the accepted --format values.
var Formats = []string{FormatVLLMBench, FormatAIPerf, FormatAICSilicon}

// Deployment is what was measured: the model, the hardware, the engine and its
// parallelism and configuration. Files that lack it get it from flags or a sidecar
// YAML (Deployment.Merge).
type Deployment struct {
	Model   string `yaml:"model" json:"model"`
	System  string `yaml:"system" json:"system"`
	Backend string `yaml:"backend" json:"backend"`
	Version string `yaml:"version" json:"version"` // "" = not stated (mapped to the newest perf data)
	Mode    string `yaml:"mode" json:"mode"`       // agg | disagg (default agg)

	TP    int `yaml:"tp" json:"tp"`
	PP    int `yaml:"pp" json:"pp"`
	DP    int `yaml:"dp" json:"dp"`
	MoETP int `yaml:"moe_tp" json:"moe_tp"`
	MoEEP int `yaml:"moe_ep" json:"moe_ep"`

	GemmQuant string `yaml:"gemm_quant" json:"gemm_quant"` // "" = the model's own
	MoEQuant  string `yaml:"moe_quant" json:"moe_quant"`

	// Workload the file may not state (vllm bench serve stores token totals only).
	ISL    int `yaml:"isl" json:"isl"`
	OSL    int `yaml:"osl" json:"osl"`
	Prefix int `yaml:"prefix" json:"prefix"`

	// EngineConfig is the engine's own configuration as deployed (free-form keys,
	// stored as JSON; empty = unknown, the profile's rules apply).
	EngineConfig map[string]any `yaml:"engine_config" json:"engine_config,omitempty"`

	// ISLQuantiles and OSLQuantiles are the run's request lengths as equally
	// weighted quantile points (W2), when known: from a vllm bench serve
	// --save-detailed file's per-request lengths, or stated (a sidecar's
	// isl_quantiles / osl_quantiles for the dataset the run drew). Stored in the
	// row's extra column; empty: every request at the mean isl / osl.
	ISLQuantiles []int `yaml:"isl_quantiles" json:"isl_quantiles,omitempty"`
	OSLQuantiles []int `yaml:"osl_quantiles" json:"osl_quantiles,omitempty"`

	// Benchmark is how the file's closed-loop runs were driven, for formats
	// that do not say (aic-silicon rows default to aiconfigurator's aiperf
	// benchmark, AICBenchRounds); nil: the format's own rule.
	Benchmark *Benchmark `yaml:"benchmark" json:"benchmark,omitempty"`

	// Runs are per-run deployments of a file of many runs (an aic-silicon CSV
	// whose rows were deployed differently), keyed by the run's id (the CSV id
	// column): a run's entry states how that run was deployed, so its fields
	// win over the row's own (a correction: e.g. the expert parallelism a
	// launch script chose by concurrency), then the file-level fields fill what
	// both leave unset. Stored with the file's deployment (measurement_sources),
	// not with its rows.
	Runs map[string]Deployment `yaml:"runs" json:"runs,omitempty"`
	// Rules deploy the runs each selects (Rule): a campaign's launch rules,
	// for runs no runs: entry names; the first that matches applies.
	Rules []Rule `yaml:"rules" json:"rules,omitempty"`
	// Campaigns are the built-in deployments of known benchmark campaigns
	// (campaigns.go), tried after Runs and Rules; nil: not applied (bench
	// import --campaigns none). Stored with the file's deployment, so turning
	// them on or off re-deploys a file imported before.
	Campaigns *Deployment `yaml:"-" json:"campaigns,omitempty"`

	// Prefill and Decode are a disaggregated deployment's pools (mode disagg), for
	// files that do not state them (vllm bench serve, AIPerf): the measurement's
	// p_* and d_* columns. The row's tp, pp and dp default to the decode pool's.
	Prefill Pool `yaml:"prefill" json:"prefill,omitzero"`
	Decode  Pool `yaml:"decode" json:"decode,omitzero"`
}

// Benchmark is how a file's closed-loop runs were driven: each client sent
// WarmupRounds requests whose statistics were dropped, then Rounds measured
// ones (InferenceMAX's bench_serving: 10 rounds, no warm-up; aiconfigurator's
// aiperf: 20 and 2); LengthSpread [lo, hi], when set, draws each request's
// prompt and output lengths uniformly over [lo·isl, hi·isl] and [lo·osl,
// hi·osl] (bench_serving's --random-range-ratio r: [r, 1]), kept as the run's
// quantile points; Tool names the benchmark, for the record.
type Benchmark struct {
	Rounds       int       `yaml:"rounds" json:"rounds"`
	WarmupRounds int       `yaml:"warmup_rounds" json:"warmup_rounds"`
	LengthSpread []float64 `yaml:"length_spread" json:"length_spread,omitempty"`
	Tool         string    `yaml:"tool" json:"tool,omitempty"`
}

// maxRounds bounds Benchmark.Rounds and WarmupRounds (a run of more requests
// per client than this is not a benchmark the evaluator replays).
const maxRounds = 1000

// check reports a Benchmark field out of range as a one-line error.
func (b *Benchmark) check() error {
	if b.Rounds < 1 || b.Rounds > maxRounds {
		return fmt.Errorf("benchmark.rounds %d: want the measured requests per client, 1..%d", b.Rounds, maxRounds)
	}
	if b.WarmupRounds < 0 || b.WarmupRounds > maxRounds {
		return fmt.Errorf("benchmark.warmup_rounds %d: want the warm-up requests per client, 0..%d", b.WarmupRounds, maxRounds)
	}
	if len(b.LengthSpread) == 0 {
		return nil
	}
	if len(b.LengthSpread) != 2 || !(b.LengthSpread[0] > 0 && b.LengthSpread[0] <= b.LengthSpread[1] && b.LengthSpread[1] <= 4) {
		return fmt.Errorf("benchmark.length_spread %v: want [lo, hi] with 0 < lo ≤ hi ≤ 4 (lengths uniform over lo·isl..hi·isl)", b.LengthSpread)
	}
	return nil
}

// applyBenchmark records m's benchmark (Deployment.Benchmark) in its extra
// column and, with a length spread and no quantile points of its own, sets
// its lengths' points from its isl and osl (linearPoints, as an AIPerf
// export's percentiles).
func (m *Measurement) applyBenchmark() {
	b := m.Benchmark
	if b == nil {
		return
	}
	if len(b.LengthSpread) == 2 { // uniform lengths: a quantile function linear from lo·n to hi·n
		spread := func(n int) []int {
			return linearPoints([]float64{0, 100}, []float64{b.LengthSpread[0] * float64(n), b.LengthSpread[1] * float64(n)})
		}
		if len(m.ISLQuantiles) == 0 {
			m.ISLQuantiles = spread(m.ISL)
		}
		if len(m.OSLQuantiles) == 0 {
			m.OSLQuantiles = spread(m.OSL)
		}
	}
	if m.Extra == nil {
		m.Extra = map[string]any{}
	}
	m.Extra["benchmark"] = map[string]any{"rounds": b.Rounds, "warmup_rounds": b.WarmupRounds, "tool": b.Tool}
}

// readBenchmark sets m's benchmark rounds from a stored row's extra column.
func (m *Measurement) readBenchmark() {
	x, ok := m.Extra["benchmark"].(map[string]any)
	if !ok {
		return
	}
	num := func(k string) int {
		v, _ := x[k].(float64) // as decoded from the stored JSON
		return int(v)
	}
	tool, _ := x["tool"].(string)
	m.Benchmark = &Benchmark{Rounds: num("rounds"), WarmupRounds: num("warmup_rounds"), Tool: tool}
}

// Pool is one pool of a disaggregated deployment: its worker count, per-worker
// batch (a prefill worker's running cap; a decode worker's batch) and layout.
type Pool struct {
	Workers int `yaml:"workers" json:"workers,omitempty"`
	Batch   int `yaml:"batch" json:"batch,omitempty"`
	TP      int `yaml:"tp" json:"tp,omitempty"`
	PP      int `yaml:"pp" json:"pp,omitempty"`
	DP      int `yaml:"dp" json:"dp,omitempty"`
}

// fill sets each unset (0) field among dst (workers, batch, tp, pp, dp) from p.
func (p Pool) fill(workers, batch, tp, pp, dp *int) {
	for _, f := range []struct {
		dst *int
		v   int
	}{{workers, p.Workers}, {batch, p.Batch}, {tp, p.TP}, {pp, p.PP}, {dp, p.DP}} {
		if *f.dst == 0 {
			*f.dst = f.v
		}
	}
}

// Merge fills d's unset fields from o (d, the file's own values, wins).
func (d *Deployment) Merge(o Deployment) {
	s := func(a *string, b string) {
		if *a == "" {
			*a = b
		}
	}
	n := func(a *int, b int) {
		if *a == 0 {
			*a = b
		}
	}
	s(&d.Model, o.Model)
	s(&d.System, o.System)
	s(&d.Backend, o.Backend)
	s(&d.Version, o.Version)
	s(&d.Mode, o.Mode)
	s(&d.GemmQuant, o.GemmQuant)
	s(&d.MoEQuant, o.MoEQuant)
	n(&d.TP, o.TP)
	n(&d.PP, o.PP)
	n(&d.DP, o.DP)
	n(&d.MoETP, o.MoETP)
	n(&d.MoEEP, o.MoEEP)
	n(&d.ISL, o.ISL)
	n(&d.OSL, o.OSL)
	n(&d.Prefix, o.Prefix)
	if len(d.EngineConfig) == 0 {
		d.EngineConfig = o.EngineConfig
	}
	if len(d.ISLQuantiles) == 0 {
		d.ISLQuantiles = o.ISLQuantiles
	}
	if len(d.OSLQuantiles) == 0 {
		d.OSLQuantiles = o.OSLQuantiles
	}
	if d.Benchmark == nil {
		d.Benchmark = o.Benchmark
	}
	o.Prefill.fill(&d.Prefill.Workers, &d.Prefill.Batch, &d.Prefill.TP, &d.Prefill.PP, &d.Prefill.DP)
	o.Decode.fill(&d.Decode.Workers, &d.Decode.Batch, &d.Decode.TP, &d.Decode.PP, &d.Decode.DP)
}

// applyPools sets a disaggregated measurement's unset pool columns from its
// deployment's pools, and its unset tp/pp/dp from the decode pool's (the
// silicon rows' convention: the deployment's shape is the decode pool's).
func (m *Measurement) applyPools() {
	if m.Mode != "disagg" {
		return
	}
	m.Prefill.fill(&m.PWorkers, &m.PBatch, &m.PTP, &m.PPP, &m.PDP)
	m.Decode.fill(&m.DWorkers, &m.DBatch, &m.DTP, &m.DPP, &m.DDP)
	for _, f := range []struct {
		dst *int
		v   int
	}{{&m.TP, m.DTP}, {&m.PP, m.DPP}, {&m.DP, m.DDP}} {
		if *f.dst == 0 {
			*f.dst = f.v
		}
	}
}

// Metric names a measured statistic; the measurements table has one column each.
type Metric int

// Measured statistics (ms unless named otherwise).
const (
	TTFTMean Metric = iota
	TTFTP50
	TTFTP99
	TPOTMean
	TPOTP50
	TPOTP99
	ITLMean
	ITLP50
	ITLP99
	E2EMean
	E2EP50
	E2EP99
	ThroughputRPS    // requests per second
	OutputTokensPerS // output tokens per second
	NumMetrics
)

// MetricColumns names the measurements columns of each Metric, in order.
var MetricColumns = [NumMetrics]string{
	"ttft_mean", "ttft_p50", "ttft_p99", "tpot_mean", "tpot_p50", "tpot_p99",
	"itl_mean", "itl_p50", "itl_p99", "e2e_mean", "e2e_p50", "e2e_p99",
	"throughput_rps", "output_tokens_per_s",
}

// Measurement is one measured run: its deployment, workload and statistics.
type Measurement struct {
	// Source: the file (as given), its sha256, the format and the row's line (CSV)
	// or 0 (JSON).
	File   string
	SHA256 string
	Format string
	Line   int
	RunID  string // the file's own run id (CSV id column), else the file's base name

	Deployment
	// Concurrency is the closed-loop client count per aggregated worker (0: open loop).
	Concurrency int
	// RequestRate is the open-loop request rate, requests/s (0: closed loop / unlimited).
	RequestRate float64
	NumPrompts  int

	// Disaggregated pools (mode disagg).
	PWorkers, PBatch, PTP, PPP, PDP int
	DWorkers, DBatch, DTP, DPP, DDP int

	// Values[m] is valid when Has[m].
	Values [NumMetrics]float64
	Has    [NumMetrics]bool

	// Extra holds the file's fields aicdb does not model (kept as JSON for the record).
	Extra map[string]any
}

// Set records a measured value.
func (m *Measurement) Set(k Metric, v float64) {
	m.Values[k], m.Has[k] = v, true
}

// FieldError is a bad value in a file: it names the file, the field and (CSV) the line.
type FieldError struct {
	File  string
	Line  int // 0: not a line-oriented file
	Field string
	Msg   string
}

func (e *FieldError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s line %d", e.File, e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", loc, e.Msg)
	}
	return fmt.Sprintf("%s: field %s: %s", loc, e.Field, e.Msg)
}

// Validate checks a parsed measurement: a complete deployment, a workload, finite
// non-negative statistics, at least one latency statistic.
func (m *Measurement) Validate() error {
	fe := func(field, msg string, a ...any) error {
		return &FieldError{File: m.File, Line: m.Line, Field: field, Msg: fmt.Sprintf(msg, a...)}
	}
	for _, f := range []struct{ name, v string }{{"model", m.Model}, {"system", m.System}, {"backend", m.Backend}} {
		if strings.TrimSpace(f.v) == "" {
			return fe(f.name, "missing: pass --%s or a sidecar YAML with %s:", f.name, f.name)
		}
	}
	if m.Mode != "agg" && m.Mode != "disagg" {
		return fe("mode", "%q: want agg or disagg", m.Mode)
	}
	if m.ISL <= 0 {
		return fe("isl", "missing or ≤ 0: pass --isl or isl: in a sidecar YAML")
	}
	if m.OSL <= 0 {
		return fe("osl", "missing or ≤ 0: pass --osl or osl: in a sidecar YAML")
	}
	if m.Prefix < 0 || m.Prefix >= m.ISL {
		return fe("prefix", "%d: must be in [0, isl)", m.Prefix)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"tp", m.TP}, {"pp", m.PP}, {"dp", m.DP}, {"moe_tp", m.MoETP}, {"moe_ep", m.MoEEP}} {
		if f.v <= 0 {
			return fe(f.name, "%d: must be > 0 (pass --%s)", f.v, strings.ReplaceAll(f.name, "_", "-"))
		}
	}
	if m.Mode == "agg" && (m.Prefill != Pool{} || m.Decode != Pool{}) {
		return fe("prefill", "pools given for an aggregated deployment: set mode: disagg, or drop prefill: and decode:")
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"prefill.workers", m.PWorkers}, {"prefill.batch", m.PBatch}, {"prefill.tp", m.PTP}, {"prefill.pp", m.PPP}, {"prefill.dp", m.PDP},
		{"decode.workers", m.DWorkers}, {"decode.batch", m.DBatch}, {"decode.tp", m.DTP}, {"decode.pp", m.DPP}, {"decode.dp", m.DDP}} {
		if f.v < 0 {
			return fe(f.name, "%d: must be ≥ 0", f.v)
		}
	}
	for _, q := range []struct {
		name string
		v    []int
	}{{"isl_quantiles", m.ISLQuantiles}, {"osl_quantiles", m.OSLQuantiles}} {
		if len(q.v) > MaxQuantilePoints {
			return fe(q.name, "%d points: at most %d", len(q.v), MaxQuantilePoints)
		}
		for _, v := range q.v {
			if v < 1 || v > 1<<24 {
				return fe(q.name, "%d: a length must be in 1..%d", v, 1<<24)
			}
		}
	}
	if m.Concurrency < 0 {
		return fe("concurrency", "%d: must be ≥ 0", m.Concurrency)
	}
	if m.Concurrency == 0 && m.RequestRate <= 0 && !m.Ramped() {
		return fe("concurrency", "the file states neither a client concurrency (vllm bench serve max_concurrency, AIPerf concurrency) nor a finite request rate; add the one the run used to the file")
	}
	if bad(m.RequestRate) || m.RequestRate < 0 {
		return fe("request_rate", "%v: must be finite and ≥ 0", m.RequestRate)
	}
	any := false
	for k := range NumMetrics {
		if !m.Has[k] {
			continue
		}
		if bad(m.Values[k]) || m.Values[k] < 0 {
			return fe(MetricColumns[k], "%v: must be a finite number ≥ 0", m.Values[k])
		}
		if k <= E2EP99 {
			any = true
		}
	}
	if !any {
		return fe("", "no latency statistic (TTFT, TPOT, ITL or E2E) found")
	}
	return nil
}

func bad(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }

// ErrUnknownFormat is returned when a file's format cannot be sniffed.
var ErrUnknownFormat = errors.New("unknown benchmark format")

// MaxQuantilePoints bounds the quantile points of a measured run's lengths.
const MaxQuantilePoints = 64

// shapePoints is how many equally weighted quantile points a measured run's
// lengths are kept as.
const shapePoints = 16

// quantilePoints returns the n-point equally weighted quantiles of the lengths
// xs (point i the value at rank ⌊(i + ½)·len/n⌋ of the sorted lengths), n =
// min(shapePoints, len); nil for no lengths or lengths that do not vary.
func quantilePoints(xs []int) []int {
	if len(xs) == 0 {
		return nil
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := min(shapePoints, len(s))
	out := make([]int, n)
	for i := range out {
		out[i] = s[(2*i+1)*len(s)/(2*n)]
	}
	return varying(out)
}

// varying returns quantile points that vary, nil for points all equal (the
// lengths are the mean's: no shape to model).
func varying(qs []int) []int {
	for _, v := range qs {
		if v != qs[0] {
			return qs
		}
	}
	return nil
}

// applyQuantiles keeps m's quantile points in its extra column (the
// measurements table has no column for them).
func (m *Measurement) applyQuantiles() {
	for _, q := range []struct {
		key string
		v   []int
	}{{"isl_quantiles", m.ISLQuantiles}, {"osl_quantiles", m.OSLQuantiles}} {
		if len(q.v) == 0 {
			continue
		}
		if m.Extra == nil {
			m.Extra = map[string]any{}
		}
		m.Extra[q.key] = q.v
	}
}

// readQuantiles sets m's quantile points from a stored row's extra column.
func (m *Measurement) readQuantiles() {
	for _, q := range []struct {
		key string
		dst *[]int
	}{{"isl_quantiles", &m.ISLQuantiles}, {"osl_quantiles", &m.OSLQuantiles}} {
		xs, ok := m.Extra[q.key].([]any)
		if !ok {
			continue
		}
		out := make([]int, 0, len(xs))
		for _, x := range xs {
			if f, ok := extraNum(x); ok && f >= 1 && f == math.Trunc(f) {
				out = append(out, int(f))
			}
		}
		if len(out) == len(xs) {
			*q.dst = out
		}
	}
}
