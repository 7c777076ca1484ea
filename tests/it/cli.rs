//! The `flamehouse` command line as a user runs it: fixtures, load (twice),
//! flame graphs to folded text and SVG, SQL; on its own data directory.

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> PathBuf {
    flamehouse_tests::udf_binary().with_file_name("flamehouse")
}

fn run(data: &Path, args: &[&str]) -> String {
    let out = Command::new(bin())
        .arg("--data")
        .arg(data)
        .args(args)
        .output()
        .expect("flamehouse runs");
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

#[test]
fn fixtures_load_and_flame_graphs_from_the_command_line() {
    let dir = std::env::temp_dir().join(format!("flamehouse-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
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

    let peak: i64 = run(
        &data,
        &[
            "sql",
            "SELECT peak_bytes FROM flamehouse.process_list WHERE name = 'workload'",
        ],
    )
    .trim()
    .parse()
    .unwrap();
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

    let svg = dir.join("added.svg");
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
            svg.to_str().unwrap(),
        ],
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.contains("<svg") && text.contains("main"),
        "not an SVG flame graph"
    );

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
    use flamehouse::binpb::{BinpbWriter, ProcessInfo};
    let dir = std::env::temp_dir().join(format!("flamehouse-cli-limit-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
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
        .arg("--data")
        .arg(&data)
        .args(["load", "--max-record-mib", "1"])
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
        .arg("--data")
        .arg(&data)
        .arg("load")
        .arg(&file)
        .output()
        .unwrap();
    let err2 = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err2}");
    assert!(err2.contains(&format!("byte {offset}")), "{err2}");
    assert!(!err2.contains("1048576"), "{err2}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A multi-file load loads every good file, reports each bad one on one
/// line naming the file (and the offset of the bad record), and exits
/// non-zero at the end.
#[test]
fn a_bad_file_does_not_stop_the_others() {
    let dir = std::env::temp_dir().join(format!("flamehouse-cli-multi-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
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
    let mut reader = flamehouse::binpb::BinpbReader::open(&good_a).unwrap();
    reader.next_record().unwrap();
    reader.next_record().unwrap();
    let at = reader.committed_offset();
    let mut bytes = std::fs::read(&good_a).unwrap();
    bytes[at as usize..at as usize + 8].copy_from_slice(&u64::MAX.to_be_bytes());
    let bad = dir.join("bad.binpb");
    std::fs::write(&bad, &bytes).unwrap();
    let missing = dir.join("missing.binpb");
    let out = Command::new(bin())
        .arg("--data")
        .arg(&data)
        .arg("load")
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
        .arg("--data")
        .arg(&data)
        .args(["delete", "--process", "12345"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no process 12345"),
        "{out:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
