//! ClickHouse's TabSeparated and RowBinary encodings of the functions'
//! argument and result types.
//!
//! Arguments (after the SQL wrappers' casts): samples are
//! `Array(Tuple(Array(String), Int64))`, options are `Map(String, String)`.
//! Results: `Array(Tuple(UInt32, String, Int64, Int64))` (tree),
//! `Array(Tuple(UInt32, String, Int64, Int64, Int64, Int64))` (diff) and
//! `Array(Tuple(String, Int64))` (fold). The `executable()` table-function
//! commands read rows of `(stack Array(String), value Int64)` and write one
//! row per node.

mod input;
mod output;

pub use input::{Input, Limits};
pub use output::Output;

/// The wire format shared by both directions of one function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// ClickHouse `TabSeparated`.
    #[value(name = "TabSeparated", alias = "tsv", alias = "tabseparated")]
    TabSeparated,
    /// ClickHouse `RowBinary`.
    #[value(name = "RowBinary", alias = "rowbinary", alias = "rb")]
    RowBinary,
}

impl Format {
    /// The format's name as ClickHouse spells it.
    pub fn name(self) -> &'static str {
        match self {
            Format::TabSeparated => "TabSeparated",
            Format::RowBinary => "RowBinary",
        }
    }
}
