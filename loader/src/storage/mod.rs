//! Where rows go: the embedded engine or a ClickHouse server. Both run the
//! same SQL; inserts carry an `insert_deduplication_token`, so a batch that is
//! sent again (a retry, a restart after a crash) is stored once.

pub mod engine;
pub mod ident;
pub mod rows;
pub mod schema;
pub mod server;

use crate::error::{file_err, Error, Result};
use crate::storage::engine::Engine;
use crate::storage::ident::Ident;
use crate::storage::rows::RowBinary;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A ClickHouse to run SQL on and insert rows into.
pub trait Backend: Sync {
    /// Runs a statement.
    fn execute(&self, sql: &str) -> Result<()>;
    /// Runs a query, returning TabSeparated text.
    fn query_tsv(&self, sql: &str) -> Result<String>;
    /// Inserts one block of RowBinary rows with `structure` (`name Type,
    /// ...`) into `db.table` (`table` is checked as an [`Ident`] too).
    fn insert_rowbinary(
        &self,
        db: &Ident,
        table: &str,
        structure: &str,
        rows: &[u8],
        token: &str,
    ) -> Result<()>;

    /// Inserts each block of `inserts` as [`Backend::insert_rowbinary`]
    /// does, all of them before returning; none depends on another, so a
    /// backend may run them at once. On an error, some may be stored: each
    /// is deduplicated by its token when sent again. Default: one after
    /// another (the embedded engine and a server override it: a
    /// connection, or a request, each).
    fn insert_rowbinary_all(&self, db: &Ident, inserts: &[Insert]) -> Result<()> {
        for i in inserts {
            self.insert_rowbinary(db, i.table, i.structure, &i.rows, &i.token)?;
        }
        Ok(())
    }

    /// Whether the engine's background merges run in this process (the
    /// embedded engine) and so compete with the loader for its cores.
    fn merges_in_process(&self) -> bool {
        false
    }
}

/// One block of RowBinary rows for [`Backend::insert_rowbinary_all`].
#[derive(Debug, Clone)]
pub struct Insert {
    /// The table (an [`Ident`] when run).
    pub table: &'static str,
    /// Its `name Type, ...` structure.
    pub structure: &'static str,
    /// The rows.
    pub rows: Vec<u8>,
    /// The deduplication token.
    pub token: String,
}

/// Largest RowBinary block of one insert. A table's rows past it go in
/// several inserts, each encoded as it is sent, so that the loader's and
/// the engine's memory stay bounded whatever the profile: the arrays of
/// deep distinct stacks cost the engine several times their bytes.
pub const MAX_INSERT_BYTES: usize = 16 << 20;

/// Inserts typed rows through `backend` as deduplicated blocks of at most
/// [`MAX_INSERT_BYTES`] (a row larger than that is a block of its own),
/// each encoded as it is sent. The first block's token is `token` (rows
/// that fit one block are stored as they always were), the next ones
/// `token#1`, `token#2`, ...: the same rows sent again cut the same blocks
/// and deduplicate.
pub fn insert<R: RowBinary>(
    backend: &dyn Backend,
    db: &Ident,
    rows: &[R],
    token: &str,
) -> Result<()> {
    let mut rows = rows.iter().peekable();
    let mut bytes = Vec::new();
    let mut block = 0usize;
    while rows.peek().is_some() {
        bytes.clear();
        for r in rows.by_ref() {
            r.encode(&mut bytes);
            if bytes.len() >= MAX_INSERT_BYTES {
                break;
            }
        }
        let token = match block {
            0 => token.to_string(),
            n => format!("{token}#{n}"),
        };
        backend.insert_rowbinary(db, R::TABLE, R::STRUCTURE, &bytes, &token)?;
        block += 1;
    }
    Ok(())
}

/// Quotes a name for SQL as a backquoted identifier (for names read back
/// from the engine; names users type are [`Ident`]s instead).
pub fn quote_ident(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('`');
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '`' => o.push_str("\\`"),
            c => o.push(c),
        }
    }
    o.push('`');
    o
}

