//! Peak memory of the `flamehouse-udf` process on a full tree (issue 11):
//! at most twice the input bytes, measured by `/usr/bin/time` (a small
//! parent, so the child's high-water RSS is its own). The output's array
//! length is checked against the rows that follow it (the row count comes
//! from a separate counting pass).

use crate::wire::uleb;
use flamehouse_fixtures::testing;
use std::io::Read;
use std::process::{Command, Stdio};

/// `n` distinct stacks of the synthetic profile (depth 10-40, most
/// sharing a prefix with an earlier one, frames from 6,000 `module::verb_N`
/// labels: the flame-graph bench's shape), encoded as `sides` UDF columns
/// of `Array(Tuple(Array(String), Int64))` (the comparison: every other
/// stack), then an empty options map.
fn input(n: usize, sides: usize) -> Vec<u8> {
    let stacks = testing::synthetic_id_stacks(n, 10, 40, 7);
    let mut out = Vec::new();
    let mut label = String::new();
    let mut column = |out: &mut Vec<u8>, stacks: &[&(Vec<u32>, i64)]| {
        uleb(out, stacks.len() as u64);
        for (s, v) in stacks {
            uleb(out, s.len() as u64);
            for &id in s.iter() {
                testing::synthetic_label(id, &mut label);
                uleb(out, label.len() as u64);
                out.extend_from_slice(label.as_bytes());
            }
            out.extend_from_slice(&v.to_le_bytes());
        }
    };
    let all: Vec<&(Vec<u32>, i64)> = stacks.iter().collect();
    column(&mut out, &all);
    if sides == 2 {
        let half: Vec<&(Vec<u32>, i64)> = stacks.iter().step_by(2).collect();
        column(&mut out, &half);
    }
    uleb(&mut out, 0);
    out
}

/// Runs `flamehouse-udf args` on `input`: peak RSS in bytes and stdout.
fn run(args: &[&str], input: &[u8]) -> (u64, Vec<u8>) {
    let dir = testing::TempDir::new(&format!("udf-peak-{}", args[0]));
    let dir = dir.path();
    let (inp, rss) = (dir.join("in"), dir.join("rss"));
    std::fs::write(&inp, input).unwrap();
    let mut child = Command::new("/usr/bin/time")
        .args(["-f", "%M", "-o"])
        .arg(&rss)
        .arg(env!("CARGO_BIN_EXE_flamehouse-udf"))
        .args(args)
        .stdin(std::fs::File::open(&inp).unwrap())
        .stdout(Stdio::piped())
        .spawn()
        .expect("/usr/bin/time (GNU time) is needed to measure peak RSS");
    let mut out = Vec::new();
    child.stdout.take().unwrap().read_to_end(&mut out).unwrap();
    assert!(child.wait().unwrap().success(), "{args:?} failed");
    let kib: u64 = std::fs::read_to_string(&rss)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (kib * 1024, out)
}

/// The array length in front of a RowBinary tree, and the rows after it
/// (`level UInt32, label String, then `fields` Int64`).
fn count_rows(out: &[u8], fields: usize) -> (u64, u64) {
    let leb = |at: &mut usize| {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let b = out[*at];
            *at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return v;
            }
            shift += 7;
        }
    };
    let mut at = 0;
    let announced = leb(&mut at);
    let mut rows = 0;
    while at < out.len() {
        at += 4;
        let n = leb(&mut at) as usize;
        at += n + 8 * fields;
        rows += 1;
    }
    assert_eq!(at, out.len(), "a row is cut");
    (announced, rows)
}

#[test]
fn full_tree_peak_rss_is_at_most_twice_the_input() {
    let inp = input(40_000, 1);
    let (rss, out) = run(&["tree", "--format", "RowBinary"], &inp);
    let (announced, rows) = count_rows(&out, 2);
    assert_eq!(announced, rows);
    assert!(rows > 200_000, "{rows} rows: not a big tree");
    assert!(
        rss <= 2 * inp.len() as u64,
        "peak RSS {rss} bytes for {} input bytes ({} output bytes)",
        inp.len(),
        out.len()
    );
}

#[test]
fn full_diff_tree_peak_rss_is_at_most_twice_the_input() {
    let inp = input(30_000, 2);
    let (rss, out) = run(&["diff", "--format", "RowBinary"], &inp);
    let (announced, rows) = count_rows(&out, 4);
    assert_eq!(announced, rows);
    assert!(
        rss <= 2 * inp.len() as u64,
        "peak RSS {rss} bytes for {} input bytes ({} output bytes)",
        inp.len(),
        out.len()
    );
}

/// The `topn` bench workload (200,000 paths over a random call tree,
/// labels `f<id>`) as `tree-table` RowBinary rows, whose full tree (3.3 M
/// rows) was the one case over the bound (2.09x): the decoded frames,
/// their ids, the labels and the per-stack index were all held at once.
#[test]
fn full_table_tree_peak_rss_is_at_most_twice_the_input() {
    let paths = testing::call_tree_paths(200_000, 1);
    let mut inp = Vec::new();
    for (s, v) in &paths {
        uleb(&mut inp, s.len() as u64);
        for id in s {
            let l = format!("f{id}");
            uleb(&mut inp, l.len() as u64);
            inp.extend_from_slice(l.as_bytes());
        }
        inp.extend_from_slice(&v.to_le_bytes());
    }
    let (rss, out) = run(&["tree-table", "--format", "RowBinary"], &inp);
    // The oracle: one row per distinct path prefix, plus the root.
    let mut nodes: std::collections::HashMap<(u32, u32), u32> = Default::default();
    for (s, _) in &paths {
        let mut at = 0;
        for &id in s {
            let next = nodes.len() as u32 + 1;
            at = *nodes.entry((at, id)).or_insert(next);
        }
    }
    let (mut at, mut rows) = (0, 0);
    while at < out.len() {
        at += 4;
        let (mut n, mut shift) = (0usize, 0);
        loop {
            let b = out[at];
            at += 1;
            n |= usize::from(b & 0x7f) << shift;
            if b < 0x80 {
                break;
            }
            shift += 7;
        }
        at += n + 16;
        rows += 1;
    }
    assert_eq!(at, out.len(), "a row is cut");
    assert_eq!(rows, nodes.len() + 1);
    assert!(
        rss <= 2 * inp.len() as u64,
        "peak RSS {rss} bytes for {} input bytes",
        inp.len()
    );
}
