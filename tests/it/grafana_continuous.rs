//! The continuous-profiling dashboard (`grafana/dashboards/continuous.json`):
//! the committed Go CPU profiles (`fixtures/continuous/pprof/cpu*.pb.gz`)
//! are loaded with `load_pprof` into a fresh database, every variable query
//! and panel query is expanded as Grafana and the ClickHouse plugin would
//! (macros, `${var:percentencode}`, multi values as `{a,b}`) and run on the
//! engine; the answers are compared with `go tool pprof`'s own goldens
//! (`-top` total, flat and cum; `-peek`; `-diff_base`), the flame frames are
//! drawn by Grafana's own component, and hostile variable values select
//! nothing and break nothing.

use crate::render::{frame_json, render, repo};
use flamehouse::grafana::continuous::continuous_dashboard;
use flamehouse::ingest::continuous::{load_pprof, ContinuousOptions};
use flamehouse::storage::schema::{migrate, SchemaOptions};
use flamehouse::Ident;
use flamehouse_tests::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::OnceLock;

const DB: &str = "fh_grafana_cp";
const CPU: &str = "cpu:nanoseconds";

fn pprof_dir() -> PathBuf {
    repo().join("fixtures/continuous/pprof")
}

fn golden(name: &str) -> String {
    std::fs::read_to_string(pprof_dir().join(name)).unwrap()
}

/// `590000000ns` -> 590000000 (go tool pprof's exact units).
fn value(s: &str) -> i64 {
    s.trim_end_matches(|c: char| c.is_ascii_alphabetic())
        .parse()
        .unwrap_or_else(|_| panic!("not an exact value: {s:?}"))
}

fn fname(s: &str) -> String {
    s.trim()
        .trim_end_matches(" (partial-inline)")
        .trim_end_matches(" (inline)")
        .to_string()
}

/// `-top`: function -> (flat, cum), zero rows dropped, and the total.
fn parse_top(text: &str) -> (BTreeMap<String, (i64, i64)>, i64) {
    let (mut out, mut total, mut rows) = (BTreeMap::new(), None, false);
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Showing nodes accounting for ") {
            let of = rest.rsplit(" of ").next().unwrap();
            total = Some(value(of.trim_end_matches(" total").trim()));
        } else if line.trim_start().starts_with("flat ") {
            rows = true;
        } else if rows && !line.trim().is_empty() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (flat, cum) = (value(f[0]), value(f[3]));
            if flat != 0 || cum != 0 {
                out.insert(fname(&f[5..].join(" ")), (flat, cum));
            }
        }
    }
    (out, total.expect("a total line"))
}

/// `-peek` of one function: callers, (flat, cum), callees.
fn parse_peek(text: &str) -> (BTreeMap<String, i64>, (i64, i64), BTreeMap<String, i64>) {
    let (mut callers, mut callees, mut own) = (BTreeMap::new(), BTreeMap::new(), None);
    for line in text.lines() {
        let Some((left, name)) = line.split_once('|') else {
            continue;
        };
        let t: Vec<&str> = left.split_whitespace().collect();
        if t.is_empty() || t[0] == "flat" {
            continue;
        }
        if t.len() >= 5 {
            own = Some((value(t[0]), value(t[3])));
        } else if own.is_some() {
            callees.insert(fname(name), value(t[0]));
        } else {
            callers.insert(fname(name), value(t[0]));
        }
    }
    (callers, own.expect("the function's line"), callees)
}

/// Grafana's `percentencode` (encodeURIComponent, strict).
fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Expands the plugin's macros and Grafana's variables as they would be
/// (a multi-value selection is `{a,b}` before the format).
pub(crate) fn expand(
    sql: &str,
    vars: &BTreeMap<&str, Vec<String>>,
    from_ms: i64,
    to_ms: i64,
) -> String {
    let mut s = sql
        .replace(
            "$__fromTime_ms",
            &format!("fromUnixTimestamp64Milli({from_ms})"),
        )
        .replace(
            "$__toTime_ms",
            &format!("fromUnixTimestamp64Milli({to_ms})"),
        )
        .replace("$__interval_s", "10");
    for (name, values) in vars {
        let joined = if values.len() == 1 {
            values[0].clone()
        } else {
            format!("{{{}}}", values.join(","))
        };
        s = s.replace(&format!("${{{name}:percentencode}}"), &percent(&joined));
    }
    assert!(!s.contains('$'), "unexpanded macro or variable in {s}");
    s
}

