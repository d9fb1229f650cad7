-- +goose Up
-- Calibrations keyed by the deployment's parallel layout too (issue 9 part 4,
-- docs/validation.md Round 26). Attention data parallelism runs dp schedulers
-- in lockstep (a collective every iteration: the slowest rank sets each pass,
-- CUDA graphs only when every rank decodes) and pipeline parallelism runs
-- micro-batches through stages; the perf data prices one rank's kernels, so the
-- part of the pass a timing correction must supply differs from a plain
-- tensor-parallel deployment of the same model. calibration_params.layout is
-- store.LayoutLabel of the group's points: 'tp' (neither), 'adp', 'pp' or
-- 'adp,pp' ('' = any: fitted before this migration, applying as before).
-- SQLite cannot alter a primary key: calibration_params is rebuilt (create, copy,
-- drop, rename). point_calibrations reads it; store.Open re-creates the views.
DROP VIEW IF EXISTS point_calibrations;
CREATE TABLE calibration_params_00018 (
    name                TEXT    NOT NULL REFERENCES calibrations (name) ON DELETE CASCADE,
    system              TEXT    NOT NULL,
    backend             TEXT    NOT NULL,
    version             TEXT    NOT NULL,
    deployed_version    TEXT    NOT NULL DEFAULT '', -- engine version of the measurements; '' = any
    model               TEXT    NOT NULL,
    quant               TEXT    NOT NULL DEFAULT '', -- store.QuantLabel of the points; '' = any
    layout              TEXT    NOT NULL DEFAULT '', -- store.LayoutLabel of the points; '' = any
    prefill_scale       REAL    NOT NULL CHECK (prefill_scale > 0 AND prefill_scale < 1e6),
    decode_scale        REAL    NOT NULL CHECK (decode_scale > 0 AND decode_scale < 1e6),
    pass_overhead_ms    REAL    NOT NULL CHECK (pass_overhead_ms >= 0 AND pass_overhead_ms < 1e6),
    request_overhead_ms REAL    NOT NULL CHECK (request_overhead_ms >= 0 AND request_overhead_ms < 1e6),
    rows                INTEGER NOT NULL CHECK (rows > 0),
    -- MAPE (%) on the training rows before and after the fit, and k-fold
    -- cross-validated (NULL without --holdout).
    ttft_mape_before    REAL    NOT NULL CHECK (ttft_mape_before >= 0 AND ttft_mape_before < 1e308),
    tpot_mape_before    REAL    NOT NULL CHECK (tpot_mape_before >= 0 AND tpot_mape_before < 1e308),
    ttft_mape_fit       REAL    NOT NULL CHECK (ttft_mape_fit >= 0 AND ttft_mape_fit < 1e308),
    tpot_mape_fit       REAL    NOT NULL CHECK (tpot_mape_fit >= 0 AND tpot_mape_fit < 1e308),
    ttft_mape_cv        REAL    CHECK (ttft_mape_cv >= 0 AND ttft_mape_cv < 1e308),
    tpot_mape_cv        REAL    CHECK (tpot_mape_cv >= 0 AND tpot_mape_cv < 1e308),
    unidentified        TEXT    NOT NULL CHECK (json_valid(unidentified)), -- parameters the data could not identify
    PRIMARY KEY (name, system, backend, version, deployed_version, model, quant, layout)
) STRICT;
INSERT INTO calibration_params_00018 (name, system, backend, version, deployed_version, model, quant, layout,
    prefill_scale, decode_scale, pass_overhead_ms, request_overhead_ms, rows, ttft_mape_before, tpot_mape_before,
    ttft_mape_fit, tpot_mape_fit, ttft_mape_cv, tpot_mape_cv, unidentified)
SELECT name, system, backend, version, deployed_version, model, quant, '',
    prefill_scale, decode_scale, pass_overhead_ms, request_overhead_ms, rows, ttft_mape_before, tpot_mape_before,
    ttft_mape_fit, tpot_mape_fit, ttft_mape_cv, tpot_mape_cv, unidentified
FROM calibration_params;
DROP TABLE calibration_params;
ALTER TABLE calibration_params_00018 RENAME TO calibration_params;
-- The training rows record the layout of the group they were fitted in.
ALTER TABLE calibration_rows ADD COLUMN layout TEXT NOT NULL DEFAULT '';

