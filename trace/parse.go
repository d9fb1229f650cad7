package trace

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Options are the per-import knobs of the parsers.
type Options struct {
	// File names the input in error messages.
	File string
	// HashBlock is the number of prompt tokens one hash id covers (Mooncake: 512).
	HashBlock int
	// Seed draws ServeGen's arrivals and lengths (other formats ignore it).
	Seed uint64
}

// DefaultHashBlock is Mooncake's block size: one hash id per 512 prompt tokens.
const DefaultHashBlock = 512

// MaxTokens bounds isl and osl: longer is a corrupt row, not a request.
const MaxTokens = 1 << 24

// maxLine bounds one line of a trace (a Mooncake line of a 16 M-token prompt is ~300 KB).
const maxLine = 64 << 20

// Parse streams the requests of a row-based trace (mooncake, azure, jsonl) to emit, in
// file order. It stops at the first bad row with a *RowError, or at the first error
// emit returns. ServeGen pools are directories: use ParseServeGen.
func Parse(ctx context.Context, r io.Reader, f Format, o Options, emit func(Request) error) error {
	if o.HashBlock <= 0 {
		o.HashBlock = DefaultHashBlock
	}
	p := lineParser{o: o, emit: emit}
	switch f {
	case Mooncake:
		return p.run(ctx, r, p.mooncake)
	case Azure:
		return p.run(ctx, r, p.azure)
	case JSONL:
		return p.run(ctx, r, p.jsonl)
	case ServeGen:
		return errors.New("servegen pools are directories of chunk files: use ParseServeGen")
	default:
		return fmt.Errorf("format %q: must be one of mooncake, azure, servegen, jsonl", f)
	}
}

type lineParser struct {
	o      Options
	emit   func(Request) error
	line   int
	prev   float64
	n      int
	azure0 time.Time
}

func (p *lineParser) fail(field, format string, args ...any) error {
	return &RowError{File: p.o.File, Line: p.line, Field: field, Msg: fmt.Sprintf(format, args...)}
}

func (p *lineParser) run(ctx context.Context, r io.Reader, row func([]byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	for sc.Scan() {
		p.line++
		if p.line&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if err := row(b); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &RowError{File: p.o.File, Line: p.line + 1, Msg: fmt.Sprintf("line longer than %d bytes", maxLine)}
		}
		return fmt.Errorf("%s: read: %w", p.o.File, err)
	}
	if p.n == 0 {
		return fmt.Errorf("%s: no requests in the file", p.o.File)
	}
	return nil
}

// accept checks the order and sizes common to every format and emits r.
func (p *lineParser) accept(r Request, tsField, islField, oslField string) error {
	if p.n > 0 && r.ArrivalMs < p.prev {
		return p.fail(tsField, "%v goes back in time (previous row %v): rows must be in arrival order", r.ArrivalMs, p.prev)
	}
	if math.IsNaN(r.ArrivalMs) || math.IsInf(r.ArrivalMs, 0) || r.ArrivalMs < 0 || r.ArrivalMs > 1e15 {
		return p.fail(tsField, "%v: must be a finite time ≥ 0", r.ArrivalMs)
	}
	if r.ISL <= 0 || r.ISL > MaxTokens {
		return p.fail(islField, "%d: must be in 1..%d", r.ISL, MaxTokens)
	}
	if r.OSL <= 0 || r.OSL > MaxTokens {
		return p.fail(oslField, "%d: must be in 1..%d", r.OSL, MaxTokens)
	}
	if r.HashIDs != nil {
		if max := (r.ISL + p.o.HashBlock - 1) / p.o.HashBlock; len(r.HashIDs) > max {
			return p.fail("hash_ids", "%d ids for %d prompt tokens: at most %d (one per %d tokens)", len(r.HashIDs), r.ISL, max, p.o.HashBlock)
		}
		for _, h := range r.HashIDs {
			if h < 0 {
				return p.fail("hash_ids", "id %d: ids must be ≥ 0", h)
			}
		}
	}
	r.Line = p.line
	p.prev = r.ArrivalMs
	p.n++
	return p.emit(r)
}

// jsonField explains a json decoding error by the field it concerns.
func (p *lineParser) jsonErr(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return p.fail(te.Field, "%s is not a valid %s", te.Value, te.Type)
	}
	return p.fail("", "not a JSON object: %v", err)
}

// unknownKey returns the first key (in sorted order) of the JSON object b that is
// not a field of the generic JSONL format (jsonlRow's tags, matched ignoring case
// as encoding/json matches them). It runs only on a line whose strict decoding
// failed, so the error names the field without reading encoding/json's error text.
func unknownKey(b []byte) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return "", false
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		switch strings.ToLower(k) {
		case "arrival_ms", "isl", "osl", "hash_ids", "session_id", "think_ms":
		default:
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return "", false
	}
	sort.Strings(keys)
	return keys[0], true
}

type mooncakeRow struct {
	Timestamp    *float64 `json:"timestamp"`
	InputLength  *int     `json:"input_length"`
	OutputLength *int     `json:"output_length"`
	HashIDs      []int64  `json:"hash_ids"`
}

