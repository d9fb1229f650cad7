package measure

import (
	"bytes"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sniff guesses a file's format from its content: a JSON object with vLLM's
// *_ttft_ms keys, a JSON object with AIPerf's time_to_first_token record, or a CSV
// whose header has aiconfigurator's silicon_ttft_ms column.
func Sniff(data []byte) (string, error) {
	t := bytes.TrimSpace(data)
	if len(t) > 0 && t[0] == '{' {
		switch {
		case bytes.Contains(t, []byte(`"time_to_first_token"`)):
			return FormatAIPerf, nil
		case bytes.Contains(t, []byte(`_ttft_ms"`)):
			return FormatVLLMBench, nil
		}
		if !json.Valid(pyTokens(t)) {
			return "", fmt.Errorf("%w: not a complete JSON object: is the file truncated?", ErrUnknownFormat)
		}
		return "", fmt.Errorf("%w: a JSON object with neither vLLM's *_ttft_ms nor AIPerf's time_to_first_token keys", ErrUnknownFormat)
	}
	first, _, _ := bytes.Cut(t, []byte("\n"))
	if bytes.Contains(first, []byte("silicon_ttft_ms")) {
		return FormatAICSilicon, nil
	}
	return "", fmt.Errorf("%w: not a vLLM bench or AIPerf JSON object, nor a CSV with a silicon_ttft_ms column", ErrUnknownFormat)
}

// ParseFile reads the file at path and parses it as Parse does (the reports
// and tests that read a measured sample from disk, one loader for all).
func ParseFile(path, format string, dep Deployment) ([]Measurement, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data, format, dep)
}

// Parse reads one file's content as format ("" = Sniff) and returns its
// measurements, each completed with dep where the file lacks a field and validated.
// Any bad field fails the whole file with a *FieldError naming it.
func Parse(file string, data []byte, format string, dep Deployment) ([]Measurement, error) {
	if format == "" {
		f, err := Sniff(data)
		if err != nil {
			return nil, &FieldError{File: file, Msg: err.Error() + ": pass --format vllm-bench|aiperf|aic-silicon"}
		}
		format = f
	}
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	var ms []Measurement
	var err error
	switch format {
	case FormatVLLMBench:
		var m Measurement
		m, err = parseVLLM(file, data)
		ms = []Measurement{m}
	case FormatAIPerf:
		var m Measurement
		m, err = parseAIPerf(file, data)
		ms = []Measurement{m}
	case FormatAICSilicon:
		ms, err = parseSilicon(file, data)
	default:
		return nil, fmt.Errorf("--format %q: want one of %s", format, strings.Join(Formats, ", "))
	}
	if err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, &FieldError{File: file, Msg: "no measurement rows"}
	}
	for i := range ms {
		m := &ms[i]
		m.File, m.SHA256, m.Format = file, hash, format
		if m.RunID == "" {
			m.RunID = filepath.Base(file)
		}
		if e, how, ok := dep.entryFor(m); ok {
			// The run's entry or rule states how that run was deployed: it wins
			// over the file's own fields (a correction), which fill what it
			// leaves unset.
			if err := m.deployEntry(e, how); err != nil {
				return nil, err
			}
		}
		m.Deployment.Merge(dep)
		if m.Mode == "" {
			m.Mode = "agg"
		}
		m.applyPools()
		m.applyBenchmark()
		m.applyQuantiles()
		for _, p := range []*int{&m.PP, &m.DP} {
			if *p == 0 {
				*p = 1
			}
		}
		if m.MoETP == 0 && m.MoEEP == 0 {
			// aiconfigurator's convention: the MoE layers span the attention ranks
			// (moe_tp · moe_ep = tp · dp), tensor-parallel unless stated.
			m.MoETP, m.MoEEP = m.TP*m.DP, 1
		}
		for _, p := range []*int{&m.MoETP, &m.MoEEP} {
			if *p == 0 {
				*p = 1
			}
		}
		if err := m.Validate(); err != nil {
			return nil, err
		}
	}
	return ms, nil
}

