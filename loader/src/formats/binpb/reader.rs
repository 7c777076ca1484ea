//! The streaming reader: framing, decompression, header check and
//! dictionary validation, one record at a time.
//!
//! Memory is bounded by one record: the reader holds the compressed payload
//! (at most [`ReaderOptions::max_record_len`]) and its decompression (at most
//! [`ReaderOptions::max_decompressed_len`]) plus the accumulated
//! [`Dictionaries`]. It never reads the whole file.
//!
//! # Torn tail versus corruption
//!
//! A record is *torn* when the input ends inside it: fewer than 8 bytes of
//! length prefix, or fewer payload bytes than the prefix says. A torn record is
//! not an error: the stream ends with [`Tail::Torn`] and
//! [`BinpbReader::committed_offset`] stays at the end of the last complete
//! record. To tell a torn tail from a corrupted length prefix (which would also
//! run past the end of the file), the bytes present are fed to zstd: a live
//! file's partial record is a prefix of a valid zstd frame, so zstd just wants
//! more input. If zstd rejects those bytes, or finds a complete frame that ends
//! before the bytes present do, the length prefix is wrong and that is an
//! error. A length prefix above [`ReaderOptions::max_record_len`] is always an
//! error, even at the end.
//!
//! # Old-variant detection
//!
//! The older MemHawk format has no ProcessInfo header (its first record is a
//! Snapshot) and numbers AllocSummary's fields 2..6. Its AllocSummary fields
//! are all varints, so they would decode silently into the wrong fields; the
//! reliable evidence is the first record. The header is accepted only if, at
//! the wire level,
//!
//! 1. fields 1 and 2 (if present) are length-delimited and fields 3 and 4 (if
//!    present) are varints, and
//! 2. at least one of field 3 (`pid`) or field 4 (`startTimestamp`) is present
//!    (MemHawk always sets both; a real pid is never 0).
//!
//! A Snapshot can never pass: its field 1 (`timestamp`) is a varint and its
//! fields 3 and 4 (`ptrIds`, `stacktraces`) are length-delimited, so either it
//! breaks rule 1 or it has neither field 3 nor 4 as a varint and breaks rule
//! 2. Fields above 4 are ignored, so a future ProcessInfo may grow. When the
//! check fails and the record decodes as a Snapshot, the file is reported as
//! the old variant ([`Error::OldVariant`]); otherwise as a bad header
//! ([`Error::BadHeader`]).

use std::fmt;
use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use prost::Message;
use zstd::stream::raw::{Decoder, InBuffer, Operation, OutBuffer};

use super::dict::Dictionaries;
use super::proto::{ProcessInfo, Snapshot};
use super::Error;

/// Default for [`ReaderOptions::max_record_len`]: 256 MiB compressed.
pub const DEFAULT_MAX_RECORD_LEN: u64 = 256 << 20;
/// Default for [`ReaderOptions::max_decompressed_len`]: 1 GiB.
pub const DEFAULT_MAX_DECOMPRESSED_LEN: u64 = 1 << 30;

/// Size of a record's length prefix.
const PREFIX_LEN: usize = 8;
/// Decompression is done through a scratch buffer of this size.
const SCRATCH_LEN: usize = 128 << 10;

/// Limits that guard memory against corrupt or hostile files. Exceeding one is
/// an error, never a silent truncation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReaderOptions {
    /// Largest accepted length prefix (compressed payload size), in bytes.
    pub max_record_len: u64,
    /// Largest accepted decompressed payload, in bytes.
    pub max_decompressed_len: u64,
    /// Most entries one snapshot record may hold (stack traces, pointer
    /// ids, ... and one level down), counted before decoding
    /// ([`crate::formats::wire`]). Default
    /// [`crate::formats::wire::DEFAULT_MAX_ENTRIES`].
    pub max_entries: u64,
    /// Most frame ids of the stack traces one snapshot record defines, all
    /// counted before decoding. Default
    /// [`crate::formats::wire::DEFAULT_MAX_STACK_FRAMES`].
    pub max_stack_frames: u64,
    /// Most frame ids of one stack trace. Default
    /// [`crate::formats::wire::DEFAULT_MAX_STACK_DEPTH`].
    pub max_stack_depth: u64,
}

