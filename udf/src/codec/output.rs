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

/// One tree or diff row as an array element or a table row.
#[allow(clippy::too_many_arguments)] // one row's fields, as the emitter gets them
fn node_row<W: Write>(
    w: &mut W,
    format: Format,
    table: bool,
    diff: bool,
    level: u32,
    label: &[u8],
    v: [i64; 2],
    s: [i64; 2],
) -> io::Result<()> {
    let vals = [v[0], s[0], v[1], s[1]];
    let vals = if diff { &vals[..] } else { &vals[..2] };
    match format {
        Format::RowBinary => {
            // Three writes per row, not one per field: small copies into
            // a buffered writer are a large part of a big tree's output.
            let mut head = [0u8; 14];
            head[..4].copy_from_slice(&level.to_le_bytes());
            let k = 4 + rowbinary::uleb_into(&mut head[4..], label.len() as u64);
            w.write_all(&head[..k])?;
            w.write_all(label)?;
            let mut tail = [0u8; 32];
            for (i, x) in vals.iter().enumerate() {
                tail[i * 8..i * 8 + 8].copy_from_slice(&x.to_le_bytes());
            }
            w.write_all(&tail[..vals.len() * 8])
        }
        Format::TabSeparated => {
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
        let w = &mut self.w;
        if format == Format::TabSeparated {
            w.write_all(b"[")?;
        }
        let announced = std::cell::Cell::new(None::<u64>);
        let mut count = |rows: u64| -> crate::Result<()> {
            announced.set(Some(rows));
            Ok(())
        };
        // TabSeparated needs no count (and a full tree then no counting).
        let count =
            (format == Format::RowBinary).then_some(&mut count as &mut crate::tree::Count<'_>);
        build(count, &mut |level, label, v, s| {
            match format {
                Format::TabSeparated if n > 0 => w.write_all(b",")?,
                Format::TabSeparated => {}
                Format::RowBinary if n == 0 => match announced.get() {
                    Some(rows) => rowbinary::write_uleb(w, rows)?,
                    None => {
                        return Err(crate::Error::Internal(
                            "tree rows before their count".into(),
                        ))
                    }
                },
                Format::RowBinary => {}
            }
            n += 1;
            node_row(w, format, false, diff, level, label, v, s)?;
            Ok(())
        })?;
        match format {
            Format::TabSeparated => self.w.write_all(b"]")?,
            Format::RowBinary => {
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
        let w = &mut self.w;
        build(&mut |level, label, v, s| {
            node_row(w, format, true, diff, level, label, v, s)?;
            Ok(())
        })
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
