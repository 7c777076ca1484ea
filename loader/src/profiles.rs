//! The library side of `flamehouse profile ...`, the commands on
//! continuous profiles (a group of its own: `flamehouse flame` reads the
//! memory views of one process). It owns running the SQL of
//! [`crate::continuous_query`] and turning the results into what the
//! commands write: folded lines (inferno and `flamegraph.pl` input, SVG via
//! [`crate::render`]), tables, and a pprof export of a selection.
//!
//! Times are `YYYY-MM-DD[ hh:mm:ss[.fff]]` (UTC), `now`, or `now-N` with a
//! unit `s`, `m`, `h`, `d` or `w` ([`parse_time`]); the commands default to the
//! last 24 hours, long enough for a profile loaded from a file today.

use crate::continuous_query::{self as cq, QueryOptions, SandwichSide, Selection};
use crate::error::{Error, Result};
use crate::flame::{escape_tsv, parse_utc_ms, unescape_tsv};
use crate::formats::pprof::write::{PprofWriter, WriteFrame};
use crate::storage::rows::stable_hash;
use crate::storage::{sql_string, Backend};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The forms a time argument takes, for messages and `--help`.
pub const TIME_FORMS: &str =
    "`YYYY-MM-DD[ hh:mm[:ss[.fff]]]` (UTC; a date alone is its midnight; or RFC 3339 `YYYY-MM-DDThh:mm:ssZ` / `+hh:mm`), Unix seconds (`1764576000`, as `date +%s`) or milliseconds (`1764576000000ms`, as Grafana's URLs), `now`, or `now-30s` / `now-15m` / `now-1h` / `now-7d` / `now-2w`";

/// Default `--from`: 24 hours before now.
pub const DEFAULT_FROM: &str = "now-24h";

/// Default `--to`: now.
pub const DEFAULT_TO: &str = "now";

/// Milliseconds since the epoch, now.
#[must_use]
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Parses a time argument (see [`TIME_FORMS`]) into ms since the epoch,
/// `now` being `now_ms`.
///
/// # Errors
/// [`Error::Usage`] naming the argument and the forms.
pub fn parse_time(s: &str, now_ms: i64) -> Result<i64> {
    let bad = || Error::Usage(format!("bad time {s:?}: use {TIME_FORMS}"));
    let t = s.trim();
    if t == "now" {
        return Ok(now_ms);
    }
    if let Some(rest) = t.strip_prefix("now-") {
        let (num, unit) = rest.split_at(rest.len().saturating_sub(1));
        let unit_ms: i64 = match unit {
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            // Grafana's week; its `M` and `y` are calendar months and
            // years, of no fixed length: not taken.
            "w" => 7 * 86_400_000,
            _ => return Err(bad()),
        };
        let n: i64 = num
            .parse()
            .ok()
            .filter(|n| *n >= 0 && !num.starts_with('+'))
            .ok_or_else(bad)?;
        let ms = n.checked_mul(unit_ms).map(|d| now_ms - d).ok_or_else(bad)?;
        return within_dates(s, ms);
    }
    // Unix seconds (a fraction allowed), or milliseconds with `ms`.
    let (digits, unit_ms) = match t.strip_suffix("ms") {
        Some(ms) => (ms, 1.0),
        None => (t, 1000.0),
    };
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let v: f64 = digits.parse().map_err(|_| bad())?;
        // Stored times are milliseconds: a finer fraction is refused, not
        // rounded (it would move the range's edge past a profile).
        let frac = digits.split_once('.').map_or("", |(_, f)| f);
        let kept = if unit_ms == 1.0 { 0 } else { 3 };
        if frac.len() > kept && frac[kept..].bytes().any(|c| c != b'0') {
            return Err(Error::Usage(format!(
                "bad time {s:?}: finer than a millisecond, which is what is stored; use {TIME_FORMS}"
            )));
        }
        let ms = (v * unit_ms).round();
        // Past 2149 (a millisecond count given as seconds, say).
        if ms > LAST_DATE_MS as f64 {
            return Err(Error::Usage(format!(
                "bad time {s:?}: after 2149-06-06 as {}, where nothing is stored; \
                 milliseconds take the suffix `ms`",
                if unit_ms == 1.0 {
                    "milliseconds"
                } else {
                    "seconds"
                }
            )));
        }
        #[allow(clippy::cast_possible_truncation)]
        return within_dates(s, ms as i64);
    }
    let ms = parse_utc_ms(t)
        .map_err(|why| Error::Usage(format!("bad time {s:?}: {why}; use {TIME_FORMS}")))?;
    within_dates(s, ms)
}

/// The last millisecond of the engine's `Date` range (2149-06-06).
const LAST_DATE_MS: i64 = 5_662_310_399_999;

/// A time outside the engine's `Date` range (1970-01-01 to 2149-06-06, the
/// day keys of the stacks and series) is refused: such a range lost every
/// stack (a flame graph of one `total` bar) instead of failing.
fn within_dates(s: &str, ms: i64) -> Result<i64> {
    if ms < 0 {
        return Err(Error::Usage(format!(
            "bad time {s:?}: before 1970-01-01 00:00:00 UTC, where nothing is stored (the \
             engine's dates start there)"
        )));
    }
    if ms > LAST_DATE_MS {
        return Err(Error::Usage(format!(
            "bad time {s:?}: after 2149-06-06, where nothing is stored (the engine's dates \
             end there)"
        )));
    }
    Ok(ms)
}

/// One node of a flame-graph result, pre-order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Depth (0: the root).
    pub level: usize,
    /// The frame.
    pub label: String,
    /// Total value.
    pub value: i64,
    /// Self value.
    pub self_value: i64,
    /// Diffs: the comparison's total.
    pub value_right: i64,
    /// Diffs: the comparison's self value.
    pub self_right: i64,
}

/// Runs a flame-graph query of [`crate::continuous_query`] (rows `(i,
/// level, label, value, self[, valueRight, selfRight])`).
///
/// # Errors
/// The engine's error, or a row of another shape.
pub fn nodes(backend: &dyn Backend, sql: &str) -> Result<Vec<Node>> {
    let tsv = backend.query_tsv(sql)?;
    tsv.lines()
        .map(|row| {
            let f: Vec<&str> = row.split('\t').collect();
            let bad = || Error::Query {
                message: format!("unexpected flame-graph row {row:?}"),
            };
            if f.len() != 5 && f.len() != 7 {
                return Err(bad());
            }
            let n = |i: usize| -> Result<i64> {
                f.get(i).map_or(Ok(0), |v| v.parse().map_err(|_| bad()))
            };
            Ok(Node {
                level: f[1].parse().map_err(|_| bad())?,
                label: unescape_tsv(f[2]),
                value: n(3)?,
                self_value: n(4)?,
                value_right: n(5)?,
                self_right: n(6)?,
            })
        })
        .collect()
}

/// The stacks of a pre-order tree: every node with a self value (either
/// side of a diff), its path root first (the root itself included when
/// `with_root`), with `(self, self_right)`.
#[must_use]
pub fn stacks(nodes: &[Node], with_root: bool) -> Vec<(Vec<String>, i64, i64)> {
    let mut path: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for n in nodes {
        path.truncate(n.level);
        path.push(&n.label);
        if n.self_value != 0 || n.self_right != 0 {
            let p = if with_root { &path[..] } else { &path[1..] };
            out.push((
                p.iter().map(|s| (*s).to_string()).collect(),
                n.self_value,
                n.self_right,
            ));
        }
    }
    out
}

/// Folded lines `a;b;c N` (diffs: `a;b;c A B`, inferno's differential
/// form) of a tree; `;` in a frame becomes `:` and line breaks a space, as
/// the folded format needs. An empty path (value on the root) is written
/// as the root's label.
#[must_use]
pub fn folded(nodes: &[Node], with_root: bool, diff: bool) -> Vec<String> {
    fold_lines(nodes, with_root, diff, None)
}

/// The frame an SVG draws a value on the root as: inferno drops an
/// empty-stack line (the root would lose its value), and a frame named as
/// the root would read as a second root.
pub const SVG_EMPTY_STACK: &str = "[empty stack]";

/// [`folded`], an empty path written as `empty` when given.
fn fold_lines(nodes: &[Node], with_root: bool, diff: bool, empty: Option<&str>) -> Vec<String> {
    let clean = |s: &str| s.replace(';', ":").replace(['\n', '\r'], " ");
    stacks(nodes, with_root)
        .into_iter()
        .map(|(p, a, b)| {
            let path = if p.is_empty() {
                empty
                    .map(str::to_string)
                    .unwrap_or_else(|| nodes.first().map(|n| clean(&n.label)).unwrap_or_default())
            } else {
                p.iter().map(|s| clean(s)).collect::<Vec<_>>().join(";")
            };
            if diff {
                format!("{path} {a} {b}")
            } else {
                format!("{path} {a}")
            }
        })
        .collect()
}

/// The flame graph of a selection.
///
/// # Errors
/// The engine's error.
pub fn flame(
    backend: &dyn Backend,
    opts: &QueryOptions,
    sel: &Selection,
    max_nodes: u32,
) -> Result<Vec<Node>> {
    nodes(backend, &cq::flame_sql(opts, sel, max_nodes))
}

