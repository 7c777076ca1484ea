//! Batched loads of continuous profiles: many files, many profiles per
//! engine round trip (`flamehouse load a.pb.gz b.pb.gz ...`).
//!
//! This module owns storing the rows of many profiles at once
//! ([`store_batch`], one insert per table), what a load already knows is
//! stored ([`Known`]: frames, stacks and series looked up once and kept for
//! the whole load), and the load of a list of files ([`load_files`]): files
//! are read, decoded and turned into rows on reader threads, the calling
//! thread gathers them into a batch while a storer thread stores the
//! previous one, and profiles older than the retention are reported and
//! left out.
//!
//! # Whole or nothing, with batches
//!
//! A batch is stored in three steps: the dictionaries (frames, stacks,
//! `cp_series`, `cp_stacks`; none depends on another, so they are stored
//! at once, [`Backend::insert_rowbinary_all`]: the embedded engine on a
//! connection each, a server as concurrent requests), then `cp_samples`, then
//! `cp_profiles` (the views fill the rollup, label values and stack
//! functions from the same inserts). So a stored sample's stack, frames
//! and series are there, and a profile listed in `cp_profiles` is
//! complete. Before the inserts one round trip (a `UNION ALL`; one query per table and chunk of 10,000 ids when the
//! batch has more) asks what of the batch is stored already: frames,
//! stacks, series and stacks per service and day by id; profiles by
//! `(profile_id, profile_type)`; samples by profile (their row count). What is stored is not sent again, so a load
//! that stopped half-way (an engine error, a crash) and is run again, with
//! the same files or with other batches around them, stores every profile
//! exactly once; a profile whose samples were cut inside one insert (the
//! engine writes a large insert as several parts) gets its missing rows
//! only, found by their key. Each insert also carries a deduplication token
//! that hashes its bytes (`cp:<hash>:<len>:<table>`), so an insert the
//! engine took but did not acknowledge is dropped when sent again. The
//! engine remembers tokens longer than rows may live (the TTL, a delete by
//! hand): when it drops a block of the batch as a copy, the batch is looked
//! up again and what is missing sent under new tokens ([`store_batch`]).
//!
//! A file that cannot be read stores nothing of itself and is reported
//! (one line naming it); the others are still loaded.

use super::continuous::{
    retention_days, ContinuousOptions, ContinuousSummary, CpProfileRow, CpSampleRow, CpStackRow,
    LoadCache, ProfileRows, SeriesRow,
};
use crate::error::{Error, Result};
use crate::storage::ident::Ident;
use crate::storage::rows::RowBinary;
use crate::storage::{Backend, Insert};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Default of [`BatchOptions::batch_rows`].
pub const DEFAULT_BATCH_ROWS: usize = 500_000;

/// Default of [`BatchOptions::batch_profiles`].
pub const DEFAULT_BATCH_PROFILES: usize = 20_000;

/// How many profiles one batch (one insert per table) holds.
#[derive(Debug, Clone, Copy)]
pub struct BatchOptions {
    /// Store a batch once this many sample rows are pending (about 60
    /// bytes each in memory; a load holds at most two batches, the one
    /// being stored and the one being gathered). Larger batches make
    /// fewer, larger parts; the engine's own bulk insert reaches its rate
    /// from about 100,000 rows.
    /// The first batch of a load is 1/32 of this (at least 1 row), each
    /// next one twice the last up to this: the engine starts storing while
    /// the readers go on (in the ingest bench, 86,400 perf script rows per
    /// load: 7.4 s in one batch, 5.3 s in three), and loads below 1/32
    /// stay one batch (each batch costs a few round trips).
    /// Default: [`DEFAULT_BATCH_ROWS`] (500,000).
    pub batch_rows: usize,
    /// ... or once this many profiles are pending. Default:
    /// [`DEFAULT_BATCH_PROFILES`] (20,000).
    pub batch_profiles: usize,
    /// Threads reading, decoding and building rows (files are dealt round
    /// robin and stored in the given order). Default: 2 (decoding a small
    /// profile costs about as much as inserting its rows, so two keep the
    /// engine busy on a 2-core machine).
    pub readers: usize,
    /// How far the readers may read ahead of the files being gathered
    /// and stored, in bytes of decoded rows ([`ProfileRows::approx_bytes`])
    /// over all readers (each its share). A reader holding less than its
    /// share reads its next file whatever that file's size, so one file
    /// always goes through; each file's own size is bounded by the
    /// decoders' limits (`--max-stack-frames` and the others). Default:
    /// [`DEFAULT_READ_AHEAD_BYTES`] (256 MiB).
    pub read_ahead_bytes: usize,
}

/// Default of [`BatchOptions::read_ahead_bytes`]: ahead by 32 small
/// profiles at most (the channel's length), or by their share of this.
/// Read-ahead was 32 files whatever their size (ten pprof files of
/// 200,000 distinct stacks loaded at 2.74-2.83 GB peak, 2.38 GB with
/// this default: docs/benchmarks.md).
pub const DEFAULT_READ_AHEAD_BYTES: usize = 256 << 20;

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            batch_rows: DEFAULT_BATCH_ROWS,
            batch_profiles: DEFAULT_BATCH_PROFILES,
            readers: 2,
            read_ahead_bytes: DEFAULT_READ_AHEAD_BYTES,
        }
    }
}

/// The row count of a load's first batch under `batch_rows` (see
/// [`BatchOptions::batch_rows`]).
#[must_use]
pub fn first_batch_rows(batch_rows: usize) -> usize {
    (batch_rows / 32).max(1)
}

/// What a load knows is stored: frames, stacks, series (per day) and
/// stacks per service and day, kept for the whole load so each is looked
/// up once.
#[derive(Debug, Default)]
pub struct Known {
    frames: HashSet<u64>,
    stacks: HashSet<u64>,
    series: HashSet<(u16, u64)>,
    /// Per service (looked up by `&str`: no copy per row), its (day, stack).
    cp_stacks: HashMap<String, HashSet<(u16, u64)>>,
}

