//! `flamehouse load` of pprof files and the `flamehouse profile` commands,
//! end to end as a user runs them (each command its own process on its own
//! data directory), on the committed Go profiles of `fixtures/continuous`
//! and compared with the `go tool pprof` goldens next to them (parsed here)
//! or with `go tool pprof` run live (the export).

use flamehouse_fixtures::testing::temp_path;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> PathBuf {
    flamehouse_tests::cli_binary()
}

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/continuous/pprof")
}

fn golden(name: &str) -> String {
    std::fs::read_to_string(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `flamehouse ARGS --data DATA`, whatever its status.
fn fh_out(data: &Path, args: &[&str]) -> Output {
    keep_fixtures(data, args);
    Command::new(bin())
        .args(args)
        .arg("--data")
        .arg(data)
        .output()
        .expect("flamehouse runs")
}

/// The Go fixtures keep the times they were recorded at (2026-12-01), and
/// `load` does not store a profile older than the retention: before the
/// first command on a data directory (unless that is an `init`, which a test
/// of the retention runs itself), `init --retention 36500`, so these tests
/// do not expire with the calendar.
fn keep_fixtures(data: &Path, args: &[&str]) {
    static SEEN: std::sync::Mutex<std::collections::BTreeSet<std::path::PathBuf>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    if !SEEN.lock().unwrap().insert(data.to_path_buf()) || args.first() == Some(&"init") {
        return;
    }
    let out = Command::new(bin())
        .args(["init", "--retention", "36500", "--data"])
        .arg(data)
        .output()
        .expect("flamehouse runs");
    assert!(
        out.status.success(),
        "flamehouse init --retention 36500 failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `flamehouse ARGS --data DATA`, which must succeed; its stdout.
fn fh(data: &Path, args: &[&str]) -> String {
    let out = fh_out(data, args);
    assert!(
        out.status.success(),
        "flamehouse {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The stderr of a command that must fail with exit `code` in one line.
fn fails_in_one_line(out: &Output, code: i32) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    err
}

fn sql(data: &Path, query: &str) -> String {
    fh(data, &["sql", query]).trim().to_string()
}

/// An exact value of a golden (`590000000ns`, `1234B`, `579`).
fn value(s: &str) -> i64 {
    let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    digits
        .parse()
        .unwrap_or_else(|_| panic!("not an exact value: {s:?}"))
}

/// pprof marks inlined functions in its reports; the name is the rest.
fn fname(s: &str) -> String {
    s.trim()
        .trim_end_matches(" (partial-inline)")
        .trim_end_matches(" (inline)")
        .to_string()
}

type Top = BTreeMap<String, (i64, i64)>;

/// `go tool pprof -top`: function -> (flat, cum), and the total.
fn parse_top(text: &str) -> (Top, i64) {
    let mut out = BTreeMap::new();
    let mut total = None;
    let mut rows = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Showing nodes accounting for ") {
            let of = rest.rsplit(" of ").next().unwrap();
            total = Some(value(of.trim_end_matches(" total").trim()));
            continue;
        }
        if line.trim_start().starts_with("flat ") {
            rows = true;
            continue;
        }
        if !rows || line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        out.insert(fname(&f[5..].join(" ")), (value(f[0]), value(f[3])));
    }
    (out, total.expect("a total line"))
}

/// `flamehouse profile top`: function -> (self, total), and the sum of
/// self (the selection's total).
fn parse_cli_top(text: &str) -> (Top, i64) {
    let mut out = BTreeMap::new();
    let mut sum = 0;
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 5, "{line:?}");
        let (s, t): (i64, i64) = (f[0].parse().unwrap(), f[2].parse().unwrap());
        sum += s;
        out.insert(f[4].to_string(), (s, t));
    }
    (out, sum)
}

/// Folded lines `a;b;c N [M]` into (frames, values).
fn parse_folded(text: &str) -> Vec<(Vec<String>, Vec<i64>)> {
    text.lines()
        .map(|l| {
            let mut parts: Vec<&str> = l.rsplitn(3, ' ').collect();
            parts.reverse();
            // `stack v` or `stack a b`.
            let (stack, vals) = if parts.len() == 3 && parts[1].parse::<i64>().is_ok() {
                (parts[0], vec![parts[1], parts[2]])
            } else {
                let (s, v) = l.rsplit_once(' ').unwrap();
                (s, vec![v])
            };
            (
                stack.split(';').map(str::to_string).collect(),
                vals.iter().map(|v| v.parse().unwrap()).collect(),
            )
        })
        .collect()
}

/// pprof's flat/cum of stacks: flat on the leaf, cum once per function
/// per stack.
fn top_of(stacks: &[(Vec<String>, i64)]) -> Top {
    let mut out: Top = BTreeMap::new();
    for (s, v) in stacks {
        if let Some(leaf) = s.last() {
            out.entry(leaf.clone()).or_default().0 += v;
        }
        let mut seen = std::collections::HashSet::new();
        for f in s {
            if seen.insert(f) {
                out.entry(f.clone()).or_default().1 += v;
            }
        }
    }
    out.retain(|_, v| *v != (0, 0));
    out
}

/// `profile diff` of range `a` (baseline) against range `b` with `extra`
/// flags, as pprof's `-diff_base` top: flat/cum of comparison - baseline.
fn diff_top(data: &Path, ty: &str, a: (&str, &str), b: (&str, &str), extra: &[&str]) -> Top {
    let out = data.join("diff.folded");
    let out_s = out.display().to_string();
    let mut args = vec![
        "profile", "diff", "--type", ty, "--from", a.0, "--to", a.1, "--from-b", b.0, "--to-b",
        b.1, "--out", &out_s,
    ];
    args.extend_from_slice(extra);
    fh(data, &args);
    let stacks: Vec<(Vec<String>, i64)> = parse_folded(&std::fs::read_to_string(&out).unwrap())
        .into_iter()
        .map(|(s, v)| (s, v[1] - v[0]))
        .collect();
    top_of(&stacks)
}

/// The profile's stored time, as `YYYY-MM-DD hh:mm:ss.fff`, and the next
/// millisecond: a range holding just it.
fn range_of(data: &Path, file: &str) -> (String, String) {
    let ts = sql(
        data,
        &format!(
            "SELECT toString(min(ts)), toString(min(ts) + toIntervalMillisecond(1)) \
             FROM flamehouse.cp_profiles WHERE endsWith(source, '/{file}')"
        ),
    );
    let (a, b) = ts.split_once('\t').expect("a stored profile");
    (a.to_string(), b.to_string())
}

/// Every sample type of the Go CPU, heap, mutex and block profiles: `profile
/// top` equals `go tool pprof -top` (flat = self, cum = total, same total),
/// on the raw samples (the profile's second) and on the per-minute rollup
/// (a range of days).
#[test]
fn load_detects_pprof_and_top_equals_go_tool_pprof() {
    let data = temp_path("cpcli-top");
    let files = ["cpu.pb.gz", "heap.pb.gz", "mutex.pb.gz", "block.pb.gz"];
    let paths: Vec<String> = files
        .iter()
        .map(|f| dir().join(f).display().to_string())
        .collect();
    let mut args = vec!["load"];
    args.extend(paths.iter().map(String::as_str));
    let out = fh(&data, &args);
    // One line per file, then the load's closing line.
    assert_eq!(out.lines().count(), 5, "{out}");
    assert!(
        out.lines()
            .last()
            .unwrap()
            .starts_with("continuous: 4 files, 4 profiles"),
        "{out}"
    );
    assert!(
        out.contains("types samples:count, cpu:nanoseconds"),
        "{out}"
    );
    // A series is one type's label set: the load's count is the sum of
    // `profile list`'s per type (cp_profiles.series_count), said so.
    let cpu_line = out.lines().find(|l| l.contains("cpu.pb.gz")).unwrap();
    let per_type = sql(
        &data,
        "SELECT sum(series_count) FROM flamehouse.cp_profiles WHERE endsWith(source, '/cpu.pb.gz')",
    );
    assert!(
        cpu_line.contains(&format!("| {} series of 2 types |", per_type.trim())),
        "{cpu_line} / {per_type}"
    );
    let cases = [
        (
            "cpu.pb.gz",
            "cpu",
            &["samples:count", "cpu:nanoseconds"][..],
        ),
        (
            "heap.pb.gz",
            "heap",
            &[
                "alloc_objects:count",
                "alloc_space:bytes",
                "inuse_objects:count",
                "inuse_space:bytes",
            ][..],
        ),
        (
            "mutex.pb.gz",
            "mutex",
            &["contentions:count", "delay:nanoseconds"][..],
        ),
        (
            "block.pb.gz",
            "block",
            &["contentions:count", "delay:nanoseconds"][..],
        ),
    ];
    for (file, stem, types) in cases {
        let (from, to) = range_of(&data, file);
        for ty in types {
            let name = ty.split(':').next().unwrap();
            let (want, want_total) = parse_top(&golden(&format!("{stem}.top.{name}.txt")));
            // The profile's own second: only this file's samples of the type.
            let got = fh(
                &data,
                &["profile", "top", "--type", ty, "--from", &from, "--to", &to],
            );
            let (got, total) = parse_cli_top(&got);
            assert_eq!(got, want, "{file} {ty}");
            assert_eq!(total, want_total, "{file} {ty}");
        }
    }
    // A week around the profiles reads the rollup: the same answer.
    let (from, _) = range_of(&data, "cpu.pb.gz");
    let day = &from[..10];
    let got = fh(
        &data,
        &[
            "profile",
            "top",
            "--type",
            "cpu:nanoseconds",
            "--from",
            &format!("{day} 00:00:00"),
            "--to",
            "2100-01-01 00:00:00",
        ],
    );
    let (want, _) = parse_top(&golden("cpu.top.cpu.txt"));
    assert_eq!(parse_cli_top(&got).0, want);
}

/// A flame graph's folded stacks, a selector, a function regex, a diff of
/// two files by range, a sandwich and the profile list, each against its
/// `go tool pprof` golden; service and user labels land on every series.
#[test]
fn profile_queries_equal_go_tool_pprof() {
    let data = temp_path("cpcli-q");
    // cpu2 an hour later than cpu: two ranges to diff.
    fh(
        &data,
        &[
            "load",
            &dir().join("cpu.pb.gz").display().to_string(),
            "--service",
            "api",
            "--label",
            "env=prod",
        ],
    );
    let (from, to) = range_of(&data, "cpu.pb.gz");
    fh(
        &data,
        &[
            "load",
            &dir().join("cpu2.pb.gz").display().to_string(),
            "--service",
            "api",
            "--label",
            "env=canary",
        ],
    );
    let (from2, to2) = range_of(&data, "cpu2.pb.gz");
    let ty = "cpu:nanoseconds";
    let (want_cpu, _) = parse_top(&golden("cpu.top.cpu.txt"));

    // Flame graph (folded): its stacks give pprof's flat and cum.
    let out = data.join("cpu.folded");
    let o = out.display().to_string();
    let sel = r#"{service="api", env="prod"}"#;
    fh(
        &data,
        &[
            "profile",
            "flame",
            "--type",
            ty,
            "--from",
            &from,
            "--to",
            &to2,
            "--selector",
            sel,
            "--out",
            &o,
        ],
    );
    let stacks: Vec<(Vec<String>, i64)> = parse_folded(&std::fs::read_to_string(&out).unwrap())
        .into_iter()
        .map(|(s, v)| (s, v[0]))
        .collect();
    assert_eq!(top_of(&stacks), want_cpu);
    // SVG of the same.
    let svg = data.join("cpu.svg");
    fh(
        &data,
        &[
            "profile",
            "flame",
            "--type",
            ty,
            "--from",
            &from,
            "--to",
            &to,
            "--out",
            &svg.display().to_string(),
        ],
    );
    assert!(std::fs::read_to_string(&svg)
        .unwrap()
        .contains("main.hashLoop"));

    // A selector on a pprof sample label = -tagfocus.
    let got = fh(
        &data,
        &[
            "profile",
            "top",
            "--type",
            ty,
            "--from",
            &from,
            "--to",
            &to,
            "--selector",
            r#"{handler="a"}"#,
        ],
    );
    let (want, _) = parse_top(&golden("cpu.tagfocus.handler_a.top.txt"));
    assert_eq!(parse_cli_top(&got).0, want);
    // A selector matching nothing (wrong env): no rows.
    let got = fh(
        &data,
        &[
            "profile",
            "top",
            "--type",
            ty,
            "--from",
            &from,
            "--to",
            &to,
            "--selector",
            r#"{env="canary"}"#,
        ],
    );
    assert_eq!(got.lines().count(), 1, "{got}");

    // A function regex keeps global shares.
    let got = fh(
        &data,
        &[
            "profile",
            "top",
            "--type",
            ty,
            "--from",
            &from,
            "--to",
            &to,
            "--function-regex",
            "^main\\.fib$",
        ],
    );
    let rows: Vec<&str> = got.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{got}");
    assert_eq!(rows[0], "40000000\t6.78%\t180000000\t30.51%\tmain.fib");

    // Diff: cpu (baseline, env=prod) against cpu2 (env=canary) over both
    // ranges = -diff_base cpu cpu2.
    let out = data.join("diff.folded");
    let (want, _) = parse_top(&golden("cpu2.diff_base_cpu.top.txt"));
    assert_eq!(diff_top(&data, ty, (&from, &to), (&from2, &to2), &[]), want);
    // The same diff by selectors over one range.
    fh(
        &data,
        &[
            "profile",
            "diff",
            "--type",
            ty,
            "--from",
            &from,
            "--to",
            &to2,
            "--selector",
            r#"{env="prod"}"#,
            "--selector-b",
            r#"{env="canary"}"#,
            "--out",
            &out.display().to_string(),
        ],
    );
    let by_sel: Vec<(Vec<String>, i64)> = parse_folded(&std::fs::read_to_string(&out).unwrap())
        .into_iter()
        .map(|(s, v)| (s, v[1] - v[0]))
        .collect();
    assert_eq!(top_of(&by_sel), want);
    // Normalized: the baseline scaled to the comparison's total, the
    // comparison as it is.
    let norm = data.join("norm.folded");
    fh(
        &data,
        &[
            "profile",
            "diff",
            "--type",
            ty,
            "--from",
            &from,
            "--to",
            &to2,
            "--selector",
            r#"{env="prod"}"#,
            "--selector-b",
            r#"{env="canary"}"#,
            "--normalize",
            "--out",
            &norm.display().to_string(),
        ],
    );
    let plain = parse_folded(&std::fs::read_to_string(&out).unwrap());
    let scaled = parse_folded(&std::fs::read_to_string(&norm).unwrap());
    let (sa, sb): (i64, i64) = (
        plain.iter().map(|l| l.1[0]).sum(),
        plain.iter().map(|l| l.1[1]).sum(),
    );
    assert_ne!(sa, sb, "the two profiles' totals differ");
    assert_eq!(plain.len(), scaled.len());
    for (p, s) in plain.iter().zip(&scaled) {
        assert_eq!(p.0, s.0);
        assert_eq!(p.1[1], s.1[1]);
        let want = p.1[0] as f64 * sb as f64 / sa as f64;
        assert!((s.1[0] as f64 - want).abs() <= 1.0, "{p:?} {s:?}");
    }

    // Sandwich of main.fib = -peek: its callers and callees with values.
    let (up, down) = (data.join("up.folded"), data.join("down.folded"));
    let sandwich = |callers: &str, callees: &str| {
        fh_out(
            &data,
            &[
                "profile",
                "sandwich",
                "--type",
                ty,
                "--from",
                &from,
                "--to",
                &to,
                "--function",
                "main.fib",
                "--callers",
                callers,
                "--callees",
                callees,
            ],
        )
    };
    let o = sandwich(&up.display().to_string(), &down.display().to_string());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let level1 = |p: &Path| -> BTreeMap<String, i64> {
        let mut m = BTreeMap::new();
        for (s, v) in parse_folded(&std::fs::read_to_string(p).unwrap()) {
            assert_eq!(s[0], "main.fib");
            if let Some(f) = s.get(1) {
                *m.entry(f.clone()).or_default() += v[0];
            }
        }
        m
    };
    let (callers, callees) = parse_peek(&golden("cpu.peek.fib.txt"), "main.fib");
    assert_eq!(level1(&up), callers);
    assert_eq!(level1(&down), callees);
    // Both trees to one path: refused before anything is written (the
    // callees replaced the callers' file; to `-` they followed unmarked).
    for same in [data.join("same.folded").display().to_string(), "-".into()] {
        let o = sandwich(&same, &same);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && o.stdout.is_empty(), "{same}: {err}");
        assert!(
            err.lines().count() == 1 && err.contains("--callers and --callees are both"),
            "{same}: {err}"
        );
        assert!(!data.join("same.folded").exists());
    }

    // The list, and opening one profile: its flame graph is the file's.
    let list = fh(
        &data,
        &[
            "profile", "list", "--type", ty, "--from", &from, "--to", &to2,
        ],
    );
    let rows: Vec<Vec<&str>> = list
        .lines()
        .skip(1)
        .map(|l| l.split('\t').collect())
        .collect();
    assert_eq!(rows.len(), 2, "{list}");
    let first = rows.iter().find(|r| r[8].ends_with("/cpu.pb.gz")).unwrap();
    assert_eq!(first[1], "api");
    assert_eq!(first[4], "590000000");
    // sample_rows: the profile's rows of the type in cp_samples (it was
    // pprof's sample records, a text format's stacks).
    assert_eq!(
        first[5],
        sql(
            &data,
            &format!(
                "SELECT count() FROM flamehouse.cp_samples WHERE lower(hex(profile_id)) = '{}' AND profile_type = '{ty}'",
                first[0]
            )
        )
        .trim()
    );
    assert_ne!(first[5], "0");
    assert!(first[7].contains("'env':'prod'"), "{list}");
    let opened = data.join("open.folded");
    fh(
        &data,
        &[
            "profile",
            "open",
            "--id",
            first[0],
            "--type",
            ty,
            "--out",
            &opened.display().to_string(),
        ],
    );
    let stacks: Vec<(Vec<String>, i64)> = parse_folded(&std::fs::read_to_string(&opened).unwrap())
        .into_iter()
        .map(|(s, v)| (s, v[0]))
        .collect();
    assert_eq!(top_of(&stacks), want_cpu);
    // An unknown id, or a type the profile does not have, is an error (it
    // wrote an empty graph and exited 0), the file not written.
    let open_err = |id: &str, ty: &str| {
        let o = data.join("open-bad.folded");
        let out = fh_out(
            &data,
            &[
                "profile",
                "open",
                "--id",
                id,
                "--type",
                ty,
                "--out",
                &o.display().to_string(),
            ],
        );
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        assert!(!o.exists());
        String::from_utf8_lossy(&out.stderr).trim().to_string()
    };
    let e = open_err("deadbeef", ty);
    assert!(e.contains("no profile 00000000deadbeef is stored"), "{e}");
    let e = open_err(first[0], "alloc_space:bytes");
    assert!(
        e.contains("has no type alloc_space:bytes: its types are") && e.contains(ty),
        "{e}"
    );

    // Labels with their cardinality.
    let labels = fh(
        &data,
        &[
            "profile", "labels", "--type", ty, "--from", &from, "--to", &to2,
        ],
    );
    assert!(
        labels.lines().any(|l| l.starts_with("env\tprod\t")),
        "{labels}"
    );
    assert!(
        labels.lines().any(|l| l.starts_with("service\tapi\t")),
        "{labels}"
    );
}

