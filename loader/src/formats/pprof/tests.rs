//! Tests against `go tool pprof`'s own output for real Go profiles
//! (`fixtures/continuous/pprof/`, rebuilt by `fixtures/continuous/generate.sh`).
//! The goldens are parsed here on their own terms; the expected side is
//! computed from the decoded samples by the straightforward definitions
//! (flat = value of the leaf frame, cum = value once per stack that contains
//! the function), never by the decoder's code.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::PathBuf;

use prost::Message;

use super::*;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/continuous/pprof")
}

fn load(name: &str) -> PprofProfile {
    read_file(&dir().join(name), &DecodeOptions::default()).unwrap()
}

fn golden(name: &str) -> String {
    let path = dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Profiles and their sample types, as generate.sh writes goldens for them.
const PROFILES: [(&str, &[&str]); 5] = [
    ("cpu", &["samples", "cpu"]),
    ("cpu2", &["samples", "cpu"]),
    (
        "heap",
        &[
            "alloc_objects",
            "alloc_space",
            "inuse_objects",
            "inuse_space",
        ],
    ),
    ("mutex", &["contentions", "delay"]),
    ("block", &["contentions", "delay"]),
];

/// A value as `go tool pprof -unit=ns|B|count` prints it: an exact integer,
/// with `ns` or `B` appended.
fn parse_value(s: &str) -> i64 {
    let digits = s
        .strip_suffix("ns")
        .or_else(|| s.strip_suffix('B'))
        .unwrap_or(s);
    digits
        .parse()
        .unwrap_or_else(|_| panic!("unexpected value {s:?} in a golden"))
}

/// `64B`, `1.12kB`, `1MB` (pprof's scaled byte labels, 1024-based) as bytes,
/// with the half-unit of the last printed digit as tolerance.
fn parse_bytes_label(s: &str) -> (f64, f64) {
    for (suffix, scale) in [
        ("kB", 1024f64),
        ("MB", 1024f64 * 1024.0),
        ("GB", 1024f64 * 1024.0 * 1024.0),
        ("B", 1.0),
    ] {
        if let Some(n) = s.strip_suffix(suffix) {
            let decimals = n.split_once('.').map_or(0, |(_, d)| d.len());
            let tol = 0.5 * scale / 10f64.powi(i32::try_from(decimals).unwrap());
            return (n.parse::<f64>().unwrap() * scale, tol);
        }
    }
    panic!("unexpected numeric label {s:?}")
}

#[derive(Debug, Default, PartialEq)]
struct Trace {
    labels: BTreeMap<String, String>,
    value: i64,
    frames: Vec<(String, bool)>,
}

/// Parses `go tool pprof -traces`: blocks between separator lines, label
/// lines (`key:  v1 v2`), then `VALUE   leaf` and one indented frame a line.
fn parse_traces(text: &str) -> Vec<Trace> {
    const SEP: &str = "-----------+-------------------------------------------------------";
    let mut blocks = text.split(SEP).skip(1).collect::<Vec<_>>();
    assert_eq!(
        blocks.pop().map(str::trim),
        Some(""),
        "traces end with a separator"
    );
    blocks
        .into_iter()
        .map(|block| {
            let mut t = Trace::default();
            for line in block.lines().filter(|l| !l.trim().is_empty()) {
                let frame = |name: &str| match name.strip_suffix(" (inline)") {
                    Some(n) => (n.to_string(), true),
                    None => (name.to_string(), false),
                };
                if let Some(name) = line.strip_prefix("             ") {
                    assert!(!t.frames.is_empty(), "continuation before a leaf: {line:?}");
                    t.frames.push(frame(name));
                    continue;
                }
                let trimmed = line.trim_start();
                let (first, rest) = trimmed.split_once(' ').unwrap();
                if let Some(key) = first.strip_suffix(':') {
                    t.labels
                        .insert(key.to_string(), rest.trim_start().to_string());
                } else {
                    t.value = parse_value(first);
                    t.frames.push(frame(rest.strip_prefix("  ").unwrap()));
                }
            }
            t
        })
        .collect()
}

/// `go tool pprof` shows a profile after `profile.Merge` of it alone: samples
/// whose values are all zero go, samples with the same stack (locations
/// compared by address, mapping and lines) and labels are summed into the
/// first, and locations are renumbered 1.. in order of first use. This is
/// that reference, computed on the decoded samples: the groups of sample
/// indexes that become one, and the new location ids.
fn merge_groups(p: &PprofProfile) -> (Vec<Vec<usize>>, HashMap<usize, u64>) {
    let loc_key = |li: usize| {
        let l = &p.locations[li];
        let lines = l
            .lines
            .iter()
            .map(|x| (x.function, x.line))
            .collect::<Vec<_>>();
        (l.address, l.mapping, lines, l.is_folded)
    };
    let mut by_key = HashMap::new();
    let mut renumber = HashMap::new();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut index = HashMap::new();
    for (si, s) in p.samples.iter().enumerate() {
        if s.values.iter().all(|&v| v == 0) {
            continue;
        }
        let ids = s
            .locations
            .iter()
            .map(|&li| {
                let next = u64::try_from(by_key.len() + 1).unwrap();
                let id = *by_key.entry(loc_key(li)).or_insert(next);
                renumber.entry(li).or_insert(id);
                id
            })
            .collect::<Vec<_>>();
        let mut labels = s.labels.clone();
        labels.sort();
        let mut nums = s
            .num_labels
            .iter()
            .map(|n| (n.key.clone(), n.value, n.unit.clone()))
            .collect::<Vec<_>>();
        nums.sort();
        let g = *index.entry((ids, labels, nums)).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(si);
    }
    (groups, renumber)
}

/// The merged samples: each group's first sample with the group's values
/// summed.
fn apply_groups(p: &PprofProfile, groups: &[Vec<usize>]) -> Vec<Sample> {
    groups
        .iter()
        .map(|g| {
            let mut s = p.samples[g[0]].clone();
            for &other in &g[1..] {
                for (a, b) in s.values.iter_mut().zip(&p.samples[other].values) {
                    *a += b;
                }
            }
            s
        })
        .collect()
}

/// [`merge_groups`] then [`apply_groups`]; `before` is the profile as read
/// (pprof merges before it applies `drop_frames`), `p` the one to show.
fn pprof_merged(before: &PprofProfile, p: &PprofProfile) -> (Vec<Sample>, HashMap<usize, u64>) {
    let (groups, renumber) = merge_groups(before);
    (apply_groups(p, &groups), renumber)
}

/// What `-traces` should show for the decoded profile: every sample with a
/// non-empty stack, in file order. Numeric labels are left to the caller
/// (pprof prints them scaled).
fn expected_traces(
    before: &PprofProfile,
    p: &PprofProfile,
    index: usize,
) -> Vec<(Trace, Vec<NumLabel>)> {
    pprof_merged(before, p)
        .0
        .iter()
        .filter(|s| !s.locations.is_empty())
        .map(|s| {
            let mut labels: BTreeMap<String, Vec<&str>> = BTreeMap::new();
            for (k, v) in &s.labels {
                labels.entry(k.clone()).or_default().push(v);
            }
            let t = Trace {
                labels: labels.into_iter().map(|(k, v)| (k, v.join(" "))).collect(),
                value: s.values[index],
                frames: p
                    .frames(s)
                    .iter()
                    .map(|f| (f.name().into_owned(), f.inlined))
                    .collect(),
            };
            (t, s.num_labels.clone())
        })
        .collect()
}

fn assert_traces(before: &PprofProfile, p: &PprofProfile, index: usize, golden_name: &str) {
    let got = parse_traces(&golden(golden_name));
    let want = expected_traces(before, p, index);
    assert_eq!(got.len(), want.len(), "{golden_name}: number of traces");
    assert!(!got.is_empty(), "{golden_name}: no traces");
    for (i, (mut g, (w, nums))) in got.into_iter().zip(want).enumerate() {
        for n in &nums {
            let printed = g
                .labels
                .remove(&n.key)
                .unwrap_or_else(|| panic!("{golden_name} trace {i}: no {} label", n.key));
            let (v, tol) = parse_bytes_label(&printed);
            #[allow(clippy::cast_precision_loss)]
            let diff = (v - n.value as f64).abs();
            assert!(
                diff <= tol,
                "{golden_name} trace {i}: {} {printed} vs {}",
                n.key,
                n.value
            );
        }
        assert_eq!(g, w, "{golden_name} trace {i}");
    }
}

#[test]
fn stacks_values_and_labels_equal_go_tool_pprof_traces() {
    for (name, types) in PROFILES {
        let p = load(&format!("{name}.pb.gz"));
        for (i, t) in types.iter().enumerate() {
            assert_eq!(p.sample_types[i].kind, *t);
            assert_traces(&p, &p, i, &format!("{name}.traces.{t}.txt"));
        }
    }
}

#[test]
fn the_raw_file_decodes_as_the_gzipped_one() {
    assert_eq!(load("cpu.pb"), load("cpu.pb.gz"));
}

/// `-top` rows: function -> (flat, cum, inline label).
fn parse_top(text: &str) -> BTreeMap<String, (i64, i64, &'static str)> {
    let mut lines = text.lines();
    lines
        .by_ref()
        .find(|l| l.trim_start().starts_with("flat  flat%"))
        .expect("a -top header");
    let mut rows = BTreeMap::new();
    for line in lines {
        let tokens = line.split_whitespace().collect::<Vec<_>>();
        let name = tokens[5..].join(" ");
        let (name, label) = if let Some(n) = name.strip_suffix(" (partial-inline)") {
            (n.to_string(), "partial-inline")
        } else if let Some(n) = name.strip_suffix(" (inline)") {
            (n.to_string(), "inline")
        } else {
            (name, "")
        };
        let row = (parse_value(tokens[0]), parse_value(tokens[3]), label);
        assert!(rows.insert(name.clone(), row).is_none(), "{name} twice");
    }
    rows
}

/// flat, cum and the inline label per function from the decoded samples
/// (only samples passing `keep`).
fn compute_top(
    p: &PprofProfile,
    index: usize,
    keep: impl Fn(&Sample) -> bool,
) -> BTreeMap<String, (i64, i64, &'static str)> {
    let mut flat: HashMap<String, i64> = HashMap::new();
    let mut cum: HashMap<String, i64> = HashMap::new();
    // (caller, callee) -> inlined on every occurrence (first per sample).
    let mut edges: HashMap<(String, String), bool> = HashMap::new();
    for s in p.samples.iter().filter(|s| keep(s)) {
        let v = s.values[index];
        let frames = p.frames(s);
        if v == 0 || frames.is_empty() {
            continue;
        }
        let names = frames
            .iter()
            .map(|f| f.name().into_owned())
            .collect::<Vec<_>>();
        for n in names.iter().collect::<BTreeSet<_>>() {
            *cum.entry(n.clone()).or_default() += v;
        }
        *flat.entry(names[0].clone()).or_default() += v;
        let mut seen = HashSet::new();
        // Root to leaf: frame i is called by frame i + 1.
        for i in (0..names.len() - 1).rev() {
            let (caller, callee) = (&names[i + 1], &names[i]);
            if caller != callee && seen.insert((caller.clone(), callee.clone())) {
                let e = edges
                    .entry((caller.clone(), callee.clone()))
                    .or_insert(true);
                *e &= frames[i].inlined;
            }
        }
    }
    cum.into_iter()
        .filter(|(n, c)| *c != 0 || flat.get(n).copied().unwrap_or(0) != 0)
        .map(|(n, c)| {
            let incoming = edges.iter().filter(|((_, callee), _)| *callee == n);
            let inline = incoming.clone().any(|(_, &i)| i);
            let not = incoming.clone().any(|(_, &i)| !i);
            let label = match (inline, not) {
                (true, true) => "partial-inline",
                (true, false) => "inline",
                _ => "",
            };
            let f = flat.get(&n).copied().unwrap_or(0);
            (n, (f, c, label))
        })
        .collect()
}

use std::collections::HashSet;

#[test]
fn flat_and_cum_equal_go_tool_pprof_top_for_every_sample_type() {
    for (name, types) in PROFILES {
        let p = load(&format!("{name}.pb.gz"));
        for (i, t) in types.iter().enumerate() {
            let golden_name = format!("{name}.top.{t}.txt");
            let want = parse_top(&golden(&golden_name));
            assert!(!want.is_empty(), "{golden_name}: empty");
            assert_eq!(compute_top(&p, i, |_| true), want, "{golden_name}");
        }
    }
}

#[test]
fn a_label_filter_equals_go_tool_pprof_tagfocus() {
    let p = load("cpu.pb.gz");
    let cpu = p.sample_type_index("cpu").unwrap();
    let want = parse_top(&golden("cpu.tagfocus.handler_a.top.txt"));
    let got = compute_top(&p, cpu, |s| {
        s.labels.iter().any(|(k, v)| k == "handler" && v == "a")
    });
    assert_eq!(got, want);
    // And the other label set, as traces.
    let got = parse_traces(&golden("cpu.tagfocus.version_1.4.2.traces.txt"));
    let want = expected_traces(&p, &p, cpu)
        .into_iter()
        .map(|(t, _)| t)
        .filter(|t| t.labels.get("version").map(String::as_str) == Some("1.4.2"))
        .collect::<Vec<_>>();
    assert!(!want.is_empty());
    assert_eq!(got, want);
    // A numeric label range: heap samples with bytes >= 1 KiB.
    let h = load("heap.pb.gz");
    let want = parse_top(&golden("heap.tagfocus.bytes_ge_1kB.top.txt"));
    let got = compute_top(&h, h.sample_type_index("alloc_space").unwrap(), |s| {
        s.num_labels
            .iter()
            .any(|n| n.key == "bytes" && n.value >= 1024)
    });
    assert_eq!(got, want);
}

#[test]
fn drop_frames_and_keep_frames_prune_as_go_tool_pprof() {
    let p = load("dropframes.pb.gz");
    assert_eq!(p.drop_frames, r"main\.(fib|step)|runtime\..*");
    assert_eq!(p.keep_frames, r"runtime\.main");
    let raw = read_file(&dir().join("dropframes.pb.gz"), &unpruned()).unwrap();
    for (i, t) in ["samples", "cpu"].iter().enumerate() {
        assert_traces(&raw, &p, i, &format!("dropframes.traces.{t}.txt"));
        let want = parse_top(&golden(&format!("dropframes.top.{t}.txt")));
        assert_eq!(compute_top(&p, i, |_| true), want, "dropframes.top.{t}");
    }
    // Unpruned, the copy holds the original samples.
    assert_traces(&raw, &raw, 1, "cpu.traces.cpu.txt");
    // Pruning changed something real: fib and step are gone, runtime.main stays.
    let names = |p: &PprofProfile| {
        p.samples
            .iter()
            .flat_map(|s| {
                p.frames(s)
                    .iter()
                    .map(|f| f.name().into_owned())
                    .collect::<Vec<_>>()
            })
            .collect::<BTreeSet<_>>()
    };
    let (before, after) = (names(&raw), names(&p));
    for f in ["main.fib", "main.step", "main.mix"] {
        assert!(before.contains(f) && !after.contains(f), "{f}");
    }
    assert!(after.contains("runtime.main"));
}

fn unpruned() -> DecodeOptions {
    DecodeOptions {
        apply_drop_frames: false,
        ..DecodeOptions::default()
    }
}

/// `go tool pprof -raw`: the header, sample values and labels (exact, with
/// location ids), locations with their lines and mappings.
#[test]
fn header_samples_locations_and_mappings_equal_go_tool_pprof_raw() {
    for name in ["cpu", "cpu2", "heap", "mutex", "block", "dropframes"] {
        let p = load(&format!("{name}.pb.gz"));
        let before = read_file(&dir().join(format!("{name}.pb.gz")), &unpruned()).unwrap();
        let text = golden(&format!("{name}.raw.txt"));
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .unwrap_or_else(|| panic!("{name}.raw.txt: no {key}"))
                .trim()
                .to_string()
        };
        let pt = p.period_type.as_ref().unwrap();
        assert_eq!(
            field("PeriodType:"),
            format!("{} {}", pt.kind, pt.unit),
            "{name}"
        );
        assert_eq!(field("Period:"), p.period.to_string(), "{name}");
        assert_eq!(field("Time:"), go_time(p.time_nanos), "{name}");
        if p.duration_nanos != 0 {
            // "%.4v" of a time.Duration: 4 characters of "1.3123s".
            let secs = field("Duration:").parse::<f64>().unwrap();
            #[allow(clippy::cast_precision_loss)]
            let d = p.duration_nanos as f64 / 1e9;
            assert!((secs - d).abs() < 0.01, "{name}: duration {secs} vs {d}");
        }
        let mut lines = text.lines().skip_while(|l| *l != "Samples:").skip(1);
        let types = lines.next().unwrap();
        let want_types = p
            .sample_types
            .iter()
            .map(|t| format!("{}/{}", t.kind, t.unit))
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(types.trim(), want_types, "{name}");

        // Samples: "v1 v2: loc loc ..." then optional "key:[v] key:[v]".
        let mut got = Vec::new();
        let mut rest = lines.by_ref().take_while(|l| *l != "Locations").peekable();
        while let Some(line) = rest.next() {
            let (values, locs) = line.split_once(':').unwrap();
            let values = values
                .split_whitespace()
                .map(parse_value)
                .collect::<Vec<_>>();
            let locs = locs
                .split_whitespace()
                .map(|x| x.parse::<u64>().unwrap())
                .collect::<Vec<_>>();
            let mut labels = BTreeSet::new();
            if let Some(l) = rest.peek().filter(|l| l.contains(":[")) {
                for part in l.trim().split("] ") {
                    let (k, v) = part.trim_end_matches(']').split_once(":[").unwrap();
                    labels.insert((k.to_string(), v.to_string()));
                }
                rest.next();
            }
            got.push((values, locs, labels));
        }
        let (merged, renumber) = pprof_merged(&before, &p);
        let want = merged
            .iter()
            .map(|s| {
                let locs = s
                    .locations
                    .iter()
                    .map(|&l| renumber[&l])
                    .collect::<Vec<_>>();
                let mut labels = s.labels.iter().cloned().collect::<BTreeSet<_>>();
                labels.extend(
                    s.num_labels
                        .iter()
                        .map(|n| (n.key.clone(), n.value.to_string())),
                );
                (s.values.clone(), locs, labels)
            })
            .collect::<Vec<_>>();
        assert_eq!(got, want, "{name}: samples");

        // Locations and mappings: the text pprof's Location.string and
        // Mapping.string print for what was decoded.
        let section = text
            .lines()
            .skip_while(|l| *l != "Locations")
            .skip(1)
            .take_while(|l| *l != "Mappings")
            .collect::<Vec<_>>();
        let mut want = Vec::new();
        let mut order = renumber
            .iter()
            .map(|(&li, &id)| (id, li))
            .collect::<Vec<_>>();
        order.sort_unstable();
        order.dedup_by_key(|x| x.0);
        let mut used_mappings = Vec::new();
        for &(id, li) in &order {
            let l = &p.locations[li];
            if let Some(m) = l.mapping.filter(|m| !used_mappings.contains(m)) {
                used_mappings.push(m);
            }
            let mut head = format!("{id:>6}: {:#x} ", l.address);
            if let Some(m) = l.mapping {
                let pos = used_mappings.iter().position(|&u| u == m).unwrap() + 1;
                head += &format!("M={pos} ");
            }
            for line in &l.lines {
                let f = &p.functions[line.function.unwrap()];
                want.push(format!(
                    "{head}{} {}:{} s={}",
                    f.name, f.filename, line.line, f.start_line
                ));
                head = " ".repeat(13);
            }
        }
        assert_eq!(section, want, "{name}: locations");
        let mappings = text
            .lines()
            .skip_while(|l| *l != "Mappings")
            .skip(1)
            .collect::<Vec<_>>();
        // Mappings no location uses are gone; ids are renumbered (and the
        // file's first mapping, the main binary, stays first).
        let want = used_mappings
            .iter()
            .map(|&m| {
                let m = &p.mappings[m];
                let bits = [
                    (m.has_functions, "[FN]"),
                    (m.has_filenames, "[FL]"),
                    (m.has_line_numbers, "[LN]"),
                    (m.has_inline_frames, "[IN]"),
                ]
                .iter()
                .filter(|b| b.0)
                .map(|b| b.1)
                .collect::<String>();
                format!(
                    ": {:#x}/{:#x}/{:#x} {} {} {bits}",
                    m.memory_start, m.memory_limit, m.file_offset, m.filename, m.build_id
                )
            })
            .collect::<Vec<_>>();
        let mappings = mappings
            .iter()
            .enumerate()
            .map(|(i, m)| m.strip_prefix(&(i + 1).to_string()).unwrap().to_string())
            .collect::<Vec<_>>();
        assert_eq!(mappings, want, "{name}: mappings");
    }
}

