-- +goose Up
-- Calibrations keyed by quantisation too (issue 9 part 4): points of one model in
-- different quantisations run different kernels (fp8 GEMMs, nvfp4, int4
-- weight-only MoE) whose perf-data errors differ, so `aicdb calibrate` fits one
-- PassAdjust per (system, backend, version, model, quant). quant is the points'
-- store.QuantLabel: "gemm=G,moe=M,kv=K,fmha=F,comm=C" from operating_points'
-- gemm_quant, moe_quant, kvcache_quant, fmha_quant and comm_quant, an empty part
-- omitted. quant '' applies to any quantisation: the calibrations fitted before
-- this migration keep it and so still apply as before.
-- SQLite cannot alter a primary key: calibration_params is rebuilt (create, copy,
-- drop, rename). point_calibrations reads it; store.Open re-creates the view.
DROP VIEW IF EXISTS point_calibrations;
CREATE TABLE calibration_params_00014 (
    name                TEXT    NOT NULL REFERENCES calibrations (name) ON DELETE CASCADE,
    system              TEXT    NOT NULL,
    backend             TEXT    NOT NULL,
    version             TEXT    NOT NULL,
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
    PRIMARY KEY (name, system, backend, version, model, quant)
) STRICT;
INSERT INTO calibration_params_00014 (name, system, backend, version, model, quant, prefill_scale, decode_scale,
    pass_overhead_ms, request_overhead_ms, rows, ttft_mape_before, tpot_mape_before, ttft_mape_fit, tpot_mape_fit,
    ttft_mape_cv, tpot_mape_cv, unidentified)
SELECT name, system, backend, version, model, '', prefill_scale, decode_scale,
    pass_overhead_ms, request_overhead_ms, rows, ttft_mape_before, tpot_mape_before, ttft_mape_fit, tpot_mape_fit,
    ttft_mape_cv, tpot_mape_cv, unidentified
FROM calibration_params;
DROP TABLE calibration_params;
ALTER TABLE calibration_params_00014 RENAME TO calibration_params;
-- The training rows record the quant of the group they were fitted in.
ALTER TABLE calibration_rows ADD COLUMN quant TEXT NOT NULL DEFAULT '';

-- +goose Down
-- The old key cannot hold two quantisations of one (system, backend, version,
-- model): per old key the group with the most training rows is kept (ties: the
-- smallest quant), the one a pre-00014 binary would then apply to every
-- quantisation; the others' parameters are dropped (their training rows stay).
DROP VIEW IF EXISTS point_calibrations;
CREATE TABLE calibration_params_00008 (
    name                TEXT    NOT NULL REFERENCES calibrations (name) ON DELETE CASCADE,
    system              TEXT    NOT NULL,
    backend             TEXT    NOT NULL,
    version             TEXT    NOT NULL,
    model               TEXT    NOT NULL,
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
    PRIMARY KEY (name, system, backend, version, model)
) STRICT;
INSERT INTO calibration_params_00008 (name, system, backend, version, model, prefill_scale, decode_scale,
    pass_overhead_ms, request_overhead_ms, rows, ttft_mape_before, tpot_mape_before, ttft_mape_fit, tpot_mape_fit,
    ttft_mape_cv, tpot_mape_cv, unidentified)
SELECT name, system, backend, version, model, prefill_scale, decode_scale,
    pass_overhead_ms, request_overhead_ms, rows, ttft_mape_before, tpot_mape_before, ttft_mape_fit, tpot_mape_fit,
    ttft_mape_cv, tpot_mape_cv, unidentified
FROM (SELECT *, row_number() OVER (PARTITION BY name, system, backend, version, model ORDER BY rows DESC, quant) AS rank
      FROM calibration_params)
WHERE rank = 1;
DROP TABLE calibration_params;
ALTER TABLE calibration_params_00008 RENAME TO calibration_params;
ALTER TABLE calibration_rows DROP COLUMN quant;
