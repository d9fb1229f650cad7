package engineconf

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aicdb/aicdb/engine"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// golden is what a test file resolves to: its format, the settings, the ignored
// keys and the engine after applying it to the backend's defaults.
type golden struct {
	Format   string      `json:"format"`
	Settings []Setting   `json:"settings"`
	Ignored  []string    `json:"ignored"`
	Layout   *Layout     `json:"layout,omitempty"` // the layout the parallelism keys deploy
	Engine   engine.Spec `json:"engine"`
}

// TestGoldenFiles: each example file in testdata parses to its golden settings,
// ignored keys, deployed layout and resolved engine.
func TestGoldenFiles(t *testing.T) {
	cases := []struct{ file, backend string }{
		{"vllm_serve.args", "vllm"},
		{"vllm_config.yaml", "vllm"},
		{"trtllm_extra.yaml", "trtllm"},
		{"sglang_server.args", "sglang"},
		{"sglang_server.yaml", "sglang"},
	}
	for _, c := range cases {
		path := filepath.Join("testdata", c.file)
		cfg, err := ParseFile(c.backend, path)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		e, err := engine.Defaults(c.backend, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := cfg.Apply(&e); err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		var lp *Layout
		if l, ok := cfg.Layout(); ok {
			lp = &l
		}
		got, err := json.MarshalIndent(golden{cfg.Format, cfg.Settings, cfg.Ignored, lp, e}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, '\n')
		gp := path + ".golden"
		if *update {
			if err := os.WriteFile(gp, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(gp)
		if err != nil {
			t.Fatalf("%s: %v (run with -update)", c.file, err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: resolved config differs from %s:\n%s", c.file, gp, got)
		}
	}
}

// TestValuesMapped pins the mapping of each scheduling key per backend.
func TestValuesMapped(t *testing.T) {
	cases := []struct {
		backend, text string
		check         func(e engine.Spec) bool
	}{
		{"vllm", "--max-num-batched-tokens 2048", func(e engine.Spec) bool { return e.MaxNumBatchedTokens == 2048 }},
		{"vllm", "--no-async-scheduling", func(e engine.Spec) bool { return !e.AsyncScheduling }},
		{"vllm", "--async-scheduling", func(e engine.Spec) bool { return e.AsyncScheduling }},
		{"vllm", "--enable-chunked-prefill=false --max-num-batched-tokens 9000", func(e engine.Spec) bool { return !e.EnableChunkedPrefill }},
		{"vllm", "--max-num-seqs 4\n--max-num-seqs 8", func(e engine.Spec) bool { return e.MaxNumSeqs == 8 }},
		{"trtllm", "disable_overlap_scheduler: true", func(e engine.Spec) bool { return !e.AsyncScheduling }},
		{"trtllm", "--max_batch_size 16 --max_num_tokens 4096", func(e engine.Spec) bool { return e.MaxBatchSize == 16 && e.MaxNumTokens == 4096 }},
		{"trtllm", "kv_cache_config:\n  max_tokens: 100000\n", func(e engine.Spec) bool { return e.KVCapacityTokens == 100000 }},
		{"trtllm", "tokens_per_block: 64", func(e engine.Spec) bool { return e.BlockSize == 64 }},
		// InferenceMAX's Llama-70B 1k/1k extra_llm_api_options (T-R6).
		{"trtllm", "batch_wait_max_tokens_ratio: 0.9\nbatch_wait_timeout_iters: 20\n", func(e engine.Spec) bool {
			return e.BatchWaitTimeoutIters == 20 && e.BatchWaitMaxTokensRatio == 0.9 && e.BatchWaiting()
		}},
		{"trtllm", "--batch_wait_timeout_iters 20", func(e engine.Spec) bool { return e.BatchWaitTimeoutIters == 20 && !e.BatchWaiting() }},
		{"trtllm", "batch_wait_timeout_ms: 0\nbatch_wait_max_tokens_ratio: 0\n", func(e engine.Spec) bool { return !e.BatchWaiting() }},
		{"sglang", "--chunked-prefill-size -1", func(e engine.Spec) bool { return !e.EnableChunkedPrefill }},
		{"sglang", "--chunked-prefill-size 2048", func(e engine.Spec) bool { return e.EnableChunkedPrefill && e.ChunkedPrefillSize == 2048 }},
		{"sglang", "--max-running-requests 12 --disable-overlap-schedule", func(e engine.Spec) bool { return e.MaxNumSeqs == 12 && !e.AsyncScheduling }},
		{"sglang", "--max-running-requests 12", func(e engine.Spec) bool { return e.AsyncScheduling }}, // overlap on by default (§3.2)
		{"sglang", "disable_overlap_schedule: false\n", func(e engine.Spec) bool { return e.AsyncScheduling }},
		{"sglang", "schedule-conservativeness: 1", func(engine.Spec) bool { return true }},
		// InferenceMAX's DeepSeek flags (S-R7).
		{"sglang", "--scheduler-recv-interval 30", func(e engine.Spec) bool { return e.SchedulerRecvInterval == 30 && e.RecvEvery() == 30 }},
		{"sglang", "scheduler_recv_interval: 1", func(e engine.Spec) bool { return e.RecvEvery() == 0 }},
		// Memory keys: they size the KV pool (refine.KVPoolTokens).
		{"vllm", "--gpu-memory-utilization 0.5", func(e engine.Spec) bool { return e.MemFraction == 0.5 }},
		{"vllm", "--num-gpu-blocks-override 101 --block-size 32", func(e engine.Spec) bool { return e.KVCapacityTokens == 100*32 && e.GPUBlocks() == 101 }},
		{"vllm", "--kv-cache-memory-bytes 8G", func(e engine.Spec) bool { return e.KVCacheMemoryBytes == 8<<30 }},
		{"vllm", "kv_cache_memory: 2k", func(e engine.Spec) bool { return e.KVCacheMemoryBytes == 2000 }},
		{"vllm", "--kv-cache-dtype fp8_e5m2", func(e engine.Spec) bool { return e.KVCacheDtype == "fp8" }},
		{"vllm", "--kv-cache-dtype auto", func(e engine.Spec) bool { return e.KVCacheDtype == "" }},
		{"trtllm", "kv_cache_config:\n  free_gpu_memory_fraction: 0.7\n  dtype: FP8\n", func(e engine.Spec) bool { return e.MemFraction == 0.7 && e.KVCacheDtype == "fp8" }},
		{"trtllm", "--kv_cache_free_gpu_memory_fraction 0.6", func(e engine.Spec) bool { return e.MemFraction == 0.6 }},
		{"trtllm", "free_gpu_memory_fraction: 1", func(e engine.Spec) bool { return e.MemFraction == 1 }},
		{"sglang", "--mem-fraction-static 0.8 --kv-cache-dtype bf16", func(e engine.Spec) bool { return e.MemFraction == 0.8 && e.KVCacheDtype == "bfloat16" }},
		{"sglang", "--cuda-graph-max-bs 48", func(e engine.Spec) bool { return e.CUDAGraphMaxBS == 48 }},
		// cuda_graph_bs sets cuda_graph_max_bs to its maximum, whatever the order.
		{"sglang", "--cuda-graph-bs 1 2 64 8\n--cuda-graph-max-bs 16", func(e engine.Spec) bool { return e.CUDAGraphMaxBS == 64 }},
		{"sglang", "cuda_graph_bs: [4, 32]\n", func(e engine.Spec) bool { return e.CUDAGraphMaxBS == 32 }},
	}
	for _, c := range cases {
		cfg, err := Parse(c.backend, []byte(c.text))
		if err != nil {
			t.Errorf("%s %q: %v", c.backend, c.text, err)
			continue
		}
		e, _ := engine.Defaults(c.backend, "")
		if err := cfg.Apply(&e); err != nil {
			t.Errorf("%s %q: %v", c.backend, c.text, err)
			continue
		}
		if !c.check(e) {
			t.Errorf("%s %q: engine %+v", c.backend, c.text, e)
		}
	}
}

// TestErrors: each refused file is one line naming the key (or the problem).
func TestErrors(t *testing.T) {
	cases := []struct{ backend, text, want string }{
		{"vllm", "--speculative-config '{\"method\": \"ngram\"}'", `line 1: flag --speculative-config.method "ngram": drafts with a draft model of its own or n-grams, which the model does not represent; the model's own MTP layers (method mtp, deepseek_mtp, glm4_moe_mtp, qwen3_next_mtp, mimo_mtp, ernie_mtp, longcat_flash_mtp) and EAGLE / EAGLE3 heads (method eagle, eagle3, with model) are modelled`},
		{"vllm", "max_num_seqs: 64\nspeculative_config:\n  method: eagle3\n  num_speculative_tokens: 3\n", `speculative_config method eagle3: give model, the drafter's checkpoint`},
		{"vllm", "speculative_config:\n  model: org/draft\n  num_speculative_tokens: 3\n", `speculative_config num_speculative_tokens 3: give method mtp, eagle or eagle3 (without it vLLM infers the method from a draft model)`},
		{"vllm", "speculative_config:\n  model: org/draft\n", `speculative_config model org/draft: give method eagle or eagle3 (without it vLLM infers the method from the draft model)`},
		{"vllm", "speculative_config:\n  method: eagle\n  model: '  '\n  num_speculative_tokens: 3\n", `line 3: key speculative_config.model "  ": the drafter's checkpoint is empty`},
		{"vllm", "--speculative-config '{\"method\": \"mtp\"}'", `speculative_config method mtp: give num_speculative_tokens (the drafts per decode step)`},
		{"vllm", "speculative_config:\n  num_speculative_tokens: 2\n", `speculative_config num_speculative_tokens 2: give method mtp, eagle or eagle3 (without it vLLM infers the method from a draft model)`},
		{"vllm", "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 1, \"model\": \"org/draft\"}'", `speculative_config model org/draft with method mtp: the MTP drafter is the model's own layers; drop model, or use method eagle or eagle3`},
		{"vllm", "--max-num-seqs 4 --speculative-config '{\"a b\": 1}'", `line 1: flag --speculative-config: member "a b" is not a key name`},
		{"vllm", "--speculative-config mtp", `line 1: flag --speculative-config "mtp": want a JSON object such as {"method": "mtp", "num_speculative_tokens": 1}`},
		{"vllm", "--num-speculative-tokens 3", `line 1: flag --num-speculative-tokens: changes scheduling (speculative decoding with a separate draft model (the pre-speculative_config flags): only speculative_config with an MTP method is modelled), which the model does not represent; remove it`},
		{"trtllm", "attention_dp_config:\n  enable_balance: true\n  timeout_iters: 50\n", `line 2: key attention_dp_config.enable_balance "true": attention-DP balancing holds context requests until every rank has one (up to timeout_iters); the model represents only false`},
		{"vllm", "--cpu-offload-gb 20", `line 1: flag --cpu-offload-gb "20": weights offloaded to CPU memory stream to the GPU in every pass, which the perf data (weights in GPU memory) does not time; set 0 or remove it`},
		{"trtllm", "batch_wait_max_tokens_ratio: 1.5\n", `line 1: key batch_wait_max_tokens_ratio "1.5": want a fraction in [0, 1]`},
		{"trtllm", "batch_wait_timeout_iters: -1\n", `line 1: key batch_wait_timeout_iters "-1": want an integer in 0..2147483647`},
		{"trtllm", "batch_wait_timeout_ms: 100\n", `line 1: key batch_wait_timeout_ms "100": the executor waits up to that many milliseconds for more requests before it schedules (a wall-clock wait the model does not represent); set 0 or remove it`},
		{"trtllm", "stream_interval: 10\n", `line 1: key stream_interval "10": the server streams each request's tokens 10 at a time, so the client does not see the per-token TTFT and inter-token gaps the model predicts; set 1 or remove it`},
		{"sglang", "--scheduler-recv-interval 0", `line 1: flag --scheduler-recv-interval "0": want an integer in 1..2147483647`},
		{"sglang", "--stream-interval 8", `line 1: flag --stream-interval "8": the server streams each request's tokens 8 at a time, so the client does not see the per-token TTFT and inter-token gaps the model predicts; set 1 or remove it`},
		{"vllm", "kv_transfer_config:\n  kv_connector: NixlConnector\n", `line 2: key kv_transfer_config.kv_connector: changes scheduling (a KV connector: requests wait for remote KV before they are scheduled), which the model does not represent; remove it`},
		{"vllm", "--frobnicate 3", `line 1: flag --frobnicate: not a vllm key aicdb knows, so it cannot tell whether it changes scheduling; remove it (harmless keys such as ports, logging and the model path are ignored)`},
		{"vllm", "--port 1\n--max-num-seqs zero", `line 2: flag --max-num-seqs "zero": want an integer`},
		{"vllm", "--max-num-seqs 0", `line 1: flag --max-num-seqs "0": want an integer in 1..2147483647`},
		{"vllm", "--scheduling-policy priority", `line 1: flag --scheduling-policy "priority": the model represents only scheduling_policy = fcfs (other values change scheduling in ways it does not model)`},
		{"vllm", "--no-enable-chunked-prefill yes", `line 1: flag --no-enable-chunked-prefill "yes": a --no-… flag takes no value`},
		{"vllm", "--enable-chunked-prefill maybe", `line 1: flag --enable-chunked-prefill "maybe": want true or false`},
		{"vllm", "--served-model-name 'x", `line 1: unclosed ' quote`},
		{"vllm", "--port=1 2", `line 1: "2" follows --port=…, which already has its value`},
		{"trtllm", "max_batch_size: 8\nspeculative_config:\n  decoding_type: Medusa\n", `line 3: key speculative_config.decoding_type "Medusa": the model represents only speculative_config.decoding_type = mtp or eagle or eagle3 (other values change scheduling in ways it does not model)`},
		{"trtllm", "max_batch_size: 8\nspeculative_config:\n  decoding_type: Eagle3\n", `speculative_config decoding_type Eagle: give max_draft_len (the drafts per decode step)`},
		{"trtllm", "speculative_config:\n  decoding_type: MTP\n", `speculative_config decoding_type MTP: give num_nextn_predict_layers (the drafts per decode step)`},
		{"trtllm", "speculative_config:\n  max_draft_len: 3\n", `speculative_config draft length 3: give decoding_type MTP or Eagle (without it TensorRT-LLM does not speculate)`},
		{"trtllm", "speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n", `speculative_config decoding_type Eagle: give speculative_model_dir, the EAGLE3 head's checkpoint`},
		{"trtllm", "speculative_config:\n  decoding_type: Eagle\n  num_nextn_predict_layers: 3\n  speculative_model_dir: /w/head\n", `speculative_config num_nextn_predict_layers 3: MTP's draft length; with decoding_type Eagle give max_draft_len`},
		{"trtllm", "speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: 1\n  speculative_model_dir: /w/head\n", `speculative_config speculative_model_dir /w/head: the MTP drafter is the model's own layers; drop it, or use decoding_type Eagle`},
		{"trtllm", "speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n  speculative_model_dir: /w/head\n  eagle3_one_model: false\n", `line 5: key speculative_config.eagle3_one_model "false": two-model EAGLE3 runs the head as an engine of its own, with its own KV cache and forward passes beside the target's; the model represents only true`},
		{"trtllm", "speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n  speculative_model_dir: /w/head\n  use_dynamic_tree: true\n", `line 5: key speculative_config.use_dynamic_tree "true": a dynamic tree of drafts verifies more tokens per step than a chain; the model represents only false`},
		{"trtllm", "speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n  speculative_model_dir: /w/head\n  eagle_choices: [[0], [1]]\n", `line 5: key speculative_config.eagle_choices: a list of lists or mappings is not an engine setting`},
		{"trtllm", "speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n  speculative_model_dir: /w/head\n  eagle_choices: '[[0], [1]]'\n", `line 5: key speculative_config.eagle_choices: changes scheduling (a static tree of drafts verifies more tokens per step than a chain; only a linear chain of max_draft_len drafts is modelled), which the model does not represent; remove it`},
		{"trtllm", "speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n  speculative_model_dir: /w/head\n  max_concurrency: 8\n", `line 5: key speculative_config.max_concurrency: not a trtllm key aicdb knows, so it cannot tell whether it changes scheduling; remove it (harmless keys such as ports, logging and the model path are ignored)`},
		{"trtllm", "scheduler_config:\n  capacity_scheduler_policy: STATIC_BATCH\n", `line 2: key scheduler_config.capacity_scheduler_policy "STATIC_BATCH": the model represents only capacity_scheduler_policy = guaranteed_no_evict or max_utilization (other values change scheduling in ways it does not model)`},
		{"trtllm", "a: &x {b: 1}\nc:\n  <<: *x\n", `line 3: YAML merge keys (<<) are not supported; write the keys out`},
		{"trtllm", "max_batch_size: [1, 2]\n", `line 1: key max_batch_size "1,2": want an integer`},
		{"sglang", "--schedule-policy lpm", `line 1: flag --schedule-policy "lpm": the model represents only schedule_policy = fcfs (other values change scheduling in ways it does not model)`},
		{"sglang", "--enable-priority-scheduling", `line 1: flag --enable-priority-scheduling "true": priority scheduling reorders the waiting queue; the model represents only false`},
		{"tgi", "--x 1", `backend "tgi": unknown; use vllm, trtllm or sglang`},
		{"vllm", "\x00", `not a text file (NUL byte or invalid UTF-8)`},
		{"vllm", "--gpu-memory-utilization 1.5", `line 1: flag --gpu-memory-utilization "1.5": want a fraction in (0, 1]`},
		{"vllm", "--gpu-memory-utilization 0", `line 1: flag --gpu-memory-utilization "0": want a fraction in (0, 1]`},
		{"vllm", "--gpu-memory-utilization NaN", `line 1: flag --gpu-memory-utilization "NaN": want a fraction in (0, 1]`},
		{"vllm", "--num-gpu-blocks-override 1", `line 1: flag --num-gpu-blocks-override "1": want an integer in 2..2147483647`},
		{"vllm", "--kv-cache-memory-bytes 0", `line 1: flag --kv-cache-memory-bytes "0": want a byte count in 1..1125899906842624 (suffixes k, m, g, t or K, M, G, T)`},
		{"vllm", "--kv-cache-memory-bytes 2048T", `line 1: flag --kv-cache-memory-bytes "2048T": want a byte count in 1..1125899906842624 (suffixes k, m, g, t or K, M, G, T)`},
		{"vllm", "--kv-cache-dtype fp4", `line 1: flag --kv-cache-dtype "fp4": want auto or one of bfloat16, float16, fp8, fp8_ds_mla, fp8_e4m3, fp8_e5m2, fp8_inc, half (the KV caches the perf data times)`},
		{"trtllm", "kv_cache_config:\n  free_gpu_memory_fraction: -0.1\n", `line 2: key kv_cache_config.free_gpu_memory_fraction "-0.1": want a fraction in (0, 1]`},
		{"trtllm", "kv_cache_config:\n  dtype: nvfp4\n", `line 2: key kv_cache_config.dtype "nvfp4": want auto or one of bfloat16, float16, fp8, int8 (the KV caches the perf data times)`},
		{"sglang", "--mem-fraction-static 2", `line 1: flag --mem-fraction-static "2": want a fraction in (0, 1]`},
		{"sglang", "--cuda-graph-max-bs 0", `line 1: flag --cuda-graph-max-bs "0": want an integer in 1..2147483647`},
		{"sglang", "--cuda-graph-bs 1 0", `line 1: flag --cuda-graph-bs "1 0": want a list of integers ≥ 1`},
		{"sglang", "--disable-overlap-schedule maybe", `line 1: flag --disable-overlap-schedule "maybe": want true or false`},
		{"sglang", "disable_overlap_schedule: 2\n", `line 1: key disable_overlap_schedule "2": want true or false`},
		{"sglang", "--speculative-algorithm NEXTN", `--speculative-algorithm NEXTN: give --speculative-num-steps (the drafts per decode step; SGLang's default depends on the model)`},
		{"sglang", "--speculative-num-steps 2", `--speculative-num-steps 2: give --speculative-algorithm NEXTN, EAGLE or EAGLE3 (without it SGLang does not speculate)`},
		{"sglang", "--speculative-algorithm EAGLE --speculative-num-steps 2 --speculative-num-draft-tokens 4", `--speculative-num-draft-tokens 4: with --speculative-eagle-topk 1 it is --speculative-num-steps + 1 = 3; drop it or set it so`},
		{"sglang", "--speculative-algorithm EAGLE3 --speculative-num-steps 2", `--speculative-algorithm EAGLE3: give --speculative-draft-model-path, the head's checkpoint`},
		{"sglang", "--speculative-draft-model-path /w/head", `--speculative-draft-model-path /w/head: give --speculative-algorithm EAGLE or EAGLE3 (without it SGLang does not speculate)`},
		{"sglang", "--speculative-algorithm NEXTN --speculative-num-steps 2 --speculative-eagle-topk 4", `line 1: flag --speculative-eagle-topk "4": the model represents only speculative_eagle_topk = 1 (other values change scheduling in ways it does not model)`},
		{"sglang", "--kv-cache-dtype fp8", `line 1: flag --kv-cache-dtype "fp8": want auto or one of bf16, bfloat16, fp8_e4m3, fp8_e5m2 (the KV caches the perf data times)`},
	}
	for _, c := range cases {
		_, err := Parse(c.backend, []byte(c.text))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s %q:\n got  %v\n want %s", c.backend, c.text, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s %q: error is not one line", c.backend, c.text)
		}
	}
	// Apply: cross-key constraints and the backend.
	cfg, err := Parse("vllm", []byte("--enable-chunked-prefill false --max-num-batched-tokens 64"))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := engine.Defaults("trtllm", "")
	if err := cfg.Apply(&e); err == nil || err.Error() != "engine config is for vllm but the engine is trtllm; give the trtllm engine's config" {
		t.Errorf("backend mismatch: %v", err)
	}
	cfg, _ = Parse("trtllm", []byte("enable_chunked_prefill: true\nmax_num_tokens: 16\n"))
	e, _ = engine.Defaults("trtllm", "")
	if err := cfg.Apply(&e); err == nil || !strings.HasPrefix(err.Error(), "engine config: engine max_num_tokens = 16") {
		t.Errorf("validate: %v", err)
	}
}

// TestCheckKVQuant: a config's KV-cache dtype must agree with the point's KV
// quant; auto (no dtype) and an unknown quant pass.
func TestCheckKVQuant(t *testing.T) {
	cfg, err := Parse("vllm", []byte("--kv-cache-dtype fp8"))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := engine.Defaults("vllm", "")
	if err := cfg.Apply(&e); err != nil {
		t.Fatal(err)
	}
	want := "engine config kv_cache_dtype fp8 contradicts the KV-cache quant bfloat16 the point is timed with"
	if err := CheckKVQuant(e, "bfloat16"); err == nil || err.Error() != want {
		t.Errorf("mismatch:\n got  %v\n want %s", err, want)
	}
	for _, q := range []string{"fp8", ""} {
		if err := CheckKVQuant(e, q); err != nil {
			t.Errorf("quant %q: %v", q, err)
		}
	}
	auto, _ := engine.Defaults("sglang", "")
	cfg, _ = Parse("sglang", []byte("--kv-cache-dtype auto"))
	if err := cfg.Apply(&auto); err != nil || CheckKVQuant(auto, "fp8") != nil {
		t.Errorf("auto: %v", err)
	}
}

// TestIgnoredLine: one line naming the ignored keys in file order.
func TestIgnoredLine(t *testing.T) {
	cfg, err := Parse("vllm", []byte("vllm serve m --port 1 --max-num-seqs 4 --host h --port 2"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.IgnoredLine(), "engine config: ignored (no effect on scheduling): vllm, serve, m, port, host"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
	if !reflect.DeepEqual(cfg.Settings, []Setting{{"max_num_seqs", "4"}}) {
		t.Errorf("settings %+v", cfg.Settings)
	}
}

// TestDisableCUDAGraph: SGLang's disable_cuda_graph is not harmless: it is
// applied and recorded (a Setting, engine.Spec.DisableCUDAGraph, which Render
// writes back), leaves the memory knobs alone (SGLang 0.5.x keeps the graph
// reserve in mem_fraction_static), and is warned about in one line, because the
// perf data times decode with CUDA graphs. false sets and warns nothing.
func TestDisableCUDAGraph(t *testing.T) {
	cfg, err := Parse("sglang", []byte("--port 1 --disable-cuda-graph --max-running-requests 8"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []Setting{{"disable_cuda_graph", "true"}, {"max_running_requests", "8"}}; !reflect.DeepEqual(cfg.Settings, want) {
		t.Errorf("settings %+v, want %+v", cfg.Settings, want)
	}
	if got, want := cfg.IgnoredLine(), "engine config: ignored (no effect on scheduling): port"; got != want {
		t.Errorf("ignored line %q, want %q", got, want)
	}
	want := "engine config: disable_cuda_graph: decode passes run without CUDA graphs, but the perf data was measured with them, so predicted decode times (ITL, TPOT) may be optimistic"
	if got := cfg.TimingLine(); got != want {
		t.Errorf("timing line\n got  %q\n want %q", got, want)
	}
	e, _ := engine.Defaults("sglang", "")
	base := e
	if err := cfg.Apply(&e); err != nil {
		t.Fatal(err)
	}
	base.DisableCUDAGraph, base.MaxNumSeqs = true, 8
	if e != base {
		t.Errorf("applied engine %+v, want the defaults with disable_cuda_graph and max_running_requests 8 only", e)
	}
	out, err := Render(e, Deployment{Model: "m", Layout: Layout{TP: 1, PP: 1}}, FormatCLI)
	if err != nil || !strings.Contains(out, "--disable-cuda-graph") {
		t.Errorf("render: %v\n%s", err, out)
	}
	off, err := Parse("sglang", []byte("disable_cuda_graph: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	e, _ = engine.Defaults("sglang", "")
	if err := off.Apply(&e); err != nil || e.DisableCUDAGraph || off.TimingLine() != "" {
		t.Errorf("false: %v, engine %+v, timing line %q", err, e, off.TimingLine())
	}
}

// fuzzCheck: Parse never panics, is deterministic, and a parsed file either
// applies to a valid engine or fails with a one-line error.
func fuzzCheck(t *testing.T, backend string, data []byte) {
	c1, err1 := Parse(backend, data)
	c2, err2 := Parse(backend, data)
	if (err1 == nil) != (err2 == nil) || (err1 != nil && err1.Error() != err2.Error()) || !reflect.DeepEqual(c1, c2) {
		t.Fatalf("not deterministic: %v / %v", err1, err2)
	}
	if err1 != nil {
		if strings.ContainsAny(err1.Error(), "\n") {
			t.Fatalf("multi-line error %q", err1)
		}
		return
	}
	e, _ := engine.Defaults(backend, "")
	if err := c1.Apply(&e); err != nil {
		if strings.ContainsAny(err.Error(), "\n") {
			t.Fatalf("multi-line error %q", err)
		}
		return
	}
	if err := e.Validate(); err != nil {
		t.Fatalf("applied engine invalid: %v", err)
	}
}

func FuzzParseVLLM(f *testing.F) {
	for _, s := range []string{"--max-num-seqs 4", "vllm serve m --no-async-scheduling", "max-num-seqs: 3\nblock-size: 16\n",
		"--enable-chunked-prefill=false --max-num-batched-tokens 9000", "'a b' \"c\\\n d\"",
		"--num-gpu-blocks-override 3 --block-size 16 --kv-cache-memory-bytes 4G --gpu-memory-utilization 0.5 --kv-cache-dtype fp8",
		`--speculative-config '{"method": "mtp", "num_speculative_tokens": 2}'`, "speculative_config:\n  method: mtp\n  num_speculative_tokens: 1\n",
		`--speculative-config '{"a\nb": {"c": [1]}}'`} {
		f.Add([]byte(s))
	}
	if b, err := os.ReadFile("testdata/vllm_serve.args"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzCheck(t, "vllm", data) })
}

func FuzzParseTRTLLM(f *testing.F) {
	for _, s := range []string{"max_batch_size: 8\nmax_num_tokens: 8192\n", "kv_cache_config:\n  tokens_per_block: 64\n", "--max_batch_size 4",
		"speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n  speculative_model_dir: org/head\n  eagle3_one_model: true\n"} {
		f.Add([]byte(s))
	}
	if b, err := os.ReadFile("testdata/trtllm_extra.yaml"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzCheck(t, "trtllm", data) })
}

func FuzzParseSGLang(f *testing.F) {
	for _, s := range []string{"--chunked-prefill-size -1", "chunked-prefill-size: 512\npage-size: 16\n", "--enable-mixed-chunk",
		"--cuda-graph-bs 1 2 4 --cuda-graph-max-bs 8 --mem-fraction-static 0.8 --kv-cache-dtype fp8_e4m3",
		"--disable-overlap-schedule", "disable_overlap_schedule: no\n"} {
		f.Add([]byte(s))
	}
	if b, err := os.ReadFile("testdata/sglang_server.args"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) { fuzzCheck(t, "sglang", data) })
}

// BenchmarkParseApply: parse the TensorRT-LLM example file and apply it.
func BenchmarkParseApply(b *testing.B) {
	data, err := os.ReadFile("testdata/trtllm_extra.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		cfg, err := Parse("trtllm", data)
		if err != nil {
			b.Fatal(err)
		}
		e, _ := engine.Defaults("trtllm", "")
		if err := cfg.Apply(&e); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAliasBomb: aliases expanding to more than maxKeys keys are refused, fast.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("a0: &a0 {x: 1, y: 2, z: 3, w: 4, v: 5, u: 6, s: 7, r: 8, q: 9, p: 10}\n")
	for i := 1; i < 8; i++ {
		fmt.Fprintf(&b, "a%d: &a%d {", i, i)
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "k%d: *a%d", j, i-1)
		}
		b.WriteString("}\n")
	}
	_, err := Parse("trtllm", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "more than 10000 keys") {
		t.Fatalf("alias bomb: %v", err)
	}
}

// TestSGLangSpeculative: SGLang's NEXTN / EAGLE keys (aiconfigurator's
// generator emits --speculative-algorithm NEXTN --speculative-num-steps N
// beside --enable-mixed-chunk) give the engine N drafts with the overlap
// scheduler and mixed chunk off, as SGLang's server arguments resolve them,
// wherever the mixed-chunk key stands in the file.
func TestSGLangSpeculative(t *testing.T) {
	for _, c := range []struct{ text, method, model string }{
		{"--speculative-algorithm NEXTN --speculative-num-steps 2 --enable-mixed-chunk", "", ""},
		{"--speculative-algorithm NEXTN --speculative-draft-model-path /w/nextn --speculative-num-steps 2", "", ""}, // the model's own MTP weights
		{"--enable-mixed-chunk --speculative-num-steps 2 --speculative-eagle-topk 1 --speculative-num-draft-tokens 3 --speculative-algorithm EAGLE --speculative-draft-model-path /w/head", "eagle", "/w/head"},
		{"--speculative-algorithm EAGLE3 --speculative-draft-model-path lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B --speculative-num-steps 2", "eagle3", "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-8B"},
	} {
		cfg, err := Parse("sglang", []byte(c.text))
		if err != nil {
			t.Fatalf("%q: %v", c.text, err)
		}
		e, _ := engine.Defaults("sglang", "")
		if err := cfg.Apply(&e); err != nil {
			t.Fatalf("%q: %v", c.text, err)
		}
		if e.DraftTokens != 2 || e.EnableMixedChunk || e.AsyncScheduling || e.DraftMethod != c.method || e.DraftModel != c.model {
			t.Errorf("%q: drafts %d, mixed chunk %v, overlap %v, drafter %q %q; want 2 drafts, both off, drafter %q %q",
				c.text, e.DraftTokens, e.EnableMixedChunk, e.AsyncScheduling, e.DraftMethod, e.DraftModel, c.method, c.model)
		}
	}
}

// TestVLLMSpeculative: vLLM's speculative_config with an MTP method — the CLI's
// JSON object, the same object as a YAML string, or a YAML mapping — sets the
// drafts per decode step and nothing else (V-S1).
func TestVLLMSpeculative(t *testing.T) {
	for _, text := range []string{
		`--max-num-seqs 64 --speculative-config '{"method": "deepseek_mtp", "num_speculative_tokens": 3}'`,
		`--max-num-seqs 64 --speculative-config '{"num_speculative_tokens": 3, "method":"mtp"}'`, // YAML reads this line as a mapping too
		"speculative_config: '{\"num_speculative_tokens\": 3, \"method\": \"mtp\"}'\nmax_num_seqs: 64\n",
		"max_num_seqs: 64\nspeculative_config:\n  method: mtp\n  num_speculative_tokens: 3\n",
	} {
		cfg, err := Parse("vllm", []byte(text))
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		e, _ := engine.Defaults("vllm", "")
		want := e
		want.MaxNumSeqs = 64
		want.SetDrafts(3, 0)
		if err := cfg.Apply(&e); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if e != want {
			t.Errorf("%q: engine %+v, want %+v", text, e, want)
		}
	}
}

// TestVLLMEagle: vLLM's speculative_config with an EAGLE / EAGLE3 method and
// the head's checkpoint — the CLI's JSON object or a YAML mapping — sets the
// drafts per decode step and names their drafter (engine.Spec.DraftMethod,
// DraftModel), nothing else: vLLM schedules them as MTP's (V-S1..V-S4).
func TestVLLMEagle(t *testing.T) {
	for _, c := range []struct{ text, method string }{
		{`--max-num-seqs 64 --speculative-config '{"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-70B", "num_speculative_tokens": 3}'`, "eagle3"},
		{"max_num_seqs: 64\nspeculative_config:\n  method: EAGLE\n  model: yuhuili/EAGLE3-LLaMA3.1-Instruct-70B\n  num_speculative_tokens: 3\n", "eagle"},
	} {
		cfg, err := Parse("vllm", []byte(c.text))
		if err != nil {
			t.Fatalf("%q: %v", c.text, err)
		}
		e, _ := engine.Defaults("vllm", "")
		want := e
		want.MaxNumSeqs = 64
		want.SetDrafts(3, 0)
		want.DraftMethod, want.DraftModel = c.method, "yuhuili/EAGLE3-LLaMA3.1-Instruct-70B"
		if err := cfg.Apply(&e); err != nil {
			t.Fatalf("%q: %v", c.text, err)
		}
		if e != want {
			t.Errorf("%q: engine %+v, want %+v", c.text, e, want)
		}
	}
}

// TestTRTLLMEagle: TensorRT-LLM's one-model EAGLE3 (speculative_config
// decoding_type Eagle or Eagle3, max_draft_len and the head's checkpoint under
// either of its names) sets the drafts per decode step and names their drafter,
// nothing else: the PyTorch flow schedules them as one-model MTP's (T-R3); the
// acceptance rule's keys are listed as ignored, and deploy writes the head back.
func TestTRTLLMEagle(t *testing.T) {
	for _, text := range []string{
		"max_batch_size: 64\nspeculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n  speculative_model_dir: yuhuili/EAGLE3-LLaMA3.1-Instruct-70B\n  eagle3_one_model: true\n  greedy_sampling: true\n",
		"max_batch_size: 64\nspeculative_config:\n  decoding_type: Eagle3\n  speculative_model: yuhuili/EAGLE3-LLaMA3.1-Instruct-70B\n  max_draft_len: 3\n",
	} {
		cfg, err := Parse("trtllm", []byte(text))
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		e, _ := engine.Defaults("trtllm", "")
		want := e
		want.MaxBatchSize = 64
		want.DraftTokens = 3
		want.DraftMethod, want.DraftModel = "eagle3", "yuhuili/EAGLE3-LLaMA3.1-Instruct-70B"
		if err := cfg.Apply(&e); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if e != want {
			t.Errorf("%q: engine %+v, want %+v", text, e, want)
		}
		out, err := Render(e, Deployment{Model: "m", Layout: Layout{TP: 1, PP: 1}}, FormatYAML)
		if err != nil || !strings.Contains(out, "speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 3\n  speculative_model_dir: yuhuili/EAGLE3-LLaMA3.1-Instruct-70B\n  eagle3_one_model: true\n") {
			t.Errorf("%q: render %v\n%s", text, err, out)
		}
		back, err := Parse("trtllm", []byte(out))
		if err != nil {
			t.Fatalf("rendered config: %v\n%s", err, out)
		}
		e2, _ := engine.Defaults("trtllm", "")
		if err := back.Apply(&e2); err != nil || e2.DraftMethod != e.DraftMethod || e2.DraftModel != e.DraftModel || e2.DraftTokens != e.DraftTokens {
			t.Errorf("%q: rendered config applies as %+v (%v)", text, e2, err)
		}
	}
	cfg, err := Parse("trtllm", []byte("speculative_config:\n  decoding_type: Eagle\n  max_draft_len: 2\n  speculative_model_dir: /w/head\n  greedy_sampling: false\n  posterior_threshold: 0.09\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.IgnoredLine(), "engine config: ignored (no effect on scheduling): speculative_config.greedy_sampling, speculative_config.posterior_threshold"; got != want {
		t.Errorf("ignored line %q, want %q", got, want)
	}
	// MTP keeps its meaning: the model's own layers, no drafter.
	cfg, err = Parse("trtllm", []byte("speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: 2\n"))
	if err != nil {
		t.Fatal(err)
	}
	e, _ := engine.Defaults("trtllm", "")
	if err := cfg.Apply(&e); err != nil || e.DraftTokens != 2 || e.SeparateDrafter() {
		t.Errorf("MTP: %+v (%v)", e, err)
	}
}

// TestNeutralValuesAccepted: the values of the refused streaming and balancing
// keys that change nothing are accepted (stream_interval 1, enable_balance
// false, whose companion keys then act on nothing and are listed as ignored).
func TestNeutralValuesAccepted(t *testing.T) {
	for _, c := range []struct{ backend, text, ignored string }{
		{"trtllm", "stream_interval: 1\nattention_dp_config:\n  enable_balance: false\n  timeout_iters: 50\n", "engine config: ignored (no effect on scheduling): attention_dp_config.timeout_iters"},
		{"sglang", "--stream-interval 1", ""},
	} {
		cfg, err := Parse(c.backend, []byte(c.text))
		if err != nil {
			t.Errorf("%s %q: %v", c.backend, c.text, err)
			continue
		}
		if got := cfg.IgnoredLine(); got != c.ignored {
			t.Errorf("%s %q: ignored line %q, want %q", c.backend, c.text, got, c.ignored)
		}
	}
}

// TestTimingWarnedKeys: vLLM's enforce_eager and TensorRT-LLM's
// cuda_graph_config: null and use_cuda_graph: false turn CUDA graphs off as
// SGLang's disable_cuda_graph does (TestDisableCUDAGraph): DisableCUDAGraph and
// nothing else changed, warned about in one line, rendered back by deploy;
// use_cuda_graph true and a mapping of graph settings change nothing; the keys
// that only slow the kernels (disable_custom_all_reduce, SGLang's
// enable_deterministic_inference) change no engine field and are warned about
// when true; another scalar cuda_graph_config is refused.
func TestTimingWarnedKeys(t *testing.T) {
	kernelChoice := func(what string) string { return kernelChoiceKey(what).timing }
	if got, want := kernelChoice("attention"), "the perf data times the attention kernels aiconfigurator's collector ran, and this choice is not checked against them, so predicted pass times may be off in either direction"; got != want {
		t.Fatalf("kernel-choice warning %q, want %q", got, want)
	}
	ar := "engine config: disable_custom_all_reduce: all-reduces run through NCCL, not the custom all-reduce the perf data times, so predicted pass times at tp > 1 may be optimistic"
	warn := "engine config: %s: passes run without CUDA graphs, but the perf data was measured with them, so predicted decode times (ITL, TPOT) may be optimistic"
	for _, c := range []struct {
		backend, text, timing, format, rendered string
		off                                     bool
	}{
		{"vllm", "--enforce-eager", fmt.Sprintf(warn, "enforce_eager"), FormatCLI, "--enforce-eager", true},
		{"trtllm", "cuda_graph_config: null\n", fmt.Sprintf(warn, "cuda_graph_config"), FormatYAML, "cuda_graph_config: null", true},
		{"trtllm", "use_cuda_graph: false\n", fmt.Sprintf(warn, "use_cuda_graph"), FormatYAML, "cuda_graph_config: null", true},
		{"trtllm", "use_cuda_graph: true\n", "", FormatYAML, "cuda_graph_config: null", false},
		{"trtllm", "cuda_graph_config:\n  enable_padding: true\n", "", FormatYAML, "cuda_graph_config: null", false},
		{"vllm", "--disable-custom-all-reduce", ar, FormatCLI, "", false},
		{"sglang", "--disable-custom-all-reduce", ar, FormatCLI, "", false},
		{"sglang", "--enable-deterministic-inference", "engine config: enable_deterministic_inference: batch-invariant kernels run slower than the ones the perf data was measured with, so predicted pass times may be optimistic", FormatCLI, "", false},
		{"sglang", "enable_deterministic_inference: false\n", "", FormatCLI, "", false},
		{"trtllm", "moe_config:\n  backend: CUTLASS\n", "", FormatYAML, "", false},
		{"trtllm", "moe_config:\n  backend: trtllm\n", "engine config: moe_config.backend: the perf data times the CUTLASS MoE kernels, so predicted pass times with another MoE backend may be off in either direction", FormatYAML, "", false},
		// Kernel choices aicdb does not match against the perf data: warned at
		// any value (Round 20; they were listed harmless).
		{"sglang", "--attention-backend trtllm_mla", "engine config: attention_backend: " + kernelChoice("attention"), FormatCLI, "", false},
		{"sglang", "--moe-runner-backend flashinfer_trtllm", "engine config: moe_runner_backend: " + kernelChoice("MoE runner"), FormatCLI, "", false},
		{"sglang", "--moe-a2a-backend deepep", "engine config: moe_a2a_backend: " + kernelChoice("expert all-to-all"), FormatCLI, "", false},
		{"sglang", "--enable-torch-compile", "engine config: enable_torch_compile: " + torchCompileTiming, FormatCLI, "", false},
		{"vllm", "--attention-backend FLASHINFER", "engine config: attention_backend: " + kernelChoice("attention"), FormatCLI, "", false},
		{"vllm", "--all2all-backend deepep_low_latency", "engine config: all2all_backend: " + kernelChoice("expert all-to-all"), FormatCLI, "", false},
		{"vllm", "--enable-eplb", "engine config: enable_eplb: " + eplbTiming, FormatCLI, "", false},
		{"vllm", "enable_eplb: false\n", "", FormatYAML, "", false},
	} {
		cfg, err := Parse(c.backend, []byte(c.text))
		if err != nil {
			t.Fatalf("%s %q: %v", c.backend, c.text, err)
		}
		if got := cfg.TimingLine(); got != c.timing {
			t.Errorf("%s %q: timing line %q, want %q", c.backend, c.text, got, c.timing)
		}
		e, _ := engine.Defaults(c.backend, "")
		want := e
		want.DisableCUDAGraph = c.off
		if err := cfg.Apply(&e); err != nil || e != want {
			t.Errorf("%s %q: applied %+v (%v), want %+v", c.backend, c.text, e, err, want)
		}
		if c.rendered == "" {
			continue
		}
		if out, err := Render(e, Deployment{Model: "m", Layout: Layout{TP: 1, PP: 1}}, c.format); err != nil || strings.Contains(out, c.rendered) != c.off {
			t.Errorf("%s %q: render %v\n%s", c.backend, c.text, err, out)
		}
	}
	if _, err := Parse("trtllm", []byte("cuda_graph_config: 5\n")); err == nil || !strings.Contains(err.Error(), "want a mapping of CUDA-graph settings or null (graphs off)") {
		t.Errorf("cuda_graph_config scalar: %v", err)
	}
}

// TestMaxModelLen: each engine's longest-request key sets MaxModelLen, vLLM's
// human-readable suffixes included; auto and -1 leave it unset; a bad value is
// refused with the accepted forms.
func TestMaxModelLen(t *testing.T) {
	for _, c := range []struct {
		backend, text string
		want          int
	}{
		{"vllm", "--max-model-len 3548", 3548},
		{"vllm", "--max-model-len 32k", 32000},
		{"vllm", "--max-model-len 32K", 32768},
		{"vllm", "--max-model-len auto", 0},
		{"vllm", "--max-model-len -1", 0},
		{"trtllm", "max_seq_len: 10240\n", 10240},
		{"sglang", "--context-length 8192", 8192},
	} {
		cfg, err := Parse(c.backend, []byte(c.text))
		if err != nil {
			t.Fatalf("%s %q: %v", c.backend, c.text, err)
		}
		e, _ := engine.Defaults(c.backend, "")
		if err := cfg.Apply(&e); err != nil || e.MaxModelLen != c.want {
			t.Errorf("%s %q: max_model_len %d (%v), want %d", c.backend, c.text, e.MaxModelLen, err, c.want)
		}
	}
	if _, err := Parse("vllm", []byte("--max-model-len 0")); err == nil || !strings.Contains(err.Error(), "want a token count in 1..1073741824 (suffixes k, m or K, M), or auto") {
		t.Errorf("max-model-len 0: %v", err)
	}
}
