//! bpftrace reader vs reference parses written here, on the real maps of
//! fixtures/continuous/bpftrace.

use super::*;
use crate::model::Event;
use std::collections::BTreeMap;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/continuous/bpftrace")
        .join(name)
}

fn read(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

fn name(f: &Frame) -> String {
    match f {
        Frame::Symbol(s) => s.function.clone(),
        Frame::Address(a) => format!("{a:#x}"),
    }
}

/// The reader's stacks, root first, per value type.
fn folded(r: &mut text::TextReader) -> Vec<BTreeMap<String, i64>> {
    let n = r.value_types().len();
    let mut out = vec![BTreeMap::new(); n];
    let mut frames = Vec::new();
    for e in r.events() {
        let Event::Batch(b) = e else { continue };
        for (i, &k) in b.stacks.iter().enumerate() {
            r.stack(k, &mut frames);
            let s: Vec<String> = frames.iter().rev().map(name).collect();
            for (t, m) in out.iter_mut().enumerate() {
                if b.values[i * n + t] != 0 {
                    *m.entry(s.join(";")).or_insert(0) += b.values[i * n + t];
                }
            }
        }
    }
    out
}

/// Reference reading of `@[ustack, comm] = count()` text: entries split
/// at `\n@[`, frames = the 4-space-indented lines cut at `+`, comm between
/// `, ` and `]: ` on the last line.
fn reference_text(text: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for chunk in text.split("\n@[").skip(1) {
        let lines: Vec<&str> = chunk.lines().collect();
        let last = lines.last().unwrap();
        let comm = &last[2..last.find("]: ").unwrap()];
        let count: i64 = last[last.find("]: ").unwrap() + 3..].parse().unwrap();
        let mut stack: Vec<&str> = lines
            .iter()
            .filter(|l| l.starts_with("    "))
            .map(|l| l.trim().split('+').next().unwrap())
            .collect();
        stack.push(comm);
        stack.reverse();
        *out.entry(stack.join(";")).or_insert(0) += count;
    }
    out
}

/// Reference reading of the JSON: serde_json, keys split at line ends.
fn reference_json(text: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| l.contains("\"map\"")) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        for (key, n) in v["data"]["@"].as_object().unwrap() {
            let pieces: Vec<&str> = key.split('\n').collect();
            let comm = pieces.last().unwrap().trim_start_matches(',');
            let mut stack: Vec<&str> = pieces[1..pieces.len() - 1]
                .iter()
                .map(|l| l.trim().split('+').next().unwrap())
                .collect();
            stack.push(comm);
            stack.reverse();
            *out.entry(stack.join(";")).or_insert(0) += n.as_i64().unwrap();
        }
    }
    out
}

fn parse_str(text: &str, options: &BpftraceOptions) -> text::TextReader {
    parse(text, Path::new("t"), 0, options).unwrap()
}

#[test]
fn text_and_json_match_reference_parses_and_each_other() {
    let txt = read("burn.ustack-comm.txt");
    let json = read("burn.ustack-comm.json");
    let mut r = parse_str(&txt, &BpftraceOptions::default());
    assert_eq!(r.value_types()[0].profile_type(), "@:count");
    let from_text = folded(&mut r).remove(0);
    assert_eq!(from_text, reference_text(&txt));
    let from_json = folded(&mut parse_str(&json, &BpftraceOptions::default())).remove(0);
    assert_eq!(from_json, reference_json(&json));
    assert!(from_json
        .keys()
        .all(|k| k.starts_with("burn;__libc_start_call_main;main;")));

    // The committed text and json are two runs (different counts): the
    // same run in both forms is the text rewritten as bpftrace -f json
    // prints it (parts joined by `,`, frames `\n    f`).
    let mut map = serde_json::Map::new();
    for chunk in txt.split("\n@[").skip(1) {
        let (key, count) = chunk.rsplit_once("]: ").unwrap();
        map.insert(
            key.replace("\n, ", "\n,"),
            serde_json::json!(count.trim().parse::<i64>().unwrap()),
        );
    }
    let same_run = serde_json::json!({"type": "map", "data": {"@": map}}).to_string();
    let from_same = folded(&mut parse_str(
        &format!("{{\"type\": \"attached_probes\", \"data\": {{\"probes\": 2}}}}\n{same_run}\n"),
        &BpftraceOptions::default(),
    ))
    .remove(0);
    assert_eq!(from_same, from_text);
}

