// Package refine holds the percentile SLA semantics and the two-stage funnel
// (QUEUEING.md §7): sweeps of operating points into the store, stage 1 (wide keep on
// the screening bracket) and stage 2 (lazy quantitative resolution of straddlers,
// persisted), for `aicdb sweep`, `aicdb best` and `aicdb query`.
package refine

import (
	"fmt"
	"math"
	"strings"

	"github.com/aicdb/aicdb/store"
)

// Metric is an SLA metric.
type Metric string

// SLA metrics (QUEUEING.md §7).
const (
	TTFT           Metric = "ttft"
	TPOT           Metric = "tpot"
	ITL            Metric = "itl"
	RequestLatency Metric = "request_latency"
)

// Percentile is a statistic of a latency distribution: avg or a quantile.
type Percentile string

// Percentiles accepted by the SLA flags.
const (
	Avg  Percentile = "avg"
	P50  Percentile = "p50"
	P75  Percentile = "p75"
	P90  Percentile = "p90"
	P95  Percentile = "p95"
	P99  Percentile = "p99"
	P999 Percentile = "p999"
)

var percentiles = []Percentile{Avg, P50, P75, P90, P95, P99, P999}

// ParsePercentile parses a percentile word (avg, mean, p50 … p999; case-insensitive).
func ParsePercentile(s string) (Percentile, error) {
	w := strings.ToLower(strings.TrimSpace(s))
	if w == "mean" {
		w = "avg"
	}
	for _, p := range percentiles {
		if string(p) == w {
			return p, nil
		}
	}
	return "", fmt.Errorf("unknown percentile %q: use avg, p50, p75, p90, p95, p99 or p999", s)
}

// bracketCovers reports whether the screening bracket's upper end bounds this
// statistic: hi ≥ the evaluator's p99 (QUEUEING.md §5), so hi bounds every quantile
// up to p99, not p999 and not the mean (a heavy tail can lift the mean past p99).
func (p Percentile) bracketCovers() bool {
	switch p {
	case P50, P75, P90, P95, P99:
		return true
	}
	return false
}

// Constraint is one SLA term: Metric at Pct must be ≤ TargetMs. Column is the
// points column that holds the statistic; Legacy marks the legacy mean semantics
// (aiconfigurator's ttft/tpot/request_latency scalars, no queueing tier).
type Constraint struct {
	Metric   Metric
	Pct      Percentile
	TargetMs float64
	Column   string
	Legacy   bool
}

// Label is the report header of the constrained statistic, e.g. TTFT(P99), TPOT(avg).
func (c Constraint) Label() string {
	return label(c.Metric, c.Pct)
}

func label(m Metric, p Percentile) string {
	name := map[Metric]string{TTFT: "TTFT", TPOT: "TPOT", ITL: "ITL", RequestLatency: "request_latency"}[m]
	if p == Avg {
		return name + "(avg)"
	}
	return name + "(" + strings.ToUpper(string(p)) + ")"
}

// SLAInput is the raw SLA as given on the command line: a target ≤ 0 is unset
// (negative targets are rejected), an empty percentile is unset.
type SLAInput struct {
	TTFT, TPOT, ITL, RequestLatency             float64
	TTFTPct, TPOTPct, ITLPct, RequestLatencyPct string
	// Set marks targets given explicitly (so 0 can be rejected as non-positive).
	TTFTSet, TPOTSet, ITLSet, RequestLatencySet bool
}

// SLA is a validated set of constraints.
type SLA struct {
	// PercentileMode is on when any percentile or an ITL target was given
	// (QUEUEING.md §7); otherwise the legacy mean semantics apply.
	PercentileMode bool
	Constraints    []Constraint
}

// Empty reports an SLA without constraints.
func (s SLA) Empty() bool { return len(s.Constraints) == 0 }

