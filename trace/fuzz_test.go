package trace

import (
	"bytes"
	"context"
	"math"
	"os"
	"strings"
	"testing"
)

// fuzzRows parses data as format f and checks every emitted request's invariants.
func fuzzRows(t *testing.T, f Format, data []byte) {
	prev := -1.0
	_ = Parse(context.Background(), bytes.NewReader(data), f, Options{File: "fuzz"}, func(r Request) error {
		if math.IsNaN(r.ArrivalMs) || math.IsInf(r.ArrivalMs, 0) || r.ArrivalMs < 0 || r.ArrivalMs < prev {
			t.Fatalf("arrival %v after %v", r.ArrivalMs, prev)
		}
		if r.ISL < 1 || r.ISL > MaxTokens || r.OSL < 1 || r.OSL > MaxTokens {
			t.Fatalf("isl %d osl %d", r.ISL, r.OSL)
		}
		if len(r.HashIDs) > (r.ISL+DefaultHashBlock-1)/DefaultHashBlock {
			t.Fatalf("%d hash ids for isl %d", len(r.HashIDs), r.ISL)
		}
		if r.Line < 1 || math.IsNaN(r.ThinkMs) || r.ThinkMs < 0 {
			t.Fatalf("line %d think %v", r.Line, r.ThinkMs)
		}
		prev = r.ArrivalMs
		return nil
	})
}

func seedFile(f *testing.F, path string, maxLines int) {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	f.Add([]byte(strings.Join(lines[:min(maxLines, len(lines))], "")))
}

func FuzzMooncake(f *testing.F) {
	seedFile(f, "testdata/mooncake_conversation_head.jsonl", 3)
	f.Add([]byte(`{"timestamp": 1e300, "input_length": 1, "output_length": 1, "hash_ids": null}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRows(t, Mooncake, data) })
}

func FuzzAzure(f *testing.F) {
	seedFile(f, "testdata/azure_code_head.csv", 4)
	f.Add([]byte(azureHeader + "\n9999-12-31 23:59:59.9999999,1,1\n"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRows(t, Azure, data) })
}

func FuzzJSONL(f *testing.F) {
	seedFile(f, "testdata/generic.jsonl", 5)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRows(t, JSONL, data) })
}

func FuzzServeGenWindows(f *testing.F) {
	seedFile(f, "testdata/servegen/chunk-2-trace.csv", 40)
	f.Fuzz(func(t *testing.T, data []byte) {
		ws, err := parseServeGenWindows(bytes.NewReader(data), "fuzz")
		if err != nil {
			return
		}
		for i, w := range ws {
			if i > 0 && w.startS <= ws[i-1].startS || !(w.rate >= 0) || !(w.cv >= 0) {
				t.Fatalf("window %d: %+v", i, w)
			}
			if w.rate > 0 {
				if _, err := iatSampler(w); err != nil {
					t.Fatalf("accepted window has no sampler: %v", err)
				}
			}
		}
	})
}

func FuzzPMF(f *testing.F) {
	f.Add("{45: 0.25, 46: 0.75}")
	f.Add("{}")
	f.Add("{1: 1e-300, 2: 1e-300}")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePMF(s)
		if err != nil || len(p.values) == 0 {
			return
		}
		r := newRand(1)
		for range 8 {
			if v := p.draw(r); v < 1 || v > MaxTokens {
				t.Fatalf("drew %d from %q", v, s)
			}
		}
		for i := 1; i < len(p.cdf); i++ {
			if !(p.cdf[i] >= p.cdf[i-1]) || math.IsNaN(p.cdf[i]) {
				t.Fatalf("cdf not monotone: %v", p.cdf)
			}
		}
	})
}
