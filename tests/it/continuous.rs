//! Continuous profiles end to end: the committed Go profiles
//! (`fixtures/continuous/pprof/`) go through the pprof row builder
//! (`flamehouse::ingest::continuous`) into the shared engine, each test in
//! its own database, and the queries of `flamehouse::continuous_query` are
//! compared with `go tool pprof`'s own output for the same files: `-top`
//! (every sample type), `-traces`, `-tagfocus`, `-diff_base`, `-peek`.
//!
//! The goldens are parsed here, independently of the decoder's tests; where
//! a golden for a selector does not exist (negation, regexes), the oracle is
//! the `-traces` golden filtered by its own printed labels.

use flamehouse::continuous_query::{
    by_label_sql, diff_sql, flame_sql, function_series_sql, label_values_sql, profile_flame_sql,
    profile_list_sql, sandwich_sql, top_functions_sql, QueryOptions, SandwichSide, Selection,
    Selector, Source,
};
use flamehouse::ingest::continuous::{
    load_pprof, retention_days, set_retention, ContinuousOptions, ContinuousSummary,
};
use flamehouse::storage::schema::{migrate, SchemaOptions, DEFAULT_RETENTION_DAYS};
use flamehouse_tests::*;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/continuous/pprof")
}

pub(crate) fn golden(name: &str) -> String {
    let p = dir().join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

// ---------------------------------------------------------------------------
// Golden parsers.

/// An exact value as `go tool pprof -unit=ns|B|count` prints it
/// (`590000000ns`, `3328000B`, `59`, `0`, `-70000000ns`).
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

/// `-top`: function -> (flat, cum), and the total of the header line.
pub(crate) fn parse_top(text: &str) -> (BTreeMap<String, (i64, i64)>, i64) {
    let mut out = BTreeMap::new();
    let mut total = None;
    let mut rows = false;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Showing nodes accounting for ") {
            // "..., 100% of 590000000ns total"
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
        let name = f[5..].join(" ");
        out.insert(fname(&name), (value(f[0]), value(f[3])));
    }
    (out, total.expect("a total line"))
}

/// One `-traces` sample: string labels, value, frames root first.
#[derive(Debug, Clone)]
pub(crate) struct Trace {
    pub(crate) labels: BTreeMap<String, String>,
    pub(crate) value: i64,
    pub(crate) stack: Vec<String>,
}

pub(crate) fn parse_traces(text: &str) -> Vec<Trace> {
    let mut out = Vec::new();
    let mut cur: Option<Trace> = None;
    let mut labels = BTreeMap::new();
    let finish = |cur: &mut Option<Trace>, out: &mut Vec<Trace>| {
        if let Some(mut t) = cur.take() {
            t.stack.reverse();
            out.push(t);
        }
    };
    // Header lines come before the first separator.
    let mut started = false;
    for line in text.lines() {
        if line.starts_with("-----------+") {
            finish(&mut cur, &mut out);
            labels = BTreeMap::new();
            started = true;
            continue;
        }
        if !started {
            continue;
        }
        let Some(t) = cur.as_mut() else {
            let toks: Vec<&str> = line.split_whitespace().collect();
            if toks.is_empty() {
                continue;
            }
            if toks[0].ends_with(':') {
                labels.insert(
                    toks[0].trim_end_matches(':').to_string(),
                    toks[1..].join(" "),
                );
            } else {
                cur = Some(Trace {
                    labels: labels.clone(),
                    value: value(toks[0]),
                    stack: vec![fname(&toks[1..].join(" "))],
                });
            }
            continue;
        };
        if !line.trim().is_empty() {
            t.stack.push(fname(line));
        }
    }
    finish(&mut cur, &mut out);
    out
}

/// Root-first stack -> summed value, zero sums dropped.
pub(crate) fn per_stack(
    traces: &[Trace],
    keep: impl Fn(&Trace) -> bool,
) -> BTreeMap<Vec<String>, i64> {
    let mut m = BTreeMap::new();
    for t in traces.iter().filter(|t| keep(t)) {
        *m.entry(t.stack.clone()).or_insert(0) += t.value;
    }
    m.retain(|_, v| *v != 0);
    m
}

/// Flat and cum per function from root-first stacks (cum once per stack).
pub(crate) fn top_of(stacks: &BTreeMap<Vec<String>, i64>) -> BTreeMap<String, (i64, i64)> {
    let mut m: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (st, v) in stacks {
        if let Some(leaf) = st.last() {
            m.entry(leaf.clone()).or_default().0 += v;
        }
        let mut seen = std::collections::BTreeSet::new();
        for f in st {
            if seen.insert(f) {
                m.entry(f.clone()).or_default().1 += v;
            }
        }
    }
    m.retain(|_, (f, c)| *f != 0 || *c != 0);
    m
}

/// `-peek`: callers (name, value), the function's (flat, cum), callees.
struct Peek {
    callers: BTreeMap<String, i64>,
    flat: i64,
    cum: i64,
    callees: BTreeMap<String, i64>,
}

fn parse_peek(text: &str) -> Peek {
    let mut p = Peek {
        callers: BTreeMap::new(),
        flat: 0,
        cum: 0,
        callees: BTreeMap::new(),
    };
    let mut seen_fn = false;
    for line in text.lines() {
        let Some((left, name)) = line.split_once('|') else {
            continue;
        };
        let toks: Vec<&str> = left.split_whitespace().collect();
        if toks.is_empty() || toks[0] == "flat" {
            continue;
        }
        if toks.len() >= 5 {
            p.flat = value(toks[0]);
            p.cum = value(toks[3]);
            seen_fn = true;
        } else if seen_fn {
            p.callees.insert(fname(name), value(toks[0]));
        } else {
            p.callers.insert(fname(name), value(toks[0]));
        }
    }
    assert!(seen_fn, "no function line in the -peek output");
    p
}

// ---------------------------------------------------------------------------
// Engine helpers.

/// A new database, the default retention.
fn fresh_default(db: &str) -> SchemaOptions {
    q(&format!("DROP DATABASE IF EXISTS {db}"));
    let opts = SchemaOptions {
        database: db.parse().unwrap(),
        cluster: None,
    };
    assert_eq!(
        migrate(engine(), &opts).unwrap(),
        vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    );
    opts
}

/// A new database that keeps the fixtures whatever today's date.
pub(crate) fn fresh(db: &str) {
    let opts = fresh_default(db);
    // The fixtures keep the times they were recorded at (2026-12-01) and a
    // load does not store what is older than the retention: 100 years, so
    // these tests do not expire with the calendar.
    flamehouse::ingest::continuous::set_retention(engine(), &opts, 36500).unwrap();
}

pub(crate) fn copts(db: &str) -> ContinuousOptions {
    ContinuousOptions {
        database: db.parse().unwrap(),
        ..Default::default()
    }
}

pub(crate) fn load(file: &str, opts: &ContinuousOptions) -> ContinuousSummary {
    load_pprof(engine(), &dir().join(file), opts).unwrap_or_else(|e| panic!("load {file}: {e}"))
}

