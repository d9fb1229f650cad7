-- +goose Up
-- sweeps.points_no_perf_data: points of the sweep the perf data could not price (a
-- structured table miss, an unsupported model family): skipped like aiconfigurator
-- skips them, not stored, counted here. Rerunning the sweep tries them again.
ALTER TABLE sweeps ADD COLUMN points_no_perf_data INTEGER NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE sweeps DROP COLUMN points_no_perf_data;
