//! Encoding results in TabSeparated or RowBinary.

use super::Format;
use crate::rowbinary;
use std::io::{self, Write};

/// An encoder over the process's output stream.
#[derive(Debug)]
pub struct Output<W> {
    w: W,
    format: Format,
}

impl<W: Write> Output<W> {
    /// Wraps `w`, which carries `format`.
    pub fn new(w: W, format: Format) -> Self {
        Output { w, format }
    }

    /// Flushes the underlying writer (after each pool chunk).
    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }

    /// Unwraps the writer.
    pub fn into_inner(self) -> W {
        self.w
    }

    fn uleb(&mut self, v: u64) -> io::Result<()> {
        rowbinary::write_uleb(&mut self.w, v)
    }

    fn rb_str(&mut self, s: &[u8]) -> io::Result<()> {
        rowbinary::write_string(&mut self.w, s)
    }

    fn int(&mut self, v: i64) -> io::Result<()> {
        match self.format {
            Format::RowBinary => self.w.write_all(&v.to_le_bytes()),
            Format::TabSeparated => write!(self.w, "{v}"),
        }
    }

    /// A string inside a composite value: RowBinary, or TSV quoted form.
    fn quoted(&mut self, s: &[u8]) -> io::Result<()> {
        match self.format {
            Format::RowBinary => self.rb_str(s),
            Format::TabSeparated => {
                self.w.write_all(b"'")?;
                write_escaped(&mut self.w, s, true)?;
                self.w.write_all(b"'")
            }
        }
    }

    /// A top-level String column.
    fn column_str(&mut self, s: &[u8]) -> io::Result<()> {
        match self.format {
            Format::RowBinary => self.rb_str(s),
            Format::TabSeparated => write_escaped(&mut self.w, s, false),
        }
    }

    fn tsv(&mut self, b: &[u8]) -> io::Result<()> {
        if self.format == Format::TabSeparated {
            self.w.write_all(b)?;
        }
        Ok(())
    }

    fn array<T>(
        &mut self,
        items: &[T],
        mut each: impl FnMut(&mut Self, &T) -> io::Result<()>,
    ) -> io::Result<()> {
        match self.format {
            Format::RowBinary => self.uleb(items.len() as u64)?,
            Format::TabSeparated => self.w.write_all(b"[")?,
        }
        for (i, it) in items.iter().enumerate() {
            if i > 0 {
                self.tsv(b",")?;
            }
            self.tsv(b"(")?;
            each(self, it)?;
            self.tsv(b")")?;
        }
        self.tsv(b"]")
    }

    /// One `Array(Tuple(String, Int64))` value.
    pub fn fold(&mut self, rows: &[(Vec<u8>, i64)]) -> io::Result<()> {
        self.array(rows, |o, (line, v)| {
            o.quoted(line)?;
            o.tsv(b",")?;
            o.int(*v)
        })
    }

    /// Ends a row (a newline in TabSeparated).
    pub fn end_row(&mut self) -> io::Result<()> {
        self.tsv(b"\n")
    }

    /// Table-function output: one `(stack, value)` row per folded line.
    pub fn fold_table(&mut self, rows: &[(Vec<u8>, i64)]) -> io::Result<()> {
        for (line, v) in rows {
            self.column_str(line)?;
            self.tsv(b"\t")?;
            self.int(*v)?;
            self.end_row()?;
        }
        Ok(())
    }
}

/// One TabSeparated tree or diff row as an array element or a table row
/// (RowBinary rows go through [`Rows`]).
fn tsv_node_row<W: Write>(
    w: &mut W,
    table: bool,
    diff: bool,
    level: u32,
    label: &[u8],
    v: [i64; 2],
    s: [i64; 2],
) -> io::Result<()> {
    let vals = [v[0], s[0], v[1], s[1]];
    let vals = if diff { &vals[..] } else { &vals[..2] };
    let sep: &[u8] = if table { b"\t" } else { b"," };
    if !table {
        w.write_all(b"(")?;
    }
    write!(w, "{level}")?;
    w.write_all(sep)?;
    if table {
        write_escaped(w, label, false)?;
    } else {
        w.write_all(b"'")?;
        write_escaped(w, label, true)?;
        w.write_all(b"'")?;
    }
    for x in vals {
        w.write_all(sep)?;
        write!(w, "{x}")?;
    }
    if table {
        w.write_all(b"\n")
    } else {
        w.write_all(b")")
    }
}

