//! The row logic of sources whose values are as of a snapshot
//! ([`ValueSemantics::AsOfSnapshot`](crate::model::ValueSemantics), MemHawk):
//! each trace's latest absolute values are kept, and each snapshot becomes,
//! per stack that changed, its current values (the sum over its traces) and
//! their change, plus the process's total.
//!
//! Several traces can symbolize to the same stack (same functions, other
//! addresses), so values are kept per trace and summed per stack. Memory is
//! bounded by the number of distinct traces and stacks, not by the file's
//! size.

use super::batch::Pending;
use crate::model::Batch as ModelBatch;
use crate::storage::rows::{RowBinary, SampleRow, TotalRow};
use rustc_hash::FxHashMap as HashMap;

/// The number of values of a MemHawk trace
/// ([`crate::formats::binpb::VALUE_TYPES`]).
const VALUES: usize = 5;

/// Trace ids below this are looked up in a flat table (MemHawk numbers its
/// traces 1, 2, 3, ...; the table costs 4 bytes per id up to the largest one
/// seen), the rest (the profiler's bit-31 ids, a sparse producer) in a map.
const DENSE_TRACE_IDS: u32 = 1 << 22;

/// Trace id -> slot in [`Deltas::traces`].
#[derive(Default)]
struct TraceIndex {
    dense: Vec<u32>,
    sparse: HashMap<u32, u32>,
}

impl TraceIndex {
    fn get(&self, id: u32) -> Option<usize> {
        if id < DENSE_TRACE_IDS {
            match self.dense.get(id as usize) {
                Some(&s) if s != u32::MAX => Some(s as usize),
                _ => None,
            }
        } else {
            self.sparse.get(&id).map(|&s| s as usize)
        }
    }

    fn insert(&mut self, id: u32, slot: usize) {
        if id < DENSE_TRACE_IDS {
            let i = id as usize;
            if self.dense.len() <= i {
                self.dense.resize(i + 1, u32::MAX);
            }
            self.dense[i] = slot as u32;
        } else {
            self.sparse.insert(id, slot as u32);
        }
    }
}

/// A trace: its stack and its latest values (size, active, overhead,
/// total_count, total_bytes).
struct Trace {
    stack: u32,
    values: [i64; 5],
}

/// A distinct stack: the sum of its traces' latest values, and its change
/// within the snapshot being applied.
pub(super) struct StackState {
    pub(super) id: u64,
    values: [i64; 5],
    delta: [i64; 5],
    /// Listed in `Deltas::touched` (reused across snapshots: no per-snapshot
    /// map).
    touched: bool,
}

/// The per-trace and per-stack values of one source.
#[derive(Default)]
pub(super) struct Deltas {
    trace_index: TraceIndex,
    traces: Vec<Trace>,
    /// The distinct stacks, in order of appearance.
    pub(super) stacks: Vec<StackState>,
    touched: Vec<u32>,
    stack_index: HashMap<u64, u32>,
}

impl Deltas {
    /// Applies one snapshot: `stack_id` gives the stack id of a key seen
    /// for the first time (symbolizing and interning it). Unless `replay`
    /// (a snapshot stored by an earlier load, read again to rebuild the
    /// values), the changed stacks' rows and the total go to `pending`.
    pub(super) fn apply(
        &mut self,
        process_id: u64,
        batch: &ModelBatch,
        ts: i64,
        replay: bool,
        pending: &mut Pending,
        mut stack_id: impl FnMut(u64) -> u64,
    ) {
        debug_assert_eq!(batch.values.len(), batch.stacks.len() * VALUES);
        for (&key, v) in batch.stacks.iter().zip(batch.values.chunks_exact(VALUES)) {
            let new: [i64; VALUES] = [v[0], v[1], v[2], v[3], v[4]];
            let trace_id = key as u32;
            let (stack, old) = match self.trace_index.get(trace_id) {
                Some(slot) => {
                    let tr = &mut self.traces[slot];
                    (tr.stack as usize, std::mem::replace(&mut tr.values, new))
                }
                None => {
                    let stack = self.stack_slot(stack_id(key));
                    self.trace_index.insert(trace_id, self.traces.len());
                    self.traces.push(Trace {
                        stack: stack as u32,
                        values: new,
                    });
                    (stack, [0; VALUES])
                }
            };
            let s = &mut self.stacks[stack];
            if !s.touched {
                s.touched = true;
                self.touched.push(stack as u32);
            }
            for i in 0..VALUES {
                let delta = new[i].wrapping_sub(old[i]);
                s.delta[i] = s.delta[i].wrapping_add(delta);
                s.values[i] = s.values[i].wrapping_add(delta);
            }
        }
        let mut touched = std::mem::take(&mut self.touched);
        for &i in &touched {
            let s = &mut self.stacks[i as usize];
            let d = std::mem::take(&mut s.delta);
            s.touched = false;
            if replay {
                continue;
            }
            let v = &s.values;
            SampleRow {
                process_id,
                ts,
                stack_id: s.id,
                size: v[0],
                active: v[1],
                overhead: v[2],
                total_count: v[3] as u64,
                total_bytes: v[4] as u64,
                size_delta: d[0],
                active_delta: d[1],
                count_delta: d[3],
                bytes_delta: d[4],
            }
            .encode(&mut pending.samples);
            pending.sample_stacks.push(i);
        }
        touched.clear();
        self.touched = touched;
        if replay {
            return;
        }
        // No total reported: the sum of every trace's latest values.
        let s = batch.total.as_deref().map_or_else(
            || {
                let mut s = [0i64; VALUES];
                for stack in &self.stacks {
                    for (acc, x) in s.iter_mut().zip(&stack.values) {
                        *acc = acc.wrapping_add(*x);
                    }
                }
                s
            },
            |t| [t[0], t[1], t[2], t[3], t[4]],
        );
        pending.totals.push(TotalRow {
            process_id,
            ts,
            size: s[0],
            active: s[1],
            overhead: s[2],
            total_count: s[3] as u64,
            total_bytes: s[4] as u64,
        });
    }

    /// The slot of the stack `id`, created at zero if new.
    fn stack_slot(&mut self, id: u64) -> usize {
        if let Some(&i) = self.stack_index.get(&id) {
            return i as usize;
        }
        let i = self.stacks.len();
        self.stacks.push(StackState {
            id,
            values: [0; VALUES],
            delta: [0; VALUES],
            touched: false,
        });
        self.stack_index.insert(id, i as u32);
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_index_finds_dense_and_sparse_ids() {
        let mut t = TraceIndex::default();
        let ids = [
            0u32,
            7,
            3,
            DENSE_TRACE_IDS - 1,
            DENSE_TRACE_IDS,
            0x8000_0000,
            u32::MAX,
        ];
        for (slot, &id) in ids.iter().enumerate() {
            assert_eq!(t.get(id), None, "{id}");
            t.insert(id, slot);
        }
        for (slot, &id) in ids.iter().enumerate() {
            assert_eq!(t.get(id), Some(slot), "{id}");
        }
        assert_eq!(t.get(1), None);
        assert_eq!(t.get(DENSE_TRACE_IDS + 1), None);
        // Ids at or above the limit never grow the flat table.
        assert_eq!(t.dense.len(), DENSE_TRACE_IDS as usize);
    }
}
