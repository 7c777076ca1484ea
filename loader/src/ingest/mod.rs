//! Loading MemHawk `.binpb` files: decode, symbolize, turn per-trace absolute
//! values into per-stack rows, and insert them in deduplicated batches.
//!
//! Several traces can symbolize to the same stack (same functions, other
//! addresses), so the loader keeps each trace's latest values and each
//! stack's sum of them, and writes a stack's row whenever one of its traces
//! changed. Memory is bounded by the number of distinct traces and stacks,
//! not by the file's size.
//!
//! Progress (the byte offset after the last stored record) is written after
//! each batch, keyed by the process (a hash of the header's name, pid and
//! start time), so a later load of the same stream, from any path, replays
//! the records before that offset without writing them (to rebuild
//! dictionaries and values) and stores only what is new. Every batch carries
//! a deduplication token made of the process, its load generation and the
//! byte range, so a batch written twice is stored once. Batch boundaries
//! depend on the stream, except where the end of the data cut a batch (a
//! live file): so each batch's byte range is recorded (`load_intents`)
//! before its rows, and a load resumed after a crash between the rows and
//! the progress cuts that batch at the same end, whatever the file's length
//! now. A process can be deleted ([`delete_process`], `load --replace`) and
//! loaded again under the next generation.

pub mod continuous;
use crate::error::{Error, Result};
use crate::formats::binpb::{self, BinpbReader, Record, Snapshot};
use crate::storage::ident::Ident;
use crate::storage::rows::{
    stable_hash, FrameRow, IntentRow, ProcessRow, ProgressRow, RollupRow, RowBinary, SampleRow,
    StackRow, TotalRow,
};
use crate::storage::{insert, Backend};
use crate::symbolize::{ModuleMap, Symbolizer, SymbolizerOptions};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::{Duration, Instant};

/// Label of the stack that holds the profiler's own allocations.
pub const PROFILER_LABEL: &str = "[memhawk]";

/// Options of a load.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Database. Default: `flamehouse`.
    pub database: Ident,
    /// Symbolization (sysroot, granularity, debug directories).
    pub symbolizer: SymbolizerOptions,
    /// Limits on one record of the file (compressed and decompressed
    /// size), against corrupt or hostile input. Default: 256 MiB and 1 GiB.
    pub reader: binpb::ReaderOptions,
    /// Path of the main program's binary on this machine (the sysroot does
    /// not apply to it); default: the profile's `processFullPath`, under the
    /// sysroot if one is set, like every other module.
    pub main_binary: Option<PathBuf>,
    /// Write a batch after this many snapshots. Default: 300.
    pub batch_snapshots: usize,
    /// ... or once this many sample rows are pending (about 100 bytes
    /// each). Fewer, larger inserts leave the engine fewer parts to merge.
    /// Default: 1,000,000.
    pub batch_rows: usize,
    /// Follow the file as it grows. Default: off.
    pub watch: bool,
    /// How often `watch` looks for new records. Default: 1 s.
    pub poll_interval: Duration,
    /// With `watch`: stop once no record was read and the file did not
    /// grow for this long (a torn tail that stays torn is not growth).
    /// Default: never.
    pub idle_exit: Option<Duration>,
    /// Delete everything stored for the file's process first
    /// ([`delete_process`]) and load it again from the start: to redo a load
    /// made with a wrong sysroot, binary or granularity. Default: off.
    pub replace: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            database: crate::storage::schema::default_database(),
            symbolizer: SymbolizerOptions::default(),
            reader: binpb::ReaderOptions::default(),
            main_binary: None,
            batch_snapshots: 300,
            batch_rows: 1_000_000,
            watch: false,
            poll_interval: Duration::from_secs(1),
            idle_exit: None,
            replace: false,
        }
    }
}

/// What a load did.
#[derive(Debug, Clone, Default)]
pub struct LoadSummary {
    /// The file.
    pub source: String,
    /// Its process id.
    pub process_id: u64,
    /// Snapshots read (including replayed ones).
    pub snapshots: u64,
    /// Snapshots stored by this load.
    pub snapshots_stored: u64,
    /// Distinct stacks.
    pub stacks: usize,
    /// Distinct frames.
    pub frames: usize,
    /// Sample rows stored.
    pub sample_rows: u64,
    /// Share of distinct addresses symbolized (0-100).
    pub symbolized_percent: f64,
    /// First and last snapshot time, ms since the epoch.
    pub span_ms: Option<(i64, i64)>,
    /// Largest live size and when (ms).
    pub peak: Option<(i64, i64)>,
    /// Modules without symbols, once each.
    pub missing_modules: Vec<String>,
    /// Bytes of the file consumed.
    pub bytes: u64,
    /// The file ended in a torn (still being written) record.
    pub torn_tail: bool,
    /// With `watch`: the files read earlier at the same path, oldest first,
    /// each until another file replaced it (log rotation).
    pub followed: Vec<LoadSummary>,
}

/// Progress callback payload.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    /// Bytes consumed.
    pub bytes: u64,
    /// File size (when known).
    pub total_bytes: u64,
    /// Snapshots read.
    pub snapshots: u64,
}

/// Trace ids below this are looked up in a flat table (MemHawk numbers its
/// traces 1, 2, 3, ...; the table costs 4 bytes per id up to the largest one
/// seen), the rest (the profiler's bit-31 ids, a sparse producer) in a map.
const DENSE_TRACE_IDS: u32 = 1 << 22;

