//! `perf script` text (Linux perf's default fields): one sample a
//! paragraph, a header line `comm [pid/]tid [cpu] secs.frac: [period] event:`
//! then the call chain, leaf first, one `addr sym+off (module)` a line, and
//! a blank line (a call-graph file whose last sample has none was cut
//! short: refused). The command name may hold spaces, digits and colons
//! (the header's fields are found around it, [`parse_header`]); a lone id
//! is the thread id (perf's default fields), so asking for pids needs
//! `perf script -F +pid`, and a `-F pid` without `tid` reads as tids.
//! Field lists of `perf script -F` that leave some out are
//! read too: no time (every sample at the file's time, one batch), no
//! period (the sample count only), no event (the event [`NO_EVENT`],
//! `perf`), no command name (a timed header starting with its tid), no
//! module or offset on frames; the source lines of `-F +srcline` after a
//! frame and the source code of `-F +srccode` are skipped; `-F +tod`'s
//! wall-clock date and time is the sample's time. A recording without a
//! call graph (headers right-aligned, each with its sampled ip, no blank
//! lines between samples) is one frame a sample; samples perf prints so
//! between call-graph ones (a tracepoint's under `-F`) are one-liners
//! with no blank line after them ([`is_one_liner`]); side-band records
//! (`--show-mmap-events`, `--show-task-events`) are skipped. Times that
//! go back (`perf script --deltatime`) are refused: perf prints samples in
//! time order ([`check_header`]).
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
//!   `page-faults:count`); an event none of whose samples shows a period
//!   (`-F` without `period`, tracepoints in the default fields) has the
//!   sample count only. The event in the name keeps them apart from
//!   pprof's types (Go's `samples:count`, `cpu:nanoseconds`) and from
//!   each other. A sample has zero for the other events' types. The
//!   event name drops perf's precision and host modifiers
//!   (`cpu-clock:pppH` -> `cpu-clock`), keeps the scope ones, `u`, `k`,
//!   `h`, `G`, after a `.` (`cpu-clock:u` -> `cpu-clock.u`: what was
//!   counted differs), and writes a tracepoint's `:` as `.`
//!   (`sched.sched_switch`);
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
//!   at [`PerfOptions::time_ns`] (default: `-F +tod`'s wall-clock time when
//!   the headers have it, read as local time of the machine that loads the
//!   file, through libc's `mktime` and so `TZ`; else the file's
//!   modification time minus the recorded span, i.e. the last sample at
//!   the file's mtime).
//!   One batch for the file, or one per [`PerfOptions::window_ns`].

use std::borrow::Cow;
use std::fs::File;
use std::path::Path;

use super::text::{self, Builder, Error};
use super::{Format, ProfileFormat, ProfileReader, ReadOptions, Sniff};
use crate::model::{Frame, Label, Source, Symbol};
use rustc_hash::FxHashMap;

const NAME: &str = "perf script";

/// Where a sample's comm, pid or tid goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Placement {
    /// A sample label (`comm=burn`): selectable, one series per value.
    Label,
    /// A root frame of its own (comm, pid, tid, root first; FlameGraph's
    /// and inferno's collapsers join them in one `comm-pid/tid` frame).
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
            // A side-band record (`--show-mmap-events`) first.
            Some((line, _))
                if is_side_band(line) && line.split_whitespace().skip(1).any(is_time) =>
            {
                Sniff::Yes
            }
            // A header whose only fault is a signed period: perf script,
            // whose reader names the line.
            Some((line, _))
                if parse_header(line, &mut Vec::new())
                    .is_err_and(|e| e.starts_with("the period `")) =>
            {
                Sniff::Yes
            }
            // A header without a time (`-F` without `time`) only with a
            // frame line after it, or right-aligned with an ip or an event
            // on it (no call graph): `a;b 12` is a folded line.
            Some((line, next))
                if parse_header(line, &mut Vec::new()).is_ok_and(|h| {
                    h.time_ns.is_some()
                        || is_indented_header(line)
                        // perf indents frame lines with a tab (` 5`
                        // after `a;b 3` is a folded empty stack); one cut
                        // inside its tab and padding has no word yet.
                        || next.starts_with('\t')
                            && match next.split_whitespace().next() {
                                Some(a) => u64::from_str_radix(a, 16).is_ok(),
                                None => !next.contains('\n'),
                            }
                }) =>
            {
                Sniff::Yes
            }
            // A header line cut at the sniff length: its time is in it;
            // or, right-aligned without a time, its ip or event (the
            // last word may be cut: also tried without it).
            None if s.split_whitespace().skip(1).any(is_time) && !s.starts_with('@') => Sniff::Yes,
            None if is_indented_header(&s)
                || s.trim_end()
                    .rsplit_once(char::is_whitespace)
                    .is_some_and(|(head, _)| is_indented_header(head)) =>
            {
                Sniff::Yes
            }
            _ => Sniff::No,
        }
    }

    fn open(
        &self,
        file: File,
        path: &Path,
        options: &ReadOptions,
    ) -> Result<Box<dyn ProfileReader>, super::Error> {
        let (text, mtime) = text::read_text(file, path, NAME, &options.text)?;
        let reader = parse_within(&text, path, mtime, &options.perf, &options.text)?;
        Ok(reader.boxed_with_legacy(options, "perf", &text, &options.perf))
    }
}

/// What to say of a file that starts as a `perf.data` recording (its
/// magic `PERFILE2`, or `2ELIFREP` written on a machine of the other byte
/// order), which is no input of its own: how to make it `perf script`
/// text. `None` for any other file.
#[must_use]
pub fn perf_data_hint(first: &[u8], path: &Path) -> Option<String> {
    if !(first.starts_with(b"PERFILE2") || first.starts_with(b"2ELIFREP")) {
        return None;
    }
    if crate::ingest::stdin::source_name(path).is_some() {
        return Some(
            "a perf.data recording: pipe its text instead \
             (`perf script -i perf.data | flamehouse load -`)"
                .into(),
        );
    }
    let p = path.display();
    Some(format!(
        "a perf.data recording: run `perf script -i {p} > {p}.txt` and load that \
         (or `perf script -i {p} | flamehouse load -`)"
    ))
}