#[test]
fn kstack_then_ustack_puts_kernel_frames_on_top_and_empty_kstack_adds_nothing() {
    let txt = read("burn.kstack-ustack.txt");
    let got = folded(&mut parse_str(&txt, &BpftraceOptions::default())).remove(0);
    let total: i64 = txt
        .lines()
        .filter_map(|l| l.rsplit_once("]: ").map(|(_, n)| n.parse::<i64>().unwrap()))
        .sum();
    assert_eq!(got.values().sum::<i64>(), total);
    assert!(got.contains_key(
        "__libc_start_call_main;main;mid_b;rec;rec;rec;rec;leaf;\
         asm_common_interrupt;irqentry_exit_to_user_mode;schedule;__schedule;\
         finish_task_switch.isra.0"
    ));
    // Every other entry has an empty kernel stack: user frames only.
    let empty_k = txt.matches("@[, \n").count();
    assert_eq!(txt.matches("\n@[").count(), empty_k + 1);
    assert!(got
        .keys()
        .filter(|k| !k.contains("schedule"))
        .all(|k| k.starts_with("__libc_start_call_main;main;") && k.ends_with(";leaf")));
}

#[test]
fn named_map_with_perf_frames_and_a_tid_label_sums_to_its_scalar_twin() {
    let txt = read("burn.named-perf.txt");
    let options = BpftraceOptions {
        labels: vec!["tid".into()],
        ..Default::default()
    };
    let mut r = parse_str(&txt, &options);
    assert_eq!(
        r.value_types()
            .iter()
            .map(crate::model::ValueType::profile_type)
            .collect::<Vec<_>>(),
        ["@cpu:count"]
    );
    let events = r.events();
    let Event::Batch(b) = &events[1] else {
        panic!()
    };
    // `@samples = count()` ran in the same probe: the scalar's value is
    // the map's total.
    let scalar: i64 = txt
        .lines()
        .find_map(|l| l.strip_prefix("@samples: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(b.values.iter().sum::<i64>(), scalar);
    let mut frames = Vec::new();
    let mut labels = Vec::new();
    for &k in &b.stacks {
        r.stack(k, &mut frames);
        r.labels(k, &mut labels);
        assert_eq!(
            labels,
            [Label {
                key: "tid".into(),
                value: "450".into()
            }]
        );
        let Frame::Symbol(leaf) = &frames[0] else {
            panic!()
        };
        assert_eq!(leaf.function, "leaf");
        assert!(leaf.module.as_deref().unwrap().ends_with("/burn"));
        let Frame::Symbol(root) = frames.last().unwrap() else {
            panic!()
        };
        assert_eq!(
            (root.function.as_str(), root.module.as_deref()),
            (
                "__libc_start_call_main",
                Some("/usr/lib/x86_64-linux-gnu/libc.so.6")
            )
        );
    }
}

#[test]
fn raw_addresses_of_an_exited_target_stay_addresses() {
    let txt = read("burn.exited-target.txt");
    let mut r = parse_str(&txt, &BpftraceOptions::default());
    let events = r.events();
    let Event::Batch(b) = &events[1] else {
        panic!()
    };
    let mut frames = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for &k in &b.stacks {
        r.stack(k, &mut frames);
        let (root, rest) = frames.split_last().unwrap();
        assert_eq!(name(root), "burn");
        for f in rest {
            let Frame::Address(a) = f else {
                panic!("{f:?}")
            };
            seen.insert(*a);
        }
    }
    // Reference: every `0x...` line of the file.
    let want: std::collections::BTreeSet<u64> = txt
        .lines()
        .filter_map(|l| l.trim().strip_prefix("0x"))
        .map(|h| u64::from_str_radix(h, 16).unwrap())
        .collect();
    assert_eq!(seen, want);
}

#[test]
fn several_key_parts_and_maps_give_frames_labels_and_types() {
    let txt = "\
Attaching 1 probe...
@bytes[
    f+1
    g+2
, app, 7]: 100
@[app, 8]: 3
@bytes[
    f+1
    g+2
, app, 7]: 20
printf output between maps

@h[app]: 
[1]                    3 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
[2, 4)                 1 |@@@@@@@@@@@@@@@@@                                   |
";
    let options = BpftraceOptions {
        time_ns: Some(42),
        duration_ns: 7,
        ..Default::default()
    };
    let mut r = parse_str(txt, &options);
    assert_eq!(
        r.value_types()
            .iter()
            .map(crate::model::ValueType::profile_type)
            .collect::<Vec<_>>(),
        ["@bytes:count", "@:count"]
    );
    let events = r.events();
    let Event::Batch(b) = &events[1] else {
        panic!()
    };
    assert_eq!((b.time_ns, b.duration_ns), (42, 7));
    assert_eq!(b.values, [120, 0, 0, 3]);
    let mut frames = Vec::new();
    r.stack(b.stacks[0], &mut frames);
    assert_eq!(
        frames.iter().map(name).collect::<Vec<_>>(),
        ["f", "g", "7", "app"]
    );
    r.stack(b.stacks[1], &mut frames);
    assert_eq!(frames.iter().map(name).collect::<Vec<_>>(), ["8", "app"]);
}

/// The sample labels of each stack, as `k=v` joined by `,`, with the
/// stack root first, per stack.
fn labelled(r: &mut text::TextReader) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let (mut frames, mut labels) = (Vec::new(), Vec::new());
    for e in r.events() {
        let Event::Batch(b) = e else { continue };
        for &k in &b.stacks {
            r.stack(k, &mut frames);
            r.labels(k, &mut labels);
            let s: Vec<String> = frames.iter().rev().map(name).collect();
            let l: Vec<String> = labels
                .iter()
                .map(|l| format!("{}={}", l.key, l.value))
                .collect();
            out.insert(s.join(";"), l.join(","));
        }
    }
    out
}

/// A `stats()` map in text (`count N, average N, total N`, bpftrace 0.17's
/// print of `@s[ustack] = stats(x)`) is skipped as JSON's `stats` type is,
/// keeping the count maps beside it (it refused the whole file); a file
/// of skipped maps alone names them.
#[test]
fn stats_maps_are_skipped_and_a_file_of_them_alone_names_them() {
    let txt = "\
Attaching 2 probes...


@a[
    main+67
    __libc_start_call_main+122
]: 5

@h: 
[1]                    1 |@                                                   |

@lh[spin]: 
[0, 1)                57 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|

@s[
    main+60
    __libc_start_call_main+122
]: count 2, average 165, total 331
@lat[spin]: count 2, average 165, total 331
@cnt[
    main+60
    __libc_start_call_main+122
]: 7
";
    let mut r = parse_str(txt, &BpftraceOptions::default());
    assert_eq!(
        r.value_types()
            .iter()
            .map(crate::model::ValueType::profile_type)
            .collect::<Vec<_>>(),
        ["@a:count", "@cnt:count"]
    );
    let got = folded(&mut r);
    assert_eq!(got[0]["__libc_start_call_main;main"], 5);
    assert_eq!(got[1]["__libc_start_call_main;main"], 7);

    // bpftrace -f json of the same kinds: `stats` (stats() and avg()) and
    // `hist` lines are skipped; a map line without keys is a scalar.
    let json = "\
{\"type\": \"stats\", \"data\": {\"@s\": {\"spin\": {\"count\": 94, \"average\": 5, \"total\": 470}}}}
{\"type\": \"stats\", \"data\": {\"@avg\": {\"spin\": 5}}}
{\"type\": \"hist\", \"data\": {\"@h\": [{\"min\": 0, \"max\": 0, \"count\": 1}]}}
{\"type\": \"map\", \"data\": {\"@n\": 96}}
";
    for (input, skipped) in [
        (
            "@s[spin]: count 2, average 165, total 331\n@n: 3\n@h: \n[1]    1 |@|\n",
            "skipped: @s (stats()), @n (no key), @h (histogram)",
        ),
        (
            json,
            "skipped: @s (stats() or avg()), @avg (stats() or avg()), @h (histogram), @n (no key)",
        ),
    ] {
        let e = parse(input, Path::new("/b/s.txt"), 0, &BpftraceOptions::default()).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with(
                "/b/s.txt: not bpftrace output: no keyed map entry of count() or sum()"
            ),
            "{msg}"
        );
        assert!(msg.ends_with(skipped), "{msg}");
        assert!(!msg.contains('\n'), "{msg}");
    }
    // Only the exact stats() shape is skipped; other text stays an error.
    let e = parse(
        "@s[spin]: count 2, average x, total 331\n",
        Path::new("b"),
        0,
        &BpftraceOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("no integer"), "{e}");
}

/// bpftrace does not quote key values: the comm `W, C]: 7` printed as two
/// parts, so `--bpftrace-labels comm` gave comm="W" and a root frame
/// `C]: 7`. With N names the last takes the rest, in text and JSON (the
/// user's bt9 files) and before a stack (`@[comm, ustack]`); a rest past
/// a stack is refused naming the line.
#[test]
fn a_value_holding_the_separator_stays_whole_in_the_last_named_part() {
    let comm = |labels: &[&str]| BpftraceOptions {
        labels: labels.iter().map(|l| (*l).to_owned()).collect(),
        ..Default::default()
    };
    let txt = "\
Attaching 2 probes...
@[
    clock_nanosleep+101
    __libc_start_call_main+122
, tmpl]: 2
@[
    th(void*)+52
    start_thread+773
, W, C]: 7]: 20
";
    let json = "{\"type\": \"map\", \"data\": {\"@\": {\"\\n    clock_nanosleep+101\\n    \
                __libc_start_call_main+122\\n,tmpl\": 2, \"\\n    th(void*)+52\\n    \
                start_thread+773\\n,W, C]: 7\": 20}}}\n";
    let comm_first = "@[tmpl, \n    clock_nanosleep+101\n    __libc_start_call_main+122\n]: 2\n\
                      @[W, C, \n    th(void*)+52\n    start_thread+773\n]: 20\n";
    let want: BTreeMap<String, String> = [
        ("__libc_start_call_main;clock_nanosleep", "comm=tmpl"),
        ("start_thread;th(void*)", "comm=W, C]: 7"),
    ]
    .into_iter()
    .map(|(s, l)| (s.to_owned(), l.to_owned()))
    .collect();
    for input in [txt, json] {
        assert_eq!(
            labelled(&mut parse_str(input, &comm(&["comm"]))),
            want,
            "{input}"
        );
    }
    // (A head line `@[W, C]: 7, ` would read as an entry's end: `W, C`.)
    let got = labelled(&mut parse_str(comm_first, &comm(&["comm"])));
    assert_eq!(got["start_thread;th(void*)"], "comm=W, C");
    // Two names: the last (tid) takes the rest; a separator in an earlier
    // part cannot be told from one between parts (documented).
    let got = labelled(&mut parse_str(
        "@[\n    f+1\n, spin, 7]: 3\n@[\n    f+1\n, a, b, 8]: 4\n",
        &comm(&["comm", "tid"]),
    ));
    assert_eq!(got["f"], "comm=a,tid=b, 8");
    // Without names every part is a root frame, as before.
    let got = folded(&mut parse_str(txt, &BpftraceOptions::default())).remove(0);
    assert!(
        got.contains_key("W;C]: 7;start_thread;th(void*)"),
        "{got:?}"
    );
    // More parts than names past a stack: no rule, refused.
    let e = parse(
        "@[spin, \n    f+1\n, 7]: 3\n",
        Path::new("/b/k.txt"),
        0,
        &comm(&["comm"]),
    )
    .unwrap_err();
    assert_eq!(e.line(), Some(1), "{e}");
    assert!(e.to_string().contains("more than the 1 label names"), "{e}");
}

#[test]
fn bad_input_names_the_file_and_line() {
    for (input, line, what) in [
        (
            "Attaching 1 probe...\n@[\n    f+1\n, x]: 1.5\n",
            4,
            "no integer",
        ),
        ("@[\n    f+1\n    g+2\n", 1, "no `]: value` end"),
        ("@[\n    0xzz\n]: 1\n", 1, "bad address"),
        (
            "{\"type\": \"map\", \"data\": {\"@\": {\"a\": 1}}}\n{oops\n",
            2,
            "bad JSON",
        ),
        (
            "{\"type\": \"map\", \"data\": {\"@\": {\"a\": \"x\"}}}\n",
            1,
            "no integer",
        ),
    ] {
        let e = parse(input, Path::new("/b/m.txt"), 0, &BpftraceOptions::default()).unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.line(), Some(line), "{msg}");
        assert!(
            msg.starts_with(&format!("/b/m.txt:{line}: not bpftrace output: ")),
            "{msg}"
        );
        assert!(msg.contains(what), "{msg}");
    }
    let e = parse(
        "Attaching 1 probe...\n@n: 3\n",
        Path::new("e"),
        0,
        &BpftraceOptions::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("no keyed map entry"), "{e}");
}

/// A negative value (only a `sum()` of negative amounts gives one) would
/// subtract from frames: refused naming its line, text and JSON alike.
#[test]
fn negative_values_are_refused_naming_the_line() {
    for (input, line) in [
        (
            "Attaching 1 probe...\n@[\n    f+1\n]: 2\n@[\n    g+1\n]: -5\n",
            7,
        ),
        ("@cpu[\n    f+1\n, burn]: -1\n", 3),
        (
            "{\"type\": \"map\", \"data\": {\"@s\": {\"a\": 1, \"b\": -7}}}\n",
            1,
        ),
    ] {
        let e = parse(input, Path::new("/b/n.txt"), 0, &BpftraceOptions::default()).unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.line(), Some(line), "{msg}");
        assert!(
            msg.starts_with(&format!(
                "/b/n.txt:{line}: not bpftrace output: the value -"
            )),
            "{msg}"
        );
        assert!(msg.contains("is negative"), "{msg}");
    }
    // Zero is a count (an empty bucket), kept as before.
    assert!(parse(
        "@[\n    f+1\n]: 0\n@[\n    g+1\n]: 1\n",
        Path::new("z"),
        0,
        &BpftraceOptions::default()
    )
    .is_ok());
}

