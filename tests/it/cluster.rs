//! The cluster layout (`init --cluster`) run for real on a one-shard
//! cluster whose shard is this process (the harness's [`CLUSTER`]): the
//! sharded tables are `Distributed` tables in front of `*_local` tables,
//! loads write through them and queries read through them, and the answers
//! equal `go tool pprof`'s as on a single node.
//!
//! What cannot run here: `ON CLUSTER` (the DDL queue) and Replicated
//! engines need a keeper. [`Spy::on_each_node`] runs each DDL statement as a
//! node's DDL worker would run it: without `ON CLUSTER`, with the plain
//! engine. Two shards cannot run either (a second shard would be a second
//! server): that the rows of a series stay on one shard follows from the
//! sharding key, checked in the rendering.

use crate::continuous::{
    around, golden, load_as, parse_top, parse_traces, per_stack, qopts, release_diff_top, selves,
    top, top_from_every_source, tree, CPU,
};
use flamehouse::continuous_query::flame_sql;
use flamehouse::ingest::continuous::{distributed_tables, retention_days, set_retention};
use flamehouse::storage::schema::{
    compact, migrate, SchemaOptions, SHARDED_TABLES, WHOLE_REPLICA_PATH,
};
use flamehouse::storage::Backend;
use flamehouse_tests::*;

fn cluster_opts(db: &str) -> SchemaOptions {
    SchemaOptions {
        database: db.parse().unwrap(),
        cluster: Some(CLUSTER.parse().unwrap()),
    }
}

/// A fresh database with the cluster layout, keeping the fixtures.
fn fresh_cluster(db: &str) -> SchemaOptions {
    q(&format!("DROP DATABASE IF EXISTS {db} SYNC"));
    let opts = cluster_opts(db);
    assert_eq!(
        migrate(&Spy::on_each_node(), &opts).unwrap(),
        (1..=15).collect::<Vec<u32>>()
    );
    set_retention(&Spy::on_each_node(), &opts, 36500).unwrap();
    opts
}

/// `name -> engine` of a database's tables.
fn engines(db: &str) -> std::collections::BTreeMap<String, String> {
    q(&format!(
        "SELECT name, engine FROM system.tables WHERE database = '{db}'"
    ))
    .lines()
    .filter_map(|l| l.split_once('\t'))
    .map(|(n, e)| (n.to_string(), e.to_string()))
    .collect()
}

/// The layout: each sharded table is a Distributed table over
/// `<name>_local` on the cluster, keyed by `series_id`; the views that fill
/// the rollups read and write the shard's local tables; every other table
/// is a MergeTree; the retention is the local tables'.
#[test]
fn the_sharded_tables_are_distributed_over_local_ones() {
    let db = "fh_cluster_layout";
    let opts = fresh_cluster(db);
    let e = engines(db);
    for t in SHARDED_TABLES {
        assert_eq!(e[*t], "Distributed", "{t}");
        assert!(e[&format!("{t}_local")].ends_with("MergeTree"), "{t}");
        let create = q(&format!(
            "SELECT create_table_query FROM system.tables WHERE database = '{db}' AND name = '{t}'"
        ))
        .replace("\\'", "'");
        assert!(
            create.contains(&format!(
                "Distributed('{CLUSTER}', '{db}', '{t}_local', series_id)"
            )),
            "{create}"
        );
    }
    let distributed: Vec<&str> = e
        .iter()
        .filter(|(_, v)| *v == "Distributed")
        .map(|(k, _)| k.as_str())
        .collect();
    let mut sharded = SHARDED_TABLES.to_vec();
    sharded.sort_unstable();
    assert_eq!(distributed, sharded);
    assert_eq!(
        distributed_tables(engine(), &opts.database).unwrap(),
        sharded
    );
    for (mv, from, to) in [
        (
            "cp_samples_1m_mv",
            "cp_samples_local",
            "cp_samples_1m_local",
        ),
        (
            "cp_samples_1h_mv",
            "cp_samples_local",
            "cp_samples_1h_local",
        ),
        (
            "cp_series_profiles_mv",
            "cp_samples_local",
            "cp_series_profiles_local",
        ),
    ] {
        let create = q(&format!(
            "SELECT create_table_query FROM system.tables WHERE database = '{db}' AND name = '{mv}'"
        ));
        assert!(
            create.contains(&format!("TO {db}.{to} "))
                && create.contains(&format!("FROM {db}.{from}")),
            "{create}"
        );
    }
    // The span column is on both sides; the skip indexes on the shards.
    for t in ["cp_samples", "cp_samples_local"] {
        assert_eq!(
            q(&format!(
                "SELECT count() FROM system.columns WHERE database = '{db}' AND table = '{t}' AND name = 'span_id'"
            )),
            "1\n",
            "{t}"
        );
    }
    assert_eq!(
        q(&format!(
            "SELECT groupArray(name) FROM (SELECT name FROM system.data_skipping_indices \
             WHERE database = '{db}' AND table = 'cp_samples_local' ORDER BY name)"
        )),
        "['profile_idx','span_idx']\n"
    );
    // Retention: set on the shards' tables, read back from them.
    assert_eq!(
        retention_days(engine(), &opts.database).unwrap(),
        Some(36500)
    );
    set_retention(&Spy::on_each_node(), &opts, 7).unwrap();
    assert_eq!(retention_days(engine(), &opts.database).unwrap(), Some(7));
    for t in SHARDED_TABLES {
        let create = q(&format!(
            "SELECT create_table_query FROM system.tables WHERE database = '{db}' AND name = '{t}_local'"
        ));
        assert!(create.contains("toIntervalDay(7)"), "{t}: {create}");
    }
    // `compact` merges the shards' tables (a Distributed table has no parts).
    let merged: Vec<String> = compact(&Spy::on_each_node(), &opts)
        .unwrap()
        .into_iter()
        .map(|(t, _, _)| t)
        .collect();
    for t in SHARDED_TABLES {
        assert!(merged.contains(&format!("{t}_local")), "{merged:?}");
        assert!(!merged.contains(&(*t).to_string()), "{merged:?}");
    }
    // A second `init` applies nothing.
    assert!(migrate(&Spy::on_each_node(), &opts).unwrap().is_empty());
}