impl<W: Write> Output<W> {
    /// One tree (or diff) array value whose rows `build` streams to the
    /// given callbacks, encoded as they come, never as row structs, straight
    /// to the output. RowBinary needs the row count before the rows: `build`
    /// gives it to the count callback first (a full tree is counted by a
    /// first expansion that emits nothing), so no row is held in memory.
    pub fn tree_streamed(
        &mut self,
        diff: bool,
        build: impl FnOnce(
            Option<&mut crate::tree::Count<'_>>,
            &mut crate::tree::Emit<'_>,
        ) -> crate::Result<()>,
    ) -> crate::Result<()> {
        let format = self.format;
        let mut n: u64 = 0;
        let announced = std::cell::Cell::new(None::<u64>);
        let mut count = |rows: u64| -> crate::Result<()> {
            announced.set(Some(rows));
            Ok(())
        };
        match format {
            Format::TabSeparated => {
                // TabSeparated needs no count (and a full tree then no
                // counting).
                let w = &mut self.w;
                w.write_all(b"[")?;
                build(None, &mut |level, label, v, s| {
                    if n > 0 {
                        w.write_all(b",")?;
                    }
                    n += 1;
                    tsv_node_row(w, false, diff, level, label, v, s)?;
                    Ok(())
                })?;
                w.write_all(b"]")?;
            }
            Format::RowBinary => {
                let mut rows = Rows::new(&mut self.w);
                let rows = &mut rows;
                build(Some(&mut count), &mut |level, label, v, s| {
                    if n == 0 {
                        match announced.get() {
                            Some(total) => rows.uleb(total)?,
                            None => {
                                return Err(crate::Error::Internal(
                                    "tree rows before their count".into(),
                                ))
                            }
                        }
                    }
                    n += 1;
                    if diff {
                        rows.row(level, label, [v[0], s[0], v[1], s[1]])?;
                    } else {
                        rows.row(level, label, [v[0], s[0]])?;
                    }
                    Ok(())
                })?;
                rows.flush()?;
                if announced.get() != Some(n) {
                    return Err(crate::Error::Internal(format!(
                        "{n} tree rows written, {:?} announced",
                        announced.get()
                    )));
                }
            }
        }
        Ok(())
    }

    /// Table-function output of a tree (or diff) that `build` streams: one
    /// row per node, written as it comes.
    pub fn tree_table_streamed(
        &mut self,
        diff: bool,
        build: impl FnOnce(&mut crate::tree::Emit<'_>) -> crate::Result<()>,
    ) -> crate::Result<()> {
        let format = self.format;
        match format {
            Format::TabSeparated => {
                let w = &mut self.w;
                build(&mut |level, label, v, s| {
                    tsv_node_row(w, true, diff, level, label, v, s)?;
                    Ok(())
                })
            }
            Format::RowBinary => {
                let mut rows = Rows::new(&mut self.w);
                let rows = &mut rows;
                build(&mut |level, label, v, s| {
                    if diff {
                        rows.row(level, label, [v[0], s[0], v[1], s[1]])?;
                    } else {
                        rows.row(level, label, [v[0], s[0]])?;
                    }
                    Ok(())
                })?;
                Ok(rows.flush()?)
            }
        }
    }
}

/// RowBinary tree rows encoded straight into one buffer that goes to the
/// writer whole when full: a row is then one bounds check and a few fixed
/// copies, where three `write_all` calls into a `BufWriter` (each a
/// capacity check and a `memcpy` call) cost most of a big tree's output
/// time (310,000 rows for a 7.6 MB `stackTree`).
struct Rows<'w, W> {
    w: &'w mut W,
    buf: Box<[u8]>,
    pos: usize,
}

