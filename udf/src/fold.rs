//! Folded stacks (`a;b;c` and a value), the format flamegraph.pl, inferno and
//! speedscope read.
//!
//! The folded format cannot carry a `;` inside a frame or a line break, so in
//! a folded line a frame's `;` becomes `:` and `\r`/`\n` become a space; the
//! tree functions keep labels byte-exact. Identical stacks (after the filter)
//! are merged, stacks whose merged value is 0 are left out (they draw
//! nothing), and lines are sorted by their bytes, as inferno's collapsers do.

use crate::filter::IdFilter;
use crate::options::FilterOptions;
use crate::samples::{Labels, Samples};
use crate::{Error, Result};
use hashbrown::HashTable;
use std::hash::{BuildHasher, Hasher};

fn hash_ids(s: &[u32]) -> u64 {
    let mut h = rustc_hash::FxBuildHasher.build_hasher();
    for &id in s {
        h.write_u32(id);
    }
    h.write_usize(s.len());
    h.finish()
}

/// Folds `samples` into merged, sorted `(line, value)` pairs. Stacks are
/// merged by their label ids; a line's text is built once per distinct
/// stack.
pub fn stack_fold(samples: &Samples, opts: &FilterOptions) -> Result<Vec<(Vec<u8>, i64)>> {
    let mut space = Labels::default();
    let mut all = Vec::new();
    samples.intern_into(&mut space, &mut all);
    let mut filter = IdFilter::new(opts, &mut space);
    let identity = opts.is_identity();
    // Distinct stacks: their ids in one buffer, `(start, len, value)`.
    let mut ids: Vec<u32> = Vec::new();
    let mut merged: Vec<(usize, usize, i64)> = Vec::new();
    let mut table: HashTable<u32> = HashTable::new();
    let mut buf = Vec::new();
    for i in 0..samples.len() {
        let (f0, n, _) = samples.pos(i);
        let mut stack = &all[f0..f0 + n];
        if !identity {
            if !filter.apply(&mut space, stack, &mut buf) {
                continue;
            }
            stack = &buf;
        }
        let v = samples.value(i);
        let h = hash_ids(stack);
        let get = |m: &(usize, usize, i64)| &ids[m.0..m.0 + m.1];
        match table.find(h, |&g| get(&merged[g as usize]) == stack) {
            Some(&g) => {
                let t = &mut merged[g as usize].2;
                *t = t.checked_add(v).ok_or(Error::Overflow)?;
            }
            None => {
                let g = merged.len() as u32;
                merged.push((ids.len(), stack.len(), v));
                ids.extend_from_slice(stack);
                table.insert_unique(h, g, |&g| {
                    let m = &merged[g as usize];
                    hash_ids(&ids[m.0..m.0 + m.1])
                });
            }
        }
    }
    drop(table);
    let mut out: Vec<(Vec<u8>, i64)> = Vec::with_capacity(merged.len());
    for &(start, len, v) in &merged {
        if v == 0 {
            continue;
        }
        let mut line = Vec::new();
        for (i, &id) in ids[start..start + len].iter().enumerate() {
            push_frame(&mut line, space.get(id), i > 0);
        }
        out.push((line, v));
    }
    out.sort_unstable();
    // Different stacks can fold to the same line (`a;b` vs `a`,`b`): merge.
    let mut merged_lines: Vec<(Vec<u8>, i64)> = Vec::with_capacity(out.len());
    for (line, v) in out {
        match merged_lines.last_mut() {
            Some((l, t)) if *l == line => *t = t.checked_add(v).ok_or(Error::Overflow)?,
            _ => merged_lines.push((line, v)),
        }
    }
    merged_lines.retain(|(_, v)| *v != 0);
    Ok(merged_lines)
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