/// The two halves of the sandwich of `function`: `(callers, callees)`.
///
/// # Errors
/// The engine's error.
pub fn sandwich(
    backend: &dyn Backend,
    opts: &QueryOptions,
    sel: &Selection,
    function: &str,
    max_nodes: u32,
) -> Result<(Vec<Node>, Vec<Node>)> {
    Ok((
        nodes(
            backend,
            &cq::sandwich_sql(opts, sel, function, SandwichSide::Callers, max_nodes),
        )?,
        nodes(
            backend,
            &cq::sandwich_sql(opts, sel, function, SandwichSide::Callees, max_nodes),
        )?,
    ))
}

/// One row of [`top`].
#[derive(Debug, Clone, PartialEq)]
pub struct TopRow {
    /// The function.
    pub function: String,
    /// Value of the stacks it is the leaf of.
    pub self_value: i64,
    /// Value of the stacks through it (recursion once).
    pub total: i64,
    /// Self over the whole selection's total.
    pub self_share: f64,
    /// Total over the whole selection's total.
    pub total_share: f64,
}

/// Top functions of a selection (see [`cq::top_functions_sql`]).
///
/// # Errors
/// [`Error::Usage`] for a bad regex; the engine's error.
pub fn top(
    backend: &dyn Backend,
    opts: &QueryOptions,
    sel: &Selection,
    function_regex: Option<&str>,
    limit: u32,
) -> Result<Vec<TopRow>> {
    top_filtered(
        backend,
        opts,
        sel,
        function_regex,
        limit,
        &cq::StackFilter::default(),
    )
}

/// [`top`] of only the samples `filter` keeps (`--focus`, `--ignore`).
///
/// # Errors
/// A bad regex, the engine's error, an unexpected row.
pub fn top_filtered(
    backend: &dyn Backend,
    opts: &QueryOptions,
    sel: &Selection,
    function_regex: Option<&str>,
    limit: u32,
    filter: &cq::StackFilter,
) -> Result<Vec<TopRow>> {
    let tsv = backend.query_tsv(&cq::top_functions_sql_filtered(
        opts,
        sel,
        function_regex,
        limit,
        filter,
    )?)?;
    tsv.lines()
        .map(|row| {
            let f: Vec<&str> = row.split('\t').collect();
            let bad = || Error::Query {
                message: format!("unexpected top row {row:?}"),
            };
            if f.len() != 5 {
                return Err(bad());
            }
            Ok(TopRow {
                function: unescape_tsv(f[0]),
                self_value: f[1].parse().map_err(|_| bad())?,
                total: f[2].parse().map_err(|_| bad())?,
                self_share: f[3].parse().unwrap_or(f64::NAN),
                total_share: f[4].parse().unwrap_or(f64::NAN),
            })
        })
        .collect()
}

/// What an exported sample is kept apart by: its stack (root first), its
/// series' labels and its numeric labels, each sorted by key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ExportKey {
    stack: Vec<String>,
    labels: Vec<(String, String)>,
    numeric: Vec<(String, i64)>,
}

/// The rows of [`cq::export_rows_sql`]: JSON texts of the labels, the
/// numeric labels and the stack, and the value.
fn export_rows(tsv: &str) -> Result<Vec<(ExportKey, i64)>> {
    let json = |text: &str, row: &str| {
        serde_json::from_str::<serde_json::Value>(&unescape_tsv(text)).map_err(|e| Error::Query {
            message: format!("unexpected export row {row:?}: {e}"),
        })
    };
    let mut out = Vec::new();
    for row in tsv.lines() {
        let bad = || Error::Query {
            message: format!("unexpected export row {row:?}"),
        };
        let f: Vec<&str> = row.split('\t').collect();
        let [labels, numeric, stack, v] = f[..] else {
            return Err(bad());
        };
        let text = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => Some(s.clone()),
            _ => None,
        };
        let mut key = ExportKey {
            stack: Vec::new(),
            labels: Vec::new(),
            numeric: Vec::new(),
        };
        for frame in json(stack, row)?.as_array().ok_or_else(bad)? {
            key.stack.push(text(frame).ok_or_else(bad)?);
        }
        for (k, v) in json(labels, row)?.as_object().ok_or_else(bad)? {
            key.labels.push((k.clone(), text(v).ok_or_else(bad)?));
        }
        for (k, n) in json(numeric, row)?.as_object().ok_or_else(bad)? {
            // 64-bit integers come quoted (`output_format_json_quote_64bit_integers`).
            let n = match n {
                serde_json::Value::String(s) => s.parse().ok(),
                n => n.as_i64(),
            };
            key.numeric.push((k.clone(), n.ok_or_else(bad)?));
        }
        key.labels.sort();
        key.numeric.sort();
        out.push((key, v.parse().map_err(|_| bad())?));
    }
    Ok(out)
}

/// A pprof export of a selection ([`export_pprof`]).
#[derive(Debug, Clone)]
pub struct Export {
    /// The gzipped profile.
    pub bytes: Vec<u8>,
    /// Its sample types, in order (`sample:unit`).
    pub types: Vec<String>,
    /// Its samples (distinct stacks).
    pub samples: usize,
}

/// The order of the sample types of an export when the user names none:
/// counts first, then the others, each by name, so that the last (the one
/// `go tool pprof` shows by default) is the weighted one, as Go orders
/// them (`samples:count` before `cpu:nanoseconds`, `contentions:count`
/// before `delay:nanoseconds`, `inuse_space:bytes` last).
fn default_type_order(types: &mut [String]) {
    types.sort_by_key(|t| (!t.ends_with(":count"), t.clone()));
}