/// What [`store_batch`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchStored {
    /// Profiles of the batch (distinct ids).
    pub profiles: usize,
    /// Of which were complete before (nothing of them sent).
    pub already_stored: usize,
    /// The ids of the profiles that were complete before.
    pub already_ids: HashSet<u64>,
    /// Sample rows inserted.
    pub sample_rows: usize,
}

/// A word-at-a-time hash of an insert's bytes (its deduplication token):
/// content-exact and far cheaper than byte-wise FNV on large batches.
fn content_hash(b: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h: u64 = 0x243f_6a88_85a3_08d3 ^ b.len() as u64;
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        h = (h ^ w).wrapping_mul(K).rotate_left(29);
    }
    for &x in chunks.remainder() {
        h = (h ^ u64::from(x)).wrapping_mul(K).rotate_left(29);
    }
    h ^ (h >> 31)
}

/// Largest RowBinary block of one insert (the bench's batches stay under
/// it: one insert per table).
pub use crate::storage::MAX_INSERT_BYTES;

/// The rows of one table still to send, as inserts of at most
/// [`MAX_INSERT_BYTES`] (a row larger than that is a block of its own).
struct Chunks<'a, R> {
    rows: Vec<&'a R>,
    next: usize,
    salt: Option<u64>,
}

/// [`Chunks`] of any row type, for a wave of inserts into several tables.
trait NextInsert {
    /// The next block, `None` when every row was sent.
    fn next_insert(&mut self) -> Option<Insert>;
}

impl<R: RowBinary> NextInsert for Chunks<'_, R> {
    fn next_insert(&mut self) -> Option<Insert> {
        if self.next >= self.rows.len() {
            return None;
        }
        let mut bytes = Vec::new();
        while self.next < self.rows.len() && bytes.len() < MAX_INSERT_BYTES {
            self.rows[self.next].encode(&mut bytes);
            self.next += 1;
        }
        Some(block::<R>(bytes, self.salt))
    }
}

/// The rows of `items` that `held` says are not stored.
fn missing<'a, R: RowBinary + 'a>(
    items: &[&'a R],
    held: impl Fn(&R) -> bool,
    salt: Option<u64>,
) -> Box<dyn NextInsert + 'a> {
    let rows = items.iter().copied().filter(|r| !held(r)).collect();
    Box::new(Chunks {
        rows,
        next: 0,
        salt,
    })
}

/// `bytes` of `R`'s rows as one deduplicated block (the token hashes its
/// bytes, and `salt` when given: see [`store_batch`]).
fn block<R: RowBinary>(bytes: Vec<u8>, salt: Option<u64>) -> Insert {
    let mut token = format!(
        "cp:{:016x}:{}:{}",
        content_hash(&bytes),
        bytes.len(),
        R::TABLE
    );
    if let Some(salt) = salt {
        token.push_str(&format!(":again:{salt:016x}"));
    }
    Insert {
        table: R::TABLE,
        structure: R::STRUCTURE,
        token,
        rows: bytes,
    }
}

/// Sends the rows of `tables`: a wave of one block per table at a time
/// (the blocks of a wave may be stored at once: see
/// [`Backend::insert_rowbinary_all`]), until all are sent.
fn send(
    backend: &dyn Backend,
    db: &Ident,
    mut tables: Vec<Box<dyn NextInsert + '_>>,
) -> Result<()> {
    loop {
        let wave: Vec<Insert> = tables.iter_mut().filter_map(|t| t.next_insert()).collect();
        match wave.as_slice() {
            [] => return Ok(()),
            [one] => {
                backend.insert_rowbinary(db, one.table, one.structure, &one.rows, &one.token)?
            }
            _ => backend.insert_rowbinary_all(db, &wave)?,
        }
    }
}