/// Go's `time.Unix(0, ns).String()` in UTC: `2026-12-01 13:13:20.047733706
/// +0000 UTC` (trailing zeros of the fraction dropped).
fn go_time(ns: i64) -> String {
    let (secs, frac) = (ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000));
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let mut s = format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    );
    if frac != 0 {
        s += format!(".{frac:09}").trim_end_matches('0');
    }
    s + " +0000 UTC"
}

#[test]
fn go_heap_profile_has_the_four_types_and_object_size_labels() {
    let p = load("heap.pb.gz");
    let types = p
        .sample_types
        .iter()
        .map(|t| (t.kind.as_str(), t.unit.as_str()))
        .collect::<Vec<_>>();
    assert_eq!(
        types,
        [
            ("alloc_objects", "count"),
            ("alloc_space", "bytes"),
            ("inuse_objects", "count"),
            ("inuse_space", "bytes")
        ]
    );
    // MemProfileRate = 1: every sample is exact, space = objects x size.
    let mut sized = 0;
    for s in &p.samples {
        match s.num_labels.iter().find(|n| n.key == "bytes") {
            Some(size) => {
                assert_eq!(s.values[1], s.values[0] * size.value);
                assert_eq!(s.values[3], s.values[2] * size.value);
                sized += 1;
            }
            None => assert_eq!((s.values[1], s.values[3]), (0, 0), "{s:?}"),
        }
    }
    assert!(sized > 300, "{sized} samples with a size");
    // The inlinable newBuf allocates: an inlined frame at the leaf.
    assert!(p.samples.iter().any(|s| {
        let f = p.frames(s);
        f[0].name() == "main.newBuf" && f[0].inlined && f[1].name() == "main.allocKept"
    }));
}

