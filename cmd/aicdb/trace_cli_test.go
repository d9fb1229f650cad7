package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func runTraceCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"aicdb"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// linearVLLMEngine writes a replay engine file (vLLM with prefix caching, linear
// timing) into dir and returns its path.
func linearVLLMEngine(t *testing.T, dir string) string {
	t.Helper()
	eng := filepath.Join(dir, "eng.json")
	if err := os.WriteFile(eng, []byte(`{"engine": {"backend": "vllm", "max_num_batched_tokens": 8192, "max_num_seqs": 64,
		"block_size": 16, "num_gpu_blocks": 200000, "enable_chunked_prefill": true, "long_prefill_token_threshold": 0,
		"enable_prefix_caching": true, "async_scheduling": false},
		"timing": {"kind": "linear", "base_ms": 8, "prefill_ms_per_token": 0.01, "decode_ms_per_row": 0.05, "ctx_ms_per_token": 0.00002}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return eng
}

// TestTraceCLI: import (sniffed) → idempotent re-import → a bad file fails with file,
// line and field and leaves the store unchanged → ls, show (slice), stats (reuse).
func TestTraceCLI(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.sqlite")
	moon := "../../trace/testdata/mooncake_conversation_head.jsonl"
	code, out, errs := runTraceCLI(t, "--db", db, "trace", "import", moon, "--name", "conv")
	if code != 0 || out != "trace conv: 120 requests over 42.0 s imported from "+moon+" (mooncake)\n" {
		t.Fatalf("import: exit %d\n%s%s", code, out, errs)
	}
	if code, out, _ = runTraceCLI(t, "--db", db, "trace", "import", moon); code != 0 || !strings.Contains(out, "trace conv: unchanged") {
		t.Fatalf("re-import: exit %d %s", code, out)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	data, _ := os.ReadFile(moon)
	data = append(data, []byte(`{"timestamp": 50000, "input_length": 10, "output_length": -3}`+"\n")...)
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runTraceCLI(t, "--db", db, "trace", "import", bad)
	if want := "aicdb: trace import: " + bad + ": line 121: field output_length: -3: must be in 1..16777216 (nothing was stored)\n"; code != 1 || errs != want {
		t.Fatalf("bad row: exit %d\n got %q\nwant %q", code, errs, want)
	}
	// A name the trace commands could not take back (help words, flags): refused.
	for _, name := range []string{"h", "help", "-x"} {
		code, _, errs = runTraceCLI(t, "--db", db, "trace", "import", moon, "--name", name)
		if want := "aicdb: trace import " + moon + ": trace name \"" + name + "\" cannot be given to the trace commands (help words and flags are taken); pass --name\n"; code != 1 || errs != want {
			t.Errorf("--name %s: exit %d\n got %q\nwant %q", name, code, errs, want)
		}
	}
	code, out, _ = runTraceCLI(t, "--db", db, "trace", "ls")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, "conv  mooncake       120") {
		t.Fatalf("ls after the failed imports (one trace): exit %d\n%s", code, out)
	}
	code, out, errs = runTraceCLI(t, "--db", db, "trace", "show", "conv", "--window", "40..", "--scale-rate", "2", "--format", "jsonl")
	if code != 0 || !strings.HasPrefix(out, `{"arrival_ms":999.5,"isl":87172,"osl":7,"hash_ids":[0,3246,`) || strings.Count(out, "\n") != 1 {
		t.Fatalf("show slice: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runTraceCLI(t, "--db", db, "trace", "stats", "conv", "--reuse", "--backend", "sglang", "--kv-blocks", "10000000")
	if code != 0 || !strings.Contains(out, "prefix reuse (unbounded cache, 512-token hash blocks): 3.366 % of blocks, 3.430 % of prompt tokens") ||
		!strings.Contains(out, "prefix-cache hits (sglang, 10000000 blocks of 1 tokens): 3.430 % of prompt tokens") {
		t.Fatalf("stats: exit %d\n%s%s", code, out, errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"trace", "stats", "nope"}, `aicdb: trace stats: no trace named "nope"; 'aicdb trace ls' lists them` + "\n"},
		{[]string{"trace", "rm", "nope"}, `aicdb: trace rm: no trace named "nope"; 'aicdb trace ls' lists them` + "\n"},
		{[]string{"trace", "stats", "conv", "--window", "5"}, `aicdb: --window "5": want START..END in seconds, e.g. 600..1200 or 600..` + "\n"},
		{[]string{"trace", "stats", "conv", "--scale-rate", "0"}, "aicdb: --scale-rate 0: must be a number in (0, 1e6]\n"},
		{[]string{"trace", "stats", "conv", "--reuse"}, "aicdb: trace stats --reuse: give --backend vllm|trtllm|sglang and --kv-blocks N\n"},
		{[]string{"trace", "import", moon, "--format", "csv"}, "aicdb: trace import: --format \"csv\": must be one of mooncake, azure, servegen, jsonl\n"},
	} {
		code, _, errs := runTraceCLI(t, append([]string{"--db", db}, c.args...)...)
		if code != 1 || errs != c.want {
			t.Errorf("%v: exit %d\n got %q\nwant %q", c.args, code, errs, c.want)
		}
	}
}

// TestTraceReplayCLI: a Mooncake slice replayed through the DES (W3) prints the
// summary, stores one replay with a row per request, and rejects the missing tier.
func TestTraceReplayCLI(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.sqlite")
	eng := linearVLLMEngine(t, dir)
	if code, _, errs := runTraceCLI(t, "--db", db, "trace", "import", "../../trace/testdata/mooncake_conversation_head.jsonl", "--name", "conv"); code != 0 {
		t.Fatal(errs)
	}
	sums := map[string]map[string]any{}
	for i, tier := range []string{"oracle", "quantitative"} {
		code, out, errs := runTraceCLI(t, "--db", db, "trace", "replay", "conv", "--engine", eng, "--limit", "50", "--tier", tier)
		if code != 0 || !strings.Contains(out, `"requests": 50,`) || !strings.Contains(out, `"workload_fidelity": "W3"`) ||
			!strings.Contains(out, `"queueing_tier": "`+tier+`"`) || !isSummary(errs, fmt.Sprintf("trace replay conv: replay %d stored (50 requests, %s tier, agg W3)", i+1, tier)) {
			t.Fatalf("replay %s: exit %d\n%s%s", tier, code, out, errs)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatal(err)
		}
		sums[tier] = m
	}
	// the calendar and the DES agree on this light slice (one engine, the same arrivals)
	for _, k := range []string{"ttft_p50", "ttft_p99", "itl_p50", "tpot_mean", "throughput_rps"} {
		o, q := sums["oracle"][k].(float64), sums["quantitative"][k].(float64)
		if math.Abs(q-o) > 0.05*o {
			t.Errorf("%s: quantitative %v vs oracle %v: more than 5 %% apart", k, q, o)
		}
	}
	code, out, _ := runTraceCLI(t, "--db", db, "query", "select count(*) as n from replay_requests")
	if code != 0 || !strings.Contains(out, "100") {
		t.Fatalf("replay_requests: exit %d\n%s", code, out)
	}
	// --by minute: the series sums to the slice and is stored with the summary
	code, out, errs := runTraceCLI(t, "--db", db, "trace", "replay", "conv", "--engine", eng, "--limit", "50", "--by", "minute")
	var withSeries struct {
		Series []struct {
			Arrivals, Finished int
		} `json:"series"`
	}
	if err := json.Unmarshal([]byte(out), &withSeries); code != 0 || err != nil || len(withSeries.Series) == 0 {
		t.Fatalf("--by minute: exit %d %v\n%s%s", code, err, out, errs)
	}
	na, nf := 0, 0
	for _, w := range withSeries.Series {
		na, nf = na+w.Arrivals, nf+w.Finished
	}
	if na != 50 || nf != 50 {
		t.Fatalf("--by minute: %d arrivals, %d finished over the windows, want 50 each", na, nf)
	}
	code, _, errs = runTraceCLI(t, "--db", db, "trace", "replay", "conv", "--engine", eng, "--by", "day")
	if want := "aicdb: trace replay: --by \"day\": must be second, minute or hour\n"; code != 1 || errs != want {
		t.Fatalf("--by day: exit %d %q", code, errs)
	}
	code, _, errs = runTraceCLI(t, "--db", db, "trace", "replay", "conv", "--engine", eng, "--tier", "screening")
	if want := "aicdb: trace replay: --tier \"screening\": must be quantitative or oracle\n"; code != 1 || errs != want {
		t.Fatalf("screening: exit %d %q", code, errs)
	}
}

// TestTraceReplayPerfData: --model/--system/--backend/--tp time the replay from perf
// data (eval's builder) when the engine file has no timing; without either, or with
// another backend than the file's, one-line errors.
func TestTraceReplayPerfData(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.sqlite")
	eng := filepath.Join(dir, "eng.json")
	if err := os.WriteFile(eng, []byte(`{"engine": {"backend": "vllm", "max_num_batched_tokens": 8192, "max_num_seqs": 64,
		"block_size": 16, "num_gpu_blocks": 200000, "enable_chunked_prefill": true, "enable_prefix_caching": true,
		"long_prefill_token_threshold": 0, "async_scheduling": false}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runTraceCLI(t, "--db", db, "trace", "import", "../../trace/testdata/mooncake_conversation_head.jsonl", "--name", "conv"); code != 0 {
		t.Fatal(errs)
	}
	base := []string{"--db", db, "trace", "replay", "conv", "--engine", eng, "--limit", "5"}
	code, _, errs := runTraceCLI(t, base...)
	if want := "aicdb: trace replay: --engine " + eng + ": no \"timing\" object; add one or time passes from perf data with --model, --system, --backend and --tp\n"; code != 1 || errs != want {
		t.Fatalf("no timing: exit %d %q", code, errs)
	}
	perf := append(base, "--model", "meta-llama/Meta-Llama-3.1-70B", "--system", "h200_sxm", "--tp", "4")
	code, _, errs = runTraceCLI(t, append(perf, "--backend", "sglang")...)
	if want := "aicdb: trace replay: --backend sglang: the --engine file's backend is vllm; they must be the same\n"; code != 1 || errs != want {
		t.Fatalf("backend mismatch: exit %d %q", code, errs)
	}
	if testing.Short() {
		t.Skip("the perf-data replay needs a store with the embedded perf data (init, ~5 s)")
	}
	if code, _, errs := runTraceCLI(t, "--db", db, "init"); code != 0 {
		t.Fatal(errs)
	}
	code, out, errs := runTraceCLI(t, append(perf, "--backend", "vllm")...)
	// The file's 200,000 blocks (3.2 M tokens) are more than four H200s hold
	// beside the 70B weights: replayed as given, with a note.
	note := "aicdb: note: the engine file's KV pool (3199984 tokens: num_gpu_blocks − 1 blocks of 16) is larger than the pool this deployment holds by the perf database's memory model ("
	rest, ok := strings.CutPrefix(errs, note)
	_, rest, _ = strings.Cut(rest, "\n")
	if code != 0 || !ok || !strings.Contains(out, `"requests": 5,`) || !isSummary(rest, "trace replay conv: replay 1 stored (5 requests, quantitative tier, agg W3)") {
		t.Fatalf("perf data: exit %d\n%s%s", code, out, errs)
	}
	code, _, errs = runTraceCLI(t, append(perf, "--backend", "vllm", "--kv-capacity-tokens", "auto")...)
	if code != 0 || strings.Contains(errs, "note:") {
		t.Fatalf("perf data, auto pool: exit %d %q; want no note", code, errs)
	}
	code, _, errs = runTraceCLI(t, "--db", db, "trace", "replay", "conv", "--engine", eng, "--limit", "5", "--model", "meta-llama/Meta-Llama-3.1-70B",
		"--system", "h200_sxm", "--tp", "1", "--backend", "vllm")
	if code != 1 || !strings.HasPrefix(errs, "aicdb: trace replay: out of memory: vllm KV budget") {
		t.Fatalf("70B on one H200: exit %d %q; want the weights refused", code, errs)
	}
}

// TestTraceReplaySessionsCLI: --sessions replays W4 (the row says so), the later turn
// after its previous turn's completion + think time with that context cached; the DES
// tier and a cap without --sessions are refused.
func TestTraceReplaySessionsCLI(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.sqlite")
	eng := filepath.Join(dir, "eng.json")
	if err := os.WriteFile(eng, []byte(`{"engine": {"backend": "vllm", "max_num_batched_tokens": 8192, "max_num_seqs": 64,
		"block_size": 16, "num_gpu_blocks": 20000, "enable_chunked_prefill": true, "long_prefill_token_threshold": 0,
		"enable_prefix_caching": true, "async_scheduling": false},
		"timing": {"kind": "linear", "base_ms": 8, "prefill_ms_per_token": 0.01, "decode_ms_per_row": 0.05, "ctx_ms_per_token": 0.00002}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := filepath.Join(dir, "s.jsonl")
	if err := os.WriteFile(tr, []byte(`{"arrival_ms": 0, "isl": 1200, "osl": 80, "hash_ids": [1, 2, 3], "session_id": "s1"}
{"arrival_ms": 100, "isl": 900, "osl": 40, "session_id": "s2"}
{"arrival_ms": 1500, "isl": 1700, "osl": 60, "hash_ids": [1, 2, 3, 4], "session_id": "s1", "think_ms": 1200}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runTraceCLI(t, "--db", db, "trace", "import", tr, "--name", "s"); code != 0 {
		t.Fatal(errs)
	}
	base := []string{"--db", db, "trace", "replay", "s", "--engine", eng}
	code, out, errs := runTraceCLI(t, append(base, "--sessions")...)
	if code != 0 || !strings.Contains(out, `"workload_fidelity": "W4"`) {
		t.Fatalf("--sessions: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runTraceCLI(t, append(base, "--sessions", "--tier", "oracle")...)
	if code != 0 || !strings.Contains(out, `"workload_fidelity": "W4"`) || !strings.Contains(out, `"queueing_tier": "oracle"`) {
		t.Fatalf("--sessions --tier oracle: exit %d\n%s%s", code, out, errs)
	}
	// turn 2 of both replays: 1200 ms think + the default 1 ms client RTT after turn
	// 1's completion, turn 1's 1279 computed tokens cached in whole 16-token blocks
	code, out, _ = runTraceCLI(t, "--db", db, "query", "--format", "csv", "select w.tier, r.arrival_ms - (p.arrival_ms + p.e2e_ms) as think, r.cached_tokens, w.workload_fidelity from replay_requests r join replay_requests p on p.replay_id = r.replay_id and p.seq = 0 join replays w on w.id = r.replay_id where r.seq = 2 order by w.id")
	if want := "tier,think,cached_tokens,workload_fidelity\nquantitative,1201,1264,W4\noracle,1201,1264,W4\n"; code != 0 || out != want {
		t.Fatalf("turn 2: exit %d\n%s\nwant\n%s", code, out, want)
	}
	code, _, errs = runTraceCLI(t, append(base, "--max-sessions", "2")...)
	if want := "aicdb: trace replay: --max-sessions and --client-rtt-ms need --sessions\n"; code != 1 || errs != want {
		t.Fatalf("cap alone: exit %d %q", code, errs)
	}
	code, _, errs = runTraceCLI(t, append(base, "--sessions", "--client-rtt-ms", "-1")...)
	if want := "aicdb: trace replay: --client-rtt-ms -1: must be a number in [0, 1e6] ms\n"; code != 1 || errs != want {
		t.Fatalf("rtt -1: exit %d %q", code, errs)
	}
}

// TestTraceReplaySessionsKVPressureCLI: a W4 replay whose KV pool cannot keep a
// thinking session's context (turn 1's 1,279 computed tokens: 79 blocks) while
// another session runs (900 + 40 − 1 tokens: 59 blocks) in a 120-block pool is
// refused by the quantitative tier — one line naming the demand, the pool and the
// fix, exit 1, no replay stored — and run by the DES; a 200-block pool is replayed.
func TestTraceReplaySessionsKVPressureCLI(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.sqlite")
	eng := filepath.Join(dir, "eng.json")
	if err := os.WriteFile(eng, []byte(`{"engine": {"backend": "vllm", "max_num_batched_tokens": 8192, "max_num_seqs": 64,
		"block_size": 16, "num_gpu_blocks": 20000, "enable_chunked_prefill": true, "long_prefill_token_threshold": 0,
		"enable_prefix_caching": true, "async_scheduling": false},
		"timing": {"kind": "linear", "base_ms": 8, "prefill_ms_per_token": 0.01, "decode_ms_per_row": 0.05, "ctx_ms_per_token": 0.00002}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := filepath.Join(dir, "s.jsonl")
	if err := os.WriteFile(tr, []byte(`{"arrival_ms": 0, "isl": 1200, "osl": 80, "session_id": "s1"}
{"arrival_ms": 2000, "isl": 900, "osl": 40, "session_id": "s2"}
{"arrival_ms": 2100, "isl": 1700, "osl": 60, "session_id": "s1", "think_ms": 3000}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runTraceCLI(t, "--db", db, "trace", "import", tr, "--name", "s"); code != 0 {
		t.Fatal(errs)
	}
	base := []string{"--db", db, "trace", "replay", "s", "--engine", eng, "--sessions", "--kv-capacity-tokens"}
	code, out, errs := runTraceCLI(t, append(base, "1920")...)
	want := regexp.MustCompile(`^aicdb: trace replay s --sessions --tier quantitative: the session contexts cannot all stay cached: at 2[0-9]{3} ms the running requests plus the cached contexts of the sessions between turns need 138 KV blocks \(2208 tokens\) but the pool holds 120 \(1920 tokens\), so the engine evicts contexts and later turns prefill again, which this tier does not model; use --tier oracle, which models eviction, or a larger KV pool \(--kv-capacity-tokens, num_gpu_blocks\) / --max-sessions\n$`)
	if code != 1 || out != "" || !want.MatchString(errs) {
		t.Fatalf("120-block pool: exit %d\n%s%q", code, out, errs)
	}
	if code, out, _ := runTraceCLI(t, "--db", db, "query", "--format", "csv", "select count(*) as n from replays"); code != 0 || out != "n\n0\n" {
		t.Fatalf("a refused replay stores nothing: exit %d %q", code, out)
	}
	if code, out, errs := runTraceCLI(t, append(base, "1920", "--tier", "oracle")...); code != 0 || !strings.Contains(out, `"workload_fidelity": "W4"`) {
		t.Fatalf("120-block pool, --tier oracle: exit %d\n%s%s", code, out, errs)
	}
	if code, out, errs := runTraceCLI(t, append(base, "3200")...); code != 0 || !strings.Contains(out, `"queueing_tier": "quantitative"`) {
		t.Fatalf("200-block pool: exit %d\n%s%s", code, out, errs)
	}
}

// TestTraceReplaySessionsNoPrefixCacheCLI: with enable_prefix_caching off a later
// turn finds no cached context on either tier (the quantitative tier used to count
// turn 1's 1,264 tokens as a hit, which the DES never gives).
func TestTraceReplaySessionsNoPrefixCacheCLI(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.sqlite")
	eng := filepath.Join(dir, "eng.json")
	if err := os.WriteFile(eng, []byte(`{"engine": {"backend": "vllm", "max_num_batched_tokens": 8192, "max_num_seqs": 64,
		"block_size": 16, "num_gpu_blocks": 20000, "enable_chunked_prefill": true, "long_prefill_token_threshold": 0,
		"enable_prefix_caching": false, "async_scheduling": false},
		"timing": {"kind": "linear", "base_ms": 8, "prefill_ms_per_token": 0.01, "decode_ms_per_row": 0.05, "ctx_ms_per_token": 0.00002}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tr := filepath.Join(dir, "s.jsonl")
	if err := os.WriteFile(tr, []byte(`{"arrival_ms": 0, "isl": 1200, "osl": 80, "session_id": "s1"}
{"arrival_ms": 1500, "isl": 1700, "osl": 60, "session_id": "s1", "think_ms": 1200}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runTraceCLI(t, "--db", db, "trace", "import", tr, "--name", "s"); code != 0 {
		t.Fatal(errs)
	}
	for _, tier := range []string{"quantitative", "oracle"} {
		if code, out, errs := runTraceCLI(t, "--db", db, "trace", "replay", "s", "--engine", eng, "--sessions", "--tier", tier); code != 0 || !strings.Contains(out, `"cached_tokens": 0,`) {
			t.Fatalf("--tier %s: exit %d\n%s%s", tier, code, out, errs)
		}
	}
}

// TestTraceReplayKVCapacityCLI: --kv-capacity-tokens N replaces the engine file's
// pool for both tiers — the Mooncake head slice, replayed into a pool that holds a
// few requests, preempts and queues in both tiers (longer mean E2E than with the
// file's pool); auto needs perf data; a pool below one block is refused.
func TestTraceReplayKVCapacityCLI(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "t.sqlite")
	eng := filepath.Join(dir, "eng.json")
	if err := os.WriteFile(eng, []byte(`{"engine": {"backend": "vllm", "max_num_batched_tokens": 8192, "max_num_seqs": 64,
		"block_size": 16, "num_gpu_blocks": 100000, "enable_chunked_prefill": true, "long_prefill_token_threshold": 0,
		"enable_prefix_caching": true, "async_scheduling": false},
		"timing": {"kind": "linear", "base_ms": 8, "prefill_ms_per_token": 0.01, "decode_ms_per_row": 0.05, "ctx_ms_per_token": 0.00002}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runTraceCLI(t, "--db", db, "trace", "import", "../../trace/testdata/mooncake_conversation_head.jsonl", "--name", "conv"); code != 0 {
		t.Fatal(errs)
	}
	e2e := func(args ...string) float64 {
		t.Helper()
		code, out, errs := runTraceCLI(t, append([]string{"--db", db, "trace", "replay", "conv", "--engine", eng}, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errs)
		}
		var s struct {
			E2EMean     float64 `json:"e2e_mean"`
			Preemptions int     `json:"preemptions"`
		}
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatal(err)
		}
		if len(args) > 2 && s.Preemptions == 0 { // both tiers count them (the calendar's summary left 0)
			t.Errorf("%v: no preemption in a pool of a few requests", args)
		}
		return s.E2EMean
	}
	for _, tier := range []string{"quantitative", "oracle"} {
		wide, tight := e2e("--tier", tier), e2e("--tier", tier, "--kv-capacity-tokens", "130000")
		if !(tight > wide) {
			t.Errorf("%s: mean e2e %v ms with an 8,125-block pool, %v ms with the file's 100,000: want longer", tier, tight, wide)
		}
	}
	for _, c := range []struct{ arg, want string }{
		{"auto", "aicdb: trace replay: --kv-capacity-tokens auto: the engine file's timing has no GPU memory model to size the KV pool from; give the capacity in tokens, or time passes from perf data with --model, --system, --backend and --tp\n"},
		{"8", "aicdb: trace replay: --kv-capacity-tokens 8: the engine needs a KV pool of at least one 16-token block\n"},
		{"lots", "aicdb: --kv-capacity-tokens \"lots\": want auto or a token count ≥ 0\n"},
	} {
		code, _, errs := runTraceCLI(t, "--db", db, "trace", "replay", "conv", "--engine", eng, "--kv-capacity-tokens", c.arg)
		if code != 1 || errs != c.want {
			t.Errorf("--kv-capacity-tokens %s: exit %d %q, want %q", c.arg, code, errs, c.want)
		}
	}
}
