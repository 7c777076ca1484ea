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

/// `flamehouse` finds `flamehouse-udf` as an installed pair would need:
/// `$FLAMEHOUSE_UDF` first (an override), then next to itself, then on
/// `PATH` (`cargo install` puts each crate's binaries in `~/.cargo/bin`);
/// with none, a one-line error that says where it looked. Which binary the
/// engine runs is read back from the link it made in the data directory.
#[test]
fn udf_binary_is_found_next_to_the_cli_then_on_path() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("flamehouse-cli-lookup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
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
            .arg("--data")
            .arg(dir.join(data))
            .args(["sql", sql]);
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
