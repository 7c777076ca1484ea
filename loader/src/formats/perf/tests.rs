//! `perf script` reader vs perf's own readings of the same recordings
//! (fixtures/continuous/perf: `perf report -g folded` and
//! `perf script report stackcollapse`).

use super::*;
use crate::model::Event;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/continuous/perf")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

fn frame_name(f: &Frame) -> String {
    match f {
        Frame::Symbol(s) => s.function.clone(),
        Frame::Address(a) => format!("{a:#x}"),
    }
}

/// The reader's folded stacks (root first) with the sum of value `ty`,
/// and the labels seen.
fn folded(r: &mut text::TextReader, ty: usize) -> (BTreeMap<String, i64>, Vec<Vec<Label>>) {
    let n = r.value_types().len();
    let mut out = BTreeMap::new();
    let mut labels = Vec::new();
    let mut frames = Vec::new();
    for e in r.events() {
        let Event::Batch(b) = e else { continue };
        for (i, &k) in b.stacks.iter().enumerate() {
            r.stack(k, &mut frames);
            let mut l = Vec::new();
            r.labels(k, &mut l);
            labels.push(l);
            let s: Vec<String> = frames.iter().rev().map(frame_name).collect();
            *out.entry(s.join(";")).or_insert(0) += b.values[i * n + ty];
        }
    }
    out.retain(|_, v| *v != 0);
    (out, labels)
}

/// perf report's folded lines `COUNT a;b;c` (root first), summed by stack.
/// The one normalization: perf marks inlined frames `name (inlined)`, the
/// reader keeps the function name alone (it is a Symbol without module).
fn report_folded(text: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some((n, stack)) = line.split_once(' ') else {
            continue;
        };
        let Ok(n) = n.parse::<i64>() else { continue };
        *out.entry(stack.replace(" (inlined)", "")).or_insert(0) += n;
    }
    out
}

/// stackcollapse.py's `comm;a;b N`, summed by stack.
fn stackcollapse(text: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let (stack, n) = line.rsplit_once(' ').unwrap();
        *out.entry(stack.to_owned()).or_insert(0) += n.parse::<i64>().unwrap();
    }
    out
}

/// A header value of perf report (`# Samples: 99  of event ...`).
fn header_number(text: &str, prefix: &str) -> i64 {
    let line = text.lines().find(|l| l.starts_with(prefix)).unwrap();
    line[prefix.len()..]
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn fp_and_dwarf_stacks_equal_perf_reports_folded_and_stackcollapse() {
    for k in ["fp", "dwarf"] {
        let script = read(&format!("burn.{k}.perf-script.txt"));
        let path = fixture(&format!("burn.{k}.perf-script.txt"));
        let mut r = parse(&script, &path, 0, &PerfOptions::default()).unwrap();
        assert_eq!(
            r.value_types()
                .iter()
                .map(crate::model::ValueType::profile_type)
                .collect::<Vec<_>>(),
            ["cpu-clock_samples:count", "cpu-clock:nanoseconds"]
        );
        let (stacks, labels) = folded(&mut r, 0);
        let report = read(&format!("burn.{k}.report-folded.txt"));
        assert_eq!(
            stacks,
            report_folded(&report),
            "{k}: vs perf report -g folded"
        );
        // comm is a label by default, on every sample.
        assert!(labels.iter().all(|l| l
            == &[Label {
                key: "comm".into(),
                value: "burn".into()
            }]));

        // Totals: perf's own sample count and event count (sum of periods).
        let (ns, _) = folded(
            &mut parse(&script, &path, 0, &PerfOptions::default()).unwrap(),
            1,
        );
        assert_eq!(
            stacks.values().sum::<i64>(),
            header_number(&report, "# Samples: ")
        );
        assert_eq!(
            ns.values().sum::<i64>(),
            header_number(&report, "# Event count (approx.): ")
        );

        // With comm as the root frame: stackcollapse.py's output exactly.
        let options = PerfOptions {
            comm: Placement::Frame,
            ..Default::default()
        };
        let (stacks, labels) = folded(&mut parse(&script, &path, 0, &options).unwrap(), 0);
        assert_eq!(
            stacks,
            stackcollapse(&read(&format!("burn.{k}.stackcollapse.txt"))),
            "{k}: vs perf script report stackcollapse"
        );
        assert!(labels.iter().all(Vec::is_empty));
    }
}

/// Scripts of one recording with field lists other than the default
/// (`generate.sh perffields`): without event and dso (`-F
/// comm,tid,time,ip,sym`), without time (`-F comm,tid,ip,sym,dso`), with
/// source lines after the frames (`-F +srcline`), and with side-band
/// records between the samples (`--show-mmap-events --show-task-events`).
/// Each is detected as perf script and its stacks equal perf's own folded
/// report of the recording.
#[test]
fn other_field_lists_equal_perf_report_folded() {
    let report = report_folded(&read("burn.fields.report-folded.txt"));
    assert!(report.values().sum::<i64>() > 50);
    for (k, types) in [
        ("no-event", &["perf_samples:count"][..]),
        ("no-time", &["perf_samples:count"]),
        (
            "srcline",
            &["cpu-clock_samples:count", "cpu-clock:nanoseconds"],
        ),
        (
            "side-band",
            &["cpu-clock_samples:count", "cpu-clock:nanoseconds"],
        ),
        // `-F tid,time,event,ip,sym,dso`: no command name, no period.
        ("no-comm", &["cpu-clock_samples:count"]),
        // `-F +srccode`: a sample's source code after it (`|14 ...`).
        (
            "srccode",
            &["cpu-clock_samples:count", "cpu-clock:nanoseconds"],
        ),
    ] {
        let name = format!("burn.fields.{k}.perf-script.txt");
        let script = read(&name);
        for n in [super::super::SNIFF_LEN, 4096] {
            let head = &script.as_bytes()[..script.len().min(n)];
            assert_eq!(Perf.sniff(head), Sniff::Yes, "{k}");
        }
        let mut r = parse(&script, &fixture(&name), 7, &PerfOptions::default()).unwrap();
        assert_eq!(
            r.value_types()
                .iter()
                .map(crate::model::ValueType::profile_type)
                .collect::<Vec<_>>(),
            types,
            "{k}"
        );
        let (stacks, labels) = folded(&mut r, 0);
        assert_eq!(stacks, report, "{k}: vs perf report -g folded");
        let comm = [Label {
            key: "comm".into(),
            value: "burn".into(),
        }];
        let want: &[Label] = if k == "no-comm" { &[] } else { &comm };
        assert!(labels.iter().all(|l| l == want), "{k}");
    }
    // Without times every sample is at the file's time: one batch.
    let mut r = parse(
        &read("burn.fields.no-time.perf-script.txt"),
        Path::new("t"),
        7_000_000_000,
        &PerfOptions::default(),
    )
    .unwrap();
    let batches: Vec<u64> = r
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Batch(b) => Some(b.time_ns),
            _ => None,
        })
        .collect();
    assert_eq!(batches, [7_000_000_000]);
}

