//! bpftrace map output, as bpftrace prints maps at exit: text
//! (`@name[key]: value`) or `-f json` (one JSON object a line,
//! `{"type": "map", "data": {"@name": {"key": value}}}`).
//!
//! - every keyed map is its own profile type, named as the map: `@NAME:count`
//!   (`@` is `@:count`, `@cpu` is `@cpu:count`; value types
//!   `bpftrace:@NAME:count`), in order of first appearance (the `@` keeps
//!   them apart from pprof's and perf's types); a sample has zero for the other maps' types.
//!   Values must be integers of at least 0 (`count()`, `sum()`: a
//!   negative value, which only a `sum()` of negative amounts gives, would
//!   subtract from a flame graph's frames and is refused naming its line);
//!   scalar maps
//!   (`@n: 190`) and histograms carry no stack and are skipped, as are
//!   lines outside maps (`Attaching 2 probes...`, `printf` output);
//! - a key is its parts in order: stacks (`ustack`, `kstack`, in bpftrace's
//!   default form `sym+off` or `0xADDR`, or `ustack(perf)`'s
//!   `ADDR sym+off (module)`) and values (`comm`, `tid`). The stack parts
//!   are concatenated leaf first in key order (write `@[kstack, ustack]`:
//!   the kernel frames sit on top of the user frames); an empty part (an
//!   empty `kstack` prints as `@[, `) adds nothing;
//! - value parts become root frames (the first part the root, as
//!   FlameGraph's collapsers do with comm), or, when
//!   [`BpftraceOptions::labels`] names them, sample labels in order. bpftrace
//!   does not quote values: a comm `W, C` prints as two parts. With N names
//!   the key has N value parts and the last takes the rest (right for the
//!   last part; a separator inside an earlier part stays ambiguous);
//! - `sym+off` -> a symbol without module; perf form -> a symbol with its
//!   module; a raw address (`0x55..`: the target exited before bpftrace
//!   printed, or `[unknown]` in perf form) -> an address frame for the
//!   symbolizer. bpftrace prints no mappings: such addresses resolve
//!   through [`BpftraceOptions::mappings`] (a copy of the process's
//!   `/proc/PID/maps`, `load --bpftrace-maps`); otherwise they stay
//!   addresses.
//! - time: one batch at [`BpftraceOptions::time_ns`] (default: the file's
//!   modification time, when bpftrace printed the maps at exit).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::Path;

use super::text::{self, Builder, Error};
use super::{Format, ProfileFormat, ProfileReader, ReadOptions, Sniff};
use crate::model::{Frame, Label, Source, Symbol};

const NAME: &str = "bpftrace output";

/// How bpftrace map keys become samples.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BpftraceOptions {
    /// Label keys of the key's value parts, in order (`comm`, `tid`): N
    /// names say the key has N value parts, the last taking any rest (a
    /// value holding `, `); more parts past a stack are an error. Default:
    /// none (every value part a root frame).
    pub labels: Vec<String>,
    /// Time of the profile, ns since the epoch. Default: `None`, the
    /// file's modification time.
    pub time_ns: Option<u64>,
    /// Period the maps cover, ns. Default: 0 (unknown).
    pub duration_ns: u64,
    /// The traced process's executable mappings
    /// ([`crate::symbolize::parse_proc_maps`] of a copy of its
    /// `/proc/PID/maps` taken while it ran; `load --bpftrace-maps`): raw
    /// addresses (`0x...`) are symbolized through them, the first mapping
    /// taken as the main program (`load --binary` names its file here).
    /// Default: none (raw addresses stay addresses).
    pub mappings: Vec<crate::model::Mapping>,
}

/// The bpftrace format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Bpftrace;