// --- Bad input -------------------------------------------------------------

fn decode_err(name: &str, bytes: &[u8], options: &DecodeOptions) -> String {
    let path = PathBuf::from(name);
    let e = decode(&path, bytes, options)
        .expect_err("must fail")
        .to_string();
    assert!(e.starts_with(&format!("{name}: ")), "names the file: {e}");
    assert!(!e.contains('\n'), "one line: {e}");
    e
}

/// Top-level field starts of a raw profile, read independently with a
/// minimal protobuf walker.
fn field_starts(buf: &[u8]) -> Vec<usize> {
    let varint = |pos: &mut usize| {
        let mut v = 0u64;
        let mut shift = 0;
        loop {
            let b = buf[*pos];
            *pos += 1;
            v |= u64::from(b & 0x7f) << shift;
            shift += 7;
            if b < 0x80 {
                return v;
            }
        }
    };
    let mut starts = Vec::new();
    let mut pos = 0;
    while pos < buf.len() {
        starts.push(pos);
        let key = varint(&mut pos);
        match key & 7 {
            0 => {
                varint(&mut pos);
            }
            2 => {
                let len = varint(&mut pos);
                pos += usize::try_from(len).unwrap();
            }
            w => panic!("wire type {w}"),
        }
    }
    starts
}