/// `-peek RE`: the callers (lines above the function's) and callees
/// (below) of `function`, each with its value.
fn parse_peek(text: &str, function: &str) -> (BTreeMap<String, i64>, BTreeMap<String, i64>) {
    let (mut callers, mut callees) = (BTreeMap::new(), BTreeMap::new());
    let mut after = false;
    for line in text.lines() {
        let Some((left, name)) = line.split_once('|') else {
            continue;
        };
        let name = fname(name);
        if name == function
            && !left.trim_start().starts_with("flat")
            && left.split_whitespace().count() > 2
        {
            after = true;
            continue;
        }
        let f: Vec<&str> = left.split_whitespace().collect();
        if f.len() != 2 || name.is_empty() {
            continue;
        }
        let v = value(f[0]);
        if after {
            callees.insert(name, v);
        } else {
            callers.insert(name, v);
        }
    }
    (callers, callees)
}

/// `go tool pprof FLAGS FILE`'s stdout (`-symbolize=none`, nothing hidden).
fn pprof(flags: &[&str], file: &Path) -> String {
    let o = Command::new("go")
        .args(["tool", "pprof", "-symbolize=none"])
        .args(flags)
        .args(["-nodefraction=0", "-edgefraction=0", "-nodecount=1000000"])
        .arg(file)
        .output()
        .expect("go tool pprof runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The unit flag that makes pprof print a type's values exactly.
fn unit_flag(ty: &str) -> &'static str {
    match ty.rsplit(':').next() {
        Some("nanoseconds") => "-unit=ns",
        Some("bytes") => "-unit=B",
        _ => "-unit=count",
    }
}

/// `-traces`: each stack (function names root first, pprof's inline marks
/// dropped) -> its summed value; labels and empty stacks left out (the
/// export merges labels away; pprof skips empty stacks).
fn parse_traces(text: &str) -> BTreeMap<Vec<String>, i64> {
    let mut out = BTreeMap::new();
    for block in text.split("-----------+-------------------------------------------------------") {
        let mut val = None;
        let mut frames = Vec::new();
        for line in block.lines() {
            let t = line.trim();
            if t.is_empty() {
                continue;
            }
            match val {
                None => {
                    let mut w = t.split_whitespace();
                    let first = w.next().unwrap_or_default();
                    let numeric =
                        first.starts_with(|c: char| c.is_ascii_digit()) && !first.ends_with(':');
                    if numeric {
                        val = Some(value(first));
                        frames.push(fname(&w.collect::<Vec<_>>().join(" ")));
                    }
                }
                Some(_) => frames.push(fname(t)),
            }
        }
        if let Some(v) = val {
            frames.reverse();
            *out.entry(frames).or_insert(0) += v;
        }
    }
    out
}

/// `profile export` of a whole Go profile writes every one of its sample
/// types: `go tool pprof -top` and `-traces` of the export equal those of
/// the input for every sample type (cpu: samples and cpu; heap: all four),
/// with no `--type` (every type) and with one; the period and period type
/// are the input's.
#[test]
fn export_writes_every_sample_type_as_go_tool_pprof_reads_the_input() {
    let go = Command::new("go").arg("version").output();
    assert!(
        go.is_ok_and(|o| o.status.success()),
        "this test needs Go's `go tool pprof`: run scripts/setup-tools.sh"
    );
    for (file, types) in [
        ("cpu.pb.gz", &["samples:count", "cpu:nanoseconds"][..]),
        (
            "heap.pb.gz",
            &[
                "alloc_objects:count",
                "alloc_space:bytes",
                "inuse_objects:count",
                "inuse_space:bytes",
            ][..],
        ),
    ] {
        let data = temp_path("cpcli-export");
        let input = dir().join(file);
        fh(&data, &["load", &input.display().to_string()]);
        let (from, to) = range_of(&data, file);
        let out = data.join("x.pb.gz");
        let o = out.display().to_string();
        let said = fh(
            &data,
            &[
                "profile", "export", "--from", &from, "--to", &to, "--out", &o,
            ],
        );
        for ty in types {
            assert!(said.contains(ty), "{said}");
        }
        for ty in types {
            let index = format!("-sample_index={}", ty.split(':').next().unwrap());
            let flags = [unit_flag(ty), index.as_str()];
            let top = |f: &Path| parse_top(&pprof(&[&flags[..], &["-top"]].concat(), f));
            let (got, got_total) = top(&out);
            let (want, want_total) = top(&input);
            assert_eq!(got, want, "{file} {ty}");
            assert_eq!(got_total, want_total, "{file} {ty}");
            let traces = |f: &Path| parse_traces(&pprof(&[&flags[..], &["-traces"]].concat(), f));
            assert_eq!(traces(&out), traces(&input), "{file} {ty}");
            // The sample labels are kept: `-tagfocus` selects the same.
            let focus = if file.starts_with("cpu") {
                "-tagfocus=handler=a"
            } else {
                "-tagfocus=bytes=64B:512B"
            };
            let (got, got_total) =
                parse_top(&pprof(&[&flags[..], &[focus, "-top"]].concat(), &out));
            let (want, want_total) =
                parse_top(&pprof(&[&flags[..], &[focus, "-top"]].concat(), &input));
            assert!(!want.is_empty(), "{file} {ty} {focus}");
            assert_eq!(got, want, "{file} {ty} {focus}");
            assert_eq!(got_total, want_total, "{file} {ty} {focus}");
        }
        // `-tags` of the export: the input's, and the `service` label the
        // load gave every series (none given: the default).
        let tags = |f: &Path| {
            let t = pprof(&["-tags"], f);
            let blocks: Vec<String> = t
                .split("\n\n")
                .map(|b| b.trim_matches('\n').to_string())
                .filter(|b| !b.is_empty())
                .collect();
            blocks
        };
        let want = tags(&input);
        let got = tags(&out);
        let service: Vec<&String> = got.iter().filter(|b| b.starts_with(" service:")).collect();
        assert_eq!(service.len(), 1, "{got:?}");
        let default = format!(
            "(  100%): {}",
            flamehouse::ingest::continuous::DEFAULT_SERVICE
        );
        assert!(service[0].ends_with(&default), "{got:?}");
        let rest: Vec<&String> = got.iter().filter(|b| !b.starts_with(" service:")).collect();
        assert_eq!(rest, want.iter().collect::<Vec<_>>(), "{file}");
        let raw = pprof(&["-raw"], &out);
        let want_raw = golden(&format!("{}.raw.txt", file.split('.').next().unwrap()));
        let period = |r: &str| {
            r.lines()
                .find(|l| l.starts_with("PeriodType: "))
                .map(str::to_string)
        };
        assert_eq!(period(&raw), period(&want_raw), "{raw}");
    }
    // One type asked for: just it.
    let data = temp_path("cpcli-export1");
    let input = dir().join("cpu.pb.gz");
    fh(&data, &["load", &input.display().to_string()]);
    let (from, to) = range_of(&data, "cpu.pb.gz");
    let out = data.join("one.pb.gz");
    fh(
        &data,
        &[
            "profile",
            "export",
            "--type",
            "cpu:nanoseconds",
            "--from",
            &from,
            "--to",
            &to,
            "--out",
            &out.display().to_string(),
        ],
    );
    let raw = pprof(&["-raw"], &out);
    // `-raw` lists the sample types on the line after `Samples:`.
    let types = raw
        .lines()
        .skip_while(|l| *l != "Samples:")
        .nth(1)
        .unwrap_or_default();
    assert_eq!(types.trim(), "cpu/nanoseconds", "{raw}");
    assert_eq!(
        parse_top(&pprof(&["-unit=ns", "-top"], &out)).0,
        parse_top(&golden("cpu.top.cpu.txt")).0
    );
    // Nothing selected: an error naming the stored types, no file.
    let none = data.join("none.pb.gz");
    let r = fh_out(
        &data,
        &[
            "profile",
            "export",
            "--type",
            "cpu:ns",
            "--from",
            &from,
            "--to",
            &to,
            "--out",
            &none.display().to_string(),
        ],
    );
    assert_eq!(r.status.code(), Some(1));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("cpu:nanoseconds") && err.lines().count() == 1,
        "{err}"
    );
    assert!(!none.exists());
}

