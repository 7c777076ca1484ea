//! Span ids and numeric-label selectors on continuous profiles (migration
//! 8), end to end in the engine against `go tool pprof`'s own filters on the
//! same files: `-tagfocus span_id=...` / `-tagignore` on a Go CPU profile
//! whose samples carry span ids (`fixtures/continuous/pprof/spans.pb.gz`,
//! written with `pprof.Do` labels as otel-profiling-go sets them), and
//! `-tagfocus bytes=1kB:4kB` / `-tagignore` on the Go heap profile, for
//! every heap sample type. Where no golden exists for one span, the oracle
//! is the `-traces` golden filtered by its own printed labels.

use super::continuous::{
    around, copts, fresh, golden, load, load_as, now_ms, parse_top, parse_traces, per_stack, qopts,
    selves, top, tree, Trace, CPU,
};
use flamehouse::continuous_query::{
    diff_sql, flame_sql, top_functions_sql, Selection, Selector, Source,
};
use flamehouse::ingest::continuous::{span_id_value, ContinuousOptions};
use flamehouse::storage::schema::{migrate, SchemaOptions, MIGRATIONS};
use flamehouse_tests::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn label(t: &Trace, k: &str) -> String {
    t.labels.get(k).cloned().unwrap_or_default()
}

/// The span `go tool pprof -tagfocus` was given: its "Active filters" line.
fn focused_span(text: &str) -> String {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("tagfocus=span_id="))
        .expect("an active tagfocus filter")
        .to_string()
}

fn count(sql: &str) -> usize {
    q(sql).trim().parse().unwrap()
}

