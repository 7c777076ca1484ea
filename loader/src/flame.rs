//! `flamehouse flame`: render any flame-graph view to folded text or SVG, for
//! people without Grafana. It owns the view, metric and time arguments of
//! the command (parsed and checked before any SQL runs) and the check that a
//! view is not empty before anything is written.

use crate::error::{Error, Result};
use crate::storage::ident::Ident;
use crate::storage::{sql_string, Backend};

/// A flame-graph view of the schema (the `flame_*` views).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ViewKind {
    /// Live memory at the process's peak (`flame_peak`).
    Peak,
    /// Live memory at an instant `--t` (`flame_at`).
    At,
    /// What grew over [`--t1`, `--t2`] (`flame_change`, direction `added`).
    Added,
    /// What shrank over [`--t1`, `--t2`] (`flame_change`, direction `removed`).
    Removed,
    /// Both instants in one differential flame graph (`flame_diff`).
    Diff,
    /// Allocated bytes or allocations up to `--t` (`flame_cumulative`).
    Cumulative,
}

impl ViewKind {
    /// The name users type.
    pub fn name(self) -> &'static str {
        match self {
            ViewKind::Peak => "peak",
            ViewKind::At => "at",
            ViewKind::Added => "added",
            ViewKind::Removed => "removed",
            ViewKind::Diff => "diff",
            ViewKind::Cumulative => "cumulative",
        }
    }
}

/// What a view's values count: the views' `metric` parameter, which since
/// schema version 4 refuses anything else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Metric {
    /// Live bytes (`cumulative`: bytes allocated).
    #[default]
    Bytes,
    /// Live allocations (`cumulative`: allocations made).
    Count,
}

impl Metric {
    /// The views' parameter value.
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::Bytes => "bytes",
            Metric::Count => "count",
        }
    }

    /// The unit as tooltips name it: `bytes` or `allocations`.
    pub fn unit_name(self) -> &'static str {
        match self {
            Metric::Bytes => "bytes",
            Metric::Count => "allocations",
        }
    }
}

/// A time argument, as typed: checked for form at parse time, resolved
/// against the process's snapshots later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeArg {
    /// An absolute UTC instant, milliseconds since the epoch.
    Utc(i64),
    /// Milliseconds after the process's first snapshot (`+90s`, `+5m`).
    Offset(i64),
    /// The process's first snapshot.
    Start,
    /// The process's last snapshot.
    End,
}

/// The forms a time argument takes, for messages and `--help`. An offset
/// without a unit (`+90`) is seconds, as `sleep` reads it.
pub const TIME_FORMS: &str =
    "`YYYY-MM-DD[ hh:mm:ss[.fff]]` (UTC; or RFC 3339 with `Z` / `+hh:mm`), `+90s` / `+5m` / `+1h` after the process's first snapshot (`+90`: seconds), `start` or `end`";

impl std::str::FromStr for TimeArg {
    type Err = Error;
    fn from_str(s: &str) -> Result<TimeArg> {
        let bad = |why: &str| Error::Usage(format!("bad time {s:?}: {why}; use {TIME_FORMS}"));
        let t = s.trim();
        if t == "end" {
            return Ok(TimeArg::End);
        }
        if t == "start" {
            return Ok(TimeArg::Start);
        }
        if let Some(rest) = t.strip_prefix('+') {
            let (num, unit_ms) = match rest.char_indices().last() {
                Some((i, 's')) => (&rest[..i], 1_000.0),
                Some((i, 'm')) => (&rest[..i], 60_000.0),
                Some((i, 'h')) => (&rest[..i], 3_600_000.0),
                _ => (rest, 1_000.0),
            };
            let n: f64 = num
                .parse()
                .ok()
                .filter(|n: &f64| n.is_finite() && *n >= 0.0 && !num.starts_with('+'))
                .ok_or_else(|| bad("not a number of seconds, minutes or hours"))?;
            let ms = n * unit_ms;
            if ms > 1e15 {
                return Err(bad("offset too large"));
            }
            return Ok(TimeArg::Offset(ms.round() as i64));
        }
        parse_utc_ms(t).map(TimeArg::Utc).map_err(|why| bad(&why))
    }
}

