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
        let (mut labels, mut rows) = (vec!["stale".to_string()], Vec::new());
        symbolize_stack(&mut sym, &stack, &mut labels, &mut rows);
        assert_eq!(labels, ["main", "handle (handler.c:42)", "0x1234"]);
        assert_eq!(rows[1].function, "handle");
        assert_eq!(rows[1].file, "/src/srv/handler.c");
        assert_eq!(rows[1].line, 42);
        assert_eq!(rows[1].module, "srv");
        assert_eq!(rows[0].module, "");
        assert_eq!(rows[0].frame_id, stable_hash(&[b"main"]));
    }
}