/// Source lines (`-F +srcline`: two spaces, one word that is no address,
/// `dso[offset]` where perf knows no file) are skipped wherever they are;
/// a one-word address line is still a frame, and a tab-indented word that
/// is no address still an error.
/// A recording without a call graph (`perf record` without `-g`): perf
/// right-aligns the command name, puts the sampled ip on the header line
/// and separates no samples by a blank line. Detected as perf script; one
/// frame per sample, counted per symbol as `perf report --sort sym` counts.
///
/// The same samples with source lines after each (`-F +srcline`: still no
/// blank line, so the file ends with a source line, complete) and without
/// the time (`-F comm,tid,period,event,ip,sym,dso`: right-aligned headers
/// with no time, each with its ip) read the same. A file of `perf script
/// -F tid` (a tid a line, no stack) is no profile of any format (it was
/// read as folded stacks, the tids summed as counts).
#[test]
fn a_recording_without_call_graph_equals_perf_report_per_symbol() {
    let mut want = BTreeMap::new();
    for line in read("burn.nocallgraph.report-samples.txt").lines() {
        let mut w = line.split_whitespace();
        let (Some(n), Some(_), Some(sym)) = (w.next(), w.next(), w.next()) else {
            continue;
        };
        if let Ok(n) = n.parse::<i64>() {
            *want.entry(sym.to_string()).or_insert(0) += n;
        }
    }
    assert!(want.values().sum::<i64>() > 50);
    for name in [
        "burn.nocallgraph.perf-script.txt",
        "burn.nocallgraph.srcline.perf-script.txt",
        "burn.nocallgraph.no-time.perf-script.txt",
        "burn.nocallgraph.srccode.perf-script.txt",
    ] {
        let script = read(name);
        assert!(script.starts_with(' '));
        // As `load` sniffs: its first bytes.
        let head = &script.as_bytes()[..super::super::SNIFF_LEN];
        assert_eq!(Perf.sniff(head), Sniff::Yes, "{name}");
        assert_eq!(super::super::detect(head), Some(Format::Perf), "{name}");
        let mut r = parse(&script, &fixture(name), 0, &PerfOptions::default()).unwrap();
        let (stacks, _) = folded(&mut r, 0);
        assert_eq!(stacks, want, "{name}");
    }
    let tids = " 8638 \n".repeat(40);
    assert_eq!(super::super::detect(tids.as_bytes()), None);
}

/// A recording of two events, `cpu-clock` with call graphs and a
/// tracepoint that perf prints without one under a `-F` list (a
/// right-aligned one-liner, no blank line after it; here the exit, the
/// file's last sample), with pids and without times: each reads as perf's
/// folded report of the cpu-clock samples, with the tracepoint's sample
/// counted on an empty stack.
#[test]
fn one_line_samples_between_call_graphs_equal_perf_report() {
    let report = read("burn.mixed.report-folded.txt");
    let (clock, tracepoint) = report
        .split_once("# Samples: 1  of event 'syscalls:sys_enter_exit_group'")
        .unwrap();
    let want = report_folded(clock);
    assert!(want.values().sum::<i64>() > 50);
    assert_eq!(
        header_number(tracepoint, "# Event count (approx.):"),
        1,
        "one exit"
    );
    for name in [
        "burn.mixed.pid.perf-script.txt",
        "burn.mixed.no-time.perf-script.txt",
    ] {
        let script = read(name);
        assert!(
            script.trim_end().ends_with("error_code: 0x00000000"),
            "{name}"
        );
        let head = &script.as_bytes()[..super::super::SNIFF_LEN];
        assert_eq!(super::super::detect(head), Some(Format::Perf), "{name}");
        let mut r = parse(&script, &fixture(name), 0, &PerfOptions::default()).unwrap();
        let types = [
            "cpu-clock_samples:count",
            "cpu-clock:nanoseconds",
            "syscalls.sys_enter_exit_group_samples:count",
        ];
        assert_eq!(type_names(&r), types, "{name}");
        let (stacks, _) = folded(&mut r, 0);
        assert_eq!(stacks, want, "{name}");
        let mut r = parse(&script, &fixture(name), 0, &PerfOptions::default()).unwrap();
        let (exits, _) = folded(&mut r, 2);
        assert_eq!(exits, BTreeMap::from([(String::new(), 1)]), "{name}");
    }
}

#[test]
fn source_lines_are_skipped_and_address_lines_kept() {
    let script =
        "p 1 1.0: 5 cpu-clock:\n\t1 f (m)\n  f.c:3\n\t2 g (m)\n  [vdso][b46]\n\t  abc\n  ??:0\n\n";
    let mut r = parse(script, Path::new("s"), 0, &PerfOptions::default()).unwrap();
    let (stacks, _) = folded(&mut r, 0);
    assert_eq!(stacks, BTreeMap::from([("0xabc;g;f".to_string(), 1)]));
    // An inlined frame's source line (`perf script -F +srcline`).
    let script = "app 3 1.0: 5 cpu-clock:ppp: \n\t13ed mix+0x2d\n  app.c:11 (inlined)\n\t13ed inl_caller+0x2d (/a/app)\n  app.c:12\n\n";
    let mut r = parse(script, Path::new("s"), 0, &PerfOptions::default()).unwrap();
    let (stacks, _) = folded(&mut r, 0);
    assert_eq!(stacks, BTreeMap::from([("inl_caller;mix".to_string(), 1)]));
    let e = parse(
        "p 1 1.0: 5 cpu-clock:\n\tzz\n\n",
        Path::new("s"),
        0,
        &PerfOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("bad frame address `zz`"), "{e}");
}

