//! Writing `.binpb` streams in MemHawk's framing, for fixture generators and
//! tests.
//!
//! [`BinpbWriter`] writes the ProcessInfo header on creation and then one
//! snapshot record per call, flushing after every record as MemHawk does, so a
//! concurrent reader sees whole records or a torn tail. Frames carry a zstd
//! content checksum so corrupted fixtures are detected reliably.
//! [`encode_record`] frames any message, for crafting unusual files (such as
//! the old variant) in tests.

use std::fmt;
use std::io::{self, Write};

use prost::Message;
use zstd::bulk::Compressor;
use zstd::zstd_safe::CParameter;

use super::proto::{ProcessInfo, Snapshot};

/// Default zstd level of [`BinpbWriter::new`].
pub const DEFAULT_LEVEL: i32 = 3;

/// Encodes `message` as one record: u64 big-endian length, then one zstd
/// frame (with content checksum) of the protobuf encoding.
///
/// # Errors
/// If zstd fails (for instance an invalid `level`).
pub fn encode_record<M: Message>(message: &M, level: i32) -> io::Result<Vec<u8>> {
    let mut compressor = new_compressor(level)?;
    frame(&mut compressor, message)
}

fn new_compressor(level: i32) -> io::Result<Compressor<'static>> {
    let mut compressor = Compressor::new(level)?;
    compressor.set_parameter(CParameter::ChecksumFlag(true))?;
    Ok(compressor)
}

fn frame<M: Message>(compressor: &mut Compressor<'static>, message: &M) -> io::Result<Vec<u8>> {
    let compressed = compressor.compress(&message.encode_to_vec())?;
    let mut record = Vec::with_capacity(8 + compressed.len());
    record.extend_from_slice(&(compressed.len() as u64).to_be_bytes());
    record.extend_from_slice(&compressed);
    Ok(record)
}

/// Writes a ProcessInfo header and then snapshots, one record each.
pub struct BinpbWriter<W: Write> {
    inner: W,
    compressor: Compressor<'static>,
    offset: u64,
}

impl<W: Write> fmt::Debug for BinpbWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BinpbWriter")
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl<W: Write> BinpbWriter<W> {
    /// Starts a stream on `inner` (at zstd level [`DEFAULT_LEVEL`]) and
    /// writes the header record.
    ///
    /// # Errors
    /// If writing or compressing fails.
    pub fn new(inner: W, header: &ProcessInfo) -> io::Result<Self> {
        Self::with_level(inner, header, DEFAULT_LEVEL)
    }

    /// Like [`BinpbWriter::new`] with the given zstd level.
    ///
    /// # Errors
    /// If writing or compressing fails.
    pub fn with_level(inner: W, header: &ProcessInfo, level: i32) -> io::Result<Self> {
        let mut writer = Self {
            inner,
            compressor: new_compressor(level)?,
            offset: 0,
        };
        writer.write_message(header)?;
        Ok(writer)
    }

    /// Appends one snapshot record and flushes; returns the record's offset.
    ///
    /// # Errors
    /// If writing or compressing fails.
    pub fn write_snapshot(&mut self, snapshot: &Snapshot) -> io::Result<u64> {
        self.write_message(snapshot)
    }

    fn write_message<M: Message>(&mut self, message: &M) -> io::Result<u64> {
        let record = frame(&mut self.compressor, message)?;
        self.inner.write_all(&record)?;
        self.inner.flush()?;
        let offset = self.offset;
        self.offset += record.len() as u64;
        Ok(offset)
    }

    /// Bytes written so far (the offset of the next record).
    #[must_use]
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// Gives back the underlying writer.
    pub fn into_inner(self) -> W {
        self.inner
    }
}
