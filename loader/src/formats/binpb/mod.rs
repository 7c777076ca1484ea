//! Decoder for MemHawk `.binpb` snapshot streams.
//!
//! This module owns everything about the file format described in
//! `shared/reference/binpb-format.md`, and nothing beyond it (no symbolization,
//! no ClickHouse rows):
//!
//! - [`proto`]: the protobuf messages (`memhawk.proto`), derived by hand with
//!   `prost`;
//! - [`reader`]: [`BinpbReader`], a streaming reader that yields the
//!   [`ProcessInfo`] header and then one [`Snapshot`] at a time, with bounded
//!   memory, torn-tail detection for live files and refusal of the older
//!   wire-incompatible variant;
//! - [`dict`]: [`Dictionaries`], the incremental frame/trace id dictionaries;
//! - [`profile`]: the format in the neutral model ([`Binpb`], the
//!   [`crate::formats::ProfileReader`] of [`BinpbReader`], `ElfInfo` to
//!   [`crate::model::Mapping`]).
//!
//! The encoder that writes the same framing (for fixtures and tests) is
//! `flamehouse_fixtures::binpb_writer`, outside the production library.
//!
//! # Framing
//!
//! ```text
//! file    := record(ProcessInfo) record(Snapshot)*
//! record  := u64 big-endian N, then N bytes of one zstd frame
//! payload := zstd-decompressed bytes = one protobuf message
//! ```
//!
//! # Errors and the torn tail
//!
//! A record cut short by the end of the file (a partial length prefix, or a
//! payload shorter than its length that is a plausible prefix of a zstd frame)
//! is how a live file looks while MemHawk writes it: it ends the stream with
//! [`Tail::Torn`] rather than an error, and [`BinpbReader::committed_offset`]
//! is where a follower resumes. Anything else that is wrong is an [`Error`]
//! naming the file and the byte offset of the record; every complete record
//! before it has been yielded already.
//!
//! # Example
//!
//! ```no_run
//! use flamehouse::formats::binpb::{BinpbReader, Record};
//!
//! let mut reader = BinpbReader::open("memhawk_app_42_protobuf.binpb")?;
//! while let Some(record) = reader.next_record()? {
//!     match record {
//!         Record::Header(info) => println!("pid {}", info.pid),
//!         Record::Snapshot(snap) => {
//!             for traced in &snap.changed {
//!                 let stack: Vec<u64> = reader.dictionaries().resolve(traced.trace_id).collect();
//!                 println!("{:#x}: {} frames", traced.trace_id, stack.len());
//!             }
//!         }
//!     }
//! }
//! println!("ended: {:?}", reader.tail());
//! # Ok::<(), flamehouse::formats::binpb::Error>(())
//! ```

pub mod dict;
pub mod profile;
pub mod proto;
pub mod reader;

#[cfg(test)]
mod golden;

use std::io;
use std::path::{Path, PathBuf};

pub use dict::{Dictionaries, DictionaryError};
pub use profile::{Binpb, PROFILER_LABEL, VALUE_TYPES};
pub use proto::{
    is_profiler_trace, AllocSummary, ElfInfo, ProcessInfo, Segment, Snapshot, Stacktrace,
    StacktracePtr, TracedAllocSummary, PROFILER_TRACE_BIT,
};
pub use reader::{BinpbReader, ReaderOptions, Record, Tail};