#[test]
fn frames_keep_their_module_and_unknown_code_its_address() {
    let script = "\
my prog  12/13 [001] 100.000000000:     1000 cycles:u: 
\t    1000 leaf+0x10 (/bin/prog)
\t    2000 [unknown] (/usr/lib/libx.so)
\t    3000 copy_user+0x5 ([kernel.kallsyms])
\t    4000 [unknown] ([unknown])
\t    5000 jitted (/tmp/perf-12.map)
\t    6000 inl+0x4 (inlined)

my prog  12/14 [001] 100.500000000:     3000 page-faults: 
\t    1000 leaf+0x10 (/bin/prog)

my prog  12/13 [001] 101.000000000:     2000 cycles:u: 
\t    1000 leaf+0x10 (/bin/prog)
\t    2000 [unknown] (/usr/lib/libx.so)
\t    3000 copy_user+0x5 ([kernel.kallsyms])
\t    4000 [unknown] ([unknown])
\t    5000 jitted (/tmp/perf-12.map)
\t    6000 inl+0x4 (inlined)

";
    let options = PerfOptions {
        comm: Placement::Frame,
        pid: Placement::Label,
        tid: Placement::Frame,
        annotate_kernel: true,
        annotate_jit: true,
        time_ns: Some(1_000_000_000_000),
        window_ns: None,
    };
    let mut r = parse(script, Path::new("x.txt"), 0, &options).unwrap();
    assert_eq!(
        r.value_types()
            .iter()
            .map(crate::model::ValueType::profile_type)
            .collect::<Vec<_>>(),
        [
            "cycles.u_samples:count",
            "cycles.u:count",
            "page-faults_samples:count",
            "page-faults:count"
        ]
    );
    let events = r.events();
    let Event::Source(src) = &events[0] else {
        panic!()
    };
    assert_eq!((src.name.as_str(), src.pid, src.period), ("my prog", 12, 0));
    let Event::Batch(b) = &events[1] else {
        panic!()
    };
    assert_eq!(events.len(), 2);
    assert_eq!(
        (b.time_ns, b.duration_ns),
        (1_000_000_000_000, 1_000_000_000)
    );
    // Two distinct (stack, labels): the cycles samples summed into one.
    assert_eq!(b.stacks.len(), 2);
    assert_eq!(&b.values[..4], &[2, 3000, 0, 0]);
    assert_eq!(&b.values[4..], &[0, 0, 1, 3000]);
    let mut frames = Vec::new();
    r.stack(b.stacks[0], &mut frames);
    let sym = |f: &str, m: Option<&str>| {
        Frame::Symbol(Symbol {
            function: f.into(),
            module: m.map(Into::into),
            ..Default::default()
        })
    };
    assert_eq!(
        frames,
        [
            sym("leaf", Some("/bin/prog")),
            sym("libx.so+0x2000", Some("/usr/lib/libx.so")),
            sym("copy_user_[k]", Some("[kernel.kallsyms]")),
            Frame::Address(0x4000),
            sym("jitted_[j]", Some("/tmp/perf-12.map")),
            sym("inl", None),
            sym("13", None),
            sym("my prog", None),
        ]
    );
    let mut labels = Vec::new();
    r.labels(b.stacks[1], &mut labels);
    assert_eq!(
        labels,
        [Label {
            key: "pid".into(),
            value: "12".into()
        }]
    );
}

#[test]
fn windows_split_the_file_into_batches_in_perf_time() {
    let script = read("burn.fp.perf-script.txt");
    let options = PerfOptions {
        window_ns: Some(100_000_000),
        time_ns: Some(5_000_000_000),
        ..Default::default()
    };
    let mut r = parse(&script, Path::new("fp"), 0, &options).unwrap();
    let batches: Vec<_> = r
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Batch(b) => Some(b),
            Event::Source(_) => None,
        })
        .collect();
    assert!(batches.len() >= 4, "{} batches", batches.len());
    for w in batches.windows(2) {
        assert_eq!(w[1].time_ns - w[0].time_ns, 100_000_000);
    }
    assert_eq!(batches[0].time_ns, 5_000_000_000);
    // A reference count of headers: every sample lands in one window.
    let headers = script.lines().filter(|l| l.contains("cpu-clock")).count() as i64;
    let total: i64 = batches
        .iter()
        .flat_map(|b| b.values.iter().step_by(2))
        .sum();
    assert_eq!(total, headers);
}

#[test]
fn bad_lines_name_the_file_and_line() {
    let cases = [
        ("\tdeadbeef f (m)\n", 1, "outside a sample"),
        (
            "p 1 1.0: 5 cpu-clock:\n\tzz f (m)\n",
            2,
            "bad frame address",
        ),
        (
            "p 1 1.0: 5 cpu-clock:\n\t1 f (m)\n\nnot a header\n",
            4,
            "time",
        ),
        ("p x 1.0: 5 cpu-clock:\n", 1, "bad tid"),
        (
            "p 1 1.0: cpu-clock\n",
            1,
            "event `cpu-clock` does not end with `:`",
        ),
        // Folded lines read as perf: headers without time nor frames.
        ("a;b 12\na;c 3\n", 1, "without a time has no frames"),
        ("p 1\n\t1 f (m)\n\nq 2\n", 4, "without a time has no frames"),
    ];
    for (input, line, what) in cases {
        let e = parse(input, Path::new("/d/p.txt"), 0, &PerfOptions::default()).unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.line(), Some(line), "{msg}");
        assert!(
            msg.starts_with(&format!("/d/p.txt:{line}: not perf script: ")),
            "{msg}"
        );
        assert!(msg.contains(what), "{msg}");
        assert!(!msg.contains('\n'));
    }
    let e = parse(
        "# only a comment\n",
        Path::new("e"),
        0,
        &PerfOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("no sample"), "{e}");
}

/// Periods summing past Int64 were saturated to its largest value
/// without a word; the other formats refuse such sums, and so does perf.
#[test]
fn periods_summing_past_int64_are_refused() {
    let big = i64::MAX;
    let one = format!("p 1 1.0: {big} cpu-clock:\n\t1 f (m)\n\n");
    assert!(parse(&one, Path::new("/d/p.txt"), 0, &PerfOptions::default()).is_ok());
    let two = format!("{one}p 1 2.0: {big} cpu-clock:\n\t1 f (m)\n\n");
    let e = parse(&two, Path::new("/d/p.txt"), 0, &PerfOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("/d/p.txt") && e.contains("sum past"), "{e}");
    let huge = format!("p 1 1.0: {} cpu-clock:\n\t1 f (m)\n\n", u64::MAX);
    let e = parse(&huge, Path::new("/d/p.txt"), 0, &PerfOptions::default());
    assert!(e.is_err(), "{e:?}");
}

#[test]
fn sniff_takes_perf_script_and_leaves_other_text() {
    let script = read("burn.fp.perf-script.txt");
    let first = &script.as_bytes()[..super::super::SNIFF_LEN];
    assert_eq!(Perf.sniff(first), Sniff::Yes);
    assert_eq!(super::super::detect(first), Some(Format::Perf));
    assert_eq!(Perf.sniff(b"main;foo 12\n"), Sniff::No);
    // A folded stack, then an empty stack's line: not a header and a frame.
    assert_eq!(Perf.sniff(b"a;b 3\n 5\n"), Sniff::No);
    assert_eq!(super::super::detect(b"a;b 3\n 5\n"), Some(Format::Folded));
    assert_eq!(Perf.sniff(b"@[\n    leaf+58\n"), Sniff::No);
    assert_eq!(Perf.sniff(&[0, 0, 0, 0, 0, 0, 0, 12]), Sniff::No);
}

