//! Issue 10 checked from outside, as a new user runs the CLI
//! (`docs/continuous-checklist.md` lists every bullet and its test): the
//! gaps that walk found, each against an oracle read here from the inputs
//! themselves or from the tools' own output committed with them
//! (`go tool pprof -raw` and `-top` of the Go fixtures).

use crate::cli_run::{fh, fh_out, sql};
use flamehouse_fixtures::testing::temp_path;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/continuous")
        .join(rel)
}

/// A fresh data directory whose retention keeps the dated fixtures.
fn fresh(tag: &str) -> PathBuf {
    let data = temp_path(tag);
    fh(&data, &["init", "--retention", "36500"]);
    data
}

/// The closing line of a load (`continuous: N files, ...`).
fn closing(out: &str) -> &str {
    out.lines()
        .rfind(|l| l.starts_with("continuous: "))
        .unwrap_or_else(|| panic!("no closing line in {out}"))
}

/// `--time` and `--duration` on a pprof file date it instead of its
/// `time_nanos`/`duration_nanos` and make it another profile (before: the
/// flags were ignored for pprof and the load said "1 already stored");
/// other `--span-labels` are another profile too when the file has such a
/// label (they store other series), the same profile when it has none
/// (it was stored again). The same flags again store nothing. Oracles:
/// `go tool pprof -raw`'s `Time:` header for the file's own time, `-top`'s
/// total, `-tags`' `span_id` for a file with spans.
#[test]
fn a_pprof_file_at_another_time_or_with_other_span_keys_is_another_profile() {
    let data = fresh("cpverify-time");
    let file = fixture("pprof/cpu.pb.gz").display().to_string();
    let raw = std::fs::read_to_string(fixture("pprof/cpu.raw.txt")).unwrap();
    // `Time: 2026-12-01 13:22:08.933717331 +0000 UTC`: stored to the ms.
    let own_time = &raw.lines().find_map(|l| l.strip_prefix("Time: ")).unwrap()[..23];
    let top = std::fs::read_to_string(fixture("pprof/cpu.top.cpu.txt")).unwrap();
    // `Showing nodes accounting for 590000000ns, 100% of 590000000ns total`.
    let go_total: i64 = top
        .lines()
        .find_map(|l| l.strip_suffix("ns total"))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    // An hour ago (inside any retention), whole seconds.
    let t = flamehouse::profiles::now_ms() / 1000 - 3600;
    let ts = t.to_string();
    let runs: [(&[&str], &str); 6] = [
        (&[], "(0 already stored"),
        (&["--time", &ts], "(0 already stored"),
        (&["--time", &ts], "(1 already stored"),
        (&["--time", &ts, "--duration", "60"], "(0 already stored"),
        // No sample of cpu.pb.gz has a span_id: the same rows.
        (&["--span-labels", ""], "(1 already stored"),
        (&["--span-labels", "trace_id"], "(1 already stored"),
    ];
    for (flags, want) in runs {
        let mut args = vec!["load", file.as_str()];
        args.extend_from_slice(flags);
        let out = fh(&data, &args);
        assert!(
            closing(&out).starts_with(&format!("continuous: 1 file, 1 profile {want}")),
            "{flags:?}: {out}"
        );
    }
    let rows = sql(
        &data,
        "SELECT toString(ts), toUnixTimestamp64Milli(ts), duration_ns, total \
         FROM flamehouse.cp_profiles WHERE profile_type = 'cpu:nanoseconds' \
         ORDER BY ts, duration_ns",
    );
    let rows: Vec<Vec<&str>> = rows.lines().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 3, "{rows:?}");
    // The file's own time, then --time.
    assert_eq!(rows[0][0], own_time, "{rows:?}");
    assert!(rows[0][2].starts_with("13"), "go's 1.30 s: {rows:?}");
    assert_eq!(rows[1][1], (t * 1000).to_string(), "{rows:?}");
    assert_eq!(rows[1][2], rows[0][2], "{rows:?}");
    assert_eq!(rows[2][1], (t * 1000).to_string(), "{rows:?}");
    assert_eq!(rows[2][2], "60000000000", "{rows:?}");
    for r in &rows {
        assert_eq!(r[3], go_total.to_string(), "{rows:?}");
    }
    // The copy at --time is found there, whole.
    let t_from = flamehouse::flame::format_utc_ms((t - 1) * 1000);
    let t_to = flamehouse::flame::format_utc_ms((t + 1) * 1000);
    let out = fh(
        &data,
        &[
            "profile",
            "top",
            "--type",
            "cpu:nanoseconds",
            "--from",
            &t_from,
            "--to",
            &t_to,
        ],
    );
    assert!(out.lines().count() > 1, "{out}");
    // A file with spans (`-tags` lists its span_id values): other span
    // keys store it otherwise, another profile.
    let tags = std::fs::read_to_string(fixture("pprof/spans.tags.txt")).unwrap();
    assert!(tags.contains("span_id"), "{tags}");
    let spans = fixture("pprof/spans.pb.gz").display().to_string();
    for (flags, want) in [
        (&[][..], "(0 already stored"),
        (&["--span-labels", ""], "(0 already stored"),
        (&["--span-labels", ""], "(1 already stored"),
        (&[], "(1 already stored"),
        // Keys the file does not have change nothing: the same rows as
        // `''`, and as the default.
        (&["--span-labels", "other"], "(1 already stored"),
        (&["--span-labels", "x,span_id"], "(1 already stored"),
    ] {
        let mut args = vec!["load", spans.as_str()];
        args.extend_from_slice(flags);
        let out = fh(&data, &args);
        assert!(
            closing(&out).starts_with(&format!("continuous: 1 file, 1 profile {want}")),
            "spans {flags:?}: {out}"
        );
    }
    let _ = std::fs::remove_dir_all(&data);
}