/// Trace id -> slot in [`State::traces`].
#[derive(Default)]
struct TraceIndex {
    dense: Vec<u32>,
    sparse: HashMap<u32, u32>,
}

impl TraceIndex {
    fn get(&self, id: u32) -> Option<usize> {
        if id < DENSE_TRACE_IDS {
            match self.dense.get(id as usize) {
                Some(&s) if s != u32::MAX => Some(s as usize),
                _ => None,
            }
        } else {
            self.sparse.get(&id).map(|&s| s as usize)
        }
    }

    fn insert(&mut self, id: u32, slot: usize) {
        if id < DENSE_TRACE_IDS {
            let i = id as usize;
            if self.dense.len() <= i {
                self.dense.resize(i + 1, u32::MAX);
            }
            self.dense[i] = slot as u32;
        } else {
            self.sparse.insert(id, slot as u32);
        }
    }
}

/// A trace: its stack and its latest values (size, active, overhead,
/// total_count, total_bytes).
struct Trace {
    stack: u32,
    values: [i64; 5],
}

/// A distinct stack: the sum of its traces' latest values, and its change
/// within the snapshot being applied.
struct StackState {
    id: u64,
    values: [i64; 5],
    delta: [i64; 5],
    /// Listed in `State::touched` (reused across snapshots: no per-snapshot
    /// map).
    touched: bool,
}

struct State<'a> {
    process_id: u64,
    /// The process's load generation (see [`batch_token`]).
    generation: u64,
    /// The process row, until the first batch this load stores carries it.
    process_row: Option<ProcessRow>,
    /// The end of a batch a crashed load recorded as intended (in
    /// `load_intents`) past the stored progress: the batch being built is
    /// cut exactly there, whatever the batch sizes and the end of the data.
    cut_at: Option<u64>,
    trace_index: TraceIndex,
    traces: Vec<Trace>,
    stacks: Vec<StackState>,
    touched: Vec<u32>,
    stack_index: HashMap<u64, u32>,
    frames_seen: HashSet<u64>,
    stored_stacks: HashSet<u64>,
    pending_frames: Vec<FrameRow>,
    pending_stacks: Vec<StackRow>,
    /// Pending sample rows, RowBinary-encoded ([`SampleRow::ENCODED_LEN`]
    /// bytes each) in arrival order, and the stack (index into `stacks`) of
    /// each.
    pending_samples: Vec<u8>,
    pending_sample_stacks: Vec<u32>,
    pending_totals: Vec<TotalRow>,
    pending_snapshots: usize,
    batch_start: u64,
    /// Sample buffers the writer has finished with, for reuse.
    spare: &'a Receiver<Spare>,
}

/// The embedded engine's background merges paused (`SYSTEM STOP MERGES`)
/// on the tables of the load's database until [`MergePause::resume`] or
/// drop. Scoped to those tables, not the whole engine: another database's
/// mutation (an `ALTER ... DELETE` waiting with `mutations_sync`, which runs
/// in the merge pool) must not wait on this load, as it would for ever when
/// it holds the engine's one connection that the load needs to resume.
struct MergePause<'a> {
    backend: &'a dyn Backend,
    tables: Vec<String>,
    resumed: bool,
}

impl<'a> MergePause<'a> {
    fn new(backend: &'a dyn Backend, db: &Ident) -> Result<Self> {
        let tables = backend
            .query_tsv(&format!(
                "SELECT name FROM system.tables WHERE database = {} AND engine LIKE '%MergeTree' \
                 ORDER BY name",
                crate::storage::sql_string(db.as_str())
            ))?
            .lines()
            .map(|t| format!("{db}.{}", crate::storage::quote_ident(t)))
            .collect();
        let pause = MergePause {
            backend,
            tables,
            resumed: false,
        };
        pause.set("STOP")?;
        Ok(pause)
    }

    fn set(&self, what: &str) -> Result<()> {
        for t in &self.tables {
            self.backend.execute(&format!("SYSTEM {what} MERGES {t}"))?;
        }
        Ok(())
    }

    fn resume(mut self) -> Result<()> {
        self.resumed = true;
        self.set("START")
    }
}

impl Drop for MergePause<'_> {
    fn drop(&mut self) {
        if !self.resumed {
            let _ = self.set("START");
        }
    }
}

fn ms(ns: u64) -> i64 {
    (ns / 1_000_000) as i64
}

/// One batch for the writer thread, in insert order.
struct Batch {
    token: String,
    /// The process row, with the first batch a load stores.
    process: Option<ProcessRow>,
    /// The batch's byte range.
    intent: IntentRow,
    frames: Vec<FrameRow>,
    stacks: Vec<StackRow>,
    /// Encoded sample rows in the table's key order.
    samples: Vec<u8>,
    /// Their per-minute sums (`samples_1m`).
    rollup: Vec<RollupRow>,
    totals: Vec<TotalRow>,
    progress: ProgressRow,
}

/// A sample buffer going back to the reader for reuse.
type Spare = Vec<u8>;

