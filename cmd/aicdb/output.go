package main

// The one output layer of the CLI (issue 10): every command that prints results
// hands column keys and rows to writeRows, which prints them as an aligned table
// (headers with units, numbers rounded), CSV, a JSON array of objects or JSON
// lines (snake_case keys in the given column order, numbers exact). NaN and ±Inf
// never print: "-" in a table, empty in CSV, null in JSON.

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/aicdb/aicdb/queueing"
)

// The row formats every result command accepts.
const (
	formatTable = "table"
	formatCSV   = "csv"
	formatJSON  = "json"
	formatJSONL = "jsonl"
	// formatText is the extra format of estimate, doctor and trace stats: text lines.
	formatText = "text"
)

var rowFormats = []string{formatTable, formatCSV, formatJSON, formatJSONL}

// formatFlag is the --format flag of a result command: the row formats, plus the
// command's own extra formats (estimate's text), defaulting to def.
func formatFlag(def string, extra ...string) *cli.StringFlag {
	return &cli.StringFlag{Name: "format", Value: def,
		Usage: "output `FORMAT`: " + formatList(extra...)}
}

// shortFormatFlag is formatFlag with the -f alias (query, perfdb ls).
func shortFormatFlag(def string) *cli.StringFlag {
	f := formatFlag(def)
	f.Aliases = []string{"f"}
	return f
}

// formatList names the accepted formats for usage and error messages.
func formatList(extra ...string) string {
	all := append(append([]string{}, rowFormats...), extra...)
	return strings.Join(all[:len(all)-1], ", ") + " or " + all[len(all)-1]
}

// checkFormat accepts a row format or one of extra; the error names them all.
func checkFormat(f string, extra ...string) error {
	for _, g := range rowFormats {
		if f == g {
			return nil
		}
	}
	for _, g := range extra {
		if f == g {
			return nil
		}
	}
	return userErrorf("--format %q: use %s", f, formatList(extra...))
}

// statFamilies name the families of statistic keys (family_stat, also with a
// trailing _ms) in table headers: the queueing latencies and the trace lengths.
var statFamilies = []struct{ prefix, head, unit string }{
	{"ttft_steady_", "TTFT", "ms"},
	{"ttft_transient_", "TTFT transient", "ms"},
	{"itl_", "ITL", "ms"},
	{"tpot_", "TPOT", "ms"},
	{"e2e_", "E2E", "ms"},
	{"ttft_", "TTFT", "ms"},
	{"isl_", "ISL", "tokens"},
	{"osl_", "OSL", "tokens"},
}

// fixedHeads are the table headers of keys the word rule (wordsHeader) would not
// name well: throughputs, aiconfigurator's legacy (mean) estimates, which are
// labelled as such, and a few abbreviations.
var fixedHeads = map[string]string{
	"throughput_rps":              "Throughput (req/s)",
	"output_tokens_per_s":         "Output (tok/s)",
	"output_tokens_per_s_per_gpu": "Output (tok/s/GPU)",
	"tokens_per_s":                "Tokens (tok/s)",
	"tokens_per_s_per_gpu":        "Tokens (tok/s/GPU)",
	"tokens_per_s_per_user":       "Tokens (tok/s/user)",
	"seq_per_s":                   "Requests (req/s)",
	"seq_per_s_per_gpu":           "Requests (req/s/GPU)",
	"request_rate":                "Request rate (req/s)",
	"queueing_tier":               "Tier",
	"workload_fidelity":           "Workload fidelity",
	"ttft":                        "TTFT legacy est. (ms)",
	"tpot":                        "TPOT legacy est. (ms)",
	"request_latency":             "Request latency legacy est. (ms)",
	"p_queue_ms_p99":              "Prefill queue p99 (ms)",
	"d_headroom_min":              "Decode KV headroom min",
	"throughput_rps_burst":        "Throughput burst (req/s)",
	"throughput_rps_staggered":    "Throughput staggered (req/s)",
	"multi_stable":                "Multi-stable",
	"isl":                         "ISL (tokens)",
	"osl":                         "OSL (tokens)",
}

