//! What the line-oriented text formats (`perf script`, bpftrace maps,
//! folded stacks) share: their error type (file and line), the reader that
//! hands a parsed file out as model events, the table of distinct stacks,
//! and value types named at run time.
//!
//! A text profile is parsed whole when it is opened: a bad line fails the
//! open, before any event, so a profile is loaded whole or not at all.
//! Identical (stack, labels) pairs of one batch are summed into one sample.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use crate::formats::{Format, ProfileReader};
use crate::model::{Batch, Event, Frame, Label, Mapping, Source, ValueSemantics, ValueType};
use rustc_hash::FxHashMap;

/// An error of a text format reader: one line naming the file and, for
/// bad content, the 1-based line.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file cannot be read.
    #[error("{}: cannot read: {cause}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        cause: std::io::Error,
    },
    /// A line is not what the format allows there.
    #[error("{}:{line}: not {format}: {message}", path.display())]
    Line {
        /// The format's name.
        format: &'static str,
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u64,
        /// What is wrong.
        message: String,
    },
    /// The file is larger than [`TextOptions::max_bytes`].
    #[error(
        "{}: larger than {} MiB, the most a text profile is read whole (--max-text-mib raises it)",
        path.display(),
        max_bytes >> 20
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The cap.
        max_bytes: u64,
    },
    /// The file holds more distinct stacks, distinct frames or frames of
    /// its distinct stacks than [`TextOptions`] allows (parsing stopped
    /// keeping them there, so the count past the limit is not known).
    #[error(
        "{}{}: more than {max} {what} (the limit: each is held in memory on its way to the \
         engine; {option} raises it)",
        path.display(),
        line.map(|n| format!(":{n}")).unwrap_or_default()
    )]
    TooMany {
        /// The file.
        path: PathBuf,
        /// The 1-based line whose stack went past the limit, when the
        /// reader adds stacks line by line (folded stacks).
        line: Option<u64>,
        /// What: `distinct stacks`, ...
        what: &'static str,
        /// The limit.
        max: u64,
        /// The `load` option that sets it.
        option: &'static str,
    },
    /// The file as a whole is not a profile of the format (no sample).
    #[error("{}: not {format}: {message}", path.display())]
    File {
        /// The format's name.
        format: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

impl Error {
    /// The file the error is about.
    #[must_use]
    pub fn path(&self) -> &Path {
        match self {
            Error::Read { path, .. }
            | Error::Line { path, .. }
            | Error::TooLarge { path, .. }
            | Error::TooMany { path, .. }
            | Error::File { path, .. } => path,
        }
    }

    /// The 1-based line at fault, if any.
    #[must_use]
    pub fn line(&self) -> Option<u64> {
        match self {
            Error::Line { line, .. } => Some(*line),
            Error::TooMany { line, .. } => *line,
            _ => None,
        }
    }
}

/// Largest text profile read by default (1 GiB): a text profile is held
/// in memory whole, so this bounds the memory a wrong file takes;
/// [`TextOptions::max_bytes`] (`load --max-text-mib`) raises it for a
/// long recording's `perf script`.
pub const MAX_TEXT_BYTES: u64 = 1 << 30;

/// Options of every text format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextOptions {
    /// Largest file read, bytes; a larger one is refused, never cut.
    /// Default: [`MAX_TEXT_BYTES`].
    pub max_bytes: u64,
    /// Most distinct stacks (with their sample labels) of one file; a
    /// file of more is refused, the parse keeping none past the limit
    /// (each costs ~1 KB on its way to the engine, a frame of its own
    /// included). Default: [`MAX_TEXT_STACKS`].
    pub max_stacks: u64,
    /// Most distinct frames of one file (each costs ~400 bytes: its
    /// names, its dictionary row). Default: [`MAX_TEXT_FRAMES`].
    pub max_frames: u64,
    /// Most frames of its distinct stacks, all counted (each ~16 bytes:
    /// a stack holds its frames by reference). Default:
    /// [`crate::formats::wire::DEFAULT_MAX_STACK_FRAMES`], as pprof's.
    pub max_stack_frames: u64,
    /// Most frames of one stack. Default:
    /// [`crate::formats::wire::DEFAULT_MAX_STACK_DEPTH`], as pprof's.
    pub max_stack_depth: u64,
}

