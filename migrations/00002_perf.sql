-- +goose Up
-- Perf database: system specs, model definitions, aiconfigurator's perf tables and
-- what is needed to redo its shared-layer source resolution from the store
-- (perfdb.LoadStore gives exactly what perfdb.LoadDir gives from the files).
-- Perf rows are stored as read from the Parquet files; the loader rules (drop
-- *_eager all-reduce and awq/gptq GEMM rows, MHA n_kv -> 0, GEMM SOL floor) are
-- applied when loading, by perfdb. Latency is ms, power W (NULL: the file has
-- no power column), message sizes are elements.

-- One row per system spec YAML (systems/<name>.yaml).
CREATE TABLE systems (
    name                            TEXT PRIMARY KEY,
    data_dir                        TEXT NOT NULL,
    mem_bw                          REAL NOT NULL,
    mem_bw_empirical_scaling_factor REAL NOT NULL,
    mem_empirical_constant_latency  REAL NOT NULL,
    mem_capacity                    REAL NOT NULL,
    bfloat16_tc_flops               REAL NOT NULL,
    int8_tc_flops                   REAL NOT NULL,
    fp8_tc_flops                    REAL NOT NULL,
    fp4_tc_flops                    REAL NOT NULL,
    power                           REAL NOT NULL,
    sm_version                      INTEGER NOT NULL,
    num_gpus_per_node               INTEGER NOT NULL,
    inter_node_bw                   REAL NOT NULL,
    intra_node_bw                   REAL NOT NULL,
    pcie_bw                         REAL NOT NULL,
    p2p_latency                     REAL NOT NULL,
    num_gpus_per_rack               INTEGER NOT NULL,
    inter_rack_bw                   REAL NOT NULL,
    nccl_mem                        TEXT NOT NULL CHECK (json_valid(nccl_mem)), -- {"gpus": bytes}
    other_mem                       REAL NOT NULL,
    nccl_version                    TEXT NOT NULL,
    yaml                            TEXT NOT NULL,  -- the spec as given
    sha256                          TEXT NOT NULL
) STRICT;

-- One row per model (HF config.json [+ hf_quant_config.json]).
CREATE TABLE models (
    id                      TEXT PRIMARY KEY,  -- "org/name"
    architecture            TEXT NOT NULL,
    family                  TEXT NOT NULL,     -- LLAMA | MOE | "" (unsupported)
    num_hidden_layers       INTEGER NOT NULL,
    hidden_size             INTEGER NOT NULL,
    num_attention_heads     INTEGER NOT NULL,
    num_key_value_heads     INTEGER NOT NULL,
    head_dim                INTEGER NOT NULL,
    intermediate_size       INTEGER NOT NULL,
    vocab_size              INTEGER NOT NULL,
    max_position_embeddings INTEGER NOT NULL,
    num_experts             INTEGER NOT NULL,  -- 0 for dense models
    num_experts_per_tok     INTEGER NOT NULL,
    moe_intermediate_size   INTEGER NOT NULL,
    gemm_quant              TEXT NOT NULL,
    kvcache_quant           TEXT NOT NULL,
    fmha_quant              TEXT NOT NULL,
    moe_quant               TEXT NOT NULL,
    comm_quant              TEXT NOT NULL,
    config                  TEXT NOT NULL CHECK (json_valid(config)),
    quant_config            TEXT CHECK (quant_config IS NULL OR json_valid(quant_config)),
    sha256                  TEXT NOT NULL      -- of config and quant config together
) STRICT;

-- One row per <family>/<backend>/<version> data directory of a system, with
-- its sidecars (the resolution needs every version dir, even of tables aicdb
-- does not import).
CREATE TABLE perf_dirs (
    system          TEXT NOT NULL REFERENCES systems(name) ON DELETE CASCADE,
    family          TEXT NOT NULL,   -- attention, comm, gemm, moe, quantize, kda, ...
    backend         TEXT NOT NULL,   -- vllm, trtllm, sglang, nccl
    version         TEXT NOT NULL,   -- directory name, e.g. 0.22.0, 1.3.0rc20
    collection_meta TEXT,            -- collection_meta.yaml as given (NULL: absent)
    reuse           TEXT,            -- reuse.yaml as given (NULL: absent)
    incomplete      INTEGER NOT NULL CHECK (incomplete IN (0, 1)), -- INCOMPLETE.txt present
    PRIMARY KEY (system, family, backend, version)
) STRICT;