impl Default for ReaderOptions {
    fn default() -> Self {
        Self {
            max_record_len: DEFAULT_MAX_RECORD_LEN,
            max_decompressed_len: DEFAULT_MAX_DECOMPRESSED_LEN,
            max_entries: crate::formats::wire::DEFAULT_MAX_ENTRIES,
            max_stack_frames: crate::formats::wire::DEFAULT_MAX_STACK_FRAMES,
            max_stack_depth: crate::formats::wire::DEFAULT_MAX_STACK_DEPTH,
        }
    }
}

/// One decoded record.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    /// Record 0: the process the stream belongs to.
    Header(ProcessInfo),
    /// Every later record. Its `ptr_ids` and `stacktraces` have already been
    /// added to [`BinpbReader::dictionaries`] when it is returned.
    Snapshot(Snapshot),
}

/// How a stream ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tail {
    /// The input ended exactly after a complete record, at byte `offset`.
    Clean {
        /// End of the last complete record.
        offset: u64,
    },
    /// The input ended inside the record starting at byte `offset` (which is
    /// also the end of the last complete record), after `available` bytes of
    /// it. A live file: retry later from `offset`.
    Torn {
        /// Start of the torn record.
        offset: u64,
        /// Bytes of it present.
        available: u64,
    },
}

impl Tail {
    /// The end of the last complete record, where reading resumes.
    #[must_use]
    pub fn offset(self) -> u64 {
        match self {
            Self::Clean { offset } | Self::Torn { offset, .. } => offset,
        }
    }

    /// Whether the stream ended inside a record.
    #[must_use]
    pub fn is_torn(self) -> bool {
        matches!(self, Self::Torn { .. })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Reading,
    Ended(Tail),
    Failed,
}

/// Streaming reader of a `.binpb` stream: yields the header, then snapshots.
///
/// Use [`BinpbReader::next_record`] or the [`Iterator`] impl. The iterator
/// yields `Err` at most once and then stops.
///
/// Offsets are counted from where the reader started, which is taken to be
/// the start of the file.
pub struct BinpbReader<R> {
    inner: R,
    path: PathBuf,
    options: ReaderOptions,
    /// Offset of the next unread byte.
    pos: u64,
    /// End of the last complete record.
    committed: u64,
    header: Option<ProcessInfo>,
    dictionaries: Dictionaries,
    snapshots: u64,
    /// The frames of the stack traces the records read so far defined:
    /// the stream's dictionary, which `--max-stack-frames` bounds.
    stack_frames: u64,
    state: State,
    inflater: Inflater,
}

impl<R> fmt::Debug for BinpbReader<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BinpbReader")
            .field("path", &self.path)
            .field("options", &self.options)
            .field("pos", &self.pos)
            .field("committed", &self.committed)
            .field("header", &self.header)
            .field("frames", &self.dictionaries.frame_count())
            .field("traces", &self.dictionaries.trace_count())
            .field("snapshots", &self.snapshots)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl BinpbReader<BufReader<File>> {
    /// Opens `path` with default limits.
    ///
    /// # Errors
    /// [`Error::Open`] if the file cannot be opened.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_with_options(path, ReaderOptions::default())
    }

    /// Opens `path` with the given limits.
    ///
    /// # Errors
    /// [`Error::Open`] if the file cannot be opened.
    pub fn open_with_options(
        path: impl AsRef<Path>,
        options: ReaderOptions,
    ) -> Result<Self, Error> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|cause| Error::Open {
            path: path.to_owned(),
            cause,
        })?;
        Self::from_file(file, path, options)
    }

    /// A reader over an opened `file` (the loader keeps its own handle to
    /// follow the path); a directory is refused here.
    ///
    /// # Errors
    /// [`Error::Open`] if `file` is a directory.
    pub fn from_file(file: File, path: &Path, options: ReaderOptions) -> Result<Self, Error> {
        // A directory opens fine on Linux and fails only at the first read
        // (EISDIR): say so up front.
        if file.metadata().is_ok_and(|m| m.is_dir()) {
            return Err(Error::Open {
                path: path.to_owned(),
                cause: io::Error::other("is a directory, not a profile"),
            });
        }
        Ok(Self::with_options(BufReader::new(file), path, options))
    }
}