/// Rearranges encoded sample rows (`SampleRow::ENCODED_LEN` bytes each)
/// into the table's key order (process, stack_id, ts) in `out`: a counting
/// sort on each row's stack rank, stable, so each stack's rows keep their
/// arrival (time) order. It reads the rows in sequence and scatters whole
/// rows, which is cheap; blocks that arrive sorted save the engine its own
/// sort on insert (it checks first).
fn sort_rows(rows: &[u8], sample_stacks: &[u32], rank: &[u32], out: &mut Vec<u8>) {
    const L: usize = SampleRow::ENCODED_LEN;
    debug_assert_eq!(rows.len(), sample_stacks.len() * L);
    let mut start = vec![0usize; rank.len() + 1];
    for &s in sample_stacks {
        start[rank[s as usize] as usize + 1] += L;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    out.clear();
    out.resize(rows.len(), 0);
    for (row, &s) in rows.chunks_exact(L).zip(sample_stacks) {
        let at = &mut start[rank[s as usize] as usize];
        out[*at..*at + L].copy_from_slice(row);
        *at += L;
    }
}

/// The per-minute sums of each stack's changes (`samples_1m`) of rows in
/// key order: one pass, adding up runs of the same stack and minute. The
/// loader keeps this rollup itself, as it computes the deltas it sums: a
/// materialized view doing the same GROUP BY on every inserted block took
/// 2 s of the engine's time per hour of profile (docs/benchmarks.md).
fn rollup(rows: &[u8]) -> Vec<RollupRow> {
    let mut out: Vec<RollupRow> = Vec::new();
    for r in rows.chunks_exact(SampleRow::ENCODED_LEN) {
        let s = SampleRow::decode(r);
        let minute = (s.ts.div_euclid(60_000) * 60) as u32;
        match out.last_mut() {
            Some(last)
                if last.stack_id == s.stack_id
                    && last.minute == minute
                    && last.process_id == s.process_id =>
            {
                last.size_delta = last.size_delta.wrapping_add(s.size_delta);
                last.active_delta = last.active_delta.wrapping_add(s.active_delta);
            }
            _ => out.push(RollupRow {
                process_id: s.process_id,
                minute,
                stack_id: s.stack_id,
                size_delta: s.size_delta,
                active_delta: s.active_delta,
            }),
        }
    }
    out
}

/// Test hook: with `FLAMEHOUSE_TEST_CRASH` set to `at`, the process ends
/// there at once, as a crash or `kill -9` would: no destructor, no flush,
/// no signal handler (the engine's SIGABRT handler takes minutes). Only the
/// end-to-end tests set it.
fn crash_point(at: &str) {
    if std::env::var_os("FLAMEHOUSE_TEST_CRASH").is_some_and(|v| v == at) {
        // SAFETY: ends the process; nothing runs after it.
        unsafe { libc::_exit(137) }
    }
}

fn write_batch(backend: &dyn Backend, db: &Ident, b: Batch) -> Result<Spare> {
    let tok = &b.token;
    // The process row (with this load's source) and the batch's byte range
    // first, dictionaries next, progress last: a crash in between makes the
    // next load cut the same batch (see `State::cut_at`) and re-send it, and
    // the tokens deduplicate it.
    if let Some(p) = &b.process {
        insert(
            backend,
            db,
            std::slice::from_ref(p),
            &format!("{tok}:process"),
        )?;
    }
    insert(
        backend,
        db,
        std::slice::from_ref(&b.intent),
        &format!("{tok}:intent"),
    )?;
    insert(backend, db, &b.frames, &format!("{tok}:frames"))?;
    insert(backend, db, &b.stacks, &format!("{tok}:stacks"))?;
    if !b.samples.is_empty() {
        backend.insert_rowbinary(
            db,
            SampleRow::TABLE,
            SampleRow::STRUCTURE,
            &b.samples,
            &format!("{tok}:samples"),
        )?;
    }
    crash_point("after-samples");
    insert(backend, db, &b.rollup, &format!("{tok}:samples_1m"))?;
    insert(backend, db, &b.totals, &format!("{tok}:totals"))?;
    insert(
        backend,
        db,
        std::slice::from_ref(&b.progress),
        &format!("{tok}:progress"),
    )?;
    let mut rows = b.samples;
    rows.clear();
    Ok(rows)
}

/// The deduplication token of a batch: the stream's identity, its load
/// generation and the byte range, so the same batch from any copy of the
/// file gets the same token, and a reload after a delete gets new ones.
/// Generation 0 (a process never deleted, and every process stored before
/// generations existed) keeps the old form, so stored batches still
/// deduplicate.
fn batch_token(process_id: u64, generation: u64, start: u64, end: u64) -> String {
    if generation == 0 {
        format!("{process_id}@{start}-{end}")
    } else {
        format!("{process_id}.{generation}@{start}-{end}")
    }
}

/// The tables holding a process's own rows, in the order
/// [`delete_process`] empties them: progress first (so an interrupted
/// delete resumes nothing on half-deleted rows), the process row last (so
/// it still shows in `process_list` until the delete is complete).
/// `frames`, `stacks` and `stack_functions` are shared dictionaries keyed by
/// content hashes: other processes may use the same rows, and unused rows
/// cost little and change no result, so they are kept.
pub const PROCESS_TABLES: &[&str] = &[
    "load_progress",
    "load_intents",
    "samples",
    "samples_1m",
    "totals",
    "process_stats",
    "processes",
];

/// Deletes everything stored for one process (every table of
/// [`PROCESS_TABLES`]), synchronously: when it returns, the rows are gone
/// on every replica. The next load of the process starts over with the next
/// load generation (recorded first, in `process_generations`), so the
/// engine's deduplication window does not drop its batches as copies of
/// the deleted ones. Interrupted, it is simply run again.
pub fn delete_process(backend: &dyn Backend, db: &Ident, process_id: u64) -> Result<()> {
    backend.execute(&format!(
        "INSERT INTO {db}.process_generations (process_id, generation) \
         SELECT {process_id}, 1 + greatest( \
             (SELECT max(generation) FROM {db}.processes WHERE process_id = {process_id}), \
             (SELECT max(generation) FROM {db}.process_generations \
              WHERE process_id = {process_id}))"
    ))?;
    for table in PROCESS_TABLES {
        backend.execute(&format!(
            "ALTER TABLE {db}.{table} DELETE WHERE process_id = {process_id} \
             SETTINGS mutations_sync = 2"
        ))?;
    }
    Ok(())
}

/// How reading one file ended.
enum Followed {
    /// The end of the file (or, with `watch`, of the idle time).
    Done(LoadSummary),
    /// With `watch`: another file took the path (rotation); this one is
    /// read to its end.
    Replaced(LoadSummary),
}

/// Loads one file into `backend` (the schema must exist: see
/// [`crate::storage::schema::migrate`]). Decoding and symbolizing run on the calling
/// thread while a writer thread inserts the previous batch; at most one batch
/// waits between them, so memory stays bounded, and the writer hands the
/// sample buffers back for reuse.
///
/// With [`LoadOptions::watch`] the path is followed like `tail -F`: when
/// another file replaces it (log rotation: same path, new inode), the old
/// file is read to its end and the new one is loaded from its start, as the
/// process its header names (a new process, or the same stream resumed at
/// its stored progress); the summary lists the earlier files in
/// [`LoadSummary::followed`]. A followed file that shrinks (truncated or
/// rewritten in place) is an error ([`Error::Truncated`]): its records can
/// no longer be told apart from the stored ones.
pub fn load_file(
    backend: &dyn Backend,
    path: &Path,
    opts: &LoadOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<LoadSummary> {
    // Merges the embedded engine starts during a load take cores from
    // decoding and inserting, and are cancelled (their work lost) when a
    // short-lived loader exits: pause them until the file is caught up. The
    // pause is in memory only; a crash cannot leave it on.
    let mut pause = backend
        .merges_in_process()
        .then(|| MergePause::new(backend, &opts.database))
        .transpose()?;
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(1);
        let (spare_tx, spare_rx) = std::sync::mpsc::sync_channel::<Spare>(2);
        let db = opts.database.clone();
        let writer = scope.spawn(move || -> Result<()> {
            for b in rx {
                let spare = write_batch(backend, &db, b)?;
                let _ = spare_tx.try_send(spare);
            }
            Ok(())
        });
        let mut followed = Vec::new();
        let mut replace = opts.replace;
        let read = loop {
            match read_file(
                backend, path, opts, progress, &tx, &spare_rx, &mut pause, replace,
            ) {
                Ok(Followed::Done(mut s)) => {
                    s.followed = followed;
                    break Ok(s);
                }
                Ok(Followed::Replaced(s)) => {
                    followed.push(s);
                    // Only the stream that was there when the load started.
                    replace = false;
                }
                Err(e) => break Err(e),
            }
        };
        drop(tx);
        let written = writer.join().unwrap_or_else(|_| {
            Err(Error::Query {
                message: "the writer thread panicked".into(),
            })
        });
        // A failed insert is the cause when both fail (the reader then only
        // saw the writer go away).
        written?;
        read
    })
}

