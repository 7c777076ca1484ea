//! Where rows go: the embedded engine or a ClickHouse server. Both run the
//! same SQL; inserts carry an `insert_deduplication_token`, so a batch that is
//! sent again (a retry, a restart after a crash) is stored once.

use crate::engine::Engine;
use crate::error::{file_err, Result};
use crate::rows::{encode_all, RowBinary};

/// A ClickHouse to run SQL on and insert rows into.
pub trait Backend: Sync {
    /// Runs a statement.
    fn execute(&self, sql: &str) -> Result<()>;
    /// Runs a query, returning TabSeparated text.
    fn query_tsv(&self, sql: &str) -> Result<String>;
    /// Inserts one block of RowBinary rows with `structure` (`name Type,
    /// ...`) into `db.table`.
    fn insert_rowbinary(
        &self,
        db: &str,
        table: &str,
        structure: &str,
        rows: &[u8],
        token: &str,
    ) -> Result<()>;
}

/// Inserts typed rows through `backend` as one deduplicated block.
pub fn insert<R: RowBinary>(
    backend: &dyn Backend,
    db: &str,
    rows: &[R],
    token: &str,
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    backend.insert_rowbinary(db, R::TABLE, R::STRUCTURE, &encode_all(rows), token)
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
    fn execute(&self, sql: &str) -> Result<()> {
        Engine::execute(self, sql)
    }

    fn query_tsv(&self, sql: &str) -> Result<String> {
        Engine::query_tsv(self, sql)
    }

    fn insert_rowbinary(
        &self,
        db: &str,
        table: &str,
        structure: &str,
        rows: &[u8],
        token: &str,
    ) -> Result<()> {
        // Data inline after `FORMAT RowBinary` is cut at the engine's query
        // buffer size without an error, so the block goes through a file
        // that the engine reads with file(), exactly as sent.
        use std::sync::atomic::{AtomicU64, Ordering};
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let dir = self.data_dir().join("tmp");
        std::fs::create_dir_all(&dir).map_err(file_err(&dir))?;
        let path = dir.join(format!(
            "insert-{}-{}.rowbinary",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&path, rows).map_err(file_err(&path))?;
        let columns = column_names(structure);
        let q = format!(
            "INSERT INTO {db}.{table} ({}) SETTINGS insert_deduplication_token = {}, \
             deduplicate_blocks_in_dependent_materialized_views = 1 \
             SELECT * FROM file({}, RowBinary, {})",
            columns.join(", "),
            sql_string(token),
            sql_string(&path.display().to_string()),
            sql_string(structure)
        );
        let r = self.execute(&q);
        let _ = std::fs::remove_file(&path);
        r
    }
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
