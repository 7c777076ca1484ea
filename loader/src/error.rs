//! The loader library's error type (the `binpb` decoder keeps its own, which
//! converts into this one).

use std::path::PathBuf;

/// Errors of the engine layer, SQL package and commands.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `libchdb.so` is missing or could not be loaded.
    #[error("embedded ClickHouse engine at {path}: {reason}")]
    Library {
        /// Where the library was looked for.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The engine refused to open the database directory.
    #[error("cannot open the embedded engine on {path}: {reason}")]
    Connect {
        /// The data directory.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// ClickHouse returned an error for a query.
    #[error("{message}")]
    Query {
        /// The engine's message (first line kept verbatim).
        message: String,
    },
    /// The `flamehouse-udf` executable could not be found.
    #[error("cannot find the flamehouse-udf executable: {0}")]
    UdfBinary(String),
    /// A file operation failed.
    // The cause is in the message, not in `source()`, so `{:#}` chains do
    // not print it twice.
    #[error("{path}: {cause}")]
    File {
        /// The file.
        path: PathBuf,
        /// The cause.
        cause: std::io::Error,
    },
    /// Anything from the stack functions' library.
    #[error(transparent)]
    Udf(#[from] flamehouse_udf::Error),
    /// A profile could not be decoded (the message names the file and
    /// byte offset).
    #[error("{0}")]
    Decode(String),
    /// A name given for SQL (database, cluster) is not a plain identifier.
    #[error("invalid {what} {name:?}: {why}")]
    Ident {
        /// Which option (`database`, `cluster`).
        what: String,
        /// The name as given.
        name: String,
        /// Why it was refused.
        why: String,
    },
    /// A command's arguments do not fit (a time that is no time, an empty
    /// result); the message says what and why.
    #[error("{0}")]
    Usage(String),
    /// A file followed by `load --watch` became shorter than already read:
    /// truncated or rewritten in place, so its records can no longer be told
    /// apart from the stored ones.
    #[error(
        "{path}: the file shrank from {seen} to {now} bytes while being followed (truncated or \
         rewritten in place); its records up to byte {stored} are loaded. A new profile belongs \
         in a new file (a replaced file is followed)"
    )]
    Truncated {
        /// The file.
        path: PathBuf,
        /// The largest length seen.
        seen: u64,
        /// Its length now.
        now: u64,
        /// End of the last record read.
        stored: u64,
    },
    /// Rendering an SVG failed.
    #[error("rendering the flame graph: {0}")]
    Render(String),
}

impl Error {
    /// Whether the message already names the file it is about (file,
    /// decoding and truncation errors), so a caller does not name it again.
    #[must_use]
    pub fn names_file(&self) -> bool {
        matches!(
            self,
            Error::File { .. } | Error::Decode(_) | Error::Truncated { .. }
        )
    }
}

/// Crate-wide result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

pub fn file_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |cause| Error::File { path, cause }
}