/// A selection as one gzipped pprof profile: every type of `types` (empty:
/// every type stored in the range that has samples in the selection, in
/// [`default_type_order`]) one `sample_type`, the stacks merged over the
/// range and the selector, each stack one sample per series and numeric
/// labels with a value per type (zero where a type has none of it), its
/// series' labels (`service`, the `--label`s of the load and pprof's own
/// sample labels) as string labels and its numeric labels with their units,
/// so `go tool pprof -tags` and `-tagfocus` read the export as they read the
/// input. Read from the samples over the exact range (the rollups keep no
/// numeric labels). Span ids are not written. Frames carry the function, file and
/// line the frames dictionary holds for them (at `--granularity function`
/// one line per function, the first loaded; at `line` each frame's own).
/// `time_nanos` is the first selected profile's time, `duration_nanos`
/// reaches the end of the last one; period and period type are those of
/// the selected profiles (the first non-empty).
///
/// # Errors
/// [`Error::Usage`] for a type without `:` or a selection with no samples
/// (naming the stored types); the engine's error.
pub fn export_pprof(
    backend: &dyn Backend,
    opts: &QueryOptions,
    types: &[String],
    from_ms: i64,
    to_ms: i64,
    selector: &cq::Selector,
) -> Result<Export> {
    let db = &opts.database;
    let (t1, t2) = (
        format!("fromUnixTimestamp64Milli(toInt64({from_ms}), 'UTC')"),
        format!("fromUnixTimestamp64Milli(toInt64({to_ms}), 'UTC')"),
    );
    let mut types: Vec<String> = types.to_vec();
    let explicit = !types.is_empty();
    if !explicit {
        types = backend
            .query_tsv(&format!(
                "SELECT DISTINCT profile_type FROM {db}.cp_profiles \
                 WHERE ts >= {t1} AND ts < {t2}"
            ))?
            .lines()
            .map(unescape_tsv)
            .collect();
        default_type_order(&mut types);
    }
    for t in &types {
        if !t.contains(':') {
            return Err(Error::Arguments(format!(
                "--type {t:?}: expected sample:unit (cpu:nanoseconds)"
            )));
        }
    }
    // Every type's samples, merged by stack and labels.
    let mut merged: BTreeMap<ExportKey, Vec<i64>> = BTreeMap::new();
    let mut kept: Vec<String> = Vec::new();
    for t in &types {
        let sel = Selection {
            profile_type: t.clone(),
            from_ms,
            to_ms,
            selector: selector.clone(),
        };
        let rows = export_rows(&backend.query_tsv(&cq::export_rows_sql(opts, &sel))?)?;
        if rows.is_empty() && !explicit {
            continue;
        }
        let i = kept.len();
        kept.push(t.clone());
        for (key, v) in rows {
            let e = merged.entry(key).or_default();
            e.resize(i + 1, 0);
            e[i] += v;
        }
    }
    if merged.is_empty() {
        let hint = match types.as_slice() {
            [t] => unknown_type_hint(backend, opts, t)?,
            _ => None,
        };
        // No profile of the types in the range: what is stored, and when.
        let hint = match hint {
            Some(h) => Some(h),
            None => {
                let in_range = backend.query_tsv(&format!(
                    "SELECT count() FROM {db}.cp_profiles WHERE ts >= {t1} AND ts < {t2} AND {}",
                    types_filter(&types)
                ))?;
                if in_range.trim() == "0" {
                    Some(stored_types_note(backend, opts, &types)?)
                } else {
                    None
                }
            }
        };
        return Err(Error::Usage(hint.unwrap_or_else(|| {
            format!(
                "nothing to export: no samples of {} in the selection",
                if types.is_empty() {
                    "any type".to_string()
                } else {
                    types.join(", ")
                }
            )
        })));
    }
    // What the frames dictionary knows of each frame.
    let labels: BTreeSet<&str> = merged
        .keys()
        .flat_map(|k| &k.stack)
        .map(String::as_str)
        .collect();
    let mut info: HashMap<String, (String, String, i64)> = HashMap::new();
    let ids: Vec<String> = labels
        .iter()
        .map(|l| stable_hash(&[l.as_bytes()]).to_string())
        .collect();
    for chunk in ids.chunks(10_000) {
        let tsv = backend.query_tsv(&format!(
            "SELECT label, any(function), any(file), any(line) FROM {db}.frames \
             WHERE frame_id IN ({}) GROUP BY label",
            chunk.join(",")
        ))?;
        for row in tsv.lines() {
            let f: Vec<&str> = row.split('\t').collect();
            if let [label, function, file, line] = f[..] {
                info.insert(
                    unescape_tsv(label),
                    (
                        unescape_tsv(function),
                        unescape_tsv(file),
                        line.parse().unwrap_or(0),
                    ),
                );
            }
        }
    }
    // Time, duration and period of the profiles the selection read (not of
    // every profile of the types in the range: another service's period).
    let ids = kept
        .iter()
        .map(|t| {
            Selection {
                profile_type: t.clone(),
                from_ms,
                to_ms,
                selector: selector.clone(),
            }
            .sql(opts)
            .profile_ids(db)
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ");
    let list = kept
        .iter()
        .map(|t| sql_string(t))
        .collect::<Vec<_>>()
        .join(",");
    let meta = backend.query_tsv(&format!(
        "SELECT min(toUnixTimestamp64Nano(ts)), max(toUnixTimestamp64Nano(ts) + duration_ns), \
         anyIf(period, period > 0), anyIf(period_type, period_type != '') \
         FROM {db}.cp_profiles WHERE profile_type IN ({list}) AND ts >= {t1} AND ts < {t2} \
         AND profile_id IN ({ids})"
    ))?;
    let m: Vec<&str> = meta.trim_end_matches('\n').split('\t').collect();
    let num = |i: usize| m.get(i).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
    let (start, end, period) = (num(0), num(1), num(2));
    let period_type = m.get(3).map(|v| unescape_tsv(v)).unwrap_or_default();
    let period_type = period_type.split_once(':').unwrap_or(("", ""));
    // Each numeric label's unit, as the selected profiles recorded it.
    let units: HashMap<String, String> = backend
        .query_tsv(&format!(
            "SELECT k, any(num_units[k]) FROM {db}.cp_profiles \
             ARRAY JOIN mapKeys(num_units) AS k \
             WHERE profile_type IN ({list}) AND ts >= {t1} AND ts < {t2} \
             AND profile_id IN ({ids}) GROUP BY k"
        ))?
        .lines()
        .filter_map(|row| row.split_once('\t'))
        .map(|(k, u)| (unescape_tsv(k), unescape_tsv(u)))
        .collect();
    let sample_types: Vec<(&str, &str)> = kept
        .iter()
        .map(|t| t.rsplit_once(':').expect("checked above"))
        .collect();
    let mut w = PprofWriter::new(&sample_types, period_type, period);
    w.set_time(start, end.saturating_sub(start).max(0));
    let mut frames: Vec<WriteFrame<'_>> = Vec::new();
    for (key, values) in &merged {
        frames.clear();
        for label in key.stack.iter().rev() {
            frames.push(match info.get(label) {
                Some((function, file, line)) => WriteFrame {
                    function: if function.is_empty() { label } else { function },
                    file,
                    line: *line,
                },
                None => WriteFrame {
                    function: label,
                    ..Default::default()
                },
            });
        }
        let mut v = values.clone();
        v.resize(kept.len(), 0);
        let labels: Vec<(&str, &str)> = key
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let numeric: Vec<(&str, i64, &str)> = key
            .numeric
            .iter()
            .map(|(k, n)| (k.as_str(), *n, units.get(k).map_or("", String::as_str)))
            .collect();
        w.add_labelled(&frames, &v, &labels, &numeric);
    }
    let samples = w.samples();
    let bytes = w.encode_gzip().map_err(|e| Error::Query {
        message: format!("compressing the export: {e}"),
    })?;
    Ok(Export {
        bytes,
        types: kept,
        samples,
    })
}

/// Why a query of `profile_type` came back empty, when the type itself is
/// the reason: no profile of it is stored. Names the stored types, so a
/// typo (`cpu:ns`) or a memory-style name does not look like an idle
/// service. `None` when the type is stored (the range or selector left
/// nothing).
///
/// # Errors
/// A failed query.
pub fn unknown_type_hint(
    backend: &dyn Backend,
    opts: &QueryOptions,
    profile_type: &str,
) -> Result<Option<String>> {
    let db = &opts.database;
    let types = backend.query_tsv(&format!(
        "SELECT DISTINCT profile_type FROM {db}.cp_profiles ORDER BY profile_type"
    ))?;
    let types: Vec<String> = types.lines().map(unescape_tsv).collect();
    if types.iter().any(|t| t == profile_type) {
        return Ok(None);
    }
    Ok(Some(if types.is_empty() {
        format!("no profile of type {profile_type:?} is stored (no continuous profile at all)")
    } else {
        format!(
            "no profile of type {profile_type:?} is stored; stored types: {}",
            types.join(", ")
        )
    }))
}

/// The condition on `cp_profiles` of `types` (none: every type).
fn types_filter(types: &[String]) -> String {
    if types.is_empty() {
        return "1".into();
    }
    let list: Vec<String> = types.iter().map(|t| sql_string(t)).collect();
    format!("profile_type IN ({})", list.join(", "))
}

/// What `export` says when no profile of `types` (none: of any type) is in
/// its range: those types, each with the times of its first and last
/// profile (UTC).
///
/// # Errors
/// The engine's.
fn stored_types_note(
    backend: &dyn Backend,
    opts: &QueryOptions,
    types: &[String],
) -> Result<String> {
    let db = &opts.database;
    let rows = backend.query_tsv(&format!(
        "SELECT profile_type, toString(min(ts)), toString(max(ts)) \
         FROM {db}.cp_profiles WHERE {} \
         GROUP BY profile_type ORDER BY profile_type",
        types_filter(types)
    ))?;
    let stored: Vec<String> = rows
        .lines()
        .map(|l| {
            let f: Vec<String> = l.split('\t').map(unescape_tsv).collect();
            match f.as_slice() {
                [t, a, b] => format!("{t} from {a} to {b}"),
                _ => l.to_string(),
            }
        })
        .collect();
    Ok(if stored.is_empty() {
        "nothing to export: no continuous profile is stored".to_string()
    } else {
        format!(
            "nothing to export: no profile in the selection's time range (--to excludes its \
             instant); stored (UTC): {}",
            stored.join("; ")
        )
    })
}

// ---------------------------------------------------------------------
// The commands: one options struct per `flamehouse profile` subcommand
// (its docs are the `--help`, its defaults the library's) and one function
// that runs it, writing files itself and its report or table to `out`
// (the binary's buffered stdout), notes to `err`.
// ---------------------------------------------------------------------

/// `out` failed: a [`Error::File`] on `<stdout>`, so that the binary can
/// tell a closed pipe ([`is_broken_pipe`]) from a failure.
fn out_err(cause: std::io::Error) -> Error {
    Error::File {
        path: PathBuf::from("<stdout>"),
        cause,
    }
}

/// Whether `e` is the reader of the output going away (`| head`): the
/// binary then exits 0, as `sql` does.
#[must_use]
pub fn is_broken_pipe(e: &Error) -> bool {
    matches!(e, Error::File { cause, .. } if cause.kind() == std::io::ErrorKind::BrokenPipe)
}

/// What a continuous-profile command reads: a profile type, a time range
/// and a label selector. Defaults: the last 24 hours, every series.
#[derive(Debug, Clone, clap::Args)]
pub struct SelectionArgs {
    /// Profile type, `sample:unit` as `load` prints it (cpu:nanoseconds,
    /// alloc_space:bytes, cpu-clock:nanoseconds, @:count; `profile labels`
    /// lists a type's labels).
    #[arg(long = "type")]
    pub profile_type: String,
    /// Start of the range (inclusive): `YYYY-MM-DD hh:mm[:ss[.fff]]` (UTC; a
    /// date alone is its midnight; or RFC 3339, `YYYY-MM-DDThh:mm:ssZ` or
    /// with an offset, `+02:00`), Unix seconds (`1764576000`, as `date
    /// +%s`) or milliseconds (`1764576000000ms`, as Grafana's URLs), `now`,
    /// `now-30s`, `now-15m`, `now-1h`, `now-7d`, `now-2w`. Every range is exact to
    /// the millisecond (long ones read the rollups for their whole
    /// minutes and hours, the raw samples for the ends).
    #[arg(long, default_value = DEFAULT_FROM, value_parser = check_time)]
    pub from: String,
    /// End of the range (exclusive), same forms.
    #[arg(long, default_value = DEFAULT_TO, value_parser = check_time)]
    pub to: String,
    /// Label selector, Prometheus style: `{service="api", version=~"1\\.4.*",
    /// host!="a", region!~"eu.*"}`; empty: every series.
    #[arg(long, default_value = "", value_parser = check_selector)]
    pub selector: String,
    /// Only the samples of this span (16 hex digits, as the profiler's
    /// `span_id` label; other text is hashed as the loader hashes a
    /// non-hex label value): the selector `{span_id="..."}`, read from
    /// the raw samples whatever the range. A diff applies it to both sides.
    #[arg(long, value_parser = check_span_id)]
    pub span_id: Option<String>,
}

/// A time argument checked by the argument parser ([`parse_time`] against
/// the clock now; kept as typed, as `now-1h` is taken again when the query
/// runs): a bad one is a usage error naming its flag, exit 2, before the
/// engine opens.
///
/// # Errors
/// [`parse_time`]'s message.
pub fn check_time(s: &str) -> std::result::Result<String, String> {
    parse_time(s, now_ms())
        .map(|_| s.to_owned())
        .map_err(|e| e.to_string())
}

/// A `--by` label name checked by the argument parser, as [`check_time`]:
/// as typed, or quoted as in a selector ([`cq::label_key_arg`]).
///
/// # Errors
/// [`cq::label_key_arg`]'s message.
pub fn check_by(s: &str) -> std::result::Result<String, String> {
    cq::label_key_arg(s)
        .map(|_| s.to_owned())
        .map_err(|e| e.to_string())
}

/// A `--span-id` checked by the argument parser, as [`check_time`].
///
/// # Errors
/// [`cq::Selector::with_span_id`]'s message (an empty id).
pub fn check_span_id(s: &str) -> std::result::Result<String, String> {
    cq::Selector::all()
        .with_span_id(s)
        .map(|_| s.to_owned())
        .map_err(|e| e.to_string())
}

/// A selector checked by the argument parser, as [`check_time`].
///
/// # Errors
/// [`cq::Selector::parse`]'s message.
pub fn check_selector(s: &str) -> std::result::Result<String, String> {
    cq::Selector::parse(s)
        .map(|_| s.to_owned())
        .map_err(|e| e.to_string())
}

/// A function regex (`--focus`, `--ignore`, `--function-regex`) checked by
/// the argument parser, as [`check_time`]; the engine's `match` runs it
/// (RE2, whose syntax the `regex` crate shares).
///
/// # Errors
/// [`cq::regex_error`]'s reason.
pub fn check_regex(s: &str) -> std::result::Result<String, String> {
    match cq::regex_error(s) {
        Some(why) => Err(why),
        None => Ok(s.to_owned()),
    }
}

/// A `[from, to)` range from its typed forms, `to` after `from`.
fn range(from: &str, to: &str, now: i64) -> Result<(i64, i64)> {
    range_of(from, to, now, ["--from", "--to"], "")
}

/// [`range`] whose error names `flags` (a diff's comparison: `--from-b`,
/// `--to-b`), `note` appended (which of them took the baseline's value).
fn range_of(from: &str, to: &str, now: i64, flags: [&str; 2], note: &str) -> Result<(i64, i64)> {
    let (f, t) = (parse_time(from, now)?, parse_time(to, now)?);
    if t <= f {
        let [from_flag, to_flag] = flags;
        return Err(Error::Arguments(format!(
            "{to_flag} ({to}) must be after {from_flag} ({from}){note}"
        )));
    }
    Ok((f, t))
}

impl SelectionArgs {
    /// The selection, times relative to `now` (ms).
    ///
    /// # Errors
    /// [`Error::Usage`] for a bad time, an empty range or a bad selector.
    pub fn selection(&self, now: i64) -> Result<Selection> {
        self.selection_of(range(&self.from, &self.to, now)?)
    }

    /// The selection of an already checked `[from_ms, to_ms)`.
    fn selection_of(&self, (from_ms, to_ms): (i64, i64)) -> Result<Selection> {
        Ok(Selection {
            profile_type: self.profile_type.clone(),
            from_ms,
            to_ms,
            selector: match &self.span_id {
                Some(id) => cq::Selector::parse(&self.selector)?.with_span_id(id)?,
                None => cq::Selector::parse(&self.selector)?,
            },
        })
    }
}

/// Writes a tree to `path` and reports `wrote PATH (N stacks)` on `out`
/// (see [`write_tree_to`]).
fn write_tree(
    nodes: &[Node],
    path: &Path,
    title: &str,
    profile_type: &str,
    with_root: bool,
    diff: bool,
    out: &mut dyn Write,
) -> Result<()> {
    match write_tree_to(nodes, path, title, profile_type, with_root, diff, out)? {
        Some(report) => writeln!(out, "{report}").map_err(out_err),
        None => Ok(()),
    }
}

/// Writes a tree to `path`: `.svg` through inferno, `-` folded lines on
/// `out`, anything else folded lines; returns the report line (`wrote
/// PATH (N stacks)`), none for `-`.
fn write_tree_to(
    nodes: &[Node],
    path: &Path,
    title: &str,
    profile_type: &str,
    with_root: bool,
    diff: bool,
    out: &mut dyn Write,
) -> Result<Option<String>> {
    let svg = is_svg(path);
    let lines = fold_lines(nodes, with_root, diff, svg.then_some(SVG_EMPTY_STACK));
    if svg {
        // inferno draws nothing from no stacks: say why, write no file (a
        // folded output is an empty file instead).
        if lines.is_empty() {
            return Err(Error::Usage(format!(
                "{}: no samples of type {profile_type:?} in the selection: nothing to draw, not written",
                path.display()
            )));
        }
        // A differential graph's widths are the comparison's (`a;b A B`,
        // as flamegraph.pl draws difffolded output): with none, inferno
        // has nothing to draw.
        if diff && lines.iter().all(|l| l.ends_with(" 0")) {
            return Err(Error::Usage(format!(
                "{}: the comparison has no samples of type {profile_type:?}, and a differential \
                 flame graph's widths are the comparison's: nothing to draw, not written \
                 (swap the two sides to draw the baseline as all new, or write .folded)",
                path.display()
            )));
        }
        let labels = crate::render::SvgOptions {
            title: title.to_string(),
            count_name: profile_type
                .rsplit_once(':')
                .map_or(profile_type, |(_, u)| u)
                .to_string(),
            root: nodes
                .first()
                .map_or_else(|| "total".into(), |n| n.label.clone()),
        };
        crate::render::render_svg(&lines, &labels, path)?;
    } else if path == Path::new("-") {
        // `--out -`: the folded text on standard output, no report line.
        for l in &lines {
            writeln!(out, "{l}").map_err(out_err)?;
        }
        return Ok(None);
    } else {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(path).map_err(crate::error::file_err(path))?,
        );
        for l in &lines {
            writeln!(f, "{l}").map_err(crate::error::file_err(path))?;
        }
        f.flush().map_err(crate::error::file_err(path))?;
    }
    Ok(Some(format!(
        "wrote {} ({})",
        path.display(),
        plural(lines.len(), "stack")
    )))
}

/// `1 thing`, `n things` (`n batches`), for messages.
#[must_use]
pub fn plural(n: usize, one: &str) -> String {
    match (n, one.ends_with("ch")) {
        (1, _) => format!("1 {one}"),
        (_, true) => format!("{n} {one}es"),
        _ => format!("{n} {one}s"),
    }
}

/// An empty answer. A type nothing is stored of is an error naming the
/// stored types (a typo such as `cpu:ns`, never what was meant); a stored
/// type whose range or selector matched nothing gives its empty answer,
/// exit 0 (an idle hour is an answer), with a note on `err` saying what
/// matched nothing, so a mistyped label value does not pass unseen (`svg`:
/// no note, as an empty `.svg` is an error of its own).
///
/// # Errors
/// [`Error::Usage`] for an unknown type; the engine's error.
fn empty_answer(
    backend: &dyn Backend,
    opts: &QueryOptions,
    sel: &SelectionArgs,
    functions: &[String],
    svg: bool,
    err: &mut dyn Write,
) -> Result<()> {
    require_type(backend, opts, &sel.profile_type)?;
    if svg {
        // `write_tree` refuses to draw it, in one line: no note before.
        return Ok(());
    }
    // A function named as it is not stored (`isEven` for Go's
    // `main.isEven`): the stored names holding it, if any.
    let hint = match functions {
        [f] => {
            let like = similar_functions(backend, opts, f)?;
            if like.is_empty() {
                String::new()
            } else {
                format!("; stored functions named like it: {}", like.join(", "))
            }
        }
        _ => String::new(),
    };
    writeln!(
        err,
        "flamehouse: nothing matched: {}{hint}",
        what_matched(sel, functions)
    )
    .map_err(out_err)
}

/// Up to 3 stored function names holding `name` (any case; not `name`
/// itself), shortest first: a note's hint when `name` is in no stack.
///
/// # Errors
/// The engine's.
fn similar_functions(
    backend: &dyn Backend,
    opts: &QueryOptions,
    name: &str,
) -> Result<Vec<String>> {
    if name.is_empty() {
        return Ok(Vec::new());
    }
    let tsv = backend.query_tsv(&format!(
        "SELECT function FROM (SELECT DISTINCT function FROM {}.stack_functions \
         WHERE positionCaseInsensitiveUTF8(function, {n}) > 0 AND function != {n}) \
         ORDER BY length(function), function LIMIT 3",
        opts.database,
        n = sql_string(name)
    ))?;
    Ok(tsv
        .lines()
        .map(|l| format!("{:?}", unescape_tsv(l)))
        .collect())
}

/// Says why an answer is empty when the selection itself has samples: a
/// narrowing (`--focus`, `--ignore`, `--function-regex`) left none of
/// them, or (no narrowing) every sample's stack is empty, so `top` lists
/// no function (pprof's "0 of N total", a Go `threadcreate` profile).
/// Returns whether it did (then [`empty_answer`] is not asked); no note for
/// an SVG, which `write_tree` refuses in one line.
///
/// # Errors
/// The engine's; writing `err`.
fn narrowed_away(
    backend: &dyn Backend,
    opts: &QueryOptions,
    s: &Selection,
    narrowing: &[String],
    svg: bool,
    err: &mut dyn Write,
) -> Result<bool> {
    let Some((_, why)) = why_empty(backend, opts, s, narrowing, "the selection")? else {
        return Ok(false);
    };
    if !svg {
        writeln!(err, "flamehouse: nothing matched: {why}").map_err(out_err)?;
    }
    Ok(true)
}

/// Why an answer of `s` (`of`: "the selection", "the baseline") is empty
/// when `s` itself has samples: the narrowing left none, or (no
/// narrowing) every stack is empty: `s`'s total and the reason. `None`
/// when `s` has no samples.
///
/// # Errors
/// The engine's.
fn why_empty(
    backend: &dyn Backend,
    opts: &QueryOptions,
    s: &Selection,
    narrowing: &[String],
    of: &str,
) -> Result<Option<(i64, String)>> {
    let total = nodes(backend, &cq::flame_sql(opts, s, 2))?
        .first()
        .map_or(0, |n| n.value);
    Ok((total != 0).then(|| {
        let why = if narrowing.is_empty() {
            format!(
                "every sample of {of} has an empty stack (its total is {total}): no function to list"
            )
        } else {
            format!(
                "{} left no sample of {of} (its total is {total})",
                narrowing.join(" with ")
            )
        };
        (total, why)
    }))
}

impl FilterArgs {
    /// The narrowing flags given, as typed (`--focus 'x'`), for notes.
    fn given(&self) -> Vec<String> {
        [("--focus", &self.focus), ("--ignore", &self.ignore)]
            .into_iter()
            .filter_map(|(flag, v)| v.as_ref().map(|v| format!("{flag} {v:?}")))
            .collect()
    }
}

/// What a selection asked for, for a note that nothing matched it.
fn what_matched(sel: &SelectionArgs, functions: &[String]) -> String {
    let mut what = if functions.is_empty() {
        "no samples".to_string()
    } else {
        format!("function {:?} is in no stack", functions.join(", "))
    };
    what.push_str(&format!(
        " of type {} from {} to {}",
        sel.profile_type, sel.from, sel.to
    ));
    if !sel.selector.trim().is_empty() {
        what.push_str(&format!(" with selector {}", sel.selector));
    }
    if let Some(id) = &sel.span_id {
        what.push_str(&format!(" in span {id}"));
    }
    what
}

/// [`Error::Usage`] naming the stored types when nothing of `profile_type`
/// is stored.
///
/// # Errors
/// That error; the engine's.
fn require_type(backend: &dyn Backend, opts: &QueryOptions, profile_type: &str) -> Result<()> {
    match unknown_type_hint(backend, opts, profile_type)? {
        Some(h) => Err(Error::Usage(h)),
        None => Ok(()),
    }
}

fn is_svg(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("svg"))
}

