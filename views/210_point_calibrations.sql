-- point_calibrations: the calibration every operating point was computed with
-- (issue 9 part 4). A calibrated evaluator's name ends in "+cal:NAME@digest"
-- (refine.PerfdbEvaluator.SetCalibrator); the points it covers are calibrated,
-- the others of the same sweep say uncalibrated.
CREATE VIEW point_calibrations AS
WITH c AS (
    SELECT key, system, backend, version, model,
           CASE WHEN instr(evaluator, '+cal:') > 0 THEN substr(evaluator, instr(evaluator, '+cal:') + 5) END AS cal
    FROM operating_points
), n AS (
    SELECT key, system, backend, version, model, cal,
           substr(cal, 1, instr(cal, '@') - 1) AS cal_name,
           substr(cal, instr(cal, '@') + 1) AS cal_digest
    FROM c
)
SELECT n.key, n.cal AS calibration,
    CASE
        WHEN n.cal IS NULL THEN 'none'
        WHEN k.name IS NULL THEN 'calibration ' || n.cal || ' is no longer stored (refitted or dropped)'
        WHEN p.name IS NULL THEN 'uncalibrated: ' || n.cal_name || ' has no fit for this system, backend, version and model'
        ELSE 'calibrated'
    END AS calibration_status,
    p.prefill_scale, p.decode_scale, p.pass_overhead_ms, p.request_overhead_ms
FROM n
LEFT JOIN calibrations k ON k.name = n.cal_name AND k.digest = n.cal_digest
LEFT JOIN calibration_params p ON p.name = k.name AND p.system = n.system AND p.backend = n.backend
    AND p.version = n.version AND p.model = n.model;
