//! What the server needs to know about a statement before the engine runs
//! it: its kind (read or write), its `FORMAT`, whether it writes a file
//! (`INTO OUTFILE`), whether it is more than one statement, and where an
//! INSERT's inline data begins. A small lexer of ClickHouse SQL (strings,
//! quoted identifiers and comments are skipped, so a keyword inside them
//! does not count); the engine's own parser still parses everything.

/// The kind of statement, by its first keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// SELECT, WITH, SHOW, DESCRIBE, EXPLAIN, EXISTS (and a parenthesized
    /// SELECT): reads only.
    Read,
    /// INSERT.
    Insert,
    /// Anything else (DDL, SET, USE, SYSTEM, OPTIMIZE, ...).
    Other,
}

/// A statement, as far as the server needs to know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statement {
    /// Its kind.
    pub kind: Kind,
    /// The output format its `FORMAT` clause names (not for INSERT).
    pub format: Option<String>,
    /// Whether it contains `INTO OUTFILE` (written by the engine's client
    /// side, outside every table permission).
    pub outfile: bool,
    /// The first word, lower-cased (`describe`, `select`, ...).
    pub first: String,
    /// Names called as functions (`name(`, lower-cased, quotes removed),
    /// in order (not collected for an INSERT's inline data).
    pub calls: Vec<String>,
    /// For an INSERT with inline data (`FORMAT name` or `VALUES` and the
    /// data after it): the statement to run instead, with `{INFILE}` where
    /// the `FROM INFILE 'path'` clause goes, and the byte offset where the
    /// data begins.
    pub insert: Option<InsertData>,
}

/// An INSERT's inline data, to be fed to the engine from a pipe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertData {
    /// The statement before the data, with the marker [`INFILE_MARKER`]
    /// where `FROM INFILE 'path'` goes.
    pub statement: String,
    /// Offset of the data in the text.
    pub data_start: usize,
    /// The input format (`Values` for `VALUES`).
    pub format: String,
}

/// Where [`InsertData::statement`] takes the `FROM INFILE` clause.
pub const INFILE_MARKER: &str = "\u{0}INFILE\u{0}";

/// Why a text is refused before it reaches the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlError {
    /// Nothing but whitespace and comments.
    Empty,
    /// More than one statement.
    MultiStatement,
    /// A string, quoted identifier or comment is not closed.
    Unterminated,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Word,
    Quoted,
    Str,
    Punct(u8),
    Other,
}

struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl<'a> Lexer<'a> {
    /// The next token's kind and span, skipping whitespace and comments.
    fn next(&mut self) -> Result<Option<(Tok, usize, usize)>, SqlError> {
        let s = self.s;
        loop {
            while self.pos < s.len() && s[self.pos].is_ascii_whitespace() {
                self.pos += 1;
            }
            // The engine's line comments: `--`, `//`, and `#` before a
            // space or `!` (`#x` is no comment there, but an error). A
            // comment the engine sees that this lexer did not was code
            // here: a quote in it opened a string that hid what followed
            // from every check (`SELECT 1 // '` ... `INTO OUTFILE`).
            let rest = &s[self.pos..];
            if rest.starts_with(b"--")
                || rest.starts_with(b"//")
                || rest.starts_with(b"# ")
                || rest.starts_with(b"#!")
            {
                while self.pos < s.len() && s[self.pos] != b'\n' {
                    self.pos += 1;
                }
                continue;
            }
            if s[self.pos..].starts_with(b"/*") {
                // Nested like ClickHouse's lexer.
                let mut depth = 0usize;
                while self.pos < s.len() {
                    if s[self.pos..].starts_with(b"/*") {
                        depth += 1;
                        self.pos += 2;
                    } else if s[self.pos..].starts_with(b"*/") {
                        depth -= 1;
                        self.pos += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        self.pos += 1;
                    }
                }
                if depth != 0 {
                    return Err(SqlError::Unterminated);
                }
                continue;
            }
            break;
        }
        if self.pos >= s.len() {
            return Ok(None);
        }
        let start = self.pos;
        let c = s[start];
        // A heredoc, `$name$ ... $name$` (the name any bytes but `$`, or
        // none: `$$...$$`), is a string literal to the engine, found as its
        // lexer finds it: the delimiter ends at the next `$`, the string at
        // the delimiter's next occurrence. Read as code here, `$$'$$` hid
        // the rest of a reader's query from every check.
        if c == b'$' {
            if let Some(name_end) = s[start + 1..].iter().position(|&b| b == b'$') {
                let delim = &s[start..start + 1 + name_end + 1];
                let body = start + delim.len();
                if let Some(at) = s[body..].windows(delim.len()).position(|w| w == delim) {
                    self.pos = body + at + delim.len();
                    return Ok(Some((Tok::Str, start, self.pos)));
                }
            }
        }
        let tok = match c {
            b'\'' | b'"' | b'`' => {
                self.pos += 1;
                loop {
                    match s.get(self.pos) {
                        None => return Err(SqlError::Unterminated),
                        Some(b'\\') => self.pos += 2,
                        Some(&q) if q == c => {
                            // A doubled quote is an escaped quote.
                            if s.get(self.pos + 1) == Some(&c) {
                                self.pos += 2;
                            } else {
                                self.pos += 1;
                                break;
                            }
                        }
                        Some(_) => self.pos += 1,
                    }
                }
                if c == b'\'' {
                    Tok::Str
                } else {
                    Tok::Quoted
                }
            }
            // A word may start with `$` too (`$x` when no heredoc closes).
            c if c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c >= 0x80 => {
                while self.pos < s.len()
                    && (s[self.pos].is_ascii_alphanumeric()
                        || s[self.pos] == b'_'
                        || s[self.pos] == b'$'
                        || s[self.pos] >= 0x80)
                {
                    self.pos += 1;
                }
                Tok::Word
            }
            c if c.is_ascii_digit() => {
                while self.pos < s.len()
                    && (s[self.pos].is_ascii_alphanumeric() || s[self.pos] == b'.')
                {
                    self.pos += 1;
                }
                Tok::Other
            }
            b'(' | b')' | b';' | b'[' | b']' => {
                self.pos += 1;
                Tok::Punct(c)
            }
            _ => {
                self.pos += 1;
                Tok::Other
            }
        };
        Ok(Some((tok, start, self.pos)))
    }
}

fn word_is(s: &[u8], a: usize, b: usize, kw: &str) -> bool {
    s[a..b].eq_ignore_ascii_case(kw.as_bytes())
}

/// Analyses `text`: one statement (a trailing `;` is allowed), possibly an
/// INSERT followed by its data.
pub fn analyze(text: &[u8]) -> Result<Statement, SqlError> {
    let mut lx = Lexer { s: text, pos: 0 };
    let mut kind = None;
    let mut depth = 0i32;
    let mut format = None;
    let mut outfile = false;
    let mut calls = Vec::new();
    let mut first = String::new();
    let mut prev_word: Option<(usize, usize)> = None;
    // The previous token, when a name (a word or a quoted identifier).
    let mut prev_name: Option<(usize, usize)> = None;
    // Top-level INSERT landmarks: the first SETTINGS, a SELECT (no inline
    // data then).
    let mut settings_at = None;
    let mut insert_select = false;
    while let Some((tok, a, b)) = lx.next()? {
        if kind.is_none() {
            first = String::from_utf8_lossy(&text[a..b]).to_ascii_lowercase();
            kind = Some(match tok {
                Tok::Punct(b'(') => Kind::Read,
                Tok::Word => {
                    let w = &text[a..b];
                    let read = [
                        "SELECT", "WITH", "SHOW", "DESCRIBE", "DESC", "EXPLAIN", "EXISTS",
                    ];
                    if read.iter().any(|k| w.eq_ignore_ascii_case(k.as_bytes())) {
                        Kind::Read
                    } else if w.eq_ignore_ascii_case(b"INSERT") {
                        Kind::Insert
                    } else {
                        Kind::Other
                    }
                }
                _ => Kind::Other,
            });
        }
        match tok {
            Tok::Punct(b'(') | Tok::Punct(b'[') => depth += 1,
            Tok::Punct(b')') | Tok::Punct(b']') => depth -= 1,
            Tok::Punct(b';') if depth <= 0 => {
                // Only whitespace and comments may follow.
                if lx.next()?.is_some() {
                    return Err(SqlError::MultiStatement);
                }
                break;
            }
            Tok::Word => {
                if word_is(text, a, b, "OUTFILE")
                    && prev_word.is_some_and(|(pa, pb)| word_is(text, pa, pb, "INTO"))
                {
                    outfile = true;
                }
                if depth == 0 && kind == Some(Kind::Insert) {
                    // INSERT ... SELECT has no inline data; INSERT INTO
                    // FUNCTION and FROM INFILE keep theirs as written.
                    if word_is(text, a, b, "SELECT")
                        || word_is(text, a, b, "WITH")
                        || word_is(text, a, b, "INFILE")
                        || (word_is(text, a, b, "FUNCTION")
                            && prev_word.is_some_and(|(pa, pb)| word_is(text, pa, pb, "INTO")))
                    {
                        insert_select = true;
                    }
                    if word_is(text, a, b, "SETTINGS") && settings_at.is_none() && !insert_select {
                        settings_at = Some(a);
                    }
                    if !insert_select
                        && (word_is(text, a, b, "VALUES") || word_is(text, a, b, "FORMAT"))
                    {
                        return insert_data(text, &mut lx, a, b, settings_at, outfile);
                    }
                }
            }
            _ => {}
        }
        // `FORMAT name` at the top level of a query: its output format.
        if depth == 0 && kind != Some(Kind::Insert) {
            if let (Some((pa, pb)), Tok::Word | Tok::Quoted) = (prev_word, tok) {
                if word_is(text, pa, pb, "FORMAT") && pb <= a {
                    format = Some(unquote(&text[a..b]));
                }
            }
        }
        if tok == Tok::Punct(b'(') {
            if let Some((pa, pb)) = prev_name {
                calls.push(unquote(&text[pa..pb]).to_ascii_lowercase());
            }
        }
        prev_word = match tok {
            Tok::Word => Some((a, b)),
            _ => None,
        };
        prev_name = match tok {
            Tok::Word | Tok::Quoted => Some((a, b)),
            _ => None,
        };
    }
    let Some(kind) = kind else {
        return Err(SqlError::Empty);
    };
    Ok(Statement {
        kind,
        format,
        outfile,
        first,
        calls,
        insert: None,
    })
}