#[test]
fn a_truncated_profile_names_the_byte_offset_of_the_cut_field() {
    let raw = std::fs::read(dir().join("cpu.pb")).unwrap();
    let starts = field_starts(&raw);
    for cut in [raw.len() / 3, raw.len() / 2, raw.len() - 1] {
        let field = *starts.iter().rev().find(|&&s| s < cut).unwrap();
        let e = decode_err("cut.pb", &raw[..cut], &DecodeOptions::default());
        assert!(
            e.contains(&format!("byte {field}:")) && e.contains("truncated"),
            "cut at {cut}, field at {field}: {e}"
        );
    }
    // Cut inside the gzip stream.
    let gz = std::fs::read(dir().join("cpu.pb.gz")).unwrap();
    let e = decode_err("cut.pb.gz", &gz[..gz.len() / 2], &DecodeOptions::default());
    assert!(e.contains("gzip"), "{e}");
}

#[test]
fn garbage_and_empty_files_are_refused() {
    let e = decode_err(
        "text.pb",
        b"this is not a profile\n",
        &DecodeOptions::default(),
    );
    assert!(e.contains("not a pprof profile"), "{e}");
    let e = decode_err("empty.pb", b"", &DecodeOptions::default());
    assert!(e.contains("empty"), "{e}");
    let e = decode_err("zeros.pb", &[0; 64], &DecodeOptions::default());
    assert!(e.contains("byte 0"), "{e}");
    // Valid protobuf, but no string table: not a profile either.
    let no_strings = proto::Profile {
        period: 5,
        ..Default::default()
    };
    let e = decode_err(
        "nostrings.pb",
        &no_strings.encode_to_vec(),
        &DecodeOptions::default(),
    );
    assert!(e.contains("string table"), "{e}");
    // A missing file names itself too.
    let e = read_file(Path::new("/nonexistent/x.pb.gz"), &DecodeOptions::default()).unwrap_err();
    assert!(e.to_string().starts_with("/nonexistent/x.pb.gz: "), "{e}");
}

#[test]
fn a_gzip_bomb_stops_at_the_cap() {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..64 {
        enc.write_all(&zeros).unwrap();
    }
    let bomb = enc.finish().unwrap();
    assert!(bomb.len() < 200_000);
    let opts = DecodeOptions {
        max_decompressed_bytes: 8 << 20,
        ..DecodeOptions::default()
    };
    let e = decode_err("bomb.pb.gz", &bomb, &opts);
    assert!(
        e.contains("larger than 8388608 bytes after decompression"),
        "{e}"
    );
    // A raw file over the cap, read from disk.
    let tmp = std::env::temp_dir().join(format!("flamehouse-pprof-big-{}.pb", std::process::id()));
    std::fs::write(&tmp, vec![0u8; 2048]).unwrap();
    let small = DecodeOptions {
        max_decompressed_bytes: 1024,
        ..DecodeOptions::default()
    };
    let e = read_file(&tmp, &small).unwrap_err().to_string();
    std::fs::remove_file(&tmp).unwrap();
    assert!(
        e.starts_with(&tmp.display().to_string()) && e.contains("larger than 1024"),
        "{e}"
    );
}

/// A valid profile of millions of empty samples (2 bytes each on the
/// wire, a struct of vectors each decoded: 65 KB gzipped took 3.9 GB) is
/// refused before decoding once it holds more entries than the limit,
/// the default included.
#[test]
fn a_profile_of_more_entries_than_the_limit_is_refused_before_decoding() {
    let empty_samples =
        |n: usize| -> Vec<u8> { std::iter::repeat_n([0x12u8, 0], n).flatten().collect() };
    let small = DecodeOptions {
        max_entries: 10,
        ..DecodeOptions::default()
    };
    let e = decode_err("many.pb", &empty_samples(11), &small);
    assert!(
        e.contains("holds 11 entries") && e.contains("limit of 10") && e.contains("--max-entries"),
        "{e}"
    );
    let n = usize::try_from(crate::formats::wire::DEFAULT_MAX_ENTRIES).unwrap() + 1;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(&empty_samples(n)).unwrap();
    let gz = enc.finish().unwrap();
    assert!(gz.len() < 100_000, "{}", gz.len());
    let e = decode_err("bomb.pb.gz", &gz, &DecodeOptions::default());
    assert!(e.contains(&format!("holds {n} entries")), "{e}");
}