#[test]
fn tracepoint_arguments_and_call_graph_less_samples() {
    // A tracepoint's arguments follow the event: not a frame. Without -g
    // the sampled ip sits on the header line.
    let script = "\
app 7 [000] 5.000000: 1 sched:sched_switch: prev_comm=app prev_pid=7 ==> next_comm=swapper/0
\t    1000 schedule+0x10 ([kernel.kallsyms])

app 7 [000] 5.100000: 250000 task-clock:  401000 work+0x2 (/bin/app)

";
    let mut r = parse(script, Path::new("t"), 0, &PerfOptions::default()).unwrap();
    assert_eq!(
        r.value_types()
            .iter()
            .map(crate::model::ValueType::profile_type)
            .collect::<Vec<_>>(),
        [
            "sched.sched_switch_samples:count",
            "sched.sched_switch:count",
            "task-clock_samples:count",
            "task-clock:nanoseconds"
        ]
    );
    let (stacks, _) = folded(&mut r, 3);
    assert_eq!(stacks, BTreeMap::from([("work".to_owned(), 250_000)]));
    let mut r = parse(script, Path::new("t"), 0, &PerfOptions::default()).unwrap();
    assert_eq!(
        folded(&mut r, 0).0,
        BTreeMap::from([("schedule".to_owned(), 1)])
    );
}

#[test]
fn a_file_cut_inside_a_line_is_refused_naming_the_line() {
    let path = fixture("burn.fp.perf-script.txt");
    let script = read("burn.fp.perf-script.txt");
    // Cut in the middle of a frame line.
    let cut = &script[..script.len() / 2];
    let cut = &cut[..cut.rfind('\n').unwrap() + 5];
    let Err(e) = parse(cut, &path, 0, &PerfOptions::default()) else {
        panic!("a cut file is refused");
    };
    let e = e.to_string();
    assert!(e.contains("cut short"), "{e}");
    assert!(e.contains(&format!(":{}", cut.lines().count())), "{e}");
    assert!(!e.contains('\n'), "{e}");
    // Cut at a line's end, the file is whole as far as it goes.
    let whole = &cut[..cut.rfind('\n').unwrap() + 1];
    assert!(parse(whole, &path, 0, &PerfOptions::default()).is_ok());
    // Cut inside a frame line's indentation (a tab, spaces): the blanks
    // at the end are no blank line, the last sample is open (they closed
    // it, and its stack was stored cut to its first frames).
    let mut tried = 0;
    let step = (script.matches("\n\t").count() / 20).max(1);
    for (at, _) in script.match_indices("\n\t").step_by(step).take(20) {
        let line_start = at + 1;
        let indent = script[line_start..]
            .find(|c: char| !c.is_whitespace())
            .unwrap();
        for k in [1, indent] {
            let cut = &script[..line_start + k];
            let Err(e) = parse(cut, &path, 0, &PerfOptions::default()) else {
                panic!("cut after {k} blanks of the line at byte {line_start} is refused");
            };
            assert!(e.to_string().contains("cut short"), "{e}");
            tried += 1;
        }
    }
    assert!(tried >= 30, "{tried}");
    // Blanks after a sample's blank line end nothing open: whole.
    let end = script.trim_end();
    let closed = format!("{end}\n\n  \t");
    assert!(parse(&closed, &path, 0, &PerfOptions::default()).is_ok());
    // Without call graphs (the ip on the header), spaces after the last
    // header are an editor's; a tab is a frame line's start.
    let flat = "burn 410 11331.597954:    2004008 cpu-clock:pppH:  117c leaf+0x33 (/t/burn)\n";
    assert!(parse(&format!("{flat}   "), &path, 0, &PerfOptions::default()).is_ok());
    assert!(
        parse(&format!("{flat}\t"), &path, 0, &PerfOptions::default())
            .unwrap_err()
            .to_string()
            .contains("cut short")
    );
}

/// A small deterministic generator (xorshift): the differential test below
/// covers the same inputs on every run.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[self.below(v.len())]
    }
}