impl ProfileFormat for Bpftrace {
    fn name(&self) -> &'static str {
        "bpftrace"
    }

    fn sniff(&self, first: &[u8]) -> Sniff {
        if !text::looks_like_text(first) {
            return Sniff::No;
        }
        let map_start = |s: &[u8]| {
            s.first() == Some(&b'@')
                && s[1..]
                    .iter()
                    .find(|c| !(c.is_ascii_alphanumeric() || **c == b'_'))
                    .is_none_or(|c| *c == b'[' || *c == b':')
        };
        if first.starts_with(b"Attaching ")
            || is_note(&String::from_utf8_lossy(first))
            || first.starts_with(b"{\"type\": \"")
            || first.starts_with(b"{\"type\":\"")
            || map_start(first)
        {
            Sniff::Yes
        } else {
            Sniff::No
        }
    }

    fn open(
        &self,
        file: File,
        path: &Path,
        options: &ReadOptions,
    ) -> Result<Box<dyn ProfileReader>, super::Error> {
        let (text, mtime) = text::read_text(file, path, NAME, &options.text)?;
        let reader = parse_within(&text, path, mtime, &options.bpftrace, &options.text)?;
        Ok(reader.boxed_with_legacy(options, "bpftrace", &text, &options.bpftrace))
    }
}

/// A line bpftrace writes to its standard error (`ERROR: couldn't set
/// RLIMIT_MEMLOCK ...`, which it survives, or a `WARNING: ...`): found in
/// a file made with `2>&1`, and skipped as bpftrace's other non-map lines.
/// Also with the program's location first (`stdin:1:27-28: WARNING:
/// ...`), which bpftrace follows with the program's line and a `~` line
/// under the place ([`note_lines`]).
fn is_note(line: &str) -> bool {
    line.starts_with("ERROR: ") || line.starts_with("WARNING: ") || located_note(line)
}

/// `NAME:LINE:COL[-COL]: WARNING: ` or `...: ERROR: `.
fn located_note(line: &str) -> bool {
    let Some(at) = line.find(": WARNING: ").or_else(|| line.find(": ERROR: ")) else {
        return false;
    };
    let mut parts = line[..at].rsplitn(3, ':');
    let (Some(cols), Some(row), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let digits = |d: &str| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit());
    let (c1, c2) = cols.split_once('-').unwrap_or((cols, "0"));
    !name.is_empty() && digits(row) && digits(c1) && digits(c2)
}

/// The lines (0-based) of bpftrace's own messages in `text`: each note,
/// and after a located one the program's lines it quotes, up to the next
/// line that starts a map (`@`, `{`), `Attaching` or a blank line.
fn note_lines(text: &str) -> HashSet<usize> {
    let mut out = HashSet::new();
    let mut quoting = false;
    for (n, line) in text.lines().enumerate() {
        if is_note(line) {
            out.insert(n);
            quoting = located_note(line);
        } else if quoting
            && !line.trim().is_empty()
            && !line.starts_with(['@', '{'])
            && !line.starts_with("Attaching ")
        {
            out.insert(n);
        } else {
            quoting = false;
        }
    }
    out
}

/// One key part.
#[derive(Debug, PartialEq, Eq)]
enum Part<'a> {
    /// Frames, leaf first, as printed (trimmed).
    Stack(Vec<&'a str>),
    /// A value (`burn`, `450`); empty for an empty part.
    Value(&'a str),
}

/// The parts of a key's text: stacks start with a line end and hold one
/// indented frame a line; parts are separated by `,` (json) or `, `
/// (text).
fn parts(key: &str) -> Result<Vec<Part<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = key;
    loop {
        if let Some(r) = rest.strip_prefix('\n') {
            rest = r;
            let mut frames = Vec::new();
            while rest.starts_with([' ', '\t']) {
                let end = rest
                    .find('\n')
                    .ok_or("a stack frame without its line end")?;
                frames.push(rest[..end].trim());
                rest = &rest[end + 1..];
            }
            out.push(Part::Stack(frames));
        } else {
            let end = rest.find(',').unwrap_or(rest.len());
            out.push(Part::Value(rest[..end].trim()));
            rest = &rest[end..];
        }
        if rest.is_empty() {
            return Ok(out);
        }
        rest = rest
            .strip_prefix(',')
            .ok_or_else(|| format!("expected `,` between key parts at `{}`", rest.trim()))?;
        rest = rest.strip_prefix(' ').unwrap_or(rest);
        if rest.is_empty() {
            out.push(Part::Value(""));
            return Ok(out);
        }
    }
}