impl TextOptions {
    /// No limit but the file's size (a parse in a test or bench).
    #[must_use]
    pub fn unlimited() -> Self {
        Self {
            max_stacks: u64::MAX,
            max_frames: u64::MAX,
            max_stack_frames: u64::MAX,
            max_stack_depth: u64::MAX,
            ..Self::default()
        }
    }
}

/// Default of [`TextOptions::max_frames`]: 2 Mi distinct frames, ~1 GB
/// at worst; a whole machine's `perf record -a` at line granularity holds
/// a few hundred thousand.
pub const MAX_TEXT_FRAMES: u64 = 2 << 20;

/// Default of [`TextOptions::max_stacks`]: 1 Mi distinct stacks, far above
/// a profile's (a minute of `perf record -g` on a busy service holds tens
/// of thousands).
pub const MAX_TEXT_STACKS: u64 = 1 << 20;

impl Default for TextOptions {
    fn default() -> Self {
        Self {
            max_bytes: MAX_TEXT_BYTES,
            max_stacks: MAX_TEXT_STACKS,
            max_frames: MAX_TEXT_FRAMES,
            max_stack_frames: crate::formats::wire::DEFAULT_MAX_STACK_FRAMES,
            max_stack_depth: crate::formats::wire::DEFAULT_MAX_STACK_DEPTH,
        }
    }
}

/// Refuses `text` unless it ends its last line: every writer of the text
/// formats ends its lines, so a file that stops inside one was cut short,
/// maybe inside its last count (`456` stored as `45`) or a stack. A last
/// line of blanks alone (an editor's indent left at the end) holds nothing
/// to cut, so it passes.
///
/// # Errors
/// [`Error::Line`] naming the last line.
pub fn ends_whole(text: &str, path: &Path, format: &'static str) -> Result<(), Error> {
    let last = &text[text.rfind('\n').map_or(0, |i| i + 1)..];
    if last.trim().is_empty() {
        return Ok(());
    }
    Err(Error::Line {
        format,
        path: path.to_owned(),
        line: text.lines().count().max(1) as u64,
        message: "the file ends inside a line (cut short?): a whole file ends its last line \
                  with a line end (add one if it is whole)"
            .into(),
    })
}

/// The whole file as text, and its modification time (ns since the epoch,
/// 0 when unknown): the default time of formats that carry none. Invalid
/// UTF-8 sequences become U+FFFD (perf script, bpftrace and folded stacks
/// alike: all print names the kernel holds as bytes).
///
/// # Errors
/// When the file cannot be read, is too large or is binary (naming the
/// first bad line).
pub fn read_text(
    mut file: File,
    path: &Path,
    format: &'static str,
    options: &TextOptions,
) -> Result<(String, u64), Error> {
    let max = options.max_bytes;
    let read_err = |cause| Error::Read {
        path: path.to_owned(),
        cause,
    };
    let meta = file.metadata().map_err(read_err)?;
    if meta.is_dir() {
        return Err(Error::File {
            format,
            path: path.to_owned(),
            message: "a directory".into(),
        });
    }
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    // One allocation of the file's size (read_to_end through `take` has
    // no size hint and would grow by doubling and copying).
    let too_large = || Error::TooLarge {
        path: path.to_owned(),
        max_bytes: max,
    };
    if meta.len() > max {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(meta.len().min(max) as usize + 1);
    (&mut file)
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(read_err)?;
    if bytes.len() as u64 > max {
        return Err(too_large());
    }
    if let Some(message) = super::perf::perf_data_hint(&bytes, path) {
        return Err(Error::File {
            format,
            path: path.to_owned(),
            message,
        });
    }
    match String::from_utf8(bytes) {
        // A byte order mark (Windows editors write one) is no part of the
        // first frame or label.
        Ok(mut s) => {
            if s.starts_with('\u{feff}') {
                s.drain(..'\u{feff}'.len_utf8());
            }
            Ok((s, mtime))
        }
        Err(e) => {
            let bytes = e.into_bytes();
            // Control bytes besides text's whitespace: binary data (a
            // recording, a compressed file), not text with a stray byte.
            if let Some(at) = bytes.iter().position(|&b| is_binary(b)) {
                let line = 1 + bytes[..at].iter().filter(|&&b| b == b'\n').count() as u64;
                return Err(Error::Line {
                    format,
                    path: path.to_owned(),
                    line,
                    message: format!("binary data, not text (byte {:#04x})", bytes[at]),
                });
            }
            // Names are bytes to the kernel (a thread named in Latin-1),
            // and perf and bpftrace print them as they are: each invalid
            // sequence becomes U+FFFD (one copy, only for such a file).
            let mut s = String::from_utf8_lossy(&bytes).into_owned();
            if s.starts_with('\u{feff}') {
                s.drain(..'\u{feff}'.len_utf8());
            }
            Ok((s, mtime))
        }
    }
}

/// The value types `(kind, sample, unit)` as the model's `'static` slice.
/// Names come from the file or the options at run time; each distinct list
/// is leaked once and reused, so memory stays bounded by the distinct
/// names seen (a handful per process).
#[must_use]
pub fn value_types(types: &[(String, String, String)]) -> &'static [ValueType] {
    type Cache = HashMap<Vec<(String, String, String)>, &'static [ValueType]>;
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(v) = cache.get(types) {
        return v;
    }
    let leak = |s: &str| -> &'static str { Box::leak(s.to_owned().into_boxed_str()) };
    let v: &'static [ValueType] = Box::leak(
        types
            .iter()
            .map(|(k, s, u)| ValueType {
                kind: std::borrow::Cow::Borrowed(leak(k)),
                sample: std::borrow::Cow::Borrowed(leak(s)),
                unit: std::borrow::Cow::Borrowed(leak(u)),
            })
            .collect::<Vec<_>>()
            .into_boxed_slice(),
    );
    cache.insert(types.to_vec(), v);
    v
}

