//! Reading one file: the loop that drives the pipeline. It opens the
//! file's format (detected, or `--format`), reads events, sets the
//! symbolizer's mappings, resumes at the stored progress (replaying what
//! an earlier load stored, to rebuild the values), applies each batch of
//! samples to the source's row logic and cuts batches at stream-determined
//! boundaries; with `watch` it follows the path like `tail -F`.

use super::batch::{flush, Batch, Pending, Spare};
use super::intern::Interner;
use super::memhawk::Deltas;
use super::symbols::symbolize_shared;
use super::writer::{delete_process, MergePause};
use super::{LoadOptions, LoadSummary, Progress};
use crate::error::{Error, Result};
use crate::formats::{self, ProfileReader};
use crate::model::{Event, Frame, ValueSemantics};
use crate::storage::rows::{stable_hash, ProcessRow};
use crate::storage::Backend;
use crate::symbolize::{ModuleMap, Symbolizer};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::{Duration, Instant};

/// How reading one file ended.
pub(super) enum Followed {
    /// The end of the file (or, with `watch`, of the idle time).
    Done(LoadSummary),
    /// With `watch`: another file took the path (rotation); this one is
    /// read to its end.
    Replaced(LoadSummary),
}

/// The state of reading one file.
pub(super) struct State<'a> {
    pub(super) process_id: u64,
    /// The process's load generation (see [`super::batch::batch_token`]).
    pub(super) generation: u64,
    /// The process row, until the first batch this load stores carries it.
    pub(super) process_row: Option<ProcessRow>,
    /// The end of a batch a crashed load recorded as intended (in
    /// `load_intents`) past the stored progress: the batch being built is
    /// cut exactly there, whatever the batch sizes and the end of the data.
    pub(super) cut_at: Option<u64>,
    /// The source's values per trace and stack.
    pub(super) deltas: Deltas,
    /// The frames and stacks seen, and their rows not yet in a batch.
    pub(super) interner: Interner,
    /// The sample and total rows of the next batch.
    pub(super) pending: Pending<'a>,
}

fn ms(ns: u64) -> i64 {
    (ns / 1_000_000) as i64
}

