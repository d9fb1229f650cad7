-- disagg: the disaggregated rows (issue 11) with their pools and the tandem's KV
-- handoff, at each row's best available tier (as in points). p_* / d_* describe the
-- prefill and decode pools: workers, per-worker batch (the running cap), parallelism,
-- system and GPUs (workers × tp × pp × dp). kv_transfer_ms_mean/p99 is the KV flow's
-- duration, p_queue_ms_p99 the p99 of the prefill-side queueing delay, d_headroom_min
-- the smallest free share of a decode worker's KV at a transfer decision (1 when the
-- decode KV does not bind), multi_stable 1 when two steady regimes exist (then the
-- row's numbers are their equal mixture). Composed rows (a prefix: no tandem yet)
-- have NULL queueing and handoff columns.
CREATE VIEW disagg AS
SELECT
    key,
    model,
    system,
    backend,
    version,
    isl,
    osl,
    prefix,
    parallel,
    p_system,
    p_workers,
    p_batch,
    p_tp,
    p_pp,
    p_dp,
    p_gpus,
    d_system,
    d_workers,
    d_batch,
    d_tp,
    d_pp,
    d_dp,
    d_gpus,
    num_gpus,
    concurrency,
    oom,
    ttft,
    tpot,
    request_latency,
    tokens_per_s_per_gpu,
    tokens_per_s_per_user,
    ttft_steady_mean,
    ttft_steady_p50,
    ttft_steady_p99,
    ttft_steady_p99_lo,
    ttft_steady_p99_hi,
    bracket_certain,
    itl_mean,
    itl_p50,
    itl_p99,
    tpot_mean,
    tpot_p99,
    e2e_mean,
    e2e_p99,
    kv_transfer_ms_mean,
    kv_transfer_ms_p99,
    p_queue_ms_p99,
    d_headroom_min,
    multi_stable,
    queueing_tier,
    workload_fidelity,
    evaluator,
    is_pareto
FROM points
WHERE mode = 'disagg';