/// Parses `YYYY-MM-DD[ hh:mm:ss[.fff]]` (a `T` in place of the space, and
/// RFC 3339's `Z` or `+hh:mm` / `-hh:mm` offset, are accepted too; no
/// offset is UTC) into milliseconds since the epoch. A fraction finer than
/// a millisecond is refused unless its extra digits are zeros: the stored
/// times are milliseconds, and a range's edge is not moved silently.
pub fn parse_utc_ms(s: &str) -> std::result::Result<i64, String> {
    let ns = parse_utc_ns(s)?;
    if ns.rem_euclid(1_000_000) != 0 {
        return Err("fractions of a second take 1 to 3 digits (milliseconds)".into());
    }
    // Years 0000-9999 in ms fit an i64 with room to spare.
    Ok(i64::try_from(ns.div_euclid(1_000_000)).expect("a 4-digit year in ms"))
}

/// The one civil-time parser of the CLI (the query flags, the memory
/// `flame` times and `load --time`): `YYYY-MM-DD` (its midnight), or
/// `YYYY-MM-DD hh:mm[:ss[.f]]` with a `T` allowed for the space, 1 to 9
/// fraction digits, and an optional `Z`, `+hh:mm`, `-hh:mm` (or `+hhmm`)
/// offset; without one the time is UTC (local time is never guessed).
/// Every field has its exact width and range (no 13th month, no 30
/// February, `00:00:010` is refused). Returns nanoseconds since the epoch,
/// as an i128: a 4-digit year's nanoseconds pass an i64's after 2262 (they
/// wrapped, and 9999-01-01 was refused for its "fraction").
pub fn parse_utc_ns(s: &str) -> std::result::Result<i128, String> {
    let not = || -> String { "not a time".into() };
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| -> std::result::Result<i64, String> {
        let f = s.get(r).ok_or_else(not)?;
        if !f.is_empty() && f.bytes().all(|c| c.is_ascii_digit()) {
            Ok(f.parse().expect("digits"))
        } else {
            Err(not())
        }
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return Err(not());
    }
    let (y, mo, d) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (mut h, mut mi, mut sec, mut frac_ns, mut offset_min) = (0, 0, 0, 0i64, 0i64);
    // `2026-12-01Z` is that day's midnight too.
    if b.len() > 10 && !matches!(&s[10..], "Z" | "z") {
        let shape_ok =
            b.len() >= 16 && (b[10] == b' ' || b[10] == b'T' || b[10] == b't') && b[13] == b':';
        if !shape_ok {
            return Err(not());
        }
        (h, mi) = (digits(11..13)?, digits(14..16)?);
        // Seconds may be left out (`2026-12-01 14:30`), not a fraction.
        let mut rest = &s[16..];
        if b.len() > 16 && b[16] == b':' {
            sec = digits(17..19)?;
            rest = &s[19..];
        } else if rest.starts_with('.') {
            return Err(not());
        }
        if let Some(f) = rest.strip_prefix('.') {
            let n = f.bytes().take_while(u8::is_ascii_digit).count();
            if n == 0 || n > 9 {
                return Err("fractions of a second take 1 to 9 digits".into());
            }
            frac_ns = f[..n].parse::<i64>().expect("digits") * 10i64.pow(9 - n as u32);
            rest = &f[n..];
        }
        match rest {
            "" | "Z" | "z" => {}
            o if o.starts_with(['+', '-']) => {
                let sign = if o.starts_with('-') { -1 } else { 1 };
                let o = &o[1..];
                let (oh, om) = match o.len() {
                    5 if o.as_bytes()[2] == b':' => (o.get(..2), o.get(3..)),
                    4 => (o.get(..2), o.get(2..)),
                    _ => (None, None),
                };
                let two = |t: Option<&str>| {
                    t.filter(|t| t.len() == 2 && t.bytes().all(|c| c.is_ascii_digit()))
                        .map(|t| t.parse::<i64>().expect("digits"))
                };
                match (two(oh), two(om)) {
                    (Some(oh), Some(om)) if oh <= 23 && om <= 59 => {
                        offset_min = sign * (oh * 60 + om);
                    }
                    _ => return Err(format!("offset {rest:?} is not +hh:mm or -hh:mm")),
                }
            }
            _ => return Err(not()),
        }
    }
    if !(1..=12).contains(&mo) {
        return Err(format!("month {mo} does not exist"));
    }
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in_month = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ][(mo - 1) as usize];
    if d < 1 || d > days_in_month {
        return Err(format!("day {d} does not exist in {y:04}-{mo:02}"));
    }
    if h > 23 || mi > 59 || sec > 59 {
        return Err(format!("{h:02}:{mi:02}:{sec:02} is not a time of day"));
    }
    // Days since the epoch from a civil date (Howard Hinnant's algorithm).
    let (yy, mm) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * mm + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = ((days * 24 + h) * 60 + mi - offset_min) * 60 + sec;
    Ok(i128::from(secs) * 1_000_000_000 + i128::from(frac_ns))
}

