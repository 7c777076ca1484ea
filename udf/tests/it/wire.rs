//! Wire round trips: inputs encoded here (independently of the library's
//! decoder) go through `serve_udf` / `serve_table`, and the output must be
//! byte-identical to this file's encoding of the library's direct result.
//! Also: the decoder never panics, whatever the bytes.

use crate::common::{value, RawSamples, Stack};
use flamehouse_udf::codec::{Format, Limits};
use flamehouse_udf::fold::stack_fold;
use flamehouse_udf::options::{DiffOptions, FilterOptions, TreeOptions};
use flamehouse_udf::serve::{serve_table, serve_udf, Function, TableOptions};
use flamehouse_udf::tree::{stack_diff, stack_tree, DiffRow, TreeRow};
use proptest::prelude::*;

// ---- input encoder ----

pub fn uleb(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

pub fn rb_str(out: &mut Vec<u8>, s: &[u8]) {
    uleb(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// A TSV quoted string as ClickHouse may write it: `\\`, `\'` and the
/// control escapes, and `\xHH` for non-ASCII bytes (the reader must accept
/// every form).
pub fn tsv_quoted(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'\'');
    for &b in s {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\'' => out.extend_from_slice(b"\\'"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0 => out.extend_from_slice(b"\\0"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x0b => out.extend_from_slice(b"\\v"),
            0x80.. => out.extend_from_slice(format!("\\x{b:02X}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'\'');
}

/// Encoder settings; `spaced` puts a space after commas (the reader skips
/// spaces), `crlf` ends TSV rows with CRLF.
#[derive(Debug, Clone, Copy)]
pub struct Enc {
    pub format: Format,
    pub spaced: bool,
    pub crlf: bool,
}

impl Enc {
    pub fn plain(format: Format) -> Enc {
        Enc {
            format,
            spaced: false,
            crlf: false,
        }
    }

    fn comma(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(if self.spaced { b", " } else { b"," });
    }

    fn tsv_stack(&self, out: &mut Vec<u8>, stack: &[Vec<u8>]) {
        out.push(b'[');
        for (i, f) in stack.iter().enumerate() {
            if i > 0 {
                self.comma(out);
            }
            tsv_quoted(out, f);
        }
        out.push(b']');
    }

    fn rb_stack(&self, out: &mut Vec<u8>, stack: &[Vec<u8>]) {
        uleb(out, stack.len() as u64);
        for f in stack {
            rb_str(out, f);
        }
    }

    /// One `Array(Tuple(Array(String), Int64))` value.
    pub fn samples(&self, out: &mut Vec<u8>, raw: &RawSamples) {
        match self.format {
            Format::RowBinary => {
                uleb(out, raw.len() as u64);
                for (stack, v) in raw {
                    self.rb_stack(out, stack);
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            Format::TabSeparated => {
                out.push(b'[');
                for (i, (stack, v)) in raw.iter().enumerate() {
                    if i > 0 {
                        self.comma(out);
                    }
                    out.push(b'(');
                    self.tsv_stack(out, stack);
                    self.comma(out);
                    out.extend_from_slice(v.to_string().as_bytes());
                    out.push(b')');
                }
                out.push(b']');
            }
        }
    }

    /// One `Map(String, String)` value.
    pub fn options(&self, out: &mut Vec<u8>, pairs: &[(String, String)]) {
        match self.format {
            Format::RowBinary => {
                uleb(out, pairs.len() as u64);
                for (k, v) in pairs {
                    rb_str(out, k.as_bytes());
                    rb_str(out, v.as_bytes());
                }
            }
            Format::TabSeparated => {
                out.push(b'{');
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        self.comma(out);
                    }
                    tsv_quoted(out, k.as_bytes());
                    out.push(b':');
                    tsv_quoted(out, v.as_bytes());
                }
                out.push(b'}');
            }
        }
    }

    fn tab(&self, out: &mut Vec<u8>) {
        if self.format == Format::TabSeparated {
            out.push(b'\t');
        }
    }

    fn row_end(&self, out: &mut Vec<u8>) {
        if self.format == Format::TabSeparated {
            out.extend_from_slice(if self.crlf { b"\r\n" } else { b"\n" });
        }
    }

    /// One UDF call row.
    pub fn call(&self, out: &mut Vec<u8>, function: Function, call: &Call) {
        self.samples(out, &call.a);
        self.tab(out);
        if function == Function::Diff {
            self.samples(out, &call.b);
            self.tab(out);
        }
        self.options(out, &call.opts);
        self.row_end(out);
    }

    /// UDF input: plain rows, or pool chunks split after every call whose
    /// `breaks` flag is set (plus an optional leading empty chunk).
    pub fn udf_input(
        &self,
        function: Function,
        calls: &[Call],
        pool: bool,
        breaks: &[bool],
        empty_chunk: bool,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        if !pool {
            for c in calls {
                self.call(&mut out, function, c);
            }
            return out;
        }
        if empty_chunk {
            out.extend_from_slice(b"0\n");
        }
        let mut start = 0;
        for i in 0..calls.len() {
            if i + 1 == calls.len() || breaks.get(i).copied().unwrap_or(false) {
                out.extend_from_slice(format!("{}\n", i + 1 - start).as_bytes());
                for c in &calls[start..=i] {
                    self.call(&mut out, function, c);
                }
                start = i + 1;
            }
        }
        out
    }

    /// Table-command input: one `(stack, value)` row per sample.
    pub fn table_rows(&self, raw: &RawSamples) -> Vec<u8> {
        let mut out = Vec::new();
        for (stack, v) in raw {
            match self.format {
                Format::RowBinary => {
                    self.rb_stack(&mut out, stack);
                    out.extend_from_slice(&v.to_le_bytes());
                }
                Format::TabSeparated => {
                    self.tsv_stack(&mut out, stack);
                    out.push(b'\t');
                    out.extend_from_slice(v.to_string().as_bytes());
                    self.row_end(&mut out);
                }
            }
        }
        out
    }
}

/// One UDF call: samples (and the comparison for a diff) and options.
#[derive(Debug, Clone)]
pub struct Call {
    pub a: RawSamples,
    pub b: RawSamples,
    pub opts: Vec<(String, String)>,
}

// ---- expected output encoder ----

/// ClickHouse's output escaping: `\\`, the control escapes, and `\'` in
/// the quoted form.
fn escaped(out: &mut Vec<u8>, s: &[u8], quote: bool) {
    for &b in s {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\'' if quote => out.extend_from_slice(b"\\'"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x0c => out.extend_from_slice(b"\\f"),
            0 => out.extend_from_slice(b"\\0"),
            _ => out.push(b),
        }
    }
}

/// A tuple field: `UInt32`/`Int64` are fixed-width in RowBinary, decimal
/// text in TSV; strings are RowBinary strings or TSV quoted strings.
enum Field<'a> {
    U32(u32),
    I64(i64),
    Str(&'a [u8]),
}

fn field(out: &mut Vec<u8>, format: Format, f: &Field<'_>, quote: bool) {
    match (format, f) {
        (Format::RowBinary, Field::U32(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (Format::RowBinary, Field::I64(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (Format::RowBinary, Field::Str(s)) => rb_str(out, s),
        (Format::TabSeparated, Field::U32(v)) => out.extend_from_slice(v.to_string().as_bytes()),
        (Format::TabSeparated, Field::I64(v)) => out.extend_from_slice(v.to_string().as_bytes()),
        (Format::TabSeparated, Field::Str(s)) => {
            if quote {
                out.push(b'\'');
                escaped(out, s, true);
                out.push(b'\'');
            } else {
                escaped(out, s, false);
            }
        }
    }
}

fn tree_fields(r: &TreeRow) -> Vec<Field<'_>> {
    vec![
        Field::U32(r.level),
        Field::Str(&r.label),
        Field::I64(r.value),
        Field::I64(r.self_),
    ]
}

fn diff_fields(r: &DiffRow) -> Vec<Field<'_>> {
    vec![
        Field::U32(r.level),
        Field::Str(&r.label),
        Field::I64(r.value),
        Field::I64(r.self_),
        Field::I64(r.value_right),
        Field::I64(r.self_right),
    ]
}

fn fold_fields(r: &(Vec<u8>, i64)) -> Vec<Field<'_>> {
    vec![Field::Str(&r.0), Field::I64(r.1)]
}

/// One `Array(Tuple(...))` result value followed by the row end.
fn array_row(out: &mut Vec<u8>, format: Format, tuples: &[Vec<Field<'_>>]) {
    match format {
        Format::RowBinary => {
            uleb(out, tuples.len() as u64);
            for t in tuples {
                for f in t {
                    field(out, format, f, true);
                }
            }
        }
        Format::TabSeparated => {
            out.push(b'[');
            for (i, t) in tuples.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.push(b'(');
                for (j, f) in t.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    field(out, format, f, true);
                }
                out.push(b')');
            }
            out.extend_from_slice(b"]\n");
        }
    }
}

/// Table output: one row per tuple, tab-separated columns in TSV.
fn table_out(out: &mut Vec<u8>, format: Format, tuples: &[Vec<Field<'_>>]) {
    for t in tuples {
        for (j, f) in t.iter().enumerate() {
            if j > 0 && format == Format::TabSeparated {
                out.push(b'\t');
            }
            field(out, format, f, false);
        }
        if format == Format::TabSeparated {
            out.push(b'\n');
        }
    }
}

fn samples(raw: &RawSamples) -> flamehouse_udf::samples::Samples {
    crate::common::to_samples(raw)
}

/// The expected output of one call made directly on the library; `None`
/// when the library returns an error.
pub fn expected_call(function: Function, format: Format, call: &Call) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let a = samples(&call.a);
    match function {
        Function::Tree => {
            let o = TreeOptions::from_pairs(&call.opts).ok()?;
            let rows = stack_tree(&a, &o).ok()?;
            let t: Vec<_> = rows.iter().map(tree_fields).collect();
            array_row(&mut out, format, &t);
        }
        Function::Diff => {
            let o = DiffOptions::from_pairs(&call.opts).ok()?;
            let rows = stack_diff(&a, &samples(&call.b), &o).ok()?;
            let t: Vec<_> = rows.iter().map(diff_fields).collect();
            array_row(&mut out, format, &t);
        }
        Function::Fold => {
            let o = FilterOptions::from_pairs(&call.opts).ok()?;
            let rows = stack_fold(&a, &o).ok()?;
            let t: Vec<_> = rows.iter().map(fold_fields).collect();
            array_row(&mut out, format, &t);
        }
    }
    Some(out)
}

/// Expected output of several calls: the outputs of the calls before the
/// first failing one, and whether every call succeeded.
pub fn expected_udf(function: Function, format: Format, calls: &[Call]) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    for c in calls {
        match expected_call(function, format, c) {
            Some(b) => out.extend_from_slice(&b),
            None => return (out, false),
        }
    }
    (out, true)
}

pub fn expected_table(
    format: Format,
    opts: &TableOptions,
    a: &RawSamples,
    b: &RawSamples,
) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let a = samples(a);
    match opts {
        TableOptions::Tree(o) => {
            let rows = stack_tree(&a, o).ok()?;
            let t: Vec<_> = rows.iter().map(tree_fields).collect();
            table_out(&mut out, format, &t);
        }
        TableOptions::Diff(o) => {
            let rows = stack_diff(&a, &samples(b), o).ok()?;
            let t: Vec<_> = rows.iter().map(diff_fields).collect();
            table_out(&mut out, format, &t);
        }
        TableOptions::Fold(o) => {
            let rows = stack_fold(&a, o).ok()?;
            let t: Vec<_> = rows.iter().map(fold_fields).collect();
            table_out(&mut out, format, &t);
        }
    }
    Some(out)
}

// ---- strategies ----

/// Labels that stress both encodings: quotes, backslashes, every escaped
/// control byte, separators, non-UTF-8, empty.
const WIRE_LABELS: &[&[u8]] = &[
    b"main",
    b"work",
    b"a'b",
    b"back\\slash",
    b"t\tn\nr\r",
    b"\0\x08\x0c\x07\x0b",
    "caf\u{e9}".as_bytes(),
    b"\xff\xfe",
    b"",
    b"[x],(y)",
    b"{k:v}",
    b"lib.so+0x1f",
];

fn wire_label() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => prop::sample::select(WIRE_LABELS).prop_map(<[u8]>::to_vec),
        1 => prop::collection::vec(any::<u8>(), 0..6),
    ]
}

pub fn wire_samples() -> impl Strategy<Value = RawSamples> {
    let stack = prop::collection::vec(wire_label(), 0..5);
    let v = prop_oneof![4 => value(), 1 => any::<i32>().prop_map(i64::from)];
    prop::collection::vec((stack, v), 0..12)
}

const TREE_OPTS: &[(&str, &str)] = &[
    ("max_nodes", "4"),
    ("max_nodes", "0"),
    ("min_share", "0.2"),
    ("root", "r'o\\ot\t\u{f6}"),
    ("collapse_recursion", "true"),
    ("strip_hex", "1"),
    ("max_depth", "2"),
    ("focus", "a"),
    ("exclude", "b"),
    ("focus", ""),
];
const FOLD_OPTS: &[(&str, &str)] = &[
    ("collapse_recursion", "1"),
    ("strip_hex", "yes"),
    ("max_depth", "3"),
    ("focus", "w"),
    ("exclude", "x"),
    ("exclude", ""),
];
/// Options only the diff takes.
const DIFF_OPTS: &[(&str, &str)] = &[("normalize", "1"), ("normalize", "0")];
/// Options every function rejects.
const BAD_OPTS: &[(&str, &str)] = &[("max_nodes", "1"), ("bogus", "x"), ("max_depth", "-1")];
/// Options that belong to another function (an error, never ignored).
const MISPLACED: &[(&str, &str)] = &[("normalize", "1"), ("max_nodes", "5"), ("root", "r")];

fn pair(p: &(&str, &str)) -> (String, String) {
    (p.0.to_string(), p.1.to_string())
}

fn options_for(function: Function) -> impl Strategy<Value = Vec<(String, String)>> {
    let good: Vec<(&str, &str)> = match function {
        Function::Fold => FOLD_OPTS.to_vec(),
        Function::Tree => TREE_OPTS.to_vec(),
        Function::Diff => [TREE_OPTS, DIFF_OPTS].concat(),
    };
    let bad: Vec<(&str, &str)> = match function {
        Function::Fold => [BAD_OPTS, MISPLACED].concat(),
        Function::Tree => [BAD_OPTS, &MISPLACED[..1]].concat(),
        Function::Diff => BAD_OPTS.to_vec(),
    };
    let one = prop_oneof![
        12 => prop::sample::select(good).prop_map(|p| pair(&p)),
        1 => prop::sample::select(bad).prop_map(|p| pair(&p)),
    ];
    prop::collection::vec(one, 0..3)
}

fn call_for(function: Function) -> impl Strategy<Value = Call> {
    (wire_samples(), wire_samples(), options_for(function)).prop_map(move |(a, b, opts)| Call {
        a,
        b: if function == Function::Diff {
            b
        } else {
            Vec::new()
        },
        opts,
    })
}

pub fn function() -> impl Strategy<Value = Function> {
    prop::sample::select(&[Function::Tree, Function::Diff, Function::Fold][..])
}

pub fn format() -> impl Strategy<Value = Format> {
    prop::sample::select(&[Format::TabSeparated, Format::RowBinary][..])
}

fn enc() -> impl Strategy<Value = Enc> {
    (format(), any::<bool>(), any::<bool>()).prop_map(|(format, spaced, crlf)| Enc {
        format,
        spaced,
        crlf,
    })
}

fn udf_case() -> impl Strategy<Value = (Function, Enc, bool, Vec<Call>, Vec<bool>, bool)> {
    (function(), enc(), any::<bool>()).prop_flat_map(|(f, e, pool)| {
        (
            Just(f),
            Just(e),
            Just(pool),
            prop::collection::vec(call_for(f), 0..4),
            prop::collection::vec(any::<bool>(), 4),
            any::<bool>(),
        )
    })
}

fn limits() -> impl Strategy<Value = Limits> {
    prop_oneof![
        3 => Just(Limits::default()),
        1 => (0u64..64).prop_map(|max_row_bytes| Limits { max_row_bytes }),
    ]
}

fn table_opts() -> impl Strategy<Value = TableOptions> {
    function().prop_flat_map(|f| {
        let good: Vec<(&str, &str)> = match f {
            Function::Fold => FOLD_OPTS.to_vec(),
            Function::Tree => TREE_OPTS.to_vec(),
            Function::Diff => [TREE_OPTS, DIFF_OPTS].concat(),
        };
        prop::collection::vec(prop::sample::select(good).prop_map(|p| pair(&p)), 0..3)
            .prop_map(move |pairs| TableOptions::from_pairs(f, &pairs).unwrap())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn udf_round_trip((function, enc, pool, calls, breaks, empty_chunk) in udf_case()) {
        let input = enc.udf_input(function, &calls, pool, &breaks, empty_chunk);
        let mut out = Vec::new();
        let res = serve_udf(function, enc.format, pool, Limits::default(), &input[..], &mut out);
        let (want, ok) = expected_udf(function, enc.format, &calls);
        prop_assert_eq!(res.is_ok(), ok, "{:?}", res);
        prop_assert_eq!(out, want);
    }

    #[test]
    fn table_round_trip(
        enc in enc(),
        opts in table_opts(),
        a in wire_samples(),
        b in wire_samples(),
    ) {
        let function = opts.function();
        let input = enc.table_rows(&a);
        let cmp = enc.table_rows(&b);
        let comparison = (function == Function::Diff).then_some(&cmp[..]);
        let mut out = Vec::new();
        let res = serve_table(enc.format, &opts, Limits::default(), &input[..], comparison, &mut out);
        let b = if function == Function::Diff { b } else { Vec::new() };
        match expected_table(enc.format, &opts, &a, &b) {
            Some(want) => {
                prop_assert!(res.is_ok(), "{:?}", res);
                prop_assert_eq!(out, want);
            }
            None => prop_assert!(res.is_err()),
        }
    }

    #[test]
    fn udf_decoder_never_panics_on_arbitrary_bytes(
        function in function(),
        format in format(),
        pool in any::<bool>(),
        limits in limits(),
        bytes in prop::collection::vec(any::<u8>(), 0..400),
    ) {
        let _ = serve_udf(function, format, pool, limits, &bytes[..], std::io::sink());
    }

    #[test]
    fn udf_decoder_never_panics_on_damaged_input(
        (function, enc, pool, calls, breaks, empty_chunk) in udf_case(),
        limits in limits(),
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut input = enc.udf_input(function, &calls, pool, &breaks, empty_chunk);
        if !input.is_empty() {
            for (i, x) in &flips {
                let i = i.index(input.len());
                input[i] ^= x;
            }
            input.truncate(cut.index(input.len() + 1));
        }
        let _ = serve_udf(function, enc.format, pool, limits, &input[..], std::io::sink());
    }

    #[test]
    fn table_decoder_never_panics(
        function in function(),
        format in format(),
        limits in limits(),
        bytes in prop::collection::vec(any::<u8>(), 0..400),
        cmp in prop::collection::vec(any::<u8>(), 0..100),
    ) {
        let opts = TableOptions::from_pairs::<&str, &str>(function, &[]).unwrap();
        let _ = serve_table(format, &opts, limits, &bytes[..], Some(&cmp[..]), std::io::sink());
    }
}

/// A fixed input's stacks, for the snapshots.
pub fn stack(frames: &[&str]) -> Stack {
    frames.iter().map(|f| f.as_bytes().to_vec()).collect()
}