/// A hex picker's value for `name`.
fn hx(name: &str) -> String {
    format!(
        "x{}",
        name.bytes().map(|b| format!("{b:02X}")).collect::<String>()
    )
}

/// The profiles' time (ms): an hour ago, whole seconds (the files' own
/// times would fall out of the retention some day).
pub(crate) fn t0() -> i64 {
    static T: OnceLock<i64> = OnceLock::new();
    *T.get_or_init(|| {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        (now - 3_600_000) / 1000 * 1000
    })
}

/// A fresh database with cpu.pb.gz (`run=one`) and cpu2.pb.gz (`run=two`),
/// both of service `shop`, at [`t0`].
fn loaded() -> Ident {
    static ONCE: OnceLock<Ident> = OnceLock::new();
    ONCE.get_or_init(|| {
        let schema = SchemaOptions {
            database: DB.parse().unwrap(),
            cluster: None,
        };
        load_runs(engine(), &schema);
        schema.database
    })
    .clone()
}

/// A fresh database made by `migrate` through `backend` with cpu.pb.gz
/// (`run=one`) and cpu2.pb.gz (`run=two`) loaded, both of service `shop`,
/// at [`t0`].
pub(crate) fn load_runs(backend: &dyn flamehouse::storage::Backend, schema: &SchemaOptions) {
    let db = &schema.database;
    q(&format!("DROP DATABASE IF EXISTS {db} SYNC"));
    migrate(backend, schema).unwrap();
    for (file, run) in [("cpu.pb.gz", "one"), ("cpu2.pb.gz", "two")] {
        let opts = ContinuousOptions {
            database: db.clone(),
            service: Some("shop".into()),
            labels: vec![("run".into(), run.into())],
            time_ns: Some(t0() * 1_000_000),
            ..Default::default()
        };
        load_pprof(backend, &pprof_dir().join(file), &opts).unwrap();
    }
}

pub(crate) fn dashboard() -> Value {
    continuous_dashboard(&loaded())
}

/// Variables selecting `run` in `values` (baseline `baseline`).
pub(crate) fn vars(values: &[&str], baseline: &[&str]) -> BTreeMap<&'static str, Vec<String>> {
    let mut v: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    v.insert("type", vec![CPU.into()]);
    v.insert("service", vec![hx("shop")]);
    v.insert("label", vec!["run".into()]);
    v.insert("value", values.iter().map(|s| hx(s)).collect());
    v.insert("baseline", baseline.iter().map(|s| hx(s)).collect());
    v.insert("offset", vec!["0".into()]);
    v.insert("diff_mode", vec!["0".into()]);
    v.insert("group_by", vec!["run".into()]);
    v.insert("function", vec![hx("main.fib")]);
    v.insert("max_nodes", vec!["0".into()]);
    v
}

fn panel<'a>(d: &'a Value, title_start: &str) -> &'a Value {
    d["panels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["title"].as_str().unwrap().starts_with(title_start))
        .unwrap_or_else(|| panic!("no panel {title_start:?}"))
}

fn run(p: &Value, v: &BTreeMap<&str, Vec<String>>, from: i64, to: i64) -> String {
    q(&expand(
        p["targets"][0]["rawSql"].as_str().unwrap(),
        v,
        from,
        to,
    ))
}

/// The range around the profiles: [t0 - 30 min, t0 + 30 min).
pub(crate) fn range() -> (i64, i64) {
    (t0() - 1_800_000, t0() + 1_800_000)
}