/// One printed frame.
fn frame(s: &str) -> Result<Frame, String> {
    if let Some(hex) = s.strip_prefix("0x") {
        return u64::from_str_radix(hex, 16)
            .map(Frame::Address)
            .map_err(|_| format!("bad address `{s}`"));
    }
    // ustack(perf): `ADDR sym+off (module)`.
    if let Some((addr, rest)) = s.split_once(' ') {
        if let Ok(addr) = u64::from_str_radix(addr, 16) {
            let (sym, module) = match rest.strip_suffix(')').and_then(|r| r.rsplit_once(" (")) {
                Some((sym, m)) => (sym.trim(), Some(m)),
                None => (rest.trim(), None),
            };
            if sym == "[unknown]" || sym.is_empty() {
                return Ok(Frame::Address(addr));
            }
            return Ok(Frame::Symbol(Symbol {
                function: text::strip_offset(sym).to_owned(),
                module: module
                    .filter(|m| !m.is_empty() && *m != "[unknown]")
                    .map(str::to_owned),
                ..Default::default()
            }));
        }
    }
    Ok(Frame::Symbol(Symbol {
        function: text::strip_offset(s).to_owned(),
        ..Default::default()
    }))
}

/// A parsed map entry.
struct Entry {
    map: usize,
    frames: Vec<Frame>,
    labels: Vec<Label>,
    value: i64,
}

/// Why a negative map value is refused: a flame graph adds its values up
/// (a `count()` is never negative; a `sum()` of negative amounts would
/// subtract frames), as folded stacks refuse a negative count.
fn negative(map: &str, value: i64) -> String {
    format!("the value {value} of `{map}` is negative (a flame graph needs counts or sums of at least 0)")
}

fn entry(map: usize, key: &str, value: i64, options: &BpftraceOptions) -> Result<Entry, String> {
    let mut frames = Vec::new();
    // Non-empty value parts, with the number of stacks before each.
    let mut values = Vec::new();
    let mut stacks = 0;
    for p in parts(key)? {
        match p {
            Part::Stack(fs) => {
                stacks += 1;
                for f in fs {
                    frames.push(frame(f)?);
                }
            }
            Part::Value("") => {}
            Part::Value(v) => values.push((v, stacks)),
        }
    }
    // bpftrace joins the parts with `, ` (`,` in JSON) without quoting: a
    // comm `W, C` splits in two. With N names the key has N value parts,
    // so the last takes the rest (right when the value holding the
    // separator is the last one, as comm in `@[ustack, comm]`).
    let n = options.labels.len();
    if n > 0 && values.len() > n {
        let (first, in_stack) = values[n - 1];
        let (last, last_stack) = values[values.len() - 1];
        if in_stack != last_stack {
            return Err(format!(
                "the key has {} non-stack parts, more than the {n} label names given \
                 (--bpftrace-labels)",
                values.len()
            ));
        }
        let start = first.as_ptr() as usize - key.as_ptr() as usize;
        let end = last.as_ptr() as usize - key.as_ptr() as usize + last.len();
        values.truncate(n - 1);
        values.push((&key[start..end], in_stack));
    }
    let values = values.into_iter().map(|(v, _)| v);
    let mut labels = Vec::new();
    let mut roots = Vec::new();
    for (i, v) in values.enumerate() {
        match options.labels.get(i) {
            Some(k) => labels.push(Label {
                key: k.clone(),
                value: v.to_owned(),
            }),
            None => roots.push(v),
        }
    }
    for r in roots.into_iter().rev() {
        frames.push(Frame::Symbol(Symbol {
            function: r.to_owned(),
            ..Default::default()
        }));
    }
    labels.sort();
    Ok(Entry {
        map,
        frames,
        labels,
        value,
    })
}