/// Whether a tree holds no value (the tree of no samples is a root of 0).
fn no_value(nodes: &[Node]) -> bool {
    nodes.iter().all(|n| n.value == 0 && n.value_right == 0)
}

/// Holds a selector's numbers with units against the units its numeric
/// labels are stored in, for `profile_type` (every type: `None`):
/// [`cq::check_numeric_units`]. No query when no number has a unit.
///
/// # Errors
/// [`Error::Usage`] for a unit the label is not stored in; the engine's.
pub fn check_units(
    backend: &dyn Backend,
    opts: &QueryOptions,
    selector: &cq::Selector,
    profile_type: Option<&str>,
) -> Result<()> {
    if selector.numeric_units.is_empty() {
        return Ok(());
    }
    let db = &opts.database;
    let filter = profile_type.map_or_else(String::new, |t| {
        format!("WHERE profile_type = {}", sql_string(t))
    });
    let rows = backend.query_tsv(&format!(
        "SELECT DISTINCT k, u FROM {db}.cp_profiles \
         ARRAY JOIN mapKeys(num_units) AS k, mapValues(num_units) AS u {filter}"
    ))?;
    let stored: Vec<(String, String)> = rows
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, u)| (unescape_tsv(k), unescape_tsv(u)))
        .collect();
    cq::check_numeric_units(selector, &stored)
}

