package engineconf

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/aicdb/aicdb/engine"
)

// Deployment is what Render needs besides the engine: the model and the
// worker's parallelism.
type Deployment struct {
	Model string
	Layout
	ExtraYAMLPath string // TensorRT-LLM CLI: the extra_llm_api_options file name (default extra_llm_api_options.yaml)
}

// Render prints the launch configuration of one engine worker in the engine's
// own format: FormatCLI (the launch command with its flags, one per line) or
// FormatYAML (vLLM --config / SGLang --config keys, TensorRT-LLM
// extra_llm_api_options). Every scheduling field of e that its backend reads is
// written out explicitly, so Parse of the output gives back e's scheduling
// fields whatever the engine's defaults are (TestRenderRoundTrip). TensorRT-LLM's
// CLI form is a shell snippet: the YAML written to a file, then trtllm-serve.
func Render(e engine.Spec, d Deployment, format string) (string, error) {
	if format != FormatCLI && format != FormatYAML {
		return "", fmt.Errorf("format %q: unknown; use %s or %s", format, FormatCLI, FormatYAML)
	}
	if err := e.Validate(); err != nil {
		return "", err
	}
	lkv, err := layoutKVs(e.Backend, d.Layout)
	if err != nil {
		return "", err
	}
	var kv []renderKV
	switch e.Backend {
	case engine.VLLM:
		kv = vllmKVs(e, d.Model, lkv)
	case engine.TRTLLM:
		y := trtllmYAML(e, lkv)
		if format == FormatYAML {
			return y, nil
		}
		path := d.ExtraYAMLPath
		if path == "" {
			path = "extra_llm_api_options.yaml"
		}
		return fmt.Sprintf("cat > %s <<'EOF'\n%sEOF\ntrtllm-serve %s \\\n  --backend pytorch \\\n  --extra_llm_api_options %s\n",
			path, y, shellQuote(d.Model), path), nil
	case engine.SGLang:
		kv = sglangKVs(e, d.Model, lkv)
	}
	var b strings.Builder
	if format == FormatYAML {
		for _, x := range kv {
			v := x.value
			if x.flagOnly && !x.optional {
				v = "true"
			}
			fmt.Fprintf(&b, "%s: %s\n", x.key, yamlScalar(v))
		}
		return b.String(), nil
	}
	switch e.Backend {
	case engine.VLLM:
		fmt.Fprintf(&b, "vllm serve %s", shellQuote(d.Model))
	case engine.SGLang:
		b.WriteString("python3 -m sglang.launch_server")
	}
	for _, x := range kv {
		if x.key == "model" {
			continue
		}
		switch {
		case x.optional && x.value == "false":
			fmt.Fprintf(&b, " \\\n  --no-%s", x.key)
		default:
			fmt.Fprintf(&b, " \\\n  --%s", x.key)
		}
		if !x.flagOnly {
			fmt.Fprintf(&b, " %s", shellQuote(x.value))
		}
	}
	b.WriteString("\n")
	return b.String(), nil
}

// renderKV is one launch key; flagOnly keys are bare CLI flags (true in YAML);
// optional ones are vLLM BooleanOptionalAction flags, --x or --no-x by value
// (x: true/false in YAML).
type renderKV struct {
	key, value         string
	flagOnly, optional bool
}

func itoa(n int) string { return fmt.Sprint(n) }

