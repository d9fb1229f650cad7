package trace

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the parsers")

// dump renders requests and their summary canonically for the goldens.
func dump(t *testing.T, reqs []Request, hashBlock int) string {
	t.Helper()
	var b strings.Builder
	sb := NewStatsBuilder(hashBlock, 60e3, 0)
	for _, r := range reqs {
		fmt.Fprintf(&b, "%d %s %d %d %s %q %g\n", r.Line, fmtF(r.ArrivalMs), r.ISL, r.OSL, EncodeHashIDs(r.HashIDs), r.Session, r.ThinkMs)
		sb.Add(r)
	}
	s := sb.Stats()
	fmt.Fprintf(&b, "requests %d sessions %d first %s last %s buckets %v\n", s.Requests, s.Sessions, fmtF(s.FirstMs), fmtF(s.LastMs), s.Buckets)
	fmt.Fprintf(&b, "isl %+v\nosl %+v\n", s.ISL, s.OSL)
	fmt.Fprintf(&b, "reuse blocks %d/%d tokens %d/%d\n", s.ReusedBlocks, s.Blocks, s.ReusedTokens, s.Tokens)
	return b.String()
}

func fmtF(v float64) string { return fmt.Sprintf("%.4f", v) }

func collect(t *testing.T, f Format, path string) []Request {
	t.Helper()
	var out []Request
	emit := func(r Request) error { out = append(out, r); return nil }
	o := Options{File: filepath.Base(path), Seed: 1}
	var err error
	if f == ServeGen {
		err = ParseServeGen(context.Background(), path, o, emit)
	} else {
		var data []byte
		if data, err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
		err = Parse(context.Background(), bytes.NewReader(data), f, o, emit)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./trace -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the parser's output (go test ./trace -update rewrites it after a deliberate change)", path)
	}
}

// TestGolden: each loader on a committed slice of its sample trace.
func TestGolden(t *testing.T) {
	for _, c := range []struct {
		name string
		f    Format
		path string
		n    int
	}{
		{"mooncake", Mooncake, "testdata/mooncake_conversation_head.jsonl", 120},
		{"azure", Azure, "testdata/azure_code_head.csv", 300},
		{"servegen", ServeGen, "testdata/servegen", 0},
		{"jsonl", JSONL, "testdata/generic.jsonl", 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			reqs := collect(t, c.f, c.path)
			if c.n > 0 && len(reqs) != c.n {
				t.Fatalf("%d requests, want %d", len(reqs), c.n)
			}
			checkGolden(t, c.name, dump(t, reqs, DefaultHashBlock))
		})
	}
}