impl<R: Read> BinpbReader<R> {
    /// A reader over `inner`, which starts at the beginning of a stream;
    /// `path` is only used in error messages.
    pub fn new(inner: R, path: impl Into<PathBuf>) -> Self {
        Self::with_options(inner, path, ReaderOptions::default())
    }

    /// Like [`BinpbReader::new`], with the given limits.
    pub fn with_options(inner: R, path: impl Into<PathBuf>, options: ReaderOptions) -> Self {
        Self {
            inner,
            path: path.into(),
            options,
            pos: 0,
            committed: 0,
            header: None,
            dictionaries: Dictionaries::new(),
            snapshots: 0,
            stack_frames: 0,
            state: State::Reading,
            inflater: Inflater::default(),
        }
    }

    /// The next record, or `None` at the end of the input (see
    /// [`BinpbReader::tail`] for how it ended).
    ///
    /// After a clean end, calling again reads on (a live file may have
    /// grown). After a torn end it keeps returning `None` until
    /// [`BinpbReader::rewind_to_committed`]; after an error, forever.
    ///
    /// # Errors
    /// Any corruption, with the file path and the offset of the record.
    pub fn next_record(&mut self) -> Result<Option<Record>, Error> {
        match self.state {
            State::Failed | State::Ended(Tail::Torn { .. }) => return Ok(None),
            State::Reading | State::Ended(Tail::Clean { .. }) => {}
        }
        match self.read_record() {
            Ok(Some(record)) => {
                self.committed = self.pos;
                self.state = State::Reading;
                Ok(Some(record))
            }
            Ok(None) => Ok(None),
            Err(err) => {
                self.state = State::Failed;
                Err(err)
            }
        }
    }

