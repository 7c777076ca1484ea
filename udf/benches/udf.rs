//! Benchmark: the `flamehouse-udf` executable on generated inputs, against
//! a baseline build of it in the same run (ratios, not absolute times, are
//! the result: the machine is shared).
//!
//! Run: `cargo bench -p flamehouse-udf --bench udf`
//! env: `BASELINE_UDF` (default `/work/baseline/flamehouse-udf`; the cases
//! run only on the new binary when it does not exist), `BENCH_RUNS` (5),
//! `BENCH_CASES` (comma-separated names, default all), `MEMHAWK_TREE`
//! (optional: MemHawk's own tree program, built as docs/benchmarks.md says;
//! the `topn` top-1000 tree then also runs it on the same paths,
//! alternating with ours, and checks the nodes both keep agree).
//!
//! Cases:
//! - `topn`: MemHawk's tree-program workload. 200,000 stack paths, depth
//!   uniform 12-30, over a random call tree where each step reuses an
//!   existing child with probability 0.85 (Pareto-skewed choice, alpha
//!   1.2) or adds a new one (frame ids up to 400,000); values uniform
//!   1..1,000,000; `tree-table --max-nodes 1000` and the full tree.
//! - `synthetic20k`: the flame-graph benchmark's UDF input shape, 20,000
//!   distinct synthetic stacks as one `stackTree` row.
//! - `distinct1m`: 1,000,000 distinct stacks shaped like the flame-graph
//!   benchmark's synthetic profile, as one `stackTree` row
//!   (`tree --format RowBinary`).
//! - `diff1m`: `stackDiff` of 1,000,000 vs 1,000,000 distinct stacks, half
//!   of them shared.
//!
//! Every case prints wall time (min and median over the runs), CPU time
//! (user + system, min) and peak RSS (from `/usr/bin/time`) for both
//! binaries, the ratios, and checks the outputs are byte-identical where
//! the output format did not change.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The shared deterministic generator (stable across versions, so the
/// inputs are the same in every run).
use flamehouse_fixtures::testing::{call_tree_paths, synthetic_id_stacks, synthetic_label};

fn uleb(w: &mut impl Write, v: u64) {
    flamehouse_udf::rowbinary::write_uleb(w, v).unwrap();
}

/// How frame ids become labels.
#[derive(Clone, Copy)]
enum Names {
    /// `f123`.
    Ids,
    /// [`synthetic_label`].
    Synthetic,
}

fn rb_stack(w: &mut impl Write, stack: &[u32], names: Names, name: &mut String) {
    uleb(w, stack.len() as u64);
    for &id in stack {
        match names {
            Names::Ids => {
                name.clear();
                use std::fmt::Write as _;
                write!(name, "f{id}").unwrap();
            }
            Names::Synthetic => synthetic_label(id, name),
        }
        uleb(w, name.len() as u64);
        w.write_all(name.as_bytes()).unwrap();
    }
}

/// Distinct stacks shaped like `flamehouse demo`'s synthetic profile (the
/// flame-graph benchmark's table): depth 10-40, 90% share a prefix with an
/// earlier stack, frames `module::verb_N` from 6,000 labels. Frame ids
/// index [`synthetic_label`].
fn synthetic_stacks(n: usize, seed: u64) -> Vec<(Vec<u32>, i64)> {
    synthetic_id_stacks(n, 10, 40, seed)
}

/// `(stack Array(String), value Int64)` RowBinary rows (table commands).
fn write_table_rows(path: &Path, paths: &[(Vec<u32>, i64)]) {
    let mut w = BufWriter::new(File::create(path).unwrap());
    let mut name = String::new();
    for (s, v) in paths {
        rb_stack(&mut w, s, Names::Ids, &mut name);
        w.write_all(&v.to_le_bytes()).unwrap();
    }
    w.flush().unwrap();
}

/// The same paths as MemHawk's tree program reads them: one line per path,
/// `value<TAB>[0,id,...]`, its root frame 0 first.
fn write_memhawk_lines(path: &Path, paths: &[(Vec<u32>, i64)]) {
    let mut w = BufWriter::new(File::create(path).unwrap());
    for (s, v) in paths {
        write!(w, "{v}\t[0").unwrap();
        for id in s {
            write!(w, ",{id}").unwrap();
        }
        w.write_all(b"]\n").unwrap();
    }
    w.flush().unwrap();
}

