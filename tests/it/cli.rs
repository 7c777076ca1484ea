//! The `flamehouse` command line as a user runs it: fixtures, load (twice),
//! flame graphs to folded text and SVG, SQL; on its own data directory.

use flamehouse_fixtures::testing::temp_path;
use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> PathBuf {
    flamehouse_tests::cli_binary()
}

/// `flamehouse-fixtures` (the test and demo inputs), next to `flamehouse`.
fn fixtures_bin() -> PathBuf {
    flamehouse_tests::udf_binary().with_file_name("flamehouse-fixtures")
}

/// Runs `flamehouse ARGS` on `data`; `fixtures ARGS` runs
/// `flamehouse-fixtures generate ARGS` (the generator is not part of the
/// product's binary).
fn run(data: &Path, args: &[&str]) -> String {
    let mut cmd = if args[0] == "fixtures" {
        let mut c = Command::new(fixtures_bin());
        c.arg("generate");
        c
    } else {
        let mut c = Command::new(bin());
        c.arg(args[0]);
        c
    };
    // Commands without an engine take no --data.
    if !["fixtures", "grafana"].contains(&args[0]) {
        cmd.arg("--data").arg(data);
    }
    let out = cmd.args(&args[1..]).output().expect("flamehouse runs");
    assert!(
        out.status.success(),
        "flamehouse {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn folded_sum(path: &Path, column: usize) -> i64 {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            l.split(' ')
                .rev()
                .nth(column)
                .unwrap()
                .parse::<i64>()
                .unwrap()
        })
        .sum()
}

