//! Continuous profiles into the tables of migration 6
//! (`sql/schema/006_continuous.sql`): each batch of an additive profile
//! (model events of any reader: pprof today, perf script, bpftrace and
//! folded stacks through the same code) becomes rows for the shared
//! `frames` / `stacks` dictionaries and for `cp_series`, `cp_stacks`
//! (migration 11: the stacks per service and day the queries join),
//! `cp_samples` and `cp_profiles`, inserted so that a profile is stored
//! whole or not at all.
//!
//! This module owns the row building from model events ([`reader_rows`];
//! [`pprof_rows`] for a decoded pprof), address frames through the
//! symbolizer with the batch's mappings, storing the rows ([`store`]), the
//! load of one file ([`load_file`], [`load_reader`], [`load_pprof`]), user
//! labels ([`parse_label`]) and the retention ([`set_retention`]). Queries
//! are in [`crate::continuous_query`].
//!
//! # Decisions
//!
//! - **Profile types**: each pprof sample type is its own profile type,
//!   named `kind:unit` (`cpu:nanoseconds`, `samples:count`,
//!   `alloc_space:bytes`); a zero value stores no row (as pprof's merge
//!   drops all-zero samples, and a zero adds nothing to any sum).
//! - **Series labels**: the `service` label (from [`ContinuousOptions::service`],
//!   default [`DEFAULT_SERVICE`]), then the user labels (`--label k=v`),
//!   then the sample's pprof string labels on top (a sample label wins over
//!   a user label with the same key; the resulting `service` label is the
//!   row's `service` column). A key repeated in one sample keeps its
//!   distinct values joined by `,` in sorted order. `series_id` is the
//!   [`stable_hash`] of the type and the sorted `(key, value)` pairs.
//! - **Numeric labels** (Go heap's `bytes` = object size) are per-sample
//!   values, not series keys (every object size would be a series): they go
//!   to `cp_samples.num_labels` (key -> value), and their units, one per key
//!   per profile as pprof keeps them (the first unit given), to
//!   `cp_profiles.num_units`.
//! - **Span ids** (`span_id`, written by Go's and OpenTelemetry's
//!   profilers on CPU samples) are per-sample too: the keys of
//!   [`ContinuousOptions::span_labels`] (default [`DEFAULT_SPAN_LABELS`])
//!   are no series labels; the first of them a sample has gives
//!   `cp_samples.span_id` ([`span_id_value`]: the 16-hex id as a `UInt64`,
//!   0 for none), so the series count does not grow with the spans. A
//!   sample carrying one of those keys twice with different values is an
//!   error naming the file and the sample.
//! - **Frames**: the function name of each line, inlined lines expanded
//!   (pprof's `-top` and `-traces` name frames so), labelled at the
//!   symbolizer's granularity; a location with no function is an address
//!   the symbolizer resolves through the mappings (callers at `addr - 1`),
//!   else labels `module+0xOFFSET` (module-relative:
//!   `address - memory_start + file_offset`), or `0xADDRESS` without a
//!   mapping, as the memory loader labels what it cannot symbolize.
//! - **Profiles**: one per batch of the reader (pprof: one); the id hashes
//!   the source identity (pprof: the file's bytes, and `--time` /
//!   `--duration` when given), the batch's index after the first, the
//!   service, the user labels, and the span keys and the symbolizer's
//!   granularity when not the default.
//!   `frame_id` and `stack_id` are the memory loader's hashes, so one stack
//!   is one row whatever profile uses it.
//! - **Rows**: samples with the same series, stack and numeric labels are
//!   summed (pprof's merge), so a profile stores one row per distinct stack
//!   and series per type; an empty stack is kept (its value counts in the
//!   totals, on the flame graph's root).
//! - **Time**: [`ContinuousOptions::time_ns`], else the batch's time
//!   (pprof's `time_nanos`), else the time of the load; stored with
//!   millisecond precision.
//! - **Whole or nothing**: the profile id is a stable hash of the file's
//!   bytes, the service and the user labels; the tables are written in the
//!   order frames, stacks, series, `cp_stacks`, samples, profiles, and what of a profile
//!   is stored already is looked up first and not sent again
//!   ([`super::cp_batch::store_batch`], which stores many profiles per
//!   insert; [`store`] is a batch of one). A load that fails half-way is
//!   run again and stores what is missing; a listed profile is complete.
//!   Loading the same file twice stores it once. Text profiles (perf
//!   script, bpftrace, folded) hash the file with XXH3 since migration 10
//!   (FNV-1a before); in a database holding text profiles of earlier
//!   builds, a file's old id is computed too and kept when stored
//!   ([`adopt_legacy_ids`]), so those are not stored twice either.

use super::symbols::{symbolize_shared, FrameTable};
use crate::error::{Error, Result};
use crate::formats::pprof::{self, DecodeOptions, PprofProfile, PprofReader};
use crate::formats::{Format, ProfileReader, ReadOptions};
use crate::model::{Event, Frame, Source, ValueType};
use crate::storage::ident::Ident;
use crate::storage::rows::{
    stable_hash, stable_hash_of, string, uleb, FrameRow, RowBinary, StackRow,
};
use crate::storage::schema::SchemaOptions;
use crate::storage::{sql_string, Backend};
use crate::symbolize::{ModuleMap, Symbolizer, SymbolizerOptions};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The service of profiles loaded without one (OpenTelemetry's name for it).
pub const DEFAULT_SERVICE: &str = "unknown_service";

/// The label key holding the service.
pub const SERVICE_LABEL: &str = "service";

/// The pprof sample label keys read as span ids by default
/// ([`ContinuousOptions::span_labels`]): `span_id`, as Go's
/// `otel-profiling-go` and Pyroscope's SDKs write it. `span_name` stays a
/// series label (one per endpoint: bounded, and Pyroscope does the same);
/// `trace_id` is not written by those profilers: a profiler that tags it
/// can add it to the list (its 32-hex value is then stored hashed, and
/// only when the sample has no `span_id`).
pub const DEFAULT_SPAN_LABELS: &[&str] = &["span_id"];

/// The selector key that filters on `cp_samples.span_id`, whichever label
/// key carried the span id at load.
pub const SPAN_ID_KEY: &str = "span_id";

/// Longest label key accepted, in bytes.
pub const MAX_LABEL_KEY_LEN: usize = 128;

/// Options of a continuous-profile load.
#[derive(Debug, Clone)]
pub struct ContinuousOptions {
    /// Database. Default: `flamehouse`.
    pub database: Ident,
    /// The `service` label of every series. Default: [`DEFAULT_SERVICE`]
    /// (a pprof sample label `service` overrides it).
    pub service: Option<String>,
    /// User labels (`--label key=value`, repeatable), on every series.
    /// Default: none.
    pub labels: Vec<(String, String)>,
    /// Collection time, ns since the epoch. Default: the profile's own
    /// (`time_nanos`), else the time of the load.
    pub time_ns: Option<i64>,
    /// pprof decoding (size cap, `drop_frames`). Default: [`DecodeOptions::default`].
    pub decode: DecodeOptions,
    /// The file's format. Default: detected from its first bytes
    /// ([`crate::formats::detect`]).
    pub format: Option<Format>,
    /// Symbolization of address frames (pprof locations without a function,
    /// raw addresses). Default: [`SymbolizerOptions::default`].
    pub symbolizer: SymbolizerOptions,
    /// The main program's binary on this machine. Default: the profile's
    /// own path (pprof's first mapping), under the sysroot.
    pub main_binary: Option<PathBuf>,
    /// Sample label keys that hold span ids: stored per sample in
    /// `cp_samples.span_id`, never as series labels (the first of them a
    /// sample has wins). Default: [`DEFAULT_SPAN_LABELS`]; empty keeps
    /// every label a series label.
    pub span_labels: Vec<String>,
    /// The text readers' options (perf script, bpftrace, folded stacks:
    /// `load`'s `--perf-*`, `--bpftrace-labels`, `--folded-type`, `--time`,
    /// `--duration`); pprof's are [`ContinuousOptions::decode`]. Default:
    /// [`ReadOptions::default`].
    pub read: ReadOptions,
    /// Most series (distinct label sets) of one profile; a profile of
    /// more is refused (each costs ~3 KB on its way to the engine).
    /// Default: [`DEFAULT_MAX_SERIES`].
    pub max_series: u64,
    /// Longest name one frame (function, file, module) or label (key,
    /// value, service) may have, in bytes; a profile holding a longer one
    /// is refused naming it, before anything of it reaches the engine (a
    /// 200 MiB function name ran the engine out of memory). Default:
    /// [`DEFAULT_MAX_NAME_BYTES`].
    pub max_name_bytes: u64,
}

/// Default of [`ContinuousOptions::max_name_bytes`]: 1 MiB, far past the
/// longest names compilers write (C++ templates reach tens of KiB).
pub const DEFAULT_MAX_NAME_BYTES: u64 = 1 << 20;

/// Default of [`ContinuousOptions::max_series`]: 256 Ki series in one
/// profile, ~0.8 GB at worst. A profile of a service holds a handful; a
/// label with a value per sample (a request id) makes one per sample,
/// which the refusal says (1.5 M such samples took 4.3 GB).
pub const DEFAULT_MAX_SERIES: u64 = 256 << 10;

impl Default for ContinuousOptions {
    fn default() -> Self {
        ContinuousOptions {
            database: crate::storage::schema::default_database(),
            service: None,
            labels: Vec::new(),
            time_ns: None,
            decode: DecodeOptions::default(),
            format: None,
            symbolizer: SymbolizerOptions::default(),
            main_binary: None,
            span_labels: DEFAULT_SPAN_LABELS
                .iter()
                .map(|k| (*k).to_string())
                .collect(),
            read: ReadOptions::default(),
            max_series: DEFAULT_MAX_SERIES,
            max_name_bytes: DEFAULT_MAX_NAME_BYTES,
        }
    }
}

/// A character of a label name a selector takes bare (and `--label`
/// accepts): a letter or digit of any script, `_`, `.`, `-` or `/`
/// (`user-id`, `app.kubernetes.io/name`, `ключ`); not an operator, quote,
/// comma or brace.
#[must_use]
pub fn is_label_key_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '.' | '-' | '/')
}

