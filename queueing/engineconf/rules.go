package engineconf

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/aicdb/aicdb/engine"
)

// class says what a key is to the model.
type class int

const (
	classScheduling class = iota // mapped onto engine.Spec or accepted at the modelled value
	classHarmless                // no effect on scheduling: ignored and listed
	classRejected                // changes scheduling in a way the model does not represent
	classLayout                  // names the worker's parallelism: checked against the prediction's (CheckLayout)
)

// timingOnly is a boolean key with no scheduling effect whose true value the
// perf data cannot price: accepted, and warned about (Config.TimingLine).
func timingOnly(why string) rule {
	r := boolKey(func(*engine.Spec, bool) {})
	r.timing = why
	return r
}

// noCustomARTiming is the timing warning of the keys that turn the custom
// all-reduce off.
const noCustomARTiming = "all-reduces run through NCCL, not the custom all-reduce the perf data times, so predicted pass times at tp > 1 may be optimistic"

// graphsOffKey is a boolean key that turns CUDA graphs off at value off
// (engine.Spec.DisableCUDAGraph: no scheduling rule, no pool change), warned
// about there with why.
func graphsOffKey(off bool, why string) rule {
	r := boolKey(func(e *engine.Spec, v bool) { e.DisableCUDAGraph = v == off })
	r.timing, r.timingAt = why, strconv.FormatBool(off)
	return r
}

// prefixCacheOffKey is a boolean key that turns the prefix cache off at value
// off (engine.Spec.NoPrefixReuse).
func prefixCacheOffKey(off bool) rule {
	return boolKey(func(e *engine.Spec, v bool) { e.NoPrefixReuse = v == off })
}

// noGraphTiming is the timing warning of the keys that turn CUDA graphs off.
const noGraphTiming = "passes run without CUDA graphs, but the perf data was measured with them, so predicted decode times (ITL, TPOT) may be optimistic"

// rule is how one normalised key of one backend is read.
type rule struct {
	class  class
	isBool bool
	why    string                         // classRejected: what it changes
	check  func(v string) (string, error) // canonical value or why v is refused
	apply  func(e *engine.Spec, v string) // v is check's canonical value
	// timing says what the perf data cannot price when the key's canonical value
	// is timingAt ("" = "true") — or, with timingUnless set, is anything but
	// timingUnless, or with timingAny, is any value: the key is applied, and
	// Config.TimingLine warns with it.
	timing, timingAt, timingUnless string
	timingAny                      bool
	// layout is the dimension a classLayout key names (dimTP …).
	layout string
	// late keys are applied after the others, whatever their place in the file:
	// they read another key (num_gpu_blocks_override the block size) or win over
	// one (SGLang's cuda_graph_bs sets cuda_graph_max_bs).
	late bool
}

// harmless is the rule of a key with no effect on scheduling.
func harmless() rule { return rule{class: classHarmless} }

func rejected(why string) rule { return rule{class: classRejected, why: why} }

// drafterKey maps a drafter's checkpoint (a non-empty path or model ID) onto
// engine.Spec.DraftModel: vLLM's speculative_config model, SGLang's
// speculative_draft_model_path.
func drafterKey() rule {
	return rule{
		check: func(v string) (string, error) {
			if v = strings.TrimSpace(v); v == "" {
				return "", errors.New("the drafter's checkpoint is empty")
			}
			return v, nil
		},
		apply: func(e *engine.Spec, v string) { e.DraftModel = v },
	}
}

// intKey maps an integer ≥ lo onto a field.
func intKey(lo int, set func(e *engine.Spec, v int)) rule {
	return rule{
		check: func(v string) (string, error) {
			n, err := parseInt(v, lo)
			return strconv.Itoa(n), err
		},
		apply: func(e *engine.Spec, v string) { n, _ := strconv.Atoi(v); set(e, n) },
	}
}

// fractionKey is a fraction in (0, 1], or in [0, 1] with zero (0: the
// feature off), applied by set.
func fractionKey(zero bool, set func(e *engine.Spec, v float64)) rule {
	want := "want a fraction in (0, 1]"
	if zero {
		want = "want a fraction in [0, 1]"
	}
	return rule{
		check: func(v string) (string, error) {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || !(f > 0 || zero && f == 0) || !(f <= 1) {
				return "", errors.New(want)
			}
			return ftoa(f), nil
		},
		apply: func(e *engine.Spec, v string) {
			f, _ := strconv.ParseFloat(v, 64)
			set(e, f)
		},
	}
}

// memFractionKey maps a memory fraction in (0, 1] onto engine.Spec.MemFraction
// (the KV pool's size: refine.KVPoolTokens).
func memFractionKey() rule {
	return fractionKey(false, func(e *engine.Spec, v float64) { e.MemFraction = v })
}

// maxKVBytes bounds kv_cache_memory_bytes (1 PiB: no GPU comes near).
const maxKVBytes = 1 << 50