#[allow(clippy::too_many_arguments)]
fn read_file(
    backend: &dyn Backend,
    path: &Path,
    opts: &LoadOptions,
    progress: &mut dyn FnMut(Progress),
    writer: &SyncSender<Batch>,
    spare: &Receiver<Spare>,
    pause: &mut Option<MergePause>,
    replace: bool,
) -> Result<Followed> {
    use std::os::unix::fs::MetadataExt;
    let abs = std::fs::canonicalize(path).map_err(crate::error::file_err(path))?;
    let source = abs.display().to_string();
    let db = &opts.database;
    let file = std::fs::File::open(&abs).map_err(crate::error::file_err(&abs))?;
    let meta = file.metadata().map_err(crate::error::file_err(&abs))?;
    // The file being read (a replacement at the path has another inode),
    // and the largest length seen (growth; a smaller one is a truncation).
    let identity = (meta.dev(), meta.ino());
    let mut seen_len = meta.len();
    let total_bytes = meta.len();
    // Known once the header is read: progress is keyed by the process (the
    // byte stream), not the path, so a moved or copied file resumes too.
    let mut resume: u64 = 0;

    let mut reader = BinpbReader::from_file(file, &abs, opts.reader)?;
    let mut sym = Symbolizer::new(opts.symbolizer.clone());
    let mut summary = LoadSummary {
        source: source.clone(),
        ..Default::default()
    };
    let mut st = State {
        process_id: 0,
        generation: 0,
        process_row: None,
        cut_at: None,
        trace_index: TraceIndex::default(),
        traces: Vec::new(),
        stacks: Vec::new(),
        touched: Vec::new(),
        stack_index: HashMap::default(),
        frames_seen: HashSet::default(),
        stored_stacks: HashSet::default(),
        pending_frames: Vec::new(),
        pending_stacks: Vec::new(),
        pending_samples: Vec::new(),
        pending_sample_stacks: Vec::new(),
        pending_totals: Vec::new(),
        pending_snapshots: 0,
        batch_start: 0,
        spare,
    };
    // The main program: a --binary given by the user is a path on this
    // machine; the profile's own path is one on the profiled machine, which
    // the symbolizer puts under the sysroot like every other module.
    let mut main_binary: Option<PathBuf> = opts.main_binary.clone();
    // The header's processFullPath: the main program's module name in
    // profiles that name it by path.
    let mut full_path = String::new();
    // The idle clock: restarted by every record read and every growth of
    // the file, so catching up never counts as idle, and a torn tail that
    // stays torn does not count as growth.
    let mut last_growth = Instant::now();
    // A replacement was seen: read this file to its end, then follow it.
    let mut draining = false;
    let mut last_ts = 0i64;
    let mut last_progress = Instant::now();
    loop {
        let next = reader.next_record();
        if !matches!(next, Ok(Some(_))) && st.cut_at.is_none() {
            // End of the data, or corruption: store every complete record
            // read so far first. Not while a batch recorded as intended by
            // a crashed load is incomplete: cut anywhere else, it would get
            // other tokens and store its rows twice (they stay pending; a
            // load that reaches the intended end stores them).
            flush(
                writer,
                &source,
                &mut st,
                reader.committed_offset(),
                &mut summary,
                last_ts,
            )?;
        }
        let Some(rec) = next? else {
            // Caught up: merges may run while `--watch` waits.
            if let Some(p) = pause.take() {
                p.resume()?;
            }
            summary.torn_tail = reader.tail().is_some_and(|t| t.is_torn());
            if reader.header().is_none() && !opts.watch {
                // Not even the header record is complete: a live file that
                // has just been created, or not a MemHawk file at all.
                return Err(Error::Decode(format!(
                    "{source}: no complete header record in {} bytes (not a MemHawk .binpb file, \
                     or one still being written: use --watch)",
                    total_bytes
                )));
            }
            if opts.watch {
                if draining {
                    finish(&mut summary, &sym, &st, &reader);
                    return Ok(Followed::Replaced(summary));
                }
                if opts.idle_exit.is_some_and(|d| last_growth.elapsed() >= d) {
                    break;
                }
                std::thread::sleep(opts.poll_interval);
                reader.rewind_to_committed()?;
                match std::fs::metadata(path) {
                    Ok(m) if (m.dev(), m.ino()) != identity => {
                        draining = true;
                        last_growth = Instant::now();
                    }
                    Ok(m) if m.len() < seen_len => {
                        return Err(Error::Truncated {
                            path: abs,
                            seen: seen_len,
                            now: m.len(),
                            stored: reader.committed_offset(),
                        })
                    }
                    Ok(m) => {
                        if m.len() > seen_len {
                            seen_len = m.len();
                            last_growth = Instant::now();
                        }
                    }
                    // Moved away, and the writer has not created the next
                    // file yet: wait for it (or the idle time).
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(crate::error::file_err(path)(e)),
                }
                continue;
            }
            break;
        };
        last_growth = Instant::now();
        let offset = reader.committed_offset();
        seen_len = seen_len.max(offset);
        let replay = offset <= resume;
        match rec {
            Record::Header(info) => {
                st.process_id = stable_hash(&[
                    info.process_short_name.as_bytes(),
                    &info.pid.to_le_bytes(),
                    &info.start_timestamp.to_le_bytes(),
                ]);
                summary.process_id = st.process_id;
                let pid = st.process_id;
                if replace {
                    // The delete is a mutation, which runs in the merge
                    // pool: let it run while it waits for the delete.
                    if let Some(p) = pause.as_ref() {
                        p.set("START")?;
                    }
                    let deleted = delete_process(backend, db, pid);
                    if let Some(p) = pause.as_ref() {
                        p.set("STOP")?;
                    }
                    deleted?;
                }
                let known = backend.query_tsv(&format!(
                    "SELECT (SELECT max(offset) FROM {db}.load_progress WHERE process_id = {pid}), \
                            (SELECT count() FROM {db}.processes WHERE process_id = {pid}), \
                            (SELECT max(generation) FROM {db}.processes WHERE process_id = {pid}), \
                            (SELECT max(generation) FROM {db}.process_generations \
                             WHERE process_id = {pid})"
                ))?;
                let mut known = known
                    .split_whitespace()
                    .map(|x| x.parse::<u64>().unwrap_or(0));
                resume = known.next().unwrap_or(0);
                let stored = known.next().unwrap_or(0) > 0;
                let (current, next) = (known.next().unwrap_or(0), known.next().unwrap_or(0));
                // A stored process keeps its generation (its batches
                // deduplicate against the stored ones); a new one takes 0,
                // a deleted one the generation its delete recorded.
                st.generation = if stored { current } else { next };
                // A batch a crashed load recorded as intended beyond the
                // stored progress: cut the replayed batch at its end.
                st.cut_at = backend
                    .query_tsv(&format!(
                        "SELECT max(end_offset) FROM {db}.load_intents WHERE process_id = {pid} \
                         AND generation = {} AND start_offset = {resume}",
                        st.generation
                    ))?
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|&end| end > resume);
                st.batch_start = resume;
                if main_binary.is_none() && !info.process_full_path.is_empty() {
                    main_binary = Some(PathBuf::from(&info.process_full_path));
                }
                full_path.clone_from(&info.process_full_path);
                // Written with the first batch this load stores, so the
                // process and its source are the file actually loaded (not
                // a copy that failed before storing anything).
                st.process_row = Some(ProcessRow {
                    process_id: pid,
                    pid: info.pid,
                    name: info.process_short_name.clone(),
                    full_path: info.process_full_path.clone(),
                    start_time: info.start_timestamp as i64,
                    source: source.clone(),
                    generation: st.generation,
                });
            }
            Record::Snapshot(snap) => {
                summary.snapshots += 1;
                if !snap.loaded_so.is_empty() {
                    let map = ModuleMap::new(&snap.loaded_so, main_binary.as_deref())
                        .main_named(&full_path, main_binary.as_deref());
                    sym.set_modules(if opts.main_binary.is_some() {
                        map.main_on_host()
                    } else {
                        map
                    });
                }
                let ts = ms(snap.timestamp);
                last_ts = ts;
                summary.span_ms = Some(match summary.span_ms {
                    Some((a, _)) => (a, ts),
                    None => (ts, ts),
                });
                apply_snapshot(&mut st, &reader, &mut sym, &snap, ts, replay)?;
                if !replay {
                    summary.snapshots_stored += 1;
                    st.pending_snapshots += 1;
                    // The stream's first batch is an eighth of the others,
                    // so the writer (the engine, the slower side) starts
                    // early. Boundaries depend only on where a batch starts
                    // in the stream, so a resumed load cuts the same
                    // batches (and tokens) as the load it resumes, except
                    // where the end of the data cut one: that end is in
                    // `cut_at`.
                    let first = st.batch_start == 0;
                    let (snaps, rows) = if first {
                        (
                            opts.batch_snapshots.div_ceil(8),
                            opts.batch_rows.div_ceil(8),
                        )
                    } else {
                        (opts.batch_snapshots, opts.batch_rows)
                    };
                    match st.cut_at {
                        Some(cut) if offset == cut => {
                            st.cut_at = None;
                            flush(writer, &source, &mut st, offset, &mut summary, ts)?;
                        }
                        Some(cut) if offset > cut => {
                            return Err(Error::Decode(format!(
                                "{source}: record ending at byte {offset}: a load of this \
                                 process recorded a batch ending at byte {cut}, which is not a \
                                 record boundary here (another file with the same header?)"
                            )));
                        }
                        Some(_) => {}
                        None => {
                            if st.pending_snapshots >= snaps
                                || st.pending_sample_stacks.len() >= rows
                            {
                                flush(writer, &source, &mut st, offset, &mut summary, ts)?;
                            }
                        }
                    }
                } else {
                    // Replayed records were stored by an earlier load,
                    // dictionaries included.
                    st.batch_start = offset;
                    st.pending_frames.clear();
                    st.pending_stacks.clear();
                }
                if let Some(t) = &snap.total {
                    if summary.peak.is_none_or(|(p, _)| t.size > p) {
                        summary.peak = Some((t.size, ts));
                    }
                }
            }
        }
        if last_progress.elapsed() >= Duration::from_millis(100) {
            progress(Progress {
                bytes: offset,
                total_bytes,
                snapshots: summary.snapshots,
            });
            last_progress = Instant::now();
        }
    }
    progress(Progress {
        bytes: reader.committed_offset(),
        total_bytes,
        snapshots: summary.snapshots,
    });
    finish(&mut summary, &sym, &st, &reader);
    Ok(Followed::Done(summary))
}

