//! The library side of `flamehouse profile ...`, the commands on
//! continuous profiles (a group of its own: `flamehouse flame` reads the
//! memory views of one process). It owns running the SQL of
//! [`crate::continuous_query`] and turning the results into what the
//! commands write: folded lines (inferno and `flamegraph.pl` input, SVG via
//! [`crate::render`]), tables, and a pprof export of a selection.
//!
//! Times are `YYYY-MM-DD hh:mm:ss[.fff]` (UTC), `now`, or `now-N` with a
//! unit `s`, `m`, `h` or `d` ([`parse_time`]); the commands default to the
//! last 24 hours, long enough for a profile loaded from a file today.

use crate::continuous_query::{self as cq, QueryOptions, SandwichSide, Selection};
use crate::error::{Error, Result};
use crate::flame::{parse_utc_ms, unescape_tsv};
use crate::formats::pprof::write::{encode, WriteOptions};
use crate::storage::Backend;

/// The forms a time argument takes, for messages and `--help`.
pub const TIME_FORMS: &str =
    "`YYYY-MM-DD hh:mm:ss[.fff]` (UTC), `now`, or `now-30s` / `now-15m` / `now-1h` / `now-7d`";

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
            _ => return Err(bad()),
        };
        let n: i64 = num
            .parse()
            .ok()
            .filter(|n| *n >= 0 && !num.starts_with('+'))
            .ok_or_else(bad)?;
        return n.checked_mul(unit_ms).map(|d| now_ms - d).ok_or_else(bad);
    }
    parse_utc_ms(t).map_err(|_| bad())
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
    let clean = |s: &str| s.replace(';', ":").replace(['\n', '\r'], " ");
    stacks(nodes, with_root)
        .into_iter()
        .map(|(p, a, b)| {
            let path = if p.is_empty() {
                nodes.first().map(|n| clean(&n.label)).unwrap_or_default()
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
    let tsv = backend.query_tsv(&cq::top_functions_sql(opts, sel, function_regex, limit)?)?;
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

/// A selection as a gzipped pprof profile of its one type, the stacks
/// merged over the range and the selector (`type:unit` split into pprof's
/// sample type; time and duration the range's).
///
/// # Errors
/// [`Error::Usage`] for a type without `:`; the engine's error.
pub fn export_pprof(
    backend: &dyn Backend,
    opts: &QueryOptions,
    sel: &Selection,
) -> Result<Vec<u8>> {
    let (kind, unit) = sel.profile_type.split_once(':').ok_or_else(|| {
        Error::Usage(format!(
            "profile type {:?}: expected type:unit (cpu:nanoseconds)",
            sel.profile_type
        ))
    })?;
    let tree = flame(backend, opts, sel, 0)?;
    let stacks: Vec<(Vec<String>, i64)> = stacks(&tree, false)
        .into_iter()
        .map(|(p, v, _)| (p, v))
        .collect();
    Ok(encode(
        &stacks,
        &WriteOptions {
            sample_type: (kind.to_string(), unit.to_string()),
            time_nanos: sel.from_ms.saturating_mul(1_000_000),
            duration_nanos: (sel.to_ms - sel.from_ms).saturating_mul(1_000_000),
            ..Default::default()
        },
    ))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse() {
        let now = 1_000_000_000;
        assert_eq!(parse_time("now", now).unwrap(), now);
        assert_eq!(parse_time("now-1h", now).unwrap(), now - 3_600_000);
        assert_eq!(parse_time("now-7d", now).unwrap(), now - 7 * 86_400_000);
        assert_eq!(
            parse_time("2026-12-01 13:00:00", now).unwrap(),
            parse_utc_ms("2026-12-01 13:00:00").unwrap()
        );
        for bad in ["now-", "now-1", "now-xh", "now--1h", "yesterday", "now-+1h"] {
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