/// Span ids stay off the series: the spans profile has 24 spans but as
/// many series as label sets without them (handler a, handler b, none),
/// the stored span ids are the profile's own (leading zeros kept), and a
/// `{span_id=...}` selector equals `go tool pprof -tagfocus span_id=...`
/// (-top and -traces), its negation `-tagignore`, for every span the
/// -traces golden filtered by span; a long range still reads the raw
/// samples. Loaded with no span keys, the same file makes a series per span.
#[test]
fn span_ids_are_per_sample_and_select_like_tagfocus() {
    let db = "fh_cp_spans";
    fresh(db);
    let o = qopts(db);
    let (s, ms) = load_as(db, "spans.pb.gz", "api", &[]);
    assert_eq!(s.types, vec!["samples:count", CPU]);
    let traces = parse_traces(&golden("spans.traces.cpu.txt"));
    let spans: BTreeSet<String> = traces
        .iter()
        .map(|t| label(t, "span_id"))
        .filter(|s| !s.is_empty())
        .collect();
    assert!(spans.len() >= 20, "{spans:?}");
    assert!(spans.contains("00f067aa0ba902b7"));
    // Oracle for the series: the golden's label sets without span_id.
    let sets: BTreeSet<BTreeMap<String, String>> = traces
        .iter()
        .map(|t| {
            let mut l = t.labels.clone();
            l.remove("span_id");
            l
        })
        .collect();
    assert_eq!(sets.len(), 3, "{sets:?}");
    assert_eq!(
        count(&format!(
            "SELECT uniqExact(series_id) FROM {db}.cp_series WHERE profile_type = '{CPU}'"
        )),
        sets.len()
    );
    assert_eq!(
        count(&format!(
            "SELECT count() FROM {db}.cp_label_values WHERE key = 'span_id'"
        )),
        0
    );
    let stored: BTreeSet<String> = q(&format!(
        "SELECT DISTINCT leftPad(lower(hex(span_id)), 16, '0') FROM {db}.cp_samples \
         WHERE profile_type = '{CPU}' AND span_id != 0"
    ))
    .lines()
    .map(String::from)
    .collect();
    assert_eq!(stored, spans);
    // The samples' sum per span equals the golden's.
    for id in &spans {
        let want: i64 = traces
            .iter()
            .filter(|t| &label(t, "span_id") == id)
            .map(|t| t.value)
            .sum();
        let got: i64 = q(&format!(
            "SELECT sum(value) FROM {db}.cp_samples WHERE profile_type = '{CPU}' AND span_id = {}",
            span_id_value(id)
        ))
        .trim()
        .parse()
        .unwrap();
        assert_eq!(got, want, "{id}");
    }

    // -tagfocus / -tagignore on the span with the most CPU.
    let focus = golden("spans.tagfocus.span_id.top.txt");
    let id = focused_span(&focus);
    let (want, _) = parse_top(&focus);
    assert!(!want.is_empty());
    let sel = around(CPU, ms, &format!("{{span_id=\"{id}\"}}"));
    assert_eq!(top(&top_functions_sql(&o, &sel, None, 0).unwrap()), want);
    let upper = around(CPU, ms, &format!("{{span_id=\"{}\"}}", id.to_uppercase()));
    assert_eq!(top(&top_functions_sql(&o, &upper, None, 0).unwrap()), want);
    let want_stacks = per_stack(
        &parse_traces(&golden("spans.tagfocus.span_id.traces.txt")),
        |_| true,
    );
    assert_eq!(selves(&tree(&flame_sql(&o, &sel, 0))), want_stacks);
    let (ignore, _) = parse_top(&golden("spans.tagignore.span_id.top.txt"));
    let neg = around(CPU, ms, &format!("{{span_id!=\"{id}\"}}"));
    assert_eq!(top(&top_functions_sql(&o, &neg, None, 0).unwrap()), ignore);
    // Two days around it: still the raw samples (the rollup has no spans).
    let long = Selection {
        from_ms: ms - 86_400_000,
        to_ms: ms + 86_400_000,
        ..sel.clone()
    };
    assert_eq!(long.source(&o), Source::Raw);
    assert_eq!(top(&top_functions_sql(&o, &long, None, 0).unwrap()), want);
    // Every span, and the other span matchers, against the filtered -traces.
    type Keep = Box<dyn Fn(&Trace) -> bool>;
    let mut cases: Vec<(String, Keep)> = spans
        .iter()
        .map(|id| {
            let k = id.clone();
            (
                format!("{{span_id=\"{id}\"}}"),
                Box::new(move |t: &Trace| label(t, "span_id") == k) as Keep,
            )
        })
        .collect();
    cases.push((
        r#"{span_id=""}"#.into(),
        Box::new(|t| label(t, "span_id").is_empty()),
    ));
    cases.push((
        r#"{span_id!=""}"#.into(),
        Box::new(|t| !label(t, "span_id").is_empty()),
    ));
    cases.push((
        r#"{span_id=~"00f0.*"}"#.into(),
        Box::new(|t| label(t, "span_id").starts_with("00f0")),
    ));
    cases.push((
        r#"{span_id!~"[0-7].*", handler="b"}"#.into(),
        Box::new(|t| {
            !label(t, "span_id").starts_with(|c: char| ('0'..='7').contains(&c))
                && label(t, "handler") == "b"
        }),
    ));
    cases.push((
        r#"{span_name="GET /a"}"#.into(),
        Box::new(|t| label(t, "span_name") == "GET /a"),
    ));
    for (s, keep) in cases {
        let want = per_stack(&traces, keep);
        assert_eq!(
            selves(&tree(&flame_sql(&o, &around(CPU, ms, &s), 0))),
            want,
            "{s}"
        );
    }
    // A diff of two spans in one scan: each side's root is its span's total.
    let other = spans.iter().find(|s| **s != id).unwrap();
    let total = |id: &str| -> i64 {
        traces
            .iter()
            .filter(|t| label(t, "span_id") == id)
            .map(|t| t.value)
            .sum()
    };
    let long_b = Selection {
        selector: Selector::parse(&format!("{{span_id=\"{other}\"}}")).unwrap(),
        ..long.clone()
    };
    let d = tree(&diff_sql(&o, &long, &long_b, 0, false).unwrap());
    assert_eq!(d[&Vec::<String>::new()][0], total(&id));
    assert_eq!(d[&Vec::<String>::new()][2], total(other));

    // The same file with span_id as a series label: one series per span.
    let db2 = "fh_cp_spans_as_labels";
    fresh(db2);
    let opts = ContinuousOptions {
        span_labels: Vec::new(),
        ..copts(db2)
    };
    load("spans.pb.gz", &opts);
    let all_sets: BTreeSet<&BTreeMap<String, String>> = traces.iter().map(|t| &t.labels).collect();
    let n = count(&format!(
        "SELECT uniqExact(series_id) FROM {db2}.cp_series WHERE profile_type = '{CPU}'"
    ));
    assert_eq!(n, all_sets.len());
    assert!(n > spans.len(), "{n} series for {} spans", spans.len());
}