pub(crate) fn qopts(db: &str) -> QueryOptions {
    QueryOptions {
        database: db.parse().unwrap(),
        ..Default::default()
    }
}

/// The stored time of a profile (ms), from the profiles table.
pub(crate) fn profile_ms(db: &str, profile_id: u64) -> i64 {
    q(&format!(
        "SELECT toUnixTimestamp64Milli(any(ts)) FROM {db}.cp_profiles WHERE profile_id = {profile_id}"
    ))
    .trim()
    .parse()
    .unwrap()
}

/// A selection around one instant: [ms, ms + 1 s).
pub(crate) fn around(ty: &str, ms: i64, selector: &str) -> Selection {
    Selection {
        profile_type: ty.into(),
        from_ms: ms,
        to_ms: ms + 1000,
        selector: Selector::parse(selector).unwrap(),
    }
}

/// Runs a top-functions query: function -> (self, total).
pub(crate) fn top(sql: &str) -> BTreeMap<String, (i64, i64)> {
    q(sql)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                unescape_tsv(f[0]),
                (f[1].parse().unwrap(), f[2].parse().unwrap()),
            )
        })
        .filter(|(_, (s, t))| *s != 0 || *t != 0)
        .collect()
}

/// Runs a flame query; checks the tree and returns path -> values.
pub(crate) fn tree(sql: &str) -> BTreeMap<Vec<String>, Vec<i64>> {
    let tsv = q(sql);
    let rows: Vec<Row> = parse_rows(
        &tsv.lines()
            .map(|l| l.split_once('\t').unwrap().1)
            .collect::<Vec<_>>()
            .join("\n"),
    );
    check_tree(&rows)
}

/// Path -> self of a tree, non-zero selves, the root left out.
pub(crate) fn selves(t: &BTreeMap<Vec<String>, Vec<i64>>) -> BTreeMap<Vec<String>, i64> {
    t.iter()
        .filter(|(p, v)| !p.is_empty() && v[1] != 0)
        .map(|(p, v)| (p.clone(), v[1]))
        .collect()
}

pub(crate) const CPU: &str = "cpu:nanoseconds";

// ---------------------------------------------------------------------------
// The tests.

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Loads `file` under service `service` (plus `labels`); its time, ms.
pub(crate) fn load_as(
    db: &str,
    file: &str,
    service: &str,
    labels: &[(&str, &str)],
) -> (ContinuousSummary, i64) {
    let opts = ContinuousOptions {
        service: Some(service.into()),
        // An hour ago: the committed profiles' own times fall out of the
        // retention some day (`profile_time_is_the_files_own`).
        time_ns: Some((now_ms() - 3_600_000) * 1_000_000),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..copts(db)
    };
    let s = load(file, &opts);
    let ms = profile_ms(db, s.profile_id);
    (s, ms)
}

const PROFILES: [&str; 6] = ["cpu", "cpu2", "heap", "mutex", "block", "dropframes"];

/// Flat and cum of every function equal `go tool pprof -top`, for every
/// sample type of every committed Go profile (heap, mutex, block and the
/// drop_frames copy included), read from the samples (a 1-second range)
/// and from the per-minute rollup (a 2-day range); the stored totals equal
/// the header's.
#[test]
fn top_functions_equal_go_tool_pprof_top_for_every_sample_type() {
    let db = "fh_cp_top";
    fresh(db);
    let o = qopts(db);
    let mut checked = 0;
    for p in PROFILES {
        let (s, ms) = load_as(db, &format!("{p}.pb.gz"), p, &[]);
        for ty in &s.types {
            let kind = ty.split(':').next().unwrap();
            let (want, total) = parse_top(&golden(&format!("{p}.top.{kind}.txt")));
            let svc = format!("{{service=\"{p}\"}}");
            top_from_every_source(&o, &around(ty, ms, &svc), &want, &format!("{p} {ty}"));
            let stored: i64 = q(&format!(
                "SELECT total FROM {db}.cp_profiles FINAL WHERE profile_id = {} \
                 AND profile_type = '{ty}'",
                s.profile_id
            ))
            .trim()
            .parse()
            .unwrap();
            assert_eq!(stored, total, "{p} {ty}: total");
            checked += 1;
        }
    }
    assert_eq!(checked, 14);
}

/// Top functions of `raw` (one profile's instant) are `want` read from the
/// samples, from the hourly rollup with the samples at the edges (a 6-hour
/// range) and from the per-minute rollup (a 2-day range).
pub(crate) fn top_from_every_source(
    o: &QueryOptions,
    raw: &Selection,
    want: &BTreeMap<String, (i64, i64)>,
    what: &str,
) {
    assert_eq!(raw.source(o), Source::Raw);
    let widened = |half: i64| Selection {
        from_ms: raw.from_ms - half,
        to_ms: raw.from_ms + half,
        ..raw.clone()
    };
    let hours = widened(3 * 3_600_000);
    let sql = top_functions_sql(o, &hours, None, 0).unwrap();
    assert!(sql.contains("cp_samples_1h"), "{what}: {sql}");
    let long = widened(86_400_000);
    assert_eq!(long.source(o), Source::Rollup);
    for (sel, from) in [
        (raw, "samples"),
        (&hours, "hourly rollup"),
        (&long, "minute rollup"),
    ] {
        assert_eq!(
            top(&top_functions_sql(o, sel, None, 0).unwrap()),
            *want,
            "{what} from the {from}"
        );
    }
}

/// The flame graph's stacks (each path's self) equal `go tool pprof
/// -traces` summed per stack, for every sample type of the CPU and heap
/// profiles; the root equals the total.
#[test]
fn flame_graph_stacks_equal_go_tool_pprof_traces() {
    let db = "fh_cp_traces";
    fresh(db);
    let o = qopts(db);
    for p in ["cpu", "heap"] {
        let (s, ms) = load_as(db, &format!("{p}.pb.gz"), p, &[]);
        for ty in &s.types {
            let kind = ty.split(':').next().unwrap();
            let traces = parse_traces(&golden(&format!("{p}.traces.{kind}.txt")));
            assert!(traces.len() > 5, "{p} {kind}");
            let want = per_stack(&traces, |_| true);
            let t = tree(&flame_sql(
                &o,
                &around(ty, ms, &format!("{{service=\"{p}\"}}")),
                0,
            ));
            assert_eq!(selves(&t), want, "{p} {ty}");
            let (_, total) = parse_top(&golden(&format!("{p}.top.{kind}.txt")));
            assert_eq!(t[&Vec::<String>::new()][0], total, "{p} {ty}: root");
        }
    }
}