-- reuse.yaml entries, in file order (ord).
CREATE TABLE perf_reuse (
    system       TEXT NOT NULL,
    family       TEXT NOT NULL,
    backend      TEXT NOT NULL,
    version      TEXT NOT NULL,
    ord          INTEGER NOT NULL,
    table_name   TEXT NOT NULL,
    from_version TEXT NOT NULL,
    reason       TEXT NOT NULL,
    approved_by  TEXT NOT NULL,
    PRIMARY KEY (system, family, backend, version, ord),
    FOREIGN KEY (system, family, backend, version)
        REFERENCES perf_dirs(system, family, backend, version) ON DELETE CASCADE
) STRICT;

-- perf_data_reuse_manifest.yaml groups (cross-backend fill whitelist), per
-- system imported with it, in file order.
CREATE TABLE perf_manifest (
    system        TEXT NOT NULL REFERENCES systems(name) ON DELETE CASCADE,
    ord           INTEGER NOT NULL,
    op_file       TEXT NOT NULL,
    kernel_source TEXT NOT NULL,
    tier          TEXT NOT NULL,
    frameworks    TEXT NOT NULL CHECK (json_valid(frameworks)), -- JSON array of backends
    PRIMARY KEY (system, ord)
) STRICT;

-- One row per imported Parquet file, with the file itself: perfdb.LoadStore
-- decodes content (checked against sha256), so the store alone reproduces the
-- folder; the perf_* tables below mirror the rows for SQL. imported_at is
-- provenance only: no result ever reads it.
CREATE TABLE perf_sources (
    id          INTEGER PRIMARY KEY,
    system      TEXT NOT NULL REFERENCES systems(name) ON DELETE CASCADE,
    family      TEXT NOT NULL,
    backend     TEXT NOT NULL,
    version     TEXT NOT NULL,
    table_name  TEXT NOT NULL,   -- file stem, e.g. gemm_perf
    path        TEXT NOT NULL,   -- relative to the systems folder
    sha256      TEXT NOT NULL,
    rows        INTEGER NOT NULL,
    imported_at TEXT NOT NULL,
    mirrored    INTEGER NOT NULL CHECK (mirrored IN (0, 1)), -- rows copied into the perf_* table
    content     BLOB NOT NULL,
    UNIQUE (system, path)
) STRICT;
CREATE INDEX perf_sources_lookup ON perf_sources (system, backend, version, table_name);

-- Perf tables: one per op family. (source_id, row_idx) is the row's position
-- in its file; resolution order depends on it.
CREATE TABLE perf_gemm (
    source_id     INTEGER NOT NULL REFERENCES perf_sources(id) ON DELETE CASCADE,
    row_idx       INTEGER NOT NULL,
    system        TEXT NOT NULL,
    backend       TEXT NOT NULL,
    version       TEXT NOT NULL,
    kernel_source TEXT NOT NULL,
    gemm_dtype    TEXT NOT NULL,
    m             INTEGER NOT NULL,
    n             INTEGER NOT NULL,
    k             INTEGER NOT NULL,
    latency       REAL NOT NULL,
    power         REAL,
    PRIMARY KEY (source_id, row_idx)
) STRICT, WITHOUT ROWID;

CREATE TABLE perf_context_attention (
    source_id           INTEGER NOT NULL REFERENCES perf_sources(id) ON DELETE CASCADE,
    row_idx             INTEGER NOT NULL,
    system              TEXT NOT NULL,
    backend             TEXT NOT NULL,
    version             TEXT NOT NULL,
    kernel_source       TEXT NOT NULL,
    attn_dtype          TEXT NOT NULL,
    kv_cache_dtype      TEXT NOT NULL,
    num_heads           INTEGER NOT NULL,
    num_key_value_heads INTEGER NOT NULL,  -- as in the file (MHA not yet mapped to 0)
    head_dim            INTEGER NOT NULL,
    window_size         INTEGER NOT NULL,
    isl                 INTEGER NOT NULL,
    step                INTEGER NOT NULL,
    batch_size          INTEGER NOT NULL,
    latency             REAL NOT NULL,
    power               REAL,
    PRIMARY KEY (source_id, row_idx)
) STRICT, WITHOUT ROWID;

CREATE TABLE perf_generation_attention (
    source_id           INTEGER NOT NULL REFERENCES perf_sources(id) ON DELETE CASCADE,
    row_idx             INTEGER NOT NULL,
    system              TEXT NOT NULL,
    backend             TEXT NOT NULL,
    version             TEXT NOT NULL,
    kernel_source       TEXT NOT NULL,
    attn_dtype          TEXT NOT NULL,
    kv_cache_dtype      TEXT NOT NULL,
    num_heads           INTEGER NOT NULL,
    num_key_value_heads INTEGER NOT NULL,
    head_dim            INTEGER NOT NULL,
    window_size         INTEGER NOT NULL,
    isl                 INTEGER NOT NULL,
    step                INTEGER NOT NULL,  -- KV length = isl + step
    batch_size          INTEGER NOT NULL,
    latency             REAL NOT NULL,
    power               REAL,
    PRIMARY KEY (source_id, row_idx)
) STRICT, WITHOUT ROWID;