/// A sample header.
#[derive(Debug, PartialEq, Eq)]
struct Header<'a> {
    /// The command name, its words joined by one space (a slice of the
    /// line when they already are).
    comm: Cow<'a, str>,
    pid: Option<u32>,
    tid: u32,
    /// None: a `-F` list without `time`.
    time_ns: Option<u64>,
    /// `time_ns` is the wall-clock time of `-F tod` (ns since the epoch),
    /// not perf's time since boot.
    wall: bool,
    /// None: a `-F` list without `period`.
    period: Option<u64>,
    /// [`NO_EVENT`] for a `-F` list without `event`; scope modifiers kept
    /// ([`event_name`]).
    event: Cow<'a, str>,
    /// The line after the event, trimmed (a single-frame sample's
    /// `addr sym (dso)`, or a tracepoint's arguments).
    rest: &'a str,
}

/// The event of the samples of a script whose headers name none (`perf
/// script -F` without `event`): their types are `perf_samples:count` and,
/// when they show a period, `perf:count`.
pub const NO_EVENT: &str = "perf";

/// A sample header indented by spaces: perf right-aligns the command
/// name in 16 columns when it prints no call graph for the sample
/// (`perf record` without `-g`, `perf script -G`, a tracepoint's samples
/// under a `-F` list), and then no blank line follows the sample; a
/// header without a command name (`-F tid,time,...`) starts with the
/// tid's padding. Told from a frame line (which perf indents with a tab)
/// and a source line (one word) by its time, or, without a time (`-F`
/// without `time`), by the fields after its `comm tid`: a sampled ip or
/// an event.
fn is_indented_header(line: &str) -> bool {
    line.starts_with(' ')
        && (line.split_whitespace().skip(1).any(is_time)
            || parse_header(line, &mut Vec::new()).is_ok_and(|h| {
                h.time_ns.is_none() && (h.event != NO_EVENT || starts_with_ip(h.rest))
            }))
}

/// Whether a header's text after its event starts with a sampled ip (a
/// sample printed without a call graph), not a tracepoint's arguments.
fn starts_with_ip(rest: &str) -> bool {
    rest.split_whitespace()
        .next()
        .is_some_and(|t| u64::from_str_radix(t, 16).is_ok())
}

/// perf's side-band records (`--show-mmap-events`, `--show-task-events`:
/// `comm tid time: PERF_RECORD_MMAP2 ...`): not samples, skipped.
fn is_side_band(line: &str) -> bool {
    line.contains(" PERF_RECORD_")
}

/// The id perf prints for a task it no longer knows (`perf record -a`: a
/// sample of a task that exited, `:-1    -1 [001] ...`), kept as `-1`.
pub(crate) const UNKNOWN_ID: u32 = u32::MAX;

/// A pid or tid: digits, or perf's `-1` ([`UNKNOWN_ID`]).
fn parse_id(s: &str) -> Option<u32> {
    if s == "-1" {
        return Some(UNKNOWN_ID);
    }
    s.parse().ok().filter(|&id| id != UNKNOWN_ID)
}

/// Where a sample's command name goes: nowhere when the headers have none
/// (`-F tid,time,...`), else where [`PerfOptions::comm`] says.
fn comm_placement(comm: &str, options: &PerfOptions) -> Placement {
    if comm.is_empty() {
        Placement::Omit
    } else {
        options.comm
    }
}

/// A pid or tid as a label value or frame: `-1` for [`UNKNOWN_ID`].
pub(crate) fn id_string(id: u32) -> String {
    if id == UNKNOWN_ID {
        "-1".into()
    } else {
        id.to_string()
    }
}

/// `[pid/]tid`.
fn is_ids(t: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    match t.split_once('/') {
        Some((p, t)) => digits(p) && digits(t),
        None => digits(t),
    }
}

/// A source line that `perf script -F +srcline` prints after a frame,
/// indented by two spaces where frame lines start with a tab: one word
/// that is no address (`burn.c:14`, `??:0`, or `[vdso][b46]` where perf
/// knows no file), or an inlined frame's `app.c:11 (inlined)`. Not a
/// frame: skipped, as FlameGraph's and inferno's collapsers skip it.
fn is_srcline(line: &str) -> bool {
    // Asked of every chain's first line: a frame's tab answers at once.
    if !line.starts_with("  ") {
        return false;
    }
    let word = line.trim();
    let word = word.strip_suffix(" (inlined)").unwrap_or(word);
    !word.is_empty()
        && !word.contains(char::is_whitespace)
        && u64::from_str_radix(word, 16).is_err()
}

/// A source code line of `perf script -F +srccode` (`|14   h = h * 31 + i;`,
/// at the start of the line, after a sample): not a sample, skipped.
fn is_srccode(line: &str) -> bool {
    line.strip_prefix('|')
        .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
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

/// ASCII whitespace as `char::is_whitespace` has it (`\t` to `\r` and the
/// space; `u8::is_ascii_whitespace` leaves out `\x0b`).
fn is_space(b: u8) -> bool {
    matches!(b, b'\t'..=b'\r' | b' ')
}

/// `line` split as `str::split_whitespace` splits it, into `toks` (reused:
/// no allocation per line), by bytes when the line is ASCII.
fn tokens<'a>(line: &'a str, toks: &mut Vec<&'a str>) {
    toks.clear();
    if !line.is_ascii() {
        toks.extend(line.split_whitespace());
        return;
    }
    let b = line.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && is_space(b[i]) {
            i += 1;
        }
        let start = i;
        while i < b.len() && !is_space(b[i]) {
            i += 1;
        }
        if i > start {
            toks.push(&line[start..i]);
        }
    }
}

/// Where `part` (a slice of `line`) starts in `line`.
fn offset(line: &str, part: &str) -> usize {
    part.as_ptr() as usize - line.as_ptr() as usize
}

/// `[cpu]` (perf's `-F cpu`, on by default for system-wide recordings).
fn is_cpu(t: &str) -> bool {
    t.len() > 2 && t.starts_with('[') && t.ends_with(']')
}

