package perfdb

// golden_test.go is the conformance test against aiconfigurator's own golden
// numbers (PERFDB.md §6): every surface of every case in golden_inputs.json
// whose data is present (system yaml, perf data of the requested backend
// version, model config) and whose family is modeled here (LLAMA, MOE) is
// run at the case's tolerance; {error: …} goldens must fail here too. Cases
// that cannot run are reported SKIPPED with the reason, never passed.
//
// Data: $AICDB_AIC_DATA, default ../../shared/data/aiconfigurator (relative to
// this package). The per-case table is printed with t.Log (go test -v).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// goldenCase is one case of golden_inputs.json (the fields used here).
type goldenCase struct {
	Name         string                       `json:"-"`
	Surfaces     []string                     `json:"surfaces"`
	RTol         float64                      `json:"rtol"`
	Model        string                       `json:"model"`
	Family       string                       `json:"model_family"`
	System       string                       `json:"system"`
	Backend      string                       `json:"backend"`
	Version      string                       `json:"version"`
	ISL          int                          `json:"isl"`
	OSL          int                          `json:"osl"`
	Prefix       int                          `json:"prefix"`
	TP           int                          `json:"tp"`
	PP           int                          `json:"pp"`
	DP           int                          `json:"dp"`
	MoETP        int                          `json:"moe_tp"`
	MoEEP        int                          `json:"moe_ep"`
	CP           int                          `json:"cp"`
	DatabaseMode string                       `json:"database_mode"`
	Transfer     *string                      `json:"transfer_policy"`
	Nextn        int                          `json:"nextn"`
	QuantInputs  map[string]*string           `json:"quant_inputs"`
	Resolved     map[string]map[string]string `json:"resolved_quant"`
	Static       struct {
		Batch int `json:"batch_size"`
	} `json:"static"`
	Agg struct {
		Batch     int `json:"batch_size"`
		CtxTokens int `json:"ctx_tokens"`
	} `json:"agg"`
	Disagg struct {
		PrefillBatch   int     `json:"prefill_batch_size"`
		PrefillWorkers int     `json:"prefill_num_workers"`
		DecodeBatch    int     `json:"decode_batch_size"`
		DecodeWorkers  int     `json:"decode_num_workers"`
		PC             float64 `json:"prefill_latency_correction_scale"`
		DC             float64 `json:"decode_latency_correction_scale"`
		Stride         int     `json:"static_stride"`
	} `json:"disagg"`
}

// goldenRecord is cases[case][surface] of engine_step.json.
type goldenRecord struct {
	Values map[string]float64 `json:"values"`
	Error  string             `json:"error"`
}

// aicDataRoot returns the aiconfigurator data slice or skips the test.
func aicDataRoot(t *testing.T) string {
	t.Helper()
	root := os.Getenv("AICDB_AIC_DATA")
	if root == "" {
		root = filepath.Join("..", "..", "shared", "data", "aiconfigurator")
	}
	if _, err := os.Stat(filepath.Join(root, "golden_inputs.json")); err != nil {
		t.Skipf("aiconfigurator data not found at %s (set AICDB_AIC_DATA to the data slice): %v", root, err)
	}
	return root
}

// loadGoldens reads the cases and their expected records.
func loadGoldens(t *testing.T, root string) ([]goldenCase, map[string]map[string]goldenRecord) {
	t.Helper()
	raw := map[string]json.RawMessage{}
	readJSON(t, filepath.Join(root, "golden_inputs.json"), &raw)
	var cases []goldenCase
	for name, msg := range raw {
		if name == "defaults" || name == "notes" {
			continue
		}
		var c goldenCase
		if err := json.Unmarshal(msg, &c); err != nil {
			t.Fatalf("golden_inputs.json case %s: %v", name, err)
		}
		c.Name = name
		cases = append(cases, c)
	}
	sort.Slice(cases, func(i, j int) bool { return cases[i].Name < cases[j].Name })
	var es struct {
		Cases map[string]map[string]goldenRecord `json:"cases"`
	}
	readJSON(t, filepath.Join(root, "aic-core", "rust", "aiconfigurator-core", "parity_tests", "goldens", "engine_step.json"), &es)
	return cases, es.Cases
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
}