/// Varied `perf script` text: repeated chains (and chains that differ
/// only in addresses or whitespace), kernel / JIT / vdso / inlined /
/// unknown frames, several events with and without modifiers and periods,
/// cpu columns, pid/tid forms, comms with spaces, call-graph-less samples
/// and tracepoints, comments, blank lines holding spaces, `\r\n` endings,
/// samples without a blank line between them, odd indents (non-ASCII
/// whitespace included).
fn generate_script(g: &mut Gen) -> String {
    let frames = [
        "4005d0 main+0x10 (/bin/app)",
        "4005e0 main+0x20 (/bin/app)",
        "400700 work+0x3 (/bin/app)",
        "400800 leaf (/bin/app)",
        "400900 inl+0x4 (inlined)",
        "7f1000 [unknown] (/lib/libc.so.6)",
        "7f2000 [unknown] (/lib/libc.so.6)",
        "deadbeef [unknown] ([unknown])",
        "ffffffff81000010 do_syscall_64+0x10 ([kernel.kallsyms])",
        "ffffffffc0001000 nvme_irq+0x1 (/lib/modules/nvme.ko)",
        "7fff1000 __vdso_clock_gettime+0x9 ([vdso])",
        "7e000000 Interpreter+0x40 (/tmp/perf-4242.map)",
        "400a00 operator new(unsigned long)+0x1c (/usr/lib/libstdc++.so.6)",
        "400b00 ns::f<int> (x)+0x1 (/bin/app)",
        "400c00  (/bin/app)",
        "400d00 nomodule+0x1",
    ];
    let indents = ["\t", "\t    ", "        ", " \t ", "\t\u{a0}"];
    let comms = ["app", "my app", "my  app", "kworker/0:1", "java", "é x"];
    let events = [
        "cpu-clock:pppH:",
        "cpu-clock:",
        "cycles:u:",
        "page-faults:",
        "sched:sched_switch:",
        "task-clock:",
    ];
    let chains: Vec<Vec<&str>> = (0..1 + g.below(6))
        .map(|_| (0..1 + g.below(8)).map(|_| g.pick(&frames)).collect())
        .collect();
    let mut s = String::new();
    if g.below(3) == 0 {
        s.push_str("# ========\n# captured on: x\n# ========\n#\n");
    }
    let mut t = 100_000u64 + g.below(1000) as u64;
    let eol = if g.below(8) == 0 { "\r\n" } else { "\n" };
    // One form of ids a file, as perf's `-F` gives: `pid/tid` or the tid.
    let with_pid = g.below(4) != 0;
    // A period for every sample of an event or for none (perf prints it
    // when the event's samples carry one: `-F`, or `-c N` leaves it out).
    // (`cpu-clock:pppH:` and `cpu-clock:` are one event: modifiers other
    // than the scope are dropped.)
    let periodic: Vec<bool> = events.iter().map(|_| g.below(3) != 0).collect();
    // No command name in any header (`-F tid,time,...`), now and then.
    let no_comm = g.below(8) == 0;
    let name = |e: &str| e.split(':').next().unwrap_or(e).to_string();
    let event_of = |e: usize| {
        events
            .iter()
            .position(|x| name(x) == name(events[e]))
            .unwrap()
    };
    for _ in 0..1 + g.below(60) {
        t += g.below(3_000_000) as u64;
        let comm = g.pick(&comms);
        let ids = match (with_pid, g.below(2)) {
            (false, 0) => format!("{}", 10 + g.below(3)),
            (false, _) => format!("{:>7}", 10 + g.below(3)),
            (true, _) => format!("{}/{}", 10 + g.below(2), 20 + g.below(3)),
        };
        let cpu = if g.below(2) == 0 { " [003]" } else { "" };
        let k = 3 + g.below(4);
        let e = g.below(k);
        let event = events[e];
        let period = match (periodic[event_of(e)], g.below(2)) {
            (false, _) => String::new(),
            (true, 0) => format!(" {}", 1 + g.below(3) * 1_000_000),
            (true, _) => " 10000000".into(),
        };
        // A sample perf prints without a call graph between ones with
        // (a tracepoint under `-F`, a recording without `-g`): the command
        // name right-aligned, the ip on the line, maybe a source line, and
        // no blank line after it.
        if !no_comm && g.below(6) == 0 {
            let _ = write!(
                s,
                "{comm:>16} {ids}{cpu} {}.{:06}:{period} {event}  {}{eol}",
                t / 1_000_000,
                t % 1_000_000,
                g.pick(&frames)
            );
            if g.below(3) == 0 {
                let _ = write!(s, "  app.c:{}{eol}", 1 + g.below(50));
            }
            if g.below(5) == 0 {
                let _ = write!(s, "|{}        h = h * 31 + i;{eol}", 1 + g.below(50));
            }
            continue;
        }
        let head_ip = g.below(7) == 0;
        let comm = if no_comm {
            String::new()
        } else {
            format!("{comm} ")
        };
        let _ = write!(
            s,
            "{comm}{ids}{cpu} {}.{:06}:{period} {event}",
            t / 1_000_000,
            t % 1_000_000
        );
        if head_ip {
            let _ = write!(s, "  {}", g.pick(&frames));
        } else if event.starts_with("sched") {
            s.push_str(" prev_comm=app prev_pid=7 ==> next_comm=swapper/0");
        }
        s.push_str(eol);
        if !head_ip || g.below(4) == 0 {
            let chain = &chains[g.below(chains.len())];
            let indent = if g.below(10) == 0 {
                g.pick(&indents)
            } else {
                "\t"
            };
            for f in chain {
                let _ = write!(s, "{indent}{f}{eol}");
            }
        }
        match g.below(10) {
            0 => {}
            1 => s.push_str("   \n"),
            2 => s.push_str(" \u{a0}\n\n"),
            _ => s.push_str(eol),
        }
        // `-F +srccode`: the sample's source code after it.
        if g.below(12) == 0 {
            let _ = write!(s, "|{}        sink += h;{eol}", 1 + g.below(50));
        }
    }
    s
}

fn random_options(g: &mut Gen) -> PerfOptions {
    let place = |g: &mut Gen| [Placement::Label, Placement::Frame, Placement::Omit][g.below(3)];
    PerfOptions {
        comm: place(g),
        pid: place(g),
        tid: place(g),
        annotate_kernel: g.below(2) == 0,
        annotate_jit: g.below(2) == 0,
        window_ns: [
            None,
            Some(0),
            Some(1_000_000),
            Some(50_000_000),
            Some(1_000_000_000),
        ][g.below(5)],
        time_ns: [None, Some(1_700_000_000_000_000_000)][g.below(2)],
    }
}

/// A reader's events, the frames and labels of every stack key, and its
/// value types.
type Everything = (Vec<Event>, Vec<(Vec<Frame>, Vec<Label>)>, Vec<String>);

/// Everything a reader gives: its events, the frames and labels of every
/// stack key, its value types.
fn everything(r: &mut text::TextReader) -> Everything {
    let events = r.events();
    let mut keys: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::Batch(b) => Some(b.stacks.clone()),
            Event::Source(_) => None,
        })
        .flatten()
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let stacks = keys
        .iter()
        .map(|&k| {
            let (mut f, mut l) = (Vec::new(), Vec::new());
            r.stack(k, &mut f);
            r.labels(k, &mut l);
            (f, l)
        })
        .collect();
    let types = r
        .value_types()
        .iter()
        .map(crate::model::ValueType::profile_type)
        .collect();
    (events, stacks, types)
}

fn both(script: &str, options: &PerfOptions) -> (String, String) {
    let p = Path::new("/g/p.txt");
    let show = |r: Result<text::TextReader, Error>| match r {
        Ok(mut r) => format!("{:?}", everything(&mut r)),
        Err(e) => format!("error: {e}"),
    };
    (
        show(parse(script, p, 9_000_000_000, options)),
        show(reference::parse(script, p, 9_000_000_000, options)),
    )
}

#[test]
fn fast_path_equals_the_line_by_line_reference() {
    let mut g = Gen(0x9e37_79b9_7f4a_7c15);
    let (mut ok, mut errors) = (0, 0);
    for case in 0..1500 {
        let mut script = generate_script(&mut g);
        let options = random_options(&mut g);
        match g.below(12) {
            // Cut anywhere, at a char boundary (mid-line or at a line's end).
            0 => {
                let mut at = g.below(script.len());
                while !script.is_char_boundary(at) {
                    at -= 1;
                }
                script.truncate(at);
            }
            // A bad frame line somewhere.
            1 => {
                let at = script.find("\n\t").map_or(0, |i| i + 1);
                script.insert_str(at, "\tzz bad (m)\n");
            }
            _ => {}
        }
        let (fast, reference) = both(&script, &options);
        assert_eq!(fast, reference, "case {case}, {options:?}:\n{script}");
        if fast.starts_with("error") {
            errors += 1;
        } else {
            ok += 1;
        }
    }
    // Both kinds of outcome are covered.
    assert!(ok > 800 && errors > 100, "{ok} read, {errors} refused");
}

