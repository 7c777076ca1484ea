-- flamehouse schema, migration 6: continuous profiles (pprof today; perf
-- script, bpftrace and folded stacks use the same tables). Placeholders as in
-- migration 1, plus {retention_days}: the days a day's partition is kept
-- (default `schema::DEFAULT_RETENTION_DAYS` = 30; changed later with
-- `continuous::set_retention`, an `ALTER TABLE ... MODIFY TTL`).
--
-- Continuous profiles share the memory schema's dictionaries: `frames`,
-- `stacks` (stack_id = the same stable hash of the root-first labels) and
-- `stack_functions`. Everything below is keyed by a profile type
-- (`cpu:nanoseconds`, `alloc_space:bytes`: `kind:unit`, one per pprof
-- sample type), a service and a series: the set of labels of a sample
-- (service included). series_id is a stable hash of the type and the sorted
-- label pairs, computed by the loader.
--
-- Retention: every time-keyed table is partitioned by day and has a TTL
-- with ttl_only_drop_parts = 1, so expired days go as whole partitions
-- (nothing is rewritten). The dictionaries have no TTL: they are shared,
-- small, and a stack may be used again tomorrow.
--
-- Cluster (`init --cluster`): every table is created ON CLUSTER. The
-- dictionaries, cp_series, cp_label_values and cp_profiles are small and
-- {replicated}: whole on every node, so each shard's sub-queries and joins
-- on them are local and complete. The facts are sharded by series_id
-- (`schema::SHARDED_TABLES`): on a cluster `{local}` renders as `_local`
-- and {sharded} as `Replicated` with the engine's default path (replicas
-- of a shard share it), so cp_samples_local and cp_samples_1m_local hold
-- each shard's series (their views fill the shard's own rollups), and the statements
-- marked {cluster_only} put a Distributed table named cp_samples (and
-- cp_samples_1m) in front of them. Loads insert into it
-- (`insert_distributed_sync = 1`: a batch is on its shards when the insert
-- returns) and every query reads it, so the SQL is the same as on a single
-- node; each series' rows, and each GROUP BY stack_id of a series, stay on
-- one shard, and the joins with the replicated tables are local. On a
-- single node `{local}` renders as nothing and the marked statements are
-- left out.

