//! Decoded stack samples, and interned labels.
//!
//! A flame graph's input is millions of frames over comparatively fewer
//! labels. Samples keep frames as decoded (one buffer, 4-byte offsets);
//! [`Labels`] stores every distinct label once so that filters and the tree
//! builder work once per distinct label and compare 4-byte ids, not bytes.

use crate::{Error, Result};
use hashbrown::HashTable;
use std::hash::BuildHasher;

/// Hash of a label's bytes (foldhash, fixed seed: fast on short labels and
/// well spread in the high bits the table's probe uses; FxHash's were not,
/// and interning 400,000 labels like `f123456` spent most of its time
/// probing).
#[inline]
pub(crate) fn hash_label(label: &[u8]) -> u64 {
    foldhash::fast::FixedState::default().hash_one(label)
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
}

/// A list of `(stack, value)` samples; stacks are root first.
///
/// Frames are kept as decoded, in one byte buffer with a 4-byte end offset
/// per frame (relative to its stack's first byte): decoding is a sequential
/// copy, and a pruned tree looks only at the few frames near the root that
/// its kept nodes need. [`Samples::intern`] gives label ids when every frame
/// is needed.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    bytes: Vec<u8>,
    /// Per frame: end offset in `bytes`, relative to its stack's start.
    ends: Vec<u32>,
    /// Per sample: end index in `ends` and end offset in `bytes`.
    frame_end: Vec<usize>,
    byte_end: Vec<usize>,
    values: Vec<i64>,
}

/// A stack larger than this many bytes cannot be stored (frame offsets are
/// 4 bytes).
pub const MAX_STACK_BYTES: u64 = u32::MAX as u64;

impl Samples {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Removes every sample, keeping the allocations.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
        self.frame_end.clear();
        self.byte_end.clear();
        self.values.clear();
    }

    fn open_byte(&self) -> usize {
        self.byte_end.last().copied().unwrap_or(0)
    }

    /// Appends one frame to the sample being built.
    ///
    /// # Panics
    /// When the stack grows beyond [`MAX_STACK_BYTES`] (decoders use the
    /// checked [`Self::commit_frame`]).
    pub fn push_frame(&mut self, label: &[u8]) {
        self.bytes.extend_from_slice(label);
        self.commit_frame().expect("stack larger than 4 GiB");
    }

    /// The byte buffer frame labels are written to (for decoders that
    /// unescape in place); finish the frame with [`Self::commit_frame`].
    pub fn frame_buf(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Ends the frame whose bytes were written into [`Self::frame_buf`].
    pub fn commit_frame(&mut self) -> Result<()> {
        let rel = self.bytes.len() - self.open_byte();
        let rel = u32::try_from(rel)
            .map_err(|_| Error::Limit(format!("a stack is larger than {MAX_STACK_BYTES} bytes")))?;
        self.ends.push(rel);
        Ok(())
    }

    /// Ends the sample being built with its value.
    pub fn finish_sample(&mut self, value: i64) {
        self.frame_end.push(self.ends.len());
        self.byte_end.push(self.bytes.len());
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
        self.values.len()
    }

    /// True when there is no sample.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Total number of frames over all samples.
    pub fn frame_count(&self) -> usize {
        self.ends.len()
    }

    /// Sample `i`'s first frame index, frame count and first byte offset.
    #[inline]
    pub(crate) fn pos(&self, i: usize) -> (usize, usize, usize) {
        let (f0, b0) = if i == 0 {
            (0, 0)
        } else {
            (self.frame_end[i - 1], self.byte_end[i - 1])
        };
        (f0, self.frame_end[i] - f0, b0)
    }

    /// The bytes of frame `f` (a global frame index) of the stack starting
    /// at frame `f0` and byte `b0`.
    #[inline]
    pub(crate) fn frame_at(&self, f0: usize, b0: usize, f: usize) -> &[u8] {
        let start = if f == f0 {
            0
        } else {
            self.ends[f - 1] as usize
        };
        &self.bytes[b0 + start..b0 + self.ends[f] as usize]
    }

    /// The value of sample `i`.
    #[inline]
    pub fn value(&self, i: usize) -> i64 {
        self.values[i]
    }

    /// Interns every frame into `labels`, appending one label id per frame
    /// to `ids` (stack after stack, as stored).
    pub fn intern_into(&self, labels: &mut Labels, ids: &mut Vec<u32>) {
        ids.reserve(self.ends.len());
        for i in 0..self.len() {
            let (f0, n, b0) = self.pos(i);
            for f in f0..f0 + n {
                ids.push(labels.intern(self.frame_at(f0, b0, f)));
            }
        }
    }

    /// Iterates over `(frames root first, value)`.
    pub fn iter(&self) -> impl Iterator<Item = (Stack<'_>, i64)> + '_ {
        (0..self.len()).map(move |i| {
            let (f0, n, b0) = self.pos(i);
            (
                Stack {
                    samples: self,
                    f0,
                    n,
                    b0,
                },
                self.values[i],
            )
        })
    }
}

/// One sample's frames, root first.
#[derive(Debug, Clone)]
pub struct Stack<'a> {
    samples: &'a Samples,
    f0: usize,
    n: usize,
    b0: usize,
}

impl<'a> Stack<'a> {
    /// Number of frames.
    pub fn len(&self) -> usize {
        self.n
    }

    /// True for an empty stack (a sample attributed to the root).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Frame `i` (0 = root).
    pub fn get(&self, i: usize) -> &'a [u8] {
        assert!(i < self.n, "frame {i} of a {}-frame stack", self.n);
        self.samples.frame_at(self.f0, self.b0, self.f0 + i)
    }

    /// Iterates frames root first.
    pub fn frames(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let (s, f0, b0) = (self.samples, self.f0, self.b0);
        (f0..f0 + self.n).map(move |f| s.frame_at(f0, b0, f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_frames_and_interns_each_label_once() {
        let mut s = Samples::new();
        s.push(&["a", "b", "a"], 1);
        s.frame_buf().extend_from_slice(b"b");
        s.commit_frame().unwrap();
        s.frame_buf().extend_from_slice(b"c");
        s.commit_frame().unwrap();
        s.finish_sample(2);
        s.push::<&str>(&[], 3);
        s.push(&[""], 4);
        let got: Vec<(Vec<&[u8]>, i64)> =
            s.iter().map(|(st, v)| (st.frames().collect(), v)).collect();
        assert_eq!(
            got,
            vec![
                (vec![&b"a"[..], b"b", b"a"], 1),
                (vec![&b"b"[..], b"c"], 2),
                (vec![], 3),
                (vec![&b""[..]], 4)
            ]
        );
        let (mut labels, mut ids) = (Labels::default(), Vec::new());
        s.intern_into(&mut labels, &mut ids);
        assert_eq!(ids, vec![0, 1, 0, 1, 2, 3]);
        assert_eq!(labels.len(), 4);
        assert_eq!(labels.find(b"c"), Some(2));
        assert_eq!(labels.find(b"d"), None);
    }
}
