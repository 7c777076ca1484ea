//! `cp_stacks` (migration 11): every continuous query joins the stacks of
//! its own service(s) and days, not the whole shared `stacks` table. On the
//! committed Go profiles in the real engine: answers against `go tool
//! pprof`'s goldens with many unrelated stacks stored (other services,
//! other days, stacks of no continuous profile), the engine's own index
//! analysis showing `cp_stacks` read by its key and `stacks` not read, and
//! a database of migrations 1 to 9 with profiles in it upgrading to the
//! same answers (the back-fill equal to what the loader writes).

use crate::continuous::{
    fresh, golden, load_as, parse_top, parse_traces, per_stack, qopts, selves, top, tree, CPU,
};
use flamehouse::continuous_query::{
    diff_sql, flame_sql, function_series_sql, profile_flame_sql, sandwich_sql, top_functions_sql,
    SandwichSide, Selection, Selector,
};
use flamehouse::storage::schema::{migrate, SchemaOptions};
use flamehouse_tests::*;

const DAY: i64 = 86_400_000;

/// A selection of `[ms, ms + 1 s)`.
fn sel(ty: &str, ms: i64, selector: &str) -> Selection {
    Selection {
        profile_type: ty.into(),
        from_ms: ms,
        to_ms: ms + 1000,
        selector: Selector::parse(selector).unwrap(),
    }
}

/// `n` stacks of ~20 frames that no continuous profile of `db` has, in
/// `stacks` and (as other services' stacks of other days) in `cp_stacks`:
/// what months of other services and memory profiles leave there. Their
/// frames are the fixtures' own function names, so a join that picked
/// them up would change the answers.
fn add_unrelated_stacks(db: &str, n: u64, day_ms: i64) {
    let names = "['main.main', 'runtime.main', 'main.busy', 'runtime.mallocgc', 'main.alloc', \
                 'runtime.goexit', 'main.work', 'sync.(*Mutex).Lock']";
    let labels = format!(
        "arrayMap(i -> concat({names}[1 + (number + i) % 8], '#', toString(number % 97)), range(20))"
    );
    q(&format!(
        "INSERT INTO {db}.stacks (stack_id, frame_ids, labels) \
         SELECT cityHash64('unrelated', number), arrayMap(i -> cityHash64(number, i), range(20)), {labels} \
         FROM numbers({n})"
    ));
    q(&format!(
        "INSERT INTO {db}.cp_stacks (service, date, stack_id, labels) \
         SELECT concat('other-', toString(number % 7)), toDate(fromUnixTimestamp64Milli(toInt64({day_ms}), 'UTC')) - toIntervalDay(number % 3), \
                cityHash64('unrelated', number), {labels} \
         FROM numbers({n})"
    ));
}