/// The samples' location ids are limited on their own (a one-byte id is a
/// word decoded, then a frame of a stack: 200,000 samples of 50 ids, an
/// 8 MB gzipped file, took 4.5 GB), packed as prost writes them or not,
/// counted before decoding; at the limit the profile decodes.
#[test]
fn a_profile_of_more_stack_frames_than_the_limit_is_refused_before_decoding() {
    let mut p = small_profile();
    // 3 samples of 2 ids each (the first is small_profile's own): 6 ids on
    // the wire, 9 frames with location 10's inlined line expanded (3 a
    // stack).
    for _ in 0..2 {
        let s = p.sample[0].clone();
        p.sample.push(s);
    }
    let bytes = p.encode_to_vec();
    let read = |max_stack_frames, max_stack_depth| {
        let o = DecodeOptions {
            max_stack_frames,
            max_stack_depth,
            ..DecodeOptions::default()
        };
        decode(Path::new("deep.pb"), &bytes, &o)
            .map(|p| p.samples.len())
            .map_err(|e| e.to_string())
    };
    assert_eq!(read(9, 3), Ok(3));
    for (frames, depth, says, option) in [
        // On the wire, before decoding.
        (
            5,
            3,
            "hold 6 frames in all, more than the limit of 5",
            "--max-stack-frames",
        ),
        (
            9,
            1,
            "hold 2 frames in one stack, more than the limit of 1",
            "--max-stack-depth",
        ),
        // Decoded, inlined lines counted (a location of 65,000 lines
        // under two ids a sample made 143 KB take 3.9 GB).
        (
            8,
            3,
            "hold 9 frames in all, inlined lines counted, more than the limit of 8",
            "--max-stack-frames",
        ),
        (
            9,
            2,
            "hold 3 frames in one stack, inlined lines counted, more than the limit of 2",
            "--max-stack-depth",
        ),
    ] {
        let e = read(frames, depth).unwrap_err();
        assert!(
            e.contains(says) && e.contains(option) && !e.contains('\n'),
            "{e}"
        );
    }
    // Unpacked ids (field 1 repeated as varints, which decoders accept):
    // one sample of ids 10, 20, 10.
    let unpacked = [0x12u8, 6, 0x08, 10, 0x08, 20, 0x08, 10];
    let o = DecodeOptions {
        max_stack_frames: 2,
        ..DecodeOptions::default()
    };
    let e = decode_err("unpacked.pb", &unpacked, &o);
    assert!(e.contains("hold 3 frames in all"), "{e}");
}

/// Names and labels are counted as resolving copies them, each time they
/// are named, before they are: a 66 KB file naming one 64 MiB label value
/// from 100 series took 12 GB; at the limit the profile decodes. The
/// count, by hand, of small_profile's strings as named: sample types
/// `samples count` and `cpu nanoseconds` (26), period type `cpu
/// nanoseconds` (14), functions `main main f.c` and `leaf leaf f.c` (22),
/// mapping `f.c` (3), labels `k v`, `size bytes` and `size` (15): 80.
#[test]
fn names_past_the_limit_are_refused_before_they_are_resolved() {
    let at = |p: &proto::Profile, max_names_bytes| {
        let o = DecodeOptions {
            max_names_bytes,
            ..DecodeOptions::default()
        };
        decode(Path::new("n.pb"), &p.encode_to_vec(), &o)
            .map(|_| ())
            .map_err(|e| e.to_string())
    };
    let small = small_profile();
    let base = 26 + 14 + 22 + 3 + 15;
    assert_eq!(at(&small, base), Ok(()));
    let e = at(&small, base - 1).unwrap_err();
    assert!(
        e.contains(&format!("take {base} bytes as decoded")) && e.contains("--max-names-mib"),
        "{e}"
    );
    // `main` of 1000 bytes: its function's name and system name both.
    let mut big = small_profile();
    big.string_table[5] = "m".repeat(1000).into_bytes();
    let grown = base + 2 * (1000 - 4);
    assert_eq!(at(&big, grown), Ok(()));
    assert!(at(&big, grown - 1).is_err());
}

