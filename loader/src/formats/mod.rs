//! Profile formats: one module per input format, engine-free, each behind
//! the same two traits, plus content-based detection.
//!
//! - [`ProfileFormat`]: a format itself (its name, whether some first bytes
//!   look like it, and opening a file of it), one unit struct per module;
//! - [`ProfileReader`]: an open profile, read as a stream of
//!   [`crate::model::Event`]s in the neutral model (a reader never touches
//!   the symbolizer or the engine: it hands out addresses and mappings, as
//!   blazesym keeps normalization apart from symbolization);
//! - [`detect`] / [`detect_file`]: the format of some bytes, by asking every
//!   format in [`Format::ALL`] (inferno's guesser does the same with its
//!   collapsers' `is_applicable`); `load --format` skips it.
//!
//! Adding a format is one module with a [`ProfileFormat`] and one variant
//! of [`Format`] with its arm in [`Format::spec`].

pub mod binpb;
pub mod bpftrace;
pub mod folded;
pub mod perf;
pub mod pprof;
pub mod text;
pub mod text_args;
pub mod wire;

use crate::model::{Event, Frame, Label, ValueSemantics, ValueType};
use std::fs::File;
use std::path::Path;

/// The formats flamehouse reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Format {
    /// MemHawk `.binpb` snapshot streams (length-prefixed zstd protobuf).
    Binpb,
    /// pprof `profile.proto`, gzipped, zstd or raw (Go, pprof-rs, Node,
    /// ddtrace).
    Pprof,
    /// `perf script` text (one sample a paragraph: header line, frames).
    Perf,
    /// bpftrace map output, text or `-f json` (`@[ustack, comm] = count()`).
    Bpftrace,
    /// Folded stacks `a;b;c N` (FlameGraph, inferno, py-spy raw).
    Folded,
}

impl Format {
    /// Every format, in the order [`detect`] asks them.
    pub const ALL: &'static [Format] = &[
        Format::Binpb,
        Format::Pprof,
        Format::Perf,
        Format::Bpftrace,
        Format::Folded,
    ];

    /// The format's implementation.
    #[must_use]
    pub fn spec(self) -> &'static dyn ProfileFormat {
        match self {
            Format::Binpb => &binpb::Binpb,
            Format::Pprof => &pprof::Pprof,
            Format::Perf => &perf::Perf,
            Format::Bpftrace => &bpftrace::Bpftrace,
            Format::Folded => &folded::Folded,
        }
    }

    /// Its name (as `--format` takes it).
    #[must_use]
    pub fn name(self) -> &'static str {
        self.spec().name()
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a format makes of a file's first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sniff {
    /// They are this format's.
    Yes,
    /// They cannot be (another format, or none).
    No,
    /// Too few bytes to tell (an empty file, a live file just created).
    Unsure,
}

/// Options of the readers, one field per format that has any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadOptions {
    /// MemHawk `.binpb` record limits. Default: [`binpb::ReaderOptions::default`].
    pub binpb: binpb::ReaderOptions,
    /// pprof decoding (size cap, `drop_frames`). Default:
    /// [`pprof::DecodeOptions::default`].
    pub pprof: pprof::DecodeOptions,
    /// `perf script`. Default: [`perf::PerfOptions::default`].
    pub perf: perf::PerfOptions,
    /// bpftrace maps. Default: [`bpftrace::BpftraceOptions::default`].
    pub bpftrace: bpftrace::BpftraceOptions,
    /// Folded stacks. Default: [`folded::FoldedOptions::default`].
    pub folded: folded::FoldedOptions,
    /// Every text format (perf script, bpftrace, folded): the size cap and
    /// the limits on stacks and frames.
    /// Default: [`text::TextOptions::default`] (1 GiB).
    pub text: text::TextOptions,
    /// Text formats also give the identity builds before migration 10
    /// computed ([`crate::model::Source::legacy_identity`], FNV-1a over the
    /// file): set by a load into a database holding profiles stored with
    /// it, so that they are not stored twice. Default: off.
    pub legacy_identity: bool,
    /// A compressed pprof file also gives the id builds before id scheme 2
    /// ([`crate::ingest::continuous::ID_SCHEME`]) gave it, a hash of its
    /// compressed bytes (now of the profile they decompress to): set by a
    /// load into a database holding pprof profiles they stored. Default:
    /// off.
    pub legacy_pprof_identity: bool,
}