/// An INSERT whose `FORMAT`/`VALUES` keyword spans `kw_a..kw_b`.
fn insert_data(
    text: &[u8],
    lx: &mut Lexer,
    kw_a: usize,
    kw_b: usize,
    settings_at: Option<usize>,
    outfile: bool,
) -> Result<Statement, SqlError> {
    let head = |upto: usize| String::from_utf8_lossy(&text[..upto]).into_owned();
    let (format, data_start, clause_end) = if word_is(text, kw_a, kw_b, "VALUES") {
        // The Values format reads from right after the keyword.
        ("Values".to_string(), kw_b, kw_a)
    } else {
        let Some((Tok::Word | Tok::Quoted, a, b)) = lx.next()? else {
            // `FORMAT` without a name: the engine says what is wrong.
            return Ok(Statement {
                kind: Kind::Insert,
                format: None,
                outfile,
                first: "insert".into(),
                calls: Vec::new(),
                insert: None,
            });
        };
        // ClickHouse: the data starts after the format name, spaces and
        // tabs, and one line break.
        let mut p = b;
        while p < text.len() && matches!(text[p], b' ' | b'\t' | b'\x0c') {
            p += 1;
        }
        if text.get(p) == Some(&b'\r') {
            p += 1;
        }
        if text.get(p) == Some(&b'\n') {
            p += 1;
        }
        (unquote(&text[a..b]), p, kw_a)
    };
    // FROM INFILE goes before SETTINGS (the grammar's order).
    let at = settings_at.unwrap_or(clause_end);
    let statement = format!(
        "{}{INFILE_MARKER} {} FORMAT {}",
        head(at),
        String::from_utf8_lossy(&text[at..clause_end]),
        format
    );
    Ok(Statement {
        kind: Kind::Insert,
        format: None,
        outfile,
        first: "insert".into(),
        calls: Vec::new(),
        insert: Some(InsertData {
            statement,
            data_start,
            format,
        }),
    })
}

