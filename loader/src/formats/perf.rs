//! `perf script` text (Linux perf's default fields): one sample a
//! paragraph, a header line `comm [pid/]tid [cpu] secs.frac: [period] event:`
//! then the call chain, leaf first, one `addr sym+off (module)` a line, and
//! a blank line.
//!
//! Parsed here rather than through inferno's `collapse::perf`, which only
//! writes folded text: the model needs each frame's module and the address
//! of `[unknown]` frames, the period and the event of every sample. The
//! tests compare with perf's own readings of the same recordings
//! (`perf report -g folded` and `perf script report stackcollapse`).
//!
//! What becomes of a sample ([`PerfOptions`]):
//! - every event of the file has two profile types (`sample:unit`, the
//!   value types `perf:sample:unit`), in order of first appearance:
//!   `EVENT_samples:count` (the sample count) and the summed period,
//!   `EVENT:nanoseconds` for the clock events (`cpu-clock`, `task-clock`,
//!   whose period is ns) and `EVENT:count` otherwise (`cycles:count`,
//!   `page-faults:count`). The event in the name keeps them apart from
//!   pprof's types (Go's `samples:count`, `cpu:nanoseconds`) and from
//!   each other. A sample has zero for the other events' types. The event name drops perf's
//!   modifiers (`cpu-clock:pppH` -> `cpu-clock`) and writes a
//!   tracepoint's `:` as `.` (`sched.sched_switch`); a header without a
//!   period counts 1;
//! - comm, pid and tid each become a sample label (`comm`, `pid`, `tid`),
//!   a root frame (comm, then pid, then tid, root first) or nothing;
//!   default: comm a label, pid and tid nothing (one series per thread is
//!   costly; ask for it);
//! - `sym+0xoff (module)` -> a symbol `sym` with its module; an inlined
//!   frame `sym+0xoff (inlined)` -> `sym` with no module;
//!   `[unknown] (module)` -> the symbol `module-basename+0xADDR` (perf's
//!   module-relative address) with the module, so distinct unknown code
//!   stays distinct; `[unknown] ([unknown])` -> the address frame;
//! - kernel (`[kernel.kallsyms]`, `*.ko`) and JIT (`/tmp/perf-PID.map`)
//!   frames get FlameGraph's `_[k]` / `_[j]` suffix only when asked
//!   (default off: the module already says it);
//! - time: perf prints seconds since boot; the profile's first sample is
//!   at [`PerfOptions::time_ns`] (default: the file's modification time
//!   minus the recorded span, i.e. the last sample at the file's mtime).
//!   One batch for the file, or one per [`PerfOptions::window_ns`].

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use super::text::{self, Builder, Error};
use super::{Format, ProfileFormat, ProfileReader, ReadOptions, Sniff};
use crate::model::{Frame, Label, Source, Symbol};

const NAME: &str = "perf script";

/// Where a sample's comm, pid or tid goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Placement {
    /// A sample label (`comm=burn`): selectable, one series per value.
    Label,
    /// A root frame, as FlameGraph's and inferno's collapsers do.
    Frame,
    /// Dropped.
    #[default]
    Omit,
}

/// How `perf script` text becomes samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerfOptions {
    /// The process name. Default: [`Placement::Label`].
    pub comm: Placement,
    /// The process id. Default: [`Placement::Omit`].
    pub pid: Placement,
    /// The thread id. Default: [`Placement::Omit`].
    pub tid: Placement,
    /// Suffix kernel frames with `_[k]`. Default: off.
    pub annotate_kernel: bool,
    /// Suffix JIT frames (`/tmp/perf-PID.map`) with `_[j]`. Default: off.
    pub annotate_jit: bool,
    /// One batch per window of this many ns of perf time. Default: `None`,
    /// one batch for the file.
    pub window_ns: Option<u64>,
    /// Time of the first sample, ns since the epoch. Default: `None`, the
    /// file's modification time minus the recorded span.
    pub time_ns: Option<u64>,
}

impl Default for PerfOptions {
    fn default() -> Self {
        PerfOptions {
            comm: Placement::Label,
            pid: Placement::Omit,
            tid: Placement::Omit,
            annotate_kernel: false,
            annotate_jit: false,
            window_ns: None,
            time_ns: None,
        }
    }
}

/// The `perf script` format.
#[derive(Debug, Clone, Copy, Default)]
pub struct Perf;