/// Loads write through the Distributed `cp_samples` (rows on the shard when
/// the insert returns, views filling the shard's rollups; a reload stores
/// nothing twice) and every query reads through the Distributed tables:
/// top functions, flame graphs, gauge averages, rollups and diffs equal
/// `go tool pprof`'s, as the single-node tests check.
#[test]
fn loads_and_queries_through_distributed_tables_equal_go_tool_pprof() {
    let db = "fh_cluster_cp";
    fresh_cluster(db);
    let o = qopts(db);
    let count = |t: &str| q(&format!("SELECT count() FROM {db}.{t}"));
    let (cpu, cpu_ms) = load_as(db, "cpu.pb.gz", "api", &[("release", "a")]);
    let (_, cpu2_ms) = load_as(db, "cpu2.pb.gz", "api", &[("release", "b")]);
    let (heap, heap_ms) = load_as(db, "heap.pb.gz", "heap", &[]);
    for t in SHARDED_TABLES {
        let n = count(t);
        assert_ne!(n, "0\n", "{t}");
        assert_eq!(n, count(&format!("{t}_local")), "{t}");
    }
    let stored = count("cp_samples_local");
    // A reload: the deduplication tokens go through the Distributed table.
    load_as(db, "heap.pb.gz", "heap", &[]);
    assert_eq!(count("cp_samples_local"), stored);

    for (s, ms, p, svc) in [
        (&cpu, cpu_ms, "cpu", "api"),
        (&heap, heap_ms, "heap", "heap"),
    ] {
        for ty in &s.types {
            let kind = ty.split(':').next().unwrap();
            let (want, total) = parse_top(&golden(&format!("{p}.top.{kind}.txt")));
            let sel = format!("{{service=\"{svc}\", release!=\"b\"}}");
            let raw = around(ty, ms, &sel);
            top_from_every_source(&o, &raw, &want, &format!("{p} {ty}"));
            let traces = parse_traces(&golden(&format!("{p}.traces.{kind}.txt")));
            let t = tree(&flame_sql(&o, &raw, 0));
            assert_eq!(selves(&t), per_stack(&traces, |_| true), "{p} {ty}");
            assert_eq!(t[&Vec::<String>::new()][0], total, "{p} {ty}: root");
        }
    }
    // Two selectors of one range: `-diff_base cpu.pb.gz cpu2.pb.gz`.
    let (want, _) = parse_top(&golden("cpu2.diff_base_cpu.top.txt"));
    assert_eq!(release_diff_top(&o, cpu_ms, cpu2_ms), want);
    // Migration 9's parameterized views (Grafana's panels) read the
    // Distributed tables too.
    let (want, _) = parse_top(&golden("cpu.top.cpu.txt"));
    let via_view = top(&format!(
        "SELECT function, self, total FROM {db}.cp_top_functions(profile_type = '{CPU}', \
         t1 = fromUnixTimestamp64Milli(toInt64({cpu_ms}), 'UTC'), \
         t2 = fromUnixTimestamp64Milli(toInt64({}), 'UTC'), match = map('release', 'a'), limit = 0)",
        cpu_ms + 1000
    ));
    assert_eq!(via_view, want);
}