/// Which view to render, with its parameters.
#[derive(Debug, Clone)]
pub enum FlameView {
    /// Live bytes/count at an instant (`flame_at`).
    At {
        /// Instant, `YYYY-MM-DD hh:mm:ss[.fff]` UTC.
        t: String,
    },
    /// At the memory peak (`flame_peak`).
    Peak,
    /// Added over [t1, t2] (`flame_change`, direction `added`).
    Added {
        /// Start.
        t1: String,
        /// End.
        t2: String,
    },
    /// Removed over [t1, t2] (`flame_change`, direction `removed`).
    Removed {
        /// Start.
        t1: String,
        /// End.
        t2: String,
    },
    /// The change over [t1, t2] as a differential flame graph (`flame_diff`):
    /// folded lines carry both counts (`stack before after`), which inferno
    /// draws in red (grew) and blue (shrank).
    Diff {
        /// Baseline instant.
        t1: String,
        /// Comparison instant.
        t2: String,
    },
    /// Cumulative allocations up to t (`flame_cumulative`).
    Cumulative {
        /// Instant.
        t: String,
    },
}

/// The view's call (`db.flame_peak(...)`) and whether it is the diff view
/// (whose rows carry `valueRight, selfRight`).
fn view_call(
    db: &Ident,
    process_id: u64,
    metric: Metric,
    max_nodes: u32,
    view: &FlameView,
) -> (String, bool) {
    let common = format!(
        "process_id = {process_id}, metric = {}, max_nodes = {max_nodes}",
        sql_string(metric.as_str())
    );
    let call = match view {
        FlameView::At { t } => format!("flame_at({common}, t = {})", sql_string(t)),
        FlameView::Peak => format!("flame_peak({common})"),
        FlameView::Added { t1, t2 } => format!(
            "flame_change({common}, t1 = {}, t2 = {}, direction = 'added')",
            sql_string(t1),
            sql_string(t2)
        ),
        FlameView::Removed { t1, t2 } => format!(
            "flame_change({common}, t1 = {}, t2 = {}, direction = 'removed')",
            sql_string(t1),
            sql_string(t2)
        ),
        FlameView::Cumulative { t } => format!("flame_cumulative({common}, t = {})", sql_string(t)),
        FlameView::Diff { t1, t2 } => {
            let call = format!(
                "flame_diff({common}, t1 = {}, t2 = {})",
                sql_string(t1),
                sql_string(t2)
            );
            return (format!("{db}.{call}"), true);
        }
    };
    (format!("{db}.{call}"), false)
}

