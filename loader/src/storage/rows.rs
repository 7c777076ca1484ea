//! The rows the loader writes, and their RowBinary encoding (the embedded
//! sink sends it inline; the server sink sends the same rows through the
//! `clickhouse` crate).
//!
//! The primitives are the project's one RowBinary writer,
//! [`flamehouse_udf::rowbinary`].

pub(crate) use flamehouse_udf::rowbinary::push_uleb as uleb;

/// Appends a RowBinary `String` (a UTF-8 `&str`).
pub(crate) fn string(buf: &mut Vec<u8>, s: &str) {
    flamehouse_udf::rowbinary::push_string(buf, s.as_bytes());
}

/// A table row with a RowBinary encoding in declared column order.
pub trait RowBinary {
    /// The table (without database).
    const TABLE: &'static str;
    /// `name Type, ...` in encoding order (the `file()` structure).
    const STRUCTURE: &'static str;
    /// Appends this row.
    fn encode(&self, buf: &mut Vec<u8>);
}

/// A row shared between the structures of a load (a frame of many
/// stacks) is encoded as the row itself.
impl<T: RowBinary> RowBinary for std::sync::Arc<T> {
    const TABLE: &'static str = T::TABLE;
    const STRUCTURE: &'static str = T::STRUCTURE;
    fn encode(&self, buf: &mut Vec<u8>) {
        (**self).encode(buf);
    }
}

/// `processes`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProcessRow {
    /// Stable id.
    pub process_id: u64,
    /// Process id.
    pub pid: u32,
    /// Short name.
    pub name: String,
    /// Executable path.
    pub full_path: String,
    /// Start, ns since the epoch (DateTime64(9)).
    pub start_time: i64,
    /// Source file.
    pub source: String,
    /// Load generation (part of the batches' deduplication tokens).
    pub generation: u64,
}

impl RowBinary for ProcessRow {
    const TABLE: &'static str = "processes";
    const STRUCTURE: &'static str = "process_id UInt64, pid UInt32, name String, full_path String, start_time DateTime64(9, 'UTC'), source String, generation UInt64";
    fn encode(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.process_id.to_le_bytes());
        b.extend_from_slice(&self.pid.to_le_bytes());
        string(b, &self.name);
        string(b, &self.full_path);
        b.extend_from_slice(&self.start_time.to_le_bytes());
        string(b, &self.source);
        b.extend_from_slice(&self.generation.to_le_bytes());
    }
}

/// `load_intents`: a batch's byte range, written before its rows.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IntentRow {
    /// Process.
    pub process_id: u64,
    /// Its load generation.
    pub generation: u64,
    /// First byte of the batch's records.
    pub start_offset: u64,
    /// End of its last record.
    pub end_offset: u64,
}

impl RowBinary for IntentRow {
    const TABLE: &'static str = "load_intents";
    const STRUCTURE: &'static str =
        "process_id UInt64, generation UInt64, start_offset UInt64, end_offset UInt64";
    fn encode(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.process_id.to_le_bytes());
        b.extend_from_slice(&self.generation.to_le_bytes());
        b.extend_from_slice(&self.start_offset.to_le_bytes());
        b.extend_from_slice(&self.end_offset.to_le_bytes());
    }
}

/// `frames`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FrameRow {
    /// Stable hash of the label.
    pub frame_id: u64,
    /// The label shown in flame graphs.
    pub label: String,
    /// Function name.
    pub function: String,
    /// Source file, if known.
    pub file: String,
    /// Line, 0 if unknown.
    pub line: u32,
    /// Module basename.
    pub module: String,
}

impl RowBinary for FrameRow {
    const TABLE: &'static str = "frames";
    const STRUCTURE: &'static str =
        "frame_id UInt64, label String, function String, file String, line UInt32, module String";
    fn encode(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.frame_id.to_le_bytes());
        string(b, &self.label);
        string(b, &self.function);
        string(b, &self.file);
        b.extend_from_slice(&self.line.to_le_bytes());
        string(b, &self.module);
    }
}

/// `stacks`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StackRow {
    /// Stable hash of the labels.
    pub stack_id: u64,
    /// Frame ids, root first.
    pub frame_ids: Vec<u64>,
    /// Labels, root first.
    pub labels: Vec<String>,
}

impl RowBinary for StackRow {
    const TABLE: &'static str = "stacks";
    const STRUCTURE: &'static str =
        "stack_id UInt64, frame_ids Array(UInt64), labels Array(String)";
    fn encode(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.stack_id.to_le_bytes());
        uleb(b, self.frame_ids.len() as u64);
        for f in &self.frame_ids {
            b.extend_from_slice(&f.to_le_bytes());
        }
        uleb(b, self.labels.len() as u64);
        for l in &self.labels {
            string(b, l);
        }
    }
}

/// `process_stacks` (migration 13): a stack some sample of a process has,
/// with its labels, so a memory view joins the process's stacks only.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProcessStackRow {
    /// Process.
    pub process_id: u64,
    /// Stable hash of the labels.
    pub stack_id: u64,
    /// Labels, root first.
    pub labels: Vec<String>,
}

impl RowBinary for ProcessStackRow {
    const TABLE: &'static str = "process_stacks";
    const STRUCTURE: &'static str = "process_id UInt64, stack_id UInt64, labels Array(String)";
    fn encode(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.process_id.to_le_bytes());
        b.extend_from_slice(&self.stack_id.to_le_bytes());
        uleb(b, self.labels.len() as u64);
        for l in &self.labels {
            string(b, l);
        }
    }
}