/// The full cluster rendering of every migration: `ON CLUSTER` on every
/// DDL statement; Replicated engines on every MergeTree, each shard's
/// replicas sharing the `*_local` tables' (the engine's default path, per
/// shard) and every node sharing every other table's (one path for the
/// cluster, so each shard has all of it); per sharded table a `*_local`
/// table and a Distributed one sharded by `series_id`; every statement
/// parses. A single node's rendering has no Distributed table and no
/// `_local` name.
#[test]
fn every_migration_renders_for_a_cluster_and_a_single_node() {
    let cluster = cluster_opts("fh_render");
    let single = SchemaOptions {
        database: "fh_render".parse().unwrap(),
        cluster: None,
    };
    let (mut distributed, mut locals) = (Vec::new(), 0);
    for (version, _, sql) in flamehouse::storage::schema::MIGRATIONS {
        for s in flamehouse_udf::catalog::statements(&cluster.render(sql)) {
            for p in [
                "{db}",
                "{on_cluster}",
                "{replicated}",
                "{local}",
                "{cluster",
                "{retention_days}",
            ] {
                assert!(!s.contains(p), "{version}: {s}");
            }
            let ddl = ["CREATE", "ALTER", "DROP"].iter().any(|k| s.starts_with(k));
            assert_eq!(
                s.contains(&format!(" ON CLUSTER {CLUSTER}")),
                ddl,
                "{version}: {s}"
            );
            if s.contains("MergeTree") && s.starts_with("CREATE TABLE") {
                let at = s.find("ENGINE = Replicated").expect(&s);
                let engine = s[at..].lines().next().unwrap();
                let local = s.split_whitespace().nth(5).unwrap().ends_with("_local");
                if local {
                    assert!(engine.ends_with("MergeTree"), "{version}: {engine}");
                } else {
                    assert!(
                        engine.contains(&format!("MergeTree({WHOLE_REPLICA_PATH}")),
                        "{version}: {engine}"
                    );
                }
                locals += usize::from(local);
            }
            if let Some(at) = s.find("ENGINE = Distributed(") {
                let head = s.split_whitespace().nth(5).unwrap().to_string();
                assert!(
                    s[at..].starts_with(&format!(
                        "ENGINE = Distributed({CLUSTER}, fh_render, {}_local, series_id)",
                        head.trim_start_matches("fh_render.")
                    )),
                    "{version}: {s}"
                );
                distributed.push(head);
            }
            q(&format!("SELECT formatQuerySingleLine({})", lit(&s)));
        }
        for s in flamehouse_udf::catalog::statements(&single.render(sql)) {
            assert!(
                !s.contains("_local") && !s.contains("Distributed("),
                "{version}: {s}"
            );
        }
    }
    let want: Vec<String> = SHARDED_TABLES
        .iter()
        .map(|t| format!("fh_render.{t}"))
        .collect();
    assert_eq!(distributed, want);
    assert_eq!(locals, SHARDED_TABLES.len());
    // Everything `init` runs on a cluster: the wrapper functions too are
    // ON CLUSTER (the views call them on every node), and a Replicated
    // table deduplicates by its own window, set as large as a node's.
    let all = flamehouse::storage::schema::new_database_statements(&cluster);
    let functions: Vec<&String> = all
        .iter()
        .filter(|(_, name, _)| *name == "functions")
        .map(|(_, _, s)| s)
        .collect();
    assert_eq!(functions.len(), 6);
    for (version, _, s) in &all {
        let ddl = ["CREATE", "ALTER", "DROP"].iter().any(|k| s.starts_with(k));
        assert_eq!(
            s.contains(&format!(" ON CLUSTER {CLUSTER}")),
            ddl,
            "{version}: {s}"
        );
        if s.contains("non_replicated_deduplication_window = 100000") {
            assert!(
                s.contains(", replicated_deduplication_window = 100000"),
                "{version}: {s}"
            );
        }
    }
    for s in single.function_statements() {
        assert!(!s.contains("ON CLUSTER"), "{s}");
    }
}