#[test]
fn fast_path_equals_the_reference_on_the_recordings() {
    for name in ["burn.fp.perf-script.txt", "burn.dwarf.perf-script.txt"] {
        let script = read(name);
        let mut g = Gen(7);
        for _ in 0..20 {
            let options = random_options(&mut g);
            let (fast, reference) = both(&script, &options);
            assert!(fast == reference, "{name} {options:?}");
        }
    }
}

/// The profile types of a reader, as strings.
fn type_names(r: &text::TextReader) -> Vec<String> {
    r.value_types()
        .iter()
        .map(crate::model::ValueType::profile_type)
        .collect()
}

/// Thread names with spaces, digits and a colon (`names.c`: `job 42`,
/// `12345`, `a 1 2.5:`): the time is the token the fields around fit,
/// not the first that looks like one (`a 1 2.5:` made 128 bogus events
/// such as `19529.039661`); a header nothing fits is refused.
#[test]
fn a_thread_name_with_spaces_digits_and_a_colon_is_the_comm() {
    let script = "\
12345 31513 19529.037655:    2004008 cpu-clock:ppp: 
\t            124b spin_named+0x1b (/t/names)

a 1 2.5: 31514 19529.039661:    2004008 cpu-clock:ppp: 
\t            1247 spin_named+0x17 (/t/names)

job 42 31512 19529.041059:    2004008 cpu-clock:ppp: 
\t            124b spin_named+0x1b (/t/names)

a 1 2.5: 31514 [001] 19529.041692:    2004008 cpu-clock:ppp: 
\t            124b spin_named+0x1b (/t/names)

";
    let options = PerfOptions {
        tid: Placement::Label,
        time_ns: Some(0),
        ..Default::default()
    };
    let mut r = parse(script, Path::new("n"), 0, &options).unwrap();
    assert_eq!(
        type_names(&r),
        ["cpu-clock_samples:count", "cpu-clock:nanoseconds"]
    );
    let events = r.events();
    let Event::Batch(b) = &events[1] else {
        panic!()
    };
    assert_eq!(b.duration_ns, 4_037_000);
    let mut threads = Vec::new();
    for &k in &b.stacks {
        let mut l = Vec::new();
        r.labels(k, &mut l);
        threads.push(format!("{}={}", l[0].value, l[1].value));
    }
    assert_eq!(threads, ["12345=31513", "a 1 2.5:=31514", "job 42=31512"]);
    // Without times (`-F` without `time`): the event ends the header.
    let untimed = "job 42 31512    2004008 cpu-clock:ppp: \n\t124b spin_named (/t/names)\n\n";
    let mut r = parse(untimed, Path::new("u"), 0, &options).unwrap();
    let (stacks, labels) = folded(&mut r, 0);
    assert_eq!(stacks, BTreeMap::from([("spin_named".into(), 1)]));
    assert_eq!(labels[0][0].value, "job 42");
    let e = parse(
        "a 1 2.5: x 3.5: 7 cpu-clock:\n",
        Path::new("/d/n.txt"),
        0,
        &PerfOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("/d/n.txt:1: not perf script: "), "{e}");
}

/// `perf record -e cpu-clock:u -e cpu-clock:k`: two events, kept apart by
/// their scope modifier; precision and `H` are dropped.
#[test]
fn scope_modifiers_keep_events_apart() {
    let script = "\
child 14981 19869.739878:     250000 cpu-clock:u: 
\t           1462a handle_amd+0xa (/lib/ld.so)

child 14981 19869.740376:     250000 cpu-clock:k: 
\tffffffff822540e3 xas_load+0x53 ([kernel.kallsyms])

child 14981 19869.740625:     250000 cpu-clock:k: 
\tffffffff822540e3 xas_load+0x53 ([kernel.kallsyms])

child 14981 19869.740725:     250000 cpu-clock:pppH: 
\tffffffff822540e3 xas_load+0x53 ([kernel.kallsyms])

child 14981 19869.740825:     9 cycles:ppu: 
\tffffffff822540e3 xas_load+0x53 ([kernel.kallsyms])

";
    let mut r = parse(script, Path::new("uk"), 0, &PerfOptions::default()).unwrap();
    assert_eq!(
        type_names(&r),
        [
            "cpu-clock.u_samples:count",
            "cpu-clock.u:nanoseconds",
            "cpu-clock.k_samples:count",
            "cpu-clock.k:nanoseconds",
            "cpu-clock_samples:count",
            "cpu-clock:nanoseconds",
            "cycles.u_samples:count",
            "cycles.u:count",
        ]
    );
    assert_eq!(
        folded(&mut r, 2).0,
        BTreeMap::from([("xas_load".into(), 2)])
    );
}

/// A lone id is the thread id (perf's default fields): asked for pids,
/// the header is refused naming its line; `pid/tid` gives both.
#[test]
fn pids_need_a_pid_tid_header() {
    let lone = "app 23479 1.0: 5 cpu-clock:\n\t1 f (m)\n\n";
    for pid in [Placement::Label, Placement::Frame] {
        let options = PerfOptions {
            pid,
            ..Default::default()
        };
        let e = parse(lone, Path::new("/d/p.txt"), 0, &options)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("/d/p.txt:1: not perf script: the header shows one id"),
            "{e}"
        );
        assert!(
            e.contains("perf script -F +pid") && !e.contains('\n'),
            "{e}"
        );
        let both = "app 23479/23491 1.0: 5 cpu-clock:\n\t1 f (m)\n\n";
        assert!(parse(both, Path::new("p"), 0, &options).is_ok());
    }
    let options = PerfOptions {
        tid: Placement::Label,
        ..Default::default()
    };
    let mut r = parse(lone, Path::new("p"), 0, &options).unwrap();
    let (_, labels) = folded(&mut r, 0);
    assert_eq!(labels[0][1].value, "23479");
}