#[test]
fn variable_pickers_list_types_services_labels_and_cardinality() {
    let d = dashboard();
    let (f, t) = range();
    let v = vars(&["one"], &["one"]);
    let mut got = BTreeMap::new();
    for var in d["templating"]["list"].as_array().unwrap() {
        if var["type"] == "query" {
            let out = q(&expand(var["query"].as_str().unwrap(), &v, f, t));
            got.insert(var["name"].as_str().unwrap().to_string(), out);
        }
    }
    // Types: cpu first, then samples (the two sample types of a Go CPU profile).
    assert_eq!(got["type"], "cpu:nanoseconds\nsamples:count\n");
    assert_eq!(got["service"].lines().count(), 1, "{}", got["service"]);
    assert!(
        got["service"].starts_with("shop (")
            && got["service"].ends_with(&format!("\t{}\n", hx("shop"))),
        "{}",
        got["service"]
    );
    // Keys other than service: handler, run, version (pprof.Do labels + --label).
    let keys: Vec<&str> = got["label"]
        .lines()
        .map(|l| l.split('\t').nth(1).unwrap())
        .collect();
    assert_eq!(keys, ["handler", "run", "version"]);
    assert!(
        got["label"].contains("run (2 values, "),
        "cardinality: {}",
        got["label"]
    );
    // The series of each run: cpu.tags.txt / cpu2.tags.txt list the label
    // sets; the number of distinct series per run is counted from
    // cp_series directly (the oracle is the table, not the picker query).
    let per_run = q(&format!(
        "SELECT labels['run'], uniqExact(series_id) FROM {DB}.cp_series WHERE profile_type = '{CPU}' GROUP BY 1 ORDER BY 1"
    ));
    let mut want = String::new();
    for l in per_run.lines() {
        let (r, n) = l.split_once('\t').unwrap();
        want.push_str(&format!("{r} ({n} series)\t{}\n", hx(r)));
    }
    let missing = q(&format!(
        "SELECT uniqExact(series_id) FROM {DB}.cp_series WHERE profile_type = '{CPU}' AND NOT mapContains(labels, 'run')"
    ));
    assert_eq!(missing.trim(), "0");
    assert_eq!(got["value"], want);
    assert_eq!(got["baseline"], want);
    assert!(
        got["group_by"].starts_with("service (1 values)\tservice\n"),
        "{}",
        got["group_by"]
    );
    // Functions: by total, as the top table; fib is there.
    assert!(got["function"].contains(&format!("main.fib\t{}\n", hx("main.fib"))));
}

