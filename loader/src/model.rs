//! The neutral profile model: what every format reader produces and the
//! ingest pipeline consumes, with nothing of any one file format in it.
//!
//! A profile is a stream of [`Event`]s: first the [`Source`] (what was
//! profiled), then [`Batch`]es of samples, each at one time, each sample a
//! stack (named by a source-local key, its [`Frame`]s given once by the
//! reader) and one value per [`ValueType`]. Frames are either addresses,
//! resolved through the [`Mapping`]s in force (MemHawk, pprof locations
//! without lines, perf's raw addresses), or already symbolized
//! ([`Symbol`]: perf script, bpftrace `sym+off`, folded stacks, pprof lines).
//!
//! How the values add up is the [`ValueSemantics`] of the source:
//! MemHawk's snapshots give each stack's *absolute current* values as of the
//! snapshot (gauges, turned into deltas by the loader), while pprof, perf,
//! bpftrace and folded stacks give *additive* samples over a period
//! (`formats::pprof`; stored by `ingest::continuous`, whose rows any
//! additive reader shares). Value types are owned where a format names its
//! own, samples may carry labels ([`SampleLabels`], numeric ones with
//! units), and batches carry their time and duration.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

/// One kind of value of a profile, as `type:sample:unit`
/// (`memory:inuse_space:bytes`, `cpu:cpu:nanoseconds`): the profile
/// type a query selects. Borrowed for formats with fixed types (MemHawk's
/// constants cost nothing per read), owned for formats that name their own
/// (pprof's sample types, perf's events).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ValueType {
    /// What was profiled: `memory`, `cpu`, `wall`, `mutex`...
    pub kind: Cow<'static, str>,
    /// Which value of it: `inuse_space`, `alloc_objects`, `samples`...
    pub sample: Cow<'static, str>,
    /// Its unit: `bytes`, `count`, `nanoseconds`.
    pub unit: Cow<'static, str>,
}

impl ValueType {
    /// A value type of fixed names.
    #[must_use]
    pub const fn fixed(kind: &'static str, sample: &'static str, unit: &'static str) -> Self {
        ValueType {
            kind: Cow::Borrowed(kind),
            sample: Cow::Borrowed(sample),
            unit: Cow::Borrowed(unit),
        }
    }

    /// A value type of names read from a profile.
    #[must_use]
    pub fn named(kind: &str, sample: &str, unit: &str) -> Self {
        ValueType {
            kind: Cow::Owned(kind.to_string()),
            sample: Cow::Owned(sample.to_string()),
            unit: Cow::Owned(unit.to_string()),
        }
    }

    /// The continuous-profile type name of the value: `sample:unit`
    /// (`cpu:nanoseconds`, `alloc_space:bytes`), as `go tool pprof` names
    /// sample types and the `cp_*` tables store them.
    #[must_use]
    pub fn profile_type(&self) -> String {
        format!("{}:{}", self.sample, self.unit)
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.kind, self.sample, self.unit)
    }
}

/// How a source's values combine over time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueSemantics {
    /// Each batch gives, for the stacks that changed since the previous
    /// batch, their absolute values as of the batch's time; a stack not
    /// listed keeps its last value (MemHawk snapshots: live bytes are a
    /// gauge, allocations since start a counter). The loader stores the
    /// change of each stack's value (delta) and its current value.
    AsOfSnapshot,
    /// Each batch's values are additive counts or durations over its
    /// period (`duration_ns` from `time_ns`): pprof, perf script, bpftrace
    /// and folded stacks. Summing over any time range is meaningful.
    Additive,
}

/// A key/value label of a profile or a sample (`service=api`,
/// `version=1.2`): the series a profile belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label {
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
}

/// A module mapped into the profiled process (a MemHawk `ElfInfo`, a pprof
/// `Mapping`, a perf `mmap` event): what turns an absolute address into a
/// file and a file address.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mapping {
    /// The module's path on the profiled machine as the profile gives it;
    /// empty when the profile leaves the main program unnamed.
    pub path: String,
    /// GNU build id (hex), when the profile records it.
    pub build_id: Option<String>,
    /// Load bias: absolute address minus the address in the ELF file
    /// (MemHawk's `dlpi_addr`; for a pprof mapping
    /// `memory_start - file_offset` of its executable segment).
    pub bias: u64,
    /// The absolute address ranges the module occupies, half-open (its
    /// loaded segments; one range for a pprof or perf mapping). An address
    /// belongs to the module only inside one of them.
    pub ranges: Vec<Range<u64>>,
    /// File offset of the first range (pprof `file_offset`, perf `pgoff`);
    /// 0 where the profile gives segments by address (MemHawk).
    pub file_offset: u64,
}

