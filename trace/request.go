package trace

import (
	"fmt"
	"strconv"
	"strings"
)

// Request is one request of a trace. Times are milliseconds from the trace's origin
// (Mooncake: its own timestamps; Azure: the first row; ServeGen: window 0).
type Request struct {
	// Line is the 1-based source line the request came from (0 for ServeGen, whose
	// requests are drawn from fitted distributions, not read from rows).
	Line      int
	ArrivalMs float64
	ISL       int
	OSL       int
	// HashIDs names the prompt's prefix blocks (HashBlock tokens each, the last one
	// partial): equal ids at equal positions are shareable KV. Nil when unknown.
	HashIDs []int64
	// Session groups the turns of one conversation (generic JSONL only); "" = none.
	Session string
	// ThinkMs is the client's think time before this turn (generic JSONL only).
	ThinkMs float64
}

// Format names a trace file format.
type Format string

// The supported formats.
const (
	Mooncake Format = "mooncake"
	Azure    Format = "azure"
	ServeGen Format = "servegen"
	JSONL    Format = "jsonl"
)

// Formats lists every format, in the order the CLI documents them.
var Formats = []Format{Mooncake, Azure, ServeGen, JSONL}

// ParseFormat checks a --format value.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("format %q: must be one of mooncake, azure, servegen, jsonl", s)
}

// RowError is a bad row: the file, the 1-based line, the field and what is wrong.
type RowError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *RowError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: line %d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: line %d: field %s: %s", e.File, e.Line, e.Field, e.Msg)
}

// EncodeHashIDs writes ids as a JSON array ("[1,2,3]"); nil → "".
func EncodeHashIDs(ids []int64) string {
	if ids == nil {
		return ""
	}
	var b strings.Builder
	b.Grow(len(ids) * 6)
	b.WriteByte('[')
	for i, h := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(h, 10))
	}
	b.WriteByte(']')
	return b.String()
}

// DecodeHashIDs reads what EncodeHashIDs wrote, appending to dst[:0]; "" → nil.
func DecodeHashIDs(dst []int64, s string) ([]int64, error) {
	if s == "" {
		return nil, nil
	}
	if len(s) < 2 || s[0] != '[' || s[len(s)-1] != ']' {
		return nil, fmt.Errorf("hash ids %.40q: not a JSON array of integers", s)
	}
	dst = dst[:0]
	body := s[1 : len(s)-1]
	if strings.TrimSpace(body) == "" {
		return dst, nil
	}
	for len(body) > 0 {
		i := strings.IndexByte(body, ',')
		tok := body
		if i >= 0 {
			tok, body = body[:i], body[i+1:]
		} else {
			body = ""
		}
		v, err := strconv.ParseInt(strings.TrimSpace(tok), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("hash ids %.40q: %q is not an integer", s, tok)
		}
		dst = append(dst, v)
	}
	return dst, nil
}
