package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestEngineConfigLayoutCLI: an --engine-config's parallelism keys are the
// deployment's layout, not harmless keys: eval refuses a file whose layout
// differs from the one it prices (naming the flags that match), runs one that
// agrees without listing its keys as ignored, and a sweep takes the file's
// tensor-parallel size (refusing a --tp list or a dp the sweep does not price).
// Each refusal is one line, exit 1, and stores nothing.
func TestEngineConfigLayoutCLI(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string { return writeTestFile(t, dir, name, text) }
	tp8 := write("tp8.args", "--tensor-parallel-size 8 --max-num-seqs 64\n")
	tp2 := write("tp2.args", "--tensor-parallel-size 2 --max-num-seqs 64 --port 8000\n")
	eval := []string{"eval", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--tp", "2",
		"--concurrency", "8", "--isl", "1000", "--osl", "200", "--format", "json"}

	code, _, errs := runCLI(t, append(eval, "--engine-config", tp8)...)
	want := "aicdb: --engine-config " + tp8 + ": its parallelism (tensor_parallel_size 8) deploys tp 8, pp 1, dp 1, but the prediction prices tp 2, pp 1, dp 1; pass --tp 8 --pp 1 --dp 1, or drop those keys\n"
	if code != 1 || errs != want {
		t.Errorf("tp 8 file at --tp 2: exit %d, stderr %q\nwant %q", code, errs, want)
	}
	code, out, errs := runCLI(t, append(eval, "--engine-config", tp2)...)
	if code != 0 || !strings.Contains(out, "ttft") {
		t.Fatalf("tp 2 file at --tp 2: exit %d: %s", code, errs)
	}
	if errs != "aicdb: engine config: ignored (no effect on scheduling): port\n" {
		t.Errorf("tp 2 file: stderr %q, want only port ignored", errs)
	}

	// A synthetic timing prices no layout: the keys are noted as not applied.
	code, _, errs = runCLI(t, "eval", "--timing", "linear", "--base-ms", "5", "--prefill-ms-per-token", "0.01", "--decode-ms-per-row", "0.05",
		"--concurrency", "4", "--isl", "100", "--osl", "10", "--engine-config", tp8, "--format", "json")
	if code != 0 || errs != "aicdb: note: engine config: parallelism keys not applied: --timing gives the pass timing\n" {
		t.Errorf("synthetic timing with a layout: exit %d, stderr %q", code, errs)
	}

	db := syntheticDB(t)
	sweep := []string{"sweep", "--model", "Qwen/Qwen3-32B", "--system", "h200_sxm", "--backend", "vllm", "--total-gpus", "8",
		"--isl", "4000", "--osl", "500", "--batch", "8", "--ctx-tokens", "4000", "--format", "json"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tp", "2,4", "--engine-config", tp8}, "aicdb: --tp 2: --engine-config " + tp8 + " deploys tp 8; pass --tp 8, or drop its tensor-parallel size\n"},
		{[]string{"--engine-config", write("dp2.args", "--tensor-parallel-size 2 --data-parallel-size 2\n")},
			"aicdb: --engine-config " + filepath.Join(dir, "dp2.args") + ": deploys pp 1, dp 2, moe-ep 1, but a sweep prices pp 1, dp 1 and a MoE model's experts tensor-parallel over the tp GPUs; drop those keys, or price that layout with eval\n"},
	} {
		code, _, errs := cliRun(t, db, append(sweep, c.args...)...)
		if code != 1 || errs != c.want {
			t.Errorf("sweep %v: exit %d, stderr %q\nwant %q", c.args, code, errs, c.want)
		}
	}
	if code, out, _ := cliRun(t, db, "query", "select count(*) as n from operating_points", "--format", "csv"); code != 0 || out != "n\n0\n" {
		t.Errorf("refused sweeps stored points: %q", out)
	}
	code, _, errs = cliRun(t, db, append(sweep, "--engine-config", tp8)...)
	if code != 0 || !strings.Contains(errs, "aicdb: note: sweep: --tp 8 from --engine-config's tensor-parallel size\n") {
		t.Fatalf("sweep with the tp 8 file: exit %d: %s", code, errs)
	}
	if code, out, _ := cliRun(t, db, "query", "select distinct tp from operating_points", "--format", "csv"); code != 0 || out != "tp\n8\n" {
		t.Errorf("sweep with the tp 8 file priced tp %q, want only 8", out)
	}
}