/// Fills in the summary's totals at the end of a file.
fn finish<R>(summary: &mut LoadSummary, sym: &Symbolizer, st: &State, reader: &BinpbReader<R>) {
    let stats = sym.stats();
    summary.symbolized_percent = stats.symbolized_percent();
    summary.stacks = st.stacks.len();
    summary.frames = st.frames_seen.len();
    summary.bytes = reader.committed_offset();
    summary.missing_modules = sym
        .missing_modules()
        .iter()
        .map(|e| e.to_string())
        .collect();
}

fn apply_snapshot<R: std::io::Read>(
    st: &mut State,
    reader: &BinpbReader<R>,
    sym: &mut Symbolizer,
    snap: &Snapshot,
    ts: i64,
    replay: bool,
) -> Result<()> {
    for t in &snap.changed {
        let a = t.actual.unwrap_or_default();
        let new = [
            a.size,
            a.active,
            a.overhead,
            a.total_count as i64,
            a.total_bytes as i64,
        ];
        let (stack, old) = match st.trace_index.get(t.trace_id) {
            Some(slot) => {
                let tr = &mut st.traces[slot];
                (tr.stack as usize, std::mem::replace(&mut tr.values, new))
            }
            None => {
                let stack = stack_for_trace(st, reader, sym, t.trace_id);
                st.trace_index.insert(t.trace_id, st.traces.len());
                st.traces.push(Trace {
                    stack: stack as u32,
                    values: new,
                });
                (stack, [0; 5])
            }
        };
        let s = &mut st.stacks[stack];
        if !s.touched {
            s.touched = true;
            st.touched.push(stack as u32);
        }
        for i in 0..5 {
            let delta = new[i].wrapping_sub(old[i]);
            s.delta[i] = s.delta[i].wrapping_add(delta);
            s.values[i] = s.values[i].wrapping_add(delta);
        }
    }
    let mut touched = std::mem::take(&mut st.touched);
    for &i in &touched {
        let s = &mut st.stacks[i as usize];
        let d = std::mem::take(&mut s.delta);
        s.touched = false;
        if replay {
            continue;
        }
        let v = &s.values;
        SampleRow {
            process_id: st.process_id,
            ts,
            stack_id: s.id,
            size: v[0],
            active: v[1],
            overhead: v[2],
            total_count: v[3] as u64,
            total_bytes: v[4] as u64,
            size_delta: d[0],
            active_delta: d[1],
            count_delta: d[3],
            bytes_delta: d[4],
        }
        .encode(&mut st.pending_samples);
        st.pending_sample_stacks.push(i);
    }
    touched.clear();
    st.touched = touched;
    if replay {
        return Ok(());
    }
    let total = match &snap.total {
        Some(t) => TotalRow {
            process_id: st.process_id,
            ts,
            size: t.size,
            active: t.active,
            overhead: t.overhead,
            total_count: t.total_count,
            total_bytes: t.total_bytes,
        },
        None => {
            // No total reported: the sum of every trace's latest values.
            let mut s = [0i64; 5];
            for stack in &st.stacks {
                for (acc, x) in s.iter_mut().zip(&stack.values) {
                    *acc = acc.wrapping_add(*x);
                }
            }
            TotalRow {
                process_id: st.process_id,
                ts,
                size: s[0],
                active: s[1],
                overhead: s[2],
                total_count: s[3] as u64,
                total_bytes: s[4] as u64,
            }
        }
    };
    st.pending_totals.push(total);
    Ok(())
}