-- Labels once per series and day: the series a selector picks are looked up
-- here (a few rows per series), never on the sample rows.
CREATE TABLE IF NOT EXISTS {db}.cp_series {on_cluster} (
    date Date,
    profile_type LowCardinality(String),
    service LowCardinality(String),
    series_id UInt64,
    labels Map(LowCardinality(String), String)
) ENGINE = {replicated}ReplacingMergeTree
PARTITION BY date
ORDER BY (profile_type, service, date, series_id)
TTL date + INTERVAL {retention_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 100000;

-- Every (key, value) of every series and day, for pickers and cardinality
-- (uniqExact(series_id) per key or value): filled from cp_series.
CREATE TABLE IF NOT EXISTS {db}.cp_label_values {on_cluster} (
    date Date,
    profile_type LowCardinality(String),
    service LowCardinality(String),
    key LowCardinality(String),
    value String,
    series_id UInt64
) ENGINE = {replicated}ReplacingMergeTree
PARTITION BY date
ORDER BY (profile_type, service, key, value, date, series_id)
TTL date + INTERVAL {retention_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 100000;

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.cp_label_values_mv {on_cluster} TO {db}.cp_label_values AS
SELECT date, profile_type, service, key, value, series_id
FROM {db}.cp_series
ARRAY JOIN mapKeys(labels) AS key, mapValues(labels) AS value;

-- The facts: one row per profile, series, stack and set of numeric labels.
-- The sort key prunes by type, service, hour and series before reading a
-- value, and keeps each stack's rows together for GROUP BY stack_id.
-- num_labels: pprof numeric labels (Go heap profiles' `bytes`, the object
-- size) per sample, values only (their units are per profile, in
-- cp_profiles.num_units, as pprof keeps them); empty for most profiles.
CREATE TABLE IF NOT EXISTS {db}.cp_samples{local} {on_cluster} (
    profile_type LowCardinality(String),
    service LowCardinality(String),
    series_id UInt64,
    ts DateTime64(3, 'UTC'),
    stack_id UInt64,
    value Int64,
    profile_id UInt64,
    num_labels Map(LowCardinality(String), Int64)
) ENGINE = {sharded}MergeTree
PARTITION BY toDate(ts)
ORDER BY (profile_type, service, toStartOfHour(ts), series_id, stack_id, ts)
TTL toDate(ts) + INTERVAL {retention_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 100000;

-- Per series, stack and minute: the sum of the values (summed again on
-- merge). The queries read it instead of cp_samples for ranges longer than
-- `continuous_query::DEFAULT_ROLLUP_AFTER_SECONDS` (6 hours), widened to
-- whole minutes.
{cluster_only}CREATE TABLE IF NOT EXISTS {db}.cp_samples {on_cluster} AS {db}.cp_samples_local ENGINE = Distributed({cluster}, {db}, cp_samples_local, series_id);

CREATE TABLE IF NOT EXISTS {db}.cp_samples_1m{local} {on_cluster} (
    profile_type LowCardinality(String),
    service LowCardinality(String),
    series_id UInt64,
    minute DateTime('UTC'),
    stack_id UInt64,
    value Int64
) ENGINE = {sharded}SummingMergeTree
PARTITION BY toDate(minute)
ORDER BY (profile_type, service, toStartOfHour(minute), series_id, stack_id, minute)
TTL toDate(minute) + INTERVAL {retention_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 100000;

{cluster_only}CREATE TABLE IF NOT EXISTS {db}.cp_samples_1m {on_cluster} AS {db}.cp_samples_1m_local ENGINE = Distributed({cluster}, {db}, cp_samples_1m_local, series_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.cp_samples_1m_mv {on_cluster} TO {db}.cp_samples_1m{local} AS
SELECT profile_type, service, series_id, toDateTime(toStartOfMinute(ts), 'UTC') AS minute,
       stack_id, sum(value) AS value
FROM {db}.cp_samples{local}
GROUP BY profile_type, service, series_id, minute, stack_id;

-- One row per stored profile and type: list, open and export single
-- profiles; averages of gauge types (inuse_space) per profile. Written last
-- by the loader, so a listed profile is complete.
CREATE TABLE IF NOT EXISTS {db}.cp_profiles {on_cluster} (
    profile_id UInt64,
    profile_type LowCardinality(String),
    service LowCardinality(String),
    ts DateTime64(3, 'UTC'),
    duration_ns Int64,
    period Int64,
    period_type LowCardinality(String),
    total Int64,
    sample_count UInt64,
    series_count UInt64,
    labels Map(LowCardinality(String), String),
    num_units Map(LowCardinality(String), String),
    format LowCardinality(String),
    source String,
    loaded_at DateTime64(3, 'UTC') DEFAULT now64(3)
) ENGINE = {replicated}ReplacingMergeTree
PARTITION BY toDate(ts)
ORDER BY (profile_type, service, ts, profile_id)
TTL toDate(ts) + INTERVAL {retention_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 100000;

-- Views for clients that cannot build the selector (Grafana variables): the
-- selector is an equality map (`map('handler', 'a')`, `map()` for all);
-- regexes and negation are in `continuous_query`. Times are
-- DateTime64(3, 'UTC'), the range is [t1, t2).

-- Profiles of a type (and service, '' for all) in a range, newest first.
CREATE OR REPLACE VIEW {db}.cp_profile_list {on_cluster} AS
SELECT profile_id, profile_type, service, ts, duration_ns, period, period_type, total,
       sample_count, series_count, labels, source
FROM {db}.cp_profiles FINAL
WHERE profile_type = {profile_type:String}
  AND ({service:String} = '' OR service = {service:String})
  AND ts >= {t1:DateTime64(3, 'UTC')} AND ts < {t2:DateTime64(3, 'UTC')}
ORDER BY ts DESC, profile_id;

-- Label keys and values of a type in a range with their cardinality (the
-- number of series having them): the pickers' source.
CREATE OR REPLACE VIEW {db}.cp_labels {on_cluster} AS
SELECT key, value, uniqExact(series_id) AS series
FROM {db}.cp_label_values
WHERE profile_type = {profile_type:String}
  AND date >= toDate({t1:DateTime64(3, 'UTC')}) AND date <= toDate({t2:DateTime64(3, 'UTC')})
GROUP BY key, value
ORDER BY key, series DESC, value;

-- Flame graph of a type over [t1, t2) for the series whose labels equal
-- every pair of `match`: rows (i, level, label, value, self) in pre-order.
-- Ranges longer than 6 hours read the per-minute rollup.
CREATE OR REPLACE VIEW {db}.cp_flame {on_cluster} AS
SELECT i, n.level AS level, n.label AS label, n.value AS value, n.self AS self
FROM (
    SELECT stackTreeWith(groupArray((st.labels, x.v)), map('max_nodes', toString({max_nodes:UInt32}))) AS tree
    FROM (
        SELECT stack_id, sum(value) AS v
        FROM (
            SELECT stack_id, value FROM {db}.cp_samples
            WHERE profile_type = {profile_type:String}
              AND dateDiff('second', {t1:DateTime64(3, 'UTC')}, {t2:DateTime64(3, 'UTC')}) <= 21600
              AND ts >= {t1:DateTime64(3, 'UTC')} AND ts < {t2:DateTime64(3, 'UTC')}
              AND series_id IN (
                  SELECT series_id FROM {db}.cp_series
                  WHERE profile_type = {profile_type:String}
                    AND date >= toDate({t1:DateTime64(3, 'UTC')}) AND date <= toDate({t2:DateTime64(3, 'UTC')})
                    AND arrayAll(k -> labels[k] = {match:Map(String, String)}[k], mapKeys({match:Map(String, String)})))
            UNION ALL
            SELECT stack_id, value FROM {db}.cp_samples_1m
            WHERE profile_type = {profile_type:String}
              AND dateDiff('second', {t1:DateTime64(3, 'UTC')}, {t2:DateTime64(3, 'UTC')}) > 21600
              AND minute >= toStartOfMinute({t1:DateTime64(3, 'UTC')}) AND minute < {t2:DateTime64(3, 'UTC')}
              AND series_id IN (
                  SELECT series_id FROM {db}.cp_series
                  WHERE profile_type = {profile_type:String}
                    AND date >= toDate({t1:DateTime64(3, 'UTC')}) AND date <= toDate({t2:DateTime64(3, 'UTC')})
                    AND arrayAll(k -> labels[k] = {match:Map(String, String)}[k], mapKeys({match:Map(String, String)})))
        )
        GROUP BY stack_id
        HAVING v != 0
    ) AS x
    ANY LEFT JOIN {db}.stacks AS st ON st.stack_id = x.stack_id
)
ARRAY JOIN tree AS n, arrayEnumerate(tree) AS i
ORDER BY i;

-- Top functions of the same selection: self (leaf frame) and total (every
-- stack through the function once: recursion counted once).
CREATE OR REPLACE VIEW {db}.cp_top_functions {on_cluster} AS
SELECT sf.function AS function, sumIf(x.v, sf.is_leaf = 1) AS self, sum(x.v) AS total
FROM (
    SELECT stack_id, sum(value) AS v
    FROM (
        SELECT stack_id, value FROM {db}.cp_samples
        WHERE profile_type = {profile_type:String}
          AND dateDiff('second', {t1:DateTime64(3, 'UTC')}, {t2:DateTime64(3, 'UTC')}) <= 21600
          AND ts >= {t1:DateTime64(3, 'UTC')} AND ts < {t2:DateTime64(3, 'UTC')}
          AND series_id IN (
              SELECT series_id FROM {db}.cp_series
              WHERE profile_type = {profile_type:String}
                AND date >= toDate({t1:DateTime64(3, 'UTC')}) AND date <= toDate({t2:DateTime64(3, 'UTC')})
                AND arrayAll(k -> labels[k] = {match:Map(String, String)}[k], mapKeys({match:Map(String, String)})))
        UNION ALL
        SELECT stack_id, value FROM {db}.cp_samples_1m
        WHERE profile_type = {profile_type:String}
          AND dateDiff('second', {t1:DateTime64(3, 'UTC')}, {t2:DateTime64(3, 'UTC')}) > 21600
          AND minute >= toStartOfMinute({t1:DateTime64(3, 'UTC')}) AND minute < {t2:DateTime64(3, 'UTC')}
          AND series_id IN (
              SELECT series_id FROM {db}.cp_series
              WHERE profile_type = {profile_type:String}
                AND date >= toDate({t1:DateTime64(3, 'UTC')}) AND date <= toDate({t2:DateTime64(3, 'UTC')})
                AND arrayAll(k -> labels[k] = {match:Map(String, String)}[k], mapKeys({match:Map(String, String)})))
    )
    GROUP BY stack_id
    HAVING v != 0
) AS x
INNER JOIN (
    SELECT function, stack_id, any(is_leaf) AS is_leaf FROM {db}.stack_functions GROUP BY function, stack_id
) AS sf ON sf.stack_id = x.stack_id
GROUP BY function
ORDER BY total DESC, function
LIMIT {limit:UInt32};
