//! The parameterized views of migration 9 (`cp_flame`, `cp_top_functions`,
//! `cp_flame_matching`, `cp_top_functions_matching`) called as a SQL user
//! calls them, on the committed Go profiles in the real engine, against
//! `go tool pprof`'s goldens: heap profiles loaded several times (gauge
//! `inuse_*` = ONE profile's `-top`, `alloc_*` = N times it), whole hours
//! from the hourly rollup and the same answer from the samples, the CPU
//! profile's `pprof.Do` labels (equality, regex, negation vs `-tagfocus`,
//! `-tagignore` and the `-traces` golden filtered by its own labels),
//! numeric labels and span ids; hostile parameter values; a database made
//! by migrations 1 to 8 upgrading.

use crate::continuous::{
    golden, heap_copy, load_as, now_ms, parse_top, parse_traces, per_stack, selves, top, top_of,
    tree, Trace, CPU,
};
use flamehouse::ingest::continuous::{load_pprof, ContinuousOptions};
use flamehouse::storage::schema::{migrate, recreate_views, SchemaOptions, MIGRATIONS};
use flamehouse_tests::*;
use std::collections::BTreeMap;

/// A new database (migrations 1 to 9) keeping the fixtures' own dates.
fn fresh(db: &str) -> SchemaOptions {
    crate::continuous::fresh(db);
    SchemaOptions {
        database: db.parse().unwrap(),
        cluster: None,
    }
}

fn t(ms: i64) -> String {
    format!("fromUnixTimestamp64Milli(toInt64({ms}), 'UTC')")
}

/// `SELECT * FROM db.view(profile_type, t1, t2, <selection>, <extra>)`.
fn view(db: &str, name: &str, ty: &str, range: (i64, i64), sel: &str, extra: &str) -> String {
    format!(
        "SELECT * FROM {db}.{name}(profile_type = {ty}, t1 = {}, t2 = {}, {sel}, {extra})",
        t(range.0),
        t(range.1),
        ty = lit(ty),
    )
}

/// `matchers = [...]` of (key, op, value).
fn matchers(m: &[(&str, &str, &str)]) -> String {
    let items: Vec<String> = m
        .iter()
        .map(|(k, o, v)| format!("({}, {}, {})", lit(k), lit(o), lit(v)))
        .collect();
    format!(
        "matchers = CAST([{}], 'Array(Tuple(String, String, String))')",
        items.join(", ")
    )
}

fn flame_m(db: &str, ty: &str, r: (i64, i64), m: &[(&str, &str, &str)]) -> String {
    view(
        db,
        "cp_flame_matching",
        ty,
        r,
        &matchers(m),
        "max_nodes = 0",
    )
}

fn top_m(db: &str, ty: &str, r: (i64, i64), m: &[(&str, &str, &str)]) -> String {
    view(
        db,
        "cp_top_functions_matching",
        ty,
        r,
        &matchers(m),
        "limit = 0",
    )
}

fn flame_map(db: &str, ty: &str, r: (i64, i64), map: &str) -> String {
    view(
        db,
        "cp_flame",
        ty,
        r,
        &format!("match = {map}"),
        "max_nodes = 0",
    )
}

fn top_map(db: &str, ty: &str, r: (i64, i64), map: &str) -> String {
    view(
        db,
        "cp_top_functions",
        ty,
        r,
        &format!("match = {map}"),
        "limit = 0",
    )
}

fn root(sql: &str) -> i64 {
    tree(sql).get(&Vec::<String>::new()).map_or(0, |v| v[0])
}

fn times(m: &BTreeMap<String, (i64, i64)>, k: i64) -> BTreeMap<String, (i64, i64)> {
    m.iter()
        .map(|(f, (s, t))| (f.clone(), (s * k, t * k)))
        .collect()
}

const MIN: i64 = 60_000;
const HOUR: i64 = 3_600_000;