impl ProfileFormat for Perf {
    fn name(&self) -> &'static str {
        "perf"
    }

    fn sniff(&self, first: &[u8]) -> Sniff {
        if !text::looks_like_text(first) {
            return Sniff::No;
        }
        let s = String::from_utf8_lossy(first);
        if s.starts_with("# ========\n# captured on") {
            return Sniff::Yes;
        }
        match s.split_once('\n') {
            Some((line, _)) if parse_header(line).is_ok() => Sniff::Yes,
            // A header line cut at the sniff length: its time is in it.
            None if s.split_whitespace().skip(1).any(is_time) && !s.starts_with('@') => Sniff::Yes,
            _ => Sniff::No,
        }
    }

    fn open(
        &self,
        file: File,
        path: &Path,
        options: &ReadOptions,
    ) -> Result<Box<dyn ProfileReader>, super::Error> {
        let (text, mtime) = text::read_text(file, path, NAME)?;
        Ok(Box::new(parse(&text, path, mtime, &options.perf)?))
    }
}

/// A sample header.
#[derive(Debug, PartialEq, Eq)]
struct Header<'a> {
    comm: String,
    pid: Option<u32>,
    tid: u32,
    time_ns: u64,
    period: u64,
    event: &'a str,
    /// Text after the event (a single-frame sample's `addr sym (dso)`).
    rest: Vec<&'a str>,
}

fn is_time(t: &str) -> bool {
    t.strip_suffix(':')
        .and_then(|t| t.split_once('.'))
        .is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && a.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        })
}

fn parse_time(t: &str) -> Option<u64> {
    let (secs, frac) = t.strip_suffix(':')?.split_once('.')?;
    let secs: u64 = secs.parse().ok()?;
    let mut ns: u64 = 0;
    for (i, c) in frac.bytes().take(9).enumerate() {
        ns += u64::from(c - b'0') * 10u64.pow(8 - i as u32);
    }
    secs.checked_mul(1_000_000_000)?.checked_add(ns)
}

fn parse_header(line: &str) -> Result<Header<'_>, String> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let ti = tokens
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, t)| is_time(t))
        .map(|(i, _)| i)
        .ok_or("a sample header needs its time (`secs.frac:`; default perf script fields)")?;
    let time_ns = parse_time(tokens[ti]).ok_or("time out of range")?;
    let mut before = &tokens[..ti];
    if before
        .last()
        .is_some_and(|t| t.starts_with('[') && t.ends_with(']'))
    {
        before = &before[..before.len() - 1];
    }
    let (ids, comm) = before.split_last().ok_or("no pid/tid before the time")?;
    if comm.is_empty() {
        return Err("no command name before the pid".into());
    }
    let (pid, tid) = match ids.split_once('/') {
        Some((p, t)) => (
            Some(p.parse().map_err(|_| format!("bad pid `{p}`"))?),
            t.parse().map_err(|_| format!("bad tid `{t}`"))?,
        ),
        None => (None, ids.parse().map_err(|_| format!("bad tid `{ids}`"))?),
    };
    let mut after = &tokens[ti + 1..];
    let mut period = 1;
    if let Some(p) = after
        .first()
        .filter(|t| t.bytes().all(|c| c.is_ascii_digit()))
    {
        period = p.parse().map_err(|_| format!("bad period `{p}`"))?;
        after = &after[1..];
    }
    let (event, rest) = after.split_first().ok_or("no event after the time")?;
    let event = event
        .strip_suffix(':')
        .ok_or_else(|| format!("the event `{event}` does not end with `:`"))?;
    // Drop modifiers (`cpu-clock:pppH`), not tracepoint names
    // (`sched:sched_switch`).
    let event = match event.rsplit_once(':') {
        Some((e, m)) if !m.is_empty() && m.bytes().all(|c| b"ukhGHpPSDIWe".contains(&c)) => e,
        _ => event,
    };
    if event.is_empty() {
        return Err("empty event name".into());
    }
    Ok(Header {
        comm: comm.join(" "),
        pid,
        tid,
        time_ns,
        period,
        event,
        rest: rest.to_vec(),
    })
}