/// Loaded at `--granularity line`, the export carries each frame's file
/// and line: `go tool pprof -lines -top` of the export equals the input's
/// (every line, flat and cum), and `-lines -traces` names the same files
/// and lines.
#[test]
fn export_keeps_files_and_lines() {
    let go = Command::new("go").arg("version").output();
    assert!(
        go.is_ok_and(|o| o.status.success()),
        "this test needs Go's `go tool pprof`: run scripts/setup-tools.sh"
    );
    let data = temp_path("cpcli-export-lines");
    let input = dir().join("cpu.pb.gz");
    fh(
        &data,
        &[
            "load",
            &input.display().to_string(),
            "--granularity",
            "line",
        ],
    );
    let (from, to) = range_of(&data, "cpu.pb.gz");
    let out = data.join("lines.pb.gz");
    fh(
        &data,
        &[
            "profile",
            "export",
            "--from",
            &from,
            "--to",
            &to,
            "--out",
            &out.display().to_string(),
        ],
    );
    let flags = ["-unit=ns", "-sample_index=cpu", "-lines"];
    let top = |f: &Path| parse_top(&pprof(&[&flags[..], &["-top"]].concat(), f));
    let (got, got_total) = top(&out);
    let (want, want_total) = top(&input);
    assert!(
        want.keys().any(|k| k.contains("main.go:")),
        "the input has lines: {want:?}"
    );
    assert_eq!(got, want);
    assert_eq!(got_total, want_total);
    let traces = |f: &Path| parse_traces(&pprof(&[&flags[..], &["-traces"]].concat(), f));
    assert_eq!(traces(&out), traces(&input));
}

/// A file loaded at the default granularity and again at `--granularity
/// line` is two profiles (the second was found stored and its lines never
/// came); each loaded again is stored once.
#[test]
fn another_granularity_is_another_profile() {
    let data = temp_path("cpcli-granularity");
    let input = dir().join("cpu.pb.gz").display().to_string();
    let line = ["load", &input, "--granularity", "line"];
    for (args, stored) in [
        (&["load", &input][..], "0 already stored"),
        (&line[..], "0 already stored"),
        (&line[..], "1 already stored"),
    ] {
        let out = fh(&data, args);
        assert!(
            out.contains(&format!("1 profile ({stored}")),
            "{args:?}: {out}"
        );
    }
    assert_eq!(
        sql(
            &data,
            "SELECT uniqExact(profile_id) FROM flamehouse.cp_profiles"
        ),
        "2"
    );
    let lines = sql(
        &data,
        "SELECT count() FROM flamehouse.frames WHERE position(label, 'main.go:') > 0",
    );
    assert_ne!(lines, "0", "frames with their lines");
}