// decodeJSON decodes a JSON object, accepting Python's non-standard NaN, Infinity
// and -Infinity tokens (json.dump writes them) as the strings "NaN", "Infinity" and
// "-Infinity" so the field getters can name them.
func decodeJSON(file string, data []byte) (map[string]any, error) {
	if !utf8.Valid(data) {
		return nil, &FieldError{File: file, Msg: "not UTF-8 text"}
	}
	d := json.NewDecoder(bytes.NewReader(pyTokens(data)))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil {
		return nil, &FieldError{File: file, Msg: "not a JSON object (" + err.Error() + "): is the file truncated?"}
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, &FieldError{File: file, Msg: "trailing data after the JSON object"}
	}
	return v, nil
}

// pyTokens quotes NaN, Infinity and -Infinity outside JSON strings.
func pyTokens(data []byte) []byte {
	if !bytes.Contains(data, []byte("NaN")) && !bytes.Contains(data, []byte("Infinity")) {
		return data
	}
	out := make([]byte, 0, len(data)+16)
	in := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if in {
			out = append(out, c)
			if c == '\\' && i+1 < len(data) {
				i++
				out = append(out, data[i])
			} else if c == '"' {
				in = false
			}
			continue
		}
		switch {
		case c == '"':
			in = true
			out = append(out, c)
		case bytes.HasPrefix(data[i:], []byte("-Infinity")):
			out = append(out, `"-Infinity"`...)
			i += len("-Infinity") - 1
		case bytes.HasPrefix(data[i:], []byte("Infinity")):
			out = append(out, `"Infinity"`...)
			i += len("Infinity") - 1
		case bytes.HasPrefix(data[i:], []byte("NaN")):
			out = append(out, `"NaN"`...)
			i += len("NaN") - 1
		default:
			out = append(out, c)
		}
	}
	return out
}

// obj reads typed fields of a decoded JSON object, naming the field on error.
type obj struct {
	file string
	path string // "" at top level, "a.b." inside
	m    map[string]any
}

func (o obj) err(key, msg string, a ...any) error {
	return &FieldError{File: o.file, Field: o.path + key, Msg: fmt.Sprintf(msg, a...)}
}

// num returns a finite number field (ok=false when absent or null). Infinity is
// an error unless allowInf; NaN always is.
func (o obj) num(key string, allowInf bool) (float64, bool, error) {
	v, ok := o.m[key]
	if !ok || v == nil {
		return 0, false, nil
	}
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil || math.IsInf(f, 0) {
			return 0, false, o.err(key, "%s is not a finite number", string(x))
		}
		return f, true, nil
	case string:
		switch x {
		case "Infinity", "inf", "Inf":
			if allowInf {
				return math.Inf(1), true, nil
			}
		case "NaN", "nan":
			return 0, false, o.err(key, "NaN: the benchmark recorded no value; remove the field or rerun")
		}
		return 0, false, o.err(key, "%q: want a number", x)
	}
	return 0, false, o.err(key, "%s: want a number", jsonKind(v))
}

// int returns a non-negative integer field (ok=false when absent or null).
func (o obj) int(key string) (int, bool, error) {
	f, ok, err := o.num(key, false)
	if err != nil || !ok {
		return 0, ok, err
	}
	if f < 0 || f != math.Trunc(f) || f > 1<<40 {
		return 0, false, o.err(key, "%v: want a whole number ≥ 0", f)
	}
	return int(f), true, nil
}

func (o obj) str(key string) (string, error) {
	v, ok := o.m[key]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", o.err(key, "%s: want a string", jsonKind(v))
	}
	return s, nil
}

func (o obj) sub(key string) (obj, bool, error) {
	v, ok := o.m[key]
	if !ok || v == nil {
		return obj{}, false, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return obj{}, false, o.err(key, "%s: want an object", jsonKind(v))
	}
	return obj{file: o.file, path: o.path + key + ".", m: m}, true, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return "null"
}