// vllmKVs are vLLM's launch keys (engine args, dash form).
func vllmKVs(e engine.Spec, model string, layout []renderKV) []renderKV {
	kv := append([]renderKV{{key: "model", value: model}}, layout...)
	kv = append(kv,
		renderKV{key: "max-num-batched-tokens", value: itoa(e.MaxNumBatchedTokens)},
		renderKV{key: "max-num-seqs", value: itoa(e.MaxNumSeqs)},
		renderKV{key: "block-size", value: itoa(e.BlockSize)},
		boolKV("enable-chunked-prefill", e.EnableChunkedPrefill),
		boolKV("async-scheduling", e.AsyncScheduling),
		renderKV{key: "long-prefill-token-threshold", value: itoa(e.LongPrefillTokenThreshold)},
		renderKV{key: "scheduling-policy", value: "fcfs"})
	if e.NoPrefixReuse {
		kv = append(kv, boolKV("enable-prefix-caching", false))
	}
	if e.MaxModelLen > 0 {
		kv = append(kv, renderKV{key: "max-model-len", value: itoa(e.MaxModelLen)})
	}
	if e.DisableCUDAGraph {
		kv = append(kv, renderKV{key: "enforce-eager", flagOnly: true})
	}
	if e.MemFraction > 0 {
		kv = append(kv, renderKV{key: "gpu-memory-utilization", value: ftoa(e.MemFraction)})
	}
	if e.KVCacheMemoryBytes > 0 {
		kv = append(kv, renderKV{key: "kv-cache-memory-bytes", value: fmt.Sprint(e.KVCacheMemoryBytes)})
	}
	if e.KVCapacityTokens > 0 {
		kv = append(kv, renderKV{key: "num-gpu-blocks-override", value: itoa(e.GPUBlocks())})
	}
	if e.KVCacheDtype != "" {
		kv = append(kv, renderKV{key: "kv-cache-dtype", value: e.KVCacheDtype})
	}
	if e.DraftTokens > 0 { // MTP over the model's own MTP layers, or an EAGLE head (its acceptance is the model's and the data's, not a key)
		v := fmt.Sprintf(`{"method": "mtp", "num_speculative_tokens": %d}`, e.DraftTokens)
		if e.SeparateDrafter() {
			m, _ := json.Marshal(e.DraftModel) // a string always encodes
			v = fmt.Sprintf(`{"method": %q, "model": %s, "num_speculative_tokens": %d}`, e.DraftMethod, m, e.DraftTokens)
		}
		kv = append(kv, renderKV{key: "speculative-config", value: v})
	}
	return kv
}

// ftoa writes a fraction in its shortest exact form.
func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// boolKV is a vLLM BooleanOptionalAction flag.
func boolKV(key string, v bool) renderKV {
	return renderKV{key: key, value: fmt.Sprint(v), flagOnly: true, optional: true}
}

// sglangKVs are SGLang's server arguments (dash form).
func sglangKVs(e engine.Spec, model string, layout []renderKV) []renderKV {
	kv := append([]renderKV{{key: "model-path", value: model}}, layout...)
	chunk := -1
	if e.EnableChunkedPrefill {
		chunk = e.ChunkedPrefillSize
	}
	kv = append(kv,
		renderKV{key: "chunked-prefill-size", value: itoa(chunk)},
		renderKV{key: "max-prefill-tokens", value: itoa(e.MaxPrefillTokens)},
		renderKV{key: "max-running-requests", value: itoa(e.MaxNumSeqs)},
		renderKV{key: "page-size", value: itoa(e.BlockSize)},
		renderKV{key: "schedule-policy", value: "fcfs"})
	if e.EnableMixedChunk {
		kv = append(kv, renderKV{key: "enable-mixed-chunk", flagOnly: true})
	}
	if !e.AsyncScheduling { // the overlap scheduler is SGLang's default (§3.2)
		kv = append(kv, renderKV{key: "disable-overlap-schedule", flagOnly: true})
	}
	if e.SchedulerRecvInterval > 1 { // S-R7, as predicted
		kv = append(kv, renderKV{key: "scheduler-recv-interval", value: itoa(e.SchedulerRecvInterval)})
	}
	if e.DraftTokens > 0 { // EAGLE chain over the model's MTP layers or a head (acceptance: the model's and the data's)
		alg := "NEXTN"
		if e.SeparateDrafter() {
			alg = strings.ToUpper(e.DraftMethod)
			kv = append(kv, renderKV{key: "speculative-draft-model-path", value: e.DraftModel})
		}
		kv = append(kv, renderKV{key: "speculative-algorithm", value: alg},
			renderKV{key: "speculative-num-steps", value: itoa(e.DraftTokens)},
			renderKV{key: "speculative-eagle-topk", value: "1"},
			renderKV{key: "speculative-num-draft-tokens", value: itoa(e.DraftTokens + 1)})
	}
	if e.KVCapacityTokens > 0 {
		kv = append(kv, renderKV{key: "max-total-tokens", value: itoa(e.KVCapacityTokens)})
	}
	if e.MemFraction > 0 {
		kv = append(kv, renderKV{key: "mem-fraction-static", value: ftoa(e.MemFraction)})
	}
	if e.CUDAGraphMaxBS > 0 {
		kv = append(kv, renderKV{key: "cuda-graph-max-bs", value: itoa(e.CUDAGraphMaxBS)})
	}
	if e.DisableCUDAGraph {
		kv = append(kv, renderKV{key: "disable-cuda-graph", flagOnly: true})
	}
	if e.NoPrefixReuse {
		kv = append(kv, renderKV{key: "disable-radix-cache", flagOnly: true})
	}
	if e.MaxModelLen > 0 {
		kv = append(kv, renderKV{key: "context-length", value: itoa(e.MaxModelLen)})
	}
	switch e.KVCacheDtype {
	case "fp8":
		kv = append(kv, renderKV{key: "kv-cache-dtype", value: "fp8_e4m3"}) // SGLang has no plain fp8
	case "":
	default:
		kv = append(kv, renderKV{key: "kv-cache-dtype", value: e.KVCacheDtype})
	}
	return kv
}