/// The SQL that selects the view's `(level, label, value, self)` rows
/// (diff: `..., valueRight, selfRight`), in pre-order.
pub fn view_sql(
    db: &Ident,
    process_id: u64,
    metric: Metric,
    max_nodes: u32,
    view: &FlameView,
) -> String {
    view_rows_sql(db, process_id, metric, max_nodes, view, "").0
}

/// [`view_sql`] with `lead` columns first (`"i, "`), and whether the view
/// is a diff.
fn view_rows_sql(
    db: &Ident,
    process_id: u64,
    metric: Metric,
    max_nodes: u32,
    view: &FlameView,
    lead: &str,
) -> (String, bool) {
    let (call, diff) = view_call(db, process_id, metric, max_nodes, view);
    let right = if diff { ", valueRight, selfRight" } else { "" };
    (
        format!("SELECT {lead}level, label, value, self{right} FROM {call} ORDER BY i"),
        diff,
    )
}

/// Folded lines of a view's pre-order tree (`(i, level, label, value,
/// self[, valueRight, selfRight])` rows): a line per node with a value of
/// its own, its path below the root, `;` in a frame made `:` and line
/// breaks a space (the folded format's rules, as `stackFold` applies
/// them), sorted by the path's bytes. The root's own value (empty stacks)
/// is a line of the root's label, as the `profile` commands write it, so
/// the file sums to the view's total. Read in one pass keeping the current
/// path (O(rows x depth)); the former SQL fold captured whole arrays in a
/// lambda per row and used memory quadratic in the nodes (27 GiB asked for
/// a 9,360-node tree at line granularity).
fn folded_lines(nodes: &[crate::profiles::Node], diff: bool) -> Vec<String> {
    let values = if diff { 2 } else { 1 };
    let mut lines = crate::profiles::folded(nodes, false, diff);
    let path = |l: &String| l.rsplitn(values + 1, ' ').last().unwrap_or("").to_string();
    lines.sort_by_cached_key(path);
    lines
}

/// A process of the schema and the span of its snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    /// `process_id`.
    pub id: u64,
    /// Short name.
    pub name: String,
    /// First and last snapshot, milliseconds since the epoch (`None`: no
    /// snapshot stored).
    pub span: Option<(i64, i64)>,
    /// How many other stored processes the `--process` given also names
    /// (a name used by several runs, a reused pid): this one started last.
    pub others: u64,
}

impl Process {
    /// `process 4242 (workload), snapshots 2026-... .. 2026-...` for messages.
    pub fn describe(&self) -> String {
        match self.span {
            Some((a, b)) => format!(
                "process {} ({}) has snapshots from {} to {} UTC",
                self.id,
                self.name,
                format_utc_ms(a),
                format_utc_ms(b)
            ),
            None => format!("process {} ({}) has no snapshots", self.id, self.name),
        }
    }

    /// A time argument as milliseconds since the epoch.
    pub fn resolve(&self, t: TimeArg) -> Result<i64> {
        let (first, last) = self.span.ok_or_else(|| Error::Usage(self.describe()))?;
        Ok(match t {
            TimeArg::Utc(ms) => ms,
            TimeArg::Offset(ms) => first.saturating_add(ms),
            TimeArg::Start => first,
            TimeArg::End => last,
        })
    }
}