// columnFor returns the points column holding metric m at p in percentile mode.
func columnFor(m Metric, p Percentile) (string, error) {
	stat := string(p)
	if p == Avg {
		stat = "mean"
	}
	var col string
	switch m {
	case TTFT:
		col = "ttft_steady_" + stat
	case TPOT:
		col = "tpot_" + stat
	case ITL:
		col = "itl_" + stat
	case RequestLatency:
		col = "e2e_" + stat
	}
	if store.QueueingIndex(col) < 0 {
		return "", fmt.Errorf("%s percentile %s is not stored: use avg, p50 or p99 for %s", m, p, m)
	}
	return col, nil
}

// Build validates the input and returns the SLA: unknown percentile words, negative
// or non-finite targets, and a percentile without its target are errors.
func (in SLAInput) Build() (SLA, error) {
	type term struct {
		m      Metric
		target float64
		set    bool
		pct    string
		flag   string
	}
	terms := []term{
		{TTFT, in.TTFT, in.TTFTSet || in.TTFT != 0, in.TTFTPct, "ttft"},
		{TPOT, in.TPOT, in.TPOTSet || in.TPOT != 0, in.TPOTPct, "tpot"},
		{ITL, in.ITL, in.ITLSet || in.ITL != 0, in.ITLPct, "itl"},
		{RequestLatency, in.RequestLatency, in.RequestLatencySet || in.RequestLatency != 0, in.RequestLatencyPct, "request-latency"},
	}
	var s SLA
	pcts := make([]Percentile, len(terms))
	for i, t := range terms {
		if t.set && (math.IsNaN(t.target) || math.IsInf(t.target, 0) || t.target <= 0) {
			return SLA{}, fmt.Errorf("--%s %v: the target must be a finite number of ms > 0", t.flag, t.target)
		}
		if t.pct != "" {
			p, err := ParsePercentile(t.pct)
			if err != nil {
				return SLA{}, fmt.Errorf("--%s-percentile: %w", t.flag, err)
			}
			if !t.set {
				return SLA{}, fmt.Errorf("--%s-percentile %s given without --%s: set the target too", t.flag, p, t.flag)
			}
			pcts[i] = p
			s.PercentileMode = true
		}
		if t.m == ITL && t.set {
			s.PercentileMode = true
		}
	}
	for i, t := range terms {
		if !t.set {
			continue
		}
		c := Constraint{Metric: t.m, TargetMs: t.target}
		if !s.PercentileMode {
			c.Pct, c.Legacy = Avg, true
			c.Column = map[Metric]string{TTFT: "ttft", TPOT: "tpot", RequestLatency: "request_latency"}[t.m]
		} else {
			c.Pct = pcts[i]
			if c.Pct == "" {
				c.Pct = P50 // QUEUEING.md §7: unset metrics default to p50 …
				if t.m == ITL {
					c.Pct = P99 // … and p99 for ITL
				}
			}
			col, err := columnFor(t.m, c.Pct)
			if err != nil {
				return SLA{}, fmt.Errorf("--%s-percentile: %w", t.flag, err)
			}
			c.Column = col
		}
		s.Constraints = append(s.Constraints, c)
	}
	return s, nil
}

// ValuesMeet reports whether the row's stored values of every constrained column
// (the numbers a report prints: screening estimates for a screening row) meet the
// targets. NULL columns never do.
func (s SLA) ValuesMeet(p *store.Point) bool {
	for _, c := range s.Constraints {
		v, ok := c.Value(p)
		if !ok || !(v <= c.TargetMs) {
			return false
		}
	}
	return true
}

// Value is the row's stored value of the constrained statistic (the number a
// report prints: a screening estimate for a screening row); false when the column
// is NULL (OOM, composed rows).
func (c Constraint) Value(p *store.Point) (float64, bool) {
	if qi := store.QueueingIndex(c.Column); qi >= 0 {
		return p.Q.V[qi], p.Q.Valid
	}
	return legacyValue(p, c.Column)
}

// Verdict is what stored numbers prove about a constraint for one row.
type Verdict int