// goldenEnv loads and caches perf data per (system, backend, version, shared
// layer on/off): a case loads what aiconfigurator loads for its database mode.
type goldenEnv struct {
	root string
	mu   sync.Mutex
	data map[string]*Data
	errs map[string]error
	qs   map[string]*Querier
}

// querier returns the shared querier of (data, mode); d must be the data
// loaded for mode (the key is the mode, not the data).
func (g *goldenEnv) querier(d *Data, mode DatabaseMode) (*Querier, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := d.System.Name + "/" + d.Backend + "/" + d.Version + "/" + string(mode)
	if q, ok := g.qs[k]; ok {
		return q, nil
	}
	q, err := NewQuerier(d, mode)
	if err != nil {
		return nil, err
	}
	g.qs[k] = q
	return q, nil
}

func (g *goldenEnv) systemsDir() string {
	return filepath.Join(g.root, "aic-core", "src", "aiconfigurator_core", "systems")
}

func (g *goldenEnv) load(system, backend, version string, mode DatabaseMode) (*Data, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := fmt.Sprintf("%s/%s/%s/shared=%t", system, backend, version, SharedLayerEnabled(mode))
	if d, ok := g.data[k]; ok {
		return d, nil
	}
	if err, ok := g.errs[k]; ok {
		return nil, err
	}
	d, err := LoadDir(context.Background(), g.systemsDir(), system, backend, version, ForMode(mode))
	if err != nil {
		g.errs[k] = err
		return nil, err
	}
	g.data[k] = d
	return d, nil
}

// modelConfig reads <org>--<name>_config.json (+ _hf_quant_config.json).
func (g *goldenEnv) modelConfig(id string) (*Model, error) {
	dir := filepath.Join(g.root, "aic-core", "src", "aiconfigurator_core", "model_configs")
	stem := strings.ReplaceAll(id, "/", "--")
	cfg, err := os.ReadFile(filepath.Join(dir, stem+"_config.json"))
	if err != nil {
		return nil, err
	}
	q, err := os.ReadFile(filepath.Join(dir, stem+"_hf_quant_config.json"))
	if err != nil {
		q = nil
	}
	return ParseHFConfig(id, stem+"_config.json", cfg, q)
}

// coverage returns "" when the case can run here, else the skip reason.
func (g *goldenEnv) coverage(c *goldenCase) string {
	switch {
	case c.Family != "LLAMA" && c.Family != "MOE" && c.Family != "DEEPSEEK" && c.Family != "KIMIK25" && c.Family != "DEEPSEEKV32" && c.Family != "QWEN35":
		return fmt.Sprintf("family %s not modeled (LLAMA, MOE, DEEPSEEK, KIMIK25, DEEPSEEKV32, QWEN35 only)", c.Family)
	case c.Family == "DEEPSEEKV32" && (c.DatabaseMode == "EMPIRICAL" || c.DatabaseMode == "HYBRID"):
		return "the DSA util-transfer (EMPIRICAL) estimate is not modeled"
	}
	if _, err := os.Stat(filepath.Join(g.systemsDir(), c.System+".yaml")); err != nil {
		return "no system spec " + c.System + ".yaml in the data slice"
	}
	dirs, _ := filepath.Glob(filepath.Join(g.systemsDir(), "data", c.System, "*", c.Backend, c.Version))
	if len(dirs) == 0 {
		return fmt.Sprintf("no %s %s %s perf data in the data slice", c.System, c.Backend, c.Version)
	}
	if _, err := g.modelConfig(c.Model); err != nil {
		return "no model config for " + c.Model
	}
	if c.CP > 1 {
		return fmt.Sprintf("context parallelism cp=%d not modeled", c.CP)
	}
	return ""
}