/// What is stored: (profiles, their totals, sample rows).
fn stored(data: &Path) -> String {
    sql(
        data,
        "SELECT (SELECT count() FROM flamehouse.cp_profiles), \
         (SELECT sum(total) FROM flamehouse.cp_profiles), \
         (SELECT count() FROM flamehouse.cp_samples)",
    )
}

/// Bad input of every format, loaded into a database holding earlier
/// profiles: one line on stderr naming the file and where (line or byte),
/// a non-zero exit, nothing of the file stored and nothing earlier lost;
/// a good file in the same command still loads. The lines at fault are
/// found here in the inputs the test writes.
#[test]
fn bad_input_of_every_format_is_one_line_and_stores_nothing() {
    let data = fresh("cpverify-bad");
    let dir = temp_path("cpverify-bad-files");
    fh(
        &data,
        &[
            "load",
            &fixture("pprof/heap.pb.gz").display().to_string(),
            &fixture("pyspy/work.raw.txt").display().to_string(),
        ],
    );
    let before = stored(&data);
    let perf = std::fs::read_to_string(fixture("perf/burn.fp.perf-script.txt")).unwrap();
    let bt = std::fs::read_to_string(fixture("bpftrace/burn.ustack-comm.txt")).unwrap();
    let json = std::fs::read_to_string(fixture("bpftrace/burn.ustack-comm.json")).unwrap();
    let raw_pb = std::fs::read(fixture("pprof/cpu.pb")).unwrap();
    let gz = std::fs::read(fixture("pprof/cpu.pb.gz")).unwrap();

    // The second sample header's period made negative (`comm tid secs:
    // PERIOD event:`), and a bpftrace entry's count (its `]: N` line).
    let with_line = |text: &str, n: usize, f: &dyn Fn(&str) -> String| -> String {
        text.lines()
            .enumerate()
            .map(|(i, l)| if i + 1 == n { f(l) } else { l.to_string() })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n"
    };
    let perf_neg_line = perf
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.is_empty() && !l.starts_with(char::is_whitespace))
        .nth(1)
        .unwrap()
        .0
        + 1;
    let negate_period = |l: &str| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let i = f.iter().position(|x| x.ends_with(':')).unwrap();
        l.replacen(&format!(" {} ", f[i + 1]), " -5 ", 1)
    };
    let perf_neg = with_line(&perf, perf_neg_line, &negate_period);
    let bt_neg_line = bt.lines().position(|l| l.contains("]: ")).unwrap() + 1;
    let bt_neg = with_line(&bt, bt_neg_line, &|l: &str| {
        format!("{}]: -3", l.rsplit_once("]: ").unwrap().0)
    });
    // A perf script cut five bytes into a line.
    let cut = perf[..perf.len() / 2].rfind('\n').unwrap() + 6;
    let cut_line = perf[..cut].matches('\n').count() + 1;
    let folded = "a;b;c 5\nx;y 99999999999999999999999\n";
    let deep: String = (0..100_000)
        .map(|i| format!("f{i}"))
        .collect::<Vec<_>>()
        .join(";")
        + " 1\n";

    // A pprof file written here: a sample `f{i};main` per value, each
    // type that value.
    let pprof_of = |types: &[(&str, &str)], samples: &[i64]| {
        use flamehouse::formats::pprof::write::PprofWriter;
        let mut w = PprofWriter::new(types, ("", ""), 0);
        w.set_time((flamehouse::profiles::now_ms() - 60_000) * 1_000_000, 0);
        for (i, v) in samples.iter().enumerate() {
            let f = format!("f{i}");
            let values: Vec<i64> = types.iter().map(|_| *v).collect();
            w.add_sample(&[&f, "main"], &values, &[]);
        }
        w.encode()
    };

    // (file name, bytes, --format, what the line must name)
    let cases: Vec<(&str, Vec<u8>, Option<&str>, String)> = vec![
        (
            "cut.pb",
            raw_pb[..raw_pb.len() * 2 / 3].to_vec(),
            None,
            ": not a pprof profile: byte ".into(),
        ),
        (
            // Where it ends: the file's end, inside the stream.
            "cut.pb.gz",
            gz[..gz.len() / 2].to_vec(),
            None,
            format!(
                ": not a valid gzip stream: incomplete deflate stream at byte {}, the file's end",
                gz.len() / 2
            ),
        ),
        (
            "empty.pb",
            Vec::new(),
            Some("pprof"),
            ": invalid pprof profile: the file is empty".into(),
        ),
        (
            "garbage.pb.gz",
            [&[0x1f, 0x8b][..], &[0x55; 500][..]].concat(),
            None,
            ": not a valid gzip stream".into(),
        ),
        (
            "neg.perf.txt",
            perf_neg.clone().into_bytes(),
            None,
            format!(":{perf_neg_line}: not perf script: the period `-"),
        ),
        (
            "cut.perf.txt",
            perf.as_bytes()[..cut].to_vec(),
            None,
            format!(":{cut_line}: not perf script"),
        ),
        (
            "neg.bt.txt",
            bt_neg.into_bytes(),
            None,
            format!(":{bt_neg_line}: not bpftrace output: the value -3"),
        ),
        (
            "cut.bt.json",
            json.as_bytes()[..json.len() - 20].to_vec(),
            None,
            ": not bpftrace output: bad JSON".into(),
        ),
        (
            "huge.folded",
            folded.as_bytes().to_vec(),
            None,
            ":2: not folded stacks".into(),
        ),
        (
            "neg.folded",
            b"a;b 1\n\nc;d -4\n".to_vec(),
            None,
            ":3: not folded stacks".into(),
        ),
        (
            // One stack's counts summing past Int64 (it saturated), and two
            // stacks' total past it (it wrapped to a negative total).
            "sum-stack.folded",
            b"main;a 9223372036854775807\nmain;a 1\n".to_vec(),
            None,
            ": the counts of one stack sum past 9223372036854775807".into(),
        ),
        (
            "sum-total.folded",
            b"main;a 9223372036854775807\nmain;b 1\n".to_vec(),
            None,
            ": the values of type folded:count sum past 9223372036854775807".into(),
        ),
        (
            // `go tool pprof`: "malformed profile: missing sample type
            // information" (it used to load as an empty profile, exit 0).
            "notypes.pb",
            pprof_of(&[], &[1, 2]),
            None,
            ": invalid pprof profile: no sample types (sample_type is empty)".into(),
        ),
        (
            // Valid pprof (`go tool pprof` reads it) whose sum cannot be
            // stored: named so, not "not pprof".
            "i64max.pb",
            pprof_of(&[("samples", "count")], &[i64::MAX, 1]),
            None,
            "i64max.pb: the values of type samples:count sum past 9223372036854775807".into(),
        ),
        (
            // Negative values summing below Int64: named so (it said "past
            // 9223372036854775807").
            "i64min.pb",
            pprof_of(&[("samples", "count")], &[i64::MIN, -1]),
            None,
            "i64min.pb: the values of type samples:count sum past -9223372036854775808 (the smallest"
                .into(),
        ),
        (
            // A bpftrace count past Int64: too large, not "no integer".
            "u64max.bt.txt",
            b"@[\n    leaf+1\n    main+2\n]: 18446744073709551616\n".to_vec(),
            None,
            ":4: not bpftrace output: the value `18446744073709551616` is past 9223372036854775807"
                .into(),
        ),
        (
            // One frame name past --max-name-kib (1 MiB): refused before
            // the engine (a 200 MiB name ran it out of memory).
            "longname.folded",
            format!("main;{} 3\n", "x".repeat(2 << 20)).into_bytes(),
            None,
            ": a function name of 2097152 bytes (`xxxx".into(),
        ),
        (
            // A count past Int64 is too large, not "no non-negative integer".
            "u64max.folded",
            b"a;b 18446744073709551615\n".to_vec(),
            None,
            ":1: not folded stacks: the count `18446744073709551615` is too large".into(),
        ),
        (
            // The first line's count is the bad one: still told as folded
            // stacks, by line (it was "no text format claims" it).
            "neg-first.folded",
            b"a;b -3\n".to_vec(),
            None,
            ":1: not folded stacks".into(),
        ),
        (
            "garbage.folded",
            vec![0xff, 0xfe, 0, 1, 2, b'\n'],
            Some("folded"),
            ": not folded stacks".into(),
        ),
    ];
    for (name, bytes, format, want) in &cases {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        let p = path.display().to_string();
        let mut args = vec!["load", p.as_str()];
        if let Some(f) = format {
            args.extend(["--format", f]);
        }
        let out = fh_out(&data, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: exit 0: {err}");
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(
            err.starts_with(&format!("flamehouse: {p}")) && err.contains(want.as_str()),
            "{name}: want {want:?} in {err}"
        );
        assert_eq!(stored(&data), before, "{name}");
    }
    // A first header whose only fault is its signed period is still found
    // to be perf script, and the line named.
    let signed = with_line(&perf, 1, &negate_period);
    let path = dir.join("signed.txt");
    std::fs::write(&path, &signed).unwrap();
    let p = path.display().to_string();
    let out = fh_out(&data, &["load", &p]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.starts_with(&format!(
                "flamehouse: {p}:1: not perf script: the period `-"
            )),
        "{err}"
    );
    // Text that no format claims (the first header broken otherwise): the
    // message says how to get the line; `--format perf` names it.
    let broken = with_line(&perf, 1, &|l: &str| l.replace(':', ";"));
    let path = dir.join("unclaimed.txt");
    std::fs::write(&path, &broken).unwrap();
    let p = path.display().to_string();
    let out = fh_out(&data, &["load", &p]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.starts_with(&format!("flamehouse: {p}: ")) && err.contains("--format perf"),
        "{err}"
    );
    let out = fh_out(&data, &["load", &p, "--format", "perf"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(&format!("flamehouse: {p}:1: not perf script")),
        "{err}"
    );
    assert_eq!(stored(&data), before);

    // A bad file next to a good one: the good one loads, exit 1.
    let good = fixture("pprof/cpu.pb.gz").display().to_string();
    let bad = dir.join("neg.folded").display().to_string();
    let out = fh_out(&data, &["load", &bad, &good]);
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        closing(&stdout).starts_with("continuous: 2 files, 1 profile (0 already stored")
            && closing(&stdout).ends_with("1 file failed"),
        "{stdout}"
    );
    assert_eq!(
        sql(
            &data,
            "SELECT count() FROM flamehouse.cp_profiles WHERE source LIKE '%/cpu.pb.gz'"
        ),
        "2",
        "samples:count and cpu:nanoseconds"
    );

    // Absurd depth is a stack like any other: stored whole, drawn whole.
    let path = dir.join("deep.folded");
    std::fs::write(&path, &deep).unwrap();
    fh(
        &data,
        &[
            "load",
            &path.display().to_string(),
            "--folded-type",
            "deep:count",
            "--time",
            &(flamehouse::profiles::now_ms() / 1000 - 60).to_string(),
        ],
    );
    let out_path = dir.join("deep.out.folded");
    fh(
        &data,
        &[
            "profile",
            "flame",
            "--type",
            "deep:count",
            "--from",
            "now-1h",
            "--out",
            &out_path.display().to_string(),
        ],
    );
    let drawn = std::fs::read_to_string(&out_path).unwrap();
    assert_eq!(
        drawn.trim_end(),
        deep.trim_end(),
        "the deep stack drawn whole"
    );
    let _ = std::fs::remove_dir_all(&data);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--service` and repeated `--label` reach every input format's series
/// (perf script, bpftrace text and JSON, folded stacks; pprof in
/// `continuous_cli`), next to the format's own labels (perf's `comm`), and
/// `profile labels` shows them with their series count. Oracle: the flags
/// given and perf's own `comm` column of the file.
#[test]
fn service_and_labels_reach_every_text_format() {
    let data = fresh("cpverify-labels");
    let t = (flamehouse::profiles::now_ms() / 1000 - 600).to_string();
    let perf = std::fs::read_to_string(fixture("perf/burn.fp.perf-script.txt")).unwrap();
    let comm = perf.split_whitespace().next().unwrap().to_string();
    for (file, ty, own) in [
        (
            "perf/burn.fp.perf-script.txt",
            "cpu-clock:nanoseconds",
            Some(("comm", comm.as_str())),
        ),
        ("bpftrace/burn.ustack-comm.txt", "@:count", None),
        ("bpftrace/burn.ustack-comm.json", "@:count", None),
        ("pyspy/work.raw.txt", "folded:count", None),
    ] {
        // As `load` stores it: the canonical path.
        let path = std::fs::canonicalize(fixture(file))
            .unwrap()
            .display()
            .to_string();
        fh(
            &data,
            &[
                "load",
                &path,
                "--service",
                "svc",
                "--label",
                "env=prod",
                "--label",
                "team=x",
                "--time",
                &t,
            ],
        );
        let labels = sql(
            &data,
            &format!(
                "SELECT arrayStringConcat(arraySort(arrayMap((k, v) -> k || '=' || v, \
                 mapKeys(labels), mapValues(labels))), ',') FROM flamehouse.cp_profiles \
                 WHERE source = '{path}' AND profile_type = '{ty}'"
            ),
        );
        let mut want = vec![
            "env=prod".to_string(),
            "service=svc".into(),
            "team=x".into(),
        ];
        if let Some((k, v)) = own {
            want.push(format!("{k}={v}"));
        }
        want.sort();
        // The text readers' labels (perf's comm) are per sample, not on the
        // profile row: the profile carries the service and the user's.
        let want_profile: Vec<&String> = want.iter().filter(|l| !l.starts_with("comm=")).collect();
        assert_eq!(
            labels,
            want_profile
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(","),
            "{file}"
        );
        let shown = fh(
            &data,
            &["profile", "labels", "--type", ty, "--from", "now-1h"],
        );
        for l in &want {
            let (k, v) = l.split_once('=').unwrap();
            assert!(
                shown.lines().any(|s| s.starts_with(&format!("{k}\t{v}\t"))),
                "{file}: {l} not in {shown}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&data);
}

/// Regenerating the bpftrace recordings where BPF is refused says so and
/// keeps the committed files (before: they were deleted first, and the
/// tests reading them then failed on a missing file). A stub `bpftrace`
/// that cannot attach stands for such a machine.
#[test]
fn regenerating_bpftrace_without_bpf_says_so_and_keeps_the_recordings() {
    let stub = temp_path("cpverify-nobpf");
    let bt = stub.join("bpftrace");
    std::fs::write(
        &bt,
        "#!/bin/sh\necho 'ERROR: Could not attach probe: Operation not permitted (stub)' >&2\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bt, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = fixture("bpftrace");
    let snapshot = || -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                (p.display().to_string(), std::fs::read(&p).unwrap())
            })
            .collect();
        v.sort();
        v
    };
    let before = snapshot();
    assert!(before.len() >= 5);
    let path = format!(
        "{}:{}",
        stub.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new(fixture("generate.sh"))
        .arg("bpftrace")
        .env("PATH", path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("bpftrace cannot attach here")
            && err.contains("Operation not permitted (stub)")
            && err.contains("recordings are kept"),
        "{err}"
    );
    assert!(snapshot() == before, "the recordings changed");
    let _ = std::fs::remove_dir_all(&stub);
}

/// A pprof whose samples carry numeric labels `requests` (no unit: pprof
/// infers the unit `requests`), `latency` (`num_unit` milliseconds) and
/// `bytes` (no unit: bytes): sample `i` (0..12) has value `i + 1`,
/// `requests = i`, `latency = 10 * i` ms and `bytes = 512 * i`.
fn pprof_with_numeric_labels() -> Vec<u8> {
    use flamehouse::formats::pprof::proto;
    use prost::Message;
    let strings: Vec<String> = [
        "",
        "samples",
        "count",
        "main",
        "requests",
        "latency",
        "milliseconds",
        "bytes",
    ]
    .iter()
    .map(|s| (*s).to_string())
    .collect();
    let sample = (0..12i64)
        .map(|i| proto::Sample {
            location_id: vec![1],
            value: vec![i + 1],
            label: vec![
                proto::Label {
                    key: 4,
                    num: i,
                    ..Default::default()
                },
                proto::Label {
                    key: 5,
                    num: 10 * i,
                    num_unit: 6,
                    ..Default::default()
                },
                proto::Label {
                    key: 7,
                    num: 512 * i,
                    ..Default::default()
                },
            ],
        })
        .collect();
    proto::Profile {
        sample_type: vec![proto::ValueType { r#type: 1, unit: 2 }],
        sample,
        location: vec![proto::Location {
            id: 1,
            line: vec![proto::Line {
                function_id: 1,
                ..Default::default()
            }],
            ..Default::default()
        }],
        function: vec![proto::Function {
            id: 1,
            name: 3,
            ..Default::default()
        }],
        string_table: strings.into_iter().map(String::into_bytes).collect(),
        time_nanos: (flamehouse::profiles::now_ms() - 600_000) * 1_000_000,
        ..Default::default()
    }
    .encode_to_vec()
}

/// Numeric selectors compare values as stored, so a number with a unit is
/// only right on a label stored in that base unit: `{bytes>=1kB}` on
/// bytes, a plain number on anything. Before, `{requests>=1kB}` silently
/// compared a count with 1024 and `{latency>=20ms}` milliseconds with
/// 20,000,000; now both are a one-line error naming the stored unit
/// (`go tool pprof -tagfocus` matches nothing there, or ignores the unit).
/// Oracle: the sample values the test wrote.
#[test]
fn numeric_selector_units_are_held_against_the_stored_units() {
    let data = fresh("cpverify-units");
    let dir = temp_path("cpverify-units-files");
    let file = dir.join("num.pb");
    std::fs::write(&file, pprof_with_numeric_labels()).unwrap();
    fh(&data, &["load", &file.display().to_string()]);
    // Sum of the values `i + 1` of the samples whose label satisfies `keep`.
    let want =
        |keep: &dyn Fn(i64) -> bool| -> i64 { (0..12).filter(|&i| keep(i)).map(|i| i + 1).sum() };
    let total = |sel: &str| -> Result<i64, String> {
        let out = fh_out(
            &data,
            &[
                "profile",
                "top",
                "--type",
                "samples:count",
                "--from",
                "now-1h",
                "--selector",
                sel,
            ],
        );
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        Ok(text
            .lines()
            .find(|l| l.ends_with("\tmain"))
            .map_or(0, |l| l.split('\t').nth(2).unwrap().parse().unwrap()))
    };
    assert_eq!(total("{requests>=4}"), Ok(want(&|i| i >= 4)));
    assert_eq!(total("{latency>=40}"), Ok(want(&|i| 10 * i >= 40)));
    assert_eq!(total("{bytes>=2kB}"), Ok(want(&|i| 512 * i >= 2048)));
    assert_eq!(
        total("{bytes=1kB:2kB}"),
        Ok(want(&|i| (1024..=2048).contains(&(512 * i))))
    );
    for (sel, says) in [
        (
            "{requests>=1kB}",
            "`requests` is stored in \"requests\", not in bytes",
        ),
        (
            "{requests=1ms:}",
            "`requests` is stored in \"requests\", not in nanoseconds",
        ),
        (
            "{latency>=20ms}",
            "`latency` is stored in milliseconds, not nanoseconds",
        ),
        (
            "{bytes>=1s}",
            "`bytes` is stored in \"bytes\", not in nanoseconds",
        ),
    ] {
        let e = total(sel).expect_err(sel);
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(
            e.starts_with("flamehouse: ") && e.contains(says),
            "{sel}: {e}"
        );
    }
    // The diff and the export hold them too.
    let out = fh_out(
        &data,
        &[
            "profile",
            "diff",
            "--type",
            "samples:count",
            "--from",
            "now-1h",
            "--selector",
            "{requests>=2}",
            "--selector-b",
            "{requests>=1kB}",
            "--out",
            &dir.join("d.folded").display().to_string(),
        ],
    );
    assert!(!out.status.success());
    let out = fh_out(
        &data,
        &[
            "profile",
            "export",
            "--from",
            "now-1h",
            "--selector",
            "{latency<1s}",
            "--out",
            &dir.join("e.pb.gz").display().to_string(),
        ],
    );
    assert!(!out.status.success());
    assert!(!dir.join("e.pb.gz").exists());
    let _ = std::fs::remove_dir_all(&data);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `profile flame --max-nodes N` draws at most N nodes (the root and every
/// distinct stack prefix of the folded output) and keeps the whole total
/// (what is cut is lumped, not lost); without it, every stack of `go tool
/// pprof -traces`. Oracle: `-top`'s total of the same file.
#[test]
fn max_nodes_caps_the_cli_flame_graph_and_keeps_the_total() {
    let data = fresh("cpverify-maxnodes");
    let file = fixture("pprof/cpu.pb.gz").display().to_string();
    fh(&data, &["load", &file]);
    let top = std::fs::read_to_string(fixture("pprof/cpu.top.cpu.txt")).unwrap();
    let go_total: i64 = top
        .lines()
        .find_map(|l| l.strip_suffix("ns total"))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    let out = data.join("f.folded");
    let draw = |max: Option<&str>| -> (usize, i64) {
        let o = out.display().to_string();
        let mut args = vec![
            "profile",
            "flame",
            "--type",
            "cpu:nanoseconds",
            "--from",
            "2026-01-01 00:00:00",
            "--out",
            &o,
        ];
        if let Some(m) = max {
            args.extend(["--max-nodes", m]);
        }
        fh(&data, &args);
        let text = std::fs::read_to_string(&out).unwrap();
        let mut prefixes = std::collections::BTreeSet::new();
        let mut total = 0;
        for l in text.lines() {
            let (stack, v) = l.rsplit_once(' ').unwrap();
            total += v.parse::<i64>().unwrap();
            let frames: Vec<&str> = stack.split(';').collect();
            for n in 1..=frames.len() {
                prefixes.insert(frames[..n].join(";"));
            }
        }
        (prefixes.len() + 1, total)
    };
    let (all, total) = draw(None);
    assert_eq!(total, go_total);
    assert!(all > 12, "{all} nodes");
    for max in [3usize, 5, 10, all - 1] {
        let (n, t) = draw(Some(&max.to_string()));
        assert!(n <= max, "--max-nodes {max}: {n} nodes");
        assert!(2 * n >= max, "--max-nodes {max}: only {n} nodes");
        assert_eq!(t, go_total, "--max-nodes {max}");
    }
    let _ = std::fs::remove_dir_all(&data);
}

/// One schema for memory and continuous profiles: a continuous profile of
/// the stacks a MemHawk load stored (written here as folded lines from the
/// `stacks` rows) adds no `stacks` row and its samples carry the memory
/// stacks' own ids.
#[test]
fn memory_and_continuous_profiles_share_stack_rows() {
    let data = fresh("cpverify-shared");
    let memhawk = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/memhawk/memhawk_alloc_22746_protobuf.binpb");
    fh(&data, &["load", &memhawk.display().to_string()]);
    let stacks = sql(
        &data,
        "SELECT stack_id, arrayStringConcat(labels, ';') FROM flamehouse.stacks ORDER BY stack_id",
    );
    let rows: Vec<(&str, &str)> = stacks
        .lines()
        .map(|l| l.split_once('\t').unwrap_or((l, "")))
        .collect();
    assert!(rows.len() >= 3, "{stacks}");
    let folded: String = rows.iter().map(|(_, s)| format!("{s} 3\n")).collect();
    let file = data.join("same.folded");
    std::fs::write(&file, folded).unwrap();
    let t = (flamehouse::profiles::now_ms() / 1000 - 60).to_string();
    fh(&data, &["load", &file.display().to_string(), "--time", &t]);
    assert_eq!(
        sql(&data, "SELECT count() FROM flamehouse.stacks"),
        rows.len().to_string()
    );
    let ids = sql(
        &data,
        "SELECT DISTINCT stack_id FROM flamehouse.cp_samples ORDER BY stack_id",
    );
    let want: Vec<&str> = rows.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids.lines().collect::<Vec<_>>(), want);
    let _ = std::fs::remove_dir_all(&data);
}

