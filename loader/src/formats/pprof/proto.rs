//! The protobuf messages of a pprof profile (`profile.proto` of
//! github.com/google/pprof, proto3, package `perftools.profiles`), written by
//! hand with `prost` derives so no `protoc` is needed.
//!
//! Field numbers and types follow `proto/profile.proto` exactly; this module
//! owns the wire schema only. String fields of the wire format are indexes
//! into [`Profile::string_table`]; [`super::decode`] resolves them.

/// `Profile`: the whole file.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Profile {
    /// `sample_type` (1): what each entry of `Sample.value` measures.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// `sample` (2).
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// `mapping` (3): the binaries and libraries.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// `location` (4).
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// `function` (5).
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// `string_table` (6): entry 0 must be `""`. Bytes, not `string`:
    /// Go's strings are bytes, and `runtime/pprof` writes a label taken
    /// from request data (a Latin-1 URL path) as it is; [`super::decode`]
    /// reads invalid UTF-8 as U+FFFD, as the text readers do, instead of
    /// refusing the whole profile (`go tool pprof` reads such a file too,
    /// printing the bytes escaped).
    #[prost(bytes = "vec", repeated, tag = "6")]
    pub string_table: Vec<Vec<u8>>,
    /// `drop_frames` (7): string index of a regexp of frames to drop.
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    /// `keep_frames` (8): string index of a regexp of frames kept anyway.
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    /// `time_nanos` (9): collection time, nanoseconds since the epoch.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// `duration_nanos` (10).
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// `period_type` (11).
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// `period` (12): events between samples.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// `comment` (13): string indexes.
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// `default_sample_type` (14): string index of a `sample_type.type`.
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// `ValueType`: a type and its unit, both string indexes.
#[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
pub struct ValueType {
    /// `type` (1).
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// `unit` (2).
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// `Sample`: one stack and its values.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Sample {
    /// `location_id` (1): leaf first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// `value` (2): one per `Profile.sample_type`.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// `label` (3).
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// `Label`: a string label (`str` set) or a numeric one (`num`, `num_unit`).
#[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
pub struct Label {
    /// `key` (1): string index.
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// `str` (2): string index; 0 for a numeric label.
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// `num` (3).
    #[prost(int64, tag = "3")]
    pub num: i64,
    /// `num_unit` (4): string index.
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// `Mapping`: one mapped binary.
#[derive(Clone, PartialEq, Eq, ::prost::Message)]
pub struct Mapping {
    /// `id` (1): unique, nonzero.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// `memory_start` (2).
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// `memory_limit` (3).
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// `file_offset` (4).
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// `filename` (5): string index.
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// `build_id` (6): string index.
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// `has_functions` (7).
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    /// `has_filenames` (8).
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    /// `has_line_numbers` (9).
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    /// `has_inline_frames` (10).
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// `Location`: one address and the source lines at it.
#[derive(Clone, PartialEq, ::prost::Message)]
pub struct Location {
    /// `id` (1): unique, nonzero.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// `mapping_id` (2): 0 when unknown.
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// `address` (3).
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// `line` (4): `line[0]` is the innermost inlined frame, the last entry
    /// the caller into which the others were inlined.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    /// `is_folded` (5).
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

/// `Line`: a function and line number.
#[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
pub struct Line {
    /// `function_id` (1).
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// `line` (2).
    #[prost(int64, tag = "2")]
    pub line: i64,
    /// `column` (3).
    #[prost(int64, tag = "3")]
    pub column: i64,
}

/// `Function`.
#[derive(Clone, Copy, PartialEq, Eq, ::prost::Message)]
pub struct Function {
    /// `id` (1): unique, nonzero.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// `name` (2): string index, human-readable (demangled) name.
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// `system_name` (3): string index, as the linker knows it.
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// `filename` (4): string index.
    #[prost(int64, tag = "4")]
    pub filename: i64,
    /// `start_line` (5).
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}
