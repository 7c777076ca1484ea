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
        .filter(|(n, _)| n == "all")
        .map(|(_, v)| *v)
        .collect();
    assert_eq!(roots, vec![total], "the root");
    assert!(drawn.len() > 5, "{} frames drawn", drawn.len());
    for (name, _) in drawn.iter().filter(|(n, _)| n != "all") {
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
    // The header before it was stored.
    assert_eq!(
        run(
            &data,
            &["sql", "SELECT name, pid FROM flamehouse.processes"]
        ),
        "big\t7\n"
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

/// `flamehouse fixtures` from an installed binary: the binary copied to a
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
    let dir = std::env::temp_dir().join(format!("flamehouse-installed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    assert!(!dir.canonicalize().unwrap().starts_with(&repo));
    let installed = dir.join("flamehouse");
    std::fs::copy(bin(), &installed).unwrap();
    let script = format!(
        "mount -t tmpfs none '{repo}' && test ! -e '{repo}/fixtures/gen/workload.c' \
         && exec ./flamehouse --data data fixtures --out fx --snapshots 3 --stacks 50",
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
        "installed flamehouse fixtures failed: {stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches(" stacks, ").count(), 2, "{stdout}");
    assert!(stdout.contains("4 snapshots, 50 stacks"), "{stdout}");
    // The embedded source was written next to the binary it compiled.
    let source = std::fs::read_to_string(dir.join("fx/workload.c")).unwrap();
    assert_eq!(source, flamehouse::fixture::WORKLOAD_C);
    assert!(source.contains("wl_tree_build"));
    let _ = std::fs::remove_dir_all(&dir);
}