/// A CPU-like pprof: stacks `main;work;leafK` (K < 4) under handler a or
/// b, each sample in one of `spans` spans (`span_id`, 16 hex digits), 1
/// to 4 per sample.
fn pprof_with_spans(spans: usize) -> Vec<u8> {
    use flamehouse::formats::pprof::proto;
    use prost::Message;
    let mut strings = vec![String::new()];
    let mut s = |x: &str| {
        if let Some(i) = strings.iter().position(|y| y == x) {
            return i as i64;
        }
        strings.push(x.to_string());
        strings.len() as i64 - 1
    };
    let names = ["main", "work", "leaf0", "leaf1", "leaf2", "leaf3"];
    let function: Vec<proto::Function> = names
        .iter()
        .enumerate()
        .map(|(i, n)| proto::Function {
            id: i as u64 + 1,
            name: s(n),
            ..Default::default()
        })
        .collect();
    let location: Vec<proto::Location> = (1..=names.len() as u64)
        .map(|id| proto::Location {
            id,
            line: vec![proto::Line {
                function_id: id,
                ..Default::default()
            }],
            ..Default::default()
        })
        .collect();
    let (k_span, k_handler) = (s("span_id"), s("handler"));
    let handlers = [s("a"), s("b")];
    let mut sample = Vec::new();
    for sp in 0..spans {
        let id = s(&format!(
            "{:016x}",
            0x1000_0000_0000_0000u64 + sp as u64 * 7919
        ));
        for leaf in 0..4u64 {
            sample.push(proto::Sample {
                // Leaf first.
                location_id: vec![3 + leaf, 2, 1],
                value: vec![1 + (sp as i64 + leaf as i64) % 4],
                label: vec![
                    proto::Label {
                        key: k_handler,
                        str: handlers[sp % 2],
                        ..Default::default()
                    },
                    proto::Label {
                        key: k_span,
                        str: id,
                        ..Default::default()
                    },
                ],
            });
        }
    }
    let sample_type = vec![proto::ValueType {
        r#type: s("samples"),
        unit: s("count"),
    }];
    proto::Profile {
        sample_type,
        sample,
        location,
        function,
        string_table: strings.into_iter().map(String::into_bytes).collect(),
        ..Default::default()
    }
    .encode_to_vec()
}