/// The export's time, duration and period are those of the profiles the
/// selection read: the same CPU profile stored for two services, an hour
/// apart, exported for the later one, says the later time (it said the
/// earlier one: every profile of the type in the range was asked), over an
/// hour and over days. `profile labels` of a range holding one of them
/// lists that one's service only.
#[test]
fn export_and_labels_read_the_selected_profiles_only() {
    let go = Command::new("go").arg("version").output();
    assert!(
        go.is_ok_and(|o| o.status.success()),
        "this test needs Go's `go tool pprof`: run scripts/setup-tools.sh"
    );
    let data = temp_path("cpcli-export-time");
    let input = dir().join("cpu.pb.gz").display().to_string();
    for (service, time) in [
        ("early", "2026-11-30T10:00:00Z"),
        ("late", "2026-11-30T11:00:00Z"),
    ] {
        fh(
            &data,
            &["load", &input, "--service", service, "--time", time],
        );
    }
    let raw = |selector: &str| {
        let out = data.join(format!("{}.pb.gz", selector.len()));
        fh(
            &data,
            &[
                "profile",
                "export",
                "--from",
                "2026-11-30 09:00:00",
                "--to",
                "2026-11-30 13:00:00",
                "--selector",
                selector,
                "--out",
                &out.display().to_string(),
            ],
        );
        pprof(&["-raw"], &out)
    };
    let time = |raw: &str| {
        raw.lines()
            .find_map(|l| l.strip_prefix("Time: "))
            .unwrap_or_else(|| panic!("no Time in {raw}"))
            .to_string()
    };
    let late = raw(r#"{service="late"}"#);
    assert!(time(&late).contains("11:00:00"), "{}", time(&late));
    let both = raw(r#"{service=~"early|late"}"#);
    assert!(time(&both).contains("10:00:00"), "{}", time(&both));
    let duration = |raw: &str| {
        raw.lines()
            .find_map(|l| l.strip_prefix("Duration: "))
            .unwrap_or_else(|| panic!("no Duration in {raw}"))
            .to_string()
    };
    // One profile's duration alone (it reached to the end of the other).
    assert_eq!(
        duration(&late),
        duration(&pprof(&["-raw"], &dir().join("cpu.pb.gz")))
    );
    // Over days (the per-minute rollup, which keeps no profile ids): the
    // same profile's time.
    let out = data.join("days.pb.gz");
    fh(
        &data,
        &[
            "profile",
            "export",
            "--from",
            "2026-11-28 00:00:00",
            "--to",
            "2026-12-01 00:00:00",
            "--selector",
            r#"{service="late"}"#,
            "--out",
            &out.display().to_string(),
        ],
    );
    let days = pprof(&["-raw"], &out);
    assert!(time(&days).contains("11:00:00"), "{}", time(&days));
    // `profile labels` of a range holding one of them: its service alone
    // (it listed every series of the day).
    let labels = fh(
        &data,
        &[
            "profile",
            "labels",
            "--type",
            "cpu:nanoseconds",
            "--from",
            "2026-11-30 10:30:00",
            "--to",
            "2026-11-30 11:30:00",
        ],
    );
    let services: Vec<&str> = labels
        .lines()
        .filter_map(|l| l.strip_prefix("service\t"))
        .filter_map(|l| l.split('\t').next())
        .collect();
    assert_eq!(services, ["late"], "{labels}");
}

/// `profile top` and `load` into a pipe its reader closes at once: exit 0,
/// no error.
#[test]
fn a_closed_pipe_ends_profile_output_quietly() {
    let data = temp_path("cpcli-pipe");
    fh(
        &data,
        &["load", &dir().join("heap.pb.gz").display().to_string()],
    );
    let (from, to) = range_of(&data, "heap.pb.gz");
    let mut child = Command::new(bin())
        .args([
            "profile",
            "top",
            "--type",
            "alloc_space:bytes",
            "--from",
            &from,
            "--to",
            &to,
            "--data",
        ])
        .arg(&data)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end before the command writes.
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // `load` into a closed pipe (`load ... | head -1`): its report is lost,
    // not its work: every file is stored, exit 0, nothing on stderr (it
    // panicked on the first line).
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let o = Command::new(bin())
        .args(["load", "--data"])
        .arg(&data)
        .arg(dir().join("block.pb.gz"))
        .arg(dir().join("cpu.pb.gz"))
        .stdout(writer)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        sql(
            &data,
            "SELECT uniqExact(profile_id) FROM flamehouse.cp_profiles"
        ),
        "3"
    );
}

/// Bad files: one line each naming the file, exit 1, nothing of them
/// stored; the good file among them is loaded, once however often.
/// `--format pprof` forces the reader; a raw (un-gzipped) profile is
/// detected; init --retention sets the TTL.
#[test]
fn bad_input_reload_raw_and_retention() {
    let data = temp_path("cpcli-bad");
    let good = dir().join("cpu.pb.gz");
    let gz = std::fs::read(&good).unwrap();
    let cut = data.join("cut.pb.gz");
    std::fs::write(&cut, &gz[..gz.len() / 2]).unwrap();
    let raw = std::fs::read(dir().join("cpu.pb")).unwrap();
    let broken = data.join("broken.pb");
    let mut b = raw.clone();
    b.truncate(raw.len() - 7);
    std::fs::write(&broken, &b).unwrap();
    let text = data.join("stacks.txt");
    // Text no format claims (`main;foo 12` would be a folded stack).
    std::fs::write(&text, "this is not a profile\n").unwrap();

    let args: Vec<String> = [&cut, &good, &broken]
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    let out = fh_out(
        &data,
        &["load", &args[0], &args[1], &args[2], "--service", "api"],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(
        lines[0].contains("cut.pb.gz") && lines[0].contains("gzip"),
        "{err}"
    );
    assert!(
        lines[1].contains("broken.pb") && lines[1].contains("not a pprof profile"),
        "{err}"
    );
    assert!(lines[1].contains("byte "), "{err}");
    assert_eq!(lines[2], "flamehouse: 2 of 3 files failed to load");
    let count = |data: &Path| {
        sql(
            data,
            "SELECT (SELECT count() FROM flamehouse.cp_profiles), \
             (SELECT sum(value) FROM flamehouse.cp_samples WHERE profile_type = 'cpu:nanoseconds'), \
             (SELECT groupUniqArray(source) FROM flamehouse.cp_profiles)",
        )
    };
    let want = format!(
        "2\t590000000\t['{}']",
        good.canonicalize().unwrap().display()
    );
    assert_eq!(count(&data), want);
    // Loading the good file again stores nothing new.
    fh(&data, &["load", &args[1], "--service", "api"]);
    assert_eq!(count(&data), want);

    // A text file no format claims: MemHawk's message, naming the file.
    let out = fh_out(&data, &["load", &text.display().to_string()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("stacks.txt"), "{err}");
    // With --service, an empty or unrecognized file says what it holds
    // (it blamed --service: "a MemHawk file is labelled by its process").
    let empty = data.join("empty.pb.gz");
    std::fs::write(&empty, b"").unwrap();
    for (f, what) in [(&empty, "the file is empty"), (&text, "not a MemHawk")] {
        let out = fh_out(&data, &["load", &f.display().to_string(), "--service", "x"]);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(what) && !err.contains("--service"), "{err}");
    }
    // A file forced as `format`: exit 1, what it said.
    let forced = |file: &Path, format: &str| {
        let out = fh_out(
            &data,
            &["load", &file.display().to_string(), "--format", format],
        );
        assert_eq!(out.status.code(), Some(1));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // Forced as pprof: pprof's message.
    let err = forced(&text, "pprof");
    assert!(
        err.contains("stacks.txt") && err.contains("not a pprof profile"),
        "{err}"
    );
    // Forced as another format than its content shows: said, with the
    // format it shows (a perf script read as folded stacks was blamed for
    // its "two counts", a differential folded file's).
    let perf = dir().join("../perf/burn.fp.perf-script.txt");
    let err = forced(&perf, "folded");
    assert!(
        err.contains("burn.fp.perf-script.txt")
            && err.contains("forced as folded by --format, but the file looks like perf"),
        "{err}"
    );
    // A file as the data directory, or on its path: said so (it was the
    // OS's "File exists", "Not a directory").
    for (at, says) in [
        (perf.clone(), "is not a directory"),
        (perf.join("sub"), "a part of this path is a file"),
    ] {
        let out = Command::new(bin())
            .args(["sql", "SELECT 1", "--data"])
            .arg(&at)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{err}");
    }
    assert_eq!(count(&data), want);
    // A bad label key is refused by the argument parser.
    let out = fh_out(&data, &["load", &args[1], "--label", "a b=c"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");

    // The raw protobuf is detected and is the same profile's samples.
    let raw_data = temp_path("cpcli-raw");
    let out = fh(
        &raw_data,
        &["load", &dir().join("cpu.pb").display().to_string()],
    );
    assert!(out.contains("cpu:nanoseconds"), "{out}");
    assert_eq!(
        sql(
            &raw_data,
            "SELECT sum(value) FROM flamehouse.cp_samples WHERE profile_type = 'cpu:nanoseconds'"
        ),
        "590000000"
    );

    // Retention: the default of a new data directory, then set.
    let data = temp_path("cpcli-retention");
    let out = fh(&data, &["init"]);
    assert!(out.contains("continuous profiles kept 30 days"), "{out}");
    let out = fh(&data, &["init", "--retention", "7"]);
    assert!(out.contains("continuous profiles kept 7 days"), "{out}");
    assert!(sql(
        &data,
        "SELECT create_table_query FROM system.tables WHERE database = 'flamehouse' AND name = 'cp_profiles'"
    )
    .contains("toIntervalDay(7)"));
    let out = fh_out(&data, &["init", "--retention", "0"]);
    assert_eq!(out.status.code(), Some(2));
    // Past the engine's last Date the TTL's day wraps to 1970 and every
    // profile would go: refused in one line, the 7 days kept. The longest
    // taken does not wrap for today's profiles.
    let out = fh_out(&data, &["init", "--retention", "45000"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.lines().next().is_some_and(|l| l.starts_with("error: ")
            && l.contains("--retention")
            && l.contains("at most 36500 days")),
        "{err}"
    );
    let ttl = "SELECT create_table_query FROM system.tables WHERE database = 'flamehouse' AND name = 'cp_profiles'";
    assert!(sql(&data, ttl).contains("toIntervalDay(7)"));
    assert_eq!(
        sql(
            &data,
            "SELECT toDate(now()) + toIntervalDay(36500) > toDate(now())"
        )
        .trim(),
        "1"
    );
    assert_eq!(
        sql(
            &data,
            "SELECT toDate(now()) + toIntervalDay(45000) > toDate(now())"
        )
        .trim(),
        "0",
        "the engine's Date still wraps there"
    );
}

/// A pprof location without a function goes through the symbolizer: with
/// its binary missing here it is labelled `module+0xOFFSET` (module-relative:
/// address - memory_start + file_offset; callers looked up at address - 1
/// but labelled by their recorded address).
#[test]
fn unsymbolized_locations_get_module_offsets() {
    use flamehouse::formats::pprof::proto;
    use prost::Message;
    let data = temp_path("cpcli-addr");
    let s = |v: &mut Vec<String>, x: &str| {
        v.push(x.to_string());
        v.len() as i64 - 1
    };
    let mut strings = vec![String::new()];
    let p = proto::Profile {
        sample_type: vec![proto::ValueType {
            r#type: s(&mut strings, "samples"),
            unit: s(&mut strings, "count"),
        }],
        mapping: vec![proto::Mapping {
            id: 1,
            memory_start: 0x40_0000,
            memory_limit: 0x50_0000,
            file_offset: 0x1000,
            filename: s(&mut strings, "/nonexistent/libgone.so"),
            ..Default::default()
        }],
        location: vec![
            proto::Location {
                id: 1,
                mapping_id: 1,
                address: 0x40_1234,
                ..Default::default()
            },
            proto::Location {
                id: 2,
                mapping_id: 1,
                address: 0x40_2000,
                ..Default::default()
            },
        ],
        sample: vec![proto::Sample {
            location_id: vec![1, 2],
            value: vec![3],
            ..Default::default()
        }],
        // Recent: older than the retention (30 days) is dropped at once.
        time_nanos: (flamehouse::profiles::now_ms() - 60_000) * 1_000_000,
        ..Default::default()
    };
    let p = proto::Profile {
        string_table: strings.into_iter().map(String::into_bytes).collect(),
        ..p
    };
    let f = data.join("addr.pb");
    std::fs::write(&f, p.encode_to_vec()).unwrap();
    let out = fh(&data, &["load", &f.display().to_string()]);
    assert!(out.contains("symbolized 0.0%"), "{out}");
    assert!(out.contains("no symbols"), "{out}");
    let folded = data.join("addr.folded");
    fh(
        &data,
        &[
            "profile",
            "flame",
            "--type",
            "samples:count",
            "--from",
            "now-1h",
            "--out",
            &folded.display().to_string(),
        ],
    );
    assert_eq!(
        std::fs::read_to_string(&folded).unwrap(),
        "libgone.so+0x3000;libgone.so+0x2234 3\n"
    );
}

/// A type that is not stored (a typo) is an error naming the stored
/// types, exit 1; an empty answer for a stored type (the selector left
/// nothing) is the empty table, exit 0, with a note saying so.
#[test]
fn an_unknown_type_names_the_stored_ones() {
    let data = temp_path("cpcli-types");
    fh(
        &data,
        &["load", &dir().join("cpu.pb.gz").display().to_string()],
    );
    let (from, to) = range_of(&data, "cpu.pb.gz");
    let top = |ty: &str, selector: &str| {
        let out = fh_out(
            &data,
            &[
                "profile",
                "top",
                "--type",
                ty,
                "--from",
                &from,
                "--to",
                &to,
                "--selector",
                selector,
            ],
        );
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, stdout, err) = top("cpu:ns", "{}");
    assert_eq!((code, stdout.as_str()), (Some(1), ""), "{err}");
    assert!(
        err.contains("\"cpu:ns\"")
            && err.contains("cpu:nanoseconds")
            && err.contains("samples:count")
            && err.trim().lines().count() == 1,
        "{err}"
    );
    let (code, stdout, err) = top("cpu:nanoseconds", "{service=\"nobody\"}");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(stdout.lines().count(), 1, "header only: {stdout}");
    assert!(
        err.trim().lines().count() == 1
            && err.contains("nothing matched: no samples of type cpu:nanoseconds")
            && err.contains("{service=\"nobody\"}"),
        "{err}"
    );
}

/// A query of a data directory nothing was loaded into gave the engine's
/// bare "Database flamehouse does not exist": it now says what makes the
/// schema, in one line, exit 1, for the continuous and memory commands.
/// A data directory that does not exist is that line too, and is not made
/// (a typo in --data left a new engine directory behind); an empty one
/// too, left empty (the engine's files were left there).
/// `profile list` prints an id as `load` prints it and `open` takes it: 16
/// hex digits. It printed the engine's `hex()` of the UInt64, which leaves
/// out leading zero bytes (`188024a1af1706`), so about one profile in 256
/// was not found by its printed id in `list`'s output. This folded file
/// with this service hashes to an id whose first byte is 0.
#[test]
fn list_prints_every_id_in_16_digits_as_load_does() {
    let data = temp_path("cpcli-listids");
    std::fs::create_dir_all(&data).unwrap();
    let file = data.join("p328.folded");
    std::fs::write(&file, "main;work 328\n").unwrap();
    let loaded = fh(&data, &["load", "--service", "ids", file.to_str().unwrap()]);
    let want = "00188024a1af1706";
    assert!(loaded.contains(&format!("profile {want} ")), "{loaded}");
    let list = fh(&data, &["profile", "list", "--type", "folded:count"]);
    let ids: Vec<&str> = list
        .lines()
        .skip(1)
        .map(|l| l.split('\t').next().unwrap())
        .collect();
    assert_eq!(ids, [want], "{list}");
    let opened = fh(
        &data,
        &[
            "profile",
            "open",
            "--id",
            want,
            "--type",
            "folded:count",
            "--out",
            "-",
        ],
    );
    assert!(opened.contains("main;work 328"), "{opened}");
}

#[test]
fn a_query_before_any_load_says_what_makes_the_schema() {
    let data = temp_path("cpcli-noschema");
    std::fs::create_dir_all(&data).unwrap();
    let queries = [
        &["profile", "list", "--type", "cpu:nanoseconds"][..],
        &["profile", "top", "--type", "cpu:nanoseconds"][..],
        &["flame", "peak", "--process", "x", "--out", "x.folded"][..],
    ];
    let run = |args: &[&str]| {
        // Not fh_out: it would init the directory first.
        Command::new(bin())
            .args(args)
            .arg("--data")
            .arg(&data)
            .output()
            .unwrap()
    };
    for args in queries {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.trim().lines().count() == 1
                && err.contains("is empty: nothing is loaded there yet")
                && err.contains("`flamehouse init`"),
            "{args:?}: {err}"
        );
        assert!(
            std::fs::read_dir(&data).unwrap().next().is_none(),
            "{args:?}"
        );
    }
    // An engine's directory without the schema.
    assert!(run(&["sql", "SELECT 1"]).status.success());
    for args in queries {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains("does not exist") && err.contains("`flamehouse init`"),
            "{args:?}: {err}"
        );
        let typo = data.join("typo").join("deep");
        let out = Command::new(bin())
            .args(args)
            .arg("--data")
            .arg(&typo)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.trim().lines().count() == 1
                && err.contains("no data directory at")
                && err.contains("`flamehouse init`"),
            "{args:?}: {err}"
        );
        assert!(!data.join("typo").exists(), "{args:?}");
    }
}

/// An empty answer says why, in one line: a `--focus` or
/// `--function-regex` that left nothing names itself and the selection's
/// total (it said "no samples", blaming the range); a profile whose stacks
/// are all empty (Go's `threadcreate`) has a total but no function to
/// list; a diff whose comparison matches nothing says so even though the
/// baseline draws (it said nothing), also normalized (it blamed the
/// baseline's selector).
#[test]
fn empty_answers_say_why() {
    let data = temp_path("cpcli-why");
    fh(
        &data,
        &["load", &dir().join("cpu.pb.gz").display().to_string()],
    );
    let (from, to) = range_of(&data, "cpu.pb.gz");
    let run = |args: &[&str]| {
        let mut all = vec![
            "profile", args[0], "--type", args[1], "--from", &from, "--to", &to,
        ];
        all.extend_from_slice(&args[2..]);
        let out = fh_out(&data, &all);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        err
    };
    let total = "its total is 590000000";
    for narrowing in [["--focus", "nomatch"], ["--function-regex", "nomatch"]] {
        let err = run(&[&["top", "cpu:nanoseconds"][..], &narrowing[..]].concat());
        assert!(
            err.contains(&format!("{} \"nomatch\" left no sample", narrowing[0]))
                && err.contains(total),
            "{err}"
        );
    }
    let folded = data.join("f.folded").display().to_string();
    let err = run(&[
        "flame",
        "cpu:nanoseconds",
        "--focus",
        "nomatch",
        "--out",
        &folded,
    ]);
    assert!(
        err.contains("--focus \"nomatch\" left no sample") && err.contains(total),
        "{err}"
    );
    for normalize in [None, Some("--normalize")] {
        let mut args = vec![
            "diff",
            "cpu:nanoseconds",
            "--selector-b",
            "{version=\"9.9.9\"}",
            "--out",
            &folded,
        ];
        args.extend(normalize);
        let err = run(&args);
        assert!(
            err.contains("nothing matched in the comparison: no samples")
                && err.contains("{version=\"9.9.9\"}"),
            "{err}"
        );
    }
    // To an SVG, an empty comparison is flamehouse's error naming the
    // file, not inferno's "No stack counts found"; nothing is written.
    // A refused command: exit 1, what it said.
    let refused = |args: &[&str]| {
        let out = fh_out(&data, args);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{err}");
        err
    };
    let svg = data.join("d.svg");
    let err = refused(&[
        "profile",
        "diff",
        "--type",
        "cpu:nanoseconds",
        "--from",
        &from,
        "--to",
        &to,
        "--selector-b",
        "{version=\"9.9.9\"}",
        "--out",
        &svg.display().to_string(),
    ]);
    assert!(
        err.contains("nothing matched in the comparison")
            && err.contains("the comparison has no samples of type \"cpu:nanoseconds\"")
            && !err.contains("No stack counts"),
        "{err}"
    );
    assert!(!svg.exists());
    // A diff whose narrowing left nothing of either side says so (it
    // blamed both selectors).
    let err = run(&[
        "diff",
        "cpu:nanoseconds",
        "--focus",
        "nomatch",
        "--out",
        &folded,
    ]);
    assert!(
        err.contains("--focus \"nomatch\" left no sample of the baseline") && err.contains(total),
        "{err}"
    );
    // `series --by` a key no series has: a note (one "" series passed
    // unseen); the key quoted as in a selector is the key.
    let err = run(&["series", "cpu:nanoseconds", "--by", "nosuch", "--step", "0"]);
    assert!(
        err.contains("no series of the selection has the label \"nosuch\""),
        "{err}"
    );
    let out = fh(
        &data,
        &[
            "profile",
            "series",
            "--type",
            "cpu:nanoseconds",
            "--from",
            &from,
            "--to",
            &to,
            "--by",
            "\"handler\"",
            "--step",
            "0",
        ],
    );
    let values: Vec<&str> = out
        .lines()
        .skip(1)
        .filter_map(|l| l.split('\t').nth(1))
        .collect();
    assert!(values.contains(&"a") && values.contains(&"b"), "{out}");
    // `--out -`: the folded text on standard output, nothing else.
    let out = fh(
        &data,
        &[
            "profile",
            "flame",
            "--type",
            "cpu:nanoseconds",
            "--from",
            &from,
            "--to",
            &to,
            "--out",
            "-",
        ],
    );
    let sum: i64 = out
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<i64>().unwrap())
        .sum();
    assert_eq!(sum, 590000000, "{out}");
    // A profile of empty stacks alone (a folded file's line without frames).
    let empty = data.join("empty.folded");
    std::fs::write(&empty, " 12\n").unwrap();
    fh(
        &data,
        &[
            "load",
            &empty.display().to_string(),
            "--folded-type",
            "threads:count",
            "--time",
            &from,
        ],
    );
    let err = run(&["top", "threads:count"]);
    assert!(
        err.contains("every sample of the selection has an empty stack (its total is 12)"),
        "{err}"
    );
    // An export of a range with no profile of any type names what is
    // stored and when; nothing is written.
    let pb = data.join("none.pb.gz");
    let err = refused(&[
        "profile",
        "export",
        "--from",
        "2000-01-01T00:00:00Z",
        "--to",
        "2000-01-02T00:00:00Z",
        "--out",
        &pb.display().to_string(),
    ]);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "no profile in the selection's time range (--to excludes its instant); stored (UTC): "
        ) && err.contains(&format!("cpu:nanoseconds from {from} to "))
            && err.contains("threads:count from"),
        "{err}"
    );
    // Of a type given: that type's times alone.
    let err = refused(&[
        "profile",
        "export",
        "--type",
        "cpu:nanoseconds",
        "--from",
        "2000-01-01T00:00:00Z",
        "--to",
        "2000-01-02T00:00:00Z",
        "--out",
        &pb.display().to_string(),
    ]);
    assert!(
        // To the millisecond: a time cut to the second, given as --to,
        // would leave the profile out.
        err.contains(&format!("stored (UTC): cpu:nanoseconds from {from} to "))
            && !err.contains("threads:count"),
        "{err}"
    );
    assert!(!pb.exists());
}

