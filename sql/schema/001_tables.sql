-- flamehouse schema, migration 1: tables and materialized views.
-- Placeholders: {db} the database, {on_cluster} empty or `ON CLUSTER name`,
-- {replicated} before an engine: nothing on a single node; on a cluster
-- `Replicated`, with one replica path for the whole cluster (every node
-- holds all of the table; `schema::WHOLE_REPLICA_PATH`). Statements are
-- separated by blank lines; every one is idempotent (IF NOT EXISTS).

CREATE DATABASE IF NOT EXISTS {db} {on_cluster};

-- One row per profiled process (one .binpb file). process_id is a stable
-- hash of (name, pid, start time), so reloading a file keeps its id.
CREATE TABLE IF NOT EXISTS {db}.processes {on_cluster} (
    process_id UInt64,
    pid UInt32,
    name String,
    full_path String,
    start_time DateTime64(9, 'UTC'),
    source String,
    loaded_at DateTime64(3, 'UTC') DEFAULT now64(3)
) ENGINE = {replicated}ReplacingMergeTree(loaded_at)
ORDER BY process_id;

-- Dictionary of frames: frame_id is a stable hash of the label.
CREATE TABLE IF NOT EXISTS {db}.frames {on_cluster} (
    frame_id UInt64,
    label String,
    function String,
    file String,
    line UInt32,
    module String
) ENGINE = {replicated}ReplacingMergeTree
ORDER BY frame_id;

-- Dictionary of stacks keyed by a stable hash of the labels (root first),
-- so facts GROUP BY an integer and join the labels once per stack.
CREATE TABLE IF NOT EXISTS {db}.stacks {on_cluster} (
    stack_id UInt64,
    frame_ids Array(UInt64),
    labels Array(String)
) ENGINE = {replicated}ReplacingMergeTree
ORDER BY stack_id;

-- The narrow fact table: a stack's absolute values whenever they change
-- (as-of semantics: the value at t is the latest row at or before t), plus
-- the change since the stack's previous row, computed by the loader.
CREATE TABLE IF NOT EXISTS {db}.samples {on_cluster} (
    process_id UInt64,
    ts DateTime64(3, 'UTC'),
    stack_id UInt64,
    size Int64,
    active Int64,
    overhead Int64,
    total_count UInt64,
    total_bytes UInt64,
    size_delta Int64,
    active_delta Int64,
    count_delta Int64,
    bytes_delta Int64
) ENGINE = {replicated}MergeTree
ORDER BY (process_id, stack_id, ts)
SETTINGS non_replicated_deduplication_window = 100000;

-- Whole-process values per snapshot, as the profiler reported them.
CREATE TABLE IF NOT EXISTS {db}.totals {on_cluster} (
    process_id UInt64,
    ts DateTime64(3, 'UTC'),
    size Int64,
    active Int64,
    overhead Int64,
    total_count UInt64,
    total_bytes UInt64
) ENGINE = {replicated}ReplacingMergeTree
ORDER BY (process_id, ts);

-- Which functions each stack passes through, each once even under
-- recursion (arrayDistinct), and whether it is the leaf. Maintained from
-- `stacks` (one row per new stack and function), so per-function series and
-- top functions join a small table instead of expanding every sample row.
CREATE TABLE IF NOT EXISTS {db}.stack_functions {on_cluster} (
    function String,
    stack_id UInt64,
    is_leaf UInt8
) ENGINE = {replicated}ReplacingMergeTree
ORDER BY (function, stack_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.stack_functions_mv {on_cluster} TO {db}.stack_functions AS
SELECT f AS function, stack_id, toUInt8(f = labels[-1]) AS is_leaf
FROM {db}.stacks
ARRAY JOIN arrayDistinct(labels) AS f;

-- Process lifetime and peak, kept up to date on every insert.
CREATE TABLE IF NOT EXISTS {db}.process_stats {on_cluster} (
    process_id UInt64,
    first_ts SimpleAggregateFunction(min, DateTime64(3, 'UTC')),
    last_ts SimpleAggregateFunction(max, DateTime64(3, 'UTC')),
    peak_size SimpleAggregateFunction(max, Int64),
    peak AggregateFunction(argMax, DateTime64(3, 'UTC'), Tuple(Int64, Int64))
) ENGINE = {replicated}AggregatingMergeTree
ORDER BY process_id;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.process_stats_mv {on_cluster} TO {db}.process_stats AS
SELECT process_id, min(ts) AS first_ts, max(ts) AS last_ts, max(size) AS peak_size,
       argMaxState(ts, (size, -toUnixTimestamp64Milli(ts))) AS peak
FROM {db}.totals
GROUP BY process_id;

-- Where each source file's load stopped (byte offset of the end of the last
-- stored record), so `load --watch` and restarts resume there.
CREATE TABLE IF NOT EXISTS {db}.load_progress {on_cluster} (
    source String,
    process_id UInt64,
    offset UInt64,
    snapshots UInt64,
    last_ts DateTime64(3, 'UTC'),
    updated_at DateTime64(3, 'UTC') DEFAULT now64(3)
) ENGINE = {replicated}ReplacingMergeTree(updated_at)
ORDER BY source;

CREATE TABLE IF NOT EXISTS {db}.schema_migrations {on_cluster} (
    version UInt32,
    name String,
    applied_at DateTime DEFAULT now()
) ENGINE = {replicated}ReplacingMergeTree
ORDER BY version;