fn stack_for_trace<R: std::io::Read>(
    st: &mut State,
    reader: &BinpbReader<R>,
    sym: &mut Symbolizer,
    trace_id: u32,
) -> usize {
    let mut labels: Vec<String> = Vec::new();
    let mut frame_rows: Vec<FrameRow> = Vec::new();
    if binpb::proto::is_profiler_trace(trace_id) {
        labels.push(PROFILER_LABEL.to_string());
        frame_rows.push(FrameRow {
            frame_id: stable_hash(&[PROFILER_LABEL.as_bytes()]),
            label: PROFILER_LABEL.to_string(),
            function: PROFILER_LABEL.to_string(),
            file: String::new(),
            line: 0,
            module: String::new(),
        });
    } else {
        let addrs: Vec<u64> = reader.dictionaries().resolve(trace_id).collect();
        // Module of each address, for the frames dictionary.
        for (depth, addr) in addrs.iter().enumerate().rev() {
            let module = sym
                .modules()
                .lookup(*addr)
                .and_then(|(i, _)| sym.modules().module(i).map(|m| m.basename()))
                .unwrap_or_default();
            // Non-leaf frames are return addresses: looked up at addr - 1.
            let frames = if depth == 0 {
                sym.symbolize(*addr)
            } else {
                sym.symbolize_caller(*addr)
            };
            for f in frames {
                labels.push(f.label.clone());
                frame_rows.push(FrameRow {
                    frame_id: stable_hash(&[f.label.as_bytes()]),
                    label: f.label.clone(),
                    function: f.function.clone(),
                    file: f.file.clone().unwrap_or_default(),
                    line: f.line.unwrap_or(0),
                    module: module.clone(),
                });
            }
        }
    }
    let parts: Vec<&[u8]> = labels.iter().map(|l| l.as_bytes()).collect();
    let stack_id = stable_hash(&parts);
    if let Some(&i) = st.stack_index.get(&stack_id) {
        return i as usize;
    }
    for f in frame_rows.iter() {
        if st.frames_seen.insert(f.frame_id) {
            st.pending_frames.push(f.clone());
        }
    }
    let i = st.stacks.len();
    st.stacks.push(StackState {
        id: stack_id,
        values: [0; 5],
        delta: [0; 5],
        touched: false,
    });
    st.stack_index.insert(stack_id, i as u32);
    if st.stored_stacks.insert(stack_id) {
        st.pending_stacks.push(StackRow {
            stack_id,
            frame_ids: frame_rows.iter().map(|f| f.frame_id).collect(),
            labels,
        });
    }
    i
}