// kvBytesKey maps vLLM's kv_cache_memory_bytes (the KV pool per GPU) onto
// engine.Spec.KVCacheMemoryBytes. Like vLLM's human-readable integers it takes
// a suffix: k, m, g, t for powers of 1000, K, M, G, T for powers of 1024.
func kvBytesKey() rule {
	return rule{
		check: func(v string) (string, error) {
			v, mult := cutSuffix(strings.TrimSpace(v), "kmgt", "KMGT")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 || n > maxKVBytes/mult {
				return "", fmt.Errorf("want a byte count in 1..%d (suffixes k, m, g, t or K, M, G, T)", int64(maxKVBytes))
			}
			return strconv.FormatInt(n*mult, 10), nil
		},
		apply: func(e *engine.Spec, v string) { e.KVCacheMemoryBytes, _ = strconv.ParseInt(v, 10, 64) },
	}
}

// maxLenKey maps the engine's longest request (prompt + output tokens) onto
// MaxModelLen: a count, with vLLM's human-readable suffixes k, m (×1000) and
// K, M (×1024); "auto" and -1 (vLLM: the model's own length) leave it unset.
func maxLenKey() rule {
	return rule{
		check: func(v string) (string, error) {
			v = strings.TrimSpace(v)
			if strings.EqualFold(v, "auto") || v == "-1" {
				return "0", nil
			}
			v, mult := cutSuffix(v, "km", "KM")
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 || n > maxModelLen/mult {
				return "", fmt.Errorf("want a token count in 1..%d (suffixes k, m or K, M), or auto", maxModelLen)
			}
			return strconv.FormatInt(n*mult, 10), nil
		},
		apply: func(e *engine.Spec, v string) { e.MaxModelLen, _ = strconv.Atoi(v) },
	}
}

// cutSuffix splits a count from its unit suffix: the n-th letter of dec
// multiplies by 1000ⁿ, of bin by 1024ⁿ; no suffix is 1.
func cutSuffix(v, dec, bin string) (string, int64) {
	if n := len(v); n > 1 {
		if i := strings.IndexByte(dec, v[n-1]); i >= 0 {
			return v[:n-1], pow(1000, i+1)
		}
		if i := strings.IndexByte(bin, v[n-1]); i >= 0 {
			return v[:n-1], pow(1024, i+1)
		}
	}
	return v, 1
}

// maxModelLen bounds maxLenKey (far above any model's context window).
const maxModelLen = 1 << 30

func pow(b int64, n int) int64 {
	p := int64(1)
	for range n {
		p *= b
	}
	return p
}

// kvDtypeKey maps a KV-cache dtype onto engine.Spec.KVCacheDtype as the perf
// data's KV quant it stores at (names: the engine's spellings → bfloat16, fp8,
// int8; 16-bit dtypes are the perf data's bfloat16); auto (the model's) is "".
// engineconf.CheckKVQuant compares it with the point's KV quant.
func kvDtypeKey(names map[string]string) rule {
	return rule{
		check: func(v string) (string, error) {
			lv := strings.ToLower(strings.TrimSpace(v))
			if lv == "auto" {
				return lv, nil
			}
			if q, ok := names[lv]; ok {
				return q, nil
			}
			ks := make([]string, 0, len(names))
			for k := range names {
				ks = append(ks, k)
			}
			slices.Sort(ks)
			return "", fmt.Errorf("want auto or one of %s (the KV caches the perf data times)", strings.Join(ks, ", "))
		},
		apply: func(e *engine.Spec, v string) {
			if v == "auto" {
				v = ""
			}
			e.KVCacheDtype = v
		},
	}
}