CREATE TABLE perf_allreduce (
    source_id       INTEGER NOT NULL REFERENCES perf_sources(id) ON DELETE CASCADE,
    row_idx         INTEGER NOT NULL,
    system          TEXT NOT NULL,
    backend         TEXT NOT NULL,
    version         TEXT NOT NULL,
    kernel_source   TEXT NOT NULL,
    allreduce_dtype TEXT NOT NULL,
    num_gpus        INTEGER NOT NULL,
    message_size    INTEGER NOT NULL,  -- elements
    latency         REAL NOT NULL,
    power           REAL,
    implementation  TEXT NOT NULL,     -- the file's backend/implementation column
    PRIMARY KEY (source_id, row_idx)
) STRICT, WITHOUT ROWID;

CREATE TABLE perf_nccl (
    source_id     INTEGER NOT NULL REFERENCES perf_sources(id) ON DELETE CASCADE,
    row_idx       INTEGER NOT NULL,
    system        TEXT NOT NULL,
    backend       TEXT NOT NULL,  -- "nccl"
    version       TEXT NOT NULL,  -- the directory (misc.nccl_version), not the rows' version column
    kernel_source TEXT NOT NULL,
    nccl_dtype    TEXT NOT NULL,
    op_name       TEXT NOT NULL,
    num_gpus      INTEGER NOT NULL,
    message_size  INTEGER NOT NULL,  -- elements
    latency       REAL NOT NULL,
    power         REAL,
    PRIMARY KEY (source_id, row_idx)
) STRICT, WITHOUT ROWID;

CREATE TABLE perf_moe (
    source_id     INTEGER NOT NULL REFERENCES perf_sources(id) ON DELETE CASCADE,
    row_idx       INTEGER NOT NULL,
    system        TEXT NOT NULL,
    backend       TEXT NOT NULL,
    version       TEXT NOT NULL,
    kernel_source TEXT NOT NULL,
    moe_dtype     TEXT NOT NULL,
    distribution  TEXT NOT NULL,
    topk          INTEGER NOT NULL,
    num_experts   INTEGER NOT NULL,
    hidden_size   INTEGER NOT NULL,
    inter_size    INTEGER NOT NULL,
    moe_tp_size   INTEGER NOT NULL,
    moe_ep_size   INTEGER NOT NULL,
    num_tokens    INTEGER NOT NULL,
    latency       REAL NOT NULL,
    power         REAL,
    PRIMARY KEY (source_id, row_idx)
) STRICT, WITHOUT ROWID;

CREATE TABLE perf_compute_scale (
    source_id     INTEGER NOT NULL REFERENCES perf_sources(id) ON DELETE CASCADE,
    row_idx       INTEGER NOT NULL,
    system        TEXT NOT NULL,
    backend       TEXT NOT NULL,
    version       TEXT NOT NULL,
    kernel_source TEXT NOT NULL,
    quant_dtype   TEXT NOT NULL,
    m             INTEGER NOT NULL,
    k             INTEGER NOT NULL,
    latency       REAL NOT NULL,
    power         REAL,
    PRIMARY KEY (source_id, row_idx)
) STRICT, WITHOUT ROWID;

CREATE TABLE perf_scale_matrix (
    source_id     INTEGER NOT NULL REFERENCES perf_sources(id) ON DELETE CASCADE,
    row_idx       INTEGER NOT NULL,
    system        TEXT NOT NULL,
    backend       TEXT NOT NULL,
    version       TEXT NOT NULL,
    kernel_source TEXT NOT NULL,
    quant_dtype   TEXT NOT NULL,
    m             INTEGER NOT NULL,
    k             INTEGER NOT NULL,
    latency       REAL NOT NULL,
    power         REAL,
    PRIMARY KEY (source_id, row_idx)
) STRICT, WITHOUT ROWID;

-- +goose Down
DROP TABLE perf_scale_matrix;
DROP TABLE perf_compute_scale;
DROP TABLE perf_moe;
DROP TABLE perf_nccl;
DROP TABLE perf_allreduce;
DROP TABLE perf_generation_attention;
DROP TABLE perf_context_attention;
DROP TABLE perf_gemm;
DROP TABLE perf_sources;
DROP TABLE perf_manifest;
DROP TABLE perf_reuse;
DROP TABLE perf_dirs;
DROP TABLE models;
DROP TABLE systems;
