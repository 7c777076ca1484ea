//! Symbolizing a stack of the model: address frames through the
//! [`Symbolizer`] (the leaf at its address, callers at `addr - 1` since they
//! are return addresses), frames the profile names itself labelled at the
//! same granularity; each becomes a frames-dictionary row.

use crate::model::Frame;
use crate::storage::rows::{stable_hash, FrameRow};
use crate::symbolize::Symbolizer;
use std::sync::Arc;

/// The frames of one load, one row per frame id, shared by every stack
/// holding the frame: a deep stack costs a pointer per frame, not a copy
/// of its frames' names.
#[derive(Debug, Default)]
pub(super) struct FrameTable {
    rows: rustc_hash::FxHashMap<u64, Arc<FrameRow>>,
    /// The ids of frames the symbolizer could not name (an address's
    /// fallback label), for a profile's "symbolized" share.
    unnamed: rustc_hash::FxHashSet<u64>,
}

impl FrameTable {
    /// Distinct frames held.
    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    pub(super) fn clear(&mut self) {
        self.rows.clear();
        self.unnamed.clear();
    }

    /// Whether frame `id` is an address the symbolizer could not name.
    pub(super) fn is_unnamed(&self, id: u64) -> bool {
        self.unnamed.contains(&id)
    }
}

/// The frames of `stack` (leaf first, as readers give them) into `out`
/// (cleared first), root first, each the row `table` holds for its id (the
/// first row made for the id, as the frames dictionary keeps one). An
/// address can expand to several frames (inlined calls).
pub(super) fn symbolize_shared<'a>(
    sym: &mut Symbolizer,
    stack: impl DoubleEndedIterator<Item = &'a Frame> + ExactSizeIterator,
    table: &mut FrameTable,
    out: &mut Vec<Arc<FrameRow>>,
) {
    out.clear();
    each_frame(sym, stack, |row, named| {
        if !named {
            table.unnamed.insert(row.frame_id);
        }
        out.push(
            table
                .rows
                .entry(row.frame_id)
                .or_insert_with(|| Arc::new(row))
                .clone(),
        );
    });
}

/// Calls `f` with the row of each frame of `stack`, root first.
fn each_frame<'a>(
    sym: &mut Symbolizer,
    stack: impl DoubleEndedIterator<Item = &'a Frame> + ExactSizeIterator,
    mut f: impl FnMut(FrameRow, bool),
) {
    for (depth, frame) in stack.enumerate().rev() {
        match frame {
            Frame::Address(addr) => {
                // Module of each address, for the frames dictionary.
                let module = sym
                    .modules()
                    .lookup(*addr)
                    .and_then(|(i, _)| sym.modules().module(i).map(|m| m.basename()))
                    .unwrap_or_default();
                // Non-leaf frames are return addresses: looked up at addr - 1.
                let frames = if depth == 0 {
                    sym.symbolize(*addr)
                } else {
                    sym.symbolize_caller(*addr)
                };
                for s in frames {
                    let named = s.source != crate::symbolize::FrameSource::Unsymbolized;
                    f(
                        FrameRow {
                            frame_id: stable_hash(&[s.label.as_bytes()]),
                            label: s.label.clone(),
                            function: s.function.clone(),
                            file: s.file.clone().unwrap_or_default(),
                            line: s.line.unwrap_or(0),
                            module: module.clone(),
                        },
                        named,
                    );
                }
            }
            Frame::Symbol(s) => {
                let n = sym.named_frame(&s.function, s.file.as_deref(), s.line);
                f(
                    FrameRow {
                        frame_id: stable_hash(&[n.label.as_bytes()]),
                        label: n.label,
                        function: n.function,
                        file: n.file.unwrap_or_default(),
                        line: n.line.unwrap_or(0),
                        module: s.module.clone().unwrap_or_default(),
                    },
                    true,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Symbol;
    use crate::symbolize::{Granularity, SymbolizerOptions};

    /// Frames a profile names itself keep their module and get the label
    /// of the granularity; addresses in no module get the absolute-address
    /// fallback; the rows come out root first.
    #[test]
    fn named_frames_and_addresses_root_first() {
        let mut sym = Symbolizer::new(SymbolizerOptions {
            granularity: Granularity::FunctionFileLine,
            ..SymbolizerOptions::default()
        });
        let stack = [
            Frame::Address(0x1234),
            Frame::Symbol(Symbol {
                function: "handle".into(),
                file: Some("/src/srv/handler.c".into()),
                line: Some(42),
                module: Some("srv".into()),
            }),
            Frame::Symbol(Symbol {
                function: "main".into(),
                ..Symbol::default()
            }),
        ];
        let (mut table, mut rows) = (FrameTable::default(), Vec::new());
        symbolize_shared(&mut sym, stack.iter(), &mut table, &mut rows);
        let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["main", "handle (handler.c:42)", "0x1234"]);
        assert_eq!(rows[1].function, "handle");
        assert_eq!(rows[1].file, "/src/srv/handler.c");
        assert_eq!(rows[1].line, 42);
        assert_eq!(rows[1].module, "srv");
        assert_eq!(rows[0].module, "");
        assert_eq!(rows[0].frame_id, stable_hash(&[b"main"]));
    }
}
