//! Peak memory of the `flamehouse-udf` process on a full tree (issue 11):
//! at most twice the input bytes, measured by `/usr/bin/time` (a small
//! parent, so the child's high-water RSS is its own). The output's array
//! length is checked against the rows that follow it (the row count comes
//! from a separate counting pass).

use crate::wire::uleb;
use std::collections::HashSet;
use std::io::Read;
use std::process::{Command, Stdio};

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

/// `n` distinct stacks, depth 10-40, most sharing a prefix with an earlier
/// one, frames from 6,000 `module::verb_N` labels (the flame-graph bench's
/// shape), encoded as `sides` UDF columns of `Array(Tuple(Array(String),
/// Int64))` (the comparison: every other stack, then new ones), then an
/// empty options map.
fn input(n: usize, sides: usize) -> Vec<u8> {
    let mut rng = Rng(7);
    let mut seen = HashSet::new();
    let mut stacks: Vec<Vec<u64>> = Vec::with_capacity(n);
    while stacks.len() < n {
        let depth = rng.range(10, 40) as usize;
        let mut s = if !stacks.is_empty() && rng.range(0, 9) < 9 {
            let base = &stacks[rng.range(0, stacks.len() as u64 - 1) as usize];
            base[..rng.range(1, base.len().min(depth) as u64) as usize].to_vec()
        } else {
            vec![0]
        };
        while s.len() < depth {
            s.push(rng.range(1, 6000));
        }
        if seen.insert(s.clone()) {
            stacks.push(s);
        }
    }
    let mut out = Vec::new();
    let mut column = |out: &mut Vec<u8>, stacks: &[&Vec<u64>]| {
        uleb(out, stacks.len() as u64);
        for s in stacks {
            uleb(out, s.len() as u64);
            for &id in s.iter() {
                let label = format!("m{}::verb_{id}", id % 10);
                uleb(out, label.len() as u64);
                out.extend_from_slice(label.as_bytes());
            }
            out.extend_from_slice(&(rng.range(1, 4096) as i64).to_le_bytes());
        }
    };
    let all: Vec<&Vec<u64>> = stacks.iter().collect();
    column(&mut out, &all);
    if sides == 2 {
        let half: Vec<&Vec<u64>> = stacks.iter().step_by(2).collect();
        column(&mut out, &half);
    }
    uleb(&mut out, 0);
    out
}

/// Runs `flamehouse-udf args` on `input`: peak RSS in bytes and stdout.
fn run(args: &[&str], input: &[u8]) -> (u64, Vec<u8>) {
    let dir = std::env::temp_dir().join(format!(
        "flamehouse-udf-peak-{}-{}",
        std::process::id(),
        args[0]
    ));
    std::fs::create_dir_all(&dir).unwrap();
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
    std::fs::remove_dir_all(&dir).unwrap();
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