/// Whether `key` may name a label the user gives (`--label`,
/// `--span-label`, `--bpftrace-labels`): a letter of any script or `_`,
/// then [`is_label_key_char`]s, at most [`MAX_LABEL_KEY_LEN`] bytes. Every
/// such key can be written bare in a selector (`{user-id="7"}`), so what a
/// load stores can always be selected as typed.
#[must_use]
pub fn is_label_key(key: &str) -> bool {
    let mut c = key.chars();
    matches!(c.next(), Some(f) if f.is_alphabetic() || f == '_')
        && c.all(is_label_key_char)
        && key.len() <= MAX_LABEL_KEY_LEN
}

/// Whether `key` can be a stored label's key a query names (a selector's
/// matcher, `series --by`): what pprof files carry (`user-id`, `ключ`,
/// `a b`), not empty, no control characters, at most
/// [`MAX_LABEL_KEY_LEN`] bytes. It reaches SQL only as a string literal
/// (`labels['user-id']`) or a backquoted, escaped column alias.
#[must_use]
pub fn is_stored_label_key(key: &str) -> bool {
    !key.is_empty() && key.len() <= MAX_LABEL_KEY_LEN && !key.chars().any(char::is_control)
}

/// Parses a user label `key=value` (`--label`); the key must satisfy
/// [`is_label_key`] and may not be `service` (use the service option).
///
/// # Errors
/// [`Error::Usage`] saying what is wrong.
pub fn parse_label(s: &str) -> Result<(String, String)> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| Error::Usage(format!("label {s:?}: expected key=value")))?;
    if !is_label_key(k) {
        return Err(Error::Usage(format!(
            "label {s:?}: the key must be letters, digits, `_`, `.`, `-` or `/`, starting with a \
             letter or `_` (at most {MAX_LABEL_KEY_LEN} bytes)"
        )));
    }
    if k == SERVICE_LABEL {
        return Err(Error::Usage(format!(
            "label {s:?}: the service is set with --service, not as a label"
        )));
    }
    // `{span_id="..."}` selects the samples' span ids, never a series
    // label: a load-wide span id would be stored where no selector finds it.
    if k == SPAN_ID_KEY {
        return Err(Error::Usage(format!(
            "label {s:?}: `{SPAN_ID_KEY}` names the samples' span ids (pprof sample labels, \
             --span-labels), which a selector `{{{SPAN_ID_KEY}=...}}` reads; a series label of \
             that name could not be selected"
        )));
    }
    Ok((k.to_string(), v.to_string()))
}

/// Checks the label keys of a load's flags: `labels` (`--label`) and
/// `sample_keys`, the keys a reader gives each sample (`--bpftrace-labels`):
/// a key given twice would keep one of its values unsaid (the last
/// `--label`; the sample's over the user's), and `service` is the
/// service option's.
///
/// # Errors
/// [`Error::Usage`] naming the key and its flags.
pub fn check_label_keys(labels: &[(String, String)], sample_keys: &[String]) -> Result<()> {
    for (i, (k, _)) in labels.iter().enumerate() {
        if labels[..i].iter().any(|(p, _)| p == k) {
            return Err(Error::Usage(format!(
                "--label {k}: the key is given twice (a series has one value per key)"
            )));
        }
    }
    for (i, k) in sample_keys.iter().enumerate() {
        if k == SERVICE_LABEL {
            return Err(Error::Usage(format!(
                "--bpftrace-labels {k}: the service is set with --service, not as a label"
            )));
        }
        if sample_keys[..i].contains(k) {
            return Err(Error::Usage(format!(
                "--bpftrace-labels {k}: the name is given twice"
            )));
        }
        if labels.iter().any(|(p, _)| p == k) {
            return Err(Error::Usage(format!(
                "--label {k} and --bpftrace-labels {k}: the key is given twice (a series has one \
                 value per key)"
            )));
        }
    }
    Ok(())
}

/// The stored span id of a label value: 1 to 16 hex digits (a W3C /
/// OpenTelemetry span id, any case) as their 64-bit number; an empty value
/// 0 (no span); anything else the [`stable_hash`] of its bytes, so a query
/// for the same text finds it.
#[must_use]
pub fn span_id_value(v: &str) -> u64 {
    if v.is_empty() {
        return 0;
    }
    if v.len() <= 16 && v.bytes().all(|b| b.is_ascii_hexdigit()) {
        return u64::from_str_radix(v, 16).unwrap_or(0);
    }
    stable_hash(&[b"span", v.as_bytes()])
}

