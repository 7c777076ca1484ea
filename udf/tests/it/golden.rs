//! Snapshots pinning the exact wire output of `serve_udf` and `serve_table`
//! for a small fixed input, and the generated SQL wrappers. TabSeparated
//! output is shown one Rust-escaped string per line (so tabs and the final
//! newline are visible), RowBinary as a hex dump.

use crate::common::RawSamples;
use crate::wire::{stack, Call, Enc};
use flamehouse_udf::catalog;
use flamehouse_udf::codec::{Format, Limits};
use flamehouse_udf::options::TreeOptions;
use flamehouse_udf::serve::{serve_table, serve_udf, Function, TableOptions};

fn baseline() -> RawSamples {
    vec![
        (stack(&["main", "work", "a'b"]), 5),
        (stack(&["main", "work", "work", "tab\there"]), 3),
        (stack(&["main", "lib.so+0x1f"]), 2),
        (stack(&["main", "x;y\nz"]), 4),
        (stack(&[]), 1),
        (stack(&["main", "neg"]), -2),
    ]
}

fn comparison() -> RawSamples {
    vec![
        (stack(&["main", "work", "a'b"]), 17),
        (stack(&["main", "new"]), 4),
    ]
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Two calls per function: default options, then options that matter.
fn calls(function: Function) -> Vec<Call> {
    let second = match function {
        Function::Tree => pairs(&[("max_nodes", "5"), ("root", "all")]),
        Function::Diff => pairs(&[("normalize", "1")]),
        Function::Fold => pairs(&[("strip_hex", "1"), ("collapse_recursion", "1")]),
    };
    let b = if function == Function::Diff {
        comparison()
    } else {
        Vec::new()
    };
    vec![
        Call {
            a: baseline(),
            b: b.clone(),
            opts: Vec::new(),
        },
        Call {
            a: baseline(),
            b,
            opts: second,
        },
    ]
}

fn render(format: Format, out: &[u8]) -> String {
    match format {
        Format::TabSeparated => {
            let text = std::str::from_utf8(out).expect("fixed TSV output is UTF-8");
            text.split_inclusive('\n')
                .map(|l| format!("{l:?}"))
                .collect::<Vec<_>>()
                .join("\n")
        }
        Format::RowBinary => hex_dump(out),
    }
}

fn hex_dump(bytes: &[u8]) -> String {
    let mut s = format!("{} bytes\n", bytes.len());
    for (i, chunk) in bytes.chunks(16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        let ascii: String = chunk
            .iter()
            .map(|&b| {
                if b.is_ascii_graphic() || b == b' ' {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        s.push_str(&format!(
            "{:06x}  {:<47}  |{ascii}|\n",
            i * 16,
            hex.join(" ")
        ));
    }
    s
}

fn fname(format: Format) -> &'static str {
    match format {
        Format::TabSeparated => "tsv",
        Format::RowBinary => "rowbinary",
    }
}

#[test]
fn udf_wire_output() {
    for function in [Function::Tree, Function::Diff, Function::Fold] {
        for format in [Format::TabSeparated, Format::RowBinary] {
            for pool in [false, true] {
                let calls = calls(function);
                // Pool: one chunk per call.
                let input = Enc::plain(format).udf_input(function, &calls, pool, &[true], false);
                let mut out = Vec::new();
                serve_udf(
                    function,
                    format,
                    pool,
                    Limits::default(),
                    &input[..],
                    &mut out,
                )
                .unwrap();
                let name = format!(
                    "udf_{}_{}{}",
                    function.name(),
                    fname(format),
                    if pool { "_pool" } else { "" }
                );
                insta::assert_snapshot!(&*name, render(format, &out));
            }
        }
    }
}

#[test]
fn table_wire_output() {
    for function in [Function::Tree, Function::Diff, Function::Fold] {
        for format in [Format::TabSeparated, Format::RowBinary] {
            let enc = Enc::plain(format);
            let input = enc.table_rows(&baseline());
            let cmp = enc.table_rows(&comparison());
            let comparison = (function == Function::Diff).then_some(&cmp[..]);
            let mut out = Vec::new();
            serve_table(
                format,
                &TableOptions::from_pairs::<&str, &str>(function, &[]).unwrap(),
                Limits::default(),
                &input[..],
                comparison,
                &mut out,
            )
            .unwrap();
            let name = format!("table_{}_{}", function.name(), fname(format));
            insta::assert_snapshot!(&*name, render(format, &out));
        }
    }
}

#[test]
fn table_wire_output_pruned() {
    let opts = TreeOptions {
        max_nodes: 4,
        ..TreeOptions::default()
    };
    let input = Enc::plain(Format::TabSeparated).table_rows(&baseline());
    let mut out = Vec::new();
    serve_table(
        Format::TabSeparated,
        &TableOptions::Tree(opts),
        Limits::default(),
        &input[..],
        None::<&[u8]>,
        &mut out,
    )
    .unwrap();
    insta::assert_snapshot!(
        "table_tree_tsv_max_nodes_4",
        render(Format::TabSeparated, &out)
    );
}

#[test]
fn functions_sql() {
    insta::assert_snapshot!("functions_sql", catalog::functions_sql());
}