/// `flamehouse profile flame`.
#[derive(Debug, Clone, clap::Args)]
pub struct FlameArgs {
    #[command(flatten)]
    pub sel: SelectionArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Keep at most this many nodes (0: all; else at least 2).
    #[arg(long, default_value_t = 0, value_parser = parse_max_nodes, allow_negative_numbers = true)]
    pub max_nodes: u32,
    /// Output file: `.svg` renders with inferno, anything else is folded
    /// text; `-` writes the folded text to standard output.
    #[arg(long)]
    pub out: PathBuf,
}

/// pprof's `-focus` and `-ignore` ([`cq::StackFilter`]).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct FilterArgs {
    /// Only samples with a frame whose function matches this regex
    /// (pprof's -focus; `top`'s shares stay of the whole selection, a
    /// flame graph's root is what the focus keeps).
    #[arg(long, value_parser = check_regex)]
    pub focus: Option<String>,
    /// Leave out samples with a frame whose function matches this regex
    /// (pprof's -ignore).
    #[arg(long, value_parser = check_regex)]
    pub ignore: Option<String>,
}

impl FilterArgs {
    /// As the library's filter.
    #[must_use]
    pub fn filter(&self) -> cq::StackFilter {
        cq::StackFilter {
            focus: self.focus.clone(),
            ignore: self.ignore.clone(),
        }
    }
}

/// Runs `profile flame`: the selection's flame graph into `args.out`.
///
/// # Errors
/// Bad arguments, the engine's error, writing the file.
pub fn flame_command(
    backend: &dyn Backend,
    opts: &QueryOptions,
    args: &FlameArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    let s = args.sel.selection(now_ms())?;
    check_units(backend, opts, &s.selector, Some(&s.profile_type))?;
    let sql = cq::flame_sql_filtered(opts, &s, args.max_nodes, &args.filter.filter())?;
    let nodes = nodes(backend, &sql)?;
    if no_value(&nodes) {
        let narrowing = args.filter.given();
        if narrowing.is_empty()
            || !narrowed_away(backend, opts, &s, &narrowing, is_svg(&args.out), err)?
        {
            empty_answer(backend, opts, &args.sel, &[], is_svg(&args.out), err)?;
        }
    }
    write_tree(
        &nodes,
        &args.out,
        &s.profile_type,
        &s.profile_type,
        false,
        false,
        out,
    )
}

