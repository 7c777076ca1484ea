//! The writer: a [`Batch`] into the tables in an order a crash cannot
//! break (process and intent first, progress last, every insert with its
//! deduplication token), the embedded engine's merges paused during a load
//! ([`MergePause`]), and deleting what is stored for a process.

use super::batch::{Batch, Spare};
use super::continuous::ResolvedStack;
use crate::error::Result;
use crate::storage::ident::Ident;
use crate::storage::rows::{ProcessStackRow, RowBinary, SampleRow};
use crate::storage::{insert, Backend};

/// A [`ProcessStackRow`] of a stack of the batch, its labels read from the
/// stack's frames (not copied: a deep stack's labels are most of a batch).
struct ProcessStack<'a> {
    process_id: u64,
    stack: &'a ResolvedStack,
}

impl RowBinary for ProcessStack<'_> {
    const TABLE: &'static str = ProcessStackRow::TABLE;
    const STRUCTURE: &'static str = ProcessStackRow::STRUCTURE;
    fn encode(&self, b: &mut Vec<u8>) {
        b.extend_from_slice(&self.process_id.to_le_bytes());
        b.extend_from_slice(&self.stack.stack_id.to_le_bytes());
        self.stack.encode_labels(b);
    }
}

/// The embedded engine's background merges paused (`SYSTEM STOP MERGES`)
/// on the tables of the load's database until [`MergePause::resume`] or
/// drop. Scoped to those tables, not the whole engine: another database's
/// mutation (an `ALTER ... DELETE` waiting with `mutations_sync`, which runs
/// in the merge pool) must not wait on this load, as it would for ever when
/// it holds the engine's one connection that the load needs to resume.
pub(super) struct MergePause<'a> {
    backend: &'a dyn Backend,
    tables: Vec<String>,
    resumed: bool,
}

impl<'a> MergePause<'a> {
    pub(super) fn new(backend: &'a dyn Backend, db: &Ident) -> Result<Self> {
        let tables = backend
            .query_tsv(&format!(
                "SELECT name FROM system.tables WHERE database = {} AND engine LIKE '%MergeTree' \
                 ORDER BY name",
                crate::storage::sql_string(db.as_str())
            ))?
            .lines()
            .map(|t| format!("{db}.{}", crate::storage::quote_ident(t)))
            .collect();
        let pause = MergePause {
            backend,
            tables,
            resumed: false,
        };
        pause.set("STOP")?;
        Ok(pause)
    }

    pub(super) fn set(&self, what: &str) -> Result<()> {
        for t in &self.tables {
            self.backend.execute(&format!("SYSTEM {what} MERGES {t}"))?;
        }
        Ok(())
    }

    pub(super) fn resume(mut self) -> Result<()> {
        self.resumed = true;
        self.set("START")
    }
}

impl Drop for MergePause<'_> {
    fn drop(&mut self) {
        if !self.resumed {
            let _ = self.set("START");
        }
    }
}

/// Test hook: with `FLAMEHOUSE_TEST_CRASH` set to `at`, the process ends
/// there at once, as a crash or `kill -9` would: no destructor, no flush,
/// no signal handler (the engine's SIGABRT handler takes minutes). Only the
/// end-to-end tests set it.
fn crash_point(at: &str) {
    if std::env::var_os("FLAMEHOUSE_TEST_CRASH").is_some_and(|v| v == at) {
        // SAFETY: ends the process; nothing runs after it.
        unsafe { libc::_exit(137) }
    }
}

pub(super) fn write_batch(backend: &dyn Backend, db: &Ident, b: Batch) -> Result<Spare> {
    let tok = &b.token;
    // The process row (with this load's source) and the batch's byte range
    // first, dictionaries next, progress last: a crash in between makes the
    // next load cut the same batch (see `State::cut_at`) and re-send it, and
    // the tokens deduplicate it.
    if let Some(p) = &b.process {
        insert(
            backend,
            db,
            std::slice::from_ref(p),
            &format!("{tok}:process"),
        )?;
    }
    insert(
        backend,
        db,
        std::slice::from_ref(&b.intent),
        &format!("{tok}:intent"),
    )?;
    insert(backend, db, &b.frames, &format!("{tok}:frames"))?;
    insert(backend, db, &b.stacks, &format!("{tok}:stacks"))?;
    // The process's own copy of the stacks its samples name (what the
    // memory views join), before the samples. Every stack of a load is in
    // one of its batches (`Interner`), and replayed records' stacks were
    // sent by the load that stored them.
    let process_id = b.intent.process_id;
    let process_stacks: Vec<ProcessStack> = b
        .stacks
        .iter()
        .map(|stack| ProcessStack { process_id, stack })
        .collect();
    insert(
        backend,
        db,
        &process_stacks,
        &format!("{tok}:process_stacks"),
    )?;
    if !b.samples.is_empty() {
        backend.insert_rowbinary(
            db,
            SampleRow::TABLE,
            SampleRow::STRUCTURE,
            &b.samples,
            &format!("{tok}:samples"),
        )?;
    }
    crash_point("after-samples");
    insert(backend, db, &b.rollup, &format!("{tok}:samples_1m"))?;
    insert(backend, db, &b.totals, &format!("{tok}:totals"))?;
    insert(
        backend,
        db,
        std::slice::from_ref(&b.progress),
        &format!("{tok}:progress"),
    )?;
    let mut rows = b.samples;
    rows.clear();
    Ok(rows)
}

/// The tables holding a process's own rows, in the order
/// [`delete_process`] empties them: progress first (so an interrupted
/// delete resumes nothing on half-deleted rows), the process row last (so
/// it still shows in `process_list` until the delete is complete).
/// `process_stacks` holds the process's copy of its stacks (migration 13).
/// `frames`, `stacks` and `stack_functions` are shared dictionaries keyed by
/// content hashes: other processes may use the same rows, and unused rows
/// cost little and change no result, so they are kept.
pub const PROCESS_TABLES: &[&str] = &[
    "load_progress",
    "load_intents",
    "samples",
    "samples_1m",
    "process_stacks",
    "totals",
    "process_stats",
    "processes",
];

/// Deletes everything stored for one process (every table of
/// [`PROCESS_TABLES`]), synchronously: when it returns, the rows are gone
/// on every replica. The next load of the process starts over with the next
/// load generation (recorded first, in `process_generations`), so the
/// engine's deduplication window does not drop its batches as copies of
/// the deleted ones. Interrupted, it is simply run again.
pub fn delete_process(backend: &dyn Backend, db: &Ident, process_id: u64) -> Result<()> {
    backend.execute(&format!(
        "INSERT INTO {db}.process_generations (process_id, generation) \
         SELECT {process_id}, 1 + greatest( \
             (SELECT max(generation) FROM {db}.processes WHERE process_id = {process_id}), \
             (SELECT max(generation) FROM {db}.process_generations \
              WHERE process_id = {process_id}))"
    ))?;
    for table in PROCESS_TABLES {
        backend.execute(&format!(
            "ALTER TABLE {db}.{table} DELETE WHERE process_id = {process_id} \
             SETTINGS mutations_sync = 2"
        ))?;
    }
    Ok(())
}