/// Checks that no sample gives one span key two different values (a
/// sample has one span): the error names the file and the sample.
fn check_span_labels(
    batch: &crate::model::Batch,
    span_labels: &[String],
    source: &str,
) -> Result<()> {
    if span_labels.is_empty() {
        return Ok(());
    }
    let mut checked: HashSet<u32> = HashSet::new();
    for (i, &set) in batch.sample_labels.iter().enumerate() {
        if !checked.insert(set) {
            continue;
        }
        let Some(sl) = batch.label_sets.get(set as usize) else {
            continue;
        };
        for key in span_labels {
            let mut vals = sl.labels.iter().filter(|l| &l.key == key).map(|l| &l.value);
            if let Some(first) = vals.next() {
                if let Some(other) = vals.find(|v| *v != first) {
                    return Err(Error::Usage(format!(
                        "{source}: sample {i} has two span ids ({key}={first:?} and {key}={other:?})"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// The span keys of `span_labels` that `batch`'s samples have (in their
/// given order, which counts: a sample's span is its first; each once),
/// when they store it otherwise than the default span keys would (some key
/// of its samples is a span key under one and not the other); `None` when
/// they do not. Only such keys join the profile id: a file without the
/// keys (a folded or perf script file), or keys given with absent ones, is
/// the same profile (it was stored again, its totals counted twice).
fn effective_span_keys<'a>(
    batch: &crate::model::Batch,
    span_labels: &'a [String],
) -> Option<Vec<&'a str>> {
    let keys: HashSet<&str> = batch
        .label_sets
        .iter()
        .flat_map(|set| &set.labels)
        .map(|l| l.key.as_str())
        .collect();
    let differs = keys
        .iter()
        .any(|k| span_labels.iter().any(|s| s == k) != DEFAULT_SPAN_LABELS.contains(k));
    if !differs {
        return None;
    }
    let mut given: Vec<&str> = Vec::new();
    for k in span_labels {
        if keys.contains(k.as_str()) && !given.contains(&k.as_str()) {
            given.push(k);
        }
    }
    Some(given)
}

fn date(ms: i64) -> u16 {
    ms.div_euclid(86_400_000).clamp(0, i64::from(u16::MAX)) as u16
}

fn map_str(b: &mut Vec<u8>, m: &BTreeMap<String, String>) {
    uleb(b, m.len() as u64);
    for (k, v) in m {
        string(b, k);
        string(b, v);
    }
}

/// `cp_series`: the labels of a series on one day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesRow {
    /// Days since the epoch.
    pub date: u16,
    /// `kind:unit`.
    pub profile_type: String,
    /// The `service` label.
    pub service: String,
    /// Stable hash of the type and the labels.
    pub series_id: u64,
    /// Every label, `service` included.
    pub labels: BTreeMap<String, String>,
}

impl RowBinary for SeriesRow {
    const TABLE: &'static str = "cp_series";
    const STRUCTURE: &'static str = "date Date, profile_type LowCardinality(String), service LowCardinality(String), series_id UInt64, labels Map(LowCardinality(String), String)";
    fn encode(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.date.to_le_bytes());
        string(b, &self.profile_type);
        string(b, &self.service);
        b.extend_from_slice(&self.series_id.to_le_bytes());
        map_str(b, &self.labels);
    }
}

/// `cp_stacks` (migration 11): a stack some sample of `service` has on
/// `date`, with its labels (shared with the profile's resolved stack, not
/// copied).
#[derive(Debug, Clone)]
pub struct CpStackRow {
    /// The samples' `service` column.
    pub service: String,
    /// Days since the epoch.
    pub date: u16,
    /// As `stacks.stack_id`.
    pub stack_id: u64,
    /// The stack's resolved labels (root first), as `stacks.labels`.
    pub stack: Resolved,
}

impl RowBinary for CpStackRow {
    const TABLE: &'static str = "cp_stacks";
    const STRUCTURE: &'static str =
        "service LowCardinality(String), date Date, stack_id UInt64, labels Array(String)";
    fn encode(&self, b: &mut Vec<u8>) {
        string(b, &self.service);
        b.extend_from_slice(&self.date.to_le_bytes());
        b.extend_from_slice(&self.stack_id.to_le_bytes());
        self.stack.encode_labels(b);
    }
}

/// `cp_samples`: one stack's value in one series of one profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpSampleRow {
    /// `kind:unit`.
    pub profile_type: String,
    /// The `service` label.
    pub service: String,
    /// The series.
    pub series_id: u64,
    /// Milliseconds since the epoch.
    pub ts: i64,
    /// The stack (`stacks.stack_id`).
    pub stack_id: u64,
    /// The summed value.
    pub value: i64,
    /// The profile.
    pub profile_id: u64,
    /// Numeric labels, sorted by key.
    pub num_labels: Vec<(String, i64)>,
    /// The span the samples ran in ([`span_id_value`]), 0 for none.
    pub span_id: u64,
}

impl RowBinary for CpSampleRow {
    const TABLE: &'static str = "cp_samples";
    const STRUCTURE: &'static str = "profile_type LowCardinality(String), service LowCardinality(String), series_id UInt64, ts DateTime64(3, 'UTC'), stack_id UInt64, value Int64, profile_id UInt64, num_labels Map(LowCardinality(String), Int64), span_id UInt64";
    fn encode(&self, b: &mut Vec<u8>) {
        string(b, &self.profile_type);
        string(b, &self.service);
        b.extend_from_slice(&self.series_id.to_le_bytes());
        b.extend_from_slice(&self.ts.to_le_bytes());
        b.extend_from_slice(&self.stack_id.to_le_bytes());
        b.extend_from_slice(&self.value.to_le_bytes());
        b.extend_from_slice(&self.profile_id.to_le_bytes());
        uleb(b, self.num_labels.len() as u64);
        for (k, v) in &self.num_labels {
            string(b, k);
            b.extend_from_slice(&v.to_le_bytes());
        }
        b.extend_from_slice(&self.span_id.to_le_bytes());
    }
}

/// `cp_profiles`: one stored profile of one type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpProfileRow {
    /// The profile (one id for all types of one file).
    pub profile_id: u64,
    /// `kind:unit`.
    pub profile_type: String,
    /// The service given to the load.
    pub service: String,
    /// Collection time, ms.
    pub ts: i64,
    /// `duration_nanos`.
    pub duration_ns: i64,
    /// `period`.
    pub period: i64,
    /// `kind:unit` of the period, empty when absent.
    pub period_type: String,
    /// Sum of the type's values.
    pub total: i64,
    /// The type's rows in `cp_samples`: one per distinct stack, label set,
    /// span and numeric labels with a non-zero value, in every format (the
    /// number of samples is a `count` type's `total`). `profile list` shows
    /// it as `sample_rows`. Profiles stored before the tenth session hold
    /// pprof's sample records here, a text format's distinct stacks.
    pub sample_count: u64,
    /// Distinct series of the type.
    pub series_count: u64,
    /// The labels common to the whole profile (service and user labels).
    pub labels: BTreeMap<String, String>,
    /// Unit of each numeric label key.
    pub num_units: BTreeMap<String, String>,
    /// `pprof`, ...
    pub format: String,
    /// The file it was loaded from.
    pub source: String,
    /// How `profile_id` was computed: [`ID_SCHEME`] for rows this build
    /// writes; 0 (the column's default, migration 10) for rows of earlier
    /// builds, and for a profile finished under its legacy id.
    pub id_scheme: u8,
}

/// `cp_profiles.id_scheme` of the profiles this build stores: text
/// profiles identified by XXH3 of their bytes ([`crate::formats::text::identity`]),
/// pprof profiles by a hash of the profile as decompressed (a gzipped and
/// a raw copy are one profile). 0 is text profiles' FNV-1a
/// ([`crate::formats::text::legacy_identity`]), which builds before
/// migration 10 used; under 0 and 1 a pprof id hashed the file's bytes as
/// they were, compressed or not.
pub const ID_SCHEME: u8 = 2;

/// The formats whose identity changed with [`ID_SCHEME`] 1.
pub const TEXT_FORMATS: &[&str] = &["perf", "bpftrace", "folded"];

impl RowBinary for CpProfileRow {
    const TABLE: &'static str = "cp_profiles";
    const STRUCTURE: &'static str = "profile_id UInt64, profile_type LowCardinality(String), service LowCardinality(String), ts DateTime64(3, 'UTC'), duration_ns Int64, period Int64, period_type LowCardinality(String), total Int64, sample_count UInt64, series_count UInt64, labels Map(LowCardinality(String), String), num_units Map(LowCardinality(String), String), format LowCardinality(String), source String, id_scheme UInt8";
    fn encode(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.profile_id.to_le_bytes());
        string(b, &self.profile_type);
        string(b, &self.service);
        b.extend_from_slice(&self.ts.to_le_bytes());
        b.extend_from_slice(&self.duration_ns.to_le_bytes());
        b.extend_from_slice(&self.period.to_le_bytes());
        string(b, &self.period_type);
        b.extend_from_slice(&self.total.to_le_bytes());
        b.extend_from_slice(&self.sample_count.to_le_bytes());
        b.extend_from_slice(&self.series_count.to_le_bytes());
        map_str(b, &self.labels);
        map_str(b, &self.num_units);
        string(b, &self.format);
        string(b, &self.source);
        b.push(self.id_scheme);
    }
}

/// The rows of one profile (every type), ready for [`store`].
#[derive(Debug, Clone, Default)]
pub struct ProfileRows {
    /// The profile id (see the module docs).
    pub profile_id: u64,
    /// Distinct frames of its stacks (shared with the stacks holding them).
    pub frames: Vec<Arc<FrameRow>>,
    /// Distinct stacks.
    pub stacks: Vec<Resolved>,
    /// One row per series and type.
    pub series: Vec<SeriesRow>,
    /// One row per distinct (service, day, stack) of the samples (every
    /// one, whatever earlier profiles of the load sent: the store step
    /// looks them up).
    pub cp_stacks: Vec<CpStackRow>,
    /// Summed sample rows, in the table's key order.
    pub samples: Vec<CpSampleRow>,
    /// One row per type.
    pub profiles: Vec<CpProfileRow>,
    /// Distinct stacks of the profile (`stacks` leaves out those an
    /// earlier profile of the same load sent: see [`LoadCache`]).
    pub stack_count: usize,
    /// Distinct frames of the profile.
    pub frame_count: usize,
    /// Of which are addresses the symbolizer could not name.
    pub unnamed_count: usize,
    /// The id earlier builds gave the same profile, when the reader gave a
    /// legacy identity ([`crate::model::Source::legacy_identity`]): see
    /// [`adopt_legacy_ids`].
    pub legacy_id: Option<u64>,
}

impl ProfileRows {
    /// Roughly the bytes these rows hold in memory: each row's struct and
    /// the text it owns, a pointer per frame of each stack (the frames
    /// themselves counted once, in `frames`). What a reader's read-ahead
    /// counts ([`crate::ingest::cp_batch::BatchOptions::read_ahead_bytes`]).
    #[must_use]
    pub fn approx_bytes(&self) -> usize {
        use std::mem::size_of;
        let frames: usize = self
            .frames
            .iter()
            .map(|f| {
                size_of::<FrameRow>()
                    + f.label.len()
                    + f.function.len()
                    + f.file.len()
                    + f.module.len()
            })
            .sum();
        let stacks: usize = self
            .stacks
            .iter()
            .map(|s| size_of::<ResolvedStack>() + 8 * s.frames.len())
            .sum();
        let series: usize = self
            .series
            .iter()
            .map(|r| {
                size_of::<SeriesRow>()
                    + r.profile_type.len()
                    + r.service.len()
                    + r.labels
                        .iter()
                        .map(|(k, v)| 64 + k.len() + v.len())
                        .sum::<usize>()
            })
            .sum();
        let samples: usize = self
            .samples
            .iter()
            .map(|r| {
                size_of::<CpSampleRow>()
                    + r.profile_type.len()
                    + r.service.len()
                    + r.num_labels
                        .iter()
                        .map(|(k, _)| 32 + k.len())
                        .sum::<usize>()
            })
            .sum();
        frames
            + stacks
            + series
            + samples
            + self.cp_stacks.len() * (size_of::<CpStackRow>() + 16)
            + self.profiles.len() * size_of::<CpProfileRow>()
    }
}

/// What one load keeps across its files: stacks the profiles name entirely
/// (every frame a symbol, so they resolve the same in every file whatever
/// its mappings) already resolved, and the frames and stacks a profile of
/// this load already holds in its rows, which later profiles do not repeat
/// (they are stored with or before them: a load stops at its first failed
/// batch). A fresh cache per file gives every profile all its rows.
#[derive(Debug, Default)]
pub struct LoadCache {
    /// Keyed by [`frames_hash`] of the frames (looked up from borrowed
    /// frames without copying them: [`ProfileReader::stack_refs`]).
    named: rustc_hash::FxHashMap<u128, Resolved>,
    /// The frames of the resolved stacks, one row each.
    frames: FrameTable,
    sent_stacks: HashSet<u64>,
    sent_frames: HashSet<u64>,
    /// What the current reader's rows added to `sent_*`: a reader that
    /// fails gives no rows, so its additions are taken back (else a later
    /// file's profiles would leave out frames and stacks nobody stored).
    journal: Vec<(bool, u64)>,
}

impl LoadCache {
    fn send_frame(&mut self, id: u64) -> bool {
        let new = self.sent_frames.insert(id);
        if new {
            self.journal.push((false, id));
        }
        new
    }

    fn send_stack(&mut self, id: u64) -> bool {
        let new = self.sent_stacks.insert(id);
        if new {
            self.journal.push((true, id));
        }
        new
    }

    fn roll_back(&mut self) {
        for (stack, id) in self.journal.drain(..) {
            if stack {
                self.sent_stacks.remove(&id);
            } else {
                self.sent_frames.remove(&id);
            }
        }
    }
}

/// The key of [`LoadCache`]'s named stacks: the same for equal frames,
/// owned or borrowed. 128 bits of XXH3, so the frames need not be kept to
/// tell two stacks apart (a deep stack's names would be a second copy of
/// its frames): two stacks meeting on 128 bits is as likely as never (the
/// stored `stack_id`s themselves are 64-bit hashes).
fn frames_hash<'a>(frames: impl Iterator<Item = &'a Frame>) -> u128 {
    use std::hash::Hash;
    struct Xxh3(twox_hash::XxHash3_128);
    impl std::hash::Hasher for Xxh3 {
        fn write(&mut self, bytes: &[u8]) {
            self.0.write(bytes);
        }
        fn finish(&self) -> u64 {
            self.0.finish_128() as u64
        }
    }
    let mut h = Xxh3(twox_hash::XxHash3_128::new());
    for f in frames {
        f.hash(&mut h);
    }
    h.0.finish_128()
}

/// Entries past which [`LoadCache`] forgets its resolved stacks and frames
/// between files (memory stays bounded on loads of very many distinct
/// stacks).
const LOAD_CACHE_STACKS: usize = 200_000;
const LOAD_CACHE_FRAMES: usize = 1_000_000;

/// The profile type name of a pprof sample type: `type:unit`.
#[must_use]
pub fn profile_type(t: &pprof::ValueType) -> String {
    format!("{}:{}", t.kind, t.unit)
}

/// The id of a series: the type and the sorted label pairs.
#[must_use]
pub fn series_id(profile_type: &str, labels: &BTreeMap<String, String>) -> u64 {
    let mut parts: Vec<&[u8]> = vec![b"type", profile_type.as_bytes()];
    for (k, v) in labels {
        parts.push(k.as_bytes());
        parts.push(v.as_bytes());
    }
    stable_hash(&parts)
}

