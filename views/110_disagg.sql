-- disagg: the disaggregated rows (issue 11) with their pools and the tandem's KV
-- handoff, at each row's best available tier (as points presents it; read from the
-- tables so migrations that drop the points view leave this one valid). p_* / d_*
-- describe the prefill and decode pools: workers, per-worker batch (the running
-- cap), parallelism, system and GPUs (workers × tp × pp × dp). kv_transfer_ms_mean
-- /p99 is the KV flow's duration, p_queue_ms_p99 the p99 of the prefill-side
-- queueing delay, d_headroom_min the smallest free share of a decode worker's KV at
-- a transfer decision (1 when the decode KV does not bind), multi_stable 1 when two
-- steady regimes exist (then the row's numbers are their equal mixture). Composed
-- rows (a prefix: no tandem yet) have NULL queueing and handoff columns.
CREATE VIEW disagg AS
SELECT
    o.key,
    o.model,
    o.system,
    o.backend,
    o.version,
    o.isl,
    o.osl,
    o.prefix,
    o.parallel,
    o.p_system,
    o.p_workers,
    o.p_batch,
    o.p_tp,
    o.p_pp,
    o.p_dp,
    o.p_gpus,
    o.d_system,
    o.d_workers,
    o.d_batch,
    o.d_tp,
    o.d_pp,
    o.d_dp,
    o.d_gpus,
    o.num_gpus,
    o.concurrency,
    o.oom,
    o.ttft,
    o.tpot,
    o.request_latency,
    o.tokens_per_s_per_gpu,
    o.tokens_per_s_per_user,
    CASE WHEN r.key IS NULL THEN o.ttft_steady_mean ELSE r.ttft_steady_mean END AS ttft_steady_mean,
    CASE WHEN r.key IS NULL THEN o.ttft_steady_p50 ELSE r.ttft_steady_p50 END AS ttft_steady_p50,
    CASE WHEN r.key IS NULL THEN o.ttft_steady_p99 ELSE r.ttft_steady_p99 END AS ttft_steady_p99,
    o.ttft_steady_p99_lo,
    o.ttft_steady_p99_hi,
    o.bracket_certain,
    CASE WHEN r.key IS NULL THEN o.itl_mean ELSE r.itl_mean END AS itl_mean,
    CASE WHEN r.key IS NULL THEN o.itl_p50 ELSE r.itl_p50 END AS itl_p50,
    CASE WHEN r.key IS NULL THEN o.itl_p99 ELSE r.itl_p99 END AS itl_p99,
    CASE WHEN r.key IS NULL THEN o.tpot_mean ELSE r.tpot_mean END AS tpot_mean,
    CASE WHEN r.key IS NULL THEN o.tpot_p99 ELSE r.tpot_p99 END AS tpot_p99,
    CASE WHEN r.key IS NULL THEN o.e2e_mean ELSE r.e2e_mean END AS e2e_mean,
    CASE WHEN r.key IS NULL THEN o.e2e_p99 ELSE r.e2e_p99 END AS e2e_p99,
    CASE WHEN r.key IS NULL THEN o.kv_transfer_ms_mean ELSE r.kv_transfer_ms_mean END AS kv_transfer_ms_mean,
    CASE WHEN r.key IS NULL THEN o.kv_transfer_ms_p99 ELSE r.kv_transfer_ms_p99 END AS kv_transfer_ms_p99,
    CASE WHEN r.key IS NULL THEN o.p_queue_ms_p99 ELSE r.p_queue_ms_p99 END AS p_queue_ms_p99,
    CASE WHEN r.key IS NULL THEN o.d_headroom_min ELSE r.d_headroom_min END AS d_headroom_min,
    CASE WHEN r.key IS NULL THEN o.multi_stable ELSE r.multi_stable END AS multi_stable,
    CASE WHEN r.key IS NULL THEN o.queueing_tier ELSE 'quantitative' END AS queueing_tier,
    CASE WHEN r.key IS NULL THEN o.workload_fidelity ELSE r.workload_fidelity END AS workload_fidelity,
    o.evaluator,
    o.is_pareto
FROM operating_points AS o
LEFT JOIN quantitative_results AS r ON r.key = o.key
WHERE o.mode = 'disagg';
