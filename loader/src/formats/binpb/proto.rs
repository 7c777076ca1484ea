//! The protobuf messages of a MemHawk `.binpb` stream (proto3, package
//! `memhawk.proto`), written by hand with `prost` derives.
//!
//! Field numbers follow `shared/reference/binpb-format.md` exactly. The Rust
//! field names are the snake_case forms of the proto names (`traceId` becomes
//! `trace_id`, `loadedSo` becomes `loaded_so`, and so on). This module owns the
//! wire schema only; framing lives in [`super::reader`] / [`super::writer`] and
//! id bookkeeping in [`super::dict`].

/// Live and cumulative allocation values, for one trace or the whole process.
///
/// `size`, `active` and `overhead` are live values (they go up and down and
/// may briefly be negative for one trace); `total_count` and `total_bytes` are
/// cumulative and never decrease.
#[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
pub struct AllocSummary {
    /// `size` (1): live requested bytes.
    #[prost(int64, tag = "1")]
    pub size: i64,
    /// `active` (2): live allocation count.
    #[prost(int64, tag = "2")]
    pub active: i64,
    /// `overhead` (3): live alignment/overhead bytes.
    #[prost(int64, tag = "3")]
    pub overhead: i64,
    /// `totalCount` (4): allocations since start.
    #[prost(uint64, tag = "4")]
    pub total_count: u64,
    /// `totalBytes` (5): bytes allocated since start.
    #[prost(uint64, tag = "5")]
    pub total_bytes: u64,
}

/// The absolute value of one trace at a snapshot's timestamp.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct TracedAllocSummary {
    /// `traceId` (1): stack trace id; bit 31 set means the profiler's own.
    #[prost(uint32, tag = "1")]
    pub trace_id: u32,
    /// `actual` (2): values of that trace (absolute, not a delta).
    #[prost(message, optional, tag = "2")]
    pub actual: Option<AllocSummary>,
}

/// One entry of the incremental frame dictionary.
#[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
pub struct StacktracePtr {
    /// `ptrId` (1): frame id.
    #[prost(uint32, tag = "1")]
    pub ptr_id: u32,
    /// `ptrAddr` (2): absolute code address (return address minus 1).
    #[prost(uint64, tag = "2")]
    pub ptr_addr: u64,
}

/// One entry of the incremental trace dictionary.
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct Stacktrace {
    /// `traceId` (1).
    #[prost(uint32, tag = "1")]
    pub trace_id: u32,
    /// `ptrId` (2): frame ids, innermost (leaf) first.
    #[prost(uint32, repeated, tag = "2")]
    pub ptr_id: Vec<u32>,
}

/// One program header of a loaded module.
#[derive(Clone, Copy, PartialEq, Eq, Hash, ::prost::Message)]
pub struct Segment {
    /// `addr` (1): `p_vaddr`.
    #[prost(uint64, tag = "1")]
    pub addr: u64,
    /// `size` (2): `p_memsz`.
    #[prost(uint64, tag = "2")]
    pub size: u64,
}

/// One loaded module (main program, shared library, vdso).
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct ElfInfo {
    /// `filename` (1): path as the loader saw it; `/proc/self/exe` or empty
    /// for the main program.
    #[prost(string, tag = "1")]
    pub filename: String,
    /// `addr` (2): load bias (`dlpi_addr`).
    #[prost(uint64, tag = "2")]
    pub addr: u64,
    /// `segments` (3): every program header.
    #[prost(message, repeated, tag = "3")]
    pub segments: Vec<Segment>,
}

/// The header record of a stream (record 0).
#[derive(Clone, PartialEq, Eq, Hash, ::prost::Message)]
pub struct ProcessInfo {
    /// `processShortName` (1).
    #[prost(string, tag = "1")]
    pub process_short_name: String,
    /// `processFullPath` (2).
    #[prost(string, tag = "2")]
    pub process_full_path: String,
    /// `pid` (3).
    #[prost(uint32, tag = "3")]
    pub pid: u32,
    /// `startTimestamp` (4): ns since the Unix epoch.
    #[prost(uint64, tag = "4")]
    pub start_timestamp: u64,
}

/// One flush of the profiler (every record after the header).
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Snapshot {
    /// `timestamp` (1): ns since the Unix epoch.
    #[prost(uint64, tag = "1")]
    pub timestamp: u64,
    /// `changed` (2): traces touched since the previous snapshot, each with
    /// its absolute value at `timestamp`.
    #[prost(message, repeated, tag = "2")]
    pub changed: Vec<TracedAllocSummary>,
    /// `ptrIds` (3): new frame ids only.
    #[prost(message, repeated, tag = "3")]
    pub ptr_ids: Vec<StacktracePtr>,
    /// `stacktraces` (4): new traces only.
    #[prost(message, repeated, tag = "4")]
    pub stacktraces: Vec<Stacktrace>,
    /// `loadedSo` (5): module map; in the first snapshots and whenever the
    /// modules change.
    #[prost(message, repeated, tag = "5")]
    pub loaded_so: Vec<ElfInfo>,
    /// `process` (6): usually unset (the header record carries it).
    #[prost(message, optional, tag = "6")]
    pub process: Option<ProcessInfo>,
    /// `total` (7): whole-process values, same semantics as `changed`.
    #[prost(message, optional, tag = "7")]
    pub total: Option<AllocSummary>,
}

/// Trace ids with this bit set are the profiler's own allocations.
pub const PROFILER_TRACE_BIT: u32 = 1 << 31;

/// Whether `trace_id` belongs to the profiler's own allocations (bit 31 set).
#[must_use]
pub const fn is_profiler_trace(trace_id: u32) -> bool {
    trace_id & PROFILER_TRACE_BIT != 0
}