// KV-cache dtype spellings per backend (vLLM CacheDType, TensorRT-LLM
// KvCacheConfig.dtype, SGLang --kv-cache-dtype) as the perf data's KV quants.
var (
	vllmKVDtypes = map[string]string{"bfloat16": "bfloat16", "float16": "bfloat16", "half": "bfloat16",
		"fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "fp8_inc": "fp8", "fp8_ds_mla": "fp8"}
	trtllmKVDtypes = map[string]string{"bfloat16": "bfloat16", "float16": "bfloat16", "fp8": "fp8", "int8": "int8"}
	sglangKVDtypes = map[string]string{"bf16": "bfloat16", "bfloat16": "bfloat16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}
)

// graphBSKey maps SGLang's cuda_graph_bs list onto engine.Spec.CUDAGraphMaxBS:
// SGLang sets cuda_graph_max_bs = max(cuda_graph_bs) when the list is given
// (refine.CUDAGraphMaxBS), so it is applied late and wins over
// cuda_graph_max_bs.
func graphBSKey() rule {
	return rule{late: true,
		check: func(v string) (string, error) {
			f := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
			if len(f) == 0 {
				return "", fmt.Errorf("want a list of integers ≥ 1")
			}
			out := make([]string, len(f))
			for i, w := range f {
				n, err := parseInt(w, 1)
				if err != nil {
					return "", fmt.Errorf("want a list of integers ≥ 1")
				}
				out[i] = strconv.Itoa(n)
			}
			return strings.Join(out, ","), nil
		},
		apply: func(e *engine.Spec, v string) {
			m := 0
			for w := range strings.SplitSeq(v, ",") {
				n, _ := strconv.Atoi(w)
				m = max(m, n)
			}
			e.CUDAGraphMaxBS = m
		},
	}
}

// boolKey maps a boolean onto a field.
func boolKey(set func(e *engine.Spec, v bool)) rule {
	return rule{isBool: true,
		check: func(v string) (string, error) {
			b, err := parseBool(v)
			return strconv.FormatBool(b), err
		},
		apply: func(e *engine.Spec, v string) { set(e, v == "true") },
	}
}

// onlyKey accepts a scheduling key only at the value(s) the model assumes (case
// insensitive; numbers compared as numbers); other values change scheduling.
func onlyKey(what string, allowed ...string) rule {
	return rule{
		check: func(v string) (string, error) {
			lv := strings.ToLower(strings.TrimSpace(v))
			for _, a := range allowed {
				if lv == a {
					return a, nil
				}
				if x, err := strconv.ParseFloat(lv, 64); err == nil {
					if y, err := strconv.ParseFloat(a, 64); err == nil && x == y {
						return a, nil
					}
				}
			}
			return "", fmt.Errorf("the model represents only %s = %s (%s)", what, strings.Join(allowed, " or "), "other values change scheduling in ways it does not model")
		},
		apply: func(*engine.Spec, string) {},
	}
}

// streamIntervalKey accepts a streaming interval of 1 only: at N > 1 the server
// sends a request's tokens N at a time, so the client's TTFT, inter-token gaps
// and TPOT are not the per-token times the model predicts (engines schedule the
// same passes either way).
func streamIntervalKey() rule {
	return rule{
		check: func(v string) (string, error) {
			n, err := parseInt(v, 1)
			if err != nil {
				return "", err
			}
			if n != 1 {
				return "", fmt.Errorf("the server streams each request's tokens %d at a time, so the client does not see the per-token TTFT and inter-token gaps the model predicts; set 1 or remove it", n)
			}
			return "1", nil
		},
		apply: func(*engine.Spec, string) {},
	}
}

// zeroOnly accepts a numeric scheduling key only at 0 (the feature off); why
// says what another value does.
func zeroOnly(why string) rule {
	return rule{
		check: func(v string) (string, error) {
			if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil || f != 0 {
				return "", fmt.Errorf("%s; set 0 or remove it", why)
			}
			return "0", nil
		},
		apply: func(*engine.Spec, string) {},
	}
}

// boolOnly accepts a boolean scheduling key only at value want.
func boolOnly(want bool, why string) rule {
	return rule{isBool: true,
		check: func(v string) (string, error) {
			b, err := parseBool(v)
			if err != nil {
				return "", err
			}
			if b != want {
				return "", fmt.Errorf("%s; the model represents only %t", why, want)
			}
			return strconv.FormatBool(b), nil
		},
		apply: func(*engine.Spec, string) {},
	}
}

// moeBackendKey is TensorRT-LLM's moe_config.backend: no scheduling effect, but
// the perf data times the CUTLASS MoE (kernel source moe_torch_flow_cutlass,
// with its min-latency grid; PERFDB.md), so another backend's expert time is
// not what is priced: accepted, and warned about unless CUTLASS.
func moeBackendKey() rule {
	return rule{
		check: func(v string) (string, error) {
			b, ok := oneName(strings.ToUpper(v))
			if !ok {
				return "", fmt.Errorf("want a MoE backend name (CUTLASS, TRTLLM, WIDEEP, CUTEDSL, DEEPGEMM, VANILLA)")
			}
			return b, nil
		},
		apply:        func(*engine.Spec, string) {},
		timing:       "the perf data times the CUTLASS MoE kernels, so predicted pass times with another MoE backend may be off in either direction",
		timingUnless: "CUTLASS",
	}
}

// kernelChoiceKey is a key that picks the kernels of one op (an attention, MoE
// runner or all-to-all backend, named by what): no scheduling effect, but the
// perf data times the kernels aiconfigurator's collector ran for that op, which
// aicdb does not match against an explicit choice, so the key is applied and
// warned about at any value.
func kernelChoiceKey(what string) rule {
	return rule{
		check: func(v string) (string, error) {
			t, ok := oneName(v)
			if !ok {
				return "", fmt.Errorf("want one %s name", what)
			}
			return t, nil
		},
		apply:     func(*engine.Spec, string) {},
		timing:    "the perf data times the " + what + " kernels aiconfigurator's collector ran, and this choice is not checked against them, so predicted pass times may be off in either direction",
		timingAny: true,
	}
}

// oneName trims v and reports whether it is one kernel backend's name: a single
// non-empty token.
func oneName(v string) (string, bool) {
	t := strings.TrimSpace(v)
	return t, t != "" && !strings.ContainsAny(t, " \t")
}

// eplbTiming and torchCompileTiming are the timing warnings of vLLM's
// expert-parallel load balancer and SGLang's torch.compile.
const (
	eplbTiming         = "the load balancer replicates and moves experts between ranks, while the perf data's MoE tables time a fixed expert placement, so predicted MoE times may be off in either direction"
	torchCompileTiming = "torch.compile fuses the decode pass's kernels, which the perf data times uncompiled, so predicted decode times may be pessimistic"
)

// lookup returns the rule of backend's normalised key.
func lookup(backend engine.Backend, key string) (rule, bool) {
	switch backend {
	case engine.VLLM:
		return vllmRule(key)
	case engine.TRTLLM:
		return trtllmRule(key)
	case engine.SGLang:
		return sglangRule(key)
	}
	return rule{}, false
}

// vllmMTPMethods are vLLM's speculative_config methods that draft with the
// model's own MTP layers (vllm/config/speculative.py's MTP model types and their
// alias "mtp"): priced as the model's MTP layers (perfdb.Model.MTPLayers).
var vllmMTPMethods = []string{"mtp", "deepseek_mtp", "glm4_moe_mtp", "qwen3_next_mtp", "mimo_mtp", "ernie_mtp", "longcat_flash_mtp"}

// vllmRule: vLLM engine arguments (vllm/engine/arg_utils.py; SCHEDULERS.md §2).
func vllmRule(k string) (rule, bool) {
	// A YAML config nests these mappings (kv_transfer_config.kv_connector, …):
	// the whole mapping is what changes scheduling, whatever its keys.
	if p, _, ok := strings.Cut(k, "."); ok && p == "kv_transfer_config" {
		return vllmRule(p)
	}
	switch k {
	case "speculative_config.method": // MTP over the model's own MTP layers, or an EAGLE / EAGLE3 head (V-S1..V-S4)
		return rule{
			check: func(v string) (string, error) {
				lv := strings.ToLower(strings.TrimSpace(v))
				if slices.Contains(vllmMTPMethods, lv) || slices.Contains(engine.DraftMethods, lv) {
					return lv, nil
				}
				return "", fmt.Errorf("drafts with a draft model of its own or n-grams, which the model does not represent; the model's own MTP layers (method %s) and EAGLE / EAGLE3 heads (method %s, with model) are modelled",
					strings.Join(vllmMTPMethods, ", "), strings.Join(engine.DraftMethods, ", "))
			},
			apply: func(e *engine.Spec, v string) {
				if slices.Contains(engine.DraftMethods, v) {
					e.DraftMethod = v
				}
			},
		}, true
	case "speculative_config.model": // the EAGLE / EAGLE3 head's checkpoint (recorded: deploy launches it)
		return drafterKey(), true
	case "speculative_config.num_speculative_tokens": // the drafts per decode step (V-S1); acceptance from --nextn-accepted
		return intKey(1, func(e *engine.Spec, v int) { e.SetDrafts(v, e.DraftAccepted) }), true
	case "max_num_batched_tokens": // V-R1 token budget
		return intKey(1, func(e *engine.Spec, v int) { e.MaxNumBatchedTokens = v }), true
	case "max_num_seqs": // V-R2 running cap
		return intKey(1, func(e *engine.Spec, v int) { e.MaxNumSeqs = v }), true
	case "enable_chunked_prefill": // V-R3
		return boolKey(func(e *engine.Spec, v bool) { e.EnableChunkedPrefill = v }), true
	case "long_prefill_token_threshold": // V-R2/V-R3 per-request chunk cap
		return intKey(0, func(e *engine.Spec, v int) { e.LongPrefillTokenThreshold = v }), true
	case "async_scheduling": // V-R10..V-R12
		return boolKey(func(e *engine.Spec, v bool) { e.AsyncScheduling = v }), true
	case "block_size": // KV block
		return intKey(1, func(e *engine.Spec, v int) { e.BlockSize = v }), true
	case "gpu_memory_utilization": // KV pool size (V-R6 preemption)
		return memFractionKey(), true
	case "kv_cache_memory", "kv_cache_memory_bytes": // KV pool per GPU (V-R6)
		return kvBytesKey(), true
	case "num_gpu_blocks_override": // KV pool in blocks, block 0 the null block (V-R6)
		r := intKey(2, func(e *engine.Spec, v int) { e.SetGPUBlocks(v) })
		r.late = true // after block_size
		return r, true
	case "kv_cache_dtype": // must match the point's KV quant (CheckKVQuant)
		return kvDtypeKey(vllmKVDtypes), true
	case "scheduling_policy": // V-R4 FCFS waiting queue
		return onlyKey("scheduling_policy", "fcfs"), true
	case "max_num_partial_prefills", "max_long_partial_prefills": // one partial prefill at a time (V-R3)
		return onlyKey(k, "1"), true
	case "num_scheduler_steps":
		return onlyKey(k, "1"), true
	case "max_model_len": // requests longer than it are rejected at the API
		return maxLenKey(), true
	case "disable_custom_all_reduce":
		return timingOnly(noCustomARTiming), true
	case "attention_backend":
		return kernelChoiceKey("attention"), true
	case "all2all_backend":
		return kernelChoiceKey("expert all-to-all"), true
	case "enable_eplb":
		return timingOnly(eplbTiming), true
	case "cpu_offload_gb":
		return rule{
			check: func(v string) (string, error) {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err != nil || f != 0 {
					return "", fmt.Errorf("weights offloaded to CPU memory stream to the GPU in every pass, which the perf data (weights in GPU memory) does not time; set 0 or remove it")
				}
				return "0", nil
			},
			apply: func(*engine.Spec, string) {},
		}, true
	case "enable_prefix_caching": // V-R8; off: a workload prefix is not reused
		return prefixCacheOffKey(false), true
	case "enforce_eager":
		return graphsOffKey(true, noGraphTiming), true
	case "tensor_parallel_size", "tp":
		return layoutKey(dimTP), true
	case "pipeline_parallel_size", "pp":
		return layoutKey(dimPP), true
	case "data_parallel_size", "dp":
		return layoutKey(dimDP), true
	case "enable_expert_parallel":
		return layoutKey(dimEP), true
	case "speculative_config": // a mapping: its keys (expandJSONConfig for the CLI's JSON form)
		return rejected("speculative decoding given as something other than a mapping of method and num_speculative_tokens"), true
	case "speculative_model", "num_speculative_tokens", "speculative_draft_tensor_parallel_size":
		return rejected("speculative decoding with a separate draft model (the pre-speculative_config flags): only speculative_config with an MTP method is modelled"), true
	case "scheduler_cls", "scheduler_class":
		return rejected("a custom scheduler class"), true
	case "kv_transfer_config":
		return rejected("a KV connector: requests wait for remote KV before they are scheduled"), true
	case "num_lookahead_slots":
		return rejected("lookahead slots reserve KV for speculative tokens"), true
	case "model", "served_model_name", "tokenizer", "tokenizer_mode", "revision", "code_revision",
		"tokenizer_revision", "trust_remote_code", "download_dir", "load_format", "config_format",
		"dtype", "quantization", "seed", "host", "port", "api_key",
		"uds", "allowed_origins", "allowed_methods", "allowed_headers", "allow_credentials", "root_path",
		"swap_space", "preemption_mode",
		"data_parallel_size_local",
		"data_parallel_address", "data_parallel_rpc_port", "data_parallel_backend",
		"distributed_executor_backend",
		"worker_cls", "worker_extension_cls",
		"cudagraph_capture_sizes", "cuda_graph_sizes", "compilation_config", "o",
		"prefix_caching_hash_algo", "chat_template", "chat_template_content_format",
		"response_role", "enable_auto_tool_choice", "tool_call_parser", "tool_parser_plugin",
		"reasoning_parser", "enable_reasoning", "generation_config", "override_generation_config",
		"max_logprobs", "disable_frontend_multiprocessing", "enable_server_load_tracking",
		"disable_fastapi_docs", "enable_force_include_usage", "return_tokens_as_token_ids",
		"hf_overrides", "hf_token", "limit_mm_per_prompt", "skip_tokenizer_init", "config",
		"enable_sleep_mode", "calculate_kv_scales", "disable_cascade_attn", "guided_decoding_backend",
		"structured_outputs_config", "api_server_count", "headless", "override_neuron_config",
		"max_seq_len_to_capture", "collect_detailed_traces", "show_hidden_metrics_for_version",
		"enable_chunked_mm_input", "disable_chunked_mm_input", "lora_modules", "enable_lora", "max_loras",
		"max_lora_rank", "ray_workers_use_nsight", "kv_events_config", "enable_request_id_headers",
		"use_tqdm_on_load", "model_impl", "safetensors_load_strategy", "pt_load_map_location":
		return harmless(), true
	}
	for _, p := range []string{"ssl_", "otlp_", "log_", "disable_log", "enable_log", "uvicorn_", "middleware", "mm_", "hf_", "lora_", "prompt_adapter"} {
		if strings.HasPrefix(k, p) {
			return harmless(), true
		}
	}
	return rule{}, false
}

// trtllmRule: TensorRT-LLM LLM API arguments (extra_llm_api_options /
// trtllm-serve flags; SCHEDULERS.md §4).
func trtllmRule(k string) (rule, bool) {
	switch k {
	case "max_batch_size": // T-R1 running cap
		return intKey(1, func(e *engine.Spec, v int) { e.MaxBatchSize = v }), true
	case "max_num_tokens": // T-R3 token budget
		return intKey(1, func(e *engine.Spec, v int) { e.MaxNumTokens = v }), true
	case "tensor_parallel_size", "tp_size":
		return layoutKey(dimTP), true
	case "pipeline_parallel_size", "pp_size":
		return layoutKey(dimPP), true
	case "moe_expert_parallel_size", "ep_size":
		return layoutKey(dimMoEEP), true
	case "moe_tensor_parallel_size":
		return layoutKey(dimMoETP), true
	case "enable_attention_dp":
		return layoutKey(dimADP), true
	case "context_parallel_size", "moe_cluster_parallel_size":
		return layoutKey(dimCP), true
	case "moe_config.backend":
		return moeBackendKey(), true
	case "enable_chunked_prefill", "enable_chunked_context": // T-R3 chunked context
		return boolKey(func(e *engine.Spec, v bool) { e.EnableChunkedPrefill = v }), true
	case "disable_overlap_scheduler": // §4.2 overlap executor
		return boolKey(func(e *engine.Spec, v bool) { e.AsyncScheduling = !v }), true
	case "kv_cache_config.tokens_per_block", "tokens_per_block":
		return intKey(1, func(e *engine.Spec, v int) { e.BlockSize = v }), true
	case "kv_cache_config.max_tokens": // T-R1 GUARANTEED_NO_EVICT admission
		return intKey(0, func(e *engine.Spec, v int) { e.KVCapacityTokens = v }), true
	case "kv_cache_config.free_gpu_memory_fraction", "free_gpu_memory_fraction", "kv_cache_free_gpu_memory_fraction": // KV pool (T-R1/T-R2)
		return memFractionKey(), true
	case "kv_cache_config.dtype": // must match the point's KV quant (CheckKVQuant)
		return kvDtypeKey(trtllmKVDtypes), true
	case "scheduler_config.capacity_scheduler_policy": // T-R1 / T-R2
		r := onlyKey("capacity_scheduler_policy", "guaranteed_no_evict", "max_utilization")
		r.apply = func(e *engine.Spec, v string) { e.CapacityPolicy = v }
		return r, true
	case "scheduler_config.context_chunking_policy":
		return onlyKey("context_chunking_policy", "first_come_first_served"), true
	case "batch_wait_timeout_iters": // T-R6 batch waiting
		return intKey(0, func(e *engine.Spec, v int) { e.BatchWaitTimeoutIters = v }), true
	case "batch_wait_max_tokens_ratio": // T-R6 batch waiting
		return fractionKey(true, func(e *engine.Spec, v float64) { e.BatchWaitMaxTokensRatio = v }), true
	case "batch_wait_timeout_ms":
		return zeroOnly("the executor waits up to that many milliseconds for more requests before it schedules (a wall-clock wait the model does not represent)"), true
	case "max_beam_width":
		return onlyKey(k, "1"), true
	case "stream_interval":
		return streamIntervalKey(), true
	case "max_seq_len": // requests longer than it (prompt + output) are rejected
		return maxLenKey(), true
	case "use_cuda_graph": // the PyTorch backend's key before cuda_graph_config
		return graphsOffKey(false, noGraphTiming), true
	case "cuda_graph_config": // a scalar only when null (a mapping's keys are cuda_graph_config.*): graphs off
		return rule{
			check: func(v string) (string, error) {
				if v == "" || strings.EqualFold(v, "null") {
					return "null", nil
				}
				return "", fmt.Errorf("want a mapping of CUDA-graph settings or null (graphs off)")
			},
			apply:  func(e *engine.Spec, _ string) { e.DisableCUDAGraph = true },
			timing: noGraphTiming, timingAt: "null",
		}, true
	case "kv_cache_config.enable_block_reuse": // T-R5; off: a workload prefix is not reused
		return prefixCacheOffKey(false), true
	case "disable_prefix_cache": // the generator's name for enable_block_reuse false
		return prefixCacheOffKey(true), true
	case "attention_dp_config.enable_balance": // the other attention_dp_config keys act only with it
		return boolOnly(false, "attention-DP balancing holds context requests until every rank has one (up to timeout_iters)"), true
	case "speculative_config.decoding_type":
		// One-model MTP over the model's own layers, or an EAGLE3 head (decoding_type
		// Eagle; "Eagle3" in newer releases): the PyTorch flow's EAGLE3_ONE_MODEL
		// mode shares every scheduling property with MTP's one-model mode
		// (SpeculativeDecodingMode: support_overlap_scheduler,
		// needs_kv_cache_rewind, without_logits name the two together), so its
		// drafts are scheduled as MTP's (T-R3). Acceptance comes from
		// --nextn-accepted; checkTRTDrafts requires the draft length, and the
		// head's checkpoint beside Eagle only.
		r := onlyKey("speculative_config.decoding_type", "mtp", "eagle", "eagle3")
		r.apply = func(e *engine.Spec, v string) {
			if v == "mtp" {
				e.DraftMethod = ""
				return
			}
			e.DraftMethod = "eagle3"
		}
		return r, true
	case "speculative_config.num_nextn_predict_layers", "speculative_config.max_draft_len":
		return intKey(1, func(e *engine.Spec, v int) { e.DraftTokens = v }), true
	case "speculative_config.speculative_model_dir", "speculative_config.speculative_model": // the EAGLE3 head (aliases; recorded: deploy launches it)
		return drafterKey(), true
	case "speculative_config.eagle3_one_model":
		return boolOnly(true, "two-model EAGLE3 runs the head as an engine of its own, with its own KV cache and forward passes beside the target's"), true
	case "speculative_config.use_dynamic_tree":
		return boolOnly(false, "a dynamic tree of drafts verifies more tokens per step than a chain"), true
	case "speculative_config.eagle_choices":
		return rejected("a static tree of drafts verifies more tokens per step than a chain; only a linear chain of max_draft_len drafts is modelled"), true
	case "speculative_config.greedy_sampling", "speculative_config.posterior_threshold", "speculative_config.eagle3_layers_to_capture":
		return harmless(), true // the acceptance rule and the head's inputs: acceptance is --nextn-accepted's
	case "speculative_config", "speculative_model", "speculative_model_dir":
		return rejected("speculative decoding outside speculative_config's mapping: only one-model MTP (decoding_type MTP) and one-model EAGLE3 (decoding_type Eagle with speculative_model_dir) are modelled"), true
	case "scheduler_config.dynamic_batch_config.enable_batch_size_tuning",
		"scheduler_config.dynamic_batch_config.enable_max_num_tokens_tuning",
		"scheduler_config.dynamic_batch_config.dynamic_batch_moving_average_window":
		return rejected("dynamic batch tuning moves max_batch_size/max_num_tokens at run time"), true
	case "backend", "model", "tokenizer", "tokenizer_mode", "skip_tokenizer_init", "trust_remote_code",
		"revision", "tokenizer_revision", "dtype", "load_format", "checkpoint_format", "host", "port",
		"log_level", "cluster_size", "gpus_per_node",
		"max_input_len", "print_iter_log", "enable_iter_perf_stats", "enable_iter_req_stats",
		"attn_backend", "sampler_type", "num_postprocess_workers",
		"postprocess_tokenizer_dir", "return_perf_metrics", "enable_autotuner", "garbage_collection_gen0_threshold",
		"kv_cache_config.host_cache_size", "kv_cache_config.event_buffer_max_size", "kv_cache_config.enable_partial_reuse",
		"kv_cache_config.copy_on_partial_reuse", "kv_cache_config.onboard_blocks", "enable_layerwise_nvtx_marker", "allreduce_strategy",
		"mm_encoder_only", "served_model_name", "reasoning_parser", "tool_parser",
		"scheduler_config", "kv_cache_config", "moe_config", "cache_transceiver_config",
		"enable_min_latency", "cuda_graph_padding_enabled", "cuda_graph_batch_sizes",
		"cuda_graph_max_batch_size", "torch_compile_enabled", "extra_llm_api_options", "num_nodes",
		"metadata_server_config_file", "server_role", "msa_sparse_implementation", "enable_lm_head_tp_in_adp":
		return harmless(), true
	}
	for _, p := range []string{"cuda_graph_config.", "moe_config.", "cache_transceiver_config.", "torch_compile_config.",
		"attention_dp_config.", "lora_config.", "otlp_", "ssl_", "build_config."} {
		if strings.HasPrefix(k, p) {
			return harmless(), true
		}
	}
	return rule{}, false
}

// sglangRule: SGLang server arguments (sglang/srt/server_args.py; SCHEDULERS.md §3).
func sglangRule(k string) (rule, bool) {
	switch k {
	case "chunked_prefill_size": // S-R1 chunk budget; -1 (or 0) turns chunking off
		return rule{
			check: func(v string) (string, error) {
				n, err := parseInt(v, -1)
				if err != nil {
					return "", err
				}
				return strconv.Itoa(n), nil
			},
			apply: func(e *engine.Spec, v string) {
				n, _ := strconv.Atoi(v)
				if n <= 0 {
					e.EnableChunkedPrefill = false
					return
				}
				e.EnableChunkedPrefill, e.ChunkedPrefillSize = true, n
			},
		}, true
	case "max_prefill_tokens": // S-R1 second prompt cap
		return intKey(1, func(e *engine.Spec, v int) { e.MaxPrefillTokens = v }), true
	case "enable_mixed_chunk": // S-R3
		return boolKey(func(e *engine.Spec, v bool) { e.EnableMixedChunk = v }), true
	case "max_running_requests": // S-R2 request slots
		return intKey(1, func(e *engine.Spec, v int) { e.MaxNumSeqs = v }), true
	case "page_size":
		return intKey(1, func(e *engine.Spec, v int) { e.BlockSize = v }), true
	case "max_total_tokens": // KV pool (only the oracle models SGLang KV pressure)
		return intKey(1, func(e *engine.Spec, v int) { e.KVCapacityTokens = v }), true
	case "mem_fraction_static": // KV pool (S-R4 reservation, S-R5 retraction)
		return memFractionKey(), true
	case "cuda_graph_max_bs": // the graph reserve SGLang's default mem_fraction_static leaves
		return intKey(1, func(e *engine.Spec, v int) { e.CUDAGraphMaxBS = v }), true
	case "cuda_graph_bs": // cuda_graph_max_bs = max of the list
		return graphBSKey(), true
	case "kv_cache_dtype": // must match the point's KV quant (CheckKVQuant)
		return kvDtypeKey(sglangKVDtypes), true
	case "disable_cuda_graph":
		// SGLang 0.5.x keeps the graph reserve in mem_fraction_static either way.
		return graphsOffKey(true, "decode "+noGraphTiming), true
	case "disable_overlap_schedule": // §3.2 overlap scheduler (default on)
		return boolKey(func(e *engine.Spec, v bool) { e.AsyncScheduling = !v }), true
	case "schedule_policy": // S-R2 FCFS waiting queue
		return onlyKey("schedule_policy", "fcfs"), true
	case "schedule_conservativeness":
		return onlyKey(k, "1.0"), true
	case "enable_priority_scheduling":
		return boolOnly(false, "priority scheduling reorders the waiting queue"), true
	case "speculative_algorithm": // EAGLE chain: the model's own MTP layers (NEXTN is EAGLE) or an EAGLE / EAGLE3 head
		// Late: SGLang's server arguments turn the overlap scheduler and mixed chunk
		// off for it, whatever the file's other keys say (engine.Spec.SetDrafts);
		// checkSGLangDrafts requires speculative_num_steps beside it, and a head's
		// checkpoint beside EAGLE3. EAGLE with a draft model path drafts with that
		// head; NEXTN's path is the model's own MTP weights.
		r := onlyKey("speculative_algorithm", "nextn", "eagle", "eagle3")
		r.apply = func(e *engine.Spec, v string) {
			e.SetDrafts(e.DraftTokens, e.DraftAccepted)
			switch {
			case v == "nextn":
				e.DraftModel = ""
			case e.DraftModel != "":
				e.DraftMethod = v
			}
		}
		r.late = true
		return r, true
	case "speculative_num_steps": // the chain's drafts per decode step
		return intKey(1, func(e *engine.Spec, v int) { e.DraftTokens = v }), true
	case "speculative_eagle_topk":
		return onlyKey("speculative_eagle_topk", "1"), true // a tree of drafts verifies more tokens than it emits
	case "speculative_num_draft_tokens": // topk 1: num_steps + 1 (checkSGLangDrafts)
		return intKey(2, func(*engine.Spec, int) {}), true
	case "speculative_draft_model_path": // an EAGLE / EAGLE3 head (recorded: deploy launches it), or NEXTN's MTP weights (speculative_algorithm)
		return drafterKey(), true
	case "stream_interval":
		return streamIntervalKey(), true
	case "disable_custom_all_reduce":
		return timingOnly(noCustomARTiming), true
	case "attention_backend":
		return kernelChoiceKey("attention"), true
	case "moe_runner_backend":
		return kernelChoiceKey("MoE runner"), true
	case "moe_a2a_backend":
		return kernelChoiceKey("expert all-to-all"), true
	case "enable_torch_compile":
		return timingOnly(torchCompileTiming), true
	case "enable_deterministic_inference":
		return timingOnly("batch-invariant kernels run slower than the ones the perf data was measured with, so predicted pass times may be optimistic"), true
	case "context_length": // requests longer than it (prompt + max_new_tokens) are rejected
		return maxLenKey(), true
	case "scheduler_recv_interval": // S-R7: requests received every N iterations after decode-only batches
		return intKey(1, func(e *engine.Spec, v int) { e.SchedulerRecvInterval = v }), true
	case "disable_radix_cache": // S-R1; on: a workload prefix is not reused
		return prefixCacheOffKey(true), true
	case "tp_size", "tensor_parallel_size", "tp":
		return layoutKey(dimTP), true
	case "pp_size", "pipeline_parallel_size":
		return layoutKey(dimPP), true
	case "dp_size", "data_parallel_size", "dp":
		return layoutKey(dimDP), true
	case "ep_size", "expert_parallel_size", "ep":
		return layoutKey(dimMoEEP), true
	case "enable_dp_attention":
		return layoutKey(dimADP), true
	case "disaggregation_mode":
		return onlyKey(k, "null"), true
	case "model_path", "model", "tokenizer_path", "tokenizer_mode", "skip_tokenizer_init", "load_format",
		"trust_remote_code", "dtype", "quantization", "revision",
		"host", "port", "served_model_name", "chat_template", "random_seed", "api_key", "log_level",
		"log_level_http", "log_requests", "log_requests_level", "show_time_cost", "enable_metrics",
		"moe_dense_tp_size", "enable_dp_lm_head", "load_balance_method", "nnodes", "node_rank",
		"dist_init_addr", "disable_cuda_graph_padding", "sampling_backend",
		"disaggregation_transfer_backend",
		"disaggregation_bootstrap_port", "disaggregation_ib_device", "watchdog_timeout",
		"stream_output", "torch_compile_max_bs", "reasoning_parser",
		"tool_call_parser", "grammar_backend", "device", "base_gpu_id", "enable_nccl_nvls",
		"enable_custom_all_reduce", "enable_hierarchical_cache",
		"mm_enable_dp_encoder", "elastic_ep_backend", "decode_log_interval", "enable_cache_report",
		"file_storage_path", "kv_events_config", "config":
		return harmless(), true
	}
	for _, p := range []string{"log_", "enable_metrics", "otlp_", "ssl_", "hicache_", "lora_", "mm_"} {
		if strings.HasPrefix(k, p) {
			return harmless(), true
		}
	}
	return rule{}, false
}