/// The labels common to every series of a load: service and user labels.
fn base_labels(opts: &ContinuousOptions) -> Result<BTreeMap<String, String>> {
    let mut m = BTreeMap::new();
    m.insert(
        SERVICE_LABEL.to_string(),
        opts.service
            .clone()
            .unwrap_or_else(|| DEFAULT_SERVICE.to_string()),
    );
    check_label_keys(&opts.labels, &opts.read.bpftrace.labels)?;
    for (k, v) in &opts.labels {
        parse_label(&format!("{k}={v}"))?;
        m.insert(k.clone(), v.clone());
    }
    Ok(m)
}

/// Builds the rows of one decoded pprof profile, through its model events
/// ([`PprofReader`]) and [`reader_rows`] with a default symbolizer.
/// `content_id` identifies the file's bytes (a [`stable_hash`] of them: see
/// [`load_pprof`]); `source` is stored with the profile.
///
/// # Errors
/// [`Error::Usage`] for a user label whose key is refused.
pub fn pprof_rows(
    p: &PprofProfile,
    source: &str,
    content_id: u64,
    opts: &ContinuousOptions,
) -> Result<ProfileRows> {
    let mut reader = PprofReader::new(p, content_id, 0);
    let mut sym = Symbolizer::new(opts.symbolizer.clone());
    Ok(reader_rows(&mut reader, &mut sym, source, opts)?
        .into_iter()
        .next()
        .unwrap_or_default())
}

/// A stack already symbolized: its id and its frames, root first, each the
/// row of the load's frame table (shared by every stack holding it: a deep
/// distinct stack costs a pointer per frame). Its `stacks` row.
#[derive(Debug)]
pub struct ResolvedStack {
    /// Stable hash of the labels (`stacks.stack_id`).
    pub stack_id: u64,
    /// The frames, root first.
    pub frames: Vec<Arc<FrameRow>>,
}

impl ResolvedStack {
    /// The frames' labels, root first (`stacks.labels`).
    pub fn labels(&self) -> impl Iterator<Item = &str> {
        self.frames.iter().map(|f| f.label.as_str())
    }

    /// Appends the labels as a RowBinary `Array(String)` (the `labels`
    /// column of `stacks`, `process_stacks` and `cp_stacks`).
    pub fn encode_labels(&self, b: &mut Vec<u8>) {
        uleb(b, self.frames.len() as u64);
        for l in self.labels() {
            string(b, l);
        }
    }
}

impl RowBinary for ResolvedStack {
    const TABLE: &'static str = StackRow::TABLE;
    const STRUCTURE: &'static str = StackRow::STRUCTURE;
    fn encode(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.stack_id.to_le_bytes());
        uleb(b, self.frames.len() as u64);
        for f in &self.frames {
            b.extend_from_slice(&f.frame_id.to_le_bytes());
        }
        self.encode_labels(b);
    }
}

/// A resolved stack, shared by the structures of a load.
pub type Resolved = Arc<ResolvedStack>;

/// Builds the rows of every profile an additive reader gives (one per
/// [`crate::model::Batch`]: pprof has one, a perf script cut in time
/// windows several), symbolizing address frames through `sym` with the
/// batch's mappings (main program: [`ContinuousOptions::main_binary`], else
/// the source's own path). Reads the whole stream first, so a corrupt file
/// fails before anything is built. `source` is stored with each profile.
///
/// # Errors
/// The reader's error (naming the file and the offset or line), or
/// [`Error::Usage`] for a refused user label.
pub fn reader_rows(
    reader: &mut dyn ProfileReader,
    sym: &mut Symbolizer,
    source: &str,
    opts: &ContinuousOptions,
) -> Result<Vec<ProfileRows>> {
    reader_rows_cached(reader, sym, source, opts, &mut LoadCache::default())
}

/// [`reader_rows`] with a cache kept across the files of one load (see
/// [`LoadCache`]).
///
/// # Errors
/// As [`reader_rows`].
pub fn reader_rows_cached(
    reader: &mut dyn ProfileReader,
    sym: &mut Symbolizer,
    source: &str,
    opts: &ContinuousOptions,
    cache: &mut LoadCache,
) -> Result<Vec<ProfileRows>> {
    cache.journal.clear();
    let rows = rows_cached(reader, sym, source, opts, cache);
    if rows.is_err() {
        cache.roll_back();
    }
    rows
}

/// The first frame or label name of `rows` longer than `max` bytes, said
/// with its start (frames are checked once a load: `rows` holds the new
/// ones).
fn check_name_lengths(rows: &ProfileRows, max: u64) -> std::result::Result<(), String> {
    let frames = rows.frames.iter().flat_map(|f| {
        [
            ("function", f.function.as_str()),
            ("file", f.file.as_str()),
            ("module", f.module.as_str()),
            ("frame", f.label.as_str()),
        ]
    });
    let labels = rows.series.iter().flat_map(|s| {
        std::iter::once(("service", s.service.as_str())).chain(
            s.labels
                .iter()
                .flat_map(|(k, v)| [("label key", k.as_str()), ("label value", v.as_str())]),
        )
    });
    match frames.chain(labels).find(|(_, n)| n.len() as u64 > max) {
        None => Ok(()),
        Some((what, name)) => {
            let mut end = 40;
            while !name.is_char_boundary(end) {
                end -= 1;
            }
            Err(format!(
                "a {what} name of {} bytes (`{}...`): longer than --max-name-kib ({} KiB) \
                 allows; nothing of the profile is stored",
                name.len(),
                name[..end].escape_debug(),
                max >> 10
            ))
        }
    }
}

fn rows_cached(
    reader: &mut dyn ProfileReader,
    sym: &mut Symbolizer,
    source: &str,
    opts: &ContinuousOptions,
    cache: &mut LoadCache,
) -> Result<Vec<ProfileRows>> {
    if cache.named.len() > LOAD_CACHE_STACKS || cache.frames.len() > LOAD_CACHE_FRAMES {
        cache.named.clear();
        cache.frames.clear();
    }
    let base = base_labels(opts)?;
    let default_span_labels = opts
        .span_labels
        .iter()
        .map(String::as_str)
        .eq(DEFAULT_SPAN_LABELS.iter().copied());
    let types: Vec<String> = reader
        .value_types()
        .iter()
        .map(ValueType::profile_type)
        .collect();
    let format = reader.format().name().to_string();
    let mut events = Vec::new();
    while let Some(e) = reader.next_event()? {
        events.push(e);
    }
    let mut src = Source::default();
    let mut resolved: HashMap<u64, Resolved> = HashMap::new();
    let mut frames: Vec<Frame> = Vec::new();
    let mut out = Vec::new();
    let mut index = 0u64;
    for event in events {
        let batch = match event {
            Event::Source(s) => {
                src = s;
                continue;
            }
            Event::Batch(b) => b,
        };
        check_span_labels(&batch, &opts.span_labels, source)?;
        let span_keys = if default_span_labels {
            None
        } else {
            effective_span_keys(&batch, &opts.span_labels)
        };
        if let Some(mappings) = &batch.mappings {
            let main = opts
                .main_binary
                .clone()
                .or_else(|| (!src.main_path.is_empty()).then(|| PathBuf::from(&src.main_path)));
            let map = ModuleMap::new(mappings, main.as_deref())
                .main_named(&src.main_path, main.as_deref());
            sym.set_modules(if opts.main_binary.is_some() {
                map.main_on_host()
            } else {
                map
            });
            // Addresses symbolized under other mappings do not carry over.
            resolved.clear();
        }
        let mut rows = batch_rows(
            reader,
            sym,
            &batch,
            &types,
            &base,
            &mut resolved,
            &mut frames,
            opts,
            cache,
        )
        .map_err(|e| match e {
            // A sum past Int64: the file's fault, naming it, but not "not
            // pprof": the file can be a valid profile of its format (`go
            // tool pprof` reads such a pprof); it cannot be stored.
            Error::Usage(message) => Error::Unstorable {
                path: PathBuf::from(source),
                message,
            },
            e => e,
        })?;
        check_name_lengths(&rows, opts.max_name_bytes).map_err(|message| Error::Unstorable {
            path: PathBuf::from(source),
            message,
        })?;
        let granularity = format!("{:?}", opts.symbolizer.granularity);
        let id_of = |identity: &[Vec<u8>]| {
            let mut id_parts: Vec<&[u8]> = identity.iter().map(Vec::as_slice).collect();
            let idx = index.to_le_bytes();
            if index > 0 {
                id_parts.push(&idx);
            }
            for (k, v) in &base {
                id_parts.push(k.as_bytes());
                id_parts.push(v.as_bytes());
            }
            // Other span keys store other series and rows: another profile.
            if let Some(keys) = &span_keys {
                id_parts.push(b"span_labels");
                id_parts.extend(keys.iter().map(|k| k.as_bytes()));
            }
            // Frames labelled with their lines are other frames: another
            // profile (it was found stored, and the lines never came).
            if opts.symbolizer.granularity != crate::symbolize::Granularity::default() {
                id_parts.push(b"granularity");
                id_parts.push(granularity.as_bytes());
            }
            stable_hash(&id_parts)
        };
        let profile_id = id_of(&src.identity);
        rows.legacy_id = (!src.legacy_identity.is_empty()).then(|| id_of(&src.legacy_identity));
        rows.profile_id = profile_id;
        for r in &mut rows.samples {
            r.profile_id = profile_id;
        }
        for r in &mut rows.profiles {
            r.profile_id = profile_id;
            r.period = src.period;
            r.period_type.clone_from(&src.period_type);
            r.format.clone_from(&format);
            r.source = source.to_string();
        }
        out.push(rows);
        index += 1;
    }
    Ok(out)
}