    fn read_record(&mut self) -> Result<Option<Record>, Error> {
        let offset = self.pos;
        let mut prefix = [0u8; PREFIX_LEN];
        let got = read_up_to(&mut self.inner, &mut prefix).map_err(|e| self.io_error(offset, e))?;
        self.pos += got as u64;
        if got == 0 {
            self.state = State::Ended(Tail::Clean { offset });
            return Ok(None);
        }
        // A stream starts with the big-endian length of its first record,
        // far below 2^56: a non-zero first byte means another kind of file.
        if offset == 0 && prefix[0] != 0 {
            return Err(Error::NotBinpb {
                path: self.path.clone(),
                looks_like: crate::formats::perf::perf_data_hint(&prefix[..got], &self.path)
                    .unwrap_or_else(|| sniff(&prefix[..got])),
            });
        }
        if got < PREFIX_LEN {
            self.state = State::Ended(Tail::Torn {
                offset,
                available: got as u64,
            });
            return Ok(None);
        }

        let len = u64::from_be_bytes(prefix);
        if len > self.options.max_record_len {
            return Err(Error::RecordTooLarge {
                path: self.path.clone(),
                offset,
                len,
                max: self.options.max_record_len,
            });
        }
        if len == 0 {
            return Err(self.framing(offset, "empty record (length prefix 0)".into()));
        }

        let mut payload = Vec::new();
        (&mut self.inner)
            .take(len)
            .read_to_end(&mut payload)
            .map_err(|e| self.io_error(offset, e))?;
        self.pos += payload.len() as u64;

        if (payload.len() as u64) < len {
            return self.check_torn(offset, len, &payload);
        }

        let bytes = match self.inflater.inflate(&payload, self.options.max_decompressed_len, true) {
            Ok(Inflated::Complete { data, consumed, .. }) if consumed == payload.len() => data,
            Ok(Inflated::Complete { consumed, .. }) => {
                return Err(self.framing(
                    offset,
                    format!(
                        "{} trailing bytes after the zstd frame (length prefix {len}, frame {consumed} bytes)",
                        payload.len() - consumed
                    ),
                ))
            }
            Ok(Inflated::Incomplete) => {
                return Err(self.framing(
                    offset,
                    format!("zstd frame is truncated: it does not end within the {len} bytes of the record"),
                ))
            }
            Err(err) => return Err(self.inflate_error(offset, err)),
        };
        drop(payload);

        if self.header.is_none() {
            let header = self.decode_header(offset, &bytes)?;
            self.header = Some(header.clone());
            return Ok(Some(Record::Header(header)));
        }

        // Every length-delimited field of a Snapshot is a message.
        let entries = crate::formats::wire::count_entries(&bytes, |_| true);
        if entries > self.options.max_entries {
            return Err(self.framing(
                offset,
                format!(
                    "the snapshot holds {entries} entries (stack traces, pointers, ...), more \
                     than the limit of {} (raise it: `flamehouse load --max-entries`)",
                    self.options.max_entries
                ),
            ));
        }
        // Snapshot.stacktraces (4), Stacktrace.ptrId (2): packed, a
        // one-byte id is a word decoded and a frame of a stack after.
        let frames = crate::formats::wire::count_nested_varints(&bytes, 4, 2);
        let stack_frames = self.stack_frames.saturating_add(frames.total);
        for (n, what, in_all, limit, option) in [
            (
                stack_frames,
                "the stack traces defined up to this record hold",
                " in all",
                self.options.max_stack_frames,
                "--max-stack-frames",
            ),
            (
                frames.most,
                "a stack trace of this record holds",
                "",
                self.options.max_stack_depth,
                "--max-stack-depth",
            ),
        ] {
            if n > limit {
                return Err(self.framing(
                    offset,
                    format!(
                        "{what} {n} frames{in_all}, more than the limit of {limit} (raise \
                         it: `flamehouse load {option}`)"
                    ),
                ));
            }
        }
        let snapshot = Snapshot::decode(bytes.as_slice()).map_err(|cause| Error::Protobuf {
            path: self.path.clone(),
            offset,
            message: "Snapshot",
            cause,
        })?;
        self.dictionaries
            .apply(&snapshot)
            .map_err(|cause| Error::Dictionary {
                path: self.path.clone(),
                offset,
                cause,
            })?;
        self.snapshots += 1;
        self.stack_frames = stack_frames;
        Ok(Some(Record::Snapshot(snapshot)))
    }

    /// The input ended inside the payload: a torn tail, unless the bytes
    /// present show that the length prefix is wrong.
    fn check_torn(
        &mut self,
        offset: u64,
        len: u64,
        payload: &[u8],
    ) -> Result<Option<Record>, Error> {
        match self.inflater.inflate(payload, self.options.max_decompressed_len, false) {
            Ok(Inflated::Incomplete) => {
                self.state = State::Ended(Tail::Torn {
                    offset,
                    available: (PREFIX_LEN + payload.len()) as u64,
                });
                Ok(None)
            }
            Ok(Inflated::Complete { consumed, .. }) => Err(self.framing(
                offset,
                format!(
                    "length prefix {len} runs past the end of the input, but the zstd frame ends after {consumed} bytes"
                ),
            )),
            Err(err) => Err(self.inflate_error(offset, err)),
        }
    }

    fn decode_header(&self, offset: u64, bytes: &[u8]) -> Result<ProcessInfo, Error> {
        match classify_header(bytes) {
            HeaderVerdict::ProcessInfo => {
                ProcessInfo::decode(bytes).map_err(|cause| Error::Protobuf {
                    path: self.path.clone(),
                    offset,
                    message: "ProcessInfo",
                    cause,
                })
            }
            HeaderVerdict::Not(reason) => {
                if !bytes.is_empty() && Snapshot::decode(bytes).is_ok() {
                    Err(Error::OldVariant {
                        path: self.path.clone(),
                        offset,
                        reason: format!(
                            "the first record is a Snapshot, not a ProcessInfo header ({reason})"
                        ),
                    })
                } else {
                    Err(Error::BadHeader {
                        path: self.path.clone(),
                        offset,
                        reason,
                    })
                }
            }
        }
    }

