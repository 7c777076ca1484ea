//! Decoder for pprof profiles (`profile.proto` of github.com/google/pprof,
//! package `perftools.profiles`): Go's `runtime/pprof`, async-profiler,
//! pprof-rs, Node and Python exporters all write it.
//!
//! This module owns reading one pprof file into a plain, fully resolved
//! [`PprofProfile`], and nothing beyond it (no symbolization, no ClickHouse
//! rows, no format detection):
//!
//! - [`proto`]: the protobuf messages, derived by hand with `prost`;
//! - [`read_file`] / [`decode`]: gzip (magic `1f 8b`), zstd (magic
//!   `28 b5 2f fd`: Datadog's libdatadog, so ddtrace's Python profiler,
//!   writes its pprof so) or raw protobuf, with a cap on the decompressed
//!   size ([`DecodeOptions::max_decompressed_bytes`]);
//!   every string table index resolved; ids turned into vector indexes;
//! - `drop_frames` / `keep_frames` applied exactly as `go tool pprof` does
//!   (`Profile.RemoveUninteresting`), unless
//!   [`DecodeOptions::apply_drop_frames`] is off.
//!
//! # The decoded shape
//!
//! A [`Sample`] holds its stack as [`Sample::locations`], indexes into
//! [`PprofProfile::locations`], **leaf first** as in the file. A [`Location`]
//! holds its source lines innermost first (`lines[0]` is the innermost inlined
//! function, the last line the real caller that the others were inlined into);
//! [`PprofProfile::frames`] expands a sample into one [`Frame`] per line, still
//! leaf first, with [`Frame::inlined`] set on every line but a location's last,
//! which is the stack `go tool pprof -traces` prints (reverse it for
//! root-first). A location with no lines (unsymbolized) gives one frame with no
//! function, keeping its [`Location::address`] and [`Location::mapping`]
//! for a symbolizer. Samples whose stack is empty are kept (their values still
//! count in totals); `go tool pprof -traces` does not print them.
//!
//! Labels follow pprof's decoding: a label with a string value is a string
//! label; otherwise it is numeric (with its `num_unit` when given), and a
//! numeric label with value 0 and no unit is dropped, as pprof drops it.
//!
//! # What the decoder leaves to its user
//!
//! Samples are kept exactly as the file has them. `go tool pprof` first runs
//! `profile.Merge` on a single profile: it drops samples whose values are all
//! zero and sums samples with the same locations and labels. Totals, flat and
//! cum do not change; a loader that stores one row per sample may skip
//! all-zero samples. Each entry of [`PprofProfile::sample_types`] is its own
//! profile type (`cpu`/`nanoseconds`, `alloc_space`/`bytes`, ...) over the
//! same stacks: `sample.values[i]` belongs to `sample_types[i]`;
//! [`PprofProfile::default_sample_type`] names the one a viewer shows first.
//! String labels are the natural series labels (Go's `pprof.Do` labels);
//! numeric labels (Go heap profiles' `bytes` = object size) are per-sample
//! values, usually not series keys.
//!
//! # Errors
//!
//! Every [`Error`] is one line naming the file; protobuf errors also name the
//! byte offset (in the decompressed data for a gzipped file) of the top-level
//! field that fails to decode.

pub mod proto;
pub mod reader;
pub mod write;

pub use reader::{Pprof, PprofReader};

#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use prost::Message;

/// Default of [`DecodeOptions::max_decompressed_bytes`]: 256 MiB, far above
/// real profiles (a busy Go service writes a few MB) and low enough that a
/// gzip bomb fails fast instead of exhausting memory.
pub const DEFAULT_MAX_DECOMPRESSED_BYTES: u64 = 256 << 20;

/// How to decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Refuse a profile whose protobuf (after gunzip, or the raw file) is
    /// larger than this many bytes. Default [`DEFAULT_MAX_DECOMPRESSED_BYTES`].
    pub max_decompressed_bytes: u64,
    /// Refuse a profile of more entries (samples, locations, functions,
    /// strings, and one level down: labels, lines, and the samples'
    /// values, one each), counted on the wire
    /// before decoding ([`crate::formats::wire`]). Default
    /// [`crate::formats::wire::DEFAULT_MAX_ENTRIES`].
    pub max_entries: u64,
    /// Refuse a profile whose samples hold more location ids in all (the
    /// frames of its stacks, before inlined lines), counted on the wire
    /// before decoding. Default
    /// [`crate::formats::wire::DEFAULT_MAX_STACK_FRAMES`].
    pub max_stack_frames: u64,
    /// Refuse a profile with a sample of more location ids than this.
    /// Default [`crate::formats::wire::DEFAULT_MAX_STACK_DEPTH`].
    pub max_stack_depth: u64,
    /// Refuse a profile whose names and labels take more bytes than this
    /// as decoded: each string counted every time a sample type,
    /// mapping, function or sample label names it (a 16 MiB name shared
    /// by 100 functions is 1.6 GB once resolved), checked before they are
    /// resolved. Default [`DEFAULT_MAX_NAMES_BYTES`].
    pub max_names_bytes: u64,
    /// Apply the profile's `drop_frames` / `keep_frames` regexps as
    /// `go tool pprof` does. Default `true`.
    pub apply_drop_frames: bool,
    /// The profile's time, ns since the epoch, instead of its `time_nanos`
    /// (`load --time`). Given, it joins the profile's identity: the same
    /// file loaded at another time is another profile. Default: `None`.
    pub time_ns: Option<u64>,
    /// The span it covers, ns, instead of its `duration_nanos`
    /// (`load --duration`); joins the identity as the time does.
    /// Default: `None`.
    pub duration_ns: Option<u64>,
}