/// Quotes a string for a SQL literal.
pub fn sql_string(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('\'');
    for c in s.chars() {
        match c {
            '\\' => o.push_str("\\\\"),
            '\'' => o.push_str("\\'"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            '\0' => o.push_str("\\0"),
            c => o.push(c),
        }
    }
    o.push('\'');
    o
}

impl Backend for Engine {
    fn merges_in_process(&self) -> bool {
        true
    }

    fn execute(&self, sql: &str) -> Result<()> {
        Engine::execute(self, sql)
    }

    fn query_tsv(&self, sql: &str) -> Result<String> {
        Engine::query_tsv(self, sql)
    }

    fn insert_rowbinary(
        &self,
        db: &Ident,
        table: &str,
        structure: &str,
        rows: &[u8],
        token: &str,
    ) -> Result<()> {
        pipe_insert(db, table, structure, rows, token, &|sql| self.execute(sql))
    }

    fn insert_rowbinary_all(&self, db: &Ident, inserts: &[Insert]) -> Result<()> {
        if let [one] = inserts {
            return self.insert_rowbinary(db, one.table, one.structure, &one.rows, &one.token);
        }
        // Each on a connection of its own: the engine runs them at once
        // (one connection serializes its queries).
        std::thread::scope(|scope| {
            let handles: Vec<_> = inserts
                .iter()
                .map(|i| {
                    scope.spawn(move || -> Result<()> {
                        let session = self.session()?;
                        pipe_insert(db, i.table, i.structure, &i.rows, &i.token, &|sql| {
                            session.query(sql, "TabSeparated", &[]).map(|_| ())
                        })
                    })
                })
                .collect();
            let mut first = Ok(());
            for h in handles {
                let r = h.join().unwrap_or_else(|_| {
                    Err(Error::Query {
                        message: "an insert thread panicked".into(),
                    })
                });
                if first.is_ok() {
                    first = r;
                }
            }
            first
        })
    }
}

/// Inserts `rows` into `db.table` through an anonymous pipe that the
/// engine reads with `file('/proc/self/fd/N')` (it runs in this process)
/// while a feeder thread writes it; `run` runs the statement on a
/// connection of the engine. Data inline after `FORMAT RowBinary` is cut
/// at the engine's query buffer size without an error; a pipe writes
/// nothing to disk and, unlike a named pipe, creates no file (a file made
/// and removed per insert: on an ext4 without a journal, as this project's
/// machines have, each new file scans past the recently removed ones).
fn pipe_insert(
    db: &Ident,
    table: &str,
    structure: &str,
    rows: &[u8],
    token: &str,
    run: &dyn Fn(&str) -> Result<()>,
) -> Result<()> {
    let table = Ident::parse_as("table", table)?;
    let (queried, fed) = through_pipe(rows, |path| {
        run(&file_insert_sql(db, &table, structure, token, path))
    })?;
    // The engine's error explains a short read, so it comes first.
    queried?;
    fed.map(|_| ())
        .map_err(file_err(Path::new("the insert's pipe")))
}

/// Runs `run` with the path of an anonymous pipe (`/proc/self/fd/N`: the
/// embedded engine opens it in this process) that a feeder thread fills
/// with `data` and then closes (the reader's end of file). Returns what
/// `run` returned and, when every byte was written, how many the engine
/// left unread: those are drained after `run`, so the feeder never blocks
/// on a full pipe and no write meets a closed one (no SIGPIPE, whatever
/// its handler). Close on exec: a UDF child must not hold the write end.
///
/// # Errors
/// [`Error::File`] when no pipe can be made.
pub(crate) fn through_pipe<T>(
    data: &[u8],
    run: impl FnOnce(&Path) -> T,
) -> Result<(T, std::io::Result<u64>)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`, owned below.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(file_err(Path::new("pipe"))(std::io::Error::last_os_error()));
    }
    // SAFETY: fresh descriptors, each owned once.
    let (mut read_end, mut write_end) = unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    };
    let path = PathBuf::from(format!("/proc/self/fd/{}", fds[0]));
    Ok(std::thread::scope(|scope| {
        // The write end is closed when the feeder ends: the engine's EOF.
        let feeder = scope.spawn(move || write_end.write_all(data));
        let out = run(&path);
        let drained = std::io::copy(&mut read_end, &mut std::io::sink());
        let fed = feeder
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the feeder thread panicked")))
            .and(drained);
        (out, fed)
    }))
}

fn file_insert_sql(db: &Ident, table: &Ident, structure: &str, token: &str, path: &Path) -> String {
    format!(
        "INSERT INTO {db}.{table} ({}) SETTINGS insert_deduplication_token = {}, \
         deduplicate_blocks_in_dependent_materialized_views = 1, insert_distributed_sync = 1 \
         SELECT * FROM file({}, RowBinary, {})",
        column_names(structure).join(", "),
        sql_string(token),
        sql_string(&path.display().to_string()),
        sql_string(&read_structure(structure))
    )
}

/// `structure` with every `LowCardinality(T)` read as `T`, for `file()`:
/// RowBinary writes both alike, and the engine builds a LowCardinality
/// column from RowBinary about three times slower than a plain one (a
/// 14,400-row insert into `cp_samples` and its views: 100-150 ms read as
/// LowCardinality, 50-80 ms read plain); the table converts on insert.
pub fn read_structure(structure: &str) -> String {
    const LC: &str = "LowCardinality(";
    let mut out = String::with_capacity(structure.len());
    // For each `(` open: whether it opened a LowCardinality (its `)` goes).
    let mut open: Vec<bool> = Vec::new();
    let mut rest = structure;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with(LC) {
            open.push(true);
            rest = &rest[LC.len()..];
            continue;
        }
        match c {
            '(' => open.push(false),
            ')' if open.pop() == Some(true) => {
                rest = &rest[1..];
                continue;
            }
            _ => {}
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// The column names of a `name Type, ...` structure (commas inside types
/// such as `DateTime64(3, 'UTC')` are not separators).
pub fn column_names(structure: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in structure.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.extend(structure[start..i].split_whitespace().next());
                start = i + 1;
            }
            _ => {}
        }
    }
    out.extend(structure[start..].split_whitespace().next());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_structure_reads_low_cardinality_plain() {
        assert_eq!(
            read_structure(
                "a LowCardinality(String), m Map(LowCardinality(String), Int64), \
                 t DateTime64(3, 'UTC'), n Array(LowCardinality(Nullable(String)))"
            ),
            "a String, m Map(String, Int64), t DateTime64(3, 'UTC'), n Array(Nullable(String))"
        );
        assert_eq!(
            read_structure("x UInt64, y Tuple(UInt8, String)"),
            "x UInt64, y Tuple(UInt8, String)"
        );
        // Every row type keeps its columns.
        use crate::ingest::continuous::{CpProfileRow, CpSampleRow, SeriesRow};
        use crate::storage::rows::{RowBinary, SampleRow};
        for s in [
            CpSampleRow::STRUCTURE,
            CpProfileRow::STRUCTURE,
            SeriesRow::STRUCTURE,
            SampleRow::STRUCTURE,
        ] {
            let r = read_structure(s);
            assert!(!r.contains("LowCardinality"), "{r}");
            assert_eq!(column_names(&r), column_names(s));
            assert_eq!(r.matches('(').count(), r.matches(')').count(), "{r}");
        }
    }
}