/// One call-chain line (`addr sym+off (module)`), trimmed.
fn parse_frame(line: &str, options: &PerfOptions) -> Result<Frame, String> {
    let (addr, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    let addr = u64::from_str_radix(addr, 16).map_err(|_| format!("bad frame address `{addr}`"))?;
    let rest = rest.trim();
    let (sym, module) = match rest.strip_suffix(')').and_then(|r| r.rsplit_once(" (")) {
        Some((s, m)) => (s.trim(), Some(m)),
        None => (rest, None),
    };
    let module = module.filter(|m| !m.is_empty());
    if sym == "[unknown]" || sym.is_empty() {
        return Ok(match module {
            Some(m) if m != "[unknown]" => Frame::Symbol(Symbol {
                function: format!("{}+0x{addr:x}", text::basename(m)),
                module: Some(m.to_owned()),
                ..Default::default()
            }),
            _ => Frame::Address(addr),
        });
    }
    let mut function = text::strip_offset(sym).to_owned();
    let module = module.filter(|&m| m != "inlined");
    if let Some(m) = module {
        let kernel = m.starts_with("[kernel") || m.ends_with(".ko") || m == "[vdso]";
        let jit = text::basename(m).starts_with("perf-") && m.ends_with(".map");
        if kernel && options.annotate_kernel && m != "[vdso]" {
            function.push_str("_[k]");
        } else if jit && options.annotate_jit {
            function.push_str("_[j]");
        }
    }
    Ok(Frame::Symbol(Symbol {
        function,
        module: module.map(str::to_owned),
        ..Default::default()
    }))
}

struct Sample {
    time_ns: u64,
    event: usize,
    period: u64,
    /// Frame ids, leaf first.
    frames: Vec<u32>,
    /// Index of the sample's (labels, root frame ids) in `sets`.
    set: u32,
}

/// Parses a whole `perf script` text (`path` and `mtime` for messages and
/// the default time).
///
/// # Errors
/// The first bad line, or a file without a sample.
pub fn parse(
    text: &str,
    path: &Path,
    mtime: u64,
    options: &PerfOptions,
) -> Result<text::TextReader, Error> {
    let err = |line: usize, message: String| Error::Line {
        format: NAME,
        path: path.to_owned(),
        line: line as u64 + 1,
        message,
    };
    // perf script ends every line with a newline: a file that stops inside
    // a line was cut short, and its last sample's stack would be stored
    // partial.
    if !text.is_empty() && !text.ends_with('\n') {
        return Err(err(
            text.lines().count().saturating_sub(1),
            "the file ends inside a line (cut short?)".into(),
        ));
    }
    let mut events: Vec<String> = Vec::new();
    let mut event_ix: HashMap<String, usize> = HashMap::new();
    let mut samples: Vec<Sample> = Vec::new();
    let mut comms = std::collections::BTreeSet::new();
    let mut pids = std::collections::BTreeSet::new();
    let mut periods = std::collections::BTreeSet::new();
    let mut open = false;
    let mut sets: Vec<(Vec<Label>, Vec<u32>)> = Vec::new();
    let mut set_ix: HashMap<(String, u32, u32), u32> = HashMap::new();
    let mut b = Builder::new(0);
    // Frame line -> id: each distinct line is parsed once per file.
    let mut seen: HashMap<&str, u32> = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            open = false;
            continue;
        }
        if line.starts_with('#') && !open {
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            if !open {
                return Err(err(n, "a frame line outside a sample".into()));
            }
            let line = line.trim();
            let id = match seen.get(line) {
                Some(&id) => id,
                None => {
                    let f = parse_frame(line, options).map_err(|m| err(n, m))?;
                    let id = b.frame(f);
                    seen.insert(line, id);
                    id
                }
            };
            samples.last_mut().expect("open sample").frames.push(id);
            continue;
        }
        let h = parse_header(line).map_err(|m| err(n, m))?;
        let event = *event_ix.entry(h.event.to_owned()).or_insert_with(|| {
            events.push(h.event.to_owned());
            events.len() - 1
        });
        let mut frames = Vec::new();
        // No call graph: the sampled ip on the header line (tracepoint
        // arguments, which do not start with an address, are not one).
        if h.rest
            .first()
            .is_some_and(|t| u64::from_str_radix(t, 16).is_ok())
        {
            let f = parse_frame(&h.rest.join(" "), options).map_err(|m| err(n, m))?;
            frames.push(b.frame(f));
        }
        let pid = h.pid.unwrap_or(h.tid);
        // The (comm, pid, tid) of a sample become its labels and root
        // frames once per distinct triple, not once per sample.
        let triple = (h.comm, pid, h.tid);
        let set = match set_ix.get(&triple) {
            Some(&i) => i,
            None => {
                let (comm, pid, tid) = &triple;
                let parts = [
                    ("comm", options.comm, comm.clone()),
                    ("pid", options.pid, pid.to_string()),
                    ("tid", options.tid, tid.to_string()),
                ];
                let mut labels: Vec<Label> = parts
                    .iter()
                    .filter(|(_, place, _)| *place == Placement::Label)
                    .map(|(key, _, value)| Label {
                        key: (*key).into(),
                        value: value.clone(),
                    })
                    .collect();
                labels.sort();
                // Root frames, root first (comm, pid, tid): pushed leaf
                // side first after the chain.
                let roots: Vec<u32> = parts
                    .iter()
                    .rev()
                    .filter(|(_, place, _)| *place == Placement::Frame)
                    .map(|(_, _, value)| {
                        b.frame(Frame::Symbol(Symbol {
                            function: value.clone(),
                            ..Default::default()
                        }))
                    })
                    .collect();
                comms.insert(comm.clone());
                pids.insert(*pid);
                sets.push((labels, roots));
                let i = u32::try_from(sets.len() - 1).expect("fewer than 2^32 threads");
                set_ix.insert(triple, i);
                i
            }
        };
        periods.insert((event, h.period));
        samples.push(Sample {
            time_ns: h.time_ns,
            event,
            period: h.period,
            frames,
            set,
        });
        open = true;
    }
    if samples.is_empty() {
        return Err(Error::File {
            format: NAME,
            path: path.to_owned(),
            message: "no sample header (`comm tid secs.frac: period event:`) in the file".into(),
        });
    }
    let types: Vec<(String, String, String)> = events
        .iter()
        // `kind:sample:unit` is split at `:`: a tracepoint's
        // `sched:sched_switch` becomes `sched.sched_switch`.
        .map(|e| e.replace(':', "."))
        .flat_map(|e| {
            // Named by the event so that no perf type is a pprof type
            // (Go's CPU profile is `samples:count` + `cpu:nanoseconds`):
            // `cpu-clock_samples:count` and `cpu-clock:nanoseconds`.
            let unit = if e == "cpu-clock" || e == "task-clock" {
                "nanoseconds"
            } else {
                "count"
            };
            [
                (
                    "perf".to_owned(),
                    format!("{e}_samples"),
                    "count".to_owned(),
                ),
                ("perf".to_owned(), e, unit.to_owned()),
            ]
        })
        .collect();
    let first = samples.iter().map(|s| s.time_ns).min().unwrap_or(0);
    let last = samples.iter().map(|s| s.time_ns).max().unwrap_or(0);
    let span = last - first;
    let base = options
        .time_ns
        .unwrap_or_else(|| mtime.saturating_sub(span));
    b.set_types(types.len());
    let window = options.window_ns.filter(|&w| w > 0);
    let mut order: Vec<usize> = (0..samples.len()).collect();
    if window.is_some() {
        order.sort_by_key(|&i| samples[i].time_ns);
    }
    let mut current = None;
    for i in order {
        let s = &mut samples[i];
        let (start, len) = match window {
            Some(w) => ((s.time_ns - first) / w * w, w),
            None => (0, span),
        };
        if current != Some(start) {
            b.batch(base.saturating_add(start), len);
            current = Some(start);
        }
        let (labels, roots) = &sets[s.set as usize];
        s.frames.extend_from_slice(roots);
        let value = i64::try_from(s.period).unwrap_or(i64::MAX);
        b.add(
            &s.frames,
            labels,
            &[(2 * s.event, 1), (2 * s.event + 1, value)],
        );
    }
    let single_period = (periods.len() == events.len()).then(|| periods.iter().next().map(|p| p.1));
    let source = Source {
        identity: text::identity_with("perf", text, options),
        pid: if pids.len() == 1 {
            pids.iter().next().copied().unwrap_or(0)
        } else {
            0
        },
        name: if comms.len() == 1 {
            comms.iter().next().cloned().unwrap_or_default()
        } else {
            String::new()
        },
        main_path: String::new(),
        start_ns: 0,
        labels: Vec::new(),
        period: single_period
            .flatten()
            .map_or(0, |p| i64::try_from(p).unwrap_or(0)),
        // perf script does not say what its period counts.
        period_type: String::new(),
    };
    let types = text::value_types(&types);
    Ok(b.finish(Format::Perf, types, source, text.len() as u64))
}

#[cfg(test)]
mod tests;