fn unquote(w: &[u8]) -> String {
    let s = String::from_utf8_lossy(w);
    match s.as_bytes().first() {
        Some(b'`') | Some(b'"') if s.len() >= 2 => s[1..s.len() - 1].to_string(),
        _ => s.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Statement {
        analyze(s.as_bytes()).unwrap()
    }

    #[test]
    fn kinds_and_formats() {
        assert_eq!(a("SELECT 1").kind, Kind::Read);
        assert_eq!(
            a("  -- c\n/* x /* y */ */ with 1 as x select x").kind,
            Kind::Read
        );
        assert_eq!(a("(SELECT 1)").kind, Kind::Read);
        assert_eq!(a("DROP TABLE t").kind, Kind::Other);
        assert_eq!(a("SELECT 1 FORMAT JSON").format.as_deref(), Some("JSON"));
        assert_eq!(a("SELECT 1 FORMAT JSON;").format.as_deref(), Some("JSON"));
        assert_eq!(
            a("SELECT formatRow('CSV', 1), 'FORMAT X'")
                .format
                .as_deref(),
            None
        );
        assert_eq!(a("SELECT (SELECT 1 FORMAT TSV)").format, None);
        assert!(a("SELECT 1 INTO OUTFILE 'x'").outfile);
        assert!(!a("SELECT 'INTO OUTFILE'").outfile);
        assert_eq!(
            a("SELECT `file` ('x'), count(*), 'f(' FROM \"T\"(1) WHERE (a)").calls,
            // A keyword before a parenthesis counts too: the list is only
            // searched for function names.
            ["file", "count", "t", "where"]
        );
        assert_eq!(a(" /* c */ desc file('x')").first, "desc");
    }

    /// Heredocs and `//` comments are the engine's strings and comments:
    /// a quote inside them opens nothing (it hid an `INTO OUTFILE` and a
    /// second statement from the reader's checks), and a `;` in them ends
    /// no statement.
    #[test]
    fn heredocs_and_line_comments_lex_as_the_engine_lexes_them() {
        let q = "SELECT $$'$$ AS a, 'x' AS b INTO OUTFILE '/tmp/f' FORMAT TSVRaw -- '";
        assert!(a(q).outfile, "{q}");
        assert_eq!(
            analyze(b"SELECT $$'$$; SELECT 2 -- '"),
            Err(SqlError::MultiStatement)
        );
        assert_eq!(
            analyze(b"SELECT $tag$'$ $tag$; DROP TABLE t"),
            Err(SqlError::MultiStatement)
        );
        assert!(a("SELECT 1 // '\nINTO OUTFILE '/tmp/x' -- '").outfile);
        assert!(a("SELECT 1 # '\nINTO OUTFILE '/tmp/x' -- '").outfile);
        // What the engine takes as one statement is one here too.
        assert_eq!(a("SELECT $$a;b$$").kind, Kind::Read);
        assert_eq!(
            a("SELECT $x$ 'it''s; $y$ $x$ FORMAT JSON")
                .format
                .as_deref(),
            Some("JSON")
        );
        assert_eq!(a("SELECT $$ $x FROM t").calls, Vec::<String>::new());
        // An unclosed heredoc is no string: `$$` and what follows are read
        // as code, as the engine reads them.
        assert_eq!(
            analyze(b"SELECT $$; DROP TABLE t"),
            Err(SqlError::MultiStatement)
        );
    }

    #[test]
    fn one_statement_only() {
        assert_eq!(
            analyze(b"SELECT 1; DROP TABLE t"),
            Err(SqlError::MultiStatement)
        );
        assert_eq!(analyze(b"SELECT ';'; -- x\n"), Ok(a("SELECT ';'")));
        assert_eq!(analyze(b"  -- nothing\n"), Err(SqlError::Empty));
        assert_eq!(analyze(b"SELECT 'x"), Err(SqlError::Unterminated));
    }

    #[test]
    fn insert_data_starts_after_the_format_name_and_one_newline() {
        let text = b"INSERT INTO t (a, b) SETTINGS x = 1 FORMAT RowBinary\n\n\x01\x02;";
        let s = analyze(text).unwrap();
        let i = s.insert.unwrap();
        assert_eq!(&text[i.data_start..], b"\n\x01\x02;");
        assert_eq!(
            i.statement,
            format!("INSERT INTO t (a, b) {INFILE_MARKER} SETTINGS x = 1  FORMAT RowBinary")
        );
        let text = b"insert into t values (1, 'a'), (2, 'b')";
        let i = analyze(text).unwrap().insert.unwrap();
        assert_eq!(&text[i.data_start..], b" (1, 'a'), (2, 'b')");
        assert_eq!(i.format, "Values");
        // INSERT ... SELECT has no inline data, even with FORMAT in it.
        assert_eq!(a("INSERT INTO t SELECT * FROM s FORMAT TSV").insert, None);
    }
}
