//! The incremental id dictionaries of a stream: frame id -> code address and
//! trace id -> frame ids (leaf first).
//!
//! MemHawk defines each id once, in the first snapshot that needs it, and the
//! definition holds for the rest of the file. [`Dictionaries`] accumulates
//! those definitions snapshot by snapshot, checks that every trace refers only
//! to defined frames and that no id is redefined differently, and resolves a
//! trace to its addresses.
//!
//! A trace id that is referenced by `changed` but never defined (trace 0 in
//! snapshot 0, the profiler's trace `0x80000000`) is not an error: it has an
//! empty stack, which callers show as the process root.

use std::collections::HashMap;

use super::proto::Snapshot;

/// Why a snapshot's dictionary entries were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DictionaryError {
    /// A stack trace names a frame id that is neither defined earlier nor in
    /// the same snapshot.
    #[error("trace {trace_id:#x} refers to undefined frame id {ptr_id}")]
    UndefinedFrame {
        /// The trace that refers to the frame.
        trace_id: u32,
        /// The undefined frame id.
        ptr_id: u32,
    },
    /// A frame id is defined a second time with another address.
    #[error("frame id {ptr_id} redefined from {old:#x} to {new:#x}")]
    FrameRedefined {
        /// The frame id.
        ptr_id: u32,
        /// The address it had.
        old: u64,
        /// The address of the new definition.
        new: u64,
    },
    /// A trace id is defined a second time with other frames.
    #[error("trace {trace_id:#x} redefined with different frames")]
    TraceRedefined {
        /// The trace id.
        trace_id: u32,
    },
}

/// Accumulated frame and trace definitions of one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dictionaries {
    frames: HashMap<u32, u64>,
    traces: HashMap<u32, Box<[u32]>>,
}

impl Dictionaries {
    /// Empty dictionaries, as at the start of a stream.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the `ptrIds` and `stacktraces` of `snapshot`.
    ///
    /// Frames are added before traces, so a trace may use frames defined in
    /// the same snapshot. The snapshot is checked in full before anything is
    /// added: on error the dictionaries are unchanged. Repeating a definition
    /// with the same value is accepted.
    ///
    /// # Errors
    /// A trace that refers to an undefined frame, or an id redefined with a
    /// different value.
    pub fn apply(&mut self, snapshot: &Snapshot) -> Result<(), DictionaryError> {
        let mut new_frames: HashMap<u32, u64> = HashMap::new();
        for ptr in &snapshot.ptr_ids {
            let known = self
                .frames
                .get(&ptr.ptr_id)
                .or_else(|| new_frames.get(&ptr.ptr_id));
            match known {
                Some(&old) if old != ptr.ptr_addr => {
                    return Err(DictionaryError::FrameRedefined {
                        ptr_id: ptr.ptr_id,
                        old,
                        new: ptr.ptr_addr,
                    })
                }
                Some(_) => {}
                None => {
                    new_frames.insert(ptr.ptr_id, ptr.ptr_addr);
                }
            }
        }
        let mut new_traces: HashMap<u32, &[u32]> = HashMap::new();
        for trace in &snapshot.stacktraces {
            if let Some(&ptr_id) = trace
                .ptr_id
                .iter()
                .find(|id| !self.frames.contains_key(id) && !new_frames.contains_key(id))
            {
                return Err(DictionaryError::UndefinedFrame {
                    trace_id: trace.trace_id,
                    ptr_id,
                });
            }
            let known = self
                .traces
                .get(&trace.trace_id)
                .map(|t| &t[..])
                .or_else(|| new_traces.get(&trace.trace_id).copied());
            match known {
                Some(old) if old != trace.ptr_id.as_slice() => {
                    return Err(DictionaryError::TraceRedefined {
                        trace_id: trace.trace_id,
                    })
                }
                Some(_) => {}
                None => {
                    new_traces.insert(trace.trace_id, &trace.ptr_id);
                }
            }
        }
        self.frames.extend(new_frames);
        self.traces
            .extend(new_traces.into_iter().map(|(id, ptrs)| (id, ptrs.into())));
        Ok(())
    }

    /// The address of frame `ptr_id`, if defined.
    #[must_use]
    pub fn frame_address(&self, ptr_id: u32) -> Option<u64> {
        self.frames.get(&ptr_id).copied()
    }

    /// The frame ids of trace `trace_id`, leaf first, if defined.
    #[must_use]
    pub fn trace_frames(&self, trace_id: u32) -> Option<&[u32]> {
        self.traces.get(&trace_id).map(|t| &t[..])
    }

    /// The code addresses of trace `trace_id`, leaf first.
    ///
    /// An undefined trace, or one with an empty stack, yields nothing: it
    /// stands for the process root.
    pub fn resolve(&self, trace_id: u32) -> impl ExactSizeIterator<Item = u64> + '_ {
        self.trace_frames(trace_id)
            .unwrap_or_default()
            .iter()
            // `apply` guarantees every frame of a stored trace is defined.
            .map(|ptr_id| self.frames[ptr_id])
    }

    /// Number of frame ids defined so far.
    #[must_use]
    pub fn frame_count(&self) -> usize {
        self.frames.len()
    }

    /// Number of trace ids defined so far.
    #[must_use]
    pub fn trace_count(&self) -> usize {
        self.traces.len()
    }
}