#[test]
fn sniff_takes_bpftrace_text_and_json() {
    for f in [
        "burn.ustack-comm.txt",
        "burn.ustack-comm.json",
        "burn.named-perf.txt",
    ] {
        let bytes = std::fs::read(fixture(f)).unwrap();
        let first = &bytes[..crate::formats::SNIFF_LEN];
        assert_eq!(crate::formats::detect(first), Some(Format::Bpftrace), "{f}");
    }
    assert_eq!(Bpftrace.sniff(b"@cpu[\n"), Sniff::Yes);
    assert_eq!(Bpftrace.sniff(b"main;foo 3\n"), Sniff::No);
    assert_eq!(Bpftrace.sniff(b"burn 410 1.5: 2 cpu-clock: \n"), Sniff::No);
}

/// A text map cut inside its last count (`]: 4` of `]: 44`) was stored:
/// a text file whose last line has no line end is refused. The JSON form,
/// cut anywhere, is bad JSON; whole without its last line end it loads.
#[test]
fn a_file_cut_inside_its_last_line_is_refused() {
    for name in ["burn.ustack-comm.txt", "burn.ustack-comm.json"] {
        let text = read(name);
        let whole = text.trim_end_matches('\n');
        let cut = &whole[..whole.len() - 1];
        let e = parse(cut, Path::new("/b/x"), 0, &BpftraceOptions::default()).unwrap_err();
        assert!(e.to_string().starts_with("/b/x:"), "{e}");
        assert!(e.line().is_some(), "{e}");
    }
    let json = read("burn.ustack-comm.json");
    let whole = json.trim_end_matches('\n');
    assert!(parse(whole, Path::new("j"), 0, &BpftraceOptions::default()).is_ok());
}