// outcome is one surface's verdict for the table.
type outcome struct {
	surface, verdict, detail string
}

// TestGoldenConformance runs every covered case and prints the table.
func TestGoldenConformance(t *testing.T) {
	root := aicDataRoot(t)
	cases, records := loadGoldens(t, root)
	env := &goldenEnv{root: root, data: map[string]*Data{}, errs: map[string]error{}, qs: map[string]*Querier{}}
	var table []string
	var mu sync.Mutex
	for i := range cases {
		c := &cases[i]
		t.Run(c.Name, func(t *testing.T) {
			var outs []outcome
			defer func() {
				mu.Lock()
				defer mu.Unlock()
				for _, o := range outs {
					table = append(table, fmt.Sprintf("%-58s %-7s %-5s %s", c.Name, o.surface, o.verdict, o.detail))
				}
			}()
			if why := env.coverage(c); why != "" {
				outs = append(outs, outcome{"all", "SKIP", why})
				t.Skip(why)
			}
			if testing.Short() && c.Name != "qwen3-32b-h200-vllm-022-power" && !strings.Contains(c.Name, "b200-vllm-019") {
				outs = append(outs, outcome{"all", "SKIP", "-short: only the h200 power case and b200 vllm 0.19.0 cases run"})
				t.Skip("-short")
			}
			outs = runGoldenCase(t, env, c, records[c.Name])
		})
	}
	sort.Strings(table)
	counts := map[string]int{}
	for _, l := range table {
		counts[strings.Fields(l)[2]]++
	}
	t.Logf("golden conformance: %d PASS, %d FAIL, %d SKIP (surface rows)\n%s", counts["PASS"], counts["FAIL"], counts["SKIP"],
		strings.Join(table, "\n"))
}

// runGoldenCase evaluates every surface of one case on the data slice.
func runGoldenCase(t *testing.T, env *goldenEnv, c *goldenCase, recs map[string]goldenRecord) []outcome {
	mode, err := ParseDatabaseMode(c.DatabaseMode)
	if err != nil {
		t.Fatal(err)
	}
	d, err := env.load(c.System, c.Backend, c.Version, mode)
	if err != nil {
		t.Fatalf("load %s/%s/%s (%s): %v", c.System, c.Backend, c.Version, mode, err)
	}
	m, err := env.modelConfig(c.Model)
	if err != nil {
		t.Fatal(err)
	}
	q, err := env.querier(d, mode)
	if err != nil {
		t.Fatal(err)
	}
	return evalGoldenCase(t, q, d, m, c, recs)
}

// evalGoldenCase checks the quant resolution and every surface of a case.
func evalGoldenCase(t *testing.T, q *Querier, d *Data, m *Model, c *goldenCase, recs map[string]goldenRecord) []outcome {
	var outs []outcome
	cfg := Config{Backend: c.Backend, Version: c.Version, TP: c.TP, PP: c.PP, DP: c.DP, MoETP: c.MoETP, MoEEP: c.MoEEP, Mode: q.Mode()}
	if mq := c.QuantInputs["moe"]; mq != nil {
		cfg.MoEQuant = MoEQuant(*mq)
	}
	cliCfg := ResolveQuant(d, m, cfg, true)
	if want := c.Resolved["context_role"]; want != nil {
		got := map[string]string{"gemm": string(cliCfg.GemmQuant), "kvcache": string(cliCfg.KVQuant),
			"fmha": string(cliCfg.FMHAQuant), "moe": string(cliCfg.MoEQuant), "comm": string(cliCfg.CommQuant)}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("resolved %s quant = %s, golden_inputs says %s", k, got[k], v)
			}
		}
	}
	directCfg := ResolveQuant(d, m, cfg, false)
	directCfg.Nextn = c.Nextn
	if c.Transfer != nil {
		p, err := ParseTransferPolicy(*c.Transfer)
		if err != nil {
			t.Fatal(err)
		}
		q = q.WithTransferPolicy(p)
	}
	for _, s := range c.Surfaces {
		rec, ok := recs[s]
		if !ok {
			outs = append(outs, outcome{s, "SKIP", "no golden record"})
			continue
		}
		var got map[string]float64
		var err error
		switch s {
		case "static":
			got, err = goldenStatic(q, d, m, cliCfg, c)
		case "mixed":
			got, err = goldenMixed(q, d, m, directCfg, c)
		case "agg":
			got, err = goldenAgg(q, d, m, cliCfg, c)
		case "disagg":
			got, err = goldenDisagg(q, d, m, cliCfg, c)
		default:
			outs = append(outs, outcome{s, "SKIP", "surface " + s + " not modeled"})
			continue
		}
		outs = append(outs, judge(t, c, s, rec, got, err))
	}
	return outs
}