/// The series count does not grow with the number of spans: the same
/// stacks under 2 or 500 spans store 2 series (one per handler) either
/// way, every span id is kept, and the sample rows grow with the spans.
#[test]
fn series_do_not_grow_with_spans() {
    let db = "fh_cp_many_spans";
    fresh(db);
    let dir = std::env::temp_dir().join(format!("fh-spans-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut rows = Vec::new();
    for n in [2usize, 500] {
        let path = dir.join(format!("spans{n}.pb"));
        std::fs::write(&path, pprof_with_spans(n)).unwrap();
        let opts = ContinuousOptions {
            service: Some(format!("svc{n}")),
            time_ns: Some((now_ms() - 3_600_000) * 1_000_000),
            ..copts(db)
        };
        flamehouse::ingest::continuous::load_pprof(engine(), &path, &opts).unwrap();
        let svc = format!("service = 'svc{n}'");
        assert_eq!(
            count(&format!(
                "SELECT uniqExact(series_id) FROM {db}.cp_series WHERE {svc}"
            )),
            2,
            "{n} spans"
        );
        assert_eq!(
            count(&format!(
                "SELECT uniqExact(span_id) FROM {db}.cp_samples WHERE {svc} AND span_id != 0"
            )),
            n
        );
        rows.push(count(&format!(
            "SELECT count() FROM {db}.cp_samples WHERE {svc}"
        )));
    }
    assert_eq!(rows, vec![2 * 4, 500 * 4]);
    let _ = std::fs::remove_dir_all(&dir);
}

const HEAP_TYPES: [&str; 4] = [
    "alloc_objects:count",
    "alloc_space:bytes",
    "inuse_objects:count",
    "inuse_space:bytes",
];

/// Numeric-label selectors equal `go tool pprof -tagfocus bytes=1kB:4kB`
/// and `-tagignore bytes=1kB:4kB` on the Go heap profile for every heap
/// sample type (written in several equivalent ways: a range, comparisons,
/// KiB, plain numbers), `bytes=:256B` and `bytes=64B` on alloc_space; a
/// two-day range still reads the raw samples.
#[test]
fn numeric_selectors_equal_tagfocus_and_tagignore() {
    let db = "fh_cp_numsel";
    fresh(db);
    let o = qopts(db);
    let (s, ms) = load_as(db, "heap.pb.gz", "heap", &[]);
    assert_eq!(s.types, HEAP_TYPES);
    for ty in HEAP_TYPES {
        let kind = ty.split(':').next().unwrap();
        let (focus, _) = parse_top(&golden(&format!(
            "heap.tagfocus.bytes_1kB-4kB.top.{kind}.txt"
        )));
        let (ignore, _) = parse_top(&golden(&format!(
            "heap.tagignore.bytes_1kB-4kB.top.{kind}.txt"
        )));
        // Every in-use object of 1 to 4 kB was freed: inuse_* focus is empty.
        assert_eq!(focus.is_empty(), ty.starts_with("inuse"), "{ty}");
        assert!(!ignore.is_empty(), "{ty}");
        for sel in [
            "{bytes=1kB:4kB}",
            "{bytes = 1KiB : 4KiB}",
            "{bytes>=1kb, bytes<=4kB}",
            "{bytes>1023, bytes<4097}",
            "{bytes>=1024, bytes<=4096, service=\"heap\"}",
            "{bytes=0.5kB:4kB, bytes>=1kB}",
        ] {
            assert_eq!(
                top(&top_functions_sql(&o, &around(ty, ms, sel), None, 0).unwrap()),
                focus,
                "{ty} {sel}"
            );
        }
        for sel in ["{bytes!=1kB:4kB}", "{bytes!=1024:4096}"] {
            assert_eq!(
                top(&top_functions_sql(&o, &around(ty, ms, sel), None, 0).unwrap()),
                ignore,
                "{ty} {sel}"
            );
        }
        let long = Selection {
            from_ms: ms - 86_400_000,
            to_ms: ms + 86_400_000,
            ..around(ty, ms, "{bytes=1kB:4kB}")
        };
        assert_eq!(long.source(&o), Source::Raw);
        assert_eq!(
            top(&top_functions_sql(&o, &long, None, 0).unwrap()),
            focus,
            "{ty} over two days"
        );
    }
    let ty = "alloc_space:bytes";
    let (le256, _) = parse_top(&golden("heap.tagfocus.bytes_le_256B.top.alloc_space.txt"));
    for sel in [
        "{bytes=:256B}",
        "{bytes<=256}",
        "{bytes<257B}",
        "{bytes<0.25kB, bytes=:256} ",
    ] {
        let got = top(&top_functions_sql(&o, &around(ty, ms, sel), None, 0).unwrap());
        if sel.contains("0.25") {
            // < 256 B: newBuf's 256-byte buffers (inlined in allocKept) leave.
            assert!(le256.contains_key("main.newBuf"));
            assert!(!got.contains_key("main.newBuf"), "{sel}");
            assert!(got.contains_key("main.tree"), "{sel}");
        } else {
            assert_eq!(got, le256, "{sel}");
        }
    }
    let (eq64, _) = parse_top(&golden("heap.tagfocus.bytes_64B.top.alloc_space.txt"));
    assert!(eq64.contains_key("main.tree"), "{eq64:?}");
    for sel in ["{bytes=64B}", "{bytes=64}", "{bytes=64:64}"] {
        assert_eq!(
            top(&top_functions_sql(&o, &around(ty, ms, sel), None, 0).unwrap()),
            eq64,
            "{sel}"
        );
    }
    // A key no sample has: nothing for `=`, everything for `!=`.
    let all = top(&top_functions_sql(&o, &around(ty, ms, "{}"), None, 0).unwrap());
    assert_eq!(
        top(&top_functions_sql(&o, &around(ty, ms, "{size>=0}"), None, 0).unwrap()),
        BTreeMap::new()
    );
    assert_eq!(
        top(&top_functions_sql(&o, &around(ty, ms, "{size!=0:}"), None, 0).unwrap()),
        all
    );
}

/// A sample with two different values of its span key is refused, naming
/// the file and the sample; nothing of the file is stored.
#[test]
fn two_span_ids_on_one_sample_are_refused() {
    use flamehouse::formats::pprof::proto;
    use prost::Message;
    let db = "fh_cp_two_spans";
    fresh(db);
    let strings: Vec<String> = [
        "",
        "samples",
        "count",
        "f",
        "span_id",
        "00000000000000aa",
        "00000000000000bb",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let label = |v: i64| proto::Label {
        key: 4,
        str: v,
        ..Default::default()
    };
    let p = proto::Profile {
        sample_type: vec![proto::ValueType { r#type: 1, unit: 2 }],
        function: vec![proto::Function {
            id: 1,
            name: 3,
            ..Default::default()
        }],
        location: vec![proto::Location {
            id: 1,
            line: vec![proto::Line {
                function_id: 1,
                ..Default::default()
            }],
            ..Default::default()
        }],
        sample: vec![
            proto::Sample {
                location_id: vec![1],
                value: vec![1],
                label: vec![label(5)],
            },
            proto::Sample {
                location_id: vec![1],
                value: vec![1],
                label: vec![label(5), label(6)],
            },
        ],
        string_table: strings.into_iter().map(String::into_bytes).collect(),
        ..Default::default()
    };
    let path = std::env::temp_dir().join(format!("fh-two-spans-{}.pb", std::process::id()));
    std::fs::write(&path, p.encode_to_vec()).unwrap();
    let e = flamehouse::ingest::continuous::load_pprof(engine(), &path, &copts(db))
        .unwrap_err()
        .to_string();
    let _ = std::fs::remove_file(&path);
    assert!(e.contains(&path.display().to_string()), "{e}");
    assert!(e.contains("sample 1 has two span ids"), "{e}");
    assert!(!e.contains('\n'), "{e}");
    assert_eq!(count(&format!("SELECT count() FROM {db}.cp_samples")), 0);
    assert_eq!(count(&format!("SELECT count() FROM {db}.cp_profiles")), 0);
}

/// A database made by migrations 1 to 6 with samples in it upgrades: the
/// samples read span id 0 (`{span_id=""}` keeps them, a span selects
/// none), and loads after it store span ids. Migration 8 renders for a
/// cluster and parses.
#[test]
fn migration_8_upgrades_a_database_with_samples() {
    let db = "fh_cp_span_upgrade";
    fresh(db);
    let o = qopts(db);
    // Back to migration 6: no span column, no index, not recorded.
    q(&format!("ALTER TABLE {db}.cp_samples DROP INDEX span_idx"));
    q(&format!("ALTER TABLE {db}.cp_samples DROP COLUMN span_id"));
    q(&format!(
        "ALTER TABLE {db}.schema_migrations DELETE WHERE version = 8 SETTINGS mutations_sync = 1"
    ));
    // A load as migration 6 stored it: the rows without the column.
    let ms = now_ms() - 3_600_000;
    q(&format!(
        "INSERT INTO {db}.cp_samples (profile_type, service, series_id, ts, stack_id, value, \
         profile_id, num_labels) VALUES ('{CPU}', 'old', 7, fromUnixTimestamp64Milli(toInt64({ms}), 'UTC'), 9, 5, 1, map())"
    ));
    q(&format!(
        "INSERT INTO {db}.cp_series (date, profile_type, service, series_id, labels) \
         VALUES (toDate(fromUnixTimestamp64Milli(toInt64({ms}), 'UTC')), '{CPU}', 'old', 7, map('service', 'old'))"
    ));
    let opts = SchemaOptions {
        database: db.parse().unwrap(),
        cluster: None,
    };
    assert_eq!(migrate(engine(), &opts).unwrap(), vec![8]);
    assert_eq!(migrate(engine(), &opts).unwrap(), Vec::<u32>::new());
    assert_eq!(
        q(&format!(
            "SELECT span_id, value FROM {db}.cp_samples WHERE service = 'old'"
        )),
        "0\t5\n"
    );
    let sum = |sel: &str| -> String {
        q(&format!(
            "SELECT sum(value) FROM {db}.cp_samples WHERE profile_type = '{CPU}' AND series_id = 7 \
             AND {}",
            Selector::parse(sel).unwrap().sample_condition()
        ))
    };
    assert_eq!(sum(r#"{span_id=""}"#), "5\n");
    assert_eq!(sum(r#"{span_id="00f067aa0ba902b7"}"#), "0\n");
    let (_, ms2) = load_as(db, "spans.pb.gz", "api", &[]);
    let t = tree(&flame_sql(
        &o,
        &around(CPU, ms2, r#"{span_id="00f067aa0ba902b7"}"#),
        0,
    ));
    let want = per_stack(&parse_traces(&golden("spans.traces.cpu.txt")), |t| {
        label(t, "span_id") == "00f067aa0ba902b7"
    });
    assert!(!want.is_empty());
    assert_eq!(selves(&t), want);
    // The index is on the table again.
    assert_eq!(
        q(&format!(
            "SELECT name, type_full FROM system.data_skipping_indices \
             WHERE database = '{db}' AND table = 'cp_samples' AND name = 'span_idx'"
        )),
        "span_idx\tbloom_filter(0.01)\n"
    );

    let cluster = SchemaOptions {
        database: "fh_cp_cluster".parse().unwrap(),
        cluster: Some("prod".parse().unwrap()),
    };
    let (_, name, sql) = MIGRATIONS.iter().find(|(v, _, _)| *v == 8).unwrap();
    assert_eq!(*name, "span_ids");
    let stmts = flamehouse_udf::catalog::statements(&cluster.render(sql));
    // The shards' column and index, and the Distributed table's column.
    assert_eq!(stmts.len(), 3);
    assert_eq!(
        stmts
            .iter()
            .filter(|s| s.contains("cp_samples_local "))
            .count(),
        2
    );
    for s in &stmts {
        assert!(s.contains(" ON CLUSTER prod "), "{s}");
        q(&format!("SELECT formatQuerySingleLine({})", lit(s)));
    }
}

// ---------------------------------------------------------------------------
// The command line.

fn bin() -> PathBuf {
    flamehouse_tests::cli_binary()
}

fn fh(data: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(bin())
        .args(args)
        .arg("--data")
        .arg(data)
        .output()
        .expect("flamehouse runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `profile top`'s table as function -> (self, total), zero rows left
/// out.
fn top_table(out: &str) -> BTreeMap<String, (i64, i64)> {
    out.lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                f[4].to_string(),
                (f[0].parse().unwrap(), f[2].parse().unwrap()),
            )
        })
        .filter(|(_, (s, t))| *s != 0 || *t != 0)
        .collect()
}

/// `profile top --span-id` equals `-tagfocus span_id=...`, a numeric
/// selector on the command line `-tagfocus bytes=1kB:4kB`; `load
/// --span-labels ''` keeps span_id a series label (`profile labels` shows
/// every span); a bad numeric selector is one line naming the flag and
/// exit status 2 (a usage error).
#[test]
fn cli_span_id_and_numeric_selectors() {
    let data = flamehouse_fixtures::testing::temp_path("cplabels-cli");
    let data2 = flamehouse_fixtures::testing::temp_path("cplabels-cli-labels");
    let fixture = |f: &str| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/continuous/pprof")
            .join(f)
            .display()
            .to_string()
    };
    // The files keep their own times: a retention of a century keeps them.
    for d in [&data, &data2] {
        let (ok, _, err) = fh(d, &["init", "--retention", "36500"]);
        assert!(ok, "{err}");
    }
    let (ok, _, err) = fh(
        &data,
        &["load", &fixture("spans.pb.gz"), &fixture("heap.pb.gz")],
    );
    assert!(ok, "{err}");
    let range = ["--from", "2000-01-01 00:00:00", "--to", "now"];
    let cli_top = |extra: &[&str]| -> BTreeMap<String, (i64, i64)> {
        let mut args = vec!["profile", "top"];
        args.extend_from_slice(&range);
        args.extend_from_slice(extra);
        let (ok, out, err) = fh(&data, &args);
        assert!(ok, "{extra:?}: {err}");
        top_table(&out)
    };
    let focus = golden("spans.tagfocus.span_id.top.txt");
    let id = focused_span(&focus);
    assert_eq!(
        cli_top(&["--type", CPU, "--span-id", &id]),
        parse_top(&focus).0
    );
    // `profile export --span-id`: the span's samples alone, as pprof
    // focuses them (the export loaded again into a fresh directory).
    let data3 = flamehouse_fixtures::testing::temp_path("cplabels-cli-export");
    let exported = data3.join("span.pb.gz").display().to_string();
    let mut args = vec!["profile", "export", "--type", CPU, "--span-id", &id];
    args.extend_from_slice(&range);
    args.extend(["--out", &exported]);
    let (ok, _, err) = fh(&data, &args);
    assert!(ok, "{err}");
    for a in [&["init", "--retention", "36500"][..], &["load", &exported]] {
        let (ok, _, err) = fh(&data3, a);
        assert!(ok, "{err}");
    }
    let mut args = vec!["profile", "top", "--type", CPU];
    args.extend_from_slice(&range);
    let (ok, out, err) = fh(&data3, &args);
    assert!(ok, "{err}");
    let again = top_table(&out);
    assert_eq!(again, parse_top(&focus).0);
    assert_eq!(
        cli_top(&[
            "--type",
            "inuse_space:bytes",
            "--selector",
            "{bytes=1kB:4kB}"
        ]),
        parse_top(&golden("heap.tagfocus.bytes_1kB-4kB.top.inuse_space.txt")).0
    );
    let (ok, _, err) = fh(
        &data,
        &[
            "profile",
            "top",
            "--type",
            CPU,
            "--selector",
            "{bytes>=1XB}",
        ],
    );
    assert!(!ok);
    assert!(
        err.contains("unknown unit \"xb\"") && err.contains("--selector"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    // Spans as series labels, when asked.
    let (ok, _, err) = fh(
        &data2,
        &["load", "--span-labels", "", &fixture("spans.pb.gz")],
    );
    assert!(ok, "{err}");
    let mut args = vec!["profile", "labels", "--type", CPU];
    args.extend_from_slice(&range);
    let (ok, out, err) = fh(&data2, &args);
    assert!(ok, "{err}");
    let spans = parse_traces(&golden("spans.traces.cpu.txt"))
        .iter()
        .map(|t| label(t, "span_id"))
        .filter(|s| !s.is_empty())
        .collect::<BTreeSet<_>>();
    let listed: BTreeSet<String> = out
        .lines()
        .filter_map(|l| l.strip_prefix("span_id\t"))
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect();
    assert_eq!(listed, spans);
    let _ = std::fs::remove_dir_all(&data);
    let _ = std::fs::remove_dir_all(&data2);
}