/// `-F tod`'s `YYYY-MM-DD` `HH:MM:SS.frac` (two tokens): the wall-clock
/// time, ns since the epoch, the date and time read as local time of the
/// machine that loads the file (libc's `mktime`, which honours `TZ`).
fn parse_tod(date: &str, time: &str) -> Option<u64> {
    let num = |s: &str| -> Option<i32> {
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse().ok())
            .flatten()
    };
    let mut d = date.split('-');
    let (y, mo, day) = (num(d.next()?)?, num(d.next()?)?, num(d.next()?)?);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.split(':');
    let (h, mi, sec) = (num(t.next()?)?, num(t.next()?)?, num(t.next()?)?);
    if d.next().is_some() || t.next().is_some() || y < 1970 || !(1..=12).contains(&mo) {
        return None;
    }
    if !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    // mktime reads the zone (a stat of /etc/localtime) on every call:
    // once per second of samples here, the last second remembered.
    thread_local! {
        static LAST: std::cell::RefCell<(String, u64)> = const {
            std::cell::RefCell::new((String::new(), 0))
        };
    }
    let key_is =
        |k: &str| k.len() == date.len() + 1 + hms.len() && k.starts_with(date) && k.ends_with(hms);
    let known = LAST.with(|l| {
        let l = l.borrow();
        key_is(&l.0).then_some(l.1)
    });
    let secs = match known {
        Some(secs) => secs,
        None => {
            let secs = mktime(y, mo, day, h, mi, sec)?;
            LAST.with(|l| *l.borrow_mut() = (format!("{date} {hms}"), secs));
            secs
        }
    };
    let mut ns: u64 = 0;
    for (i, c) in frac.bytes().take(9).enumerate() {
        ns += u64::from(c - b'0') * 10u64.pow(8 - i as u32);
    }
    secs.checked_mul(1_000_000_000)?.checked_add(ns)
}

/// Local date and time -> seconds since the epoch (libc's `mktime`).
fn mktime(y: i32, mo: i32, day: i32, h: i32, mi: i32, sec: i32) -> Option<u64> {
    // SAFETY: `tm` is a plain C struct (all zero is valid) and mktime
    // only reads and normalizes it.
    let secs = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        tm.tm_year = y - 1900;
        tm.tm_mon = mo - 1;
        tm.tm_mday = day;
        tm.tm_hour = h;
        tm.tm_min = mi;
        tm.tm_sec = sec;
        tm.tm_isdst = -1;
        libc::mktime(&mut tm)
    };
    u64::try_from(secs).ok()
}