/// Every frame of an inferno SVG as (tooltip, bar text), parsed as XML.
fn svg_frames(path: &Path) -> Vec<(String, String)> {
    use quick_xml::events::Event;
    let text = std::fs::read_to_string(path).unwrap();
    let mut r = quick_xml::Reader::from_str(&text);
    let (mut frames, mut stack) = (Vec::new(), Vec::<String>::new());
    let (mut title, mut bar, mut in_g) = (String::new(), String::new(), false);
    loop {
        match r.read_event().unwrap() {
            Event::Start(e) => {
                let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
                if name == "g" && stack.last().is_some_and(|p| p == "svg") {
                    (in_g, title, bar) = (true, String::new(), String::new());
                }
                stack.push(name);
            }
            Event::End(_) => {
                let closed = stack.pop();
                if in_g && closed.as_deref() == Some("g") {
                    in_g = false;
                    let un = |s: &str| quick_xml::escape::unescape(s).unwrap().into_owned();
                    frames.push((un(&title), un(&bar)));
                }
            }
            Event::Text(t) if in_g => {
                let t = t.decode().unwrap();
                match stack.last().map(String::as_str) {
                    Some("title") => title.push_str(&t),
                    Some("text") => bar.push_str(&t),
                    _ => {}
                }
            }
            Event::GeneralRef(e) if in_g => {
                let t = format!("&{};", e.decode().unwrap());
                match stack.last().map(String::as_str) {
                    Some("title") => title.push_str(&t),
                    Some("text") => bar.push_str(&t),
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    frames
}

/// The peak live bytes of process `workload`, as `process_list` has it.
fn peak_bytes(data: &Path) -> i64 {
    run(
        data,
        &[
            "sql",
            "SELECT peak_bytes FROM flamehouse.process_list WHERE name = 'workload'",
        ],
    )
    .trim()
    .parse()
    .unwrap()
}

/// `flame` at line granularity (a tree of 2,000 nodes, depth 21): the
/// folded file sums to the peak and draws in well under a second. The
/// former SQL fold asked the engine for 27 GiB here (memory quadratic in
/// the nodes) and failed after 25 s.
#[test]
fn flame_of_a_line_granularity_tree_is_folded_in_bounded_memory() {
    let dir = temp_path("cli-lines");
    let data = dir.join("data");
    // 400 stacks, not the shared fixtures' 300: their 1,600-node tree took
    // the SQL fold 46 s and 17.5 GB but passed; this one failed.
    let fx = dir.join("fx");
    run(
        &data,
        &[
            "fixtures",
            "--out",
            fx.to_str().unwrap(),
            "--snapshots",
            "30",
            "--stacks",
            "400",
        ],
    );
    let file = fx.join("memhawk_workload_4242_protobuf.binpb");
    run(
        &data,
        &["load", "--granularity", "line", file.to_str().unwrap()],
    );
    let nodes: usize = run(
        &data,
        &[
            "sql",
            "SELECT count() FROM flamehouse.flame_peak(process_id = \
             (SELECT process_id FROM flamehouse.process_list WHERE name = 'workload'), \
             metric = 'bytes', max_nodes = 0)",
        ],
    )
    .trim()
    .parse()
    .unwrap();
    assert!(
        nodes > 1500,
        "{nodes} nodes: not the tree that broke the SQL fold"
    );
    let peak: i64 = peak_bytes(&data);
    let p = dir.join("lines.folded");
    run(
        &data,
        &[
            "flame",
            "peak",
            "--process",
            "workload",
            "--out",
            p.to_str().unwrap(),
        ],
    );
    assert_eq!(folded_sum(&p, 0), peak);
    // --process takes the pid process_list shows as well (it took names
    // and process ids only).
    let by_pid = dir.join("pid.folded");
    run(
        &data,
        &[
            "flame",
            "peak",
            "--process",
            "4242",
            "--out",
            by_pid.to_str().unwrap(),
        ],
    );
    assert_eq!(
        std::fs::read_to_string(&by_pid).unwrap(),
        std::fs::read_to_string(&p).unwrap()
    );
}

#[test]
fn fixtures_load_and_flame_graphs_from_the_command_line() {
    let dir = temp_path("cli");
    let data = dir.join("data");
    let fx = dir.join("fx");
    let fx_s = fx.to_str().unwrap();
    run(
        &data,
        &[
            "fixtures",
            "--out",
            fx_s,
            "--snapshots",
            "30",
            "--stacks",
            "400",
        ],
    );
    let files: Vec<String> = std::fs::read_dir(&fx)
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.ends_with(".binpb"))
        .collect();
    assert_eq!(files.len(), 2);
    let mut load = vec!["load"];
    load.extend(files.iter().map(String::as_str));
    let first = run(&data, &load);
    assert!(first.contains("31 snapshots (31 new)"), "{first}");
    let again = run(&data, &load);
    assert!(again.contains("31 snapshots (0 new)"), "{again}");

    let peak: i64 = peak_bytes(&data);
    let p = dir.join("peak.folded");
    let write_peak = || {
        run(
            &data,
            &[
                "flame",
                "peak",
                "--process",
                "workload",
                "--out",
                p.to_str().unwrap(),
            ],
        )
    };
    write_peak();
    assert_eq!(folded_sum(&p, 0), peak);
    // `--out -`: the same text on standard output, no report line (it
    // wrote a file named `-`).
    let stdout = run(
        &data,
        &["flame", "peak", "--process", "workload", "--out", "-"],
    );
    assert_eq!(stdout, std::fs::read_to_string(&p).unwrap());

    // SVG tooltips name the unit, and the root bar is labelled: checked
    // frame by frame in the parsed SVG against the process's totals.
    let peak_count: i64 = run(
        &data,
        &[
            "sql",
            "SELECT p.peak_count FROM flamehouse.process_list AS l, \
             flamehouse.peak(process_id = (SELECT process_id FROM flamehouse.process_list WHERE name = 'workload')) AS p \
             WHERE l.name = 'workload'",
        ],
    )
    .trim()
    .parse()
    .unwrap();
    for (metric, unit, total) in [
        ("bytes", "bytes", peak),
        ("count", "allocations", peak_count),
    ] {
        let svg = dir.join(format!("peak-{metric}.svg"));
        run(
            &data,
            &[
                "flame",
                "peak",
                "--process",
                "workload",
                "--metric",
                metric,
                "--out",
                svg.to_str().unwrap(),
            ],
        );
        let frames = svg_frames(&svg);
        assert!(frames.len() > 5, "{metric}: {} frames", frames.len());
        let tooltip = regex::Regex::new(&format!(
            r"^(.+) \(([0-9,]+) {unit}, [0-9.]+%(; [+-]?[0-9.]+%)?\)$"
        ))
        .unwrap();
        let mut roots = Vec::new();
        for (title, text) in &frames {
            let c = tooltip
                .captures(title)
                .unwrap_or_else(|| panic!("{metric}: tooltip {title:?} does not name {unit}"));
            if &c[1] == "total" {
                roots.push((c[2].replace(',', "").parse::<i64>().unwrap(), text.clone()));
            }
        }
        assert_eq!(roots, vec![(total, "total".to_string())], "{metric}");
    }

    // Diff lines carry both sides: their sums are the totals at t1 and t2.
    let d = dir.join("diff.folded");
    run(
        &data,
        &[
            "flame",
            "diff",
            "--process",
            "workload",
            "--t1",
            "+5s",
            "--t2",
            "end",
            "--out",
            d.to_str().unwrap(),
        ],
    );
    let totals = run(
        &data,
        &[
            "sql",
            "SELECT argMaxIf(size, ts, ts <= first_ts + INTERVAL 5 SECOND), argMax(size, ts) \
             FROM flamehouse.totals t JOIN flamehouse.process_list p USING process_id WHERE p.name = 'workload'",
        ],
    );
    let want: Vec<i64> = totals
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    assert_eq!(vec![folded_sum(&d, 1), folded_sum(&d, 0)], want);

    // The same view as folded text and as SVG: the SVG's root carries the
    // folded total, and every frame it draws is a frame of the folded lines.
    let added = |out: &Path| {
        run(
            &data,
            &[
                "flame",
                "added",
                "--process",
                "workload",
                "--t1",
                "+2s",
                "--t2",
                "+20s",
                "--out",
                out.to_str().unwrap(),
            ],
        )
    };
    let folded = dir.join("added.folded");
    let svg = dir.join("added.svg");
    added(&folded);
    added(&svg);
    let total = folded_sum(&folded, 0);
    assert!(total > 0, "something was added in [+2s, +20s]");
    let frames: std::collections::BTreeSet<String> = std::fs::read_to_string(&folded)
        .unwrap()
        .lines()
        .flat_map(|l| {
            let stack = l.rsplit_once(' ').unwrap().0;
            stack.split(';').map(str::to_owned).collect::<Vec<_>>()
        })
        .collect();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<?xml") && text.contains("<svg"),
        "not an SVG"
    );
    let title =
        regex::Regex::new(r"<title>([^<]*) \(([0-9,]+) [a-z]+, [0-9.]+%\)</title>").unwrap();
    let drawn: Vec<(String, i64)> = title
        .captures_iter(&text)
        .map(|c| {
            let name = c[1]
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&apos;", "'")
                .replace("&amp;", "&");
            (name, c[2].replace(',', "").parse().unwrap())
        })
        .collect();
    let roots: Vec<i64> = drawn
        .iter()
        .filter(|(n, _)| n == "total")
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(roots, vec![total], "the root");
    assert!(drawn.len() > 5, "{} frames drawn", drawn.len());
    for (name, _) in drawn.iter().filter(|(n, _)| n != "total") {
        assert!(
            frames.contains(name),
            "{name:?} drawn but not in the folded lines"
        );
    }
    assert!(drawn.iter().any(|(n, _)| n == "main"));

    // `compact` folds the parts two loads left and changes no answer.
    let before = std::fs::read_to_string(&p).unwrap();
    let out = run(&data, &["compact"]);
    assert!(out.contains("flamehouse.samples: "), "{out}");
    for line in out.lines() {
        assert!(
            line.ends_with(" -> 1 parts") || line.ends_with(" -> 0 parts"),
            "{line}"
        );
    }
    write_peak();
    assert_eq!(std::fs::read_to_string(&p).unwrap(), before);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The decoder's memory limits are load options: a record over
/// `--max-record-mib` is an error naming the file and the record's offset,
/// with a non-zero exit, after the records before it are stored.
#[test]
fn record_size_limit_is_an_option_and_an_error() {
    use flamehouse::formats::binpb::ProcessInfo;
    use flamehouse_fixtures::binpb_writer::BinpbWriter;
    let dir = temp_path("cli-limit");
    let file = dir.join("memhawk_big_7_protobuf.binpb");
    let header = ProcessInfo {
        process_short_name: "big".into(),
        process_full_path: "/bin/big".into(),
        pid: 7,
        start_timestamp: 1_750_000_000_000_000_000,
    };
    let w = BinpbWriter::new(Vec::new(), &header).unwrap();
    let offset = w.offset();
    let mut bytes = w.into_inner();
    // A 2 MiB record (not valid zstd: only its size matters here).
    let len: u64 = 2 << 20;
    bytes.extend(len.to_be_bytes());
    bytes.extend(std::iter::repeat_n(0u8, len as usize));
    std::fs::write(&file, &bytes).unwrap();
    let data = dir.join("data");
    let out = Command::new(bin())
        .args(["load", "--max-record-mib", "1", "--data"])
        .arg(&data)
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains(&file.display().to_string()), "{err}");
    assert!(err.contains(&format!("byte {offset}")), "{err}");
    assert!(err.contains("1048576"), "{err}");
    // Nothing was loaded: not even a process row names the file.
    assert_eq!(
        run(&data, &["sql", "SELECT count() FROM flamehouse.processes"]),
        "0\n"
    );
    // With the default limit the same record is read, then refused as
    // corrupt zstd: a different error at the same offset.
    let out = Command::new(bin())
        .arg("load")
        .arg("--data")
        .arg(&data)
        .arg(&file)
        .output()
        .unwrap();
    let err2 = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err2}");
    assert!(err2.contains(&format!("byte {offset}")), "{err2}");
    assert!(!err2.contains("1048576"), "{err2}");
    // 0 MiB would refuse every record: a usage error, as --max-text-mib 0
    // is (it was accepted).
    for flag in ["--max-record-mib", "--max-decompressed-mib"] {
        let out = Command::new(bin())
            .args(["load", flag, "0", "--data"])
            .arg(&data)
            .arg(&file)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag}: {out:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// MemHawk stacks deeper than one insert block load whole: four distinct
/// stacks of 600,000 frames (~11 MB each in `stacks`, so their rows go in
/// two blocks of at most `MAX_INSERT_BYTES`), each stored with every
/// frame, root first, as the test wrote them. A load that crashed after
/// storing its rows and is run again re-sends the same blocks, which
/// deduplicate: each stack is one row in `stacks` and `process_stacks`.
#[test]
fn deep_memhawk_stacks_load_whole_in_blocks() {
    use flamehouse::formats::binpb::{
        AllocSummary, ProcessInfo, Snapshot, Stacktrace, StacktracePtr, TracedAllocSummary,
    };
    use flamehouse_fixtures::binpb_writer::BinpbWriter;
    let dir = temp_path("cli-deep");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("memhawk_deep_9_protobuf.binpb");
    let (traces, depth) = (4u32, 600_000usize);
    let header = ProcessInfo {
        process_short_name: "deep".into(),
        process_full_path: "/bin/deep".into(),
        pid: 9,
        start_timestamp: 1_750_000_000_000_000_000,
    };
    let addr = |id: u32| 0x40_1000 + 16 * u64::from(id);
    // Frame ids 1-8 cycle under each trace's own leaf (id 8 + trace).
    let ids = |t: u32| -> Vec<u32> {
        std::iter::once(8 + t)
            .chain((0..depth - 1).map(|i| 1 + (i % 8) as u32))
            .collect()
    };
    let snapshot = Snapshot {
        timestamp: header.start_timestamp + 1_000_000_000,
        changed: (1..=traces)
            .map(|t| TracedAllocSummary {
                trace_id: t,
                actual: Some(AllocSummary {
                    size: 100 * i64::from(t),
                    active: 1,
                    overhead: 0,
                    total_count: 1,
                    total_bytes: 100 * u64::from(t),
                }),
            })
            .collect(),
        ptr_ids: (1..=8 + traces)
            .map(|id| StacktracePtr {
                ptr_id: id,
                ptr_addr: addr(id),
            })
            .collect(),
        stacktraces: (1..=traces)
            .map(|t| Stacktrace {
                trace_id: t,
                ptr_id: ids(t),
            })
            .collect(),
        ..Snapshot::default()
    };
    let mut w = BinpbWriter::new(Vec::new(), &header).unwrap();
    w.write_snapshot(&snapshot).unwrap();
    std::fs::write(&file, w.into_inner()).unwrap();
    // The stacks rows' bytes: id, frame ids, labels ("0x40101x").
    let label_bytes: usize = (1..=traces)
        .flat_map(ids)
        .map(|id| 1 + format!("{:#x}", addr(id)).len())
        .sum();
    let row_bytes = traces as usize * (8 + 2 * 3) + traces as usize * depth * 8 + label_bytes;
    assert!(row_bytes > flamehouse::storage::MAX_INSERT_BYTES);

    let data = dir.join("data");
    let crashed = Command::new(bin())
        .args(["load", "--data"])
        .arg(&data)
        .arg(&file)
        .env("FLAMEHOUSE_TEST_CRASH", "after-samples")
        .output()
        .unwrap();
    assert_eq!(crashed.status.code(), Some(137), "{crashed:?}");
    let out = run(&data, &["load", &file.display().to_string()]);
    assert!(out.contains(&format!("{traces} stacks")), "{out}");
    for table in ["stacks", "process_stacks"] {
        assert_eq!(
            run(
                &data,
                &[
                    "sql",
                    &format!(
                        "SELECT count(), uniqExact(stack_id), sum(length(labels)) \
                         FROM flamehouse.{table}"
                    )
                ]
            ),
            format!("{traces}\t{traces}\t{}\n", traces as usize * depth),
            "{table}"
        );
    }
    // Each stack's labels, root first, are its frames' addresses read back
    // from the leaf-first ids written.
    let got = run(
        &data,
        &[
            "sql",
            "SELECT labels FROM flamehouse.process_stacks ORDER BY labels[-1] \
             FORMAT JSONCompactEachRow",
        ],
    );
    for (t, line) in (1..=traces).zip(got.lines()) {
        let labels: Vec<Vec<String>> = serde_json::from_str(line).unwrap();
        let want: Vec<String> = ids(t)
            .iter()
            .rev()
            .map(|&id| format!("{:#x}", addr(id)))
            .collect();
        assert!(labels[0] == want, "trace {t}'s stack is not the file's");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a failed run said: exit code, stderr, stdout.
struct Failed {
    code: Option<i32>,
    stderr: String,
}

/// Runs `flamehouse ARGS` (no `--data` added), which must fail; returns the
/// exit code and stderr.
fn run_fail(args: &[&str]) -> Failed {
    let out = Command::new(bin())
        .args(args)
        .env_remove("CLICKHOUSE_URL")
        .env_remove("FLAMEHOUSE_DATA")
        .output()
        .expect("flamehouse runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "flamehouse {args:?} succeeded: {}{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    Failed {
        code: out.status.code(),
        stderr,
    }
}

/// Fixture profiles (small: 30 snapshots one second apart, from
/// 2026-01-01 00:00:00 for `workload`), written once for the tests below.
fn small_fixtures() -> &'static [String] {
    static F: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    F.get_or_init(|| {
        // Inside the shared engine's directory, which the harness removes
        // at exit (the tests using these end at different times).
        let fx = flamehouse_tests::engine().data_dir().join("cli-fixtures");
        let _ = std::fs::remove_dir_all(&fx);
        let out = Command::new(fixtures_bin())
            .args(["generate", "--snapshots", "30", "--stacks", "300", "--out"])
            .arg(&fx)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut files: Vec<String> = std::fs::read_dir(&fx)
            .unwrap()
            .map(|e| e.unwrap().path().display().to_string())
            .filter(|p| p.ends_with(".binpb"))
            .collect();
        files.sort();
        files
    })
}

/// A temporary directory of one test, with `data/` holding both small
/// fixtures loaded into database `flamehouse`.
fn loaded_dir(name: &str) -> (PathBuf, PathBuf) {
    let dir = temp_path(&format!("cli-{name}"));
    let data = dir.join("data");
    let mut load = vec!["load"];
    load.extend(small_fixtures().iter().map(String::as_str));
    run(&data, &load);
    (dir, data)
}

/// Every table of `db` with its row count, and the list of databases: what
/// a hostile name must leave as it was.
fn state(data: &Path) -> String {
    run(
        data,
        &[
            "sql",
            // One ORDER BY over the whole union: the parts of a UNION ALL
            // come back in any order.
            "SELECT * FROM (SELECT name, engine, total_rows FROM system.tables WHERE database = 'flamehouse' \
             UNION ALL SELECT name, '', NULL FROM system.databases) ORDER BY 1, 2",
        ],
    )
}

/// A database or cluster name that is not a plain identifier is refused by
/// every command that takes one, with a one-line error and a non-zero exit,
/// before anything runs: the existing schema keeps every table and row (the
/// first name below used to drop the database).
#[test]
fn hostile_names_are_refused_and_touch_nothing() {
    let (dir, data) = loaded_dir("hostile");
    let before = state(&data);
    assert!(before.lines().count() > 20, "{before}");
    assert!(before.contains("samples\tMergeTree\t"), "{before}");
    let data_s = data.to_str().unwrap();
    let file = small_fixtures()[0].as_str();
    let out = dir.join("hostile.folded");
    let out_s = out.to_str().unwrap();
    let hostile = [
        "x; DROP DATABASE flamehouse",
        "flamehouse.samples; DROP TABLE flamehouse.samples",
        "bad-name",
        "x` ON CLUSTER c --",
        "1st",
        "",
        "a b",
    ];
    for name in hostile {
        let with = |cmd: &[&str], opt: &str| -> Vec<String> {
            let mut v: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
            v.extend([
                opt.to_string(),
                name.to_string(),
                "--data".into(),
                data_s.into(),
            ]);
            v
        };
        let flame = ["flame", "peak", "--process", "workload", "--out", out_s];
        let mut cases = vec![
            (with(&["init"], "--database"), "database"),
            (with(&["compact"], "--database"), "database"),
            (with(&["load", file], "--database"), "database"),
            (with(&flame, "--database"), "database"),
            (with(&["init"], "--cluster"), "cluster"),
            (with(&["compact"], "--cluster"), "cluster"),
            (with(&["load", file], "--cluster"), "cluster"),
        ];
        // The same through a server: refused before any request is sent.
        for (mut a, what) in cases.clone() {
            a.truncate(a.len() - 2);
            a.extend(["--url".into(), "http://127.0.0.1:9".into()]);
            cases.push((a, what));
        }
        for (args, what) in &cases {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let f = run_fail(&args);
            assert_eq!(f.code, Some(2), "{args:?}: {}", f.stderr);
            assert!(
                f.stderr.contains(&format!("invalid {what} {name:?}")),
                "{args:?}: {}",
                f.stderr
            );
            assert!(!f.stderr.contains("Exception"), "{args:?}: {}", f.stderr);
            assert!(!out.exists(), "{args:?} wrote {}", out.display());
        }
    }
    assert_eq!(state(&data), before);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Values typed for an enumeration or a time are checked before anything
/// runs: a clear one-line error naming the value, a non-zero exit, no file
/// (`--metric bogus` used to draw bytes titled "(bogus)", and a 13th month
/// used to read as 1900).
#[test]
fn enumerations_and_times_are_checked() {
    let (dir, data) = loaded_dir("enums");
    let data_s = data.to_str().unwrap();
    let out = dir.join("x.svg");
    let out_s = out.to_str().unwrap();
    let flame = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["flame"].iter().map(|s| s.to_string()).collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v.extend(["--process", "workload", "--out", out_s, "--data", data_s].map(String::from));
        v
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            flame(&["peak", "--metric", "bogus"]),
            "'bogus' for '--metric",
        ),
        (flame(&["flames"]), "'flames' for '<VIEW>'"),
        (
            flame(&["at", "--t", "2026-13-45 99:00:00"]),
            "month 13 does not exist",
        ),
        (
            flame(&["at", "--t", "2026-02-30 00:00:00"]),
            "day 30 does not exist",
        ),
        (flame(&["at", "--t", "yesterday"]), "bad time \"yesterday\""),
        (
            flame(&["added", "--t1", "+5s", "--t2", "+5 min"]),
            "bad time \"+5 min\"",
        ),
        (
            [
                "load",
                "--granularity",
                "file",
                "--data",
                data_s,
                &small_fixtures()[0],
            ]
            .map(String::from)
            .to_vec(),
            "'file' for '--granularity",
        ),
    ];
    for (args, want) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let f = run_fail(&args);
        assert_eq!(f.code, Some(2), "{args:?}: {}", f.stderr);
        let first = f.stderr.lines().next().unwrap_or("");
        assert!(first.contains(want), "{args:?}: {}", f.stderr);
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A view that would be empty is an error that says why, with the process's
/// real span of snapshots, and writes no file (it used to write an "ERROR"
/// SVG or a one-byte file and exit 0).
#[test]
fn empty_views_are_errors_with_the_process_span() {
    let (dir, data) = loaded_dir("empty");
    let data_s = data.to_str().unwrap();
    // The span from the table, in the form the messages use.
    let span = run(
        &data,
        &[
            "sql",
            "SELECT toString(min(ts)), toString(max(ts)) FROM flamehouse.totals t \
             JOIN flamehouse.processes p USING process_id WHERE p.name = 'workload'",
        ],
    );
    let (first, last) = span.trim().split_once('\t').unwrap();
    assert_eq!(first, "2026-01-01 00:00:00.000");
    let span = format!("has snapshots from {first} to {last} UTC");
    for out in ["x.svg", "x.folded"] {
        let out = dir.join(out);
        let out_s = out.to_str().unwrap();
        let flame = |extra: &[&str]| -> Vec<String> {
            let mut v = vec!["flame".to_string()];
            v.extend(extra.iter().map(|s| s.to_string()));
            v.extend(["--out", out_s, "--data", data_s].map(String::from));
            v
        };
        let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
            // Nothing grows between an instant and itself.
            (
                flame(&[
                    "added",
                    "--process",
                    "workload",
                    "--t1",
                    "+10s",
                    "--t2",
                    "+10s",
                ]),
                vec!["view added (bytes) is empty from", "no stack grew", &span],
            ),
            (
                flame(&[
                    "removed",
                    "--process",
                    "workload",
                    "--t1",
                    "end",
                    "--t2",
                    "end",
                    "--metric",
                    "count",
                ]),
                vec![
                    "view removed (count) is empty",
                    "no stack shrank in count",
                    &span,
                ],
            ),
            // An offset without a unit is seconds.
            (
                flame(&[
                    "added",
                    "--process",
                    "workload",
                    "--t1",
                    "+10",
                    "--t2",
                    "+10s",
                ]),
                vec!["view added (bytes) is empty from 2026-01-01 00:00:10.000 to 2026-01-01 00:00:10.000"],
            ),
            // Neither a process_id, a pid nor a name (4242 is the pid).
            (
                flame(&["at", "--process", "4241", "--t", "end"]),
                vec!["no process \"4241\" in database flamehouse", "process_list"],
            ),
            (
                flame(&[
                    "diff",
                    "--process",
                    "workload",
                    "--t1",
                    "+20s",
                    "--t2",
                    "+10s",
                ]),
                vec![
                    "--t2 2026-01-01 00:00:10.000 is before --t1 2026-01-01 00:00:20.000",
                    &span,
                ],
            ),
            (
                flame(&["at", "--process", "workload", "--t", "2025-12-31 23:59:59"]),
                vec![
                    "view at is empty at 2025-12-31 23:59:59.000, before the first snapshot",
                    &span,
                ],
            ),
            (
                flame(&[
                    "cumulative",
                    "--process",
                    "workload",
                    "--t",
                    "2020-01-01 00:00:00",
                ]),
                vec!["before the first snapshot", &span],
            ),
            (
                flame(&["peak", "--process", "workload", "--t", "end"]),
                vec!["view peak takes no --t"],
            ),
            (
                flame(&["at", "--process", "workload", "--t1", "+1s"]),
                vec!["view at takes no --t1/--t2"],
            ),
            (
                flame(&["added", "--process", "workload", "--t1", "+1s"]),
                vec!["view added needs --t2"],
            ),
        ];
        for (args, wants) in &cases {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let f = run_fail(&args);
            // Flags that do not fit the view are usage errors (exit 2);
            // what the stored data says, exit 1.
            let usage = wants[0].contains("takes no") || wants[0].contains(" needs --");
            assert_eq!(
                f.code,
                Some(if usage { 2 } else { 1 }),
                "{args:?}: {}",
                f.stderr
            );
            assert_eq!(f.stderr.lines().count(), 1, "{args:?}: {}", f.stderr);
            for w in wants {
                assert!(f.stderr.contains(w), "{args:?}: want {w:?} in {}", f.stderr);
            }
            assert!(!out.exists(), "{args:?} wrote {}", out.display());
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The README's `flamehouse flame` examples, run as written against the
/// fixtures (`flamehouse-fixtures generate` then `load`), each draw a non-empty
/// flame graph: the sum of the folded values is the view's root value from
/// SQL.
#[test]
fn readme_flame_examples_show_data() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let examples: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("flamehouse flame "))
        .collect();
    assert!(examples.len() >= 4, "{examples:?}");
    // The README's fixtures have the default size (120 snapshots).
    let dir = temp_path("cli-readme");
    let data = dir.join("data");
    let fx = dir.join("fx");
    let fx_s = fx.to_str().unwrap();
    run(&data, &["fixtures", "--out", fx_s, "--stacks", "300"]);
    let mut load = vec!["load".to_string()];
    for e in std::fs::read_dir(&fx).unwrap() {
        let p = e.unwrap().path().display().to_string();
        if p.ends_with(".binpb") {
            load.push(p);
        }
    }
    run(&data, &load.iter().map(String::as_str).collect::<Vec<_>>());
    for ex in examples {
        let ex = ex.split(" #").next().unwrap();
        let mut args = shell_words(ex);
        assert_eq!(args.remove(0), "flamehouse");
        let out = args.iter().position(|a| a == "--out").unwrap() + 1;
        let file = dir.join(&args[out]);
        args[out] = file.display().to_string();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let said = run(&data, &args);
        assert!(said.starts_with("wrote "), "{ex}: {said}");
        let text = std::fs::read_to_string(&file).unwrap();
        if file.extension().is_some_and(|e| e == "svg") {
            assert!(text.contains("<svg") && !text.contains("ERROR"), "{ex}");
            assert!(text.contains("main"), "{ex}");
        } else {
            assert!(folded_sum(&file, 0) > 0, "{ex}: {text}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Splits a README command line on spaces, keeping '...' quoted words.
fn shell_words(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut quoted, mut any) = (false, false);
    for c in s.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            ' ' if !quoted => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            c => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    out
}

/// Options that would do nothing are errors: server options without a
/// server, `--data` with one, `--cluster` on the embedded engine,
/// `--idle-exit` without `--watch`; commands that use neither the engine
/// nor a server take neither option (`--url ... demo` used to run
/// embedded).
#[test]
fn options_that_do_nothing_are_errors() {
    let dir = temp_path("cli-unused");
    let d = dir.join("data");
    let d = d.to_str().unwrap();
    let url = "http://127.0.0.1:9";
    let cases: &[(&[&str], &str)] = &[
        (&["grafana", "--url", url], "unexpected argument '--url'"),
        (&["grafana", "--data", d], "unexpected argument '--data'"),
        (
            &["--url", url, "sql", "SELECT 1"],
            "unexpected argument '--url'",
        ),
        (
            &["sql", "--user", "u", "--data", d, "SELECT 1"],
            "--user needs --url",
        ),
        (
            &["init", "--password", "p", "--data", d],
            "--password needs --url",
        ),
        (
            &["init", "--timeout", "5", "--data", d],
            "--timeout needs --url",
        ),
        (
            &["compact", "--ca-cert", "x.pem", "--data", d],
            "--ca-cert needs --url",
        ),
        (
            &["sql", "--server-database", "x", "--data", d, "SELECT 1"],
            "--server-database needs --url",
        ),
        (
            &["init", "--cluster", "c", "--data", d],
            "--cluster needs --url",
        ),
        (
            &["sql", "--url", url, "--data", d, "SELECT 1"],
            "--data is the embedded engine's directory",
        ),
        (
            &["load", "--idle-exit", "5", "--data", d, "x.binpb"],
            "--watch",
        ),
    ];
    for (args, want) in cases {
        let f = run_fail(args);
        // Usage errors, as clap's own: exit 2, one line.
        assert_eq!(f.code, Some(2), "{args:?}: {}", f.stderr);
        if !want.starts_with("unexpected") {
            assert_eq!(f.stderr.trim().lines().count(), 1, "{args:?}: {}", f.stderr);
        }
        assert!(f.stderr.contains(want), "{args:?}: {}", f.stderr);
    }
    // Refused before the engine opened its directory.
    assert!(!dir.join("data").exists());
}

/// `--help` shows each default once: clap's `[default: x]`, never also a
/// "(default ...)" in the text; server options are listed only by the
/// commands that use them.
#[test]
fn help_shows_each_default_once_and_only_options_that_apply() {
    let help = |args: &[&str]| -> String {
        let out = Command::new(bin())
            .args(args)
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    };
    let commands = [
        "sql", "init", "compact", "load", "delete", "flame", "grafana",
    ];
    for cmd in commands {
        let h = help(&[cmd]);
        assert!(!h.to_lowercase().contains("(default"), "{cmd}: {h}");
        let server = [
            "--url",
            "--user",
            "--password",
            "--server-database",
            "--ca-cert",
            "--timeout",
            "--connect-timeout",
        ];
        let uses_server = ["sql", "init", "compact", "load", "delete", "flame"].contains(&cmd);
        for opt in server {
            assert_eq!(
                h.contains(&format!("{opt} ")),
                uses_server,
                "{cmd} {opt}: {h}"
            );
        }
        let uses_data = cmd != "grafana";
        assert_eq!(h.contains("--data "), uses_data, "{cmd}: {h}");
    }
    let top = help(&[]);
    assert!(
        !top.contains("--url <") && !top.contains("--data <"),
        "{top}"
    );
    let flame = help(&["flame"]);
    assert!(
        flame.contains("[default: bytes]") && flame.contains("- count:"),
        "{flame}"
    );
}

/// `load` of something that is not a MemHawk stream names the file and
/// says what it looks like (gzip, as pprof writes; a zstd-compressed
/// profile without length prefixes; text; a directory; an empty file),
/// exits non-zero and stores nothing.
#[test]
fn non_memhawk_inputs_say_what_they_look_like() {
    let dir = temp_path("cli-sniff");
    let data = dir.join("data");
    let text = dir.join("notes.txt");
    std::fs::write(&text, "level\tlabel\tvalue\n0\ttotal\t3\n").unwrap();
    let real = &small_fixtures()[0];
    // Real gzip and zstd output of a real profile, by the system's tools.
    let gz = dir.join("profile.binpb.gz");
    let zst = dir.join("profile.zst");
    for (tool, out) in [("gzip", &gz), ("zstd", &zst)] {
        let o = Command::new(tool).arg("-c").arg(real).output().unwrap();
        assert!(o.status.success());
        std::fs::write(out, o.stdout).unwrap();
    }
    // The stream's records without their length prefixes: bare zstd frames.
    let bytes = std::fs::read(real).unwrap();
    let len = u64::from_be_bytes(bytes[..8].try_into().unwrap()) as usize;
    let bare = dir.join("bare.zst");
    std::fs::write(&bare, &bytes[8..8 + len]).unwrap();
    let empty = dir.join("empty.binpb");
    std::fs::write(&empty, b"").unwrap();
    let sub = dir.join("a-directory");
    std::fs::create_dir_all(&sub).unwrap();
    // A gzip stream is taken as pprof (issue 10) unless its first bytes
    // decompress to something else; forced as binpb it is MemHawk's
    // "gzip-compressed".
    let cases = [
        (&gz, "not a pprof profile"),
        (&text, "looks like text"),
        (&zst, "bare zstd frame"),
        (&bare, "bare zstd frame"),
        (&sub, "is a directory"),
        (&empty, "the file is empty: no profile in any format"),
    ];
    for (file, want) in cases {
        let f = run_fail(&[
            "load",
            "--data",
            data.to_str().unwrap(),
            file.to_str().unwrap(),
        ]);
        assert_eq!(f.code, Some(1), "{}", f.stderr);
        assert_eq!(f.stderr.lines().count(), 1, "{}", f.stderr);
        assert!(
            f.stderr.contains(&file.display().to_string()),
            "{}",
            f.stderr
        );
        assert!(f.stderr.contains(want), "{}: {}", file.display(), f.stderr);
        assert!(!f.stderr.contains("length prefix"), "{}", f.stderr);
        // Forcing the format gives the same one line as detecting it.
        let forced = run_fail(&[
            "load",
            "--format",
            "binpb",
            "--data",
            data.to_str().unwrap(),
            file.to_str().unwrap(),
        ]);
        assert_eq!(forced.code, Some(1));
        if file == &gz {
            assert!(
                forced.stderr.contains("gzip-compressed"),
                "{}",
                forced.stderr
            );
        } else {
            assert_eq!(forced.stderr, f.stderr);
        }
    }
    // An unknown format is refused before anything is read, with the
    // formats there are.
    let f = run_fail(&[
        "load",
        "--format",
        "nosuch",
        "--data",
        data.to_str().unwrap(),
        real.as_str(),
    ]);
    assert_eq!(f.code, Some(2), "{}", f.stderr);
    assert!(
        f.stderr.contains("invalid value 'nosuch'") && f.stderr.contains("binpb"),
        "{}",
        f.stderr
    );
    assert_eq!(
        run(&data, &["sql", "SELECT count() FROM flamehouse.processes"]),
        "0\n"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A data directory another process has open is named as such, with that
/// process's pid (here this test process, whose shared engine holds its
/// directory); a read-only one says it is not writable instead of
/// "File exists" or a guess about another process.
#[test]
fn engine_open_failures_say_the_true_cause() {
    let held = flamehouse_tests::engine().data_dir().to_path_buf();
    let f = run_fail(&["sql", "--data", held.to_str().unwrap(), "SELECT 1"]);
    assert!(
        f.stderr.contains(&format!(
            "another process (pid {}) has this directory open",
            std::process::id()
        )),
        "{}",
        f.stderr
    );
    // One line: asked before the engine opens, whose own lock error
    // ("Code: 76 ... Cannot lock file") came first.
    assert_eq!(f.stderr.trim().lines().count(), 1, "{}", f.stderr);

    // Read-only: a read-only bind mount in a private mount namespace (root
    // is not stopped by file modes). The directory was prepared first.
    let dir = temp_path("cli-ro");
    let (src, mnt) = (dir.join("src"), dir.join("mnt"));
    std::fs::create_dir_all(&mnt).unwrap();
    run(&src, &["sql", "SELECT 1"]);
    let script = format!(
        "mount --bind '{s}' '{m}' && mount -o remount,bind,ro '{m}' && exec '{b}' sql --data '{m}' 'SELECT 1'",
        s = src.display(),
        m = mnt.display(),
        b = bin().display()
    );
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .output()
        .expect("unshare runs (util-linux)");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("{}: the directory is not writable", mnt.display())),
        "{err}"
    );
    assert!(!err.contains("File exists"), "{err}");
    // One line: asked before the engine opens, whose own `Code: 76 ...
    // Read-only file system` line came first.
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `flamehouse` finds `flamehouse-udf` as an installed pair would need:
/// `$FLAMEHOUSE_UDF` first (an override), then next to itself, then on
/// `PATH` (`cargo install` puts each crate's binaries in `~/.cargo/bin`);
/// with none, a one-line error that says where it looked. Which binary the
/// engine runs is read back from the link it made in the data directory.
#[test]
fn udf_binary_is_found_next_to_the_cli_then_on_path() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_path("cli-lookup");
    let (solo, tools, pair, fake) = (
        dir.join("solo"),
        dir.join("tools"),
        dir.join("pair"),
        dir.join("fake"),
    );
    let udf = flamehouse_tests::udf_binary();
    for d in [&solo, &tools, &pair, &fake] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::copy(bin(), solo.join("flamehouse")).unwrap();
    std::fs::copy(bin(), pair.join("flamehouse")).unwrap();
    std::fs::copy(&udf, tools.join("flamehouse-udf")).unwrap();
    std::fs::copy(&udf, pair.join("flamehouse-udf")).unwrap();
    // A decoy on PATH that would fail every call if the engine ran it.
    let decoy = fake.join("flamehouse-udf");
    std::fs::write(&decoy, "#!/bin/sh\necho decoy >&2\nexit 3\n").unwrap();
    std::fs::set_permissions(&decoy, std::fs::Permissions::from_mode(0o755)).unwrap();

    let path = |first: &Path| format!("{}:/usr/bin:/bin", first.display());
    let sql = "SELECT n.level, n.label, n.value, n.self FROM \
               (SELECT stackTree([(['main','f'], 3), (['main','g'], 1)]) AS t) ARRAY JOIN t AS n";
    let run_in = |exe_dir: &Path, path: &str, env_udf: Option<&Path>, data: &str| {
        let mut c = Command::new(exe_dir.join("flamehouse"));
        c.env_remove("FLAMEHOUSE_UDF")
            .env("PATH", path)
            .arg("sql")
            .arg("--data")
            .arg(dir.join(data))
            .arg(sql);
        if let Some(u) = env_udf {
            c.env("FLAMEHOUSE_UDF", u);
        }
        c.output().unwrap()
    };
    let ok = |out: std::process::Output, data: &str, want_udf: &Path| {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{data}: {err}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "0\ttotal\t4\t0\n1\tmain\t4\t0\n2\tf\t3\t3\n2\tg\t1\t1\n",
            "{data}"
        );
        let link = std::fs::read_link(dir.join(data).join("user_scripts/flamehouse-udf")).unwrap();
        assert_eq!(link, want_udf.canonicalize().unwrap(), "{data}");
    };

    // Alone in its directory: the one on PATH.
    ok(
        run_in(&solo, &path(&tools), None, "d1"),
        "d1",
        &tools.join("flamehouse-udf"),
    );
    // Next to it beats PATH.
    ok(
        run_in(&pair, &path(&fake), None, "d2"),
        "d2",
        &pair.join("flamehouse-udf"),
    );
    // $FLAMEHOUSE_UDF beats PATH.
    ok(
        run_in(
            &solo,
            &path(&fake),
            Some(&pair.join("flamehouse-udf")),
            "d3",
        ),
        "d3",
        &pair.join("flamehouse-udf"),
    );
    // Nowhere: one clear line, non-zero exit.
    let out = run_in(&solo, "/usr/bin:/bin", None, "d4");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("cannot find the flamehouse-udf executable")
            && err.contains(&solo.join("flamehouse-udf").display().to_string())
            && err.contains("PATH"),
        "{err}"
    );
    // A $FLAMEHOUSE_UDF naming nothing is an error, not a silent fallback.
    let missing = dir.join("nowhere/flamehouse-udf");
    let out = run_in(&solo, &path(&tools), Some(&missing), "d5");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains(&format!("FLAMEHOUSE_UDF={}", missing.display())),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `scripts/demo` runs the binaries where cargo put them: its lookup
/// (`scripts/bin-dir`, through `cargo metadata`) follows CARGO_TARGET_DIR,
/// and the script hard-codes no `target/` path. The oracle for the default
/// is where this test's own build put `flamehouse-udf`.
#[test]
fn demo_finds_the_binaries_through_cargo() {
    let root = crate::render::repo();
    let demo = std::fs::read_to_string(root.join("scripts/demo")).unwrap();
    let code: Vec<&str> = demo
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    assert!(
        code.iter().all(|l| !l.contains("target/")),
        "scripts/demo hard-codes a target directory:\n{demo}"
    );
    assert!(
        code.iter().any(|l| l.contains("scripts/bin-dir")),
        "scripts/demo does not use scripts/bin-dir"
    );
    let bin_dir = |target: Option<&str>| {
        let mut c = Command::new(root.join("scripts/bin-dir"));
        c.env_remove("CARGO_BUILD_TARGET");
        if let Some(t) = target {
            c.env("CARGO_TARGET_DIR", t);
        }
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim_end())
    };
    let elsewhere = std::env::temp_dir().join(format!("flamehouse-target-{}", std::process::id()));
    assert_eq!(
        bin_dir(Some(elsewhere.to_str().unwrap())),
        elsewhere.join("release")
    );
    assert_eq!(
        bin_dir(None).canonicalize().unwrap(),
        flamehouse_tests::udf_binary()
            .parent()
            .unwrap()
            .canonicalize()
            .unwrap()
    );
}

/// `flamehouse-fixtures generate` from an installed binary: the binary copied to a
/// temp dir and run from there in a mount namespace where the repository
/// is an empty tmpfs, so a source path baked in at build time cannot be
/// read (it was, before the C source was embedded).
#[test]
fn fixtures_from_an_installed_binary_without_the_repository() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .canonicalize()
        .unwrap();
    let dir = temp_path("installed");
    assert!(!dir.canonicalize().unwrap().starts_with(&repo));
    let installed = dir.join("flamehouse-fixtures");
    std::fs::copy(fixtures_bin(), &installed).unwrap();
    let script = format!(
        "mount -t tmpfs none '{repo}' && test ! -e '{repo}/fixtures/gen/workload.c' \
         && exec ./flamehouse-fixtures generate --out fx --snapshots 3 --stacks 50",
        repo = repo.display()
    );
    let out = Command::new("unshare")
        .args(["--mount", "sh", "-c", &script])
        .current_dir(&dir)
        .output()
        .expect("unshare (util-linux) runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "installed flamehouse-fixtures failed: {stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches(" stacks, ").count(), 2, "{stdout}");
    assert!(stdout.contains("4 snapshots, 50 stacks"), "{stdout}");
    // The embedded source was written next to the binary it compiled.
    let source = std::fs::read_to_string(dir.join("fx/workload.c")).unwrap();
    assert_eq!(source, flamehouse_fixtures::workload::WORKLOAD_C);
    assert!(source.contains("wl_tree_build"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A multi-file load loads every good file, reports each bad one on one
/// line naming the file (and the offset of the bad record), and exits
/// non-zero at the end.
#[test]
fn a_bad_file_does_not_stop_the_others() {
    let dir = temp_path("cli-multi");
    let data = dir.join("data");
    let fx = dir.join("fx");
    run(
        &data,
        &[
            "fixtures",
            "--out",
            fx.to_str().unwrap(),
            "--snapshots",
            "10",
            "--stacks",
            "200",
        ],
    );
    let good_a = fx.join("memhawk_workload_4242_protobuf.binpb");
    let good_b = fx.join("memhawk_workload-b_4343_protobuf.binpb");
    // A copy of the first with its third record's length prefix made huge.
    let mut reader = flamehouse::formats::binpb::BinpbReader::open(&good_a).unwrap();
    reader.next_record().unwrap();
    reader.next_record().unwrap();
    let at = reader.committed_offset();
    let mut bytes = std::fs::read(&good_a).unwrap();
    bytes[at as usize..at as usize + 8].copy_from_slice(&u64::MAX.to_be_bytes());
    let bad = dir.join("bad.binpb");
    std::fs::write(&bad, &bytes).unwrap();
    let missing = dir.join("missing.binpb");
    let out = Command::new(bin())
        .arg("load")
        .arg("--data")
        .arg(&data)
        .args([&bad, &missing, &good_a, &good_b])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    let bad_abs = std::fs::canonicalize(&bad).unwrap();
    assert!(
        lines[0].contains(&bad_abs.display().to_string())
            && lines[0].contains(&format!("byte {at}")),
        "{err}"
    );
    assert!(lines[1].contains(&missing.display().to_string()), "{err}");
    assert!(lines[2].contains("2 of 4 files failed"), "{err}");
    // Both good files were loaded (the bad copy's snapshots before the bad
    // record belong to the first process: stored once).
    assert_eq!(stdout.matches("11 snapshots").count(), 2, "{stdout}");
    assert_eq!(
        run(
            &data,
            &[
                "sql",
                "SELECT name, source FROM flamehouse.process_list ORDER BY name"
            ]
        ),
        format!(
            "workload\t{}\nworkload-b\t{}\n",
            std::fs::canonicalize(&good_a).unwrap().display(),
            std::fs::canonicalize(&good_b).unwrap().display()
        )
    );
    // `delete` removes one process; loading it again stores it again.
    let out = run(&data, &["delete", "--process", "workload-b"]);
    assert!(out.starts_with("deleted process "), "{out}");
    let names = "SELECT name FROM flamehouse.process_list ORDER BY name";
    assert_eq!(run(&data, &["sql", names]), "workload\n");
    let again = run(&data, &["load", good_b.to_str().unwrap()]);
    assert!(again.contains("11 snapshots (11 new)"), "{again}");
    assert_eq!(run(&data, &["sql", names]), "workload\nworkload-b\n");
    let out = Command::new(bin())
        .args(["delete", "--process", "12345", "--data"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no process \"12345\""),
        "{out:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `load --replace` redoes a load made with the wrong main binary: a plain
/// re-run stores nothing new and keeps the unsymbolized frames; `--replace`
/// deletes the process and loads it again, so its peak flame graph equals
/// a first load made right (in another data directory), and the other
/// process is untouched.
#[test]
fn load_replace_redoes_a_load_with_the_wrong_binary() {
    let dir = temp_path("cli-replace");
    let (data, right) = (dir.join("data"), dir.join("right"));
    let files = small_fixtures();
    let pick = |name: &str| {
        files
            .iter()
            .find(|f| f.ends_with(&format!("memhawk_{name}_protobuf.binpb")))
            .unwrap()
            .as_str()
    };
    let (a, b) = (pick("workload_4242"), pick("workload-b_4343"));
    let peak = |data: &Path, name: &str| {
        let out = dir.join(format!("{name}.folded"));
        run(
            data,
            &[
                "flame",
                "peak",
                "--process",
                name,
                "--out",
                out.to_str().unwrap(),
            ],
        );
        std::fs::read_to_string(out).unwrap()
    };
    let symbolized = |summary: &str| -> f64 {
        let s = summary.split("symbolized ").nth(1).unwrap();
        s[..s.find('%').unwrap()].parse().unwrap()
    };
    // The reference: both files loaded right.
    run(&right, &["load", a, b]);
    let want_a = peak(&right, "workload");
    let want_b = peak(&right, "workload-b");
    // A wrong binary for `workload`.
    let wrong = run(&data, &["load", "--binary", "/nonexistent/workload", a]);
    run(&data, &["load", b]);
    assert!(symbolized(&wrong) < 1.0, "{wrong}");
    let bad_a = peak(&data, "workload");
    assert_ne!(bad_a, want_a);
    // A plain re-run stores nothing and changes nothing.
    let again = run(&data, &["load", a]);
    assert!(again.contains("(0 new)"), "{again}");
    assert_eq!(peak(&data, "workload"), bad_a);
    // --replace redoes it.
    let redone = run(&data, &["load", "--replace", a]);
    assert!(symbolized(&redone) > 80.0, "{redone}");
    assert!(
        redone.contains("new)") && !redone.contains("(0 new)"),
        "{redone}"
    );
    assert_eq!(peak(&data, "workload"), want_a);
    assert_eq!(peak(&data, "workload-b"), want_b);
    let count = |d: &Path| {
        run(
            d,
            &[
                "sql",
                "SELECT (SELECT count() FROM flamehouse.samples), (SELECT count() FROM flamehouse.totals), \
                 (SELECT count() FROM flamehouse.processes FINAL)",
            ],
        )
    };
    assert_eq!(count(&data), count(&right));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A profile written by MemHawk's own writer (fixtures/memhawk, see its
/// README for provenance) of a program whose allocations are known: the
/// bytes and blocks under `make_small` and `make_big` at the peak and at the
/// end are the program's, not a figure flamehouse computed.
#[test]
fn memhawk_written_profile_matches_the_program() {
    let fx = crate::render::repo().join("fixtures/memhawk");
    let dir = temp_path("cli-memhawk");
    let data = dir.join("data");
    let file = fx.join("memhawk_alloc_22746_protobuf.binpb");
    let binary = fx.join("alloc");
    let out = run(
        &data,
        &[
            "load",
            "--binary",
            binary.to_str().unwrap(),
            file.to_str().unwrap(),
        ],
    );
    assert!(out.contains("5 snapshots (5 new)"), "{out}");
    // Bytes (or blocks) of the folded lines through `function`.
    let through = |view: &[&str], metric: &str, function: &str| -> i64 {
        let folded = dir.join("view.folded");
        let mut args = vec!["flame"];
        args.extend(view);
        args.extend([
            "--process",
            "alloc",
            "--metric",
            metric,
            "--out",
            folded.to_str().unwrap(),
        ]);
        run(&data, &args);
        std::fs::read_to_string(&folded)
            .unwrap()
            .lines()
            .filter(|l| l.split(';').any(|f| f == function))
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<i64>().unwrap())
            .sum()
    };
    let peak: &[&str] = &["peak"];
    let end: &[&str] = &["at", "--t", "end"];
    assert_eq!(through(peak, "bytes", "make_small"), 64_000);
    assert_eq!(through(peak, "bytes", "make_big"), 1_000_000);
    assert_eq!(through(peak, "count", "make_small"), 1_000);
    assert_eq!(through(peak, "count", "make_big"), 10);
    assert_eq!(through(end, "bytes", "make_small"), 64_000);
    assert_eq!(through(end, "bytes", "make_big"), 500_000);
    assert_eq!(through(end, "count", "make_big"), 5);
    // Every program allocation is under `main`.
    assert_eq!(through(end, "bytes", "main"), 564_000);
    let _ = std::fs::remove_dir_all(&dir);
}