/// The rows of one batch (profile id, period and source filled in by the
/// caller).
#[allow(clippy::too_many_arguments)]
fn batch_rows(
    reader: &dyn ProfileReader,
    sym: &mut Symbolizer,
    batch: &crate::model::Batch,
    types: &[String],
    base: &BTreeMap<String, String>,
    resolved: &mut HashMap<u64, Resolved>,
    frames: &mut Vec<Frame>,
    opts: &ContinuousOptions,
    cache: &mut LoadCache,
) -> Result<ProfileRows> {
    let n = types.len();
    let ts_ns = opts.time_ns.unwrap_or(if batch.time_ns != 0 {
        batch.time_ns as i64
    } else {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0)
    });
    let ts = ts_ns.div_euclid(1_000_000);
    // The rollups' minutes and hours are `DateTime` (seconds since 1970 in
    // 32 bits): a profile outside them would be stored but never found
    // (and one past 2149 dropped by its wrapped TTL day).
    if !(0..=LAST_TIME_MS).contains(&ts) {
        return Err(Error::Usage(format!(
            "its time ({} s since 1970) is outside what the engine stores, 1970-01-01 to \
             2106-02-07 06:28:15 UTC{}",
            ts.div_euclid(1000),
            if opts.time_ns.is_some() {
                ""
            } else {
                ": give --time"
            }
        )));
    }
    let mut out = ProfileRows::default();
    let mut frames_seen: HashSet<u64> = HashSet::new();
    let mut stacks_seen: HashSet<u64> = HashSet::new();
    let mut by_stack: HashMap<u64, Resolved> = HashMap::new();
    // Distinct series label sets, by the batch's label-set index (None: no
    // labels of the sample's own).
    let mut label_sets: Vec<BTreeMap<String, String>> = Vec::new();
    // The batch's label-set index -> (series label set, span id).
    let mut label_index: HashMap<Option<u32>, (usize, u64)> = HashMap::new();
    let mut series_index: HashMap<BTreeMap<String, String>, usize> = HashMap::new();
    let mut num_units: BTreeMap<String, String> = BTreeMap::new();
    // (label set, stack, span id, numeric labels) -> one sum per type.
    type Key = (usize, u64, u64, Vec<(String, i64)>);
    let mut sums: BTreeMap<Key, Vec<i64>> = BTreeMap::new();
    let mut counts = vec![0u64; n];
    let mut totals = vec![0i64; n];
    let mut rows = Vec::new();

    for (i, &key) in batch.stacks.iter().enumerate() {
        let values = &batch.values[i * n..(i + 1) * n];
        if values.iter().all(|&v| v == 0) {
            continue;
        }
        let r = resolved.entry(key).or_insert_with(|| {
            // A stack the profile names entirely resolves the same in every
            // file of the load. Its frames by reference when the reader
            // can (no copy of a deep stack's frames), else copied.
            let mut refs = Vec::new();
            if !reader.stack_refs(key, &mut refs) {
                reader.stack(key, frames);
                refs.extend(frames.iter());
            }
            let named = refs.iter().all(|f| matches!(f, Frame::Symbol(_)));
            let h = named.then(|| frames_hash(refs.iter().copied()));
            if let Some(r) = h.and_then(|h| cache.named.get(&h)) {
                return r.clone();
            }
            symbolize_shared(sym, refs.iter().copied(), &mut cache.frames, &mut rows);
            let mut stack = std::mem::take(&mut rows);
            stack.shrink_to_fit();
            let r = Arc::new(ResolvedStack {
                stack_id: stable_hash_of(stack.iter().map(|f| f.label.as_bytes())),
                frames: stack,
            });
            if let Some(h) = h {
                cache.named.insert(h, r.clone());
            }
            r
        });
        let stack_id = r.stack_id;
        if stacks_seen.insert(stack_id) {
            by_stack.insert(stack_id, r.clone());
            for row in &r.frames {
                if frames_seen.insert(row.frame_id) {
                    if cache.frames.is_unnamed(row.frame_id) {
                        out.unnamed_count += 1;
                    }
                    if cache.send_frame(row.frame_id) {
                        out.frames.push(row.clone());
                    }
                }
            }
            if cache.send_stack(stack_id) {
                out.stacks.push(r.clone());
            }
        }
        // Label sets of the batch differing only in numeric labels or span
        // ids are one series: look the series up by its string labels.
        let own = batch.sample_labels.get(i).copied();
        let (set, span) = match label_index.get(&own) {
            Some(&s) => s,
            None => {
                let mut m = base.clone();
                let mut span = 0;
                if let Some(sl) = batch.labels_of(i) {
                    let mut by_key: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
                    for l in &sl.labels {
                        by_key.entry(&l.key).or_default().push(&l.value);
                    }
                    // Span keys leave the series labels; the first listed
                    // one present is the sample's span (values checked
                    // single by `check_span_labels`).
                    for key in &opts.span_labels {
                        if let Some(vs) = by_key.remove(key.as_str()) {
                            if span == 0 {
                                span = span_id_value(vs[0]);
                            }
                        }
                    }
                    for (k, mut vs) in by_key {
                        vs.sort_unstable();
                        vs.dedup();
                        m.insert(k.to_string(), vs.join(","));
                    }
                }
                let s = match series_index.get(&m) {
                    Some(&s) => s,
                    None if label_sets.len() as u64 >= opts.max_series => {
                        return Err(Error::Usage(format!(
                            "its samples make more than {} series (distinct label sets: a \
                             label with a value per sample makes one per sample; \
                             --max-series raises the limit)",
                            opts.max_series
                        )));
                    }
                    None => {
                        label_sets.push(m.clone());
                        series_index.insert(m, label_sets.len() - 1);
                        label_sets.len() - 1
                    }
                };
                label_index.insert(own, (s, span));
                (s, span)
            }
        };
        let mut nums: Vec<(String, i64)> = batch
            .labels_of(i)
            .map(|sl| {
                sl.num_labels
                    .iter()
                    .map(|n| {
                        let unit = num_units.entry(n.key.clone()).or_default();
                        if unit.is_empty() {
                            if let Some(u) = &n.unit {
                                unit.clone_from(u);
                            }
                        }
                        (n.key.clone(), n.value)
                    })
                    .collect()
            })
            .unwrap_or_default();
        nums.sort();
        nums.dedup_by(|a, b| a.0 == b.0);
        let e = sums
            .entry((set, stack_id, span, nums))
            .or_insert_with(|| vec![0; n]);
        for (t, &v) in values.iter().enumerate() {
            // Stored sums are Int64: one past it would wrap to a negative
            // total, silently.
            let overflow = || {
                Error::Usage(format!(
                    "the values of type {} sum past {} (the {} Int64 a value can hold)",
                    types[t],
                    if v < 0 { i64::MIN } else { i64::MAX },
                    if v < 0 { "smallest" } else { "largest" }
                ))
            };
            e[t] = e[t].checked_add(v).ok_or_else(overflow)?;
            totals[t] = totals[t].checked_add(v).ok_or_else(overflow)?;
        }
    }

    // pprof's `NumLabelUnits`: a key never given a unit is in bytes when it
    // is `alignment` or `request`, else its own unit (`bytes` -> bytes).
    for (key, unit) in &mut num_units {
        if unit.is_empty() {
            *unit = match key.as_str() {
                "alignment" | "request" => "bytes".to_string(),
                k => k.to_string(),
            };
        }
    }
    let series_ids: Vec<Vec<u64>> = types
        .iter()
        .map(|t| label_sets.iter().map(|l| series_id(t, l)).collect())
        .collect();
    let mut series_used: Vec<Vec<bool>> = vec![vec![false; label_sets.len()]; n];
    for ((set, stack_id, span, nums), values) in &sums {
        for (t, &v) in values.iter().enumerate() {
            if v == 0 {
                continue;
            }
            series_used[t][*set] = true;
            counts[t] += 1;
            out.samples.push(CpSampleRow {
                profile_type: types[t].clone(),
                service: label_sets[*set][SERVICE_LABEL].clone(),
                series_id: series_ids[t][*set],
                ts,
                stack_id: *stack_id,
                value: v,
                profile_id: 0,
                num_labels: nums.clone(),
                span_id: *span,
            });
        }
    }
    // The (service, day, stack) of the rows: what queries join instead of
    // the whole `stacks` (migration 11).
    let mut svc_stacks: HashSet<(&str, u64)> = HashSet::new();
    for r in &out.samples {
        if svc_stacks.insert((r.service.as_str(), r.stack_id)) {
            out.cp_stacks.push(CpStackRow {
                service: r.service.clone(),
                date: date(ts),
                stack_id: r.stack_id,
                stack: by_stack[&r.stack_id].clone(),
            });
        }
    }
    out.samples.sort_by(|a, b| {
        (&a.profile_type, &a.service, a.series_id, a.stack_id).cmp(&(
            &b.profile_type,
            &b.service,
            b.series_id,
            b.stack_id,
        ))
    });
    for (t, ty) in types.iter().enumerate() {
        for (set, labels) in label_sets.iter().enumerate() {
            if series_used[t][set] {
                out.series.push(SeriesRow {
                    date: date(ts),
                    profile_type: ty.clone(),
                    service: labels[SERVICE_LABEL].clone(),
                    series_id: series_ids[t][set],
                    labels: labels.clone(),
                });
            }
        }
        out.profiles.push(CpProfileRow {
            profile_id: 0,
            profile_type: ty.clone(),
            service: base[SERVICE_LABEL].clone(),
            ts,
            duration_ns: batch.duration_ns as i64,
            period: 0,
            period_type: String::new(),
            total: totals[t],
            sample_count: counts[t],
            series_count: series_used[t].iter().filter(|&&u| u).count() as u64,
            labels: base.clone(),
            num_units: num_units.clone(),
            format: String::new(),
            source: String::new(),
            id_scheme: ID_SCHEME,
        });
    }
    out.stack_count = stacks_seen.len();
    out.frame_count = frames_seen.len();
    Ok(out)
}

/// Stores the rows of one profile: [`super::cp_batch::store_batch`] of a
/// batch of one (dictionaries: only the frames and stacks not stored yet;
/// series, samples, then the profile rows; see the module docs).
///
/// # Errors
/// The engine's error of the first insert that fails; run again to finish.
pub fn store(backend: &dyn Backend, db: &Ident, rows: &ProfileRows) -> Result<()> {
    let mut known = super::cp_batch::Known::default();
    super::cp_batch::store_batch(backend, db, std::slice::from_ref(rows), &mut known)?;
    Ok(())
}