#[test]
fn flame_top_series_diff_and_sandwich_equal_go_tool_pprof() {
    let d = dashboard();
    let (f, t) = range();
    let (top1, total1) = parse_top(&golden("cpu.top.cpu.txt"));
    let (_, total2) = parse_top(&golden("cpu2.top.cpu.txt"));
    let out_dir = repo().join("target/grafana-render/continuous");
    std::fs::create_dir_all(&out_dir).unwrap();
    let mut frames = Vec::new();
    let mut frame = |name: &str, rows: &[Row], diff: bool| {
        let p = out_dir.join(format!("{name}.json"));
        std::fs::write(&p, frame_json(rows, diff, "ns").to_string()).unwrap();
        frames.push((p, rows[0].vals[0], diff));
    };

    // Flame graph: root = the -top total, for run=one; both runs = both.
    let flame = panel(&d, "Flame graph");
    let one = parse_rows(&run(flame, &vars(&["one"], &["one"]), f, t));
    check_tree(&one);
    assert_eq!(one[0].vals[0], total1);
    frame("flame", &one, false);
    let both = parse_rows(&run(flame, &vars(&["one", "two"], &["one"]), f, t));
    check_tree(&both);
    assert_eq!(both[0].vals[0], total1 + total2);
    // A typed max_nodes of 1 draws the smallest tree the UDF makes (2
    // nodes), not an engine error.
    let mut v = vars(&["one"], &["one"]);
    v.insert("max_nodes", vec!["1".into()]);
    let small = parse_rows(&run(flame, &v, f, t));
    assert!(small.len() <= 2 && small[0].vals[0] == total1, "{small:?}");
    // A range longer than 6 hours reads the per-minute rollup: same root.
    let long = parse_rows(&run(
        flame,
        &vars(&["one"], &["one"]),
        t0() - 12 * 3_600_000,
        t,
    ));
    assert_eq!(long[0].vals[0], total1);

    // Top functions: self/total = flat/cum; shares of the -top total.
    let top = panel(&d, "Top functions");
    let mut got = BTreeMap::new();
    for l in run(top, &vars(&["one"], &["one"]), f, t).lines() {
        let c: Vec<&str> = l.split('\t').collect();
        let (s, tot): (i64, i64) = (c[1].parse().unwrap(), c[2].parse().unwrap());
        let (ss, ts): (f64, f64) = (c[3].parse().unwrap(), c[4].parse().unwrap());
        assert!((ss - s as f64 / total1 as f64).abs() < 1e-9, "{l}");
        assert!((ts - tot as f64 / total1 as f64).abs() < 1e-9, "{l}");
        got.insert(unescape_tsv(c[0]), (s, tot));
    }
    assert_eq!(got, top1);

    // Series by label: one series per run, summing to each profile's total.
    let series = panel(&d, "By ");
    let mut sums: BTreeMap<String, i64> = BTreeMap::new();
    for l in run(series, &vars(&["one", "two"], &["one"]), f, t).lines() {
        let c: Vec<&str> = l.split('\t').collect();
        assert!(c[0].starts_with("20"), "time column: {l}");
        *sums.entry(c[1].to_string()).or_default() += c[2].parse::<i64>().unwrap();
    }
    assert_eq!(
        sums,
        BTreeMap::from([("run=one".to_string(), total1), ("run=two".into(), total2)])
    );

    // Diff: baseline run=one (cpu), comparison run=two (cpu2) = `go tool
    // pprof -diff_base cpu.pb.gz cpu2.pb.gz`: flat = selfRight - self
    // summed per function, cum = valueRight - value at the outermost node
    // of the function on each path.
    let diff = panel(&d, "Diff");
    let rows = parse_rows(&run(diff, &vars(&["two"], &["one"]), f, t));
    assert_eq!(rows[0].vals.len(), 4);
    let tree = check_tree(&rows);
    assert_eq!((rows[0].vals[0], rows[0].vals[2]), (total1, total2));
    let mut fc: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (path, v) in &tree {
        let Some(leaf) = path.last() else { continue };
        fc.entry(leaf.clone()).or_default().0 += v[3] - v[1];
        if !path[..path.len() - 1].contains(leaf) {
            fc.entry(leaf.clone()).or_default().1 += v[2] - v[0];
        }
    }
    fc.retain(|_, (a, b)| *a != 0 || *b != 0);
    assert_eq!(fc, parse_top(&golden("cpu2.diff_base_cpu.top.txt")).0);
    frame("diff", &rows, true);
    // The baseline offset: a range one day later with a one-day offset has
    // the profiles in the baseline only.
    let mut v = vars(&["one"], &["one"]);
    v.insert("offset", vec!["86400".into()]);
    let day = 86_400_000;
    let shifted = parse_rows(&run(diff, &v, f + day, t + day));
    assert_eq!((shifted[0].vals[0], shifted[0].vals[2]), (total1, 0));

    // Sandwich of main.fib and main.hashLoop = -peek.
    for func in ["main.fib", "main.hashLoop"] {
        let (callers, (flat, cum), callees) = parse_peek(&golden(&format!(
            "cpu.peek.{}.txt",
            func.trim_start_matches("main.")
        )));
        let mut v = vars(&["one"], &["one"]);
        v.insert("function", vec![hx(func)]);
        for (side, want) in [("Callers", &callers), ("Callees", &callees)] {
            let rows = parse_rows(&run(panel(&d, side), &v, f, t));
            let tree = check_tree(&rows);
            assert_eq!(rows[0].label, func);
            assert_eq!(rows[0].vals[0], cum, "{side} of {func}");
            if side == "Callees" {
                assert_eq!(rows[0].vals[1], flat, "{side} of {func}");
            }
            let level1: BTreeMap<String, i64> = tree
                .iter()
                .filter(|(p, _)| p.len() == 1)
                .map(|(p, v)| (p[0].clone(), v[0]))
                .collect();
            assert_eq!(&level1, want, "{side} of {func}");
            if func == "main.fib" {
                frame(&side.to_lowercase(), &rows, false);
            }
        }
        // The function over time: one series, its points summing to cum.
        let series = run(panel(&d, "${function:text} over time"), &v, f, t);
        let mut sum = 0;
        for l in series.lines() {
            let c: Vec<&str> = l.split('\t').collect();
            assert!(c[0].starts_with("20") && c[1] == func, "{l}");
            sum += c[2].parse::<i64>().unwrap();
        }
        assert_eq!(sum, cum, "{func} over time");
    }

    // Every frame drawn by Grafana's own flame graph component.
    let paths: Vec<PathBuf> = frames.iter().map(|(p, _, _)| p.clone()).collect();
    let reports = render(&out_dir, &paths);
    for (r, (_, root, diff)) in reports.iter().zip(&frames) {
        assert_eq!(r["rootValue"].as_i64(), Some(*root), "{r}");
        if !diff {
            assert_eq!(r["tableTotal"].as_i64(), Some(*root), "{r}");
        }
    }
}