/// A parsed text profile being built: the distinct frames, the distinct
/// (stack, labels) pairs, and the batches of samples over them.
#[derive(Debug)]
pub struct Builder {
    /// The distinct frames, each held once (its id is its index).
    // Fx rather than SipHash: the keys are the file's own (no flooding
    // concern beyond the file's size), and these are the per-sample maps.
    frames: indexmap::IndexSet<Frame, rustc_hash::FxBuildHasher>,
    /// Hash of (frame ids, labels) -> keys with that hash.
    keys: FxHashMap<u64, Vec<u64>>,
    stacks: Vec<(Vec<u32>, Vec<Label>)>,
    batches: Vec<Batch>,
    /// Per open batch: key -> row in the batch.
    rows: FxHashMap<u64, usize>,
    /// Per open batch: a sample's labels -> index in its `label_sets`.
    label_ix: FxHashMap<Vec<Label>, u32>,
    n_types: usize,
    /// Whether one stack's values summed past `i64::MAX` (or below its
    /// minimum): [`Builder::check`] refuses the file then.
    overflowed: bool,
    limits: TextOptions,
    /// The frames of the distinct stacks, all counted.
    stack_frames: u64,
    /// The first limit passed (what, limit, option): from then on nothing
    /// more is kept, and [`Builder::check`] refuses the file.
    exceeded: Option<(&'static str, u64, &'static str)>,
    /// The input line being added ([`Builder::at_line`]), and the one that
    /// went past a limit first.
    line: Option<u64>,
    exceeded_at: Option<u64>,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            frames: indexmap::IndexSet::default(),
            keys: FxHashMap::default(),
            stacks: Vec::new(),
            batches: Vec::new(),
            rows: FxHashMap::default(),
            label_ix: FxHashMap::default(),
            n_types: 0,
            overflowed: false,
            limits: TextOptions::unlimited(),
            stack_frames: 0,
            exceeded: None,
            line: None,
            exceeded_at: None,
        }
    }
}

impl Builder {
    /// A builder of samples with `n_types` values each, no limit but the
    /// file's size.
    #[must_use]
    pub fn new(n_types: usize) -> Self {
        Self::within(n_types, &TextOptions::unlimited())
    }

    /// A builder that keeps no more distinct stacks and frames than
    /// `limits` allow: past one, [`Builder::check`] refuses the file, and
    /// memory stays bounded while the parse runs to its end.
    #[must_use]
    pub fn within(n_types: usize, limits: &TextOptions) -> Self {
        Builder {
            n_types,
            limits: *limits,
            ..Default::default()
        }
    }

    /// Sets the number of values of a sample, once the types are known
    /// (frames may be interned before); before the first batch.
    pub fn set_types(&mut self, n_types: usize) {
        debug_assert!(self.batches.is_empty());
        self.n_types = n_types;
    }

