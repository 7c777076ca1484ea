//! `flamehouse load` of the text formats (`perf script`, bpftrace, folded
//! stacks) with the readers' flags, end to end through the real CLI on the
//! committed recordings of `fixtures/continuous`, each checked against an
//! independent reading of the same file done here (header lines counted,
//! counts summed) or the tool's own output (perf's `report -g folded`);
//! and the profile types of every format kept apart.

use crate::cli_run::{fh, fh_out, sql};
use flamehouse_fixtures::testing::temp_path;
use std::collections::BTreeMap;
use std::path::Path;

fn fixture(rel: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/continuous")
        .join(rel)
        .display()
        .to_string()
}

/// `profile flame --type TY --from now-2d [--selector SEL]` of `data`, as
/// folded text.
fn folded(data: &Path, ty: &str, selector: &str) -> String {
    let out = data.join("flame.folded");
    let out_s = out.display().to_string();
    let mut args = vec!["profile", "flame", "--type", ty, "--from", "now-2d"];
    if !selector.is_empty() {
        args.extend(["--selector", selector]);
    }
    args.extend(["--out", &out_s]);
    fh(data, &args);
    std::fs::read_to_string(out).unwrap()
}

/// An hour ago, in epoch seconds: inside the retention, so nothing is
/// dropped by the TTL.
fn recent_secs() -> i64 {
    flamehouse::profiles::now_ms() / 1000 - 3600
}

/// The samples of a `perf script` file, read here: `(time ns since boot,
/// period)` of every header line (`comm tid secs.frac: period event:`).
fn perf_headers(text: &str) -> Vec<(u64, i64)> {
    text.lines()
        .filter(|l| !l.starts_with(char::is_whitespace) && !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let t = f.iter().find(|x| x.ends_with(':')).unwrap();
            let (s, frac) = t.trim_end_matches(':').split_once('.').unwrap();
            let ns = s.parse::<u64>().unwrap() * 1_000_000_000
                + frac.parse::<u64>().unwrap() * 10u64.pow(9 - frac.len() as u32);
            let i = f.iter().position(|x| x == t).unwrap();
            (ns, f[i + 1].parse().unwrap())
        })
        .collect()
}

/// perf's own folded report: the sum of its counts.
fn report_folded_total(text: &str) -> i64 {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim_start().ends_with('%'))
        .filter_map(|l| l.split_once(' ')?.0.parse::<i64>().ok())
        .sum()
}

