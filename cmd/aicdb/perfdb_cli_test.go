package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// runPerfdbCLI runs the app in-process and returns exit code, stdout, stderr.
func runPerfdbCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), append([]string{"aicdb"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestPerfdbCLI(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "a.sqlite")

	if code, _, stderr := runPerfdbCLI(t, "--db", db, "perfdb", "ls", "systems"); code != 1 || !strings.Contains(stderr, "does not exist: run 'aicdb init' first") {
		t.Errorf("ls before init: code %d stderr %q", code, stderr)
	}
	code, out, stderr := runPerfdbCLI(t, "--db", db, "init")
	if code != 0 || !strings.Contains(out, "systems [h200_sxm], 32 models, 141 perf files imported, 0 unchanged, 0 rows mirrored") {
		t.Fatalf("init: code %d out %q stderr %q", code, out, stderr)
	}
	code, out, _ = runPerfdbCLI(t, "--db", db, "init")
	if code != 0 || !strings.Contains(out, "0 perf files imported, 141 unchanged, 0 rows mirrored") {
		t.Errorf("second init: code %d out %q", code, out)
	}

	code, out, stderr = runPerfdbCLI(t, "--db", db, "perfdb", "ls", "versions", "--format", "csv")
	want := `system,backend,version,tables,rows
h200_sxm,nccl,2.23,1,342
h200_sxm,nccl,2.26.2,1,1008
h200_sxm,nccl,2.29.2,1,504
h200_sxm,sglang,0.5.6.post2,14,69504
h200_sxm,sglang,0.5.9,9,214682
h200_sxm,sglang,0.5.10,14,237333
h200_sxm,sglang,0.5.12,2,2660
h200_sxm,sglang,0.5.14,13,378287
h200_sxm,trtllm,1.2.0rc5,10,199916
h200_sxm,trtllm,1.3.0rc10,14,273776
h200_sxm,trtllm,1.3.0rc15,0,0
h200_sxm,trtllm,1.3.0rc20,15,389111
h200_sxm,vllm,0.14.0,7,169284
h200_sxm,vllm,0.18.0,6,276777
h200_sxm,vllm,0.19.0,10,282682
h200_sxm,vllm,0.22.0,11,313353
h200_sxm,vllm,0.24.0,13,318479
`
	if code != 0 || out != want {
		t.Errorf("ls versions: code %d stderr %q out\n%s\nwant\n%s", code, stderr, out, want)
	}
	// init --help states the row count --mirror copies: the rows of every version (U29).
	rows := 0
	for _, l := range strings.Split(strings.TrimSpace(want), "\n")[1:] {
		n, err := strconv.Atoi(l[strings.LastIndexByte(l, ',')+1:])
		if err != nil {
			t.Fatal(err)
		}
		rows += n
	}
	if _, help, _ := runPerfdbCLI(t, "init", "--help"); !strings.Contains(help, fmt.Sprintf("their rows (%s for the embedded data)", thousands(rows))) {
		t.Errorf("init --help does not state the %d rows --mirror copies:\n%s", rows, help)
	}
	// U17: an unknown system names the stored ones and the fix; U5: a MoE layout
	// that does not cover tp·dp names the --moe-ep that does, and eval derives it
	// (moe-ep tp·dp) when neither --moe-tp nor --moe-ep is given, as estimate does.
	evalArgs := []string{"--db", db, "eval", "--model", "Qwen/Qwen3-30B-A3B", "--backend", "vllm", "--tp", "2",
		"--concurrency", "2", "--isl", "100", "--osl", "10", "--tier", "screening"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--system", "b200_sxm"}, "aicdb: --system b200_sxm: unknown system; stored: h200_sxm; import others with 'aicdb perfdb import'\n"},
		{[]string{"--system", "h200_sxm", "--moe-ep", "1"}, "aicdb: --tp 2 × --dp 1 = 2 GPUs, but --moe-tp 1 × --moe-ep 1 = 1 for the MoE model Qwen/Qwen3-30B-A3B; pass --moe-ep 2\n"},
		{[]string{"--system", "h200_sxm", "--moe-tp", "3"}, "aicdb: --tp 2 × --dp 1 = 2 GPUs, but --moe-tp 3 × --moe-ep 1 = 3 for the MoE model Qwen/Qwen3-30B-A3B; pass --moe-tp 1 --moe-ep 2\n"},
	} {
		if code, out, errs := runPerfdbCLI(t, append(slices.Clone(evalArgs), c.args...)...); code != 1 || out != "" || errs != c.want {
			t.Errorf("eval %v: code %d stdout %q stderr %q, want %q", c.args, code, out, errs, c.want)
		}
	}
	if code, out, errs := runPerfdbCLI(t, append(evalArgs, "--system", "h200_sxm")...); code != 0 || !strings.Contains(out, "ttft_steady_p99") {
		t.Errorf("eval MoE with the derived moe-ep: code %d stdout %q stderr %q", code, out, errs)
	}
	code, out, _ = runPerfdbCLI(t, "--db", db, "perfdb", "ls", "systems", "-f", "json")
	if code != 0 || !strings.Contains(out, `"system": "h200_sxm", "gpus_per_node": 8, "mem_capacity_gib": 141, "nccl_version": "2.26.2", "backends": "sglang trtllm vllm"`) {
		t.Errorf("ls systems: code %d out %q", code, out)
	}
	code, out, _ = runPerfdbCLI(t, "--db", db, "perfdb", "ls", "models")
	if code != 0 || !strings.Contains(out, "Qwen/Qwen3-32B") || !strings.Contains(out, "Qwen3MoeForCausalLM") {
		t.Errorf("ls models: code %d out %q", code, out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"perfdb", "ls", "gpus"}, `aicdb: perfdb ls: unknown subject "gpus"; use one of systems, models, versions`},
		{[]string{"perfdb", "ls"}, "aicdb: perfdb ls: missing subject; use one of systems, models, versions"},
		{[]string{"perfdb", "ls", "models", "--format", "xml"}, `aicdb: --format "xml": use table, csv, json or jsonl`},
		{[]string{"perfdb", "import"}, "aicdb: perfdb import: missing PATH"},
		{[]string{"perfdb", "import", filepath.Join(dir, "nope")}, "no such file or folder"},
		{[]string{"perfdb", "frob"}, `aicdb: perfdb: unknown subcommand "frob"; use import or ls`},
	} {
		code, _, stderr := runPerfdbCLI(t, append([]string{"--db", db}, c.args...)...)
		if code != 1 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: code %d stderr %q, want exit 1 and %q", c.args, code, stderr, c.want)
		}
	}

	// A systems folder (the small fixture); re-importing changes nothing.
	fx := filepath.Join("..", "..", "testdata", "aic", "systems")
	code, out, stderr = runPerfdbCLI(t, "--db", db, "perfdb", "import", fx)
	if code != 0 || !strings.Contains(out, "systems [fx], models 0, perf files 18 (33 rows), unchanged 0, removed 0") {
		t.Errorf("import systems folder: code %d out %q stderr %q", code, out, stderr)
	}
	// The import warms the newest version's snapshot of each backend it holds.
	if want := "aicdb: perfdb import: perf-data snapshots of fx: vllm "; !strings.Contains(stderr, want) {
		t.Errorf("import systems folder: stderr %q, want a line with %q", stderr, want)
	}
	if snaps, _ := filepath.Glob(db + ".perfcache/fx_vllm_*_shared_all.snap"); len(snaps) != 1 {
		t.Errorf("snapshots of fx after the import: %v, want one", snaps)
	}
	code, out, _ = runPerfdbCLI(t, "--db", db, "perfdb", "import", fx)
	if code != 0 || !strings.Contains(out, "perf files 0 (0 rows), unchanged 18, removed 0") {
		t.Errorf("re-import systems folder: code %d out %q", code, out)
	}
	_, out, _ = runPerfdbCLI(t, "--db", db, "perfdb", "ls", "versions", "-f", "csv")
	if !strings.Contains(out, "fx,vllm,latest,1,1\nfx,vllm,0.8.0,1,1\nfx,vllm,0.9.0,2,5\n") || !strings.Contains(out, "h200_sxm,vllm,0.24.0,13,318479") {
		t.Errorf("versions after import:\n%s", out)
	}

	// One config.json with --id after PATH; a bad one names the file and changes nothing.
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte(`{"architectures":["LlamaForCausalLM"],"num_hidden_layers":2,"hidden_size":64,"num_attention_heads":4,"intermediate_size":128,"vocab_size":100}`), 0o644)
	if code, out, stderr := runPerfdbCLI(t, "--db", db, "perfdb", "import", cfg, "--id", "me/tiny"); code != 0 || !strings.Contains(out, "models 1") {
		t.Errorf("import config: code %d out %q stderr %q", code, out, stderr)
	}
	bad := filepath.Join(dir, "me--bad_config.json")
	os.WriteFile(bad, []byte(`{"architectures":`), 0o644)
	if code, _, stderr := runPerfdbCLI(t, "--db", db, "perfdb", "import", bad); code != 1 || !strings.Contains(stderr, bad) {
		t.Errorf("bad config: code %d stderr %q", code, stderr)
	}
	_, out, _ = runPerfdbCLI(t, "--db", db, "perfdb", "ls", "models", "--format", "csv")
	if !strings.Contains(out, "me/tiny,LlamaForCausalLM,LLAMA,2,64,4,4,0,0,") || strings.Contains(out, "me/bad") {
		t.Errorf("models after imports:\n%s", out)
	}
}

// thousands formats n with comma thousands separators (3127698 → 3,127,698).
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