/// The engine's count of inserted blocks it dropped as copies of blocks
/// it had (`DuplicatedInsertedBlocks`); 0 when it cannot say.
fn duplicated_blocks(backend: &dyn Backend) -> u64 {
    backend
        .query_tsv("SELECT sum(value) FROM system.events WHERE event = 'DuplicatedInsertedBlocks'")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// The string of `hex`'s upper-case hex digits (ClickHouse's `hex()`),
/// `None` when it is no UTF-8 or not hex.
fn unhex(hex: &str) -> Option<String> {
    let b = hex.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    let bytes = b
        .chunks(2)
        .map(|c| u8::from_str_radix(std::str::from_utf8(c).ok()?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

/// Ids per lookup query: the query text stays small.
const LOOKUP_CHUNK: usize = 10_000;

/// Runs `sql_of(chunk)` for chunks of `ids` (each query text stays small)
/// and gives every output line.
fn lookup(
    backend: &dyn Backend,
    ids: &[u64],
    sql_of: impl Fn(&[u64]) -> String,
    mut line: impl FnMut(&str),
) -> Result<()> {
    for chunk in ids.chunks(LOOKUP_CHUNK) {
        let tsv = backend.query_tsv(&sql_of(chunk))?;
        tsv.lines().for_each(&mut line);
    }
    Ok(())
}

/// `ids` as literals for `IN (...)`: what a skip index (the bloom filters
/// on `profile_id`) reads.
fn id_list(ids: &[u64]) -> String {
    let list: Vec<String> = ids.iter().map(u64::to_string).collect();
    list.join(",")
}

/// `ids` as a sub-query for `IN (...)`, for lookups by a primary key (the
/// engine builds its set before choosing granules): one string literal,
/// which the engine parses several times faster than as many number
/// literals (10,000 ids: 9.4 against 25.5 ms in the embedded engine).
fn id_set(ids: &[u64]) -> String {
    format!(
        "SELECT arrayJoin(CAST(splitByChar(',', '{}') AS Array(UInt64)))",
        id_list(ids)
    )
}

/// The query of an [`Ask`] for some of its ids.
type SqlOf<'a> = Box<dyn Fn(&[u64]) -> String + 'a>;

/// One question of a batch to the engine: rows of `(tag, a, b, c)` for
/// `ids`, as [`Held::line`] reads them.
struct Ask<'a> {
    ids: Vec<u64>,
    sql_of: SqlOf<'a>,
}

/// What the engine holds of a batch, asked before any of its inserts
/// (none of them changes another's answer).
#[derive(Default)]
struct Held {
    frames: HashSet<u64>,
    stacks: HashSet<u64>,
    series: HashSet<(u16, u64)>,
    /// Per service, its (day, stack).
    cp_stacks: HashMap<String, HashSet<(u16, u64)>>,
    /// Types of each profile id listed in `cp_profiles`.
    listed: HashMap<u64, HashSet<String>>,
    /// Sample rows stored per profile id.
    sample_counts: HashMap<u64, usize>,
}

impl Held {
    fn line(&mut self, l: &str) {
        let f: Vec<&str> = l.splitn(4, '\t').collect();
        let [tag, a, b, c] = f[..] else { return };
        let Ok(id) = a.parse::<u64>() else { return };
        match tag {
            "f" => {
                self.frames.insert(id);
            }
            "s" => {
                self.stacks.insert(id);
            }
            "r" => {
                if let Ok(d) = b.parse::<u16>() {
                    self.series.insert((d, id));
                }
            }
            "k" => {
                if let (Ok(d), Some(svc)) = (b.parse::<u16>(), unhex(c.trim_end())) {
                    self.cp_stacks.entry(svc).or_default().insert((d, id));
                }
            }
            "p" => {
                self.listed.entry(id).or_default().insert(b.to_string());
            }
            "c" => {
                if let Ok(n) = b.parse::<usize>() {
                    self.sample_counts.insert(id, n);
                }
            }
            _ => {}
        }
    }

    /// Asks all of `asks` in one round trip (`UNION ALL`) when their ids
    /// fit one query, else each in chunks.
    fn ask(backend: &dyn Backend, asks: &[Ask<'_>]) -> Result<Held> {
        let mut held = Held::default();
        let asks: Vec<&Ask<'_>> = asks.iter().filter(|a| !a.ids.is_empty()).collect();
        if asks.is_empty() {
            return Ok(held);
        }
        if asks.iter().map(|a| a.ids.len()).sum::<usize>() <= LOOKUP_CHUNK {
            let sql: Vec<String> = asks.iter().map(|a| (a.sql_of)(&a.ids)).collect();
            let tsv = backend.query_tsv(&sql.join(" UNION ALL "))?;
            tsv.lines().for_each(|l| held.line(l));
        } else {
            for a in asks {
                lookup(backend, &a.ids, &a.sql_of, |l| held.line(l))?;
            }
        }
        Ok(held)
    }

    /// Whether the row of profile `id` and type `ty` is in `cp_profiles`.
    fn listed(&self, id: u64, ty: &str) -> bool {
        self.listed.get(&id).is_some_and(|t| t.contains(ty))
    }
}

/// The distinct values of `values`, each written by `lit`, comma-separated
/// (an `IN (...)` list).
fn in_list<T: std::hash::Hash + Eq>(
    values: impl Iterator<Item = T>,
    lit: impl Fn(T) -> String,
) -> String {
    let set: HashSet<T> = values.collect();
    set.into_iter().map(lit).collect::<Vec<_>>().join(",")
}

/// `rows` that neither `known` (this load) nor an earlier row of them
/// holds, each id once.
fn new_rows<'a, R: 'a>(
    rows: impl Iterator<Item = &'a R>,
    id: impl Fn(&R) -> u64,
    known: &HashSet<u64>,
) -> Vec<&'a R> {
    let mut ids = HashSet::new();
    rows.filter(|r| !known.contains(&id(r)) && ids.insert(id(r)))
        .collect()
}

/// Stores the rows of many profiles with one insert per table (see the
/// module docs): only the frames, stacks and series neither `known` nor
/// found in the engine, only the samples and profile rows not stored yet.
/// A profile id repeated in `batch` is stored once.
///
/// The engine's deduplication log remembers an insert's token longer than
/// its rows may live: after the TTL dropped a day (or rows were deleted by
/// hand), loading the same files again sent the same blocks, which the
/// engine dropped as copies, and the load reported rows it never stored.
/// So when the engine says it dropped a block during the batch
/// (`DuplicatedInsertedBlocks` grew), the batch is looked up again from
/// scratch and what is still missing is sent once more under new tokens
/// (nothing, when the copy was real: another load stored the same rows).
///
/// # Errors
/// The engine's error of the first lookup or insert that fails; run the
/// load again to finish it.
pub fn store_batch(
    backend: &dyn Backend,
    db: &Ident,
    batch: &[ProfileRows],
    known: &mut Known,
) -> Result<BatchStored> {
    let before = duplicated_blocks(backend);
    let stored = store_batch_with(backend, db, batch, known, None)?;
    if duplicated_blocks(backend) > before {
        let salt = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        let mut fresh = Known::default();
        store_batch_with(backend, db, batch, &mut fresh, Some(salt))?;
        known.frames.extend(fresh.frames);
        known.stacks.extend(fresh.stacks);
        known.series.extend(fresh.series);
        for (svc, m) in fresh.cp_stacks {
            known.cp_stacks.entry(svc).or_default().extend(m);
        }
    }
    Ok(stored)
}

/// [`store_batch`]'s one pass, its tokens salted with `salt` when given.
fn store_batch_with(
    backend: &dyn Backend,
    db: &Ident,
    batch: &[ProfileRows],
    known: &mut Known,
    salt: Option<u64>,
) -> Result<BatchStored> {
    // Rows without profile rows only carry dictionary rows (an expired
    // profile's, see `load_files`).
    let dicts: Vec<&ProfileRows> = batch.iter().filter(|p| p.profiles.is_empty()).collect();
    let mut seen_profiles = HashSet::new();
    let with_rows = batch.iter().filter(|p| !p.profiles.is_empty()).count();
    let batch: Vec<&ProfileRows> = batch
        .iter()
        .filter(|p| !p.profiles.is_empty() && seen_profiles.insert(p.profile_id))
        .collect();
    let mut stored = BatchStored {
        profiles: batch.len(),
        // The same profile twice in a batch (two files of the same bytes,
        // service and labels) is stored once: the second was stored, and
        // says so.
        already_stored: with_rows - batch.len(),
        ..BatchStored::default()
    };
    if batch.is_empty() && dicts.is_empty() {
        return Ok(stored);
    }

    // What of the batch is new to this load.
    let frames = new_rows(
        batch.iter().chain(&dicts).flat_map(|p| &p.frames),
        |f| f.frame_id,
        &known.frames,
    );
    let stacks = new_rows(
        batch.iter().chain(&dicts).flat_map(|p| &p.stacks),
        |s| s.stack_id,
        &known.stacks,
    );
    // Series, once per day.
    let mut series: Vec<&SeriesRow> = Vec::new();
    let mut series_keys = HashSet::new();
    for p in &batch {
        for s in &p.series {
            let k = (s.date, s.series_id);
            if !known.series.contains(&k) && series_keys.insert(k) {
                series.push(s);
            }
        }
    }
    // Stacks per service and day (`cp_stacks`, what queries join).
    let mut cp_stacks: Vec<&CpStackRow> = Vec::new();
    let mut cp_keys: HashSet<(&str, u16, u64)> = HashSet::new();
    for p in &batch {
        for s in &p.cp_stacks {
            let k = (s.service.as_str(), s.date, s.stack_id);
            let stored = known
                .cp_stacks
                .get(k.0)
                .is_some_and(|m| m.contains(&(k.1, k.2)));
            if !stored && cp_keys.insert(k) {
                cp_stacks.push(s);
            }
        }
    }
    // Profiles: listed (complete) ones in cp_profiles, the sample count of
    // every one (used for the unlisted). Looked up by id whatever their
    // time: a profile is the same one when loaded again with another time
    // (`time_ns`, or the load's own time for formats without one).
    let pids: Vec<u64> = batch.iter().map(|p| p.profile_id).collect();

    // One round trip for all of it: no insert below changes another answer.
    let distinct = |ids: &mut dyn Iterator<Item = u64>| -> Vec<u64> {
        ids.collect::<HashSet<_>>().into_iter().collect()
    };
    let series_dates = in_list(series_keys.iter().map(|k| k.0), |d| d.to_string());
    let cp_services = in_list(cp_keys.iter().map(|k| k.0), crate::storage::sql_string);
    let cp_dates = in_list(cp_keys.iter().map(|k| k.1), |d| d.to_string());
    let asks = [
        Ask {
            ids: frames.iter().map(|f| f.frame_id).collect(),
            sql_of: Box::new(|ids| {
                let l = id_set(ids);
                format!("SELECT DISTINCT 'f', toString(frame_id), '', '' FROM {db}.frames WHERE frame_id IN ({l})")
            }),
        },
        Ask {
            ids: stacks.iter().map(|s| s.stack_id).collect(),
            sql_of: Box::new(|ids| {
                let l = id_set(ids);
                format!("SELECT DISTINCT 's', toString(stack_id), '', '' FROM {db}.stacks WHERE stack_id IN ({l})")
            }),
        },
        Ask {
            ids: distinct(&mut series_keys.iter().map(|k| k.1)),
            sql_of: Box::new(|ids| {
                let l = id_set(ids);
                format!(
                    "SELECT DISTINCT 'r', toString(series_id), toString(toUInt16(date)), '' FROM {db}.cp_series \
                     WHERE toUInt16(date) IN ({series_dates}) AND series_id IN ({l})"
                )
            }),
        },
        // Services come back as hex: any byte, no escaping.
        Ask {
            ids: distinct(&mut cp_keys.iter().map(|k| k.2)),
            sql_of: Box::new(|ids| {
                let l = id_set(ids);
                format!(
                    "SELECT DISTINCT 'k', toString(stack_id), toString(toUInt16(date)), hex(service) FROM {db}.cp_stacks \
                     WHERE service IN ({cp_services}) AND toUInt16(date) IN ({cp_dates}) AND stack_id IN ({l})"
                )
            }),
        },
        Ask {
            ids: pids.clone(),
            sql_of: Box::new(|ids| {
                let l = id_list(ids);
                format!(
                    "SELECT DISTINCT 'p', toString(profile_id), CAST(profile_type AS String), '' FROM {db}.cp_profiles \
                     WHERE profile_id IN ({l})"
                )
            }),
        },
        Ask {
            ids: pids,
            sql_of: Box::new(|ids| {
                let l = id_list(ids);
                format!(
                    "SELECT 'c', toString(profile_id), toString(count()), '' FROM {db}.cp_samples \
                     WHERE profile_id IN ({l}) GROUP BY profile_id"
                )
            }),
        },
    ];
    let held = Held::ask(backend, &asks)?;

    // Frames, stacks, series and `cp_stacks` before the samples: a stored
    // sample's stack, frames and series are always there. The four do not
    // depend on one another (no query reads a stack without its samples),
    // so the engine may store them at once.
    let dictionaries = vec![
        missing(&frames, |f| held.frames.contains(&f.frame_id), salt),
        missing(&stacks, |s| held.stacks.contains(&s.stack_id), salt),
        missing(
            &series,
            |s| held.series.contains(&(s.date, s.series_id)),
            salt,
        ),
        missing(
            &cp_stacks,
            |s| {
                held.cp_stacks
                    .get(s.service.as_str())
                    .is_some_and(|m| m.contains(&(s.date, s.stack_id)))
            },
            salt,
        ),
    ];
    send(backend, db, dictionaries)?;
    known.frames.extend(frames.iter().map(|f| f.frame_id));
    known.stacks.extend(stacks.iter().map(|s| s.stack_id));
    known.series.extend(series_keys);
    for (svc, d, id) in cp_keys {
        if let Some(m) = known.cp_stacks.get_mut(svc) {
            m.insert((d, id));
        } else {
            known
                .cp_stacks
                .insert(svc.to_string(), HashSet::from([(d, id)]));
        }
    }

    if batch.is_empty() {
        return Ok(stored);
    }
    let sample_counts = &held.sample_counts;
    let complete = |p: &ProfileRows| {
        p.profiles
            .iter()
            .all(|r| held.listed(r.profile_id, &r.profile_type))
    };
    // Profiles not listed whose samples were cut inside one insert: the
    // keys of the rows they have.
    let partial: Vec<u64> = batch
        .iter()
        .filter(|p| {
            let n = sample_counts.get(&p.profile_id).copied().unwrap_or(0);
            n > 0 && n < p.samples.len() && !complete(p)
        })
        .map(|p| p.profile_id)
        .collect();
    let mut have_rows: HashSet<String> = HashSet::new();
    lookup(
        backend,
        &partial,
        |ids| {
            let l = id_list(ids);
            format!(
                "SELECT profile_id, profile_type, series_id, stack_id, toString(num_labels) \
                 FROM {db}.cp_samples WHERE profile_id IN ({l})"
            )
        },
        |l| {
            have_rows.insert(l.to_string());
        },
    )?;
    let sample_key = |r: &CpSampleRow| {
        let m: Vec<String> = r
            .num_labels
            .iter()
            .map(|(k, v)| format!("'{}':{v}", k.replace('\\', "\\\\").replace('\'', "\\'")))
            .collect();
        format!(
            "{}\t{}\t{}\t{}\t{{{}}}",
            r.profile_id,
            r.profile_type,
            r.series_id,
            r.stack_id,
            m.join(",")
        )
    };
    let mut samples: Vec<&CpSampleRow> = Vec::new();
    let mut profiles: Vec<&CpProfileRow> = Vec::new();
    for p in &batch {
        // Profile rows are written last: a listed profile is complete.
        if complete(p) {
            stored.already_stored += 1;
            stored.already_ids.insert(p.profile_id);
            continue;
        }
        let n = sample_counts.get(&p.profile_id).copied().unwrap_or(0);
        if n == 0 {
            samples.extend(&p.samples);
        } else if n < p.samples.len() {
            samples.extend(
                p.samples
                    .iter()
                    .filter(|r| !have_rows.contains(&sample_key(r))),
            );
        }
        profiles.extend(
            p.profiles
                .iter()
                .filter(|r| !held.listed(r.profile_id, &r.profile_type)),
        );
    }
    stored.sample_rows = samples.len();
    // Profiles an earlier load stopped inside: some or all of their samples
    // were stored, but not their profile rows.
    let interrupted: Vec<&ProfileRows> = batch
        .iter()
        .copied()
        .filter(|p| !complete(p) && sample_counts.get(&p.profile_id).copied().unwrap_or(0) > 0)
        .collect();
    // Samples, then (for those) the rollups made whole, then the profile
    // rows that say a profile is complete.
    send(backend, db, vec![missing(&samples, |_| false, salt)])?;
    reconcile_rollups(backend, db, &interrupted)?;
    send(backend, db, vec![missing(&profiles, |_| false, salt)])?;
    Ok(stored)
}

/// Makes the views' tables whole again for `profiles`, which an earlier
/// load stopped inside. An INSERT into `cp_samples` stores its part and
/// then the views' parts, not all at once: a load killed in between left
/// samples the rollups never got, and sending the samples again adds
/// nothing (they are there: only missing rows are sent, and the engine
/// would drop a block it has by its token before the views saw it). So for
/// each (type, service, hour) of those profiles, the rollups' sums per
/// series, stack and minute (hour) are compared with the samples' and the
/// differences inserted (both tables sum what they are given: a rollup
/// that got everything gets nothing). `cp_series_profiles` (gauge types'
/// profile counts, a ReplacingMergeTree) gets its rows again. Running it
/// twice inserts nothing the second time.
///
/// # Errors
/// The engine's error.
fn reconcile_rollups(backend: &dyn Backend, db: &Ident, profiles: &[&ProfileRows]) -> Result<()> {
    let mut hours: BTreeSet<String> = BTreeSet::new();
    let mut ids: BTreeSet<u64> = BTreeSet::new();
    for p in profiles {
        ids.insert(p.profile_id);
        for r in &p.profiles {
            hours.insert(format!(
                "({}, {}, toStartOfHour(fromUnixTimestamp64Milli(toInt64({}), 'UTC')))",
                crate::storage::sql_string(&r.profile_type),
                crate::storage::sql_string(&r.service),
                r.ts
            ));
        }
    }
    if hours.is_empty() {
        return Ok(());
    }
    let hours = hours.into_iter().collect::<Vec<_>>().join(", ");
    for (table, bucket, of_ts) in [
        ("cp_samples_1m", "minute", "toStartOfMinute(ts)"),
        ("cp_samples_1h", "hour", "toStartOfHour(ts)"),
    ] {
        let keys = format!("profile_type, service, series_id, {bucket}, stack_id");
        backend.execute(&format!(
            "INSERT INTO {db}.{table} ({keys}, value) SETTINGS insert_deduplicate = 0 \
             SELECT {keys}, s_v - r_v AS value FROM \
             (SELECT profile_type, service, series_id, toDateTime({of_ts}, 'UTC') AS {bucket}, stack_id, \
                     sum(value) AS s_v \
              FROM {db}.cp_samples WHERE (profile_type, service, toStartOfHour(ts)) IN ({hours}) \
              GROUP BY {keys}) AS s \
             FULL OUTER JOIN \
             (SELECT {keys}, sum(value) AS r_v FROM {db}.{table} \
              WHERE (profile_type, service, toStartOfHour({bucket})) IN ({hours}) GROUP BY {keys}) AS r \
             USING ({keys}) WHERE s_v != r_v \
             SETTINGS join_use_nulls = 0"
        ))?;
    }
    let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
    backend.execute(&format!(
        "INSERT INTO {db}.cp_series_profiles SETTINGS insert_deduplicate = 0 \
         SELECT DISTINCT profile_type, service, series_id, ts, profile_id FROM {db}.cp_samples \
         WHERE profile_id IN ({}) AND match(profile_type, {})",
        ids.join(", "),
        crate::storage::sql_string(crate::continuous_query::GAUGE_TYPE_PATTERN)
    ))
}

/// One file's outcome in [`load_files`], reported as it is known.
#[derive(Debug)]
pub enum FileEvent<'a> {
    /// Every profile of the file is stored (or was already): the file's
    /// summaries, one per profile it held (the expired left out).
    Stored(&'a [ContinuousSummary]),
    /// The file could not be read or decoded: nothing of it is stored.
    Failed(&'a Path, Error),
    /// A profile older than the retention, left out (see [`load_files`]).
    Expired {
        /// The file.
        source: &'a str,
        /// The profile's time, ms since the epoch.
        ts_ms: i64,
        /// The retention, days.
        retention_days: u32,
    },
}

/// What [`load_files`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FilesSummary {
    /// Files given.
    pub files: usize,
    /// Files that failed to read (reported, nothing of them stored).
    pub failed: usize,
    /// Profiles read from the good files.
    pub profiles: usize,
    /// Of which were already stored (an earlier load of the same files).
    pub already_stored: usize,
    /// Of which were older than the retention (not stored).
    pub expired: usize,
    /// Sample rows inserted.
    pub sample_rows: usize,
    /// Batches stored.
    pub batches: usize,
}

/// A file read and turned into rows on the reader thread, and the bytes
/// of its rows the reader counts as read ahead until they are taken.
type Read = (
    PathBuf,
    Result<Vec<(ProfileRows, ContinuousSummary)>>,
    usize,
);

/// One reader's read-ahead: the bytes of the rows it has sent that the
/// gathering thread has not taken yet. The reader waits while it holds
/// some and its next file's rows would pass `max`. Per reader, not shared:
/// files are taken round robin, so the file the gathering thread waits
/// for is the oldest of its reader's, whose other files cannot hold it up.
struct ReadAhead {
    /// Bytes held, and whether the gathering thread has stopped taking.
    held: std::sync::Mutex<(usize, bool)>,
    taken: std::sync::Condvar,
    max: usize,
}

impl ReadAhead {
    fn new(max: usize) -> Self {
        ReadAhead {
            held: std::sync::Mutex::new((0, false)),
            taken: std::sync::Condvar::new(),
            max,
        }
    }

    /// Waits until `bytes` more may be held, then holds them (at once
    /// when nothing more is taken: the send that follows fails).
    fn hold(&self, bytes: usize) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        while !held.1 && held.0 > 0 && held.0.saturating_add(bytes) > self.max {
            held = self.taken.wait(held).unwrap_or_else(|e| e.into_inner());
        }
        held.0 += bytes;
    }

    /// `bytes` sent earlier were taken.
    fn release(&self, bytes: usize) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.0 = held.0.saturating_sub(bytes);
        self.taken.notify_all();
    }

    /// Nothing more is taken (the load ended, or stopped at an error).
    fn close(&self) {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).1 = true;
        self.taken.notify_all();
    }
}