/// `samples`: a stack's absolute values at `ts` and the change since its
/// previous row.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SampleRow {
    /// Process.
    pub process_id: u64,
    /// Milliseconds since the epoch (DateTime64(3)).
    pub ts: i64,
    /// Stack.
    pub stack_id: u64,
    /// Live bytes.
    pub size: i64,
    /// Live allocations.
    pub active: i64,
    /// Live overhead bytes.
    pub overhead: i64,
    /// Allocations since start.
    pub total_count: u64,
    /// Bytes allocated since start.
    pub total_bytes: u64,
    /// Change of `size`.
    pub size_delta: i64,
    /// Change of `active`.
    pub active_delta: i64,
    /// Change of `total_count`.
    pub count_delta: i64,
    /// Change of `total_bytes`.
    pub bytes_delta: i64,
}

impl SampleRow {
    /// Bytes of one encoded row (twelve 8-byte columns).
    pub const ENCODED_LEN: usize = 96;

    /// The row [`RowBinary::encode`] wrote into `b` (at least
    /// [`SampleRow::ENCODED_LEN`] bytes).
    pub fn decode(b: &[u8]) -> SampleRow {
        let f = |i: usize| i64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
        SampleRow {
            process_id: f(0) as u64,
            ts: f(1),
            stack_id: f(2) as u64,
            size: f(3),
            active: f(4),
            overhead: f(5),
            total_count: f(6) as u64,
            total_bytes: f(7) as u64,
            size_delta: f(8),
            active_delta: f(9),
            count_delta: f(10),
            bytes_delta: f(11),
        }
    }
}

impl RowBinary for SampleRow {
    const TABLE: &'static str = "samples";
    const STRUCTURE: &'static str = "process_id UInt64, ts DateTime64(3, 'UTC'), stack_id UInt64, size Int64, active Int64, overhead Int64, total_count UInt64, total_bytes UInt64, size_delta Int64, active_delta Int64, count_delta Int64, bytes_delta Int64";
    fn encode(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.process_id.to_le_bytes());
        b.extend_from_slice(&self.ts.to_le_bytes());
        b.extend_from_slice(&self.stack_id.to_le_bytes());
        for v in [self.size, self.active, self.overhead] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&self.total_count.to_le_bytes());
        b.extend_from_slice(&self.total_bytes.to_le_bytes());
        for v in [
            self.size_delta,
            self.active_delta,
            self.count_delta,
            self.bytes_delta,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// `totals`: the whole process at one snapshot.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TotalRow {
    /// Process.
    pub process_id: u64,
    /// Milliseconds since the epoch.
    pub ts: i64,
    /// Live bytes.
    pub size: i64,
    /// Live allocations.
    pub active: i64,
    /// Live overhead bytes.
    pub overhead: i64,
    /// Allocations since start.
    pub total_count: u64,
    /// Bytes allocated since start.
    pub total_bytes: u64,
}

impl RowBinary for TotalRow {
    const TABLE: &'static str = "totals";
    const STRUCTURE: &'static str = "process_id UInt64, ts DateTime64(3, 'UTC'), size Int64, active Int64, overhead Int64, total_count UInt64, total_bytes UInt64";
    fn encode(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.process_id.to_le_bytes());
        b.extend_from_slice(&self.ts.to_le_bytes());
        for v in [self.size, self.active, self.overhead] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&self.total_count.to_le_bytes());
        b.extend_from_slice(&self.total_bytes.to_le_bytes());
    }
}

/// `samples_1m`: a stack's changes within one minute (summed again by the
/// table on merge and by the queries).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RollupRow {
    /// Process.
    pub process_id: u64,
    /// Start of the minute, seconds since the epoch (DateTime).
    pub minute: u32,
    /// Stack.
    pub stack_id: u64,
    /// Change of live bytes.
    pub size_delta: i64,
    /// Change of live allocations.
    pub active_delta: i64,
}

impl RowBinary for RollupRow {
    const TABLE: &'static str = "samples_1m";
    const STRUCTURE: &'static str = "process_id UInt64, minute DateTime('UTC'), stack_id UInt64, size_delta Int64, active_delta Int64";
    fn encode(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.process_id.to_le_bytes());
        b.extend_from_slice(&self.minute.to_le_bytes());
        b.extend_from_slice(&self.stack_id.to_le_bytes());
        b.extend_from_slice(&self.size_delta.to_le_bytes());
        b.extend_from_slice(&self.active_delta.to_le_bytes());
    }
}

/// `load_progress`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProgressRow {
    /// Source file (absolute path).
    pub source: String,
    /// Process.
    pub process_id: u64,
    /// End of the last stored record.
    pub offset: u64,
    /// Snapshots stored so far.
    pub snapshots: u64,
    /// Time of the last stored snapshot, ms.
    pub last_ts: i64,
}

impl RowBinary for ProgressRow {
    const TABLE: &'static str = "load_progress";
    const STRUCTURE: &'static str = "source String, process_id UInt64, offset UInt64, snapshots UInt64, last_ts DateTime64(3, 'UTC')";
    fn encode(&self, b: &mut Vec<u8>) {
        string(b, &self.source);
        b.extend_from_slice(&self.process_id.to_le_bytes());
        b.extend_from_slice(&self.offset.to_le_bytes());
        b.extend_from_slice(&self.snapshots.to_le_bytes());
        b.extend_from_slice(&self.last_ts.to_le_bytes());
    }
}

/// FNV-1a 64: a stable id hash (the same on every machine and version).
pub fn stable_hash(parts: &[&[u8]]) -> u64 {
    stable_hash_of(parts.iter().copied())
}

/// [`stable_hash`] of parts given one by one (a deep stack's labels,
/// without a list of them).
#[must_use]
pub fn stable_hash_of<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (i, p) in parts.into_iter().enumerate() {
        if i > 0 {
            // A separator no label contains keeps ["ab"] and ["a","b"] apart.
            h ^= 0xff;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        for &b in p.iter() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}