/// `profile top`, `profile flame` and `profile diff` with `--focus` and
/// `--ignore` equal `go tool pprof -focus/-ignore` on the Go CPU and heap
/// profiles: top functions (flat, cum) = `-top`, the flame graph's stacks
/// = `-traces`, the diff's = `-diff_base ... -top`,
/// for a focus, an ignore and both, on function names and (as pprof also
/// tries them) on source file names alone (`proc\.go$`) or both
/// (`runtime/`). A bad regex is one line naming the flag, exit 1.
#[test]
fn focus_and_ignore_equal_go_tool_pprof() {
    let data = temp_path("cpcli-focus");
    keep_fixtures(&data, &["init", "--retention", "36500"]);
    for f in ["cpu.pb.gz", "cpu2.pb.gz", "heap.pb.gz"] {
        fh(&data, &["load", &dir().join(f).display().to_string()]);
    }
    let cases: [(&str, &str, &[&str]); 7] = [
        ("cpu.pb.gz", "cpu:nanoseconds", &["--focus", "fib$"]),
        (
            "cpu.pb.gz",
            "cpu:nanoseconds",
            &["--ignore", "asyncPreempt"],
        ),
        (
            "cpu.pb.gz",
            "cpu:nanoseconds",
            &["--focus", "handle", "--ignore", "step"],
        ),
        ("cpu.pb.gz", "samples:count", &["--focus", "hashLoop|fib"]),
        (
            "heap.pb.gz",
            "alloc_space:bytes",
            &["--ignore", "^runtime\\."],
        ),
        ("cpu.pb.gz", "cpu:nanoseconds", &["--focus", "proc\\.go$"]),
        (
            "heap.pb.gz",
            "alloc_space:bytes",
            &["--ignore", "^compress/|proto\\.go"],
        ),
    ];
    for (file, ty, flags) in cases {
        let path = dir().join(file);
        let (from, to) = range_of(&data, file);
        // pprof's flags: `-focus=RE`, `-ignore=RE`.
        let pflags: Vec<String> = flags
            .chunks(2)
            .map(|p| format!("-{}={}", p[0].trim_start_matches('-'), p[1]))
            .collect();
        let index = format!("-sample_index={}", ty.split(':').next().unwrap());
        let mut args: Vec<&str> = vec![unit_flag(ty), &index];
        args.extend(pflags.iter().map(String::as_str));
        let (want, _) = parse_top(&pprof(&[&args[..], &["-top"]].concat(), &path));
        assert!(!want.is_empty(), "{file} {flags:?}");
        let mut top_args = vec!["profile", "top", "--type", ty, "--from", &from, "--to", &to];
        top_args.extend_from_slice(flags);
        let (got, _) = parse_cli_top(&fh(&data, &top_args));
        assert_eq!(got, want, "{file} {ty} {flags:?}: top");

        let want = parse_traces(&pprof(&[&args[..], &["-traces"]].concat(), &path));
        let out = data.join("focus.folded");
        let out_s = out.display().to_string();
        let mut flame_args = vec![
            "profile", "flame", "--type", ty, "--from", &from, "--to", &to, "--out", &out_s,
        ];
        flame_args.extend_from_slice(flags);
        fh(&data, &flame_args);
        let mut got: BTreeMap<Vec<String>, i64> = BTreeMap::new();
        for (s, v) in parse_folded(&std::fs::read_to_string(&out).unwrap()) {
            *got.entry(s).or_insert(0) += v[0];
        }
        let want: BTreeMap<Vec<String>, i64> = want.into_iter().filter(|(_, v)| *v != 0).collect();
        assert_eq!(got, want, "{file} {ty} {flags:?}: stacks");
    }
    // The diff of cpu (baseline) and cpu2 with both filters = pprof's
    // `-diff_base cpu.pb.gz -focus -ignore -top cpu2.pb.gz`.
    let (from, to) = range_of(&data, "cpu.pb.gz");
    let (from2, to2) = range_of(&data, "cpu2.pb.gz");
    let base = format!("-diff_base={}", dir().join("cpu.pb.gz").display());
    let (want, _) = parse_top(&pprof(
        &[
            "-unit=ns",
            "-sample_index=cpu",
            "-focus=handle|background",
            "-ignore=asyncPreempt",
            &base,
            "-top",
        ],
        &dir().join("cpu2.pb.gz"),
    ));
    assert!(!want.is_empty());
    let got = diff_top(
        &data,
        "cpu:nanoseconds",
        (&from, &to),
        (&from2, &to2),
        &["--focus", "handle|background", "--ignore", "asyncPreempt"],
    );
    assert_eq!(got, want, "diff");

    let o = fh_out(
        &data,
        &[
            "profile",
            "top",
            "--type",
            "cpu:nanoseconds",
            "--focus",
            "(",
        ],
    );
    // A usage error naming the flag, refused before the engine opens.
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err,
        "error: invalid value '(' for '--focus <FOCUS>': error: unclosed group\n"
    );
}

