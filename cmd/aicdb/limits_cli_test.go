package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// noStore is a --db path that does not exist: eval and estimate read the embedded data.
func noStore(t *testing.T) string { return filepath.Join(t.TempDir(), "none.sqlite") }

// TestEvalAbsurdRate is issue 8 item 4: an open-loop rate no engine can serve is
// reported unstable by the quantitative tier (it printed throughput 1e9 rps), and a
// normal rate still gets numbers.
func TestEvalAbsurdRate(t *testing.T) {
	db := noStore(t)
	// Synthetic timing: the verdict is the queueing tier's, whatever prices the passes.
	base := []string{"eval", "--timing", "linear", "--base-ms", "5", "--prefill-ms-per-token", "0.02", "--decode-ms-per-row", "0.05",
		"--isl", "4000", "--osl", "500", "--num-requests", "512"}
	for _, rate := range []string{"1e9", "1e6"} {
		code, out, errs := cliRun(t, db, append(base, "--rate", rate)...)
		var got map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("--rate %s: code %d out %q err %q", rate, code, out, errs)
		}
		if got["unstable"] != true || got["throughput_rps"] != nil || !strings.Contains(got["reason"].(string), "lower the rate") {
			t.Fatalf("--rate %s: %v, want unstable without a throughput", rate, got)
		}
	}
	code, out, errs := cliRun(t, db, append(base, "--rate", "1")...)
	if code != 0 || strings.Contains(out, "unstable") || !strings.Contains(out, `"throughput_rps"`) {
		t.Fatalf("--rate 1: code %d out %q err %q", code, out, errs)
	}
}

// TestContextLengthRejected: isl + osl beyond the model's max_position_embeddings
// (40960 for Qwen3-32B) is a one-line user error naming the limit, in eval and in
// every estimate mode (estimate --isl 10000000 reported 1,080 GiB with exit 0).
func TestContextLengthRejected(t *testing.T) {
	db := noStore(t)
	for _, args := range [][]string{
		{"eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--tp", "2", "--rate", "1", "--isl", "40000", "--osl", "1000"},
		{"eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--tp", "2", "--concurrency", "4", "--isl", "4000", "--osl", "500", "--isl-quantiles", "1000,40800"},
		{"estimate", "--model", "Qwen/Qwen3-32B", "--isl", "10000000", "--mode", "static"},
		{"estimate", "--model", "Qwen/Qwen3-32B", "--isl", "10000000", "--mode", "mixed"},
		{"estimate", "--model", "Qwen/Qwen3-32B", "--isl", "10000000", "--mode", "agg"},
		{"estimate", "--model", "Qwen/Qwen3-32B", "--isl", "10000000", "--mode", "disagg"},
	} {
		code, _, errs := cliRun(t, db, args...)
		if code != 1 || !strings.Contains(errs, "max_position_embeddings 40960") || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: code %d err %q, want exit 1 with one line naming max_position_embeddings 40960", args, code, errs)
		}
	}
}

// TestEstimateOOMEveryMode: a point that does not fit in the GPU's memory is an
// exit-1 error in every mode, with the memory arithmetic where aicdb checks it
// (static, mixed) and aiconfigurator's rule (total or KV budget) in agg and disagg.
func TestEstimateOOMEveryMode(t *testing.T) {
	db := noStore(t)
	// SOL: the memory arithmetic does not depend on the database mode, and SOL
	// loads the least data.
	base := []string{"estimate", "--model", "Qwen/Qwen3-32B", "--isl", "38000", "--osl", "2000", "--tp", "1", "--database-mode", "SOL"}
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--mode", "static", "--batch", "64"}, "GiB per GPU"},
		{[]string{"--mode", "mixed", "--gen-tokens", "64"}, "GiB per GPU"},
		{[]string{"--mode", "agg", "--batch", "64"}, "GiB needed on h200_sxm"},
		{[]string{"--mode", "disagg", "--decode-batch", "64"}, "decode worker"},
	} {
		code, _, errs := cliRun(t, db, append(base, c.extra...)...)
		if code != 1 || !strings.Contains(errs, "out of memory") || !strings.Contains(errs, c.want) || !strings.Contains(errs, "--mode "+c.extra[1]) {
			t.Errorf("%v: code %d err %q, want exit 1 with out of memory (%s)", c.extra, code, errs, c.want)
		}
	}
	// The same shapes at a batch that fits still answer.
	if code, _, errs := cliRun(t, db, append(base, "--mode", "static", "--batch", "1")...); code != 0 {
		t.Fatalf("static batch 1: code %d err %q", code, errs)
	}
}