/// `--perf-window`: one profile per window of the recording, each with the
/// samples whose perf time falls in it (counted here from the header
/// lines), the first at `--time`; the windows' sample counts add up to
/// perf's own `report -g folded` total, their nanoseconds to the periods.
#[test]
fn perf_windows_time_and_comm_pid_tid_flags() {
    let file = fixture("perf/burn.fp.perf-script.txt");
    let text = std::fs::read_to_string(&file).unwrap();
    let headers = perf_headers(&text);
    let t0 = recent_secs();
    let data = temp_path("cptext-perf");
    let out = fh(
        &data,
        &[
            "load",
            &file,
            "--perf-window",
            "0.1",
            "--time",
            &t0.to_string(),
        ],
    );
    // The oracle: windows of 100 ms from the first sample.
    let first = headers.iter().map(|h| h.0).min().unwrap();
    let mut want: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for (t, p) in &headers {
        let w = ((t - first) / 100_000_000) as i64;
        let e = want.entry(t0 * 1000 + w * 100).or_default();
        e.0 += 1;
        e.1 += p;
    }
    assert!(want.len() >= 4, "{want:?}");
    // One line per window's profile, then the load's closing line.
    assert_eq!(out.lines().count(), want.len() + 1, "{out}");
    assert!(
        out.lines().last().is_some_and(
            |l| l.starts_with(&format!("continuous: 1 file, {} profiles", want.len()))
        ),
        "{out}"
    );
    let rows = |ty: &str| -> BTreeMap<i64, i64> {
        sql(
            &data,
            &format!(
                "SELECT toUnixTimestamp64Milli(ts), total FROM flamehouse.cp_profiles \
                 WHERE profile_type = '{ty}' ORDER BY ts"
            ),
        )
        .lines()
        .map(|l| {
            let (a, b) = l.split_once('\t').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect()
    };
    let counts = rows("cpu-clock_samples:count");
    let ns = rows("cpu-clock:nanoseconds");
    assert_eq!(
        counts,
        want.iter()
            .map(|(k, v)| (*k, v.0))
            .collect::<BTreeMap<_, _>>()
    );
    assert_eq!(
        ns,
        want.iter()
            .map(|(k, v)| (*k, v.1))
            .collect::<BTreeMap<_, _>>()
    );
    let report = std::fs::read_to_string(fixture("perf/burn.fp.report-folded.txt")).unwrap();
    assert_eq!(counts.values().sum::<i64>(), report_folded_total(&report));
    // Each window lasts its width.
    assert_eq!(
        sql(
            &data,
            "SELECT DISTINCT duration_ns FROM flamehouse.cp_profiles"
        ),
        "100000000"
    );

    // The recording's headers show one id, the thread id of perf's default
    // fields: pids asked for, it is refused naming the first header.
    let out = fh_out(
        &temp_path("cptext-perf-tid-only"),
        &["load", &file, "--perf-pid", "label"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(":1: not perf script: the header shows one id") && err.contains("-F +pid"),
        "{err}"
    );
    // comm a root frame, pid and tid labels, from the headers as
    // `perf script -F +pid` prints them (`comm pid/tid time: ...`).
    let pid = text.split_whitespace().nth(1).unwrap();
    let with_pid = temp_path("cptext-perf-pid-file").join("burn.pid.perf-script.txt");
    std::fs::write(
        &with_pid,
        text.replace(&format!(" {pid} "), &format!(" {pid}/{pid} ")),
    )
    .unwrap();
    let file = with_pid.display().to_string();
    let data = temp_path("cptext-perf-comm");
    fh(
        &data,
        &[
            "load",
            &file,
            "--perf-comm",
            "frame",
            "--perf-pid",
            "label",
            "--perf-tid",
            "label",
            "--time",
            &t0.to_string(),
        ],
    );
    let labels = fh(
        &data,
        &[
            "profile",
            "labels",
            "--type",
            "cpu-clock_samples:count",
            "--from",
            "now-2d",
        ],
    );
    assert!(
        labels.lines().any(|l| l == format!("pid\t{pid}\t1")),
        "{labels}"
    );
    assert!(labels.lines().any(|l| l.starts_with("tid\t")), "{labels}");
    assert!(!labels.contains("comm\t"), "{labels}");
    let folded = data.join("f.folded");
    fh(
        &data,
        &[
            "profile",
            "flame",
            "--type",
            "cpu-clock_samples:count",
            "--from",
            "now-2d",
            "--out",
            &folded.display().to_string(),
        ],
    );
    let f = std::fs::read_to_string(&folded).unwrap();
    assert!(f.lines().all(|l| l.starts_with("burn;")), "{f}");
    let total: i64 = f
        .lines()
        .map(|l| l.rsplit_once(' ').unwrap().1.parse::<i64>().unwrap())
        .sum();
    assert_eq!(total, headers.len() as i64);
}

/// `--annotate-kernel` / `--annotate-jit`: FlameGraph's `_[k]` and `_[j]`
/// suffixes on kernel and JIT frames, and only with the flags.
#[test]
fn perf_annotations() {
    let data = temp_path("cptext-annot");
    let script = data.join("annot.perf-script.txt");
    std::fs::write(
        &script,
        "java 7 100.000001:    1000 cpu-clock:pppH: \n\
         \tffffffff8100 do_syscall_64+0x10 ([kernel.kallsyms])\n\
         \t7f0000001000 Interpreter+0x20 (/tmp/perf-7.map)\n\
         \t400100 main+0x5 (/usr/bin/java)\n\n",
    )
    .unwrap();
    let t = recent_secs().to_string();
    let s = script.display().to_string();
    let flame = |data: &Path| folded(data, "cpu-clock:nanoseconds", "");
    fh(&data, &["load", &s, "--time", &t]);
    assert_eq!(flame(&data), "main;Interpreter;do_syscall_64 1000\n");
    let data = temp_path("cptext-annot2");
    fh(
        &data,
        &[
            "load",
            &s,
            "--time",
            &t,
            "--annotate-kernel",
            "--annotate-jit",
        ],
    );
    assert_eq!(
        flame(&data),
        "main;Interpreter_[j];do_syscall_64_[k] 1000\n"
    );
    // The load's "symbolized" share counts the profile's frames: three
    // named by the script and one `[unknown]` address no module names
    // (it was 0%: the share of the one address the symbolizer tried).
    let unknown = data.join("unknown.perf-script.txt");
    std::fs::write(
        &unknown,
        "app 7 100.000001:    1000 cpu-clock:pppH: \n\
         \t401000 leaf+0x10 (/usr/bin/app)\n\
         \t400200 mid+0x5 (/usr/bin/app)\n\
         \t400100 main+0x5 (/usr/bin/app)\n\n\
         app 7 100.000002:    1000 cpu-clock:pppH: \n\
         \t0 [unknown] ([unknown])\n\
         \t400100 main+0x5 (/usr/bin/app)\n\n",
    )
    .unwrap();
    let data = temp_path("cptext-unknown");
    let out = fh(
        &data,
        &["load", &unknown.display().to_string(), "--time", &t],
    );
    assert!(out.contains("| 4 frames | symbolized 75.0%"), "{out}");
    // Per window, each window's own frames (every window said 0.0% when
    // the file had more unnamed addresses than a window has frames: the
    // share read the file's symbolizer counts).
    let data = temp_path("cptext-unknown-windows");
    let out = fh(
        &data,
        &[
            "load",
            &unknown.display().to_string(),
            "--time",
            &t,
            "--perf-window",
            "0.000001",
        ],
    );
    assert!(
        out.contains("| 3 frames | symbolized 100.0%")
            && out.contains("| 2 frames | symbolized 50.0%"),
        "{out}"
    );
}

/// bpftrace: `--bpftrace-labels comm` makes the key's `comm` part a label
/// (selectable, no root frame); without it, it is the root frame. The map
/// `@` is stored as `@:count` with the sum of the map's counts.
#[test]
fn bpftrace_labels_flag() {
    let file = fixture("bpftrace/burn.ustack-comm.txt");
    let text = std::fs::read_to_string(&file).unwrap();
    // The oracle: every `..., burn]: N` entry end, summed.
    let total: i64 = text
        .lines()
        .filter_map(|l| l.strip_prefix(", burn]: "))
        .map(|n| n.parse::<i64>().unwrap())
        .sum();
    assert!(total > 0);
    let t = recent_secs().to_string();
    let flame = |data: &Path, selector: &str| folded(data, "@:count", selector);
    let sum = |f: &str| -> i64 {
        f.lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<i64>().unwrap())
            .sum()
    };
    let data = temp_path("cptext-bt");
    fh(&data, &["load", &file, "--time", &t]);
    let f = flame(&data, "");
    assert!(f.lines().all(|l| l.starts_with("burn;")), "{f}");
    assert_eq!(sum(&f), total);

    let data = temp_path("cptext-bt-label");
    fh(
        &data,
        &["load", &file, "--time", &t, "--bpftrace-labels", "comm"],
    );
    let f = flame(&data, r#"{comm="burn"}"#);
    assert!(f.lines().all(|l| !l.starts_with("burn;")), "{f}");
    assert!(
        f.lines().all(|l| l.starts_with("__libc_start_call_main;")),
        "{f}"
    );
    assert_eq!(sum(&f), total);
    assert_eq!(flame(&data, r#"{comm="other"}"#), "");
}

/// bpftrace's raw addresses (the target exited before bpftrace printed its
/// map) are symbolized through a copy of the process's `/proc/PID/maps`
/// taken while it ran (`load --bpftrace-maps`, `--binary` naming the main
/// program's file): the frames from `main` down equal binutils' addr2line
/// of the same addresses in the recorded binary (the leaf at its address,
/// callers at `addr - 1`), stack by stack with the file's counts. Without
/// the maps they stay addresses; a bad maps file is one line naming it.
#[test]
fn bpftrace_raw_addresses_are_symbolized_through_a_maps_copy() {
    let file = fixture("bpftrace/burn.exited-target.txt");
    let maps = fixture("bpftrace/burn.exited-target.maps");
    let bin = fixture("bpftrace/burn.bin");
    let text = std::fs::read_to_string(&file).unwrap();
    // The oracle's own reading of the maps: burn's executable mapping.
    let maps_text = std::fs::read_to_string(&maps).unwrap();
    let (start, end, offset) = maps_text
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 6 && f[1] == "r-xp" && f[5].ends_with("/burn")).then(|| {
                let (a, b) = f[0].split_once('-').unwrap();
                let h = |x: &str| u64::from_str_radix(x, 16).unwrap();
                (h(a), h(b), h(f[2]))
            })
        })
        .expect("burn's r-xp line");
    // Every entry: its addresses (leaf first) and count.
    let mut entries: Vec<(Vec<u64>, i64)> = Vec::new();
    let mut addrs = Vec::new();
    for line in text.lines() {
        if let Some(h) = line.trim().strip_prefix("0x") {
            addrs.push(u64::from_str_radix(h, 16).unwrap());
        } else if let Some(n) = line.strip_prefix(", burn]: ") {
            entries.push((std::mem::take(&mut addrs), n.parse().unwrap()));
        }
    }
    assert!(entries.len() >= 2, "{text}");
    // addr2line of burn's addresses (file address, callers at addr - 1).
    let mut look: Vec<u64> = Vec::new();
    for (a, _) in &entries {
        for (i, &x) in a.iter().enumerate() {
            if (start..end).contains(&x) {
                look.push(x - (start - offset) - u64::from(i > 0));
            }
        }
    }
    let out = std::process::Command::new("addr2line")
        .args(["-f", "-e", &bin])
        .args(look.iter().map(|x| format!("{x:#x}")))
        .output()
        .expect("addr2line runs (binutils: scripts/setup-tools.sh)");
    assert!(out.status.success());
    let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .step_by(2)
        .map(str::to_owned)
        .collect();
    assert_eq!(names.len(), look.len());
    let mut names = names.into_iter();
    let mut want: BTreeMap<String, i64> = BTreeMap::new();
    for (a, n) in &entries {
        let mut chain: Vec<String> = a
            .iter()
            .filter(|x| (start..end).contains(x))
            .map(|_| names.next().unwrap())
            .collect();
        chain.reverse();
        assert_eq!(chain[0], "main", "{chain:?}");
        *want.entry(chain.join(";")).or_insert(0) += n;
    }

    let t = recent_secs().to_string();
    let flame = |data: &Path| folded(data, "@:count", "");
    let data = temp_path("cptext-bt-maps");
    fh(
        &data,
        &[
            "load",
            &file,
            "--time",
            &t,
            "--bpftrace-maps",
            &maps,
            "--binary",
            &bin,
        ],
    );
    let mut got: BTreeMap<String, i64> = BTreeMap::new();
    for l in flame(&data).lines() {
        let (stack, n) = l.rsplit_once(' ').unwrap();
        let frames: Vec<&str> = stack.split(';').collect();
        assert_eq!(frames[0], "burn", "{l}");
        let from_main = frames
            .iter()
            .position(|f| *f == "main")
            .unwrap_or_else(|| panic!("no main in {l}"));
        *got.entry(frames[from_main..].join(";")).or_insert(0) += n.parse::<i64>().unwrap();
    }
    assert_eq!(got, want);

    // Without the maps: addresses.
    let data = temp_path("cptext-bt-nomaps");
    fh(&data, &["load", &file, "--time", &t]);
    let f = flame(&data);
    assert!(f.lines().all(|l| l.contains(";0x")), "{f}");

    // A file that is no maps file: one line naming it and the line, exit 2,
    // nothing loaded.
    let bad = data.join("bad.maps");
    std::fs::write(
        &bad,
        "7f00-7f10 r-xp 0 fe:00 1 /usr/lib/libx.so\nnot a maps line\n",
    )
    .unwrap();
    let o = fh_out(
        &data,
        &["load", &file, "--bpftrace-maps", &bad.display().to_string()],
    );
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&bad.display().to_string()) && err.contains("line 2"),
        "{err}"
    );
}