// Verdicts.
const (
	Pass     Verdict = iota // proven to meet it (quantitative value, or bracket)
	Fail                    // eliminated (bracket lower bound, quantitative value, or screening value)
	Straddle                // undecided: needs the evaluator
)

func (v Verdict) String() string {
	return [...]string{"pass", "fail", "straddle"}[v]
}

// Op is a comparison of a column with a threshold.
type Op string

// Comparison operators.
const (
	LT Op = "<"
	LE Op = "<="
	GT Op = ">"
	GE Op = ">="
)

func (o Op) holds(v, t float64) bool {
	switch o {
	case LT:
		return v < t
	case LE:
		return v <= t
	case GT:
		return v > t
	case GE:
		return v >= t
	}
	return false
}

// bracketedColumn reports the TTFT steady columns the screening bracket speaks for,
// with their percentile.
func bracketedColumn(col string) (Percentile, bool) {
	if !strings.HasPrefix(col, "ttft_steady_") {
		return "", false
	}
	st := strings.TrimPrefix(col, "ttft_steady_")
	if st == "mean" {
		return Avg, true
	}
	p, err := ParsePercentile(st)
	return p, err == nil
}

// Classify decides `col op t` for row p from its stored numbers (QUEUEING.md §7):
//
//   - quantitative tier, or a legacy column: the stored value decides exactly;
//   - screening tier, TTFT steady columns: the bracket decides where it can.
//     lo ≤ the evaluator's minimum steady TTFT bounds every statistic from below, so
//     `< t` fails for certain when lo ≥ t (stage 1 never eliminates a row whose
//     quantitative value meets the target); where the bracket is certain, hi ≥ the
//     evaluator's p99 bounds p50…p99 from above, so `< t` passes for certain when
//     hi < t. Otherwise: Straddle;
//   - screening tier, other queueing columns (no structural bound exists): the
//     screening value enforces elimination (QUEUEING.md §7 screening enforcement),
//     a screening pass is only a Straddle.
//
// A NULL column (OOM, composed rows) never passes.
func Classify(p *store.Point, col string, op Op, t float64) Verdict {
	qi := store.QueueingIndex(col)
	if qi < 0 {
		v, ok := legacyValue(p, col)
		if !ok {
			return Fail
		}
		if op.holds(v, t) {
			return Pass
		}
		return Fail
	}
	if !p.Q.Valid {
		return Fail
	}
	v := p.Q.V[qi]
	if p.Q.Tier != store.TierScreening {
		if op.holds(v, t) {
			return Pass
		}
		return Fail
	}
	if pct, ok := bracketedColumn(col); ok && p.Q.HasBracket {
		lo, hi := p.Q.P99Lo, p.Q.P99Hi
		hiBounds := pct.bracketCovers() && p.Q.HiCertain
		switch op {
		case LT, LE:
			if !op.holds(lo, t) {
				return Fail
			}
			if hiBounds && op.holds(hi, t) {
				return Pass
			}
		case GT, GE:
			if op.holds(lo, t) {
				return Pass
			}
			if hiBounds && !op.holds(hi, t) {
				return Fail
			}
		}
		return Straddle
	}
	if !op.holds(v, t) {
		return Fail
	}
	return Straddle
}

func legacyValue(p *store.Point, col string) (float64, bool) {
	if p.Legacy.OOM {
		return 0, false
	}
	switch col {
	case "ttft":
		return p.Legacy.TTFT, true
	case "tpot":
		return p.Legacy.TPOT, true
	case "request_latency":
		return p.Legacy.RequestLatency, true
	}
	return 0, false
}

// Check classifies a row against every constraint of s: Fail if any fails, Pass if
// all pass, Straddle otherwise.
func (s SLA) Check(p *store.Point) Verdict {
	out := Pass
	for _, c := range s.Constraints {
		switch Classify(p, c.Column, LE, c.TargetMs) {
		case Fail:
			return Fail
		case Straddle:
			out = Straddle
		}
	}
	return out
}