/// Default of [`DecodeOptions::max_names_bytes`]: 256 MiB. A real
/// profile's names and labels take a few MB (a million samples with a
/// thread-name label, ~30 MB); a 66 KB file naming one 64 MiB label value
/// from 100 series took 12 GB.
pub const DEFAULT_MAX_NAMES_BYTES: u64 = 256 << 20;

impl Default for DecodeOptions {
    fn default() -> Self {
        Self {
            max_decompressed_bytes: DEFAULT_MAX_DECOMPRESSED_BYTES,
            max_entries: crate::formats::wire::DEFAULT_MAX_ENTRIES,
            max_stack_frames: crate::formats::wire::DEFAULT_MAX_STACK_FRAMES,
            max_stack_depth: crate::formats::wire::DEFAULT_MAX_STACK_DEPTH,
            max_names_bytes: DEFAULT_MAX_NAMES_BYTES,
            apply_drop_frames: true,
            time_ns: None,
            duration_ns: None,
        }
    }
}

/// Why a pprof file could not be read. Each message names the file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The names and labels take more bytes, as resolved, than allowed.
    #[error(
        "{path}: its names and labels take {bytes} bytes as decoded (each string counted every \
         time a function, mapping or label names it), more than the limit of {limit} (raise \
         it: `flamehouse load --max-names-mib`)"
    )]
    NamesTooLarge {
        /// The file.
        path: PathBuf,
        /// The bytes counted.
        bytes: u64,
        /// The limit.
        limit: u64,
    },
    /// Reading the file failed.
    #[error("{path}: {cause}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
    /// The gzip stream is corrupt or cut short.
    #[error("{path}: not a valid gzip stream: {cause}")]
    Gzip {
        /// The file.
        path: PathBuf,
        /// The decompressor's error.
        cause: std::io::Error,
    },
    /// The zstd stream is corrupt or cut short.
    #[error("{path}: not a valid zstd stream: {cause}")]
    Zstd {
        /// The file.
        path: PathBuf,
        /// The decompressor's error.
        cause: std::io::Error,
    },
    /// The protobuf is larger than [`DecodeOptions::max_decompressed_bytes`].
    #[error(
        "{path}: the profile is larger than {limit} bytes{after} (a gzip bomb, or raise the \
         limit: `flamehouse load --max-decompressed-mib`)"
    )]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit.
        limit: u64,
        /// `" after decompression"` for a gzipped or zstd file, else empty.
        after: &'static str,
    },
    /// The profile holds more entries than [`DecodeOptions::max_entries`]:
    /// decoded, it would take far more memory than its bytes.
    #[error(
        "{path}: the profile holds {entries} entries (samples, values, locations, strings, labels, ...), \
         more than the limit of {limit} (raise it: `flamehouse load --max-entries`)"
    )]
    TooManyEntries {
        /// The file.
        path: PathBuf,
        /// The entries counted.
        entries: u64,
        /// The limit.
        limit: u64,
    },
    /// The samples' stacks hold more frames than allowed, in all or in
    /// one stack.
    #[error(
        "{path}: the samples' stacks hold {frames} frames {what}{how}, more than the limit \
         of {limit} (raise it: `flamehouse load {option}`)"
    )]
    TooManyStackFrames {
        /// The file.
        path: PathBuf,
        /// The location ids counted.
        frames: u64,
        /// `in all` or `in one stack`.
        what: &'static str,
        /// How they were counted: empty on the wire, `, inlined lines
        /// counted` once decoded.
        how: &'static str,
        /// The limit.
        limit: u64,
        /// The option that raises it.
        option: &'static str,
    },
    /// The bytes are not a `perftools.profiles.Profile` message.
    #[error("{path}: not a pprof profile: {detail}")]
    Protobuf {
        /// The file.
        path: PathBuf,
        /// Where and what (`byte N: ...`).
        detail: String,
    },
    /// The message decodes but breaks profile.proto's rules (a string index
    /// out of range, an unknown id, a value count that does not match the
    /// sample types, a bad `drop_frames` regexp).
    #[error("{path}: invalid pprof profile: {detail}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, naming the sample, location or field.
        detail: String,
    },
}

impl Error {
    /// The file the error is about.
    #[must_use]
    pub fn path(&self) -> &Path {
        match self {
            Error::Io { path, .. }
            | Error::Gzip { path, .. }
            | Error::Zstd { path, .. }
            | Error::TooLarge { path, .. }
            | Error::TooManyEntries { path, .. }
            | Error::TooManyStackFrames { path, .. }
            | Error::NamesTooLarge { path, .. }
            | Error::Protobuf { path, .. }
            | Error::Invalid { path, .. } => path,
        }
    }
}

