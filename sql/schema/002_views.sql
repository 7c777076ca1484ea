-- flamehouse schema, migration 2: the query views, usable from any client.
-- Parameterized views return Grafana-ready rows: flame graphs as
-- (i, level, label, value, self[, valueRight, selfRight]) in pre-order (ORDER BY i).
-- Common parameters:
--   process_id UInt64      a process (see process_list)
--   t, t1, t2              instants, DateTime64(3, 'UTC') (strings are UTC)
--   metric String          'bytes' (default meaning) or 'count'
--   max_nodes UInt32       0 = no limit; pruned rows go to `other`, value is kept
-- As-of semantics: a stack's value at t is its latest sample at or before t.

CREATE OR REPLACE VIEW {db}.process_list {on_cluster} AS
SELECT p.process_id AS process_id, p.pid AS pid, p.name AS name, p.full_path AS full_path,
       p.start_time AS start_time, s.first_ts AS first_ts, s.last_ts AS end_time,
       s.peak_size AS peak_bytes, s.peak_time AS peak_time, p.source AS source
FROM (SELECT * FROM {db}.processes FINAL) AS p
LEFT JOIN (
    SELECT process_id, min(first_ts) AS first_ts, max(last_ts) AS last_ts,
           max(peak_size) AS peak_size, argMaxMerge(peak) AS peak_time
    FROM {db}.process_stats GROUP BY process_id
) AS s ON s.process_id = p.process_id;

-- The process's memory peak: the earliest snapshot with the largest live size.
CREATE OR REPLACE VIEW {db}.peak {on_cluster} AS
SELECT argMax(ts, (size, -toUnixTimestamp64Milli(ts))) AS peak_time,
       max(size) AS peak_bytes,
       argMax(active, (size, -toUnixTimestamp64Milli(ts))) AS peak_count
FROM {db}.totals
WHERE process_id = {process_id:UInt64};

-- 1. Live bytes / live allocation count at an instant.
CREATE OR REPLACE VIEW {db}.flame_at {on_cluster} AS
SELECT i, n.level AS level, n.label AS label, n.value AS value, n.self AS self
FROM (
    SELECT stackTreeWith(groupArray((st.labels, x.v)), map('max_nodes', toString({max_nodes:UInt32}))) AS tree
    FROM (
        SELECT stack_id, argMax(if({metric:String} = 'count', active, size), ts) AS v
        FROM {db}.samples
        WHERE process_id = {process_id:UInt64} AND ts <= {t:DateTime64(3, 'UTC')}
        GROUP BY stack_id
        HAVING v != 0
    ) AS x
    ANY LEFT JOIN {db}.stacks AS st ON st.stack_id = x.stack_id
)
ARRAY JOIN tree AS n, arrayEnumerate(tree) AS i
ORDER BY i;

-- 2. The same at the process's memory peak (see `peak` for its time and value).
CREATE OR REPLACE VIEW {db}.flame_peak {on_cluster} AS
SELECT i, n.level AS level, n.label AS label, n.value AS value, n.self AS self
FROM (
    SELECT stackTreeWith(groupArray((st.labels, x.v)), map('max_nodes', toString({max_nodes:UInt32}))) AS tree
    FROM (
        SELECT stack_id, argMax(if({metric:String} = 'count', active, size), ts) AS v
        FROM {db}.samples
        WHERE process_id = {process_id:UInt64}
          AND ts <= (SELECT argMax(ts, (size, -toUnixTimestamp64Milli(ts))) FROM {db}.totals
                     WHERE process_id = {process_id:UInt64})
        GROUP BY stack_id
        HAVING v != 0
    ) AS x
    ANY LEFT JOIN {db}.stacks AS st ON st.stack_id = x.stack_id
)
ARRAY JOIN tree AS n, arrayEnumerate(tree) AS i
ORDER BY i;

