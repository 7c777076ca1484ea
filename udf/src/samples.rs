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

/// `a == b` for short labels without a `memcmp` call: word compares, the
/// last word overlapping (interning compares every frame with its match).
#[inline(always)]
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let w8 = |s: &[u8], i: usize| u64::from_ne_bytes(s[i..i + 8].try_into().expect("8 bytes"));
    let w4 = |s: &[u8], i: usize| u32::from_ne_bytes(s[i..i + 4].try_into().expect("4 bytes"));
    if n >= 8 {
        let mut i = 0;
        while i + 8 < n {
            if w8(a, i) != w8(b, i) {
                return false;
            }
            i += 8;
        }
        w8(a, n - 8) == w8(b, n - 8)
    } else if n >= 4 {
        w4(a, 0) == w4(b, 0) && w4(a, n - 4) == w4(b, n - 4)
    } else {
        a == b
    }
}

/// LEB128 of `n`, at most 4 bytes for `n <= MAX_FRAME_BYTES`.
fn leb(mut n: usize) -> ([u8; 5], usize) {
    let mut b = [0u8; 5];
    let mut k = 0;
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            b[k] = byte;
            return (b, k + 1);
        }
        b[k] = byte | 0x80;
        k += 1;
    }
}

/// Distinct labels: an arena of their bytes and a hash table of their ids.
#[derive(Default, Clone)]
pub struct Labels {
    arena: Vec<u8>,
    /// Start offset in `arena` of every label, then the end (a leading 0
    /// once a label is stored: no branch for the first label).
    ends: Vec<usize>,
    table: HashTable<u32>,
}

impl std::fmt::Debug for Labels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Labels")
            .field("count", &self.len())
            .field("bytes", &self.arena.len())
            .finish()
    }
}

impl Labels {
    /// Number of distinct labels.
    pub fn len(&self) -> usize {
        self.ends.len().saturating_sub(1)
    }

    /// True when no label is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of label `id`.
    #[inline]
    pub fn get(&self, id: u32) -> &[u8] {
        let i = id as usize;
        &self.arena[self.ends[i]..self.ends[i + 1]]
    }

    /// The id of `label`, if it is stored.
    pub fn find(&self, label: &[u8]) -> Option<u32> {
        let h = hash_label(label);
        self.table.find(h, |&id| same(self.get(id), label)).copied()
    }

    /// The id of `label`, storing it first if it is new.
    #[inline]
    pub fn intern(&mut self, label: &[u8]) -> u32 {
        let h = hash_label(label);
        let Labels { arena, ends, table } = self;
        let get = |id: u32| {
            let i = id as usize;
            &arena[ends[i]..ends[i + 1]]
        };
        if let Some(&id) = table.find(h, |&id| same(get(id), label)) {
            return id;
        }
        if ends.is_empty() {
            ends.push(0);
        }
        let id = (ends.len() - 1) as u32;
        arena.extend_from_slice(label);
        ends.push(arena.len());
        let (arena, ends) = (&*arena, &*ends);
        table.insert_unique(h, id, |&id| {
            let i = id as usize;
            hash_label(&arena[ends[i]..ends[i + 1]])
        });
        id
    }
}

/// A list of `(stack, value)` samples; stacks are root first.
///
/// Frames are kept as decoded, in one byte buffer, each behind its length
/// (LEB128, one byte for a label under 128 bytes, as in RowBinary): decoding is a sequential copy, a stack is one contiguous run,
/// and the frame after a known one is found without another lookup (the
/// tree builder walks stacks with a cursor). A pruned tree looks only at
/// the few frames near the root its kept nodes need; [`Samples::intern`]
/// gives label ids when every frame is needed.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    /// `len (LEB128), bytes` per frame.
    bytes: Vec<u8>,
    /// Per sample: end offset in `bytes`, cumulative frame count, value.
    byte_end: Vec<usize>,
    frame_end: Vec<usize>,
    values: Vec<i64>,
    /// Frames of the sample being built.
    open_frames: usize,
    /// The per-sample index was freed ([`Self::release_index`]): `bytes`
    /// holds exactly the finished samples' frames.
    released: bool,
    /// Offset of the length of the frame being decoded.
    open_frame: Option<usize>,
}

