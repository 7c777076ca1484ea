//! The Grafana pack: generated files are fresh, dashboards are well formed,
//! and every panel's SQL and variable query, expanded exactly as Grafana and
//! the ClickHouse plugin would, runs on the engine loaded with fixtures and
//! returns what its panel type needs; flame graphs are drawn by Grafana's own
//! component; hostile variable values change nothing.

use crate::render::{frame_json, render, repo};
use flamehouse::grafana;
use flamehouse::ingest::{load_file, LoadOptions};
use flamehouse::storage::schema::{default_database, migrate, SchemaOptions};
use flamehouse::Ident;
use flamehouse_fixtures::testing::temp_path;
use flamehouse_fixtures::workload::{compile_workload, generate, FixtureOptions};
use flamehouse_tests::*;
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::OnceLock;

/// Two fixture profiles (processes 7001 `graf-a` and 7002 `graf-b`),
/// generated once.
fn fixture_files() -> &'static [PathBuf; 2] {
    static ONCE: OnceLock<[PathBuf; 2]> = OnceLock::new();
    ONCE.get_or_init(|| {
        let dir = temp_path("grafana");
        let bin = compile_workload(&dir).unwrap();
        [(7001u32, "graf-a", 11u64), (7002, "graf-b", 12)].map(|(pid, name, seed)| {
            let mut o = FixtureOptions::new(&bin, dir.join(format!("{name}.binpb")));
            o.snapshots = 60;
            o.stacks = 1500;
            o.pid = pid;
            o.name = name.into();
            o.seed = seed;
            generate(&o).unwrap();
            o.output
        })
    })
}

