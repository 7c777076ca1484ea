//! The ingest pipeline: a profile file into the tables. The data path, one
//! module per step:
//!
//! 1. `read`: the file's format reader ([`crate::formats`]) gives events
//!    of the neutral model ([`crate::model`]); the loop resumes, replays
//!    and follows the file;
//! 2. `symbols`: a new stack's frames through the [`crate::symbolize`]
//!    symbolizer, into frame rows;
//! 3. `intern`: each distinct frame and stack into the dictionaries once;
//! 4. per-source row logic: `memhawk` for sources whose values are as of
//!    a snapshot (per-trace absolute values into per-stack values and
//!    deltas, totals);
//! 5. `batch`: rows gathered into batches, sorted in key order, rolled up
//!    per minute, with deduplication tokens;
//! 6. `writer`: a batch into the tables in crash-safe order, on its own
//!    thread; merges paused during the load; deleting a process.
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

mod batch;
pub mod continuous;
pub mod cp_batch;
mod intern;
mod memhawk;
mod read;
pub mod stdin;
mod symbols;
mod writer;

pub use crate::formats::binpb::PROFILER_LABEL;
pub use writer::{delete_process, PROCESS_TABLES};

use crate::error::{Error, Result};
use crate::formats::{Format, ReadOptions};
use crate::storage::ident::Ident;
use crate::storage::Backend;
use crate::symbolize::SymbolizerOptions;
use batch::{Batch, Spare};
use read::{read_file, Followed};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Options of a load.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Database. Default: `flamehouse`.
    pub database: Ident,
    /// Symbolization (sysroot, granularity, debug directories).
    pub symbolizer: SymbolizerOptions,
    /// The file's format. Default: `None`, detected from its first bytes
    /// ([`crate::formats::detect`]).
    pub format: Option<Format>,
    /// The readers' options; for MemHawk, the limits on one record
    /// (compressed and decompressed size) against corrupt or hostile
    /// input. Default: 256 MiB and 1 GiB.
    pub read: ReadOptions,
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
            format: None,
            read: ReadOptions::default(),
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
/// no longer be told apart from the stored ones. A path not created yet is
/// waited for (up to [`LoadOptions::idle_exit`]), and a followed file that
/// never gets a whole header record is [`Error::NoHeader`] at the idle time.
pub fn load_file(
    backend: &dyn Backend,
    path: &Path,
    opts: &LoadOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<LoadSummary> {
    if opts.watch {
        read::wait_for(path, opts)?;
    }
    follow_file(backend, path, opts, progress)
}

/// [`load_file`] of a file that exists (or, without `--watch`, fails to
/// open).
fn follow_file(
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
        .then(|| writer::MergePause::new(backend, &opts.database))
        .transpose()?;
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(1);
        let (spare_tx, spare_rx) = std::sync::mpsc::sync_channel::<Spare>(2);
        let db = opts.database.clone();
        let writer = scope.spawn(move || -> Result<()> {
            for b in rx {
                let spare = writer::write_batch(backend, &db, b)?;
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

/// What [`load_any`] stored.
#[derive(Debug, Clone)]
pub enum Loaded {
    /// A MemHawk snapshot stream, into the memory tables.
    Memory(LoadSummary),
    /// An additive profile (pprof, ...), into the continuous-profile tables:
    /// one summary per profile of the file.
    Continuous(Vec<continuous::ContinuousSummary>),
}

/// Loads one file of any format (`opts.format`, else detected from its
/// content): snapshot streams through [`load_file`], additive profiles
/// (pprof) through [`continuous::load_reader`] with `copts` (service,
/// labels, time), which take the database, format, reader limits,
/// symbolizer and main binary of `opts`.
///
/// # Errors
/// As [`load_file`] and [`continuous::load_file`]; [`Error::Usage`] when a
/// service or label is given for a MemHawk file (its process names it).
pub fn load_any(
    backend: &dyn Backend,
    path: &Path,
    opts: &LoadOptions,
    copts: &continuous::ContinuousOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<Loaded> {
    if opts.watch {
        read::wait_for(path, opts)?;
    }
    let abs = std::fs::canonicalize(path).map_err(crate::error::file_err(path))?;
    let file = std::fs::File::open(&abs).map_err(crate::error::file_err(&abs))?;
    // Unrecognized content goes to MemHawk's reader, whose error says what
    // it found (`--service` is not what is wrong with an empty file).
    let (format, recognized) = match opts.format {
        Some(f) => (f, true),
        None => match crate::formats::recognize_open(&file, &abs)? {
            Some(f) => (f, true),
            None => (Format::Binpb, false),
        },
    };
    let copts = continuous::ContinuousOptions {
        database: opts.database.clone(),
        decode: opts.read.pprof,
        format: Some(format),
        symbolizer: opts.symbolizer.clone(),
        main_binary: opts.main_binary.clone(),
        ..copts.clone()
    };
    if format == Format::Binpb {
        if recognized && (copts.service.is_some() || !copts.labels.is_empty()) {
            // The CLI says `loading FILE: ` before it.
            return Err(Error::Usage(
                "--service and --label apply to continuous profiles (pprof); a MemHawk file is \
                 labelled by its process"
                    .into(),
            ));
        }
        return Ok(Loaded::Memory(follow_file(backend, path, opts, progress)?));
    }
    let mut reader = format.spec().open(file, &abs, &opts.read)?;
    Ok(Loaded::Continuous(continuous::load_reader(
        backend,
        &mut *reader,
        &abs.display().to_string(),
        &copts,
    )?))
}
