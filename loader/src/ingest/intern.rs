//! Interning: each distinct stack (its id is the hash of its frame labels,
//! root first) and each distinct frame is written to the `stacks` and
//! `frames` dictionaries once per load; the rows wait here for the next
//! batch.

use crate::storage::rows::{stable_hash, FrameRow, StackRow};
use rustc_hash::FxHashSet as HashSet;

/// The frames and stacks seen by a load, and those not yet in a batch.
#[derive(Default)]
pub(super) struct Interner {
    frames_seen: HashSet<u64>,
    stacks_seen: HashSet<u64>,
    /// Frame rows for the next batch.
    pub(super) pending_frames: Vec<FrameRow>,
    /// Stack rows for the next batch.
    pub(super) pending_stacks: Vec<StackRow>,
}

impl Interner {
    /// The id of the stack of `labels` (root first), whose frames are
    /// `rows`; a new stack's rows, and its frames not seen before, are
    /// queued for the next batch.
    pub(super) fn intern(&mut self, labels: &[String], rows: &[FrameRow]) -> u64 {
        let parts: Vec<&[u8]> = labels.iter().map(|l| l.as_bytes()).collect();
        let stack_id = stable_hash(&parts);
        if !self.stacks_seen.insert(stack_id) {
            return stack_id;
        }
        for f in rows {
            if self.frames_seen.insert(f.frame_id) {
                self.pending_frames.push(f.clone());
            }
        }
        self.pending_stacks.push(StackRow {
            stack_id,
            frame_ids: rows.iter().map(|f| f.frame_id).collect(),
            labels: labels.to_vec(),
        });
        stack_id
    }

    /// Forgets the queued rows (of replayed records, stored by an earlier
    /// load).
    pub(super) fn drop_pending(&mut self) {
        self.pending_frames.clear();
        self.pending_stacks.clear();
    }

    /// Distinct frames seen.
    pub(super) fn frames(&self) -> usize {
        self.frames_seen.len()
    }
}
