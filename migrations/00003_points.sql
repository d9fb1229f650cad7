-- +goose Up
-- Operating points, their quantitative results and the sweeps that produced them
-- (issue 5). Plain column types, snake_case, STRICT; every REAL column that holds a
-- result is checked finite (x = x rejects NaN, abs(x) < 1e308 rejects ±Inf) so no
-- NaN/Inf can ever be stored. NULL means "not computed for this row" (OOM rows,
-- composed disagg rows without a queueing model).

-- sweeps: one row per `aicdb sweep` invocation.
CREATE TABLE sweeps (
    id               INTEGER PRIMARY KEY,
    arguments        TEXT    NOT NULL CHECK (json_valid(arguments)),
    started_at       TEXT    NOT NULL,
    ended_at         TEXT,
    status           TEXT    NOT NULL CHECK (status IN ('running', 'done', 'failed', 'interrupted')),
    points_total     INTEGER NOT NULL DEFAULT 0,
    points_evaluated INTEGER NOT NULL DEFAULT 0,
    points_skipped   INTEGER NOT NULL DEFAULT 0,
    error            TEXT
) STRICT;

-- operating_points: one row per evaluated point. key = sha256 hex of every input
-- (store.PointInputs.Key); a row is written whole, in one transaction, or not at all.
CREATE TABLE operating_points (
    key                      TEXT    PRIMARY KEY CHECK (length(key) = 64),
    -- inputs
    model                    TEXT    NOT NULL,
    system                   TEXT    NOT NULL,
    backend                  TEXT    NOT NULL,
    version                  TEXT    NOT NULL,
    mode                     TEXT    NOT NULL CHECK (mode IN ('agg', 'disagg')),
    isl                      INTEGER NOT NULL CHECK (isl > 0),
    osl                      INTEGER NOT NULL CHECK (osl > 0),
    prefix                   INTEGER NOT NULL CHECK (prefix >= 0 AND prefix < isl),
    tp                       INTEGER NOT NULL CHECK (tp > 0),
    pp                       INTEGER NOT NULL CHECK (pp > 0),
    dp                       INTEGER NOT NULL CHECK (dp > 0),
    moe_tp                   INTEGER NOT NULL CHECK (moe_tp > 0),
    moe_ep                   INTEGER NOT NULL CHECK (moe_ep > 0),
    batch                    INTEGER NOT NULL CHECK (batch > 0),
    ctx_tokens               INTEGER NOT NULL CHECK (ctx_tokens >= 0),
    max_num_batched_tokens   INTEGER NOT NULL CHECK (max_num_batched_tokens >= 0),
    max_num_seqs             INTEGER NOT NULL CHECK (max_num_seqs >= 0),
    enable_chunked_prefill   INTEGER NOT NULL CHECK (enable_chunked_prefill IN (0, 1)),
    database_mode            TEXT    NOT NULL,
    gemm_quant               TEXT    NOT NULL,
    kvcache_quant            TEXT    NOT NULL,
    fmha_quant               TEXT    NOT NULL,
    moe_quant                TEXT    NOT NULL,
    comm_quant               TEXT    NOT NULL,
    nextn                    INTEGER NOT NULL CHECK (nextn >= 0),
    p_workers                INTEGER NOT NULL CHECK (p_workers >= 0),
    p_batch                  INTEGER NOT NULL CHECK (p_batch >= 0),
    p_tp                     INTEGER NOT NULL CHECK (p_tp >= 0),
    p_pp                     INTEGER NOT NULL CHECK (p_pp >= 0),
    p_dp                     INTEGER NOT NULL CHECK (p_dp >= 0),
    d_workers                INTEGER NOT NULL CHECK (d_workers >= 0),
    d_batch                  INTEGER NOT NULL CHECK (d_batch >= 0),
    d_tp                     INTEGER NOT NULL CHECK (d_tp >= 0),
    d_pp                     INTEGER NOT NULL CHECK (d_pp >= 0),
    d_dp                     INTEGER NOT NULL CHECK (d_dp >= 0),
    evaluator                TEXT    NOT NULL,
    -- derived shape
    parallel                 TEXT    NOT NULL,
    num_gpus                 INTEGER NOT NULL CHECK (num_gpus > 0),
    concurrency              INTEGER NOT NULL CHECK (concurrency > 0),
    oom                      INTEGER NOT NULL CHECK (oom IN (0, 1)),
    -- legacy aiconfigurator columns (ms unless named otherwise)
    ttft                     REAL CHECK (ttft = ttft AND abs(ttft) < 1e308),
    tpot                     REAL CHECK (tpot = tpot AND abs(tpot) < 1e308),
    request_latency          REAL CHECK (request_latency = request_latency AND abs(request_latency) < 1e308),
    request_rate             REAL CHECK (request_rate = request_rate AND abs(request_rate) < 1e308),
    seq_per_s                REAL CHECK (seq_per_s = seq_per_s AND abs(seq_per_s) < 1e308),
    seq_per_s_per_gpu        REAL CHECK (seq_per_s_per_gpu = seq_per_s_per_gpu AND abs(seq_per_s_per_gpu) < 1e308),
    tokens_per_s             REAL CHECK (tokens_per_s = tokens_per_s AND abs(tokens_per_s) < 1e308),
    tokens_per_s_per_gpu     REAL CHECK (tokens_per_s_per_gpu = tokens_per_s_per_gpu AND abs(tokens_per_s_per_gpu) < 1e308),
    tokens_per_s_per_user    REAL CHECK (tokens_per_s_per_user = tokens_per_s_per_user AND abs(tokens_per_s_per_user) < 1e308),
    memory_gib               REAL CHECK (memory_gib = memory_gib AND abs(memory_gib) < 1e308),
    -- queueing columns at the row's stored tier (screening for agg rows)
    ttft_steady_mean         REAL CHECK (ttft_steady_mean = ttft_steady_mean AND abs(ttft_steady_mean) < 1e308),
    ttft_steady_p50          REAL CHECK (ttft_steady_p50 = ttft_steady_p50 AND abs(ttft_steady_p50) < 1e308),
    ttft_steady_p75          REAL CHECK (ttft_steady_p75 = ttft_steady_p75 AND abs(ttft_steady_p75) < 1e308),
    ttft_steady_p90          REAL CHECK (ttft_steady_p90 = ttft_steady_p90 AND abs(ttft_steady_p90) < 1e308),
    ttft_steady_p95          REAL CHECK (ttft_steady_p95 = ttft_steady_p95 AND abs(ttft_steady_p95) < 1e308),
    ttft_steady_p99          REAL CHECK (ttft_steady_p99 = ttft_steady_p99 AND abs(ttft_steady_p99) < 1e308),
    ttft_steady_p999         REAL CHECK (ttft_steady_p999 = ttft_steady_p999 AND abs(ttft_steady_p999) < 1e308),
    ttft_steady_p99_lo       REAL CHECK (ttft_steady_p99_lo = ttft_steady_p99_lo AND abs(ttft_steady_p99_lo) < 1e308),
    ttft_steady_p99_hi       REAL CHECK (ttft_steady_p99_hi = ttft_steady_p99_hi AND abs(ttft_steady_p99_hi) < 1e308),
    -- 1 when ttft_steady_p99_hi is a structural upper bound of the quantitative p99
    -- (a row may be declared certain-pass on it); 0 when hi is only an estimate.
    bracket_certain          INTEGER NOT NULL DEFAULT 0 CHECK (bracket_certain IN (0, 1)),
    ttft_transient_mean      REAL CHECK (ttft_transient_mean = ttft_transient_mean AND abs(ttft_transient_mean) < 1e308),
    ttft_transient_max       REAL CHECK (ttft_transient_max = ttft_transient_max AND abs(ttft_transient_max) < 1e308),
    itl_mean                 REAL CHECK (itl_mean = itl_mean AND abs(itl_mean) < 1e308),
    itl_p50                  REAL CHECK (itl_p50 = itl_p50 AND abs(itl_p50) < 1e308),
    itl_p99                  REAL CHECK (itl_p99 = itl_p99 AND abs(itl_p99) < 1e308),
    tpot_mean                REAL CHECK (tpot_mean = tpot_mean AND abs(tpot_mean) < 1e308),
    tpot_p50                 REAL CHECK (tpot_p50 = tpot_p50 AND abs(tpot_p50) < 1e308),
    tpot_p99                 REAL CHECK (tpot_p99 = tpot_p99 AND abs(tpot_p99) < 1e308),
    e2e_mean                 REAL CHECK (e2e_mean = e2e_mean AND abs(e2e_mean) < 1e308),
    e2e_p50                  REAL CHECK (e2e_p50 = e2e_p50 AND abs(e2e_p50) < 1e308),
    e2e_p99                  REAL CHECK (e2e_p99 = e2e_p99 AND abs(e2e_p99) < 1e308),
    queueing_tier            TEXT    NOT NULL CHECK (queueing_tier IN ('screening', 'quantitative', 'static', 'composed', 'none')),
    workload_fidelity        TEXT    NOT NULL,
    -- maintained at sweep time (store.RefreshPareto): on the frontier of
    -- tokens_per_s_per_gpu vs tokens_per_s_per_user within its workload group.
    is_pareto                INTEGER NOT NULL DEFAULT 0 CHECK (is_pareto IN (0, 1)),
    CHECK (oom = 1 OR (ttft IS NOT NULL AND tpot IS NOT NULL AND tokens_per_s_per_gpu IS NOT NULL AND tokens_per_s_per_user IS NOT NULL)),
    CHECK (ttft_steady_p99_lo IS NULL OR ttft_steady_p99_lo <= ttft_steady_p99_hi)
) STRICT;