    /// The id of a frame, the same for equal frames.
    pub fn frame(&mut self, f: Frame) -> u32 {
        if let Some(id) = self.frames.get_index_of(&f) {
            return id as u32;
        }
        if self.exceeded.is_some() || self.frames.len() as u64 >= self.limits.max_frames {
            self.exceed("distinct frames", self.limits.max_frames, "--max-frames");
            return 0;
        }
        let id = u32::try_from(self.frames.len()).expect("fewer than 2^32 frames");
        self.frames.insert(f);
        id
    }

    /// Starts a batch at `time_ns` covering `duration_ns`.
    pub fn batch(&mut self, time_ns: u64, duration_ns: u64) {
        self.rows.clear();
        self.label_ix.clear();
        self.batches.push(Batch {
            time_ns,
            duration_ns,
            mappings: None,
            stacks: Vec::new(),
            values: Vec::new(),
            total: None,
            ..Default::default()
        });
    }

    /// Sets the mappings of the current batch.
    pub fn mappings(&mut self, mappings: Vec<Mapping>) {
        if let Some(b) = self.batches.last_mut() {
            b.mappings = Some(mappings);
        }
    }

    /// The 1-based input line whose stack is added next: a limit it goes
    /// past is said with it.
    pub fn at_line(&mut self, line: u64) {
        self.line = Some(line);
    }

    /// The first limit gone past, and where.
    fn exceed(&mut self, what: &'static str, max: u64, option: &'static str) {
        if self.exceeded.is_none() {
            self.exceeded = Some((what, max, option));
            self.exceeded_at = self.line;
        }
    }

    fn key(&mut self, frames: &[u32], labels: &[Label]) -> Option<u64> {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        frames.hash(&mut h);
        labels.hash(&mut h);
        let bucket = self.keys.entry(h.finish()).or_default();
        for &k in bucket.iter() {
            let (f, l) = &self.stacks[k as usize];
            if f == frames && l == labels {
                return Some(k);
            }
        }
        let k = self.stacks.len() as u64;
        let depth = self.stack_frames.saturating_add(frames.len() as u64);
        if frames.len() as u64 > self.limits.max_stack_depth {
            self.exceed(
                "frames in one stack",
                self.limits.max_stack_depth,
                "--max-stack-depth",
            );
            return None;
        }
        if k >= self.limits.max_stacks {
            self.exceed("distinct stacks", self.limits.max_stacks, "--max-stacks");
            return None;
        }
        if depth > self.limits.max_stack_frames {
            self.exceed(
                "frames in its distinct stacks",
                self.limits.max_stack_frames,
                "--max-stack-frames",
            );
            return None;
        }
        self.stack_frames = depth;
        bucket.push(k);
        self.stacks.push((frames.to_vec(), labels.to_vec()));
        Some(k)
    }

    /// Adds `values` (value type, value) to the sample of the stack
    /// `frames` (frame ids, leaf first) with `labels` (sorted) in the
    /// current batch (a first batch at 0 if none).
    pub fn add(&mut self, frames: &[u32], labels: &[Label], values: &[(usize, i64)]) {
        if self.batches.is_empty() {
            self.batch(0, 0);
        }
        if self.exceeded.is_some() {
            return;
        }
        let Some(key) = self.key(frames, labels) else {
            return;
        };
        let n = self.n_types;
        let batch = self.batches.last_mut().expect("a batch");
        let label_ix = &mut self.label_ix;
        let row = *self.rows.entry(key).or_insert_with(|| {
            batch.stacks.push(key);
            batch.values.extend(std::iter::repeat_n(0, n));
            // The sample's own labels (perf's comm, bpftrace key parts),
            // as the model carries them to the row builder.
            let set = *label_ix.entry(labels.to_vec()).or_insert_with(|| {
                batch.label_sets.push(crate::model::SampleLabels {
                    labels: labels.to_vec(),
                    num_labels: Vec::new(),
                });
                (batch.label_sets.len() - 1) as u32
            });
            batch.sample_labels.push(set);
            batch.stacks.len() - 1
        });
        for &(ty, value) in values {
            let v = &mut batch.values[row * n + ty];
            match v.checked_add(value) {
                Some(sum) => *v = sum,
                None => {
                    *v = v.saturating_add(value);
                    self.overflowed = true;
                }
            }
        }
    }