-- 3a. Added (direction = 'added') or removed ('removed') over [t1, t2]: the
-- per-stack change value(t2) - value(t1), split by sign; removed values are
-- shown positive.
CREATE OR REPLACE VIEW {db}.flame_change {on_cluster} AS
SELECT i, n.level AS level, n.label AS label, n.value AS value, n.self AS self
FROM (
    SELECT stackTreeWith(groupArray((st.labels, abs(x.d))), map('max_nodes', toString({max_nodes:UInt32}))) AS tree
    FROM (
        SELECT stack_id,
               argMaxIf(if({metric:String} = 'count', active, size), ts, ts <= {t2:DateTime64(3, 'UTC')})
             - argMaxIf(if({metric:String} = 'count', active, size), ts, ts <= {t1:DateTime64(3, 'UTC')}) AS d
        FROM {db}.samples
        WHERE process_id = {process_id:UInt64} AND ts <= {t2:DateTime64(3, 'UTC')}
        GROUP BY stack_id
        HAVING if({direction:String} = 'removed', d < 0, d > 0)
    ) AS x
    ANY LEFT JOIN {db}.stacks AS st ON st.stack_id = x.stack_id
)
ARRAY JOIN tree AS n, arrayEnumerate(tree) AS i
ORDER BY i;

-- 3b. The same change as one Grafana diff frame: value/self at t1 (baseline),
-- valueRight/selfRight at t2 (comparison).
CREATE OR REPLACE VIEW {db}.flame_diff {on_cluster} AS
SELECT i, n.level AS level, n.label AS label, n.value AS value, n.self AS self,
       n.valueRight AS valueRight, n.selfRight AS selfRight
FROM (
    SELECT stackDiffWith(groupArray((st.labels, x.v1)), groupArray((st.labels, x.v2)),
                         map('max_nodes', toString({max_nodes:UInt32}))) AS tree
    FROM (
        SELECT stack_id,
               argMaxIf(if({metric:String} = 'count', active, size), ts, ts <= {t1:DateTime64(3, 'UTC')}) AS v1,
               argMaxIf(if({metric:String} = 'count', active, size), ts, ts <= {t2:DateTime64(3, 'UTC')}) AS v2
        FROM {db}.samples
        WHERE process_id = {process_id:UInt64} AND ts <= {t2:DateTime64(3, 'UTC')}
        GROUP BY stack_id
        HAVING v1 != 0 OR v2 != 0
    ) AS x
    ANY LEFT JOIN {db}.stacks AS st ON st.stack_id = x.stack_id
)
ARRAY JOIN tree AS n, arrayEnumerate(tree) AS i
ORDER BY i;

-- 4. Cumulative allocated bytes ('bytes') or allocation count ('count') up to t.
CREATE OR REPLACE VIEW {db}.flame_cumulative {on_cluster} AS
SELECT i, n.level AS level, n.label AS label, n.value AS value, n.self AS self
FROM (
    SELECT stackTreeWith(groupArray((st.labels, x.v)), map('max_nodes', toString({max_nodes:UInt32}))) AS tree
    FROM (
        SELECT stack_id, toInt64(argMax(if({metric:String} = 'count', total_count, total_bytes), ts)) AS v
        FROM {db}.samples
        WHERE process_id = {process_id:UInt64} AND ts <= {t:DateTime64(3, 'UTC')}
        GROUP BY stack_id
        HAVING v != 0
    ) AS x
    ANY LEFT JOIN {db}.stacks AS st ON st.stack_id = x.stack_id
)
ARRAY JOIN tree AS n, arrayEnumerate(tree) AS i
ORDER BY i;

-- 5. Whole-process values over time: the value at the end of each step, and
-- the largest live values within it (so a short peak is never hidden).
CREATE OR REPLACE VIEW {db}.totals_series {on_cluster} AS
SELECT toStartOfInterval(ts, toIntervalSecond({step:UInt32})) AS time,
       argMax(size, ts) AS live_bytes, argMax(active, ts) AS live_count,
       max(size) AS max_live_bytes, max(active) AS max_live_count,
       argMax(total_bytes, ts) AS allocated_bytes, argMax(total_count, ts) AS allocations
