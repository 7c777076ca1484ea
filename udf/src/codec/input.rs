//! Decoding ClickHouse's TabSeparated and RowBinary input, tracking the byte
//! offset and row so that every error names where it happened.

use super::Format;
use crate::samples::Samples;
use crate::{Error, Result};
use std::io::Read;

/// Input limits. Exceeding one is an error, never silent truncation.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Maximum encoded size of one input row in bytes. Default: 4 GiB.
    pub max_row_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_row_bytes: 4 << 30,
        }
    }
}

/// A buffered decoder over the process's input stream.
#[derive(Debug)]
pub struct Input<R> {
    inner: R,
    buf: Box<[u8]>,
    pos: usize,
    len: usize,
    /// Bytes consumed before `buf[0]`.
    base: u64,
    format: Format,
    row: u64,
    row_start: u64,
    limits: Limits,
}

impl<R: Read> Input<R> {
    /// Wraps `inner`, which carries `format`.
    pub fn new(inner: R, format: Format, limits: Limits) -> Self {
        Input {
            inner,
            buf: vec![0; 256 * 1024].into_boxed_slice(),
            pos: 0,
            len: 0,
            base: 0,
            format,
            row: 0,
            row_start: 0,
            limits,
        }
    }

    /// Byte offset of the next unread byte.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// The row being read (1-based; 0 before the first).
    pub fn row(&self) -> u64 {
        self.row
    }

    fn err(&self, reason: impl Into<String>) -> Error {
        Error::Malformed {
            format: self.format.name(),
            row: self.row,
            offset: self.offset(),
            reason: reason.into(),
        }
    }