    /// An error naming `path` when a limit of [`Builder::within`] was
    /// passed, or when one stack's values summed past what a stored value
    /// holds (`i64`): stored, they would wrap or saturate without a word.
    ///
    /// # Errors
    /// That error.
    pub fn check(&self, format: &'static str, path: &Path) -> Result<(), Error> {
        if let Some((what, max, option)) = self.exceeded {
            return Err(Error::TooMany {
                path: path.to_owned(),
                line: self.exceeded_at,
                what,
                max,
                option,
            });
        }
        if self.overflowed {
            return Err(Error::File {
                format,
                path: path.to_owned(),
                message: format!(
                    "the counts of one stack sum past {} (the largest Int64 a value can hold)",
                    i64::MAX
                ),
            });
        }
        Ok(())
    }

    /// Number of samples over all batches.
    #[must_use]
    pub fn samples(&self) -> usize {
        self.batches.iter().map(Batch::len).sum()
    }

    /// The reader of the finished profile.
    #[must_use]
    pub fn finish(
        self,
        format: Format,
        types: &'static [ValueType],
        source: Source,
        len: u64,
    ) -> TextReader {
        let mut events = Vec::with_capacity(self.batches.len() + 1);
        events.push(Event::Source(source));
        events.extend(
            self.batches
                .into_iter()
                .filter(|b| !b.is_empty())
                .map(Event::Batch),
        );
        events.reverse();
        TextReader {
            format,
            types,
            frames: self.frames,
            stacks: self.stacks,
            events,
            len,
        }
    }
}

/// A text profile parsed whole, handed out as events.
#[derive(Debug)]
pub struct TextReader {
    format: Format,
    types: &'static [ValueType],
    frames: indexmap::IndexSet<Frame, rustc_hash::FxBuildHasher>,
    stacks: Vec<(Vec<u32>, Vec<Label>)>,
    /// Events still to give, last first.
    events: Vec<Event>,
    len: u64,
}

impl TextReader {
    /// Its distinct stacks (with their sample labels).
    #[must_use]
    pub fn stack_count(&self) -> usize {
        self.stacks.len()
    }

    /// The reader, boxed, its source carrying the legacy identity of
    /// `text` read with `options` ([`Source::legacy_identity`]) when
    /// `read.legacy_identity` asks for it (a database holding text
    /// profiles of earlier builds).
    #[must_use]
    pub fn boxed_with_legacy<O: std::fmt::Debug + Default + PartialEq>(
        mut self,
        read: &crate::formats::ReadOptions,
        format: &str,
        text: &str,
        options: &O,
    ) -> Box<dyn ProfileReader> {
        if read.legacy_identity {
            let id = with_options(legacy_identity(format, text), options);
            if let Some(s) = self.events.iter_mut().find_map(|e| match e {
                Event::Source(s) => Some(s),
                _ => None,
            }) {
                s.legacy_identity = id;
            }
        }
        Box::new(self)
    }

    /// The labels of a stack key (the sample's own labels: perf's comm,
    /// bpftrace key parts named as labels), sorted by key.
    #[must_use]
    pub fn stack_labels(&self, key: u64) -> &[Label] {
        self.stacks
            .get(key as usize)
            .map_or(&[][..], |(_, l)| l.as_slice())
    }

    /// Every event left, in order (for tests and small tools).
    pub fn events(&mut self) -> Vec<Event> {
        let mut v = std::mem::take(&mut self.events);
        v.reverse();
        v
    }
}

impl ProfileReader for TextReader {
    fn format(&self) -> Format {
        self.format
    }

    fn value_types(&self) -> &'static [ValueType] {
        self.types
    }

    fn semantics(&self) -> ValueSemantics {
        ValueSemantics::Additive
    }

    fn next_event(&mut self) -> Result<Option<Event>, super::Error> {
        Ok(self.events.pop())
    }

    fn stack(&self, key: u64, out: &mut Vec<Frame>) {
        out.clear();
        if let Some((frames, _)) = self.stacks.get(key as usize) {
            out.extend(frames.iter().map(|&f| self.frames[f as usize].clone()));
        }
    }

    fn stack_refs<'a>(&'a self, key: u64, out: &mut Vec<&'a Frame>) -> bool {
        out.clear();
        if let Some((frames, _)) = self.stacks.get(key as usize) {
            out.extend(frames.iter().map(|&f| &self.frames[f as usize]));
        }
        true
    }

    fn labels(&self, key: u64, out: &mut Vec<Label>) {
        out.clear();
        out.extend_from_slice(self.stack_labels(key));
    }

    fn committed_offset(&self) -> u64 {
        if self.events.is_empty() {
            self.len
        } else {
            0
        }
    }

    fn torn(&self) -> bool {
        false
    }

    fn rewind_to_committed(&mut self) -> Result<(), super::Error> {
        Ok(())
    }
}

