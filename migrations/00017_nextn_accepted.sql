-- +goose Up
-- MTP speculative decoding (docs/validation.md Round 16): a point with nextn > 0
-- drafts (TensorRT-LLM one-model MTP) accepts nextn_accepted of them per decode
-- step on average — a property of the model and the data, not of the engine —,
-- which sets how many tokens each decode step emits (engine.StepTokens). In the
-- row key only when nextn > 0, so rows stored before keep their keys.
ALTER TABLE operating_points ADD COLUMN nextn_accepted REAL NOT NULL DEFAULT 0 CHECK (nextn_accepted >= 0 AND nextn_accepted < 1e308);

-- +goose Down
-- SQLite drops a column only when no view reads it: every view is dropped
-- first; store.Open re-creates them (their recorded version includes the schema
-- version). Rows with nextn_accepted > 0 keep their keys (computed with it).
DROP VIEW IF EXISTS point_calibrations;
DROP VIEW IF EXISTS accuracy;
DROP VIEW IF EXISTS disagg;
DROP VIEW IF EXISTS best_configs;
DROP VIEW IF EXISTS pareto_all;
DROP VIEW IF EXISTS pareto;
DROP VIEW IF EXISTS points;
DROP VIEW IF EXISTS store_version;
ALTER TABLE operating_points DROP COLUMN nextn_accepted;
