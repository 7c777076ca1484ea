-- flamehouse schema, migration 13: the memory views join the process's
-- own stacks. Placeholders as in migration 1.
--
-- Every memory view ended in `ANY LEFT JOIN stacks`: the engine builds
-- that join from the whole table, which holds every process's stacks and,
-- since migration 6, every continuous profile's too (it is keyed by a hash,
-- so no filter prunes it). Memory answers slowed down as continuous data
-- grew, as the continuous queries did before `cp_stacks` (migration 11).
--
-- `process_stacks(process_id, stack_id, labels)` holds, per process, the
-- stacks its samples name, ordered by process: the loader writes it in the
-- same batch as the stacks (before the samples), `delete` deletes a
-- process's rows with its samples, and this migration back-fills it from
-- the stored samples joined once with `stacks`. The views below are those
-- of migration 4 with that join restricted to the view's process; their
-- answers are the same. `stacks` stays the dictionary shared with the
-- continuous profiles and `stack_functions`.
CREATE TABLE IF NOT EXISTS {db}.process_stacks {on_cluster} (
    process_id UInt64,
    stack_id UInt64,
    labels Array(String)
) ENGINE = {replicated}ReplacingMergeTree
ORDER BY (process_id, stack_id)
SETTINGS non_replicated_deduplication_window = 100000;

-- A stack shared by two processes is a row of each (LEFT, not INNER:
-- `ANY INNER JOIN` pairs rows one to one).
INSERT INTO {db}.process_stacks
SELECT x.process_id, x.stack_id, st.labels
FROM (SELECT DISTINCT process_id, stack_id FROM {db}.samples) AS x
ANY LEFT JOIN {db}.stacks AS st ON st.stack_id = x.stack_id
WHERE (SELECT count() FROM {db}.process_stacks) = 0;

-- 1. Live bytes / live allocation count at an instant.
CREATE OR REPLACE VIEW {db}.flame_at {on_cluster} AS
SELECT i, n.level AS level, n.label AS label, n.value AS value, n.self AS self
FROM (
    SELECT stackTreeWith(groupArray((st.labels, x.v)), map('max_nodes', toString({max_nodes:UInt32}))) AS tree
    FROM (
        SELECT stack_id, argMax(if({metric:String} = 'count', active, size), ts) AS v
        FROM {db}.samples
        WHERE process_id = {process_id:UInt64}
          AND (SELECT throwIf({metric:String} NOT IN ('bytes', 'count'),
              concat('unknown metric ''', {metric:String}, ''' (use ''bytes'' or ''count'')'))) = 0
          AND ts <= {t:DateTime64(3, 'UTC')}
        GROUP BY stack_id
        HAVING v != 0
    ) AS x
    ANY LEFT JOIN (SELECT stack_id, labels FROM {db}.process_stacks
                   WHERE process_id = {process_id:UInt64}) AS st ON st.stack_id = x.stack_id
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
          AND (SELECT throwIf({metric:String} NOT IN ('bytes', 'count'),
              concat('unknown metric ''', {metric:String}, ''' (use ''bytes'' or ''count'')'))) = 0
          AND ts <= (SELECT argMax(ts, (size, -toUnixTimestamp64Milli(ts))) FROM {db}.totals
                     WHERE process_id = {process_id:UInt64})
        GROUP BY stack_id
        HAVING v != 0
    ) AS x
    ANY LEFT JOIN (SELECT stack_id, labels FROM {db}.process_stacks
                   WHERE process_id = {process_id:UInt64}) AS st ON st.stack_id = x.stack_id
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
        WHERE process_id = {process_id:UInt64}
          AND (SELECT throwIf({metric:String} NOT IN ('bytes', 'count'),
              concat('unknown metric ''', {metric:String}, ''' (use ''bytes'' or ''count'')'))) = 0
          AND (SELECT throwIf({direction:String} NOT IN ('added', 'removed'),
              concat('unknown direction ''', {direction:String}, ''' (use ''added'' or ''removed'')'))) = 0
          AND ts <= {t2:DateTime64(3, 'UTC')}
        GROUP BY stack_id
        HAVING if({direction:String} = 'removed', d < 0, d > 0)
    ) AS x
    ANY LEFT JOIN (SELECT stack_id, labels FROM {db}.process_stacks
                   WHERE process_id = {process_id:UInt64}) AS st ON st.stack_id = x.stack_id
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
        WHERE process_id = {process_id:UInt64}
          AND (SELECT throwIf({metric:String} NOT IN ('bytes', 'count'),
              concat('unknown metric ''', {metric:String}, ''' (use ''bytes'' or ''count'')'))) = 0
          AND ts <= {t2:DateTime64(3, 'UTC')}
        GROUP BY stack_id
        HAVING v1 != 0 OR v2 != 0
    ) AS x
    ANY LEFT JOIN (SELECT stack_id, labels FROM {db}.process_stacks
                   WHERE process_id = {process_id:UInt64}) AS st ON st.stack_id = x.stack_id
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
        WHERE process_id = {process_id:UInt64}
          AND (SELECT throwIf({metric:String} NOT IN ('bytes', 'count'),
              concat('unknown metric ''', {metric:String}, ''' (use ''bytes'' or ''count'')'))) = 0
          AND ts <= {t:DateTime64(3, 'UTC')}
        GROUP BY stack_id
        HAVING v != 0
    ) AS x
    ANY LEFT JOIN (SELECT stack_id, labels FROM {db}.process_stacks
                   WHERE process_id = {process_id:UInt64}) AS st ON st.stack_id = x.stack_id
)
ARRAY JOIN tree AS n, arrayEnumerate(tree) AS i
ORDER BY i;

-- 7a. Top functions at t: self (leaf frame) and total (every stack through
-- the function once, so recursion is not double counted).
CREATE OR REPLACE VIEW {db}.top_functions {on_cluster} AS
SELECT f AS function, sumIf(x.v, f = st.labels[-1]) AS self, sum(x.v) AS total
FROM (
    SELECT stack_id, argMax(if({metric:String} = 'count', active, size), ts) AS v
    FROM {db}.samples
    WHERE process_id = {process_id:UInt64}
          AND (SELECT throwIf({metric:String} NOT IN ('bytes', 'count'),
              concat('unknown metric ''', {metric:String}, ''' (use ''bytes'' or ''count'')'))) = 0
          AND ts <= {t:DateTime64(3, 'UTC')}
    GROUP BY stack_id
    HAVING v != 0
) AS x
ANY LEFT JOIN (SELECT stack_id, labels FROM {db}.process_stacks
               WHERE process_id = {process_id:UInt64}) AS st ON st.stack_id = x.stack_id
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
    WHERE process_id = {process_id:UInt64}
          AND (SELECT throwIf({metric:String} NOT IN ('bytes', 'count'),
              concat('unknown metric ''', {metric:String}, ''' (use ''bytes'' or ''count'')'))) = 0
          AND ts <= {t2:DateTime64(3, 'UTC')}
    GROUP BY stack_id
    HAVING d != 0
) AS x
ANY LEFT JOIN (SELECT stack_id, labels FROM {db}.process_stacks
               WHERE process_id = {process_id:UInt64}) AS st ON st.stack_id = x.stack_id
ARRAY JOIN arrayDistinct(st.labels) AS f
GROUP BY function
ORDER BY abs(total) DESC, function
LIMIT {limit:UInt32};