// statHeads turns a statistic suffix of a latency key into words.
var statHeads = map[string]string{
	"mean": "mean", "max": "max", "min": "min", "p50": "p50", "p75": "p75", "p90": "p90",
	"p95": "p95", "p99": "p99", "p999": "p99.9", "p99_lo": "p99 lo", "p99_hi": "p99 hi",
}

// unitWords are the unit words of column keys and their table units.
var unitWords = map[string]string{"ms": "ms", "s": "s", "rps": "req/s", "pct": "%", "gib": "GiB", "tokens": "tokens"}

// keyWords spell the abbreviations of column keys in headers; "num" (a count)
// is dropped.
var keyWords = map[string]string{
	"ttft": "TTFT", "itl": "ITL", "tpot": "TPOT", "e2e": "E2E", "isl": "ISL", "osl": "OSL", "kv": "KV",
	"mape": "MAPE", "gpu": "GPU", "gpus": "GPUs", "ids": "IDs", "id": "ID", "moe": "MoE", "oom": "OOM",
	"sla": "SLA", "se": "SE", "p999": "p99.9", "ctx": "context", "genonly": "gen-only", "tp": "TP", "pp": "PP",
	"dp": "DP", "ep": "EP", "etp": "ETP", "gemm": "GEMM", "fmha": "FMHA", "kvcache": "KV cache", "cv": "CV", "nccl": "NCCL", "topk": "top-k", "num": "",
}

// headerOf is the table header of column key, in one style: words in sentence
// case with the unit in parentheses. The queueing columns name their statistic
// ("TTFT p99 (ms)"), aiconfigurator's mean estimates say so ("TTFT legacy est.
// (ms)"), other keys are their words with a unit word (ms, s, rps, pct, gib,
// tokens) moved into the parentheses ("Mixed step (ms)", "MAPE (%)", "Context
// (tokens)"), and a key with no unit is its words ("Parallel", "Reason").
func headerOf(key string) string {
	if h, ok := fixedHeads[key]; ok {
		return h
	}
	stem, _ := strings.CutSuffix(key, "_ms") // ttft_p99_ms names the same statistic as ttft_p99
	for _, l := range statFamilies {
		if s, ok := strings.CutPrefix(stem, l.prefix); ok {
			if w, ok := statHeads[s]; ok {
				return l.head + " " + w + " (" + l.unit + ")"
			}
			if s, ok := strings.CutSuffix(s, "_se"); ok && statHeads[s] != "" {
				return l.head + " " + statHeads[s] + " SE (" + l.unit + ")" // standard error of the quantile
			}
		}
	}
	return wordsHeader(key)
}

// wordsHeader spells a snake_case key as words (keyWords for abbreviations), its
// first letter upper-case, with the first unit word not after "per" as the unit.
func wordsHeader(key string) string {
	if strings.IndexFunc(key, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') }) >= 0 {
		return key // not a snake_case name: an SQL expression (count(*)) prints as written
	}
	parts := strings.Split(key, "_")
	var words []string
	unit := ""
	for i, p := range parts {
		if u, ok := unitWords[p]; ok && unit == "" && i > 0 && parts[i-1] != "per" {
			unit = u
			continue
		}
		if w, ok := keyWords[p]; ok {
			p = w
		}
		if p != "" {
			words = append(words, p)
		}
	}
	if len(words) == 0 {
		return key
	}
	h := strings.Join(words, " ")
	if r := h[0]; r >= 'a' && r <= 'z' {
		h = string(r-'a'+'A') + h[1:]
	}
	if unit != "" {
		h += " (" + unit + ")"
	}
	return h
}

// finite reports whether v is not a NaN or infinite float.
func finite(v any) bool {
	f, ok := v.(float64)
	return !ok || !(math.IsNaN(f) || math.IsInf(f, 0))
}

// dropNonFinite replaces NaN and ±Inf values by NULL (printed as null, empty or
// "-" like any NULL: never NaN or Inf) and returns how many it replaced.
func dropNonFinite(data [][]any) int {
	n := 0
	for _, r := range data {
		for i, v := range r {
			if !finite(v) {
				r[i] = nil
				n++
			}
		}
	}
	return n
}

