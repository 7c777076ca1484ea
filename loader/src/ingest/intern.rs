//! Interning: each distinct stack (its id is the hash of its frame labels,
//! root first) and each distinct frame is written to the `stacks` and
//! `frames` dictionaries once per load; the rows wait here for the next
//! batch. A stack holds its frames by reference (the load's
//! [`FrameTable`]): a deep stack costs a pointer per frame, not a copy of
//! its frames' names.

use super::continuous::ResolvedStack;
use super::symbols::FrameTable;
use crate::storage::rows::{stable_hash_of, FrameRow};
use rustc_hash::FxHashSet as HashSet;
use std::sync::Arc;

/// The frames and stacks seen by a load, and those not yet in a batch.
#[derive(Default)]
pub(super) struct Interner {
    /// Every distinct frame of the load, one row each.
    pub(super) table: FrameTable,
    frames_seen: HashSet<u64>,
    stacks_seen: HashSet<u64>,
    /// Frame rows for the next batch.
    pub(super) pending_frames: Vec<Arc<FrameRow>>,
    /// Stack rows for the next batch.
    pub(super) pending_stacks: Vec<ResolvedStack>,
}

impl Interner {
    /// The id of the stack of `frames` (root first, rows of
    /// [`Interner::table`]); a new stack's row, and its frames not seen
    /// before, are queued for the next batch (`frames` is taken then).
    pub(super) fn intern(&mut self, frames: &mut Vec<Arc<FrameRow>>) -> u64 {
        let stack_id = stable_hash_of(frames.iter().map(|f| f.label.as_bytes()));
        if !self.stacks_seen.insert(stack_id) {
            return stack_id;
        }
        for f in frames.iter() {
            if self.frames_seen.insert(f.frame_id) {
                self.pending_frames.push(f.clone());
            }
        }
        let mut frames = std::mem::take(frames);
        frames.shrink_to_fit();
        self.pending_stacks.push(ResolvedStack { stack_id, frames });
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::rows::stable_hash;

    fn row(label: &str) -> Arc<FrameRow> {
        Arc::new(FrameRow {
            frame_id: stable_hash(&[label.as_bytes()]),
            label: label.into(),
            function: label.into(),
            file: String::new(),
            line: 0,
            module: String::new(),
        })
    }

    /// A stack and each frame are queued once; a stack sharing frames with
    /// an earlier one queues only its new frames.
    #[test]
    fn each_stack_and_frame_is_queued_once() {
        let mut i = Interner::default();
        let a = ["main", "f"];
        let b = ["main", "g"];
        let rows = |l: &[&str]| l.iter().map(|x| row(x)).collect::<Vec<_>>();
        let ida = i.intern(&mut rows(&a));
        assert_eq!(ida, stable_hash(&[b"main", b"f"]));
        assert_eq!(i.intern(&mut rows(&a)), ida);
        let idb = i.intern(&mut rows(&b));
        assert_ne!(ida, idb);
        let labels: Vec<&str> = i.pending_frames.iter().map(|f| f.label.as_str()).collect();
        assert_eq!(labels, ["main", "f", "g"]);
        assert_eq!(i.pending_stacks.len(), 2);
        assert!(i.pending_stacks[1].labels().eq(b));
        assert_eq!(i.frames(), 3);
        // Replayed: dropped, and not queued again.
        i.drop_pending();
        assert_eq!(i.intern(&mut rows(&b)), idb);
        assert!(i.pending_frames.is_empty() && i.pending_stacks.is_empty());
    }
}