/// With `--watch`, a file not created yet is waited for, as `tail -F`
/// does (a profiler started after the loader), up to `--idle-exit` when
/// given.
pub(super) fn wait_for(path: &Path, opts: &LoadOptions) -> Result<()> {
    let start = Instant::now();
    loop {
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if let Some(d) = opts.idle_exit.filter(|d| start.elapsed() >= *d) {
                    return Err(crate::error::file_err(path)(std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        format!("not created within {} s (--idle-exit)", d.as_secs_f64()),
                    )));
                }
                std::thread::sleep(opts.poll_interval);
            }
            _ => return Ok(()),
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn read_file(
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
    // Standard input's copy is `<stdin>`, as a continuous profile's source
    // is (its temporary path was stored and printed).
    let source = super::stdin::shown_name(&abs);
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

    let format = match opts.format {
        Some(f) => f,
        None => formats::detect_open(&file, &abs)?,
    };
    let mut reader = format.spec().open(file, &abs, &opts.read)?;
    match reader.semantics() {
        ValueSemantics::AsOfSnapshot => {}
        // The row logic of additive profiles (pprof, perf, ...) comes with
        // their readers.
        ValueSemantics::Additive => {
            return Err(Error::Usage(format!(
                "{source}: {format} profiles cannot be stored yet"
            )))
        }
    }
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
        deltas: Deltas::default(),
        interner: Interner::default(),
        pending: Pending::new(spare),
    };
    // Scratch buffers of a new stack's frames and rows.
    let mut frames: Vec<Frame> = Vec::new();
    let mut rows = Vec::new();
    // Whether the source (MemHawk's header record) was read.
    let mut started = false;
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
        let next = reader.next_event();
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
            summary.torn_tail = reader.torn();
            if !started && !opts.watch {
                // Not even the header record is complete: a live file that
                // has just been created, or not a MemHawk file at all.
                return Err(Error::NoHeader {
                    path: abs,
                    bytes: total_bytes,
                    idle: None,
                });
            }
            if opts.watch {
                if draining {
                    finish(&mut summary, &sym, &st, &*reader);
                    return Ok(Followed::Replaced(summary));
                }
                if let Some(d) = opts.idle_exit.filter(|d| last_growth.elapsed() >= *d) {
                    if !started {
                        // Followed to the end without one record: no
                        // process to report (it said "process 0", exit 0).
                        return Err(Error::NoHeader {
                            path: abs,
                            bytes: seen_len,
                            idle: Some(d),
                        });
                    }
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
            Event::Source(info) => {
                started = true;
                let parts: Vec<&[u8]> = info.identity.iter().map(Vec::as_slice).collect();
                st.process_id = stable_hash(&parts);
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
                st.pending.start = resume;
                if main_binary.is_none() && !info.main_path.is_empty() {
                    main_binary = Some(PathBuf::from(&info.main_path));
                }
                full_path.clone_from(&info.main_path);
                // Written with the first batch this load stores, so the
                // process and its source are the file actually loaded (not
                // a copy that failed before storing anything).
                st.process_row = Some(ProcessRow {
                    process_id: pid,
                    pid: info.pid,
                    name: info.name.clone(),
                    full_path: info.main_path.clone(),
                    start_time: info.start_ns as i64,
                    source: source.clone(),
                    generation: st.generation,
                });
            }
            Event::Batch(snap) => {
                summary.snapshots += 1;
                if let Some(mappings) = &snap.mappings {
                    let map = ModuleMap::new(mappings, main_binary.as_deref())
                        .main_named(&full_path, main_binary.as_deref());
                    sym.set_modules(if opts.main_binary.is_some() {
                        map.main_on_host()
                    } else {
                        map
                    });
                }
                let ts = ms(snap.time_ns);
                last_ts = ts;
                summary.span_ms = Some(match summary.span_ms {
                    Some((a, _)) => (a, ts),
                    None => (ts, ts),
                });
                let interner = &mut st.interner;
                st.deltas
                    .apply(st.process_id, &snap, ts, replay, &mut st.pending, |key| {
                        reader.stack(key, &mut frames);
                        symbolize_shared(&mut sym, frames.iter(), &mut interner.table, &mut rows);
                        interner.intern(&mut rows)
                    });
                if !replay {
                    summary.snapshots_stored += 1;
                    st.pending.snapshots += 1;
                    // The stream's first batch is an eighth of the others,
                    // so the writer (the engine, the slower side) starts
                    // early. Boundaries depend only on where a batch starts
                    // in the stream, so a resumed load cuts the same
                    // batches (and tokens) as the load it resumes, except
                    // where the end of the data cut one: that end is in
                    // `cut_at`.
                    let first = st.pending.start == 0;
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
                            return Err(Error::BatchBoundary {
                                path: abs,
                                offset,
                                cut,
                            });
                        }
                        Some(_) => {}
                        None => {
                            if st.pending.snapshots >= snaps
                                || st.pending.sample_stacks.len() >= rows
                            {
                                flush(writer, &source, &mut st, offset, &mut summary, ts)?;
                            }
                        }
                    }
                } else {
                    // Replayed records were stored by an earlier load,
                    // dictionaries included.
                    st.pending.start = offset;
                    st.interner.drop_pending();
                }
                // MemHawk's total: live bytes first.
                if let Some(&size) = snap.total.as_ref().and_then(|t| t.first()) {
                    if summary.peak.is_none_or(|(p, _)| size > p) {
                        summary.peak = Some((size, ts));
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
    finish(&mut summary, &sym, &st, &*reader);
    Ok(Followed::Done(summary))
}

/// Fills in the summary's totals at the end of a file.
fn finish(summary: &mut LoadSummary, sym: &Symbolizer, st: &State, reader: &dyn ProfileReader) {
    let stats = sym.stats();
    summary.symbolized_percent = stats.symbolized_percent();
    summary.stacks = st.deltas.stacks.len();
    summary.frames = st.interner.frames();
    summary.bytes = reader.committed_offset();
    summary.missing_modules = sym
        .missing_modules()
        .iter()
        .map(|e| e.to_string())
        .collect();
}