/// Loads the two fixture processes into the `flamehouse` database once;
/// returns (process_id, first ms, last ms) of the first.
fn loaded() -> (u64, i64, i64) {
    static ONCE: OnceLock<(u64, i64, i64)> = OnceLock::new();
    *ONCE.get_or_init(|| {
        migrate(engine(), &SchemaOptions::default()).unwrap();
        let mut first = None;
        for f in fixture_files() {
            let s = load_file(engine(), f, &LoadOptions::default(), &mut |_| {}).unwrap();
            first.get_or_insert((s.process_id, s.span_ms.unwrap().0, s.span_ms.unwrap().1));
        }
        first.unwrap()
    })
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

/// Expands the plugin's macros and Grafana's variables as they would be.
pub(crate) fn expand(
    sql: &str,
    vars: &BTreeMap<&str, Vec<String>>,
    from_ms: i64,
    to_ms: i64,
    interval_s: u64,
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
        .replace("$__fromTime", &format!("toDateTime({})", from_ms / 1000))
        .replace("$__toTime", &format!("toDateTime({})", to_ms / 1000))
        .replace("$__interval_s", &interval_s.to_string());
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

fn dashboard() -> Value {
    grafana::memory_dashboard(&default_database())
}

#[test]
fn generated_files_are_fresh() {
    for (rel, want) in grafana::files(&default_database()) {
        let got = std::fs::read_to_string(repo().join("grafana").join(rel)).unwrap_or_default();
        assert!(
            got == want,
            "grafana/{rel} is stale: run `flamehouse grafana --out grafana`"
        );
    }
}

#[test]
fn dashboard_hygiene() {
    let d = dashboard();
    let panels = d["panels"].as_array().unwrap();
    let mut ids = HashSet::new();
    let mut boxes: Vec<(u64, u64, u64, u64)> = Vec::new();
    let defined: HashSet<String> = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect();
    let var_re = regex::Regex::new(r"\$\{([a-z_]+)(:[a-z]+)?\}|\$([a-z_]+)\b").unwrap();
    let builtin = [
        "__data",
        "__interval_s",
        "__fromTime",
        "__toTime",
        "__fromTime_ms",
        "__toTime_ms",
    ];
    for p in panels {
        assert!(
            ids.insert(p["id"].as_u64().unwrap()),
            "duplicate panel id {}",
            p["id"]
        );
        let g = &p["gridPos"];
        let b = (
            g["x"].as_u64().unwrap(),
            g["y"].as_u64().unwrap(),
            g["w"].as_u64().unwrap(),
            g["h"].as_u64().unwrap(),
        );
        assert!(b.0 + b.2 <= 24, "panel {} wider than the grid", p["title"]);
        for o in &boxes {
            let overlap = b.0 < o.0 + o.2 && o.0 < b.0 + b.2 && b.1 < o.1 + o.3 && o.1 < b.1 + b.3;
            assert!(!overlap, "panel {} overlaps another", p["title"]);
        }
        boxes.push(b);
        assert_eq!(p["datasource"]["uid"], grafana::DATASOURCE_UID);
        for t in p["targets"].as_array().unwrap() {
            assert_eq!(t["datasource"]["uid"], grafana::DATASOURCE_UID);
        }
        let text = p.to_string();
        for c in var_re.captures_iter(&text) {
            let name = c.get(1).or(c.get(3)).unwrap().as_str();
            if builtin
                .iter()
                .any(|b| name.starts_with(b.trim_start_matches('$')))
                || name.starts_with("__")
            {
                continue;
            }
            assert!(
                defined.contains(name),
                "panel {} uses undefined variable {name}",
                p["title"]
            );
        }
    }
    let yaml = grafana::datasource_yaml(&default_database());
    assert!(yaml.contains(&format!("uid: {}", grafana::DATASOURCE_UID)));
    assert!(yaml.contains("defaultDatabase: flamehouse"));
}

#[test]
fn every_panel_query_runs_and_fits_its_panel() {
    let (pid, from_ms, to_ms) = loaded();
    let d = dashboard();
    let functions = q(&format!(
        "SELECT hex(sf.function) FROM flamehouse.samples AS s INNER JOIN (SELECT DISTINCT stack_id, function FROM flamehouse.stack_functions) AS sf \
         ON sf.stack_id = s.stack_id WHERE s.process_id = {pid} GROUP BY sf.function ORDER BY sum(abs(s.size_delta)) DESC, sf.function LIMIT 3"
    ));
    let mut vars: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    vars.insert("process", vec![pid.to_string()]);
    vars.insert("metric", vec!["bytes".into()]);
    vars.insert("max_nodes", vec!["2000".into()]);
    vars.insert("function", functions.lines().map(String::from).collect());
    assert_eq!(vars["function"].len(), 3);

    // Variable queries return __text/__value.
    for v in d["templating"]["list"].as_array().unwrap() {
        if v["type"] == "query" {
            let sql = expand(v["query"].as_str().unwrap(), &vars, from_ms, to_ms, 1);
            let out = q(&sql);
            assert!(
                !out.trim().is_empty(),
                "variable {} returned nothing",
                v["name"]
            );
        }
    }
    // Mid-range start so that added/removed both have content.
    let (f, t) = (from_ms + 10_000, to_ms);
    let out_dir = repo().join("target/grafana-render/memory");
    std::fs::create_dir_all(&out_dir).unwrap();
    let mut frames = Vec::new();
    for metric in ["bytes", "count"] {
        vars.insert("metric", vec![metric.into()]);
        for p in d["panels"].as_array().unwrap() {
            let title = p["title"].as_str().unwrap();
            let sql = expand(p["targets"][0]["rawSql"].as_str().unwrap(), &vars, f, t, 5);
            let out = q(&sql);
            assert!(
                !out.trim().is_empty(),
                "panel {title:?} ({metric}) returned nothing:\n{sql}"
            );
            match p["type"].as_str().unwrap() {
                "flamegraph" => {
                    let rows = parse_rows(&out);
                    let diff = sql.contains("valueRight");
                    assert_eq!(rows[0].vals.len(), if diff { 4 } else { 2 }, "{title}");
                    check_tree(&rows);
                    assert!(
                        rows.len() > 5,
                        "panel {title:?} drew only {} rows",
                        rows.len()
                    );
                    let name = format!("{}-{metric}.json", p["id"]);
                    let path = out_dir.join(name);
                    let unit = p["fieldConfig"]["defaults"]["unit"]
                        .as_str()
                        .unwrap_or("short");
                    std::fs::write(&path, frame_json(&rows, diff, unit).to_string()).unwrap();
                    frames.push((path, rows[0].vals[0], diff));
                }
                "timeseries" => {
                    for l in out.lines() {
                        let cols: Vec<&str> = l.split('\t').collect();
                        assert!(cols[0].starts_with("2026-"), "{title}: time column {l}");
                        assert!(
                            cols.last().unwrap().parse::<i64>().is_ok(),
                            "{title}: numbers {l}"
                        );
                    }
                }
                _ => {}
            }
        }
    }
    // Every flame graph drawn by Grafana's own component.
    let paths: Vec<PathBuf> = frames.iter().map(|(p, _, _)| p.clone()).collect();
    let reports = render(&out_dir, &paths);
    for (r, (_, root, diff)) in reports.iter().zip(&frames) {
        assert_eq!(r["ok"], true, "{r}");
        assert_eq!(r["rootValue"].as_i64(), Some(*root), "{r}");
        if !diff {
            // The total Grafana itself shows (its tooltip on the root bar)
            // equals the SQL root value; a diff's tooltip is rounded.
            assert_eq!(r["tableTotal"].as_i64(), Some(*root), "{r}");
        }
    }
}

/// The function panels run the function_series view's own query with the
/// plugin's macros: the same rows as the view, on the rollup's path (1 m)
/// and the samples' path (5 s).
#[test]
fn function_panels_equal_the_function_series_view() {
    let (pid, from_ms, to_ms) = loaded();
    let d = dashboard();
    let names: Vec<String> = q(&format!(
        "SELECT DISTINCT function FROM flamehouse.stack_functions WHERE stack_id IN \
         (SELECT stack_id FROM flamehouse.samples WHERE process_id = {pid}) ORDER BY function LIMIT 4"
    ))
    .lines()
    .map(unescape_tsv)
    .collect();
    assert_eq!(names.len(), 4);
    let mut vars: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    vars.insert("process", vec![pid.to_string()]);
    vars.insert("metric", vec!["bytes".into()]);
    vars.insert("max_nodes", vec!["2000".into()]);
    vars.insert(
        "function",
        names
            .iter()
            .map(|n| n.bytes().map(|b| format!("{b:02X}")).collect())
            .collect(),
    );
    let list: Vec<String> = names.iter().map(|n| lit(n)).collect();
    let mut checked = 0;
    for p in d["panels"].as_array().unwrap() {
        let sql = p["targets"][0]["rawSql"].as_str().unwrap();
        let Some(col) = ["live_bytes", "live_count"]
            .into_iter()
            .find(|c| sql.starts_with(&format!("SELECT time, function, {c} FROM")))
        else {
            continue;
        };
        assert_eq!(p["interval"], "1m", "{}", p["title"]);
        for step in [60u64, 5] {
            let got = q(&expand(sql, &vars, from_ms + 7_000, to_ms - 3_000, step));
            let want = q(&format!(
                "SELECT time, function, {col} FROM flamehouse.function_series(process_id = {pid}, step = {step}, \
                 t1 = fromUnixTimestamp64Milli({}), t2 = fromUnixTimestamp64Milli({}), functions = [{}])",
                from_ms + 7_000,
                to_ms - 3_000,
                list.join(", ")
            ));
            assert!(want.lines().count() > 2, "{want}");
            assert_eq!(got, want, "{} at step {step}", p["title"]);
            checked += 1;
        }
    }
    assert_eq!(checked, 4);
}

#[test]
fn hostile_variable_values_select_nothing_else() {
    let (pid, from_ms, to_ms) = loaded();
    let d = dashboard();
    let hostile = [
        "1' OR 1=1 --",
        "x\\",
        "0); DROP TABLE flamehouse.samples; --",
        "\\'; SELECT 1; --",
        &format!("{pid} OR 1=1"),
        "proc\"name'with\\quotes;--",
    ];
    let before = q("SELECT count() FROM flamehouse.samples");
    for h in hostile {
        let mut vars: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        vars.insert("process", vec![h.to_string()]);
        vars.insert("metric", vec![h.to_string()]);
        vars.insert("max_nodes", vec![h.to_string()]);
        vars.insert("function", vec![h.to_string(), "41".into()]);
        for p in d["panels"].as_array().unwrap() {
            if p["title"] == "Processes" {
                continue; // lists every process by design; uses no variable
            }
            let sql = expand(
                p["targets"][0]["rawSql"].as_str().unwrap(),
                &vars,
                from_ms,
                to_ms,
                5,
            );
            // Since migration 4 a view refuses an unknown metric: the
            // value comes back verbatim in the error, and nothing runs.
            if p["targets"][0]["rawSql"]
                .as_str()
                .unwrap()
                .contains("${metric:")
            {
                let e = q_err(&sql);
                assert!(e.contains("unknown metric '"), "{}: {e}", p["title"]);
                continue;
            }
            let out = q(&sql); // must not fail
            match p["type"].as_str().unwrap() {
                "flamegraph" => {
                    let rows = parse_rows(&out);
                    assert_eq!(rows.len(), 1, "{}: hostile value selected data", p["title"]);
                    assert!(rows[0].vals.iter().all(|v| *v == 0));
                }
                "stat" => assert!(out.trim().split('\t').skip(1).all(|v| v == "0"), "{out}"),
                _ => assert!(
                    out.trim().is_empty(),
                    "{}: hostile value selected {out}",
                    p["title"]
                ),
            }
        }
    }
    assert_eq!(q("SELECT count() FROM flamehouse.samples"), before);
}

/// Grafana's provisioning interpolation of one value (Grafana 12,
/// `pkg/services/provisioning/values`): split on `$$` (a literal `$`); in
/// each part, `setting.ExpandVar` replaces `${X}` and `$__env{X}` (regex
/// `\$(|__\w+)\{([^}]+)\}`) with the variable named by everything inside
/// the braces, then Go's `os.ExpandEnv` replaces `${X}` and `$X` (`X` of
/// letters, digits, `_`). There are no defaults: `${A:-b}` looks up `A:-b`.
fn grafana_interpolate(value: &str, env: &BTreeMap<String, String>) -> String {
    let get = |k: &str| env.get(k).cloned().unwrap_or_default();
    let expand_var = regex::Regex::new(r"\$(|__\w+)\{([^}]+)\}").unwrap();
    let os_expand = |s: &str| -> String {
        // Go's os.Expand / getShellName.
        let b = s.as_bytes();
        let (mut out, mut j) = (String::new(), 0);
        let special = |c: u8| b"*#$@!?-".contains(&c) || c.is_ascii_digit();
        let alnum = |c: u8| c == b'_' || c.is_ascii_alphanumeric();
        while j < b.len() {
            if b[j] != b'$' || j + 1 >= b.len() {
                out.push(b[j] as char);
                j += 1;
                continue;
            }
            let r = &s[j + 1..];
            let rb = r.as_bytes();
            let (name, w): (&str, usize) = if rb[0] == b'{' {
                if rb.len() > 2 && special(rb[1]) && rb[2] == b'}' {
                    (&r[1..2], 3)
                } else {
                    match r.find('}') {
                        Some(1) => ("", 2),
                        Some(i) => (&r[1..i], i + 1),
                        None => ("", 1),
                    }
                }
            } else if special(rb[0]) {
                (&r[..1], 1)
            } else {
                let n = rb.iter().take_while(|c| alnum(**c)).count();
                (&r[..n], n)
            };
            if !name.is_empty() {
                out.push_str(&get(name));
            } else if w == 0 {
                out.push('$');
            }
            j += 1 + w;
        }
        out
    };
    value
        .split("$$")
        .map(|part| {
            let part = expand_var.replace_all(part, |c: &regex::Captures| match &c[1] {
                "" | "__env" => get(&c[2]),
                _ => c[0].to_string(),
            });
            os_expand(&part)
        })
        .collect::<Vec<_>>()
        .join("$")
}

/// `key: value` pairs of a block of the generated YAML: the lines indented
/// deeper than `header` (found after the lines `path` in order), quotes off.
fn yaml_block(text: &str, path: &[&str]) -> Vec<(String, String)> {
    let mut lines = text.lines().filter(|l| !l.trim_start().starts_with('#'));
    for p in path {
        lines
            .by_ref()
            .find(|l| l.trim_end() == *p)
            .unwrap_or_else(|| panic!("no {p:?} in\n{text}"));
    }
    let indent = path.last().unwrap().len() - path.last().unwrap().trim_start().len();
    lines
        .take_while(|l| l.len() - l.trim_start().len() > indent)
        .filter_map(|l| l.trim().split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
        .collect()
}

/// The data source's provisioning, interpolated as Grafana does with the
/// environment docker-compose.yaml gives Grafana, reaches ClickHouse's
/// HTTP port: every variable is a plain name that the compose file sets.
#[test]
fn datasource_provisioning_expands_with_the_compose_environment() {
    let compose = std::fs::read_to_string(repo().join("grafana/docker-compose.yaml")).unwrap();
    let ds =
        std::fs::read_to_string(repo().join("grafana/provisioning/datasources/flamehouse.yaml"))
            .unwrap();
    let env: BTreeMap<String, String> = yaml_block(&compose, &["  grafana:", "    environment:"])
        .into_iter()
        .collect();
    // The ClickHouse service's name and HTTP port in the same file.
    assert!(compose.contains("\n  clickhouse:\n"), "{compose}");
    assert!(compose.contains("\"127.0.0.1:8123:8123\""), "{compose}");
    // Anonymous Grafana admins and a ClickHouse without a password: both
    // stacks publish their ports on loopback only (they were on every
    // interface).
    for file in ["docker-compose.yaml", "docker-compose.serve.yaml"] {
        let text = std::fs::read_to_string(repo().join("grafana").join(file)).unwrap();
        for line in text
            .lines()
            .filter(|l| l.trim_start().starts_with("ports:"))
        {
            let published: Vec<&str> = line.split('"').skip(1).step_by(2).collect();
            assert!(
                !published.is_empty() && published.iter().all(|p| p.starts_with("127.0.0.1:")),
                "{file}: {line}"
            );
        }
    }

    let reference = regex::Regex::new(r"\$\{([^}]*)\}|\$(\w*)").unwrap();
    let plain = regex::Regex::new(r"^[A-Za-z_]\w*$").unwrap();
    let mut used = Vec::new();
    for line in ds.lines().filter(|l| !l.trim_start().starts_with('#')) {
        for c in reference.captures_iter(line) {
            let name = c.get(1).or(c.get(2)).unwrap().as_str();
            assert!(
                plain.is_match(name),
                "{line:?}: `{}` is not a plain variable Grafana can expand",
                &c[0]
            );
            assert!(
                env.contains_key(name),
                "{line:?}: compose does not set {name}"
            );
            used.push(name.to_string());
        }
    }
    assert!(used.len() >= 4, "{used:?}");
    let json: BTreeMap<String, String> = yaml_block(&ds, &["    jsonData:"])
        .into_iter()
        .map(|(k, v)| (k, grafana_interpolate(&v, &env)))
        .collect();
    assert_eq!(json["host"], "clickhouse");
    assert_eq!(json["port"], "8123");
    assert_eq!(json["protocol"], "http");
    assert_eq!(json["username"], "default");
    assert_eq!(json["defaultDatabase"], "flamehouse");
    let secure: BTreeMap<String, String> = yaml_block(&ds, &["    secureJsonData:"])
        .into_iter()
        .map(|(k, v)| (k, grafana_interpolate(&v, &env)))
        .collect();
    assert_eq!(secure["password"], env["CLICKHOUSE_PASSWORD"]);
    // The interpolation itself, on Grafana's documented forms.
    let e: BTreeMap<String, String> = [("A".to_string(), "x".to_string())].into();
    assert_eq!(grafana_interpolate("$A-${A}-$__env{A}-$$A", &e), "x-x-x-$A");
    assert_eq!(grafana_interpolate("${A:-d}", &e), "");
}

/// `flamehouse grafana --out DIR` writes the whole pack: the same files,
/// byte for byte, as the committed `grafana/` outside the test renderer.
#[test]
fn grafana_command_writes_the_whole_pack() {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if rel == "render" {
                continue;
            }
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(rel, std::fs::read(&p).unwrap());
            }
        }
    }
    let dir = temp_path("pack");
    let out = std::process::Command::new(udf_binary().with_file_name("flamehouse"))
        .args(["grafana", "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (mut got, mut want) = (BTreeMap::new(), BTreeMap::new());
    walk(&dir, &dir, &mut got);
    walk(&repo().join("grafana"), &repo().join("grafana"), &mut want);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>()
    );
    for (k, v) in &want {
        assert!(
            got[k] == *v,
            "grafana/{k} differs from what `flamehouse grafana` writes"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A dashboard range that misses the selected process's lifetime (Grafana's
/// default "last 6 hours" on an old profile, or a range before it) shows
/// the whole lifetime: every time-ranged panel returns what it returns on
/// the lifetime itself (first to last snapshot, as `process_list` has it),
/// not nothing. A range that meets the lifetime is kept (the view
/// equality tests above run sub-ranges).
#[test]
fn panels_show_the_process_lifetime_when_the_range_misses_it() {
    let (pid, _, _) = loaded();
    let d = dashboard();
    let life: Vec<i64> = q(&format!(
        "SELECT toUnixTimestamp64Milli(first_ts), toUnixTimestamp64Milli(end_time) \
         FROM flamehouse.process_list WHERE process_id = {pid}"
    ))
    .split_whitespace()
    .map(|x| x.parse().unwrap())
    .collect();
    let (first, last) = (life[0], life[1]);
    let mut vars: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    vars.insert("process", vec![pid.to_string()]);
    vars.insert("metric", vec!["bytes".into()]);
    vars.insert("max_nodes", vec!["2000".into()]);
    vars.insert(
        "function",
        q(&format!(
            "SELECT hex(function) FROM flamehouse.stack_functions WHERE stack_id IN \
             (SELECT stack_id FROM flamehouse.samples WHERE process_id = {pid}) GROUP BY function ORDER BY function LIMIT 3"
        ))
        .lines()
        .map(String::from)
        .collect(),
    );
    let day = 86_400_000;
    let (mut checked, mut with_data) = (0, 0);
    for p in d["panels"].as_array().unwrap() {
        let sql = p["targets"][0]["rawSql"].as_str().unwrap();
        if !sql.contains("$__toTime_ms") {
            continue;
        }
        let want = q(&expand(sql, &vars, first, last, 5));
        // (What was removed over a whole lifetime can be nothing.)
        if want.lines().count() > 1 {
            with_data += 1;
        }
        for (from, to) in [
            (last + day, last + day + 6 * 3_600_000), // "last 6 hours", a day later
            (first - 30 * day, first - 29 * day),     // before the process
        ] {
            let got = q(&expand(sql, &vars, from, to, 5));
            assert_eq!(got, want, "{} on [{from}, {to}]", p["title"]);
        }
        checked += 1;
    }
    assert!(checked >= 10, "{checked} panels checked");
    assert!(
        with_data >= 8,
        "only {with_data} panels have data on the lifetime"
    );
}

/// A pack written for another database (`flamehouse grafana --database`)
/// queries that database only: with the schema initialised there and one
/// process loaded into it (and nothing of it in `flamehouse`), every
/// variable query and every panel, for both metrics, runs and returns rows
/// of that process; no SQL names the default database; the data source's
/// default database and the compose file's `init` follow it.
#[test]
fn a_pack_for_another_database_queries_that_database() {
    let db: Ident = "fh_grafana_alt".parse().unwrap();
    let dir = temp_path("pack-alt");
    let out = std::process::Command::new(udf_binary().with_file_name("flamehouse"))
        .args(["grafana", "--database", db.as_str(), "--out"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read = |rel: &str| std::fs::read_to_string(dir.join(rel)).unwrap();
    let d: Value = serde_json::from_str(&read("dashboards/memory.json")).unwrap();
    assert!(read("provisioning/datasources/flamehouse.yaml")
        .contains(&format!("defaultDatabase: {db}\n")));
    // The compose file's schema service runs `init` on this database: its
    // entrypoint, pointed at a closed port, parses (a usage error exits 2)
    // and fails only at connecting.
    let compose = read("docker-compose.yaml");
    let entry = compose
        .lines()
        .find_map(|l| l.trim().strip_prefix("entrypoint: "))
        .expect("the schema service's entrypoint");
    let args: Vec<String> = serde_json::from_str(entry).unwrap();
    assert_eq!(args[0], "/usr/local/bin/flamehouse");
    assert_eq!(args[1], "init", "{args:?}");
    assert!(
        args.windows(2)
            .any(|w| w[0] == "--database" && w[1] == db.as_str()),
        "{args:?}"
    );
    let args: Vec<String> = args[1..]
        .iter()
        .map(|a| a.replace("http://clickhouse:8123", "http://127.0.0.1:9"))
        .collect();
    let run = std::process::Command::new(udf_binary().with_file_name("flamehouse"))
        .args(&args)
        .args(["--connect-timeout", "1"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{args:?}: {err}");
    assert!(err.contains("127.0.0.1:9"), "{args:?}: {err}");

    let opts = SchemaOptions {
        database: db.clone(),
        ..Default::default()
    };
    migrate(engine(), &opts).unwrap();
    let lo = LoadOptions {
        database: db.clone(),
        ..Default::default()
    };
    // graf-b only: in `flamehouse` (if another test loaded it) it sits
    // beside graf-a, here it is alone.
    let s = load_file(engine(), &fixture_files()[1], &lo, &mut |_| {}).unwrap();
    let (pid, (from_ms, to_ms)) = (s.process_id, s.span_ms.unwrap());
    let functions = q(&format!(
        "SELECT hex(function) FROM {db}.stack_functions WHERE stack_id IN \
         (SELECT stack_id FROM {db}.samples WHERE process_id = {pid}) GROUP BY function ORDER BY function LIMIT 3"
    ));
    let mut vars: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    vars.insert("process", vec![pid.to_string()]);
    vars.insert("metric", vec!["bytes".into()]);
    vars.insert("max_nodes", vec!["2000".into()]);
    vars.insert("function", functions.lines().map(String::from).collect());
    assert_eq!(vars["function"].len(), 3);

    let default_db = regex::Regex::new(r"\bflamehouse\.").unwrap();
    let process = d["templating"]["list"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "process")
        .unwrap();
    let listed = q(&expand(
        process["query"].as_str().unwrap(),
        &vars,
        from_ms,
        to_ms,
        1,
    ));
    assert_eq!(listed, format!("graf-b (pid 7002)\t{pid}\n"));
    let mut checked = 0;
    for v in d["templating"]["list"].as_array().unwrap() {
        if v["type"] == "query" {
            let sql = v["query"].as_str().unwrap();
            assert!(!default_db.is_match(sql), "variable {}: {sql}", v["name"]);
            assert!(sql.contains(&format!("{db}.")), "{sql}");
            let got = q(&expand(sql, &vars, from_ms, to_ms, 1));
            assert!(
                !got.trim().is_empty(),
                "variable {} returned nothing",
                v["name"]
            );
            checked += 1;
        }
    }
    for metric in ["bytes", "count"] {
        vars.insert("metric", vec![metric.into()]);
        for p in d["panels"].as_array().unwrap() {
            let title = p["title"].as_str().unwrap();
            let sql = p["targets"][0]["rawSql"].as_str().unwrap();
            assert!(!default_db.is_match(sql), "panel {title:?}: {sql}");
            assert!(sql.contains(&format!("{db}.")), "panel {title:?}: {sql}");
            let sql = expand(sql, &vars, from_ms + 10_000, to_ms, 5);
            let out = q(&sql);
            assert!(
                !out.trim().is_empty(),
                "panel {title:?} ({metric}) returned nothing:\n{sql}"
            );
            match p["type"].as_str().unwrap() {
                "flamegraph" => {
                    let rows = parse_rows(&out);
                    check_tree(&rows);
                    assert!(rows.len() > 5, "panel {title:?} drew {} rows", rows.len());
                }
                "table" if title == "Processes" => {
                    assert_eq!(out.lines().count(), 1, "{out}");
                    assert!(out.starts_with("graf-b\t7002\t"), "{out}");
                }
                _ => {}
            }
            checked += 1;
        }
    }
    assert!(checked >= 2 + 2 * 15, "{checked} queries checked");
    let _ = std::fs::remove_dir_all(&dir);
}