-- +goose Down
-- The old key cannot hold two layouts of one (system, backend, version,
-- deployed version, model, quant): per old key the group with the most training
-- rows is kept (ties: the smallest layout), the one a pre-00018 binary would then
-- apply to every layout; the others' parameters are dropped (their training rows
-- stay). SQLite drops a column only when no view reads it, so every view is
-- dropped first; store.Open re-creates them.
DROP VIEW IF EXISTS point_calibrations;
DROP VIEW IF EXISTS accuracy;
DROP VIEW IF EXISTS disagg;
DROP VIEW IF EXISTS best_configs;
DROP VIEW IF EXISTS pareto_all;
DROP VIEW IF EXISTS pareto;
DROP VIEW IF EXISTS points;
DROP VIEW IF EXISTS store_version;
CREATE TABLE calibration_params_00015 (
    name                TEXT    NOT NULL REFERENCES calibrations (name) ON DELETE CASCADE,
    system              TEXT    NOT NULL,
    backend             TEXT    NOT NULL,
    version             TEXT    NOT NULL,
    deployed_version    TEXT    NOT NULL DEFAULT '', -- engine version of the measurements; '' = any
    model               TEXT    NOT NULL,
    quant               TEXT    NOT NULL DEFAULT '', -- store.QuantLabel of the points; '' = any
    prefill_scale       REAL    NOT NULL CHECK (prefill_scale > 0 AND prefill_scale < 1e6),
    decode_scale        REAL    NOT NULL CHECK (decode_scale > 0 AND decode_scale < 1e6),
    pass_overhead_ms    REAL    NOT NULL CHECK (pass_overhead_ms >= 0 AND pass_overhead_ms < 1e6),
    request_overhead_ms REAL    NOT NULL CHECK (request_overhead_ms >= 0 AND request_overhead_ms < 1e6),
    rows                INTEGER NOT NULL CHECK (rows > 0),
    -- MAPE (%) on the training rows before and after the fit, and k-fold
    -- cross-validated (NULL without --holdout).
    ttft_mape_before    REAL    NOT NULL CHECK (ttft_mape_before >= 0 AND ttft_mape_before < 1e308),
    tpot_mape_before    REAL    NOT NULL CHECK (tpot_mape_before >= 0 AND tpot_mape_before < 1e308),
    ttft_mape_fit       REAL    NOT NULL CHECK (ttft_mape_fit >= 0 AND ttft_mape_fit < 1e308),
    tpot_mape_fit       REAL    NOT NULL CHECK (tpot_mape_fit >= 0 AND tpot_mape_fit < 1e308),
    ttft_mape_cv        REAL    CHECK (ttft_mape_cv >= 0 AND ttft_mape_cv < 1e308),
    tpot_mape_cv        REAL    CHECK (tpot_mape_cv >= 0 AND tpot_mape_cv < 1e308),
    unidentified        TEXT    NOT NULL CHECK (json_valid(unidentified)), -- parameters the data could not identify
    PRIMARY KEY (name, system, backend, version, deployed_version, model, quant)
) STRICT;
INSERT INTO calibration_params_00015 (name, system, backend, version, deployed_version, model, quant, prefill_scale,
    decode_scale, pass_overhead_ms, request_overhead_ms, rows, ttft_mape_before, tpot_mape_before, ttft_mape_fit,
    tpot_mape_fit, ttft_mape_cv, tpot_mape_cv, unidentified)
SELECT name, system, backend, version, deployed_version, model, quant, prefill_scale,
    decode_scale, pass_overhead_ms, request_overhead_ms, rows, ttft_mape_before, tpot_mape_before, ttft_mape_fit,
    tpot_mape_fit, ttft_mape_cv, tpot_mape_cv, unidentified
FROM (SELECT *, row_number() OVER (PARTITION BY name, system, backend, version, deployed_version, model, quant
                                   ORDER BY rows DESC, layout) AS rank
      FROM calibration_params)
WHERE rank = 1;
DROP TABLE calibration_params;
ALTER TABLE calibration_params_00015 RENAME TO calibration_params;
ALTER TABLE calibration_rows DROP COLUMN layout;