/// Resolves a process given as a `process_id`, a pid or a name: of
/// several that match (runs of one program, a reused pid) the one started
/// last, ties broken by the larger `process_id`, with how many others
/// matched ([`Process::others`]); with its span. An unknown one is an error
/// that says how to list the known ones.
pub fn resolve_process(backend: &dyn Backend, db: &Ident, process: &str) -> Result<Process> {
    let filter = match process.parse::<u64>() {
        Ok(id) => format!("(process_id = {id} OR pid = {id})"),
        Err(_) => format!("name = {}", sql_string(process)),
    };
    let out = backend.query_tsv(&format!(
        "SELECT process_id, name, isNotNull(first_ts), toUnixTimestamp64Milli(ifNull(first_ts, 0)), \
         toUnixTimestamp64Milli(ifNull(end_time, 0)), count() OVER () - 1 \
         FROM {db}.process_list WHERE {filter} ORDER BY start_time DESC, process_id DESC LIMIT 1"
    ))?;
    let f: Vec<&str> = out.trim_end_matches('\n').split('\t').collect();
    if f.len() < 6 {
        return Err(Error::Usage(format!(
            "no process {process:?} in database {db} (list them: flamehouse sql \"SELECT process_id, name, first_ts, end_time FROM {db}.process_list\")"
        )));
    }
    let bad = || Error::Query {
        message: format!("unexpected process_list row {out:?}"),
    };
    let id = f[0].parse().map_err(|_| bad())?;
    let span = if f[2] == "1" {
        Some((
            f[3].parse().map_err(|_| bad())?,
            f[4].parse().map_err(|_| bad())?,
        ))
    } else {
        None
    };
    Ok(Process {
        id,
        name: unescape_tsv(f[1]),
        span,
        others: f[5].parse().map_err(|_| bad())?,
    })
}

/// Undoes ClickHouse's TabSeparated escaping of one field.
pub fn unescape_tsv(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('0') => out.push('\0'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some(c) => out.push(c),
            None => out.push('\\'),
        }
    }
    out
}

/// Escapes one field of a tab-separated table as ClickHouse's
/// TabSeparated does (`\\`, `\t`, `\n`, `\r`, `\0`, `\b`, `\f`;
/// [`unescape_tsv`] undoes it): a name may hold any character (pprof
/// allows any string), and a raw tab or newline in it would add a column
/// or split a row.
#[must_use]
pub fn escape_tsv(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c => out.push(c),
        }
    }
    out
}

/// The engine's TabSeparated output with its fields escaped as
/// [`escape_tsv`] does, in every column but those of `keep` (0-based): the
/// engine also escapes a String's quote (`o\'brien` for `o'brien`), which
/// TSV does not. A `keep` column is a Map or Array printed as the engine's
/// literal, whose `\'` is inside its quotes and stays.
#[must_use]
pub fn unquote_tsv(tsv: &str, keep: &[usize]) -> String {
    let mut out = String::with_capacity(tsv.len());
    for line in tsv.split_inclusive('\n') {
        let (line, end) = line.strip_suffix('\n').map_or((line, ""), |l| (l, "\n"));
        for (i, field) in line.split('\t').enumerate() {
            if i > 0 {
                out.push('\t');
            }
            if keep.contains(&i) || !field.contains('\\') {
                out.push_str(field);
            } else {
                out.push_str(&escape_tsv(&unescape_tsv(field)));
            }
        }
        out.push_str(end);
    }
    out
}

/// What `flamehouse flame` renders: the view, its times as typed, metric
/// and pruning. Defaults: metric `bytes`, `max_nodes` 0 (no limit). It is
/// also the command's arguments (these docs are its `--help`).
#[derive(Debug, Clone, clap::Args)]
pub struct FlameRequest {
    /// The view.
    #[arg(value_enum)]
    pub view: ViewKind,
    /// Process: its process_id, pid or name (of several, the one started
    /// last, with a note).
    #[arg(long)]
    pub process: String,
    /// Instant of `at` and `cumulative`: UTC `YYYY-MM-DD hh:mm:ss[.fff]`,
    /// `+90s` / `+5m` / `+1h` after the process's first snapshot,
    /// `start` or `end`.
    #[arg(long, allow_hyphen_values = true)]
    pub t: Option<TimeArg>,
    /// Interval start of `added`, `removed` and `diff` (forms as --t).
    #[arg(long, allow_hyphen_values = true)]
    pub t1: Option<TimeArg>,
    /// Interval end of `added`, `removed` and `diff` (forms as --t).
    #[arg(long, allow_hyphen_values = true)]
    pub t2: Option<TimeArg>,
    /// What values count (`cumulative`: bytes allocated or allocations).
    #[arg(long, value_enum, default_value_t = Metric::Bytes)]
    pub metric: Metric,
    /// Prune to at most this many nodes (0 = no limit; else at least 2).
    #[arg(long, default_value_t = 0, value_parser = crate::profiles::parse_max_nodes)]
    pub max_nodes: u32,
}

