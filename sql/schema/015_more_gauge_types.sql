-- flamehouse schema, migration 15: Datadog's live-heap types are gauges.
-- Placeholders as in migration 1.
--
-- ddtrace (Python, and Datadog's other profilers) names the live heap
-- `heap-space:bytes` and `heap-live-samples:count` (Datadog: "Heap Live
-- Size"), the snapshot Go calls `inuse_space`: a range's answer is the
-- average per profile, not the sum of every upload (an hour of one-minute
-- uploads showed 60 heaps). The gauge pattern (continuous_query's
-- GAUGE_TYPE_PATTERN, which the views of migration 9 and the dashboard
-- follow) gains them; the view that counts the profiles of gauge types is
-- made again with it, and the profiles of those types already stored are
-- counted.

DROP VIEW IF EXISTS {db}.cp_series_profiles_mv {on_cluster};

CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.cp_series_profiles_mv {on_cluster} TO {db}.cp_series_profiles{local} AS
SELECT DISTINCT profile_type, service, series_id, ts, profile_id
FROM {db}.cp_samples{local}
WHERE match(profile_type, '^(inuse_[^:]*|goroutines?|heap-space|heap-live-[^:]*):');

INSERT INTO {db}.cp_series_profiles
SELECT DISTINCT profile_type, service, series_id, ts, profile_id
FROM {db}.cp_samples
WHERE match(profile_type, '^(heap-space|heap-live-[^:]*):');
