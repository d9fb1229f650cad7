-- +goose Up
-- Request traces (issue 13, workload fidelity W3/W4): one traces row per imported
-- file (or ServeGen pool), its requests in trace_requests. An import is one
-- transaction: a file is stored whole or not at all. sha256 covers the format, the
-- import parameters and the bytes, so re-importing the same file changes nothing.
CREATE TABLE traces (
    id          INTEGER PRIMARY KEY,
    name        TEXT    NOT NULL UNIQUE CHECK (length(name) > 0),
    format      TEXT    NOT NULL CHECK (format IN ('mooncake', 'azure', 'servegen', 'jsonl')),
    source      TEXT    NOT NULL,
    sha256      TEXT    NOT NULL UNIQUE CHECK (length(sha256) = 64),
    -- prompt tokens per hash id (Mooncake 512); 0 when the trace has no hash ids
    hash_block  INTEGER NOT NULL CHECK (hash_block >= 0),
    params      TEXT    NOT NULL CHECK (json_valid(params)),
    requests    INTEGER NOT NULL CHECK (requests >= 0),
    last_ms     REAL    NOT NULL CHECK (last_ms >= 0 AND last_ms < 1e308),
    imported_at TEXT    NOT NULL
) STRICT;

-- trace_requests: seq is the request's rank in arrival order (0-based; ties keep file
-- order); line its source line (0 for ServeGen's drawn requests). Times in ms from
-- the trace's origin. hash_ids is a JSON array of integers or NULL.
CREATE TABLE trace_requests (
    trace_id   INTEGER NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL CHECK (seq >= 0),
    line       INTEGER NOT NULL CHECK (line >= 0),
    arrival_ms REAL    NOT NULL CHECK (arrival_ms >= 0 AND arrival_ms < 1e308),
    isl        INTEGER NOT NULL CHECK (isl > 0),
    osl        INTEGER NOT NULL CHECK (osl > 0),
    hash_ids   TEXT,
    session    TEXT,
    think_ms   REAL    CHECK (think_ms IS NULL OR (think_ms >= 0 AND think_ms < 1e308)),
    PRIMARY KEY (trace_id, seq)
) STRICT, WITHOUT ROWID;

CREATE INDEX trace_requests_arrival ON trace_requests (trace_id, arrival_ms);

-- replays: one row per `aicdb trace replay` (W3: the trace's own arrivals and lengths,
-- W4: sessions), its summary (counters and the 15 columns, JSON) and per-request
-- results in replay_requests. Written in one transaction.
CREATE TABLE replays (
    id                INTEGER PRIMARY KEY,
    trace_id          INTEGER NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    tier              TEXT    NOT NULL CHECK (tier IN ('quantitative', 'oracle')),
    workload_fidelity TEXT    NOT NULL CHECK (workload_fidelity IN ('W3', 'W4')),
    arguments         TEXT    NOT NULL CHECK (json_valid(arguments)),
    summary           TEXT    NOT NULL CHECK (json_valid(summary)),
    created_at        TEXT    NOT NULL
) STRICT;

CREATE TABLE replay_requests (
    replay_id     INTEGER NOT NULL REFERENCES replays (id) ON DELETE CASCADE,
    seq           INTEGER NOT NULL CHECK (seq >= 0),
    arrival_ms    REAL    NOT NULL CHECK (arrival_ms >= 0 AND arrival_ms < 1e308),
    isl           INTEGER NOT NULL CHECK (isl > 0),
    osl           INTEGER NOT NULL CHECK (osl > 0),
    cached_tokens INTEGER NOT NULL CHECK (cached_tokens >= 0),
    preemptions   INTEGER NOT NULL CHECK (preemptions >= 0),
    ttft_ms       REAL    NOT NULL CHECK (ttft_ms >= 0 AND ttft_ms < 1e308),
    tpot_ms       REAL    NOT NULL CHECK (tpot_ms >= 0 AND tpot_ms < 1e308),
    e2e_ms        REAL    NOT NULL CHECK (e2e_ms >= 0 AND e2e_ms < 1e308),
    PRIMARY KEY (replay_id, seq)
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE replay_requests;
DROP TABLE replays;
DROP INDEX trace_requests_arrival;
DROP TABLE trace_requests;
DROP TABLE traces;
