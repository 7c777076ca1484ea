//! pprof from exporters other than Go's `runtime/pprof`, each a real file
//! that a real exporter wrote (`fixtures/continuous/{node,rust,python}`,
//! their README says how): Node's `@datadog/pprof` (time profiles with and
//! without line numbers, a heap profile), pprof-rs (a Rust CPU profile) and
//! ddtrace's Python profiler (zstd-compressed, 19 sample types, most of
//! them all zero). Each loads through the library and through `flamehouse
//! load`; every sample type becomes its profile type with its unit, and
//! `go tool pprof`'s own readings of the same files are the oracles:
//! `-raw` (the types), `-top` (flat and cum of every function, the total),
//! `-traces` (the stacks), and `-top` again of what `profile export`
//! writes. (Java: no registry reachable here has async-profiler or a
//! JFR-to-pprof converter; see fixtures/continuous/java/README.md.)

use super::continuous::{
    around, copts, fresh, now_ms, parse_top, profile_ms, qopts, selves, top, tree,
};
use crate::cli_run::{fh, fh_out};
use flamehouse::continuous_query::{flame_sql, top_functions_sql};
use flamehouse::ingest::continuous::{load_pprof, ContinuousOptions};
use flamehouse_fixtures::testing::temp_path;
use flamehouse_tests::engine;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One committed export: its folder under fixtures/continuous, its file,
/// and the stem of its goldens.
struct Export {
    dir: &'static str,
    file: &'static str,
    stem: &'static str,
}

const EXPORTS: [Export; 8] = [
    Export {
        dir: "node",
        file: "wall.pb.gz",
        stem: "wall",
    },
    Export {
        dir: "node",
        file: "wall-lines.pb.gz",
        stem: "wall-lines",
    },
    Export {
        dir: "node",
        file: "heap.pb.gz",
        stem: "heap",
    },
    Export {
        dir: "rust",
        file: "cpu.pb",
        stem: "cpu",
    },
    Export {
        dir: "python",
        file: "work.pprof",
        stem: "work",
    },
    // async-profiler's converter of a JDK Flight Recorder recording: no
    // addresses, no period, the allocated or lock class as a leaf frame.
    Export {
        dir: "java",
        file: "cpu.pb.gz",
        stem: "cpu",
    },
    Export {
        dir: "java",
        file: "alloc.pb.gz",
        stem: "alloc",
    },
    Export {
        dir: "java",
        file: "lock.pb.gz",
        stem: "lock",
    },
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/continuous")
}

impl Export {
    fn path(&self) -> PathBuf {
        fixtures().join(self.dir).join(self.file)
    }