/// Closes every reader's [`ReadAhead`] when the gathering thread returns,
/// however it returns, so that no reader waits for ever.
struct CloseOnDrop<'a>(&'a [ReadAhead]);

impl Drop for CloseOnDrop<'_> {
    fn drop(&mut self) {
        for a in self.0 {
            a.close();
        }
    }
}

/// A batch handed to the storer: its rows, and the summaries of its files
/// (one list per file, reported once the batch is stored).
type Pending = (Vec<ProfileRows>, Vec<Vec<ContinuousSummary>>);

/// What the storer did with a batch: the files' summaries (their ids as
/// stored) and, when it held rows, what was stored.
type Stored = (Vec<Vec<ContinuousSummary>>, Option<BatchStored>);

/// Stores one gathered batch (legacy ids adopted first, the files'
/// summaries told of them); `None` for a batch without rows (files that
/// held only expired profiles, or none).
fn store_pending(
    backend: &dyn Backend,
    db: &Ident,
    rows: &mut [ProfileRows],
    files: &mut [Vec<ContinuousSummary>],
    known: &mut Known,
) -> Result<Option<BatchStored>> {
    if rows.is_empty() {
        return Ok(None);
    }
    let adopted: HashMap<u64, u64> = super::continuous::adopt_legacy_ids(backend, db, rows)?
        .into_iter()
        .collect();
    for s in files.iter_mut().flatten() {
        if let Some(&old) = adopted.get(&s.profile_id) {
            s.profile_id = old;
        }
    }
    let stored = store_batch(backend, db, rows, known)?;
    // Each file's line says whether its profile was there before: stored
    // by an earlier load, or by an earlier file of this one (same bytes).
    let mut seen = HashSet::new();
    for s in files.iter_mut().flatten() {
        s.already_stored = stored.already_ids.contains(&s.profile_id) || !seen.insert(s.profile_id);
    }
    Ok(Some(stored))
}

