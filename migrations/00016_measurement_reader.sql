-- +goose Up
-- The reader a measurement file was read with (issue 9 part 3): how a format's
-- rows are read can change (store/measure.ReaderVersion; aic-silicon/2 takes a
-- row's silicon_concurrency as its client count, docs/validation.md Round 15).
-- Importing a file again is a no-op only when the same reader read it; a file
-- read by an older reader is read again and its rows updated in place (same
-- ids, so calibrations keep their training rows; their cached predictions go).
-- '' = read before this migration.
ALTER TABLE measurement_sources ADD COLUMN reader TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE measurement_sources DROP COLUMN reader;