/// `flamehouse profile diff`.
#[derive(Debug, Clone, clap::Args)]
pub struct DiffArgs {
    #[command(flatten)]
    pub sel: SelectionArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// The comparison's selector (when not given: the baseline's).
    #[arg(long, value_parser = check_selector)]
    pub selector_b: Option<String>,
    /// The comparison's start (when not given: the baseline's).
    #[arg(long, value_parser = check_time)]
    pub from_b: Option<String>,
    /// The comparison's end (when not given: the baseline's).
    #[arg(long, value_parser = check_time)]
    pub to_b: Option<String>,
    /// Scale the baseline to the comparison's total (compare shapes,
    /// not volumes). `go tool pprof -normalize` scales the other way
    /// (the comparison to the base): the shares are the same, the
    /// numbers are in the comparison's units here.
    #[arg(long)]
    pub normalize: bool,
    /// Keep at most this many nodes (0: all; else at least 2).
    #[arg(long, default_value_t = 0, value_parser = parse_max_nodes, allow_negative_numbers = true)]
    pub max_nodes: u32,
    /// Output file: `.svg` renders with inferno, anything else is folded
    /// text; `-` writes the folded text to standard output.
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs `profile diff`: baseline against comparison in one scan, folded
/// `stack baseline comparison` or an inferno differential SVG.
///
/// # Errors
/// Bad arguments, the engine's error, writing the file.
pub fn diff_command(
    backend: &dyn Backend,
    opts: &QueryOptions,
    args: &DiffArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    let now = now_ms();
    let a = args.sel.selection(now)?;
    let b_args = SelectionArgs {
        profile_type: args.sel.profile_type.clone(),
        from: args.from_b.clone().unwrap_or(args.sel.from.clone()),
        to: args.to_b.clone().unwrap_or(args.sel.to.clone()),
        selector: args.selector_b.clone().unwrap_or(args.sel.selector.clone()),
        span_id: args.sel.span_id.clone(),
    };
    // The comparison's range is checked under its own flags: given only
    // `--from-b` (a shifted window), `--to-b` is the baseline's `--to`, and
    // an empty range is the comparison's, not the baseline's (which passed).
    let defaulted: Vec<String> = [
        (&args.from_b, "--from-b", "--from"),
        (&args.to_b, "--to-b", "--to"),
    ]
    .iter()
    .filter(|(given, _, _)| given.is_none())
    .map(|(_, b, a)| format!("{b} not given: the baseline's {a}"))
    .collect();
    let note = if defaulted.is_empty() {
        String::new()
    } else {
        format!(" ({})", defaulted.join(", "))
    };
    let b = b_args.selection_of(range_of(
        &b_args.from,
        &b_args.to,
        now,
        ["--from-b", "--to-b"],
        &note,
    )?)?;
    for s in [&a, &b] {
        check_units(backend, opts, &s.selector, Some(&s.profile_type))?;
    }
    let sql = cq::diff_sql_filtered(
        opts,
        &a,
        &b,
        args.max_nodes,
        args.normalize,
        &args.filter.filter(),
    )?;
    let nodes = nodes(backend, &sql)?;
    let (total_a, total_b) = nodes.first().map_or((0, 0), |n| (n.value, n.value_right));
    if total_a == 0 || total_b == 0 {
        // A side with nothing (a mistyped label value) gets its note even
        // when the other side draws. Each side is asked alone: a
        // normalized baseline is 0 when the comparison is.
        let filter = args.filter.filter();
        let narrowing = args.filter.given();
        let empty = |s: &Selection| -> Result<bool> {
            Ok(no_value(&self::nodes(
                backend,
                &cq::flame_sql_filtered(opts, s, 2, &filter)?,
            )?))
        };
        let (empty_a, empty_b) = (empty(&a)?, empty(&b)?);
        // Why a side is empty: its selection, or a narrowing that left
        // nothing of a selection with samples (then with that total).
        let why =
            |s: &Selection, sel: &SelectionArgs, side: &str| -> Result<(Option<i64>, String)> {
                let narrowed = if narrowing.is_empty() {
                    None
                } else {
                    why_empty(backend, opts, s, &narrowing, &format!("the {side}"))?
                };
                Ok(match narrowed {
                    Some((total, why)) => (Some(total), why),
                    None => (None, what_matched(sel, &[])),
                })
            };
        let svg = is_svg(&args.out);
        if empty_a && empty_b {
            // The type's check and the SVG case as for one selection.
            require_type(backend, opts, &args.sel.profile_type)?;
            let ((ta, wa), (tb, wb)) = (
                why(&a, &args.sel, "baseline")?,
                why(&b, &b_args, "comparison")?,
            );
            // The comparison's line only when its reason is another: a
            // narrowed selection of another total, or another selection.
            let same = match (ta, tb) {
                (Some(x), Some(y)) => x == y,
                (None, None) => wa == wb,
                _ => false,
            };
            if !svg {
                writeln!(err, "flamehouse: nothing matched: {wa}").map_err(out_err)?;
                if !same {
                    writeln!(
                        err,
                        "flamehouse: nothing matched in the comparison either: {wb}"
                    )
                    .map_err(out_err)?;
                }
            }
        } else {
            for (side, empty, s, sel) in [
                ("baseline", empty_a, &a, &args.sel),
                ("comparison", empty_b, &b, &b_args),
            ] {
                if empty {
                    writeln!(
                        err,
                        "flamehouse: nothing matched in the {side}: {}",
                        why(s, sel, side)?.1
                    )
                    .map_err(out_err)?;
                }
            }
        }
    }
    write_tree(
        &nodes,
        &args.out,
        &a.profile_type,
        &a.profile_type,
        false,
        true,
        out,
    )
}

/// `flamehouse profile top`.
#[derive(Debug, Clone, clap::Args)]
pub struct TopArgs {
    #[command(flatten)]
    pub sel: SelectionArgs,
    #[command(flatten)]
    pub filter: FilterArgs,
    /// Only functions matching this regex (shares stay of the whole
    /// selection).
    #[arg(long, value_parser = check_regex)]
    pub function_regex: Option<String>,
    /// At most this many rows (0: all).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub limit: u32,
}

/// Runs `profile top`: a table `self, self%, total, total%, function` on
/// `out`, largest total first; a function name is escaped as TSV
/// ([`escape_tsv`]: `\t`, `\n`, `\\`) so that every row is one line of
/// five columns whatever the name holds.
///
/// # Errors
/// Bad arguments, the engine's error, writing `out`.
pub fn top_command(
    backend: &dyn Backend,
    opts: &QueryOptions,
    args: &TopArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    let s = args.sel.selection(now_ms())?;
    check_units(backend, opts, &s.selector, Some(&s.profile_type))?;
    let rows = top_filtered(
        backend,
        opts,
        &s,
        args.function_regex.as_deref(),
        args.limit,
        &args.filter.filter(),
    )?;
    if rows.is_empty() {
        let mut narrowing = args.filter.given();
        if let Some(r) = &args.function_regex {
            narrowing.push(format!("--function-regex {r:?}"));
        }
        if !narrowed_away(backend, opts, &s, &narrowing, false, err)? {
            empty_answer(backend, opts, &args.sel, &[], false, err)?;
        }
    }
    writeln!(out, "self\tself%\ttotal\ttotal%\tfunction").map_err(out_err)?;
    // Shares printed unsigned, as `go tool pprof -top` prints them (a
    // negative value's sign is in its value column).
    for r in rows {
        writeln!(
            out,
            "{}\t{:.2}%\t{}\t{:.2}%\t{}",
            r.self_value,
            r.self_share.abs() * 100.0,
            r.total,
            r.total_share.abs() * 100.0,
            escape_tsv(&r.function)
        )
        .map_err(out_err)?;
    }
    Ok(())
}

/// `flamehouse profile sandwich`: one tree or both (at least one of
/// `--callers`, `--callees`).
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("trees").required(true).multiple(true).args(["callers", "callees"])))]
pub struct SandwichArgs {
    #[command(flatten)]
    pub sel: SelectionArgs,
    /// The function.
    #[arg(long)]
    pub function: String,
    /// Output of the callers tree (`.svg` or folded); rooted at the
    /// function, each level one caller further up.
    #[arg(long)]
    pub callers: Option<PathBuf>,
    /// Output of the callees tree.
    #[arg(long)]
    pub callees: Option<PathBuf>,
    /// Keep at most this many nodes per tree (0: all; else at least 2).
    #[arg(long, default_value_t = 0, value_parser = parse_max_nodes, allow_negative_numbers = true)]
    pub max_nodes: u32,
}

/// Runs `profile sandwich`: the callers and/or callees trees of a function.
///
/// # Errors
/// Bad arguments, the engine's error, writing the files.
pub fn sandwich_command(
    backend: &dyn Backend,
    opts: &QueryOptions,
    args: &SandwichArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    // One path for both trees: the second would replace the first (a
    // file) or follow it unmarked (`-`).
    if let (Some(a), Some(b)) = (&args.callers, &args.callees) {
        if same_output(a, b) {
            let what = if a == b {
                format!("--callers and --callees are both {}", a.display())
            } else {
                format!(
                    "--callers {} and --callees {} are one file",
                    a.display(),
                    b.display()
                )
            };
            return Err(Error::Arguments(format!(
                "{what}: give each tree its own output"
            )));
        }
    }
    let s = args.sel.selection(now_ms())?;
    check_units(backend, opts, &s.selector, Some(&s.profile_type))?;
    let (up, down) = sandwich(backend, opts, &s, &args.function, args.max_nodes)?;
    if no_value(&up) && no_value(&down) {
        let svg = [&args.callers, &args.callees]
            .into_iter()
            .flatten()
            .any(|p| is_svg(p));
        empty_answer(
            backend,
            opts,
            &args.sel,
            std::slice::from_ref(&args.function),
            svg,
            err,
        )?;
    }
    // With one tree on standard output, the other's report line goes to
    // standard error: in the folded text it read as a stack.
    let to_stdout = [&args.callers, &args.callees]
        .into_iter()
        .flatten()
        .any(|p| p == Path::new("-"));
    let mut reports = Vec::new();
    for (nodes, path, side) in [
        (&up, &args.callers, "callers"),
        (&down, &args.callees, "callees"),
    ] {
        if let Some(p) = path {
            let title = format!("{side} of {}", args.function);
            // Rooted at the function: its name is the first frame.
            reports.extend(write_tree_to(
                nodes,
                p,
                &title,
                &s.profile_type,
                true,
                false,
                out,
            )?);
        }
    }
    let report: &mut dyn Write = if to_stdout { err } else { out };
    for r in reports {
        writeln!(report, "{r}").map_err(out_err)?;
    }
    Ok(())
}

/// Whether two output paths name one file: equal as given, one existing
/// file (a hard or symbolic link), or after resolving their directories
/// (`./a`, `a`, `d/../a`, a symlinked directory); `-` (standard output)
/// equals itself, `/dev/stdout`, and the file standard output was
/// redirected to.
fn same_output(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let dash = |p: &Path| p == Path::new("-");
    // `-` is the file standard output is (`/dev/stdout`, or the file it
    // was redirected to): another name of it writes there too.
    let meta = |p: &Path| std::fs::metadata(if dash(p) { Path::new("/dev/stdout") } else { p });
    // `/dev/null` (by any name, standard output sent there too) is no file
    // two trees could mix in.
    let null = std::fs::metadata("/dev/null").ok().map(|n| n.rdev());
    let is_null = |p: &Path| meta(p).is_ok_and(|m| m.rdev() != 0 && Some(m.rdev()) == null);
    // `-` twice: two trees interleaved on one stream, wherever it goes.
    if a == b && a == Path::new("-") {
        return true;
    }
    if is_null(a) || is_null(b) {
        return false;
    }
    if a == b {
        return true;
    }
    // Two names of one existing file (a hard link too).
    if let (Ok(x), Ok(y)) = (meta(a), meta(b)) {
        return (x.dev(), x.ino()) == (y.dev(), y.ino());
    }
    if dash(a) || dash(b) {
        return false;
    }
    // A file that does not exist yet: its directory resolved, its name kept.
    let resolve = |p: &Path| -> Option<PathBuf> {
        if let Ok(c) = std::fs::canonicalize(p) {
            return Some(c);
        }
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        Some(std::fs::canonicalize(dir).ok()?.join(p.file_name()?))
    };
    matches!((resolve(a), resolve(b)), (Some(x), Some(y)) if x == y)
}