/// A profile format.
pub trait ProfileFormat: Sync {
    /// The format's short name (`binpb`).
    fn name(&self) -> &'static str;

    /// Whether `first` (the first bytes of a file, up to
    /// [`SNIFF_LEN`]) looks like this format.
    fn sniff(&self, first: &[u8]) -> Sniff;

    /// A reader of the opened `file` at `path` (used in messages).
    ///
    /// # Errors
    /// When the file is no file of the format at all (a directory).
    fn open(
        &self,
        file: File,
        path: &Path,
        options: &ReadOptions,
    ) -> Result<Box<dyn ProfileReader>, Error>;
}

/// An open profile: a stream of events.
///
/// Readers of growing files (MemHawk) stop at the end of the complete data
/// and resume from [`ProfileReader::committed_offset`]; a reader of a
/// complete file (pprof) gives one [`Event::Source`] and its batches.
pub trait ProfileReader {
    /// The format read.
    fn format(&self) -> Format;

    /// The value types of every sample, in value order.
    fn value_types(&self) -> &[ValueType];

    /// How the values combine over time.
    fn semantics(&self) -> ValueSemantics;

    /// The next event, or `None` at the end of the data (for now: a live
    /// file may grow).
    ///
    /// # Errors
    /// Corrupt input, naming the file and the byte offset or line.
    fn next_event(&mut self) -> Result<Option<Event>, Error>;

    /// The frames of a stack key of the events read so far, leaf first,
    /// into `out` (cleared first).
    fn stack(&self, key: u64, out: &mut Vec<Frame>);

    /// [`ProfileReader::stack`] without copies, for readers that hold each
    /// stack's frames: references to them into `out` (cleared first), and
    /// whether it did. Default: false (use [`ProfileReader::stack`]).
    fn stack_refs<'a>(&'a self, key: u64, out: &mut Vec<&'a Frame>) -> bool {
        let _ = (key, out);
        false
    }

    /// The sample labels of a stack key (on top of the source's labels),
    /// sorted by key, into `out` (cleared first). A key names a stack and
    /// its sample labels together; formats without sample labels keep
    /// this default (none).
    fn labels(&self, key: u64, out: &mut Vec<Label>) {
        let _ = key;
        out.clear();
    }

    /// The byte offset just past the last complete event: where a resumed
    /// read starts.
    fn committed_offset(&self) -> u64;

    /// Whether the data ended inside an event (a file being written).
    fn torn(&self) -> bool;

    /// After a torn end, read the unfinished event again (the file may have
    /// grown). Does nothing otherwise.
    ///
    /// # Errors
    /// When the file cannot be read again.
    fn rewind_to_committed(&mut self) -> Result<(), Error>;
}

/// How many first bytes [`detect`] looks at.
pub const SNIFF_LEN: usize = 64;

/// The format of a file starting with `first`: the first in [`Format::ALL`]
/// that says [`Sniff::Yes`], else the first that is [`Sniff::Unsure`].
/// `None` when no format claims the bytes.
#[must_use]
pub fn detect(first: &[u8]) -> Option<Format> {
    let sniffs: Vec<(Format, Sniff)> = Format::ALL
        .iter()
        .map(|&f| (f, f.spec().sniff(first)))
        .collect();
    sniffs
        .iter()
        .find(|(_, s)| *s == Sniff::Yes)
        .or_else(|| sniffs.iter().find(|(_, s)| *s == Sniff::Unsure))
        .map(|&(f, _)| f)
}

/// The format of the opened `file` (at `path`, for messages), from its
/// first bytes, read without moving the file's position. A file no format
/// claims is taken as MemHawk `.binpb`, whose reader then says what the
/// bytes look like instead (gzip, text, ...): today's one clear message
/// rather than a bare "unknown format".
///
/// # Errors
/// When the file cannot be read (a directory is left to the reader, which
/// says so).
pub fn detect_open(file: &File, path: &Path) -> Result<Format, Error> {
    Ok(recognize_open(file, path)?.unwrap_or(Format::Binpb))
}