/// `-` loads standard input (`perf script | flamehouse load -`): the same
/// profile as the file (a second load of the file stores nothing), with the
/// same flame graph; the copy is removed, and one left by a killed load is
/// removed by the next; `-` twice, or with --watch, is refused in one line.
#[test]
fn standard_input_loads_as_the_file() {
    use std::io::Write;
    let file = fixture("perf/burn.dwarf.perf-script.txt");
    let t = recent_secs().to_string();
    let data = temp_path("cptext-stdin");
    // The loads' temporary directory, to see what they leave there.
    let tmp = data.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let run_stdin = |args: &[&str], input: &[u8]| {
        let mut c = std::process::Command::new(flamehouse_tests::cli_binary())
            .args(args)
            .arg("--data")
            .arg(&data)
            .env("TMPDIR", &tmp)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(input).unwrap();
        c.wait_with_output().unwrap()
    };
    let text = std::fs::read(&file).unwrap();
    let o = run_stdin(&["load", "--time", &t, "-"], &text);
    assert!(o.status.success(), "{o:?}");
    let out = String::from_utf8_lossy(&o.stdout);
    // Named as standard input, not as its copy, which is gone.
    assert!(out.starts_with("<stdin>: profile "), "{out}");
    assert_eq!(
        sql(&data, "SELECT DISTINCT source FROM flamehouse.cp_profiles"),
        "<stdin>"
    );
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "a copy was left behind"
    );
    // A bad profile on standard input: its error names `<stdin>` too.
    let o = run_stdin(&["load", "--format", "folded", "-"], b"a;b -3\n");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.trim() == "flamehouse: <stdin>:1: not folded stacks: the count `-3` is no non-negative integer",
        "{err}"
    );
    // A MemHawk stream on standard input: its framing followed as it is
    // copied (zeros are refused, `text_size_cap_is_an_option`), then
    // loaded whole into the memory tables.
    let stream = std::fs::read(fixture("../memhawk/memhawk_alloc_22746_protobuf.binpb")).unwrap();
    let o = run_stdin(&["load", "-"], &stream);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        sql(&data, "SELECT count() > 0 FROM flamehouse.samples"),
        "1"
    );
    // Named as standard input in its line and its process row, as a
    // continuous profile is (its temporary copy's path was stored).
    assert!(
        String::from_utf8_lossy(&o.stdout).starts_with("<stdin>: process "),
        "{o:?}"
    );
    assert_eq!(
        sql(&data, "SELECT DISTINCT source FROM flamehouse.processes"),
        "<stdin>"
    );
    let flame = || folded(&data, "cpu-clock:nanoseconds", "");
    let piped = flame();
    assert!(!piped.is_empty());
    let again = fh(&data, &["load", "--time", &t, &file]);
    assert!(again.contains("(1 already stored"), "{again}");
    assert_eq!(flame(), piped);

    for (args, want) in [
        (&["load", "-", "-"][..], "can be given once"),
        (&["load", "--watch", "-"][..], "cannot be followed"),
        (&["load", "-"][..], "standard input (`-`) was empty"),
    ] {
        let o = run_stdin(args, b"");
        assert_eq!(o.status.code(), Some(1), "{o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(want), "{err}");
    }

    // A load killed while it copies (kill -9: no destructor runs) leaves
    // its copy; the next `load -` removes it.
    let copies = || {
        std::fs::read_dir(&tmp)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("flamehouse-stdin-")
            })
            .count()
    };
    // `load -` with the temporary directory `tmp`.
    let spawn_load = || {
        std::process::Command::new(flamehouse_tests::cli_binary())
            .args(["load", "--time", &t, "--data"])
            .arg(&data)
            .arg("-")
            .env("TMPDIR", &tmp)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut c = spawn_load();
    let mut input = c.stdin.take().unwrap();
    input.write_all(&text[..1000]).unwrap();
    let t0 = std::time::Instant::now();
    while copies() == 0 && t0.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    c.kill().unwrap();
    c.wait().unwrap();
    drop(input);
    assert_eq!(copies(), 1, "the killed load's copy is there");
    let mut c = spawn_load();
    c.stdin.take().unwrap().write_all(&text).unwrap();
    let o = c.wait_with_output().unwrap();
    assert!(o.status.success(), "{o:?}");
    assert_eq!(copies(), 0, "the next load - removed it, and its own");
}