/// `flamehouse init --print` shows what `init` runs, without an engine or
/// a server (`--cluster` needs no `--url` then): run statement by statement
/// (each node's way, as above), the printed SQL builds the same tables,
/// engines and columns as `migrate`, for a cluster and for a single node;
/// `--retention` adds the TTLs of the shards' tables.
#[test]
fn init_print_is_what_init_runs() {
    // Tables with their engines in full (keys, TTL, settings), and columns.
    let shape = |db: &str| {
        q(&format!(
            "SELECT name, engine_full FROM system.tables WHERE database = '{db}' ORDER BY name"
        )) + &q(&format!(
            "SELECT table, name, type FROM system.columns WHERE database = '{db}' \
             ORDER BY table, position"
        ))
    };
    for cluster in [true, false] {
        let printed_db = if cluster { "fh_print_c" } else { "fh_print_s" };
        let made_db = format!("{printed_db}_ref");
        let mut args = vec![
            "init",
            "--print",
            "--database",
            printed_db,
            "--retention",
            "9",
        ];
        if cluster {
            args.extend(["--cluster", CLUSTER]);
        }
        let out = std::process::Command::new(cli_binary())
            .args(&args)
            .env("FLAMEHOUSE_DATA", "/nonexistent/never-opened")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let sql = String::from_utf8(out.stdout).unwrap();
        assert_eq!(sql.contains("ENGINE = Distributed("), cluster);
        q(&format!("DROP DATABASE IF EXISTS {printed_db} SYNC"));
        let node = Spy::on_each_node();
        for s in flamehouse_udf::catalog::statements(&sql) {
            node.execute(&s).unwrap_or_else(|e| panic!("{e}\n{s}"));
        }
        q(&format!("DROP DATABASE IF EXISTS {made_db} SYNC"));
        let opts = SchemaOptions {
            database: made_db.parse().unwrap(),
            cluster: cluster.then(|| CLUSTER.parse().unwrap()),
        };
        migrate(&Spy::on_each_node(), &opts).unwrap();
        set_retention(&Spy::on_each_node(), &opts, 9).unwrap();
        // schema_migrations is written by `migrate` only (no rows printed).
        assert_eq!(
            shape(printed_db),
            shape(&made_db).replace(&made_db, printed_db),
            "cluster: {cluster}"
        );
        assert_eq!(
            retention_days(engine(), &printed_db.parse().unwrap()).unwrap(),
            Some(9)
        );
    }
}

/// Every variable and panel query of the continuous dashboard, expanded as
/// Grafana and the plugin expand them, answers on the sharded layout
/// exactly as on a single node (whose answers `grafana_continuous` holds
/// against `go tool pprof`): the panels read the Distributed tables with
/// the same SQL.
#[test]
fn the_continuous_dashboard_answers_the_same_on_the_sharded_layout() {
    use crate::grafana_continuous::{dashboard, expand, load_runs, range, t0, vars};
    let single = dashboard();
    let opts = cluster_opts("fh_cluster_grafana");
    load_runs(&Spy::on_each_node(), &opts);
    assert_eq!(engines(opts.database.as_str())["cp_samples"], "Distributed");
    let sharded = flamehouse::grafana::continuous::continuous_dashboard(&opts.database);
    let queries = |d: &serde_json::Value| -> Vec<(String, String)> {
        let vars = d["templating"]["list"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["type"] == "query")
            .map(|v| {
                (
                    v["name"].to_string(),
                    v["query"].as_str().unwrap().to_string(),
                )
            });
        let panels = d["panels"].as_array().unwrap().iter().flat_map(|p| {
            p["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| {
                    (
                        p["title"].to_string(),
                        t["rawSql"].as_str().unwrap().to_string(),
                    )
                })
                .collect::<Vec<_>>()
        });
        vars.chain(panels).collect()
    };
    let (a, b) = (queries(&single), queries(&sharded));
    assert_eq!(a.len(), b.len());
    let (f, t) = range();
    let mut diff_mode = vars(&["one", "two"], &["one"]);
    diff_mode.insert("diff_mode", vec!["1".into()]);
    let cases = [
        (vars(&["one"], &["one"]), f, t),
        (vars(&["one", "two"], &["one"]), f, t),
        (diff_mode, f, t),
        (vars(&["two"], &["one"]), t0() - 12 * 3_600_000, t),
    ];
    let (mut compared, mut answered) = (0, 0);
    for ((name, one), (_, other)) in a.iter().zip(&b) {
        for (v, from, to) in &cases {
            let want = q(&expand(one, v, *from, *to));
            assert_eq!(q(&expand(other, v, *from, *to)), want, "{name}");
            compared += 1;
            answered += usize::from(!want.is_empty());
        }
    }
    assert!(compared >= 4 * 10, "{compared}");
    assert!(
        answered * 10 >= compared * 9,
        "{answered} of {compared} answered"
    );
}
