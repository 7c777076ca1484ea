//! Decoded stack samples, interned: every distinct frame label is stored
//! once, and a stack is a run of 4-byte label ids. A flame graph's input is
//! millions of frames over comparatively few labels, so interning while
//! decoding keeps memory near the label bytes, and lets the filters and the
//! tree builder work once per distinct label and compare ids, not bytes.

use hashbrown::HashTable;
use std::hash::{BuildHasher, Hasher};

/// Hash of a label's bytes (FxHash: fast on short labels; the table is
/// private and its input is not attacker-timed).
pub(crate) fn hash_label(label: &[u8]) -> u64 {
    let mut h = rustc_hash::FxBuildHasher.build_hasher();
    h.write(label);
    h.finish()
}

/// Distinct labels: an arena of their bytes and a hash table of their ids.
#[derive(Default, Clone)]
pub struct Labels {
    arena: Vec<u8>,
    /// End offset in `arena` of every label.
    ends: Vec<usize>,
    table: HashTable<u32>,
}

impl std::fmt::Debug for Labels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Labels")
            .field("count", &self.ends.len())
            .field("bytes", &self.arena.len())
            .finish()
    }
}

impl Labels {
    /// Number of distinct labels.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when no label is stored.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The bytes of label `id`.
    #[inline]
    pub fn get(&self, id: u32) -> &[u8] {
        let i = id as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.arena[start..self.ends[i]]
    }

    /// The id of `label`, if it is stored.
    pub fn find(&self, label: &[u8]) -> Option<u32> {
        let h = hash_label(label);
        self.table.find(h, |&id| self.get(id) == label).copied()
    }

    /// The id of `label`, storing it first if it is new.
    pub fn intern(&mut self, label: &[u8]) -> u32 {
        let h = hash_label(label);
        let Labels { arena, ends, table } = self;
        let get = |id: u32| {
            let i = id as usize;
            let start = if i == 0 { 0 } else { ends[i - 1] };
            &arena[start..ends[i]]
        };
        if let Some(&id) = table.find(h, |&id| get(id) == label) {
            return id;
        }
        let id = ends.len() as u32;
        arena.extend_from_slice(label);
        ends.push(arena.len());
        let (arena, ends) = (&*arena, &*ends);
        table.insert_unique(h, id, |&id| {
            let i = id as usize;
            let start = if i == 0 { 0 } else { ends[i - 1] };
            hash_label(&arena[start..ends[i]])
        });
        id
    }

    /// Interns the label written at the end of the arena after `start`
    /// (decoders write into the arena directly to avoid a copy); when it
    /// already exists the bytes are removed again.
    fn intern_tail(&mut self, start: usize) -> u32 {
        let h = hash_label(&self.arena[start..]);
        let Labels { arena, ends, table } = self;
        let (head, tail) = arena.split_at(start);
        let found = table
            .find(h, |&id| {
                let i = id as usize;
                let s = if i == 0 { 0 } else { ends[i - 1] };
                &head[s..ends[i]] == tail
            })
            .copied();
        if let Some(id) = found {
            arena.truncate(start);
            return id;
        }
        let id = ends.len() as u32;
        ends.push(arena.len());
        let (arena, ends) = (&*arena, &*ends);
        table.insert_unique(h, id, |&id| {
            let i = id as usize;
            let s = if i == 0 { 0 } else { ends[i - 1] };
            hash_label(&arena[s..ends[i]])
        });
        id
    }

    fn clear(&mut self) {
        self.arena.clear();
        self.ends.clear();
        self.table.clear();
    }
}

/// A list of `(stack, value)` samples; stacks are root first.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    labels: Labels,
    /// The label id of every frame, stack after stack.
    ids: Vec<u32>,
    /// End index in `ids` of every sample's stack.
    ends: Vec<usize>,
    values: Vec<i64>,
    /// Arena length when the frame being decoded started.
    frame_start: Option<usize>,
}

