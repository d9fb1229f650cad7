-- +goose Up
-- Measured runs (issue 9, part 3): `aicdb bench import` loads vLLM bench serve
-- results, AIPerf / genai-perf exports and aiconfigurator's silicon CSV. A file is
-- imported whole or not at all and once (measurement_sources.sha256); every stored
-- statistic is finite (x = x rejects NaN, abs(x) < 1e308 rejects ±Inf), NULL when
-- the file did not measure it.
CREATE TABLE measurement_sources (
    sha256      TEXT    PRIMARY KEY CHECK (length(sha256) = 64),
    file        TEXT    NOT NULL,   -- as given on the command line (provenance only)
    format      TEXT    NOT NULL CHECK (format IN ('vllm-bench', 'aiperf', 'aic-silicon')),
    rows        INTEGER NOT NULL CHECK (rows > 0),
    deployment  TEXT    NOT NULL CHECK (json_valid(deployment)), -- flags + sidecar applied
    imported_at TEXT    NOT NULL
) STRICT;

CREATE TABLE measurements (
    id            INTEGER PRIMARY KEY,
    source_sha256 TEXT    NOT NULL REFERENCES measurement_sources (sha256) ON DELETE CASCADE,
    line          INTEGER NOT NULL CHECK (line >= 0), -- CSV line (1 = header), 0 for JSON
    run_id        TEXT    NOT NULL,
    model         TEXT    NOT NULL,
    system        TEXT    NOT NULL,
    backend       TEXT    NOT NULL,
    version       TEXT    NOT NULL,  -- as measured ('' = not stated)
    mode          TEXT    NOT NULL CHECK (mode IN ('agg', 'disagg')),
    isl           INTEGER NOT NULL CHECK (isl > 0),
    osl           INTEGER NOT NULL CHECK (osl > 0),
    prefix        INTEGER NOT NULL CHECK (prefix >= 0 AND prefix < isl),
    tp            INTEGER NOT NULL CHECK (tp > 0),
    pp            INTEGER NOT NULL CHECK (pp > 0),
    dp            INTEGER NOT NULL CHECK (dp > 0),
    moe_tp        INTEGER NOT NULL CHECK (moe_tp > 0),
    moe_ep        INTEGER NOT NULL CHECK (moe_ep > 0),
    gemm_quant    TEXT    NOT NULL,  -- '' = the model's own
    moe_quant     TEXT    NOT NULL,
    concurrency   INTEGER NOT NULL CHECK (concurrency >= 0), -- closed-loop clients per worker (0: open loop)
    request_rate  REAL    NOT NULL CHECK (request_rate >= 0 AND request_rate < 1e308), -- open loop req/s (0: closed)
    num_prompts   INTEGER NOT NULL CHECK (num_prompts >= 0),
    p_workers     INTEGER NOT NULL DEFAULT 0,
    p_batch       INTEGER NOT NULL DEFAULT 0,
    p_tp          INTEGER NOT NULL DEFAULT 0,
    p_pp          INTEGER NOT NULL DEFAULT 0,
    p_dp          INTEGER NOT NULL DEFAULT 0,
    d_workers     INTEGER NOT NULL DEFAULT 0,
    d_batch       INTEGER NOT NULL DEFAULT 0,
    d_tp          INTEGER NOT NULL DEFAULT 0,
    d_pp          INTEGER NOT NULL DEFAULT 0,
    d_dp          INTEGER NOT NULL DEFAULT 0,
    engine_config TEXT    NOT NULL CHECK (json_valid(engine_config)), -- {} = not stated
    ttft_mean           REAL CHECK (ttft_mean >= 0 AND ttft_mean < 1e308),
    ttft_p50            REAL CHECK (ttft_p50 >= 0 AND ttft_p50 < 1e308),
    ttft_p99            REAL CHECK (ttft_p99 >= 0 AND ttft_p99 < 1e308),
    tpot_mean           REAL CHECK (tpot_mean >= 0 AND tpot_mean < 1e308),
    tpot_p50            REAL CHECK (tpot_p50 >= 0 AND tpot_p50 < 1e308),
    tpot_p99            REAL CHECK (tpot_p99 >= 0 AND tpot_p99 < 1e308),
    itl_mean            REAL CHECK (itl_mean >= 0 AND itl_mean < 1e308),
    itl_p50             REAL CHECK (itl_p50 >= 0 AND itl_p50 < 1e308),
    itl_p99             REAL CHECK (itl_p99 >= 0 AND itl_p99 < 1e308),
    e2e_mean            REAL CHECK (e2e_mean >= 0 AND e2e_mean < 1e308),
    e2e_p50             REAL CHECK (e2e_p50 >= 0 AND e2e_p50 < 1e308),
    e2e_p99             REAL CHECK (e2e_p99 >= 0 AND e2e_p99 < 1e308),
    throughput_rps      REAL CHECK (throughput_rps >= 0 AND throughput_rps < 1e308),
    output_tokens_per_s REAL CHECK (output_tokens_per_s >= 0 AND output_tokens_per_s < 1e308),
    extra         TEXT    NOT NULL CHECK (json_valid(extra)),
    UNIQUE (source_sha256, line, run_id)
) STRICT;
CREATE INDEX measurements_deployment ON measurements (system, backend, model, version);

-- measurement_predictions: the predicted operating point of a measurement, made
-- on demand by `aicdb accuracy` (and calibrate) through refine's evaluator and
-- persisted like the funnel persists quantitative results. calibration '' =
-- uncalibrated. A row with point_key NULL says why no prediction exists (reason):
-- no perf data for the system/backend, a model family not modelled, … — never
-- silently dropped. version_used is the perf-data version the measured version was
-- mapped to (version_mapping says how). A prediction whose point is replaced (a
-- new evaluator version) goes with it and is made again on demand.
CREATE TABLE measurement_predictions (
    measurement_id  INTEGER NOT NULL REFERENCES measurements (id) ON DELETE CASCADE,
    calibration     TEXT    NOT NULL,
    evaluator       TEXT    NOT NULL,
    point_key       TEXT    REFERENCES operating_points (key) ON DELETE CASCADE,
    model_used      TEXT    NOT NULL,
    version_used    TEXT    NOT NULL,
    version_mapping TEXT    NOT NULL,
    engine_profile  TEXT    NOT NULL,
    reason          TEXT,   -- NULL when point_key is set
    PRIMARY KEY (measurement_id, calibration, evaluator)
) STRICT;

-- +goose Down
DROP TABLE measurement_predictions;
DROP INDEX measurements_deployment;
DROP TABLE measurements;
DROP TABLE measurement_sources;
