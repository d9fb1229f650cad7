-- +goose Up
-- operating_points.engine_profile / engine_config (issue 9 part 2): how the point's
-- engine was configured and the resolved configuration itself, so a row can be
-- deployed as it was predicted (`aicdb deploy ROWID`). engine_config is JSON
-- (engineconf.Resolved: profile, the --engine-config keys applied, the agg engine or
-- the prefill/decode engines); '{}' on rows stored before this migration (their
-- engine follows from their inputs and the sweep's original rule). engine_profile is
-- '' for rows of the original rule and part of the row key otherwise.
ALTER TABLE operating_points ADD COLUMN engine_profile TEXT NOT NULL DEFAULT '';
ALTER TABLE operating_points ADD COLUMN engine_config TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(engine_config));

-- +goose Down
-- The views read the columns; store.Open re-creates them after migrating.
DROP VIEW IF EXISTS best_configs;
DROP VIEW IF EXISTS pareto;
DROP VIEW IF EXISTS points;
ALTER TABLE operating_points DROP COLUMN engine_config;
ALTER TABLE operating_points DROP COLUMN engine_profile;