-- The workload group (the pareto partition) first, so group scans and the pareto
-- refresh use one index range.
CREATE INDEX operating_points_group ON operating_points
    (model, system, backend, version, mode, isl, osl, prefix);
CREATE INDEX operating_points_pareto ON operating_points (is_pareto) WHERE is_pareto = 1;

-- quantitative_results: the quantitative tier of a point, computed lazily by the
-- funnel (refine/) and stored once. distributions is JSON:
-- {"ttft_steady": [[x, w], ...], "ttft_transient": ..., "itl": ..., "tpot": ..., "e2e": ...}.
CREATE TABLE quantitative_results (
    key                      TEXT PRIMARY KEY REFERENCES operating_points (key) ON DELETE CASCADE,
    ttft_steady_mean         REAL NOT NULL CHECK (ttft_steady_mean = ttft_steady_mean AND abs(ttft_steady_mean) < 1e308),
    ttft_steady_p50          REAL NOT NULL CHECK (ttft_steady_p50 = ttft_steady_p50 AND abs(ttft_steady_p50) < 1e308),
    ttft_steady_p75          REAL NOT NULL CHECK (ttft_steady_p75 = ttft_steady_p75 AND abs(ttft_steady_p75) < 1e308),
    ttft_steady_p90          REAL NOT NULL CHECK (ttft_steady_p90 = ttft_steady_p90 AND abs(ttft_steady_p90) < 1e308),
    ttft_steady_p95          REAL NOT NULL CHECK (ttft_steady_p95 = ttft_steady_p95 AND abs(ttft_steady_p95) < 1e308),
    ttft_steady_p99          REAL NOT NULL CHECK (ttft_steady_p99 = ttft_steady_p99 AND abs(ttft_steady_p99) < 1e308),
    ttft_steady_p999         REAL NOT NULL CHECK (ttft_steady_p999 = ttft_steady_p999 AND abs(ttft_steady_p999) < 1e308),
    ttft_transient_mean      REAL NOT NULL CHECK (ttft_transient_mean = ttft_transient_mean AND abs(ttft_transient_mean) < 1e308),
    ttft_transient_max       REAL NOT NULL CHECK (ttft_transient_max = ttft_transient_max AND abs(ttft_transient_max) < 1e308),
    itl_mean                 REAL NOT NULL CHECK (itl_mean = itl_mean AND abs(itl_mean) < 1e308),
    itl_p50                  REAL NOT NULL CHECK (itl_p50 = itl_p50 AND abs(itl_p50) < 1e308),
    itl_p99                  REAL NOT NULL CHECK (itl_p99 = itl_p99 AND abs(itl_p99) < 1e308),
    tpot_mean                REAL NOT NULL CHECK (tpot_mean = tpot_mean AND abs(tpot_mean) < 1e308),
    tpot_p50                 REAL NOT NULL CHECK (tpot_p50 = tpot_p50 AND abs(tpot_p50) < 1e308),
    tpot_p99                 REAL NOT NULL CHECK (tpot_p99 = tpot_p99 AND abs(tpot_p99) < 1e308),
    e2e_mean                 REAL NOT NULL CHECK (e2e_mean = e2e_mean AND abs(e2e_mean) < 1e308),
    e2e_p50                  REAL NOT NULL CHECK (e2e_p50 = e2e_p50 AND abs(e2e_p50) < 1e308),
    e2e_p99                  REAL NOT NULL CHECK (e2e_p99 = e2e_p99 AND abs(e2e_p99) < 1e308),
    throughput_rps           REAL NOT NULL CHECK (throughput_rps = throughput_rps AND abs(throughput_rps) < 1e308),
    output_tokens_per_s      REAL NOT NULL CHECK (output_tokens_per_s = output_tokens_per_s AND abs(output_tokens_per_s) < 1e308),
    workload_fidelity        TEXT NOT NULL,
    distributions            TEXT NOT NULL CHECK (json_valid(distributions))
) STRICT;

-- +goose Down
DROP TABLE quantitative_results;
DROP TABLE operating_points;
DROP TABLE sweeps;