/// Every variable set to hostile text (quotes, backslashes, comments,
/// braces, SQL) in turn and all at once: every query runs, selects nothing
/// where the variable selects, and the tables keep their rows.
#[test]
fn hostile_variable_values_select_nothing_and_break_nothing() {
    let db = loaded();
    let d = dashboard();
    let (f, t) = range();
    let hostile = [
        "1' OR 1=1 --",
        "x\\",
        "x0); DROP TABLE fh_grafana_cp.cp_samples; --",
        "\\'; SELECT 1; --",
        "{x41,x'}",
        "run'] OR 1=1 OR labels['a",
    ];
    let count = || q(&format!("SELECT count() FROM {db}.cp_samples"));
    let before = count();
    let names = [
        "type",
        "service",
        "label",
        "value",
        "baseline",
        "offset",
        "diff_mode",
        "group_by",
        "function",
        "max_nodes",
    ];
    let mut ran = 0;
    for h in hostile {
        for only in names.iter().map(Some).chain([None]) {
            let mut v = vars(&["one"], &["one"]);
            for n in names {
                if only.is_none_or(|o| *o == n) {
                    v.insert(n, vec![h.to_string(), "x41".into()]);
                }
            }
            for var in d["templating"]["list"].as_array().unwrap() {
                if var["type"] == "query" {
                    q(&expand(var["query"].as_str().unwrap(), &v, f, t));
                }
            }
            for p in d["panels"].as_array().unwrap() {
                let out = run(p, &v, f, t);
                ran += 1;
                // A selecting variable made hostile selects nothing.
                // (The diff's baseline has its own values: `value` alone
                // leaves it selecting.)
                let selects = matches!(only, None | Some(&"type" | &"service"))
                    || (only == Some(&"value")
                        && !p["title"].as_str().unwrap().starts_with("Diff"));
                if selects && p["type"] == "flamegraph" {
                    let rows = parse_rows(&out);
                    assert!(
                        rows.iter().all(|r| r.vals.iter().all(|x| *x == 0)),
                        "{} with {only:?} = {h:?}: {out}",
                        p["title"]
                    );
                } else if selects {
                    assert!(out.trim().is_empty(), "{} with {h:?}: {out}", p["title"]);
                }
            }
        }
    }
    assert!(ran >= 6 * 11 * 6, "{ran}");
    assert_eq!(count(), before);
}

/// Panels reference only defined variables and the plugin's macros; every
/// target is a ClickHouse SQL query on the provisioned data source.
#[test]
fn continuous_dashboard_hygiene() {
    let d = dashboard();
    let defined: BTreeSet<String> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect();
    let re = regex::Regex::new(r"\$\{([a-z_]+)(:[a-z]+)?\}").unwrap();
    let fmt = regex::Regex::new(r"\$\{[a-z_]+:percentencode\}").unwrap();
    let mut ids = BTreeSet::new();
    for p in d["panels"].as_array().unwrap() {
        assert!(ids.insert(p["id"].as_u64().unwrap()));
        let text = p.to_string();
        for c in re.captures_iter(&text) {
            assert!(defined.contains(&c[1]), "{}: ${{{}}}", p["title"], &c[1]);
        }
        let tg = &p["targets"][0];
        assert_eq!(tg["datasource"]["uid"], flamehouse::grafana::DATASOURCE_UID);
        assert_eq!(tg["editorType"], "sql");
        let sql = tg["rawSql"].as_str().unwrap();
        assert!(sql.contains(&format!("{DB}.")), "{sql}");
        assert!(!sql.contains("flamehouse."), "{sql}");
        // No variable raw: each is inside decodeURLComponent('...').
        for m in fmt.find_iter(sql) {
            assert!(
                sql[..m.start()].ends_with("decodeURLComponent('"),
                "{}: a raw variable",
                p["title"]
            );
        }
        if p["type"] == "flamegraph" {
            assert_eq!(tg["format"], 1);
        }
    }
    // Flame graph, top functions, by label, diff, callers, callees, the
    // function over time.
    assert_eq!(ids.len(), 7);
}