/// An engine error of a batch's store, with the files it was storing and
/// the database named (the engine's own, a full disk's `NOT_ENOUGH_SPACE`
/// say, names neither).
fn storing_error(e: Error, files: &[Vec<ContinuousSummary>], db: &Ident) -> Error {
    let Error::Query { message } = e else {
        return e;
    };
    let mut names: Vec<&str> = Vec::new();
    for s in files.iter().filter_map(|f| f.first()) {
        if names.last() != Some(&s.source.as_str()) {
            names.push(&s.source);
        }
    }
    let shown = names.len().min(3);
    let more = match names.len() - shown {
        0 => String::new(),
        n => format!(" and {n} more file{}", if n == 1 { "" } else { "s" }),
    };
    let what = if names.is_empty() {
        "a batch".to_string()
    } else {
        names[..shown].join(", ")
    };
    Error::Query {
        message: format!("storing {what}{more} in database {db}: {message}"),
    }
}

fn read_one(
    path: &Path,
    opts: &ContinuousOptions,
    cache: &mut LoadCache,
) -> Result<Vec<(ProfileRows, ContinuousSummary)>> {
    let (mut reader, source) = super::continuous::open_reader(path, opts)?;
    let mut sym = crate::symbolize::Symbolizer::new(opts.symbolizer.clone());
    let all = super::continuous::reader_rows_cached(&mut *reader, &mut sym, &source, opts, cache)?;
    Ok(all
        .into_iter()
        .map(|rows| {
            let s = super::continuous::summary(&rows, &source, &sym);
            (rows, s)
        })
        .collect())
}