/// As [`detect_open`], `None` when no reader recognizes the content (an
/// empty file, unknown bytes): [`detect_open`] then hands it to MemHawk's
/// reader, whose error says what it found.
///
/// # Errors
/// The file cannot be read.
pub fn recognize_open(file: &File, path: &Path) -> Result<Option<Format>, Error> {
    use std::os::unix::fs::FileExt;
    let mut first = [0u8; SNIFF_LEN];
    let mut got = 0;
    while got < SNIFF_LEN {
        match file.read_at(&mut first[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if e.raw_os_error() == Some(libc::EISDIR) => break,
            Err(cause) => {
                return Err(Error::Binpb(binpb::Error::Open {
                    path: path.to_owned(),
                    cause,
                }))
            }
        }
    }
    let first = &first[..got];
    if first.is_empty() {
        return Ok(None);
    }
    // A zstd-compressed pprof shows itself only past the sniffed bytes.
    if first.starts_with(&pprof::ZSTD_MAGIC) && pprof::reader::zstd_file_is_pprof(file) {
        return Ok(Some(Format::Pprof));
    }
    Ok(detect(first))
}

/// An error of any format's reader. `Display` is the format's one-line
/// message (naming the file and the offset); match the variant for the
/// details.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// MemHawk `.binpb`.
    #[error(transparent)]
    Binpb(#[from] binpb::Error),
    /// pprof `profile.proto`.
    #[error(transparent)]
    Pprof(#[from] pprof::Error),
    /// The text formats: `perf script`, bpftrace, folded stacks.
    #[error(transparent)]
    Text(#[from] text::Error),
}

impl Error {
    /// The file the error is about.
    #[must_use]
    pub fn path(&self) -> &Path {
        match self {
            Error::Binpb(e) => e.path(),
            Error::Pprof(e) => e.path(),
            Error::Text(e) => e.path(),
        }
    }

    /// The byte offset at fault, if the error is about one place.
    #[must_use]
    pub fn offset(&self) -> Option<u64> {
        match self {
            Error::Binpb(e) => e.offset(),
            // prost reports no offsets; the message names the field's byte.
            Error::Pprof(_) | Error::Text(_) => None,
        }
    }

    /// The 1-based line at fault, for the text formats.
    #[must_use]
    pub fn line(&self) -> Option<u64> {
        match self {
            Error::Text(e) => e.line(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detect_takes_a_length_prefix_as_binpb_and_refuses_other_bytes() {
        // A .binpb stream starts with a big-endian u64 length, far below 2^56.
        assert_eq!(
            detect(&[0, 0, 0, 0, 0, 0, 0, 12, 0x28]),
            Some(Format::Binpb)
        );
        // Too short to tell: a live file just created.
        assert_eq!(detect(&[]), Some(Format::Binpb));
        assert_eq!(detect(&[0, 0, 0]), Some(Format::Binpb));
        // gzip is pprof's; a bare zstd frame: no format claims it.
        assert_eq!(detect(&[0x1f, 0x8b, 8, 0]), Some(Format::Pprof));
        // Text formats by their first line.
        assert_eq!(detect(b"main;foo;bar 12\n"), Some(Format::Folded));
        assert_eq!(detect(b"@[\n    leaf+58\n"), Some(Format::Bpftrace));
        assert_eq!(
            detect(b"burn   410 11331.597954:    2004008 cpu-clock:pppH: \n"),
            Some(Format::Perf)
        );
        assert_eq!(detect(&[0x28, 0xb5, 0x2f, 0xfd]), None);
        // Short text no text format claims is no raw pprof either (`hi\n`
        // parsed as one varint field: "not a pprof profile").
        for text in [&b"hi\n"[..], b"hello world\n", b"x\ty\r\n"] {
            assert_eq!(detect(text), None, "{:?}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn every_format_is_detected_by_its_own_sniff_and_named_for_the_cli() {
        use clap::ValueEnum;
        for &f in Format::ALL {
            assert_eq!(
                f.to_possible_value().map(|v| v.get_name().to_string()),
                Some(f.name().to_string())
            );
        }
    }
}
