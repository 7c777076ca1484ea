//! Decoded stack samples in one flat buffer: a few large allocations instead
//! of one per frame, because a flame graph's input is millions of frames.

use std::ops::Range;

/// A list of `(stack, value)` samples; stacks are root first.
#[derive(Debug, Default, Clone)]
pub struct Samples {
    bytes: Vec<u8>,
    /// End offset in `bytes` of every frame label.
    frame_ends: Vec<usize>,
    /// Per sample: the range of frame indexes and the value.
    stacks: Vec<(Range<usize>, i64)>,
    /// Index of the first frame of the sample being built.
    open: usize,
}

impl Samples {
    /// An empty list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Removes every sample, keeping the allocations.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.frame_ends.clear();
        self.stacks.clear();
        self.open = 0;
    }

    /// Appends one frame to the sample being built.
    pub fn push_frame(&mut self, label: &[u8]) {
        self.bytes.extend_from_slice(label);
        self.frame_ends.push(self.bytes.len());
    }

    /// Appends one frame whose bytes were written into [`Self::frame_buf`].
    pub fn commit_frame(&mut self) {
        self.frame_ends.push(self.bytes.len());
    }

    /// The byte buffer frame labels are written to (for decoders that
    /// unescape in place); finish the frame with [`Self::commit_frame`].
    pub fn frame_buf(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Ends the sample being built with its value.
    pub fn finish_sample(&mut self, value: i64) {
        let end = self.frame_ends.len();
        self.stacks.push((self.open..end, value));
        self.open = end;
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
        self.stacks.len()
    }

    /// True when there is no sample.
    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }

    /// Total number of frames over all samples.
    pub fn frame_count(&self) -> usize {
        self.frame_ends.len()
    }

    fn frame(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.frame_ends[i - 1] };
        &self.bytes[start..self.frame_ends[i]]
    }

    /// Iterates over `(frames root first, value)`.
    pub fn iter(&self) -> impl Iterator<Item = (Stack<'_>, i64)> + '_ {
        self.stacks.iter().map(move |(r, v)| {
            (
                Stack {
                    samples: self,
                    range: r.clone(),
                },
                *v,
            )
        })
    }
}

/// One sample's frames, root first.
#[derive(Debug, Clone)]
pub struct Stack<'a> {
    samples: &'a Samples,
    range: Range<usize>,
}

impl<'a> Stack<'a> {
    /// Number of frames.
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// True for an empty stack (a sample attributed to the root).
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }

    /// Frame `i` (0 = root).
    pub fn get(&self, i: usize) -> &'a [u8] {
        self.samples.frame(self.range.start + i)
    }

    /// Iterates frames root first.
    pub fn frames(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let s = self.samples;
        self.range.clone().map(move |i| s.frame(i))
    }
}