    /// Refills the buffer; false at end of input.
    fn fill(&mut self) -> Result<bool> {
        if self.pos < self.len {
            return Ok(true);
        }
        self.base += self.len as u64;
        self.pos = 0;
        self.len = 0;
        loop {
            match self.inner.read(&mut self.buf) {
                Ok(n) => {
                    self.len = n;
                    return Ok(n > 0);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// True when no byte is left.
    pub fn at_eof(&mut self) -> Result<bool> {
        Ok(!self.fill()?)
    }

    fn peek(&mut self) -> Result<Option<u8>> {
        Ok(if self.fill()? {
            Some(self.buf[self.pos])
        } else {
            None
        })
    }

    fn byte(&mut self) -> Result<u8> {
        if !self.fill()? {
            return Err(self.err("unexpected end of input (truncated row)"));
        }
        let b = self.buf[self.pos];
        self.pos += 1;
        Ok(b)
    }

    fn expect(&mut self, want: u8, what: &str) -> Result<()> {
        let at = self.offset();
        let got = self.byte()?;
        if got != want {
            return Err(Error::Malformed {
                format: self.format.name(),
                row: self.row,
                offset: at,
                reason: format!("expected {what}, found {}", show_byte(got)),
            });
        }
        Ok(())
    }

    fn check_row_size(&self) -> Result<()> {
        let used = self.offset() - self.row_start;
        if used > self.limits.max_row_bytes {
            return Err(Error::Limit(format!(
                "row {} is larger than max_row_bytes = {} bytes",
                self.row, self.limits.max_row_bytes
            )));
        }
        Ok(())
    }

    /// Reads the `N\n` chunk header of executable_pool mode; `None` when the
    /// engine closed the input (shutdown).
    pub fn chunk_header(&mut self) -> Result<Option<u64>> {
        if self.at_eof()? {
            return Ok(None);
        }
        let mut n: u64 = 0;
        let mut digits = 0;
        loop {
            let b = self.byte()?;
            match b {
                b'0'..=b'9' => {
                    n = n
                        .checked_mul(10)
                        .and_then(|n| n.checked_add(u64::from(b - b'0')))
                        .ok_or_else(|| self.err("chunk header overflows"))?;
                    digits += 1;
                }
                b'\n' if digits > 0 => return Ok(Some(n)),
                _ => return Err(self.err(format!("bad chunk header byte {}", show_byte(b)))),
            }
        }
    }

    /// Starts the next row.
    pub fn begin_row(&mut self) {
        self.row += 1;
        self.row_start = self.offset();
    }

    /// Between two columns: a tab in TabSeparated, nothing in RowBinary.
    pub fn column_sep(&mut self) -> Result<()> {
        match self.format {
            Format::TabSeparated => self.expect(b'\t', "a tab between columns"),
            Format::RowBinary => Ok(()),
        }
    }

    /// After the last column: a newline in TabSeparated.
    pub fn end_row(&mut self) -> Result<()> {
        match self.format {
            Format::TabSeparated => {
                // Accept a CRLF line end as ClickHouse's own TSV reader does.
                if self.peek()? == Some(b'\r') {
                    self.pos += 1;
                }
                self.expect(b'\n', "end of row")
            }
            Format::RowBinary => Ok(()),
        }
    }

    // ---- RowBinary primitives ----

    fn uleb(&mut self) -> Result<u64> {
        let mut v: u64 = 0;
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            if shift >= 64 || (shift == 63 && b > 1) {
                return Err(self.err("variable-length integer overflows"));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
        }
    }

    fn fixed<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        if self.pos + N <= self.len {
            out.copy_from_slice(&self.buf[self.pos..self.pos + N]);
            self.pos += N;
        } else {
            for b in &mut out {
                *b = self.byte()?;
            }
        }
        Ok(out)
    }

    /// Appends `n` raw bytes to `out`, growing it only as data arrives so a
    /// hostile length cannot allocate more than the input holds.
    fn bytes_into(&mut self, mut n: u64, out: &mut Vec<u8>) -> Result<()> {
        if n > self.limits.max_row_bytes {
            return Err(Error::Limit(format!(
                "row {}: a {n}-byte string is larger than max_row_bytes = {}",
                self.row, self.limits.max_row_bytes
            )));
        }
        while n > 0 {
            if !self.fill()? {
                return Err(self.err("unexpected end of input inside a string (truncated row)"));
            }
            let take = (self.len - self.pos).min(n as usize);
            out.extend_from_slice(&self.buf[self.pos..self.pos + take]);
            self.pos += take;
            n -= take as u64;
        }
        Ok(())
    }

    fn rb_string_into(&mut self, out: &mut Vec<u8>) -> Result<()> {
        let n = self.uleb()?;
        self.bytes_into(n, out)
    }

    fn rb_string(&mut self) -> Result<String> {
        let mut v = Vec::new();
        self.rb_string_into(&mut v)?;
        String::from_utf8(v).map_err(|_| self.err("option is not valid UTF-8"))
    }

    // ---- TabSeparated (quoted-value) primitives ----

    fn skip_spaces(&mut self) -> Result<()> {
        while self.peek()? == Some(b' ') {
            self.pos += 1;
        }
        Ok(())
    }

    fn tsv_int(&mut self) -> Result<i64> {
        let start = self.offset();
        let neg = if self.peek()? == Some(b'-') {
            self.pos += 1;
            true
        } else {
            if self.peek()? == Some(b'+') {
                self.pos += 1;
            }
            false
        };
        let mut v: i128 = 0;
        let mut digits = 0;
        while let Some(b @ b'0'..=b'9') = self.peek()? {
            self.pos += 1;
            v = v * 10 + i128::from(b - b'0');
            digits += 1;
            if v > i128::from(u64::MAX) {
                return Err(self.err("integer out of Int64 range"));
            }
        }
        if digits == 0 {
            let found = self.peek()?.map_or("end of input".to_string(), show_byte);
            return Err(Error::Malformed {
                format: self.format.name(),
                row: self.row,
                offset: start,
                reason: format!("expected an integer, found {found}"),
            });
        }
        let v = if neg { -v } else { v };
        i64::try_from(v).map_err(|_| self.err("integer out of Int64 range"))
    }

    /// A single-quoted string with ClickHouse's backslash escapes.
    fn tsv_quoted_into(&mut self, out: &mut Vec<u8>) -> Result<()> {
        self.expect(b'\'', "a quoted string")?;
        loop {
            // Fast path: copy the run of plain bytes in the buffer.
            if !self.fill()? {
                return Err(self.err("unexpected end of input inside a string (truncated row)"));
            }
            let chunk = &self.buf[self.pos..self.len];
            let run = chunk
                .iter()
                .position(|&b| b == b'\'' || b == b'\\')
                .unwrap_or(chunk.len());
            out.extend_from_slice(&chunk[..run]);
            self.pos += run;
            if run == chunk.len() {
                self.check_row_size()?;
                continue;
            }
            match self.byte()? {
                b'\'' => return Ok(()),
                _ => {
                    let at = self.offset() - 1;
                    let e = self.byte()?;
                    let c = match e {
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'r' => b'\r',
                        b'n' => b'\n',
                        b't' => b'\t',
                        b'0' => 0,
                        b'a' => 0x07,
                        b'v' => 0x0b,
                        b'x' => {
                            let h = [self.byte()?, self.byte()?];
                            let hex = |b: u8| (b as char).to_digit(16);
                            match (hex(h[0]), hex(h[1])) {
                                (Some(a), Some(b)) => (a * 16 + b) as u8,
                                _ => {
                                    return Err(Error::Malformed {
                                        format: self.format.name(),
                                        row: self.row,
                                        offset: at,
                                        reason: "bad \\x escape".into(),
                                    })
                                }
                            }
                        }
                        other => other, // `\c` means `c`, as ClickHouse reads it
                    };
                    out.push(c);
                }
            }
        }
    }

    fn tsv_quoted(&mut self) -> Result<String> {
        let mut v = Vec::new();
        self.tsv_quoted_into(&mut v)?;
        String::from_utf8(v).map_err(|_| self.err("option is not valid UTF-8"))
    }

    /// Reads `[elem, elem, ...]`, calling `elem` for each element.
    fn tsv_list(
        &mut self,
        open: u8,
        close: u8,
        mut elem: impl FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        self.skip_spaces()?;
        self.expect(open, if open == b'[' { "'['" } else { "'{'" })?;
        self.skip_spaces()?;
        if self.peek()? == Some(close) {
            self.pos += 1;
            return Ok(());
        }
        loop {
            self.skip_spaces()?;
            elem(self)?;
            self.skip_spaces()?;
            match self.byte()? {
                b',' => continue,
                b if b == close => return Ok(()),
                b => {
                    return Err(self.err(format!(
                        "expected ',' or '{}', found {}",
                        close as char,
                        show_byte(b)
                    )))
                }
            }
        }
    }

    // ---- typed values ----

    /// Reads one `Array(Tuple(Array(String), Int64))` value into `out`.
    pub fn samples(&mut self, out: &mut Samples) -> Result<()> {
        match self.format {
            Format::RowBinary => {
                let n = self.uleb()?;
                for _ in 0..n {
                    self.rb_stack(out)?;
                    let v = i64::from_le_bytes(self.fixed::<8>()?);
                    out.finish_sample(v);
                    self.check_row_size()?;
                }
                Ok(())
            }
            Format::TabSeparated => self.tsv_list(b'[', b']', |s| {
                s.expect(b'(', "'(' opening a (stack, value) tuple")?;
                s.skip_spaces()?;
                s.tsv_stack(out)?;
                s.skip_spaces()?;
                s.expect(b',', "',' between stack and value")?;
                s.skip_spaces()?;
                let v = s.tsv_int()?;
                s.skip_spaces()?;
                s.expect(b')', "')' closing a (stack, value) tuple")?;
                out.finish_sample(v);
                s.check_row_size()
            }),
        }
    }

    fn rb_stack(&mut self, out: &mut Samples) -> Result<()> {
        let frames = self.uleb()?;
        // Fast path: every frame in the buffer with a one-byte length. That
        // is exactly how `Samples` stores frames, so the stack is one copy.
        let rest = &self.buf[self.pos..self.len];
        let mut p = 0usize;
        let mut n = 0u64;
        while n < frames && p < rest.len() && rest[p] < 0x80 {
            p += 1 + rest[p] as usize;
            n += 1;
        }
        if n == frames && p <= rest.len() {
            out.push_encoded_frames(&rest[..p], frames as usize);
            self.pos += p;
            return Ok(());
        }
        for _ in 0..frames {
            // Fast path: a short length and the whole string in the buffer.
            let rest = &self.buf[self.pos..self.len];
            if rest.len() > 1 && rest[0] < 0x80 && rest.len() > rest[0] as usize {
                let n = rest[0] as usize;
                out.push_frame(&rest[1..1 + n]);
                self.pos += 1 + n;
            } else {
                let n = self.uleb()?;
                if n > crate::samples::MAX_FRAME_BYTES && n <= self.limits.max_row_bytes {
                    return Err(self.err(format!(
                        "a {n}-byte frame is longer than {} bytes",
                        crate::samples::MAX_FRAME_BYTES
                    )));
                }
                self.bytes_into(n, out.frame_buf())?;
                out.commit_frame()?;
            }
        }
        Ok(())
    }

    fn tsv_stack(&mut self, out: &mut Samples) -> Result<()> {
        self.tsv_list(b'[', b']', |s| {
            s.tsv_quoted_into(out.frame_buf())?;
            out.commit_frame()
        })
    }

    /// Reads one `Map(String, String)` value.
    pub fn options(&mut self) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        match self.format {
            Format::RowBinary => {
                let n = self.uleb()?;
                for _ in 0..n {
                    let k = self.rb_string()?;
                    let v = self.rb_string()?;
                    out.push((k, v));
                }
            }
            Format::TabSeparated => self.tsv_list(b'{', b'}', |s| {
                let k = s.tsv_quoted()?;
                s.skip_spaces()?;
                s.expect(b':', "':' between key and value")?;
                s.skip_spaces()?;
                let v = s.tsv_quoted()?;
                out.push((k, v));
                Ok(())
            })?,
        }
        Ok(out)
    }

    /// Reads one table-function input row `(stack Array(String), value
    /// Int64)` into `out`, including the row's end.
    pub fn stack_row(&mut self, out: &mut Samples) -> Result<()> {
        self.begin_row();
        match self.format {
            Format::RowBinary => {
                self.rb_stack(out)?;
                let v = i64::from_le_bytes(self.fixed::<8>()?);
                out.finish_sample(v);
            }
            Format::TabSeparated => {
                self.tsv_stack(out)?;
                self.column_sep()?;
                let v = self.tsv_int()?;
                out.finish_sample(v);
                self.end_row()?;
            }
        }
        self.check_row_size()
    }
}

fn show_byte(b: u8) -> String {
    match b {
        b'\t' => "a tab".into(),
        b'\n' => "a newline".into(),
        0x20..=0x7e => format!("'{}'", b as char),
        _ => format!("byte 0x{b:02x}"),
    }
}