/// Label selectors equal `go tool pprof -tagfocus` (`handler=a` on -top,
/// `version=1.4.2` on -traces); regexes and negations equal the -traces
/// golden filtered by its own printed labels (a missing label is "").
#[test]
fn selectors_equal_go_tool_pprof_tagfocus() {
    let db = "fh_cp_tagfocus";
    fresh(db);
    let o = qopts(db);
    let (_, ms) = load_as(db, "cpu.pb.gz", "api", &[("region", "eu-west")]);
    let (want, _) = parse_top(&golden("cpu.tagfocus.handler_a.top.txt"));
    let sel = around(CPU, ms, r#"{handler="a"}"#);
    assert_eq!(top(&top_functions_sql(&o, &sel, None, 0).unwrap()), want);
    let want = per_stack(
        &parse_traces(&golden("cpu.tagfocus.version_1.4.2.traces.txt")),
        |_| true,
    );
    assert!(!want.is_empty());
    assert_eq!(
        top(&top_functions_sql(&o, &around(CPU, ms, r#"{version="1.4.2"}"#), None, 0).unwrap()),
        top_of(&want)
    );
    for s in [
        r#"{version="1.4.2"}"#,
        r#"{service="api", version=~"1\\.4\\.2"}"#,
        r#"{version=~".*2", handler!="a", region!~"us.*"}"#,
    ] {
        let t = tree(&flame_sql(&o, &around(CPU, ms, s), 0));
        assert_eq!(selves(&t), want, "{s}");
    }
    let all = parse_traces(&golden("cpu.traces.cpu.txt"));
    fn label(t: &Trace, k: &str) -> String {
        t.labels.get(k).cloned().unwrap_or_default()
    }
    type Keep = Box<dyn Fn(&Trace) -> bool>;
    let cases: Vec<(&str, Keep)> = vec![
        (
            r#"{handler!="a"}"#,
            Box::new(|t| label(t, "handler") != "a"),
        ),
        (
            r#"{handler=""}"#,
            Box::new(|t| label(t, "handler").is_empty()),
        ),
        (
            r#"{version!~"1\\.4\\.1"}"#,
            Box::new(|t| label(t, "version") != "1.4.1"),
        ),
        (
            r#"{handler=~"a|b"}"#,
            Box::new(|t| !label(t, "handler").is_empty()),
        ),
        // Anchored: "1.4" alone matches no version.
        (r#"{version=~"1\\.4"}"#, Box::new(|_| false)),
        (r#"{region="eu-west"}"#, Box::new(|_| true)),
        (r#"{region!="eu-west"}"#, Box::new(|_| false)),
        (r#"{service="other"}"#, Box::new(|_| false)),
    ];
    for (s, keep) in cases {
        let want = per_stack(&all, keep);
        let t = tree(&flame_sql(&o, &around(CPU, ms, s), 0));
        assert_eq!(selves(&t), want, "{s}");
    }
    // The pickers: every label with its number of series (the CPU profile
    // has three label sets: handler a, handler b, none).
    let labels = q(&label_values_sql(&o, CPU, ms, ms + 1000));
    assert_eq!(
        labels,
        "handler\ta\t1\nhandler\tb\t1\nregion\teu-west\t3\nservice\tapi\t3\nversion\t1.4.1\t1\n\
         version\t1.4.2\t1\n"
    );
}

/// Go heap profiles' numeric label `bytes` (object size) is kept per sample
/// with its unit: objects of at least 1 kB equal `-tagfocus=bytes=1kB:`.
#[test]
fn numeric_labels_keep_values_and_units() {
    let db = "fh_cp_numeric";
    fresh(db);
    let (s, _) = load_as(db, "heap.pb.gz", "heap", &[]);
    assert_eq!(
        q(&format!(
            "SELECT DISTINCT num_units FROM {db}.cp_profiles WHERE profile_id = {}",
            s.profile_id
        )),
        "{'bytes':'bytes'}\n"
    );
    let (want, _) = parse_top(&golden("heap.tagfocus.bytes_ge_1kB.top.txt"));
    let flat: BTreeMap<String, (i64, i64)> = q(&format!(
        "SELECT st.labels[-1] AS f, sum(x.value) FROM {db}.cp_samples AS x \
         ANY LEFT JOIN {db}.stacks AS st ON st.stack_id = x.stack_id \
         WHERE profile_type = 'alloc_space:bytes' AND num_labels['bytes'] >= 1024 \
         GROUP BY f ORDER BY f"
    ))
    .lines()
    .map(|l| {
        let (f, v) = l.split_once('\t').unwrap();
        (unescape_tsv(f), (v.parse().unwrap(), 0))
    })
    .collect();
    let want_flat: BTreeMap<String, (i64, i64)> = want
        .iter()
        .filter(|(_, (f, _))| *f != 0)
        .map(|(k, (f, _))| (k.clone(), (*f, 0)))
        .collect();
    assert_eq!(flat, want_flat);
}

/// Flat and cum per function of a diff tree: flat on each path's leaf of
/// (comparison self - baseline self), cum once per path through the
/// function (a node whose ancestors do not hold it).
pub(crate) fn diff_top(t: &BTreeMap<Vec<String>, Vec<i64>>) -> BTreeMap<String, (i64, i64)> {
    let mut m: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (path, v) in t {
        let Some(leaf) = path.last() else { continue };
        m.entry(leaf.clone()).or_default().0 += v[3] - v[1];
        if !path[..path.len() - 1].contains(leaf) {
            m.entry(leaf.clone()).or_default().1 += v[2] - v[0];
        }
    }
    m.retain(|_, (f, c)| *f != 0 || *c != 0);
    m
}

/// Flat and cum per function of the diff `{release="a"}` -> `{release="b"}`
/// over the range holding the profiles at `a_ms` and `b_ms`, one scan.
pub(crate) fn release_diff_top(
    o: &QueryOptions,
    a_ms: i64,
    b_ms: i64,
) -> BTreeMap<String, (i64, i64)> {
    let sel = |s: &str| Selection {
        profile_type: CPU.into(),
        from_ms: a_ms.min(b_ms),
        to_ms: a_ms.max(b_ms) + 1000,
        selector: Selector::parse(s).unwrap(),
    };
    let sql = diff_sql(
        o,
        &sel(r#"{release="a"}"#),
        &sel(r#"{release="b"}"#),
        0,
        false,
    )
    .unwrap();
    diff_top(&tree(&sql))
}

/// A diff of two selectors and a diff of two time ranges (each one scan)
/// equal `go tool pprof -diff_base cpu.pb.gz cpu2.pb.gz`; `normalize`
/// scales the baseline to the comparison's total.
#[test]
fn diffs_equal_go_tool_pprof_diff_base() {
    let db = "fh_cp_diff";
    fresh(db);
    let o = qopts(db);
    let (want, _) = parse_top(&golden("cpu2.diff_base_cpu.top.txt"));
    // Two selectors: the same service, release labels.
    let (_, a) = load_as(db, "cpu.pb.gz", "api", &[("release", "a")]);
    let (_, b) = load_as(db, "cpu2.pb.gz", "api", &[("release", "b")]);
    assert_eq!(release_diff_top(&o, a, b), want, "two selectors");
    // Two ranges: the same profiles an hour apart, no distinguishing label.
    let opts = |ms: i64| ContinuousOptions {
        service: Some("timed".into()),
        time_ns: Some(ms * 1_000_000),
        ..copts(db)
    };
    let t0 = now_ms() - 86_400_000;
    load_pprof(engine(), &dir().join("cpu.pb.gz"), &opts(t0)).unwrap();
    load_pprof(engine(), &dir().join("cpu2.pb.gz"), &opts(t0 + 3_600_000)).unwrap();
    let range = |ms: i64| around(CPU, ms, r#"{service="timed"}"#);
    let sql = diff_sql(&o, &range(t0), &range(t0 + 3_600_000), 0, false).unwrap();
    assert_eq!(diff_top(&tree(&sql)), want, "two ranges");
    // Long ranges (7-hour windows a day apart, on whole minutes) read the
    // rollups, one scan, no sample.
    let d0 = (now_ms() - 3 * 86_400_000) / 60_000 * 60_000;
    let at = |ms: i64| ContinuousOptions {
        service: Some("long".into()),
        time_ns: Some(ms * 1_000_000),
        ..copts(db)
    };
    load_pprof(engine(), &dir().join("cpu.pb.gz"), &at(d0 + 3_600_000)).unwrap();
    load_pprof(
        engine(),
        &dir().join("cpu2.pb.gz"),
        &at(d0 + 86_400_000 + 3_600_000),
    )
    .unwrap();
    let win = |ms: i64| Selection {
        profile_type: CPU.into(),
        from_ms: ms,
        to_ms: ms + 7 * 3_600_000,
        selector: Selector::parse(r#"{service="long"}"#).unwrap(),
    };
    assert_eq!(win(d0).source(&o), Source::Rollup);
    let sql = diff_sql(&o, &win(d0), &win(d0 + 86_400_000), 0, false).unwrap();
    assert!(
        sql.contains("cp_samples_1m") && !sql.contains("cp_samples "),
        "{sql}"
    );
    assert_eq!(diff_top(&tree(&sql)), want, "two long ranges");
    // Normalized: the baseline scaled to the comparison's total.
    let sql = diff_sql(&o, &range(t0), &range(t0 + 3_600_000), 0, true).unwrap();
    let t = tree(&sql);
    let root = &t[&Vec::<String>::new()];
    assert_eq!(root[0], root[2], "normalized root");
    // Only the baseline changed: the comparison side is the plain one.
    assert_eq!(root[2], parse_top(&golden("cpu2.top.cpu.txt")).1);
    // Types must agree.
    let e = diff_sql(&o, &range(t0), &around("samples:count", t0, ""), 0, false).unwrap_err();
    assert!(e.to_string().contains("different profile types"), "{e}");
}

/// The sandwich of a function equals `go tool pprof -peek`: the callers
/// tree's first level are the callers, the callees tree's the callees, the
/// root's value the function's cum and (callees side) its self the flat;
/// recursion (main.fib) is folded into the function.
#[test]
fn sandwich_equals_go_tool_pprof_peek() {
    let db = "fh_cp_sandwich";
    fresh(db);
    let o = qopts(db);
    let (_, ms) = load_as(db, "cpu.pb.gz", "api", &[]);
    let sel = around(CPU, ms, "");
    for (f, file) in [
        ("main.fib", "cpu.peek.fib.txt"),
        ("main.hashLoop", "cpu.peek.hashLoop.txt"),
    ] {
        let peek = parse_peek(&golden(file));
        let level1 = |t: &BTreeMap<Vec<String>, Vec<i64>>| -> BTreeMap<String, i64> {
            t.iter()
                .filter(|(p, _)| p.len() == 1)
                .map(|(p, v)| (p[0].clone(), v[0]))
                .collect()
        };
        let callers = tree(&sandwich_sql(&o, &sel, f, SandwichSide::Callers, 0));
        let callees = tree(&sandwich_sql(&o, &sel, f, SandwichSide::Callees, 0));
        assert_eq!(level1(&callers), peek.callers, "{f} callers");
        assert_eq!(level1(&callees), peek.callees, "{f} callees");
        let root = Vec::<String>::new();
        assert_eq!(callers[&root][0], peek.cum, "{f} cum");
        assert_eq!(callees[&root][0], peek.cum, "{f} cum");
        assert_eq!(callees[&root][1], peek.flat, "{f} flat");
    }
    // The root is labelled with the function.
    let rows = q(&sandwich_sql(
        &o,
        &sel,
        "main.fib",
        SandwichSide::Callers,
        0,
    ));
    assert!(rows.starts_with("1\t0\tmain.fib\t"), "{rows}");
}

/// A function regex keeps only the matching functions with shares of the
/// whole selection (the -top golden's values over its total).
#[test]
fn top_functions_filter_keeps_global_shares() {
    let db = "fh_cp_filter";
    fresh(db);
    let o = qopts(db);
    let (_, ms) = load_as(db, "cpu.pb.gz", "api", &[]);
    let (want, total) = parse_top(&golden("cpu.top.cpu.txt"));
    let sql = top_functions_sql(&o, &around(CPU, ms, ""), Some(r"^main\.(fib|mix)$"), 0).unwrap();
    let rows = q(&sql);
    let mut n = 0;
    for l in rows.lines() {
        let f: Vec<&str> = l.split('\t').collect();
        let (flat, cum) = want[f[0]];
        assert!(f[0] == "main.fib" || f[0] == "main.mix", "{l}");
        assert_eq!(
            (f[1].parse::<i64>().unwrap(), f[2].parse::<i64>().unwrap()),
            (flat, cum)
        );
        let share: f64 = f[4].parse().unwrap();
        assert!((share - cum as f64 / total as f64).abs() < 1e-9, "{l}");
        n += 1;
    }
    assert_eq!(n, 2, "{rows}");
    let e = top_functions_sql(&o, &around(CPU, ms, ""), Some("("), 0).unwrap_err();
    assert!(e.to_string().starts_with("function regex"), "{e}");
}

/// Group by a label, per-function series, the profile list and opening one
/// profile, each against sums of the -traces golden.
#[test]
fn series_lists_and_single_profiles() {
    let db = "fh_cp_series";
    fresh(db);
    let o = qopts(db);
    let (s, ms) = load_as(db, "cpu.pb.gz", "api", &[]);
    let all = parse_traces(&golden("cpu.traces.cpu.txt"));
    let sum = |keep: &dyn Fn(&Trace) -> bool| -> i64 {
        all.iter().filter(|t| keep(t)).map(|t| t.value).sum()
    };
    // By handler over the whole range (step 0): one row per value; samples
    // without the label (background work, and the empty stacks -traces does
    // not print, which the total below includes) under "".
    let sql = by_label_sql(&o, &around(CPU, ms, ""), "handler", 0).unwrap();
    let rows: BTreeMap<String, i64> = q(&sql)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[1].to_string(), f[2].parse().unwrap())
        })
        .collect();
    let (_, total) = parse_top(&golden("cpu.top.cpu.txt"));
    assert_eq!(
        rows["a"],
        sum(&|t| t.labels.get("handler").is_some_and(|h| h == "a"))
    );
    assert_eq!(
        rows["b"],
        sum(&|t| t.labels.get("handler").is_some_and(|h| h == "b"))
    );
    assert_eq!(rows.values().sum::<i64>(), total);
    // A key stored labels may have (pprof's `a'b`) reaches SQL as an
    // escaped alias and a string literal: it runs, with the one "" series.
    let quoted = by_label_sql(&o, &around(CPU, ms, ""), "a'b`c", 0).unwrap();
    let one = q(&quoted);
    assert_eq!(one.lines().count(), 1, "{one}");
    assert!(by_label_sql(&o, &around(CPU, ms, ""), "a\nb", 0).is_err());
    // The same from the rollup (a 2-day range), by hour.
    let long = Selection {
        from_ms: ms - 86_400_000,
        to_ms: ms + 86_400_000,
        ..around(CPU, ms, "")
    };
    assert_eq!(long.source(&o), Source::Rollup);
    let mut from_rollup: BTreeMap<String, i64> = BTreeMap::new();
    for l in q(&by_label_sql(&o, &long, "handler", 3600).unwrap()).lines() {
        let f: Vec<&str> = l.split('\t').collect();
        *from_rollup.entry(f[1].to_string()).or_default() += f[2].parse::<i64>().unwrap();
    }
    assert_eq!(from_rollup, rows);
    // Per-function totals: cum of the -top golden, in one step.
    let (want, _) = parse_top(&golden("cpu.top.cpu.txt"));
    let sql = function_series_sql(
        &o,
        &around(CPU, ms, ""),
        &["main.fib", "main.hashLoop"],
        3600,
    );
    let got: BTreeMap<String, i64> = q(&sql)
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[1].to_string(), f[2].parse().unwrap())
        })
        .collect();
    assert_eq!(got["main.fib"], want["main.fib"].1);
    assert_eq!(got["main.hashLoop"], want["main.hashLoop"].1);
    let sql = function_series_sql(&o, &long, &["main.fib"], 600);
    let fib: i64 = q(&sql)
        .lines()
        .map(|l| l.split('\t').nth(2).unwrap().parse::<i64>().unwrap())
        .sum();
    assert_eq!(fib, want["main.fib"].1, "from the rollup");
    // The list: one row per type, with the file's header.
    let list = q(&profile_list_sql(&o, CPU, Some("api"), ms, ms + 1));
    let f: Vec<&str> = list.trim_end().split('\t').collect();
    assert_eq!(list.lines().count(), 1, "{list}");
    assert_eq!(f[0], s.profile_id.to_string());
    assert_eq!(f[4], "10000000", "period");
    assert_eq!(f[5], total.to_string());
    assert_eq!(q(&profile_list_sql(&o, CPU, Some("other"), ms, ms + 1)), "");
    // The view gives the same list.
    let view = q(&format!(
        "SELECT profile_id, total FROM {db}.cp_profile_list(profile_type = '{CPU}', service = '', \
         t1 = fromUnixTimestamp64Milli(toInt64({ms}), 'UTC'), \
         t2 = fromUnixTimestamp64Milli(toInt64({}), 'UTC'))",
        ms + 1
    ));
    assert_eq!(view, format!("{}\t{total}\n", s.profile_id));
    // Opening it: the same tree as the selection.
    let one = tree(&profile_flame_sql(&o, s.profile_id, CPU, 0));
    assert_eq!(selves(&one), per_stack(&all, |_| true));
    // The views with an equality map agree with the builder.
    let view = |name: &str, m: &str, extra: &str| {
        format!(
            "SELECT * FROM {db}.{name}(profile_type = '{CPU}', \
             t1 = fromUnixTimestamp64Milli(toInt64({ms}), 'UTC'), \
             t2 = fromUnixTimestamp64Milli(toInt64({}), 'UTC'), match = {m}{extra})",
            ms + 1000
        )
    };
    assert_eq!(
        tree(&view("cp_flame", "map('handler', 'a')", ", max_nodes = 0")),
        tree(&flame_sql(&o, &around(CPU, ms, r#"{handler="a"}"#), 0))
    );
    assert_eq!(
        top(&view("cp_top_functions", "map()", ", limit = 1000")),
        want
    );
    // The views' rollup branch: a 2-day range.
    let long_view = format!(
        "SELECT * FROM {db}.cp_flame(profile_type = '{CPU}', \
         t1 = fromUnixTimestamp64Milli(toInt64({}), 'UTC'), \
         t2 = fromUnixTimestamp64Milli(toInt64({}), 'UTC'), match = map('handler', 'b'), \
         max_nodes = 0)",
        ms - 86_400_000,
        ms + 86_400_000
    );
    assert_eq!(
        tree(&long_view),
        tree(&flame_sql(&o, &around(CPU, ms, r#"{handler="b"}"#), 0))
    );
}

/// Hostile selectors are refused, or their values quoted so they match
/// exactly what was stored: a label value with quotes, backslashes and
/// `'); DROP` is found by equality and by an escaped regex, and the
/// tables are all still there.
#[test]
fn hostile_selectors_are_refused_or_quoted() {
    let db = "fh_cp_hostile";
    fresh(db);
    let o = qopts(db);
    let nasty = r#"it's a \"quote\" \\ '); DROP TABLE fh_cp_hostile.cp_samples; --"#;
    let (_, ms) = load_as(db, "cpu.pb.gz", "api", &[("note", nasty)]);
    let (_, total) = parse_top(&golden("cpu.top.cpu.txt"));
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let root = |s: &str| tree(&flame_sql(&o, &around(CPU, ms, s), 0))[&Vec::<String>::new()][0];
    assert_eq!(root(&format!("{{note=\"{}\"}}", esc(nasty))), total);
    assert_eq!(
        root(&format!("{{note=~\"{}\"}}", esc(&regex::escape(nasty)))),
        total
    );
    assert_eq!(root(&format!("{{note!=\"{}\"}}", esc(nasty))), 0);
    assert_eq!(
        root(r#"{note="x'); DROP TABLE fh_cp_hostile.cp_samples; --"}"#),
        0
    );
    assert_eq!(root(r#"{handler="\\'"}"#), 0);
    for bad in [
        r#"{note="a"}'); DROP TABLE fh_cp_hostile.cp_samples; --"#,
        r#"{note`="a"}"#,
        r#"{note="a\'"}"#,
        r#"{labels['x']="a"}"#,
        r#"{note=~"(?P<x"}"#,
    ] {
        let e = Selector::parse(bad).unwrap_err().to_string();
        assert!(e.starts_with("selector "), "{bad}: {e}");
    }
    assert_eq!(
        q(&format!(
            "SELECT count() FROM system.tables WHERE database = '{db}' AND name LIKE 'cp_%'"
        )),
        // Migrations 6-9 and 11 make 18 `cp_*` tables and views (9 adds
        // the two `*_matching` views, 11 `cp_stacks`): none dropped.
        "18\n"
    );
    assert!(q(&format!("SELECT count() FROM {db}.cp_samples")).trim() != "0");
}

/// A profile is stored once however often it is loaded; a bad file is one
/// line naming it and stores nothing; the retention is the documented
/// default and changes with `set_retention`.
#[test]
fn loads_are_exact_and_retention_is_set() {
    let db = "fh_cp_exact";
    fresh(db);
    let counts = || {
        q(&format!(
            "SELECT (SELECT count() FROM {db}.cp_samples), (SELECT count() FROM {db}.cp_samples_1m), \
             (SELECT count() FROM {db}.cp_series), (SELECT count() FROM {db}.cp_profiles), \
             (SELECT count() FROM {db}.stacks), (SELECT count() FROM {db}.frames), \
             (SELECT count() FROM {db}.cp_label_values)"
        ))
    };
    let s = load("cpu.pb.gz", &copts(db));
    let first = counts();
    assert!(
        first.starts_with(&format!("{}\t", s.sample_rows)),
        "{first}"
    );
    load("cpu.pb.gz", &copts(db));
    // The same profile raw (`cpu.pb` is `cpu.pb.gz` gunzipped): the same
    // id, nothing new (it was another profile, stored twice).
    let raw = load("cpu.pb", &copts(db));
    assert_eq!(raw.profile_id, s.profile_id);
    assert_eq!(counts(), first);
    assert_eq!(
        q(&format!(
            "SELECT uniqExact(profile_id), count() FROM {db}.cp_profiles"
        )),
        "1\t2\n"
    );
    // Same bytes again: nothing new.
    let before = counts();
    load("cpu.pb.gz", &copts(db));
    assert_eq!(counts(), before);
    // A corrupt file: one line naming it, nothing stored.
    let bad = std::env::temp_dir().join(format!("fh-cp-bad-{}.pb", std::process::id()));
    std::fs::write(&bad, b"\x0a\x05\x08\x01").unwrap();
    let e = load_pprof(engine(), &bad, &copts(db))
        .unwrap_err()
        .to_string();
    let _ = std::fs::remove_file(&bad);
    assert!(e.contains(&bad.display().to_string()), "{e}");
    assert!(!e.contains('\n'), "{e}");
    assert_eq!(counts(), before);
    // Retention: a new database's default, then what `fresh` and
    // `set_retention` set.
    let plain = format!("{db}_plain");
    fresh_default(&plain);
    assert_eq!(
        retention_days(engine(), &plain.parse().unwrap()).unwrap(),
        Some(DEFAULT_RETENTION_DAYS)
    );
    let dbi: flamehouse::Ident = db.parse().unwrap();
    assert_eq!(retention_days(engine(), &dbi).unwrap(), Some(36500));
    let so = SchemaOptions {
        database: dbi.clone(),
        cluster: None,
    };
    set_retention(engine(), &so, 7).unwrap();
    assert_eq!(retention_days(engine(), &dbi).unwrap(), Some(7));
    assert!(set_retention(engine(), &so, 0).is_err());
    let ttl = q(&format!(
        "SELECT name FROM system.tables WHERE database = '{db}' AND name LIKE 'cp_%' \
         AND engine LIKE '%MergeTree' AND create_table_query LIKE '%ttl_only_drop_parts = 1%' \
         AND create_table_query LIKE '%PARTITION BY%' ORDER BY name"
    ));
    assert_eq!(
        ttl,
        "cp_label_values\ncp_profiles\ncp_samples\ncp_samples_1h\ncp_samples_1m\ncp_series\ncp_series_profiles\ncp_stacks\n"
    );
    // Every one of them follows `set_retention` (cp_stacks, migration 11,
    // included).
    let ttl7 = q(&format!(
        "SELECT name FROM system.tables WHERE database = '{db}' AND name LIKE 'cp_%' \
         AND engine LIKE '%MergeTree' AND match(create_table_query, 'TTL .*(toIntervalDay\\(7\\)|INTERVAL 7 DAY)') \
         ORDER BY name"
    ));
    assert_eq!(ttl7, ttl);
}

/// Profiles older than the retention are dropped as whole partitions:
/// a profile dated 40 days ago is gone after the TTL runs; today's stays.
#[test]
fn expired_days_drop_whole_partitions() {
    let db = "fh_cp_ttl";
    fresh_default(db);
    let now_ms = now_ms();
    for (ms, svc) in [(now_ms - 40 * 86_400_000, "old"), (now_ms, "new")] {
        let o = ContinuousOptions {
            service: Some(svc.into()),
            time_ns: Some(ms * 1_000_000),
            ..copts(db)
        };
        load_pprof(engine(), &dir().join("cpu.pb.gz"), &o).unwrap();
    }
    for t in [
        "cp_samples",
        "cp_samples_1m",
        "cp_samples_1h",
        "cp_series",
        "cp_profiles",
        "cp_label_values",
    ] {
        q(&format!("OPTIMIZE TABLE {db}.{t} FINAL"));
        assert_eq!(
            q(&format!(
                "SELECT DISTINCT service FROM {db}.{t} ORDER BY service"
            )),
            "new\n",
            "{t}"
        );
    }
}

/// Without a time given, a profile is stored at its own `time_nanos`
/// (millisecond precision), with its duration and period.
#[test]
fn profile_time_is_the_files_own() {
    let db = "fh_cp_time";
    fresh(db);
    let so = SchemaOptions {
        database: db.parse().unwrap(),
        cluster: None,
    };
    // Kept whatever the day the test runs.
    set_retention(engine(), &so, 36_500).unwrap();
    let s = load("cpu.pb.gz", &copts(db));
    let p = flamehouse::formats::pprof::read_file(&dir().join("cpu.pb.gz"), &Default::default())
        .unwrap();
    assert!(p.time_nanos > 0);
    assert_eq!(
        q(&format!(
            "SELECT toUnixTimestamp64Milli(ts), duration_ns, period, period_type FROM {db}.cp_profiles \
             WHERE profile_id = {} AND profile_type = 'cpu:nanoseconds'",
            s.profile_id
        )),
        format!(
            "{}\t{}\t{}\tcpu:nanoseconds\n",
            p.time_nanos.div_euclid(1_000_000),
            p.duration_nanos,
            p.period
        )
    );
}

/// `init --cluster` renders migration 6 with `ON CLUSTER` on every
/// statement, a Replicated engine on every MergeTree table and a
/// Distributed table in front of each sharded one, and the engine parses
/// every rendered statement (the `cluster` tests run them on a one-shard
/// cluster).
#[test]
fn cluster_rendering_is_replicated_and_parses() {
    let opts = SchemaOptions {
        database: "fh_cp_cluster".parse().unwrap(),
        cluster: Some("prod".parse().unwrap()),
    };
    let (_, name, sql) = flamehouse::storage::schema::MIGRATIONS
        .iter()
        .find(|(v, _, _)| *v == 6)
        .unwrap();
    assert_eq!(*name, "continuous");
    let rendered = opts.render(sql);
    assert!(!rendered.contains("{retention_days}"));
    let stmts = flamehouse_udf::catalog::statements(&rendered);
    let (mut tables, mut distributed) = (0, 0);
    for s in &stmts {
        assert!(s.contains(" ON CLUSTER prod "), "{s}");
        if s.contains("ENGINE = Distributed(prod, fh_cp_cluster, ") {
            distributed += 1;
        } else if s.starts_with("CREATE TABLE") {
            tables += 1;
            assert!(s.contains("ENGINE = Replicated"), "{s}");
            assert!(
                s.contains(&format!("INTERVAL {DEFAULT_RETENTION_DAYS} DAY")),
                "{s}"
            );
        }
        q(&format!("SELECT formatQuerySingleLine({})", lit(s)));
    }
    assert_eq!((tables, distributed), (5, 2));
    assert_eq!(stmts.len(), 13);
}

/// A profile is stored whole or not at all: a load that fails at any table
/// lists no profile, and running it again stores exactly what one clean
/// load stores (nothing twice, nothing missing).
#[test]
fn a_failed_load_run_again_stores_the_profile_once() {
    use flamehouse::ingest::continuous::{pprof_rows, store};
    let path = dir().join("heap.pb.gz");
    let p = flamehouse::formats::pprof::read_file(&path, &Default::default()).unwrap();
    let state = |db: &str| {
        q(&format!(
            "SELECT (SELECT count(), sum(value) FROM {db}.cp_samples), \
             (SELECT sum(value) FROM {db}.cp_samples_1m), \
             (SELECT count() FROM {db}.cp_series), (SELECT count() FROM {db}.cp_label_values), \
             (SELECT count() FROM {db}.stacks), (SELECT count() FROM {db}.stack_functions), \
             (SELECT count() FROM {db}.frames), (SELECT count(), sum(total) FROM {db}.cp_profiles)"
        ))
    };
    let clean = "fh_cp_whole_ref";
    fresh(clean);
    let rows = pprof_rows(&p, "heap", 7, &copts(clean)).unwrap();
    store(engine(), &clean.parse().unwrap(), &rows).unwrap();
    let want = state(clean);
    for (i, table) in ["frames", "stacks", "cp_series", "cp_samples", "cp_profiles"]
        .into_iter()
        .enumerate()
    {
        let db = format!("fh_cp_whole_{i}");
        fresh(&db);
        let rows = pprof_rows(&p, "heap", 7, &copts(&db)).unwrap();
        let dbi: flamehouse::Ident = db.parse().unwrap();
        let e = store(&Spy::failing(table, 0), &dbi, &rows).unwrap_err();
        assert!(e.to_string().contains(table), "{e}");
        assert_eq!(
            q(&format!("SELECT count() FROM {db}.cp_profiles")),
            "0\n",
            "{table}"
        );
        store(engine(), &dbi, &rows).unwrap();
        assert_eq!(state(&db), want, "failed at {table}, then run again");
        store(engine(), &dbi, &rows).unwrap();
        assert_eq!(state(&db), want, "and once more");
    }
}

/// `heap.pb.gz` as a new file: the raw profile with `time_nanos` (field 9)
/// appended, so each copy is its own profile (its own bytes and time), as
/// a Go service writing a heap profile every few minutes.
pub(crate) fn heap_copy(dir: &std::path::Path, ms: i64) -> PathBuf {
    let out = std::process::Command::new("gzip")
        .arg("-dc")
        .arg(self::dir().join("heap.pb.gz"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut bytes = out.stdout;
    bytes.push(9 << 3);
    let mut v = (ms * 1_000_000) as u64;
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            bytes.push(b);
            break;
        }
        bytes.push(b | 0x80);
    }
    let p = dir.join(format!("heap-{ms}.pb"));
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Gauge types (`inuse_space`, `inuse_objects`) answer the average per
/// profile of each series, summed over the series; additive types
/// (`alloc_space`, `alloc_objects`) the sum. The real Go heap profile,
/// loaded 4 times as service `a` and twice as `b` at times around an hour
/// boundary (so the hourly rollup and both edges are read): top functions,
/// the flame graph's root, a diff and the series by label equal one
/// profile's `go tool pprof -top -sample_index=inuse_space` (times the
/// number of series), and `alloc_space` equals 4 times its own golden; the
/// same from the per-minute rollup (a 2-day range).
#[test]
fn gauge_types_average_per_profile() {
    let db = "fh_cp_gauge";
    fresh(db);
    let o = qopts(db);
    let tmp = flamehouse_fixtures::testing::temp_path("cp-gauge");
    std::fs::create_dir_all(&tmp).unwrap();
    let hour = (now_ms() - 5 * 3_600_000) / 3_600_000 * 3_600_000;
    let min = 60_000;
    let times_a = [
        hour - 10 * min,
        hour + 15 * min,
        hour + 40 * min,
        hour + 65 * min,
    ];
    let times_b = [hour - 5 * min, hour + 20 * min];
    for (svc, times) in [("a", &times_a[..]), ("b", &times_b[..])] {
        for &ms in times {
            let o = ContinuousOptions {
                service: Some(svc.into()),
                time_ns: Some(ms * 1_000_000),
                ..copts(db)
            };
            let f = heap_copy(&tmp, ms + i64::from(svc == "b"));
            load_pprof(engine(), &f, &o).unwrap();
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let (from, to) = (hour - 20 * min, hour + 80 * min);
    let sel = |ty: &str, s: &str, from: i64, to: i64| Selection {
        profile_type: ty.into(),
        from_ms: from,
        to_ms: to,
        selector: Selector::parse(s).unwrap(),
    };
    let times = |m: &BTreeMap<String, (i64, i64)>, k: i64| -> BTreeMap<String, (i64, i64)> {
        m.iter()
            .map(|(f, (s, t))| (f.clone(), (s * k, t * k)))
            .collect()
    };
    let a = r#"{service="a"}"#;
    for (long, from, to) in [(false, from, to), (true, to - 2 * 86_400_000, to)] {
        let msg = if long { "minute rollup" } else { "samples" };
        assert_eq!(
            sel("inuse_space:bytes", a, from, to).source(&o),
            if long { Source::Rollup } else { Source::Raw }
        );
        assert!(sel("inuse_space:bytes", a, from, to)
            .sql(&o)
            .parts
            .iter()
            .any(|p| p.source == Source::Hourly));
        for kind in [
            "inuse_space",
            "inuse_objects",
            "alloc_space",
            "alloc_objects",
        ] {
            let ty = format!(
                "{kind}:{}",
                if kind.ends_with("space") {
                    "bytes"
                } else {
                    "count"
                }
            );
            let (one, total) = parse_top(&golden(&format!("heap.top.{kind}.txt")));
            let gauge = kind.starts_with("inuse");
            assert_eq!(flamehouse::continuous_query::is_gauge_type(&ty), gauge);
            let k = if gauge { 1 } else { 4 };
            assert_eq!(
                top(&top_functions_sql(&o, &sel(&ty, a, from, to), None, 0).unwrap()),
                times(&one, k),
                "{ty} top, {msg}"
            );
            let root =
                |s: &str| tree(&flame_sql(&o, &sel(&ty, s, from, to), 0))[&Vec::<String>::new()][0];
            assert_eq!(root(a), total * k, "{ty} flame, {msg}");
            // Two series: each its own average (b has 2 profiles), summed.
            assert_eq!(
                root(""),
                total * if gauge { 2 } else { 6 },
                "{ty} a+b, {msg}"
            );
            // Series by service: one point for the range per series.
            let rows = q(&by_label_sql(&o, &sel(&ty, "", from, to), "service", 0).unwrap());
            let by: Vec<(String, i64)> = rows
                .lines()
                .map(|l| {
                    let f: Vec<&str> = l.split('\t').collect();
                    (f[1].to_string(), f[2].parse().unwrap())
                })
                .collect();
            let kb = if gauge { 1 } else { 2 };
            assert_eq!(
                by,
                vec![("a".to_string(), total * k), ("b".to_string(), total * kb)],
                "{ty} by service, {msg}"
            );
        }
    }
    // Per step (10 minutes on the samples): each step holding a profile of
    // `a` is one profile's heap.
    let (_, total) = parse_top(&golden("heap.top.inuse_space.txt"));
    let rows =
        q(&by_label_sql(&o, &sel("inuse_space:bytes", a, from, to), "service", 600).unwrap());
    let vals: Vec<i64> = rows
        .lines()
        .map(|l| l.split('\t').nth(2).unwrap().parse().unwrap())
        .collect();
    assert_eq!(vals, vec![total; 4], "{rows}");
    // A diff of the range's first half (2 profiles of a) with its second (2
    // others): equal averages, for a gauge; the sums for alloc_space.
    let mid = hour + 30 * min;
    for (ty, k) in [("inuse_space:bytes", 1), ("alloc_space:bytes", 2)] {
        let (_, total) = parse_top(&golden(&format!(
            "heap.top.{}.txt",
            ty.split(':').next().unwrap()
        )));
        let sql = diff_sql(&o, &sel(ty, a, from, mid), &sel(ty, a, mid, to), 0, false).unwrap();
        let t = tree(&sql);
        let root = &t[&Vec::<String>::new()];
        assert_eq!((root[0], root[2]), (total * k, total * k), "{ty} diff");
        // Same range, two selectors: a (4 profiles) vs b (2).
        let sql = diff_sql(
            &o,
            &sel(ty, a, from, to),
            &sel(ty, r#"{service="b"}"#, from, to),
            0,
            false,
        )
        .unwrap();
        let t = tree(&sql);
        let root = &t[&Vec::<String>::new()];
        let (ka, kb) = if k == 1 { (1, 1) } else { (4, 2) };
        assert_eq!(
            (root[0], root[2]),
            (total * ka, total * kb),
            "{ty} diff a vs b"
        );
    }
}

/// A migration applied to a database whose retention was changed gives its
/// time-keyed tables that retention: migration 7's rollups kept the
/// default 30 days under a 36500-day database (its samples kept, its
/// hourly rollup dropped), and only cp_stacks (migration 11) was mended.
#[test]
fn a_later_migration_gives_its_tables_the_databases_retention() {
    let db = "fh_cp_mttl";
    fresh(db); // retention 36500
    load_as(db, "cpu.pb.gz", "api", &[]);
    let ttls = || {
        q(&format!(
            "SELECT name, extract(create_table_query, 'TTL [^+]+\\+ toIntervalDay\\((\\d+)\\)') \
             FROM system.tables WHERE database = '{db}' AND create_table_query LIKE '% TTL %' \
             ORDER BY name"
        ))
    };
    let want: String = flamehouse::ingest::continuous::RETENTION_TABLES
        .iter()
        .map(|(t, _)| *t)
        .collect::<std::collections::BTreeSet<_>>()
        .iter()
        .map(|t| format!("{t}\t36500\n"))
        .collect();
    assert_eq!(ttls(), want);
    // As a database of migration 6 (or 10) with `init --retention 36500`.
    for t in ["cp_samples_1h", "cp_series_profiles", "cp_stacks"] {
        q(&format!("DROP TABLE {db}.{t}"));
    }
    q(&format!(
        "ALTER TABLE {db}.schema_migrations DELETE WHERE version IN (7, 11) SETTINGS mutations_sync = 1"
    ));
    let opts = SchemaOptions {
        database: db.parse().unwrap(),
        cluster: None,
    };
    assert_eq!(migrate(engine(), &opts).unwrap(), vec![7, 11]);
    assert_eq!(ttls(), want);
    // A database an older binary upgraded that way: the next migrate
    // (every init and load) mends it, applying no migration.
    for t in ["cp_samples_1h", "cp_series_profiles"] {
        q(&format!(
            "ALTER TABLE {db}.{t} MODIFY TTL toDate({}) + INTERVAL 30 DAY",
            if t == "cp_samples_1h" { "hour" } else { "ts" }
        ));
    }
    assert_ne!(ttls(), want);
    assert_eq!(migrate(engine(), &opts).unwrap(), Vec::<u32>::new());
    assert_eq!(ttls(), want);
}

/// Migration 7 on a database that already holds samples fills the hourly
/// rollup and the gauge profiles from them, once: running it again (its
/// record removed) adds nothing.
#[test]
fn migration_7_fills_its_rollups_from_stored_samples_once() {
    let db = "fh_cp_m7";
    fresh(db);
    load_as(db, "cpu.pb.gz", "api", &[]);
    load_as(db, "heap.pb.gz", "heap", &[]);
    let sums = || {
        q(&format!(
            "SELECT (SELECT sum(value) FROM {db}.cp_samples), (SELECT sum(value) FROM {db}.cp_samples_1h), \
                    (SELECT uniqExact(profile_type, series_id, profile_id) FROM {db}.cp_samples \
                     WHERE profile_type LIKE 'inuse%'), \
                    (SELECT count() FROM {db}.cp_series_profiles)"
        ))
    };
    let fed = sums();
    // As a database of migration 6 would be: the new tables empty.
    q(&format!("TRUNCATE TABLE {db}.cp_samples_1h"));
    q(&format!("TRUNCATE TABLE {db}.cp_series_profiles"));
    q(&format!(
        "ALTER TABLE {db}.schema_migrations DELETE WHERE version = 7 SETTINGS mutations_sync = 1"
    ));
    let opts = SchemaOptions {
        database: db.parse().unwrap(),
        cluster: None,
    };
    assert_eq!(migrate(engine(), &opts).unwrap(), vec![7]);
    let f: Vec<i64> = fed.split_whitespace().map(|x| x.parse().unwrap()).collect();
    assert_eq!(f[0], f[1], "the views fed the hourly rollup: {fed}");
    assert_eq!(f[2], f[3], "one row per gauge series and profile: {fed}");
    assert!(f[3] > 0);
    assert_eq!(sums(), fed, "backfilled");
    q(&format!(
        "ALTER TABLE {db}.schema_migrations DELETE WHERE version = 7 SETTINGS mutations_sync = 1"
    ));
    assert_eq!(migrate(engine(), &opts).unwrap(), vec![7]);
    assert_eq!(sums(), fed, "a re-run adds nothing");
}