/// One UDF row: `Array(Tuple(Array(String), Int64))` per side, then an
/// empty options map.
fn write_udf_row(path: &Path, sides: &[&[(Vec<u32>, i64)]], names: Names) {
    let mut w = BufWriter::new(File::create(path).unwrap());
    let mut name = String::new();
    for side in sides {
        uleb(&mut w, side.len() as u64);
        for (s, v) in side.iter() {
            rb_stack(&mut w, s, names, &mut name);
            w.write_all(&v.to_le_bytes()).unwrap();
        }
    }
    uleb(&mut w, 0);
    w.flush().unwrap();
}

struct Run {
    wall: Duration,
    /// User + system CPU time of the command (less sensitive than wall
    /// time to other processes taking turns on the cores).
    cpu: Duration,
    max_rss_kib: i64,
    /// The output when it is small (to compare rows), else empty.
    output: Vec<u8>,
    output_len: u64,
    /// FNV-1a of the output's 8-byte words.
    digest: u64,
}

/// Hashes (and keeps, when small) what a child writes.
struct Sink {
    keep: Vec<u8>,
    len: u64,
    digest: u64,
}

impl Sink {
    /// Reads `r` to its end. Fast (a large buffer, the digest by 8-byte
    /// words): a slow reader would stall the child on a full pipe and
    /// count in its wall time.
    fn read_all(&mut self, r: &mut impl Read) {
        let mut buf = vec![0u8; 1 << 20];
        // Bytes not yet digested (a word cut by a read).
        let mut pend: Vec<u8> = Vec::with_capacity(8);
        loop {
            let n = match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => panic!("reading the child's output: {e}"),
            };
            let mut b = &buf[..n];
            if self.len < 1 << 20 {
                let k = n.min((1 << 20) - self.len as usize);
                self.keep.extend_from_slice(&b[..k]);
            }
            self.len += n as u64;
            while !pend.is_empty() && !b.is_empty() {
                pend.push(b[0]);
                b = &b[1..];
                if pend.len() == 8 {
                    self.mix(u64::from_le_bytes(pend[..].try_into().unwrap()));
                    pend.clear();
                }
            }
            let mut words = b.chunks_exact(8);
            for w in &mut words {
                self.mix(u64::from_le_bytes(w.try_into().unwrap()));
            }
            pend.extend_from_slice(words.remainder());
        }
        for &x in &pend {
            self.mix(u64::from(x));
        }
    }

    fn mix(&mut self, w: u64) {
        self.digest = (self.digest ^ w).wrapping_mul(0x100_0000_01b3);
    }
}

/// Runs `bin args < input`, returning wall time, peak RSS and stdout.
///
/// The peak RSS comes from `/usr/bin/time`, which waits for the command:
/// Linux hands a child the high-water RSS of the process it was forked
/// from, so the benchmark's own (large) RSS would hide a small one.
fn run(bin: &Path, args: &[&str], input: &Path) -> Run {
    let rss_file = std::env::temp_dir().join(format!("udf-bench-rss-{}", std::process::id()));
    let cpu0 = children_cpu();
    let t = Instant::now();
    let mut child = Command::new("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&rss_file)
        .arg(bin)
        .args(args)
        .stdin(File::open(input).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("/usr/bin/time runs");
    let mut sink = Sink {
        keep: Vec::new(),
        len: 0,
        digest: 0xcbf2_9ce4_8422_2325,
    };
    sink.read_all(child.stdout.as_mut().unwrap());
    let status = child.wait().unwrap();
    let wall = t.elapsed();
    let cpu = children_cpu() - cpu0;
    assert!(status.success(), "{} {args:?} failed", bin.display());
    let max_rss_kib = std::fs::read_to_string(&rss_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    Run {
        wall,
        cpu,
        max_rss_kib,
        output: if sink.len <= 1 << 20 {
            sink.keep
        } else {
            Vec::new()
        },
        output_len: sink.len,
        digest: sink.digest,
    }
}

/// CPU time (user + system) of every child process waited for so far.
fn children_cpu() -> Duration {
    // SAFETY: getrusage fills the struct it is given.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        ru
    };
    let d = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    d(ru.ru_utime) + d(ru.ru_stime)
}

fn min_cpu(runs: &[Run]) -> Duration {
    runs.iter().map(|r| r.cpu).min().unwrap_or_default()
}

/// `tree-table` RowBinary rows `(level, label, value, self)`, the pruned
/// remainder's label mapped to the baseline's `other`.
fn tree_rows(mut b: &[u8]) -> Vec<(u32, Vec<u8>, i64, i64)> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let level = u32::from_le_bytes(b[..4].try_into().unwrap());
        b = &b[4..];
        let (mut n, mut shift, mut i) = (0usize, 0, 0);
        loop {
            n |= ((b[i] & 0x7f) as usize) << shift;
            shift += 7;
            i += 1;
            if b[i - 1] & 0x80 == 0 {
                break;
            }
        }
        let mut label = b[i..i + n].to_vec();
        if label == b"[other]" {
            label = b"other".to_vec();
        }
        b = &b[i + n..];
        let v = i64::from_le_bytes(b[..8].try_into().unwrap());
        let s = i64::from_le_bytes(b[8..16].try_into().unwrap());
        b = &b[16..];
        out.push((level, label, v, s));
    }
    out
}