impl From<Error> for crate::Error {
    fn from(e: Error) -> Self {
        crate::Error::Format(super::Error::Pprof(e))
    }
}

/// A sample type or the period type: a name and its unit, e.g. `cpu` /
/// `nanoseconds`, `alloc_space` / `bytes`, `contentions` / `count`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ValueType {
    /// The type (`samples`, `cpu`, `inuse_space`, ...).
    pub kind: String,
    /// Its unit (`count`, `nanoseconds`, `bytes`, ...).
    pub unit: String,
}

/// One mapped binary or library.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mapping {
    /// The id in the file.
    pub id: u64,
    /// Start address of the mapping.
    pub memory_start: u64,
    /// End address (exclusive).
    pub memory_limit: u64,
    /// File offset that `memory_start` maps.
    pub file_offset: u64,
    /// Path of the binary as the profiler saw it.
    pub filename: String,
    /// Build id (GNU build id in hex for ELF), possibly empty.
    pub build_id: String,
    /// The profiler symbolized functions of this mapping.
    pub has_functions: bool,
    /// ... file names.
    pub has_filenames: bool,
    /// ... line numbers.
    pub has_line_numbers: bool,
    /// ... inlined frames.
    pub has_inline_frames: bool,
}

/// One function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Function {
    /// The id in the file.
    pub id: u64,
    /// Human-readable name (`main.fib`, `std::vector<int>::push_back`).
    pub name: String,
    /// Name as the linker knows it (mangled), possibly empty.
    pub system_name: String,
    /// Source file, possibly empty.
    pub filename: String,
    /// First line of the function, 0 when unknown.
    pub start_line: i64,
}

/// One source line at a location.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Line {
    /// Index into [`PprofProfile::functions`]; `None` when the line names no
    /// function (function id 0).
    pub function: Option<usize>,
    /// Line number, 0 when unknown.
    pub line: i64,
    /// Column, 0 when unknown.
    pub column: i64,
}

/// One code address and the source lines at it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Location {
    /// The id in the file.
    pub id: u64,
    /// Index into [`PprofProfile::mappings`]; `None` when unknown.
    pub mapping: Option<usize>,
    /// The instruction address (0 when the profiler gave none). For
    /// non-leaf frames it is usually a return address (profile.proto: "may
    /// be in the middle of a call instruction"): a symbolizer looks up
    /// `address - 1` there.
    pub address: u64,
    /// Source lines, innermost first; empty when unsymbolized.
    pub lines: Vec<Line>,
    /// `is_folded`: the address stands for several (identical-code-folded)
    /// functions.
    pub is_folded: bool,
}

/// A numeric label of a sample, e.g. Go heap profiles' `bytes` (object size).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NumLabel {
    /// The key.
    pub key: String,
    /// The value.
    pub value: i64,
    /// `num_unit` when the file gives one (`bytes`, `nanoseconds`, ...).
    pub unit: Option<String>,
}

/// One sample: a stack, one value per sample type, labels.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    /// Indexes into [`PprofProfile::locations`], leaf first.
    pub locations: Vec<usize>,
    /// One value per entry of [`PprofProfile::sample_types`].
    pub values: Vec<i64>,
    /// String labels `(key, value)` in file order; a key may repeat.
    pub labels: Vec<(String, String)>,
    /// Numeric labels in file order.
    pub num_labels: Vec<NumLabel>,
}

/// One decoded pprof profile with every string and id resolved.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PprofProfile {
    /// What each sample value measures, in value order.
    pub sample_types: Vec<ValueType>,
    /// The type named by `default_sample_type`, if the file names one
    /// (`go tool pprof` otherwise defaults to the last sample type).
    pub default_sample_type: Option<String>,
    /// What [`Self::period`] counts (`cpu` / `nanoseconds`), if given.
    pub period_type: Option<ValueType>,
    /// Events between two samples (10 000 000 ns for Go's 100 Hz CPU
    /// profile; the sampling rate for heap profiles).
    pub period: i64,
    /// Collection time, nanoseconds since the epoch (0 when absent).
    pub time_nanos: i64,
    /// Length of the collection in nanoseconds (0 when absent).
    pub duration_nanos: i64,
    /// `drop_frames` regexp as written (empty when absent).
    pub drop_frames: String,
    /// `keep_frames` regexp as written (empty when absent).
    pub keep_frames: String,
    /// Free-form comments.
    pub comments: Vec<String>,
    /// The mappings, in file order.
    pub mappings: Vec<Mapping>,
    /// The functions, in file order.
    pub functions: Vec<Function>,
    /// The locations, in file order (after `drop_frames`, a location's lines
    /// may have been cut as pprof cuts them).
    pub locations: Vec<Location>,
    /// The samples, in file order.
    pub samples: Vec<Sample>,
}

/// One frame of an expanded stack (see [`PprofProfile::frames`]).
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    /// The function, `None` for an unsymbolized location.
    pub function: Option<&'a Function>,
    /// The line number (0 when unknown).
    pub line: i64,
    /// The location the frame comes from (address, mapping).
    pub location: &'a Location,
    /// Inlined into the next frame of the stack (every line of a location
    /// but its last).
    pub inlined: bool,
}