impl Samples {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Removes every sample, keeping the allocations.
    pub fn clear(&mut self) {
        self.labels.clear();
        self.ids.clear();
        self.ends.clear();
        self.values.clear();
        self.frame_start = None;
    }

    /// Appends one frame to the sample being built.
    pub fn push_frame(&mut self, label: &[u8]) {
        let id = self.labels.intern(label);
        self.ids.push(id);
    }

    /// The byte buffer frame labels are written to (for decoders that
    /// unescape in place); finish the frame with [`Self::commit_frame`].
    pub fn frame_buf(&mut self) -> &mut Vec<u8> {
        if self.frame_start.is_none() {
            self.frame_start = Some(self.labels.arena.len());
        }
        &mut self.labels.arena
    }

    /// Appends the frame whose bytes were written into [`Self::frame_buf`].
    pub fn commit_frame(&mut self) {
        let start = self.frame_start.take().unwrap_or(self.labels.arena.len());
        let id = self.labels.intern_tail(start);
        self.ids.push(id);
    }

    /// Ends the sample being built with its value.
    pub fn finish_sample(&mut self, value: i64) {
        self.ends.push(self.ids.len());
        self.values.push(value);
    }

    /// Adds a whole sample.
    pub fn push<L: AsRef<[u8]>>(&mut self, stack: &[L], value: i64) {
        for f in stack {
            self.push_frame(f.as_ref());
        }
        self.finish_sample(value);
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when there is no sample.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Total number of frames over all samples.
    pub fn frame_count(&self) -> usize {
        self.ids.len()
    }

    /// The distinct labels.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// The label ids of sample `i`, root first.
    #[inline]
    pub fn stack_ids(&self, i: usize) -> &[u32] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.ids[start..self.ends[i]]
    }

    /// Every sample's label ids, one stack after the other.
    pub(crate) fn all_ids(&self) -> &[u32] {
        &self.ids
    }

    /// The value of sample `i`.
    #[inline]
    pub fn value(&self, i: usize) -> i64 {
        self.values[i]
    }

    /// Iterates over `(frames root first, value)`.
    pub fn iter(&self) -> impl Iterator<Item = (Stack<'_>, i64)> + '_ {
        (0..self.len()).map(move |i| {
            (
                Stack {
                    labels: &self.labels,
                    ids: self.stack_ids(i),
                },
                self.values[i],
            )
        })
    }
}

/// One sample's frames, root first.
#[derive(Debug, Clone)]
pub struct Stack<'a> {
    labels: &'a Labels,
    ids: &'a [u32],
}

impl<'a> Stack<'a> {
    /// Number of frames.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// True for an empty stack (a sample attributed to the root).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Frame `i` (0 = root).
    pub fn get(&self, i: usize) -> &'a [u8] {
        self.labels.get(self.ids[i])
    }

    /// The label ids, root first.
    pub fn ids(&self) -> &'a [u32] {
        self.ids
    }

    /// Iterates frames root first.
    pub fn frames(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let labels = self.labels;
        self.ids.iter().map(move |&id| labels.get(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interns_each_label_once() {
        let mut s = Samples::new();
        s.push(&["a", "b", "a"], 1);
        s.frame_buf().extend_from_slice(b"b");
        s.commit_frame();
        s.frame_buf().extend_from_slice(b"c");
        s.commit_frame();
        s.finish_sample(2);
        s.push::<&str>(&[], 3);
        assert_eq!(s.labels().len(), 3);
        let got: Vec<(Vec<&[u8]>, i64)> =
            s.iter().map(|(st, v)| (st.frames().collect(), v)).collect();
        assert_eq!(
            got,
            vec![
                (vec![&b"a"[..], b"b", b"a"], 1),
                (vec![&b"b"[..], b"c"], 2),
                (vec![], 3)
            ]
        );
        assert_eq!(s.labels().find(b"c"), Some(2));
        assert_eq!(s.labels().find(b"d"), None);
    }
}