/// The map name of a line starting `@name[` or `@name:`, and the rest
/// after the `[` (for a keyed map) or `None` (scalar).
fn map_head(line: &str) -> Option<(&str, Option<&str>)> {
    let body = line.strip_prefix('@')?;
    let end = body
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(body.len());
    let (name, rest) = body.split_at(end);
    if let Some(r) = rest.strip_prefix('[') {
        Some((name, Some(r)))
    } else if rest.starts_with(':') {
        Some((name, None))
    } else {
        None
    }
}

/// Whether a printed value is a `stats()` entry's, `count N, average N,
/// total N` (no count or sum: its map is skipped, as JSON's `stats` type).
fn is_stats(value: &str) -> bool {
    let mut fields = value.split(", ");
    ["count ", "average ", "total "].iter().all(|p| {
        fields
            .next()
            .and_then(|f| f.strip_prefix(p))
            .is_some_and(|n| n.parse::<i64>().is_ok())
    }) && fields.next().is_none()
}

/// The key text and value of a line ending an entry (`...]: 12`).
fn entry_end(line: &str) -> Option<(&str, &str)> {
    if let Some(key) = line.trim_end().strip_suffix("]:") {
        return Some((key, ""));
    }
    let (key, value) = line.rsplit_once("]: ")?;
    Some((key, value.trim()))
}

/// Parses bpftrace's text or JSON output (`path` and `mtime` for messages
/// and the default time).
///
/// # Errors
/// The first bad line, or a file without a keyed map entry.
pub fn parse(
    text: &str,
    path: &Path,
    mtime: u64,
    options: &BpftraceOptions,
) -> Result<text::TextReader, Error> {
    parse_within(text, path, mtime, options, &text::TextOptions::unlimited())
}