/// The heap profile loaded 3 times as service `heap` at `h + 10, 30, 50
/// min` (one whole hour `h`); returns `h`.
fn load_heaps(db: &str) -> i64 {
    let h = (now_ms() - 5 * HOUR) / HOUR * HOUR;
    let tmp = flamehouse_fixtures::testing::temp_path(&format!("cpviews-{db}"));
    std::fs::create_dir_all(&tmp).unwrap();
    for ms in [h + 10 * MIN, h + 30 * MIN, h + 50 * MIN] {
        let o = ContinuousOptions {
            database: db.parse().unwrap(),
            service: Some("heap".into()),
            time_ns: Some(ms * 1_000_000),
            ..Default::default()
        };
        load_pprof(engine(), &heap_copy(&tmp, ms), &o).unwrap();
    }
    let _ = std::fs::remove_dir_all(&tmp);
    h
}

fn heap_type(kind: &str) -> String {
    let unit = if kind.ends_with("space") {
        "bytes"
    } else {
        "count"
    };
    format!("{kind}:{unit}")
}

/// Every view on 3 heap profiles: inuse_* (gauges) = one profile's
/// `go tool pprof -top -sample_index=inuse_*`, alloc_* = 3 times theirs,
/// over a range with edges and a whole hour, the whole hour alone (the
/// hourly rollup only), and 2 days (the per-minute rollup). Then the
/// hourly rollup emptied: the whole hour answers nothing (it was read
/// there) while the same hour shifted by 1 ms (no whole hour: the samples
/// alone) still answers the golden.
#[test]
fn views_average_gauges_and_sum_the_rest_as_go_tool_pprof() {
    let db = "fh_cpv_heap";
    fresh(db);
    let h = load_heaps(db);
    let ranges = [
        ("edges and an hour", (h - 20 * MIN, h + 80 * MIN)),
        ("the hour", (h, h + HOUR)),
        ("2 days", (h + HOUR - 2 * 86_400_000, h + HOUR)),
    ];
    for kind in [
        "inuse_space",
        "inuse_objects",
        "alloc_space",
        "alloc_objects",
    ] {
        let ty = heap_type(kind);
        let (one, total) = parse_top(&golden(&format!("heap.top.{kind}.txt")));
        let k = if kind.starts_with("inuse") { 1 } else { 3 };
        let want = times(&one, k);
        // Every range for the *_space types, the first for *_objects.
        let n = if kind.ends_with("space") { 3 } else { 1 };
        for (what, r) in ranges.into_iter().take(n) {
            let msg = format!("{ty} over {what}");
            assert_eq!(root(&flame_map(db, &ty, r, "map()")), total * k, "{msg}");
            assert_eq!(
                root(&flame_map(db, &ty, r, "map('service', 'heap')")),
                total * k,
                "{msg}"
            );
            assert_eq!(
                root(&flame_m(db, &ty, r, &[("service", "=~", "he.p")])),
                total * k,
                "{msg}"
            );
            assert_eq!(top(&top_map(db, &ty, r, "map()")), want, "{msg}");
            assert_eq!(top(&top_m(db, &ty, r, &[])), want, "{msg}");
            // Nothing for another service.
            assert_eq!(
                root(&flame_map(db, &ty, r, "map('service', 'other')")),
                0,
                "{msg}"
            );
        }
    }
    // limit: the largest totals first; 0 = all.
    let ty = heap_type("alloc_space");
    let r = ranges[0].1;
    let all = q(&top_map(db, &ty, r, "map()"));
    let two = q(&view(
        db,
        "cp_top_functions",
        &ty,
        r,
        "match = map()",
        "limit = 2",
    ));
    assert_eq!(
        two,
        all.lines()
            .take(2)
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
    // The shares of the _matching top: of the selection's total.
    let (_, total) = parse_top(&golden("heap.top.alloc_space.txt"));
    for l in q(&top_m(db, &ty, r, &[])).lines() {
        let c: Vec<&str> = l.split('\t').collect();
        let tot: f64 = c[2].parse().unwrap();
        let share: f64 = c[4].parse().unwrap();
        assert!((share - tot / (3 * total) as f64).abs() < 1e-9, "{l}");
    }
    // The whole hour is read from cp_samples_1h.
    let ty = heap_type("inuse_space");
    let (_, total) = parse_top(&golden("heap.top.inuse_space.txt"));
    q(&format!("TRUNCATE TABLE {db}.cp_samples_1h"));
    assert_eq!(root(&flame_map(db, &ty, (h, h + HOUR), "map()")), 0);
    assert_eq!(root(&flame_m(db, &ty, (h, h + HOUR), &[])), 0);
    assert_eq!(
        root(&flame_map(db, &ty, (h + 1, h + HOUR + 1), "map()")),
        total
    );
    assert_eq!(root(&flame_m(db, &ty, (h + 1, h + HOUR + 1), &[])), total);
}

fn label(t: &Trace, k: &str) -> String {
    t.labels.get(k).cloned().unwrap_or_default()
}

/// The selector's matchers through the views on the CPU profile
/// (`pprof.Do` labels handler, version) and the heap profile (numeric
/// `bytes`), and the span profile: `=` vs `-tagfocus`, negation and
/// regexes vs the `-traces` golden filtered by its own labels, numeric
/// ranges vs `-tagfocus`/`-tagignore=bytes=...`, span ids vs
/// `-tagfocus`/`-tagignore=span_id=...`.
#[test]
fn matching_views_equal_tagfocus_and_tagignore() {
    let db = "fh_cpv_match";
    fresh(db);
    let (_, ms) = load_as(db, "cpu.pb.gz", "api", &[("region", "eu-west")]);
    let r = (ms, ms + 1000);
    let (want, _) = parse_top(&golden("cpu.tagfocus.handler_a.top.txt"));
    assert_eq!(top(&top_m(db, CPU, r, &[("handler", "=", "a")])), want);
    assert_eq!(top(&top_map(db, CPU, r, "map('handler', 'a')")), want);
    let v142 = per_stack(
        &parse_traces(&golden("cpu.tagfocus.version_1.4.2.traces.txt")),
        |_| true,
    );
    assert!(!v142.is_empty());
    assert_eq!(
        top(&top_m(db, CPU, r, &[("version", "=~", r"1\.4\.2")])),
        top_of(&v142)
    );
    for m in [
        vec![("version", "=", "1.4.2")],
        vec![("service", "=", "api"), ("version", "=~", r"1\.4\.2")],
        vec![
            ("version", "=~", ".*2"),
            ("handler", "!=", "a"),
            ("region", "!~", "us.*"),
        ],
    ] {
        assert_eq!(selves(&tree(&flame_m(db, CPU, r, &m))), v142, "{m:?}");
    }
    let all = parse_traces(&golden("cpu.traces.cpu.txt"));
    type Keep = Box<dyn Fn(&Trace) -> bool>;
    let cases: Vec<((&str, &str, &str), Keep)> = vec![
        (
            ("handler", "!=", "a"),
            Box::new(|t| label(t, "handler") != "a"),
        ),
        (
            ("handler", "=", ""),
            Box::new(|t| label(t, "handler").is_empty()),
        ),
        (
            ("version", "!~", r"1\.4\.1"),
            Box::new(|t| label(t, "version") != "1.4.1"),
        ),
        (
            ("handler", "=~", "a|b"),
            Box::new(|t| !label(t, "handler").is_empty()),
        ),
        // Anchored: "1.4" alone matches no version; "." is a regex.
        (("version", "=~", r"1\.4"), Box::new(|_| false)),
        (
            ("version", "=~", "1.4.."),
            Box::new(|t| !label(t, "version").is_empty()),
        ),
        // `=` is not a regex.
        (("version", "=", "1.4.."), Box::new(|_| false)),
        (("region", "=", "eu-west"), Box::new(|_| true)),
        (("region", "!=", "eu-west"), Box::new(|_| false)),
        (("service", "=", "other"), Box::new(|_| false)),
        (("service", "!~", "x.*"), Box::new(|_| true)),
    ];
    for (m, keep) in cases {
        let want = per_stack(&all, keep);
        assert_eq!(selves(&tree(&flame_m(db, CPU, r, &[m]))), want, "{m:?}");
    }

    // Numeric labels on the heap profile (loaded once).
    let (_, hms) = load_as(db, "heap.pb.gz", "heap", &[]);
    let hr = (hms, hms + 1000);
    let heap_cases: Vec<(&str, (&str, &str, &str))> = vec![
        (
            "heap.tagfocus.bytes_1kB-4kB.top.alloc_space.txt",
            ("bytes", "in", "1024:4096"),
        ),
        (
            "heap.tagfocus.bytes_1kB-4kB.top.inuse_space.txt",
            ("bytes", "in", "1024:4096"),
        ),
        (
            "heap.tagfocus.bytes_1kB-4kB.top.alloc_objects.txt",
            ("bytes", "in", "1024:4096"),
        ),
        (
            "heap.tagignore.bytes_1kB-4kB.top.alloc_space.txt",
            ("bytes", "not in", "1024:4096"),
        ),
        (
            "heap.tagignore.bytes_1kB-4kB.top.inuse_objects.txt",
            ("bytes", "not in", "1024:4096"),
        ),
        (
            "heap.tagfocus.bytes_ge_1kB.top.txt",
            ("bytes", ">=", "1024"),
        ),
        ("heap.tagfocus.bytes_ge_1kB.top.txt", ("bytes", ">", "1023")),
        (
            "heap.tagfocus.bytes_ge_1kB.top.txt",
            ("bytes", "in", "1024:"),
        ),
        (
            "heap.tagfocus.bytes_le_256B.top.alloc_space.txt",
            ("bytes", "<=", "256"),
        ),
        (
            "heap.tagfocus.bytes_le_256B.top.alloc_space.txt",
            ("bytes", "<", "257"),
        ),
        (
            "heap.tagfocus.bytes_le_256B.top.alloc_space.txt",
            ("bytes", "in", ":256"),
        ),
        (
            "heap.tagfocus.bytes_64B.top.alloc_space.txt",
            ("bytes", "in", "64"),
        ),
    ];
    for (file, m) in heap_cases {
        let g = golden(file);
        let kind = g
            .lines()
            .find_map(|l| l.strip_prefix("Type: "))
            .unwrap()
            .to_string();
        let (want, _) = parse_top(&g);
        // (No object in use is 1 to 4 kB: that golden lists no function.)
        assert!(!want.is_empty() || file.contains("inuse"), "{file}");
        assert_eq!(
            top(&top_m(db, &heap_type(&kind), hr, &[m])),
            want,
            "{file} {m:?}"
        );
    }
    // A range with a whole hour: numeric matchers read the samples alone
    // (the rollups keep no numeric labels), same answer.
    let (want, _) = parse_top(&golden("heap.tagfocus.bytes_1kB-4kB.top.alloc_space.txt"));
    let wide = (hms - 2 * HOUR, hms + 2 * HOUR);
    assert_eq!(
        top(&top_m(
            db,
            "alloc_space:bytes",
            wide,
            &[("bytes", "in", "1024:4096")]
        )),
        want
    );

    // Span ids (samples' span_id, not a series label).
    let (_, sms) = load_as(db, "spans.pb.gz", "spans", &[]);
    let sr = (sms, sms + 1000);
    let g = golden("spans.tagfocus.span_id.top.txt");
    let id = g
        .lines()
        .find_map(|l| l.trim().strip_prefix("tagfocus=span_id="))
        .unwrap()
        .to_string();
    let (focus, _) = parse_top(&g);
    let (ignore, _) = parse_top(&golden("spans.tagignore.span_id.top.txt"));
    assert_eq!(top(&top_m(db, CPU, sr, &[("span_id", "=", &id)])), focus);
    assert_eq!(
        top(&top_m(db, CPU, sr, &[("span_id", "=", &id.to_uppercase())])),
        focus
    );
    assert_eq!(
        top(&top_m(
            db,
            CPU,
            sr,
            &[("span_id", "=~", &format!("{id}|zz"))]
        )),
        focus
    );
    assert_eq!(top(&top_m(db, CPU, sr, &[("span_id", "!=", &id)])), ignore);
    assert_eq!(top(&top_m(db, CPU, sr, &[("span_id", "!~", &id)])), ignore);
    // Over a whole hour as well (samples alone).
    let swide = (sms - 2 * HOUR, sms + 2 * HOUR);
    assert_eq!(top(&top_m(db, CPU, swide, &[("span_id", "=", &id)])), focus);
}

/// The views hash a span id that is not hex as the loader stores it.
#[test]
fn span_ids_are_read_as_the_loader_stores_them() {
    for v in [
        "",
        "00f067aa0ba902b7",
        "F",
        "ffffffffffffffff",
        "0123456789abcdef0",
        "not-hex",
        "é'\"\\",
    ] {
        let got = q(&format!(
            "SELECT {}",
            flamehouse::continuous_views::span_id_sql(&lit(v))
        ));
        assert_eq!(
            got.trim(),
            flamehouse::ingest::continuous::span_id_value(v).to_string(),
            "{v:?}"
        );
    }
}

/// Hostile parameter values are data: a label value with quotes,
/// backslashes and SQL is found by `=` (map and matchers) and by an
/// escaped regex; regex metacharacters under `=` are literal; a bad regex,
/// a bad op (SQL in it) or a non-integer bound stop the query with one
/// message; maps and matcher lists of thousands of entries run; every
/// table keeps its rows.
#[test]
fn hostile_parameters_are_data() {
    let db = "fh_cpv_hostile";
    fresh(db);
    let nasty = r#"it's a "quote" \ '); DROP TABLE fh_cpv_hostile.cp_samples; --"#;
    let (_, ms) = load_as(db, "cpu.pb.gz", "api", &[("note", nasty)]);
    let r = (ms, ms + 1000);
    let (_, total) = parse_top(&golden("cpu.top.cpu.txt"));
    let count = || q(&format!("SELECT count() FROM {db}.cp_samples"));
    let before = count();
    assert_eq!(
        root(&flame_map(
            db,
            CPU,
            r,
            &format!("map('note', {})", lit(nasty))
        )),
        total
    );
    assert_eq!(root(&flame_m(db, CPU, r, &[("note", "=", nasty)])), total);
    assert_eq!(
        root(&flame_m(
            db,
            CPU,
            r,
            &[("note", "=~", &regex::escape(nasty))]
        )),
        total
    );
    assert_eq!(root(&flame_m(db, CPU, r, &[("note", "!=", nasty)])), 0);
    assert_eq!(root(&flame_m(db, CPU, r, &[("note", "=", ".*")])), 0);
    assert_eq!(root(&flame_m(db, CPU, r, &[("note", "=~", ".*")])), total);
    assert_eq!(root(&flame_map(db, CPU, r, "map('note', '.*')")), 0);
    // Errors: one message, nothing run.
    let e = q_err(&flame_m(db, CPU, r, &[("note", "=~", "(")]));
    assert!(e.contains("regexp") || e.contains("re2"), "{e}");
    for m in [
        ("note", "==", "x"),
        ("note", "=') OR 1=1 --", "x"),
        ("bytes", ">=", "1kB"),
        ("bytes", "in", "a:b"),
        ("bytes", "in", ":"),
        ("bytes", "in", "1:2:3"),
        ("span_id", "<", "5"),
    ] {
        let e = q_err(&top_m(db, CPU, r, &[m]));
        assert!(
            e.contains("cp_*_matching: every matcher is (key, op, value)"),
            "{m:?}: {e}"
        );
    }
    // Huge: 5000 absent keys equal to '' (a missing label is ''), 5000
    // matchers that hold; and one that does not among them.
    let pairs: Vec<String> = (0..5000).map(|i| format!("'k{i}', ''")).collect();
    assert_eq!(
        root(&flame_map(
            db,
            CPU,
            r,
            &format!("map({})", pairs.join(", "))
        )),
        total
    );
    let keys: Vec<String> = (0..5000).map(|i| format!("k{i}")).collect();
    let mut many: Vec<(&str, &str, &str)> = keys.iter().map(|k| (k.as_str(), "!~", ".+")).collect();
    assert_eq!(root(&flame_m(db, CPU, r, &many)), total);
    many.push(("note", "!=", nasty));
    assert_eq!(root(&flame_m(db, CPU, r, &many)), 0);
    assert_eq!(count(), before);
    let tables = q(&format!(
        "SELECT count() FROM system.tables WHERE database = '{db}'"
    ));
    assert!(tables.trim().parse::<u32>().unwrap() > 10, "{tables}");
}

/// A database made by migrations 1 to 8 (migration 6's views, which sum
/// gauges) with 2 heap profiles in it upgrades: before, `cp_flame` of
/// inuse_space answers twice the golden (the old sum); after migration 9
/// one profile's golden, and the `_matching` views exist. Re-running
/// applies nothing but re-creates the views (a replaced one is restored).
#[test]
fn a_database_of_migrations_1_to_8_upgrades() {
    let db = "fh_cpv_upgrade";
    let opts = fresh(db);
    for v in ["cp_flame_matching", "cp_top_functions_matching"] {
        q(&format!("DROP VIEW {db}.{v}"));
    }
    let (_, _, m6) = MIGRATIONS.iter().find(|m| m.0 == 6).unwrap();
    for s in flamehouse_udf::catalog::statements(&opts.render(m6)) {
        if s.starts_with("CREATE OR REPLACE VIEW") {
            q(&s);
        }
    }
    q(&format!(
        "ALTER TABLE {db}.schema_migrations DELETE WHERE version = 9 SETTINGS mutations_sync = 1"
    ));
    let h = load_heaps(db);
    let ty = "inuse_space:bytes";
    let (_, total) = parse_top(&golden("heap.top.inuse_space.txt"));
    let r = (h, h + HOUR - 1);
    assert_eq!(
        root(&flame_map(db, ty, r, "map()")),
        3 * total,
        "migration 6's view sums"
    );
    assert_eq!(migrate(engine(), &opts).unwrap(), vec![9]);
    assert_eq!(root(&flame_map(db, ty, r, "map()")), total);
    assert_eq!(root(&flame_m(db, ty, r, &[])), total);
    q(&format!(
        "CREATE OR REPLACE VIEW {db}.cp_flame AS SELECT 1 AS i"
    ));
    assert_eq!(migrate(engine(), &opts).unwrap(), Vec::<u32>::new());
    assert_eq!(root(&flame_map(db, ty, r, "map()")), total);
    // Up to date: a load's `migrate` runs no DDL on the views. A view that
    // carries the current mark but another body is left as it is (so no
    // statement ran), until `init` re-creates all of them.
    assert_eq!(
        recreate_views(engine(), &opts, false).unwrap(),
        Vec::<String>::new()
    );
    let mark = q(&format!(
        "SELECT comment FROM system.tables WHERE database = '{db}' AND name = 'cp_flame'"
    ));
    let mark = mark.trim();
    assert!(mark.starts_with("flamehouse "), "{mark}");
    q(&format!(
        "CREATE OR REPLACE VIEW {db}.cp_flame AS SELECT toUInt64(7) AS i COMMENT '{mark}'"
    ));
    assert_eq!(migrate(engine(), &opts).unwrap(), Vec::<u32>::new());
    assert_eq!(q(&format!("SELECT i FROM {db}.cp_flame")).trim(), "7");
    assert_eq!(
        recreate_views(engine(), &opts, true).unwrap(),
        [
            "cp_flame",
            "cp_top_functions",
            "cp_flame_matching",
            "cp_top_functions_matching",
            "cp_labels"
        ]
    );
    assert_eq!(root(&flame_map(db, ty, r, "map()")), total);
    // A dropped view is stale too.
    q(&format!("DROP VIEW {db}.cp_top_functions_matching"));
    assert_eq!(migrate(engine(), &opts).unwrap(), Vec::<u32>::new());
    assert_eq!(
        q(&format!(
            "SELECT count() FROM system.tables WHERE database = '{db}' AND name = 'cp_top_functions_matching'"
        ))
        .trim(),
        "1"
    );
}

/// Migration 9 renders for a cluster (`ON CLUSTER` on every view) and
/// every statement parses.
#[test]
fn migration_9_renders_for_a_cluster() {
    let opts = SchemaOptions {
        database: "fh_cpv_cluster".parse().unwrap(),
        cluster: Some("prod".parse().unwrap()),
    };
    let (_, name, sql) = MIGRATIONS.iter().find(|m| m.0 == 9).unwrap();
    assert_eq!(*name, "continuous_views");
    let stmts = flamehouse_udf::catalog::statements(&opts.render(sql));
    assert_eq!(stmts.len(), 5);
    for s in &stmts {
        assert!(s.contains(" ON CLUSTER prod AS"), "{s}");
        assert!(!s.contains("{db}") && s.contains("fh_cpv_cluster.cp_samples"));
        q(&format!("SELECT formatQuerySingleLine({})", lit(s)));
    }
}

/// Ranges over 6 hours were widened to whole minutes (a profile 30 s
/// before `t1` or after `t2` counted), and `cp_labels` counted every series
/// of the range's days (and of `t2`'s day at an exclusive midnight). Now
/// every view, and the CLI's builders, answer exactly `[t1, t2)`: checked
/// against sums of the raw samples over the same range, with profiles 30 s
/// outside each end, at the midnight `t2` and inside.
#[test]
fn long_ranges_and_label_values_are_exactly_the_range() {
    let db = "fh_cpv_exact";
    fresh(db);
    const DAY: i64 = 24 * HOUR;
    let d = (now_ms() - 3 * DAY) / DAY * DAY;
    let tmp = flamehouse_fixtures::testing::temp_path(&format!("cpviews-{db}"));
    std::fs::create_dir_all(&tmp).unwrap();
    // Each at its own slot: before the day, inside (30 s and 4 h in), and
    // at the next midnight.
    for (slot, ms) in [
        ("before", d - 30_000),
        ("early", d + 30_000),
        ("mid", d + 4 * HOUR),
        ("midnight", d + DAY),
    ] {
        let o = ContinuousOptions {
            database: db.parse().unwrap(),
            service: Some("heap".into()),
            time_ns: Some(ms * 1_000_000),
            labels: vec![("slot".into(), slot.into())],
            ..Default::default()
        };
        load_pprof(engine(), &heap_copy(&tmp, ms), &o).unwrap();
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let ty = "alloc_space:bytes";
    let raw = |r: (i64, i64)| -> i64 {
        q(&format!(
            "SELECT sum(value) FROM {db}.cp_samples WHERE profile_type = {} AND ts >= {} AND ts < {}",
            lit(ty),
            t(r.0),
            t(r.1)
        ))
        .trim()
        .parse()
        .unwrap()
    };
    // The oracle of cp_labels: the series with samples in the range, their
    // labels counted by hand.
    let labels_of = |r: (i64, i64)| -> String {
        q(&format!(
            "SELECT k, v, uniqExact(series_id) AS n FROM {db}.cp_series \
             ARRAY JOIN mapKeys(labels) AS k, mapValues(labels) AS v \
             WHERE profile_type = {ty} AND series_id IN (SELECT series_id FROM {db}.cp_samples \
                 WHERE profile_type = {ty} AND ts >= {} AND ts < {}) \
             GROUP BY k, v ORDER BY k, n DESC, v",
            t(r.0),
            t(r.1),
            ty = lit(ty),
        ))
    };
    let o = crate::continuous::qopts(db);
    for r in [
        (d, d + DAY),                         // the day: early and mid
        (d + 31_000, d + DAY - 31_000),       // mid only
        (d - 10 * MIN, d + 7 * HOUR),         // before, early, mid
        (d - 29_000, d + DAY + 1),            // early, mid, midnight
        (d + 20_000, d + 6 * HOUR + 6 * MIN), // early, mid
    ] {
        assert!(r.1 - r.0 > 6 * HOUR);
        let want = raw(r);
        assert!(want > 0);
        let m = matchers(&[("service", "=", "heap")]);
        assert_eq!(root(&flame_map(db, ty, r, "map()")), want, "cp_flame {r:?}");
        assert_eq!(
            root(&flame_m(db, ty, r, &[("service", "=", "heap")])),
            want,
            "cp_flame_matching {r:?} {m}"
        );
        let cli = flamehouse::continuous_query::flame_sql(
            &o,
            &flamehouse::continuous_query::Selection {
                profile_type: ty.into(),
                from_ms: r.0,
                to_ms: r.1,
                selector: flamehouse::continuous_query::Selector::all(),
            },
            0,
        );
        assert_eq!(root(&cli), want, "flame_sql {r:?}");
        let labels = q(&format!(
            "SELECT * FROM {db}.cp_labels(profile_type = {}, t1 = {}, t2 = {})",
            lit(ty),
            t(r.0),
            t(r.1)
        ));
        assert_eq!(labels, labels_of(r), "cp_labels {r:?}");
        let cli = q(&flamehouse::continuous_query::label_values_sql(
            &o, ty, r.0, r.1,
        ));
        assert_eq!(cli, labels_of(r), "label_values_sql {r:?}");
    }
    // One slot alone over the day: the midnight profile is tomorrow's.
    assert!(!labels_of((d, d + DAY)).contains("midnight"));
    // max_nodes 1 is one line of the view's, not the UDF's error.
    let e = engine()
        .query_tsv(&view(
            db,
            "cp_flame",
            ty,
            (d, d + DAY),
            "match = map()",
            "max_nodes = 1",
        ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("max_nodes: 0 (every node) or at least 2"), "{e}");
}