// formatValue renders one value; table output rounds floats to 3 decimals like
// aiconfigurator's reports, csv keeps full precision (shortest round trip). NULL
// and non-finite floats print as "-" (table) or "" (csv).
func formatValue(v any, table bool) string {
	if !finite(v) {
		v = nil
	}
	switch x := v.(type) {
	case nil:
		if table {
			return "-"
		}
		return ""
	case []byte:
		return string(x)
	case json.RawMessage:
		return string(x)
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case float64:
		if table {
			return strconv.FormatFloat(x, 'f', 3, 64)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x) // as json prints it
	}
	return fmt.Sprint(v)
}

// jsonValue encodes one value for json/jsonl: text as a string, non-finite
// floats as null, numbers exact.
func jsonValue(v any) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return json.Marshal(string(x))
	case float64:
		if !finite(x) {
			return []byte("null"), nil
		}
	}
	return json.Marshal(v)
}

// writeObject writes one row as a JSON object whose keys keep the column order;
// sep goes between members ("," for jsonl, ", " for json arrays, or a newline
// and indent for documents), open and close around them.
func writeObject(b *bytes.Buffer, cols []string, row []any, open, sep, close string) error {
	b.WriteString(open)
	for i, v := range row {
		if i > 0 {
			b.WriteString(sep)
		}
		k, _ := json.Marshal(cols[i])
		b.Write(k)
		b.WriteString(": ")
		enc, err := jsonValue(v)
		if err != nil {
			return fmt.Errorf("encode %s: %w", cols[i], err)
		}
		b.Write(enc)
	}
	b.WriteString(close)
	return nil
}

// tableBlock is how many rows a streamed table aligns at a time: a long stream
// (trace show) is printed in aligned blocks instead of held whole in memory.
const tableBlock = 4096

// rowWriter prints rows one at a time under column keys cols as format: an aligned
// table with headerOf headers, CSV with the keys as header, a JSON array of objects
// or one JSON object per line. Close ends the output.
type rowWriter struct {
	w      io.Writer
	format string
	cols   []string
	n      int
	csv    *csv.Writer
	tw     *tabwriter.Writer
	buf    bytes.Buffer
}

// newRowWriter starts the output (the header of table and csv).
func newRowWriter(w io.Writer, format string, cols []string) *rowWriter {
	r := &rowWriter{w: w, format: format, cols: cols}
	switch format {
	case formatCSV:
		r.csv = csv.NewWriter(w)
		r.csv.Write(cols)
	case formatJSON:
		r.buf.WriteString("[")
	case formatJSONL:
	default:
		r.tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		heads := make([]string, len(cols))
		for i, k := range cols {
			heads[i] = headerOf(k)
		}
		fmt.Fprintln(r.tw, strings.Join(heads, "\t")+"\t")
	}
	return r
}

// Row prints one row (values in column order).
func (r *rowWriter) Row(row []any) error {
	r.n++
	switch r.format {
	case formatCSV:
		rec := make([]string, len(row))
		for i, v := range row {
			rec[i] = formatValue(v, false)
		}
		if len(rec) == 1 && rec[0] == "" {
			// A lone empty field would be a blank line, which CSV readers skip:
			// quote it so the row stays a row.
			r.csv.Flush()
			if err := r.csv.Error(); err != nil {
				return err
			}
			_, err := io.WriteString(r.w, "\"\"\n")
			return err
		}
		return r.csv.Write(rec)
	case formatJSON, formatJSONL:
		var err error
		if r.format == formatJSONL {
			err = writeObject(&r.buf, r.cols, row, "{", ", ", "}\n")
		} else {
			if r.n > 1 {
				r.buf.WriteString(",")
			}
			err = writeObject(&r.buf, r.cols, row, "\n  {", ", ", "}")
		}
		if err != nil {
			return err
		}
		if r.buf.Len() < 1<<16 {
			return nil
		}
		_, err = r.w.Write(r.buf.Bytes())
		r.buf.Reset()
		return err
	default:
		rec := make([]string, len(row))
		for i, v := range row {
			rec[i] = formatValue(v, true)
		}
		if _, err := fmt.Fprintln(r.tw, strings.Join(rec, "\t")+"\t"); err != nil {
			return err
		}
		if r.n%tableBlock == 0 {
			return r.tw.Flush()
		}
		return nil
	}
}