/// bpftrace prints one key twice when two stack ids print alike (seen in
/// a real `-f json` recording: `mix64+7` twice, 1 each): both counts
/// count, in JSON as in text (the JSON reader kept the last, as a JSON
/// object does).
#[test]
fn a_key_printed_twice_counts_twice_in_json_and_text() {
    let json = "{\"type\": \"attached_probes\", \"data\": {\"probes\": 1}}\n\
        {\"type\": \"map\", \"data\": {\"@\": {\"\\n    f+1\\n    main+2\\n,app\": 3, \
        \"\\n    g+1\\n    main+2\\n,app\": 1, \"\\n    f+1\\n    main+2\\n,app\": 4}}}\n";
    let txt = "@[\n    f+1\n    main+2\n, app]: 3\n@[\n    g+1\n    main+2\n, app]: 1\n\
        @[\n    f+1\n    main+2\n, app]: 4\n\n";
    let want: BTreeMap<String, i64> =
        [("app;main;f".to_string(), 7), ("app;main;g".to_string(), 1)]
            .into_iter()
            .collect();
    let opts = BpftraceOptions::default();
    assert_eq!(folded(&mut parse_str(json, &opts)).remove(0), want);
    assert_eq!(folded(&mut parse_str(txt, &opts)).remove(0), want);
}
