-- point_calibrations: the calibration every operating point was computed with
-- (issue 9 part 4). A calibrated evaluator's name ends in "+cal:NAME@digest"
-- (refine.PerfdbEvaluator.SetCalibrator); the points it covers are calibrated,
-- the others of the same sweep say uncalibrated. A calibration is keyed by
-- (system, backend, version, model, quant) (migration 00014); quant is the
-- point's quantisation label, built by the same rule as store.QuantLabel:
-- "gemm=G,moe=M,kv=K,fmha=F,comm=C", an empty part omitted. A fit for the point's
-- own quant wins over one stored with quant '' (any quantisation: fitted before
-- 00014), as in refine/calibrate's Calibration.For. A calibration is keyed by the
-- engine version deployed too (migration 00015): a fit of the point's deployed
-- version (operating_points.deployed_version, or version when that is '') wins
-- over one stored with deployed_version '' (any: fitted before 00015). And by
-- the point's parallel layout (migration 00018), store.LayoutLabel's rule over
-- every pool: 'adp' (attention DP > 1), 'pp' (pipeline > 1), 'adp,pp', else
-- 'tp'; a fit of the point's own layout wins over one stored with layout ''
-- (any: fitted before 00018). With the applied fit come the rows it was fitted
-- on and its cross-validated TTFT / TPOT MAPE (%; NULL when it had no folds):
-- the error to expect of a calibrated point's figures (eval's columns of the same
-- names).
CREATE VIEW point_calibrations AS
WITH c AS (
    SELECT key, system, backend, version, model,
           CASE WHEN deployed_version = '' THEN version ELSE deployed_version END AS deployed,
           substr(CASE WHEN gemm_quant <> '' THEN ',gemm=' || gemm_quant ELSE '' END
               || CASE WHEN moe_quant <> '' THEN ',moe=' || moe_quant ELSE '' END
               || CASE WHEN kvcache_quant <> '' THEN ',kv=' || kvcache_quant ELSE '' END
               || CASE WHEN fmha_quant <> '' THEN ',fmha=' || fmha_quant ELSE '' END
               || CASE WHEN comm_quant <> '' THEN ',comm=' || comm_quant ELSE '' END, 2) AS quant,
           CASE WHEN max(dp, p_dp, d_dp) > 1 AND max(pp, p_pp, d_pp) > 1 THEN 'adp,pp'
                WHEN max(dp, p_dp, d_dp) > 1 THEN 'adp'
                WHEN max(pp, p_pp, d_pp) > 1 THEN 'pp'
                ELSE 'tp' END AS layout,
           CASE WHEN instr(evaluator, '+cal:') > 0 THEN substr(evaluator, instr(evaluator, '+cal:') + 5) END AS cal_rest
    FROM operating_points
), c2 AS (
    -- NAME@digest ends at the next '+' (accuracy's points append "+run:…"; a
    -- calibration name has no '+', calibrate refuses one).
    SELECT c.*, CASE WHEN instr(cal_rest, '+') > 0 THEN substr(cal_rest, 1, instr(cal_rest, '+') - 1) ELSE cal_rest END AS cal
    FROM c
), n AS (
    SELECT key, system, backend, version, model, deployed, quant, layout, cal,
           substr(cal, 1, instr(cal, '@') - 1) AS cal_name,
           substr(cal, instr(cal, '@') + 1) AS cal_digest
    FROM c2
), m AS (
    SELECT n.*, k.name AS stored_name,
           (SELECT p.rowid FROM calibration_params p WHERE p.name = k.name AND p.system = n.system
                AND p.backend = n.backend AND p.version = n.version AND p.model = n.model
                AND p.deployed_version IN (n.deployed, '') AND p.quant IN (n.quant, '') AND p.layout IN (n.layout, '')
            ORDER BY p.deployed_version = '', p.quant = '', p.layout = '' LIMIT 1) AS param
    FROM n
    LEFT JOIN calibrations k ON k.name = n.cal_name AND k.digest = n.cal_digest
)
SELECT m.key, m.cal AS calibration,
    CASE
        WHEN m.cal IS NULL THEN 'none'
        WHEN m.stored_name IS NULL THEN 'calibration ' || m.cal || ' is no longer stored (refitted or dropped)'
        WHEN p.name IS NULL THEN 'uncalibrated: ' || m.cal_name || ' has no fit for this system, backend, version, deployed version, model, quantisation and layout'
        ELSE 'calibrated'
    END AS calibration_status,
    m.quant, p.quant AS calibration_quant, m.deployed AS deployed_version, p.deployed_version AS calibration_deployed_version,
    m.layout, p.layout AS calibration_layout,
    p.prefill_scale, p.decode_scale, p.pass_overhead_ms, p.request_overhead_ms,
    p.rows AS calibration_rows, p.ttft_mape_cv AS calibration_ttft_cv_mape_pct, p.tpot_mape_cv AS calibration_tpot_cv_mape_pct
FROM m
LEFT JOIN calibration_params p ON p.rowid = m.param;