/// `profile series`: `--by LABEL --step 0` gives each value's total as `go
/// tool pprof -tags` does (the samples without the label are the `""`
/// series: the rest of `-top`'s total); `--function F` summed over its
/// points gives F's cum of `-top` (every stack through F once, recursion
/// included: `fib` recurses). Neither `--by` nor `--function` is a usage
/// error (exit 2), a function in no stack a note.
#[test]
fn series_by_label_and_function_equal_go_tool_pprof() {
    let data = temp_path("cpcli-series");
    keep_fixtures(&data, &["init", "--retention", "36500"]);
    fh(
        &data,
        &["load", &dir().join("cpu.pb.gz").display().to_string()],
    );
    let ty = "cpu:nanoseconds";
    let series = |extra: &[&str]| -> BTreeMap<String, i64> {
        let mut args = vec![
            "profile",
            "series",
            "--type",
            ty,
            "--from",
            "2000-01-01 00:00:00",
        ];
        args.extend_from_slice(extra);
        let out = fh(&data, &args);
        let mut m = BTreeMap::new();
        for l in out.lines().skip(1) {
            let f: Vec<&str> = l.split('\t').collect();
            *m.entry(f[1].to_string()).or_default() += f[2].parse::<i64>().unwrap();
        }
        m
    };
    // `-tags`: "key: Total T" then "V (P%): value" lines.
    let tags = golden("cpu.tags.txt");
    let (top, total) = parse_top(&golden("cpu.top.cpu.txt"));
    for key in ["handler", "version"] {
        let mut want = BTreeMap::new();
        let mut on = false;
        for l in tags.lines() {
            if let Some((k, _)) = l.trim().split_once(": Total") {
                on = k == key;
            } else if on && !l.trim().is_empty() {
                let (v, name) = l.trim().split_once(' ').unwrap();
                let ms: f64 = v.trim_end_matches("ms").parse().unwrap();
                let name = name.rsplit_once(": ").unwrap().1;
                want.insert(name.to_string(), (ms * 1e6).round() as i64);
            }
        }
        let tagged: i64 = want.values().sum();
        want.insert(String::new(), total - tagged);
        assert_eq!(series(&["--by", key, "--step", "0"]), want, "{key}");
        // Per minute, the same sums.
        assert_eq!(series(&["--by", key]), want, "{key} per minute");
    }
    for f in ["main.fib", "main.hashLoop", "main.step"] {
        let got = series(&["--function", f, "--step", "1"]);
        assert_eq!(got.get(f).copied(), Some(top[f].1), "{f}");
    }
    let out = fh_out(&data, &["profile", "series", "--type", ty]);
    assert_eq!(out.status.code(), Some(2));
    let out = fh_out(
        &data,
        &[
            "profile",
            "series",
            "--type",
            ty,
            "--from",
            "2000-01-01 00:00:00",
            "--function",
            "nosuch",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("nothing matched: function \"nosuch\" is in no stack"),
        "{err}"
    );
}

/// A profile whose day the TTL dropped, loaded again, is stored again:
/// the engine's deduplication log outlives the rows it remembers, and the
/// reload's blocks (the same bytes, the same tokens) were dropped as
/// copies while the load reported them stored. Each table then holds what
/// the first load stored, and a third load stores nothing twice.
#[test]
fn a_profile_loaded_again_after_its_day_expired_is_stored() {
    let data = temp_path("cpcli-expired-reload");
    let file = dir().join("cpu.pb.gz").display().to_string();
    let day_ms = 86_400_000;
    let at = flamehouse::profiles::now_ms() / day_ms * day_ms - 12 * day_ms + 12 * 3_600_000;
    let time = (at / 1000).to_string();
    let counts = || {
        fh(
            &data,
            &[
                "sql",
                "SELECT (SELECT count() FROM flamehouse.cp_samples), (SELECT sum(value) FROM flamehouse.cp_samples), \
                 (SELECT count() FROM flamehouse.cp_profiles), (SELECT sum(value) FROM flamehouse.cp_samples_1m), \
                 (SELECT count() FROM flamehouse.cp_series), (SELECT count() FROM flamehouse.cp_stacks)",
            ],
        )
    };
    fh(&data, &["load", "--time", &time, &file]);
    let first = counts();
    assert!(!first.starts_with("0\t"), "{first}");
    // The day expires (kept 5 days, merged), then the retention is back.
    fh(&data, &["init", "--retention", "5", "--expire-now"]);
    fh(&data, &["compact"]);
    assert!(counts().starts_with("0\t0\t0\t"), "{}", counts());
    fh(&data, &["init", "--retention", "30"]);
    let said = fh(&data, &["load", "--time", &time, &file]);
    assert!(said.contains("0 already stored"), "{said}");
    assert_eq!(counts(), first, "stored again, as the first load did");
    let said = fh(&data, &["load", "--time", &time, &file]);
    assert!(said.contains("1 already stored"), "{said}");
    assert_eq!(counts(), first, "and not twice");
}

/// `load --time` reads a time as the query flags do: an RFC 3339 offset is
/// honoured, no offset is UTC, and both spellings of one instant are one
/// profile (the time joins its id). The instant's spellings come from
/// `date`, not from the parser under test.
#[test]
fn load_time_spellings_of_one_instant_are_one_profile() {
    let data = temp_path("cpcli-time-forms");
    let file = dir().join("cpu.pb.gz").display().to_string();
    let day_ms = 86_400_000;
    let secs = (flamehouse::profiles::now_ms() / day_ms * day_ms - 2 * day_ms) / 1000 + 14 * 3600;
    let date = |fmt: &str, at: i64| {
        let out = Command::new("date")
            .args(["-u", "-d", &format!("@{at}"), fmt])
            .output()
            .expect("date runs");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    // The same instant 2 hours east of UTC, and plain UTC.
    let east = format!("{}+02:00", date("+%Y-%m-%dT%H:%M:%S", secs + 7200));
    let utc = date("+%Y-%m-%d %H:%M:%S", secs);
    let said = fh(&data, &["load", "--time", &east, &file]);
    assert!(said.contains("0 already stored"), "{said}");
    let said = fh(&data, &["load", "--time", &utc, &file]);
    assert!(
        said.contains("1 already stored"),
        "{east} and {utc}: {said}"
    );
    let list = fh(
        &data,
        &[
            "profile",
            "list",
            "--type",
            "cpu:nanoseconds",
            "--from",
            &utc,
            "--to",
            "now",
        ],
    );
    assert_eq!(list.lines().count(), 2, "{list}");
    assert!(list.contains(&format!("{utc}.000")), "{list}");
    // A relative time is refused, in one line naming why, exit 2.
    let o = fh_out(&data, &["load", "--time", "now-1h", &file]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.trim().lines().count() == 1 && err.contains("relative time"),
        "{err}"
    );
}

/// A shell loop reading file names from its standard input loads every
/// file: the engine took a standard input that is not a terminal as the
/// data of its INSERTs, so the first load into a new data directory failed
/// ("both inlined and external data") and ate the rest of the list.
#[test]
fn a_shell_loop_over_standard_input_loads_every_file() {
    let data = temp_path("cpcli-stdin-loop");
    let time = ((flamehouse::profiles::now_ms() - 3_600_000) / 1000).to_string();
    let script = format!(
        "printf '%s\\n%s\\n' \"$A\" \"$B\" | while read f; do \"$FH\" load --data \"$D\" --time {time} \"$f\" || exit 1; done"
    );
    let out = Command::new("sh")
        .arg("-c")
        .arg(&script)
        .env("FH", bin())
        .env("D", &data)
        .env("A", dir().join("cpu.pb.gz"))
        .env("B", dir().join("cpu2.pb.gz"))
        .output()
        .expect("sh runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        sql(
            &data,
            "SELECT count(DISTINCT profile_id) FROM flamehouse.cp_profiles"
        ),
        "2"
    );
}

/// What `load` reports stored outlives the next merge, and what it reports
/// older than the retention is not stored, in any time zone: the TTL
/// expires a day at the engine's midnight (its zone follows `TZ`), and the
/// load counted the days in UTC, so far east of UTC (from 10:00 UTC on in
/// Kiritimati, UTC+14) a profile it reported stored was dropped by the
/// next merge.
#[test]
fn the_load_and_the_ttl_agree_on_the_retention_in_any_zone() {
    let file = dir().join("cpu.pb.gz").display().to_string();
    let day_ms = 86_400_000;
    let today = flamehouse::profiles::now_ms() / day_ms;
    for zone in ["Pacific/Kiritimati", "Etc/GMT+12"] {
        for days_ago in [29, 30] {
            let data = temp_path("cpcli-ttl-zone");
            let time = ((today - days_ago) * day_ms / 1000 + 12 * 3600).to_string();
            let run = |args: &[&str]| {
                let o = Command::new(bin())
                    .args(args)
                    .arg("--data")
                    .arg(&data)
                    .env("TZ", zone)
                    .output()
                    .expect("flamehouse runs");
                assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
                String::from_utf8_lossy(&o.stdout).into_owned()
            };
            let said = run(&["load", "--time", &time, &file]);
            let expired = said.contains("1 outside the retention");
            // The merge applies the TTL.
            let rows = run(&[
                "sql",
                "OPTIMIZE TABLE flamehouse.cp_samples FINAL; SELECT count() FROM flamehouse.cp_samples",
            ]);
            assert_eq!(
                rows.trim(),
                if expired { "0" } else { "38" },
                "{zone}, {days_ago} days ago: {said}"
            );
        }
    }
}

/// `init --retention` out of range changes nothing, not even a new data
/// directory (it was refused after the schema was made); a shorter
/// retention that expires stored profiles says how many and which days.
#[test]
fn a_retention_is_checked_first_and_a_shorter_one_says_what_it_drops() {
    let data = temp_path("cpcli-retention-check");
    let new = data.join("new");
    // A whole number out of range names the range (past u32 and below 1
    // it said "no number of days", and `-1` was taken for a flag).
    for (bad, says) in [
        ("0", "at least 1 day"),
        ("-1", "at least 1 day"),
        ("36501", "at most 36500 days"),
        ("99999999999", "at most 36500 days"),
        ("7x", "no number of days"),
    ] {
        let o = Command::new(bin())
            .args(["init", "--retention", bad, "--data"])
            .arg(&new)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains(says), "{bad}: {err}");
        assert!(!new.exists(), "--retention {bad} made {}", new.display());
    }
    let file = dir().join("cpu.pb.gz").display().to_string();
    let day_ms = 86_400_000;
    let at = (flamehouse::profiles::now_ms() / day_ms - 12) * day_ms + 12 * 3_600_000;
    fh(&data, &["load", "--time", &(at / 1000).to_string(), &file]);
    let day = fh(
        &data,
        &[
            "sql",
            "SELECT toString(toDate(min(ts))) FROM flamehouse.cp_profiles",
        ],
    );
    let stored = || {
        fh(
            &data,
            &["sql", "SELECT count() FROM flamehouse.cp_profiles"],
        )
    };
    let retention = || {
        fh(
            &data,
            &[
                "sql",
                "SELECT engine_full LIKE '%TTL%toIntervalDay(20)%' FROM system.tables \
                 WHERE database = 'flamehouse' AND name = 'cp_samples'",
            ],
        )
    };
    let before = stored();
    assert_ne!(before.trim(), "0");
    let o = fh_out(&data, &["init", "--retention", "20"]);
    assert!(o.status.success() && String::from_utf8_lossy(&o.stderr).is_empty());
    assert_eq!(retention().trim(), "1");
    let want = format!(
        "1 stored profile ({0} to {0}) older than 5 days",
        day.trim()
    );
    // A retention that would delete stored days is refused unless asked:
    // the engine deletes them at once, not at some later merge.
    let o = fh_out(&data, &["init", "--retention", "5"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    // The refusal is said alone: no "schema ... is up to date" before it.
    assert_eq!(String::from_utf8_lossy(&o.stdout), "", "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("--retention 5 would delete {want} at once"))
            && err.contains("--expire-now"),
        "{err}"
    );
    assert_eq!((stored(), retention().trim()), (before, "1"));
    let o = fh_out(&data, &["init", "--retention", "5", "--expire-now"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains(&format!("deleted {want}")), "{err}");
    assert_eq!(stored().trim(), "0");
}

/// A label key heads `profile series --by`'s column escaped as the values
/// under it are (TSV: `\\` for a backslash); it was
/// printed raw above escaped values.
#[test]
fn series_by_escapes_its_key_as_its_values() {
    use flamehouse::formats::pprof::write::PprofWriter;
    let data = temp_path("cpcli-keyescape");
    let mut w = PprofWriter::new(&[("samples", "count")], ("", ""), 0);
    w.set_time((flamehouse::profiles::now_ms() - 60_000) * 1_000_000, 0);
    w.add_sample(&["work", "main"], &[3], &[("k\\x'y", "v\\1")]);
    let f = data.join("keys.pb");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(&f, w.encode()).unwrap();
    fh(&data, &["load", &f.display().to_string()]);
    let out = fh(
        &data,
        &[
            "profile",
            "series",
            "--type",
            "samples:count",
            "--by",
            "k\\x'y",
            "--step",
            "0",
        ],
    );
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("time\tk\\\\x'y\tvalue"), "{out}");
    let row: Vec<&str> = lines.next().unwrap().split('\t').collect();
    assert_eq!(row[1..], ["v\\\\1", "3"], "{out}");
}

/// pprof allows any string as a function name: `profile top`'s table
/// escapes a tab, a newline and a backslash in it as TSV does (`\t`,
/// `\n`, `\\`), so every row stays one line of five columns (a raw name
/// used to split a row in two, or add a column).
#[test]
fn top_escapes_tabs_newlines_and_backslashes_in_names() {
    use flamehouse::formats::pprof::write::PprofWriter;
    let data = temp_path("cpcli-names");
    let mut w = PprofWriter::new(&[("samples", "count")], ("", ""), 0);
    w.set_time((flamehouse::profiles::now_ms() - 60_000) * 1_000_000, 0);
    w.add_sample(&["multi\nline", "main"], &[3], &[]);
    w.add_sample(&["has\ttab", "main"], &[2], &[]);
    w.add_sample(&["back\\slash", "main"], &[1], &[]);
    let f = data.join("names.pb");
    std::fs::write(&f, w.encode()).unwrap();
    fh(&data, &["load", &f.display().to_string()]);
    let out = fh(
        &data,
        &[
            "profile",
            "top",
            "--type",
            "samples:count",
            "--from",
            "now-1h",
        ],
    );
    let mut names = Vec::new();
    for line in out.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 5, "{line:?} in {out:?}");
        names.push(f[4].to_string());
    }
    assert_eq!(
        names,
        ["main", "multi\\nline", "has\\ttab", "back\\\\slash"],
        "{out:?}"
    );
    // The escapes are TSV's: undone, they are the names.
    assert_eq!(
        names
            .iter()
            .map(|n| flamehouse::flame::unescape_tsv(n))
            .collect::<Vec<_>>(),
        ["main", "multi\nline", "has\ttab", "back\\slash"]
    );
}