/// A rendered view: folded lines (never empty) and a title.
#[derive(Debug, Clone)]
pub struct Flame {
    /// Folded lines (`a;b;c value` or, for `diff`, `a;b;c before after`).
    pub lines: Vec<String>,
    /// `flamehouse added (bytes)`.
    pub title: String,
    /// What the values count, as tooltips name it: `bytes` or `allocations`.
    pub unit: &'static str,
    /// The tree's root label as the view returned it (so an SVG's root bar
    /// says what the Grafana panel's does).
    pub root: String,
    /// The process drawn.
    pub process: Process,
}

/// Checks the request's arguments against its view, resolves the process and
/// its times, runs the view and returns its folded lines. An argument the
/// view does not use, a time outside the process's snapshots that leaves the
/// view empty, and an empty view are errors that say why (with the
/// process's span), so no empty or misleading file is written.
pub fn flame(backend: &dyn Backend, db: &Ident, req: &FlameRequest) -> Result<Flame> {
    let view = req.view.name();
    let (needs_t, needs_range) = match req.view {
        ViewKind::Peak => (false, false),
        ViewKind::At | ViewKind::Cumulative => (true, false),
        ViewKind::Added | ViewKind::Removed | ViewKind::Diff => (false, true),
    };
    let usage = |m: String| Err(Error::Usage(m));
    // Flags that do not fit the view: usage errors (exit 2).
    if !needs_t && req.t.is_some() {
        return Err(Error::Arguments(format!("view {view} takes no --t")));
    }
    if !needs_range && (req.t1.is_some() || req.t2.is_some()) {
        return Err(Error::Arguments(format!("view {view} takes no --t1/--t2")));
    }
    let need = |v: Option<TimeArg>, name: &str| {
        v.ok_or_else(|| Error::Arguments(format!("view {view} needs --{name} ({TIME_FORMS})")))
    };
    let (t, t1, t2) = (
        if needs_t {
            Some(need(req.t, "t")?)
        } else {
            None
        },
        if needs_range {
            Some(need(req.t1, "t1")?)
        } else {
            None
        },
        if needs_range {
            Some(need(req.t2, "t2")?)
        } else {
            None
        },
    );
    let p = resolve_process(backend, db, &req.process)?;
    let (first, _) = p.span.ok_or_else(|| Error::Usage(p.describe()))?;
    let fmt = format_utc_ms;
    let fv = match (t, t1, t2) {
        (Some(t), _, _) => {
            let t = p.resolve(t)?;
            if t < first {
                return usage(format!(
                    "view {view} is empty at {}, before the first snapshot: {}",
                    fmt(t),
                    p.describe()
                ));
            }
            let t = fmt(t);
            if req.view == ViewKind::At {
                FlameView::At { t }
            } else {
                FlameView::Cumulative { t }
            }
        }
        (None, Some(t1), Some(t2)) => {
            let (t1, t2) = (p.resolve(t1)?, p.resolve(t2)?);
            if t2 < t1 {
                return usage(format!(
                    "--t2 {} is before --t1 {}: the interval is empty; {}",
                    fmt(t2),
                    fmt(t1),
                    p.describe()
                ));
            }
            if t2 < first {
                return usage(format!(
                    "view {view} is empty from {} to {}, before the first snapshot: {}",
                    fmt(t1),
                    fmt(t2),
                    p.describe()
                ));
            }
            let (t1, t2) = (fmt(t1), fmt(t2));
            match req.view {
                ViewKind::Added => FlameView::Added { t1, t2 },
                ViewKind::Removed => FlameView::Removed { t1, t2 },
                _ => FlameView::Diff { t1, t2 },
            }
        }
        _ => FlameView::Peak,
    };
    let (sql, diff) = view_rows_sql(db, p.id, req.metric, req.max_nodes, &fv, "i, ");
    let nodes = crate::profiles::nodes(backend, &sql)?;
    let lines = folded_lines(&nodes, diff);
    let root = nodes.first().map(|n| n.label.clone());
    if lines.is_empty() {
        let what = match &fv {
            FlameView::Peak => "at its peak".to_string(),
            FlameView::At { t } | FlameView::Cumulative { t } => format!("at {t}"),
            FlameView::Added { t1, t2 } => {
                format!(
                    "from {t1} to {t2}: no stack grew in {}",
                    req.metric.as_str()
                )
            }
            FlameView::Removed { t1, t2 } => {
                format!(
                    "from {t1} to {t2}: no stack shrank in {}",
                    req.metric.as_str()
                )
            }
            FlameView::Diff { t1, t2 } => format!("at both {t1} and {t2}"),
        };
        return usage(format!(
            "view {view} ({}) is empty {what}; {}",
            req.metric.as_str(),
            p.describe()
        ));
    }
    Ok(Flame {
        lines,
        title: format!("flamehouse {view} ({})", req.metric.as_str()),
        unit: req.metric.unit_name(),
        root: root.unwrap_or_else(|| "total".into()),
        process: p,
    })
}

