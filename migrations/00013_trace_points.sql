-- +goose Up
-- operating_points.workload (issue 13): the identity of a trace workload (W3/W4) a
-- row was evaluated under, as canonical JSON (refine.TraceWorkloadID: trace name,
-- content sha256, slice, sessions, replicas); '' for fixed-shape rows (W0..W2),
-- whose workload is isl/osl/prefix. It is part of the row key and of the workload
-- group (pareto partition, sweep leases) when not '', so a trace re-imported with
-- other content under the same name never reuses the old rows.
ALTER TABLE operating_points ADD COLUMN workload TEXT NOT NULL DEFAULT '';

-- +goose Down
-- The views read the column; store.Open re-creates them after migrating.
DROP VIEW IF EXISTS best_configs;
DROP VIEW IF EXISTS pareto_all;
DROP VIEW IF EXISTS pareto;
DROP VIEW IF EXISTS points;
ALTER TABLE operating_points DROP COLUMN workload;