// trtllmYAML is TensorRT-LLM's extra_llm_api_options for e.
func trtllmYAML(e engine.Spec, layout []renderKV) string {
	var b strings.Builder
	for _, x := range layout {
		fmt.Fprintf(&b, "%s: %s\n", x.key, x.value)
	}
	fmt.Fprintf(&b, "max_batch_size: %d\nmax_num_tokens: %d\nenable_chunked_prefill: %t\ndisable_overlap_scheduler: %t\n",
		e.MaxBatchSize, e.MaxNumTokens, e.EnableChunkedPrefill, !e.AsyncScheduling)
	fmt.Fprintf(&b, "kv_cache_config:\n  tokens_per_block: %d\n", e.BlockSize)
	if e.KVCapacityTokens > 0 {
		fmt.Fprintf(&b, "  max_tokens: %d\n", e.KVCapacityTokens)
	}
	if e.MemFraction > 0 {
		fmt.Fprintf(&b, "  free_gpu_memory_fraction: %s\n", ftoa(e.MemFraction))
	}
	if e.KVCacheDtype != "" {
		fmt.Fprintf(&b, "  dtype: %s\n", e.KVCacheDtype)
	}
	if e.NoPrefixReuse {
		b.WriteString("  enable_block_reuse: false\n")
	}
	fmt.Fprintf(&b, "scheduler_config:\n  capacity_scheduler_policy: %s\n  context_chunking_policy: FIRST_COME_FIRST_SERVED\n",
		strings.ToUpper(e.CapacityPolicy))
	if e.BatchWaitTimeoutIters > 0 || e.BatchWaitMaxTokensRatio > 0 { // T-R6, as predicted
		fmt.Fprintf(&b, "batch_wait_timeout_iters: %d\nbatch_wait_max_tokens_ratio: %s\n", e.BatchWaitTimeoutIters, ftoa(e.BatchWaitMaxTokensRatio))
	}
	if e.DisableCUDAGraph {
		b.WriteString("cuda_graph_config: null\n")
	}
	if e.MaxModelLen > 0 {
		fmt.Fprintf(&b, "max_seq_len: %d\n", e.MaxModelLen)
	}
	switch { // one-model MTP or EAGLE3 (the acceptance is the model's and the data's, not a key)
	case e.DraftTokens > 0 && e.SeparateDrafter():
		fmt.Fprintf(&b, "speculative_config:\n  decoding_type: Eagle\n  max_draft_len: %d\n  speculative_model_dir: %s\n  eagle3_one_model: true\n",
			e.DraftTokens, yamlScalar(e.DraftModel))
	case e.DraftTokens > 0:
		fmt.Fprintf(&b, "speculative_config:\n  decoding_type: MTP\n  num_nextn_predict_layers: %d\n", e.DraftTokens)
	}
	return b.String()
}

// shellQuote quotes s for a POSIX shell when it holds anything but safe
// characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=+,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// yamlScalar quotes a YAML value unless it is a plain number, boolean or safe
// word.
func yamlScalar(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./") == "" &&
		!strings.HasPrefix(s, "-") || isNumber(s) {
		return s
	}
	return fmt.Sprintf("%q", s)
}

func isNumber(s string) bool {
	_, err := parseInt(s, -1<<30)
	return err == nil
}