/// [`identity`] of a text read with `options`. Options other than the
/// defaults join the identity: the same file read another way (other
/// windows, types, times, labels) is another profile, while the same file
/// read the same way again is the same profile (stored once).
#[must_use]
pub fn identity_with<O: std::fmt::Debug + Default + PartialEq>(
    format: &str,
    text: &str,
    options: &O,
) -> Vec<Vec<u8>> {
    with_options(identity(format, text), options)
}

fn with_options<O: std::fmt::Debug + Default + PartialEq>(
    mut id: Vec<Vec<u8>>,
    options: &O,
) -> Vec<Vec<u8>> {
    if *options != O::default() {
        id.push(format!("{options:?}").into_bytes());
    }
    id
}

/// Marks identities of [`identity`] (XXH3): no legacy identity has it, so
/// the two schemes never give one profile id.
const XXH3_TAG: &[u8] = b"xxh3";

/// A stable identity of a text profile: its format, XXH3-64 of its bytes
/// and its length, the same from any copy of the file on any machine
/// (XXH3's output is fixed by its specification; std's hasher is not
/// stable). XXH3 reads 32 bytes a step at memory speed; the FNV-1a of
/// [`legacy_identity`] took half of a perf script's parse.
#[must_use]
pub fn identity(format: &str, text: &str) -> Vec<Vec<u8>> {
    let h = twox_hash::XxHash3_64::oneshot(text.as_bytes());
    vec![
        format.as_bytes().to_vec(),
        XXH3_TAG.to_vec(),
        h.to_le_bytes().to_vec(),
        (text.len() as u64).to_le_bytes().to_vec(),
    ]
}

/// The identity builds before migration 10 gave a text profile: its
/// format, FNV-1a 64 of its bytes (one byte at a time) and its length.
/// Computed only for a database that holds profiles stored with it
/// (`cp_profiles.id_scheme = 0`), so that loading such a file again finds
/// it stored (see `ingest::continuous::adopt_legacy_ids`).
#[must_use]
pub fn legacy_identity(format: &str, text: &str) -> Vec<Vec<u8>> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100_0000_01b3);
    }
    vec![
        format.as_bytes().to_vec(),
        h.to_le_bytes().to_vec(),
        (text.len() as u64).to_le_bytes().to_vec(),
    ]
}

/// The function of a `sym+off` frame (`leaf+0x33`, `leaf+51`): the name
/// without its offset; the name itself when there is no offset.
#[must_use]
pub fn strip_offset(sym: &str) -> &str {
    if let Some((name, off)) = sym.rsplit_once('+') {
        let hex = off.strip_prefix("0x").unwrap_or(off);
        if !name.is_empty() && !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return name;
        }
    }
    sym
}

/// The basename of a module path (`/usr/lib/libc.so.6` -> `libc.so.6`).
#[must_use]
pub fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether `first` (a file's first bytes) is text: without control bytes
/// but tab and newlines, and UTF-8 but for a rare invalid sequence (at
/// most one in 16 bytes, and one in a shorter file: a name in Latin-1; a
/// character cut at the end is none), which [`read_text`] replaces.
#[must_use]
pub fn looks_like_text(first: &[u8]) -> bool {
    invalid_utf8(first) <= (first.len() / 16).max(1)
        && first
            .iter()
            .all(|&b| b >= 0x20 || b == b'\t' || b == b'\n' || b == b'\r')
}

/// The number of invalid UTF-8 sequences in `b`, a sequence cut at the end
/// not counted.
fn invalid_utf8(mut b: &[u8]) -> usize {
    let mut n = 0;
    while let Err(e) = std::str::from_utf8(b) {
        let Some(len) = e.error_len() else { break };
        n += 1;
        b = &b[e.valid_up_to() + len..];
    }
    n
}

/// A control byte that text does not hold (its whitespace, `\t` to `\r`,
/// aside).
fn is_binary(b: u8) -> bool {
    b < 0x20 && !matches!(b, b'\t'..=b'\r') || b == 0x7f
}
