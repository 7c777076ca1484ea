-- flamehouse schema, migration 5: loads that store nothing twice, whatever
-- the timing of a crash, and processes that can be deleted and loaded again.
-- Placeholders as in migration 1.

-- The load generation of a process: part of every deduplication token of
-- its batches (0, the first, keeps the tokens of earlier versions).
ALTER TABLE {db}.processes {on_cluster} ADD COLUMN IF NOT EXISTS generation UInt64 DEFAULT 0;

-- The generation the next load of a deleted process takes (`flamehouse
-- delete`, `load --replace`): kept when its rows are deleted, so the
-- engine's deduplication window cannot drop the reload as a copy of them.
CREATE TABLE IF NOT EXISTS {db}.process_generations {on_cluster} (
    process_id UInt64,
    generation UInt64,
    deleted_at DateTime64(3, 'UTC') DEFAULT now64(3)
) ENGINE = {replicated}ReplacingMergeTree
ORDER BY (process_id, generation)
SETTINGS non_replicated_deduplication_window = 100000;

-- A batch's byte range [start_offset, end_offset), written before any of
-- its rows. A load resumed after a crash between a batch's rows and its
-- `load_progress` row cuts the replayed batch at exactly end_offset, so it
-- gets the same deduplication tokens and is stored once.
CREATE TABLE IF NOT EXISTS {db}.load_intents {on_cluster} (
    process_id UInt64,
    generation UInt64,
    start_offset UInt64,
    end_offset UInt64,
    written_at DateTime64(3, 'UTC') DEFAULT now64(3)
) ENGINE = {replicated}ReplacingMergeTree(written_at)
ORDER BY (process_id, generation, start_offset)
SETTINGS non_replicated_deduplication_window = 100000;

-- Every table a load inserts into with a deduplication token (and the
-- materialized views' targets, deduplicated with them) keeps a window of
-- recent tokens: without one a token is ignored and a re-sent batch is
-- stored twice (`samples` and `samples_1m` had one since migrations 1 and 3).
ALTER TABLE {db}.processes {on_cluster} MODIFY SETTING non_replicated_deduplication_window = 100000;

ALTER TABLE {db}.frames {on_cluster} MODIFY SETTING non_replicated_deduplication_window = 100000;

ALTER TABLE {db}.stacks {on_cluster} MODIFY SETTING non_replicated_deduplication_window = 100000;

ALTER TABLE {db}.stack_functions {on_cluster} MODIFY SETTING non_replicated_deduplication_window = 100000;

ALTER TABLE {db}.totals {on_cluster} MODIFY SETTING non_replicated_deduplication_window = 100000;

ALTER TABLE {db}.process_stats {on_cluster} MODIFY SETTING non_replicated_deduplication_window = 100000;

ALTER TABLE {db}.load_progress {on_cluster} MODIFY SETTING non_replicated_deduplication_window = 100000;
