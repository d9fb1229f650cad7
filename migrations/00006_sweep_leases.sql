-- +goose Up
-- sweep_leases: the lease a running sweep holds on the workload groups it evaluates
-- (issue 8, item 8). The row is written in the transaction that records the sweep as
-- running and deleted in the one that records its outcome; the holder refreshes
-- heartbeat_at while it runs. A sweep of a leased group waits for the lease, then
-- reuses the rows its holder committed. A running sweep is marked interrupted only
-- once its holder is gone: same host and pid not alive, or heartbeat older than the
-- lease timeout (refine.Sweep). groups is the JSON list of store.Group values.
CREATE TABLE sweep_leases (
    sweep_id     INTEGER PRIMARY KEY REFERENCES sweeps (id) ON DELETE CASCADE,
    host         TEXT    NOT NULL,
    pid          INTEGER NOT NULL CHECK (pid > 0),
    heartbeat_at TEXT    NOT NULL,
    groups       TEXT    NOT NULL CHECK (json_valid(groups))
) STRICT;

-- +goose Down
DROP TABLE sweep_leases;