/// `--max-nodes` is 0 (every node) or at least 2 (the root and one
/// `[other]` row): 1 is refused by the argument parser of every command
/// that takes it, one line naming the flag, exit 2, before the engine is
/// opened (it used to run the query and fail inside the engine with the
/// stack functions' `Code: 754` error).
#[test]
fn max_nodes_1_is_a_usage_error_of_every_command() {
    let data = temp_path("cpcli-max-nodes");
    let out = data.join("x.folded");
    let out = out.to_str().unwrap();
    let ty = ["--type", "cpu:nanoseconds"];
    let cases: Vec<Vec<&str>> = vec![
        [&["profile", "flame"][..], &ty, &["--out", out]].concat(),
        [&["profile", "diff"][..], &ty, &["--out", out]].concat(),
        [
            &["profile", "sandwich"][..],
            &ty,
            &["--function", "main", "--callers", out],
        ]
        .concat(),
        vec![
            "profile",
            "open",
            "--id",
            "1",
            "--type",
            "cpu:nanoseconds",
            "--out",
            out,
        ],
        vec!["flame", "peak", "--process", "workload", "--out", out],
    ];
    for args in cases {
        for value in ["1", "many", "4294967296"] {
            let o = Command::new(bin())
                .args(&args)
                .args(["--max-nodes", value, "--data"])
                .arg(&data)
                .output()
                .expect("flamehouse runs");
            assert_eq!(o.status.code(), Some(2), "{args:?} {value}: {o:?}");
            let err = String::from_utf8_lossy(&o.stderr);
            let line = err.lines().next().unwrap_or_default();
            assert!(
                line.starts_with("error: ") && line.contains("--max-nodes") && line.contains(value),
                "{args:?} {value}: {err}"
            );
            if value == "1" {
                assert!(line.contains("0 (every node) or at least 2"), "{err}");
            }
            // A count, too large: the largest is named.
            if value == "4294967296" {
                assert!(line.contains("at most 4294967295"), "{err}");
            }
        }
    }
    // Refused before the engine is opened: the data directory stays empty.
    assert!(std::fs::read_dir(&data).unwrap().next().is_none());
}