    fn golden(&self, what: &str) -> String {
        let p = fixtures()
            .join(self.dir)
            .join(format!("{}.{what}.txt", self.stem));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// `-traces` of the type, when generate.sh wrote it.
    fn traces(&self, kind: &str) -> Option<String> {
        let p = fixtures()
            .join(self.dir)
            .join(format!("{}.traces.{kind}.txt", self.stem));
        std::fs::read_to_string(p).ok()
    }

    /// The sample types as `go tool pprof -raw` lists them (`name/unit`
    /// under `Samples:`), as profile types `name:unit`.
    fn types(&self) -> Vec<String> {
        let raw = self.golden("raw");
        let line = raw
            .lines()
            .skip_while(|l| *l != "Samples:")
            .nth(1)
            .expect("a Samples: line");
        line.split_whitespace()
            .map(|t| t.replacen('/', ":", 1))
            .collect()
    }

    /// `-top` of a type: function -> (flat, cum), and the total.
    fn top(&self, ty: &str) -> (BTreeMap<String, (i64, i64)>, i64) {
        parse_top(&self.golden(&format!("top.{}", kind(ty))))
    }

    /// A service name per file, so one selector picks one file.
    fn service(&self) -> String {
        format!("{}-{}", self.dir, self.stem)
    }
}

/// `-traces`: root-first stack -> summed value, zero sums dropped. Label
/// lines (`key:  value`; ddtrace's keys have spaces: `thread name:`) are
/// skipped: a sample's first line is the one whose first word is a value.
fn stacks_of_traces(text: &str) -> BTreeMap<Vec<String>, i64> {
    fn value(s: &str) -> Option<i64> {
        s.trim_end_matches(|c: char| c.is_ascii_alphabetic())
            .parse()
            .ok()
    }
    let mut out = BTreeMap::new();
    for block in text
        .split("-----------+-------------------------------------------------------")
        .skip(1)
    {
        let mut v = None;
        let mut stack = Vec::new();
        for line in block.lines().filter(|l| !l.trim().is_empty()) {
            if v.is_none() {
                let t = line.trim_start();
                let (first, rest) = t.split_once(char::is_whitespace).unwrap_or((t, ""));
                if let Some(x) = value(first) {
                    v = Some(x);
                    stack.push(rest.trim().to_string());
                }
                continue;
            }
            stack.push(line.trim().to_string());
        }
        let Some(v) = v else { continue };
        // pprof marks inlined frames; the name is the rest.
        let mut stack: Vec<String> = stack
            .into_iter()
            .map(|f| f.trim_end_matches(" (inline)").to_string())
            .collect();
        stack.reverse();
        *out.entry(stack).or_insert(0) += v;
    }
    out.retain(|_, v| *v != 0);
    out
}

fn kind(ty: &str) -> &str {
    ty.split(':').next().unwrap()
}

/// The exporters' types and units, as written (an oracle apart from the
/// goldens: what each exporter is documented to write).
#[test]
fn every_exporters_sample_types_are_read_as_written() {
    let want: [&[&str]; 8] = [
        &["sample:count", "wall:nanoseconds", "cpu:nanoseconds"],
        &["sample:count", "wall:nanoseconds"],
        &["inuse_objects:count", "inuse_space:bytes"],
        &["samples:count", "cpu:nanoseconds"],
        &[
            "cpu-time:nanoseconds",
            "cpu-samples:count",
            "wall-time:nanoseconds",
            "wall-samples:count",
            "exception-samples:count",
            "lock-acquire-wait:nanoseconds",
            "lock-acquire:count",
            "lock-release-hold:nanoseconds",
            "lock-release:count",
            "alloc-space:bytes",
            "alloc-samples:count",
            "heap-space:bytes",
            "heap-live-samples:count",
            "gpu-time:nanoseconds",
            "gpu-samples:count",
            "gpu-space:bytes",
            "gpu-alloc-samples:count",
            "gpu-flops:count",
            "gpu-flops-samples:count",
        ],
        // async-profiler: one type, named by the JFR event; with `--total`
        // the weight's unit.
        &["cpu:count"],
        &["allocations:bytes"],
        &["locks:nanoseconds"],
    ];
    for (e, want) in EXPORTS.iter().zip(want) {
        assert_eq!(e.types(), want, "{}/{}", e.dir, e.file);
        let p = flamehouse::formats::pprof::read_file(&e.path(), &Default::default())
            .unwrap_or_else(|err| panic!("{err}"));
        let got: Vec<String> = p
            .sample_types
            .iter()
            .map(|t| format!("{}:{}", t.kind, t.unit))
            .collect();
        assert_eq!(got, want, "{}/{}", e.dir, e.file);
    }
}

/// Through the library: every type with a non-zero total is stored as its
/// profile type, and its top functions equal `go tool pprof -top` (flat,
/// cum, the stored total), its flame graph's stacks `-traces` summed per
/// stack; a type all of whose values are zero (ddtrace's GPU, lock and
/// exception types here) is a type of the profile with total 0 and no
/// functions, as `-top` shows it.
#[test]
fn exports_load_and_equal_go_tool_pprof() {
    let db = "fh_cp_exports";
    fresh(db);
    let o = qopts(db);
    let mut checked = 0;
    let mut times = BTreeMap::new();
    for e in &EXPORTS {
        let opts = ContinuousOptions {
            service: Some(e.service()),
            time_ns: Some((now_ms() - 3_600_000) * 1_000_000),
            ..copts(db)
        };
        let s = load_pprof(engine(), &e.path(), &opts)
            .unwrap_or_else(|err| panic!("{}/{}: {err}", e.dir, e.file));
        let ms = profile_ms(db, s.profile_id);
        times.insert(e.service(), ms);
        let types = e.types();
        let sel = format!("{{service=\"{}\"}}", e.service());
        for ty in &types {
            let (want, total) = e.top(ty);
            let got = top(&top_functions_sql(&o, &around(ty, ms, &sel), None, 0).unwrap());
            assert_eq!(got, want, "{}/{} {ty}", e.dir, e.file);
            if total == 0 {
                assert!(want.is_empty());
                continue;
            }
            assert!(
                s.types.contains(ty),
                "{}/{} {ty}: {:?}",
                e.dir,
                e.file,
                s.types
            );
            let stored: i64 = flamehouse_tests::q(&format!(
                "SELECT sum(total) FROM {db}.cp_profiles FINAL WHERE profile_id = {} \
                 AND profile_type = '{ty}'",
                s.profile_id
            ))
            .trim()
            .parse()
            .unwrap();
            assert_eq!(stored, total, "{}/{} {ty}: total", e.dir, e.file);
            let t = tree(&flame_sql(&o, &around(ty, ms, &sel), 0));
            assert_eq!(
                t[&Vec::<String>::new()][0],
                total,
                "{}/{} {ty}: root",
                e.dir,
                e.file
            );
            if let Some(traces) = e.traces(kind(ty)) {
                let want = stacks_of_traces(&traces);
                assert!(!want.is_empty(), "{}/{} {ty}", e.dir, e.file);
                assert_eq!(selves(&t), want, "{}/{} {ty}: stacks", e.dir, e.file);
            }
            checked += 1;
        }
        // Every type of the file, an all-zero one included (its total 0).
        assert_eq!(s.types, types, "{}/{}", e.dir, e.file);
    }
    // node wall 3 + lines 2 + heap 2, rust 2, python: cpu, wall, alloc and
    // heap (time and samples each) = 8 of 19, java 3.
    assert_eq!(checked, 20);

    // The exporters' sample labels select as `-tagfocus` filters: Node's
    // profiler context (`handler`), pprof-rs' thread names (`thread`),
    // async-profiler's (`[worker-a tid=23]`, a regex as pprof's).
    for (e, label, ty, golden) in [
        (
            &EXPORTS[0],
            r#"handler="a""#,
            "cpu:nanoseconds",
            "tagfocus.handler_a.top.cpu",
        ),
        (
            &EXPORTS[3],
            r#"thread="worker-a""#,
            "cpu:nanoseconds",
            "tagfocus.thread_worker-a.top.cpu",
        ),
        (
            &EXPORTS[5],
            r#"thread=~"\\[worker-a .*""#,
            "cpu:count",
            "tagfocus.thread_worker-a.top.cpu",
        ),
    ] {
        let (want, _) = parse_top(&e.golden(golden));
        assert!(!want.is_empty(), "{golden}");
        let sel = format!("{{service=\"{}\", {label}}}", e.service());
        let got =
            top(&top_functions_sql(&o, &around(ty, times[&e.service()], &sel), None, 0).unwrap());
        assert_eq!(got, want, "{}/{} {label}", e.dir, e.file);
    }
}

// ---------------------------------------------------------------------------
// The CLI, each command its own process.

/// `flamehouse profile top` rows: function -> (self, total), and the sum
/// of self.
fn parse_cli_top(text: &str) -> (BTreeMap<String, (i64, i64)>, i64) {
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

/// `go tool pprof -symbolize=none FLAGS FILE`, nothing hidden.
fn pprof(flags: &[&str], file: &Path) -> String {
    let o = Command::new("go")
        .args(["tool", "pprof", "-symbolize=none"])
        .args(flags)
        .args(["-nodefraction=0", "-edgefraction=0", "-nodecount=1000000"])
        .arg(file)
        .output()
        .expect("go tool pprof runs (scripts/setup-tools.sh installs Go)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `go tool pprof FLAGS FILE` as a user runs it: symbolization on (no
/// `-symbolize=none`; pprof then demangles every function whose name is
/// its system name), binaries looked up in an empty directory only, and
/// no network (a file source has no symbolz server).
fn pprof_symbolizing(flags: &[&str], file: &Path) -> String {
    static EMPTY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let empty = EMPTY.get_or_init(|| temp_path("cpx-no-binaries"));
    let o = Command::new("go")
        .args(["tool", "pprof"])
        .args(flags)
        .args(["-nodefraction=0", "-edgefraction=0", "-nodecount=1000000"])
        .arg(file)
        .env("PPROF_BINARY_PATH", empty)
        .output()
        .expect("go tool pprof runs (scripts/setup-tools.sh installs Go)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn unit_flag(ty: &str) -> &'static str {
    match ty.rsplit(':').next() {
        Some("nanoseconds") => "-unit=ns",
        Some("bytes") => "-unit=B",
        _ => "-unit=count",
    }
}

/// All eight files in one `flamehouse load` (format detected, the zstd one
/// included); per file and type `profile top` equals `go tool pprof -top`;
/// `profile export` of each file's profile, read back by `go tool pprof
/// -top`, equals it too.
#[test]
fn cli_load_top_and_export_equal_go_tool_pprof() {
    let data = temp_path("cpx-cli");
    // The fixtures keep their recording times: a retention that keeps them.
    fh(&data, &["init", "--retention", "36500"]);
    let paths: Vec<String> = EXPORTS
        .iter()
        .map(|e| e.path().display().to_string())
        .collect();
    let mut args = vec!["load"];
    args.extend(paths.iter().map(String::as_str));
    let out = fh(&data, &args);
    assert!(
        out.lines()
            .last()
            .unwrap()
            .starts_with("continuous: 8 files, 8 profiles"),
        "{out}"
    );
    assert!(out.contains("wall:nanoseconds"), "{out}");
    assert!(out.contains("cpu-time:nanoseconds"), "{out}");
    for e in &EXPORTS {
        // The profile's own millisecond: just this file.
        let ts = fh(
            &data,
            &[
                "sql",
                &format!(
                    "SELECT toString(min(ts)), toString(min(ts) + toIntervalMillisecond(1)) \
                     FROM flamehouse.cp_profiles WHERE endsWith(source, '/{}/{}')",
                    e.dir, e.file
                ),
            ],
        );
        let (from, to) = ts.trim().split_once('\t').expect("a stored profile");
        let stored = fh(
            &data,
            &[
                "sql",
                &format!(
                    "SELECT profile_type, sum(total) FROM flamehouse.cp_profiles FINAL \
                     WHERE endsWith(source, '/{}/{}') AND ts = '{from}' GROUP BY 1 ORDER BY 1",
                    e.dir, e.file
                ),
            ],
        );
        let mut live: Vec<String> = Vec::new();
        let mut want_stored = Vec::new();
        for ty in e.types() {
            let (want, total) = e.top(&ty);
            if total != 0 {
                live.push(ty.clone());
            }
            want_stored.push(format!("{ty}\t{total}"));
            let got = fh(
                &data,
                &["profile", "top", "--type", &ty, "--from", from, "--to", to],
            );
            let (got, sum) = parse_cli_top(&got);
            assert_eq!(got, want, "{}/{} {ty}", e.dir, e.file);
            // pprof's "accounting for": samples with an empty stack count in
            // the total (stored below) but in no function.
            let flat: i64 = want.values().map(|v| v.0).sum();
            assert_eq!(sum, flat, "{}/{} {ty}", e.dir, e.file);
        }
        // Every type is listed with its total, an all-zero one (ddtrace's
        // GPU, lock and exception types) with 0, as `-raw` lists it.
        want_stored.sort_unstable();
        assert_eq!(
            stored.lines().collect::<Vec<_>>(),
            want_stored,
            "{}/{}",
            e.dir,
            e.file
        );

        // Export, read back by pprof.
        let x = data.join(format!("{}-{}.pb.gz", e.dir, e.stem));
        fh(
            &data,
            &[
                "profile",
                "export",
                "--from",
                from,
                "--to",
                to,
                "--out",
                &x.display().to_string(),
            ],
        );
        for ty in &live {
            let index = format!("-sample_index={}", kind(ty));
            let got = parse_top(&pprof(&[unit_flag(ty), &index, "-top"], &x));
            assert_eq!(got, e.top(ty), "{}/{} {ty}: export", e.dir, e.file);
            // And as pprof reads it by default, symbolizing: the names
            // stay the input's (the export's functions have no system
            // name, which pprof's demangler would otherwise rewrite:
            // `<u64>::wrapping_mul` to `::wrapping_mul`, `<module>` to
            // `<unknown>`, three `call_once` impls to one).
            let got = parse_top(&pprof_symbolizing(&[unit_flag(ty), &index, "-top"], &x));
            assert_eq!(
                got,
                e.top(ty),
                "{}/{} {ty}: export, symbolized",
                e.dir,
                e.file
            );
        }
    }

    // ddtrace's file cut in half: one line naming the file and zstd, exit
    // 1, nothing stored.
    let count = || {
        fh(
            &data,
            &["sql", "SELECT count() FROM flamehouse.cp_profiles"],
        )
    };
    let before = count();
    let cut = data.join("cut.pprof");
    let bytes = std::fs::read(EXPORTS[4].path()).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let out = fh_out(&data, &["load", &cut.display().to_string()]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&cut.display().to_string()) && err.contains("zstd"),
        "{err}"
    );
    assert_eq!(count(), before);
}

/// ddtrace's live heap (`heap-space`, `heap-live-samples`: Datadog's "Heap
/// Live Size") is a gauge, as Go's `inuse_*` is: the same Python profile
/// uploaded twice in a range shows one heap (`go tool pprof -top` of the
/// file), where its additive types (`cpu-time`, `wall-time`) add up to
/// twice the file's. (They were summed: two uploads showed two heaps.)
#[test]
fn ddtrace_live_heap_is_averaged_over_uploads() {
    let e = EXPORTS.iter().find(|e| e.dir == "python").unwrap();
    let data = temp_path("cpx-ddtrace-heap");
    let file = e.path().display().to_string();
    let t = (now_ms() - 3_600_000) / 1000;
    for at in [t, t + 600] {
        fh(
            &data,
            &["load", "--service", "py", "--time", &at.to_string(), &file],
        );
    }
    for (ty, uploads) in [
        ("heap-space:bytes", 1),
        ("heap-live-samples:count", 1),
        ("cpu-time:nanoseconds", 2),
        ("wall-time:nanoseconds", 2),
    ] {
        let (want, total) = e.top(ty);
        assert!(total > 0, "{ty}");
        let want: BTreeMap<String, (i64, i64)> = want
            .into_iter()
            .map(|(f, (flat, cum))| (f, (flat * uploads, cum * uploads)))
            .collect();
        let got = fh(&data, &["profile", "top", "--type", ty, "--from", "now-2h"]);
        assert_eq!(parse_cli_top(&got).0, want, "{ty}");
    }
}