/// What a load stored.
#[derive(Debug, Clone, Default)]
pub struct ContinuousSummary {
    /// The file.
    pub source: String,
    /// The profile id.
    pub profile_id: u64,
    /// The profile types, in the file's order.
    pub types: Vec<String>,
    /// Sample rows (all types).
    pub sample_rows: usize,
    /// Series rows (all types).
    pub series: usize,
    /// Distinct stacks and frames of the profile.
    pub stacks: usize,
    /// ...
    pub frames: usize,
    /// Share of the profile's distinct frames that have a name (0-100):
    /// those the profile names itself and the addresses the symbolizer
    /// named; each address left unnamed (`module+0x...`, `0x...`) counts
    /// against it. 100 when every frame is named.
    pub symbolized_percent: f64,
    /// Modules whose addresses got no symbols, once each.
    pub missing_modules: Vec<String>,
    /// The profile was stored before (nothing of it was sent); known after
    /// a batched load stored it ([`super::cp_batch::load_files`]).
    pub already_stored: bool,
}

/// Loads one pprof file (gzipped or raw) into `opts.database` (the schema
/// must exist: [`crate::storage::schema::migrate`]): [`load_file`] with the
/// format forced to pprof, its one profile's summary.
///
/// # Errors
/// As [`load_file`].
pub fn load_pprof(
    backend: &dyn Backend,
    path: &Path,
    opts: &ContinuousOptions,
) -> Result<ContinuousSummary> {
    let opts = ContinuousOptions {
        format: Some(Format::Pprof),
        ..opts.clone()
    };
    Ok(load_file(backend, path, &opts)?
        .into_iter()
        .next()
        .unwrap_or_default())
}

/// Opens `path` with its format (`opts.format`, else detected) and reader.
pub(crate) fn open_reader(
    path: &Path,
    opts: &ContinuousOptions,
) -> Result<(Box<dyn ProfileReader>, String)> {
    let abs = std::fs::canonicalize(path).map_err(crate::error::file_err(path))?;
    let file = std::fs::File::open(&abs).map_err(crate::error::file_err(&abs))?;
    let format = match opts.format {
        Some(f) => f,
        None => crate::formats::detect_open(&file, &abs)?,
    };
    let read = ReadOptions {
        pprof: opts.decode,
        ..opts.read.clone()
    };
    let reader = format.spec().open(file, &abs, &read)?;
    Ok((reader, super::stdin::shown_name(&abs)))
}

/// Loads one file of an additive format (pprof; any reader of
/// [`crate::model::ValueSemantics::Additive`]) into `opts.database` (the
/// schema must exist): every profile it holds, each stored whole or not at
/// all ([`store`]). The whole file is read and its rows built before the
/// first insert, so a corrupt file stores nothing.
///
/// # Errors
/// A one-line error naming the file (unreadable, not a valid profile: with
/// the offset or line), a refused label, or the engine's error.
pub fn load_file(
    backend: &dyn Backend,
    path: &Path,
    opts: &ContinuousOptions,
) -> Result<Vec<ContinuousSummary>> {
    let opts = with_legacy_identity(backend, opts)?;
    let (mut reader, source) = open_reader(path, &opts)?;
    load_reader(backend, &mut *reader, &source, &opts)
}

/// Whether `db` holds text profiles stored by builds before migration 10
/// (`cp_profiles.id_scheme = 0`, format perf, bpftrace or folded): their
/// ids hash the file with FNV-1a ([`crate::formats::text::legacy_identity`]).
///
/// # Errors
/// The engine's error.
pub fn holds_legacy_text_profiles(backend: &dyn Backend, db: &Ident) -> Result<bool> {
    Ok(legacy_kinds(backend, db)?.0)
}

/// Whether `db` holds pprof profiles stored by builds before id scheme 2
/// (`cp_profiles.id_scheme` below 2, format pprof): a compressed file's id
/// hashed its compressed bytes.
///
/// # Errors
/// The engine's error.
pub fn holds_legacy_pprof_profiles(backend: &dyn Backend, db: &Ident) -> Result<bool> {
    Ok(legacy_kinds(backend, db)?.1)
}

/// Both of the above in one read of `cp_profiles`, of the rows whose
/// `id_scheme` is below this build's only (none in a database only this
/// build wrote).
fn legacy_kinds(backend: &dyn Backend, db: &Ident) -> Result<(bool, bool)> {
    let formats: Vec<String> = TEXT_FORMATS.iter().map(|f| sql_string(f)).collect();
    let tsv = backend.query_tsv(&format!(
        "SELECT countIf(id_scheme = 0 AND format IN ({})) > 0, countIf(format = 'pprof') > 0 \
         FROM {db}.cp_profiles WHERE id_scheme < {ID_SCHEME}",
        formats.join(", ")
    ))?;
    let mut f = tsv.trim().split('\t').map(|v| v == "1");
    Ok((f.next().unwrap_or(false), f.next().unwrap_or(false)))
}

/// `opts` asking the text readers for their legacy identity too when `db`
/// holds legacy text profiles ([`holds_legacy_text_profiles`]), and the
/// pprof reader for a compressed file's when it holds legacy pprof
/// profiles ([`holds_legacy_pprof_profiles`]); as they are otherwise (a
/// fresh database never pays for a legacy hash).
///
/// # Errors
/// The engine's error.
pub fn with_legacy_identity(
    backend: &dyn Backend,
    opts: &ContinuousOptions,
) -> Result<ContinuousOptions> {
    let mut opts = opts.clone();
    (opts.read.legacy_identity, opts.read.legacy_pprof_identity) =
        legacy_kinds(backend, &opts.database)?;
    Ok(opts)
}

/// Profiles of `rows` whose legacy id ([`ProfileRows::legacy_id`]) is
/// stored, in `cp_profiles` or `cp_samples` (an earlier build's load, whole
/// or cut short), take that id back: their rows are then looked up and
/// stored under it as any profile's ([`super::cp_batch::store_batch`]), so
/// a complete one stores nothing and a partial one gets its missing rows
/// only. Their profile rows get `id_scheme` 0 (the id is a legacy one).
/// One query for the lot; none when no profile has a legacy id. Returns the
/// (new id, legacy id) pairs adopted.
///
/// # Errors
/// The engine's error.
pub fn adopt_legacy_ids(
    backend: &dyn Backend,
    db: &Ident,
    rows: &mut [ProfileRows],
) -> Result<Vec<(u64, u64)>> {
    let legacy: Vec<String> = rows
        .iter()
        .filter_map(|r| r.legacy_id.map(|id| id.to_string()))
        .collect();
    if legacy.is_empty() {
        return Ok(Vec::new());
    }
    let mut stored: HashSet<u64> = HashSet::new();
    for chunk in legacy.chunks(10_000) {
        let list = chunk.join(",");
        let tsv = backend.query_tsv(&format!(
            "SELECT profile_id FROM {db}.cp_profiles WHERE profile_id IN ({list}) \
             UNION DISTINCT SELECT profile_id FROM {db}.cp_samples WHERE profile_id IN ({list})"
        ))?;
        stored.extend(tsv.lines().filter_map(|l| l.trim().parse::<u64>().ok()));
    }
    let mut adopted = Vec::new();
    for r in rows.iter_mut() {
        let Some(old) = r.legacy_id.filter(|id| stored.contains(id)) else {
            continue;
        };
        adopted.push((r.profile_id, old));
        r.profile_id = old;
        for s in &mut r.samples {
            s.profile_id = old;
        }
        for p in &mut r.profiles {
            p.profile_id = old;
            p.id_scheme = 0;
        }
    }
    Ok(adopted)
}

/// [`load_file`] on a reader already open (`source`: the file's path).
///
/// # Errors
/// As [`load_file`].
pub fn load_reader(
    backend: &dyn Backend,
    reader: &mut dyn ProfileReader,
    source: &str,
    opts: &ContinuousOptions,
) -> Result<Vec<ContinuousSummary>> {
    let mut sym = Symbolizer::new(opts.symbolizer.clone());
    let mut all = reader_rows(reader, &mut sym, source, opts)?;
    adopt_legacy_ids(backend, &opts.database, &mut all)?;
    let mut out = Vec::with_capacity(all.len());
    for rows in &all {
        store(backend, &opts.database, rows)?;
        out.push(summary(rows, source, &sym));
    }
    Ok(out)
}

/// [`ContinuousSummary::symbolized_percent`] of `frames` distinct frames,
/// `unnamed` of them addresses the symbolizer could not name: text formats
/// name most frames themselves, so the share of the addresses the
/// symbolizer tried (one `[unknown]` frame in a perf script of named ones:
/// 0%) would say nothing of the profile. Counted per profile (a file's
/// windows share one symbolizer, whose counts are the file's).
fn named_percent(frames: usize, unnamed: usize) -> f64 {
    if frames == 0 {
        return 100.0;
    }
    frames.saturating_sub(unnamed) as f64 * 100.0 / frames as f64
}

/// The last time (ms) a profile can have: `DateTime`'s last second,
/// 2106-02-07 06:28:15 UTC.
pub const LAST_TIME_MS: i64 = u32::MAX as i64 * 1000;

/// The summary of one profile's rows, read from `source` with `sym`.
pub(crate) fn summary(rows: &ProfileRows, source: &str, sym: &Symbolizer) -> ContinuousSummary {
    ContinuousSummary {
        source: source.to_string(),
        profile_id: rows.profile_id,
        types: rows
            .profiles
            .iter()
            .map(|p| p.profile_type.clone())
            .collect(),
        sample_rows: rows.samples.len(),
        series: rows.series.len(),
        stacks: rows.stack_count,
        frames: rows.frame_count,
        symbolized_percent: named_percent(rows.frame_count, rows.unnamed_count),
        missing_modules: sym
            .missing_modules()
            .iter()
            .map(ToString::to_string)
            .collect(),
        already_stored: false,
    }
}

/// The tables of migrations 6, 7 and 11 with a TTL, and their day expression.
pub const RETENTION_TABLES: &[(&str, &str)] = &[
    ("cp_series", "date"),
    ("cp_label_values", "date"),
    ("cp_samples", "toDate(ts)"),
    ("cp_samples_1m", "toDate(minute)"),
    ("cp_profiles", "toDate(ts)"),
    ("cp_samples_1h", "toDate(hour)"),
    ("cp_series_profiles", "toDate(ts)"),
    ("cp_stacks", "date"),
];