// mooncake: {"timestamp": ms, "input_length": n, "output_length": n, "hash_ids": [...]}.
// Unknown fields are ignored (later Mooncake traces add some).
func (p *lineParser) mooncake(b []byte) error {
	var m mooncakeRow
	if err := json.Unmarshal(b, &m); err != nil {
		return p.jsonErr(err)
	}
	switch {
	case m.Timestamp == nil:
		return p.fail("timestamp", "missing")
	case m.InputLength == nil:
		return p.fail("input_length", "missing")
	case m.OutputLength == nil:
		return p.fail("output_length", "missing")
	}
	ids := m.HashIDs
	if ids == nil {
		ids = []int64{}
	}
	return p.accept(Request{ArrivalMs: *m.Timestamp, ISL: *m.InputLength, OSL: *m.OutputLength, HashIDs: ids},
		"timestamp", "input_length", "output_length")
}

type jsonlRow struct {
	ArrivalMs *float64 `json:"arrival_ms"`
	ISL       *int     `json:"isl"`
	OSL       *int     `json:"osl"`
	HashIDs   []int64  `json:"hash_ids"`
	SessionID *string  `json:"session_id"`
	ThinkMs   *float64 `json:"think_ms"`
}

// jsonl: aicdb's generic format (docs/traces.md); unknown fields are errors.
func (p *lineParser) jsonl(b []byte) error {
	var m jsonlRow
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		if k, ok := unknownKey(b); ok {
			return p.fail(k, "unknown field (see docs/traces.md)")
		}
		return p.jsonErr(err)
	}
	if dec.More() {
		return p.fail("", "trailing data after the JSON object: one request per line")
	}
	switch {
	case m.ArrivalMs == nil:
		return p.fail("arrival_ms", "missing")
	case m.ISL == nil:
		return p.fail("isl", "missing")
	case m.OSL == nil:
		return p.fail("osl", "missing")
	}
	r := Request{ArrivalMs: *m.ArrivalMs, ISL: *m.ISL, OSL: *m.OSL, HashIDs: m.HashIDs}
	if m.SessionID != nil {
		if *m.SessionID == "" {
			return p.fail("session_id", "empty: omit it for a request outside any session")
		}
		r.Session = *m.SessionID
	}
	if m.ThinkMs != nil {
		if *m.ThinkMs < 0 || *m.ThinkMs > 1e15 {
			return p.fail("think_ms", "%v: must be ≥ 0", *m.ThinkMs)
		}
		if m.SessionID == nil {
			return p.fail("think_ms", "set without session_id: think time belongs to a session's turn")
		}
		r.ThinkMs = *m.ThinkMs
	}
	return p.accept(r, "arrival_ms", "isl", "osl")
}

// azureHeader is the Azure LLM inference trace 2023 header.
const azureHeader = "TIMESTAMP,ContextTokens,GeneratedTokens"

// azureTime is the TIMESTAMP layout (7 fractional digits in the data; fewer accepted).
const azureTime = "2006-01-02 15:04:05.9999999"

// azure: header, then TIMESTAMP,ContextTokens,GeneratedTokens rows; arrivals are
// measured from the first row.
func (p *lineParser) azure(b []byte) error {
	if p.line == 1 {
		if string(b) != azureHeader {
			return p.fail("", "header %.60q: want %q", b, azureHeader)
		}
		return nil
	}
	s := string(b)
	f := strings.Split(s, ",")
	if len(f) != 3 {
		return p.fail("", "%d comma-separated fields: want 3 (%s)", len(f), azureHeader)
	}
	t, err := time.Parse(azureTime, f[0])
	if err != nil {
		return p.fail("TIMESTAMP", "%.40q: want YYYY-MM-DD HH:MM:SS.fffffff", f[0])
	}
	if p.n == 0 {
		p.azure0 = t
	}
	isl, err := strconv.Atoi(f[1])
	if err != nil {
		return p.fail("ContextTokens", "%.40q is not an integer", f[1])
	}
	osl, err := strconv.Atoi(f[2])
	if err != nil {
		return p.fail("GeneratedTokens", "%.40q is not an integer", f[2])
	}
	d := t.Sub(p.azure0)
	return p.accept(Request{ArrivalMs: float64(d.Nanoseconds()) / 1e6, ISL: isl, OSL: osl},
		"TIMESTAMP", "ContextTokens", "GeneratedTokens")
}

// Sniff guesses the format from a file's first non-empty line (ServeGen pools are
// recognised by the caller from the path: a directory or a chunk-N-trace.csv).
func Sniff(first []byte) (Format, bool) {
	b := bytes.TrimSpace(first)
	switch {
	case bytes.HasPrefix(b, []byte("TIMESTAMP,")):
		return Azure, true
	case bytes.HasPrefix(b, []byte("{")) && bytes.Contains(b, []byte(`"input_length"`)):
		return Mooncake, true
	case bytes.HasPrefix(b, []byte("{")) && bytes.Contains(b, []byte(`"arrival_ms"`)):
		return JSONL, true
	}
	return "", false
}