/// A frame longer than this many bytes (256 MiB) cannot be stored: its
/// length must fit the 4 bytes reserved while it is decoded.
pub const MAX_FRAME_BYTES: u64 = (1 << 28) - 1;

impl Samples {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Removes every sample, keeping the allocations.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.byte_end.clear();
        self.frame_end.clear();
        self.values.clear();
        self.open_frames = 0;
        self.open_frame = None;
        self.released = false;
    }

    /// Appends one frame to the sample being built.
    ///
    /// # Panics
    /// For a frame longer than [`MAX_FRAME_BYTES`] (decoders use the
    /// checked [`Self::commit_frame`]).
    #[inline]
    pub fn push_frame(&mut self, label: &[u8]) {
        assert!(
            label.len() as u64 <= MAX_FRAME_BYTES,
            "frame larger than 256 MiB"
        );
        if label.len() < 0x80 {
            self.bytes.push(label.len() as u8);
        } else {
            let (b, k) = leb(label.len());
            self.bytes.extend_from_slice(&b[..k]);
        }
        self.bytes.extend_from_slice(label);
        self.open_frames += 1;
    }

    /// Appends `count` frames already encoded as stored: each a one-byte
    /// length (under 128) and its bytes, as RowBinary has them.
    pub(crate) fn push_encoded_frames(&mut self, encoded: &[u8], count: usize) {
        debug_assert!(self.open_frame.is_none());
        self.bytes.extend_from_slice(encoded);
        self.open_frames += count;
    }

    /// The byte buffer frame labels are written to (for decoders that
    /// unescape in place); finish the frame with [`Self::commit_frame`].
    pub fn frame_buf(&mut self) -> &mut Vec<u8> {
        if self.open_frame.is_none() {
            self.open_frame = Some(self.bytes.len());
            self.bytes.extend_from_slice(&[0; 4]);
        }
        &mut self.bytes
    }

    /// Ends the frame whose bytes were written into [`Self::frame_buf`].
    pub fn commit_frame(&mut self) -> Result<()> {
        self.frame_buf();
        let at = self.open_frame.take().unwrap_or_default();
        let n = self.bytes.len() - at - 4;
        if n as u64 > MAX_FRAME_BYTES {
            return Err(Error::Limit(format!(
                "a frame is longer than {MAX_FRAME_BYTES} bytes"
            )));
        }
        // The length goes where the 4 placeholder bytes are; a shorter
        // encoding moves the label down.
        let (b, k) = leb(n);
        self.bytes[at..at + k].copy_from_slice(&b[..k]);
        if k < 4 {
            self.bytes.copy_within(at + 4.., at + k);
            self.bytes.truncate(at + k + n);
        }
        self.open_frames += 1;
        Ok(())
    }

    /// Ends the sample being built with its value.
    pub fn finish_sample(&mut self, value: i64) {
        let frames = self.frame_end.last().copied().unwrap_or(0) + self.open_frames;
        self.open_frames = 0;
        self.frame_end.push(frames);
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
        self.frame_end.last().copied().unwrap_or(0)
    }

    /// Sample `i`'s first frame index (counting all frames before it), its
    /// frame count and its first byte offset.
    #[inline]
    pub(crate) fn pos(&self, i: usize) -> (usize, usize, usize) {
        let (f0, b0) = if i == 0 {
            (0, 0)
        } else {
            (self.frame_end[i - 1], self.byte_end[i - 1])
        };
        (f0, self.frame_end[i] - f0, b0)
    }

    /// The frame stored at byte offset `at`, and the offset after it.
    #[inline]
    pub(crate) fn frame_at(&self, at: usize) -> (&[u8], usize) {
        let first = self.bytes[at];
        let (n, start) = if first < 0x80 {
            (first as usize, at + 1)
        } else {
            let mut n = 0usize;
            let mut i = at;
            let mut shift = 0;
            loop {
                let b = self.bytes[i];
                n |= ((b & 0x7f) as usize) << shift;
                i += 1;
                if b < 0x80 {
                    break;
                }
                shift += 7;
            }
            (n, i)
        };
        (&self.bytes[start..start + n], start + n)
    }

    /// Frees the per-sample index (ends, counts, values), keeping only the
    /// frame bytes: for a tree builder that has taken every stack's offset
    /// and value and from then on only reads frames ([`Self::frame_at`]).
    /// The list then reads as empty.
    pub(crate) fn release_index(&mut self) {
        let end = self.frames_end();
        self.bytes.truncate(end);
        self.open_frames = 0;
        self.open_frame = None;
        self.released = true;
        self.byte_end = Vec::new();
        self.frame_end = Vec::new();
        self.values = Vec::new();
    }

    /// Frees the per-sample index like [`Self::release_index`], returning
    /// what a builder of interned stacks needs of it: each sample's frame
    /// count and its value (12 bytes a sample instead of 24, held while
    /// the frames are interned).
    pub(crate) fn take_counts_and_values(&mut self) -> (Vec<u32>, Vec<i64>) {
        let mut prev = 0;
        let counts = self
            .frame_end
            .iter()
            .map(|&e| {
                let n = (e - prev) as u32;
                prev = e;
                n
            })
            .collect();
        let values = std::mem::take(&mut self.values);
        self.release_index();
        (counts, values)
    }

    /// The end of the finished samples' frames in `bytes`.
    fn frames_end(&self) -> usize {
        if self.released {
            self.bytes.len()
        } else {
            self.byte_end.last().copied().unwrap_or(0)
        }
    }

    /// The frame buffer (for prefetching).
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The value of sample `i`.
    #[inline]
    pub fn value(&self, i: usize) -> i64 {
        self.values[i]
    }

    /// Interns every frame into `labels`, appending one label id per frame
    /// to `ids` (stack after stack, as stored).
    /// Also after [`Self::release_index`] (a tree builder that has taken
    /// the stacks' offsets frees the index first: it is not needed here).
    pub fn intern_into(&self, labels: &mut Labels, ids: &mut Vec<u32>) {
        if !self.released {
            ids.reserve(self.frame_count());
        }
        let mut at = 0;
        let end = self.frames_end();
        while at < end {
            let (f, next) = self.frame_at(at);
            ids.push(labels.intern(f));
            at = next;
        }
    }

    /// Iterates over `(frames root first, value)`.
    pub fn iter(&self) -> impl Iterator<Item = (Stack<'_>, i64)> + '_ {
        (0..self.len()).map(move |i| {
            let (_, n, b0) = self.pos(i);
            (
                Stack {
                    samples: self,
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

    /// Frame `i` (0 = root); walks the frames before it.
    pub fn get(&self, i: usize) -> &'a [u8] {
        self.frames()
            .nth(i)
            .unwrap_or_else(|| panic!("frame {i} of a {}-frame stack", self.n))
    }

    /// Iterates frames root first.
    pub fn frames(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let s = self.samples;
        let mut at = self.b0;
        (0..self.n).map(move |_| {
            let (f, next) = s.frame_at(at);
            at = next;
            f
        })
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
        let long = vec![b'x'; 300];
        s.frame_buf().extend_from_slice(&long);
        s.commit_frame().unwrap();
        s.push_frame(&long[..200]);
        s.finish_sample(5);
        let got: Vec<(Vec<&[u8]>, i64)> =
            s.iter().map(|(st, v)| (st.frames().collect(), v)).collect();
        assert_eq!(
            got,
            vec![
                (vec![&b"a"[..], b"b", b"a"], 1),
                (vec![&b"b"[..], b"c"], 2),
                (vec![], 3),
                (vec![&b""[..]], 4),
                (vec![&long[..], &long[..200]], 5)
            ]
        );
        let (mut labels, mut ids) = (Labels::default(), Vec::new());
        s.intern_into(&mut labels, &mut ids);
        assert_eq!(ids, vec![0, 1, 0, 1, 2, 3, 4, 5]);
        assert_eq!(labels.len(), 6);
        assert_eq!(labels.find(b"c"), Some(2));
        assert_eq!(labels.find(b"d"), None);
    }
}
