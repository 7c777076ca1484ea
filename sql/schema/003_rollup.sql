-- flamehouse schema, migration 3: a per-minute rollup of the samples'
-- changes, so per-function series read ~1 row per stack and minute instead
-- of every sample, and function_series reading it for whole-minute steps.
-- Placeholders as in migration 1.

-- Per process, stack and minute: the sum of the changes of live bytes and
-- live allocations (summed again on merge). The loader writes it with each
-- batch of samples, as it computes the deltas it sums (a materialized view
-- doing this GROUP BY on every inserted block cost the engine 2 s per hour
-- of profile); anything else that writes `samples` must write it too. Like
-- `samples`, it keeps a deduplication window: a batch sent twice (same
-- token) must not be summed twice.
CREATE TABLE IF NOT EXISTS {db}.samples_1m {on_cluster} (
    process_id UInt64,
    minute DateTime('UTC'),
    stack_id UInt64,
    size_delta Int64,
    active_delta Int64
) ENGINE = {replicated}SummingMergeTree
ORDER BY (process_id, stack_id, minute)
SETTINGS non_replicated_deduplication_window = 100000;

-- Samples stored before this migration (only while the rollup is empty, so
-- a re-run adds nothing). On a cluster this fills the shard it runs on.
INSERT INTO {db}.samples_1m
SELECT process_id, toStartOfMinute(ts) AS minute, stack_id,
       sum(size_delta) AS size_delta, sum(active_delta) AS active_delta
FROM {db}.samples
WHERE (SELECT count() FROM {db}.samples_1m) = 0
GROUP BY process_id, minute, stack_id;

-- 6. Live bytes and count attributed to functions over time (every stack
-- through a function counted once, recursion included): a running sum of
-- the changes of the stacks through each function. Each row is the value at
-- the end of its step; t2 picks the last step, which is taken whole. Steps
-- of whole minutes read the rollup, other steps every sample. Changes are
-- summed per step and per *set* of selected functions a stack passes
-- through (a handful of sets for a handful of functions), then fanned out
-- to the functions: the work grows with the rows read, not with steps x
-- stacks. An empty `functions` array means every function (every stack is
-- then its own set: slow on big profiles, pick some). A step with no change
-- to a function has no row (the value holds).
CREATE OR REPLACE VIEW {db}.function_series {on_cluster} AS
WITH
    sets AS (
        SELECT stack_id, arraySort(groupUniqArray(function)) AS fs, sipHash64(fs) AS sid
        FROM {db}.stack_functions
        WHERE empty({functions:Array(String)}) OR has({functions:Array(String)}, function)
        GROUP BY stack_id
    ),
    changes AS (
        SELECT toStartOfInterval(s.minute, toIntervalSecond({step:UInt32})) AS time, g.sid AS sid,
               sum(s.size_delta) AS db, sum(s.active_delta) AS dc
        FROM {db}.samples_1m AS s
        INNER JOIN sets AS g ON g.stack_id = s.stack_id
        WHERE {step:UInt32} % 60 = 0
          AND s.process_id = {process_id:UInt64}
          AND s.minute < toStartOfInterval({t2:DateTime64(3, 'UTC')}, toIntervalSecond({step:UInt32}))
                         + toIntervalSecond({step:UInt32})
        GROUP BY time, sid
        UNION ALL
        SELECT toStartOfInterval(s.ts, toIntervalSecond({step:UInt32})) AS time, g.sid AS sid,
               sum(s.size_delta) AS db, sum(s.active_delta) AS dc
        FROM {db}.samples AS s
        INNER JOIN sets AS g ON g.stack_id = s.stack_id
        WHERE {step:UInt32} % 60 != 0
          AND s.process_id = {process_id:UInt64}
          AND s.ts < toStartOfInterval({t2:DateTime64(3, 'UTC')}, toIntervalSecond({step:UInt32}))
                     + toIntervalSecond({step:UInt32})
        GROUP BY time, sid
    )
SELECT time, function, live_bytes, live_count
FROM (
    SELECT time, function,
           sum(db) OVER w AS live_bytes, sum(dc) OVER w AS live_count
    FROM (
        SELECT c.time AS time, f AS function, sum(c.db) AS db, sum(c.dc) AS dc
        FROM changes AS c
        INNER JOIN (SELECT sid, any(fs) AS fs FROM sets GROUP BY sid) AS k ON k.sid = c.sid
        ARRAY JOIN k.fs AS f
        GROUP BY time, function
    )
    WINDOW w AS (PARTITION BY function ORDER BY time ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
WHERE time >= toStartOfInterval({t1:DateTime64(3, 'UTC')}, toIntervalSecond({step:UInt32}))
ORDER BY time, function;