/// A numeric label of a sample (pprof's `num_label`: Go heap profiles'
/// `bytes` = object size), with its unit when the profile gives one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NumLabel {
    /// The key.
    pub key: String,
    /// The value.
    pub value: i64,
    /// The unit (`bytes`, `nanoseconds`), when given.
    pub unit: Option<String>,
}

/// The labels of some samples of a batch, on top of the source's
/// (pprof sample labels, a perf sample's process or thread).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SampleLabels {
    /// String labels in profile order; a key may repeat.
    pub labels: Vec<Label>,
    /// Numeric labels in profile order.
    pub num_labels: Vec<NumLabel>,
}

/// An already-symbolized frame, as text profiles give them.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Symbol {
    /// Function name (demangled).
    pub function: String,
    /// Source file, if known.
    pub file: Option<String>,
    /// Source line, if known.
    pub line: Option<u32>,
    /// Module name (`libc.so.6`), if known.
    pub module: Option<String>,
}

/// One frame of a stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Frame {
    /// An absolute code address, symbolized through the mappings in force.
    /// In an unwound stack every frame but the leaf is a return address
    /// (the symbolizer looks it up at `addr - 1`).
    Address(u64),
    /// A frame the profile names itself.
    Symbol(Symbol),
}

/// What was profiled, before any sample.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Source {
    /// A stable identity of the profiled stream (for MemHawk: process name,
    /// pid and start time), the same from any copy of the file: what
    /// resuming and deduplication key on.
    pub identity: Vec<Vec<u8>>,
    /// Process id, when known.
    pub pid: u32,
    /// Short process name.
    pub name: String,
    /// The main program's path on the profiled machine, when known.
    pub main_path: String,
    /// Process start time, ns since the epoch (0 when unknown).
    pub start_ns: u64,
    /// Labels of every sample of the source.
    pub labels: Vec<Label>,
    /// Sampling period, in the unit of the first value type (pprof's
    /// `period`, perf's sample period); 0 when not sampled (MemHawk).
    pub period: i64,
    /// What the period counts (`cpu:nanoseconds`, pprof's `period_type`
    /// as `type:unit`); empty when unknown.
    pub period_type: String,
    /// The identity earlier builds gave the same source, when it differs
    /// and was asked for (text formats: see
    /// [`crate::formats::text::legacy_identity`]); empty otherwise.
    pub legacy_identity: Vec<Vec<u8>>,
}

/// Samples at one time, in a compact layout: sample `i` is the stack
/// `stacks[i]` with the values `values[i * n .. (i + 1) * n]`, `n` the
/// number of the source's value types.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Batch {
    /// Time, ns since the epoch.
    pub time_ns: u64,
    /// Period the values cover, ns (0 for [`ValueSemantics::AsOfSnapshot`]).
    pub duration_ns: u64,
    /// The mappings from now on, when they changed (`None`: as before).
    pub mappings: Option<Vec<Mapping>>,
    /// Each sample's stack, a source-local key whose frames
    /// [`crate::formats::ProfileReader::stack`] gives.
    pub stacks: Vec<u64>,
    /// The values, row-major.
    pub values: Vec<i64>,
    /// The whole process's values at this time when the source reports
    /// them (MemHawk's snapshot total), else `None` (the sum of its stacks).
    pub total: Option<Vec<i64>>,
    /// Each sample's labels as an index into [`Batch::label_sets`]; empty
    /// when no sample has labels of its own (MemHawk).
    pub sample_labels: Vec<u32>,
    /// The distinct label sets of the samples.
    pub label_sets: Vec<SampleLabels>,
}

impl Batch {
    /// Number of samples.
    #[must_use]
    pub fn len(&self) -> usize {
        self.stacks.len()
    }

    /// Whether the batch has no sample.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }

    /// The labels of sample `i`, if it has any of its own.
    #[must_use]
    pub fn labels_of(&self, i: usize) -> Option<&SampleLabels> {
        self.sample_labels
            .get(i)
            .and_then(|&s| self.label_sets.get(s as usize))
    }
}

/// One unit of a profile stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// What was profiled; first, once.
    Source(Source),
    /// Samples at one time.
    Batch(Batch),
}