/// A call-graph script ends every sample with a blank line: one cut at a
/// line's end (`head -n 10`) is refused naming its last line; a recording
/// without call graph (no blank lines) is whole at any line's end.
#[test]
fn a_call_graph_script_cut_at_a_line_end_is_refused() {
    let script = read("burn.fp.perf-script.txt");
    let cut: String = script.lines().take(12).map(|l| format!("{l}\n")).collect();
    let e = parse(&cut, Path::new("/d/cut4.txt"), 0, &PerfOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(
            "/d/cut4.txt:12: not perf script: the file ends inside a sample (cut short?)"
        ),
        "{e}"
    );
    let whole: String = script.lines().take(10).map(|l| format!("{l}\n")).collect();
    assert!(whole.ends_with("\n\n"));
    assert!(parse(&whole, Path::new("w"), 0, &PerfOptions::default()).is_ok());
    let flat = read("burn.nocallgraph.perf-script.txt");
    let cut: String = flat.lines().take(10).map(|l| format!("{l}\n")).collect();
    assert!(parse(&cut, Path::new("f"), 0, &PerfOptions::default()).is_ok());
}

/// `perf script -F +tod`: the wall-clock date and time before perf's time
/// is the sample's time (read as local time by libc's mktime; a zone is
/// a whole number of quarter hours from UTC), with or without perf's.
#[test]
fn the_tod_field_is_the_samples_time() {
    // 2026-12-02 16:36:37 UTC.
    let utc = 1_796_229_397_000_000_000i64;
    for script in [
        "child 16880 2026-12-02 16:36:37.580983 19899.839201:    2004008 cpu-clock:ppp: \n\t1217 child_spin+0x17 (/t/child)\n\n\
         child 16880 2026-12-02 16:36:37.583001 19899.841219:    2004008 cpu-clock:ppp: \n\t1217 child_spin+0x17 (/t/child)\n\n",
        "child 16880 2026-12-02 16:36:37.580983    2004008 cpu-clock:ppp: \n\t1217 child_spin (/t/child)\n\n\
         child 16880 2026-12-02 16:36:37.583001    2004008 cpu-clock:ppp: \n\t1217 child_spin (/t/child)\n\n",
    ] {
        let mut r = parse(script, Path::new("tod"), 7, &PerfOptions::default()).unwrap();
        assert_eq!(
            type_names(&r),
            ["cpu-clock_samples:count", "cpu-clock:nanoseconds"]
        );
        let events = r.events();
        let Event::Batch(b) = &events[1] else {
            panic!()
        };
        assert_eq!(b.duration_ns, 2_018_000);
        let off = b.time_ns as i64 - (utc + 580_983_000);
        assert!(off.abs() <= 14 * 3600 * 1_000_000_000, "{off}");
        assert_eq!(off % (900 * 1_000_000_000), 0, "{off}");
    }
}

/// Without a period field (`-F` without `period`), an event has its
/// sample count only: 1 a sample is no nanoseconds nor count of events.
#[test]
fn an_event_without_periods_has_its_sample_count_only() {
    let script = "\
app 23574 19265.602033: page-faults: 
\tffffffff8177821a elf_load ([kernel.kallsyms])

app 23574 19265.602040: cpu-clock:ppp: 
\tffffffff8177821a elf_load ([kernel.kallsyms])

app 23574 19265.602050: 5 cycles: 
\tffffffff8177821a elf_load ([kernel.kallsyms])

";
    let mut r = parse(script, Path::new("np"), 0, &PerfOptions::default()).unwrap();
    assert_eq!(
        type_names(&r),
        [
            "page-faults_samples:count",
            "cpu-clock_samples:count",
            "cycles_samples:count",
            "cycles:count"
        ]
    );
    assert_eq!(
        folded(&mut r, 3).0,
        BTreeMap::from([("elf_load".into(), 5)])
    );
}

/// `perf script --deltatime`: times that go back (perf prints samples in
/// time order) are refused naming the line, not read as absolute times.
#[test]
fn delta_times_are_refused() {
    // perf's own `--deltatime` text: every time since the sample before,
    // the first 0, at a steady rate going back by microseconds only.
    let name = "burn.fields.deltatime.perf-script.txt";
    let e = parse(&read(name), &fixture(name), 0, &PerfOptions::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("burn.fields.deltatime.perf-script.txt:")
            && e.to_string()
                .contains("run perf script without --deltatime"),
        "{e}"
    );
    let script = "\
wk-lib 23491     0.002005:    2004008 cpu-clock:ppp: 
\t            1123 lib_hash+0x23 (/t/libwork.so)

app 23479     0.000954:    2004008 cpu-clock:ppp: 
\t            13ed inl_caller+0x2d (/t/app)

";
    let e = parse(
        script,
        Path::new("/d/delta.txt"),
        0,
        &PerfOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("/d/delta.txt:4: not perf script: the time goes back"),
        "{e}"
    );
    assert!(e.contains("without --deltatime"), "{e}");
    // A little back (under a millisecond) is taken from perf's own times
    // (since boot), not from times that start at 0.
    let close = script
        .replace("0.002005", "5000.002005")
        .replace("0.000954", "5000.001954");
    assert!(parse(&close, Path::new("c"), 0, &PerfOptions::default()).is_ok());
    let close = script.replace("0.000954", "0.001954");
    let e = parse(&close, Path::new("c"), 0, &PerfOptions::default()).unwrap_err();
    assert!(
        e.to_string().contains("are the gaps between samples"),
        "{e}"
    );
}

/// A thread named in Latin-1 (`names2.c`: `caf\xe9`): perf script prints
/// the bytes; the file is read with U+FFFD for them, detected as perf
/// script even when the name is in the first bytes. Binary data with
/// invalid UTF-8 is still refused, naming its line.
#[test]
fn a_non_utf8_thread_name_is_read_with_a_replacement_character() {
    let dir = std::env::temp_dir();
    let tmp = dir.join(format!("flamehouse-perf-latin1-{}.txt", std::process::id()));
    let mut script = b"caf\xe9 19797 19946.194989:    2004008 cpu-clock:ppp: \n".to_vec();
    script.extend_from_slice(b"\t            1247 spin_named+0x17 (/t/names2)\n\n");
    std::fs::write(&tmp, &script).unwrap();
    assert_eq!(Perf.sniff(&script[..64]), Sniff::Yes);
    assert_eq!(super::super::detect(&script[..64]), Some(Format::Perf));
    let opts = text::TextOptions::default();
    let (text, _) = text::read_text(File::open(&tmp).unwrap(), &tmp, NAME, &opts).unwrap();
    let mut r = parse(&text, &tmp, 0, &PerfOptions::default()).unwrap();
    let (stacks, labels) = folded(&mut r, 0);
    assert_eq!(stacks, BTreeMap::from([("spin_named".into(), 1)]));
    assert_eq!(labels[0][0].value, "caf\u{fffd}");
    // NUL and other control bytes with invalid UTF-8: binary, refused.
    std::fs::write(&tmp, b"PAR1\n\xff\x00\x01\x02 x\n").unwrap();
    let e = text::read_text(File::open(&tmp).unwrap(), &tmp, NAME, &opts)
        .unwrap_err()
        .to_string();
    std::fs::remove_file(&tmp).unwrap();
    assert!(
        e.ends_with(":2: not perf script: binary data, not text (byte 0x00)"),
        "{e}"
    );
}

