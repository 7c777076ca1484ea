//! Per-stack transforms shared by fold, tree and diff.
//!
//! Order: strip hex addresses, collapse recursion, focus/exclude, then the
//! depth limit, so that focus sees frames as they will be shown and the
//! truncation frame is never matched.

use crate::options::{FilterOptions, TRUNCATED_LABEL};
use crate::samples::Stack;
use std::borrow::Cow;

/// Applies `opts` to `stack`, writing the resulting frames (root first) to
/// `out`. Returns false when the stack is dropped by focus/exclude.
pub fn apply<'a>(opts: &FilterOptions, stack: &Stack<'a>, out: &mut Vec<Cow<'a, [u8]>>) -> bool {
    out.clear();
    for f in stack.frames() {
        let f: Cow<'a, [u8]> = if opts.strip_hex {
            strip_hex(f)
        } else {
            Cow::Borrowed(f)
        };
        if opts.collapse_recursion && out.last().is_some_and(|l| *l == f) {
            continue;
        }
        out.push(f);
    }
    if let Some(re) = &opts.focus {
        if !out.iter().any(|f| re.is_match(f)) {
            return false;
        }
    }
    if let Some(re) = &opts.exclude {
        if out.iter().any(|f| re.is_match(f)) {
            return false;
        }
    }
    if opts.max_depth > 0 && out.len() > opts.max_depth {
        out.truncate(opts.max_depth - 1);
        out.push(Cow::Borrowed(TRUNCATED_LABEL.as_bytes()));
    }
    true
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