/// [`parse`] keeping no more distinct stacks and frames than `limits`
/// allow (what `load` reads with; `limits.max_bytes` is the caller's).
///
/// # Errors
/// As [`parse`], and [`Error::TooMany`] past a limit.
pub fn parse_within(
    text: &str,
    path: &Path,
    mtime: u64,
    options: &BpftraceOptions,
    limits: &text::TextOptions,
) -> Result<text::TextReader, Error> {
    let err = |line: usize, message: String| Error::Line {
        format: NAME,
        path: path.to_owned(),
        line: line as u64 + 1,
        message,
    };
    let mut maps: Vec<String> = Vec::new();
    let mut map_ix: HashMap<String, usize> = HashMap::new();
    let mut map_of = |name: &str| {
        *map_ix.entry(name.to_owned()).or_insert_with(|| {
            maps.push(name.to_owned());
            maps.len() - 1
        })
    };
    // Frames are interned as the entries are read (an entry keeps their
    // ids, 4 bytes a frame, not the frames: a 94 MB file of deep stacks
    // took 3.2 GB); the types, one per map, are known at the end.
    let mut b = Builder::within(0, limits);
    let mut entries: Vec<(usize, Vec<u32>, Vec<Label>, i64)> = Vec::new();
    let mut keep = |b: &mut Builder, e: Entry| {
        let ids = e.frames.into_iter().map(|f| b.frame(f)).collect();
        entries.push((e.map, ids, e.labels, e.value));
    };
    // Maps that carry no count or sum, named in the error of a file with
    // nothing else: (name, what bpftrace printed), in order.
    // (A cell: the text branch's entry closure and its loop both skip.)
    let skipped: RefCell<Vec<(String, &str)>> = RefCell::default();
    let skip = |name: &str, what: &'static str| {
        let mut s = skipped.borrow_mut();
        if !s.iter().any(|(n, _)| n == name) {
            s.push((name.to_owned(), what));
        }
    };
    // Decided by the first line that is not bpftrace's own message: run
    // as `bpftrace ... > out 2>&1`, the file starts with them.
    let notes = note_lines(text);
    let json = text
        .lines()
        .enumerate()
        .find(|(n, l)| !l.trim().is_empty() && !notes.contains(n))
        .is_some_and(|(_, l)| l.trim_start().starts_with('{'));
    // Text maps cut inside a count would load wrong; a JSON line cut
    // anywhere is bad JSON, which its parse says (a whole JSON file
    // without its last line end loads).
    if !json {
        text::ends_whole(text, path, NAME)?;
    }
    if json {
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() || notes.contains(&n) {
                continue;
            }
            let v: serde_json::Value =
                serde_json::from_str(line).map_err(|e| err(n, format!("bad JSON: {e}")))?;
            let skipped_as = match v.get("type").and_then(serde_json::Value::as_str) {
                Some("map") => None,
                // `stats()` and `avg()` maps (bpftrace 0.17 prints both as
                // `stats`), `hist()` and `lhist()`.
                Some("stats") => Some("stats() or avg()"),
                Some("hist") => Some("histogram"),
                _ => continue, // not a map: printf output, probes attached
            };
            if !v.get("data").is_some_and(serde_json::Value::is_object) {
                return Err(err(n, "a map without its `data` object".into()));
            }
            // Read again keeping every member: bpftrace prints one key
            // twice when two stack ids print alike (the same frames by
            // name), and a JSON object (`serde_json::Map`) keeps the last.
            let data = serde_json::from_str::<MapLine>(line)
                .map_err(|e| err(n, format!("bad JSON: {e}")))?
                .data
                .0;
            for (name, m) in &data {
                if let Some(what) = skipped_as {
                    skip(name, what);
                    continue;
                }
                let Some(m) = &m.0 else {
                    skip(name, "no key");
                    continue;
                };
                let name = name
                    .strip_prefix('@')
                    .ok_or_else(|| err(n, format!("map name `{name}` without `@`")))?;
                let map = map_of(name);
                for (key, value) in m {
                    let value = value.as_i64().ok_or_else(|| {
                        err(
                            n,
                            format!(
                                "the value of `@{name}` is no integer (only count() or sum() maps)"
                            ),
                        )
                    })?;
                    if value < 0 {
                        return Err(err(n, negative(&format!("@{name}"), value)));
                    }
                    keep(
                        &mut b,
                        entry(map, key, value, options).map_err(|m| err(n, m))?,
                    );
                }
            }
        }
    } else {
        // (first line, map name, key text lines so far)
        let mut open: Option<(usize, &str, Vec<&str>)> = None;
        // A finished entry: skipped when it has no value (the head of a
        // keyed histogram, whose buckets follow on their own lines) or a
        // `stats()` value.
        let mut finish = |n: usize, start: usize, name: &str, key: &str, value: &str| {
            if value.is_empty() {
                skip(&format!("@{name}"), "histogram");
                return Ok(());
            }
            if is_stats(value) {
                skip(&format!("@{name}"), "stats()");
                return Ok(());
            }
            let value: i64 = value.parse().map_err(|_| {
                // Digits past Int64 (a count of 2^64) are no bad text.
                let what = if value.bytes().all(|c| c.is_ascii_digit()) && !value.is_empty() {
                    format!(
                        "the value `{value}` is past {} (the largest Int64 a value can hold)",
                        i64::MAX
                    )
                } else {
                    format!("the value `{value}` is no integer (only count() or sum() maps)")
                };
                err(n, what)
            })?;
            if value < 0 {
                return Err(err(n, negative(&format!("@{name}"), value)));
            }
            let e = entry(map_of(name), key, value, options).map_err(|m| {
                if start == n {
                    err(n, m)
                } else {
                    err(start, format!("in the key: {m}"))
                }
            })?;
            keep(&mut b, e);
            Ok::<(), Error>(())
        };
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end_matches('\r');
            if let Some((start, name, key)) = &mut open {
                let frame_line = line.starts_with([' ', '\t']);
                match entry_end(line).filter(|_| !frame_line) {
                    Some((last, value)) => {
                        key.push(last);
                        finish(n, *start, name, &key.join("\n"), value)?;
                        open = None;
                    }
                    None => key.push(line),
                }
                continue;
            }
            let Some((name, rest)) = map_head(line) else {
                continue; // not a map: `Attaching ...`, printf output
            };
            let Some(rest) = rest else {
                // A scalar map or a histogram's head (`@h: `, buckets below).
                let value = line[name.len() + 2..].trim();
                skip(
                    &format!("@{name}"),
                    if value.is_empty() {
                        "histogram"
                    } else {
                        "no key"
                    },
                );
                continue;
            };
            match entry_end(rest) {
                Some((key, value)) => finish(n, n, name, key, value)?,
                None => open = Some((n, name, vec![rest])),
            }
        }
        if let Some((start, _, _)) = open {
            return Err(err(
                start,
                "the map entry starting here has no `]: value` end".into(),
            ));
        }
    }
    if entries.is_empty() {
        let mut message = "no keyed map entry of count() or sum() (`@[...]: N`)".to_owned();
        let skipped = skipped.into_inner();
        if !skipped.is_empty() {
            let list: Vec<String> = skipped.iter().map(|(n, w)| format!("{n} ({w})")).collect();
            message += &format!("; skipped: {}", list.join(", "));
        }
        return Err(Error::File {
            format: NAME,
            path: path.to_owned(),
            message,
        });
    }
    let types: Vec<(String, String, String)> = maps
        .iter()
        // The map's own name, `@` included: no pprof or perf type starts
        // with `@`, so `@:count` never mixes with Go's `samples:count`.
        .map(|m| ("bpftrace".to_owned(), format!("@{m}"), "count".to_owned()))
        .collect();
    b.set_types(types.len());
    b.batch(options.time_ns.unwrap_or(mtime), options.duration_ns);
    if !options.mappings.is_empty() {
        b.mappings(options.mappings.clone());
    }
    for (map, ids, labels, value) in entries {
        b.add(&ids, &labels, &[(map, value)]);
    }
    let source = Source {
        identity: text::identity_with("bpftrace", text, options),
        // /proc/PID/maps lists the executable first.
        main_path: options
            .mappings
            .first()
            .map(|m| m.path.clone())
            .unwrap_or_default(),
        ..Default::default()
    };
    b.check(NAME, path)?;
    Ok(b.finish(
        Format::Bpftrace,
        text::value_types(&types),
        source,
        text.len() as u64,
    ))
}