// metricKeys maps each file's keys onto Metrics (vLLM bench serve's result JSON).
var vllmKeys = []struct {
	key string
	m   Metric
}{
	{"mean_ttft_ms", TTFTMean}, {"median_ttft_ms", TTFTP50}, {"p99_ttft_ms", TTFTP99},
	{"mean_tpot_ms", TPOTMean}, {"median_tpot_ms", TPOTP50}, {"p99_tpot_ms", TPOTP99},
	{"mean_itl_ms", ITLMean}, {"median_itl_ms", ITLP50}, {"p99_itl_ms", ITLP99},
	{"mean_e2el_ms", E2EMean}, {"median_e2el_ms", E2EP50}, {"p99_e2el_ms", E2EP99},
	{"request_throughput", ThroughputRPS}, {"output_throughput", OutputTokensPerS},
}

// parseVLLM reads a `vllm bench serve --save-result` JSON: the statistics above,
// max_concurrency (closed loop), request_rate (inf = unlimited), num_prompts,
// model_id, and the mean prompt/output lengths from total_*_tokens / completed.
func parseVLLM(file string, data []byte) (Measurement, error) {
	var m Measurement
	top, err := decodeJSON(file, data)
	if err != nil {
		return m, err
	}
	o := obj{file: file, m: top}
	for _, k := range vllmKeys {
		v, ok, err := o.num(k.key, false)
		if err != nil {
			return m, err
		}
		if ok {
			m.Set(k.m, v)
		}
	}
	if m.Concurrency, _, err = o.int("max_concurrency"); err != nil {
		return m, err
	}
	rate, ok, err := o.num("request_rate", true)
	if err != nil {
		return m, err
	}
	if ok && !math.IsInf(rate, 1) {
		m.RequestRate = rate
	}
	if m.NumPrompts, _, err = o.int("num_prompts"); err != nil {
		return m, err
	}
	ramp := top["ramp_up_strategy"]
	allAtOnce := ok && math.IsInf(rate, 1) && m.Concurrency == 0 && m.NumPrompts > 0 && ramp == nil // a ramp sets the rate instead
	if m.Model, err = o.str("model_id"); err != nil {
		return m, err
	}
	done, _, err := o.int("completed")
	if err != nil {
		return m, err
	}
	in, okIn, err := o.int("total_input_tokens")
	if err != nil {
		return m, err
	}
	out, okOut, err := o.int("total_output_tokens")
	if err != nil {
		return m, err
	}
	if done > 0 && okIn {
		m.ISL = (in + done/2) / done
	}
	if done > 0 && okOut {
		m.OSL = (out + done/2) / done
	}
	m.Extra = map[string]any{}
	for _, k := range []string{"date", "backend", "tokenizer_id", "duration", "completed", "burstiness", "ramp_up_strategy", "ramp_up_start_rps", "ramp_up_end_rps"} {
		if v, ok := top[k]; ok {
			m.Extra[k] = v
		}
	}
	// --save-detailed: every request's lengths, kept as quantile points (W2) over
	// the requests that completed (a failed request lists output length 0).
	var lens [2][]int
	for i, key := range []string{"input_lens", "output_lens"} {
		xs, ok := top[key].([]any)
		if !ok {
			continue
		}
		for _, x := range xs {
			n, ok := x.(json.Number)
			v, err := n.Int64()
			if !ok || err != nil || v < 0 || v > 1<<24 {
				return m, o.err(key, "%s: want per-request lengths in 0..%d", quoteValue(x), 1<<24)
			}
			lens[i] = append(lens[i], int(v))
		}
	}
	if len(lens[0]) > 0 && len(lens[1]) > 0 && len(lens[0]) != len(lens[1]) {
		return m, o.err("output_lens", "%d lengths beside %d input_lens: want one per request", len(lens[1]), len(lens[0]))
	}
	var ins, outs []int // the completed requests'
	for i, v := range lens[0] {
		switch {
		case len(lens[1]) > 0 && lens[1][i] == 0: // failed
		case v == 0:
			return m, o.err("input_lens", "0: a completed request's prompt length must be ≥ 1")
		default:
			ins = append(ins, v)
		}
	}
	for _, v := range lens[1] {
		if v > 0 {
			outs = append(outs, v)
		}
	}
	m.ISLQuantiles, m.OSLQuantiles = quantilePoints(ins), quantilePoints(outs)
	if allAtOnce {
		// vllm bench serve's default load: request rate inf without
		// --max-concurrency sends every prompt at once, which is the closed loop of
		// num_prompts clients sending one request each (queueing's identity,
		// TestOpenRunIdentities).
		m.Concurrency = m.NumPrompts
		m.Extra["concurrency_note"] = fmt.Sprintf("request_rate inf without max_concurrency: all %d prompts sent at once (a closed loop of %d clients, one request each)", m.NumPrompts, m.NumPrompts)
		m.Extra["all_at_once"] = true
	}
	return m, nil
}

