package measure

import (
	"strings"
	"testing"
)

// The fixture's rows: an H200 vLLM Llama-3.1-70B run at C 8, tp 4 and an H200
// TensorRT-LLM one at C 64, tp 2, both 1k/1k, both measured 2025-10-29.
const (
	fixtureVLLM = "2026_04_06_llama_3_1_70b_h200_sxm_vllm_fp8_agg_1024x1024_c8_tp4_ep1_580"
	fixtureTRT  = "2026_04_06_llama_3_1_70b_h200_sxm_trtllm_fp8_agg_1024x1024_c64_tp2_ep1_582"
)

// parseWith parses the silicon fixture with the deployment YAML side and
// returns its rows by run id.
func parseWith(t *testing.T, side string) map[string]Measurement {
	t.Helper()
	dep, err := ParseSidecar("d.yaml", []byte(side))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := Parse("silicon.csv", read(t, "silicon.csv"), "", dep)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Measurement{}
	for _, m := range ms {
		out[m.RunID] = m
	}
	return out
}

// TestRuleMatch: a rule applies to the runs every given match field selects
// (model by path or last element, case-insensitive; lists as one-of; the
// measurement day; a concurrency range) and to no other; the first matching
// rule wins and the row records it.
func TestRuleMatch(t *testing.T) {
	for _, c := range []struct {
		name, match string
		want        []string // run ids the rule deploys
	}{
		{"model base name", "{model: llama-3.1-70b}", []string{fixtureVLLM, fixtureTRT}},
		{"model path", "{model: meta-llama/Llama-3.1-70B}", []string{fixtureVLLM, fixtureTRT}},
		{"another model", "{model: Llama-3.1-8B}", nil},
		{"backend", "{backend: trtllm}", []string{fixtureTRT}},
		{"backend list", "{backend: [sglang, vllm]}", []string{fixtureVLLM}},
		{"measured day", "{measured: '2025-10-29'}", []string{fixtureVLLM, fixtureTRT}},
		{"another day", "{measured: '2025-10-30'}", nil},
		{"version unset", "{version: ''}", []string{fixtureVLLM, fixtureTRT}},
		{"version set", "{version: 0.10.2}", nil},
		{"tp", "{tp: [1, 2]}", []string{fixtureTRT}},
		{"concurrency inside", "{concurrency: [8, 8]}", []string{fixtureVLLM}},
		{"concurrency range", "{concurrency: [9, 128]}", []string{fixtureTRT}},
		{"all fields", "{model: Llama-3.1-70B, system: h200_sxm, backend: vllm, measured: '2025-10-29', gemm_quant: fp8, mode: agg, isl: 1024, osl: 1024, tp: 4, concurrency: [4, 15]}", []string{fixtureVLLM}},
		{"one field off", "{model: Llama-3.1-70B, system: b200_sxm, backend: vllm}", nil},
	} {
		rows := parseWith(t, "rules:\n  - name: r\n    match: "+c.match+"\n    engine_config: {max_num_seqs: 7}\n")
		for id, m := range rows {
			want := strings.Contains(strings.Join(c.want, " "), id)
			got := m.EngineConfig["max_num_seqs"] == 7
			if got != want {
				t.Errorf("%s: run %s deployed %v, want %v (config %v)", c.name, id, got, want, m.EngineConfig)
			}
			if how, _ := m.Extra["deployed_as"].(string); got && how != "rule r" || !got && how != "" {
				t.Errorf("%s: run %s deployed_as %q", c.name, id, how)
			}
		}
	}
	rows := parseWith(t, "rules:\n  - {name: first, match: {backend: vllm}, engine_config: {max_num_seqs: 1}}\n"+
		"  - {name: second, match: {model: Llama-3.1-70B}, engine_config: {max_num_seqs: 2}}\n")
	if a, b := rows[fixtureVLLM].EngineConfig["max_num_seqs"], rows[fixtureTRT].EngineConfig["max_num_seqs"]; a != 1 || b != 2 {
		t.Errorf("first matching rule: vllm %v (want 1), trtllm %v (want 2)", a, b)
	}
}