    fn io_error(&self, offset: u64, cause: io::Error) -> Error {
        Error::Io {
            path: self.path.clone(),
            offset,
            cause,
        }
    }

    fn framing(&self, offset: u64, detail: String) -> Error {
        Error::Framing {
            path: self.path.clone(),
            offset,
            detail,
        }
    }

    fn inflate_error(&self, offset: u64, err: InflateError) -> Error {
        match err {
            InflateError::Zstd(cause) => Error::Zstd {
                path: self.path.clone(),
                offset,
                cause,
            },
            InflateError::TooLarge => Error::DecompressedTooLarge {
                path: self.path.clone(),
                offset,
                max: self.options.max_decompressed_len,
            },
        }
    }
}

/// What a file's first bytes (up to 8) look like, when they cannot start a
/// `.binpb` stream.
pub fn sniff(first: &[u8]) -> String {
    const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
    if first.starts_with(&[0x1f, 0x8b]) {
        return "it is gzip-compressed, and MemHawk writes length-prefixed zstd records (a \
                gzipped pprof loads as pprof: `--format pprof` names the byte where one breaks)"
            .into();
    }
    if first.starts_with(&ZSTD_MAGIC) {
        return "it starts with a bare zstd frame whose start does not decompress as a pprof \
                profile (a zstd-compressed pprof cut short? `--format pprof` names the byte \
                where it breaks); every .binpb record starts with its 8-byte big-endian length"
            .into();
    }
    if !first.is_empty()
        && first
            .iter()
            .all(|&b| b.is_ascii_graphic() || b" \t\r\n".contains(&b))
    {
        // No text format claimed it either: say how to get the line at
        // fault (a perf script whose first header is broken, say).
        return format!(
            "it looks like text (starts with {:?}) that no text format claims: \
             --format perf|bpftrace|folded reads it as one and names the line at fault",
            String::from_utf8_lossy(first)
        );
    }
    // Text but for a control byte (a NUL in a folded name): say so, not
    // only that it is no .binpb stream.
    let control = |b: u8| (b < 0x20 && !b"\t\r\n".contains(&b)) || b == 0x7f;
    let printable = first.iter().filter(|&&b| !control(b)).count();
    // Random bytes are mostly printable too, but no UTF-8: text holds at
    // most a rare invalid sequence (a Latin-1 name), or starts in ASCII.
    let mut invalid = 0;
    let mut rest = first;
    while let Err(e) = std::str::from_utf8(rest) {
        let Some(len) = e.error_len() else { break };
        invalid += 1;
        rest = &rest[e.valid_up_to() + len..];
    }
    if first.len() >= 4
        && first[0] != 0
        && printable * 4 >= first.len() * 3
        && (invalid <= (first.len() / 16).max(1)
            || first[..4]
                .iter()
                .all(|b| b.is_ascii_graphic() || b" \t".contains(b)))
    {
        if let Some(at) = first.iter().position(|&b| control(b)) {
            return format!(
                "it looks like text (starts with {:?}) but holds the byte {:02x} at byte {at}: \
                 --format perf|bpftrace|folded reads it as one and names the line at fault",
                String::from_utf8_lossy(first),
                first[at]
            );
        }
        if let Err(e) = std::str::from_utf8(first) {
            if e.error_len().is_some() {
                return format!(
                    "it looks like text (starts with {:?}) but is not UTF-8 at byte {}: \
                     --format perf|bpftrace|folded reads it as one (such bytes as U+FFFD)",
                    String::from_utf8_lossy(first),
                    e.valid_up_to()
                );
            }
        }
    }
    format!(
        "its first bytes {} are no length prefix (a .binpb stream starts with 00)",
        first
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    )
}