// TestServeGenDeterministic: the same seed draws the same stream; another seed another.
func TestServeGenDeterministic(t *testing.T) {
	a := dump(t, collect(t, ServeGen, "testdata/servegen"), 0)
	b := dump(t, collect(t, ServeGen, "testdata/servegen"), 0)
	if a != b {
		t.Fatal("two draws with seed 1 differ")
	}
	var other []Request
	if err := ParseServeGen(context.Background(), "testdata/servegen", Options{Seed: 2}, func(r Request) error {
		other = append(other, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if dump(t, other, 0) == a {
		t.Fatal("seeds 1 and 2 drew the same stream")
	}
}

// TestServeGenMoments: rate and cv of the drawn inter-arrivals follow the window
// (a Gamma window with rate 2/s, cv 3 over one long window).
func TestServeGenMoments(t *testing.T) {
	for _, pat := range []string{"Gamma", "Weibull", "Exponential"} {
		cv := 3.0
		if pat == "Exponential" {
			cv = 1
		}
		w := sgWindow{rate: 2, cv: cv, pattern: pat}
		gap, err := iatSampler(w)
		if err != nil {
			t.Fatal(err)
		}
		c := &sgClient{}
		c.rng = newRand(7)
		n := 200000
		var s, s2 float64
		for range n {
			x := gap(c.rng)
			s += x
			s2 += x * x
		}
		mean := s / float64(n)
		sd := math.Sqrt(s2/float64(n) - mean*mean)
		if math.Abs(mean-0.5) > 0.03 || math.Abs(sd/mean-cv) > 0.25*cv {
			t.Errorf("%s: mean %.4f (want 0.5), cv %.3f (want %v)", pat, mean, sd/mean, cv)
		}
	}
}

// TestRowErrors: a bad row is one error naming the file, the line and the field.
func TestRowErrors(t *testing.T) {
	moon := `{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}`
	for _, c := range []struct {
		f    Format
		in   string
		want string
	}{
		{Mooncake, moon + "\n" + `{"timestamp": 5, "input_length": 0, "output_length": 5, "hash_ids": []}`, "f: line 2: field input_length: 0: must be in 1..16777216"},
		{Mooncake, moon + "\n" + `{"timestamp": 5, "input_length": "x", "output_length": 5}`, `f: line 2: field input_length: string is not a valid int`},
		{Mooncake, `{"input_length": 5, "output_length": 5}`, "f: line 1: field timestamp: missing"},
		{Mooncake, `{"timestamp": -1, "input_length": 5, "output_length": 5}`, "f: line 1: field timestamp: -1: must be a finite time ≥ 0"},
		{Mooncake, `{"timestamp": 9, "input_length": 5, "output_length": 5}` + "\n\n" + moon, "f: line 3: field timestamp: 0 goes back in time (previous row 9): rows must be in arrival order"},
		{Mooncake, `{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1, 2]}`, "f: line 1: field hash_ids: 3 ids for 600 prompt tokens: at most 2 (one per 512 tokens)"},
		{Mooncake, `{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, -1]}`, "f: line 1: field hash_ids: id -1: ids must be ≥ 0"},
		{Mooncake, `not json`, "f: line 1: not a JSON object: invalid character 'o' in literal null (expecting 'u')"},
		{Mooncake, "\n\n", "f: no requests in the file"},
		{Azure, "TIMESTAMP,ContextTokens\n", `f: line 1: header "TIMESTAMP,ContextTokens": want "TIMESTAMP,ContextTokens,GeneratedTokens"`},
		{Azure, azureHeader + "\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:46,374\n", "f: line 3: 2 comma-separated fields: want 3 (TIMESTAMP,ContextTokens,GeneratedTokens)"},
		{Azure, azureHeader + "\n2023-11-16 18:15:46.6805900,374,x\n", `f: line 2: field GeneratedTokens: "x" is not an integer`},
		{Azure, azureHeader + "\n2023-11-16T18:15:46,374,3\n", `f: line 2: field TIMESTAMP: "2023-11-16T18:15:46": want YYYY-MM-DD HH:MM:SS.fffffff`},
		{Azure, azureHeader + "\n2023-11-16 18:15:46.5,374,3\n2023-11-16 18:15:46.4,374,3\n", "f: line 3: field TIMESTAMP: -100 goes back in time (previous row 0): rows must be in arrival order"},
		{Azure, azureHeader + "\n2023-11-16 18:15:46.5,374,0\n", "f: line 2: field GeneratedTokens: 0: must be in 1..16777216"},
		{JSONL, `{"arrival_ms": 0, "isl": 5, "osl": 1, "prompt": "hi"}`, "f: line 1: field prompt: unknown field (see docs/traces.md)"},
		{JSONL, `{"arrival_ms": 0, "isl": 5}`, "f: line 1: field osl: missing"},
		{JSONL, `{"arrival_ms": 0, "isl": 5, "osl": 1, "think_ms": 3}`, "f: line 1: field think_ms: set without session_id: think time belongs to a session's turn"},
		{JSONL, `{"arrival_ms": 0, "isl": 5, "osl": 1, "session_id": ""}`, "f: line 1: field session_id: empty: omit it for a request outside any session"},
		{JSONL, `{"arrival_ms": 0, "isl": 5, "osl": 1} {}`, "f: line 1: trailing data after the JSON object: one request per line"},
	} {
		err := Parse(context.Background(), strings.NewReader(c.in), c.f, Options{File: "f"}, func(Request) error { return nil })
		if err == nil || err.Error() != c.want {
			t.Errorf("%s %.50q:\n got %v\nwant %s", c.f, c.in, err, c.want)
		}
	}
}

// TestServeGenErrors: window rows and PMFs name the file, line (or window) and field.
func TestServeGenErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0,1,1,Gamma,1,1\n0,1,1,Gamma,1,1\n", "w: line 2: field window_start_s: 0: window starts must increase (previous 0)"},
		{"0,1,1,Pareto,1,1\n", `w: line 1: field pattern: "Pareto": want Gamma, Weibull, Exponential or empty`},
		{"0,-1,1,Gamma,1,1\n", `w: line 1: field rate_rps: "-1": want a finite number ≥ 0`},
		{"0,1,NaN,Gamma,1,1\n", `w: line 1: field cv: "NaN": want a finite number ≥ 0`},
		{"0,1,1,Gamma\n", "w: line 1: 4 comma-separated fields: want 6 (window_start_s,rate_rps,cv,pattern,arg1,arg2)"},
		{"0,1,0,Gamma,1,1\n", "w: line 1: field cv: 0: a Gamma window needs cv in 0.05..50"},
	} {
		_, err := parseServeGenWindows(strings.NewReader(c.in), "w")
		if err == nil || err.Error() != c.want {
			t.Errorf("%q:\n got %v\nwant %s", c.in, err, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"{1: 0.5, 0: 0.5}", `entry " 0: 0.5": tokens must be an integer in 1..16777216`},
		{"{1: 0.5, 2: -1}", `entry " 2: -1": probability must be a finite number ≥ 0`},
		{"{1: 0}", "probabilities sum to 0: want > 0"},
		{"[1]", `"[1]": want {tokens: probability, ...}`},
	} {
		_, err := ParsePMF(c.in)
		if err == nil || err.Error() != c.want {
			t.Errorf("%q:\n got %v\nwant %s", c.in, err, c.want)
		}
	}
	if _, err := ServeGenFiles("testdata/generic.jsonl"); err == nil || !strings.Contains(err.Error(), "a ServeGen input is a pool directory or a chunk-<client>-trace.csv") {
		t.Errorf("a non-chunk file: %v", err)
	}
}

// TestEmitErrorStops: an error from emit ends the parse with that error.
func TestEmitErrorStops(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	data, _ := os.ReadFile("testdata/mooncake_conversation_head.jsonl")
	err := Parse(context.Background(), bytes.NewReader(data), Mooncake, Options{}, func(Request) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Fatalf("err %v after %d rows, want stop after 3", err, n)
	}
}

func TestHashIDsRoundTrip(t *testing.T) {
	for _, ids := range [][]int64{{}, {0}, {1, 2, 3, 1 << 40}} {
		got, err := DecodeHashIDs(nil, EncodeHashIDs(ids))
		if err != nil || fmt.Sprint(got) != fmt.Sprint(ids) {
			t.Errorf("%v → %q → %v, %v", ids, EncodeHashIDs(ids), got, err)
		}
	}
	if got, _ := DecodeHashIDs(nil, ""); got != nil {
		t.Errorf(`"" decodes to %v, want nil`, got)
	}
}

// TestSamples parses the whole sample traces in ../shared (skipped when absent): the
// row counts PROVENANCE.md states, and the Mooncake conversation trace's own reuse.
func TestSamples(t *testing.T) {
	if testing.Short() {
		t.Skip("reads 5 MB of samples")
	}
	dir := "../../shared/data/traces"
	if _, err := os.Stat(dir); err != nil {
		t.Skip("no ../shared/data/traces")
	}
	for _, c := range []struct {
		f    Format
		path string
		n    int
	}{
		{Mooncake, "mooncake/conversation_trace.jsonl", 12031},
		{Mooncake, "mooncake/synthetic_trace.jsonl", 3993},
		{Azure, "azure_llm_2023/AzureLLMInferenceTrace_code.csv", 8819},
		{Azure, "azure_llm_2023/AzureLLMInferenceTrace_conv.csv", 19366},
	} {
		reqs := collect(t, c.f, filepath.Join(dir, c.path))
		if len(reqs) != c.n {
			t.Errorf("%s: %d requests, want %d", c.path, len(reqs), c.n)
		}
		if c.path == "mooncake/conversation_trace.jsonl" {
			sb := NewStatsBuilder(DefaultHashBlock, 0, 3.6e6)
			for _, r := range reqs {
				sb.Add(r)
			}
			s := sb.Stats()
			if s.ReusedBlocks != 105710 || s.Blocks != 288500 {
				t.Errorf("conversation reuse %d/%d blocks, want 105710/288500 (36.64 %%)", s.ReusedBlocks, s.Blocks)
			}
		}
	}
}