/// `YYYY-MM-DD hh:mm:ss.sss` (UTC) of milliseconds since the epoch, the form
/// the views' time parameters take.
pub fn format_utc_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (d, r) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let z = d + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{day:02} {:02}:{:02}:{:02}.{:03}",
        r / 3600,
        r / 60 % 60,
        r % 60,
        ms.rem_euclid(1000)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every control character ClickHouse's TabSeparated escapes (a NUL
    /// in a folded name was printed raw by `profile top`) round-trips.
    #[test]
    fn tsv_escaping_round_trips_every_escaped_character() {
        let name = "a\\b\tc\nd\re\0f\u{8}g\u{c}h";
        let e = escape_tsv(name);
        assert!(!e.chars().any(|c| c.is_control()), "{e:?}");
        assert_eq!(e, r"a\\b\tc\nd\re\0f\bg\fh");
        assert_eq!(unescape_tsv(&e), name);
    }

    #[test]
    fn utc_milliseconds_format() {
        assert_eq!(format_utc_ms(0), "1970-01-01 00:00:00.000");
        assert_eq!(format_utc_ms(1_767_225_612_345), "2026-01-01 00:00:12.345");
        assert_eq!(format_utc_ms(951_782_400_001), "2000-02-29 00:00:00.001");
        assert_eq!(format_utc_ms(-1), "1969-12-31 23:59:59.999");
    }

    #[test]
    fn times_are_checked_for_form_and_range() {
        use std::str::FromStr;
        let ok = |s: &str| TimeArg::from_str(s).unwrap();
        assert_eq!(ok("1970-01-01 00:00:00"), TimeArg::Utc(0));
        assert_eq!(
            ok("2026-01-01 00:00:12.345"),
            TimeArg::Utc(1_767_225_612_345)
        );
        assert_eq!(
            ok("2026-01-01T00:00:12.3Z"),
            TimeArg::Utc(1_767_225_612_300)
        );
        assert_eq!(ok("2000-02-29 00:00:00.001"), TimeArg::Utc(951_782_400_001));
        assert_eq!(ok("+90s"), TimeArg::Offset(90_000));
        assert_eq!(ok("+90"), TimeArg::Offset(90_000));
        assert_eq!(ok("+1.5m"), TimeArg::Offset(90_000));
        assert_eq!(ok("+2h"), TimeArg::Offset(7_200_000));
        // A date alone is its midnight (`date -ud 2026-01-01 +%s`).
        assert_eq!(ok("2026-01-01"), TimeArg::Utc(1_767_225_600_000));
        // RFC 3339 offsets (`date -ud '2026-01-01T02:00:00+02:00' +%s`).
        assert_eq!(
            ok("2026-01-01T02:00:00+02:00"),
            TimeArg::Utc(1_767_225_600_000)
        );
        assert_eq!(
            ok("2025-12-31T19:30:00.5-0430"),
            TimeArg::Utc(1_767_225_600_500)
        );
        // Far years (their ns pass an i64's): the date, not a wrapped value.
        assert_eq!(ok("9999-12-31"), TimeArg::Utc(253_402_214_400_000));
        // Seconds left out are 0.
        assert_eq!(ok("2026-01-01 00:00"), TimeArg::Utc(1_767_225_600_000));
        assert_eq!(
            ok("2025-12-31T19:30-04:30"),
            TimeArg::Utc(1_767_225_600_000)
        );
        // Extra zero digits are the same millisecond.
        assert_eq!(
            ok("2026-01-01 00:00:12.345000"),
            TimeArg::Utc(1_767_225_612_345)
        );
        assert_eq!(ok("end"), TimeArg::End);
        assert_eq!(ok("start"), TimeArg::Start);
        for (bad, why) in [
            ("2026-13-45 99:00:00", "month 13"),
            ("2026-02-29 00:00:00", "day 29"),
            ("2026-01-01 24:00:00", "not a time of day"),
            ("yesterday", "not a time"),
            ("2026-01", "not a time"),
            ("2026-01-01 00:00:00.1234", "1 to 3 digits"),
            ("2026-01-01 00:00:010", "not a time"),
            ("2026-01-01 0:00:00", "not a time"),
            ("2026-01-01 00:00.5", "not a time"),
            ("2026-01-01 00:0", "not a time"),
            ("2026-01-01 00:00:0", "not a time"),
            ("2026-01-01 00:00:00+2", "offset"),
            ("2026-01-01 00:00:00+24:00", "offset"),
            ("2026-01-01 00:00:00+aé", "offset"),
            ("2026-01-01 00:00:00+é:0", "offset"),
            ("2026-01-01 00:00:00.", "1 to 9 digits"),
            ("+", "not a number"),
            ("+-5s", "not a number"),
            ("+5x", "not a number"),
            ("+inf", "not a number"),
        ] {
            let e = TimeArg::from_str(bad).unwrap_err().to_string();
            assert!(
                e.contains(why) && e.contains(&format!("{bad:?}")),
                "{bad}: {e}"
            );
        }
        // The oracle of the parser: the formatter (an independent algorithm
        // direction) round-trips every day of a few centuries.
        let mut ms = -2_208_988_800_000i64; // 1900-01-01
        while ms < 4_102_444_800_000 {
            assert_eq!(
                TimeArg::from_str(&format_utc_ms(ms)).unwrap(),
                TimeArg::Utc(ms)
            );
            ms += 86_400_000 + 3_600_123;
        }
    }

    /// The root's own value is a line of its label; paths sorted by
    /// bytes; zero lines dropped; frames cleaned; a diff keeps both sides.
    #[test]
    fn folded_lines_of_a_tree() {
        use crate::profiles::Node;
        let node = |level: usize, label: &str, self_value: i64, self_right: i64| Node {
            level,
            label: label.into(),
            value: 0,
            self_value,
            value_right: 0,
            self_right,
        };
        let tree = [
            node(0, "total", 117, 0),
            node(1, "b", 0, 0),
            node(2, "c;d", 3, 0),
            node(1, "a\nx", -16, 0),
        ];
        assert_eq!(
            folded_lines(&tree, false),
            ["a x -16", "b;c:d 3", "total 117"]
        );
        let diff = [
            node(0, "total", 0, 0),
            node(1, "a", 0, 5),
            node(1, "b", 2, 0),
        ];
        assert_eq!(folded_lines(&diff, true), ["a 0 5", "b 2 0"]);
    }

    #[test]
    fn unit_names() {
        assert_eq!(Metric::Bytes.unit_name(), "bytes");
        assert_eq!(Metric::Count.unit_name(), "allocations");
    }
}
