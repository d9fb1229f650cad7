// Package engineconf reads an engine's own launch configuration — vLLM CLI
// arguments or its YAML config, TensorRT-LLM's extra_llm_api_options YAML (or
// trtllm-serve flags), SGLang server arguments (flags or YAML) — and maps the keys
// that change scheduling onto engine.Spec.
//
// Every key falls in one of three classes, per backend (rules.go):
//   - scheduling keys the model represents: mapped onto engine.Spec (with the
//     scheduler rule they feed, SCHEDULERS.md V-R*, S-R*, T-R*), or accepted only
//     at the value the model assumes (e.g. scheduling_policy fcfs); the memory
//     keys that size the KV pool (memory fractions, vLLM num_gpu_blocks_override
//     and kv_cache_memory_bytes, SGLang's CUDA graph batch sizes) and the
//     KV-cache dtype (CheckKVQuant) are among them, as is SGLang's
//     disable_cuda_graph, recorded and warned about (TimingLine): decode
//     without graphs is slower than the perf data;
//   - harmless keys (ports, logging, model path, swap space): ignored and
//     listed, so the caller can tell the user;
//   - parallelism keys (tensor, pipeline, data, expert parallel sizes, attention
//     DP): not part of engine.Spec, but read as the layout the file deploys
//     (Config.Layout, in each engine's own meaning) and checked against the
//     layout the prediction prices (Config.CheckLayout), since a file for tp 8
//     priced at tp 2 would answer another deployment;
//   - keys that change scheduling in a way the model does not represent
//     (speculative decoding, priority scheduling …) and keys this package does not
//     know: rejected with a one-line error naming the key, since an unknown key
//     might change scheduling.
//
// Keys are compared after normalisation: leading dashes dropped, lower case, '-'
// as '_', nested YAML mappings joined with '.' (kv_cache_config.tokens_per_block).
package engineconf

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aicdb/aicdb/engine"
)

// Formats of a configuration file.
const (
	FormatCLI  = "cli"  // "--flag value" tokens, one or more per line
	FormatYAML = "yaml" // a YAML mapping of keys to values
)

// Setting is one scheduling key of a file, normalised.
type Setting struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Config is a parsed engine configuration file.
type Config struct {
	// Backend is the engine the file configures.
	Backend engine.Backend `json:"backend"`
	// Format is FormatCLI or FormatYAML (sniffed from the content).
	Format string `json:"format"`
	// Settings are the scheduling keys in file order; a key given twice keeps
	// its last value (as argparse and the engines do), at its first position.
	Settings []Setting `json:"settings"`
	// LayoutKeys are the keys naming the worker's parallelism (tensor, pipeline,
	// data, expert parallel sizes), normalised, in file order: not applied to
	// the engine, but checked against the layout a prediction prices
	// (CheckLayout).
	LayoutKeys []Setting `json:"layout,omitempty"`
	// layout is the layout LayoutKeys deploy (readLayout; nil: none named).
	layout *Layout
	// Ignored are the harmless keys (and leading positional words such as
	// "vllm serve MODEL"), normalised, in file order, each once.
	Ignored []string `json:"ignored,omitempty"`
}

// maxFileBytes bounds a configuration file (real ones are a few KB).
const maxFileBytes = 1 << 20

// ParseFile reads and parses the configuration file at path for backend. Errors
// name the file.
func ParseFile(backend, path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("engine config %s: %w", path, err)
	}
	c, err := Parse(backend, data)
	if err != nil {
		return nil, fmt.Errorf("engine config %s: %w", path, err)
	}
	return c, nil
}

