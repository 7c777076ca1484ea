-- flamehouse schema, migration 14: the memory views' edge cases answer as
-- the continuous views do. Placeholders as in migration 1.
--
-- `peak` of a process with no snapshot (an unknown process_id) gave one
-- row of zeros dated 1970 (an aggregate without GROUP BY always has a
-- row): it now has no rows, as every other view of an unknown process.
-- `top_functions` and `top_functions_change` with `limit = 0` gave no
-- rows; 0 is now every function, as in `cp_top_functions` (migration 9)
-- and every `max_nodes`. The views are otherwise those of migrations 2
-- and 13.

CREATE OR REPLACE VIEW {db}.peak {on_cluster} AS
SELECT argMax(ts, (size, -toUnixTimestamp64Milli(ts))) AS peak_time,
       max(size) AS peak_bytes,
       argMax(active, (size, -toUnixTimestamp64Milli(ts))) AS peak_count
FROM {db}.totals
WHERE process_id = {process_id:UInt64}
HAVING count() > 0;

-- Top functions at t: self (leaf frame) and total (every stack through
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
LIMIT if({limit:UInt32} = 0, 18446744073709551615, {limit:UInt32});

-- Top functions by change over [t1, t2] (largest absolute change first).
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
LIMIT if({limit:UInt32} = 0, 18446744073709551615, {limit:UInt32});