impl Frame<'_> {
    /// The function name, or the address as `0x...` when unsymbolized (or the
    /// function has no name).
    #[must_use]
    pub fn name(&self) -> Cow<'_, str> {
        match self.function {
            Some(f) if !f.name.is_empty() => Cow::Borrowed(f.name.as_str()),
            _ => Cow::Owned(format!("{:#x}", self.location.address)),
        }
    }
}

impl PprofProfile {
    /// The frames of `sample`, leaf first, inlined lines expanded (the order
    /// `go tool pprof -traces` prints).
    #[must_use]
    pub fn frames<'a>(&'a self, sample: &Sample) -> Vec<Frame<'a>> {
        let mut out = Vec::with_capacity(sample.locations.len());
        for &li in &sample.locations {
            self.location_frames(li, &mut out);
        }
        out
    }

    /// The frames of location `li` (an index into
    /// [`PprofProfile::locations`]), appended to `out`: its lines, the
    /// inlined callee first, or the bare address when it has none.
    pub fn location_frames<'a>(&'a self, li: usize, out: &mut Vec<Frame<'a>>) {
        let location = &self.locations[li];
        if location.lines.is_empty() {
            out.push(Frame {
                function: None,
                line: 0,
                location,
                inlined: false,
            });
        }
        let last = location.lines.len().saturating_sub(1);
        for (i, line) in location.lines.iter().enumerate() {
            out.push(Frame {
                function: line.function.map(|f| &self.functions[f]),
                line: line.line,
                location,
                inlined: i != last,
            });
        }
    }

    /// The mapping of a location, if known.
    #[must_use]
    pub fn mapping(&self, location: &Location) -> Option<&Mapping> {
        location.mapping.map(|m| &self.mappings[m])
    }

    /// Index of the sample type named `kind` (`cpu`, `alloc_space`, ...).
    #[must_use]
    pub fn sample_type_index(&self, kind: &str) -> Option<usize> {
        self.sample_types.iter().position(|t| t.kind == kind)
    }
}

