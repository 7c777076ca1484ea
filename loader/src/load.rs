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
//! a deduplication token made of the process and the byte range, so a batch
//! written twice is stored once.

use crate::backend::{insert, Backend};
use crate::binpb::{self, BinpbReader, Record, Snapshot};
use crate::error::{Error, Result};
use crate::rows::{
    encode_all, stable_hash, FrameRow, ProcessRow, ProgressRow, RowBinary, SampleRow, StackRow,
    TotalRow,
};
use crate::symbolize::{ModuleMap, Symbolizer, SymbolizerOptions};
use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::path::{Path, PathBuf};
use std::sync::mpsc::SyncSender;
use std::time::{Duration, Instant};

/// Label of the stack that holds the profiler's own allocations.
pub const PROFILER_LABEL: &str = "[memhawk]";

/// Options of a load.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Database. Default: `flamehouse`.
    pub database: String,
    /// Symbolization (sysroot, granularity, debug directories).
    pub symbolizer: SymbolizerOptions,
    /// Path of the main program's binary; default: the profile's
    /// `processFullPath` (under the sysroot, if one is set).
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
    /// With `watch`: stop after the file has not grown for this long.
    /// Default: never.
    pub idle_exit: Option<Duration>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            database: crate::schema::DEFAULT_DATABASE.to_string(),
            symbolizer: SymbolizerOptions::default(),
            main_binary: None,
            batch_snapshots: 300,
            batch_rows: 1_000_000,
            watch: false,
            poll_interval: Duration::from_secs(1),
            idle_exit: None,
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

struct State {
    process_id: u64,
    /// trace id -> stack index.
    /// trace id -> (stack index, latest values: size, active, overhead,
    /// total_count, total_bytes); one lookup per changed trace.
    traces: HashMap<u32, (usize, [i64; 5])>,
    /// Per stack: its change within the snapshot being applied, and whether
    /// it is listed in `touched` (reused across snapshots: no per-snapshot
    /// map).
    stack_delta: Vec<[i64; 5]>,
    stack_touched: Vec<bool>,
    touched: Vec<usize>,
    stack_ids: Vec<u64>,
    stack_values: Vec<[i64; 5]>,
    stack_index: HashMap<u64, usize>,
    frames_seen: HashSet<u64>,
    stored_stacks: HashSet<u64>,
    pending_frames: Vec<FrameRow>,
    pending_stacks: Vec<StackRow>,
    pending_samples: Vec<SampleRow>,
    pending_totals: Vec<TotalRow>,
    pending_snapshots: usize,
    batch_start: u64,
}

fn ms(ns: u64) -> i64 {
    (ns / 1_000_000) as i64
}

/// One batch for the writer thread, in insert order.
struct Batch {
    token: String,
    frames: Vec<FrameRow>,
    stacks: Vec<StackRow>,
    samples: Vec<SampleRow>,
    totals: Vec<TotalRow>,
    progress: ProgressRow,
}

fn write_batch(backend: &dyn Backend, db: &str, b: Batch) -> Result<()> {
    let tok = &b.token;
    // Dictionaries first, progress last: a crash in between re-sends the
    // batch, which the tokens deduplicate.
    insert(backend, db, &b.frames, &format!("{tok}:frames"))?;
    insert(backend, db, &b.stacks, &format!("{tok}:stacks"))?;
    // Encode, then free the rows before inserting: one copy in memory.
    let samples = encode_all(&b.samples);
    let n = b.samples.len();
    drop(b.samples);
    if n > 0 {
        backend.insert_rowbinary(
            db,
            SampleRow::TABLE,
            SampleRow::STRUCTURE,
            &samples,
            &format!("{tok}:samples"),
        )?;
    }
    drop(samples);
    insert(backend, db, &b.totals, &format!("{tok}:totals"))?;
    insert(
        backend,
        db,
        std::slice::from_ref(&b.progress),
        &format!("{tok}:progress"),
    )
}