// Close ends the output (the closing bracket of json) and flushes it.
func (r *rowWriter) Close() error {
	switch r.format {
	case formatCSV:
		r.csv.Flush()
		return r.csv.Error()
	case formatJSON, formatJSONL:
		if r.format == formatJSON {
			if r.n > 0 {
				r.buf.WriteString("\n")
			}
			r.buf.WriteString("]\n")
		}
		_, err := r.w.Write(r.buf.Bytes())
		r.buf.Reset()
		return err
	default:
		return r.tw.Flush()
	}
}

// writeRows prints rows under column keys cols as format (see rowWriter).
func writeRows(w io.Writer, format string, cols []string, data [][]any) error {
	rw := newRowWriter(w, format, cols)
	for _, r := range data {
		if err := rw.Row(r); err != nil {
			return err
		}
	}
	return rw.Close()
}

// writeDocument prints one record as an indented JSON object (keys in column
// order) — the json output of single-result commands such as eval and estimate.
func writeDocument(w io.Writer, cols []string, row []any) error {
	var b bytes.Buffer
	if err := writeObject(&b, cols, row, "{\n  ", ",\n  ", "\n}\n"); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// orderedFields flattens the JSON encoding of a struct (or any JSON object) into
// its keys in encoding order and their values (numbers as float64). Nested
// objects and arrays stay as their JSON text.
func orderedFields(v any) ([]string, []any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	var keys []string
	var vals []any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, fmt.Errorf("ordered fields: not a JSON object: %s", raw)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		var m json.RawMessage
		if err := dec.Decode(&m); err != nil {
			return nil, nil, err
		}
		keys = append(keys, t.(string))
		vals = append(vals, rawValue(m))
	}
	// JSON prints an integral float as an integer: restore the Go type so a table
	// rounds 1.0 to "1.000" like any float.
	fl := floatKeys(reflect.ValueOf(v), map[string]bool{})
	for i, k := range keys {
		if n, ok := vals[i].(int64); ok && fl[k] {
			vals[i] = float64(n)
		}
	}
	return keys, vals, nil
}

// floatKeys records in fl the top-level JSON keys of v whose Go value is a float
// (struct fields by their json tag, embedded structs flattened as encoding/json
// does, map entries by their dynamic value) and returns fl.
func floatKeys(v reflect.Value, fl map[string]bool) map[string]bool {
	v, ok := indirect(v)
	if !ok {
		return fl
	}
	isFloat := func(x reflect.Value) bool {
		x, ok := indirect(x)
		return ok && (x.Kind() == reflect.Float64 || x.Kind() == reflect.Float32)
	}
	switch v.Kind() {
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if it.Key().Kind() == reflect.String && isFloat(it.Value()) {
				fl[it.Key().String()] = true
			}
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if f.Anonymous && name == "" {
				floatKeys(v.Field(i), fl)
				continue
			}
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if isFloat(v.Field(i)) {
				fl[name] = true
			}
		}
	}
	return fl
}

// indirect follows pointers and interfaces to the value they hold; false at a nil.
func indirect(v reflect.Value) (reflect.Value, bool) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return v, false
		}
		v = v.Elem()
	}
	return v, true
}

// rawValue turns one JSON value into a row value: numbers to int64 or float64,
// strings, bools, null to nil, objects and arrays kept as their JSON text.
func rawValue(m json.RawMessage) any {
	var x any
	d := json.NewDecoder(bytes.NewReader(m))
	d.UseNumber()
	if err := d.Decode(&x); err != nil {
		return string(m)
	}
	switch y := x.(type) {
	case json.Number:
		if i, err := y.Int64(); err == nil {
			return i
		}
		f, _ := y.Float64()
		return f
	case string, bool, nil:
		return y
	}
	return json.RawMessage(m)
}