impl<R> BinpbReader<R> {
    /// The path used in error messages.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header, once record 0 has been read.
    #[must_use]
    pub fn header(&self) -> Option<&ProcessInfo> {
        self.header.as_ref()
    }

    /// The frame and trace dictionaries accumulated from the snapshots read
    /// so far.
    #[must_use]
    pub fn dictionaries(&self) -> &Dictionaries {
        &self.dictionaries
    }

    /// Number of snapshots read so far.
    #[must_use]
    pub fn snapshots_read(&self) -> u64 {
        self.snapshots
    }

    /// The byte offset just past the last complete record (0 before the
    /// header): where a follower resumes after a torn tail.
    #[must_use]
    pub fn committed_offset(&self) -> u64 {
        self.committed
    }

    /// How the stream ended, once [`BinpbReader::next_record`] has returned
    /// `None`; `None` while reading or after an error.
    #[must_use]
    pub fn tail(&self) -> Option<Tail> {
        match self.state {
            State::Ended(tail) => Some(tail),
            State::Reading | State::Failed => None,
        }
    }

    /// The options in force.
    #[must_use]
    pub fn options(&self) -> ReaderOptions {
        self.options
    }

    /// Gives back the underlying reader.
    pub fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: Seek> BinpbReader<R> {
    /// After a torn tail, seeks the input back to
    /// [`BinpbReader::committed_offset`] so that the next call to
    /// [`BinpbReader::next_record`] retries the torn record (a live follower
    /// calls this after waiting for the writer). Does nothing unless the
    /// stream ended torn.
    ///
    /// # Errors
    /// [`Error::Io`] if seeking fails; the reader is then failed.
    pub fn rewind_to_committed(&mut self) -> Result<(), Error> {
        if let State::Ended(Tail::Torn { offset, .. }) = self.state {
            let back = i64::try_from(self.pos - offset)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "seek distance overflow"));
            if let Err(cause) = back.and_then(|back| self.inner.seek(SeekFrom::Current(-back))) {
                self.state = State::Failed;
                return Err(Error::Io {
                    path: self.path.clone(),
                    offset,
                    cause,
                });
            }
            self.pos = offset;
            self.state = State::Reading;
        }
        Ok(())
    }
}

