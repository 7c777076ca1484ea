//! Per-stack transforms shared by fold, tree and diff, on interned stacks.
//!
//! Order: strip hex addresses, collapse recursion, focus/exclude, then the
//! depth limit, so that focus sees frames as they will be shown and the
//! truncation frame is never matched. Hex stripping and the regexes run
//! once per distinct label (cached by label id), not once per frame.

use crate::options::{FilterOptions, TRUNCATED_LABEL};
use crate::samples::Labels;
use std::borrow::Cow;

const UNSET: u32 = u32::MAX;

/// Applies [`FilterOptions`] to stacks of label ids, caching per label.
#[derive(Debug)]
pub struct IdFilter<'o> {
    opts: &'o FilterOptions,
    /// Per label id: its id after hex stripping (`UNSET` = not computed).
    stripped: Vec<u32>,
    /// Per label id: bit 0 = computed, bit 1 = focus matches, bit 2 =
    /// exclude matches.
    matches: Vec<u8>,
    truncated: u32,
}

impl<'o> IdFilter<'o> {
    /// A filter for `opts` over the labels of `space`.
    pub fn new(opts: &'o FilterOptions, space: &mut Labels) -> Self {
        let truncated = if opts.max_depth > 0 {
            space.intern(TRUNCATED_LABEL.as_bytes())
        } else {
            UNSET
        };
        IdFilter {
            opts,
            stripped: Vec::new(),
            matches: Vec::new(),
            truncated,
        }
    }

    fn strip(&mut self, space: &mut Labels, id: u32) -> u32 {
        let i = id as usize;
        if i >= self.stripped.len() {
            self.stripped.resize(space.len().max(i + 1), UNSET);
        }
        if self.stripped[i] == UNSET {
            let label = space.get(id);
            let changed = match strip_hex(label) {
                Cow::Borrowed(b) if std::ptr::eq(b, label) => None,
                c => Some(c.into_owned()),
            };
            let s = match changed {
                None => id,
                Some(c) => space.intern(&c),
            };
            self.stripped[i] = s;
        }
        self.stripped[i]
    }

    fn matches(&mut self, space: &Labels, id: u32) -> u8 {
        let i = id as usize;
        if i >= self.matches.len() {
            self.matches.resize(space.len().max(i + 1), 0);
        }
        if self.matches[i] == 0 {
            let l = space.get(id);
            let mut m = 1;
            if self.opts.focus.as_ref().is_some_and(|re| re.is_match(l)) {
                m |= 2;
            }
            if self.opts.exclude.as_ref().is_some_and(|re| re.is_match(l)) {
                m |= 4;
            }
            self.matches[i] = m;
        }
        self.matches[i]
    }

    /// Writes the transformed `ids` (root first) to `out`. Returns false
    /// when the stack is dropped by focus/exclude.
    pub fn apply(&mut self, space: &mut Labels, ids: &[u32], out: &mut Vec<u32>) -> bool {
        out.clear();
        let o = self.opts;
        for &id in ids {
            let id = if o.strip_hex {
                self.strip(space, id)
            } else {
                id
            };
            if o.collapse_recursion && out.last() == Some(&id) {
                continue;
            }
            out.push(id);
        }
        if o.focus.is_some() || o.exclude.is_some() {
            let mut any = 0u8;
            for &id in out.iter() {
                any |= self.matches(space, id);
            }
            if o.focus.is_some() && any & 2 == 0 {
                return false;
            }
            if any & 4 != 0 {
                return false;
            }
        }
        if o.max_depth > 0 && out.len() > o.max_depth {
            out.truncate(o.max_depth - 1);
            out.push(self.truncated);
        }
        true
    }
}

/// Removes `+0xHEX` offsets and replaces an address-only frame by `[unknown]`.
pub fn strip_hex(f: &[u8]) -> Cow<'_, [u8]> {
    let Some(first) = find_hex(f, 0) else {
        return Cow::Borrowed(f);
    };
    let mut out = Vec::with_capacity(f.len());
    let mut pos = 0;
    let mut next = Some(first);
    while let Some((start, end)) = next {
        // Drop a `+` right before the address as well.
        let cut = if start > pos && f[start - 1] == b'+' {
            start - 1
        } else {
            start
        };
        out.extend_from_slice(&f[pos..cut]);
        pos = end;
        next = find_hex(f, pos);
    }
    out.extend_from_slice(&f[pos..]);
    if out.iter().all(|b| b.is_ascii_whitespace()) {
        return Cow::Borrowed(b"[unknown]");
    }
    Cow::Owned(out)
}

/// Finds the next `0x` followed by at least one hex digit, not preceded by
/// an identifier character; returns its byte range.
fn find_hex(f: &[u8], from: usize) -> Option<(usize, usize)> {
    let mut i = from;
    while i + 2 < f.len() {
        if f[i] == b'0'
            && (f[i + 1] == b'x' || f[i + 1] == b'X')
            && f[i + 2].is_ascii_hexdigit()
            && (i == 0 || !(f[i - 1].is_ascii_alphanumeric() || f[i - 1] == b'_'))
        {
            let mut end = i + 2;
            while end < f.len() && f[end].is_ascii_hexdigit() {
                end += 1;
            }
            return Some((i, end));
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_offsets_and_bare_addresses() {
        assert_eq!(&*strip_hex(b"foo+0x1a"), b"foo");
        assert_eq!(&*strip_hex(b"libc.so.6+0x29d90"), b"libc.so.6");
        assert_eq!(&*strip_hex(b"0x7f00deadbeef"), b"[unknown]");
        assert_eq!(&*strip_hex(b"main"), b"main");
        assert_eq!(&*strip_hex(b"a0x12"), b"a0x12");
        assert_eq!(&*strip_hex(b"0x"), b"0x");
    }
}
