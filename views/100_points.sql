-- points: every operating point at its best available tier. Queueing columns come
-- from quantitative_results when the funnel has stored them for the row, else from
-- the row's own (screening) values; queueing_tier says which. The screening bracket
-- ttft_steady_p99_{lo,hi} is always the stored screening bracket. version is the
-- perf-data version the row is priced at; deployed_version the engine version it
-- is deployed at (the same unless --deployed-version named one without perf data
-- of its own, migration 00015).
CREATE VIEW points AS
SELECT
    o.key,
    o.model,
    o.system,
    o.backend,
    o.version,
    o.mode,
    o.isl,
    o.osl,
    o.prefix,
    o.tp,
    o.pp,
    o.dp,
    o.moe_tp,
    o.moe_ep,
    o.batch,
    o.ctx_tokens,
    o.max_num_batched_tokens,
    o.max_num_seqs,
    o.enable_chunked_prefill,
    o.database_mode,
    o.gemm_quant,
    o.kvcache_quant,
    o.fmha_quant,
    o.moe_quant,
    o.comm_quant,
    o.nextn,
    o.nextn_accepted,
    -- drafter: what proposes the nextn drafts (NULL without them): 'eagle' /
    -- 'eagle3' for an EAGLE head the engine config names (vLLM speculative_config,
    -- SGLang speculative_algorithm with its draft model), 'mtp' for the model's
    -- own MTP layers (TensorRT-LLM MTP, vLLM MTP, SGLang NEXTN).
    CASE WHEN o.nextn > 0 THEN coalesce(json_extract(o.engine_config, '$.engine.draft_method'),
        json_extract(o.engine_config, '$.decode.draft_method'), 'mtp') END AS drafter,
    o.p_workers,
    o.p_batch,
    o.p_tp,
    o.p_pp,
    o.p_dp,
    o.d_workers,
    o.d_batch,
    o.d_tp,
    o.d_pp,
    o.d_dp,
    o.evaluator,
    o.parallel,
    o.num_gpus,
    o.concurrency,
    o.oom,
    o.ttft,
    o.tpot,
    o.request_latency,
    o.request_rate,
    o.seq_per_s,
    o.seq_per_s_per_gpu,
    o.tokens_per_s,
    o.tokens_per_s_per_gpu,
    o.tokens_per_s_per_user,
    o.memory_gib,
    CASE WHEN r.key IS NULL THEN o.ttft_steady_mean ELSE r.ttft_steady_mean END AS ttft_steady_mean,
    CASE WHEN r.key IS NULL THEN o.ttft_steady_p50 ELSE r.ttft_steady_p50 END AS ttft_steady_p50,
    CASE WHEN r.key IS NULL THEN o.ttft_steady_p75 ELSE r.ttft_steady_p75 END AS ttft_steady_p75,
    CASE WHEN r.key IS NULL THEN o.ttft_steady_p90 ELSE r.ttft_steady_p90 END AS ttft_steady_p90,
    CASE WHEN r.key IS NULL THEN o.ttft_steady_p95 ELSE r.ttft_steady_p95 END AS ttft_steady_p95,
    CASE WHEN r.key IS NULL THEN o.ttft_steady_p99 ELSE r.ttft_steady_p99 END AS ttft_steady_p99,
    CASE WHEN r.key IS NULL THEN o.ttft_steady_p999 ELSE r.ttft_steady_p999 END AS ttft_steady_p999,
    o.ttft_steady_p99_lo,
    o.ttft_steady_p99_hi,
    o.bracket_certain,
    CASE WHEN r.key IS NULL THEN o.ttft_transient_mean ELSE r.ttft_transient_mean END AS ttft_transient_mean,
    CASE WHEN r.key IS NULL THEN o.ttft_transient_max ELSE r.ttft_transient_max END AS ttft_transient_max,
    CASE WHEN r.key IS NULL THEN o.itl_mean ELSE r.itl_mean END AS itl_mean,
    CASE WHEN r.key IS NULL THEN o.itl_p50 ELSE r.itl_p50 END AS itl_p50,
    CASE WHEN r.key IS NULL THEN o.itl_p99 ELSE r.itl_p99 END AS itl_p99,
    CASE WHEN r.key IS NULL THEN o.tpot_mean ELSE r.tpot_mean END AS tpot_mean,
    CASE WHEN r.key IS NULL THEN o.tpot_p50 ELSE r.tpot_p50 END AS tpot_p50,
    CASE WHEN r.key IS NULL THEN o.tpot_p99 ELSE r.tpot_p99 END AS tpot_p99,
    CASE WHEN r.key IS NULL THEN o.e2e_mean ELSE r.e2e_mean END AS e2e_mean,
    CASE WHEN r.key IS NULL THEN o.e2e_p50 ELSE r.e2e_p50 END AS e2e_p50,
    CASE WHEN r.key IS NULL THEN o.e2e_p99 ELSE r.e2e_p99 END AS e2e_p99,
    CASE WHEN r.key IS NULL THEN o.queueing_tier ELSE 'quantitative' END AS queueing_tier,
    CASE WHEN r.key IS NULL THEN o.workload_fidelity ELSE r.workload_fidelity END AS workload_fidelity,
    o.engine_profile,
    o.engine_config,
    o.workload,
    CASE WHEN o.deployed_version = '' THEN o.version ELSE o.deployed_version END AS deployed_version,
    o.p_system,
    o.d_system,
    o.p_gpus,
    o.d_gpus,
    CASE WHEN r.key IS NULL THEN o.kv_transfer_ms_mean ELSE r.kv_transfer_ms_mean END AS kv_transfer_ms_mean,
    CASE WHEN r.key IS NULL THEN o.kv_transfer_ms_p99 ELSE r.kv_transfer_ms_p99 END AS kv_transfer_ms_p99,
    CASE WHEN r.key IS NULL THEN o.p_queue_ms_p99 ELSE r.p_queue_ms_p99 END AS p_queue_ms_p99,
    CASE WHEN r.key IS NULL THEN o.d_headroom_min ELSE r.d_headroom_min END AS d_headroom_min,
    CASE WHEN r.key IS NULL THEN o.multi_stable ELSE r.multi_stable END AS multi_stable,
    o.is_pareto,
    CASE WHEN r.key IS NULL THEN o.kv_capacity_tokens ELSE r.kv_capacity_tokens END AS kv_capacity_tokens,
    CASE WHEN r.key IS NULL THEN o.kv_util_peak ELSE r.kv_util_peak END AS kv_util_peak,
    CASE WHEN r.key IS NULL THEN o.preemptions_per_request ELSE r.preemptions_per_request END AS preemptions_per_request,
    CASE WHEN r.key IS NULL OR r.preemptions_per_request IS NULL THEN o.kv_note ELSE 'quantitative' END AS kv_note,
    CASE WHEN (CASE WHEN r.key IS NULL THEN o.preemptions_per_request ELSE r.preemptions_per_request END) IS NULL THEN NULL
         WHEN (CASE WHEN r.key IS NULL THEN o.preemptions_per_request ELSE r.preemptions_per_request END) > 0 THEN 1
         ELSE 0 END AS preempts