/// A text profile larger than `--max-text-mib` (default 1 GiB: it is held
/// in memory whole) is refused in one line naming the file and the option,
/// nothing stored, exit 1; a higher cap loads it; 0 is no cap (exit 2).
#[test]
fn text_size_cap_is_an_option() {
    let one = std::fs::read_to_string(fixture("perf/burn.dwarf.perf-script.txt")).unwrap();
    let data = temp_path("cptext-cap");
    let big = data.join("big.perf-script.txt");
    std::fs::create_dir_all(&data).unwrap();
    // Copies of the recording one after another, each 1000 s later (perf
    // script's samples are in time order: a time going back is refused).
    let later = |k: usize| -> String {
        one.lines()
            .map(|l| {
                if l.starts_with(char::is_whitespace) {
                    return l.to_string();
                }
                l.split(' ')
                    .map(|t| match t.strip_suffix(':').map(str::parse::<f64>) {
                        Some(Ok(secs)) if t.contains('.') => {
                            format!("{:.6}:", secs + 1000.0 * k as f64)
                        }
                        _ => t.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n"
    };
    let copies = (2 << 20) / one.len() + 1;
    std::fs::write(&big, (0..copies).map(later).collect::<String>()).unwrap();
    let big_s = big.display().to_string();
    let t = recent_secs().to_string();
    let o = fh_out(
        &data,
        &["load", &big_s, "--time", &t, "--max-text-mib", "1"],
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&big_s) && err.contains("larger than 1 MiB") && err.contains("--max-text-mib"),
        "{err}"
    );
    assert_eq!(
        sql(&data, "SELECT count() FROM flamehouse.cp_profiles").trim(),
        "0"
    );
    let out = fh(
        &data,
        &["load", &big_s, "--time", &t, "--max-text-mib", "3"],
    );
    assert!(out.contains("1 profile ("), "{out}");
    let o = fh_out(&data, &["load", &big_s, "--max-text-mib", "0"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let tmp = data.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let text = "main;work 1\n".repeat(1 << 12);
    let junk = vec![0x5a_u8; 1 << 16];
    let gzip_magic = [&[0x1f, 0x8b][..], &junk[2..]].concat();
    let zeros = vec![0u8; 1 << 16];
    // load's arguments, the first bytes offered, the bytes offered again
    // and again, what the one line says.
    type Case<'a> = (&'a [&'a str], &'a [u8], &'a [u8], [&'a str; 2]);
    let cases: [Case<'_>; 3] = [
        // Standard input too: its copy stops at the cap (it went on to a
        // full temporary disk), with the same one line, and is removed.
        // The writer offers 64 MiB; the load reads a little over 1 MiB of
        // it.
        (
            &["load", "--time", &t, "--max-text-mib", "1", "-"],
            text.as_bytes(),
            text.as_bytes(),
            ["standard input (`-`): larger than 1 MiB", "--max-text-mib"],
        ),
        // Binary input that is no MemHawk stream (gzip's magic here) is
        // one pprof profile: copied up to what --max-decompressed-mib lets
        // it decompress to, with room for its framing (it was copied
        // without end).
        (
            &["load", "--max-decompressed-mib", "1", "-"],
            &gzip_magic,
            &junk,
            [
                "standard input (`-`): larger than 2 MiB",
                "--max-decompressed-mib raises it",
            ],
        ),
        // Zeros (`cat /dev/zero`): a first byte 0 is a MemHawk stream,
        // copied whole as its records are read one at a time; its framing
        // is followed as it passes, and a record length of 0 stops it at
        // once (5 GB were copied in 15 s).
        (
            &["load", "-"],
            &zeros,
            &zeros,
            [
                "standard input (`-`): a MemHawk stream",
                "record at byte 0 has length 0",
            ],
        ),
    ];
    for (args, first, rest, says) in cases {
        let (o, sent) = offer_stdin(&data, &tmp, args, first, rest);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(says.iter().all(|s| err.contains(s)), "{err}");
        assert!(sent < 8 << 20, "the copy read {sent} bytes");
        assert_eq!(
            std::fs::read_dir(&tmp).unwrap().count(),
            0,
            "a copy was left"
        );
    }
    assert_eq!(
        sql(
            &data,
            "SELECT count() FROM flamehouse.cp_profiles WHERE source = '<stdin>'"
        )
        .trim(),
        "0"
    );
}

/// `flamehouse ARGS --data DATA` with `TMPDIR` at `tmp`, offered up to
/// 64 MiB on standard input (`first`, then `rest` again and again) until
/// it stops reading: its output and the bytes it took (what the pipe held
/// included).
fn offer_stdin(
    data: &std::path::Path,
    tmp: &std::path::Path,
    args: &[&str],
    first: &[u8],
    rest: &[u8],
) -> (std::process::Output, usize) {
    let mut c = std::process::Command::new(flamehouse_tests::cli_binary())
        .args(args)
        .arg("--data")
        .arg(data)
        .env("TMPDIR", tmp)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = c.stdin.take().unwrap();
    let (first, rest) = (first.to_vec(), rest.to_vec());
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let mut sent = 0usize;
        let mut chunk = &first;
        while sent < 64 << 20 && stdin.write_all(chunk).is_ok() {
            sent += chunk.len();
            chunk = &rest;
        }
        sent
    });
    let o = c.wait_with_output().unwrap();
    (o, writer.join().unwrap())
}

/// Folded stacks: `--folded-type`, `--time` and `--duration` stored as
/// given; the total is the file's (awk-style sum of the last fields).
#[test]
fn folded_type_time_and_duration() {
    let file = fixture("pyspy/work.raw.txt");
    let text = std::fs::read_to_string(&file).unwrap();
    let total: i64 = text
        .lines()
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<i64>().ok())
        .sum();
    let t0 = recent_secs();
    let data = temp_path("cptext-folded");
    fh(
        &data,
        &[
            "load",
            &file,
            "--folded-type",
            "wall:samples:count",
            "--time",
            &t0.to_string(),
            "--duration",
            "2.5",
        ],
    );
    assert_eq!(
        sql(
            &data,
            "SELECT profile_type, toUnixTimestamp64Milli(ts), duration_ns, total, format \
             FROM flamehouse.cp_profiles"
        ),
        format!("samples:count\t{}\t2500000000\t{total}\tfolded", t0 * 1000)
    );
    // The default type is folded's own.
    let data = temp_path("cptext-folded2");
    fh(&data, &["load", &file, "--time", &t0.to_string()]);
    assert_eq!(
        sql(
            &data,
            "SELECT profile_type, total FROM flamehouse.cp_profiles"
        ),
        format!("folded:count\t{total}")
    );
    // The file's empty-stack line (` 5`, py-spy's idle samples) is the
    // root's own value: the SVG draws it as `[empty stack]` (a frame named
    // as the root read as a second root; inferno drops an empty line).
    let svg = data.join("work.svg");
    fh(
        &data,
        &[
            "profile",
            "flame",
            "--type",
            "folded:count",
            "--from",
            &t0.to_string(),
            "--to",
            &(t0 + 1).to_string(),
            "--out",
            &svg.display().to_string(),
        ],
    );
    let drawn = std::fs::read_to_string(&svg).unwrap();
    let titles: Vec<&str> = drawn
        .split("<title>")
        .skip(1)
        .filter_map(|t| t.split_once("</title>").map(|(t, _)| t))
        .collect();
    let empty = text
        .lines()
        .filter_map(|l| l.strip_prefix(' ')?.parse::<i64>().ok())
        .sum::<i64>();
    assert!(empty > 0, "the fixture has an empty-stack line");
    assert_eq!(
        titles.iter().filter(|t| t.starts_with("total (")).count(),
        1,
        "{titles:?}"
    );
    assert!(
        titles.contains(&format!("total ({total} count, 100%)").as_str())
            && titles
                .iter()
                .any(|t| t.starts_with(&format!("[empty stack] ({empty} count, "))),
        "{titles:?}"
    );
    // A time the rollups cannot hold (their minutes are `DateTime`, to
    // 2106-02-07): refused as a bad --time before any file is read (it
    // was listed, then never found by a range, or dropped by a wrapped
    // TTL), nothing stored.
    for late in ["2107-01-01T00:00:00Z", "2150-06-01T00:00:00Z"] {
        let out = fh_out(&data, &["load", &file, "--time", late]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{late}: {err}");
        let first = err.lines().next().unwrap_or_default();
        assert!(
            first.contains("--time")
                && first.contains(late)
                && first.contains("after 2106-02-07 06:28:15 UTC"),
            "{late}: {err}"
        );
    }
    assert_eq!(
        sql(&data, "SELECT count() FROM flamehouse.cp_profiles"),
        "1"
    );
}

/// Invalid flag values: a clear error naming the flag and the value on
/// the first line, exit 2, nothing stored; the query commands' bad times,
/// selectors and regexes the same (they exited 1 once the engine had
/// opened the data directory).
#[test]
fn invalid_text_flags_exit_2() {
    let data = temp_path("cptext-bad");
    let file = fixture("pyspy/work.raw.txt");
    for (flag, value) in [
        ("--perf-window", "0"),
        ("--perf-window", "soon"),
        ("--perf-comm", "everywhere"),
        ("--folded-type", "cpu"),
        ("--folded-type", "cpu:sam'ples:count"),
        ("--bpftrace-labels", "1comm"),
        ("--time", "yesterday"),
        ("--duration", "-3"),
        ("--batch-rows", "0"),
        ("--service", " "),
        ("--time", "now-1h"),
        ("--time", "2026-12-01 00:00:010"),
    ] {
        let out = fh_out(&data, &["load", &file, &format!("{flag}={value}")]);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err.lines().next().unwrap_or_default();
        assert!(
            line.starts_with("error: ") && line.contains(flag) && line.contains(value),
            "{flag} {value}: {err}"
        );
    }
    // A negative number after a flag (not `=`) is its value, not a flag.
    for (flag, value) in [("--time", "-5"), ("--duration", "-1")] {
        let out = fh_out(&data, &["load", &file, flag, value]);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.trim().lines().count() == 1 && err.contains(flag) && err.contains(value),
            "{flag} {value}: {err}"
        );
    }
    // Keys given twice, or the service's: the same kind of error.
    for (flags, says) in [
        (
            &["--bpftrace-labels=comm,comm"][..],
            "--bpftrace-labels comm",
        ),
        (&["--bpftrace-labels=service"], "--service"),
        (
            &["--label=comm=x", "--bpftrace-labels=comm"],
            "--label comm",
        ),
        (&["--label=a=1", "--label=a=2"], "--label a"),
    ] {
        let mut args = vec!["load", file.as_str()];
        args.extend_from_slice(flags);
        let out = fh_out(&data, &args);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err.lines().next().unwrap_or_default();
        assert!(
            line.starts_with("error: ") && line.contains(says),
            "{flags:?}: {err}"
        );
    }
    // The query commands' times, selectors and regexes: one line (clap's
    // first: flag, value and why), exit 2. Each case ends with the flag
    // and its value.
    for args in [
        &["flame", "--out", "-", "--from", "bogus"][..],
        &["top", "--to", "now-1x"],
        &["diff", "--out", "-", "--from-b", "2026-13-01"],
        &["flame", "--out", "-", "--selector", "{a="],
        &["diff", "--out", "-", "--selector-b", "{a=~\"(\"}"],
        &["top", "--function-regex", "a("],
        &["flame", "--out", "-", "--ignore", "[z-a]"],
        &["list", "--from", "x"],
        &["labels", "--to", "now-"],
        &["export", "--out", "-", "--selector", "}"],
    ] {
        let [.., flag, value] = args else {
            unreachable!()
        };
        let mut a = vec!["profile", args[0], "--type", "folded:count"];
        a.extend_from_slice(&args[1..]);
        let out = fh_out(&data, &a);
        assert_eq!(out.status.code(), Some(2), "{a:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.lines().count() == 1
                && err.starts_with(&format!("error: invalid value '{value}' for '{flag} ")),
            "{a:?}: {err}"
        );
    }
    // A value holding a line end: still one line, the flag named after it.
    let out = fh_out(
        &data,
        &[
            "profile",
            "top",
            "--type",
            "folded:count",
            "--focus",
            "(\nx",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "error: invalid value '(\\nx' for '--focus <FOCUS>': error: unclosed group\n"
    );
    // Refused before the engine is opened: the data directory stays empty.
    assert!(std::fs::read_dir(&data).unwrap().next().is_none());
}

/// perf's, bpftrace's and folded counts are types of their own: a query
/// of Go's `samples:count` reads the Go profile's samples only, whatever
/// else is loaded next to it.
#[test]
fn text_types_do_not_mix_with_pprof_types() {
    let data = temp_path("cptext-types");
    let t = recent_secs().to_string();
    let go = fixture("pprof/cpu.pb.gz");
    // The Go fixture keeps the time it was recorded at (2026-12-01) and
    // `load` does not store a profile older than the retention: 100 years,
    // so this test does not expire with the calendar.
    fh(&data, &["init", "--retention", "36500"]);
    fh(&data, &["load", &go]);
    let go_only = sql(
        &data,
        "SELECT profile_type, total FROM flamehouse.cp_profiles ORDER BY profile_type",
    );
    for f in [
        "perf/burn.fp.perf-script.txt",
        "bpftrace/burn.ustack-comm.txt",
        "pyspy/work.raw.txt",
    ] {
        fh(&data, &["load", &fixture(f), "--time", &t]);
    }
    let types = sql(
        &data,
        "SELECT groupArray(profile_type) FROM (SELECT DISTINCT profile_type \
         FROM flamehouse.cp_profiles ORDER BY profile_type)",
    );
    assert_eq!(
        types,
        "['@:count','cpu-clock:nanoseconds','cpu-clock_samples:count',\
         'cpu:nanoseconds','folded:count','samples:count']"
    );
    assert_eq!(
        sql(
            &data,
            "SELECT profile_type, total FROM flamehouse.cp_profiles \
             WHERE profile_type IN ('samples:count', 'cpu:nanoseconds') ORDER BY profile_type",
        ),
        go_only
    );
}

/// What matched nothing. A type nothing is stored of: an error naming the
/// stored types, exit 1, in every `profile` command. A stored type whose
/// selector matched nothing: its empty answer, exit 0, and one note on
/// stderr saying what matched nothing (a sandwich: the function); drawn as
/// SVG, one line saying there is nothing to draw, exit 1, no file
/// (inferno draws nothing from no stacks).
#[test]
fn what_matched_nothing_is_said() {
    let data = temp_path("cptext-empty");
    let stacks = data.join("s.folded");
    std::fs::write(&stacks, "main;work 5\nmain 2\n").unwrap();
    fh(
        &data,
        &[
            "load",
            &stacks.display().to_string(),
            "--service",
            "api",
            "--time",
            &recent_secs().to_string(),
        ],
    );
    let run = |args: &[&str]| {
        let out = fh_out(&data, args);
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        (out.status.code(), err)
    };
    let svg = data.join("empty.svg");
    let svg_s = svg.display().to_string();
    let folded = data.join("empty.folded");
    let folded_s = folded.display().to_string();
    let ty = "folded:count";
    let typo = "{service=\"apii\"}";
    // An unknown type, every command.
    for cmd in [
        &["profile", "flame", "--type", "cpu:ns", "--out", &folded_s][..],
        &["profile", "flame", "--type", "cpu:ns", "--out", &svg_s],
        &["profile", "top", "--type", "cpu:ns"],
        &["profile", "diff", "--type", "cpu:ns", "--out", &folded_s],
        &[
            "profile",
            "sandwich",
            "--type",
            "cpu:ns",
            "--function",
            "work",
            "--callees",
            &folded_s,
        ],
        &["profile", "list", "--type", "cpu:ns"],
        &["profile", "labels", "--type", "cpu:ns"],
        &["profile", "export", "--type", "cpu:ns", "--out", &folded_s],
    ] {
        let _ = std::fs::remove_file(&folded);
        let (code, err) = run(cmd);
        assert_eq!(code, Some(1), "{cmd:?}: {err}");
        assert!(
            err.lines().count() == 1
                && err.contains("no profile of type \"cpu:ns\" is stored")
                && err.contains(ty),
            "{cmd:?}: {err}"
        );
        assert!(!folded.exists() && !svg.exists(), "{cmd:?}");
    }
    // A selector that matches nothing: the empty answer and a note.
    let flame_to = |out: &str| {
        run(&[
            "profile",
            "flame",
            "--type",
            ty,
            "--selector",
            typo,
            "--out",
            out,
        ])
    };
    let sandwich = |function: &str| {
        run(&[
            "profile",
            "sandwich",
            "--type",
            ty,
            "--function",
            function,
            "--callers",
            &folded_s,
        ])
    };
    let (code, err) = flame_to(&folded_s);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(std::fs::read_to_string(&folded).unwrap(), "");
    assert_eq!(
        err,
        format!("flamehouse: nothing matched: no samples of type {ty} from now-24h to now with selector {typo}")
    );
    for cmd in [
        &["profile", "top", "--type", ty, "--selector", typo][..],
        &[
            "profile",
            "diff",
            "--type",
            ty,
            "--selector",
            typo,
            "--out",
            &folded_s,
        ],
    ] {
        let (code, err) = run(cmd);
        assert_eq!(code, Some(0), "{cmd:?}: {err}");
        assert!(
            err.starts_with("flamehouse: nothing matched: no samples") && err.lines().count() == 1,
            "{cmd:?}: {err}"
        );
    }
    let (code, err) = sandwich("nosuch");
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.starts_with(
            "flamehouse: nothing matched: function \"nosuch\" is in no stack of type folded:count"
        ),
        "{err}"
    );
    // A part of a stored name: the names holding it (Go's `main.isEven`
    // asked as `isEven`).
    let (code, err) = sandwich("ORK");
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.lines().count() == 1 && err.ends_with("; stored functions named like it: \"work\""),
        "{err}"
    );
    // What matched is silent.
    let (code, err) = sandwich("work");
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(std::fs::read_to_string(&folded).unwrap(), "work;main 5\n");
    // Tables of a range with nothing in it (a date alone is its
    // midnight): the header, and a note (they printed the header alone).
    for (cmd, header, note) in [
        (
            "list",
            "profile\tservice\ttime\tduration_ns\ttotal\tsample_rows\tseries\tlabels\tsource\n",
            format!("flamehouse: nothing matched: no profiles of type {ty} from 2020-01-01 to 2020-01-02"),
        ),
        (
            "labels",
            "key\tvalue\tseries\n",
            format!("flamehouse: nothing matched: no samples of type {ty} from 2020-01-01 to 2020-01-02"),
        ),
    ] {
        let out = fh_out(
            &data,
            &["profile", cmd, "--type", ty, "--from", "2020-01-01", "--to", "2020-01-02"],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{cmd}: {err}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), header, "{cmd}");
        assert_eq!(err.trim(), note, "{cmd}");
    }
    // One output for both trees, however spelled: standard output too.
    let (code, err) = run(&[
        "profile",
        "sandwich",
        "--type",
        ty,
        "--function",
        "work",
        "--callers",
        "/dev/stdout",
        "--callees",
        "-",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(
        err,
        "error: --callers /dev/stdout and --callees - are one file: give each tree its own output"
    );
    // As SVG: nothing to draw, in one line, no file.
    let (code, err) = flame_to(&svg_s);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.lines().count() == 1 && err.contains("nothing to draw"),
        "{err}"
    );
    assert!(!svg.exists());
}

