-- +goose Up
-- quantitative_results.evaluator: the fingerprint (Evaluator.Name) of the code that
-- computed the row. Until this migration the perfdb evaluator cached one estimator
-- per perfdb.Config, a key without the model and the system (issue 8): a process
-- that refined points of two models or two systems — `aicdb query` or `aicdb best`
-- over a store swept with several — priced some rows with another model's or
-- system's perf numbers and stored them here (e.g. Qwen3-32B tp2 b160 with
-- Llama-3.1-8B's TTFT p99 135.6 ms instead of 501.7 ms). Rows without a fingerprint
-- cannot be told apart, so every one of them is deleted: their points fall back to
-- the screening tier (the points view shows the quantitative tier only where a
-- result exists) and the next query or `aicdb best` that needs them refines them
-- again with the fixed evaluator. operating_points rows are kept: a sweep prices one
-- model on one system per process, so its legacy and screening columns were never
-- mixed; `aicdb doctor` re-evaluates a sample to check a store.
ALTER TABLE quantitative_results ADD COLUMN evaluator TEXT NOT NULL DEFAULT '';
DELETE FROM quantitative_results WHERE evaluator = '';

-- +goose Down
ALTER TABLE quantitative_results DROP COLUMN evaluator;
