-- accuracy: every measured statistic of every measurement beside its prediction
-- (issue 9 part 3), one row per (measurement, calibration, metric). predicted is
-- the point at its best stored tier (as the points view presents it; read from the
-- tables so migrations that drop the points view leave this one valid) (`aicdb accuracy` evaluates the quantitative
-- tier on demand and persists it); legacy is aiconfigurator's own static estimate
-- of the same point (ttft, tpot, request latency, throughput) where it has one.
-- rel_error = (predicted − measured) / measured. Measurements without a prediction
-- are kept with their reason (no perf data, a model family not modelled, OOM, not
-- predicted yet), never dropped. calibration '' = uncalibrated. run says what was
-- predicted: 'finite:n=N[,warmup=W]' = the benchmark run that produced the
-- measurement (burst start, N requests per worker, statistics over all of them;
-- aicdb accuracy --run benchmark, the default), 'steady' = the steady state.
-- nextn / nextn_accepted: the MTP the point was predicted with (accuracy --nextn;
-- 0 = none; NULL without a point). deployed_as: what deployed the measurement
-- when its file did not say it all (bench import: a deployment file's run entry
-- or rule, or a built-in campaign rule; NULL: the file's own fields).
CREATE VIEW accuracy AS
WITH base AS (
    SELECT
        m.id AS measurement_id,
        coalesce(mp.calibration, '') AS calibration,
        m.run_id, m.model, m.system, m.backend, m.version, m.mode, m.isl, m.osl, m.prefix,
        m.tp, m.pp, m.dp, m.moe_tp, m.moe_ep, m.gemm_quant, m.concurrency, m.request_rate,
        mp.model_used, mp.version_used, mp.version_mapping, mp.engine_profile, mp.evaluator,
        json_extract(m.extra, '$.deployed_as') AS deployed_as,
        mp.point_key, o.nextn, o.nextn_accepted,
        CASE WHEN o.key IS NULL THEN NULL
             WHEN instr(o.evaluator, '+run:') > 0 THEN substr(o.evaluator, instr(o.evaluator, '+run:') + 5)
             ELSE 'steady' END AS run,
        CASE WHEN o.key IS NULL THEN NULL WHEN r.key IS NULL THEN o.queueing_tier ELSE 'quantitative' END AS queueing_tier,
        CASE
            WHEN mp.measurement_id IS NULL THEN 'not predicted yet: run aicdb accuracy'
            WHEN mp.reason IS NOT NULL THEN mp.reason
            WHEN o.key IS NULL THEN 'prediction replaced: run aicdb accuracy again'
        END AS reason,
        m.ttft_mean AS m_ttft_mean, CASE WHEN r.key IS NULL THEN o.ttft_steady_mean ELSE r.ttft_steady_mean END AS p_ttft_mean, o.ttft AS l_ttft_mean,
        m.ttft_p50 AS m_ttft_p50, CASE WHEN r.key IS NULL THEN o.ttft_steady_p50 ELSE r.ttft_steady_p50 END AS p_ttft_p50, NULL AS l_ttft_p50,
        m.ttft_p99 AS m_ttft_p99, CASE WHEN r.key IS NULL THEN o.ttft_steady_p99 ELSE r.ttft_steady_p99 END AS p_ttft_p99, NULL AS l_ttft_p99,
        m.tpot_mean AS m_tpot_mean, CASE WHEN r.key IS NULL THEN o.tpot_mean ELSE r.tpot_mean END AS p_tpot_mean, o.tpot AS l_tpot_mean,
        m.tpot_p50 AS m_tpot_p50, CASE WHEN r.key IS NULL THEN o.tpot_p50 ELSE r.tpot_p50 END AS p_tpot_p50, NULL AS l_tpot_p50,
        m.tpot_p99 AS m_tpot_p99, CASE WHEN r.key IS NULL THEN o.tpot_p99 ELSE r.tpot_p99 END AS p_tpot_p99, NULL AS l_tpot_p99,
        m.itl_mean AS m_itl_mean, CASE WHEN r.key IS NULL THEN o.itl_mean ELSE r.itl_mean END AS p_itl_mean, NULL AS l_itl_mean,
        m.itl_p50 AS m_itl_p50, CASE WHEN r.key IS NULL THEN o.itl_p50 ELSE r.itl_p50 END AS p_itl_p50, NULL AS l_itl_p50,
        m.itl_p99 AS m_itl_p99, CASE WHEN r.key IS NULL THEN o.itl_p99 ELSE r.itl_p99 END AS p_itl_p99, NULL AS l_itl_p99,
        m.e2e_mean AS m_e2e_mean, CASE WHEN r.key IS NULL THEN o.e2e_mean ELSE r.e2e_mean END AS p_e2e_mean, o.request_latency AS l_e2e_mean,
        m.e2e_p50 AS m_e2e_p50, CASE WHEN r.key IS NULL THEN o.e2e_p50 ELSE r.e2e_p50 END AS p_e2e_p50, NULL AS l_e2e_p50,
        m.e2e_p99 AS m_e2e_p99, CASE WHEN r.key IS NULL THEN o.e2e_p99 ELSE r.e2e_p99 END AS p_e2e_p99, NULL AS l_e2e_p99,
        m.throughput_rps AS m_throughput_rps, r.throughput_rps AS p_throughput_rps, o.seq_per_s AS l_throughput_rps,
        m.output_tokens_per_s AS m_output_tokens_per_s, r.output_tokens_per_s AS p_output_tokens_per_s, o.tokens_per_s AS l_output_tokens_per_s
    FROM measurements m
    LEFT JOIN measurement_predictions mp ON mp.measurement_id = m.id
    LEFT JOIN operating_points o ON o.key = mp.point_key
    LEFT JOIN quantitative_results r ON r.key = mp.point_key
)
SELECT measurement_id, calibration, run_id, model, system, backend, version, mode, isl, osl, prefix,
    tp, pp, dp, moe_tp, moe_ep, gemm_quant, concurrency, request_rate, model_used, version_used, version_mapping,
    engine_profile, deployed_as, evaluator, run, nextn, nextn_accepted, point_key, queueing_tier, 'ttft_mean' AS metric, m_ttft_mean AS measured,
    CASE WHEN reason IS NULL THEN p_ttft_mean END AS predicted,
    CASE WHEN reason IS NULL AND m_ttft_mean > 0 THEN (p_ttft_mean - m_ttft_mean) / m_ttft_mean END AS rel_error,
    CASE WHEN reason IS NULL THEN l_ttft_mean END AS legacy,
    CASE WHEN reason IS NULL AND m_ttft_mean > 0 THEN (l_ttft_mean - m_ttft_mean) / m_ttft_mean END AS legacy_rel_error,
    reason
FROM base WHERE m_ttft_mean IS NOT NULL
UNION ALL
SELECT measurement_id, calibration, run_id, model, system, backend, version, mode, isl, osl, prefix,
    tp, pp, dp, moe_tp, moe_ep, gemm_quant, concurrency, request_rate, model_used, version_used, version_mapping,
    engine_profile, deployed_as, evaluator, run, nextn, nextn_accepted, point_key, queueing_tier, 'ttft_p50' AS metric, m_ttft_p50 AS measured,
    CASE WHEN reason IS NULL THEN p_ttft_p50 END AS predicted,
    CASE WHEN reason IS NULL AND m_ttft_p50 > 0 THEN (p_ttft_p50 - m_ttft_p50) / m_ttft_p50 END AS rel_error,
    CASE WHEN reason IS NULL THEN l_ttft_p50 END AS legacy,
    CASE WHEN reason IS NULL AND m_ttft_p50 > 0 THEN (l_ttft_p50 - m_ttft_p50) / m_ttft_p50 END AS legacy_rel_error,
    reason
FROM base WHERE m_ttft_p50 IS NOT NULL
UNION ALL
SELECT measurement_id, calibration, run_id, model, system, backend, version, mode, isl, osl, prefix,
    tp, pp, dp, moe_tp, moe_ep, gemm_quant, concurrency, request_rate, model_used, version_used, version_mapping,
    engine_profile, deployed_as, evaluator, run, nextn, nextn_accepted, point_key, queueing_tier, 'ttft_p99' AS metric, m_ttft_p99 AS measured,
    CASE WHEN reason IS NULL THEN p_ttft_p99 END AS predicted,
    CASE WHEN reason IS NULL AND m_ttft_p99 > 0 THEN (p_ttft_p99 - m_ttft_p99) / m_ttft_p99 END AS rel_error,
    CASE WHEN reason IS NULL THEN l_ttft_p99 END AS legacy,
    CASE WHEN reason IS NULL AND m_ttft_p99 > 0 THEN (l_ttft_p99 - m_ttft_p99) / m_ttft_p99 END AS legacy_rel_error,
    reason
FROM base WHERE m_ttft_p99 IS NOT NULL
UNION ALL
SELECT measurement_id, calibration, run_id, model, system, backend, version, mode, isl, osl, prefix,
    tp, pp, dp, moe_tp, moe_ep, gemm_quant, concurrency, request_rate, model_used, version_used, version_mapping,
    engine_profile, deployed_as, evaluator, run, nextn, nextn_accepted, point_key, queueing_tier, 'tpot_mean' AS metric, m_tpot_mean AS measured,
    CASE WHEN reason IS NULL THEN p_tpot_mean END AS predicted,
    CASE WHEN reason IS NULL AND m_tpot_mean > 0 THEN (p_tpot_mean - m_tpot_mean) / m_tpot_mean END AS rel_error,
    CASE WHEN reason IS NULL THEN l_tpot_mean END AS legacy,
    CASE WHEN reason IS NULL AND m_tpot_mean > 0 THEN (l_tpot_mean - m_tpot_mean) / m_tpot_mean END AS legacy_rel_error,
    reason
FROM base WHERE m_tpot_mean IS NOT NULL
UNION ALL
SELECT measurement_id, calibration, run_id, model, system, backend, version, mode, isl, osl, prefix,
    tp, pp, dp, moe_tp, moe_ep, gemm_quant, concurrency, request_rate, model_used, version_used, version_mapping,
    engine_profile, deployed_as, evaluator, run, nextn, nextn_accepted, point_key, queueing_tier, 'tpot_p50' AS metric, m_tpot_p50 AS measured,
    CASE WHEN reason IS NULL THEN p_tpot_p50 END AS predicted,
    CASE WHEN reason IS NULL AND m_tpot_p50 > 0 THEN (p_tpot_p50 - m_tpot_p50) / m_tpot_p50 END AS rel_error,
    CASE WHEN reason IS NULL THEN l_tpot_p50 END AS legacy,
    CASE WHEN reason IS NULL AND m_tpot_p50 > 0 THEN (l_tpot_p50 - m_tpot_p50) / m_tpot_p50 END AS legacy_rel_error,
    reason
FROM base WHERE m_tpot_p50 IS NOT NULL
UNION ALL
SELECT measurement_id, calibration, run_id, model, system, backend, version, mode, isl, osl, prefix,
    tp, pp, dp, moe_tp, moe_ep, gemm_quant, concurrency, request_rate, model_used, version_used, version_mapping,
    engine_profile, deployed_as, evaluator, run, nextn, nextn_accepted, point_key, queueing_tier, 'tpot_p99' AS metric, m_tpot_p99 AS measured,
    CASE WHEN reason IS NULL THEN p_tpot_p99 END AS predicted,
    CASE WHEN reason IS NULL AND m_tpot_p99 > 0 THEN (p_tpot_p99 - m_tpot_p99) / m_tpot_p99 END AS rel_error,
    CASE WHEN reason IS NULL THEN l_tpot_p99 END AS legacy,
    CASE WHEN reason IS NULL AND m_tpot_p99 > 0 THEN (l_tpot_p99 - m_tpot_p99) / m_tpot_p99 END AS legacy_rel_error,
    reason
FROM base WHERE m_tpot_p99 IS NOT NULL
UNION ALL
SELECT measurement_id, calibration, run_id, model, system, backend, version, mode, isl, osl, prefix,
    tp, pp, dp, moe_tp, moe_ep, gemm_quant, concurrency, request_rate, model_used, version_used, version_mapping,
    engine_profile, deployed_as, evaluator, run, nextn, nextn_accepted, point_key, queueing_tier, 'itl_mean' AS metric, m_itl_mean AS measured,
    CASE WHEN reason IS NULL THEN p_itl_mean END AS predicted,
    CASE WHEN reason IS NULL AND m_itl_mean > 0 THEN (p_itl_mean - m_itl_mean) / m_itl_mean END AS rel_error,
    CASE WHEN reason IS NULL THEN l_itl_mean END AS legacy,
    CASE WHEN reason IS NULL AND m_itl_mean > 0 THEN (l_itl_mean - m_itl_mean) / m_itl_mean END AS legacy_rel_error,
    reason
FROM base WHERE m_itl_mean IS NOT NULL
UNION ALL
SELECT measurement_id, calibration, run_id, model, system, backend, version, mode, isl, osl, prefix,
    tp, pp, dp, moe_tp, moe_ep, gemm_quant, concurrency, request_rate, model_used, version_used, version_mapping,
    engine_profile, deployed_as, evaluator, run, nextn, nextn_accepted, point_key, queueing_tier, 'itl_p50' AS metric, m_itl_p50 AS measured,
    CASE WHEN reason IS NULL THEN p_itl_p50 END AS predicted,
    CASE WHEN reason IS NULL AND m_itl_p50 > 0 THEN (p_itl_p50 - m_itl_p50) / m_itl_p50 END AS rel_error,
    CASE WHEN reason IS NULL THEN l_itl_p50 END AS legacy,
    CASE WHEN reason IS NULL AND m_itl_p50 > 0 THEN (l_itl_p50 - m_itl_p50) / m_itl_p50 END AS legacy_rel_error,
    reason
FROM base WHERE m_itl_p50 IS NOT NULL
UNION ALL
SELECT measurement_id, calibration, run_id, model, system, backend, version, mode, isl, osl, prefix,
    tp, pp, dp, moe_tp, moe_ep, gemm_quant, concurrency, request_rate, model_used, version_used, version_mapping,
    engine_profile, deployed_as, evaluator, run, nextn, nextn_accepted, point_key, queueing_tier, 'itl_p99' AS metric, m_itl_p99 AS measured,
    CASE WHEN reason IS NULL THEN p_itl_p99 END AS predicted,
    CASE WHEN reason IS NULL AND m_itl_p99 > 0 THEN (p_itl_p99 - m_itl_p99) / m_itl_p99 END AS rel_error,
    CASE WHEN reason IS NULL THEN l_itl_p99 END AS legacy,
    CASE WHEN reason IS NULL AND m_itl_p99 > 0 THEN (l_itl_p99 - m_itl_p99) / m_itl_p99 END AS legacy_rel_error,
    reason
FROM base WHERE m_itl_p99 IS NOT NULL
UNION ALL
SELECT measurement_id, calibration, run_id, model, system, backend, version, mode, isl, osl, prefix,
    tp, pp, dp, moe_tp, moe_ep, gemm_quant, concurrency, request_rate, model_used, version_used, version_mapping,
    engine_profile, deployed_as, evaluator, run, nextn, nextn_accepted, point_key, queueing_tier, 'e2e_mean' AS metric, m_e2e_mean AS measured,
    CASE WHEN reason IS NULL THEN p_e2e_mean END AS predicted,
    CASE WHEN reason IS NULL AND m_e2e_mean > 0 THEN (p_e2e_mean - m_e2e_mean) / m_e2e_mean END AS rel_error,
    CASE WHEN reason IS NULL THEN l_e2e_mean END AS legacy,
    CASE WHEN reason IS NULL AND m_e2e_mean > 0 THEN (l_e2e_mean - m_e2e_mean) / m_e2e_mean END AS legacy_rel_error,
    reason
FROM base WHERE m_e2e_mean IS NOT NULL
UNION ALL
SELECT measurement_id, calibration, run_id, model, system, backend, version, mode, isl, osl, prefix,
    tp, pp, dp, moe_tp, moe_ep, gemm_quant, concurrency, request_rate, model_used, version_used, version_mapping,
    engine_profile, deployed_as, evaluator, run, nextn, nextn_accepted, point_key, queueing_tier, 'e2e_p50' AS metric, m_e2e_p50 AS measured,
    CASE WHEN reason IS NULL THEN p_e2e_p50 END AS predicted,
    CASE WHEN reason IS NULL AND m_e2e_p50 > 0 THEN (p_e2e_p50 - m_e2e_p50) / m_e2e_p50 END AS rel_error,
    CASE WHEN reason IS NULL THEN l_e2e_p50 END AS legacy,
    CASE WHEN reason IS NULL AND m_e2e_p50 > 0 THEN (l_e2e_p50 - m_e2e_p50) / m_e2e_p50 END AS legacy_rel_error,
    reason
FROM base WHERE m_e2e_p50 IS NOT NULL
UNION ALL
SELECT measurement_id, calibration, run_id, model, system, backend, version, mode, isl, osl, prefix,
    tp, pp, dp, moe_tp, moe_ep, gemm_quant, concurrency, request_rate, model_used, version_used, version_mapping,
    engine_profile, deployed_as, evaluator, run, nextn, nextn_accepted, point_key, queueing_tier, 'e2e_p99' AS metric, m_e2e_p99 AS measured,
    CASE WHEN reason IS NULL THEN p_e2e_p99 END AS predicted,
    CASE WHEN reason IS NULL AND m_e2e_p99 > 0 THEN (p_e2e_p99 - m_e2e_p99) / m_e2e_p99 END AS rel_error,
    CASE WHEN reason IS NULL THEN l_e2e_p99 END AS legacy,
    CASE WHEN reason IS NULL AND m_e2e_p99 > 0 THEN (l_e2e_p99 - m_e2e_p99) / m_e2e_p99 END AS legacy_rel_error,
    reason
FROM base WHERE m_e2e_p99 IS NOT NULL
UNION ALL
SELECT measurement_id, calibration, run_id, model, system, backend, version, mode, isl, osl, prefix,
    tp, pp, dp, moe_tp, moe_ep, gemm_quant, concurrency, request_rate, model_used, version_used, version_mapping,
    engine_profile, deployed_as, evaluator, run, nextn, nextn_accepted, point_key, queueing_tier, 'throughput_rps' AS metric, m_throughput_rps AS measured,
    CASE WHEN reason IS NULL THEN p_throughput_rps END AS predicted,
    CASE WHEN reason IS NULL AND m_throughput_rps > 0 THEN (p_throughput_rps - m_throughput_rps) / m_throughput_rps END AS rel_error,
    CASE WHEN reason IS NULL THEN l_throughput_rps END AS legacy,
    CASE WHEN reason IS NULL AND m_throughput_rps > 0 THEN (l_throughput_rps - m_throughput_rps) / m_throughput_rps END AS legacy_rel_error,
    reason
FROM base WHERE m_throughput_rps IS NOT NULL
UNION ALL
SELECT measurement_id, calibration, run_id, model, system, backend, version, mode, isl, osl, prefix,
    tp, pp, dp, moe_tp, moe_ep, gemm_quant, concurrency, request_rate, model_used, version_used, version_mapping,
    engine_profile, deployed_as, evaluator, run, nextn, nextn_accepted, point_key, queueing_tier, 'output_tokens_per_s' AS metric, m_output_tokens_per_s AS measured,
    CASE WHEN reason IS NULL THEN p_output_tokens_per_s END AS predicted,
    CASE WHEN reason IS NULL AND m_output_tokens_per_s > 0 THEN (p_output_tokens_per_s - m_output_tokens_per_s) / m_output_tokens_per_s END AS rel_error,
    CASE WHEN reason IS NULL THEN l_output_tokens_per_s END AS legacy,
    CASE WHEN reason IS NULL AND m_output_tokens_per_s > 0 THEN (l_output_tokens_per_s - m_output_tokens_per_s) / m_output_tokens_per_s END AS legacy_rel_error,
    reason
FROM base WHERE m_output_tokens_per_s IS NOT NULL;