// TestRuleDeploysAsRunEntry: a rule's fields win over the row's own (tp 8
// over the row's 2) and the file-level fields fill the rest; its expressions
// are evaluated with the run's values as deployed (tp 8, C 64); a runs:
// entry for a run wins over every rule, and a user's rule over the built-in
// campaigns, whose rows say so.
func TestRuleDeploysAsRunEntry(t *testing.T) {
	side := "engine_config: {max_num_tokens: 4096}\nrules:\n  - name: trt\n    match: {backend: trtllm}\n    tp: 8\n" +
		"    engine_config:\n      max_num_tokens: '= ceil_to(concurrency + isl + 64, 64)'\n      per_rank: '= concurrency / tp'\n" +
		"      kv_cache_config: {max_tokens: '= (isl + osl) * concurrency'}\n"
	rows := parseWith(t, side)
	trt, vllm := rows[fixtureTRT], rows[fixtureVLLM]
	if trt.TP != 8 || trt.EngineConfig["max_num_tokens"] != 1152 || trt.EngineConfig["per_rank"] != 8 {
		t.Errorf("rule over the row: tp %d, config %v (want tp 8, max_num_tokens ceil_to(64+1024+64, 64) = 1152, per_rank 64/8 = 8)", trt.TP, trt.EngineConfig)
	}
	if kv, _ := trt.EngineConfig["kv_cache_config"].(map[string]any); kv["max_tokens"] != 2048*64 {
		t.Errorf("nested expression: %v", trt.EngineConfig["kv_cache_config"])
	}
	if vllm.EngineConfig["max_num_tokens"] != 4096 || vllm.Extra["deployed_as"] != nil {
		t.Errorf("a run no rule selects takes the file's fields: %v, %v", vllm.EngineConfig, vllm.Extra["deployed_as"])
	}
	again := parseWith(t, side)
	if again[fixtureTRT].EngineConfig["max_num_tokens"] != 1152 {
		t.Errorf("the rule's own config was changed by its first use: %v", again[fixtureTRT].EngineConfig)
	}

	rows = parseWith(t, "runs:\n  "+fixtureTRT+": {engine_config: {max_num_tokens: 1}}\nrules:\n  - {name: r, match: {backend: trtllm}, engine_config: {max_num_tokens: 2}}\n")
	if m := rows[fixtureTRT]; m.EngineConfig["max_num_tokens"] != 1 || m.Extra["deployed_as"] != "run" {
		t.Errorf("runs: entry over a rule: %v, %v", m.EngineConfig, m.Extra["deployed_as"])
	}

	builtin, err := ParseSidecar("c.yaml", []byte("rules:\n  - {name: c, match: {model: Llama-3.1-70B}, engine_config: {max_num_tokens: 3}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	user, err := ParseSidecar("d.yaml", []byte("rules:\n  - {name: mine, match: {backend: trtllm}, engine_config: {max_num_tokens: 2}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := Parse("silicon.csv", read(t, "silicon.csv"), "", user.WithCampaigns(builtin))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		want, how := 3, "built-in rule c"
		if m.RunID == fixtureTRT {
			want, how = 2, "rule mine"
		}
		if m.EngineConfig["max_num_tokens"] != want || m.Extra["deployed_as"] != how {
			t.Errorf("%s: %v deployed as %v, want %d by %q", m.RunID, m.EngineConfig, m.Extra["deployed_as"], want, how)
		}
	}
}

// TestRuleErrors: a rule that cannot apply is a one-line error naming the
// rule and the key.
func TestRuleErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"rules:\n  - {match: {tp: 1}}\n", "rules: rule 1: name: empty"},
		{"rules:\n  - {name: a}\n", "rules: a: match: empty (it would select every run)"},
		{"rules:\n  - {name: a, match: {concurrency: [8]}}\n", "rules: a: match: concurrency [8]: want [lo, hi]"},
		{"rules:\n  - {name: a, match: {concurrency: [16, 8]}}\n", "want [lo, hi] with 1 ≤ lo ≤ hi"},
		{"rules:\n  - {name: a, match: {measured: 2025}}\n", `match: measured "2025": want a day YYYY-MM-DD`},
		{"rules:\n  - {name: a, match: {tp: 1}, engine_config: {x: '= isl +'}}\n", `rules: a: engine_config x: expression "isl +": ends early`},
		{"rules:\n  - {name: a, match: {tp: 1}, engine_config: {x: '= conc'}}\n", `unknown name "conc" (want isl, osl, concurrency, tp or ceil_to)`},
		{"rules:\n  - {name: a, match: {tp: 1}, engine_config: {kv: {y: [1, '= tp +']}}}\n", `rules: a: engine_config kv.y[1]: expression "tp +": ends early`},
		{"rules:\n  - {name: a, match: {tp: 1}, runs: {b: {tp: 2}}}\n", "rules: a: an entry cannot hold runs or rules of its own"},
		{"rules:\n  - {name: a, match: {tp: 1}, benchmark: {rounds: 0}}\n", "rules: a: benchmark.rounds 0"},
		{"rules:\n  - {name: a, match: {gpus: 1}}\n", "field gpus not found"},
		{"rules:\n  - {name: a, match: {tp: x}}\n", "cannot unmarshal"},
		{"runs:\n  a: {rules: [{name: b, match: {tp: 1}}]}\n", "runs: a: an entry cannot hold runs or rules of its own"},
		{"runs:\n  a: {engine_config: {x: '= conc'}}\n", `runs: a: engine_config x: expression "conc": unknown name "conc"`},
	} {
		_, err := ParseSidecar("d.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: error %v, want one line with %q", c.yaml, err, c.want)
		}
	}
}