fn flush(
    writer: &SyncSender<Batch>,
    source: &str,
    st: &mut State<'_>,
    end: u64,
    summary: &mut LoadSummary,
    last_ts: i64,
) -> Result<()> {
    if st.pending_sample_stacks.is_empty()
        && st.pending_totals.is_empty()
        && st.pending_stacks.is_empty()
        && st.pending_frames.is_empty()
    {
        return Ok(());
    }
    summary.sample_rows += st.pending_sample_stacks.len() as u64;
    // Each stack's position in stack_id order, for the sort.
    let mut by_id: Vec<u32> = (0..st.stacks.len() as u32).collect();
    by_id.sort_unstable_by_key(|&i| st.stacks[i as usize].id);
    let mut rank = vec![0u32; by_id.len()];
    for (r, &i) in by_id.iter().enumerate() {
        rank[i as usize] = r as u32;
    }
    // Sorted into the buffer of a batch the writer has finished with (here:
    // the writer's time is the engine's, the critical path).
    let mut samples = st.spare.try_recv().unwrap_or_default();
    sort_rows(
        &st.pending_samples,
        &st.pending_sample_stacks,
        &rank,
        &mut samples,
    );
    st.pending_samples.clear();
    st.pending_sample_stacks.clear();
    let rollup = rollup(&samples);
    let batch = Batch {
        token: batch_token(st.process_id, st.generation, st.batch_start, end),
        process: st.process_row.take(),
        intent: IntentRow {
            process_id: st.process_id,
            generation: st.generation,
            start_offset: st.batch_start,
            end_offset: end,
        },
        frames: std::mem::take(&mut st.pending_frames),
        stacks: std::mem::take(&mut st.pending_stacks),
        samples,
        rollup,
        totals: std::mem::take(&mut st.pending_totals),
        progress: ProgressRow {
            source: source.to_string(),
            process_id: st.process_id,
            offset: end,
            snapshots: summary.snapshots,
            last_ts,
        },
    };
    writer.send(batch).map_err(|_| Error::Query {
        message: "the writer stopped".into(),
    })?;
    st.pending_snapshots = 0;
    st.batch_start = end;
    Ok(())
}

