-- +goose Up
-- Base schema: the store's identity. Perf tables come in 00002, operating points in 00003.
CREATE TABLE store_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

-- +goose Down
DROP TABLE store_meta;
