-- flamehouse schema, migration 7: a per-hour rollup of the continuous
-- samples, so ranges of an hour and longer read ~1 row per series, stack
-- and hour instead of every profile's, and the profile count of each series
-- for gauge types (inuse_space), whose flame graphs are averages per
-- profile. Placeholders as in migration 6. Both tables are fed by
-- materialized views on `cp_samples` (nothing changes in the loader) and
-- filled from the samples stored before this migration, only while they are
-- empty, so a re-run adds nothing. (Rows loaded while this migration runs
-- could be counted twice: run `init` while nothing loads.)

-- On a cluster both tables are sharded like cp_samples (see migration 6):
-- `{local}` tables filled on each shard by views on its cp_samples_local,
-- behind Distributed tables; the back-fills below read and write those.

-- Per series, stack and hour: the sum of the values (summed again on
-- merge). `continuous_query` reads it for the whole hours inside a range
-- and reads only the range's edges from `cp_samples` (or `cp_samples_1m`
-- for ranges longer than 6 hours). Keyed like `cp_samples`, so a selection
-- prunes by type, service, hour and series.
CREATE TABLE IF NOT EXISTS {db}.cp_samples_1h{local} {on_cluster} (
    profile_type LowCardinality(String),
    service LowCardinality(String),
    series_id UInt64,
    hour DateTime('UTC'),
    stack_id UInt64,
    value Int64
) ENGINE = {sharded}SummingMergeTree
PARTITION BY toDate(hour)
ORDER BY (profile_type, service, hour, series_id, stack_id)
TTL toDate(hour) + INTERVAL {retention_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 100000;

{cluster_only}CREATE TABLE IF NOT EXISTS {db}.cp_samples_1h {on_cluster} AS {db}.cp_samples_1h_local ENGINE = Distributed({cluster}, {db}, cp_samples_1h_local, series_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.cp_samples_1h_mv {on_cluster} TO {db}.cp_samples_1h{local} AS
SELECT profile_type, service, series_id, toDateTime(toStartOfHour(ts), 'UTC') AS hour,
       stack_id, sum(value) AS value
FROM {db}.cp_samples{local}
GROUP BY profile_type, service, series_id, hour, stack_id;

INSERT INTO {db}.cp_samples_1h
SELECT profile_type, service, series_id, toDateTime(toStartOfHour(ts), 'UTC') AS hour,
       stack_id, sum(value) AS value
FROM {db}.cp_samples
WHERE (SELECT count() FROM {db}.cp_samples_1h) = 0
GROUP BY profile_type, service, series_id, hour, stack_id;

-- The profiles of each series of a gauge type: one row per series and
-- profile, so a query divides a series' sum over a range by the number of
-- its profiles in that range (`uniqExact(profile_id)`). Gauge types are the
-- snapshots of a quantity (pprof's `inuse_space`, `inuse_objects`, Go's
-- `goroutine` profile): `continuous_query::is_gauge_type`, whose pattern
-- is the one below (a unit test keeps them equal). Additive types (cpu,
-- alloc_*, contentions, delay) are summed and need no count, so they have
-- no rows here.
CREATE TABLE IF NOT EXISTS {db}.cp_series_profiles{local} {on_cluster} (
    profile_type LowCardinality(String),
    service LowCardinality(String),
    series_id UInt64,
    ts DateTime64(3, 'UTC'),
    profile_id UInt64
) ENGINE = {sharded}ReplacingMergeTree
PARTITION BY toDate(ts)
ORDER BY (profile_type, service, series_id, ts, profile_id)
TTL toDate(ts) + INTERVAL {retention_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 100000;

{cluster_only}CREATE TABLE IF NOT EXISTS {db}.cp_series_profiles {on_cluster} AS {db}.cp_series_profiles_local ENGINE = Distributed({cluster}, {db}, cp_series_profiles_local, series_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.cp_series_profiles_mv {on_cluster} TO {db}.cp_series_profiles{local} AS
SELECT DISTINCT profile_type, service, series_id, ts, profile_id
FROM {db}.cp_samples{local}
WHERE match(profile_type, '^(inuse_[^:]*|goroutines?):');

INSERT INTO {db}.cp_series_profiles
SELECT DISTINCT profile_type, service, series_id, ts, profile_id
FROM {db}.cp_samples
WHERE match(profile_type, '^(inuse_[^:]*|goroutines?):')
  AND (SELECT count() FROM {db}.cp_series_profiles) = 0;