// aiperfKeys: AIPerf / genai-perf metric records (objects with avg, p50, p99, …).
// Their inter_token_latency is per request ((e2e − ttft)/(osl − 1)), i.e. TPOT.
var aiperfKeys = []struct {
	key  string
	stat string
	m    Metric
}{
	{"time_to_first_token", "avg", TTFTMean}, {"time_to_first_token", "p50", TTFTP50}, {"time_to_first_token", "p99", TTFTP99},
	{"inter_token_latency", "avg", TPOTMean}, {"inter_token_latency", "p50", TPOTP50}, {"inter_token_latency", "p99", TPOTP99},
	{"request_latency", "avg", E2EMean}, {"request_latency", "p50", E2EP50}, {"request_latency", "p99", E2EP99},
	{"request_throughput", "avg", ThroughputRPS}, {"output_token_throughput", "avg", OutputTokensPerS},
}

// parseAIPerf reads an AIPerf profile_export_aiperf.json (or genai-perf's
// profile_export_genai_perf.json): metric records, mean prompt/output lengths
// (input_sequence_length, output_sequence_length), and the load from input_config
// (loadgen.concurrency / request_rate, or genai-perf's perf_analyzer.stimulus).
func parseAIPerf(file string, data []byte) (Measurement, error) {
	var m Measurement
	top, err := decodeJSON(file, data)
	if err != nil {
		return m, err
	}
	o := obj{file: file, m: top}
	for _, k := range aiperfKeys {
		rec, ok, err := o.sub(k.key)
		if err != nil {
			return m, err
		}
		if !ok {
			continue
		}
		if u, err := rec.str("unit"); err != nil {
			return m, err
		} else if strings.HasPrefix(k.key, "time_") || strings.HasSuffix(k.key, "_latency") {
			if u != "" && u != "ms" {
				return m, rec.err("unit", "%q: want ms", u)
			}
		}
		v, ok, err := rec.num(k.stat, false)
		if err != nil {
			return m, err
		}
		if ok {
			m.Set(k.m, v)
		}
	}
	for _, l := range []struct {
		key string
		dst *int
		qs  *[]int
	}{{"input_sequence_length", &m.ISL, &m.ISLQuantiles}, {"output_sequence_length", &m.OSL, &m.OSLQuantiles}} {
		rec, ok, err := o.sub(l.key)
		if err != nil {
			return m, err
		}
		if !ok {
			continue
		}
		v, ok, err := rec.num("avg", false)
		if err != nil {
			return m, err
		}
		if ok {
			if v < 0 || v > 1<<30 {
				return m, rec.err("avg", "%v: not a sequence length", v)
			}
			*l.dst = int(math.Round(v))
		}
		if *l.qs, err = percentilePoints(rec); err != nil {
			return m, err
		}
	}
	if cfg, ok, err := o.sub("input_config"); err != nil {
		return m, err
	} else if ok {
		if err := aiperfConfig(cfg, &m); err != nil {
			return m, err
		}
	}
	// A run bounded by time (--benchmark-duration) states no request count; its
	// request_count record is the requests it measured.
	if rec, ok, err := o.sub("request_count"); err != nil {
		return m, err
	} else if ok && m.NumPrompts == 0 {
		v, ok, err := rec.num("avg", false)
		if err != nil {
			return m, err
		}
		if ok {
			if v < 0 || v > 1<<30 || v != math.Trunc(v) {
				return m, rec.err("avg", "%v: not a request count", v)
			}
			m.NumPrompts = int(v)
		}
	}
	return m, nil
}

