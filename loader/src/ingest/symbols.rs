//! Symbolizing a stack of the model: address frames through the
//! [`Symbolizer`] (the leaf at its address, callers at `addr - 1` since they
//! are return addresses), frames the profile names itself labelled at the
//! same granularity; each becomes a frames-dictionary row.

use crate::model::Frame;
use crate::storage::rows::{stable_hash, FrameRow};
use crate::symbolize::Symbolizer;

/// The frames of `stack` (leaf first, as readers give them) into `labels`
/// and `rows`, root first (both cleared first). An address can expand to
/// several frames (inlined calls).
pub(super) fn symbolize_stack(
    sym: &mut Symbolizer,
    stack: &[Frame],
    labels: &mut Vec<String>,
    rows: &mut Vec<FrameRow>,
) {
    labels.clear();
    rows.clear();
    for (depth, frame) in stack.iter().enumerate().rev() {
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
                for f in frames {
                    labels.push(f.label.clone());
                    rows.push(FrameRow {
                        frame_id: stable_hash(&[f.label.as_bytes()]),
                        label: f.label.clone(),
                        function: f.function.clone(),
                        file: f.file.clone().unwrap_or_default(),
                        line: f.line.unwrap_or(0),
                        module: module.clone(),
                    });
                }
            }
            Frame::Symbol(s) => {
                let f = sym.named_frame(&s.function, s.file.as_deref(), s.line);
                labels.push(f.label.clone());
                rows.push(FrameRow {
                    frame_id: stable_hash(&[f.label.as_bytes()]),
                    label: f.label,
                    function: f.function,
                    file: f.file.unwrap_or_default(),
                    line: f.line.unwrap_or(0),
                    module: s.module.clone().unwrap_or_default(),
                });
            }
        }
    }
}