/// Every query kind of one database, as text: flame graphs and top
/// functions of each service and type, a diff, a sandwich (both sides),
/// function series, one profile's flame graph and migration 9's views.
fn answers(db: &str, cpu_ms: i64, heap_ms: i64, cpu_id: u64) -> Vec<(String, String)> {
    let o = qopts(db);
    let (tops, _) = parse_top(&golden("cpu.top.cpu.txt"));
    let f = tops.keys().next().unwrap().clone();
    let mut sqls: Vec<(String, String)> = Vec::new();
    for (ty, ms, svc) in [
        (CPU, cpu_ms, "cpu"),
        ("inuse_space:bytes", heap_ms, "heap"),
        ("alloc_objects:count", heap_ms, "heap"),
    ] {
        let s = sel(ty, ms, &format!("{{service=\"{svc}\"}}"));
        sqls.push((format!("flame {ty}"), flame_sql(&o, &s, 0)));
        sqls.push((
            format!("top {ty}"),
            top_functions_sql(&o, &s, None, 0).unwrap(),
        ));
    }
    let a = sel(CPU, cpu_ms, r#"{handler="a"}"#);
    let b = sel(CPU, cpu_ms, r#"{service="cpu"}"#);
    sqls.push(("diff".into(), diff_sql(&o, &a, &b, 0, false).unwrap()));
    for side in [SandwichSide::Callers, SandwichSide::Callees] {
        sqls.push((
            format!("sandwich {side:?}"),
            sandwich_sql(&o, &b, &f, side, 0),
        ));
    }
    sqls.push((
        "function series".into(),
        function_series_sql(&o, &b, &[f.as_str(), "runtime.main"], 60),
    ));
    sqls.push(("profile".into(), profile_flame_sql(&o, cpu_id, CPU, 0)));
    let t = |ms: i64| format!("fromUnixTimestamp64Milli(toInt64({ms}), 'UTC')");
    sqls.push((
        "view cp_flame".into(),
        format!(
            "SELECT * FROM {db}.cp_flame(profile_type = 'cpu:nanoseconds', t1 = {}, t2 = {}, \
             match = map('service', 'cpu'), max_nodes = 0)",
            t(cpu_ms),
            t(cpu_ms + 1000)
        ),
    ));
    sqls.push((
        "view cp_top_functions_matching".into(),
        format!(
            "SELECT * FROM {db}.cp_top_functions_matching(profile_type = 'cpu:nanoseconds', t1 = {}, t2 = {}, \
             matchers = CAST([('service', '=', 'cpu')], 'Array(Tuple(String, String, String))'), limit = 0)",
            t(cpu_ms),
            t(cpu_ms + 1000)
        ),
    ));
    sqls.into_iter()
        .map(|(name, sql)| {
            let out = q(&sql);
            assert!(!out.trim().is_empty(), "{name}: no rows\n{sql}");
            (name, out)
        })
        .collect()
}

/// The flame graph and top functions of the CPU profile equal `go tool
/// pprof -traces` / `-top`.
fn equals_goldens(db: &str, cpu_ms: i64) {
    let o = qopts(db);
    let s = sel(CPU, cpu_ms, r#"{service="cpu"}"#);
    let want = per_stack(&parse_traces(&golden("cpu.traces.cpu.txt")), |_| true);
    assert_eq!(selves(&tree(&flame_sql(&o, &s, 0))), want, "{db}: -traces");
    let (want, _) = parse_top(&golden("cpu.top.cpu.txt"));
    assert_eq!(
        top(&top_functions_sql(&o, &s, None, 0).unwrap()),
        want,
        "{db}: -top"
    );
}

fn cp_stacks_rows(db: &str) -> String {
    q(&format!(
        "SELECT service, date, stack_id, labels FROM {db}.cp_stacks FINAL ORDER BY ALL"
    ))
}

/// With 30,000 unrelated stacks stored (in `stacks`, and in `cp_stacks`
/// under other services and days), a flame graph of one service equals the
/// golden, and its plan reads `cp_stacks` by the key: only the part of its
/// service (merges stopped: one part per insert), and never `stacks`. On
/// the old builders (a join with the whole `stacks`) the plan check fails.
#[test]
fn unrelated_stacks_change_nothing_and_cp_stacks_is_read_by_its_key() {
    let db = "fh_cps_key";
    fresh(db);
    q(&format!("SYSTEM STOP MERGES {db}.cp_stacks"));
    let (_, cpu_ms) = load_as(db, "cpu.pb.gz", "cpu", &[]);
    load_as(db, "cpu2.pb.gz", "beta", &[]);
    add_unrelated_stacks(db, 30_000, cpu_ms - DAY);
    equals_goldens(db, cpu_ms);
    let parts: i64 = q(&format!(
        "SELECT count() FROM system.parts WHERE database = '{db}' AND table = 'cp_stacks' AND active"
    ))
    .trim()
    .parse()
    .unwrap();
    assert!(
        parts >= 3,
        "cpu, beta and the unrelated rows: {parts} parts"
    );

    let o = qopts(db);
    let s = sel(CPU, cpu_ms, r#"{service="cpu"}"#);
    let a = sel(CPU, cpu_ms, r#"{service="cpu", handler="a"}"#);
    let plans = [
        ("flame", flame_sql(&o, &s, 0)),
        ("top", top_functions_sql(&o, &s, None, 0).unwrap()),
        ("diff", diff_sql(&o, &a, &s, 0, false).unwrap()),
        (
            "sandwich",
            sandwich_sql(&o, &s, "runtime.main", SandwichSide::Callees, 0),
        ),
    ];
    for (name, sql) in plans {
        let plan = q(&format!("EXPLAIN indexes = 1 {sql}"));
        let lines: Vec<&str> = plan.lines().map(str::trim).collect();
        assert!(
            !lines
                .iter()
                .any(|l| l.starts_with("ReadFromMergeTree") && l.contains(&format!("{db}.stacks)"))),
            "{name}: reads the whole stacks table:\n{plan}"
        );
        // The `Parts: selected/total` of each index of the cp_stacks read.
        let mut reads = 0;
        for (i, l) in lines.iter().enumerate() {
            if !(l.starts_with("ReadFromMergeTree") && l.contains(&format!("{db}.cp_stacks)"))) {
                continue;
            }
            reads += 1;
            let rest = &lines[i + 1..];
            let end = rest
                .iter()
                .position(|l| l.starts_with("ReadFromMergeTree") || l.starts_with("Expression"))
                .unwrap_or(rest.len());
            let rest = &rest[..end];
            let pk = rest
                .iter()
                .position(|l| *l == "PrimaryKey")
                .unwrap_or_else(|| panic!("{name}: no key analysis on cp_stacks:\n{plan}"));
            let keys = rest[pk..]
                .iter()
                .take_while(|l| !l.starts_with("Parts:"))
                .copied()
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                keys.contains("service") && keys.contains("date"),
                "{name}: cp_stacks key condition on service and date:\n{plan}"
            );
            let p = rest[pk..]
                .iter()
                .find_map(|l| l.strip_prefix("Parts: "))
                .unwrap();
            let (sel_parts, total) = p.split_once('/').unwrap();
            let (sel_parts, total): (i64, i64) =
                (sel_parts.parse().unwrap(), total.parse().unwrap());
            // The day's partition first (other days' parts never opened),
            // then the service's part of that day.
            assert!(
                sel_parts == 1 && total < parts,
                "{name}: the key selects the service's one part of {parts}:\n{plan}"
            );
        }
        assert!(reads >= 1, "{name}: cp_stacks not read:\n{plan}");
    }
}

/// A database of migrations 1 to 9 with profiles in it (what the loader
/// wrote before migration 11: everything but `cp_stacks`; 5,000 unrelated
/// stacks in `stacks`; stale views) upgrades: migration 11 back-fills
/// exactly the rows the loader writes (the unrelated stacks left out),
/// every query kind answers as before the upgrade, the CPU profile as `go
/// tool pprof`; a second `migrate` applies and adds nothing.
#[test]
fn a_database_of_migrations_1_to_9_upgrades_to_the_same_answers() {
    let db = "fh_cps_upgrade";
    fresh(db);
    let opts = SchemaOptions {
        database: db.parse().unwrap(),
        cluster: None,
    };
    let (cpu, cpu_ms) = load_as(db, "cpu.pb.gz", "cpu", &[]);
    load_as(db, "cpu2.pb.gz", "cpu2", &[("run", "two")]);
    let (_, heap_ms) = load_as(db, "heap.pb.gz", "heap", &[]);
    equals_goldens(db, cpu_ms);
    let before = answers(db, cpu_ms, heap_ms, cpu.profile_id);
    let rows = cp_stacks_rows(db);
    assert!(rows.lines().count() > 50, "{rows}");

    // Back to migrations 1 to 9: no cp_stacks, views of another binary,
    // unrelated stacks in `stacks` only.
    q(&format!("DROP TABLE {db}.cp_stacks"));
    q(&format!(
        "ALTER TABLE {db}.schema_migrations DELETE WHERE version = 11 SETTINGS mutations_sync = 1"
    ));
    for v in [
        "cp_flame",
        "cp_top_functions",
        "cp_flame_matching",
        "cp_top_functions_matching",
    ] {
        q(&format!("CREATE OR REPLACE VIEW {db}.{v} AS SELECT 1 AS i"));
    }
    q(&format!(
        "INSERT INTO {db}.stacks (stack_id, frame_ids, labels) \
         SELECT cityHash64('unrelated', number), [number], ['main.main', toString(number)] FROM numbers(5000)"
    ));

    assert_eq!(migrate(engine(), &opts).unwrap(), vec![11]);
    assert_eq!(
        cp_stacks_rows(db),
        rows,
        "the back-fill is the loader's rows"
    );
    equals_goldens(db, cpu_ms);
    let after = answers(db, cpu_ms, heap_ms, cpu.profile_id);
    for ((name, a), (_, b)) in before.iter().zip(&after) {
        assert_eq!(a, b, "{name}: answers changed by the upgrade");
    }
    assert_eq!(migrate(engine(), &opts).unwrap(), Vec::<u32>::new());
    assert_eq!(cp_stacks_rows(db), rows);
    // The retention the database had (36,500 days, `fresh`) reaches cp_stacks.
    let ttl = q(&format!(
        "SELECT create_table_query FROM system.tables WHERE database = '{db}' AND name = 'cp_stacks'"
    ));
    assert!(
        ttl.contains("toIntervalDay(36500)") || ttl.contains("INTERVAL 36500 DAY"),
        "{ttl}"
    );
}

/// A load run twice stores each (service, day, stack) once; the same
/// profile under another service adds its stacks for that service.
#[test]
fn reloads_store_no_stack_twice() {
    let db = "fh_cps_reload";
    fresh(db);
    q(&format!("SYSTEM STOP MERGES {db}.cp_stacks"));
    let count = || -> (i64, i64) {
        let r = q(&format!(
            "SELECT count(), uniqExact(service, date, stack_id) FROM {db}.cp_stacks"
        ));
        let (a, b) = r.trim().split_once('\t').unwrap();
        (a.parse().unwrap(), b.parse().unwrap())
    };
    let (s, ms) = load_as(db, "cpu.pb.gz", "cpu", &[]);
    let (n, distinct) = count();
    assert_eq!(n, distinct);
    // Every stack of the samples, nothing else.
    assert_eq!(
        q(&format!(
            "SELECT count() FROM (SELECT DISTINCT service, toDate(ts), stack_id FROM {db}.cp_samples)"
        ))
        .trim(),
        n.to_string()
    );
    assert_eq!(n as usize, s.stacks, "one row per distinct stack");
    let _ = ms;
    load_as(db, "cpu.pb.gz", "cpu", &[]);
    assert_eq!(count(), (n, n), "a re-run stores nothing twice");
    load_as(db, "cpu.pb.gz", "other", &[]);
    assert_eq!(count(), (2 * n, 2 * n), "another service has its own rows");
}
