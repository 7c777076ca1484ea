//! Batches: the rows of a stretch of the stream, gathered until a batch is
//! full, then put in the tables' key order ([`sort_rows`]), summed per
//! minute ([`rollup`]) and handed to the writer with a deduplication token
//! ([`batch_token`]) made of the source, its load generation and the byte
//! range.

use super::continuous::ResolvedStack;
use super::read::State;
use super::LoadSummary;
use crate::error::{Error, Result};
use crate::storage::rows::{
    FrameRow, IntentRow, ProcessRow, ProgressRow, RollupRow, SampleRow, TotalRow,
};
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::Arc;

/// Rows waiting for the next batch (frames and stacks wait in the
/// [`super::intern::Interner`]).
pub(super) struct Pending<'a> {
    /// Sample rows, RowBinary-encoded ([`SampleRow::ENCODED_LEN`] bytes
    /// each) in arrival order, and the stack (index into
    /// [`super::memhawk::Deltas::stacks`]) of each.
    pub(super) samples: Vec<u8>,
    pub(super) sample_stacks: Vec<u32>,
    pub(super) totals: Vec<TotalRow>,
    /// Snapshots in the batch.
    pub(super) snapshots: usize,
    /// Byte offset where the batch starts.
    pub(super) start: u64,
    /// Sample buffers the writer has finished with, for reuse.
    pub(super) spare: &'a Receiver<Spare>,
}

impl<'a> Pending<'a> {
    pub(super) fn new(spare: &'a Receiver<Spare>) -> Self {
        Pending {
            samples: Vec::new(),
            sample_stacks: Vec::new(),
            totals: Vec::new(),
            snapshots: 0,
            start: 0,
            spare,
        }
    }
}

/// One batch for the writer thread, in insert order.
pub(super) struct Batch {
    pub(super) token: String,
    /// The process row, with the first batch a load stores.
    pub(super) process: Option<ProcessRow>,
    /// The batch's byte range.
    pub(super) intent: IntentRow,
    pub(super) frames: Vec<Arc<FrameRow>>,
    pub(super) stacks: Vec<ResolvedStack>,
    /// Encoded sample rows in the table's key order.
    pub(super) samples: Vec<u8>,
    /// Their per-minute sums (`samples_1m`).
    pub(super) rollup: Vec<RollupRow>,
    pub(super) totals: Vec<TotalRow>,
    pub(super) progress: ProgressRow,
}

/// A sample buffer going back to the reader for reuse.
pub(super) type Spare = Vec<u8>;

