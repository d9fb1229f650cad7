package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestOracleRunEngineFlags: --engine-config and --engine-profile replace the
// scenario's scheduling knobs (TV1 with budget 16 schedules both prompts in the
// first pass, where budget 8 split them); without them the scenario runs as
// written; a bad profile is a one-line user error.
func TestOracleRunEngineFlags(t *testing.T) {
	first := func(args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"aicdb", "oracle", "run", "--scenario", "testdata/oracle/tv1.json", "--show", "log", "--format", "json"}, args...), &out, &errb)
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

// TestDeployCLI: rows of an aiconfigurator sweep deploy as recorded (agg and
// disagg, cli and yaml, flag before or after ROWID), a defaults-profile row
// deploys its original-rule engine, and bad refs are one-line user errors.
func TestDeployCLI(t *testing.T) {
	db := syntheticDB(t)
	base := []string{"sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--total-gpus", "8", "--isl", "4000",
		"--osl", "500", "--tp", "2", "--batch", "8", "--ctx-tokens", "4000"}
	if code, out, errs := cliRun(t, db, append(base, "--backend", "vllm", "--engine-profile", "defaults")...); code != 0 {
		t.Fatalf("sweep: %d %s %s", code, out, errs)
	}
	if code, out, errs := cliRun(t, db, append(base, "--backend", "trtllm", "--mode", "all", "--decode-batch", "16")...); code != 0 {
		t.Fatalf("sweep: %d %s %s", code, out, errs)
	}
	check := func(name string, args ...string) {
		t.Helper()
		code, out, errs := cliRun(t, db, append([]string{"deploy"}, args...)...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errs)
		}
		want := golden(t, filepath.Join("testdata", "deploy", name+".txt"), out, *updateEval, "-update-eval")
		if want != nil && string(want) != out {
			t.Errorf("%s (-update-eval rewrites):\n%s", name, out)
		}
	}
	check("vllm_defaults_cli", "1")
	check("trtllm_agg_cli", "2")
	check("trtllm_agg_yaml", "2", "--backend-format", "yaml")
	check("trtllm_disagg_yaml", "--backend-format=yaml", "3")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"99"}, "aicdb: deploy row 99: no such operating point; list rows with aicdb query\n"},
		{[]string{"1", "--backend-format", "toml"}, "aicdb: --backend-format \"toml\": unknown; use cli or yaml\n"},
		{[]string{}, "aicdb: deploy: give exactly one ROWID (a row id or key prefix); e.g. aicdb deploy 42\n"},
		{[]string{"x"}, "aicdb: row \"x\": want a row id (a positive integer) or a key prefix of at least 6 hex digits\n"},
	} {
		code, _, errs := cliRun(t, db, append([]string{"deploy"}, c.args...)...)
		if code != 1 || errs != c.want {
			t.Errorf("%v: exit %d %q, want %q", c.args, code, errs, c.want)
		}
	}
}

// TestSweepEngineFlagsCLI: a sweep records its profile and config file in the
// sweeps table and on every row, lists the file's ignored keys on stderr, and
// refuses a bad profile or a file of the wrong engine before evaluating anything.
func TestSweepEngineFlagsCLI(t *testing.T) {
	db := syntheticDB(t)
	args := []string{"sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--total-gpus", "8",
		"--isl", "4000", "--osl", "500", "--tp", "2", "--batch", "8,16", "--ctx-tokens", "4000", "--quiet"}
	code, out, errs := cliRun(t, db, append(args, "--engine-config", "testdata/engine/vllm_budget16.args")...)
	if code != 0 || !strings.Contains(errs, "aicdb: engine config: ignored (no effect on scheduling): port\n") {
		t.Fatalf("sweep: exit %d out %q err %q", code, out, errs)
	}
	code, out, _ = cliRun(t, db, "query", "--format", "csv",
		"select engine_profile, json_extract(engine_config, '$.engine.max_num_batched_tokens'), max_num_batched_tokens, max_num_seqs from points order by batch")
	if want := "aiconfigurator+config,16,16,8\naiconfigurator+config,16,16,16\n"; code != 0 || !strings.HasSuffix(out, want) {
		t.Errorf("rows: exit %d\n%s\nwant suffix\n%s", code, out, want)
	}
	code, out, _ = cliRun(t, db, "query", "--format", "csv",
		"select json_extract(arguments, '$.engine_profile'), json_extract(arguments, '$.engine_config.settings[0].key') from sweeps")
	if code != 0 || !strings.HasSuffix(out, "aiconfigurator,max_num_batched_tokens\n") {
		t.Errorf("sweeps: exit %d\n%s", code, out)
	}
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--engine-profile", "tuned"}, "aicdb: --engine-profile \"tuned\": unknown; use defaults or aiconfigurator\n"},
		{[]string{"--engine-config", "testdata/engine/trtllm_chunked.yaml"}, "aicdb: --engine-config: engine config testdata/engine/trtllm_chunked.yaml: line 2: key backend: not a vllm key aicdb knows, so it cannot tell whether it changes scheduling; remove it (harmless keys such as ports, logging and the model path are ignored)\n"},
		{[]string{"--engine-config", "testdata/engine/missing.yaml"}, "aicdb: --engine-config: engine config testdata/engine/missing.yaml: open testdata/engine/missing.yaml: no such file or directory\n"},
		{[]string{"--engine-config", "testdata/engine/vllm_max_len_4096.args"}, "aicdb: --engine-config testdata/engine/vllm_max_len_4096.args: workload isl 4000 + osl 500 = 4500 tokens: longer than the engine config's max_model_len 4096 (max_seq_len, context_length), so the engine rejects it; raise it or shorten the requests\n"},
		{[]string{"--prefix", "512", "--engine-config", "testdata/engine/vllm_no_prefix_cache.args"}, "aicdb: --engine-config testdata/engine/vllm_no_prefix_cache.args: workload prefix = 512: the engine config turns the prefix cache off, so nothing is reused, while the model reads a prefix as cached; pass prefix 0 (every prompt computed whole) or turn the cache on\n"},
	} {
		code, _, errs := cliRun(t, db, append(args, c.extra...)...)
		if code != 1 || errs != c.want {
			t.Errorf("%v: exit %d %q, want %q", c.extra, code, errs, c.want)
		}
	}
}
