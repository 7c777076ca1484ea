//! The `flamehouse-udf` command line and the SQL options map: an option a
//! command does not use is an error (never silently ignored), `--help`
//! states each default once, and the pruned remainder cannot be confused
//! with a real frame.

use crate::common::*;
use crate::wire::stack;
use flamehouse_udf::options::{DiffOptions, FilterOptions, TreeOptions};
use flamehouse_udf::tree::stack_tree;
use std::process::{Command, Stdio};

fn udf(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_flamehouse-udf"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn table_commands_reject_options_they_do_not_use() {
    let cases: &[(&str, &[&str])] = &[
        ("fold-table", &["--max-nodes", "5"]),
        ("fold-table", &["--min-share", "0.1"]),
        ("fold-table", &["--root", "all"]),
        ("fold-table", &["--normalize"]),
        ("fold-table", &["--comparison-fd", "3"]),
        ("tree-table", &["--normalize"]),
        ("tree-table", &["--comparison-fd", "3"]),
    ];
    for (cmd, extra) in cases {
        let mut args = vec![*cmd, "--format", "RowBinary"];
        args.extend_from_slice(extra);
        let (code, _, err) = udf(&args);
        assert_ne!(code, 0, "{args:?} was accepted");
        assert!(
            err.contains(&format!("unexpected argument '{}'", extra[0])),
            "{args:?}: {err}"
        );
    }
    // The same options where they mean something are accepted.
    for args in [
        &[
            "tree-table",
            "--format",
            "RowBinary",
            "--max-nodes",
            "5",
            "--root",
            "all",
        ][..],
        &[
            "diff-table",
            "--format",
            "RowBinary",
            "--normalize",
            "--comparison-fd",
            "0",
        ][..],
        &[
            "fold-table",
            "--format",
            "RowBinary",
            "--strip-hex",
            "--max-depth",
            "3",
        ][..],
    ] {
        let (code, _, err) = udf(args);
        assert_eq!(code, 0, "{args:?}: {err}");
    }
}

#[test]
fn sql_options_of_another_function_are_errors() {
    let e = TreeOptions::from_pairs(&[("normalize", "1")])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("normalize") && e.contains("only stackDiff"),
        "{e}"
    );
    for key in ["max_nodes", "min_share", "root", "normalize"] {
        let e = FilterOptions::from_pairs(&[(key, "1")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(key) && e.contains("stackFold does not take"),
            "{e}"
        );
    }
    assert!(DiffOptions::from_pairs(&[("normalize", "1"), ("max_nodes", "5")]).is_ok());
    let e = DiffOptions::from_pairs(&[("bogus", "1")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown option"), "{e}");
}

#[test]
fn help_states_each_default_once() {
    for cmd in [
        "tree",
        "diff",
        "fold",
        "tree-table",
        "diff-table",
        "fold-table",
    ] {
        let (code, help, _) = udf(&[cmd, "--help"]);
        assert_eq!(code, 0);
        // One block per option: from a line starting with `-` to the next.
        let mut blocks: Vec<String> = Vec::new();
        for line in help.lines() {
            if line.trim_start().starts_with('-') {
                blocks.push(String::new());
            }
            if let Some(b) = blocks.last_mut() {
                b.push_str(line);
                b.push('\n');
            }
        }
        assert!(blocks.len() >= 3, "{cmd}: {help}");
        for b in &blocks {
            let n = b.to_ascii_lowercase().matches("default").count();
            assert!(n <= 1, "{cmd}: default stated {n} times in\n{b}");
        }
    }
}

#[test]
fn pruned_remainder_is_not_confused_with_a_real_other_frame() {
    // `main` has a real child `other` (kept: heaviest) and small children
    // pruned into the remainder.
    let raw: RawSamples = vec![
        (stack(&["main", "other"]), 50),
        (stack(&["main", "a"]), 3),
        (stack(&["main", "b"]), 2),
        (stack(&["main", "c"]), 1),
    ];
    let opts = TreeOptions {
        max_nodes: 4,
        ..TreeOptions::default()
    };
    let rows = stack_tree(&to_samples(&raw), &opts).unwrap();
    let got: Vec<(u32, &[u8], i64)> = rows
        .iter()
        .map(|r| (r.level, &r.label[..], r.value))
        .collect();
    assert_eq!(
        got,
        vec![
            (0, &b"total"[..], 56),
            (1, b"main", 56),
            (2, b"other", 50),
            (2, b"[other]", 6),
        ]
    );
}

#[test]
fn long_and_short_frames_decode_alike_in_both_paths() {
    use flamehouse_udf::codec::{Format, Limits};
    use flamehouse_udf::serve::{serve_table, TableOptions};
    // Short frames take the decoder's copy-the-stack path; a frame of 128
    // bytes or more takes the per-frame one; the same stack must come out.
    let long = "x".repeat(300);
    let raw: RawSamples = vec![
        (stack(&["main", "a", "b"]), 1),
        (stack(&["main", &long, "b"]), 2),
        (stack(&["main", "a", &long]), 3),
    ];
    let mut input = Vec::new();
    for (s, v) in &raw {
        crate::wire::uleb(&mut input, s.len() as u64);
        for f in s {
            crate::wire::rb_str(&mut input, f);
        }
        input.extend_from_slice(&v.to_le_bytes());
    }
    let opts = TableOptions::Fold(FilterOptions::default());
    let mut out = Vec::new();
    serve_table(
        Format::RowBinary,
        &opts,
        Limits::default(),
        &input[..],
        None::<&[u8]>,
        &mut out,
    )
    .unwrap();
    let want =
        flamehouse_udf::fold::stack_fold(&to_samples(&raw), &FilterOptions::default()).unwrap();
    let mut expect = Vec::new();
    for (line, v) in &want {
        crate::wire::rb_str(&mut expect, line);
        expect.extend_from_slice(&v.to_le_bytes());
    }
    assert_eq!(want.len(), 3);
    assert_eq!(out, expect);
}
