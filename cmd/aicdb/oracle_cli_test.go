package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// TestOracleRunJSON: `aicdb oracle run --scenario FILE --format json` prints the issue's
// shape; TV1 of SCHEDULERS.md §8 is checked field by field.
func TestOracleRunJSON(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"aicdb", "oracle", "run", "--scenario", "testdata/oracle/tv1.json", "--show", "log", "--format", "json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var got struct {
		Passes []struct {
			Index      int             `json:"index"`
			StartMs    float64         `json:"start_ms"`
			EndMs      float64         `json:"end_ms"`
			Scheduled  json.RawMessage `json:"scheduled"`
			Preempted  []string        `json:"preempted"`
			FreeBlocks int             `json:"free_blocks"`
		} `json:"passes"`
		Requests []struct {
			ID           string    `json:"id"`
			TTFTMs       float64   `json:"ttft_ms"`
			TokenTimesMs []float64 `json:"token_times_ms"`
			FinishMs     float64   `json:"finish_ms"`
		} `json:"requests"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	wantSched := []string{`{"A":8}`, `{"A":2,"B":3}`, `{"A":1,"B":1}`, `{"A":1}`}
	wantFree := []int{98, 96, 96, 97}
	if len(got.Passes) != 4 {
		t.Fatalf("%d passes, want 4", len(got.Passes))
	}
	for i, p := range got.Passes {
		var sched bytes.Buffer
		if err := json.Compact(&sched, p.Scheduled); err != nil {
			t.Fatal(err)
		}
		if p.Index != i+1 || sched.String() != wantSched[i] || p.FreeBlocks != wantFree[i] || p.EndMs != float64(i+1) || p.Preempted == nil {
			t.Errorf("pass %d = %+v (scheduled %s), want scheduled %s free %d", i+1, p, sched.String(), wantSched[i], wantFree[i])
		}
	}
	if a := got.Requests[0]; a.ID != "A" || a.TTFTMs != 2 || a.FinishMs != 4 || len(a.TokenTimesMs) != 3 {
		t.Errorf("request A = %+v", a)
	}
}

// TestOracleRunBadScenario: an unknown field is a user error (exit 1) naming it.
func TestOracleRunBadScenario(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"aicdb", "oracle", "run", "--scenario", "testdata/oracle/unknown_field.json"}, &out, &errb)
	if code != exitUser || !strings.Contains(errb.String(), "gpu_memory_utilization") {
		t.Fatalf("exit %d, stderr %q: want exit 1 naming gpu_memory_utilization", code, errb.String())
	}
	code = run(context.Background(), []string{"aicdb", "oracle", "run", "--scenario", "testdata/oracle/missing.json"}, &out, &errb)
	if code != exitUser {
		t.Fatalf("missing file: exit %d, want 1", code)
	}
}

// TestOracleValidate: `aicdb oracle validate --family` prints the residual table for the
// selected families and succeeds when they pass.
func TestOracleValidate(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"aicdb", "oracle", "validate", "--family", "vllm/c8 isl2048"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errb.String(), out.String())
	}
	if !strings.Contains(out.String(), "ttft_p99") || !strings.Contains(out.String(), "vllm/c8 isl2048 osl256 b8192") {
		t.Fatalf("no residual table:\n%s", out.String())
	}
	code = run(context.Background(), []string{"aicdb", "oracle", "validate", "--family", "no-such-family"}, &out, &errb)
	if code != exitUser {
		t.Fatalf("unknown family: exit %d, want 1", code)
	}
}

// TestOracleValidateSuitesAndFormats: --suite kv runs the KV families; csv/json
// print one row per family and metric with both sides' values; bad --suite, a
// replay suite without --traces and --family matching nothing are one-line errors.
func TestOracleValidateSuitesAndFormats(t *testing.T) {
	runV := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"aicdb", "oracle", "validate"}, args...), &out, &errb)
		return code, out.String(), errb.String()
	}
	fam := "vllm/c32 isl2048 osl256 kv10x2048 preemption · burst"
	code, out, errs := runV("--suite", "kv", "--family", fam, "--format", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil {
		t.Fatalf("kv json: exit %d %v\n%s%s", code, err, out, errs)
	}
	if len(rows) != 11 { // the 11 gated metrics of one family
		t.Fatalf("kv json: %d rows, want 11:\n%s", len(rows), out)
	}
	for _, r := range rows {
		if r["suite"] != "kv" || r["family"] != fam || r["verdict"] != "pass" {
			t.Fatalf("kv json row %v", r)
		}
		// The printed residual is the gate's, bit for bit: 0 when the two sides agree,
		// else (model − oracle)/oracle (a passing row has a finite one, so oracle ≠ 0
		// unless model = oracle). JSON round-trips float64 exactly.
		m, o, res := r["model"].(float64), r["oracle"].(float64), r["residual"].(float64)
		want := 0.0
		if m != o {
			want = (m - o) / o
		}
		if res != want || math.IsInf(want, 0) || math.IsNaN(want) {
			t.Fatalf("%s: residual %v, want %v from model %v, oracle %v", r["metric"], res, want, m, o)
		}
	}
	code, out, _ = runV("--suite", "kv", "--family", fam, "--format", "csv")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 12 ||
		lines[0] != "suite,family,metric,model,oracle,residual,tolerance,verdict,known_failing,error" {
		t.Fatalf("kv csv: exit %d\n%s", code, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--suite", "nope"}, "aicdb: --suite \"nope\": must be agg, kv, finite, disagg, replay or all\n"},
		{[]string{"--suite", "replay"}, "aicdb: oracle validate --suite replay: the replay suite needs --traces DIR (the sample traces folder, shared/data/traces)\n"},
		{[]string{"--suite", "kv", "--family", "nothing-like-this"}, "aicdb: --family \"nothing-like-this\": matches no family of suite kv; run without it to list them all\n"},
		{[]string{"--format", "xml"}, "aicdb: --format \"xml\": use table, csv, json or jsonl\n"},
	} {
		if code, _, errs := runV(c.args...); code != exitUser || errs != c.want {
			t.Errorf("%v: exit %d\n got %q\nwant %q", c.args, code, errs, c.want)
		}
	}
}