/// A node's path of frame ids below the root.
type NodePath = Vec<u32>;

/// MemHawk's tree program's output (`index, key, depth, total, self` per
/// line, pre-order, its root key 0 at depth 0): each node's total and self
/// by its path.
fn memhawk_nodes(out: &[u8]) -> std::collections::HashMap<NodePath, (i64, i64)> {
    let mut nodes = std::collections::HashMap::new();
    let mut path: Vec<u32> = Vec::new();
    for line in std::str::from_utf8(out).unwrap().lines() {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 5, "MemHawk output line {line:?}");
        let (key, depth): (u32, usize) = (f[1].parse().unwrap(), f[2].parse().unwrap());
        let (total, value): (i64, i64) = (f[3].parse().unwrap(), f[4].parse().unwrap());
        if depth == 0 {
            path.clear();
        } else {
            path.truncate(depth - 1);
            path.push(key);
        }
        assert_eq!(path.len(), depth, "MemHawk output: depth jumps at {line:?}");
        nodes.insert(path.clone(), (total, value));
    }
    nodes
}

/// Our `tree-table` rows as [`memhawk_nodes`]: labels `f<id>`, the pruned
/// remainder rows left out (MemHawk's program has none).
fn our_nodes(out: &[u8]) -> std::collections::HashMap<NodePath, (i64, i64)> {
    let mut nodes = std::collections::HashMap::new();
    let mut path: Vec<u32> = Vec::new();
    for (level, label, v, s) in tree_rows(out) {
        if level == 0 {
            path.clear();
        } else {
            path.truncate(level as usize - 1);
            if label == b"other" {
                continue;
            }
            let id = std::str::from_utf8(&label[1..]).unwrap().parse().unwrap();
            path.push(id);
        }
        nodes.insert(path.clone(), (v, s));
    }
    nodes
}