/// Whether a profile at `ts_ms` is past a retention of `days` on `today`
/// (days since the epoch, the engine's date): its day partition (its UTC
/// date) is dropped by the TTL (`toDate(ts) + INTERVAL days DAY`) as soon
/// as it is written.
///
/// A profile whose TTL date wraps ([`ttl_wraps`]) is expired too: the TTL
/// would drop it at the next merge all the same.
#[must_use]
pub fn expired(ts_ms: i64, days: u32, today: i64) -> bool {
    ts_ms.div_euclid(86_400_000) + i64::from(days) <= today || ttl_wraps(ts_ms, days)
}

/// The engine's last `Date`, 2149-06-06, in days since the epoch.
pub const LAST_DATE: i64 = 65_535;

/// Whether the TTL date of a profile at `ts_ms` under a retention of
/// `days` (`toDate(ts) + INTERVAL days DAY`) is past [`LAST_DATE`]: a
/// `Date` is 16 bits, so it wraps to the 1970s and the row would be
/// dropped at the next merge. Loads refuse profile times after
/// 2106-02-07 (day 49,710), so it takes a retention of more than 15,825
/// days: `--retention 36500` wraps every profile from 2049-07-01 on.
#[must_use]
pub fn ttl_wraps(ts_ms: i64, days: u32) -> bool {
    ts_ms.div_euclid(86_400_000) + i64::from(days) > LAST_DATE
}