/// Rearranges encoded sample rows (`SampleRow::ENCODED_LEN` bytes each)
/// into the table's key order (process, stack_id, ts) in `out`: a counting
/// sort on each row's stack rank, stable, so each stack's rows keep their
/// arrival (time) order. It reads the rows in sequence and scatters whole
/// rows, which is cheap; blocks that arrive sorted save the engine its own
/// sort on insert (it checks first).
pub(super) fn sort_rows(rows: &[u8], sample_stacks: &[u32], rank: &[u32], out: &mut Vec<u8>) {
    const L: usize = SampleRow::ENCODED_LEN;
    debug_assert_eq!(rows.len(), sample_stacks.len() * L);
    let mut start = vec![0usize; rank.len() + 1];
    for &s in sample_stacks {
        start[rank[s as usize] as usize + 1] += L;
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    out.clear();
    out.resize(rows.len(), 0);
    for (row, &s) in rows.chunks_exact(L).zip(sample_stacks) {
        let at = &mut start[rank[s as usize] as usize];
        out[*at..*at + L].copy_from_slice(row);
        *at += L;
    }
}

/// The per-minute sums of each stack's changes (`samples_1m`) of rows in
/// key order: one pass, adding up runs of the same stack and minute. The
/// loader keeps this rollup itself, as it computes the deltas it sums: a
/// materialized view doing the same GROUP BY on every inserted block took
/// 2 s of the engine's time per hour of profile (docs/benchmarks.md).
pub(super) fn rollup(rows: &[u8]) -> Vec<RollupRow> {
    let mut out: Vec<RollupRow> = Vec::new();
    for r in rows.chunks_exact(SampleRow::ENCODED_LEN) {
        let s = SampleRow::decode(r);
        let minute = (s.ts.div_euclid(60_000) * 60) as u32;
        match out.last_mut() {
            Some(last)
                if last.stack_id == s.stack_id
                    && last.minute == minute
                    && last.process_id == s.process_id =>
            {
                last.size_delta = last.size_delta.wrapping_add(s.size_delta);
                last.active_delta = last.active_delta.wrapping_add(s.active_delta);
            }
            _ => out.push(RollupRow {
                process_id: s.process_id,
                minute,
                stack_id: s.stack_id,
                size_delta: s.size_delta,
                active_delta: s.active_delta,
            }),
        }
    }
    out
}

/// The deduplication token of a batch: the stream's identity, its load
/// generation and the byte range, so the same batch from any copy of the
/// file gets the same token, and a reload after a delete gets new ones.
/// Generation 0 (a process never deleted, and every process stored before
/// generations existed) keeps the old form, so stored batches still
/// deduplicate.
pub(super) fn batch_token(process_id: u64, generation: u64, start: u64, end: u64) -> String {
    if generation == 0 {
        format!("{process_id}@{start}-{end}")
    } else {
        format!("{process_id}.{generation}@{start}-{end}")
    }
}

pub(super) fn flush(
    writer: &SyncSender<Batch>,
    source: &str,
    st: &mut State<'_>,
    end: u64,
    summary: &mut LoadSummary,
    last_ts: i64,
) -> Result<()> {
    if st.pending.sample_stacks.is_empty()
        && st.pending.totals.is_empty()
        && st.interner.pending_stacks.is_empty()
        && st.interner.pending_frames.is_empty()
    {
        return Ok(());
    }
    summary.sample_rows += st.pending.sample_stacks.len() as u64;
    // Each stack's position in stack_id order, for the sort.
    let mut by_id: Vec<u32> = (0..st.deltas.stacks.len() as u32).collect();
    by_id.sort_unstable_by_key(|&i| st.deltas.stacks[i as usize].id);
    let mut rank = vec![0u32; by_id.len()];
    for (r, &i) in by_id.iter().enumerate() {
        rank[i as usize] = r as u32;
    }
    // Sorted into the buffer of a batch the writer has finished with (here:
    // the writer's time is the engine's, the critical path).
    let mut samples = st.pending.spare.try_recv().unwrap_or_default();
    sort_rows(
        &st.pending.samples,
        &st.pending.sample_stacks,
        &rank,
        &mut samples,
    );
    st.pending.samples.clear();
    st.pending.sample_stacks.clear();
    let rollup = rollup(&samples);
    let batch = Batch {
        token: batch_token(st.process_id, st.generation, st.pending.start, end),
        process: st.process_row.take(),
        intent: IntentRow {
            process_id: st.process_id,
            generation: st.generation,
            start_offset: st.pending.start,
            end_offset: end,
        },
        frames: std::mem::take(&mut st.interner.pending_frames),
        stacks: std::mem::take(&mut st.interner.pending_stacks),
        samples,
        rollup,
        totals: std::mem::take(&mut st.pending.totals),
        progress: ProgressRow {
            source: source.to_string(),
            process_id: st.process_id,
            offset: end,
            snapshots: summary.snapshots,
            last_ts,
        },
    };
    writer.send(batch).map_err(|_| Error::Query {
        message: "the writer stopped".into(),
    })?;
    st.pending.snapshots = 0;
    st.pending.start = end;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::rows::RowBinary;
    use rand::{Rng, SeedableRng};

    #[test]
    fn sort_rows_matches_a_stable_sort_by_rank() {
        const L: usize = SampleRow::ENCODED_LEN;
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for _ in 0..50 {
            let stacks = rng.gen_range(1..40usize);
            let n = rng.gen_range(0..500usize);
            // A random rank permutation of the stacks.
            let mut rank: Vec<u32> = (0..stacks as u32).collect();
            for i in (1..stacks).rev() {
                rank.swap(i, rng.gen_range(0..=i));
            }
            let sample_stacks: Vec<u32> = (0..n).map(|_| rng.gen_range(0..stacks as u32)).collect();
            let rows: Vec<u8> = (0..n * L).map(|_| rng.gen()).collect();
            let mut out = vec![7u8; 3];
            sort_rows(&rows, &sample_stacks, &rank, &mut out);
            // Reference: a stable sort of the row indexes by rank.
            let mut idx: Vec<usize> = (0..n).collect();
            idx.sort_by_key(|&i| rank[sample_stacks[i] as usize]);
            let want: Vec<u8> = idx
                .iter()
                .flat_map(|&i| rows[i * L..(i + 1) * L].iter().copied())
                .collect();
            assert_eq!(out, want);
        }
    }

    #[test]
    fn rollup_sums_each_stack_per_minute() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let mut rows: Vec<SampleRow> = (0..2000)
            .map(|_| SampleRow {
                process_id: 9,
                ts: 1_750_000_000_000 + rng.gen_range(0..600_000),
                stack_id: rng.gen_range(0..30),
                size: 0,
                active: 0,
                overhead: 0,
                total_count: 0,
                total_bytes: 0,
                size_delta: rng.gen_range(-1000..1000),
                active_delta: rng.gen_range(-5..5),
                count_delta: 0,
                bytes_delta: 0,
            })
            .collect();
        rows.sort_by_key(|r| (r.stack_id, r.ts));
        let mut bytes = Vec::new();
        for r in &rows {
            r.encode(&mut bytes);
            assert_eq!(
                SampleRow::decode(&bytes[bytes.len() - SampleRow::ENCODED_LEN..]),
                *r
            );
        }
        // Reference: a map from (stack, minute) to the sums.
        let mut want = std::collections::BTreeMap::new();
        for r in &rows {
            let e = want
                .entry((r.stack_id, r.ts / 60_000 * 60))
                .or_insert((0i64, 0i64));
            e.0 += r.size_delta;
            e.1 += r.active_delta;
        }
        let got: std::collections::BTreeMap<_, _> = rollup(&bytes)
            .into_iter()
            .map(|r| {
                assert_eq!(r.process_id, 9);
                (
                    (r.stack_id, i64::from(r.minute)),
                    (r.size_delta, r.active_delta),
                )
            })
            .collect();
        assert_eq!(got, want);
        // One row per stack and minute.
        assert_eq!(rollup(&bytes).len(), want.len());
    }

    #[test]
    fn encoded_sample_rows_have_the_fixed_length() {
        let mut buf = Vec::new();
        SampleRow {
            process_id: 1,
            ts: 2,
            stack_id: 3,
            size: -4,
            active: 5,
            overhead: 6,
            total_count: 7,
            total_bytes: 8,
            size_delta: 9,
            active_delta: 10,
            count_delta: 11,
            bytes_delta: 12,
        }
        .encode(&mut buf);
        assert_eq!(buf.len(), SampleRow::ENCODED_LEN);
    }
}
