package measure

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Rule is a deployment for every run its match selects: a benchmark
// campaign's launch rules written once instead of per run (runs:), so runs of
// the same campaign that a file has and the rule's author never saw are
// deployed alike. Like a runs: entry, a rule states how the runs were
// deployed: its fields win over a row's own, and its engine_config values may
// be computed from the run ("= ceil_to(concurrency + isl + 64, 64)", expr.go).
// The first rule that matches a run applies; a runs: entry for the run wins
// over every rule.
type Rule struct {
	Name       string `yaml:"name" json:"name"`
	Match      Match  `yaml:"match" json:"match"`
	Deployment `yaml:",inline" json:"deployment"`
}

// Match selects runs by what the measurement file records of them. Every
// field given must hold (lists: one of); an empty Match is refused.
type Match struct {
	// Model: the model path, or its last element, case-insensitive (one of).
	Model   strList `yaml:"model" json:"model,omitempty"`
	System  strList `yaml:"system" json:"system,omitempty"`
	Backend strList `yaml:"backend" json:"backend,omitempty"`
	// Version: the engine version the row records ("" for rows without one).
	Version strList `yaml:"version" json:"version,omitempty"`
	// Measured: the day the run was measured, YYYY-MM-DD (an aic-silicon row's
	// silicon_data_source measured=…; rows without one never match).
	Measured  strList `yaml:"measured" json:"measured,omitempty"`
	GemmQuant strList `yaml:"gemm_quant" json:"gemm_quant,omitempty"`
	Mode      strList `yaml:"mode" json:"mode,omitempty"`
	ISL       intList `yaml:"isl" json:"isl,omitempty"`
	OSL       intList `yaml:"osl" json:"osl,omitempty"`
	TP        intList `yaml:"tp" json:"tp,omitempty"`
	// Concurrency: [lo, hi], clients per worker (closed-loop runs only).
	Concurrency []int `yaml:"concurrency" json:"concurrency,omitempty"`
}

// strList and intList are a YAML scalar (one value) or sequence of values.
type (
	strList []string
	intList []int
)

// UnmarshalYAML reads a scalar as a one-element list.
func (l *strList) UnmarshalYAML(n *yaml.Node) error { return oneOrMany(n, (*[]string)(l)) }

// UnmarshalYAML reads a scalar as a one-element list.
func (l *intList) UnmarshalYAML(n *yaml.Node) error { return oneOrMany(n, (*[]int)(l)) }

// oneOrMany decodes node n, a scalar or a sequence, into the list dst.
func oneOrMany[T any](n *yaml.Node, dst *[]T) error {
	if n.Kind == yaml.ScalarNode {
		var v T
		if err := n.Decode(&v); err != nil {
			return err
		}
		*dst = []T{v}
		return nil
	}
	return n.Decode(dst)
}

// measuredRE reads an aic-silicon row's measurement day from its
// silicon_data_source ("…; measured=2025-10-29T00:00:00.000Z; …").
var measuredRE = regexp.MustCompile(`measured=([0-9]{4}-[0-9]{2}-[0-9]{2})`)

// measuredDay is the day m was measured, "" when its file does not say.
func (m *Measurement) measuredDay() string {
	src, _ := m.Extra["silicon_data_source"].(string)
	if d := measuredRE.FindStringSubmatch(src); d != nil {
		return d[1]
	}
	return ""
}

// check reports a match that selects every run, or a bad concurrency range.
func (x *Match) check() error {
	if len(x.Model) == 0 && len(x.System) == 0 && len(x.Backend) == 0 && len(x.Version) == 0 && len(x.Measured) == 0 &&
		len(x.GemmQuant) == 0 && len(x.Mode) == 0 && len(x.ISL) == 0 && len(x.OSL) == 0 && len(x.TP) == 0 && len(x.Concurrency) == 0 {
		return fmt.Errorf("match: empty (it would select every run): give model, system, backend, version, measured, gemm_quant, mode, isl, osl, tp or concurrency")
	}
	if c := x.Concurrency; len(c) > 0 && (len(c) != 2 || c[0] < 1 || c[0] > c[1]) {
		return fmt.Errorf("match: concurrency %v: want [lo, hi] with 1 ≤ lo ≤ hi", c)
	}
	for _, d := range x.Measured {
		if !measuredRE.MatchString("measured=" + d) {
			return fmt.Errorf("match: measured %q: want a day YYYY-MM-DD", d)
		}
	}
	return nil
}

