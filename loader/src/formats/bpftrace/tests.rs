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
        labels: vec!["comm".into()],
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
    assert_eq!(frames.iter().map(name).collect::<Vec<_>>(), ["f", "g", "7"]);
    r.stack(b.stacks[1], &mut frames);
    assert_eq!(frames.iter().map(name).collect::<Vec<_>>(), ["8"]);
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