/// Loads many files of additive formats (pprof, perf script, bpftrace,
/// folded; `opts.format` or detected per file) into `opts.database` (the
/// schema must exist), many profiles per insert ([`store_batch`] once
/// [`BatchOptions`] is reached). Files are read and turned into rows on a
/// reader thread, in order, while this thread stores; `report` hears of
/// each file once its batch is stored (or it failed) and of each expired
/// profile.
///
/// A profile older than the retention (`init --retention`, read from the
/// engine once) is not stored: the TTL would drop its day as soon as it is
/// written (whole partitions, at a moment of the engine's choosing), so
/// storing it would only make answers change by themselves; it is reported
/// instead ([`FileEvent::Expired`]) and counted. Raise the retention to
/// keep such profiles.
///
/// # Errors
/// The engine's error (a lookup or insert failed): the load stops there;
/// the files of the batch it was storing are not reported; run it again
/// to finish. A file that fails to read is not an error here: it is
/// reported and counted.
pub fn load_files(
    backend: &dyn Backend,
    paths: &[PathBuf],
    opts: &ContinuousOptions,
    batch: &BatchOptions,
    report: &mut dyn FnMut(FileEvent<'_>),
) -> Result<FilesSummary> {
    let mut out = FilesSummary {
        files: paths.len(),
        ..FilesSummary::default()
    };
    // Text profiles of earlier builds are found by their legacy id (and
    // only in a database that holds some: `adopt_legacy_ids`).
    let opts = &super::continuous::with_legacy_identity(backend, opts)?;
    // Today as the engine's TTL counts it: in the engine's time zone (the
    // TTL's date is `toDate(ts)`, UTC, but it expires at the engine's
    // midnight; counted in UTC here, a profile stored on a machine in
    // another zone could be dropped at the next merge).
    let today = backend
        .query_tsv("SELECT toUInt32(toDate(now(), serverTimezone()))")
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64 / 86_400)
                .unwrap_or(0)
        });
    // Each reader a few files ahead: none waits on a short insert, and
    // memory stays bounded by the read-ahead and the batch. Reader k reads
    // files k, k + n, ... with a cache of its own: the frames and stacks it
    // leaves out of a profile are in one of its earlier files, stored first.
    let n = batch.readers.clamp(1, paths.len().max(1));
    let ahead: Vec<ReadAhead> = (0..n)
        .map(|_| ReadAhead::new(batch.read_ahead_bytes / n))
        .collect();
    let ahead = &ahead[..];
    std::thread::scope(|scope| -> Result<FilesSummary> {
        let _close = CloseOnDrop(ahead);
        let mut rxs = Vec::with_capacity(n);
        for (k, ahead) in ahead.iter().enumerate() {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Read>(32);
            rxs.push(rx);
            let reader_opts = opts.clone();
            // Named, so that a profiler tells reading from storing.
            let reader = std::thread::Builder::new().name(format!("fh-reader-{k}"));
            reader
                .spawn_scoped(scope, move || {
                    let mut cache = LoadCache::default();
                    for p in paths.iter().skip(k).step_by(n) {
                        let r = read_one(p, &reader_opts, &mut cache);
                        let bytes = r
                            .as_ref()
                            .map_or(0, |rows| rows.iter().map(|(r, _)| r.approx_bytes()).sum());
                        ahead.hold(bytes);
                        if tx.send((p.clone(), r, bytes)).is_err() {
                            break;
                        }
                    }
                })
                // As `scope.spawn` would: no thread, no load.
                .expect("cannot start a reader thread");
        }
        // The engine's round trips below while the readers start.
        let retention = retention_days(backend, &opts.database)?;
        // As the MemHawk loader: the embedded engine's merges would take
        // cores from decoding and inserting, and a short-lived loader that
        // exits cancels them (their work lost); paused in memory only,
        // until the end (an error returns with the pause dropped, which
        // resumes them).
        let pause = backend
            .merges_in_process()
            .then(|| super::writer::MergePause::new(backend, &opts.database))
            .transpose()?;
        // The storer stores batches, in order, while this thread gathers
        // the next one from the readers: reading and the engine overlap
        // (handed over at a rendezvous, so at most the batch being stored
        // and the one being gathered are in memory). It stops at its first
        // error, which ends the load.
        let (batch_tx, batch_rx) = std::sync::mpsc::sync_channel::<Pending>(0);
        let (done_tx, done_rx) = std::sync::mpsc::channel::<Result<Stored>>();
        let storer = std::thread::Builder::new().name("fh-storer".into());
        storer
            .spawn_scoped(scope, move || {
                let mut known = Known::default();
                for (mut rows, mut files) in batch_rx {
                    let stored =
                        store_pending(backend, &opts.database, &mut rows, &mut files, &mut known)
                            .map_err(|e| storing_error(e, &files, &opts.database));
                    let failed = stored.is_err();
                    let _ = done_tx.send(stored.map(|s| (files, s)));
                    if failed {
                        break;
                    }
                }
            })
            .expect("cannot start the storer thread");
        // Reports what the storer finished (`wait`: until it has finished
        // everything it was given).
        let settle = |out: &mut FilesSummary,
                      report: &mut dyn FnMut(FileEvent<'_>),
                      wait: bool|
         -> Result<()> {
            loop {
                let next = if wait {
                    match done_rx.recv() {
                        Ok(r) => r,
                        Err(_) => return Ok(()),
                    }
                } else {
                    match done_rx.try_recv() {
                        Ok(r) => r,
                        Err(_) => return Ok(()),
                    }
                };
                let (files, s) = next?;
                if let Some(s) = s {
                    out.batches += 1;
                    out.already_stored += s.already_stored;
                    out.sample_rows += s.sample_rows;
                }
                for f in &files {
                    report(FileEvent::Stored(f));
                }
            }
        };
        let mut pending: Vec<ProfileRows> = Vec::new();
        let mut pending_files: Vec<Vec<ContinuousSummary>> = Vec::new();
        let mut pending_rows = 0usize;
        // The first batches are smaller (see `BatchOptions::batch_rows`).
        let mut threshold = first_batch_rows(batch.batch_rows);
        for i in 0..paths.len() {
            let Ok((path, r, bytes)) = rxs[i % n].recv() else {
                break; // a reader panicked: its files are not loaded
            };
            ahead[i % n].release(bytes);
            settle(&mut out, report, false)?;
            let profiles = match r {
                Ok(p) => p,
                Err(e) => {
                    out.failed += 1;
                    report(FileEvent::Failed(&path, e));
                    continue;
                }
            };
            let mut summaries = Vec::with_capacity(profiles.len());
            for (rows, s) in profiles {
                out.profiles += 1;
                let ts = rows.profiles.first().map(|p| p.ts);
                if let (Some(days), Some(ts)) = (retention, ts) {
                    if expired(ts, days, today) {
                        out.expired += 1;
                        report(FileEvent::Expired {
                            source: &s.source,
                            ts_ms: ts,
                            retention_days: days,
                        });
                        // Its frames and stacks are not repeated by later
                        // profiles of the load (`LoadCache`): they are
                        // stored all the same, nothing else of it.
                        pending.push(ProfileRows {
                            frames: rows.frames,
                            stacks: rows.stacks,
                            ..ProfileRows::default()
                        });
                        continue;
                    }
                }
                pending_rows += rows.samples.len();
                pending.push(rows);
                summaries.push(s);
            }
            pending_files.push(summaries);
            if pending_rows >= threshold || pending.len() >= batch.batch_profiles {
                let full = (
                    std::mem::take(&mut pending),
                    std::mem::take(&mut pending_files),
                );
                if batch_tx.send(full).is_err() {
                    // The storer stopped at an error: it is in `done_rx`.
                    settle(&mut out, report, true)?;
                    break;
                }
                pending_rows = 0;
                threshold = threshold.saturating_mul(2).min(batch.batch_rows);
            }
        }
        if !pending.is_empty() || !pending_files.is_empty() {
            // An error of the storer shows in `settle` below.
            let _ = batch_tx.send((pending, pending_files));
        }
        drop(batch_tx);
        settle(&mut out, report, true)?;
        pause.map_or(Ok(()), super::writer::MergePause::resume)?;
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader holding bytes waits for a file past its share until they
    /// are released, or the load closes; holding nothing, it never waits.
    #[test]
    fn read_ahead_waits_for_what_is_taken() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::time::Duration;
        let a = ReadAhead::new(100);
        a.hold(500); // nothing held: through, whatever the size
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                a.hold(10);
                done.store(true, Ordering::SeqCst);
            });
            std::thread::sleep(Duration::from_millis(200));
            assert!(!done.load(Ordering::SeqCst), "waits while 500 are held");
            a.release(500);
        });
        assert!(done.load(Ordering::SeqCst));
        a.hold(80); // 90 held of 100: through
        let done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                a.hold(20);
                done.store(true, Ordering::SeqCst);
            });
            std::thread::sleep(Duration::from_millis(200));
            assert!(!done.load(Ordering::SeqCst), "90 + 20 is past 100");
            a.close();
        });
        assert!(done.load(Ordering::SeqCst));
    }

    #[test]
    fn unhex_reads_clickhouse_hex() {
        // `SELECT hex('api-é\t')` in ClickHouse: 6170692DC3A909.
        assert_eq!(unhex("6170692DC3A909").as_deref(), Some("api-é\t"));
        assert_eq!(unhex("").as_deref(), Some(""));
        for bad in ["6", "ZZ", "FF"] {
            assert_eq!(unhex(bad), None, "{bad}");
        }
    }

    #[test]
    fn content_hash_sees_every_byte() {
        let a = vec![7u8; 1000];
        let h = content_hash(&a);
        for i in [0, 1, 7, 8, 500, 999] {
            let mut b = a.clone();
            b[i] ^= 1;
            assert_ne!(content_hash(&b), h, "byte {i}");
        }
        assert_ne!(content_hash(&a[..999]), h);
        assert_eq!(content_hash(&a.clone()), h);
    }

    #[test]
    fn expiry_follows_the_day_ttl() {
        let day = 86_400_000i64;
        let today = 20_000i64;
        // A TTL of 30 days drops the day 30 days ago today.
        assert!(expired((today - 30) * day + 5, 30, today));
        assert!(expired((today - 40) * day, 30, today));
        assert!(!expired((today - 29) * day, 30, today));
        assert!(!expired(today * day, 1, today));
        assert!(expired((today - 1) * day + day - 1, 1, today));
        // `SELECT toDate('2149-05-20') + INTERVAL 30 DAY` is 1970-01-13 in
        // the engine: such a TTL date wraps, and the row would be dropped
        // (+ 17 days is 2149-06-06, + 18 1970-01-01).
        let may_20_2149 = 65_518i64;
        assert!(ttl_wraps(may_20_2149 * day, 30) && expired(may_20_2149 * day, 30, today));
        assert!(!ttl_wraps(may_20_2149 * day, 17) && !expired(may_20_2149 * day, 17, today));
        assert!(ttl_wraps(may_20_2149 * day, 18));
        // 2050-01-01 + 36,500 days is 2149-12-06: past the last Date.
        assert!(ttl_wraps(29_220 * day, 36_500));
        assert!(!ttl_wraps(today * day, 36_500));
    }
}
