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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(label: &str) -> FrameRow {
        FrameRow {
            frame_id: stable_hash(&[label.as_bytes()]),
            label: label.into(),
            function: label.into(),
            file: String::new(),
            line: 0,
            module: String::new(),
        }
    }

    /// A stack and each frame are queued once; a stack sharing frames with
    /// an earlier one queues only its new frames.
    #[test]
    fn each_stack_and_frame_is_queued_once() {
        let mut i = Interner::default();
        let a: Vec<String> = vec!["main".into(), "f".into()];
        let b: Vec<String> = vec!["main".into(), "g".into()];
        let rows = |l: &[String]| l.iter().map(|x| row(x)).collect::<Vec<_>>();
        let ida = i.intern(&a, &rows(&a));
        assert_eq!(ida, stable_hash(&[b"main", b"f"]));
        assert_eq!(i.intern(&a, &rows(&a)), ida);
        let idb = i.intern(&b, &rows(&b));
        assert_ne!(ida, idb);
        let labels: Vec<&str> = i.pending_frames.iter().map(|f| f.label.as_str()).collect();
        assert_eq!(labels, ["main", "f", "g"]);
        assert_eq!(i.pending_stacks.len(), 2);
        assert_eq!(i.pending_stacks[1].labels, b);
        assert_eq!(i.frames(), 3);
        // Replayed: dropped, and not queued again.
        i.drop_pending();
        assert_eq!(i.intern(&b, &rows(&b)), idb);
        assert!(i.pending_frames.is_empty() && i.pending_stacks.is_empty());
    }
}