// Parse parses data as backend's configuration. A YAML mapping is read as YAML;
// anything else as CLI arguments. Every scheduling value is checked (type and
// range) here, so Apply only fails on cross-key constraints (Validate).
func Parse(backend string, data []byte) (*Config, error) {
	backend = strings.ToLower(backend)
	if _, err := engine.Lookup(backend); err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("%d bytes: larger than %d; an engine config is a few KB", len(data), maxFileBytes)
	}
	if bytes.IndexByte(data, 0) >= 0 || !utf8.Valid(data) {
		return nil, fmt.Errorf("not a text file (NUL byte or invalid UTF-8)")
	}
	c := &Config{Backend: engine.Backend(backend)}
	var kvs []keyValue
	var err error
	if root := yamlMapping(data); root != nil {
		c.Format = FormatYAML
		kvs, err = parseYAML(root)
	} else {
		c.Format = FormatCLI
		kvs, err = parseCLI(data)
	}
	if err != nil {
		return nil, err
	}
	if c.Backend == engine.VLLM {
		if kvs, err = expandJSONConfig(kvs, "speculative_config"); err != nil {
			return nil, err
		}
	}
	pos := map[string]int{}
	ign := map[string]bool{}
	for _, kv := range kvs {
		if kv.positional {
			if !ign[kv.key] {
				ign[kv.key] = true
				c.Ignored = append(c.Ignored, kv.key)
			}
			continue
		}
		key, val := normaliseKey(kv.key), kv.value
		r, ok := lookup(c.Backend, key)
		if !ok && strings.HasPrefix(key, "no_") {
			// vLLM's BooleanOptionalAction: --no-X sets X false.
			if r2, ok2 := lookup(c.Backend, key[3:]); ok2 && r2.class == classHarmless {
				key, r, ok = key[3:], r2, true
			} else if ok2 && r2.isBool {
				if val != "" {
					return nil, fmt.Errorf("%s %q: a --no-… flag takes no value", displayKey(kv), val)
				}
				key, val, r, ok = key[3:], "false", r2, true
			}
		}
		if !ok {
			return nil, fmt.Errorf("%s: not a %s key aicdb knows, so it cannot tell whether it changes scheduling; remove it (harmless keys such as ports, logging and the model path are ignored)", displayKey(kv), backend)
		}
		switch r.class {
		case classHarmless:
			if !ign[key] {
				ign[key] = true
				c.Ignored = append(c.Ignored, key)
			}
			continue
		case classRejected:
			return nil, fmt.Errorf("%s: changes scheduling (%s), which the model does not represent; remove it", displayKey(kv), r.why)
		}
		if r.isBool && val == "" {
			val = "true" // a bare store_true flag
		}
		canon, err := r.check(val)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %v", displayKey(kv), val, err)
		}
		list := &c.Settings
		if r.class == classLayout {
			list = &c.LayoutKeys
		}
		if i, seen := pos[key]; seen {
			(*list)[i].Value = canon
			continue
		}
		pos[key] = len(*list)
		*list = append(*list, Setting{Key: key, Value: canon})
	}
	if c.layout, err = c.readLayout(); err != nil {
		return nil, err
	}
	if c.Backend == engine.SGLang {
		if err := checkSGLangDrafts(c.Settings); err != nil {
			return nil, err
		}
	}
	if c.Backend == engine.VLLM {
		if err := checkVLLMDrafts(c.Settings); err != nil {
			return nil, err
		}
	}
	if c.Backend == engine.TRTLLM {
		if err := checkTRTDrafts(c.Settings); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// expandJSONConfig replaces each key named name whose value is a JSON object —
// vLLM's CLI form --speculative-config '{"method": "mtp", …}', or that string in
// a YAML file — by one key per member, name.member (the form a YAML mapping
// gives), on the same line, members in sorted order; a nested object or array
// is one value (its JSON), which the member's rule then judges.
func expandJSONConfig(kvs []keyValue, name string) ([]keyValue, error) {
	var out []keyValue
	for _, kv := range kvs {
		if kv.positional || normaliseKey(kv.key) != name {
			out = append(out, kv)
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(kv.value), &m); err != nil || m == nil {
			return nil, fmt.Errorf("%s %q: want a JSON object such as {\"method\": \"mtp\", \"num_speculative_tokens\": 1}", displayKey(kv), kv.value)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if k == "" || strings.Trim(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
				return nil, fmt.Errorf("%s: member %q is not a key name", displayKey(kv), k)
			}
			v := string(m[k])
			var str string
			if json.Unmarshal(m[k], &str) == nil {
				v = str
			}
			out = append(out, keyValue{key: kv.key + "." + k, value: v, line: kv.line, flag: kv.flag})
		}
	}
	return out, nil
}

// settingValues maps each key of set to its value.
func settingValues(set []Setting) map[string]string {
	val := make(map[string]string, len(set))
	for _, s := range set {
		val[s.Key] = s.Value
	}
	return val
}

// checkVLLMDrafts checks vLLM's speculative_config as a whole: a method and its
// num_speculative_tokens come together (vLLM requires the count, and without a
// method it infers one from a draft model), and a drafter checkpoint (model)
// comes with an EAGLE / EAGLE3 method and only with one (an MTP method drafts
// with the model's own layers).
func checkVLLMDrafts(set []Setting) error {
	val := settingValues(set)
	m, hasM := val["speculative_config.method"]
	n, hasN := val["speculative_config.num_speculative_tokens"]
	d, hasD := val["speculative_config.model"]
	eagle := slices.Contains(engine.DraftMethods, m)
	switch {
	case hasM && !hasN:
		return fmt.Errorf("speculative_config method %s: give num_speculative_tokens (the drafts per decode step)", m)
	case hasN && !hasM:
		return fmt.Errorf("speculative_config num_speculative_tokens %s: give method mtp, eagle or eagle3 (without it vLLM infers the method from a draft model)", n)
	case hasD && !hasM:
		return fmt.Errorf("speculative_config model %s: give method eagle or eagle3 (without it vLLM infers the method from the draft model)", d)
	case eagle && !hasD:
		return fmt.Errorf("speculative_config method %s: give model, the drafter's checkpoint", m)
	case hasD && !eagle:
		return fmt.Errorf("speculative_config model %s with method %s: the MTP drafter is the model's own layers; drop model, or use method eagle or eagle3", d, m)
	}
	return nil
}

// checkTRTDrafts checks TensorRT-LLM's speculative_config as a whole: a
// decoding_type and its draft length come together (aicdb does not assume a
// release's default count), and a drafter checkpoint comes with decoding_type
// Eagle and only with it (MTP drafts with the model's own layers).
func checkTRTDrafts(set []Setting) error {
	val := settingValues(set)
	typ, hasT := val["speculative_config.decoding_type"]
	n, hasN := val["speculative_config.max_draft_len"]
	layers, hasL := val["speculative_config.num_nextn_predict_layers"]
	if !hasN {
		n, hasN = layers, hasL
	}
	d, hasD := val["speculative_config.speculative_model_dir"]
	if !hasD {
		d, hasD = val["speculative_config.speculative_model"]
	}
	eagle := hasT && typ != "mtp"
	switch {
	case hasT && !hasN && eagle:
		return fmt.Errorf("speculative_config decoding_type Eagle: give max_draft_len (the drafts per decode step)")
	case hasT && !hasN:
		return fmt.Errorf("speculative_config decoding_type MTP: give num_nextn_predict_layers (the drafts per decode step)")
	case hasN && !hasT:
		return fmt.Errorf("speculative_config draft length %s: give decoding_type MTP or Eagle (without it TensorRT-LLM does not speculate)", n)
	case eagle && hasL:
		return fmt.Errorf("speculative_config num_nextn_predict_layers %s: MTP's draft length; with decoding_type Eagle give max_draft_len", layers)
	case eagle && !hasD:
		return fmt.Errorf("speculative_config decoding_type Eagle: give speculative_model_dir, the EAGLE3 head's checkpoint")
	case hasD && !eagle:
		return fmt.Errorf("speculative_config speculative_model_dir %s: the MTP drafter is the model's own layers; drop it, or use decoding_type Eagle", d)
	}
	return nil
}

// checkSGLangDrafts checks SGLang's speculative keys together: the algorithm
// and its number of steps come as a pair (without num_steps SGLang picks a
// model-dependent default aicdb does not know), and with topk 1 the chain
// verifies num_steps + 1 tokens, so num_draft_tokens, when given, is that.
func checkSGLangDrafts(set []Setting) error {
	val := settingValues(set)
	alg, hasAlg := val["speculative_algorithm"]
	steps, hasSteps := val["speculative_num_steps"]
	switch {
	case hasAlg && !hasSteps:
		return fmt.Errorf("--speculative-algorithm %s: give --speculative-num-steps (the drafts per decode step; SGLang's default depends on the model)", strings.ToUpper(alg))
	case hasSteps && !hasAlg:
		return fmt.Errorf("--speculative-num-steps %s: give --speculative-algorithm NEXTN, EAGLE or EAGLE3 (without it SGLang does not speculate)", steps)
	}
	switch path, hasPath := val["speculative_draft_model_path"]; {
	case alg == "eagle3" && !hasPath:
		return fmt.Errorf("--speculative-algorithm EAGLE3: give --speculative-draft-model-path, the head's checkpoint")
	case hasPath && !hasAlg:
		return fmt.Errorf("--speculative-draft-model-path %s: give --speculative-algorithm EAGLE or EAGLE3 (without it SGLang does not speculate)", path)
	}
	if d, ok := val["speculative_num_draft_tokens"]; ok {
		n, _ := strconv.Atoi(steps)
		if m, _ := strconv.Atoi(d); !hasAlg || m != n+1 {
			return fmt.Errorf("--speculative-num-draft-tokens %s: with --speculative-eagle-topk 1 it is --speculative-num-steps + 1 = %d; drop it or set it so", d, n+1)
		}
	}
	return nil
}

// Probe is the backend's default engine with the file applied: what the file
// sets (its drafts, its drafter), read before the engine is resolved.
func (c *Config) Probe() (engine.Spec, error) {
	e, err := engine.Defaults(c.Backend, "")
	if err == nil {
		err = c.Apply(&e)
	}
	return e, err
}

// Apply sets the fields of e that the file's scheduling keys name, then
// validates e. The file must be for e's backend.
func (c *Config) Apply(e *engine.Spec) error {
	if c.Backend != e.Backend {
		return fmt.Errorf("engine config is for %s but the engine is %s; give the %s engine's config", c.Backend, e.Backend, e.Backend)
	}
	for _, late := range []bool{false, true} {
		for _, s := range c.Settings {
			r, ok := lookup(c.Backend, s.Key)
			if !ok || r.apply == nil {
				return fmt.Errorf("engine config key %s: no rule (internal)", s.Key)
			}
			if r.late == late {
				r.apply(e, s.Value)
			}
		}
	}
	if err := e.Validate(); err != nil {
		return fmt.Errorf("engine config: %w", err)
	}
	return nil
}

// CheckKVQuant reports an engine whose config's KV-cache dtype
// (engine.Spec.KVCacheDtype: kv_cache_dtype, kv_cache_config.dtype) contradicts
// quant, the KV-cache quant the point is timed and sized with (perf data's
// bfloat16, fp8, int8; "" = not known, not checked): the prediction would time
// and size one cache while the launch allocates another. The caller appends the
// fix its command offers (eval's --kv-quant; a sweep has no such flag).
func CheckKVQuant(e engine.Spec, quant string) error {
	if e.KVCacheDtype == "" || quant == "" || e.KVCacheDtype == quant {
		return nil
	}
	return fmt.Errorf("engine config kv_cache_dtype %s contradicts the KV-cache quant %s the point is timed with", e.KVCacheDtype, quant)
}

// IgnoredLine is the one-line notice of the ignored keys ("" when none).
func (c *Config) IgnoredLine() string {
	if len(c.Ignored) == 0 {
		return ""
	}
	return fmt.Sprintf("engine config: ignored (no effect on scheduling): %s", strings.Join(c.Ignored, ", "))
}

// TimingLine is the one-line warning for the keys applied whose timing the perf
// data cannot price (SGLang disable_cuda_graph: decode without CUDA graphs), ""
// when none is set.
func (c *Config) TimingLine() string {
	var notes []string
	for _, s := range c.Settings {
		if r, ok := lookup(c.Backend, s.Key); ok && r.timing != "" && warnsAt(r, s.Value) {
			notes = append(notes, s.Key+": "+r.timing)
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return "engine config: " + strings.Join(notes, "; ")
}

// warnsAt reports whether rule r's timing warning applies at canonical value v.
func warnsAt(r rule, v string) bool {
	if r.timingAny {
		return true
	}
	if r.timingUnless != "" {
		return v != r.timingUnless
	}
	return v == cmp.Or(r.timingAt, "true")
}

// keyValue is one key of a file as written.
type keyValue struct {
	key, value string
	line       int  // 1-based line of the key
	positional bool // a word before the first flag ("vllm", "serve", the model)
	flag       bool // written as a CLI flag (--key)
}

// displayKey names a key as the user wrote it, with its line.
func displayKey(kv keyValue) string {
	k := kv.key
	if strings.IndexFunc(k, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		k = strconv.Quote(k) // a quoted newline or control character stays on the error's one line
	}
	if kv.flag {
		return fmt.Sprintf("line %d: flag %s", kv.line, k)
	}
	return fmt.Sprintf("line %d: key %s", kv.line, k)
}

// normaliseKey drops leading dashes, lower-cases and writes '-' as '_'.
func normaliseKey(k string) string {
	k = strings.TrimLeft(k, "-")
	return strings.ReplaceAll(strings.ToLower(k), "-", "_")
}

// Resolved is the engine configuration an operating point was predicted with —
// what a deployment of the point launches. Agg points fill Engine; disagg points
// fill Prefill and Decode. It is stored as JSON with every point
// (operating_points.engine_config).
type Resolved struct {
	// Profile is the queueing profile the engine started from
	// (queueing.ProfileDefaults or queueing.ProfileAIConfigurator).
	Profile string `json:"profile"`
	// Config are the scheduling keys of the engine's own config file applied over
	// the profile (--engine-config), if any.
	Config  []Setting    `json:"config,omitempty"`
	Engine  *engine.Spec `json:"engine,omitempty"`
	Prefill *engine.Spec `json:"prefill,omitempty"`
	Decode  *engine.Spec `json:"decode,omitempty"`
}

// Encode returns r as compact JSON (field order fixed by the struct, so the same
// configuration always encodes to the same bytes).
func (r Resolved) Encode() (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encode engine config: %w", err)
	}
	return string(b), nil
}

// Drafter is the recorded engine that proposes its drafts with a separate
// drafter (engine.Spec.SeparateDrafter: an EAGLE / EAGLE3 head), nil when none
// does: an agg row's engine, else a disaggregated row's first pool that does.
func (r Resolved) Drafter() *engine.Spec {
	for _, e := range []*engine.Spec{r.Engine, r.Prefill, r.Decode} {
		if e != nil && e.SeparateDrafter() {
			return e
		}
	}
	return nil
}

// DecodeResolved parses a stored engine_config. "" and "{}" (rows stored before
// engine configs were recorded) return ok = false.
func DecodeResolved(s string) (r Resolved, ok bool, err error) {
	if s == "" || s == "{}" {
		return r, false, nil
	}
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return r, false, fmt.Errorf("engine config %.40q: %w", s, err)
	}
	return r, true, nil
}