/// Flags that do not fit together, or a flag's bad value, are usage
/// errors (exit 2, one line), as the argument parser's: these three exited
/// 1 as if the engine had failed.
#[test]
fn flags_that_do_not_fit_are_usage_errors() {
    let data = temp_path("cpcli-usage");
    let ty = ["--type", "cpu:nanoseconds"];
    let cases: [(Vec<&str>, &str); 4] = [
        (
            vec![
                "sandwich",
                "--function",
                "a",
                "--callers",
                "-",
                "--callees",
                "-",
            ],
            "--callers and --callees are both -",
        ),
        (vec!["series", "--by", ""], "not a label name"),
        (vec!["series", "--by", "\"a"], "selector"),
        (
            vec!["export", "--type", "cpu:nanoseconds", "--out", "x.pb.gz"],
            "--type cpu:nanoseconds is given twice",
        ),
    ];
    for (args, says) in cases {
        let mut all = vec!["profile", args[0]];
        all.extend(ty);
        all.extend(&args[1..]);
        let o = fh_out(&data, &all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{all:?}: {err}");
        assert!(
            err.lines().count() == 1 && err.starts_with("error: ") && err.contains(says),
            "{all:?}: {err}"
        );
    }
}

/// A diff's comparison range is checked as the comparison's: given only
/// `--from-b`, an empty range names `--from-b` and `--to-b` (and that
/// `--to-b` took the baseline's `--to`), not the baseline's flags (it
/// used to say `--to (..) must be after --from (..)` of a valid baseline).
#[test]
fn an_empty_comparison_range_names_the_b_flags() {
    let data = temp_path("cpcli-diff-range");
    let diff = |extra: &[&str]| {
        let mut args = vec![
            "profile",
            "diff",
            "--type",
            "folded:count",
            "--from",
            "2026-12-01 10:00:00",
            "--to",
            "2026-12-01 10:05:00",
            "--out",
            "-",
        ];
        args.extend(extra);
        let o = fh_out(&data, &args);
        // A usage error, as the argument parser's (exit 2).
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {o:?}");
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(err.lines().count(), 1, "{err}");
        err
    };
    let err = diff(&["--from-b", "2026-12-01 10:05:00"]);
    assert!(
        err.contains("--to-b (2026-12-01 10:05:00) must be after --from-b (2026-12-01 10:05:00)")
            && err.contains("--to-b not given: the baseline's --to"),
        "{err}"
    );
    let err = diff(&[
        "--from-b",
        "2026-12-01 10:05:00",
        "--to-b",
        "2026-12-01 10:01:00",
    ]);
    assert!(
        err.contains("--to-b (2026-12-01 10:01:00) must be after --from-b (2026-12-01 10:05:00)")
            && !err.contains("not given"),
        "{err}"
    );
    let err = diff(&["--to-b", "2026-12-01 09:00:00"]);
    assert!(
        err.contains("--to-b (2026-12-01 09:00:00) must be after --from-b (2026-12-01 10:00:00)")
            && err.contains("--from-b not given: the baseline's --from"),
        "{err}"
    );
}

/// A named pipe (`<(zcat x.gz)`, a FIFO) failed with "Illegal seek": it
/// is now one line saying to give it on standard input, which works.
#[test]
fn a_pipe_path_says_to_give_it_on_standard_input() {
    let data = temp_path("cpcli-fifo");
    std::fs::create_dir_all(&data).unwrap();
    let fifo = data.join("in.fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let err = fails_in_one_line(&fh_out(&data, &["load", &fifo.display().to_string()]), 1);
    assert!(
        err.contains("a pipe, not a file") && err.contains("flamehouse load - <"),
        "{err}"
    );
    // `/dev/stdin` is standard input, as `-` is (it read /dev/null: the
    // engine detaches fd 0 when it opens).
    let folded = dir().join("../pyspy/work.raw.txt");
    let out = Command::new(bin())
        .args(["load", "/dev/stdin", "--service", "devstdin", "--data"])
        .arg(&data)
        .stdin(std::fs::File::open(&folded).unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("31 sample rows"),
        "{out:?}"
    );
}

/// A profile with negative sample values (pprof allows them; diffs are
/// written so): `profile top`'s shares were of the signed sum (over 100%);
/// they are now of the absolute values' sum, as `go tool pprof -top`'s
/// `flat%` and `cum%` are, compared here line by line.
#[test]
fn top_shares_of_negative_values_equal_go_tool_pprof() {
    use flamehouse::formats::pprof::write::PprofWriter;
    let data = temp_path("cpcli-neg");
    std::fs::create_dir_all(&data).unwrap();
    let mut w = PprofWriter::new(&[("cpu", "nanoseconds")], ("cpu", "nanoseconds"), 1);
    w.set_time(1_764_547_200_000_000_000, 10_000_000_000);
    w.add_sample(&["grow", "main"], &[700], &[]);
    w.add_sample(&["shrink", "main"], &[-300], &[]);
    w.add_sample(&["main"], &[100], &[]);
    let file = data.join("neg.pb.gz");
    std::fs::write(&file, w.encode_gzip().unwrap()).unwrap();
    fh(
        &data,
        &["load", &file.display().to_string(), "--service", "neg"],
    );
    let ours = fh(
        &data,
        &[
            "profile",
            "top",
            "--type",
            "cpu:nanoseconds",
            "--from",
            "1764547100",
            "--to",
            "1764547300",
        ],
    );
    // pprof: `flat flat% sum% cum cum% name`, percentages of 1100.
    let theirs = pprof(&["-top", "-unit=ns"], &file);
    let pct = |s: &str| s.trim_end_matches('%').parse::<f64>().unwrap();
    let mut want = BTreeMap::new();
    let mut rows = false;
    for line in theirs.lines() {
        if line.trim_start().starts_with("flat ") {
            rows = true;
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if rows && f.len() >= 6 {
            want.insert(f[5].to_string(), (pct(f[1]), pct(f[4])));
        }
    }
    let mut got = BTreeMap::new();
    for line in ours.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        got.insert(f[4].to_string(), (pct(f[1]), pct(f[3])));
    }
    assert_eq!(got.len(), 3, "{ours}");
    assert_eq!(got, want, "ours:\n{ours}\npprof:\n{theirs}");
}

/// A data directory whose views another binary wrote (here: a view
/// replaced by hand, its mark gone) answered `sql` with those views until
/// a load; `sql` now re-creates the stale views first.
#[test]
fn sql_answers_with_this_binarys_views() {
    let (data, from, to) = loaded_cpu("cpcli-staleviews");
    fh(&data, &["sql", OTHER_CP_FLAME]);
    let root = fh(&data, &["sql", &cp_flame_root(&from, &to)]);
    assert_eq!(root.trim(), "total\t590000000");
}

/// A data directory with `cpu.pb.gz` loaded, and the profile's range.
fn loaded_cpu(name: &str) -> (PathBuf, String, String) {
    let data = temp_path(name);
    fh(
        &data,
        &["load", &dir().join("cpu.pb.gz").display().to_string()],
    );
    let (from, to) = range_of(&data, "cpu.pb.gz");
    (data, from, to)
}

/// `cp_flame` as another binary (or a user) may have left it: not a
/// parameterized view, no mark of this binary.
const OTHER_CP_FLAME: &str =
    "CREATE OR REPLACE VIEW flamehouse.cp_flame AS SELECT toUInt64(7) AS i, \
     0 AS level, 'old' AS label, toInt64(1) AS value, toInt64(1) AS self";

/// The root row (label, value) of this binary's `cp_flame` over a range.
fn cp_flame_root(from: &str, to: &str) -> String {
    format!(
        "SELECT label, value FROM flamehouse.cp_flame(profile_type = 'cpu:nanoseconds', \
         t1 = '{from}', t2 = '{to}', match = map(), max_nodes = 0) WHERE level = 0"
    )
}

/// A database an earlier binary made (here: before migration 11, no
/// `cp_stacks`, a view of that binary's) keeps its views under `sql`,
/// which says how to upgrade it: re-created, this binary's views read
/// `cp_stacks` and failed for every binary (the earlier one too) until an
/// `init`. A query command's engine error says how to upgrade it too (it
/// was the engine's "Unknown table expression identifier" alone); `init`
/// upgrades it and both answer.
#[test]
fn an_earlier_binarys_database_keeps_its_views_and_says_how_to_upgrade() {
    let (data, from, to) = loaded_cpu("cpcli-upgrade");
    // Back to migrations 1 to 10 (then 12 to 15, which need nothing of 11
    // but its table).
    fh(
        &data,
        &[
            "sql",
            "ALTER TABLE flamehouse.schema_migrations DELETE WHERE version = 11 SETTINGS mutations_sync = 1",
        ],
    );
    fh(&data, &["sql", "DROP TABLE flamehouse.cp_stacks"]);
    fh(&data, &["sql", OTHER_CP_FLAME]);
    let out = fh_out(
        &data,
        &["sql", "SELECT label, value FROM flamehouse.cp_flame"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "old\t1");
    assert!(
        err.trim().lines().count() == 1
            && err.contains("its migration 11 is not applied yet")
            && err.contains("`flamehouse init`")
            && err.contains("views are left"),
        "{err}"
    );
    let top = [
        "profile",
        "top",
        "--type",
        "cpu:nanoseconds",
        "--from",
        &from,
        "--to",
        &to,
    ];
    let err = fails_in_one_line(&fh_out(&data, &top), 1);
    assert!(
        err.contains("cp_stacks")
            && err.contains("its migration 11 is not applied yet (`flamehouse init`"),
        "{err}"
    );

    let init = fh(&data, &["init"]);
    assert!(init.contains("applied migrations [11]"), "{init}");
    let out = fh_out(&data, &["sql", &cp_flame_root(&from, &to)]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "total\t590000000"
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(fh(&data, &top).contains("main.main"));
}

/// `delete` of a continuous profile's service or id (it takes MemHawk
/// processes) says what the name is and that it is not how those go; it
/// said only "no process".
#[test]
fn delete_of_a_continuous_service_says_what_it_is() {
    let data = temp_path("cpcli-delete");
    let file = dir().join("cpu.pb.gz").display().to_string();
    let loaded = fh(&data, &["load", "--service", "api", &file]);
    let id = loaded
        .split("profile ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap()
        .to_string();
    for (name, says) in [
        ("api", "\"api\" is the service of 1 continuous profile"),
        (id.as_str(), "is a continuous profile"),
        ("nothing", ""),
    ] {
        let err = fails_in_one_line(&fh_out(&data, &["delete", "--process", name]), 1);
        assert!(err.contains("no process"), "{name}: {err}");
        if says.is_empty() {
            assert!(!err.contains("continuous"), "{err}");
        } else {
            assert!(
                err.contains(says) && err.contains("`delete` removes MemHawk processes only"),
                "{err}"
            );
        }
    }
    assert!(fh(
        &data,
        &[
            "profile",
            "list",
            "--type",
            "cpu:nanoseconds",
            "--from",
            "0"
        ]
    )
    .contains(&id));
}
