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
    let _ = std::fs::remove_dir_all(&dir);
}
