-- flamehouse schema, migration 11: the stacks of continuous profiles per
-- service and day. Placeholders as in migration 6 ({retention_days}).
--
-- Why: `stacks` (migration 1) is keyed by stack_id, a hash, and holds every
-- stack ever stored (all services, all days, memory profiles' too), so a
-- join with it builds its hash table from the whole table: a 1-hour flame
-- graph of one service took 1.5 s once 1.6 M unrelated stacks were stored
-- (20 ms without them), and no filter on the hashed ids prunes it.
-- `cp_stacks` holds the same labels keyed by what a query selects: every
-- continuous query (`continuous_query`, migration 9's views, the Grafana
-- panels) joins `cp_stacks` restricted to the selection's service(s) and the
-- days of its range, read by this sort key.
--
-- Shape: one row per (service, day, stack) that some sample of that service
-- on that day has; labels as in `stacks` (root first). No profile type: a
-- service's types share most stacks (a Go heap profile's four types share
-- every one), so rows per type would multiply them; a query reads its
-- service's stacks of the day of every type, which is bounded by what the
-- service runs, not by what else is stored. `stacks` is still written as
-- before (the one dictionary shared with memory profiles; export and the
-- memory views read it); memory profiles' queries still join `stacks`.
--
-- Written by the loader in the same store step as the series (before the
-- samples: a stored sample's stack is always here), deduplicated as the
-- other dictionaries (looked up first; ReplacingMergeTree folds the rest).
-- Retention: partitioned by day with the TTL of `cp_samples`
-- (`continuous::RETENTION_TABLES`, so `init --retention` sets it too).
-- Cluster: {replicated} and meant to stay whole on every node, like
-- `stacks`, so a shard's join with it is local.
CREATE TABLE IF NOT EXISTS {db}.cp_stacks {on_cluster} (
    service LowCardinality(String),
    date Date,
    stack_id UInt64,
    labels Array(String)
) ENGINE = {replicated}ReplacingMergeTree
PARTITION BY date
ORDER BY (service, date, stack_id)
TTL date + INTERVAL {retention_days} DAY
SETTINGS ttl_only_drop_parts = 1, non_replicated_deduplication_window = 100000;

-- Back-fill from the samples stored before this migration (the rollups hold
-- no stack the samples do not), each distinct (service, day, stack) joined
-- once with `stacks`; only while the table is empty, so a re-run adds
-- nothing. (Profiles loaded while this migration runs are written by the
-- loader anyway.) ANY LEFT, not ANY INNER: the engine's ANY INNER JOIN
-- pairs rows one to one, so a stack two services share would get one row.
INSERT INTO {db}.cp_stacks
SELECT d.service, d.date, d.stack_id, st.labels
FROM (
    SELECT DISTINCT service, toDate(ts) AS date, stack_id FROM {db}.cp_samples
    WHERE (SELECT count() FROM {db}.cp_stacks) = 0
) AS d
ANY LEFT JOIN {db}.stacks AS st ON st.stack_id = d.stack_id
WHERE notEmpty(st.labels);