/// A header line; `toks` is scratch space. perf's default fields are
/// `comm [pid/]tid [cpu] [tod] secs.frac: [period] event:` (then the
/// sampled ip when there is no call graph, or a tracepoint's arguments);
/// a `-F` list may leave out the time (the first `[pid/]tid` after the
/// command name that the rest fits ends the name then), the period and
/// the event. The command name may hold spaces, digits and colons (a
/// thread named `a 1 2.5:`), so a time token is the sample's only where
/// the fields around it fit: `[pid/]tid [cpu] [tod]` before it, and after
/// it an optional period, then an event (a token ending in `:` that is
/// no time), a sampled ip, or nothing; else the next candidate is tried.
/// A lone id is the thread id (perf's default fields print `comm tid`).
/// A timed header may have no command name (`-F tid,time,...`: its
/// `comm` is empty).
fn parse_header<'a>(line: &'a str, toks: &mut Vec<&'a str>) -> Result<Header<'a>, String> {
    tokens(line, toks);
    let tokens = &toks[..];
    let mut first_err = None;
    // The first candidate that fits, from `skip` on; the first error kept.
    let fit = |skip: usize, is: fn(&str) -> bool, timed: bool, first_err: &mut Option<String>| {
        for (at, t) in tokens.iter().enumerate().skip(skip) {
            if is(t) {
                match header_at(line, tokens, at, timed) {
                    Ok(h) => return Some(h),
                    Err(e) => {
                        first_err.get_or_insert(e);
                    }
                }
            }
        }
        None
    };
    if let Some(h) = fit(2, is_time, true, &mut first_err) {
        return Ok(h);
    }
    // A header without a command name (`perf script -F tid,time,...`):
    // its `[pid/]tid` first, then the time.
    if tokens.len() >= 2 && is_ids(tokens[0]) && is_time(tokens[1]) {
        match header_at(line, tokens, 1, true) {
            Ok(h) => return Ok(h),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    // No time (`-F` without `time`): the `[pid/]tid` ends the name. Only
    // when no time token was there at all (a time that did not fit is the
    // error).
    if first_err.is_none() {
        if let Some(h) = fit(1, is_ids, false, &mut first_err) {
            return Ok(h);
        }
    }
    Err(first_err.unwrap_or_else(|| {
        "a sample header needs its tid (`comm [pid/]tid`) or time (`secs.frac:`)".into()
    }))
}

/// The header whose time is `tokens[at]` (`timed`), or, without a time,
/// whose `[pid/]tid` is `tokens[at]`: an error when the fields around it
/// do not fit.
fn header_at<'a>(
    line: &'a str,
    tokens: &[&'a str],
    at: usize,
    timed: bool,
) -> Result<Header<'a>, String> {
    let (ids_at, mut next) = if timed {
        (at - 1, at + 1)
    } else {
        (at, at + 1)
    };
    // Before a time: `[tod]`, `[cpu]`, the ids, leftwards.
    let mut ids_at = ids_at;
    let mut tod = None;
    if timed {
        if ids_at >= 2 && tokens[ids_at].contains(':') {
            tod = parse_tod(tokens[ids_at - 1], tokens[ids_at]);
            if tod.is_some() {
                ids_at -= 2;
            }
        }
        if ids_at >= 1 && is_cpu(tokens[ids_at]) {
            ids_at -= 1;
        }
    } else {
        if tokens.get(next).is_some_and(|t| is_cpu(t)) {
            next += 1;
        }
        if let (Some(d), Some(t)) = (tokens.get(next), tokens.get(next + 1)) {
            tod = parse_tod(d, t);
            if tod.is_some() {
                next += 2;
            }
        }
    }
    let ids = tokens[ids_at];
    let comm = &tokens[..ids_at];
    let time_ns = if timed {
        Some(parse_time(tokens[at]).ok_or("time out of range")?)
    } else {
        None
    };
    let (pid, tid) = match ids.split_once('/') {
        Some((p, t)) => (
            Some(parse_id(p).ok_or_else(|| format!("bad pid `{p}`"))?),
            parse_id(t).ok_or_else(|| format!("bad tid `{t}`"))?,
        ),
        None => (
            None,
            parse_id(ids).ok_or_else(|| format!("bad tid `{ids}`"))?,
        ),
    };
    let comm = match comm {
        // No `comm` field (`-F tid,time,...`): a time is there to tell the
        // line a header (without one, the `[pid/]tid` is never first).
        [] if timed => Cow::Borrowed(""),
        [] => return Err("no command name before the pid".into()),
        [one] => Cow::Borrowed(*one),
        words => {
            // Words one space apart are their own join.
            let (first, last) = (words[0], words[words.len() - 1]);
            let span = &line[offset(line, first)..offset(line, last) + last.len()];
            let joined = words.iter().map(|w| w.len()).sum::<usize>() + words.len() - 1;
            if span.len() == joined && span.bytes().all(|c| !is_space(c) || c == b' ') {
                Cow::Borrowed(span)
            } else {
                Cow::Owned(words.join(" "))
            }
        }
    };
    let mut after = &tokens[next..];
    let mut period = None;
    // Digits are the period when an event or nothing follows them (else
    // they are the sampled ip of a header without an event).
    if let Some(p) = after.first().filter(|t| {
        t.bytes().all(|c| c.is_ascii_digit()) && after.get(1).is_none_or(|e| e.ends_with(':'))
    }) {
        period = Some(p.parse().map_err(|_| format!("bad period `{p}`"))?);
        after = &after[1..];
    }
    let (event, rest) = match after.first() {
        // A `-F` list without `event`: nothing more, or the sampled ip
        // (no call graph), which no time follows nor an event ends (else
        // they are later and the ip is part of the command name).
        None => (Cow::Borrowed(NO_EVENT), ""),
        // A signed period (`-250000 cpu-clock:`) is no period (nor an ip, which
        // `from_str_radix` would take with its sign): say so, as
        // the folded and bpftrace readers do of a negative count.
        Some(&token)
            if token.starts_with(['-', '+'])
                && token.len() > 1
                && token[1..].bytes().all(|c| c.is_ascii_digit())
                && after.get(1).is_some_and(|e| e.ends_with(':')) =>
        {
            return Err(format!(
                "the period `{token}` is negative or signed (perf writes a count of events or \
                 nanoseconds)"
            ));
        }
        Some(&ip) if !ip.ends_with(':') && u64::from_str_radix(ip, 16).is_ok() => {
            if let Some(t) = after[1..].iter().find(|t| is_time(t)) {
                return Err(format!("a time `{t}` after the ip `{ip}`"));
            }
            if let Some(e) = after.last().filter(|t| t.ends_with(':')) {
                return Err(format!("an event `{e}` after the ip `{ip}`"));
            }
            (Cow::Borrowed(NO_EVENT), line[offset(line, ip)..].trim())
        }
        Some(&token) => {
            let rest = line[offset(line, token) + token.len()..].trim();
            let event = token
                .strip_suffix(':')
                .ok_or_else(|| format!("the event `{token}` does not end with `:`"))?;
            if is_time(token) {
                return Err(format!("the event `{token}` is a time"));
            }
            (event_name(event)?, rest)
        }
    };
    Ok(Header {
        comm,
        pid,
        tid,
        time_ns: tod.or(time_ns),
        wall: tod.is_some(),
        period,
        event,
        rest,
    })
}

/// An event's name: perf's modifiers (`cpu-clock:pppH`) dropped but the
/// ones that change what was counted, the scope (`u` user, `k` kernel,
/// `h` hypervisor, `G` guest), which stay after a `.` (`cpu-clock:u` ->
/// `cpu-clock.u`, so `-e cpu-clock:u -e cpu-clock:k` are two events); a
/// tracepoint's name (`sched:sched_switch`) is kept (its `:` becomes `.`
/// in the type's name).
fn event_name(event: &str) -> Result<Cow<'_, str>, String> {
    let event = match event.rsplit_once(':') {
        Some((e, m)) if !m.is_empty() && m.bytes().all(|c| b"ukhGHpPSDIWe".contains(&c)) => {
            let scope: String = m.chars().filter(|c| "ukhG".contains(*c)).collect();
            if scope.is_empty() {
                Cow::Borrowed(e)
            } else {
                Cow::Owned(format!("{e}.{scope}"))
            }
        }
        _ => Cow::Borrowed(event),
    };
    if event.is_empty() || event.starts_with('.') {
        return Err("empty event name".into());
    }
    Ok(event)
}

/// A file whose last sample is not ended by a whole blank line.
pub(crate) const CUT_INSIDE_A_SAMPLE: &str =
    "the file ends inside a sample (cut short?): perf script ends each sample with a blank line";

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

/// A sample's frames, leaf first.
#[derive(Debug, Clone)]
enum Frames {
    None,
    /// The sampled ip on the header line (no call graph).
    One(u32),
    /// A call chain of [`Chains`].
    Chain(u32),
    /// Anything else (a header's ip and a chain, unusual lines).
    Own(Vec<u32>),
}

struct Sample {
    time_ns: u64,
    event: u32,
    period: u64,
    frames: Frames,
    /// Index of the sample's (labels, root frame ids) in `sets`.
    set: u32,
}

/// The distinct call chains of one file, keyed by their exact bytes: a
/// chain that repeats (most samples of a profile repeat one) is parsed
/// once and then found by hashing and comparing its text. The keys borrow
/// the file's text and the values are frame ids of the file's [`Builder`],
/// so the table lives as long as the parse of one file and is bounded by
/// its size ([`text::TextOptions::max_bytes`]); the options that change frames
/// (`annotate_kernel`, `annotate_jit`) are the same for the whole file.
/// comm, pid and tid frames are not part of a chain (they are the
/// sample's roots, added per label set).
#[derive(Default)]
struct Chains<'a> {
    ix: FxHashMap<&'a [u8], u32>,
    /// Chain -> its frame ids in `ids`.
    spans: Vec<(u32, u32)>,
    /// Chain -> its number of lines (its frames and any source lines).
    lines: Vec<usize>,
    ids: Vec<u32>,
    /// The byte lengths of the chains: a text of another length is no
    /// chain, whatever its bytes (the fast path hashes no other).
    lens: rustc_hash::FxHashSet<usize>,
}

