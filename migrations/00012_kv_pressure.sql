-- +goose Up
-- KV pressure on every row (issue 12 part 2, QUEUEING.md §3). Agg points are priced
-- with the KV pool of one worker from the memory model (perfdb KVCapacityTokens: GPU
-- memory × the engine's memory fraction − weights, activations and reserves, in
-- whole blocks), so KV-tight points are modelled (vLLM preemption V-R6, SGLang
-- retraction S-R4/S-R5, TRT-LLM admission T-R1) instead of assumed unbounded.
--   kv_capacity_tokens       the pool used (tokens); NULL = unbounded / not computed
--   kv_util_peak             peak fraction of the pool in use, in [0, 1]
--   preemptions_per_request  mean preemptions (retractions) of a steady request
--   kv_note                  how the values were obtained, or why they are NULL
-- Quantitative rows measure kv_util_peak and preemptions_per_request in the
-- calendar. Screening rows carry a closed-form estimate: the pool demand of C
-- requests at full length; when it fits, no request can be preempted (0) and the
-- utilisation is at most demand / capacity; when it does not (KV-tight), the
-- preemption count is NULL (kv_note says so), bracket_certain is 0 and the sweep
-- stores the point's quantitative tier at once. Rows stored before this migration
-- have NULLs and kv_note 'not computed (stored before migration 00012)'; the
-- evaluator fingerprint changed with the KV capacity, so the next sweep of their
-- workload replaces them.
ALTER TABLE operating_points ADD COLUMN kv_capacity_tokens INTEGER CHECK (kv_capacity_tokens IS NULL OR kv_capacity_tokens > 0);
ALTER TABLE operating_points ADD COLUMN kv_util_peak REAL CHECK (kv_util_peak IS NULL OR (kv_util_peak >= 0 AND kv_util_peak <= 1));
ALTER TABLE operating_points ADD COLUMN preemptions_per_request REAL CHECK (preemptions_per_request IS NULL OR (preemptions_per_request >= 0 AND preemptions_per_request < 1e308));
ALTER TABLE operating_points ADD COLUMN kv_note TEXT NOT NULL DEFAULT 'not computed (stored before migration 00012)';
ALTER TABLE quantitative_results ADD COLUMN kv_capacity_tokens INTEGER CHECK (kv_capacity_tokens IS NULL OR kv_capacity_tokens > 0);
ALTER TABLE quantitative_results ADD COLUMN kv_util_peak REAL CHECK (kv_util_peak IS NULL OR (kv_util_peak >= 0 AND kv_util_peak <= 1));
ALTER TABLE quantitative_results ADD COLUMN preemptions_per_request REAL CHECK (preemptions_per_request IS NULL OR (preemptions_per_request >= 0 AND preemptions_per_request < 1e308));

-- +goose Down
-- The views read the columns; store.Open re-creates them after migrating.
DROP VIEW IF EXISTS best_configs;
DROP VIEW IF EXISTS pareto_all;
DROP VIEW IF EXISTS pareto;
DROP VIEW IF EXISTS points;
ALTER TABLE quantitative_results DROP COLUMN preemptions_per_request;
ALTER TABLE quantitative_results DROP COLUMN kv_util_peak;
ALTER TABLE quantitative_results DROP COLUMN kv_capacity_tokens;
ALTER TABLE operating_points DROP COLUMN kv_note;
ALTER TABLE operating_points DROP COLUMN preemptions_per_request;
ALTER TABLE operating_points DROP COLUMN kv_util_peak;
ALTER TABLE operating_points DROP COLUMN kv_capacity_tokens;