/// Loads one file into `backend` (the schema must exist: see
/// [`crate::schema::migrate`]). Decoding and symbolizing run on the calling
/// thread while a writer thread inserts the previous batch; at most one batch
/// waits between them, so memory stays bounded.
pub fn load_file(
    backend: &dyn Backend,
    path: &Path,
    opts: &LoadOptions,
    progress: &mut dyn FnMut(Progress),
) -> Result<LoadSummary> {
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(1);
        let db = opts.database.clone();
        let writer = scope.spawn(move || -> Result<()> {
            for b in rx {
                write_batch(backend, &db, b)?;
            }
            Ok(())
        });
        let read = read_file(backend, path, opts, progress, &tx);
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

fn read_file(
    backend: &dyn Backend,
    path: &Path,
    opts: &LoadOptions,
    progress: &mut dyn FnMut(Progress),
    writer: &SyncSender<Batch>,
) -> Result<LoadSummary> {
    let abs = std::fs::canonicalize(path).map_err(crate::error::file_err(path))?;
    let source = abs.display().to_string();
    let db = &opts.database;
    let total_bytes = std::fs::metadata(&abs).map(|m| m.len()).unwrap_or(0);
    // Known once the header is read: progress is keyed by the process (the
    // byte stream), not the path, so a moved or copied file resumes too.
    let mut resume: u64 = 0;

    let mut reader = BinpbReader::open(&abs)?;
    let mut sym = Symbolizer::new(opts.symbolizer.clone());
    let mut summary = LoadSummary {
        source: source.clone(),
        ..Default::default()
    };
    let mut st = State {
        process_id: 0,
        traces: HashMap::default(),
        stack_delta: Vec::new(),
        stack_touched: Vec::new(),
        touched: Vec::new(),
        stack_ids: Vec::new(),
        stack_values: Vec::new(),
        stack_index: HashMap::default(),
        frames_seen: HashSet::default(),
        stored_stacks: HashSet::default(),
        pending_frames: Vec::new(),
        pending_stacks: Vec::new(),
        pending_samples: Vec::new(),
        pending_totals: Vec::new(),
        pending_snapshots: 0,
        batch_start: 0,
    };
    let mut main_binary: Option<PathBuf> = opts.main_binary.clone();
    let mut last_growth = Instant::now();
    let mut last_ts = 0i64;
    let mut last_progress = Instant::now();
    loop {
        let next = reader.next_record();
        if !matches!(next, Ok(Some(_))) {
            // End of the data, or corruption: store every complete record
            // read so far first.
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
                if opts.idle_exit.is_some_and(|d| last_growth.elapsed() >= d) {
                    break;
                }
                std::thread::sleep(opts.poll_interval);
                let before = reader.committed_offset();
                reader.rewind_to_committed()?;
                let len = std::fs::metadata(&abs).map(|m| m.len()).unwrap_or(0);
                if len > before {
                    last_growth = Instant::now();
                }
                continue;
            }
            break;
        };
        let offset = reader.committed_offset();
        let replay = offset <= resume;
        match rec {
            Record::Header(info) => {
                st.process_id = stable_hash(&[
                    info.process_short_name.as_bytes(),
                    &info.pid.to_le_bytes(),
                    &info.start_timestamp.to_le_bytes(),
                ]);
                summary.process_id = st.process_id;
                resume = backend
                    .query_tsv(&format!(
                        "SELECT max(offset) FROM {db}.load_progress WHERE process_id = {}",
                        st.process_id
                    ))?
                    .trim()
                    .parse()
                    .unwrap_or(0);
                st.batch_start = resume;
                if main_binary.is_none() && !info.process_full_path.is_empty() {
                    let p = PathBuf::from(&info.process_full_path);
                    main_binary = Some(match &opts.symbolizer.sysroot {
                        Some(root) => root.join(p.strip_prefix("/").unwrap_or(&p)),
                        None => p,
                    });
                }
                if !replay {
                    let row = ProcessRow {
                        process_id: st.process_id,
                        pid: info.pid,
                        name: info.process_short_name.clone(),
                        full_path: info.process_full_path.clone(),
                        start_time: info.start_timestamp as i64,
                        source: source.clone(),
                    };
                    insert(backend, db, &[row], &format!("{}@process", st.process_id))?;
                }
            }
            Record::Snapshot(snap) => {
                summary.snapshots += 1;
                if !snap.loaded_so.is_empty() {
                    sym.set_modules(ModuleMap::new(&snap.loaded_so, main_binary.as_deref()));
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
                    if st.pending_snapshots >= opts.batch_snapshots
                        || st.pending_samples.len() >= opts.batch_rows
                    {
                        flush(writer, &source, &mut st, offset, &mut summary, ts)?;
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
    let stats = sym.stats();
    summary.symbolized_percent = stats.symbolized_percent();
    summary.stacks = st.stack_ids.len();
    summary.frames = st.frames_seen.len();
    summary.bytes = reader.committed_offset();
    summary.missing_modules = sym
        .missing_modules()
        .iter()
        .map(|e| e.to_string())
        .collect();
    Ok(summary)
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
        let (stack, old) = match st.traces.get_mut(&t.trace_id) {
            Some((s, v)) => (*s, std::mem::replace(v, new)),
            None => {
                let s = stack_for_trace(st, reader, sym, t.trace_id);
                st.traces.insert(t.trace_id, (s, new));
                (s, [0; 5])
            }
        };
        if !st.stack_touched[stack] {
            st.stack_touched[stack] = true;
            st.touched.push(stack);
        }
        let d = &mut st.stack_delta[stack];
        let v = &mut st.stack_values[stack];
        for i in 0..5 {
            let delta = new[i].wrapping_sub(old[i]);
            d[i] = d[i].wrapping_add(delta);
            v[i] = v[i].wrapping_add(delta);
        }
    }
    let mut touched = std::mem::take(&mut st.touched);
    touched.sort_unstable();
    for &s in &touched {
        let d = std::mem::take(&mut st.stack_delta[s]);
        st.stack_touched[s] = false;
        if replay {
            continue;
        }
        let v = &st.stack_values[s];
        st.pending_samples.push(SampleRow {
            process_id: st.process_id,
            ts,
            stack_id: st.stack_ids[s],
            size: v[0],
            active: v[1],
            overhead: v[2],
            total_count: v[3] as u64,
            total_bytes: v[4] as u64,
            size_delta: d[0],
            active_delta: d[1],
            count_delta: d[3],
            bytes_delta: d[4],
        });
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
            for v in &st.stack_values {
                for (acc, x) in s.iter_mut().zip(v) {
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
        for addr in addrs.iter().rev() {
            let module = sym
                .modules()
                .lookup(*addr)
                .and_then(|(i, _)| sym.modules().module(i).map(|m| m.basename()))
                .unwrap_or_default();
            for f in sym.symbolize(*addr) {
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
        return i;
    }
    for f in frame_rows.iter() {
        if st.frames_seen.insert(f.frame_id) {
            st.pending_frames.push(f.clone());
        }
    }
    let i = st.stack_ids.len();
    st.stack_ids.push(stack_id);
    st.stack_values.push([0; 5]);
    st.stack_delta.push([0; 5]);
    st.stack_touched.push(false);
    st.stack_index.insert(stack_id, i);
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
    st: &mut State,
    end: u64,
    summary: &mut LoadSummary,
    last_ts: i64,
) -> Result<()> {
    if st.pending_samples.is_empty()
        && st.pending_totals.is_empty()
        && st.pending_stacks.is_empty()
        && st.pending_frames.is_empty()
    {
        return Ok(());
    }
    summary.sample_rows += st.pending_samples.len() as u64;
    let batch = Batch {
        // The stream's identity and byte range: the same batch from any copy
        // of the file gets the same token.
        token: format!("{}@{}-{end}", st.process_id, st.batch_start),
        frames: std::mem::take(&mut st.pending_frames),
        stacks: std::mem::take(&mut st.pending_stacks),
        samples: std::mem::take(&mut st.pending_samples),
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