/// `--watch` and `--replace` follow MemHawk streams only: a continuous
/// profile given with them is loaded once, with a warning naming the file
/// and the flag (it was loaded without a word, as if followed), and the
/// closing line of every continuous load (it had none).
#[test]
fn watch_and_replace_say_they_apply_to_memhawk_streams_only() {
    let data = temp_path("cptext-watch");
    let stacks = data.join("w.folded");
    std::fs::write(&stacks, "main;work 5\n").unwrap();
    let s = stacks.display().to_string();
    let t = recent_secs().to_string();
    for (flag, extra) in [("watch", &["--idle-exit", "1"][..]), ("replace", &[])] {
        let mut args = vec!["load", "--time", &t, "--service", flag];
        args.push(if flag == "watch" {
            "--watch"
        } else {
            "--replace"
        });
        args.extend_from_slice(extra);
        args.push(&s);
        let out = fh_out(&data, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{err}");
        assert!(
            err.contains(&format!(
                "flamehouse: warning: {s}: --{flag} applies to MemHawk streams only; this folded profile is loaded once"
            )),
            "{err}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout.contains("continuous: 1 file, 1 profile (0 already stored")
                && stdout.contains("| 1 sample row | 1 series | 1 stack | 2 frames |"),
            "{stdout}"
        );
    }
    // Loaded once each (two services).
    assert_eq!(
        sql(
            &data,
            "SELECT service, total FROM flamehouse.cp_profiles ORDER BY service"
        ),
        "replace\t5\nwatch\t5"
    );
}

/// `--out -` is standard output in every command that writes a file:
/// `profile export` writes the pprof there (it wrote a file named `-`),
/// its report line going to standard error; a sandwich with one tree on
/// standard output reports the other's file on standard error (the line
/// read as a stack in the folded text).
#[test]
fn dash_is_standard_output_for_every_output() {
    let data = temp_path("cptext-dash");
    let stacks = data.join("s.folded");
    std::fs::write(&stacks, "main;work;leaf 5\nmain;other;work 2\n").unwrap();
    let t = recent_secs().to_string();
    fh(
        &data,
        &["load", &stacks.display().to_string(), "--time", &t],
    );
    let ty = "folded:count";
    let file = data.join("callees.folded");
    let file_s = file.display().to_string();
    let out = fh_out(
        &data,
        &[
            "profile",
            "sandwich",
            "--type",
            ty,
            "--function",
            "work",
            "--callers",
            "-",
            "--callees",
            &file_s,
        ],
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "work;main 5\nwork;other;main 2\n"
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!("wrote {file_s} (2 stacks)\n")
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "work 2\nwork;leaf 5\n"
    );
    // The same profile as written to a file, byte for byte.
    let pb = data.join("x.pb.gz");
    let to_file = fh_out(
        &data,
        &[
            "profile",
            "export",
            "--type",
            ty,
            "--out",
            &pb.display().to_string(),
        ],
    );
    assert_eq!(to_file.status.code(), Some(0));
    let out = fh_out(&data, &["profile", "export", "--type", ty, "--out", "-"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(out.stdout, std::fs::read(&pb).unwrap());
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "wrote - (types folded:count | 2 samples)\n"
    );
    assert!(!data.join("-").exists() && !std::path::Path::new("-").exists());
}

/// A quote in a label value or service is printed as itself in the
/// tables of `labels`, `series` and `list` (the engine's TSV printed
/// `o\'brien`); TSV's own escapes stay (`\\`), and `list`'s labels column
/// stays the engine's Map literal.
#[test]
fn quotes_in_label_values_are_printed_as_themselves() {
    let data = temp_path("cptext-quotes");
    let stacks = data.join("q.folded");
    std::fs::write(&stacks, "a;b 3\na;c 4\n").unwrap();
    let t = recent_secs().to_string();
    let s = stacks.display().to_string();
    fh(
        &data,
        &[
            "load",
            &s,
            "--time",
            &t,
            "--service",
            "s'1",
            "--label",
            "who=o'brien",
            "--label",
            "path=c:\\x",
        ],
    );
    let ty = "folded:count";
    let labels = fh(&data, &["profile", "labels", "--type", ty]);
    assert_eq!(
        labels,
        "key\tvalue\tseries\npath\tc:\\\\x\t1\nservice\ts'1\t1\nwho\to'brien\t1\n"
    );
    let series = fh(
        &data,
        &[
            "profile", "series", "--type", ty, "--by", "who", "--step", "0",
        ],
    );
    assert!(
        series.lines().nth(1).unwrap().ends_with("\to'brien\t7"),
        "{series}"
    );
    let list = fh(&data, &["profile", "list", "--type", ty]);
    let row: Vec<&str> = list.lines().nth(1).unwrap().split('\t').collect();
    assert_eq!(row[1], "s'1", "{list}");
    assert_eq!(
        row[7], "{'path':'c:\\\\x','service':'s\\'1','who':'o\\'brien'}",
        "{list}"
    );
    assert_eq!(row[8], s, "{list}");
}

/// Text as editors and other tools write it: a byte order mark before the
/// first line is no part of the first frame (it made a second root
/// `\u{feff}main`), and blanks after a folded count are taken, as inferno
/// and flamegraph.pl take them (they failed the file); perf script with a
/// byte order mark keeps its `comm`.
#[test]
fn a_byte_order_mark_and_trailing_blanks_are_taken() {
    let data = temp_path("cptext-bom");
    let f = data.join("bom.folded");
    std::fs::write(&f, "\u{feff}main;a 3   \nmain;b 2\t\r\nmain;a 1 \n").unwrap();
    let t = recent_secs().to_string();
    fh(&data, &["load", &f.display().to_string(), "--time", &t]);
    assert_eq!(folded(&data, "folded:count", ""), "main;a 4\nmain;b 2\n");
    let perf = data.join("bom.perf-script.txt");
    std::fs::write(
        &perf,
        "\u{feff}burn 7 100.000001:    1000 cpu-clock:pppH: \n\t400100 main+0x5 (/usr/bin/burn)\n\n",
    )
    .unwrap();
    fh(
        &data,
        &[
            "load",
            &perf.display().to_string(),
            "--time",
            &t,
            "--perf-comm",
            "frame",
        ],
    );
    assert_eq!(
        folded(&data, "cpu-clock:nanoseconds", ""),
        "burn;main 1000\n"
    );
}

/// bpftrace run as `bpftrace ... > out 2>&1` writes its own messages first
/// (on this machine `ERROR: ... couldn't set RLIMIT_MEMLOCK`, which it
/// survives): such a file is still found to be bpftrace, text or JSON, and
/// loads as the recording alone does (it was taken for folded stacks and
/// refused for "the count `problem`").
#[test]
fn bpftrace_output_with_its_own_messages_first_loads() {
    let error = "ERROR: Unknown error -1: couldn't set RLIMIT_MEMLOCK for bpftrace. If your program is \
                 not loading, you can try \"ulimit -l 8192\" to fix the problem\nWARNING: a warning\n";
    // A warning at a place of the program: bpftrace quotes the program's
    // line and marks the place under it (as bpftrace 0.17 printed it here).
    let located = "stdin:1:27-28: WARNING: comparison of integers of different signs: 'int64' and \
                   'unsigned int64' can lead to undefined behavior\n\
                   profile:hz:99 /(int64)pid > (uint64)1/ { @[ustack, comm] = count(); } interval:s:1 { exit(); }\n\
                   \x20                         ~\n";
    let t = recent_secs().to_string();
    for (k, (rec, note)) in [
        ("bpftrace/burn.ustack-comm.txt", error),
        ("bpftrace/burn.ustack-comm.json", error),
        ("bpftrace/burn.ustack-comm.txt", located),
        ("bpftrace/burn.ustack-comm.json", located),
    ]
    .iter()
    .enumerate()
    {
        let alone = temp_path(&format!("cptext-btnote-a{k}"));
        fh(&alone, &["load", &fixture(rec), "--time", &t]);
        let with = temp_path(&format!("cptext-btnote-b{k}"));
        let f = with.join("with-notes.txt");
        std::fs::create_dir_all(&with).unwrap();
        let body = std::fs::read_to_string(fixture(rec)).unwrap();
        std::fs::write(&f, format!("{note}{body}")).unwrap();
        fh(&with, &["load", &f.display().to_string(), "--time", &t]);
        let want = folded(&alone, "@:count", "");
        assert!(!want.is_empty(), "{rec}");
        assert_eq!(folded(&with, "@:count", ""), want, "{rec}");
    }
}

/// A gauge type (folded stacks stored as `inuse_objects:count`) is the
/// average per profile, each stack's rounded half away from zero: one
/// object in one of two profiles is 1 (the engine's `round()` made it 0,
/// half to even, and 2.5 became 2). The oracle is the sums by hand.
#[test]
fn gauge_averages_round_half_away_from_zero() {
    let data = temp_path("cptext-gauge-round");
    std::fs::create_dir_all(&data).unwrap();
    let t = recent_secs();
    let files = [
        ("h1.folded", "main;a 1\nmain;b 3\nmain;c 4\n"),
        ("h2.folded", "main;b 2\nmain;c 1\n"),
    ];
    for (k, (name, body)) in files.iter().enumerate() {
        let f = data.join(name);
        std::fs::write(&f, body).unwrap();
        let at = (t + k as i64 * 10).to_string();
        fh(
            &data,
            &[
                "load",
                &f.display().to_string(),
                "--time",
                &at,
                "--service",
                "heap",
                "--folded-type",
                "inuse_objects:count",
            ],
        );
    }
    // a: 1 / 2 = 0.5 -> 1; b: 5 / 2 = 2.5 -> 3; c: 5 / 2 = 2.5 -> 3.
    let out = folded(&data, "inuse_objects:count", "");
    let mut lines: Vec<&str> = out.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["main;a 1", "main;b 3", "main;c 3"], "{out}");
}

/// A reader's flag given for files none of which that reader reads (a
/// pprof with `--perf-window`) does nothing: a warning says so, once per
/// flag, and the load goes on; given with a file of its format, nothing
/// is said.
#[test]
fn a_readers_flag_without_its_format_is_said_to_do_nothing() {
    let data = temp_path("cptext-flag-format");
    let pprof = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/continuous/pprof/cpu.pb.gz")
        .display()
        .to_string();
    let out = fh_out(
        &data,
        &[
            "load",
            &pprof,
            "--perf-window",
            "5",
            "--bpftrace-labels",
            "comm",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    for flag in ["--perf-window", "--bpftrace-labels"] {
        assert_eq!(
            err.lines()
                .filter(|l| l.contains(&format!("warning: {flag} applies to")))
                .count(),
            1,
            "{err}"
        );
    }
    let perf = fixture("perf/burn.fp.perf-script.txt");
    let out = fh_out(
        &data,
        &[
            "load",
            &perf,
            "--time",
            &recent_secs().to_string(),
            "--perf-window",
            "5",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !err.contains("warning"), "{err}");
}

/// Two files of the same bytes (and service and labels) are one profile,
/// whatever their modification times: the summary counts the second as
/// already stored (it said "2 profiles (0 already stored)" and stored
/// one); `--time` keeps them apart.
#[test]
fn identical_files_are_one_profile_and_the_summary_says_so() {
    let data = temp_path("cptext-same");
    let (a, b) = (data.join("a.folded"), data.join("b.folded"));
    std::fs::write(&a, "main;idle 5\n").unwrap();
    std::fs::copy(&a, &b).unwrap();
    let out = fh(
        &data,
        &["load", &a.display().to_string(), &b.display().to_string()],
    );
    assert!(
        out.contains("continuous: 2 files, 2 profiles (1 already stored"),
        "{out}"
    );
    // Each file's own line says which: the first stored it, the second
    // found it (the lines were alike).
    let line = |out: &str, f: &std::path::Path| {
        out.lines()
            .find(|l| l.starts_with(&format!("{}:", f.display())))
            .unwrap_or_else(|| panic!("{out}"))
            .to_string()
    };
    assert!(!line(&out, &a).contains("already stored"), "{out}");
    assert!(
        line(&out, &b).contains("(already stored: nothing sent)"),
        "{out}"
    );
    assert_eq!(
        sql(&data, "SELECT count() FROM flamehouse.cp_profiles"),
        "1"
    );
    let out = fh(&data, &["load", &a.display().to_string()]);
    assert!(
        line(&out, &a).contains("(already stored: nothing sent)"),
        "{out}"
    );
    let t = recent_secs().to_string();
    let out = fh(&data, &["load", &b.display().to_string(), "--time", &t]);
    assert!(out.contains("(0 already stored"), "{out}");
    assert!(!line(&out, &b).contains("already stored"), "{out}");
    assert_eq!(
        sql(&data, "SELECT count() FROM flamehouse.cp_profiles"),
        "2"
    );
}

/// Deep distinct stacks (30,000 of 60 frames, a 21 MB folded file) load
/// whole: their `stacks` and `cp_stacks` rows are more than one insert's
/// block ([`flamehouse::ingest::cp_batch::MAX_INSERT_BYTES`]), so they go
/// in several, and every stack is stored as the file gives it (labels
/// root first, compared with the file's lines), with the file's sum.
/// `--max-stack-frames`, `--max-frames` and `--max-stack-depth` refuse it
/// below its counts,
/// in one line naming the file and the option, storing nothing.
#[test]
fn deep_distinct_stacks_load_whole_and_their_limits_are_options() {
    let data = temp_path("cptext-deep");
    std::fs::create_dir_all(&data).unwrap();
    let (n, depth, pool) = (30_000usize, 60usize, 3000usize);
    let mut stacks: Vec<String> = Vec::new();
    let mut text = String::new();
    let mut total = 0i64;
    for i in 0..n {
        let mut frames = vec!["root".to_string()];
        frames.extend((0..depth - 2).map(|j| format!("fn_{:05}", (i * 7 + j * 13) % pool)));
        frames.push(format!("leaf_{i:06}"));
        let stack = frames.join(";");
        let count = (i % 5 + 1) as i64;
        total += count;
        text.push_str(&format!("{stack} {count}\n"));
        stacks.push(stack);
    }
    // The stacks rows' bytes: id, frame ids, labels.
    let stack_bytes: usize = stacks.iter().map(|s| 8 + 2 + 9 * depth + s.len()).sum();
    assert!(stack_bytes > flamehouse::ingest::cp_batch::MAX_INSERT_BYTES);
    let file = data.join("deep.folded");
    std::fs::write(&file, &text).unwrap();
    let file_s = file.display().to_string();
    let t = recent_secs().to_string();

    for (flag, value, what) in [
        (
            "--max-stack-frames",
            "1000000",
            "more than 1000000 frames in its distinct stacks",
        ),
        ("--max-frames", "20000", "more than 20000 distinct frames"),
        (
            "--max-stack-depth",
            "59",
            "more than 59 frames in one stack",
        ),
    ] {
        let o = fh_out(&data, &["load", &file_s, "--time", &t, flag, value]);
        assert_eq!(o.status.code(), Some(1), "{o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&file_s) && err.contains(what) && err.contains(flag),
            "{err}"
        );
    }
    let stored = |table: &str| {
        sql(&data, &format!("SELECT count() FROM flamehouse.{table}"))
            .trim()
            .to_string()
    };
    assert_eq!(stored("cp_profiles"), "0");
    assert_eq!(stored("stacks"), "0");

    let out = fh(&data, &["load", &file_s, "--time", &t]);
    assert!(out.contains("1 profile ("), "{out}");
    assert_eq!(stored("cp_stacks"), n.to_string());
    assert_eq!(
        sql(
            &data,
            "SELECT count(), sum(length(frame_ids)), sum(length(labels)) FROM flamehouse.stacks"
        )
        .trim(),
        format!("{n}\t{}\t{}", n * depth, n * depth)
    );
    assert_eq!(
        sql(&data, "SELECT sum(value) FROM flamehouse.cp_samples").trim(),
        total.to_string()
    );
    let mut got: Vec<String> = sql(
        &data,
        "SELECT arrayStringConcat(labels, ';') FROM flamehouse.stacks",
    )
    .lines()
    .map(str::to_string)
    .collect();
    got.sort_unstable();
    stacks.sort_unstable();
    assert!(got == stacks, "the stored stacks are the file's");
}

/// `profile series` over a range read from the per-minute rollup (over 6
/// hours) rounds its step up to whole minutes, so every point sums whole
/// minutes: `--step 7` gave points at 7-second marks holding whole
/// minutes' profiles (one dated before any of them), `--step 90` likewise.
/// The points are compared with sums made here from the profiles' times;
/// a short range keeps the step as given.
#[test]
fn series_steps_over_the_minute_rollup_are_whole_minutes() {
    let data = temp_path("cptext-steps");
    let base_s = (flamehouse::profiles::now_ms() / 3_600_000 - 30) * 3_600;
    // Six profiles 37 s apart from hh:02:08: two or one per minute.
    let times: Vec<i64> = (0..6).map(|k| base_s + 128 + k * 37).collect();
    for (k, t) in times.iter().enumerate() {
        let f = data.join(format!("p{k}.folded"));
        std::fs::write(&f, format!("a;b {}\n", k + 1)).unwrap();
        fh(
            &data,
            &[
                "load",
                "--label",
                "rel=x",
                "--time",
                &t.to_string(),
                &f.display().to_string(),
            ],
        );
    }
    let points = |from: &str, to: &str, step: &str| -> BTreeMap<String, i64> {
        let out = fh(
            &data,
            &[
                "profile",
                "series",
                "--type",
                "folded:count",
                "--from",
                from,
                "--to",
                to,
                "--by",
                "rel",
                "--step",
                step,
            ],
        );
        out.lines()
            .skip(1)
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                (f[0].to_string(), f[2].parse().unwrap())
            })
            .collect()
    };
    let want = |step: i64| -> BTreeMap<String, i64> {
        let mut m = BTreeMap::new();
        for (k, t) in times.iter().enumerate() {
            let at = t.div_euclid(step) * step * 1000;
            let text = flamehouse::flame::format_utc_ms(at);
            *m.entry(text[..19].to_string()).or_default() += k as i64 + 1;
        }
        m
    };
    for (step, whole) in [(7, 60), (60, 60), (90, 120), (5, 60)] {
        assert_eq!(
            points("now-30d", "now", &step.to_string()),
            want(whole),
            "--step {step} over 30 days"
        );
    }
    // Read raw (a range under 6 hours): the step as given.
    let (from, to) = (base_s.to_string(), (base_s + 3_600).to_string());
    assert_eq!(points(&from, &to, "7"), want(7), "--step 7 over 1 hour");
}