/// Heap data through the dashboard: 3 copies of the Go heap profile
/// (service `heap`, 10 minutes apart) in their own database; the flame
/// graph, top functions and series panels expanded as the plugin does.
/// `inuse_space` (a gauge) answers ONE profile's `go tool pprof -top
/// -sample_index=inuse_space`, `alloc_space` 3 times its golden, on a range
/// of the samples and on a range reading the hourly and minute rollups; the
/// inuse flame frame is drawn by Grafana's own component with the golden's
/// total at its root.
#[test]
fn heap_profiles_average_inuse_and_sum_alloc_through_the_panels() {
    let db: Ident = "fh_grafana_cp_heap".parse().unwrap();
    q(&format!("DROP DATABASE IF EXISTS {db}"));
    let opts = SchemaOptions {
        database: db.clone(),
        cluster: None,
    };
    migrate(engine(), &opts).unwrap();
    let tmp = flamehouse_fixtures::testing::temp_path("grafana-cp-heap");
    std::fs::create_dir_all(&tmp).unwrap();
    let base = t0() - 25 * 60_000;
    let times = [base, base + 10 * 60_000, base + 20 * 60_000];
    for ms in times {
        let o = ContinuousOptions {
            database: db.clone(),
            service: Some("heap".into()),
            time_ns: Some(ms * 1_000_000),
            ..Default::default()
        };
        load_pprof(engine(), &crate::continuous::heap_copy(&tmp, ms), &o).unwrap();
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let d = continuous_dashboard(&db);
    let heap_vars = |ty: &str| {
        let mut v = vars(&[], &[]);
        v.insert("type", vec![ty.into()]);
        v.insert("service", vec![hx("heap")]);
        v.insert("label", vec!["service".into()]);
        v.insert("value", vec![hx("heap")]);
        v.insert("baseline", vec![hx("heap")]);
        v.insert("group_by", vec!["service".into()]);
        v
    };
    let out_dir = repo().join("target/grafana-render/continuous-heap");
    std::fs::create_dir_all(&out_dir).unwrap();
    let mut frames = Vec::new();
    // [base - 5 min, base + 25 min): the samples; [base - 3 h, base + 4 h):
    // 7 hours, the minute rollup and whole hours from the hourly one.
    let ranges = [
        ("samples", (base - 5 * 60_000, base + 25 * 60_000)),
        ("rollups", (base - 3 * 3_600_000, base + 4 * 3_600_000)),
    ];
    for (kind, k) in [("inuse_space", 1), ("alloc_space", 3)] {
        let ty = format!("{kind}:bytes");
        let (one, total) = parse_top(&golden(&format!("heap.top.{kind}.txt")));
        let v = heap_vars(&ty);
        for (what, (f, t)) in ranges {
            let msg = format!("{ty} from the {what}");
            let rows = parse_rows(&run(panel(&d, "Flame graph"), &v, f, t));
            check_tree(&rows);
            assert_eq!(rows[0].vals[0], total * k, "{msg}");
            let mut got = BTreeMap::new();
            for l in run(panel(&d, "Top functions"), &v, f, t).lines() {
                let c: Vec<&str> = l.split('\t').collect();
                let (s, tot): (i64, i64) = (c[1].parse().unwrap(), c[2].parse().unwrap());
                let share: f64 = c[4].parse().unwrap();
                assert!(
                    (share - tot as f64 / (total * k) as f64).abs() < 1e-9,
                    "{msg}: {l}"
                );
                got.insert(unescape_tsv(c[0]), (s, tot));
            }
            let want: BTreeMap<String, (i64, i64)> = one
                .iter()
                .map(|(f, (s, t))| (f.clone(), (s * k, t * k)))
                .collect();
            assert_eq!(got, want, "{msg}");
            if kind == "inuse_space" && what == "samples" {
                let p = out_dir.join("inuse.json");
                std::fs::write(&p, frame_json(&rows, false, "bytes").to_string()).unwrap();
                frames.push(p);
            }
        }
        // Series by service, one 10-minute step per profile: each step is
        // one profile's heap for inuse (its average), one profile's
        // allocations for alloc.
        let mut v = v.clone();
        v.insert("group_by", vec!["service".into()]);
        let (f, t) = ranges[0].1;
        let vals: Vec<i64> = run(panel(&d, "By "), &v, f, t)
            .lines()
            .map(|l| l.split('\t').nth(2).unwrap().parse().unwrap())
            .collect();
        assert!(vals.iter().sum::<i64>() > 0);
        if kind == "inuse_space" {
            assert!(vals.iter().all(|x| *x == total), "{ty}: {vals:?}");
        } else {
            assert_eq!(vals.iter().sum::<i64>(), 3 * total, "{ty}: {vals:?}");
        }
    }
    let (_, total) = parse_top(&golden("heap.top.inuse_space.txt"));
    let reports = render(&out_dir, &frames);
    assert_eq!(reports.len(), 1);
    assert_eq!(
        reports[0]["rootValue"].as_i64(),
        Some(total),
        "{}",
        reports[0]
    );
    assert_eq!(
        reports[0]["tableTotal"].as_i64(),
        Some(total),
        "{}",
        reports[0]
    );
}

/// "All" as Grafana sends it: the picker's `allValue` when it has one,
/// else every value the picker lists for the dashboard's range. Release A
/// yesterday (`run=one`, cpu.pb.gz), release B today (`run=two`,
/// cpu2.pb.gz): the diff "today vs yesterday" with "All" on every picker
/// and a one-day offset has yesterday's run in its baseline, though
/// today's pickers list only `two` (with every listed value sent, as
/// before the pickers had an `allValue`, the baseline was empty).
#[test]
fn all_on_both_sides_of_a_day_offset_diff_keeps_yesterdays_values() {
    let db: Ident = "fh_grafana_cp_all".parse().unwrap();
    q(&format!("DROP DATABASE IF EXISTS {db} SYNC"));
    let schema = SchemaOptions {
        database: db.clone(),
        cluster: None,
    };
    migrate(engine(), &schema).unwrap();
    let day = 86_400_000;
    for (file, run, at) in [
        ("cpu.pb.gz", "one", t0() - day),
        ("cpu2.pb.gz", "two", t0()),
    ] {
        let opts = ContinuousOptions {
            database: db.clone(),
            service: Some("shop".into()),
            labels: vec![("run".into(), run.into())],
            time_ns: Some(at * 1_000_000),
            ..Default::default()
        };
        load_pprof(engine(), &pprof_dir().join(file), &opts).unwrap();
    }
    let (_, total1) = parse_top(&golden("cpu.top.cpu.txt"));
    let (_, total2) = parse_top(&golden("cpu2.top.cpu.txt"));
    let d = continuous_dashboard(&db);
    let (f, t) = range();
    let base = vars(&["two"], &["two"]);
    let all = |name: &str| -> Vec<String> {
        let var = d["templating"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap_or_else(|| panic!("no variable {name}"));
        assert_eq!(var["includeAll"], true, "{name}");
        if let Some(a) = var["allValue"].as_str().filter(|a| !a.is_empty()) {
            return vec![a.to_string()];
        }
        let listed = q(&expand(var["query"].as_str().unwrap(), &base, f, t));
        listed
            .lines()
            .map(|l| l.split('\t').nth(1).unwrap().to_string())
            .collect()
    };
    let mut v = base.clone();
    for name in ["service", "value", "baseline"] {
        v.insert(name, all(name));
    }
    v.insert("offset", vec!["86400".into()]);
    let rows = parse_rows(&run(panel(&d, "Diff"), &v, f, t));
    assert_eq!(
        (rows[0].vals[0], rows[0].vals[2]),
        (total1, total2),
        "baseline yesterday, comparison today"
    );
    // "All" is also the flame graph of every series of the range.
    let flame = parse_rows(&run(panel(&d, "Flame graph"), &v, f, t));
    assert_eq!(flame[0].vals[0], total2);
}