// columnOrder orders the keys of a queueing.Report.Columns map: the documented
// queueing.ColumnKeys order, each quantile's standard error (key_se) right after
// it, then any other key (limit_cycle) in name order.
func columnOrder(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	seen := map[string]bool{}
	for _, k := range queueing.ColumnKeys() {
		for _, k := range []string{k, k + "_se"} {
			if _, ok := m[k]; ok {
				keys = append(keys, k)
				seen[k] = true
			}
		}
	}
	rest := make([]string, 0, len(m)-len(keys))
	for k := range m {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(keys, rest...)
}

// writeEval prints eval's reports, one queueing.Report.Columns map per tier in
// tiers' order: json is one object (keyed by tier when there are several) with
// the keys in columnOrder; table, csv and jsonl print a row per tier under the
// union of the tiers' keys, with unstable and reason columns when some tier is
// unstable.
func writeEval(w io.Writer, format string, tiers []queueing.Tier, out map[string]any) error {
	unstableKeys := []string{"unstable", "reason"}
	anyUnstable := false
	all := map[string]any{} // the documented keys and every key of a stable tier: the row formats' columns
	for _, k := range queueing.ColumnKeys() {
		all[k] = nil
	}
	for _, t := range tiers {
		m := out[string(t)].(map[string]any)
		if m["unstable"] == true {
			anyUnstable = true
			continue
		}
		for k, v := range m {
			all[k] = v
		}
	}
	keys := columnOrder(all)
	row := func(m map[string]any, keys []string) []any {
		r := make([]any, len(keys))
		for i, k := range keys {
			r[i] = m[k]
		}
		return r
	}
	if format == formatJSON {
		var b bytes.Buffer
		for i, t := range tiers {
			m := out[string(t)].(map[string]any)
			ks := columnOrder(m)
			if m["unstable"] == true {
				ks = unstableKeys
			}
			var err error
			switch {
			case len(tiers) == 1:
				err = writeObject(&b, ks, row(m, ks), "{\n  ", ",\n  ", "\n}\n")
			default:
				open := ",\n  "
				if i == 0 {
					open = "{\n  "
				}
				name, _ := json.Marshal(string(t))
				b.WriteString(open)
				b.Write(name)
				err = writeObject(&b, ks, row(m, ks), ": {\n    ", ",\n    ", "\n  }")
			}
			if err != nil {
				return err
			}
		}
		if len(tiers) > 1 {
			b.WriteString("\n}\n")
		}
		_, err := w.Write(b.Bytes())
		return err
	}
	cols := keys
	if anyUnstable {
		cols = append(append([]string{}, keys...), unstableKeys...)
	}
	data := make([][]any, 0, len(tiers))
	for _, t := range tiers {
		m := out[string(t)].(map[string]any)
		if m["unstable"] == true {
			m = map[string]any{"queueing_tier": string(t), "unstable": true, "reason": m["reason"]}
		} else if anyUnstable {
			m["unstable"] = false
		}
		data = append(data, row(m, cols))
	}
	return writeRows(w, format, cols, data)
}

// writeRecord prints one result record v (a struct or JSON object; keys in its
// JSON encoding order) as format: json is an indented object, text "key: value"
// lines sorted by key, the other row formats a single row.
func writeRecord(w io.Writer, format string, v any) error {
	cols, row, err := orderedFields(v)
	if err != nil {
		return err
	}
	switch format {
	case formatJSON:
		return writeDocument(w, cols, row)
	case formatText:
		idx := make([]int, len(cols))
		for i := range idx {
			idx[i] = i
		}
		sort.Slice(idx, func(a, b int) bool { return cols[idx[a]] < cols[idx[b]] })
		var b bytes.Buffer
		for _, i := range idx {
			fmt.Fprintf(&b, "%s: %s\n", cols[i], formatValue(row[i], false))
		}
		_, err := w.Write(b.Bytes())
		return err
	}
	return writeRows(w, format, cols, [][]any{row})
}
