package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestOracleRunJSON: `aicdb oracle run --scenario FILE --format json` prints the issue's
// shape; TV1 of SCHEDULERS.md §8 is checked field by field.
func TestOracleRunJSON(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"aicdb", "oracle", "run", "--scenario", "testdata/oracle/tv1.json", "--format", "json"}, &out, &errb)
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