/// Everything that can go wrong reading a `.binpb` stream.
///
/// Each variant names the file and, where there is one, the byte offset of the
/// record at fault (the offset of its length prefix). `Display` is one line
/// and includes the underlying cause, so the cause is deliberately not also
/// exposed through [`std::error::Error::source`] (it would print twice in
/// error chains); match on the variant to inspect it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be opened.
    #[error("{}: cannot open: {cause}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        cause: io::Error,
    },
    /// Reading failed (not a short read at the end, which is a torn tail).
    #[error("{}: record at byte {offset}: read error: {cause}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Offset of the record being read.
        offset: u64,
        /// What the OS said.
        cause: io::Error,
    },
    /// The length prefix exceeds [`ReaderOptions::max_record_len`].
    #[error(
        "{}: record at byte {offset}: length prefix {len} exceeds the limit of {max} bytes (corrupt file?)",
        path.display()
    )]
    RecordTooLarge {
        /// The file.
        path: PathBuf,
        /// Offset of the record.
        offset: u64,
        /// The length the prefix claims.
        len: u64,
        /// The configured limit.
        max: u64,
    },
    /// The payload is not a valid zstd frame.
    #[error("{}: record at byte {offset}: bad zstd frame: {cause}", path.display())]
    Zstd {
        /// The file.
        path: PathBuf,
        /// Offset of the record.
        offset: u64,
        /// What zstd said.
        cause: io::Error,
    },
    /// The payload decompresses to more than
    /// [`ReaderOptions::max_decompressed_len`].
    #[error(
        "{}: record at byte {offset}: decompresses to more than the limit of {max} bytes",
        path.display()
    )]
    DecompressedTooLarge {
        /// The file.
        path: PathBuf,
        /// Offset of the record.
        offset: u64,
        /// The configured limit.
        max: u64,
    },
    /// The length prefix and the zstd frame disagree (frame shorter or
    /// longer than the record, empty record).
    #[error("{}: record at byte {offset}: {detail}", path.display())]
    Framing {
        /// The file.
        path: PathBuf,
        /// Offset of the record.
        offset: u64,
        /// What disagrees.
        detail: String,
    },
    /// The decompressed payload is not a valid protobuf message of the
    /// expected type.
    #[error("{}: record at byte {offset}: cannot decode {message}: {cause}", path.display())]
    Protobuf {
        /// The file.
        path: PathBuf,
        /// Offset of the record.
        offset: u64,
        /// The expected message type (`ProcessInfo` or `Snapshot`).
        message: &'static str,
        /// What prost said.
        cause: prost::DecodeError,
    },
    /// A snapshot's dictionary entries are inconsistent (a trace refers to an
    /// undefined frame id, or an id is redefined differently).
    #[error("{}: record at byte {offset}: {cause}", path.display())]
    Dictionary {
        /// The file.
        path: PathBuf,
        /// Offset of the record.
        offset: u64,
        /// The inconsistency.
        cause: DictionaryError,
    },
    /// The file is the older MemHawk variant (AllocSummary fields numbered
    /// 2..6, no ProcessInfo header), which is not wire-compatible.
    #[error(
        "{}: record at byte {offset}: {reason}: this is the older MemHawk format (no ProcessInfo header, AllocSummary fields numbered 2..6), which is not wire-compatible and not supported; re-record with a current MemHawk",
        path.display()
    )]
    OldVariant {
        /// The file.
        path: PathBuf,
        /// Offset of the first record.
        offset: u64,
        /// The evidence.
        reason: String,
    },
    /// The file's first bytes show it is something else (gzip, a bare zstd
    /// frame, text): said instead of misreading them as a length prefix.
    #[error(
        "{}: not a MemHawk .binpb stream: {looks_like}",
        path.display()
    )]
    NotBinpb {
        /// The file.
        path: PathBuf,
        /// What its first bytes look like.
        looks_like: String,
    },
    /// The first record is neither a ProcessInfo header nor an old-variant
    /// snapshot.
    #[error(
        "{}: record at byte {offset}: not a MemHawk ProcessInfo header: {reason}",
        path.display()
    )]
    BadHeader {
        /// The file.
        path: PathBuf,
        /// Offset of the first record.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
}

impl Error {
    /// The file the error is about.
    #[must_use]
    pub fn path(&self) -> &Path {
        match self {
            Self::Open { path, .. }
            | Self::Io { path, .. }
            | Self::RecordTooLarge { path, .. }
            | Self::Zstd { path, .. }
            | Self::DecompressedTooLarge { path, .. }
            | Self::Framing { path, .. }
            | Self::Protobuf { path, .. }
            | Self::Dictionary { path, .. }
            | Self::OldVariant { path, .. }
            | Self::BadHeader { path, .. }
            | Self::NotBinpb { path, .. } => path,
        }
    }

    /// The byte offset of the record at fault, if the error is about one.
    #[must_use]
    pub fn offset(&self) -> Option<u64> {
        match self {
            Self::Open { .. } | Self::NotBinpb { .. } => None,
            Self::Io { offset, .. }
            | Self::RecordTooLarge { offset, .. }
            | Self::Zstd { offset, .. }
            | Self::DecompressedTooLarge { offset, .. }
            | Self::Framing { offset, .. }
            | Self::Protobuf { offset, .. }
            | Self::Dictionary { offset, .. }
            | Self::OldVariant { offset, .. }
            | Self::BadHeader { offset, .. } => Some(*offset),
        }
    }
}
