package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestWriteRowsProperties: for any rows of text, integers, bools, NULLs and floats
// (NaN and ±Inf included), every format prints no NaN or Inf; json parses to one
// object per row with the keys in column order and exact floats; jsonl has one
// object a line; csv reads back to the same number of records and columns with
// exact floats; a table has a line per row plus the header, floats at 3 decimals.
func TestWriteRowsProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ncol := rapid.IntRange(1, 5).Draw(t, "ncol")
		cols := make([]string, ncol)
		for i := range cols {
			cols[i] = "c" + strconv.Itoa(i) + "_ms"
		}
		value := rapid.OneOf(
			rapid.Just[any](nil),
			rapid.Map(rapid.Int64(), func(v int64) any { return v }),
			rapid.Map(rapid.Bool(), func(v bool) any { return v }),
			rapid.Map(rapid.StringMatching(`[a-z ,"]{0,6}`), func(v string) any { return v }),
			rapid.Map(rapid.Float64(), func(v float64) any { return v }),
			rapid.SampledFrom([]any{math.NaN(), math.Inf(1), math.Inf(-1), 0.1 + 0.2, 1e300}),
		)
		nrow := rapid.IntRange(0, 6).Draw(t, "nrow")
		data := make([][]any, nrow)
		for i := range data {
			data[i] = make([]any, ncol)
			for j := range data[i] {
				data[i][j] = value.Draw(t, "v")
			}
		}
		out := map[string]string{}
		for _, f := range rowFormats {
			var b bytes.Buffer
			if err := writeRows(&b, f, cols, data); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out[f] = b.String()
			// No format prints NaN or Inf (text cells cannot contain them: [a-z ,"] only lower case).
			if strings.Contains(out[f], "NaN") || strings.Contains(out[f], "Inf") {
				t.Fatalf("%s prints NaN/Inf:\n%s", f, out[f])
			}
		}
		var arr []map[string]any
		if err := json.Unmarshal([]byte(out[formatJSON]), &arr); err != nil || len(arr) != nrow {
			t.Fatalf("json: %v, %d objects for %d rows:\n%s", err, len(arr), nrow, out[formatJSON])
		}
		dec := json.NewDecoder(strings.NewReader(out[formatJSON]))
		if _, err := dec.Token(); err != nil { // [
			t.Fatalf("json: %v", err)
		}
		for dec.More() {
			if keys := objectKeys(t, dec); !slices.Equal(keys, cols) {
				t.Fatalf("json object keys %v, want the columns in order %v", keys, cols)
			}
		}
		lines := strings.SplitAfter(out[formatJSONL], "\n")
		if last := lines[len(lines)-1]; last != "" || len(lines)-1 != nrow {
			t.Fatalf("jsonl: %d lines (trailing %q) for %d rows", len(lines)-1, last, nrow)
		}
		for _, l := range lines[:nrow] {
			dec := json.NewDecoder(strings.NewReader(l))
			if keys := objectKeys(t, dec); !slices.Equal(keys, cols) || dec.More() {
				t.Fatalf("jsonl line %q: keys %v, want one object with the columns in order %v", l, keys, cols)
			}
		}
		recs, err := csv.NewReader(strings.NewReader(out[formatCSV])).ReadAll()
		if err != nil || len(recs) != nrow+1 {
			t.Fatalf("csv: %v, %d records for %d rows", err, len(recs), nrow)
		}
		for i, r := range data {
			for j, v := range r {
				f, ok := v.(float64)
				if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
					continue
				}
				if g, err := strconv.ParseFloat(recs[i+1][j], 64); err != nil || g != f {
					t.Fatalf("csv cell %q is not exactly %v", recs[i+1][j], f)
				}
				if g, ok := arr[i][cols[j]].(float64); !ok || g != f {
					t.Fatalf("json %s = %v, want exactly %v", cols[j], arr[i][cols[j]], f)
				}
				if !strings.Contains(out[formatTable], strconv.FormatFloat(f, 'f', 3, 64)) {
					t.Fatalf("table lacks %v at 3 decimals:\n%s", f, out[formatTable])
				}
			}
		}
		if n := strings.Count(out[formatTable], "\n"); n != nrow+1 {
			t.Fatalf("table: %d lines for %d rows", n, nrow)
		}
	})
}

// objectKeys reads one JSON object of scalar values from dec and returns its keys
// in the order written.
func objectKeys(t *rapid.T, dec *json.Decoder) []string {
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("want an object, got %v (%v)", tok, err)
	}
	var keys []string
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatalf("object key: %v", err)
		}
		keys = append(keys, k.(string))
		if _, err := dec.Token(); err != nil {
			t.Fatalf("value of %v: %v", k, err)
		}
	}
	if _, err := dec.Token(); err != nil { // }
		t.Fatalf("object end: %v", err)
	}
	return keys
}