impl Chains<'_> {
    fn frames(&self, chain: u32) -> &[u32] {
        let (s, e) = self.spans[chain as usize];
        &self.ids[s as usize..e as usize]
    }
}

/// A sample's frames `f` followed by the chain `chain`.
fn with_chain(f: Frames, chain: u32, chains: &Chains<'_>) -> Frames {
    match f {
        Frames::None => Frames::Chain(chain),
        other => {
            let mut v = match other {
                Frames::One(id) => vec![id],
                Frames::Chain(c) => chains.frames(c).to_vec(),
                Frames::Own(v) => v,
                Frames::None => unreachable!(),
            };
            v.extend_from_slice(chains.frames(chain));
            Frames::Own(v)
        }
    }
}

/// The id of a frame line (trimmed here), parsed once per distinct line.
fn frame_of<'a>(
    line: &'a str,
    options: &PerfOptions,
    b: &mut Builder,
    seen: &mut FxHashMap<&'a str, u32>,
) -> Result<u32, String> {
    let line = line.trim();
    if let Some(&id) = seen.get(line) {
        return Ok(id);
    }
    let id = b.frame(parse_frame(line, options)?);
    seen.insert(line, id);
    Ok(id)
}

/// Whether perf printed the sample of this header without a call graph,
/// so that no blank line ends it: its command name right-aligned (perf
/// pads it to 16 columns only then), or its sampled ip on the line.
fn is_one_liner(line: &str, h: &Header<'_>) -> bool {
    line.starts_with(' ') && !h.comm.is_empty() || starts_with_ip(h.rest)
}

/// Whether `b` is whitespace at the start of a line (`\n` ends it).
fn is_blank(b: u8) -> bool {
    matches!(b, b'\t' | 0x0b | 0x0c | b'\r' | b' ')
}

/// The run of plain frame lines from `p` (at a line's start): lines that
/// start with ASCII whitespace and whose last byte but trailing ASCII
/// whitespace is an ASCII non-blank (so their trim is not empty, whatever
/// Unicode whitespace they hold; checked from the end, where a frame
/// line's `)` is). The end of the run (past its last newline) and its
/// number of lines; a line that is blank, not indented, or ends in
/// non-ASCII text ends it.
fn frame_run(b: &[u8], mut p: usize) -> (usize, usize) {
    let mut lines = 0;
    while p < b.len() && is_blank(b[p]) {
        let end = memchr::memchr(b'\n', &b[p..]).map_or(b.len(), |i| p + i);
        if b[p] == b' ' && std::str::from_utf8(&b[p..end]).is_ok_and(is_indented_header) {
            break;
        }
        let mut q = end;
        while q > p && is_blank(b[q - 1]) {
            q -= 1;
        }
        if q == p || b[q - 1] >= 0x80 {
            break;
        }
        p = end + 1;
        lines += 1;
    }
    (p.min(b.len()), lines)
}

/// Times may go back this far from one sample to the next (perf script
/// prints samples in time order).
const TIME_SLACK_NS: u64 = 1_000_000;

/// A script whose first time is below this (perf's times count from
/// boot) is `--reltime`'s or `--deltatime`'s: a time going back there is
/// refused at any size.
const DELTA_START_NS: u64 = 1_000_000_000;

/// What [`check_header`] keeps of the headers before: the last time,
/// whether the file's first header named an event, and each event's
/// first header's fields (a time, a period).
#[derive(Debug, Default)]
struct HeadersSeen {
    last: Option<u64>,
    /// The first header's time.
    first: Option<u64>,
    named: Option<bool>,
    events: FxHashMap<String, (bool, bool)>,
}

/// What a header must be besides well formed: a pid when pids are asked
/// for, a time not before the previous sample's, and the fields perf
/// script prints for its event. perf prints one field list per event type
/// (`-F`, or `-F sw:...,trace:...`), so a header is damaged when it has
/// not the time or the period its event's first header has, names no
/// event where the file's first header names one (or the reverse), or
/// names an event starting with a digit, which no perf event does (one
/// bad byte in a time made the header one without a time, its time taken
/// for an event: a made-up profile type).
fn check_header(
    h: &Header<'_>,
    options: &PerfOptions,
    seen: &mut HeadersSeen,
) -> Result<(), String> {
    let named = h.event != NO_EVENT;
    if named != *seen.named.get_or_insert(named) {
        return Err(if named {
            format!(
                "the header names an event `{}:` where the file's first header names none (perf \
                 script prints the event field in every header or in none)",
                h.event
            )
        } else {
            "the header names no event (a word ending in `:` after the time and period) where \
             the file's first header names one (perf script prints the event field in every \
             header or in none, unless a field list per event type, `-F type:...`, leaves it \
             out for one: then ask for `event` in every type's list): a damaged event?"
                .into()
        });
    }
    if h.event.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!(
            "the event `{}:` starts with a digit, which no perf event does: a damaged time?",
            h.event
        ));
    }
    // `burn 410 garbage: 2004008 cpu-clock:pppH:`: garbage for the time
    // made `garbage` the event and the real period and event the rest.
    let mut rest = h.rest.split_whitespace();
    if let (Some(p), Some(e), None) = (rest.next(), rest.next(), rest.next()) {
        if p.bytes().all(|c| c.is_ascii_digit()) && e.len() > 1 && e.ends_with(':') {
            return Err(format!(
                "after the event `{}:` come a period and an event (`{p} {e}`): a damaged time?",
                h.event
            ));
        }
    }
    let fields = (h.time_ns.is_some(), h.period.is_some());
    // Looked up by the name (no allocation per header): a new event's
    // first header is stored once.
    let first = match seen.events.get(h.event.as_ref()) {
        Some(&first) => first,
        None => {
            seen.events.insert(h.event.to_string(), fields);
            fields
        }
    };
    for (has, had, field) in [(fields.0, first.0, "time"), (fields.1, first.1, "period")] {
        if has != had {
            return Err(format!(
                "the header has {} {field} where the first header of event `{}:` has {} (perf \
                 script prints one field list per event type){}",
                if has { "a" } else { "no" },
                h.event,
                if had { "one" } else { "none" },
                if had {
                    format!(": a damaged {field}?")
                } else {
                    String::new()
                }
            ));
        }
    }
    let last = &mut seen.last;
    if h.pid.is_none() && options.pid != Placement::Omit {
        return Err(
            "the header shows one id (the thread id, in perf's default fields) \
             and pids are asked for: run `perf script -F +pid`"
                .into(),
        );
    }
    if let Some(t) = h.time_ns {
        let first = *seen.first.get_or_insert(t);
        if let Some(prev) = *last {
            // `--deltatime` prints each sample's time since the one before
            // (the first 0.000000): at a steady rate they go back by
            // microseconds, inside the slack; perf's own times (since
            // boot) never start in the first second.
            let deltas = !h.wall && first < DELTA_START_NS && t < prev;
            if t.saturating_add(TIME_SLACK_NS) < prev || deltas {
                return Err(format!(
                    "the time goes back {:.6} s from the sample before (perf script prints \
                     samples in time order{}): run perf script without --deltatime",
                    (prev - t) as f64 / 1e9,
                    if deltas {
                        ", and times from 0 that go back are the gaps between samples"
                    } else {
                        ""
                    }
                ));
            }
        }
        *last = Some(t);
    }
    Ok(())
}