/// A small profile written with the proto structs: strings, 2 sample types.
fn small_profile() -> proto::Profile {
    let strings = [
        "",
        "cpu",
        "nanoseconds",
        "samples",
        "count",
        "main",
        "leaf",
        "f.c",
        "size",
        "bytes",
        "k",
        "v",
    ];
    proto::Profile {
        sample_type: vec![
            proto::ValueType { r#type: 3, unit: 4 },
            proto::ValueType { r#type: 1, unit: 2 },
        ],
        string_table: strings.iter().map(|s| s.as_bytes().to_vec()).collect(),
        function: vec![
            proto::Function {
                id: 1,
                name: 5,
                system_name: 5,
                filename: 7,
                start_line: 1,
            },
            proto::Function {
                id: 2,
                name: 6,
                system_name: 6,
                filename: 7,
                start_line: 9,
            },
        ],
        location: vec![
            proto::Location {
                id: 10,
                address: 0x1234,
                line: vec![
                    proto::Line {
                        function_id: 2,
                        line: 11,
                        column: 0,
                    },
                    proto::Line {
                        function_id: 1,
                        line: 3,
                        column: 0,
                    },
                ],
                ..Default::default()
            },
            proto::Location {
                id: 20,
                address: 0x5678,
                mapping_id: 7,
                ..Default::default()
            },
        ],
        mapping: vec![proto::Mapping {
            id: 7,
            memory_start: 0x1000,
            memory_limit: 0x9000,
            filename: 7,
            ..Default::default()
        }],
        sample: vec![proto::Sample {
            location_id: vec![10, 20],
            value: vec![1, 10],
            label: vec![
                proto::Label {
                    key: 10,
                    str: 11,
                    ..Default::default()
                },
                proto::Label {
                    key: 8,
                    num: 64,
                    num_unit: 9,
                    ..Default::default()
                },
                proto::Label {
                    key: 8,
                    num: 0,
                    num_unit: 0,
                    ..Default::default()
                },
            ],
        }],
        period_type: Some(proto::ValueType { r#type: 1, unit: 2 }),
        period: 1000,
        time_nanos: 5,
        duration_nanos: 6,
        ..Default::default()
    }
}

/// A time or duration before 0 is refused (it was taken as unset: the
/// profile stored at the file's time without a word).
#[test]
fn negative_times_are_refused() {
    for (time, duration, field) in [
        (-1, 6, "time_nanos (field 9) is -1"),
        (5, -7, "duration_nanos (field 10) is -7"),
    ] {
        let mut p = small_profile();
        (p.time_nanos, p.duration_nanos) = (time, duration);
        let e = decode(
            Path::new("neg.pb"),
            &p.encode_to_vec(),
            &DecodeOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("neg.pb: invalid pprof profile: ") && e.contains(field),
            "{e}"
        );
    }
}

#[test]
fn labels_units_inlined_lines_and_unsymbolized_locations_resolve() {
    let bytes = small_profile().encode_to_vec();
    let p = decode(Path::new("small.pb"), &bytes, &DecodeOptions::default()).unwrap();
    let s = &p.samples[0];
    assert_eq!(s.labels, [("k".to_string(), "v".to_string())]);
    // The zero numeric label without a unit is dropped, as pprof drops it.
    assert_eq!(
        s.num_labels,
        [NumLabel {
            key: "size".into(),
            value: 64,
            unit: Some("bytes".into())
        }]
    );
    let frames = p.frames(s);
    let shown = frames
        .iter()
        .map(|f| (f.name().into_owned(), f.inlined, f.line, f.location.address))
        .collect::<Vec<_>>();
    assert_eq!(
        shown,
        [
            ("leaf".to_string(), true, 11, 0x1234),
            ("main".to_string(), false, 3, 0x1234),
            ("0x5678".to_string(), false, 0, 0x5678),
        ]
    );
    assert_eq!(p.mapping(frames[2].location).unwrap().memory_start, 0x1000);
    assert_eq!((p.period, p.time_nanos, p.duration_nanos), (1000, 5, 6));
    assert_eq!(
        p.period_type,
        Some(ValueType {
            kind: "cpu".into(),
            unit: "nanoseconds".into()
        })
    );
}

/// A string that is not UTF-8 (Go's strings are bytes: `runtime/pprof`
/// writes a label value taken from a request as it is) is read as U+FFFD,
/// as `go tool pprof` reads the file (it shows `/caf\351`); the whole
/// profile used to be refused as "not a pprof profile".
#[test]
fn strings_that_are_not_utf8_read_as_replacement_characters() {
    let mut p = small_profile();
    p.string_table[5] = b"ma\xffin".to_vec();
    p.string_table[11] = b"/caf\xe9".to_vec();
    let d = decode(
        Path::new("latin1.pb"),
        &p.encode_to_vec(),
        &DecodeOptions::default(),
    )
    .unwrap();
    let s = &d.samples[0];
    assert_eq!(s.labels, [("k".to_string(), "/caf\u{fffd}".to_string())]);
    let names: Vec<String> = d.frames(s).iter().map(|f| f.name().into_owned()).collect();
    assert_eq!(names, ["leaf", "ma\u{fffd}in", "0x5678"]);
}

#[test]
fn broken_references_name_what_is_wrong() {
    type Break = fn(&mut proto::Profile);
    let cases: [(&str, Break); 7] = [
        // No sample types: nothing says what the values count (`go tool
        // pprof`: "malformed profile: missing sample type information");
        // it used to load as an empty profile, exit 0.
        ("no sample types (sample_type is empty)", |p| {
            p.sample_type.clear();
            for s in &mut p.sample {
                s.value.clear();
            }
        }),
        ("no sample types (sample_type is empty)", |p| {
            p.sample_type.clear();
            p.sample.clear();
        }),
        ("sample_type[1]: string index 99", |p| {
            p.sample_type[1].unit = 99
        }),
        (
            "sample 0 has 1 values but the profile has 2 sample types",
            |p| p.sample[0].value.pop().map(drop).unwrap(),
        ),
        ("sample 0: unknown location id 30", |p| {
            p.sample[0].location_id.push(30)
        }),
        ("location 20 (location[1]): unknown mapping id 8", |p| {
            p.location[1].mapping_id = 8
        }),
        ("drop_frames \"(\" is not a valid regexp", |p| {
            p.string_table.push("(".into());
            p.drop_frames = i64::try_from(p.string_table.len() - 1).unwrap();
        }),
    ];
    for (want, break_it) in cases {
        let mut m = small_profile();
        break_it(&mut m);
        let e = decode_err("broken.pb", &m.encode_to_vec(), &DecodeOptions::default());
        assert!(e.contains(want), "want {want:?} in {e}");
    }
}

#[test]
fn simplify_func_drops_argument_lists_but_not_reserved_names() {
    assert_eq!(simplify_func("foo(int, char)"), "foo");
    assert_eq!(simplify_func(".foo"), "foo");
    assert_eq!(
        simplify_func("(anonymous namespace)::f(int)"),
        "(anonymous namespace)::f"
    );
    assert_eq!(simplify_func("S::operator()(int) const"), "S::operator()");
    assert_eq!(simplify_func("main.(*T).m"), "main.");
}

/// Call edges `(caller, callee)` -> (value, inlined on every occurrence):
/// each edge once per sample, self-calls skipped, as pprof builds its graph.
fn compute_edges(p: &PprofProfile, index: usize) -> HashMap<(String, String), (i64, bool)> {
    let mut edges: HashMap<(String, String), (i64, bool)> = HashMap::new();
    for s in &p.samples {
        let v = s.values[index];
        let frames = p.frames(s);
        if v == 0 || frames.is_empty() {
            continue;
        }
        let mut seen = HashSet::new();
        for i in (0..frames.len() - 1).rev() {
            let pair = (
                frames[i + 1].name().into_owned(),
                frames[i].name().into_owned(),
            );
            if pair.0 != pair.1 && seen.insert(pair.clone()) {
                let e = edges.entry(pair).or_insert((0, true));
                e.0 += v;
                e.1 &= frames[i].inlined;
            }
        }
    }
    edges
}

/// `-peek REGEX`: per matched function, its callers and callees with the
/// value that flowed along each edge, and its own flat and cum.
#[derive(Debug, PartialEq)]
struct Peek {
    callers: BTreeMap<String, (i64, bool)>,
    node: (String, i64, i64),
    callees: BTreeMap<String, (i64, bool)>,
}

fn parse_peek(text: &str) -> Vec<Peek> {
    const SEP: &str = "----------------------------------------------------------+-------------";
    let blocks = text.split(SEP).skip(2).filter(|b| b.contains('|'));
    blocks
        .map(|block| {
            let mut callers = BTreeMap::new();
            let mut callees = BTreeMap::new();
            let mut node = None;
            for line in block.lines().filter(|l| l.contains('|')) {
                let (left, right) = line.split_once('|').unwrap();
                let tokens = left.split_whitespace().collect::<Vec<_>>();
                if let Some(name) = right.strip_prefix("   ") {
                    let (name, inline) = match name.strip_suffix(" (inline)") {
                        Some(n) => (n, true),
                        None => (name, false),
                    };
                    let edge = (parse_value(tokens[0]), inline);
                    let side = if node.is_none() {
                        &mut callers
                    } else {
                        &mut callees
                    };
                    side.insert(name.to_string(), edge);
                } else {
                    let name = right.trim().trim_end_matches(" (inline)").to_string();
                    node = Some((name, parse_value(tokens[0]), parse_value(tokens[3])));
                }
            }
            Peek {
                callers,
                node: node.expect("a peek block has its node line"),
                callees,
            }
        })
        .collect()
}

#[test]
fn callers_and_callees_equal_go_tool_pprof_peek() {
    let p = load("cpu.pb.gz");
    let cpu = p.sample_type_index("cpu").unwrap();
    let top = compute_top(&p, cpu, |_| true);
    let edges = compute_edges(&p, cpu);
    for (golden_name, function) in [
        ("cpu.peek.fib.txt", "main.fib"),
        ("cpu.peek.hashLoop.txt", "main.hashLoop"),
    ] {
        let side = |pick: fn(&(String, String)) -> (&String, &String)| {
            edges
                .iter()
                .filter(|(k, _)| pick(k).0 == function)
                .map(|(k, &e)| (pick(k).1.clone(), e))
                .collect::<BTreeMap<_, _>>()
        };
        let want = Peek {
            callers: side(|(caller, callee)| (callee, caller)),
            node: (function.to_string(), top[function].0, top[function].1),
            callees: side(|(caller, callee)| (caller, callee)),
        };
        assert!(!want.callers.is_empty() && !want.callees.is_empty());
        assert_eq!(parse_peek(&golden(golden_name)), [want], "{golden_name}");
    }
}

/// `-diff_base cpu.pb.gz cpu2.pb.gz`: the base's samples count negated.
#[test]
fn a_diff_equals_go_tool_pprof_diff_base() {
    let mut both = load("cpu2.pb.gz");
    let base = load("cpu.pb.gz");
    let (functions, locations) = (both.functions.len(), both.locations.len());
    both.functions.extend(base.functions.iter().cloned());
    both.locations.extend(base.locations.iter().map(|l| {
        let mut l = l.clone();
        for line in &mut l.lines {
            line.function = line.function.map(|f| f + functions);
        }
        l.mapping = None;
        l
    }));
    both.samples.extend(base.samples.iter().map(|s| {
        let mut s = s.clone();
        s.locations.iter_mut().for_each(|l| *l += locations);
        s.values.iter_mut().for_each(|v| *v = -*v);
        s
    }));
    let cpu = both.sample_type_index("cpu").unwrap();
    let want = parse_top(&golden("cpu2.diff_base_cpu.top.txt"));
    assert!(want.values().any(|r| r.0 < 0) && want.values().any(|r| r.0 > 0));
    assert_eq!(compute_top(&both, cpu, |_| true), want);
}

/// pprof's Prune on a hand-made profile: a matching root frame is kept (no
/// untouched frame before it), a matching whole location cuts it and all
/// below, a match inside an inlined location cuts the lines from it inward,
/// and `keep_frames` saves a frame `drop_frames` matches.
#[test]
fn prune_keeps_matching_roots_and_cuts_inlined_lines() {
    let names = [
        "",
        "runtime.goexit",
        "main.work",
        "runtime.mallocgc(int)",
        "leaf",
    ];
    let mut strings = names.iter().map(ToString::to_string).collect::<Vec<_>>();
    strings.extend([
        "samples".into(),
        "count".into(),
        r"runtime\..*".into(),
        r"runtime\.mallocgc".into(),
    ]);
    let function = |id: u64| proto::Function {
        id,
        name: i64::try_from(id).unwrap(),
        ..Default::default()
    };
    let line = |f: u64| proto::Line {
        function_id: f,
        ..Default::default()
    };
    let location = |id: u64, fs: &[u64]| proto::Location {
        id,
        address: id * 16,
        line: fs.iter().map(|&f| line(f)).collect(),
        ..Default::default()
    };
    let sample = |locs: &[u64]| proto::Sample {
        location_id: locs.to_vec(),
        value: vec![1],
        label: vec![],
    };
    let profile = |keep: i64| proto::Profile {
        sample_type: vec![proto::ValueType { r#type: 5, unit: 6 }],
        string_table: strings.iter().map(|s| s.as_bytes().to_vec()).collect(),
        function: (1..=4).map(function).collect(),
        // 1 goexit, 2 work, 3 mallocgc, 4 leaf, 5 leaf+mallocgc inlined into work.
        location: vec![
            location(1, &[1]),
            location(2, &[2]),
            location(3, &[3]),
            location(4, &[4]),
            location(5, &[4, 3, 2]),
        ],
        sample: vec![
            sample(&[4, 3, 2, 1]),
            sample(&[1]),
            sample(&[5, 1]),
            sample(&[4, 1, 2]),
        ],
        drop_frames: 7,
        keep_frames: keep,
        ..Default::default()
    };
    let stacks = |m: &proto::Profile| {
        let p = decode(
            Path::new("prune.pb"),
            &m.encode_to_vec(),
            &DecodeOptions::default(),
        )
        .unwrap();
        p.samples
            .iter()
            .map(|s| {
                p.frames(s)
                    .iter()
                    .map(|f| f.name().into_owned())
                    .collect::<Vec<_>>()
                    .join(";")
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        stacks(&profile(0)),
        [
            "main.work;runtime.goexit",
            "runtime.goexit",
            // The location's lines lost mallocgc and leaf; the root goexit
            // came first, so the sample itself is not cut.
            "main.work;runtime.goexit",
            // Cut at goexit under the untouched root main.work.
            "main.work",
        ]
    );
    assert_eq!(
        stacks(&profile(8)),
        [
            "leaf;runtime.mallocgc(int);main.work;runtime.goexit",
            "runtime.goexit",
            "leaf;runtime.mallocgc(int);main.work;runtime.goexit",
            "main.work",
        ]
    );
}

// ---------------------------------------------------------------------------
// Other exporters than Go's: real files from fixtures/continuous/{node,rust,
// python} (`generate.sh node rust python`) and their `go tool pprof` goldens.

/// (folder, file, golden stem) of each committed export.
const EXPORTS: [(&str, &str, &str); 8] = [
    ("node", "wall.pb.gz", "wall"),
    ("node", "wall-lines.pb.gz", "wall-lines"),
    ("node", "heap.pb.gz", "heap"),
    ("rust", "cpu.pb", "cpu"),
    ("python", "work.pprof", "work"),
    ("java", "cpu.pb.gz", "cpu"),
    ("java", "alloc.pb.gz", "alloc"),
    ("java", "lock.pb.gz", "lock"),
];

fn exports_dir(folder: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/continuous")
        .join(folder)
}

fn export_golden(folder: &str, name: &str) -> String {
    let path = exports_dir(folder).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every sample type of every export decodes with the name and unit
/// `go tool pprof -raw` lists, and flat and cum of every function equal
/// `-top` (a type all zero: nothing, as `-top` shows nothing).
#[test]
fn other_exporters_flat_and_cum_equal_go_tool_pprof_top() {
    for (folder, file, stem) in EXPORTS {
        let p = read_file(&exports_dir(folder).join(file), &DecodeOptions::default())
            .unwrap_or_else(|e| panic!("{e}"));
        let raw = export_golden(folder, &format!("{stem}.raw.txt"));
        let listed = raw
            .lines()
            .skip_while(|l| *l != "Samples:")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>();
        let decoded = p
            .sample_types
            .iter()
            .map(|t| format!("{}/{}", t.kind, t.unit))
            .collect::<Vec<_>>();
        assert_eq!(decoded, listed, "{folder}/{file}");
        for (i, t) in p.sample_types.iter().enumerate() {
            let golden_name = format!("{stem}.top.{}.txt", t.kind);
            let want = parse_top(&export_golden(folder, &golden_name));
            assert_eq!(compute_top(&p, i, |_| true), want, "{folder}/{golden_name}");
        }
    }
}

/// Decompression allocates once at the output's size (it took three times
/// the limit growing a vector): the gzip size hint, a file of two members
/// (the hint then only the last one's size), a stream just at and just
/// over the limit all decode as the raw bytes or are refused.
#[test]
fn gzip_members_and_the_size_hint_decode_as_the_raw_bytes() {
    let raw = std::fs::read(dir().join("cpu.pb")).unwrap();
    let gz = |b: &[u8]| {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        enc.write_all(b).unwrap();
        enc.finish().unwrap()
    };
    let opts = DecodeOptions::default();
    let want = load("cpu.pb");
    assert_eq!(
        decode(Path::new("one.pb.gz"), &gz(&raw), &opts).unwrap(),
        want
    );
    let (a, b) = raw.split_at(raw.len() / 3);
    let two = [gz(a), gz(b)].concat();
    assert_eq!(decode(Path::new("two.pb.gz"), &two, &opts).unwrap(), want);
    let at = |limit: usize| DecodeOptions {
        max_decompressed_bytes: limit as u64,
        ..DecodeOptions::default()
    };
    for file in [gz(&raw), two] {
        assert_eq!(
            decode(Path::new("x.pb.gz"), &file, &at(raw.len())).unwrap(),
            want
        );
        let e = decode_err("x.pb.gz", &file, &at(raw.len() - 1));
        assert!(e.contains("after decompression"), "{e}");
    }
}

/// ddtrace (libdatadog) writes its pprof zstd-compressed; the same bytes
/// zstd-compressed again by the zstd library decode as the raw ones, and
/// the real file has the 19 types `go tool pprof -raw` lists for its
/// `zstd -d` form.
#[test]
fn a_zstd_profile_decodes_as_its_raw_bytes() {
    let raw = std::fs::read(dir().join("cpu.pb")).unwrap();
    let zst = zstd::encode_all(raw.as_slice(), 3).unwrap();
    assert!(zst.starts_with(&ZSTD_MAGIC));
    let opts = DecodeOptions::default();
    assert_eq!(
        decode(Path::new("cpu.pb.zst"), &zst, &opts).unwrap(),
        load("cpu.pb")
    );
    let real = read_file(&exports_dir("python").join("work.pprof"), &opts).unwrap();
    assert_eq!(real.sample_types.len(), 19);
    assert_eq!(real.sample_types[0].kind, "cpu-time");
    assert!(!real.samples.is_empty());
}

#[test]
fn a_cut_zstd_stream_and_a_zstd_bomb_are_refused() {
    let raw = std::fs::read(dir().join("cpu.pb")).unwrap();
    let zst = zstd::encode_all(raw.as_slice(), 3).unwrap();
    let e = decode_err(
        "cut.pprof",
        &zst[..zst.len() / 2],
        &DecodeOptions::default(),
    );
    assert!(e.starts_with("cut.pprof: not a valid zstd stream"), "{e}");
    let bomb = zstd::encode_all(vec![0u8; 64 << 20].as_slice(), 19).unwrap();
    assert!(bomb.len() < 100_000);
    let opts = DecodeOptions {
        max_decompressed_bytes: 8 << 20,
        ..DecodeOptions::default()
    };
    let e = decode_err("bomb.pprof", &bomb, &opts);
    assert!(
        e.contains("larger than 8388608 bytes after decompression"),
        "{e}"
    );
}

/// Detection looks past the sniffed bytes of a zstd frame: ddtrace's file
/// is pprof; a zstd frame of anything else (MemHawk's record without its
/// length prefix, text) is not, and stays MemHawk's to explain.
#[test]
fn a_zstd_pprof_file_is_detected_and_other_zstd_is_not() {
    use crate::formats::{detect_open, Format};
    let real = exports_dir("python").join("work.pprof");
    let f = std::fs::File::open(&real).unwrap();
    assert!(reader::zstd_file_is_pprof(&f));
    assert_eq!(detect_open(&f, &real).unwrap(), Format::Pprof);
    let tmp = std::env::temp_dir().join(format!("flamehouse-zstd-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let text = tmp.join("notes.zst");
    std::fs::write(
        &text,
        zstd::encode_all(&b"level\tlabel\tvalue\n0\ttotal\t3\n"[..], 3).unwrap(),
    )
    .unwrap();
    // A MemHawk record's frame: the real MemHawk file's first record
    // without its 8-byte length.
    let bytes = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/memhawk/memhawk_alloc_22746_protobuf.binpb"),
    )
    .unwrap();
    let len = u64::from_be_bytes(bytes[..8].try_into().unwrap()) as usize;
    let bare = tmp.join("bare.zst");
    std::fs::write(&bare, &bytes[8..8 + len]).unwrap();
    let others = [text, bare];
    for p in &others {
        let f = std::fs::File::open(p).unwrap();
        assert!(!reader::zstd_file_is_pprof(&f), "{}", p.display());
        assert_eq!(
            detect_open(&f, p).unwrap(),
            Format::Binpb,
            "{}",
            p.display()
        );
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

/// A varint past 64 bits is told overlong, one cut by the end of the file
/// truncated, at the field's byte (the trial's file said "truncated" for
/// both).
#[test]
fn an_overlong_varint_is_not_called_truncated() {
    let mut bytes = small_profile().encode_to_vec();
    let at = bytes.len();
    // time_nanos (field 9, varint) of 11 bytes with the high bit set.
    bytes.push(9 << 3);
    bytes.extend([0xff; 11]);
    let e = decode_err("long.pb", &bytes, &DecodeOptions::default());
    assert!(
        e.contains(&format!("byte {at}: time_nanos (field 9): overlong varint")),
        "{e}"
    );
    bytes.truncate(at + 4);
    let e = decode_err("cut.pb", &bytes, &DecodeOptions::default());
    assert!(
        e.contains(&format!(
            "byte {at}: time_nanos (field 9): truncated varint"
        )),
        "{e}"
    );
}

/// A sample's values are entries, one each (2,000 sample types over
/// 400,000 samples, a 1.6 MB file, ran a load out of memory): ten samples
/// of two values count 30 more than the same samples without values (per
/// sample its packed `value` field, one entry as before, and its two
/// values).
#[test]
fn a_samples_values_are_entries() {
    let entries = |p: &proto::Profile| -> u64 {
        let o = DecodeOptions {
            max_entries: 1,
            ..DecodeOptions::default()
        };
        let e = decode_err("v.pb", &p.encode_to_vec(), &o);
        let n = e.split("holds ").nth(1).and_then(|r| r.split(' ').next());
        n.and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{e}"))
    };
    let mut p = small_profile();
    p.sample = vec![p.sample[0].clone(); 10];
    let with = entries(&p);
    for s in &mut p.sample {
        s.value.clear();
    }
    assert_eq!(with - entries(&p), 30);
}