/// A `-f json` map line: `{"type": "map", "data": {"@name": {...}}}`.
#[derive(serde::Deserialize)]
struct MapLine {
    data: Members<Entries>,
}

/// A JSON object's members in order, a name given twice kept twice.
struct Members<T>(Vec<(String, T)>);

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Members<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for V<T> {
            type Value = Members<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> std::result::Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(kv) = m.next_entry::<String, T>()? {
                    out.push(kv);
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V(std::marker::PhantomData))
    }
}

/// A map's value in a map line: its keyed entries in order (`None`: no
/// object, a scalar map's value or a histogram's buckets).
struct Entries(Option<Vec<(String, serde_json::Value)>>);

impl<'de> serde::Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map's value")
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> std::result::Result<Entries, A::Error> {
                let members: Members<serde_json::Value> = serde::Deserialize::deserialize(
                    serde::de::value::MapAccessDeserializer::new(m),
                )?;
                Ok(Entries(Some(members.0)))
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> std::result::Result<Entries, A::Error> {
                while s.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Entries(None))
            }
            fn visit_bool<E>(self, _: bool) -> std::result::Result<Entries, E> {
                Ok(Entries(None))
            }
            fn visit_i64<E>(self, _: i64) -> std::result::Result<Entries, E> {
                Ok(Entries(None))
            }
            fn visit_u64<E>(self, _: u64) -> std::result::Result<Entries, E> {
                Ok(Entries(None))
            }
            fn visit_f64<E>(self, _: f64) -> std::result::Result<Entries, E> {
                Ok(Entries(None))
            }
            fn visit_str<E>(self, _: &str) -> std::result::Result<Entries, E> {
                Ok(Entries(None))
            }
            fn visit_unit<E>(self) -> std::result::Result<Entries, E> {
                Ok(Entries(None))
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests;