impl<R: Read> Iterator for BinpbReader<R> {
    type Item = Result<Record, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
fn read_up_to(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Result of feeding bytes to zstd.
enum Inflated {
    /// A whole frame was decoded from the first `consumed` input bytes
    /// (`data` is empty unless asked to keep it).
    Complete {
        data: Vec<u8>,
        consumed: usize,
        /// The frame's decompressed size.
        size: u64,
    },
    /// The input ended inside the frame: zstd wants more.
    Incomplete,
}

enum InflateError {
    Zstd(io::Error),
    TooLarge,
}

/// A zstd decoder and scratch buffer, created on first use and reused for
/// every record.
#[derive(Default)]
struct Inflater {
    decoder: Option<Decoder<'static>>,
    scratch: Vec<u8>,
}

impl Inflater {
    /// Decompresses the single zstd frame at the start of `input`, refusing
    /// more than `max` bytes of output; keeps the output only if `keep`.
    fn inflate(&mut self, input: &[u8], max: u64, keep: bool) -> Result<Inflated, InflateError> {
        if self.scratch.is_empty() {
            self.scratch = vec![0; SCRATCH_LEN];
        }
        // The output buffer is allocated once, at the frame's size (grown
        // by doubling, a record near the limit took twice the limit and a
        // copy): its content size (MemHawk writes it), else a first pass
        // that counts without keeping, so a frame over the limit is refused
        // holding nothing.
        let mut size = None;
        if keep {
            size = match zstd::zstd_safe::get_frame_content_size(input) {
                Ok(Some(n)) if n <= max => Some(n),
                _ => match self.inflate(input, max, false)? {
                    Inflated::Complete { size, .. } => Some(size),
                    Inflated::Incomplete => return Ok(Inflated::Incomplete),
                },
            };
        }
        let decoder = match &mut self.decoder {
            Some(decoder) => {
                // Drop whatever an earlier, failed or unfinished frame left.
                decoder.reinit().map_err(InflateError::Zstd)?;
                decoder
            }
            None => self
                .decoder
                .insert(Decoder::new().map_err(InflateError::Zstd)?),
        };
        let mut data = Vec::with_capacity(size.and_then(|n| usize::try_from(n).ok()).unwrap_or(0));
        let mut pos = 0;
        let mut total: u64 = 0;
        loop {
            let mut src = InBuffer::around(&input[pos..]);
            let mut dst = OutBuffer::around(&mut self.scratch[..]);
            let hint = decoder
                .run(&mut src, &mut dst)
                .map_err(InflateError::Zstd)?;
            let (read, written) = (src.pos(), dst.pos());
            pos += read;
            total += written as u64;
            if total > max {
                return Err(InflateError::TooLarge);
            }
            if keep {
                data.extend_from_slice(&self.scratch[..written]);
            }
            if hint == 0 {
                return Ok(Inflated::Complete {
                    data,
                    consumed: pos,
                    size: total,
                });
            }
            // With all input consumed and room left in the output, zstd has
            // flushed everything it can: the frame continues past the input.
            if pos == input.len() && written < self.scratch.len() {
                return Ok(Inflated::Incomplete);
            }
            if read == 0 && written == 0 {
                return Err(InflateError::Zstd(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "zstd decoder made no progress",
                )));
            }
        }
    }
}

enum HeaderVerdict {
    ProcessInfo,
    Not(String),
}

/// The wire-level header check described in the module docs.
fn classify_header(bytes: &[u8]) -> HeaderVerdict {
    if bytes.is_empty() {
        return HeaderVerdict::Not("the record is an empty message".into());
    }
    let Some(fields) = scan_fields(bytes) else {
        return HeaderVerdict::Not("the record is not protobuf wire format".into());
    };
    let mut has_id = false;
    for &(field, wire_type) in &fields {
        let expected = match field {
            1 | 2 => WIRE_LEN,
            3 | 4 => WIRE_VARINT,
            _ => continue,
        };
        if wire_type != expected {
            return HeaderVerdict::Not(format!(
                "field {field} has wire type {wire_type}, ProcessInfo's has {expected}"
            ));
        }
        has_id |= field >= 3;
    }
    if has_id {
        HeaderVerdict::ProcessInfo
    } else {
        HeaderVerdict::Not("neither pid (3) nor startTimestamp (4) is set".into())
    }
}

const WIRE_VARINT: u8 = 0;
const WIRE_I64: u8 = 1;
const WIRE_LEN: u8 = 2;
const WIRE_I32: u8 = 5;

/// The (field number, wire type) of each top-level field of a protobuf
/// message, or `None` if the bytes are not well-formed wire format (groups
/// count as malformed: proto3 has none).
fn scan_fields(mut buf: &[u8]) -> Option<Vec<(u32, u8)>> {
    let mut fields = Vec::new();
    while !buf.is_empty() {
        let key = read_varint(&mut buf)?;
        let field = u32::try_from(key >> 3).ok().filter(|&f| f != 0)?;
        let wire_type = (key & 7) as u8;
        let skip = match wire_type {
            WIRE_VARINT => {
                read_varint(&mut buf)?;
                0
            }
            WIRE_I64 => 8,
            WIRE_LEN => usize::try_from(read_varint(&mut buf)?).ok()?,
            WIRE_I32 => 4,
            _ => return None,
        };
        buf = buf.get(skip..)?;
        fields.push((field, wire_type));
    }
    Some(fields)
}

fn read_varint(buf: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for (i, &byte) in buf.iter().enumerate().take(10) {
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            *buf = &buf[i + 1..];
            return Some(value);
        }
    }
    None
}