/// Runs our top-N tree and MemHawk's tree program (`count` nodes) on the
/// same paths, alternating, and prints the comparison: wall time, RSS, the
/// ratio, and whether the nodes both keep have the same total and self.
#[allow(clippy::too_many_arguments)] // two programs, each with its input
fn memhawk_case(
    name: &str,
    args: &[&str],
    input: &Path,
    new: &Path,
    memhawk: &Path,
    memhawk_input: &Path,
    count: usize,
    runs: usize,
) {
    let count_arg = count.to_string();
    let (mut a, mut m) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        a.push(run(new, args, input));
        m.push(run(memhawk, &[&count_arg], memhawk_input));
    }
    let (min, med, rss) = stats(&a);
    let (mmin, mmed, mrss) = stats(&m);
    let mb = |p: &Path| std::fs::metadata(p).unwrap().len() as f64 / 1e6;
    println!(
        "{name:<34} new      min {:>8.1} ms  median {:>8.1} ms  CPU min {:>8.1} ms  peak RSS {:>7.1} MiB  ({:.1} MB RowBinary in)",
        ms(min),
        ms(med),
        ms(min_cpu(&a)),
        rss as f64 / 1024.0,
        mb(input)
    );
    println!(
        "{name:<34} MemHawk  min {:>8.1} ms  median {:>8.1} ms  CPU min {:>8.1} ms  peak RSS {:>7.1} MiB  ({:.1} MB text in, top {count})",
        ms(mmin),
        ms(mmed),
        ms(min_cpu(&m)),
        mrss as f64 / 1024.0,
        mb(memhawk_input)
    );
    println!(
        "RATIO {name} vs MemHawk's tree program: {:.2}x faster (min), {:.2}x (median), {:.2}x less CPU (min), peak RSS {:.2}x smaller",
        mmin.as_secs_f64() / min.as_secs_f64(),
        mmed.as_secs_f64() / med.as_secs_f64(),
        min_cpu(&m).as_secs_f64() / min_cpu(&a).as_secs_f64(),
        mrss as f64 / rss as f64
    );
    // Both choose nodes heaviest first among the children of chosen ones;
    // ours counts its `[other]` rows within the cap (MemHawk's program has
    // none), so it keeps fewer real nodes, and past the first node that
    // does not fit it may still take a later leaf.
    let ours = our_nodes(&a[0].output);
    let theirs = memhawk_nodes(&m[0].output);
    assert!(theirs.len() <= count, "MemHawk kept {} nodes", theirs.len());
    let mut common = 0;
    for (p, v) in &ours {
        if let Some(t) = theirs.get(p) {
            assert_eq!(v, t, "{name}: node {p:?} differs from MemHawk's");
            common += 1;
        }
    }
    let only_ours = ours.len() - common;
    println!(
        "  {} real nodes ours (plus `[other]` rows), {} MemHawk's: {common} in both with equal total and self, {only_ours} only ours",
        ours.len(),
        theirs.len()
    );
    assert!(
        only_ours * 100 <= ours.len(),
        "{name}: {only_ours} of our {} nodes are not in MemHawk's top {count}",
        ours.len()
    );
}

/// How a case's output is compared with the baseline's.
#[derive(Clone, Copy, PartialEq)]
enum Same {
    /// Byte-identical.
    Bytes,
    /// The same `tree-table` rows once `[other]` reads `other`.
    TreeRows,
}

fn stats(runs: &[Run]) -> (Duration, Duration, i64) {
    let mut t: Vec<Duration> = runs.iter().map(|r| r.wall).collect();
    t.sort();
    let rss = runs.iter().map(|r| r.max_rss_kib).max().unwrap_or(0);
    (t[0], t[t.len() / 2], rss)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs one case on both binaries, alternating, and prints the comparison.
fn case(
    name: &str,
    args: &[&str],
    input: &Path,
    new: &Path,
    baseline: Option<&Path>,
    runs: usize,
    same: Same,
) {
    let mb = std::fs::metadata(input).unwrap().len() as f64 / 1e6;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        a.push(run(new, args, input));
        if let Some(bl) = baseline {
            b.push(run(bl, args, input));
        }
    }
    let (min, med, rss) = stats(&a);
    println!(
        "{name:<34} new      min {:>8.1} ms  median {:>8.1} ms  CPU min {:>8.1} ms  peak RSS {:>7.1} MiB  {:>6.0} MB/s  ({mb:.1} MB in, {} bytes out)",
        ms(min),
        ms(med),
        ms(min_cpu(&a)),
        rss as f64 / 1024.0,
        mb / min.as_secs_f64(),
        a[0].output_len
    );
    if !b.is_empty() {
        let (bmin, bmed, brss) = stats(&b);
        println!(
            "{name:<34} baseline min {:>8.1} ms  median {:>8.1} ms  CPU min {:>8.1} ms  peak RSS {:>7.1} MiB  {:>6.0} MB/s",
            ms(bmin),
            ms(bmed),
            ms(min_cpu(&b)),
            brss as f64 / 1024.0,
            mb / bmin.as_secs_f64()
        );
        println!(
            "RATIO {name}: {:.2}x faster (min), {:.2}x (median), {:.2}x less CPU (min), peak RSS {:.2}x smaller",
            bmin.as_secs_f64() / min.as_secs_f64(),
            bmed.as_secs_f64() / med.as_secs_f64(),
            min_cpu(&b).as_secs_f64() / min_cpu(&a).as_secs_f64(),
            brss as f64 / rss as f64
        );
        match same {
            Same::Bytes => {
                assert!(
                    a[0].digest == b[0].digest && a[0].output_len == b[0].output_len,
                    "{name}: output differs from the baseline's"
                );
                println!("  output byte-identical to the baseline's");
            }
            Same::TreeRows => {
                assert!(
                    a[0].output_len <= 1 << 20,
                    "{name}: output too big to compare rows"
                );
                let rows = tree_rows(&a[0].output);
                assert!(
                    rows == tree_rows(&b[0].output),
                    "{name}: rows differ from the baseline's"
                );
                println!(
                    "  the same {} rows as the baseline (`[other]` read as `other`)",
                    rows.len()
                );
            }
        }
    }
}

