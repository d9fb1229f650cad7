-- +goose Up
-- Disaggregated rows in SQL (issue 11). Until this migration the tandem's handoff
-- metrics lived only in quantitative_results.distributions (JSON) and the screening
-- row dropped them. They become columns of both tables, at the row's tier, NULL on
-- aggregated rows (and on composed disagg rows, which have no tandem):
--   kv_transfer_ms_mean, kv_transfer_ms_p99  the KV flow's duration (transfer start →
--                                            last byte), ms
--   p_queue_ms_p99                           p99 of the prefill-side queueing delay
--                                            (visibility → first prefill pass), ms
--   d_headroom_min                           smallest free share of a decode worker's
--                                            KV seen at a transfer decision, 0..1
--   multi_stable                             1 when the burst and the staggered start
--                                            settle in two regimes (throughputs > 2 %
--                                            apart); screening rows store 0
-- The pool columns p_workers/p_batch/p_tp/p_pp/p_dp (and d_*) exist since 00003 (0 on
-- agg rows, kept NOT NULL for the writers of that schema); this adds each pool's
-- system and GPU count (workers × tp × pp × dp), NULL on agg rows. Both pools sit on
-- the row's system today; the columns exist so heterogeneous pools need no new
-- schema. Existing disagg rows are backfilled from their inputs; existing
-- quantitative results from their distributions JSON (kv_transfer_ms_p99 stays NULL
-- there: the weighted quantile rule is Go's; the next refinement of the point, after
-- the evaluator fingerprint changed with this issue, writes it).
ALTER TABLE operating_points ADD COLUMN p_system TEXT;
ALTER TABLE operating_points ADD COLUMN d_system TEXT;
ALTER TABLE operating_points ADD COLUMN p_gpus INTEGER CHECK (p_gpus IS NULL OR p_gpus > 0);
ALTER TABLE operating_points ADD COLUMN d_gpus INTEGER CHECK (d_gpus IS NULL OR d_gpus > 0);
ALTER TABLE operating_points ADD COLUMN kv_transfer_ms_mean REAL CHECK (kv_transfer_ms_mean >= 0 AND kv_transfer_ms_mean < 1e308);
ALTER TABLE operating_points ADD COLUMN kv_transfer_ms_p99 REAL CHECK (kv_transfer_ms_p99 >= 0 AND kv_transfer_ms_p99 < 1e308);
ALTER TABLE operating_points ADD COLUMN p_queue_ms_p99 REAL CHECK (p_queue_ms_p99 >= 0 AND p_queue_ms_p99 < 1e308);
ALTER TABLE operating_points ADD COLUMN d_headroom_min REAL CHECK (d_headroom_min >= 0 AND d_headroom_min <= 1);
ALTER TABLE operating_points ADD COLUMN multi_stable INTEGER CHECK (multi_stable IN (0, 1));

UPDATE operating_points
SET p_system = system, d_system = system,
    p_gpus = p_workers * p_tp * p_pp * p_dp, d_gpus = d_workers * d_tp * d_pp * d_dp
WHERE mode = 'disagg';

ALTER TABLE quantitative_results ADD COLUMN kv_transfer_ms_mean REAL CHECK (kv_transfer_ms_mean >= 0 AND kv_transfer_ms_mean < 1e308);
ALTER TABLE quantitative_results ADD COLUMN kv_transfer_ms_p99 REAL CHECK (kv_transfer_ms_p99 >= 0 AND kv_transfer_ms_p99 < 1e308);
ALTER TABLE quantitative_results ADD COLUMN p_queue_ms_p99 REAL CHECK (p_queue_ms_p99 >= 0 AND p_queue_ms_p99 < 1e308);
ALTER TABLE quantitative_results ADD COLUMN d_headroom_min REAL CHECK (d_headroom_min >= 0 AND d_headroom_min <= 1);
ALTER TABLE quantitative_results ADD COLUMN multi_stable INTEGER CHECK (multi_stable IN (0, 1));

UPDATE quantitative_results
SET p_queue_ms_p99 = json_extract(distributions, '$.p_queue_ms_p99'),
    d_headroom_min = json_extract(distributions, '$.d_headroom_min'),
    multi_stable = json_extract(distributions, '$.multi_stable'),
    kv_transfer_ms_mean = (
        SELECT sum(json_extract(a.value, '$.value') * json_extract(a.value, '$.weight')) / sum(json_extract(a.value, '$.weight'))
        FROM json_each(distributions, '$.kv_transfer') AS a)
WHERE json_type(distributions, '$.kv_transfer') = 'array'
  AND key IN (SELECT key FROM operating_points WHERE mode = 'disagg');

-- +goose Down
-- The views read the columns; store.Open re-creates them after migrating.
DROP VIEW IF EXISTS disagg;
DROP VIEW IF EXISTS best_configs;
DROP VIEW IF EXISTS pareto;
DROP VIEW IF EXISTS points;
ALTER TABLE quantitative_results DROP COLUMN multi_stable;
ALTER TABLE quantitative_results DROP COLUMN d_headroom_min;
ALTER TABLE quantitative_results DROP COLUMN p_queue_ms_p99;
ALTER TABLE quantitative_results DROP COLUMN kv_transfer_ms_p99;
ALTER TABLE quantitative_results DROP COLUMN kv_transfer_ms_mean;
ALTER TABLE operating_points DROP COLUMN multi_stable;
ALTER TABLE operating_points DROP COLUMN d_headroom_min;
ALTER TABLE operating_points DROP COLUMN p_queue_ms_p99;
ALTER TABLE operating_points DROP COLUMN kv_transfer_ms_p99;
ALTER TABLE operating_points DROP COLUMN kv_transfer_ms_mean;
ALTER TABLE operating_points DROP COLUMN d_gpus;
ALTER TABLE operating_points DROP COLUMN p_gpus;
ALTER TABLE operating_points DROP COLUMN d_system;
ALTER TABLE operating_points DROP COLUMN p_system;