func aiperfConfig(cfg obj, m *Measurement) error {
	if lg, ok, err := cfg.sub("loadgen"); err != nil {
		return err
	} else if ok {
		if m.Concurrency, _, err = lg.int("concurrency"); err != nil {
			return err
		}
		r, ok, err := lg.num("request_rate", true)
		if err != nil {
			return err
		}
		if ok && !math.IsInf(r, 1) {
			m.RequestRate = r
		}
		if m.NumPrompts, _, err = lg.int("request_count"); err != nil {
			return err
		}
		// How the rate's sends are spaced (AIPerf --arrival-pattern, default
		// poisson, and a gamma pattern's --arrival-smoothness): kept so an
		// open-loop row is predicted with its sends (Measurement.OpenArrivals);
		// and the load options that send otherwise (aiperfLoads), kept so such a
		// row is refused with its reason (Measurement.LoadUnmodelled).
		keys := []string{"arrival_pattern", "request_rate_mode", "arrival_smoothness"}
		for _, l := range aiperfLoads {
			keys = append(keys, l.key)
		}
		for _, k := range keys {
			if v, ok := lg.m[k]; ok && v != nil && v != "" && v != false {
				if m.Extra == nil {
					m.Extra = map[string]any{}
				}
				m.Extra[k] = v
			}
		}
	}
	if in, ok, err := cfg.sub("input"); err != nil {
		return err
	} else if ok {
		// A fixed schedule replays a dataset's timestamps (--fixed-schedule; a
		// mooncake_trace dataset turns it on).
		fixed := in.m["fixed_schedule"] == true
		for _, k := range []string{"custom_dataset_type", "dataset_type"} {
			if t, ok := in.m[k].(string); ok && strings.EqualFold(t, "mooncake_trace") {
				fixed = true
			}
		}
		if fixed {
			if m.Extra == nil {
				m.Extra = map[string]any{}
			}
			m.Extra["fixed_schedule"] = true
		}
	}
	if pa, ok, err := cfg.sub("perf_analyzer"); err != nil {
		return err
	} else if ok {
		if st, ok, err := pa.sub("stimulus"); err != nil {
			return err
		} else if ok {
			c, ok, err := st.int("concurrency")
			if err != nil {
				return err
			}
			if ok && m.Concurrency == 0 {
				m.Concurrency = c
			}
			r, ok, err := st.num("request_rate", true)
			if err != nil {
				return err
			}
			if ok && !math.IsInf(r, 1) && m.RequestRate == 0 {
				m.RequestRate = r
			}
		}
	}
	if ep, ok, err := cfg.sub("endpoint"); err != nil {
		return err
	} else if ok {
		if names, ok := ep.m["model_names"].([]any); ok && len(names) > 0 {
			if s, ok := names[0].(string); ok {
				m.Model = s
			}
		}
	}
	if m.Model == "" {
		if ms, ok := cfg.m["model_names"].([]any); ok && len(ms) > 0 {
			if s, ok := ms[0].(string); ok {
				m.Model = s
			}
		}
	}
	return nil
}

// siliconColumns are the aiconfigurator silicon sample's columns aicdb reads; the
// others must be present too (the schema is checked whole) and are kept in Extra
// when non-empty.
var siliconColumns = []string{"id", "silicon_data_source", "backend", "backend_version", "model_path", "system",
	"precision", "mode", "isl", "osl", "gemm_quant_mode", "moe_quant_mode", "batch_size", "tp_size", "pp_size",
	"attention_dp_size", "moe_tp_size", "moe_ep_size", "prefill_batch_size", "prefill_num_workers",
	"prefill_tp_size", "prefill_pp_size", "prefill_attention_dp_size", "prefill_moe_tp_size", "prefill_moe_ep_size",
	"decode_batch_size", "decode_num_workers", "decode_tp_size", "decode_pp_size", "decode_attention_dp_size",
	"decode_moe_tp_size", "decode_moe_ep_size", "silicon_ttft_ms", "silicon_tpot_ms"}