// TestGoldenH200Embedded keeps the qwen3-32b-h200-vllm-022-power case checked
// from the data embedded in the binary (no ../shared needed); its inputs and
// golden record are copied in testdata/golden_h200_power.json.
func TestGoldenH200Embedded(t *testing.T) {
	var f struct {
		Case   goldenCase              `json:"case"`
		Record map[string]goldenRecord `json:"record"`
	}
	readJSON(t, filepath.Join("testdata", "golden_h200_power.json"), &f)
	c := &f.Case
	c.Name = "qwen3-32b-h200-vllm-022-power"
	d, err := LoadEmbedded(context.Background(), c.System, c.Backend, c.Version)
	if err != nil {
		t.Fatal(err)
	}
	m, err := EmbeddedModel(c.Model)
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewQuerier(d, ModeSilicon)
	if err != nil {
		t.Fatal(err)
	}
	outs := evalGoldenCase(t, q, d, m, c, f.Record)
	if len(outs) != 4 {
		t.Fatalf("want 4 surfaces, got %v", outs)
	}
	for _, o := range outs {
		t.Logf("%s %s %s %s", c.Name, o.surface, o.verdict, o.detail)
	}
}

// judge compares one surface with its golden record at the case tolerance.
func judge(t *testing.T, c *goldenCase, s string, rec goldenRecord, got map[string]float64, err error) outcome {
	if rec.Error != "" {
		if err == nil {
			t.Errorf("%s: golden is error %s, got values %v", s, rec.Error, got)
			return outcome{s, "FAIL", "want error " + rec.Error + ", got values"}
		}
		if !errorKindMatches(rec.Error, err) {
			t.Errorf("%s: golden error %s, got a different kind: %v", s, rec.Error, err)
			return outcome{s, "FAIL", "want " + rec.Error + ", got " + goldenOneLine(err)}
		}
		return outcome{s, "PASS", "errors as the reference (" + rec.Error + "): " + goldenOneLine(err)}
	}
	if err != nil {
		t.Errorf("%s: %v", s, err)
		return outcome{s, "FAIL", goldenOneLine(err)}
	}
	var bad, detail []string
	keys := make([]string, 0, len(rec.Values))
	for k := range rec.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	worst := 0.0
	for _, k := range keys {
		want := rec.Values[k]
		v, ok := got[k]
		if !ok {
			bad = append(bad, k+" not computed")
			continue
		}
		rel := math.Abs(v-want) / math.Max(math.Abs(want), 1e-12)
		worst = math.Max(worst, rel)
		if math.Abs(v-want) > math.Max(math.Abs(want)*c.RTol, 1e-9) {
			bad = append(bad, fmt.Sprintf("%s=%.6g want %.6g (%+.3f%%)", k, v, want, 100*(v-want)/want))
		}
		detail = append(detail, fmt.Sprintf("%s=%.6g", k, v))
	}
	if len(bad) > 0 {
		t.Errorf("%s (rtol %g): %s", s, c.RTol, strings.Join(bad, "; "))
		return outcome{s, "FAIL", strings.Join(bad, "; ")}
	}
	return outcome{s, "PASS", fmt.Sprintf("max rel err %.2e (rtol %g): %s", worst, c.RTol, strings.Join(detail, " "))}
}