/// `flamehouse profile series`: values over time, one series per value of
/// a label (`--by`) or per function (`--function`, repeatable).
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("series_of").required(true).args(["by", "functions"])))]
pub struct SeriesArgs {
    #[command(flatten)]
    pub sel: SelectionArgs,
    /// One series per value of this label (a series without it is `""`).
    #[arg(long, value_parser = check_by)]
    pub by: Option<String>,
    /// One series per function (repeatable): the values of the stacks
    /// through it, each stack counted once however often it recurses.
    #[arg(long = "function")]
    pub functions: Vec<String>,
    /// Seconds per point. 0 with --by: one point per value for the whole
    /// range, at its start. Over a range longer than 6 hours (read from
    /// the per-minute rollup) it is rounded up to whole minutes, so that
    /// each point is exact. Points fall on multiples of the step since
    /// 1970 (UTC), as `toStartOfInterval` and Grafana's `$__timeInterval`
    /// align them: the first may be before --from, holding only the part
    /// of its step inside the range.
    #[arg(long, default_value_t = DEFAULT_SERIES_STEP, allow_negative_numbers = true)]
    pub step: u32,
}

/// Default of [`SeriesArgs::step`]: a minute, the per-minute rollup's.
pub const DEFAULT_SERIES_STEP: u32 = 60;

/// Runs `profile series`: a table `time, <label or function>, value` on
/// `out`, by time then series (gauge types averaged per profile of each
/// series and step, as the flame graph does).
///
/// # Errors
/// Bad arguments (a key that is no label name, `--step 0` with
/// `--function`), an unknown type, the engine's error, writing `out`.
pub fn series_command(
    backend: &dyn Backend,
    opts: &QueryOptions,
    args: &SeriesArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    let s = args.sel.selection(now_ms())?;
    check_units(backend, opts, &s.selector, Some(&s.profile_type))?;
    // A key quoted as in a selector (`--by '"a b"'`) is the key inside.
    // A bad key is a usage error (exit 2), as a bad selector is.
    let as_usage = |e: Error| match e {
        Error::Usage(m) => Error::Arguments(m),
        other => other,
    };
    let by = args
        .by
        .as_deref()
        .map(cq::label_key_arg)
        .transpose()
        .map_err(as_usage)?;
    let by = by.as_deref();
    let (column, sql) = match by {
        Some(key) => (
            key,
            cq::by_label_sql(opts, &s, key, args.step).map_err(as_usage)?,
        ),
        None => {
            if args.step == 0 {
                return Err(Error::Arguments(
                    "--step 0 (the whole range in one point) is for --by; give --function a step"
                        .into(),
                ));
            }
            let functions: Vec<&str> = args.functions.iter().map(String::as_str).collect();
            (
                "function",
                cq::function_series_sql(opts, &s, &functions, args.step),
            )
        }
    };
    let tsv = backend.query_tsv(&sql)?;
    if tsv.is_empty() {
        let functions: &[String] = if args.by.is_none() {
            &args.functions
        } else {
            &[]
        };
        empty_answer(backend, opts, &args.sel, functions, false, err)?;
    } else if let Some(key) = by {
        // Every value `""`: no selected series has the label (a typo of
        // the key would otherwise pass as one unlabelled series).
        if tsv.lines().all(|l| l.split('\t').nth(1) == Some("")) {
            writeln!(
                err,
                "flamehouse: nothing matched: no series of the selection has the label {key:?} \
                 (one \"\" series holds every value)"
            )
            .map_err(out_err)?;
        }
    }
    // The key escaped as the values under it are (a tab in it would add a
    // column).
    writeln!(out, "time\t{}\tvalue", crate::flame::escape_tsv(column)).map_err(out_err)?;
    out.write_all(crate::flame::unquote_tsv(&tsv, &[]).as_bytes())
        .map_err(out_err)
}

/// `flamehouse profile list`.
#[derive(Debug, Clone, clap::Args)]
pub struct ListArgs {
    /// Profile type.
    #[arg(long = "type")]
    pub profile_type: String,
    /// Only this service.
    #[arg(long)]
    pub service: Option<String>,
    /// Start of the range.
    #[arg(long, default_value = DEFAULT_FROM, value_parser = check_time)]
    pub from: String,
    /// End of the range.
    #[arg(long, default_value = DEFAULT_TO, value_parser = check_time)]
    pub to: String,
}

/// Runs `profile list`: the stored profiles of a type, newest first, as a
/// table on `out`: id, service, time, duration, total, `sample_rows` (its
/// rows in `cp_samples`: distinct stacks with their labels; a `count`
/// type's sample count is its `total`), series, labels, source.
///
/// # Errors
/// Bad arguments, the engine's error, writing `out`.
pub fn list_command(
    backend: &dyn Backend,
    opts: &QueryOptions,
    args: &ListArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    let (f, t) = range(&args.from, &args.to, now_ms())?;
    let sql = cq::profile_list_sql(opts, &args.profile_type, args.service.as_deref(), f, t);
    let tsv = backend.query_tsv(&format!(
        "SELECT leftPad(lower(hex(profile_id)), 16, '0'), service, ts, duration_ns, total, sample_count, \
         series_count, labels, source FROM ({sql})"
    ))?;
    if tsv.is_empty() {
        require_type(backend, opts, &args.profile_type)?;
        let service = args
            .service
            .as_ref()
            .map(|s| format!(" of service {s:?}"))
            .unwrap_or_default();
        writeln!(
            err,
            "flamehouse: nothing matched: no profiles of type {}{service} from {} to {}",
            args.profile_type, args.from, args.to
        )
        .map_err(out_err)?;
    }
    writeln!(
        out,
        "profile\tservice\ttime\tduration_ns\ttotal\tsample_rows\tseries\tlabels\tsource"
    )
    .map_err(out_err)?;
    // Column 7 (labels) is a Map, printed as the engine's literal.
    out.write_all(crate::flame::unquote_tsv(&tsv, &[7]).as_bytes())
        .map_err(out_err)
}

/// `--max-nodes`: 0 (every node) or at least 2. The stack functions
/// refuse 1 (a pruned tree keeps the root and at least one `[other]`
/// row); refused here, by the argument parser, it is a usage error naming
/// the flag instead of an engine error after the query ran.
///
/// # Errors
/// A message naming the value.
pub fn parse_max_nodes(s: &str) -> std::result::Result<u32, String> {
    match s.parse::<u32>() {
        Ok(1) => Err(
            "1 node is no tree: use 0 (every node) or at least 2 (the root and one \
             `[other]` row)"
                .into(),
        ),
        Ok(n) => Ok(n),
        // A whole number past UInt32 (the stack functions' option type).
        Err(_) if s.trim().parse::<u128>().is_ok() => Err(format!(
            "{s:?} nodes: at most {} (0 is every node)",
            u32::MAX
        )),
        Err(_) => Err(format!(
            "{s:?} is no node count: use 0 (every node) or at least 2"
        )),
    }
}

/// A profile id as `load` and `profile list` print it (16 hex digits).
///
/// # Errors
/// A message naming the value.
pub fn parse_profile_id(s: &str) -> std::result::Result<u64, String> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16)
        .map_err(|_| format!("{s:?} is not a profile id (hex, up to 16 digits)"))
}