// TestRuleValueErrorsAtImport: an expression whose value depends on the run
// (a division by tp − 2) is accepted with the file — other runs evaluate it —
// and the run it cannot evaluate is a one-line error naming the file, line,
// rule and key.
func TestRuleValueErrorsAtImport(t *testing.T) {
	for _, src := range []string{"isl / (tp - 2)", "ceil_to(isl, tp - 2)", "isl * isl * isl * isl"} {
		if err := checkExpr(src); err != nil {
			t.Errorf("checkExpr(%q): %v, want the syntax accepted", src, err)
		}
	}
	dep, err := ParseSidecar("d.yaml", []byte("rules:\n  - {name: per tp, match: {model: Llama-3.1-70B}, engine_config: {kv: {n: '= isl / (tp - 2)'}}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse("silicon.csv", read(t, "silicon.csv"), "", dep)
	want := `silicon.csv line 3: field deployment rule per tp: engine_config kv.n: expression "isl / (tp - 2)": division by zero`
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %v, want one line with %q", err, want)
	}
}

// TestExpr: golden values of the expression language (shell arithmetic:
// integer division, precedence, ceil_to) and its errors.
func TestExpr(t *testing.T) {
	v := exprVars{ISL: 8192, OSL: 1024, Concurrency: 33, TP: 4}
	for _, c := range []struct {
		src  string
		want int64
	}{
		{"concurrency", 33}, {"isl + osl + 20", 9236}, {"ceil_to(concurrency + isl + 64, 64)", 8320},
		{"ceil_to(64, 64)", 64}, {"2 + 3 * 4", 14}, {"(2 + 3) * 4", 20}, {"concurrency / tp", 8}, {"10 - 20 - 5", -15},
		{"  ceil_to( isl , 1000 )  ", 9000}, {"ceil_to(0 - 5, 4)", -4},
	} {
		got, err := evalExpr(c.src, v)
		if err != nil || got != c.want {
			t.Errorf("%q = %d, %v; want %d", c.src, got, err, c.want)
		}
	}
	for _, c := range []struct{ src, want string }{
		{"", "ends early"}, {"1 +", "ends early"}, {"1 2", `unexpected "2"`}, {"(1", `want ')'`},
		{"ceil_to(1)", `want ','`}, {"ceil_to(1, 0)", "want a multiple > 0"}, {"1 / (isl - isl)", "division by zero"},
		{"99999999999999", "number out of range"}, {"isl * isl * isl * isl", "value out of range"}, {"1 % 2", `unexpected "% 2"`},
		{strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100), "nested too deeply"},
	} {
		if _, err := evalExpr(c.src, v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.src, err, c.want)
		}
	}
}

// FuzzExpr: any expression gives a value within the bound or an error, never
// a panic.
func FuzzExpr(f *testing.F) {
	for _, s := range []string{"ceil_to(concurrency + isl + 64, 64)", "isl + osl + 20", "(1", "tp * tp / 0", "9999999 * 9999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		v, err := evalExpr(src, exprVars{ISL: 1 << 20, OSL: 1 << 20, Concurrency: 1 << 16, TP: 64})
		if err == nil && (v > exprLimit || v < -exprLimit) {
			t.Errorf("%q = %d: out of the bound", src, v)
		}
	})
}

// TestCampaignsBuiltin: the built-in campaigns file parses, and every rule
// names the model, the engine and the measurement day of its campaign, so it
// cannot deploy rows of another campaign or of a user's own runs (which have
// no measurement day).
func TestCampaignsBuiltin(t *testing.T) {
	c, err := Campaigns()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rules) < 10 || len(c.Runs) < 40 {
		t.Errorf("%d rules, %d runs", len(c.Rules), len(c.Runs))
	}
	for _, r := range c.Rules {
		if len(r.Match.Model) == 0 || len(r.Match.Backend) == 0 || len(r.Match.Measured) == 0 || r.Benchmark == nil {
			t.Errorf("rule %q: match %+v, benchmark %v: want model, backend, measured and the campaign's benchmark", r.Name, r.Match, r.Benchmark)
		}
	}
	// The fixture's rows are InferenceMAX's Llama-3.1-70B sweep on H200.
	ms, err := Parse("silicon.csv", read(t, "silicon.csv"), "", Deployment{}.WithCampaigns(c))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		switch m.RunID {
		case fixtureVLLM:
			if m.EngineConfig["max_num_seqs"] != 8 || m.EngineConfig["max_num_batched_tokens"] != 8192 {
				t.Errorf("vLLM H200: max_num_seqs = the run's concurrency (8): %v", m.EngineConfig)
			}
		case fixtureTRT:
			if m.EngineConfig["batch_wait_timeout_iters"] != 20 || m.Benchmark == nil || m.Benchmark.Rounds != 10 {
				t.Errorf("TensorRT-LLM 1k/1k tp 2: batch waiting and bench_serving's 10 rounds: %v, %+v", m.EngineConfig, m.Benchmark)
			}
		}
		if how, _ := m.Extra["deployed_as"].(string); !strings.HasPrefix(how, "built-in rule InferenceMAX Llama-3.1-70B") {
			t.Errorf("%s deployed_as %q", m.RunID, how)
		}
	}
}