/// Sets the retention of continuous profiles to `days` (`init --retention`):
/// `ALTER TABLE ... MODIFY TTL` on every table of [`RETENTION_TABLES`]
/// (whole day partitions are dropped once older, `ttl_only_drop_parts`).
///
/// # Errors
/// [`Error::Usage`] for 0 days or more than [`MAX_RETENTION_DAYS`]; the
/// engine's error.
pub fn set_retention(backend: &dyn Backend, opts: &SchemaOptions, days: u32) -> Result<()> {
    let distributed = distributed_tables(backend, &opts.database)?;
    for stmt in retention_statements(opts, days, &distributed)? {
        backend.execute(&stmt)?;
    }
    Ok(())
}

/// The longest retention [`retention_statements`] takes: a TTL's day is
/// a `Date` (days since 1970 in 16 bits, last 2149-06-06), and a day plus
/// a longer interval wraps to the 1970s, so every row would be expired at
/// once (`--retention 45000` on a 2026 profile: 1970-09-11).
pub const MAX_RETENTION_DAYS: u32 = 36_500;

/// The stored continuous profiles a retention of `days` expires today
/// (the engine's date, as its TTL counts): `(profiles, first day, last
/// day)`, `None` when there are none.
///
/// # Errors
/// The engine's error.
pub fn older_than(
    backend: &dyn Backend,
    db: &Ident,
    days: u32,
) -> Result<Option<(u64, String, String)>> {
    // Counted in day numbers: `Date + days` wraps past 2149-06-06, and a
    // wrapped day is not an old one (`ttl_wrapping` counts those).
    profiles_where(
        backend,
        db,
        &format!("toUInt32(toDate(ts)) + {days} <= toUInt32(toDate(now(), serverTimezone()))"),
    )
}

/// The stored continuous profiles whose day plus `days` is past the
/// engine's last `Date` (2149-06-06), where a TTL of `days` wraps to 1970
/// and drops them at the next merge (a load would refuse them:
/// [`crate::ingest::cp_batch::ttl_wraps`]): how many, and the first and
/// last day; `None` when there are none.
///
/// # Errors
/// The engine's error.
pub fn ttl_wrapping(
    backend: &dyn Backend,
    db: &Ident,
    days: u32,
) -> Result<Option<(u64, String, String)>> {
    profiles_where(
        backend,
        db,
        &format!(
            "toUInt32(toDate(ts)) + {days} > {}",
            crate::ingest::cp_batch::LAST_DATE
        ),
    )
}

/// How many stored profiles match `condition`, with their first and last
/// day.
fn profiles_where(
    backend: &dyn Backend,
    db: &Ident,
    condition: &str,
) -> Result<Option<(u64, String, String)>> {
    let row = backend.query_tsv(&format!(
        "SELECT uniqExact(profile_id), toString(min(toDate(ts))), toString(max(toDate(ts))) \
         FROM {db}.cp_profiles WHERE {condition}"
    ))?;
    let f: Vec<&str> = row.trim_end().split('\t').collect();
    match f.as_slice() {
        [n, first, last] if *n != "0" => Ok(Some((
            n.parse().unwrap_or(0),
            first.to_string(),
            last.to_string(),
        ))),
        _ => Ok(None),
    }
}

/// Whether `days` is a retention [`retention_statements`] takes: checked
/// before `init` changes anything, so a bad value leaves no database.
///
/// # Errors
/// [`Error::Usage`] for 0 days or more than [`MAX_RETENTION_DAYS`].
pub fn check_retention(days: u32) -> Result<()> {
    if days == 0 {
        return Err(Error::Usage(
            "retention: at least 1 day (0 would drop every profile)".into(),
        ));
    }
    if days > MAX_RETENTION_DAYS {
        return Err(Error::Usage(format!(
            "retention: at most {MAX_RETENTION_DAYS} days (100 years): {days} days after a \
             profile's day is past the engine's last Date (2149-06-06), where the TTL's date \
             wraps to 1970 and every profile would be dropped"
        )));
    }
    Ok(())
}

/// The statements [`set_retention`] runs: one `ALTER TABLE ... MODIFY TTL`
/// per table of [`RETENTION_TABLES`] ([`retention_statement`]).
///
/// # Errors
/// [`Error::Usage`] for 0 days or more than [`MAX_RETENTION_DAYS`].
pub fn retention_statements(
    opts: &SchemaOptions,
    days: u32,
    distributed: &[String],
) -> Result<Vec<String>> {
    check_retention(days)?;
    Ok(RETENTION_TABLES
        .iter()
        .map(|(table, day)| retention_statement(opts, table, day, days, distributed))
        .collect())
}

/// `ALTER TABLE ... MODIFY TTL {day} + INTERVAL {days} DAY` of `table`; a
/// table named in `distributed` (a cluster's sharded layout) is altered on
/// its shards' `<name>_local`, the Distributed table having no TTL of its
/// own.
fn retention_statement(
    opts: &SchemaOptions,
    table: &str,
    day: &str,
    days: u32,
    distributed: &[String],
) -> String {
    let local = if distributed.iter().any(|d| d == table) {
        crate::storage::schema::LOCAL_SUFFIX
    } else {
        ""
    };
    let on_cluster = opts
        .cluster
        .as_ref()
        .map(|c| format!(" ON CLUSTER {c}"))
        .unwrap_or_default();
    format!(
        "ALTER TABLE {}.{table}{local}{on_cluster} MODIFY TTL {day} + INTERVAL {days} DAY",
        opts.database
    )
}

/// Gives the tables of `stored` ([`table_retentions`], read before a
/// migration ran) whose TTL is not `days`, the database's retention (that
/// of its samples), that retention: a database upgraded by a binary that
/// rendered later migrations with the default. Returns the tables altered;
/// no statement (and no other read) when none differs.
///
/// # Errors
/// The engine's error.
pub fn mend_retention(
    backend: &dyn Backend,
    opts: &SchemaOptions,
    days: u32,
    stored: &[(String, u32)],
) -> Result<Vec<String>> {
    let stale: Vec<&str> = stored
        .iter()
        .filter(|(_, d)| *d != days)
        .map(|(t, _)| t.as_str())
        .collect();
    if stale.is_empty() {
        return Ok(Vec::new());
    }
    let distributed = distributed_tables(backend, &opts.database)?;
    for (table, day) in RETENTION_TABLES.iter().filter(|(t, _)| stale.contains(t)) {
        backend.execute(&retention_statement(opts, table, day, days, &distributed))?;
    }
    Ok(stale.iter().map(|t| (*t).to_string()).collect())
}

/// The `Distributed` tables of `db`: on a cluster's sharded layout, the
/// tables of [`crate::storage::schema::SHARDED_TABLES`].
///
/// # Errors
/// The engine's error.
pub fn distributed_tables(backend: &dyn Backend, db: &Ident) -> Result<Vec<String>> {
    Ok(backend
        .query_tsv(&format!(
            "SELECT name FROM system.tables WHERE database = {} AND engine = 'Distributed' ORDER BY name",
            sql_string(db.as_str())
        ))?
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect())
}

/// The retention in days of `cp_samples` as stored in its TTL (None when it
/// has none), read from the engine; on a cluster's sharded layout, the TTL
/// of the connected node's `cp_samples_local`.
///
/// # Errors
/// The engine's error.
pub fn retention_days(backend: &dyn Backend, db: &Ident) -> Result<Option<u32>> {
    Ok(retentions_of(backend, db, &["cp_samples"])?
        .into_iter()
        .find(|(t, _)| t == "cp_samples")
        .map(|(_, d)| d))
}

/// The TTL in days of each table of [`RETENTION_TABLES`] that `db` has,
/// as stored (on a cluster's sharded layout the connected node's `_local`
/// table's, named without the suffix): one catalog read.
///
/// # Errors
/// The engine's error.
pub fn table_retentions(backend: &dyn Backend, db: &Ident) -> Result<Vec<(String, u32)>> {
    let tables: Vec<&str> = RETENTION_TABLES.iter().map(|(t, _)| *t).collect();
    retentions_of(backend, db, &tables)
}