FROM operating_points AS o
LEFT JOIN quantitative_results AS r ON r.key = o.key;

-- pareto: the frontier of tokens_per_s_per_gpu vs tokens_per_s_per_user (both
-- maximized) per model, system, backend, version, deployed version, mode and
-- workload (isl, osl, prefix, trace workload). The flag is_pareto is maintained
-- at sweep time by store.RefreshPareto with a window-function formulation (a row is on the front iff its
-- tokens_per_s_per_gpu beats the running max over every row with a higher
-- tokens_per_s_per_user); materialising it keeps `pareto` an index lookup.
-- The frontier is on the legacy throughput columns, so it does not move when the
-- funnel upgrades a row's latency columns to quantitative tier. Rows whose steady
-- state preempts (preempts = 1: vLLM preemption V-R6, SGLang retraction S-R5 under
-- the memory model's KV capacity) are not candidates: a deployment that thrashes
-- is no answer. Rows whose preemption is unknown (preempts NULL: rows of migration
-- 00012's predecessors, disagg rows) stay candidates. pareto_all is the frontier
-- with preempting rows included, flagged by preempts.
-- Aggregated and disaggregated rows have separate frontiers (mode is part of the
-- group, as in aiconfigurator) but one view: an SLA in the WHERE clause applies to
-- both kinds alike — a disagg row's percentile columns are the tandem's (screening
-- or quantitative), never a derated mean — so `SELECT * FROM pareto WHERE
-- ttft_steady_p99 < 200 ORDER BY tokens_per_s_per_gpu DESC` compares them.
CREATE VIEW pareto AS
SELECT * FROM points WHERE is_pareto = 1;

-- pareto_all: the frontier over every non-OOM row, preempting ones included (same
-- rule as store.RefreshPareto, computed here at query time); preempts = 1 flags the
-- rows the `pareto` view leaves out and `aicdb best` shows only with
-- --allow-preemption.
CREATE VIEW pareto_all AS
SELECT * FROM (
    SELECT p.*, max(tokens_per_s_per_gpu) OVER (
        PARTITION BY model, system, backend, version, mode, isl, osl, prefix, workload, deployed_version
        ORDER BY tokens_per_s_per_user DESC, tokens_per_s_per_gpu DESC, key
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ) AS dominating_tokens_per_s_per_gpu
    FROM points AS p
    WHERE oom = 0
)
WHERE dominating_tokens_per_s_per_gpu IS NULL OR tokens_per_s_per_gpu > dominating_tokens_per_s_per_gpu;

-- best_configs: per workload group and parallel configuration, the non-OOM point
-- with the highest tokens_per_s_per_gpu (aiconfigurator's group-by-parallel pick,
-- without SLA; put SLA filters in your WHERE or use `aicdb best`).
CREATE VIEW best_configs AS
SELECT * FROM (
    SELECT p.*, row_number() OVER (
        PARTITION BY model, system, backend, version, mode, isl, osl, prefix, workload, deployed_version, parallel
        ORDER BY tokens_per_s_per_gpu DESC, tokens_per_s_per_user DESC, key
    ) AS parallel_rank
    FROM points AS p
    WHERE oom = 0
)
WHERE parallel_rank = 1;