/// `flamehouse profile open`.
#[derive(Debug, Clone, clap::Args)]
pub struct OpenArgs {
    /// The profile id (hex, as `load` and `profile list` print it).
    #[arg(long, value_parser = parse_profile_id)]
    pub id: u64,
    /// Profile type.
    #[arg(long = "type")]
    pub profile_type: String,
    /// Keep at most this many nodes (0: all; else at least 2).
    #[arg(long, default_value_t = 0, value_parser = parse_max_nodes, allow_negative_numbers = true)]
    pub max_nodes: u32,
    /// Output file: `.svg`, or folded text; `-` writes the folded text to
    /// standard output.
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs `profile open`: one stored profile's flame graph.
///
/// # Errors
/// [`Error::Usage`] for an unknown id or type; the engine's error;
/// writing the file.
pub fn open_command(
    backend: &dyn Backend,
    opts: &QueryOptions,
    args: &OpenArgs,
    out: &mut dyn Write,
) -> Result<()> {
    // The profile's types: an unknown id or type is an error, not an
    // empty graph (the tree of no samples is a root of 0).
    let types = backend.query_tsv(&format!(
        "SELECT DISTINCT profile_type FROM {}.cp_profiles WHERE profile_id = {} ORDER BY profile_type",
        opts.database, args.id
    ))?;
    let types: Vec<&str> = types.lines().collect();
    if !types.contains(&args.profile_type.as_str()) {
        return Err(Error::Usage(if types.is_empty() {
            format!(
                "no profile {:016x} is stored (see `flamehouse profile list`)",
                args.id
            )
        } else {
            format!(
                "profile {:016x} has no type {}: its types are {}",
                args.id,
                args.profile_type,
                types.join(", ")
            )
        }));
    }
    let sql = cq::profile_flame_sql(opts, args.id, &args.profile_type, args.max_nodes);
    let nodes = nodes(backend, &sql)?;
    write_tree(
        &nodes,
        &args.out,
        &format!("profile {:016x}", args.id),
        &args.profile_type,
        false,
        false,
        out,
    )
}

/// `flamehouse profile export`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    /// A profile type to write (repeatable, each once), `sample:unit`, in
    /// this order (`go tool pprof` shows the last by default). Default:
    /// every type with samples in the selection, counts first, then by
    /// name. Each sample keeps its series' labels (`service`, the load's
    /// `--label`s, pprof's own) and numeric labels, for `-tags` and
    /// `-tagfocus`.
    #[arg(long = "type")]
    pub types: Vec<String>,
    /// Start of the range (inclusive), as for `profile flame`.
    #[arg(long, default_value = DEFAULT_FROM, value_parser = check_time)]
    pub from: String,
    /// End of the range (exclusive).
    #[arg(long, default_value = DEFAULT_TO, value_parser = check_time)]
    pub to: String,
    /// Label selector (as for `profile flame`); empty: every series.
    #[arg(long, default_value = "", value_parser = check_selector)]
    pub selector: String,
    /// Only the samples of this span (16 hex digits), as for `profile
    /// flame`.
    #[arg(long, value_parser = check_span_id)]
    pub span_id: Option<String>,
    /// Output file (`x.pb.gz`); `-` writes the profile to standard output
    /// (its report line then goes to standard error).
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs `profile export`: [`export_pprof`] into `args.out` (`-`: `out`),
/// reported on `out` (`-`: on `err`).
///
/// # Errors
/// Bad arguments, an empty selection, the engine's error, writing the file.
pub fn export_command(
    backend: &dyn Backend,
    opts: &QueryOptions,
    args: &ExportArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    let (f, t) = range(&args.from, &args.to, now_ms())?;
    // A type twice would be two identical sample types in the file.
    for (i, t) in args.types.iter().enumerate() {
        if args.types[..i].contains(t) {
            return Err(Error::Arguments(format!("--type {t} is given twice")));
        }
    }
    let mut selector = cq::Selector::parse(&args.selector)?;
    if let Some(id) = &args.span_id {
        selector = selector.with_span_id(id)?;
    }
    check_units(backend, opts, &selector, None)?;
    let e = export_pprof(backend, opts, &args.types, f, t, &selector)?;
    let report: &mut dyn Write = if args.out == Path::new("-") {
        out.write_all(&e.bytes).map_err(out_err)?;
        err
    } else {
        std::fs::write(&args.out, &e.bytes).map_err(crate::error::file_err(&args.out))?;
        out
    };
    writeln!(
        report,
        "wrote {} (types {} | {})",
        args.out.display(),
        e.types.join(", "),
        plural(e.samples, "sample")
    )
    .map_err(out_err)
}

/// `flamehouse profile labels`.
#[derive(Debug, Clone, clap::Args)]
pub struct LabelsArgs {
    /// Profile type.
    #[arg(long = "type")]
    pub profile_type: String,
    /// Start of the range.
    #[arg(long, default_value = DEFAULT_FROM, value_parser = check_time)]
    pub from: String,
    /// End of the range.
    #[arg(long, default_value = DEFAULT_TO, value_parser = check_time)]
    pub to: String,
}

/// Runs `profile labels`: `key, value, series` on `out`.
///
/// # Errors
/// Bad arguments, the engine's error, writing `out`.
pub fn labels_command(
    backend: &dyn Backend,
    opts: &QueryOptions,
    args: &LabelsArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<()> {
    let (f, t) = range(&args.from, &args.to, now_ms())?;
    let sql = cq::label_values_sql(opts, &args.profile_type, f, t);
    let tsv = backend.query_tsv(&sql)?;
    if tsv.is_empty() {
        require_type(backend, opts, &args.profile_type)?;
        writeln!(
            err,
            "flamehouse: nothing matched: no samples of type {} from {} to {}",
            args.profile_type, args.from, args.to
        )
        .map_err(out_err)?;
    }
    writeln!(out, "key\tvalue\tseries").map_err(out_err)?;
    out.write_all(crate::flame::unquote_tsv(&tsv, &[]).as_bytes())
        .map_err(out_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--out x.SVG` draws, as `x.svg` does (it wrote folded text).
    #[test]
    fn svg_outputs_are_known_in_any_case() {
        for (p, svg) in [
            ("a.svg", true),
            ("a.SVG", true),
            ("a.Svg", true),
            ("a.folded", false),
            ("svg", false),
        ] {
            assert_eq!(is_svg(Path::new(p)), svg, "{p}");
        }
    }

    /// `sandwich` refuses one file for both trees however it is spelled.
    #[test]
    fn one_output_file_is_known_however_spelled() {
        let dir = std::env::temp_dir().join(format!("flamehouse-same-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("d")).unwrap();
        let p = |s: &str| dir.join(s);
        assert!(same_output(&p("a.svg"), &p("./a.svg")));
        assert!(same_output(&p("a.svg"), &p("d/../a.svg")));
        assert!(!same_output(&p("a.svg"), &p("d/a.svg")));
        std::fs::write(p("f.folded"), "").unwrap();
        std::fs::hard_link(p("f.folded"), p("d/hard.folded")).unwrap();
        std::fs::write(p("d/other.folded"), "").unwrap();
        assert!(same_output(&p("f.folded"), &p("d/hard.folded")));
        assert!(!same_output(&p("f.folded"), &p("d/other.folded")));
        assert!(same_output(Path::new("-"), Path::new("-")));
        assert!(!same_output(Path::new("-"), Path::new("./-")));
        assert!(same_output(Path::new("-"), Path::new("/dev/stdout")));
        assert!(same_output(Path::new("/dev/fd/1"), Path::new("-")));
        // Nothing is written to mix in /dev/null.
        assert!(!same_output(
            Path::new("/dev/null"),
            Path::new("/dev/../dev/null")
        ));
        assert!(!same_output(Path::new("/dev/null"), Path::new("/dev/null")));
        // Relative to the working directory, as the CLI gets them.
        assert!(same_output(Path::new("x.folded"), Path::new("./x.folded")));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn times_parse() {
        let now = 1_000_000_000;
        assert_eq!(parse_time("now", now).unwrap(), now);
        assert_eq!(parse_time("now-1h", now).unwrap(), now - 3_600_000);
        assert_eq!(parse_time("now-7d", now).unwrap(), now - 7 * 86_400_000);
        assert_eq!(parse_time("now-1w", now).unwrap(), now - 7 * 86_400_000);
        assert_eq!(
            parse_time("2026-12-01 13:00:00", now).unwrap(),
            parse_utc_ms("2026-12-01 13:00:00").unwrap()
        );
        for bad in [
            "now-",
            "now-1",
            "now-xh",
            "now--1h",
            "yesterday",
            "now-+1h",
            "now-12d",
            "now-2w",
            "now-1M",
            "now-1y",
            "1969-12-31 23:59:59",
            "1900-01-01 00:00:00",
            "2149-06-07 00:00:00",
            "2200-01-01T00:00:00Z",
            "9999-01-01",
        ] {
            let e = parse_time(bad, now).unwrap_err().to_string();
            assert!(e.contains("bad time"), "{e}");
        }
        assert_eq!(parse_time("1970-01-01 00:00:00", now).unwrap(), 0);
        // Unix seconds as `date +%s`, milliseconds as Grafana's URLs.
        let day = parse_utc_ms("2025-12-01 00:00:00").unwrap();
        assert_eq!(parse_time("1764547200", now).unwrap(), day);
        assert_eq!(parse_time("1764547200.5", now).unwrap(), day + 500);
        assert_eq!(parse_time("1764547200000ms", now).unwrap(), day);
        assert_eq!(parse_time("1764547200.0010", now).unwrap(), day + 1);
        for finer in ["1764547200.0001", "1764547200000.5ms"] {
            let e = parse_time(finer, now).unwrap_err().to_string();
            assert!(e.contains("finer than a millisecond"), "{e}");
        }
        // A date alone is its midnight (`date -ud 2025-12-01 +%s`).
        assert_eq!(parse_time("2025-12-01", now).unwrap(), 1_764_547_200_000);
        assert_eq!(parse_time("2025-12-01Z", now).unwrap(), 1_764_547_200_000);
        for bad in [
            "1764547200000",
            "1.2.3",
            "ms",
            "12a",
            "2025-13-01",
            "2025-02-30",
            "2025-1-01",
        ] {
            let e = parse_time(bad, now).unwrap_err().to_string();
            assert!(e.contains("bad time"), "{e}");
        }
    }

    #[test]
    fn trees_fold_into_their_stacks() {
        let n = |level, label: &str, value, self_value| Node {
            level,
            label: label.into(),
            value,
            self_value,
            value_right: 0,
            self_right: 0,
        };
        let tree = [
            n(0, "total", 10, 1),
            n(1, "main", 9, 0),
            n(2, "a;b", 6, 6),
            n(2, "c", 3, 2),
            n(3, "d", 1, 1),
        ];
        assert_eq!(
            folded(&tree, false, false),
            ["total 1", "main;a:b 6", "main;c 2", "main;c;d 1"]
        );
        assert_eq!(stacks(&tree, true)[1].0, ["total", "main", "a;b"]);
    }
}
