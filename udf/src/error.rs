//! The crate's one error type. Every message is a single line, because
//! ClickHouse shows the UDF's stderr to the user as the query's error.

/// Errors raised while decoding input, applying options or building output.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading stdin or writing stdout failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// Input that does not follow the declared format.
    #[error("{format} input, row {row}, byte {offset}: {reason}")]
    Malformed {
        /// `TabSeparated` or `RowBinary`.
        format: &'static str,
        /// 1-based row number within the current call.
        row: u64,
        /// Byte offset from the start of stdin (or of the input stream).
        offset: u64,
        /// What was wrong.
        reason: String,
    },
    /// An option key or value that is not understood.
    #[error("option {key}: {reason}")]
    Option {
        /// The option's name.
        key: String,
        /// What was wrong.
        reason: String,
    },
    /// A limit was exceeded; limits are options, never silent truncation.
    #[error("limit exceeded: {0}")]
    Limit(String),
    /// Summing values overflowed Int64.
    #[error("value overflow: the sum of values under one node exceeds Int64")]
    Overflow,
    /// A broken invariant (a bug): reported instead of writing bad output.
    #[error("internal error: {0}")]
    Internal(String),
}

/// Crate-wide result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