/// [`table_retentions`] of `tables` (of [`RETENTION_TABLES`]) only. The
/// catalog is asked for those names (and their `_local` tables) alone:
/// `create_table_query` is made for every table the filter leaves, and the
/// schema's views take most of it (40 ms for all 45 tables of a
/// database, 2.5 ms for one table; a load asks it once per call).
fn retentions_of(backend: &dyn Backend, db: &Ident, tables: &[&str]) -> Result<Vec<(String, u32)>> {
    let names: Vec<String> = tables
        .iter()
        .flat_map(|t| {
            [
                sql_string(t),
                sql_string(&format!("{t}{}", crate::storage::schema::LOCAL_SUFFIX)),
            ]
        })
        .collect();
    let ttls = backend.query_tsv(&format!(
        "SELECT name, extract(create_table_query, 'TTL [^+]+\\+ (?:toIntervalDay\\(|INTERVAL )(\\d+)') \
         FROM system.tables WHERE database = {} AND name IN ({}) AND engine != 'Distributed'",
        sql_string(db.as_str()),
        names.join(",")
    ))?;
    Ok(ttls
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .filter_map(|(t, d)| {
            let t = t
                .strip_suffix(crate::storage::schema::LOCAL_SUFFIX)
                .unwrap_or(t);
            Some((t.to_string(), d.parse::<u32>().ok()?))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample: its frames (leaf first) and labels.
    type TestSample<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)]);

    /// A text reader of `batches`, each a list of samples.
    fn reader(batches: &[&[TestSample<'_>]]) -> crate::formats::text::TextReader {
        use crate::model::{Frame, Label, Symbol};
        let mut b = crate::formats::text::Builder::new(1);
        for (i, batch) in batches.iter().enumerate() {
            b.batch(
                1_700_000_000_000_000_000 + i as u64 * 10_000_000_000,
                10_000_000_000,
            );
            for (frames, labels) in batch.iter() {
                let ids: Vec<u32> = frames
                    .iter()
                    .map(|f| {
                        b.frame(Frame::Symbol(Symbol {
                            function: (*f).to_string(),
                            ..Symbol::default()
                        }))
                    })
                    .collect();
                let labels: Vec<Label> = labels
                    .iter()
                    .map(|(k, v)| Label {
                        key: (*k).into(),
                        value: (*v).into(),
                    })
                    .collect();
                b.add(&ids, &labels, &[(0, 1)]);
            }
        }
        let types = crate::formats::text::value_types(&[(
            "folded".into(),
            "samples".into(),
            "count".into(),
        )]);
        b.finish(
            crate::formats::Format::Folded,
            types,
            crate::model::Source {
                identity: vec![b"test".to_vec()],
                ..Default::default()
            },
            1,
        )
    }

    /// Past `max_series` distinct label sets a profile is refused, naming
    /// the option (a label with a value per sample, 1.5 M samples, took
    /// 4.3 GB); at the limit it is built. Three samples of three `req`
    /// values and the service: three series.
    #[test]
    fn more_series_than_the_limit_are_refused() {
        let mut sym = Symbolizer::new(Default::default());
        let run = |max_series, sym: &mut Symbolizer| {
            let mut r = reader(&[&[
                (&["main"], &[("req", "1")]),
                (&["main"], &[("req", "2")]),
                (&["main"], &[("req", "3")]),
            ]]);
            let opts = ContinuousOptions {
                max_series,
                ..ContinuousOptions::default()
            };
            reader_rows(&mut r, sym, "/p/req.folded", &opts).map_err(|e| e.to_string())
        };
        assert_eq!(run(3, &mut sym).unwrap()[0].series.len(), 3);
        let e = run(2, &mut sym).unwrap_err();
        assert!(
            e.starts_with("/p/req.folded: its samples make more than 2 series")
                && e.contains("--max-series"),
            "{e}"
        );
    }

    /// A frame is held once however many stacks hold it (deep distinct
    /// stacks cost a pointer a frame: 200,000 stacks of 50 frames took
    /// 4.5 GB when each stack held its frames' rows and names), in a file
    /// and across the files of a load; the encoded `stacks` rows are still
    /// each stack's frames.
    #[test]
    fn stacks_share_their_frames_rows() {
        let opts = ContinuousOptions::default();
        let mut cache = LoadCache::default();
        let mut sym = Symbolizer::new(opts.symbolizer.clone());
        let mut one = reader(&[&[(&["a", "main"], &[]), (&["b", "main"], &[])]]);
        let rows = reader_rows_cached(&mut one, &mut sym, "1.folded", &opts, &mut cache).unwrap();
        let [s0, s1] = &rows[0].stacks[..] else {
            panic!("two stacks")
        };
        assert_eq!(rows[0].frames.len(), 3);
        assert!(Arc::ptr_eq(&s0.frames[0], &s1.frames[0]), "main, held once");
        let main = s0.frames[0].clone();
        let mut two = reader(&[&[(&["c", "main"], &[])]]);
        let rows = reader_rows_cached(&mut two, &mut sym, "2.folded", &opts, &mut cache).unwrap();
        assert!(
            Arc::ptr_eq(&rows[0].stacks[0].frames[0], &main),
            "and across files"
        );
        let mut b = Vec::new();
        rows[0].stacks[0].encode(&mut b);
        let expected = StackRow {
            stack_id: rows[0].stacks[0].stack_id,
            frame_ids: vec![stable_hash(&[b"main"]), stable_hash(&[b"c"])],
            labels: vec!["main".into(), "c".into()],
        };
        let mut e = Vec::new();
        expected.encode(&mut e);
        assert_eq!(b, e);
    }

    /// A reader that fails after its first batch's rows were built gives no
    /// rows: what that batch added to the load's cache is taken back, so a
    /// later file of the load still carries those frames and stacks (else
    /// nobody would store them). Fails without the cache's journal.
    #[test]
    fn a_failed_file_leaves_its_frames_and_stacks_to_later_files() {
        let opts = ContinuousOptions::default();
        let mut cache = LoadCache::default();
        let mut sym = Symbolizer::new(opts.symbolizer.clone());
        let stack: &[&str] = &["main", "work"];
        // Batch 1's sample has two span ids: refused after batch 0's rows.
        let mut bad = reader(&[
            &[(stack, &[])],
            &[(&["main", "other"], &[("span_id", "1"), ("span_id", "2")])],
        ]);
        let e = reader_rows_cached(&mut bad, &mut sym, "bad.folded", &opts, &mut cache)
            .unwrap_err()
            .to_string();
        assert!(e.contains("two span ids"), "{e}");
        let mut good = reader(&[&[(stack, &[])]]);
        let rows =
            reader_rows_cached(&mut good, &mut sym, "good.folded", &opts, &mut cache).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].stacks.len(), 1, "the stack of the failed file");
        // The builder takes frames leaf first; labels are root first.
        assert!(rows[0].stacks[0].labels().eq(["work", "main"]));
        assert_eq!(rows[0].frames.len(), 2);
        // A stored file's rows are not repeated by the next one.
        let mut again = reader(&[&[(stack, &[])]]);
        let rows =
            reader_rows_cached(&mut again, &mut sym, "again.folded", &opts, &mut cache).unwrap();
        assert!(rows[0].stacks.is_empty() && rows[0].frames.is_empty());
    }

    #[test]
    fn labels_are_checked() {
        assert_eq!(
            parse_label("region=eu-west=1").unwrap(),
            ("region".into(), "eu-west=1".into())
        );
        assert_eq!(parse_label("k8s.pod=x").unwrap().0, "k8s.pod");
        for bad in [
            "x",
            "1a=b",
            "a b=c",
            "a'=b",
            "=v",
            "service=x",
            "-a=b",
            "a{=b",
            "span_id=00ff",
        ] {
            let e = parse_label(bad).unwrap_err().to_string();
            assert!(e.starts_with("label "), "{e}");
            assert!(!e.contains('\n'));
        }
    }

    /// `--label a-b=c` was refused while a selector takes `{a-b="c"}`
    /// bare: every key a load accepts is one a selector names as typed.
    #[test]
    fn a_label_key_the_load_takes_is_one_a_selector_takes_bare() {
        use crate::continuous_query::Selector;
        for key in ["user-id", "app.kubernetes.io/name", "ключ", "_x", "k8s.pod"] {
            let (k, v) = parse_label(&format!("{key}=v 1")).unwrap();
            assert_eq!((k.as_str(), v.as_str()), (key, "v 1"));
            let sel = Selector::parse(&format!("{{{key}=\"v 1\"}}")).unwrap();
            assert_eq!(sel.matchers.len(), 1);
            assert_eq!(
                (sel.matchers[0].key.as_str(), sel.matchers[0].value.as_str()),
                (key, "v 1")
            );
        }
    }

    /// `--label k=a --label k=b` kept `k=b` without a word, and
    /// `--bpftrace-labels` could name `service` (overriding `--service`),
    /// a key twice (comm="29683,spin") or a `--label` key: each refused in
    /// one line naming the key, by [`base_labels`] too.
    #[test]
    fn a_label_key_given_twice_or_service_is_refused() {
        let kv = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        let keys = |ks: &[&str]| ks.iter().map(|k| (*k).to_owned()).collect::<Vec<_>>();
        assert!(check_label_keys(&[kv("a", "1"), kv("b", "1")], &keys(&["comm", "tid"])).is_ok());
        for (labels, sample, want) in [
            (
                vec![kv("k", "a"), kv("k", "b")],
                keys(&[]),
                "--label k: the key is given twice",
            ),
            (
                vec![],
                keys(&["service", "tid"]),
                "--bpftrace-labels service: the service is set with --service",
            ),
            (
                vec![],
                keys(&["comm", "comm"]),
                "--bpftrace-labels comm: the name is given twice",
            ),
            (
                vec![kv("comm", "x")],
                keys(&["comm"]),
                "--label comm and --bpftrace-labels comm: the key is given twice",
            ),
        ] {
            let e = check_label_keys(&labels, &sample).unwrap_err().to_string();
            assert!(e.starts_with(want), "{e}");
            assert!(!e.contains('\n'), "{e}");
            let mut opts = ContinuousOptions {
                labels: labels.clone(),
                ..Default::default()
            };
            opts.read.bpftrace.labels = sample;
            assert_eq!(base_labels(&opts).unwrap_err().to_string(), e);
        }
    }

    #[test]
    fn span_ids_are_their_hex_number_or_a_hash() {
        assert_eq!(span_id_value("00f067aa0ba902b7"), 0x00f0_67aa_0ba9_02b7);
        assert_eq!(span_id_value("00F067AA0BA902B7"), 0x00f0_67aa_0ba9_02b7);
        assert_eq!(span_id_value("ffffffffffffffff"), u64::MAX);
        assert_eq!(span_id_value("1"), 1);
        assert_eq!(span_id_value(""), 0);
        assert_eq!(span_id_value("0000000000000000"), 0);
        // Not 1 to 16 hex digits: hashed, the same text the same id.
        let t = "4bf92f3577b34da6a3ce929d0e0e4736";
        assert_eq!(span_id_value(t), span_id_value(t));
        assert_ne!(span_id_value(t), 0);
        assert_ne!(span_id_value("0x1"), 1);
        assert_ne!(span_id_value("span-7"), span_id_value("span-8"));
    }

    #[test]
    fn series_ids_depend_on_type_and_every_label() {
        let mut a = BTreeMap::new();
        a.insert("service".to_string(), "api".to_string());
        let mut b = a.clone();
        b.insert("version".into(), "1".into());
        assert_ne!(
            series_id("cpu:nanoseconds", &a),
            series_id("cpu:nanoseconds", &b)
        );
        assert_ne!(
            series_id("cpu:nanoseconds", &a),
            series_id("samples:count", &a)
        );
        assert_eq!(
            series_id("cpu:nanoseconds", &b),
            series_id("cpu:nanoseconds", &b.clone())
        );
    }

    #[test]
    fn rows_encode_to_their_structure() {
        // Column count of the structure == fields written (checked on a
        // known row by its length).
        let mut m = BTreeMap::new();
        m.insert("k".to_string(), "v".to_string());
        let mut buf = Vec::new();
        SeriesRow {
            date: 1,
            profile_type: "a".into(),
            service: "s".into(),
            series_id: 2,
            labels: m,
        }
        .encode(&mut buf);
        assert_eq!(buf.len(), 2 + 2 + 2 + 8 + 1 + 2 + 2);
    }
}