var siliconConcurrency = regexp.MustCompile(`silicon_concurrency=([0-9]+)`)

var imageVersion = regexp.MustCompile(`(?:vllm-openai|tensorrt-llm/release|sglang):v?([0-9][0-9A-Za-z.+-]*)`)

// parseSilicon reads aiconfigurator's silicon sample CSV: one measured run per row
// (TTFT and TPOT, most likely means), batch_size = client concurrency per
// aggregated worker.
func parseSilicon(file string, data []byte) ([]Measurement, error) {
	if !utf8.Valid(data) {
		return nil, &FieldError{File: file, Msg: "not UTF-8 text"}
	}
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1 // a short row is reported with the first missing column
	header, err := r.Read()
	if err != nil {
		return nil, &FieldError{File: file, Line: 1, Msg: "no CSV header: " + err.Error()}
	}
	col := map[string]int{}
	for i, h := range header {
		col[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	for _, c := range siliconColumns {
		if _, ok := col[c]; !ok {
			return nil, &FieldError{File: file, Line: 1, Field: c, Msg: "column missing from the header (not aiconfigurator's silicon CSV schema)"}
		}
	}
	var out []Measurement
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return nil, &FieldError{File: file, Line: pe.Line, Msg: pe.Err.Error() + ": is the file truncated?"}
			}
			return nil, &FieldError{File: file, Msg: err.Error()}
		}
		line, _ := r.FieldPos(0) // a record read without error has at least one field
		if len(rec) != len(header) {
			if len(rec) > len(header) {
				return nil, &FieldError{File: file, Line: line, Msg: fmt.Sprintf("%d fields, the header has %d", len(rec), len(header))}
			}
			return nil, &FieldError{File: file, Line: line, Field: strings.TrimSpace(header[len(rec)]), Msg: "missing (short row): is the file truncated?"}
		}
		m, err := siliconRow(file, line, rec, col)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// siliconAggShape reads an agg row's deployment as the silicon sample means it:
//   - batch_size is the client concurrency per attention-DP rank: on every row
//     that states both, silicon_concurrency = batch_size × attention_dp_size
//     (1,685 of the b200 rows; c256 at dp 8 has batch_size 32), so the worker's
//     concurrency is their product;
//   - rows with moe_tp = moe_ep = k > 1 record tp·dp as the product k·k, not the
//     GPU count: their run ids name the deployment ("…_c64_tp8_ep8_…" is tp 64,
//     moe_tp 8, moe_ep 8; "…_c256_tp8_0_ep8_0_…" of the same config is tp 1, dp 8,
//     moe_tp 1, moe_ep 8), and DeepSeek-R1 at tp 64 would span eight 8-GPU
//     nodes. Such a row is k GPUs: tp (or dp) divided by k, moe_tp 1, moe_ep k;
//   - rows with tp = dp = k > 1, moe_tp 1 and moe_ep = k·k are the same product
//     recorded the other way round: the tp k, moe_ep k deployment on k GPUs, dp 1
//     (concurrency batch_size × k as above). Every Kimi-K2.5 row so recorded (30,
//     ids "…_c32_tp4_ep4_…" and "…_cfg635") has a twin with the identical TTFT and
//     TPOT recorded as tp 4, dp 1, moe_ep 4 at batch_size = the concurrency (the
//     kimi-k2.5-gap-analysis rows), and MiniMax-M2.5's fp8 rows so recorded measure
//     what its tp k, moe_ep k rows measure at the same concurrency (k = 2: 74 / 9.6
//     vs 72 / 9.6 ms TTFT / TPOT at c 4; k = 4: 147 / 16.2 vs 155 / 16.3 at c 64).
//     A DP+EP deployment proper (tp 1, dp k, moe_ep k) is not this pattern.
//
// Where the row states silicon_concurrency and it disagrees with the worker's
// concurrency so read, siliconRow takes silicon_concurrency, the client count
// the benchmark ran (its run id names it too), and records the disagreement in
// Extra["concurrency_note"]. 9 b200 agg rows so disagree: "…_c32_tp8_ep8_1537"
// (batch_size 32 at a recorded attention_dp_size 64, the k·k product above,
// would be 2,048 clients; its TPOT, 15 ms, is a 32-client one), one Qwen3-32B
// row (batch_size 13, silicon_concurrency 416 at tp 2), and seven
// TensorRT-LLM 1.3.0rc* DeepSeek rows whose batch_size is silicon_concurrency /
// tp ("…_c224_tp4_…": batch_size 56). Those may be attention-DP deployments
// whose attention_dp_size was not recorded (batch_size per rank, tp ranks), but
// their TPOT fits neither reading (docs/validation.md Round 15), so the
// deployment stays as recorded; only the client count is read from the run.
func siliconAggShape(m *Measurement) {
	dp := max(m.DP, 1)
	m.Concurrency *= dp
	switch k, j := m.MoETP, m.TP; {
	case k > 1 && m.MoEEP == k && m.TP*dp == k*k:
		if m.TP >= k {
			m.TP /= k
		} else {
			m.DP = dp / k
		}
		m.MoETP, m.MoEEP = 1, k
	case j > 1 && m.DP == j && k <= 1 && m.MoEEP == j*j:
		m.DP, m.MoETP, m.MoEEP = 1, 1, j
	}
}

func siliconRow(file string, line int, rec []string, col map[string]int) (Measurement, error) {
	var m Measurement
	m.Line = line
	get := func(c string) string { return strings.TrimSpace(rec[col[c]]) }
	fe := func(c, msg string, a ...any) error {
		return &FieldError{File: file, Line: line, Field: c, Msg: fmt.Sprintf(msg, a...)}
	}
	num := func(c string, required bool) (int, error) {
		s := get(c)
		if s == "" {
			if required {
				return 0, fe(c, "empty: want a whole number")
			}
			return 0, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f != math.Trunc(f) || f < 0 || f > 1<<30 {
			return 0, fe(c, "%q: want a whole number ≥ 0", s)
		}
		return int(f), nil
	}
	ms := func(c string) (float64, error) {
		s := get(c)
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return 0, fe(c, "%q: want a finite number of ms ≥ 0", s)
		}
		return f, nil
	}
	m.RunID = get("id")
	m.Backend, m.Version, m.Model, m.System, m.Mode = get("backend"), get("backend_version"), get("model_path"), get("system"), get("mode")
	m.GemmQuant, m.MoEQuant = get("gemm_quant_mode"), get("moe_quant_mode")
	if m.Version == "" {
		if v := imageVersion.FindStringSubmatch(get("silicon_data_source")); v != nil {
			m.Version = v[1]
		}
	}
	var err error
	ints := []struct {
		c   string
		dst *int
		req bool
	}{{"isl", &m.ISL, true}, {"osl", &m.OSL, true}}
	if m.Mode == "disagg" {
		ints = append(ints, []struct {
			c   string
			dst *int
			req bool
		}{{"prefill_batch_size", &m.PBatch, false}, {"prefill_num_workers", &m.PWorkers, false},
			{"prefill_tp_size", &m.PTP, false}, {"prefill_pp_size", &m.PPP, false}, {"prefill_attention_dp_size", &m.PDP, false},
			{"decode_batch_size", &m.DBatch, false}, {"decode_num_workers", &m.DWorkers, false},
			{"decode_tp_size", &m.DTP, false}, {"decode_pp_size", &m.DPP, false}, {"decode_attention_dp_size", &m.DDP, false},
			{"decode_moe_tp_size", &m.MoETP, false}, {"decode_moe_ep_size", &m.MoEEP, false}}...)
	} else {
		ints = append(ints, []struct {
			c   string
			dst *int
			req bool
		}{{"batch_size", &m.Concurrency, true}, {"tp_size", &m.TP, true}, {"pp_size", &m.PP, false},
			{"attention_dp_size", &m.DP, false}, {"moe_tp_size", &m.MoETP, false}, {"moe_ep_size", &m.MoEEP, false}}...)
	}
	for _, f := range ints {
		if *f.dst, err = num(f.c, f.req); err != nil {
			return m, err
		}
	}
	stated, hasStated := statedConcurrency(get("silicon_data_source"))
	var note string
	if m.Mode == "disagg" {
		// The deployment's shape is the decode pool's; the client concurrency is the
		// source's silicon_concurrency when stated (the pool columns are often blank).
		m.TP, m.PP, m.DP = max(m.DTP, 1), max(m.DPP, 1), max(m.DDP, 1)
		m.Concurrency = m.DBatch * max(m.DWorkers, 1)
		if hasStated {
			m.Concurrency = stated
		}
		if m.Concurrency == 0 {
			return m, fe("decode_batch_size", "empty and no silicon_concurrency in silicon_data_source: the client concurrency is unknown")
		}
	} else {
		batch, dp := m.Concurrency, max(m.DP, 1)
		siliconAggShape(&m)
		if hasStated && stated != m.Concurrency {
			note = fmt.Sprintf("batch_size %d × attention_dp_size %d = %d clients disagrees with silicon_concurrency %d: read as %d clients, the benchmark's own count",
				batch, dp, m.Concurrency, stated, stated)
			m.Concurrency = stated
		}
	}
	ttft, err := ms("silicon_ttft_ms")
	if err != nil {
		return m, err
	}
	tpot, err := ms("silicon_tpot_ms")
	if err != nil {
		return m, err
	}
	m.Set(TTFTMean, ttft)
	m.Set(TPOTMean, tpot)
	m.Extra = map[string]any{}
	for _, c := range []string{"silicon_data_source", "precision"} {
		if v := get(c); v != "" {
			m.Extra[c] = v
		}
	}
	if note != "" {
		m.Extra["concurrency_note"] = note
	}
	return m, nil
}

// statedConcurrency is the silicon_concurrency=N a row's silicon_data_source
// states (N > 0): the client count its benchmark ran.
func statedConcurrency(source string) (int, bool) {
	c := siliconConcurrency.FindStringSubmatch(source)
	if c == nil {
		return 0, false
	}
	n, err := strconv.Atoi(c[1])
	return n, err == nil && n > 0
}

// aiperfPercentiles are the percentile keys of an AIPerf record, with min (0)
// and max (100).
var aiperfPercentiles = []struct {
	key string
	p   float64
}{{"min", 0}, {"p1", 1}, {"p5", 5}, {"p10", 10}, {"p25", 25}, {"p50", 50}, {"p75", 75}, {"p90", 90}, {"p95", 95}, {"p99", 99}, {"max", 100}}

// percentilePoints reads a length record's percentiles (AIPerf: min, p1 … p99,
// max) as shapePoints equally weighted quantile points, the quantile function linear
// between the stated percentiles; nil when fewer than min, p50 and max are
// stated or the lengths do not vary.
func percentilePoints(rec obj) ([]int, error) {
	var ps, vs []float64
	for _, k := range aiperfPercentiles {
		v, ok, err := rec.num(k.key, false)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if v < 0 || v > 1<<24 || (len(vs) > 0 && v < vs[len(vs)-1]) {
			return nil, rec.err(k.key, "%v: not a length at or above the lower percentiles'", v)
		}
		ps, vs = append(ps, k.p), append(vs, v)
	}
	if len(ps) < 3 || ps[0] != 0 || ps[len(ps)-1] != 100 || !slices.Contains(ps, 50) {
		return nil, nil
	}
	return linearPoints(ps, vs), nil
}

// linearPoints is shapePoints equally weighted quantile points of a length
// whose quantile function is linear between the percentiles ps (from 0 to
// 100, increasing) and their values vs; nil when the lengths do not vary.
func linearPoints(ps, vs []float64) []int {
	out := make([]int, shapePoints)
	for i := range out {
		p := (float64(i) + 0.5) * 100 / shapePoints
		j := 1
		for ps[j] < p {
			j++
		}
		v := vs[j-1] + (vs[j]-vs[j-1])*(p-ps[j-1])/(ps[j]-ps[j-1])
		out[i] = max(1, int(math.Round(v)))
	}
	return varying(out)
}