/// The sort key prunes (issue 10, section 2: "a sort key that prunes by
/// profile type, service, time and label selection"), read from the
/// engine's own `EXPLAIN indexes = 1` of the flame graph query: with merges
/// stopped, two loads of two services are two parts of `cp_samples`; a
/// selection of one service reads one of them, a range on another day none
/// (the day partition), and a label selector becomes a `series_id` key
/// condition. Oracle: the engine's index analysis, not our SQL text.
#[test]
fn the_sort_key_prunes_by_type_service_time_and_labels() {
    use crate::continuous::{fresh, load_as, qopts, CPU};
    use flamehouse::continuous_query::{flame_sql, Selection, Selector};
    use flamehouse_tests::q;

    let db = "fh_cp_prune";
    fresh(db);
    q(&format!("SYSTEM STOP MERGES {db}.cp_samples"));
    let (_, ms) = load_as(db, "cpu.pb.gz", "alpha", &[("version", "1.4.1")]);
    load_as(db, "cpu2.pb.gz", "beta", &[("version", "1.4.2")]);
    let parts: i64 = q(&format!(
        "SELECT count() FROM system.parts WHERE database = '{db}' AND table = 'cp_samples' AND active"
    ))
    .trim()
    .parse()
    .unwrap();
    assert_eq!(parts, 2, "one part per load while merges are stopped");

    // `Parts: selected/total` of the `cp_samples` read's PrimaryKey step.
    let explain = |from_ms: i64, selector: &str, ty: &str| -> String {
        let sel = Selection {
            profile_type: ty.into(),
            from_ms,
            to_ms: from_ms + 60_000,
            selector: Selector::parse(selector).unwrap(),
        };
        q(&format!(
            "EXPLAIN indexes = 1 {}",
            flame_sql(&qopts(db), &sel, 0)
        ))
    };
    // The first `Parts:` figure after each index name, for reads of cp_samples.
    let key_parts = |plan: &str, index: &str| -> Vec<(i64, i64)> {
        let lines: Vec<&str> = plan.lines().map(str::trim).collect();
        let mut out = Vec::new();
        let mut in_samples = false;
        for (i, l) in lines.iter().enumerate() {
            if l.starts_with("ReadFromMergeTree") {
                in_samples = l.contains(&format!("{db}.cp_samples)"));
            }
            if in_samples && *l == index {
                if let Some(p) = lines[i..].iter().find_map(|l| l.strip_prefix("Parts: ")) {
                    let (a, b) = p.split_once('/').unwrap();
                    out.push((a.parse().unwrap(), b.parse().unwrap()));
                }
            }
        }
        out
    };
    let start = ms - 30_000;

    let plan = explain(start, r#"{service="alpha"}"#, CPU);
    assert_eq!(
        key_parts(&plan, "PrimaryKey"),
        vec![(1, 2)],
        "one service reads one part of two:\n{plan}"
    );
    // Sorts after every stored type, so no part's key range holds it.
    let plan = explain(start, "{}", "zz_no_such:count");
    assert_eq!(
        key_parts(&plan, "PrimaryKey"),
        vec![(0, 2)],
        "an unknown type reads no part:\n{plan}"
    );
    let plan = explain(start + 3 * 86_400_000, r#"{service="alpha"}"#, CPU);
    assert!(
        key_parts(&plan, "Partition").iter().all(|&(a, _)| a == 0)
            && !key_parts(&plan, "Partition").is_empty(),
        "a range three days later reads no partition:\n{plan}"
    );
    let plan = explain(start, r#"{version="1.4.2"}"#, CPU);
    let keys = plan
        .lines()
        .skip_while(|l| !l.contains(&format!("{db}.cp_samples)")))
        .skip_while(|l| l.trim() != "PrimaryKey")
        .take_while(|l| !l.trim().starts_with("Parts:"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        keys.contains("series_id"),
        "a label selector is a key condition on series_id:\n{plan}"
    );
}

/// The engine's own databases (`system`, `information_schema`, any case)
/// are Memory databases: a load into `information_schema` said it stored a
/// profile the next run had lost, and `system` left table directories
/// behind. Refused in one line before anything runs (exit 2), nothing
/// written under the data directory's `data/`; the library's migrate
/// refuses them too, and any other Memory database.
#[test]
fn the_engines_own_databases_are_refused() {
    let data = temp_path("cpv-reserved");
    let folded = data.join("in.folded");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(&folded, "main;work 3\n").unwrap();
    let dirs = |db: &str| data.join("data").join(db).exists();
    for db in [
        "information_schema",
        "INFORMATION_SCHEMA",
        "system",
        "SyStEm",
    ] {
        let o = fh_out(
            &data,
            &["load", "--database", db, &folded.display().to_string()],
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{db}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains("one of the engine's own databases"), "{err}");
        assert!(!dirs("information_schema") && !dirs("system"), "{db}");
    }
    // The library: a reserved name, and a Memory database of any name.
    let engine = flamehouse_tests::engine();
    for (db, want) in [
        ("information_schema", "engine's own"),
        ("cpv_memory_db", "Memory database"),
    ] {
        if db == "cpv_memory_db" {
            engine
                .execute("CREATE DATABASE IF NOT EXISTS cpv_memory_db ENGINE = Memory")
                .unwrap();
        }
        let e = flamehouse::storage::schema::migrate(
            engine,
            &flamehouse::storage::schema::SchemaOptions {
                database: flamehouse::storage::ident::Ident::new(db).unwrap(),
                cluster: None,
            },
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains(want), "{e}");
    }
    engine.execute("DROP DATABASE cpv_memory_db").unwrap();
    assert_eq!(
        engine
            .query_tsv("SELECT count() FROM system.tables WHERE database = 'cpv_memory_db'")
            .unwrap()
            .trim(),
        "0"
    );
}

/// An engine error while a batch is stored (a full disk's
/// `NOT_ENOUGH_SPACE` named neither) says which files and database it
/// was storing, in one line, exit 1; nothing of the batch is listed. The
/// error is provoked by a constraint no sample meets.
#[test]
fn an_engine_error_while_storing_names_the_files() {
    let data = temp_path("cpv-store-error");
    std::fs::create_dir_all(&data).unwrap();
    let files: Vec<String> = (0..5)
        .map(|k| {
            let f = data.join(format!("f{k}.folded"));
            std::fs::write(&f, format!("main;work{k} {}\n", k + 1)).unwrap();
            f.display().to_string()
        })
        .collect();
    fh(&data, &["init"]);
    sql(
        &data,
        "ALTER TABLE flamehouse.cp_samples ADD CONSTRAINT no_values CHECK value < 0",
    );
    // A minute ago: inside any retention.
    let t = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - 60)
        .to_string();
    let mut args = vec!["load", "--time", &t];
    args.extend(files.iter().map(String::as_str));
    let o = fh_out(&data, &args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    let want = format!(
        "storing {}, {}, {} and 2 more files in database flamehouse: ",
        files[0], files[1], files[2]
    );
    assert!(err.contains(&want), "{err}");
    assert!(err.contains("VIOLATED_CONSTRAINT"), "{err}");
    assert_eq!(
        sql(&data, "SELECT count() FROM flamehouse.cp_profiles FINAL"),
        "0"
    );
}
