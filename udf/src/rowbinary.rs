//! The project's one RowBinary writer: ClickHouse's ULEB128 lengths,
//! length-prefixed strings and little-endian fixed-width numbers. The UDF's
//! output encoder, the loader's row encoding and the fixtures all write
//! through it. (Tests that check these bytes keep their own independent
//! encoder as the oracle.)
//!
//! Two flavours of the same encoding: `push_*` append to a `Vec<u8>` and
//! cannot fail; `write_*` go to any [`Write`] (the UDF's buffered stdout).
//! [`uleb_into`] is the core both use, also called directly by the UDF's hot
//! row encoder to batch a row's header into one write.

use std::io::{self, Write};

/// Longest ULEB128 encoding of a `u64`.
pub const MAX_ULEB_LEN: usize = 10;

/// Encodes `v` as ULEB128 at the start of `buf`, returning the bytes used
/// (1 to [`MAX_ULEB_LEN`]).
#[inline(always)]
pub fn uleb_into(buf: &mut [u8], mut v: u64) -> usize {
    let mut i = 0;
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            buf[i] = b;
            return i + 1;
        }
        buf[i] = b | 0x80;
        i += 1;
    }
}

/// Appends `v` as ULEB128 (a length or an array size).
#[inline]
pub fn push_uleb(buf: &mut Vec<u8>, v: u64) {
    let mut tmp = [0u8; MAX_ULEB_LEN];
    let n = uleb_into(&mut tmp, v);
    buf.extend_from_slice(&tmp[..n]);
}

/// Appends a `String` value: its length, then its bytes.
#[inline]
pub fn push_string(buf: &mut Vec<u8>, s: &[u8]) {
    push_uleb(buf, s.len() as u64);
    buf.extend_from_slice(s);
}

/// Writes `v` as ULEB128.
#[inline]
pub fn write_uleb<W: Write + ?Sized>(w: &mut W, v: u64) -> io::Result<()> {
    let mut tmp = [0u8; MAX_ULEB_LEN];
    let n = uleb_into(&mut tmp, v);
    w.write_all(&tmp[..n])
}

/// Writes a `String` value: its length, then its bytes.
#[inline]
pub fn write_string<W: Write + ?Sized>(w: &mut W, s: &[u8]) -> io::Result<()> {
    write_uleb(w, s.len() as u64)?;
    w.write_all(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the ULEB128 definition's examples (and the limits).
    #[test]
    fn uleb_examples() {
        let enc = |v: u64| {
            let mut b = Vec::new();
            push_uleb(&mut b, v);
            b
        };
        assert_eq!(enc(0), [0x00]);
        assert_eq!(enc(127), [0x7f]);
        assert_eq!(enc(128), [0x80, 0x01]);
        assert_eq!(enc(300), [0xac, 0x02]);
        assert_eq!(enc(624_485), [0xe5, 0x8e, 0x26]);
        assert_eq!(enc(u64::MAX).len(), MAX_ULEB_LEN);
        assert_eq!(*enc(u64::MAX).last().unwrap(), 0x01);
        let mut w = Vec::new();
        write_string(&mut w, b"abc").unwrap();
        let mut p = Vec::new();
        push_string(&mut p, b"abc");
        assert_eq!(w, [3, b'a', b'b', b'c']);
        assert_eq!(p, w);
    }
}
