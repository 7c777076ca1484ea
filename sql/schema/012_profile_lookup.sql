-- flamehouse schema, migration 12: finding a profile's rows by its id.
-- Placeholders as in migration 1 and 6 (on a cluster the index goes on every
-- shard's cp_samples_local).
--
-- Every batch a load stores first asks what of its profiles is stored
-- already (`cp_batch::store_batch`): their rows in cp_profiles, and the
-- count of their sample rows in cp_samples (a load cut short between the
-- two inserts left samples without a profile row). Neither table is sorted
-- by profile id, so both questions read the whole `profile_id` column: a
-- cost that grows with everything stored (measured on 10.4 M sample rows:
-- 87-112 ms per batch for the sample counts alone), paid by every load.
--
-- A bloom filter per granule lets those lookups (and `profile open`, the
-- legacy-id adoption of migration 10) skip the granules that cannot hold
-- the batch's ids. At 0.1% false positives a batch of 60 new profiles
-- reads about 6% of the granules (1% would read about 45%): measured on the
-- same 10.4 M rows, 87-93 ms -> 16-19 ms, for about 1.3% more bytes on disk
-- (985 KiB of filters for 77 MiB of cp_samples; a granule holds the
-- samples of few profiles, so its filter is small).
--
-- An existing database gets the filters of its stored parts built by a
-- mutation (in the background; an embedded engine resumes it at its next
-- start) and on every part written from now on.
ALTER TABLE {db}.cp_samples{local} {on_cluster} ADD INDEX IF NOT EXISTS profile_idx profile_id TYPE bloom_filter(0.001) GRANULARITY 1;

ALTER TABLE {db}.cp_samples{local} {on_cluster} MATERIALIZE INDEX profile_idx;

ALTER TABLE {db}.cp_profiles {on_cluster} ADD INDEX IF NOT EXISTS profile_idx profile_id TYPE bloom_filter(0.001) GRANULARITY 1;

ALTER TABLE {db}.cp_profiles {on_cluster} MATERIALIZE INDEX profile_idx;