// errorKindMatches maps the reference's exception class to ours.
func errorKindMatches(kind string, err error) bool {
	switch kind {
	case "PerfDataNotAvailableError":
		return IsMiss(err)
	case "EmpiricalNotImplementedError":
		var e *EmpiricalMissError
		return errors.As(err, &e)
	case "MissingSystemFlopsError":
		return strings.Contains(err.Error(), "_tc_flops")
	case "RuntimeError":
		return errors.Is(err, ErrOOM)
	}
	return true // unknown kinds: failing at all is what the record asks
}

func goldenOneLine(err error) string {
	s := strings.Join(strings.Fields(err.Error()), " ")
	if len(s) > 140 {
		s = s[:140] + "…"
	}
	return s
}

func goldenStatic(q *Querier, d *Data, m *Model, cfg Config, c *goldenCase) (map[string]float64, error) {
	e, err := NewEstimatorWith(q, d, m, cfg)
	if err != nil {
		return nil, err
	}
	ctx, err := e.ContextMs(c.Static.Batch, c.ISL, c.Prefix)
	if err != nil {
		return nil, err
	}
	gen, err := e.GenerationMs(c.Static.Batch, c.ISL, c.OSL, 1)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{"static_ctx": round3(ctx.LatencyMs), "static_gen": round3(gen.LatencyMs)}
	out["static_total"] = out["static_ctx"] + out["static_gen"]
	out["static_ctx_energy"], out["static_gen_energy"] = ctx.EnergyWms, gen.EnergyWms
	if ctx.LatencyMs > 0 {
		out["static_ctx_power"] = ctx.EnergyWms / ctx.LatencyMs
	}
	if gen.LatencyMs > 0 {
		out["static_gen_power"] = gen.EnergyWms / gen.LatencyMs
	}
	return out, nil
}

func goldenMixed(q *Querier, d *Data, m *Model, cfg Config, c *goldenCase) (map[string]float64, error) {
	e, err := NewEstimatorWith(q, d, m, cfg)
	if err != nil {
		return nil, err
	}
	v, err := e.MixedMs(c.ISL, c.Static.Batch, c.ISL, max(c.OSL, 2), c.Prefix)
	return map[string]float64{"mixed_step": v}, err
}

func goldenAgg(q *Querier, d *Data, m *Model, cfg Config, c *goldenCase) (map[string]float64, error) {
	e, err := NewEstimatorWith(q, d, m, cfg)
	if err != nil {
		return nil, err
	}
	r, err := e.Agg(AggInput{Batch: c.Agg.Batch, CtxTokens: c.Agg.CtxTokens, ISL: c.ISL, OSL: c.OSL, Prefix: c.Prefix})
	return map[string]float64{"agg_ttft": r.TTFTMs, "agg_tpot": r.TPOTMs, "agg_request": r.RequestMs}, err
}

func goldenDisagg(q *Querier, d *Data, m *Model, cfg Config, c *goldenCase) (map[string]float64, error) {
	e, err := NewEstimatorWith(q, d, m, cfg)
	if err != nil {
		return nil, err
	}
	r, err := Disagg(e, e, DisaggInput{ISL: c.ISL, OSL: c.OSL, Prefix: c.Prefix,
		PrefillBatch: c.Disagg.PrefillBatch, PrefillWorkers: c.Disagg.PrefillWorkers,
		DecodeBatch: c.Disagg.DecodeBatch, DecodeWorkers: c.Disagg.DecodeWorkers,
		PrefillCorrection: c.Disagg.PC, DecodeCorrection: c.Disagg.DC, Stride: c.Disagg.Stride})
	return map[string]float64{"disagg_ttft": r.TTFTMs, "disagg_tpot": r.TPOTMs, "disagg_request": r.RequestMs}, err
}
