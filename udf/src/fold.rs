//! Folded stacks (`a;b;c` and a value), the format flamegraph.pl, inferno and
//! speedscope read.
//!
//! The folded format cannot carry a `;` inside a frame or a line break, so in
//! a folded line a frame's `;` becomes `:` and `\r`/`\n` become a space; the
//! tree functions keep labels byte-exact. Identical stacks (after the filter)
//! are merged, stacks whose merged value is 0 are left out (they draw
//! nothing), and lines are sorted by their bytes, as inferno's collapsers do.

use crate::filter;
use crate::options::FilterOptions;
use crate::samples::Samples;
use crate::{Error, Result};
use std::borrow::Cow;
use std::collections::HashMap;

/// Folds `samples` into merged, sorted `(line, value)` pairs.
pub fn stack_fold(samples: &Samples, opts: &FilterOptions) -> Result<Vec<(Vec<u8>, i64)>> {
    let mut merged: HashMap<Vec<u8>, i64> = HashMap::new();
    let mut buf: Vec<Cow<'_, [u8]>> = Vec::new();
    let mut line = Vec::new();
    let identity = opts.is_identity();
    for (stack, v) in samples.iter() {
        line.clear();
        if identity {
            for (i, f) in stack.frames().enumerate() {
                push_frame(&mut line, f, i > 0);
            }
        } else {
            if !filter::apply(opts, &stack, &mut buf) {
                continue;
            }
            for (i, f) in buf.iter().enumerate() {
                push_frame(&mut line, f, i > 0);
            }
        }
        match merged.get_mut(&line) {
            Some(total) => *total = total.checked_add(v).ok_or(Error::Overflow)?,
            None => {
                merged.insert(line.clone(), v);
            }
        }
    }
    let mut out: Vec<(Vec<u8>, i64)> = merged.into_iter().filter(|(_, v)| *v != 0).collect();
    out.sort_unstable();
    Ok(out)
}

fn push_frame(line: &mut Vec<u8>, f: &[u8], sep: bool) {
    if sep {
        line.push(b';');
    }
    line.extend(f.iter().map(|&b| match b {
        b';' => b':',
        b'\n' | b'\r' => b' ',
        b => b,
    }));
}