fn main() {
    let runs: usize = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let cases = std::env::var("BENCH_CASES")
        .unwrap_or_else(|_| "topn,synthetic20k,distinct1m,diff1m".into());
    let want = |c: &str| cases.split(',').any(|x| x == c);
    let new = PathBuf::from(env!("CARGO_BIN_EXE_flamehouse-udf"));
    let baseline = PathBuf::from(
        std::env::var("BASELINE_UDF").unwrap_or_else(|_| "/work/baseline/flamehouse-udf".into()),
    );
    let baseline = baseline.exists().then_some(baseline);
    match &baseline {
        Some(b) => println!("baseline: {}", b.display()),
        None => println!("no baseline binary: new binary only"),
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("udf-bench");
    std::fs::create_dir_all(&dir).unwrap();
    let bl = baseline.as_deref();

    if want("topn") {
        let p = dir.join("topn-200k.rowbinary");
        let t = Instant::now();
        let paths = call_tree_paths(200_000, 1);
        let frames: usize = paths.iter().map(|(s, _)| s.len()).sum();
        write_table_rows(&p, &paths);
        println!(
            "topn input: {} paths, {frames} frames (generated in {:.1?})",
            paths.len(),
            t.elapsed()
        );
        let args = ["tree-table", "--format", "RowBinary", "--max-nodes", "1000"];
        if let Some(mh) = std::env::var_os("MEMHAWK_TREE").map(PathBuf::from) {
            let lines = dir.join("topn-200k.memhawk.txt");
            write_memhawk_lines(&lines, &paths);
            memhawk_case("topn top-1000", &args, &p, &new, &mh, &lines, 1000, runs);
        }
        case(
            "topn tree-table --max-nodes 1000",
            &args,
            &p,
            &new,
            bl,
            runs,
            Same::TreeRows,
        );
        let args = ["tree-table", "--format", "RowBinary"];
        case(
            "topn tree-table (full tree)",
            &args,
            &p,
            &new,
            bl,
            runs,
            Same::Bytes,
        );
    }
    if want("synthetic20k") {
        // The flame-graph benchmark's UDF input: 20,000 distinct stacks.
        let a = synthetic_stacks(20_000, 1);
        let p = dir.join("synthetic-20k.rowbinary");
        write_udf_row(&p, &[&a], Names::Synthetic);
        let args = ["tree", "--format", "RowBinary"];
        case(
            "stackTree 20k synthetic",
            &args,
            &p,
            &new,
            bl,
            runs,
            Same::Bytes,
        );
    }
    if want("distinct1m") || want("diff1m") {
        let t = Instant::now();
        let a = synthetic_stacks(1_000_000, 2);
        println!(
            "1M input: {} distinct synthetic stacks (generated in {:.1?})",
            a.len(),
            t.elapsed()
        );
        if want("distinct1m") {
            let p = dir.join("distinct-1m.rowbinary");
            write_udf_row(&p, &[&a], Names::Synthetic);
            let args = ["tree", "--format", "RowBinary"];
            case(
                "stackTree 1M distinct",
                &args,
                &p,
                &new,
                bl,
                runs,
                Same::Bytes,
            );
        }
        if want("diff1m") {
            // The comparison: every other baseline stack, plus as many new
            // ones under another root frame (so none equals a shared one).
            let fresh = synthetic_stacks(a.len() / 2, 3);
            let b: Vec<(Vec<u32>, i64)> = a
                .iter()
                .step_by(2)
                .cloned()
                .chain(fresh.into_iter().map(|(mut s, v)| {
                    s[0] = 6001;
                    (s, v)
                }))
                .collect();
            let p = dir.join("diff-1m.rowbinary");
            write_udf_row(&p, &[&a, &b], Names::Synthetic);
            let args = ["diff", "--format", "RowBinary"];
            case("stackDiff 1M vs 1M", &args, &p, &new, bl, runs, Same::Bytes);
        }
    }
}
