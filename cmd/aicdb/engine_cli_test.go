package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
)

// TestOracleRunEngineFlags: --engine-config and --engine-profile replace the
// scenario's scheduling knobs (TV1 with budget 16 schedules both prompts in the
// first pass, where budget 8 split them); without them the scenario runs as
// written; a bad profile is a one-line user error.
func TestOracleRunEngineFlags(t *testing.T) {
	first := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"aicdb", "oracle", "run", "--scenario", "testdata/oracle/tv1.json"}, args...), &out, &errb)
		var got struct {
			Passes []struct {
				Scheduled json.RawMessage `json:"scheduled"`
			} `json:"passes"`
		}
		if code != 0 {
			return "", errb.String(), code
		}
		if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got.Passes) == 0 {
			t.Fatalf("output: %v\n%s", err, out.String())
		}
		var c bytes.Buffer
		if err := json.Compact(&c, got.Passes[0].Scheduled); err != nil {
			t.Fatal(err)
		}
		return c.String(), errb.String(), code
	}
	if s, _, _ := first(); s != `{"A":8}` {
		t.Errorf("as written: first pass %s", s)
	}
	s, errs, _ := first("--engine-config", "testdata/engine/vllm_budget16.args")
	if s != `{"A":10,"B":3}` || errs != "aicdb: engine config: ignored (no effect on scheduling): port\n" {
		t.Errorf("config: first pass %s, stderr %q", s, errs)
	}
	if s, _, _ := first("--engine-profile", "aiconfigurator"); s != `{"A":10,"B":3}` {
		t.Errorf("profile: first pass %s", s)
	}
	if _, errs, code := first("--engine-profile", "tuned"); code != 1 || errs != "aicdb: --engine-profile \"tuned\": unknown; use defaults or aiconfigurator\n" {
		t.Errorf("bad profile: exit %d, %q", code, errs)
	}
	if _, errs, code := first("--engine-config", "testdata/engine/trtllm_chunked.yaml"); code != 1 ||
		errs != "aicdb: --engine-config: engine config testdata/engine/trtllm_chunked.yaml: line 2: key backend: not a vllm key aicdb knows, so it cannot tell whether it changes scheduling; remove it (harmless keys such as ports, logging and the model path are ignored)\n" {
		t.Errorf("wrong backend's file: exit %d, %q", code, errs)
	}
}