/// The size of [`Rows`]' buffer: larger than the executable's 256 KiB
/// `BufWriter` over stdout, which passes a write at least its capacity
/// straight through (a smaller chunk was copied into it once more: 7% of
/// a big tree's instructions).
const ROWS_CHUNK: usize = 512 * 1024;

impl<'w, W: Write> Rows<'w, W> {
    fn new(w: &'w mut W) -> Self {
        Rows {
            w,
            buf: vec![0; ROWS_CHUNK].into_boxed_slice(),
            pos: 0,
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.w.write_all(&self.buf[..self.pos])?;
        self.pos = 0;
        Ok(())
    }

    fn uleb(&mut self, v: u64) -> io::Result<()> {
        if self.buf.len() - self.pos < rowbinary::MAX_ULEB_LEN {
            self.flush()?;
        }
        self.pos += rowbinary::uleb_into(&mut self.buf[self.pos..], v);
        Ok(())
    }

    /// `level UInt32, label String`, then the `N` Int64 fields.
    #[inline(always)]
    fn row<const N: usize>(&mut self, level: u32, label: &[u8], vals: [i64; N]) -> io::Result<()> {
        let n = label.len();
        let need = 4 + rowbinary::MAX_ULEB_LEN + n + 8 * N;
        if self.buf.len() - self.pos < need {
            self.flush()?;
            if need > self.buf.len() {
                // A label larger than the buffer: written as it is.
                let mut head = [0u8; 4 + rowbinary::MAX_ULEB_LEN];
                head[..4].copy_from_slice(&level.to_le_bytes());
                let k = 4 + rowbinary::uleb_into(&mut head[4..], n as u64);
                self.w.write_all(&head[..k])?;
                self.w.write_all(label)?;
                for x in vals {
                    self.w.write_all(&x.to_le_bytes())?;
                }
                return Ok(());
            }
        }
        let b = &mut self.buf[self.pos..self.pos + need];
        b[..4].copy_from_slice(&level.to_le_bytes());
        let mut k = if n < 0x80 {
            b[4] = n as u8;
            5
        } else {
            4 + rowbinary::uleb_into(&mut b[4..], n as u64)
        };
        copy_short(&mut b[k..k + n], label);
        k += n;
        for (i, x) in vals.iter().enumerate() {
            b[k + 8 * i..k + 8 * i + 8].copy_from_slice(&x.to_le_bytes());
        }
        self.pos += k + 8 * N;
        Ok(())
    }
}

/// `dst.copy_from_slice(src)` without a `memcpy` call for a short label:
/// 8-byte word copies, the last one overlapping.
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if n > 32 {
        dst.copy_from_slice(src);
    } else if n >= 8 {
        let mut i = 0;
        while i + 8 < n {
            dst[i..i + 8].copy_from_slice(&src[i..i + 8]);
            i += 8;
        }
        dst[n - 8..n].copy_from_slice(&src[n - 8..n]);
    } else if n >= 4 {
        dst[..4].copy_from_slice(&src[..4]);
        dst[n - 4..n].copy_from_slice(&src[n - 4..n]);
    } else {
        for (d, &c) in dst.iter_mut().zip(src) {
            *d = c;
        }
    }
}

/// Writes `s` with ClickHouse's backslash escapes; `quote` also escapes `'`
/// (the quoted form used inside arrays and tuples).
fn write_escaped<W: Write>(w: &mut W, s: &[u8], quote: bool) -> io::Result<()> {
    let mut start = 0;
    for (i, &b) in s.iter().enumerate() {
        let esc: &[u8] = match b {
            b'\\' => b"\\\\",
            b'\'' if quote => b"\\'",
            b'\t' => b"\\t",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0 => b"\\0",
            _ => continue,
        };
        w.write_all(&s[start..i])?;
        w.write_all(esc)?;
        start = i + 1;
    }
    w.write_all(&s[start..])
}