// selects reports whether the match holds for m (as its file records it,
// before any deployment is applied), measured on day (m.measuredDay).
func (x *Match) selects(m *Measurement, day string) bool {
	if len(x.Model) > 0 {
		base := m.Model[strings.LastIndex(m.Model, "/")+1:]
		if !slices.ContainsFunc(x.Model, func(s string) bool { return strings.EqualFold(s, m.Model) || strings.EqualFold(s, base) }) {
			return false
		}
	}
	has := func(l strList, v string) bool { return len(l) == 0 || slices.Contains(l, v) }
	hasInt := func(l intList, v int) bool { return len(l) == 0 || slices.Contains(l, v) }
	if !has(x.System, m.System) || !has(x.Backend, m.Backend) || !has(x.Version, m.Version) ||
		!has(x.GemmQuant, m.GemmQuant) || !has(x.Mode, cmp.Or(m.Mode, "agg")) {
		return false
	}
	if len(x.Measured) > 0 && !slices.Contains(x.Measured, day) {
		return false
	}
	if !hasInt(x.ISL, m.ISL) || !hasInt(x.OSL, m.OSL) || !hasInt(x.TP, m.TP) {
		return false
	}
	if c := x.Concurrency; len(c) == 2 && (m.Concurrency < c[0] || m.Concurrency > c[1]) {
		return false
	}
	return true
}

// check reports a rule that cannot apply: an empty or bad match, or an
// entry that cannot (checkEntry).
func (r *Rule) check() error {
	if err := r.Match.check(); err != nil {
		return err
	}
	return r.checkEntry()
}

// checkEntry reports a runs: or rules: entry that cannot apply: runs, rules
// or campaigns of its own, an engine_config expression no run can evaluate
// (checkExpr), or a bad benchmark.
func (d *Deployment) checkEntry() error {
	if len(d.Runs) > 0 || len(d.Rules) > 0 || d.Campaigns != nil {
		return fmt.Errorf("an entry cannot hold runs or rules of its own")
	}
	if _, err := substExprs(d.EngineConfig, "", func(src string) (any, error) { return nil, checkExpr(src) }); err != nil {
		return err
	}
	return d.checkSidecar()
}

// substExprs returns a copy of v, the engine_config value at path (dotted
// keys), with every expression value replaced by f's result; an error names
// the key.
func substExprs(v any, path string, f func(src string) (any, error)) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			s, err := substExprs(e, strings.TrimPrefix(path+"."+k, "."), f)
			if err != nil {
				return nil, err
			}
			out[k] = s
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			s, err := substExprs(e, fmt.Sprintf("%s[%d]", path, i), f)
			if err != nil {
				return nil, err
			}
			out[i] = s
		}
		return out, nil
	}
	if src, ok := isExpr(v); ok {
		r, err := f(src)
		if err != nil {
			return nil, fmt.Errorf("engine_config %s: %w", path, err)
		}
		return r, nil
	}
	return v, nil
}

// entryFor returns the deployment entry d states for m: its runs: entry, else
// the first rule that selects it, else the campaigns' entry (d.Campaigns),
// with how it was found ("run" or "rule NAME"); ok false when none does.
func (d *Deployment) entryFor(m *Measurement) (entry Deployment, how string, ok bool) {
	return d.entryOn(m, m.measuredDay())
}

// entryOn is entryFor with m's measurement day read once for every rule.
func (d *Deployment) entryOn(m *Measurement, day string) (entry Deployment, how string, ok bool) {
	if r, ok := d.Runs[m.RunID]; ok {
		return r, "run", true
	}
	for i := range d.Rules {
		if d.Rules[i].Match.selects(m, day) {
			return d.Rules[i].Deployment, "rule " + d.Rules[i].Name, true
		}
	}
	if d.Campaigns != nil {
		e, how, ok := d.Campaigns.entryOn(m, day)
		return e, "built-in " + how, ok
	}
	return Deployment{}, "", false
}

// deployEntry applies a runs: or rules: entry to m: the entry's fields win
// over the row's own (a correction), which fill what it leaves unset; its
// engine_config expressions are evaluated for the run so deployed.
func (m *Measurement) deployEntry(entry Deployment, how string) error {
	entry.Merge(m.Deployment)
	vars := exprVars{ISL: entry.ISL, OSL: entry.OSL, Concurrency: m.Concurrency, TP: max(entry.TP, 1)}
	cfg, err := substExprs(entry.EngineConfig, "", func(src string) (any, error) {
		v, err := evalExpr(src, vars)
		return int(v), err
	})
	if err != nil {
		return &FieldError{File: m.File, Line: m.Line, Field: "deployment " + how, Msg: err.Error()}
	}
	if c, ok := cfg.(map[string]any); ok && len(c) > 0 {
		entry.EngineConfig = c
	}
	m.Deployment = entry
	if m.Extra == nil {
		m.Extra = map[string]any{}
	}
	m.Extra["deployed_as"] = how
	return nil
}