/// An event's value slots: its sample count's, and its summed period's
/// when it has one.
type Slots = (usize, Option<usize>);

/// The profile types of the events, in order, and each event's (count,
/// summed period) slots among them: `EVENT_samples:count`, and
/// `EVENT:nanoseconds` (clock events) or `EVENT:count` only when a sample
/// of the event has a period (without one, 1 a sample is no unit).
fn event_types(
    events: &[Cow<'_, str>],
    has_period: &[bool],
) -> (Vec<(String, String, String)>, Vec<Slots>) {
    let mut types = Vec::new();
    let mut slots = Vec::new();
    for (e, &period) in events.iter().zip(has_period) {
        // `kind:sample:unit` is split at `:`: a tracepoint's
        // `sched:sched_switch` becomes `sched.sched_switch`.
        let e = e.replace(':', ".");
        // Named by the event so that no perf type is a pprof type (Go's
        // CPU profile is `samples:count` + `cpu:nanoseconds`):
        // `cpu-clock_samples:count` and `cpu-clock:nanoseconds`.
        let base = e.split('.').next().unwrap_or(&e);
        let unit = if base == "cpu-clock" || base == "task-clock" {
            "nanoseconds"
        } else {
            "count"
        };
        let count = types.len();
        types.push((
            "perf".to_owned(),
            format!("{e}_samples"),
            "count".to_owned(),
        ));
        let p = period.then(|| {
            types.push(("perf".to_owned(), e, unit.to_owned()));
            types.len() - 1
        });
        slots.push((count, p));
    }
    (types, slots)
}

/// The profile's time of the first sample (`first` in the samples' time):
/// `--time`, else `-F tod`'s wall-clock time, else the file's mtime minus
/// the recorded span.
fn time_base(options: &PerfOptions, wall: bool, first: u64, mtime: u64, span: u64) -> u64 {
    options.time_ns.unwrap_or(if wall {
        first
    } else {
        mtime.saturating_sub(span)
    })
}

/// Parses a whole `perf script` text (`path` and `mtime` for messages and
/// the default time).
///
/// Each distinct call chain is parsed once per file ([`Chains`]), each
/// distinct frame line once; samples of the same chain and thread in one
/// batch are summed before they reach the [`Builder`] (in order of first
/// appearance, so the result is the line-by-line reading's, row for row).
///
/// # Errors
/// The first bad line, or a file without a sample.
pub fn parse(
    text: &str,
    path: &Path,
    mtime: u64,
    options: &PerfOptions,
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
    options: &PerfOptions,
    limits: &text::TextOptions,
) -> Result<text::TextReader, Error> {
    let err = |line: usize, message: String| Error::Line {
        format: NAME,
        path: path.to_owned(),
        line: line as u64 + 1,
        message,
    };
    // A last sample's stack would be stored partial.
    text::ends_whole(text, path, NAME)?;
    let bytes = text.as_bytes();
    let mut events: Vec<Cow<'_, str>> = Vec::new();
    // Per event: whether a sample of it has a period.
    let mut has_period: Vec<bool> = Vec::new();
    let mut samples: Vec<Sample> = Vec::new();
    let mut comms = std::collections::BTreeSet::new();
    let mut pids = std::collections::BTreeSet::new();
    let mut periods = std::collections::BTreeSet::new();
    let mut last_period = None;
    let mut open = false;
    let mut sets: Vec<(Vec<Label>, Vec<u32>)> = Vec::new();
    let mut set_ix: FxHashMap<(Cow<'_, str>, u32, u32), u32> = FxHashMap::default();
    let mut b = Builder::within(0, limits);
    // Frame line -> id: each distinct line is parsed once per file.
    let mut seen: FxHashMap<&str, u32> = FxHashMap::default();
    // The same for a header's sampled ip (its text after the event).
    let mut head_seen: FxHashMap<&str, u32> = FxHashMap::default();
    let mut chains = Chains::default();
    // Where the next `\n\n` (a blank line after a line) is, `usize::MAX`
    // for none: searched again only once passed.
    let mut blank_at = 0usize;
    let blank_line = memchr::memmem::Finder::new(b"\n\n");
    let mut toks = Vec::new();
    // The line of the last header when it has no time: such a header (`-F`
    // without `time`) is only perf's with frames after it or an ip on it;
    // else any `word 123` line would be a sample (a folded file read with
    // `--format perf`).
    let mut untimed_at: Option<usize> = None;
    // Whether a sample had frame lines (a call graph: then each sample
    // ends with a blank line), and whether every time was `-F tod`'s.
    let (mut chained, mut wall) = (false, true);
    // Whether the open sample is one perf printed without a call graph
    // ([`is_one_liner`]): no blank line follows it.
    let mut one_liner = false;
    let mut headers = HeadersSeen::default();
    let frameless_untimed = |samples: &[Sample], at: Option<usize>| match (at, samples.last()) {
        (Some(line), Some(s)) if matches!(s.frames, Frames::None) => Err(err(
            line,
            "a sample header without a time has no frames (`perf script -F` needs `ip`)".into(),
        )),
        _ => Ok(()),
    };
    let (mut pos, mut n) = (0usize, 0usize);
    while pos < bytes.len() {
        let end = memchr::memchr(b'\n', &bytes[pos..]).map_or(bytes.len(), |i| pos + i);
        let raw = &text[pos..end];
        // As `str::lines`: a `\r\n` ending is a line ending.
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let here = n;
        let next = end + 1;
        if line.trim().is_empty() {
            // Only a whole line ends a sample: blanks the file ends in
            // without a line end, a sample open, are a frame line's
            // indentation cut short (they closed it: its stack was stored
            // cut to its first frames, or as none).
            // (A script without call graphs ends in no frame line: spaces
            // after its last header are an editor's, a tab a frame's.)
            if open && end == bytes.len() && (chained && !one_liner || line.contains('\t')) {
                return Err(err(n, CUT_INSIDE_A_SAMPLE.into()));
            }
            open = false;
            (pos, n) = (next, n + 1);
            continue;
        }
        if line.starts_with('#') && !open || is_srccode(line) {
            (pos, n) = (next, n + 1);
            continue;
        }
        if line.starts_with(char::is_whitespace) && !is_indented_header(line) {
            if !open {
                return Err(err(n, "a frame line outside a sample".into()));
            }
            // A source line alone (`-F +srcline` without a call graph) is
            // no chain: such a script has no blank lines.
            if !is_srcline(line) {
                chained = true;
                one_liner = false;
            }
            let sample = samples.last_mut().expect("open sample");
            // Fast path: a chain seen before, found by its bytes up to the
            // blank line that ends it, without looking at its lines (a
            // stored chain was a whole run of frame lines, and the line
            // after it here is blank, so the run would end there too). The
            // next blank line is searched once for every sample before it,
            // and only a length some chain has is hashed.
            if blank_at < pos {
                blank_at = blank_line
                    .find(&bytes[pos..])
                    .map_or(usize::MAX, |i| pos + i);
            }
            if blank_at != usize::MAX && chains.lens.contains(&(blank_at + 1 - pos)) {
                if let Some(&chain) = chains.ix.get(&bytes[pos..=blank_at]) {
                    let lines = chains.lines[chain as usize];
                    sample.frames = with_chain(
                        std::mem::replace(&mut sample.frames, Frames::None),
                        chain,
                        &chains,
                    );
                    (pos, n) = (blank_at + 1, n + lines);
                    continue;
                }
            }
            let (run_end, lines) = frame_run(bytes, pos);
            if lines > 0 {
                let run = &text[pos..run_end];
                let chain = match chains.ix.get(run.as_bytes()) {
                    Some(&c) => c,
                    None => {
                        let start = chains.ids.len();
                        for (i, l) in run.split_terminator('\n').enumerate() {
                            if is_srcline(l) {
                                continue;
                            }
                            let id = frame_of(l, options, &mut b, &mut seen)
                                .map_err(|m| err(here + i, m))?;
                            chains.ids.push(id);
                        }
                        let c = u32::try_from(chains.spans.len()).expect("fewer than 2^32 chains");
                        chains.spans.push((start as u32, chains.ids.len() as u32));
                        chains.lines.push(lines);
                        chains.ix.insert(run.as_bytes(), c);
                        chains.lens.insert(run.len());
                        c
                    }
                };
                sample.frames = with_chain(
                    std::mem::replace(&mut sample.frames, Frames::None),
                    chain,
                    &chains,
                );
                (pos, n) = (run_end, n + lines);
                continue;
            }
            // A line the run does not take (indented with non-ASCII
            // whitespace): alone, as the line-by-line reading does.
            if is_srcline(line) {
                (pos, n) = (next, n + 1);
                continue;
            }
            let id = frame_of(line, options, &mut b, &mut seen).map_err(|m| err(n, m))?;
            let mut v = match std::mem::replace(&mut sample.frames, Frames::None) {
                Frames::None => Vec::new(),
                Frames::One(id) => vec![id],
                Frames::Chain(c) => chains.frames(c).to_vec(),
                Frames::Own(v) => v,
            };
            v.push(id);
            sample.frames = Frames::Own(v);
            (pos, n) = (next, n + 1);
            continue;
        }
        if is_side_band(line) {
            open = false;
            (pos, n) = (next, n + 1);
            continue;
        }
        let h = parse_header(line, &mut toks).map_err(|m| err(n, m))?;
        frameless_untimed(&samples, untimed_at)?;
        untimed_at = (h.time_ns.is_none() && h.event == NO_EVENT).then_some(n);
        check_header(&h, options, &mut headers).map_err(|m| err(n, m))?;
        wall &= h.wall;
        let event = match events.iter().position(|e| *e == h.event) {
            Some(i) => i,
            None => {
                events.push(h.event.clone());
                has_period.push(false);
                events.len() - 1
            }
        };
        has_period[event] |= h.period.is_some();
        let mut frames = Frames::None;
        // No call graph: the sampled ip on the header line (tracepoint
        // arguments, which do not start with an address, are not one).
        if starts_with_ip(h.rest) {
            let id = match head_seen.get(h.rest) {
                Some(&id) => id,
                None => {
                    let words: Vec<&str> = h.rest.split_whitespace().collect();
                    let f = parse_frame(&words.join(" "), options).map_err(|m| err(n, m))?;
                    let id = b.frame(f);
                    head_seen.insert(h.rest, id);
                    id
                }
            };
            frames = Frames::One(id);
        }
        // A lone id is the thread id (perf's default fields); only asked
        // for pids (`check_header`) does it stand for the pid.
        let pid = h.pid.unwrap_or(h.tid);
        // The (comm, pid, tid) of a sample become its labels and root
        // frames once per distinct triple, not once per sample.
        let header_one_liner = is_one_liner(line, &h);
        let triple = (h.comm, pid, h.tid);
        let set = match set_ix.get(&triple) {
            Some(&i) => i,
            None => {
                let (comm, pid, tid) = &triple;
                let parts = [
                    ("comm", comm_placement(comm, options), comm.to_string()),
                    ("pid", options.pid, id_string(*pid)),
                    ("tid", options.tid, id_string(*tid)),
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
                comms.insert(comm.to_string());
                pids.insert(*pid);
                sets.push((labels, roots));
                let i = u32::try_from(sets.len() - 1).expect("fewer than 2^32 threads");
                set_ix.insert(triple, i);
                i
            }
        };
        if last_period != Some((event, h.period)) {
            periods.insert((event, h.period));
            last_period = Some((event, h.period));
        }
        samples.push(Sample {
            // Without times (`-F` without `time`) every sample is at the
            // start: one window, at the file's time.
            time_ns: h.time_ns.unwrap_or(0),
            event: event as u32,
            period: h.period.unwrap_or(1),
            frames,
            set,
        });
        open = true;
        one_liner = header_one_liner;
        (pos, n) = (next, n + 1);
    }
    frameless_untimed(&samples, untimed_at)?;
    // perf script ends every sample of a call graph with a blank line: a
    // last sample without one was cut at a line's end, its stack partial
    // (unless perf printed it without a call graph: a one-liner).
    if chained && open && !one_liner {
        return Err(err(n.saturating_sub(1), CUT_INSIDE_A_SAMPLE.into()));
    }
    if samples.is_empty() {
        return Err(Error::File {
            format: NAME,
            path: path.to_owned(),
            message: "no sample header (`comm tid secs.frac: period event:`) in the file".into(),
        });
    }
    let (types, slots) = event_types(&events, &has_period);
    let first = samples.iter().map(|s| s.time_ns).min().unwrap_or(0);
    let last = samples.iter().map(|s| s.time_ns).max().unwrap_or(0);
    let span = last - first;
    let base = time_base(options, wall, first, mtime, span);
    let n_types = types.len();
    b.set_types(n_types);
    let window = options.window_ns.filter(|&w| w > 0);
    let mut order: Vec<usize> = (0..samples.len()).collect();
    if window.is_some() {
        order.sort_by_key(|&i| samples[i].time_ns);
    }
    // Samples of one batch summed by (frames, label set), in order of
    // first appearance: the builder then sees each such pair once, with
    // the same sums and in the same order as sample by sample (its sums
    // saturate, and values are not negative, so grouping them first
    // changes nothing).
    let mut sums = Sums::default();
    let mut current = None;
    for i in order {
        let s = &samples[i];
        let (start, len) = match window {
            Some(w) => ((s.time_ns - first) / w * w, w),
            None => (0, span),
        };
        if current != Some(start) {
            sums.flush(&mut b, &samples, &sets, &chains);
            b.batch(base.saturating_add(start), len);
            current = Some(start);
        }
        let key = match s.frames {
            Frames::None => (0, 0, s.set),
            Frames::One(id) => (1, u64::from(id), s.set),
            Frames::Chain(c) => (2, u64::from(c), s.set),
            // Not grouped: its own slot.
            Frames::Own(_) => (3, i as u64, s.set),
        };
        let slot = *sums.ix.entry(key).or_insert_with(|| {
            sums.first.push(i);
            sums.values.extend(std::iter::repeat_n(0, n_types));
            sums.first.len() - 1
        });
        let v = &mut sums.values[slot * n_types..(slot + 1) * n_types];
        let (count, period) = slots[s.event as usize];
        v[count] = v[count].saturating_add(1);
        if let Some(p) = period {
            // Past Int64 is an error, as the other formats' sums are:
            // saturated, the stored value would be silently wrong.
            v[p] = i64::try_from(s.period)
                .ok()
                .and_then(|x| v[p].checked_add(x))
                .ok_or_else(|| Error::File {
                    format: NAME,
                    path: path.to_owned(),
                    message: format!(
                        "the periods of one stack sum past {} (the largest Int64 a value can hold)",
                        i64::MAX
                    ),
                })?;
        }
    }
    sums.flush(&mut b, &samples, &sets, &chains);
    let single_period =
        (periods.len() == events.len()).then(|| periods.iter().next().and_then(|p| p.1));
    let source = Source {
        identity: text::identity_with("perf", text, options),
        pid: if pids.len() == 1 {
            pids.iter()
                .next()
                .copied()
                .filter(|&p| p != UNKNOWN_ID)
                .unwrap_or(0)
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
        legacy_identity: Vec::new(),
    };
    let types = text::value_types(&types);
    b.check(NAME, path)?;
    Ok(b.finish(Format::Perf, types, source, text.len() as u64))
}

/// The samples of the open batch summed by (frames, label set).
#[derive(Default)]
struct Sums {
    /// (frames kind, chain / frame / sample, set) -> slot.
    ix: FxHashMap<(u8, u64, u32), usize>,
    /// Slot -> its first sample.
    first: Vec<usize>,
    /// Slot -> one sum per type.
    values: Vec<i64>,
}

impl Sums {
    /// Adds the slots to the builder's current batch, in order, and empties.
    fn flush(
        &mut self,
        b: &mut Builder,
        samples: &[Sample],
        sets: &[(Vec<Label>, Vec<u32>)],
        chains: &Chains<'_>,
    ) {
        let n = if self.first.is_empty() {
            0
        } else {
            self.values.len() / self.first.len()
        };
        let mut frames = Vec::new();
        let mut values = Vec::with_capacity(n);
        for (slot, &i) in self.first.iter().enumerate() {
            let s = &samples[i];
            frames.clear();
            match &s.frames {
                Frames::None => {}
                Frames::One(id) => frames.push(*id),
                Frames::Chain(c) => frames.extend_from_slice(chains.frames(*c)),
                Frames::Own(v) => frames.extend_from_slice(v),
            }
            let (labels, roots) = &sets[s.set as usize];
            frames.extend_from_slice(roots);
            values.clear();
            values.extend(
                self.values[slot * n..(slot + 1) * n]
                    .iter()
                    .copied()
                    .enumerate(),
            );
            b.add(&frames, labels, &values);
        }
        self.ix.clear();
        self.first.clear();
        self.values.clear();
    }
}

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;
