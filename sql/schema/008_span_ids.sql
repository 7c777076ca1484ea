-- flamehouse schema, migration 8: span ids on continuous-profile samples.
-- Placeholders as in migration 1 and 6 (on a cluster the column and index go
-- on every shard's cp_samples_local, and the column on the Distributed
-- cp_samples too).
--
-- Go's and OpenTelemetry's profilers tag CPU samples with the span they ran
-- in (pprof sample label `span_id`, 16 hex digits). As a series label that
-- would be one series per span (cardinality explosion), so the loader keeps
-- it on the sample rows instead: `span_id` is the 64-bit span id (0: no
-- span; a value that is not 1 to 16 hex digits is stored as its stable
-- hash, and queries hash it the same way), never a key of cp_series.labels.
-- Which pprof label keys are span ids is
-- `ContinuousOptions::span_labels` (default `span_id`).
--
-- Cost: a profile stores one row per stack, series AND span (a stack seen
-- under 10 spans is 10 rows instead of 1); the rollup cp_samples_1m drops
-- the span (its view never selected it), so long ranges cost the same as
-- before. Span ids are scattered across the sort key, so a bloom filter per
-- granule lets `{span_id="..."}` skip the granules that cannot hold it
-- (1% false positives, about 1.2 bytes per distinct span id and granule).
-- Queries filtering on a span read cp_samples, never the rollup.
--
-- An existing database gets the column with 0 for every stored row and the
-- index on the parts written from now on (older parts are read whole by a
-- span filter; they hold no span ids anyway).
ALTER TABLE {db}.cp_samples{local} {on_cluster} ADD COLUMN IF NOT EXISTS span_id UInt64 DEFAULT 0;

{cluster_only}ALTER TABLE {db}.cp_samples {on_cluster} ADD COLUMN IF NOT EXISTS span_id UInt64 DEFAULT 0;

ALTER TABLE {db}.cp_samples{local} {on_cluster} ADD INDEX IF NOT EXISTS span_idx span_id TYPE bloom_filter(0.01) GRANULARITY 1;