FROM {db}.totals
WHERE process_id = {process_id:UInt64}
  AND ts >= {t1:DateTime64(3, 'UTC')} AND ts <= {t2:DateTime64(3, 'UTC')}
GROUP BY time
ORDER BY time;

-- 6. Live bytes and count attributed to functions over time (every stack
-- through a function counted once, recursion included): a running sum of
-- the changes of the stacks through each function. An empty `functions`
-- array means every function (slow on big profiles: pick some). A step with
-- no change to a function has no row (the value holds).
CREATE OR REPLACE VIEW {db}.function_series {on_cluster} AS
SELECT time, function, live_bytes, live_count
FROM (
    SELECT time, function,
           sum(db) OVER w AS live_bytes, sum(dc) OVER w AS live_count
    FROM (
        -- Sum per step and stack first (steps x stacks rows), then fan out
        -- to the functions: far fewer rows than joining every sample.
        SELECT x.time AS time, sf.function AS function, sum(x.db) AS db, sum(x.dc) AS dc
        FROM (
            SELECT toStartOfInterval(ts, toIntervalSecond({step:UInt32})) AS time, stack_id,
                   sum(size_delta) AS db, sum(active_delta) AS dc
            FROM {db}.samples
            WHERE process_id = {process_id:UInt64} AND ts <= {t2:DateTime64(3, 'UTC')}
              AND stack_id IN (
                  SELECT stack_id FROM {db}.stack_functions
                  WHERE empty({functions:Array(String)}) OR has({functions:Array(String)}, function))
            GROUP BY time, stack_id
        ) AS x
        INNER JOIN (
            SELECT DISTINCT stack_id, function FROM {db}.stack_functions
            WHERE empty({functions:Array(String)}) OR has({functions:Array(String)}, function)
        ) AS sf ON sf.stack_id = x.stack_id
        GROUP BY time, function
    )
    WINDOW w AS (PARTITION BY function ORDER BY time ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
)
WHERE time >= toStartOfInterval({t1:DateTime64(3, 'UTC')}, toIntervalSecond({step:UInt32}))
ORDER BY time, function;

-- 7a. Top functions at t: self (leaf frame) and total (every stack through
-- the function once, so recursion is not double counted).
CREATE OR REPLACE VIEW {db}.top_functions {on_cluster} AS
SELECT f AS function, sumIf(x.v, f = st.labels[-1]) AS self, sum(x.v) AS total
FROM (
    SELECT stack_id, argMax(if({metric:String} = 'count', active, size), ts) AS v
    FROM {db}.samples
    WHERE process_id = {process_id:UInt64} AND ts <= {t:DateTime64(3, 'UTC')}
    GROUP BY stack_id
    HAVING v != 0
) AS x
ANY LEFT JOIN {db}.stacks AS st ON st.stack_id = x.stack_id
ARRAY JOIN arrayDistinct(st.labels) AS f
GROUP BY function
ORDER BY total DESC, function
LIMIT {limit:UInt32};

-- 7b. Top functions by change over [t1, t2] (largest absolute change first).
CREATE OR REPLACE VIEW {db}.top_functions_change {on_cluster} AS
SELECT f AS function, sumIf(x.d, f = st.labels[-1]) AS self, sum(x.d) AS total
FROM (
    SELECT stack_id,
           argMaxIf(if({metric:String} = 'count', active, size), ts, ts <= {t2:DateTime64(3, 'UTC')})
         - argMaxIf(if({metric:String} = 'count', active, size), ts, ts <= {t1:DateTime64(3, 'UTC')}) AS d
    FROM {db}.samples
    WHERE process_id = {process_id:UInt64} AND ts <= {t2:DateTime64(3, 'UTC')}
    GROUP BY stack_id
    HAVING d != 0
) AS x
ANY LEFT JOIN {db}.stacks AS st ON st.stack_id = x.stack_id
ARRAY JOIN arrayDistinct(st.labels) AS f
GROUP BY function
ORDER BY abs(total) DESC, function
LIMIT {limit:UInt32};
