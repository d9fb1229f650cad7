-- +goose Up
-- Calibrations (issue 9 part 4): `aicdb calibrate --name NAME --measurements
-- PREDICATE` fits, per (system, backend, version, model) of the predicted points
-- (version = the perf-data version the measurements map to), a prefill token-time
-- scale, a decode row-time scale, a per-pass overhead and a per-request overhead
-- through the model (refine.PassAdjust). digest hashes the fitted parameters; it
-- goes into the evaluator name of every calibrated row ("+cal:NAME@digest"), so a
-- row records the calibration it was computed with (or none).
CREATE TABLE calibrations (
    name         TEXT    PRIMARY KEY,
    digest       TEXT    NOT NULL,
    predicate    TEXT    NOT NULL,   -- the --measurements SQL predicate
    evaluator    TEXT    NOT NULL,   -- the uncalibrated evaluator it was fitted through
    profile      TEXT    NOT NULL,   -- engine profile of the measurements
    holdout_k    INTEGER NOT NULL CHECK (holdout_k >= 0),
    report       TEXT    NOT NULL CHECK (json_valid(report)), -- fit and cross-validation summary
    created_at   TEXT    NOT NULL
) STRICT;

CREATE TABLE calibration_params (
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

-- The training rows of each calibration with their fitted predictions and
-- residuals (relative errors), and the cross-validation fold they were held out in.
CREATE TABLE calibration_rows (
    name           TEXT    NOT NULL REFERENCES calibrations (name) ON DELETE CASCADE,
    measurement_id INTEGER NOT NULL REFERENCES measurements (id) ON DELETE CASCADE,
    system         TEXT    NOT NULL,
    backend        TEXT    NOT NULL,
    version        TEXT    NOT NULL,
    model          TEXT    NOT NULL,
    metric         TEXT    NOT NULL,
    measured       REAL    NOT NULL CHECK (measured >= 0 AND measured < 1e308),
    uncalibrated   REAL    NOT NULL CHECK (uncalibrated >= 0 AND uncalibrated < 1e308),
    fitted         REAL    NOT NULL CHECK (fitted >= 0 AND fitted < 1e308),
    residual       REAL    NOT NULL CHECK (residual = residual AND abs(residual) < 1e308), -- (fitted − measured) / measured
    held_out       REAL    CHECK (held_out >= 0 AND held_out < 1e308), -- prediction of the fit without this row's fold
    fold           INTEGER NOT NULL CHECK (fold >= 0),
    PRIMARY KEY (name, measurement_id, metric)
) STRICT;

-- +goose Down
DROP TABLE calibration_rows;
DROP TABLE calibration_params;
DROP TABLE calibrations;