impl From<binpb::Error> for Error {
    fn from(e: binpb::Error) -> Self {
        Error::Decode(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn sort_rows_matches_a_stable_sort_by_rank() {
        const L: usize = SampleRow::ENCODED_LEN;
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for _ in 0..50 {
            let stacks = rng.gen_range(1..40usize);
            let n = rng.gen_range(0..500usize);
            // A random rank permutation of the stacks.
            let mut rank: Vec<u32> = (0..stacks as u32).collect();
            for i in (1..stacks).rev() {
                rank.swap(i, rng.gen_range(0..=i));
            }
            let sample_stacks: Vec<u32> = (0..n).map(|_| rng.gen_range(0..stacks as u32)).collect();
            let rows: Vec<u8> = (0..n * L).map(|_| rng.gen()).collect();
            let mut out = vec![7u8; 3];
            sort_rows(&rows, &sample_stacks, &rank, &mut out);
            // Reference: a stable sort of the row indexes by rank.
            let mut idx: Vec<usize> = (0..n).collect();
            idx.sort_by_key(|&i| rank[sample_stacks[i] as usize]);
            let want: Vec<u8> = idx
                .iter()
                .flat_map(|&i| rows[i * L..(i + 1) * L].iter().copied())
                .collect();
            assert_eq!(out, want);
        }
    }

    #[test]
    fn rollup_sums_each_stack_per_minute() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let mut rows: Vec<SampleRow> = (0..2000)
            .map(|_| SampleRow {
                process_id: 9,
                ts: 1_750_000_000_000 + rng.gen_range(0..600_000),
                stack_id: rng.gen_range(0..30),
                size: 0,
                active: 0,
                overhead: 0,
                total_count: 0,
                total_bytes: 0,
                size_delta: rng.gen_range(-1000..1000),
                active_delta: rng.gen_range(-5..5),
                count_delta: 0,
                bytes_delta: 0,
            })
            .collect();
        rows.sort_by_key(|r| (r.stack_id, r.ts));
        let mut bytes = Vec::new();
        for r in &rows {
            r.encode(&mut bytes);
            assert_eq!(
                SampleRow::decode(&bytes[bytes.len() - SampleRow::ENCODED_LEN..]),
                *r
            );
        }
        // Reference: a map from (stack, minute) to the sums.
        let mut want = std::collections::BTreeMap::new();
        for r in &rows {
            let e = want
                .entry((r.stack_id, r.ts / 60_000 * 60))
                .or_insert((0i64, 0i64));
            e.0 += r.size_delta;
            e.1 += r.active_delta;
        }
        let got: std::collections::BTreeMap<_, _> = rollup(&bytes)
            .into_iter()
            .map(|r| {
                assert_eq!(r.process_id, 9);
                (
                    (r.stack_id, i64::from(r.minute)),
                    (r.size_delta, r.active_delta),
                )
            })
            .collect();
        assert_eq!(got, want);
        // One row per stack and minute.
        assert_eq!(rollup(&bytes).len(), want.len());
    }

    #[test]
    fn encoded_sample_rows_have_the_fixed_length() {
        let mut buf = Vec::new();
        SampleRow {
            process_id: 1,
            ts: 2,
            stack_id: 3,
            size: -4,
            active: 5,
            overhead: 6,
            total_count: 7,
            total_bytes: 8,
            size_delta: 9,
            active_delta: 10,
            count_delta: 11,
            bytes_delta: 12,
        }
        .encode(&mut buf);
        assert_eq!(buf.len(), SampleRow::ENCODED_LEN);
    }

    #[test]
    fn trace_index_finds_dense_and_sparse_ids() {
        let mut t = TraceIndex::default();
        let ids = [
            0u32,
            7,
            3,
            DENSE_TRACE_IDS - 1,
            DENSE_TRACE_IDS,
            0x8000_0000,
            u32::MAX,
        ];
        for (slot, &id) in ids.iter().enumerate() {
            assert_eq!(t.get(id), None, "{id}");
            t.insert(id, slot);
        }
        for (slot, &id) in ids.iter().enumerate() {
            assert_eq!(t.get(id), Some(slot), "{id}");
        }
        assert_eq!(t.get(1), None);
        assert_eq!(t.get(DENSE_TRACE_IDS + 1), None);
        // Ids at or above the limit never grow the flat table.
        assert_eq!(t.dense.len(), DENSE_TRACE_IDS as usize);
    }
}
