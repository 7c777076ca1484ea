//! The loader library's error type. Format readers keep their own
//! ([`crate::formats::Error`]), carried whole in [`Error::Format`] so the CLI
//! and callers match on what went wrong, not on message text.

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
    /// A profile could not be read: the format reader's error, whose
    /// message names the file and the byte offset.
    #[error(transparent)]
    Format(#[from] crate::formats::Error),
    /// A profile read whole whose values cannot be stored (of one type,
    /// they sum past the largest Int64 a stored value holds). The file
    /// may well be valid in its format (`go tool pprof` reads such a
    /// pprof), so the message names the file and the sum, not the format.
    #[error("{}: {message}", path.display())]
    Unstorable {
        /// The file.
        path: PathBuf,
        /// What cannot be stored.
        message: String,
    },
    /// The file ended before its first complete record (MemHawk's header):
    /// no profile, or one just created and still being written.
    #[error("{}: {}", path.display(), no_header_reason(*bytes, *idle))]
    NoHeader {
        /// The file.
        path: PathBuf,
        /// Its length.
        bytes: u64,
        /// With `--watch`: how long it was followed without growth
        /// (`--idle-exit`); `None` for a load that read it once.
        idle: Option<std::time::Duration>,
    },
    /// A load of the process recorded a batch ending at `cut` (see
    /// `load_intents`), but in this file no record ends there.
    #[error(
        "{}: record ending at byte {offset}: a load of this process recorded a batch ending at \
         byte {cut}, which is not a record boundary here (another file with the same header?)",
        path.display()
    )]
    BatchBoundary {
        /// The file.
        path: PathBuf,
        /// End of the record that passed the boundary.
        offset: u64,
        /// The recorded end of the batch.
        cut: u64,
    },
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
    /// Flags that do not fit together (`--to` not after `--from`): what the
    /// argument parser would refuse if it could see both; the CLI exits 2,
    /// as for its other usage errors.
    #[error("{0}")]
    Arguments(String),
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

/// Why a file gave no MemHawk header: an empty file is no profile of any
/// format (format detection fell back to MemHawk, whose files are empty
/// just after they are created); otherwise a header cut short. A followed
/// file (`idle`) was given the time `--watch` suggests.
fn no_header_reason(bytes: u64, idle: Option<std::time::Duration>) -> String {
    if let Some(d) = idle {
        return format!(
            "no complete header record in {bytes} bytes after {} s without growth \
             (--idle-exit): not a MemHawk .binpb file, or its profiler has not written yet",
            d.as_secs_f64()
        );
    }
    if bytes == 0 {
        "the file is empty: no profile in any format (a MemHawk .binpb file just created is \
         empty until its first record: use --watch)"
            .into()
    } else {
        format!(
            "no complete header record in {bytes} bytes (not a MemHawk .binpb file, or one \
             still being written: use --watch)"
        )
    }
}

impl Error {
    /// The file the error is about, when its message names it (file,
    /// format, unstorable values, header, batch and truncation errors), so a caller does not
    /// name it again.
    #[must_use]
    pub fn file(&self) -> Option<&std::path::Path> {
        match self {
            Error::File { path, .. }
            | Error::Unstorable { path, .. }
            | Error::NoHeader { path, .. }
            | Error::BatchBoundary { path, .. }
            | Error::Truncated { path, .. } => Some(path),
            Error::Format(e) => Some(e.path()),
            _ => None,
        }
    }

    /// Whether the message already names the file it is about
    /// ([`Error::file`]).
    #[must_use]
    pub fn names_file(&self) -> bool {
        self.file().is_some()
    }
}

/// Crate-wide result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Wraps an I/O error of `path` as [`Error::File`].
pub fn file_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.into();
    move |cause| Error::File { path, cause }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::{self, binpb};
    use std::path::Path;

    /// A reader's error reaches the caller as its own variant, with the
    /// reader's one-line message, said once in an `anyhow` chain.
    #[test]
    fn a_format_error_stays_typed_with_its_message() {
        let inner = binpb::Error::RecordTooLarge {
            path: "/p/app.binpb".into(),
            offset: 1234,
            len: 1 << 40,
            max: 256 << 20,
        };
        let msg = inner.to_string();
        let e = Error::from(formats::Error::from(inner));
        assert!(matches!(
            &e,
            Error::Format(formats::Error::Binpb(binpb::Error::RecordTooLarge {
                offset: 1234,
                ..
            }))
        ));
        assert_eq!(e.to_string(), msg);
        assert_eq!(e.file(), Some(Path::new("/p/app.binpb")));
        assert_eq!(format!("{:#}", anyhow::Error::from(e)), msg);
        assert_eq!(
            msg,
            "/p/app.binpb: record at byte 1234: length prefix 1099511627776 exceeds the limit \
             of 268435456 bytes (corrupt file?)"
        );
    }

    #[test]
    fn only_errors_about_a_file_name_it() {
        let no_header = Error::NoHeader {
            path: "/p/new.binpb".into(),
            bytes: 5,
            idle: None,
        };
        assert_eq!(no_header.file(), Some(Path::new("/p/new.binpb")));
        assert_eq!(
            no_header.to_string(),
            "/p/new.binpb: no complete header record in 5 bytes (not a MemHawk .binpb file, or \
             one still being written: use --watch)"
        );
        let query = Error::Query {
            message: "Code: 60. Unknown table".into(),
        };
        assert_eq!(query.file(), None);
        assert!(!query.names_file());
    }
}