/// Reads a pprof file, gzipped, zstd or raw.
///
/// # Errors
/// [`Error`], naming `path`: the file cannot be read, is a corrupt gzip
/// stream, exceeds the size cap, or is not a valid profile.
pub fn read_file(path: &Path, options: &DecodeOptions) -> Result<PprofProfile, Error> {
    let io = |cause| Error::Io {
        path: path.to_path_buf(),
        cause,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    // A raw file is capped before reading it; a gzipped one may be up to the
    // cap compressed too (compression never makes a profile larger).
    if len > options.max_decompressed_bytes {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            limit: options.max_decompressed_bytes,
            after: "",
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.take(options.max_decompressed_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    decode(path, &bytes, options)
}

/// Decodes a pprof profile held in memory; `path` only names it in errors.
///
/// # Errors
/// As [`read_file`].
pub fn decode(path: &Path, bytes: &[u8], options: &DecodeOptions) -> Result<PprofProfile, Error> {
    decode_seeing(path, bytes, options, |_| {})
}

/// [`decode`], showing `content` the profile's bytes once decompressed
/// (`bytes` themselves when not compressed) before they are decoded: a
/// profile's identity is what it holds, not how it was compressed.
///
/// # Errors
/// As [`decode`].
pub fn decode_seeing(
    path: &Path,
    bytes: &[u8],
    options: &DecodeOptions,
    content: impl FnOnce(&[u8]),
) -> Result<PprofProfile, Error> {
    let decompressed;
    let (raw, where_) = if bytes.starts_with(&[0x1f, 0x8b]) {
        decompressed = gunzip(path, bytes, options.max_decompressed_bytes)?;
        (decompressed.as_slice(), " of the decompressed profile")
    } else if bytes.starts_with(&ZSTD_MAGIC) {
        decompressed = unzstd(path, bytes, options.max_decompressed_bytes)?;
        (decompressed.as_slice(), " of the decompressed profile")
    } else {
        if bytes.len() as u64 > options.max_decompressed_bytes {
            return Err(Error::TooLarge {
                path: path.to_path_buf(),
                limit: options.max_decompressed_bytes,
                after: "",
            });
        }
        (bytes, "")
    };
    let invalid = |detail: String| Error::Invalid {
        path: path.to_path_buf(),
        detail,
    };
    if raw.is_empty() {
        return Err(invalid("the file is empty".into()));
    }
    content(raw);
    // The Profile fields that are messages: sample_type, sample, mapping,
    // location, function, period_type (not string_table's strings).
    // A sample's values count too, one each (Sample.value, field 2,
    // packed): each can be a stored row, and 2,000 sample types over
    // 400,000 samples, a 1.6 MB file, ran a load out of memory.
    let entries = crate::formats::wire::count_entries(raw, |f| matches!(f, 1..=5 | 11))
        + crate::formats::wire::count_nested_varints(raw, 2, 2).total;
    if entries > options.max_entries {
        return Err(Error::TooManyEntries {
            path: path.to_path_buf(),
            entries,
            limit: options.max_entries,
        });
    }
    // Profile.sample (2), Sample.location_id (1).
    let frames = crate::formats::wire::count_nested_varints(raw, 2, 1);
    check_frames(path, options, frames.total, frames.most, "")?;
    let message = proto::Profile::decode(raw).map_err(|cause| {
        let detail = match locate_error(raw) {
            Some((offset, what)) => format!("byte {offset}{where_}: {what}"),
            None => cause.to_string(),
        };
        Error::Protobuf {
            path: path.to_path_buf(),
            detail,
        }
    })?;
    let bytes = names_bytes(&message);
    if bytes > options.max_names_bytes {
        return Err(Error::NamesTooLarge {
            path: path.to_path_buf(),
            bytes,
            limit: options.max_names_bytes,
        });
    }
    let mut profile = resolve(message).map_err(invalid)?;
    // The stacks' frames with inlined lines expanded: a location of 65,000
    // lines under two ids a sample (counted on the wire as two) made 143 KB
    // take 3.9 GB.
    let (mut total, mut most) = (0u64, 0u64);
    for s in &profile.samples {
        let depth: u64 = s
            .locations
            .iter()
            .map(|&l| profile.locations[l].lines.len().max(1) as u64)
            .sum();
        total = total.saturating_add(depth);
        most = most.max(depth);
    }
    check_frames(path, options, total, most, ", inlined lines counted")?;
    if options.apply_drop_frames && !profile.drop_frames.is_empty() {
        let drop = compile_frames_regex(&profile.drop_frames, "drop_frames").map_err(invalid)?;
        let keep = if profile.keep_frames.is_empty() {
            None
        } else {
            Some(compile_frames_regex(&profile.keep_frames, "keep_frames").map_err(invalid)?)
        };
        prune(&mut profile, &drop, keep.as_ref());
    }
    Ok(profile)
}

fn gunzip(path: &Path, bytes: &[u8], limit: u64) -> Result<Vec<u8>, Error> {
    // The last member's ISIZE (its size mod 2^32): the usual one-member
    // file's size, a hint only (`cat a.gz b.gz` is a valid gzip file, and
    // Go reads it so: multi-member).
    let hint = bytes
        .len()
        .checked_sub(4)
        .map(|at| u64::from(u32::from_le_bytes(bytes[at..].try_into().unwrap_or([0; 4]))));
    inflate_within(
        path,
        || Ok(flate2::read::MultiGzDecoder::new(bytes)),
        hint,
        limit,
        |cause| Error::Gzip {
            path: path.to_path_buf(),
            cause: at_the_end(cause, bytes.len()),
        },
    )
}

/// A decompressor's "unexpected end of file" said with where: the
/// compressed stream ended with the file's `len` bytes, unfinished.
fn at_the_end(cause: std::io::Error, len: usize) -> std::io::Error {
    if cause.kind() == std::io::ErrorKind::UnexpectedEof {
        std::io::Error::new(
            cause.kind(),
            format!("{cause} at byte {len}, the file's end, inside the stream (cut short?)"),
        )
    } else {
        cause
    }
}

/// The output of the decompressor `open` makes, at most `limit` bytes (over
/// it: [`Error::TooLarge`]), in a buffer allocated once at its size. Read
/// into a growing vector, a profile near the limit took three times the
/// limit (the allocator copies a vector as it doubles, and the last
/// doubling reserves twice the size). With a `hint` of the size (gzip's
/// ISIZE) no larger than the limit, one read into that much fills it and
/// is done when the stream ends there; otherwise (no hint, a wrong one,
/// several members) a first pass counts the size without keeping the
/// bytes, so a bomb is refused holding nothing, and a second decompresses
/// into a buffer of that size.
fn inflate_within<R: Read>(
    path: &Path,
    open: impl Fn() -> Result<R, Error>,
    hint: Option<u64>,
    limit: u64,
    err: impl Fn(std::io::Error) -> Error,
) -> Result<Vec<u8>, Error> {
    let too_large = || Error::TooLarge {
        path: path.to_path_buf(),
        limit,
        after: " after decompression",
    };
    if let Some(h) = hint.filter(|&h| h <= limit) {
        let mut out = Vec::with_capacity(usize::try_from(h).map_err(|_| too_large())?);
        let mut r = open()?;
        (&mut r).take(h).read_to_end(&mut out).map_err(&err)?;
        // Ended within the hint (shorter only if the decoder let a wrong
        // ISIZE pass), or exactly at it: done.
        let mut probe = [0u8; 1];
        if (out.len() as u64) < h || r.read(&mut probe).map_err(&err)? == 0 {
            return Ok(out);
        }
    }
    let size = std::io::copy(&mut open()?.take(limit + 1), &mut std::io::sink()).map_err(&err)?;
    if size > limit {
        return Err(too_large());
    }
    let mut out = Vec::with_capacity(usize::try_from(size).map_err(|_| too_large())?);
    open()?.take(size).read_to_end(&mut out).map_err(&err)?;
    Ok(out)
}

/// The magic number that starts a zstd frame (RFC 8878).
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

fn unzstd(path: &Path, bytes: &[u8], limit: u64) -> Result<Vec<u8>, Error> {
    let zstd_err = |cause| Error::Zstd {
        path: path.to_path_buf(),
        cause: at_the_end(cause, bytes.len()),
    };
    // Concatenated frames decode as one stream, as `zstd -d` does; no
    // size hint (a frame's content size is optional and per frame).
    inflate_within(
        path,
        || zstd::stream::read::Decoder::with_buffer(bytes).map_err(zstd_err),
        None,
        limit,
        zstd_err,
    )
}

/// Refuses `total` frames in all or `most` in one stack past the limits of
/// `options` (`how` says how they were counted).
fn check_frames(
    path: &Path,
    options: &DecodeOptions,
    total: u64,
    most: u64,
    how: &'static str,
) -> Result<(), Error> {
    for (frames, what, limit, option) in [
        (
            total,
            "in all",
            options.max_stack_frames,
            "--max-stack-frames",
        ),
        (
            most,
            "in one stack",
            options.max_stack_depth,
            "--max-stack-depth",
        ),
    ] {
        if frames > limit {
            return Err(Error::TooManyStackFrames {
                path: path.to_path_buf(),
                frames,
                what,
                how,
                limit,
                option,
            });
        }
    }
    Ok(())
}

/// The bytes `p`'s names and labels take once resolved: each string
/// counted every time something names it (resolving copies it each time).
fn names_bytes(p: &proto::Profile) -> u64 {
    let len = |i: i64| {
        usize::try_from(i)
            .ok()
            .and_then(|i| p.string_table.get(i))
            .map_or(0, |s| s.len() as u64)
    };
    let types = p.sample_type.iter().chain(&p.period_type);
    types.map(|t| len(t.r#type) + len(t.unit)).sum::<u64>()
        + p.comment.iter().map(|&c| len(c)).sum::<u64>()
        + p.mapping
            .iter()
            .map(|m| len(m.filename) + len(m.build_id))
            .sum::<u64>()
        + p.function
            .iter()
            .map(|f| len(f.name) + len(f.system_name) + len(f.filename))
            .sum::<u64>()
        + p.sample
            .iter()
            .flat_map(|s| &s.label)
            .map(|l| len(l.key) + len(l.str) + len(l.num_unit))
            .sum::<u64>()
}

/// Resolves string indexes and ids of a decoded message; the error says
/// which sample, location or field is wrong.
fn resolve(mut p: proto::Profile) -> Result<PprofProfile, String> {
    // Invalid UTF-8 becomes U+FFFD (see `proto::Profile::string_table`);
    // valid strings move without a copy.
    let strings: Vec<String> = std::mem::take(&mut p.string_table)
        .into_iter()
        .map(|b| {
            String::from_utf8(b)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
        })
        .collect();
    let strings = &strings;
    match strings.first() {
        None => return Err("the string table is empty (entry 0 must be \"\")".into()),
        Some(s) if !s.is_empty() => {
            return Err(format!("string_table[0] is {s:?}, must be \"\""));
        }
        Some(_) => {}
    }
    let s = |index: i64, what: &dyn Fn() -> String| -> Result<String, String> {
        usize::try_from(index)
            .ok()
            .and_then(|i| strings.get(i))
            .cloned()
            .ok_or_else(|| {
                format!(
                    "{}: string index {index} is out of range (the string table has {} entries)",
                    what(),
                    strings.len()
                )
            })
    };
    let value_type =
        |v: &proto::ValueType, what: &dyn Fn() -> String| -> Result<ValueType, String> {
            Ok(ValueType {
                kind: s(v.r#type, what)?,
                unit: s(v.unit, what)?,
            })
        };

    let sample_types = p
        .sample_type
        .iter()
        .enumerate()
        .map(|(i, v)| value_type(v, &|| format!("sample_type[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    // Without a sample type nothing says what a value counts, and nothing
    // could be stored: `go tool pprof` calls such a file malformed
    // ("missing sample type information"), and so is it here rather than
    // an empty profile.
    if sample_types.is_empty() {
        return Err(
            "no sample types (sample_type is empty): nothing says what the values count \
             (go tool pprof: missing sample type information)"
                .into(),
        );
    }
    let default_sample_type = match p.default_sample_type {
        0 => None,
        i => Some(s(i, &|| "default_sample_type".into())?),
    };
    let period_type = p
        .period_type
        .as_ref()
        .map(|v| value_type(v, &|| "period_type".into()))
        .transpose()?;
    let comments = p
        .comment
        .iter()
        .enumerate()
        .map(|(i, &c)| s(c, &|| format!("comment[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;

    let mut mapping_index = HashMap::with_capacity(p.mapping.len());
    let mut mappings = Vec::with_capacity(p.mapping.len());
    for (i, m) in p.mapping.iter().enumerate() {
        let what = || format!("mapping {} (mapping[{i}])", m.id);
        if m.id == 0 || mapping_index.insert(m.id, i).is_some() {
            return Err(format!("{}: the id is 0 or not unique", what()));
        }
        mappings.push(Mapping {
            id: m.id,
            memory_start: m.memory_start,
            memory_limit: m.memory_limit,
            file_offset: m.file_offset,
            filename: s(m.filename, &what)?,
            build_id: s(m.build_id, &what)?,
            has_functions: m.has_functions,
            has_filenames: m.has_filenames,
            has_line_numbers: m.has_line_numbers,
            has_inline_frames: m.has_inline_frames,
        });
    }

    let mut function_index = HashMap::with_capacity(p.function.len());
    let mut functions = Vec::with_capacity(p.function.len());
    for (i, f) in p.function.iter().enumerate() {
        let what = || format!("function {} (function[{i}])", f.id);
        if f.id == 0 || function_index.insert(f.id, i).is_some() {
            return Err(format!("{}: the id is 0 or not unique", what()));
        }
        functions.push(Function {
            id: f.id,
            name: s(f.name, &what)?,
            system_name: s(f.system_name, &what)?,
            filename: s(f.filename, &what)?,
            start_line: f.start_line,
        });
    }

    let mut location_index = HashMap::with_capacity(p.location.len());
    let mut locations = Vec::with_capacity(p.location.len());
    for (i, l) in p.location.iter().enumerate() {
        let what = || format!("location {} (location[{i}])", l.id);
        if l.id == 0 || location_index.insert(l.id, i).is_some() {
            return Err(format!("{}: the id is 0 or not unique", what()));
        }
        let mapping = match l.mapping_id {
            0 => None,
            id => Some(
                *mapping_index
                    .get(&id)
                    .ok_or_else(|| format!("{}: unknown mapping id {id}", what()))?,
            ),
        };
        let lines = l
            .line
            .iter()
            .map(|ln| {
                let function = match ln.function_id {
                    0 => None,
                    id => Some(
                        *function_index
                            .get(&id)
                            .ok_or_else(|| format!("{}: unknown function id {id}", what()))?,
                    ),
                };
                Ok(Line {
                    function,
                    line: ln.line,
                    column: ln.column,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        locations.push(Location {
            id: l.id,
            mapping,
            address: l.address,
            lines,
            is_folded: l.is_folded,
        });
    }

    let mut samples = Vec::with_capacity(p.sample.len());
    for (i, x) in p.sample.iter().enumerate() {
        let what = || format!("sample {i}");
        if x.value.len() != sample_types.len() {
            return Err(format!(
                "sample {i} has {} values but the profile has {} sample types",
                x.value.len(),
                sample_types.len()
            ));
        }
        let locs = x
            .location_id
            .iter()
            .map(|id| {
                location_index
                    .get(id)
                    .copied()
                    .ok_or_else(|| format!("sample {i}: unknown location id {id}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut labels = Vec::new();
        let mut num_labels = Vec::new();
        for l in &x.label {
            let key = s(l.key, &what)?;
            if l.str != 0 {
                labels.push((key, s(l.str, &what)?));
            } else if l.num != 0 || l.num_unit != 0 {
                let unit = match l.num_unit {
                    0 => None,
                    u => Some(s(u, &what)?),
                };
                num_labels.push(NumLabel {
                    key,
                    value: l.num,
                    unit,
                });
            }
        }
        samples.push(Sample {
            locations: locs,
            values: x.value.clone(),
            labels,
            num_labels,
        });
    }

    // 0 is "not set" (the loader's time then); before 1970 is no
    // collection time (it was taken as unset without a word).
    for (field, v) in [
        ("time_nanos (field 9)", p.time_nanos),
        ("duration_nanos (field 10)", p.duration_nanos),
    ] {
        if v < 0 {
            return Err(format!(
                "{field} is {v}: negative (a time is ns since 1970, a duration ns)"
            ));
        }
    }
    Ok(PprofProfile {
        sample_types,
        default_sample_type,
        period_type,
        period: p.period,
        time_nanos: p.time_nanos,
        duration_nanos: p.duration_nanos,
        drop_frames: s(p.drop_frames, &|| "drop_frames".into())?,
        keep_frames: s(p.keep_frames, &|| "keep_frames".into())?,
        comments,
        mappings,
        functions,
        locations,
        samples,
    })
}

/// pprof anchors both regexps: `^(RE)$`.
fn compile_frames_regex(re: &str, field: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(&format!("^({re})$")).map_err(|e| {
        // The regex crate's message spans lines (pattern, caret, error);
        // the last line says what is wrong.
        let e = e.to_string();
        let why = e.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(&e);
        format!("{field} {re:?} is not a valid regexp: {}", why.trim())
    })
}

/// pprof's `simplifyFunc`: drop a leading `.` (PPC ELF v1) and the argument
/// list from the first `(` on, skipping the reserved names
/// `(anonymous namespace)` and `operator()`.
fn simplify_func(name: &str) -> &str {
    const RESERVED: [&str; 2] = ["(anonymous namespace)", "operator()"];
    let name = name.strip_prefix('.').unwrap_or(name);
    let mut i = 0;
    while i < name.len() {
        let rest = &name[i..];
        if let Some(r) = RESERVED.iter().find(|r| rest.starts_with(**r)) {
            i += r.len();
        } else if rest.starts_with('(') {
            return &name[..i];
        } else {
            i += rest.chars().next().map_or(1, char::len_utf8);
        }
    }
    name
}

/// `drop_frames` / `keep_frames` as pprof's `Profile.Prune`: in each location
/// find the outermost line whose function matches `drop` and not `keep`; that
/// line and the ones inlined into it go (the whole location when it is the
/// last line). Then each sample, scanned from the root, is cut at the first
/// such location after at least one untouched frame: everything leafward of
/// it goes, and the location itself too when all its lines matched. Frames
/// before the first untouched one are never cut (so a matching root does not
/// empty the stack).
fn prune(p: &mut PprofProfile, drop: &regex::Regex, keep: Option<&regex::Regex>) {
    let mut cache: HashMap<usize, bool> = HashMap::new();
    let functions = &p.functions;
    let mut matches = |f: usize| {
        *cache.entry(f).or_insert_with(|| {
            let name = simplify_func(&functions[f].name);
            drop.is_match(name) && !keep.is_some_and(|k| k.is_match(name))
        })
    };
    let n = p.locations.len();
    let mut whole = vec![false; n];
    let mut beneath = vec![false; n];
    for (li, loc) in p.locations.iter_mut().enumerate() {
        let hit = (0..loc.lines.len()).rev().find(|&i| {
            loc.lines[i]
                .function
                .is_some_and(|f| !functions[f].name.is_empty() && matches(f))
        });
        if let Some(i) = hit {
            beneath[li] = true;
            if i == loc.lines.len() - 1 {
                whole[li] = true;
            } else {
                loc.lines.drain(..=i);
            }
        }
    }
    for sample in &mut p.samples {
        let mut found_user = false;
        for i in (0..sample.locations.len()).rev() {
            let li = sample.locations[i];
            if !whole[li] && !beneath[li] {
                found_user = true;
                continue;
            }
            if !found_user {
                continue;
            }
            if whole[li] {
                sample.locations.drain(..=i);
            } else {
                sample.locations.drain(..i);
            }
            break;
        }
    }
}

/// Walks the top-level fields of a `Profile` that prost refused and returns
/// the byte offset of the first one that is cut short or does not decode,
/// with what is wrong.
fn locate_error(buf: &[u8]) -> Option<(usize, String)> {
    use crate::formats::wire::{varint, varint_fault};
    fn field_name(n: u64) -> &'static str {
        match n {
            1 => "sample_type",
            2 => "sample",
            3 => "mapping",
            4 => "location",
            5 => "function",
            6 => "string_table",
            7 => "drop_frames",
            8 => "keep_frames",
            9 => "time_nanos",
            10 => "duration_nanos",
            11 => "period_type",
            12 => "period",
            13 => "comment",
            14 => "default_sample_type",
            _ => "unknown field",
        }
    }
    let mut pos = 0;
    while pos < buf.len() {
        let start = pos;
        let Some(key) = varint(buf, &mut pos) else {
            return Some((start, format!("field key: {}", varint_fault(buf, start))));
        };
        let (field, wire) = (key >> 3, key & 7);
        let name = field_name(field);
        if field == 0 {
            return Some((start, "field number 0".into()));
        }
        let end = match wire {
            0 => {
                let at = pos;
                if varint(buf, &mut pos).is_none() {
                    let fault = varint_fault(buf, at);
                    return Some((start, format!("{name} (field {field}): {fault}")));
                }
                pos
            }
            1 => pos + 8,
            5 => pos + 4,
            2 => {
                let at = pos;
                let Some(len) = varint(buf, &mut pos) else {
                    let fault = varint_fault(buf, at);
                    return Some((start, format!("{name} (field {field}): length: {fault}")));
                };
                match usize::try_from(len).ok().and_then(|l| pos.checked_add(l)) {
                    Some(end) => end,
                    None => {
                        return Some((
                            start,
                            format!("{name} (field {field}): length {len} is past the end"),
                        ))
                    }
                }
            }
            w => {
                return Some((
                    start,
                    format!("{name} (field {field}): unsupported wire type {w}"),
                ))
            }
        };
        if end > buf.len() {
            return Some((
                start,
                format!(
                    "{name} (field {field}) needs {} bytes but the data ends after {} (truncated)",
                    end - start,
                    buf.len() - start
                ),
            ));
        }
        let body = &buf[pos..end];
        let bad = match (field, wire) {
            (1 | 11, 2) => proto::ValueType::decode(body).err().map(|e| e.to_string()),
            (2, 2) => proto::Sample::decode(body).err().map(|e| e.to_string()),
            (3, 2) => proto::Mapping::decode(body).err().map(|e| e.to_string()),
            (4, 2) => proto::Location::decode(body).err().map(|e| e.to_string()),
            (5, 2) => proto::Function::decode(body).err().map(|e| e.to_string()),
            // Any bytes: read as UTF-8 with U+FFFD (`resolve`).
            (6, 2) => None,
            (1..=6 | 11, _) => Some(format!("wire type {wire}, expected 2 (length-delimited)")),
            (7..=10 | 12 | 14, w) if w != 0 => Some(format!("wire type {w}, expected 0 (varint)")),
            _ => None,
        };
        if let Some(what) = bad {
            return Some((start, format!("{name} (field {field}): {what}")));
        }
        pos = end;
    }
    None
}