/// A `perf.data` recording given as the input (either byte order's magic)
/// says how to make perf script text of it, whatever reads it: MemHawk's
/// reader (no format claims it) or a text format's (`--format perf`).
#[test]
fn a_perf_data_file_says_how_to_make_perf_script_text() {
    let dir = std::env::temp_dir();
    for magic in [&b"PERFILE2"[..], b"2ELIFREP"] {
        let tmp = dir.join(format!(
            "flamehouse-{}-{}.data",
            magic[0],
            std::process::id()
        ));
        let mut data = magic.to_vec();
        data.extend_from_slice(&[0x68, 0, 0, 0, 0, 0, 0, 0, 0x88, 0, 0xff, 0xfe]);
        std::fs::write(&tmp, &data).unwrap();
        let want = format!(
            "a perf.data recording: run `perf script -i {p} > {p}.txt` and load that \
             (or `perf script -i {p} | flamehouse load -`)",
            p = tmp.display()
        );
        let mut r = crate::formats::binpb::BinpbReader::open(&tmp).unwrap();
        let e = r.next_record().unwrap_err().to_string();
        assert!(e.ends_with(&want), "{e}");
        let opts = text::TextOptions::default();
        let e = text::read_text(File::open(&tmp).unwrap(), &tmp, NAME, &opts)
            .unwrap_err()
            .to_string();
        std::fs::remove_file(&tmp).unwrap();
        assert_eq!(e, format!("{}: not perf script: {want}", tmp.display()));
    }
    // Piped to `load -`: standard input's copy has no name to give.
    let copy = Path::new("/tmp/flamehouse-stdin-1-2/stdin");
    assert_eq!(crate::ingest::stdin::source_name(copy), Some("<stdin>"));
    let hint = perf_data_hint(b"PERFILE2\x68\0", copy).unwrap();
    assert!(hint.contains("pipe its text instead (`perf script -i perf.data | flamehouse load -`)"));
}

/// One damaged header among whole ones (an outside check's edits of a
/// real recording): a bad byte in its time made it a header without one,
/// its time taken for an event (`6783x.338897_samples:count`); a lost `:`
/// made its event part of an ip frame; garbage for the time made
/// `garbage` an event. perf script prints one field list in every header,
/// so each is refused naming its line; the whole file still loads.
#[test]
fn a_header_without_the_fields_of_the_first_is_refused_naming_it() {
    let path = fixture("burn.fp.perf-script.txt");
    let script = read("burn.fp.perf-script.txt");
    assert!(parse(&script, &path, 0, &PerfOptions::default()).is_ok());
    // The 20th header's line (1-based) and text.
    let (at, header) = script
        .lines()
        .enumerate()
        .filter(|(_, l)| l.starts_with("burn"))
        .nth(20)
        .unwrap();
    let time = header.split_whitespace().nth(2).unwrap();
    for (damaged, want) in [
        (
            header.replacen(time, &format!("{}x{}", &time[..4], &time[5..]), 1),
            "starts with a digit, which no perf event does: a damaged time?",
        ),
        (
            header.replace("cpu-clock:pppH:", "cpu-clock pppH"),
            "names no event",
        ),
        (
            header.replace(time, "garbage:"),
            "come a period and an event (`2004008 cpu-clock:pppH:`): a damaged time?",
        ),
        // A lost period: the sample was stored as 1 ns.
        (
            header.replace("2004008 ", ""),
            "has no period where the first header of event",
        ),
        // The time gone, the event kept.
        (header.replace(&format!("{time} "), ""), "has no time"),
    ] {
        assert_ne!(damaged, header);
        let bad = script.replacen(header, &damaged, 1);
        let Err(e) = parse(&bad, &path, 0, &PerfOptions::default()) else {
            panic!("{damaged:?} is refused");
        };
        let e = e.to_string();
        assert!(e.contains(want), "{damaged:?}: {e}");
        assert!(e.contains(&format!(":{}:", at + 1)), "{damaged:?}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
    // One field list per event type (`-F sw:comm,tid,time,period,event,ip,sym,dso
    // -F trace:comm,tid,event,trace`): the tracepoint's headers have no time
    // nor period, the clock's do; both read.
    let per_type = "\
burn 410 11331.597954:    2004008 cpu-clock:pppH: 
\t            117c leaf+0x33 (/t/burn)

burn 410 sched:sched_switch: prev_comm=burn prev_pid=410 ==> next_comm=swapper/0
\t            117c leaf+0x33 (/t/burn)

burn 410 11331.599957:    2004008 cpu-clock:pppH: 
\t            117c leaf+0x33 (/t/burn)

";
    let r = parse(per_type, &path, 0, &PerfOptions::default()).unwrap();
    assert_eq!(
        type_names(&r),
        [
            "cpu-clock_samples:count",
            "cpu-clock:nanoseconds",
            "sched.sched_switch_samples:count"
        ]
    );
}

/// `perf record -a`: a sample of a task that had exited prints as comm
/// `:-1`, tid `-1` (an outside check's system-wide recording: one such
/// sample refused its 448,000 lines as "bad tid `-1`"). Read, its ids
/// kept as `-1`; other negative ids stay refused.
#[test]
fn a_system_wide_samples_unknown_task_is_tid_minus_one() {
    let script = "\
:-1    -1 [001] 72441.111322: sched:sched_switch: prev_comm=x prev_pid=7 ==> next_comm=y
\t      ffffffff8100 __schedule+0x1 ([kernel.kallsyms])

app   42 [000] 72441.111400: sched:sched_switch: prev_comm=app prev_pid=42 ==> next_comm=y
\t      ffffffff8100 __schedule+0x1 ([kernel.kallsyms])

";
    let options = PerfOptions {
        tid: Placement::Label,
        ..Default::default()
    };
    let mut r = parse(script, Path::new("a"), 0, &options).unwrap();
    let (_, labels) = folded(&mut r, 0);
    let tids: BTreeSet<String> = labels
        .iter()
        .flatten()
        .filter(|l| l.key == "tid")
        .map(|l| l.value.clone())
        .collect();
    assert_eq!(tids, BTreeSet::from(["-1".to_string(), "42".to_string()]));
    let e = parse(
        &script.replace(":-1    -1", "app    -2"),
        Path::new("a"),
        0,
        &options,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("a:1:") && e.contains("-2"), "{e}");
}
