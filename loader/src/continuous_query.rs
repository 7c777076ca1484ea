//! Queries on continuous profiles (migration 6) that parameterized views
//! cannot express: a label selector with regexes and negation, two
//! selections in one scan, a function regex. This module owns the selector
//! language ([`Selector::parse`]) and the SQL of every continuous-profile
//! query; it runs nothing (callers send the SQL through a
//! [`crate::storage::Backend`]).
//!
//! # Selector
//!
//! Prometheus' label matchers: `{service="api", version=~"1\\.4.*",
//! host!="a", region!~"eu.*"}` (`{}` or an empty string: every series).
//! Keys are bare (letters and digits of any script, `_`, `.`, `-`, `/`:
//! `user-id`, `app.kubernetes.io/name`) or double-quoted for any other
//! stored name (`"a b"`), as Prometheus 3 does; values are double-quoted with the
//! escapes `\\`, `\"`, `\n`, `\t`; regexes are anchored at both ends (as in
//! Prometheus) and must compile. A missing label matches `""`. Every value
//! reaches SQL through [`sql_string`], never spliced raw. Matchers on
//! `service` also filter the samples' `service` column, the second key of
//! the sort key.
//!
//! ## Span ids
//!
//! `span_id` is no series label: the loader keeps span ids on the sample
//! rows (`cp_samples.span_id`, see
//! [`crate::ingest::continuous::DEFAULT_SPAN_LABELS`]), and a matcher on the
//! key `span_id` ([`SPAN_ID_KEY`]) filters those rows:
//! `{span_id="00f067aa0ba902b7"}` (`=` and `!=` compare the id: 16 hex
//! digits, any case, or the text a non-hex id was loaded from;
//! `span_id=""` is the samples without a span, `span_id!=""` those with
//! one; `=~` and `!~` match the id written as 16 lower-case hex digits,
//! `""` for none).
//!
//! ## Numeric labels
//!
//! pprof numeric labels (Go heap profiles' `bytes`, the object size) are
//! per sample too (`cp_samples.num_labels`), compared with an unquoted
//! number: `{bytes>=1024}`, `{bytes<4KiB}`, `{bytes>1kB, bytes<=64kB}`,
//! `{bytes=256}`, `{bytes!=256}`, and inclusive ranges as `go tool pprof
//! -tagfocus` writes them: `{bytes=1kB:4kB}` (1024 to 4096, both ends
//! included), `{bytes=1kB:}`, `{bytes=:4kB}`; `!=` with a range is
//! `-tagignore`. A sample without the key matches no `=`, `<`, `<=`, `>`,
//! `>=` and every `!=` (so `{k=R}` and `{k!=R}` split a profile in two, as
//! `-tagfocus` and `-tagignore` do). Numbers are integers or decimals with
//! an optional unit, case-insensitive: bytes `B`, `kB`/`KiB`, `MB`/`MiB`,
//! `GB`/`GiB`, `TB`/`TiB`, `PB`/`PiB` (all 1024-based, as pprof counts
//! `kB`); time `ns`, `us`/`µs`, `ms`, `s`, `min`, `h`. A number with a unit
//! is converted to bytes or nanoseconds, the units pprof writers store
//! (`cp_profiles.num_units`), and must come out whole; a number without
//! one is compared as stored (pprof wants a unit there).
//!
//! Span and numeric matchers select sample rows, which the per-minute
//! rollup does not keep: a selection with one always reads `cp_samples`,
//! whatever its range ([`Selection::source`]).
//!
//! # Sources
//!
//! A range of at most [`QueryOptions::rollup_after_seconds`] (default
//! [`DEFAULT_ROLLUP_AFTER_SECONDS`], 6 hours) reads `cp_samples`; a longer one
//! reads the per-minute rollup `cp_samples_1m`, with the range widened to
//! whole minutes (a 6-hour range holds at most 360 minutes per stack and
//! series, a day 1,440 rows instead of 8,640 at 10 s profiles). The
//! choice is explicit in [`Source`] for callers that must force one.
//!
//! Stacks: every query joins the `cp_stacks` rows (migration 11) of the
//! selection's service(s) and the days of its range
//! ([`SelectionSql::stacks`]), which that table's sort key `(service,
//! date, stack_id)` finds, never the whole shared `stacks` table (keyed by
//! a hash, so no filter prunes it, and holding every service's, day's and
//! memory profile's stacks).
//!
//! # Outputs
//!
//! Flame graphs are Grafana rows `(i, level, label, value, self)` in
//! pre-order (diffs add `valueRight, selfRight`), as the memory views; the
//! label `total` is the root.

use crate::error::{Error, Result};
pub use crate::ingest::continuous::SPAN_ID_KEY;
use crate::ingest::continuous::{is_label_key_char, is_stored_label_key, span_id_value};
use crate::storage::ident::Ident;
use crate::storage::sql_string;

/// Ranges longer than this many seconds read the per-minute rollup.
pub const DEFAULT_ROLLUP_AFTER_SECONDS: i64 = 6 * 3600;

/// Options shared by the queries.
#[derive(Debug, Clone)]
pub struct QueryOptions {
    /// Database. Default: `flamehouse`.
    pub database: Ident,
    /// Ranges longer than this read `cp_samples_1m`. Default:
    /// [`DEFAULT_ROLLUP_AFTER_SECONDS`].
    pub rollup_after_seconds: i64,
}

impl Default for QueryOptions {
    fn default() -> Self {
        QueryOptions {
            database: crate::storage::schema::default_database(),
            rollup_after_seconds: DEFAULT_ROLLUP_AFTER_SECONDS,
        }
    }
}

/// A label matcher's operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchOp {
    /// `=`
    Eq,
    /// `!=`
    Ne,
    /// `=~` (anchored regex)
    Re,
    /// `!~`
    NotRe,
}

/// One `key op "value"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matcher {
    /// Label key.
    pub key: String,
    /// Operator.
    pub op: MatchOp,
    /// Value or regex, unescaped.
    pub value: String,
}

/// A parsed label selector (every matcher must hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    /// The string matchers (a matcher on [`SPAN_ID_KEY`] filters the
    /// samples' span ids, the others the series labels).
    pub matchers: Vec<Matcher>,
    /// The numeric-label matchers.
    pub numeric: Vec<NumMatcher>,
    /// The numeric matchers' keys whose numbers carry a unit, with the base
    /// unit they were converted to (`bytes` or `nanoseconds`):
    /// [`check_numeric_units`] holds them against the stored units.
    pub numeric_units: Vec<(String, &'static str)>,
}

/// One numeric-label matcher: the label's value lies in `[min, max]`
/// (`negate`: it does not, or the sample has no such label).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumMatcher {
    /// Numeric label key.
    pub key: String,
    /// Smallest value kept (inclusive); `None`: no lower bound.
    pub min: Option<i64>,
    /// Largest value kept (inclusive); `None`: no upper bound.
    pub max: Option<i64>,
    /// `!=`: keep the samples outside the range.
    pub negate: bool,
}

/// The units a numeric-label number may carry (lower case) and their size
/// in the base unit (bytes or nanoseconds).
const NUM_UNITS: &[(&str, i64)] = &[
    ("b", 1),
    ("byte", 1),
    ("bytes", 1),
    ("kb", 1 << 10),
    ("kib", 1 << 10),
    ("mb", 1 << 20),
    ("mib", 1 << 20),
    ("gb", 1 << 30),
    ("gib", 1 << 30),
    ("tb", 1 << 40),
    ("tib", 1 << 40),
    ("pb", 1 << 50),
    ("pib", 1 << 50),
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("min", 60_000_000_000),
    ("h", 3_600_000_000_000),
];

/// Parses a number with an optional unit (`4KiB`, `1.5ms`, `-3`) at
/// `chars[*i..]` into an integer in the base unit; `Ok(None)` when no
/// number starts there.
fn parse_number(
    s: &str,
    chars: &[char],
    i: &mut usize,
    base: &mut Option<&'static str>,
) -> Result<Option<i64>> {
    let start = *i;
    let mut j = *i;
    if matches!(chars.get(j), Some('+' | '-')) {
        j += 1;
    }
    let digits = j;
    while chars.get(j).is_some_and(char::is_ascii_digit) {
        j += 1;
    }
    if j == digits {
        return Ok(None);
    }
    if chars.get(j) == Some(&'.') && chars.get(j + 1).is_some_and(char::is_ascii_digit) {
        j += 1;
        while chars.get(j).is_some_and(char::is_ascii_digit) {
            j += 1;
        }
    }
    let num: String = chars[start..j].iter().collect();
    let ustart = j;
    while chars.get(j).is_some_and(|c| c.is_alphabetic()) {
        j += 1;
    }
    let unit: String = chars[ustart..j].iter().collect::<String>().to_lowercase();
    if !unit.is_empty() {
        *base = Some(base_unit(&unit));
    }
    let factor = if unit.is_empty() {
        1
    } else {
        NUM_UNITS
            .iter()
            .find(|(u, _)| *u == unit)
            .map(|(_, f)| *f)
            .ok_or_else(|| {
                sel_err(
                    s,
                    ustart,
                    &format!(
                        "unknown unit {unit:?} (bytes: B, kB, KiB, MB, MiB, GB, GiB, TB, PB; \
                         time: ns, us, ms, s, min, h)"
                    ),
                )
            })?
    };
    // Exact: integer arithmetic on the digits, decimals included.
    let whole = || {
        sel_err(
            s,
            start,
            &format!("{num}{unit} is not a whole number of bytes or nanoseconds, or too large"),
        )
    };
    let (int, frac) = num.split_once('.').unwrap_or((&num, ""));
    let neg = int.starts_with('-');
    let int = int.trim_start_matches(['+', '-']);
    let mut v: i128 = int.parse::<i128>().map_err(|_| whole())? * i128::from(factor);
    if !frac.is_empty() {
        let den = u32::try_from(frac.len())
            .ok()
            .and_then(|n| 10i128.checked_pow(n))
            .ok_or_else(whole)?;
        let f: i128 = frac.parse::<i128>().map_err(|_| whole())? * i128::from(factor);
        if f % den != 0 {
            return Err(whole());
        }
        v += f / den;
    }
    if neg {
        v = -v;
    }
    let v = i64::try_from(v).map_err(|_| whole())?;
    *i = j;
    Ok(Some(v))
}

/// The base unit a selector unit converts to (`kb` -> `bytes`).
fn base_unit(unit: &str) -> &'static str {
    if ["ns", "us", "µs", "μs", "ms", "s", "min", "h"].contains(&unit) {
        "nanoseconds"
    } else {
        "bytes"
    }
}

/// The base unit of a stored pprof `num_unit` (as pprof's `measurement`
/// package names them) and whether it is that base itself: `bytes` ->
/// (bytes, true), `kilobytes` -> (bytes, false), `requests` -> None.
fn stored_base(unit: &str) -> Option<(&'static str, bool)> {
    if unit.is_empty() {
        return None;
    }
    let u = unit.to_lowercase();
    let u = u.trim_end_matches('s');
    match u {
        "b" | "byte" => Some(("bytes", true)),
        "kb" | "kib" | "kilobyte" | "mb" | "mib" | "megabyte" | "gb" | "gib" | "gigabyte"
        | "tb" | "tib" | "terabyte" | "pb" | "pib" | "petabyte" => Some(("bytes", false)),
        "n" | "nanosecond" => Some(("nanoseconds", true)),
        "u" | "µ" | "μ" | "microsecond" | "m" | "millisecond" | "" | "second" | "sec" | "min"
        | "minute" | "h" | "hour" | "day" | "week" | "year" => Some(("nanoseconds", false)),
        _ => None,
    }
}

/// Checks the units a selector's numbers carry against the units the
/// numeric labels are stored in (`stored`: `(key, unit)` pairs of
/// `cp_profiles.num_units` for the selection's type): values are compared
/// as stored, so a `{bytes>=1kB}` is only right on a label stored in
/// bytes. A label stored in another unit (`count`, `requests`,
/// `milliseconds`) with a number in bytes or time is an error saying so,
/// where `go tool pprof -tagfocus` would match nothing or compare the bare
/// number; a number without a unit is compared as stored, always.
///
/// # Errors
/// [`Error::Usage`] naming the key, its stored unit and the unit given.
pub fn check_numeric_units(sel: &Selector, stored: &[(String, String)]) -> Result<()> {
    for (key, base) in &sel.numeric_units {
        for (k, unit) in stored {
            if k != key {
                continue;
            }
            match stored_base(unit) {
                Some((b, true)) if b == *base => {}
                Some((b, false)) if b == *base => {
                    return Err(Error::Usage(format!(
                        "selector: `{key}` is stored in {unit}, not {base}: write its number \
                         in {unit} without a unit"
                    )))
                }
                _ => {
                    return Err(Error::Usage(format!(
                        "selector: `{key}` is stored in {unit:?}, not in {base}: compare it \
                         with a plain number, without a unit"
                    )))
                }
            }
        }
    }
    Ok(())
}

/// The double-quoted string at `chars[*i]` (`"`), unescaped (`\\`,
/// `\"`, `\n`, `\t`); `*i` moves past its closing quote.
fn parse_quoted(s: &str, chars: &[char], i: &mut usize) -> Result<String> {
    let start = *i;
    *i += 1;
    let mut value = String::new();
    loop {
        match chars.get(*i) {
            None => return Err(sel_err(s, start, "unterminated string")),
            Some('"') => {
                *i += 1;
                return Ok(value);
            }
            Some('\\') => {
                let e = match chars.get(*i + 1) {
                    Some('\\') => '\\',
                    Some('"') => '"',
                    Some('n') => '\n',
                    Some('t') => '\t',
                    _ => {
                        return Err(sel_err(
                            s,
                            *i,
                            "unknown escape (use \\\\, \\\", \\n or \\t)",
                        ))
                    }
                };
                value.push(e);
                *i += 2;
            }
            Some(&c) => {
                value.push(c);
                *i += 1;
            }
        }
    }
}

/// A label name given alone (`profile series --by`): as typed, or
/// double-quoted as in a selector (`"a b"`, with the selector's escapes).
///
/// # Errors
/// [`Error::Usage`] for an unterminated quote, a bad escape or text after
/// the closing quote.
pub fn label_key_arg(s: &str) -> Result<String> {
    if !s.starts_with('"') {
        return Ok(s.to_string());
    }
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let key = parse_quoted(s, &chars, &mut i)?;
    if i != chars.len() {
        return Err(sel_err(s, i, "text after the quoted label name"));
    }
    Ok(key)
}

fn sel_err(s: &str, at: usize, why: &str) -> Error {
    Error::Usage(format!("selector {s:?}: {why} at character {}", at + 1))
}

impl Selector {
    /// Every series.
    #[must_use]
    pub fn all() -> Selector {
        Selector::default()
    }

    /// Parses `{k="v", k!="v", k=~"re", k!~"re"}` (braces optional).
    ///
    /// # Errors
    /// [`Error::Usage`], one line naming the selector and the position.
    pub fn parse(s: &str) -> Result<Selector> {
        let chars: Vec<char> = s.chars().collect();
        let mut i = 0;
        let skip_ws = |i: &mut usize| {
            while *i < chars.len() && chars[*i].is_whitespace() {
                *i += 1;
            }
        };
        skip_ws(&mut i);
        let braced = chars.get(i) == Some(&'{');
        if braced {
            i += 1;
        }
        let mut matchers = Vec::new();
        let mut numeric = Vec::new();
        let mut numeric_units = Vec::new();
        loop {
            skip_ws(&mut i);
            match chars.get(i) {
                None if !braced => break,
                None => return Err(sel_err(s, i, "missing `}`")),
                Some('}') if braced => {
                    i += 1;
                    skip_ws(&mut i);
                    if i != chars.len() {
                        return Err(sel_err(s, i, "text after `}`"));
                    }
                    break;
                }
                _ => {}
            }
            let start = i;
            // A label name as pprof stores it (`user-id`, `ключ`): bare, or
            // double-quoted for any other (`"a b"`), as Prometheus 3 does.
            let key: String = if chars.get(i) == Some(&'"') {
                parse_quoted(s, &chars, &mut i)?
            } else {
                while i < chars.len() && is_label_key_char(chars[i]) {
                    i += 1;
                }
                chars[start..i].iter().collect()
            };
            if !is_stored_label_key(&key) {
                return Err(sel_err(
                    s,
                    start,
                    "expected a label name (letters, digits, `_`, `.`, `-`, `/`, or a double-quoted name)",
                ));
            }
            skip_ws(&mut i);
            // A numeric matcher (a comparison, or `=` / `!=` and an
            // unquoted number or range)?
            let mut base = None;
            if let Some(m) = parse_numeric(s, &chars, &mut i, start, &key, &mut base)? {
                if let Some(b) = base {
                    numeric_units.push((key.clone(), b));
                }
                numeric.push(m);
                skip_ws(&mut i);
                match chars.get(i) {
                    Some(',') => i += 1,
                    Some('}') if braced => {}
                    None if !braced => {}
                    _ => return Err(sel_err(s, i, "expected `,` or `}`")),
                }
                continue;
            }
            let op = match (chars.get(i), chars.get(i + 1)) {
                (Some('='), Some('~')) => MatchOp::Re,
                (Some('!'), Some('=')) => MatchOp::Ne,
                (Some('!'), Some('~')) => MatchOp::NotRe,
                (Some('='), _) => MatchOp::Eq,
                _ => {
                    return Err(sel_err(
                        s,
                        i,
                        "expected `=`, `!=`, `=~`, `!~`, `<`, `<=`, `>` or `>=`",
                    ))
                }
            };
            i += if op == MatchOp::Eq { 1 } else { 2 };
            skip_ws(&mut i);
            if chars.get(i) != Some(&'"') {
                return Err(sel_err(s, i, "expected a double-quoted value"));
            }
            let vstart = i;
            let value = parse_quoted(s, &chars, &mut i)?;
            if matches!(op, MatchOp::Re | MatchOp::NotRe) {
                if let Err(e) = regex::Regex::new(&anchored(&value)) {
                    let e = e.to_string();
                    let why = e.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(&e);
                    return Err(sel_err(
                        s,
                        vstart,
                        &format!("invalid regex {value:?} ({})", why.trim()),
                    ));
                }
            }
            matchers.push(Matcher { key, op, value });
            skip_ws(&mut i);
            match chars.get(i) {
                Some(',') => i += 1,
                Some('}') if braced => {}
                None if !braced => {}
                _ => return Err(sel_err(s, i, "expected `,` or `}`")),
            }
        }
        Ok(Selector {
            matchers,
            numeric,
            numeric_units,
        })
    }

    /// This selector with one more matcher `span_id="id"` (the commands'
    /// `--span-id`).
    ///
    /// # Errors
    /// [`Error::Usage`] for an empty id.
    pub fn with_span_id(mut self, id: &str) -> Result<Selector> {
        if id.is_empty() {
            return Err(Error::Usage(
                "span id: empty (the selector `{span_id=\"\"}` keeps the samples without a span)"
                    .into(),
            ));
        }
        self.matchers.push(Matcher {
            key: SPAN_ID_KEY.to_string(),
            op: MatchOp::Eq,
            value: id.to_string(),
        });
        Ok(self)
    }

    /// Whether the selector filters sample rows (span ids, numeric labels),
    /// which only `cp_samples` holds.
    #[must_use]
    pub fn needs_raw(&self) -> bool {
        !self.numeric.is_empty() || self.matchers.iter().any(|m| m.key == SPAN_ID_KEY)
    }

    /// The conditions of the span and numeric matchers on `cp_samples`
    /// rows (`AND`-joined, `1` for none).
    #[must_use]
    pub fn sample_condition(&self) -> String {
        let mut c: Vec<String> = self
            .matchers
            .iter()
            .filter(|m| m.key == SPAN_ID_KEY)
            .map(span_sql)
            .collect();
        c.extend(self.numeric.iter().map(num_sql));
        if c.is_empty() {
            "1".into()
        } else {
            c.join(" AND ")
        }
    }

    /// The conditions on `cp_series` rows (`AND`-joined, `1` for none).
    fn series_condition(&self) -> String {
        let c: Vec<String> = self
            .matchers
            .iter()
            .filter(|m| m.key != SPAN_ID_KEY)
            .map(|m| matcher_sql(&format!("labels[{}]", sql_string(&m.key)), m))
            .collect();
        if c.is_empty() {
            "1".into()
        } else {
            c.join(" AND ")
        }
    }

    /// The conditions on the samples' `service` column implied by
    /// matchers on `service` (for the sort key), `1` for none.
    fn service_condition(&self) -> String {
        let c: Vec<String> = self
            .matchers
            .iter()
            .filter(|m| m.key == crate::ingest::continuous::SERVICE_LABEL)
            .map(|m| matcher_sql("service", m))
            .collect();
        if c.is_empty() {
            "1".into()
        } else {
            c.join(" AND ")
        }
    }
}

/// A numeric matcher at `chars[*i..]` (just after the key of `key_at`):
/// `<`, `<=`, `>`, `>=` and a number, or `=` / `!=` and an unquoted number
/// or range `lo:hi` (either bound may be left out). `Ok(None)`: a string
/// matcher follows (nothing consumed).
fn parse_numeric(
    s: &str,
    chars: &[char],
    i: &mut usize,
    key_at: usize,
    key: &str,
    base: &mut Option<&'static str>,
) -> Result<Option<NumMatcher>> {
    let cmp = match (chars.get(*i), chars.get(*i + 1)) {
        (Some('<'), Some('=')) => Some(("<=", 2)),
        (Some('>'), Some('=')) => Some((">=", 2)),
        (Some('<'), _) => Some(("<", 1)),
        (Some('>'), _) => Some((">", 1)),
        (Some('='), Some(c)) if *c != '~' => Some(("=", 1)),
        (Some('!'), Some('=')) => Some(("!=", 2)),
        _ => None,
    };
    let Some((op, len)) = cmp else {
        return Ok(None);
    };
    let mut j = *i + len;
    while chars.get(j).is_some_and(|c| c.is_whitespace()) {
        j += 1;
    }
    if matches!(op, "=" | "!=") && chars.get(j) == Some(&'"') {
        return Ok(None);
    }
    let at = j;
    let lo = parse_number(s, chars, &mut j, base)?;
    let (min, max) = match op {
        "=" | "!=" => {
            let mut k = j;
            while chars.get(k).is_some_and(|c| c.is_whitespace()) {
                k += 1;
            }
            if chars.get(k) == Some(&':') {
                j = k + 1;
                while chars.get(j).is_some_and(|c| c.is_whitespace()) {
                    j += 1;
                }
                let hi = parse_number(s, chars, &mut j, base)?;
                if lo.is_none() && hi.is_none() {
                    return Err(sel_err(
                        s,
                        at,
                        "a range needs a bound (`1kB:4kB`, `1kB:`, `:4kB`)",
                    ));
                }
                (lo, hi)
            } else if lo.is_some() {
                (lo, lo)
            } else {
                return Err(sel_err(
                    s,
                    at,
                    "expected a double-quoted value, a number or a range (`1kB:4kB`)",
                ));
            }
        }
        _ => {
            let v = lo.ok_or_else(|| sel_err(s, at, &format!("expected a number after `{op}`")))?;
            let none = || sel_err(s, at, "no Int64 value satisfies this");
            match op {
                "<=" => (None, Some(v)),
                ">=" => (Some(v), None),
                "<" => (None, Some(v.checked_sub(1).ok_or_else(none)?)),
                _ => (Some(v.checked_add(1).ok_or_else(none)?), None),
            }
        }
    };
    if key == SPAN_ID_KEY {
        return Err(sel_err(
            s,
            key_at,
            "span_id is compared as a string (`span_id=\"00f067aa0ba902b7\"`)",
        ));
    }
    if let (Some(a), Some(b)) = (min, max) {
        if a > b {
            return Err(sel_err(s, at, &format!("empty range ({a} > {b})")));
        }
    }
    *i = j;
    Ok(Some(NumMatcher {
        key: key.to_string(),
        min,
        max,
        negate: op == "!=",
    }))
}

fn num_sql(m: &NumMatcher) -> String {
    let k = sql_string(&m.key);
    let mut c = vec![format!("mapContains(num_labels, {k})")];
    if let Some(v) = m.min {
        c.push(format!("num_labels[{k}] >= {v}"));
    }
    if let Some(v) = m.max {
        c.push(format!("num_labels[{k}] <= {v}"));
    }
    let c = c.join(" AND ");
    if m.negate {
        format!("NOT ({c})")
    } else {
        format!("({c})")
    }
}

/// A span-id matcher on `cp_samples.span_id` (see the module docs).
fn span_sql(m: &Matcher) -> String {
    let hex = "if(span_id = 0, '', leftPad(lower(hex(span_id)), 16, '0'))";
    match m.op {
        MatchOp::Eq => format!("span_id = {}", span_id_value(&m.value)),
        MatchOp::Ne => format!("span_id != {}", span_id_value(&m.value)),
        _ => matcher_sql(hex, m),
    }
}

fn anchored(re: &str) -> String {
    format!("^(?:{re})$")
}

fn matcher_sql(col: &str, m: &Matcher) -> String {
    match m.op {
        MatchOp::Eq => format!("{col} = {}", sql_string(&m.value)),
        MatchOp::Ne => format!("{col} != {}", sql_string(&m.value)),
        MatchOp::Re => format!("match({col}, {})", sql_string(&anchored(&m.value))),
        MatchOp::NotRe => format!("NOT match({col}, {})", sql_string(&anchored(&m.value))),
    }
}

/// Which table a query reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `cp_samples`, exact times.
    Raw,
    /// `cp_samples_1m`, whole minutes.
    Rollup,
    /// `cp_samples_1h`, whole hours (migration 7).
    Hourly,
}

fn table(source: Source) -> &'static str {
    match source {
        Source::Raw => "cp_samples",
        Source::Rollup => "cp_samples_1m",
        Source::Hourly => "cp_samples_1h",
    }
}

fn time_col(source: Source) -> &'static str {
    match source {
        Source::Raw => "ts",
        Source::Rollup => "minute",
        Source::Hourly => "hour",
    }
}

/// The sample types that are gauges (snapshots of a quantity: pprof heap's
/// `inuse_space` and `inuse_objects`, Go's `goroutine` profile, Datadog's
/// live heap `heap-space` and `heap-live-samples`), as a pattern on the
/// profile type `sample:unit`. `cp_series_profiles_mv` (migration 15, 7
/// before it) keeps the profiles of these types only, with this same
/// pattern.
pub const GAUGE_TYPE_PATTERN: &str = "^(inuse_[^:]*|goroutines?|heap-space|heap-live-[^:]*):";

/// Whether `profile_type` is a gauge: its queries answer the average per
/// profile (per series: the sum over the range / the number of that
/// series' profiles in the range, then summed over the series, as Pyroscope
/// and Parca show `inuse_*`); every other type is additive and summed
/// (cpu, alloc_*, contentions, delay). Derived from the type's name, the
/// way pprof names them, since pprof itself does not mark gauges.
#[must_use]
pub fn is_gauge_type(profile_type: &str) -> bool {
    regex::Regex::new(GAUGE_TYPE_PATTERN)
        .expect("a valid pattern")
        .is_match(profile_type)
}

/// How a selection's values combine over its profiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Combine {
    /// Additive types: summed.
    Sum,
    /// Gauge types: averaged per profile of each series.
    Average,
    /// Decided by the engine: averaged where this SQL condition holds (a
    /// type known only at run time, such as a Grafana variable).
    AverageIf(String),
}

/// One read of a selection: a table and a condition on its time column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// The table.
    pub source: Source,
    /// The condition on its rows (time range, and guards).
    pub range: String,
}

/// A selection as SQL text, what every builder takes: from a
/// [`Selection`] ([`Selection::sql`], literal values, the reads planned
/// here) or from expressions only the engine can evaluate
/// ([`SelectionSql::dynamic`], Grafana's variables), so both send the same
/// queries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectionSql {
    /// The profile type, a `String` expression.
    pub profile_type: String,
    /// The condition on `cp_series` rows (columns `service`, `labels`,
    /// `date`) choosing the series.
    pub series: String,
    /// Whether the `service` condition alone chooses the series (a
    /// selector on `service` only, or none): then the sample reads skip the
    /// `series_id IN` sub-query on `cp_series` (one table read less, a few
    /// ms of a 1-hour query), since the loader writes every series'
    /// `service` label into its rows' `service` column.
    pub by_service: bool,
    /// The condition on the samples' `service` column (the sort key's
    /// second part) implied by the series condition; `1` for none.
    pub service: String,
    /// The condition on `cp_stacks` rows (columns `service`, `date`)
    /// holding every stack of the selection: its service condition and the
    /// days of its range, which that table's sort key prunes by (the
    /// stacks of other services and days are never read).
    pub stacks: String,
    /// The reads covering the range, the hourly rollup for whole hours.
    pub parts: Vec<Part>,
    /// The same range without the hourly rollup (time series finer than an
    /// hour).
    pub fine_parts: Vec<Part>,
    /// The condition on `cp_series_profiles.ts` selecting the profiles the
    /// parts cover (the count gauges divide by).
    pub profiles: String,
    /// A profile's time as `fine_parts` store it (its minute on the
    /// rollup), an expression of `ts`.
    pub profile_time: String,
    /// The range's start, `DateTime64(3, 'UTC')`.
    pub start: String,
    /// How values combine.
    pub combine: Combine,
    /// Whether time columns are cast to `DateTime64(3, 'UTC')` (parts of
    /// different tables in one query).
    pub uniform_time: bool,
    /// Whether `fine_parts` give a profile's minute, not its time (the
    /// per-minute rollup), a boolean expression: a time series' step is
    /// then rounded up to whole minutes (`SelectionSql::step_key`).
    pub by_minute: String,
}

/// What to read: a profile type, a range `[from_ms, to_ms)` and a selector.
#[derive(Debug, Clone)]
pub struct Selection {
    /// `kind:unit` (`cpu:nanoseconds`).
    pub profile_type: String,
    /// Start, ms since the epoch (inclusive).
    pub from_ms: i64,
    /// End, ms since the epoch (exclusive).
    pub to_ms: i64,
    /// The series.
    pub selector: Selector,
}

fn time_lit(ms: i64) -> String {
    format!("fromUnixTimestamp64Milli(toInt64({ms}), 'UTC')")
}

const MINUTE_MS: i64 = 60_000;
const HOUR_MS: i64 = 3_600_000;

fn floor_to(ms: i64, unit: i64) -> i64 {
    ms.div_euclid(unit) * unit
}

fn ceil_to(ms: i64, unit: i64) -> i64 {
    -floor_to(-ms, unit)
}

/// `[lo, hi)` as a condition on `col`, several ranges OR-ed.
fn ranges_sql(col: &str, ranges: &[(i64, i64)]) -> String {
    let r: Vec<String> = ranges
        .iter()
        .map(|(lo, hi)| format!("({col} >= {} AND {col} < {})", time_lit(*lo), time_lit(*hi)))
        .collect();
    format!("({})", r.join(" OR "))
}

/// `[lo, hi)` read from `source` (the samples or the minute rollup), its
/// whole hours from the hourly rollup instead.
fn with_hours(source: Source, lo: i64, hi: i64) -> Vec<Part> {
    let (h1, h2) = (ceil_to(lo, HOUR_MS), floor_to(hi, HOUR_MS));
    let col = time_col(source);
    if h1 >= h2 {
        return vec![Part {
            source,
            range: ranges_sql(col, &[(lo, hi)]),
        }];
    }
    let edges: Vec<(i64, i64)> = [(lo, h1), (h2, hi)]
        .into_iter()
        .filter(|(a, b)| a < b)
        .collect();
    let mut parts = Vec::new();
    if !edges.is_empty() {
        parts.push(Part {
            source,
            range: ranges_sql(col, &edges),
        });
    }
    parts.push(Part {
        source: Source::Hourly,
        range: ranges_sql("hour", &[(h1, h2)]),
    });
    parts
}

impl Selection {
    /// The table of the range's edges (and of time series) under `opts`:
    /// the samples, or the per-minute rollup for long ranges.
    #[must_use]
    pub fn source(&self, opts: &QueryOptions) -> Source {
        if self.selector.needs_raw() {
            Source::Raw
        } else if (self.to_ms - self.from_ms) / 1000 > opts.rollup_after_seconds {
            Source::Rollup
        } else {
            Source::Raw
        }
    }

    /// The selection as SQL, exactly `[from, to)` whatever the length: a
    /// range of at most [`QueryOptions::rollup_after_seconds`] reads the
    /// samples, whole hours inside it from the hourly rollup; a longer one
    /// reads its whole minutes from the per-minute rollup (whole hours from
    /// the hourly one) and only the partial minutes at its two ends from
    /// the samples, so the rollups change the cost, never the answer. A
    /// selection by span or numeric label reads the samples alone (the
    /// rollups keep neither).
    #[must_use]
    pub fn sql(&self, opts: &QueryOptions) -> SelectionSql {
        let (from, to) = (self.from_ms, self.to_ms);
        let long = self.source(opts) == Source::Rollup;
        // Span and numeric matchers filter sample rows: such a selection
        // reads the samples alone (`source` is then `Raw`), never a rollup.
        let raw_only = self.selector.needs_raw();
        let mut parts = Vec::new();
        let mut fine = Vec::new();
        if raw_only {
            let range = format!(
                "({} AND {})",
                ranges_sql("ts", &[(from, to)]),
                self.selector.sample_condition()
            );
            fine.push(Part {
                source: Source::Raw,
                range,
            });
            parts.clone_from(&fine);
        } else if long {
            // [from, m1) raw, [m1, h1) minutes, [h1, h2) hours, [h2, m2)
            // minutes, [m2, to) raw.
            let (m1, m2) = (ceil_to(from, MINUTE_MS), floor_to(to, MINUTE_MS));
            // A range forced onto the rollup (a diff's short side) may hold
            // no whole minute: then it is all edge.
            let edges: Vec<(i64, i64)> = if m1 < m2 {
                vec![(from, m1), (m2, to)]
            } else {
                vec![(from, to)]
            }
            .into_iter()
            .filter(|(a, b)| a < b)
            .collect();
            if !edges.is_empty() {
                let raw = Part {
                    source: Source::Raw,
                    range: ranges_sql("ts", &edges),
                };
                parts.push(raw.clone());
                fine.push(raw);
            }
            if m1 < m2 {
                fine.push(Part {
                    source: Source::Rollup,
                    range: ranges_sql("minute", &[(m1, m2)]),
                });
                parts.extend(with_hours(Source::Rollup, m1, m2));
            }
        } else {
            fine.push(Part {
                source: Source::Raw,
                range: ranges_sql("ts", &[(from, to)]),
            });
            parts = with_hours(Source::Raw, from, to);
        }
        // The loader writes a series' `service` label into its rows'
        // `service` column: matchers on `service` alone need no series.
        let by_service_only = self
            .selector
            .matchers
            .iter()
            .all(|m| m.key == SPAN_ID_KEY || m.key == crate::ingest::continuous::SERVICE_LABEL);
        SelectionSql {
            profile_type: sql_string(&self.profile_type),
            series: format!(
                "date >= toDate({t1}) AND date <= toDate({t2}) AND {}",
                self.selector.series_condition(),
                t1 = time_lit(self.from_ms),
                t2 = time_lit(self.to_ms),
            ),
            by_service: by_service_only,
            service: self.selector.service_condition(),
            stacks: stacks_condition(
                &self.selector.service_condition(),
                &time_lit(self.from_ms),
                &time_lit(self.to_ms),
            ),
            parts,
            fine_parts: fine,
            profiles: ranges_sql("ts", &[(from, to)]),
            // A profile's minute, as the per-minute rollup stores it (a
            // step of whole minutes puts the raw edges' profiles in the
            // same buckets).
            profile_time: if long && !raw_only {
                "toDateTime64(toStartOfMinute(ts), 3, 'UTC')".into()
            } else {
                "ts".into()
            },
            start: time_lit(self.from_ms),
            combine: if is_gauge_type(&self.profile_type) {
                Combine::Average
            } else {
                Combine::Sum
            },
            // Raw edges and rollup minutes in one time series.
            uniform_time: long && !raw_only,
            by_minute: if long && !raw_only { "1" } else { "0" }.into(),
        }
    }
}

/// The condition on `cp_stacks` rows of a selection whose samples satisfy
/// `service` in `[t1, t2)` (`DateTime64(3, 'UTC')` expressions): its
/// service(s) and days (a whole-minute widening of the range for the
/// per-minute rollup stays within them).
fn stacks_condition(service: &str, t1: &str, t2: &str) -> String {
    format!("{service} AND date >= toDate({t1}) AND date <= toDate({t2})")
}

/// The stacks (`stack_id`, `labels`) of `cp_stacks` rows satisfying
/// `cond`, to join a selection's `(stack_id, ...)` rows with. A stack seen
/// on several days or services is several rows with the same labels: the
/// joins take `ANY` one.
fn stacks_of(db: &Ident, cond: &str) -> String {
    format!("(SELECT stack_id, labels FROM {db}.cp_stacks WHERE {cond})")
}

/// `t` rounded up to `unit` (`Hour`, `Minute`), `DateTime64(3, 'UTC')`
/// expressions.
fn ceil_sql(t: &str, unit: &str) -> String {
    format!(
        "(toDateTime64(toStartOf{unit}({t}), 3, 'UTC') + toInterval{unit}(toDateTime64(toStartOf{unit}({t}), 3, 'UTC') != {t}))"
    )
}

impl SelectionSql {
    /// A selection whose values the engine knows only when it runs the
    /// query: `profile_type` a `String` expression, `t1`/`t2` the range's
    /// `DateTime64(3, 'UTC')` expressions, `series` the condition on
    /// `cp_series` rows (its date range is added here), `service` the one
    /// on the samples' `service` column. Every read is present, each
    /// guarded by conditions on the range (empty when they do not hold):
    /// the same plan as [`Selection::sql`], decided by the engine.
    #[must_use]
    pub fn dynamic(
        opts: &QueryOptions,
        profile_type: &str,
        t1: &str,
        t2: &str,
        series: &str,
        service: &str,
    ) -> SelectionSql {
        let long = format!(
            "(dateDiff('second', {t1}, {t2}) > {})",
            opts.rollup_after_seconds
        );
        // Long: [t1, m1) raw, [m1, mh1) minutes, [mh1, mh2) hours,
        // [mh2, m2) minutes, [m2, t2) raw (exact, as `Selection::sql`).
        let m1 = ceil_sql(t1, "Minute");
        let m2 = format!("toDateTime64(toStartOfMinute({t2}), 3, 'UTC')");
        let (rh1, rh2) = (
            ceil_sql(t1, "Hour"),
            format!("toDateTime64(toStartOfHour({t2}), 3, 'UTC')"),
        );
        let (mh1, mh2) = (
            ceil_sql(&m1, "Hour"),
            format!("toDateTime64(toStartOfHour({m2}), 3, 'UTC')"),
        );
        let exact = format!("ts >= {t1} AND ts < {t2}");
        let minutes = format!("{long} AND minute >= {m1} AND minute < {m2}");
        let parts = vec![
            Part {
                source: Source::Raw,
                range: format!(
                    "({exact} AND ((NOT {long} AND NOT (ts >= {rh1} AND ts < {rh2})) \
                     OR ({long} AND (ts < {m1} OR ts >= {m2}))))"
                ),
            },
            Part {
                source: Source::Rollup,
                range: format!("({minutes} AND NOT (minute >= {mh1} AND minute < {mh2}))"),
            },
            Part {
                source: Source::Hourly,
                range: format!(
                    "(hour >= if({long}, {mh1}, {rh1}) AND hour < if({long}, {mh2}, {rh2}))"
                ),
            },
        ];
        SelectionSql {
            profile_type: profile_type.to_string(),
            series: format!("date >= toDate({t1}) AND date <= toDate({t2}) AND {series}"),
            by_service: false,
            service: service.to_string(),
            stacks: stacks_condition(service, t1, t2),
            parts,
            fine_parts: vec![
                Part {
                    source: Source::Raw,
                    range: format!("({exact} AND (NOT {long} OR ts < {m1} OR ts >= {m2}))"),
                },
                Part {
                    source: Source::Rollup,
                    range: format!("({minutes})"),
                },
            ],
            profiles: format!("({exact})"),
            profile_time: format!("if({long}, toDateTime64(toStartOfMinute(ts), 3, 'UTC'), ts)"),
            start: t1.to_string(),
            combine: Combine::AverageIf(format!(
                "match({profile_type}, {})",
                sql_string(GAUGE_TYPE_PATTERN)
            )),
            uniform_time: true,
            by_minute: long,
        }
    }

    /// The time key of a series with points every `step_seconds` (an
    /// integer expression): over minutes ([`SelectionSql::by_minute`]) the
    /// step is rounded up to whole minutes, so that every point sums whole
    /// minutes and the answer stays exact (`--step 5` over a day gives a
    /// point a minute; a 90 s step, 120 s).
    fn step_key(&self, step_seconds: &str) -> Key {
        Key {
            alias: "time",
            expr: format!(
                "toStartOfInterval({{time}}, toIntervalSecond(if({m}, intDiv({step_seconds} + 59, 60) * 60, {step_seconds})))",
                m = self.by_minute
            ),
        }
    }

    /// `series_id IN` the selected series (`1` when the `service`
    /// condition alone chooses them).
    fn series_in(&self, db: &Ident) -> String {
        if self.by_service {
            return "1".into();
        }
        format!(
            "series_id IN (SELECT series_id FROM {db}.cp_series WHERE profile_type = {ty} AND {c})",
            ty = self.profile_type,
            c = self.series,
        )
    }

    /// `SELECT profile_id` of the stored profiles the selection reads
    /// samples of: those with a selected series in the range (and, for a
    /// selection that filters sample rows by span or numeric label, a
    /// selected row), from the samples (the rollups keep no profile ids;
    /// `cp_series_profiles` has the gauge types' only). The pprof export
    /// takes its time, duration and period from these profiles alone.
    #[must_use]
    pub fn profile_ids(&self, db: &Ident) -> String {
        // A selection of sample rows (one raw part) by its rows; else by
        // the profiles' times.
        let range = match self.fine_parts.as_slice() {
            [p] if p.source == Source::Raw => &p.range,
            _ => &self.profiles,
        };
        format!(
            "SELECT DISTINCT profile_id FROM {db}.cp_samples \
             WHERE profile_type = {ty} AND {svc} AND {range} AND {series}",
            ty = self.profile_type,
            svc = self.service,
            series = self.series_in(db),
        )
    }

    /// The time column of a part's table as the query reads it.
    fn time_of(&self, source: Source) -> String {
        let c = time_col(source);
        if self.uniform_time && source != Source::Raw {
            format!("toDateTime64({c}, 3, 'UTC')")
        } else {
            c.to_string()
        }
    }
}

/// A grouping key of [`grouped`]: `alias` = `expr`, where `{time}` in
/// `expr` stands for the row's time.
struct Key {
    alias: &'static str,
    expr: String,
}

impl Key {
    fn stack() -> Key {
        Key {
            alias: "stack_id",
            expr: "stack_id".into(),
        }
    }
    fn timed(&self) -> bool {
        self.expr.contains("{time}")
    }
    fn at(&self, time: &str) -> String {
        self.expr.replace("{time}", time)
    }
}

/// The value of one series' sum `v` given its profile count `n`.
fn per_profile(combine: &Combine, v: &str, n: &str) -> String {
    match combine {
        Combine::Sum => v.to_string(),
        Combine::Average => format!("if({n} = 0, {v}, {})", rounded_div(v, n)),
        Combine::AverageIf(c) => {
            format!("if(({c}) AND {n} != 0, {}, {v})", rounded_div(v, n))
        }
    }
}

/// `v / n` rounded half away from zero, in integers: the engine's
/// `round()` of a Float rounds half to even, so a stack averaging 0.5
/// (one object in one of two profiles) became 0 and 2.5 became 2. Int128,
/// so `2 v` cannot overflow.
fn rounded_div(v: &str, n: &str) -> String {
    format!("toInt64(intDiv(2 * toInt128({v}) + sign({v}) * toInt128({n}), 2 * toInt128({n})))")
}

/// Rows of the selection read from `parts`, `cols` selected from each
/// (with `{time}` the part's time column), only those passing `filter`.
fn part_rows(
    db: &Ident,
    sel: &SelectionSql,
    parts: &[Part],
    cols: &[String],
    filter: &str,
) -> String {
    parts
        .iter()
        .map(|p| {
            let t = sel.time_of(p.source);
            let cols: Vec<String> = cols.iter().map(|c| c.replace("{time}", &t)).collect();
            format!(
                "SELECT {cols} FROM {db}.{tbl} WHERE profile_type = {ty} AND {svc} AND {range} \
                 AND {series}{filter}",
                cols = cols.join(", "),
                tbl = table(p.source),
                ty = sel.profile_type,
                svc = sel.service,
                range = p.range,
                series = sel.series_in(db),
            )
        })
        .collect::<Vec<_>>()
        .join(" UNION ALL ")
}

/// The number of profiles of each selected series (per timed key) in the
/// range: `(series_id[, keys], n)`.
fn profile_counts(db: &Ident, sel: &SelectionSql, timed: &[&Key]) -> String {
    let mut cols = vec!["series_id".to_string()];
    cols.extend(
        timed
            .iter()
            .map(|k| format!("{} AS {}", k.at(&sel.profile_time), k.alias)),
    );
    let keys: Vec<&str> = std::iter::once("series_id")
        .chain(timed.iter().map(|k| k.alias))
        .collect();
    format!(
        "SELECT {cols}, uniqExact(profile_id) AS n FROM {db}.cp_series_profiles \
         WHERE profile_type = {ty} AND {svc} AND {p} AND {series} GROUP BY {keys}",
        cols = cols.join(", "),
        ty = sel.profile_type,
        svc = sel.service,
        p = sel.profiles,
        series = sel.series_in(db),
        keys = keys.join(", "),
    )
}

/// `(keys..., v)`: the selection's values summed per `keys` (zero sums
/// dropped); gauge types averaged per profile of each series first (and per
/// timed key: the profiles in each step).
fn grouped(db: &Ident, sel: &SelectionSql, parts: &[Part], keys: &[Key], filter: &str) -> String {
    let aliases: Vec<&str> = keys.iter().map(|k| k.alias).collect();
    let al = aliases.join(", ");
    let mut cols: Vec<String> = keys
        .iter()
        .map(|k| format!("{} AS {}", k.expr, k.alias))
        .collect();
    if sel.combine == Combine::Sum {
        cols.push("value".into());
        return format!(
            "SELECT {al}, sum(value) AS v FROM ({rows}) GROUP BY {al} HAVING v != 0",
            rows = part_rows(db, sel, parts, &cols, filter),
        );
    }
    cols.push("series_id".into());
    cols.push("value".into());
    let timed: Vec<&Key> = keys.iter().filter(|k| k.timed()).collect();
    let on: Vec<String> = std::iter::once("series_id")
        .chain(timed.iter().map(|k| k.alias))
        .map(|a| format!("c.{a} = p.{a}"))
        .collect();
    let p_keys: Vec<String> = aliases.iter().map(|a| format!("p.{a} AS {a}")).collect();
    format!(
        "SELECT {al}, sum(pv) AS v FROM (\
           SELECT {pk}, {div} AS pv \
           FROM (SELECT {al}, series_id, sum(value) AS v FROM ({rows}) GROUP BY {al}, series_id) AS p \
           LEFT JOIN ({counts}) AS c ON {on}) \
         GROUP BY {al} HAVING v != 0",
        pk = p_keys.join(", "),
        div = per_profile(&sel.combine, "p.v", "c.n"),
        rows = part_rows(db, sel, parts, &cols, filter),
        counts = profile_counts(db, sel, &timed),
        on = on.join(" AND "),
    )
}

/// `(stack_id, v)`: the selection's values per stack (zero sums dropped).
fn per_stack(db: &Ident, sel: &SelectionSql) -> String {
    grouped(db, sel, &sel.parts, &[Key::stack()], "")
}

fn tree_options(max_nodes: &str, extra: &[(&str, String)]) -> String {
    let mut parts = vec![format!("'max_nodes', {max_nodes}")];
    for (k, v) in extra {
        parts.push(format!("{}, {v}", sql_string(k)));
    }
    format!("map({})", parts.join(", "))
}

/// `max_nodes` as the `String` expression the tree options take.
fn max_nodes_lit(max_nodes: u32) -> String {
    format!("'{max_nodes}'")
}

fn flame_rows(tree_expr: &str, from: &str, diff: bool) -> String {
    let right = if diff {
        ", n.valueRight AS valueRight, n.selfRight AS selfRight"
    } else {
        ""
    };
    format!(
        "SELECT i, n.level AS level, n.label AS label, n.value AS value, n.self AS self{right} \
         FROM (SELECT {tree_expr} AS tree FROM {from}) \
         ARRAY JOIN tree AS n, arrayEnumerate(tree) AS i ORDER BY i"
    )
}

/// Flame graph of a selection: `(i, level, label, value, self)`;
/// `max_nodes` 0 = every node.
#[must_use]
pub fn flame_sql(opts: &QueryOptions, sel: &Selection, max_nodes: u32) -> String {
    flame_sql_of(&opts.database, &sel.sql(opts), &max_nodes_lit(max_nodes))
}

/// [`flame_sql`] of a [`SelectionSql`]; `max_nodes` a `String` expression.
#[must_use]
pub fn flame_sql_of(db: &Ident, sel: &SelectionSql, max_nodes: &str) -> String {
    flame_sql_join(db, sel, max_nodes, "LEFT")
}

/// pprof's `-focus` and `-ignore`: which samples a flame graph or top
/// functions keep, by the function names of their stacks (regexes, matched
/// anywhere in a name, as pprof matches them). A sample is kept when no
/// frame matches `ignore` and, with `focus`, some frame matches it; with
/// either given, a sample without frames is dropped, as pprof drops it.
/// Totals and shares stay those of the whole selection. As in pprof, a
/// frame also matches by its source file or module (mapping) name, as the
/// frames dictionary holds them (`-focus=net/http/` keeps the frames of
/// that package's files).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackFilter {
    /// Keep only samples with a frame matching this. Default: none.
    pub focus: Option<String>,
    /// Drop samples with a frame matching this. Default: none.
    pub ignore: Option<String>,
}

impl StackFilter {
    /// The condition on a stack's `labels`, `None` when nothing filters.
    ///
    /// # Errors
    /// [`Error::Usage`] for a regex that does not compile.
    fn condition(&self, db: &Ident) -> Result<Option<String>> {
        let mut parts = Vec::new();
        for (flag, re, keep) in [
            ("focus", &self.focus, true),
            ("ignore", &self.ignore, false),
        ] {
            let Some(re) = re else { continue };
            check_regex(flag, re)?;
            let re = sql_string(re);
            // The labels of the frames whose file or module matches: one
            // scalar sub-query, an array the engine computes once.
            let by_file = format!(
                "(SELECT groupUniqArray(label) FROM {db}.frames \
                 WHERE (file != '' AND match(file, {re})) OR (module != '' AND match(module, {re})))"
            );
            let any = format!("arrayExists(f -> match(f, {re}) OR has({by_file}, f), labels)");
            parts.push(if keep { any } else { format!("NOT {any}") });
        }
        if parts.is_empty() {
            return Ok(None);
        }
        parts.push("notEmpty(labels)".into());
        Ok(Some(parts.join(" AND ")))
    }

    /// `sel` with only the stacks this keeps; whether it filters at all.
    fn apply(&self, db: &Ident, sel: &mut SelectionSql) -> Result<bool> {
        Ok(match self.condition(db)? {
            Some(c) => {
                sel.stacks = format!("({}) AND {c}", sel.stacks);
                true
            }
            None => false,
        })
    }
}

/// A regex the engine's `match` runs, checked here first (the same RE2
/// syntax) so that a bad one is a usage error naming the flag.
fn check_regex(what: &str, re: &str) -> Result<()> {
    match regex_error(re) {
        Some(why) => Err(Error::Usage(format!("{what} regex {re:?}: {why}"))),
        None => Ok(()),
    }
}

/// Why `re` is no regex the engine's `match` runs (the regex crate shares
/// RE2's syntax): the crate's reason, its last line; `None` for a good one.
#[must_use]
pub fn regex_error(re: &str) -> Option<String> {
    regex::Regex::new(re).err().map(|e| {
        e.to_string()
            .lines()
            .last()
            .unwrap_or("invalid")
            .trim()
            .to_owned()
    })
}

/// [`flame_sql`] with only the samples `filter` keeps.
///
/// # Errors
/// [`Error::Usage`] for a filter regex that does not compile.
pub fn flame_sql_filtered(
    opts: &QueryOptions,
    sel: &Selection,
    max_nodes: u32,
    filter: &StackFilter,
) -> Result<String> {
    let mut s = sel.sql(opts);
    // Filtered, the stacks left out must not join as empty stacks.
    let join = if filter.apply(&opts.database, &mut s)? {
        "INNER"
    } else {
        "LEFT"
    };
    Ok(flame_sql_join(
        &opts.database,
        &s,
        &max_nodes_lit(max_nodes),
        join,
    ))
}

fn flame_sql_join(db: &Ident, sel: &SelectionSql, max_nodes: &str, join: &str) -> String {
    let from = format!(
        "({}) AS x ANY {join} JOIN {} AS st ON st.stack_id = x.stack_id",
        per_stack(db, sel),
        stacks_of(db, &sel.stacks)
    );
    flame_rows(
        &format!(
            "stackTreeWith(groupArray((st.labels, x.v)), {})",
            tree_options(max_nodes, &[])
        ),
        &from,
        false,
    )
}

/// Flame graph of one stored profile (`profile_id`, one type).
#[must_use]
pub fn profile_flame_sql(
    opts: &QueryOptions,
    profile_id: u64,
    profile_type: &str,
    max_nodes: u32,
) -> String {
    let db = &opts.database;
    let ty = sql_string(profile_type);
    let profile = format!(
        "(SELECT {{}} FROM {db}.cp_profiles WHERE profile_id = {profile_id} AND profile_type = {ty})"
    );
    let of_profile = |col: &str| profile.replace("{}", col);
    // Its stacks: those of its service on its day.
    let stacks = stacks_of(
        db,
        &format!(
            "service = {} AND date = {}",
            of_profile("any(service)"),
            of_profile("toDate(any(ts))")
        ),
    );
    let from = format!(
        "(SELECT stack_id, sum(value) AS v FROM {db}.cp_samples \
         WHERE profile_type = {ty} \
           AND ts = {ts} \
           AND profile_id = {profile_id} \
         GROUP BY stack_id HAVING v != 0) AS x \
         ANY LEFT JOIN {stacks} AS st ON st.stack_id = x.stack_id",
        ts = of_profile("any(ts)"),
    );
    flame_rows(
        &format!(
            "stackTreeWith(groupArray((st.labels, x.v)), {})",
            tree_options(&max_nodes_lit(max_nodes), &[])
        ),
        &from,
        false,
    )
}

/// Diff of two selections of one profile type (baseline `a`: value/self,
/// comparison `b`: valueRight/selfRight). Over the same range both are
/// summed in ONE scan of each table read (`sumIf`); over different ranges
/// each side reads its own. `normalize` scales the baseline to the
/// comparison's total. Each side reads the hourly rollup for its whole
/// hours and its edges from the samples, or from the per-minute rollup when
/// either range is longer than the threshold (so both sides are on the same
/// footing).
///
/// # Errors
/// [`Error::Usage`] when the two selections are of different types.
pub fn diff_sql(
    opts: &QueryOptions,
    a: &Selection,
    b: &Selection,
    max_nodes: u32,
    normalize: bool,
) -> Result<String> {
    diff_sql_filtered(opts, a, b, max_nodes, normalize, &StackFilter::default())
}

/// [`diff_sql`] of only the samples `filter` keeps, on both sides
/// (`normalize` then scales to the kept samples' totals).
///
/// # Errors
/// As [`diff_sql`], and [`Error::Usage`] for a filter regex that does not
/// compile.
pub fn diff_sql_filtered(
    opts: &QueryOptions,
    a: &Selection,
    b: &Selection,
    max_nodes: u32,
    normalize: bool,
    filter: &StackFilter,
) -> Result<String> {
    if a.profile_type != b.profile_type {
        return Err(Error::Usage(format!(
            "diff: the two selections are of different profile types ({} and {})",
            a.profile_type, b.profile_type
        )));
    }
    // Both sides on the rollup when either is long.
    let long = a.source(opts) == Source::Rollup || b.source(opts) == Source::Rollup;
    let side = |s: &Selection| {
        let mut o = opts.clone();
        if long {
            o.rollup_after_seconds = o.rollup_after_seconds.min(-1);
        }
        s.sql(&o)
    };
    let (mut sa, mut sb) = (side(a), side(b));
    // Filtered, the stacks left out must not join as empty stacks.
    let (fa, fb) = (
        filter.apply(&opts.database, &mut sa)?,
        filter.apply(&opts.database, &mut sb)?,
    );
    let join = if fa || fb { "INNER" } else { "LEFT" };
    Ok(diff_sql_join(
        &opts.database,
        &sa,
        &sb,
        &max_nodes_lit(max_nodes),
        if normalize { "'1'" } else { "'0'" },
        join,
    ))
}

/// One side's `(series_id, stack_id, va, vb)` rows, `flag` its own column.
fn side_rows(db: &Ident, s: &SelectionSql, a: bool) -> String {
    let (fa, fb) = if a { ("1", "0") } else { ("0", "1") };
    part_rows(
        db,
        s,
        &s.parts,
        &[
            "series_id".into(),
            "stack_id".into(),
            format!("value * {fa} AS va"),
            format!("value * {fb} AS vb"),
        ],
        "",
    )
}

/// [`diff_sql`] of two [`SelectionSql`] of one type; `max_nodes` and
/// `normalize` (`'1'` or `'0'`) `String` expressions.
#[must_use]
pub fn diff_sql_of(
    db: &Ident,
    a: &SelectionSql,
    b: &SelectionSql,
    max_nodes: &str,
    normalize: &str,
) -> String {
    diff_sql_join(db, a, b, max_nodes, normalize, "LEFT")
}

fn diff_sql_join(
    db: &Ident,
    a: &SelectionSql,
    b: &SelectionSql,
    max_nodes: &str,
    normalize: &str,
    join: &str,
) -> String {
    let gauge = a.combine != Combine::Sum;
    // Rows (series_id, stack_id, va, vb).
    let rows = if a.parts == b.parts {
        // One scan per table read for both sides, each row's side from the
        // selections' conditions. (Tried: a hash join with the selected
        // series carrying a 0/1 column per side, the series read once and
        // no `IN` per row: the same time on the 1-hour fleet, 8,500 to
        // 43,000 rows, docs/benchmarks.md.)
        let (ca, cb) = (
            format!("({} AND {})", a.service, a.series_in(db)),
            format!("({} AND {})", b.service, b.series_in(db)),
        );
        a.parts
            .iter()
            .map(|p| {
                format!(
                    "SELECT series_id, stack_id, if({ca}, value, 0) AS va, if({cb}, value, 0) AS vb \
                     FROM {db}.{t} WHERE profile_type = {ty} AND {r} AND ({ca} OR {cb})",
                    t = table(p.source),
                    ty = a.profile_type,
                    r = p.range,
                )
            })
            .collect::<Vec<_>>()
            .join(" UNION ALL ")
    } else {
        format!(
            "{} UNION ALL {}",
            side_rows(db, a, true),
            side_rows(db, b, false)
        )
    };
    let inner = if gauge {
        format!(
            "SELECT stack_id, sum(pa) AS va, sum(pb) AS vb FROM (\
               SELECT p.stack_id AS stack_id, {da} AS pa, {db_} AS pb \
               FROM (SELECT series_id, stack_id, sum(va) AS va, sum(vb) AS vb FROM ({rows}) \
                     GROUP BY series_id, stack_id) AS p \
               LEFT JOIN ({na}) AS ca ON ca.series_id = p.series_id \
               LEFT JOIN ({nb}) AS cb ON cb.series_id = p.series_id) \
             GROUP BY stack_id HAVING va != 0 OR vb != 0",
            da = per_profile(&a.combine, "p.va", "ca.n"),
            db_ = per_profile(&b.combine, "p.vb", "cb.n"),
            na = profile_counts(db, a, &[]),
            nb = profile_counts(db, b, &[]),
        )
    } else {
        format!(
            "SELECT stack_id, sum(va) AS va, sum(vb) AS vb FROM ({rows}) \
             GROUP BY stack_id HAVING va != 0 OR vb != 0"
        )
    };
    // Both sides' stacks (one condition when they are the same).
    let stacks = if a.stacks == b.stacks {
        stacks_of(db, &a.stacks)
    } else {
        stacks_of(db, &format!("({}) OR ({})", a.stacks, b.stacks))
    };
    let from = format!("({inner}) AS x ANY {join} JOIN {stacks} AS st ON st.stack_id = x.stack_id");
    flame_rows(
        &format!(
            "stackDiffWith(groupArray((st.labels, x.va)), groupArray((st.labels, x.vb)), {})",
            tree_options(max_nodes, &[("normalize", normalize.to_string())])
        ),
        &from,
        true,
    )
}

/// Top functions of a selection: `(function, self, total, self_share,
/// total_share)`, shares of the whole selection's total (kept global when
/// `function_regex` keeps only some functions); total counts every stack
/// through a function once (recursion once), self the stacks whose leaf it
/// is. Largest total first; `limit` 0 = all.
///
/// # Errors
/// [`Error::Usage`] for a regex that does not compile.
pub fn top_functions_sql(
    opts: &QueryOptions,
    sel: &Selection,
    function_regex: Option<&str>,
    limit: u32,
) -> Result<String> {
    top_functions_sql_filtered(opts, sel, function_regex, limit, &StackFilter::default())
}

/// [`top_functions_sql`] of only the samples `filter` keeps (the shares
/// stay of the whole selection).
///
/// # Errors
/// [`Error::Usage`] for a regex that does not compile.
pub fn top_functions_sql_filtered(
    opts: &QueryOptions,
    sel: &Selection,
    function_regex: Option<&str>,
    limit: u32,
    filter: &StackFilter,
) -> Result<String> {
    let re = match function_regex {
        Some(re) => {
            check_regex("function", re)?;
            Some(sql_string(re))
        }
        None => None,
    };
    let mut s = sel.sql(opts);
    filter.apply(&opts.database, &mut s)?;
    Ok(top_functions_sql_of(
        &opts.database,
        &s,
        re.as_deref(),
        limit,
    ))
}

/// [`top_functions_sql`] of a [`SelectionSql`]; `function_regex` a
/// `String` expression. Shares are of the sum of the stacks' absolute
/// values, as `go tool pprof` totals a profile (a negative value, in a
/// profile written with negative samples, gave shares over 100%). The functions come from the selected stacks' own
/// frames (the selection's `cp_stacks` joined once, each stack's distinct
/// frames), not from a join with every stack of `stack_functions`.
#[must_use]
pub fn top_functions_sql_of(
    db: &Ident,
    sel: &SelectionSql,
    function_regex: Option<&str>,
    limit: u32,
) -> String {
    let filter = function_regex.map_or(String::new(), |re| format!(" WHERE match(f, {re})"));
    let limit = if limit == 0 {
        String::new()
    } else {
        format!(" LIMIT {limit}")
    };
    format!(
        "SELECT f AS function, sumIf(v, f = leaf) AS self, sum(v) AS total, \
                self / any(grand) AS self_share, total / any(grand) AS total_share \
         FROM (SELECT x.v AS v, x.grand AS grand, st.labels AS labels, st.labels[-1] AS leaf \
               FROM (SELECT stack_id, v, sum(abs(v)) OVER () AS grand FROM ({ps})) AS x \
               ANY INNER JOIN {st} AS st ON st.stack_id = x.stack_id) \
         ARRAY JOIN arrayDistinct(labels) AS f{filter} \
         GROUP BY function ORDER BY total DESC, function{limit}",
        ps = per_stack(db, sel),
        st = stacks_of(db, &sel.stacks),
    )
}

/// Which half of a sandwich.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandwichSide {
    /// Who calls the function: the tree from its callers up to the roots.
    Callers,
    /// What it calls: the tree below it.
    Callees,
}

/// One half of the sandwich of `function`: a tree rooted at the function,
/// of its callers (upwards: level 1 is the immediate caller) or its
/// callees. Recursion is folded into the function: callers start at its
/// outermost call, callees below its innermost, so a directly recursive
/// function is never its own caller or callee (as `go tool pprof -peek`
/// shows it); each stack counts once. The root's value is the function's
/// total; its self, on the callees side, the function's self.
#[must_use]
pub fn sandwich_sql(
    opts: &QueryOptions,
    sel: &Selection,
    function: &str,
    side: SandwichSide,
    max_nodes: u32,
) -> String {
    sandwich_sql_of(
        &opts.database,
        &sel.sql(opts),
        &sql_string(function),
        side,
        &max_nodes_lit(max_nodes),
    )
}

/// [`sandwich_sql`] of a [`SelectionSql`]; `function` and `max_nodes`
/// `String` expressions.
#[must_use]
pub fn sandwich_sql_of(
    db: &Ident,
    sel: &SelectionSql,
    function: &str,
    side: SandwichSide,
    max_nodes: &str,
) -> String {
    let f = function;
    let path = match side {
        SandwichSide::Callers => {
            format!("arrayReverse(arraySlice(st.labels, 1, indexOf(st.labels, {f}) - 1))")
        }
        SandwichSide::Callees => format!(
            "arraySlice(st.labels, length(st.labels) - indexOf(arrayReverse(st.labels), {f}) + 2)"
        ),
    };
    let from = format!(
        "({ps}) AS x ANY LEFT JOIN {st} AS st ON st.stack_id = x.stack_id \
         WHERE has(st.labels, {f})",
        ps = per_stack(db, sel),
        st = stacks_of(db, &format!("{} AND has(labels, {f})", sel.stacks)),
    );
    flame_rows(
        &format!(
            "stackTreeWith(groupArray(({path}, x.v)), {})",
            tree_options(max_nodes, &[("root", f.to_string())])
        ),
        &from,
        false,
    )
}

/// Values over time per label value: `(time, value_of_key, value)`, one
/// series per value of `key` (a missing label is `""`), `step_seconds` per
/// point (0: one row per value for the whole range, time = its start).
/// Gauge types: per step, the average per profile of each series.
///
/// # Errors
/// [`Error::Usage`] for a key that is not a label name.
pub fn by_label_sql(
    opts: &QueryOptions,
    sel: &Selection,
    key: &str,
    step_seconds: u32,
) -> Result<String> {
    if !is_stored_label_key(key) {
        return Err(Error::Usage(format!(
            "group by {key:?}: not a label name (empty, control characters or over {} bytes)",
            crate::ingest::continuous::MAX_LABEL_KEY_LEN
        )));
    }
    let step = (step_seconds != 0).then(|| step_seconds.to_string());
    Ok(format!(
        "SELECT time, lv AS {k}, value FROM ({core}) ORDER BY time, {k}",
        k = crate::storage::quote_ident(key),
        core = by_label_sql_of(
            &opts.database,
            &sel.sql(opts),
            &sql_string(key),
            step.as_deref()
        ),
    ))
}

/// [`by_label_sql`] of a [`SelectionSql`]: `(time, lv, value)` ordered by
/// time and value; `key` a `String` expression, `step_seconds` an integer
/// expression (`None`: the whole range in one point at its start, read with
/// the hourly rollup).
#[must_use]
pub fn by_label_sql_of(
    db: &Ident,
    sel: &SelectionSql,
    key: &str,
    step_seconds: Option<&str>,
) -> String {
    let (time, parts) = match step_seconds {
        Some(step) => (sel.step_key(step), &sel.fine_parts),
        None => (
            Key {
                alias: "time",
                expr: sel.start.clone(),
            },
            &sel.parts,
        ),
    };
    format!(
        "SELECT x.time AS time, s.lv AS lv, sum(x.v) AS value \
         FROM ({g}) AS x \
         INNER JOIN (SELECT series_id, any(labels[{key}]) AS lv FROM {db}.cp_series \
                     WHERE profile_type = {ty} GROUP BY series_id) AS s \
         ON s.series_id = x.series_id \
         GROUP BY time, lv ORDER BY time, lv",
        g = grouped_by_series(db, sel, parts, &time),
        ty = sel.profile_type,
    )
}

/// `(time, series_id, v)`: [`grouped`] by a time key and the series
/// itself; gauges divide each series' sum by its profiles in the step (in
/// the whole range for a constant time key).
fn grouped_by_series(db: &Ident, sel: &SelectionSql, parts: &[Part], time: &Key) -> String {
    let series = Key {
        alias: "series_id",
        expr: "series_id".into(),
    };
    let rows = |cols: &[String]| part_rows(db, sel, parts, cols, "");
    if sel.combine == Combine::Sum {
        let t = Key {
            alias: time.alias,
            expr: time.expr.clone(),
        };
        return grouped(db, sel, parts, &[t, series], "");
    }
    let timed: Vec<&Key> = if time.timed() { vec![time] } else { vec![] };
    let on = if time.timed() {
        " AND c.time = p.time"
    } else {
        ""
    };
    format!(
        "SELECT p.time AS time, p.series_id AS series_id, {div} AS v \
         FROM (SELECT time, series_id, sum(value) AS v FROM ({rows}) \
               GROUP BY time, series_id HAVING v != 0) AS p \
         LEFT JOIN ({counts}) AS c ON c.series_id = p.series_id{on}",
        div = per_profile(&sel.combine, "p.v", "c.n"),
        rows = rows(&[
            format!("{} AS time", time.expr),
            "series_id".into(),
            "value".into()
        ]),
        counts = profile_counts(db, sel, &timed),
    )
}

/// Per-function totals over time: `(time, function, value)`, every stack
/// through a function counted once per point; gauges averaged per profile
/// of each series and step.
#[must_use]
pub fn function_series_sql(
    opts: &QueryOptions,
    sel: &Selection,
    functions: &[&str],
    step_seconds: u32,
) -> String {
    let list: Vec<String> = functions.iter().map(|f| sql_string(f)).collect();
    function_series_sql_of(
        &opts.database,
        &sel.sql(opts),
        &format!("[{}]", list.join(", ")),
        &step_seconds.max(1).to_string(),
    )
}

/// [`function_series_sql`] of a [`SelectionSql`]: `functions` an
/// `Array(String)` expression, `step_seconds` an integer expression (at
/// least 1).
#[must_use]
pub fn function_series_sql_of(
    db: &Ident,
    s: &SelectionSql,
    functions: &str,
    step_seconds: &str,
) -> String {
    let keys = [s.step_key(step_seconds), Key::stack()];
    // The selection's stacks through the functions, from its own service
    // and days of `cp_stacks` (not every stack of `stack_functions`).
    let filter = format!(
        " AND stack_id IN (SELECT stack_id FROM {db}.cp_stacks WHERE {c} AND hasAny(labels, {functions}))",
        c = s.stacks,
    );
    format!(
        "SELECT x.time AS time, sf.function AS function, sum(x.v) AS value \
         FROM ({g}) AS x \
         INNER JOIN (SELECT DISTINCT stack_id, function FROM {db}.cp_stacks \
                     ARRAY JOIN labels AS function \
                     WHERE {c} AND has({functions}, function)) AS sf ON sf.stack_id = x.stack_id \
         GROUP BY time, function ORDER BY time, function",
        c = s.stacks,
        g = grouped(db, s, &s.fine_parts, &keys, &filter),
    )
}

/// Stored profiles of a type in `[from_ms, to_ms)` (any service when
/// `service` is `None`), newest first: `(profile_id, service, ts,
/// duration_ns, period, total, sample_count, series_count, labels, source)`.
#[must_use]
pub fn profile_list_sql(
    opts: &QueryOptions,
    profile_type: &str,
    service: Option<&str>,
    from_ms: i64,
    to_ms: i64,
) -> String {
    let db = &opts.database;
    let svc = service.map_or("1".to_string(), |s| format!("service = {}", sql_string(s)));
    format!(
        "SELECT profile_id, service, ts, duration_ns, period, total, sample_count, series_count, \
                labels, source \
         FROM {db}.cp_profiles FINAL \
         WHERE profile_type = {ty} AND {svc} AND ts >= {t1} AND ts < {t2} \
         ORDER BY ts DESC, profile_id",
        ty = sql_string(profile_type),
        t1 = time_lit(from_ms),
        t2 = time_lit(to_ms),
    )
}

/// The selection's samples for a pprof export, kept apart by what pprof
/// keeps them apart by: `(labels, num_labels, stack, v)` per series,
/// numeric labels and stack, each column a JSON text (`toJSONString`: the
/// series' labels as an object, the numeric labels as an object, the stack
/// root first as an array) and `v` the value. Read from the samples over
/// the exact range (the rollups keep no numeric labels), whatever its
/// length; gauge types averaged per profile of each series as every answer
/// is (so the values of a stack add up to its value in the flame graph,
/// give or take the rounding of each part).
#[must_use]
pub fn export_rows_sql(opts: &QueryOptions, sel: &Selection) -> String {
    let db = &opts.database;
    let raw = QueryOptions {
        rollup_after_seconds: i64::MAX,
        ..opts.clone()
    };
    let mut s = sel.sql(&raw);
    s.parts = s.fine_parts.clone();
    let keys = [
        Key {
            alias: "sid",
            expr: "series_id".into(),
        },
        Key::stack(),
        Key {
            alias: "nl",
            expr: "num_labels".into(),
        },
    ];
    format!(
        "SELECT toJSONString(se.ls), toJSONString(x.nl), toJSONString(st.labels), x.v \
         FROM ({rows}) AS x \
         ANY LEFT JOIN (SELECT series_id, any(labels) AS ls FROM {db}.cp_series \
             WHERE profile_type = {ty} AND {series} GROUP BY series_id) AS se ON se.series_id = x.sid \
         ANY LEFT JOIN {stacks} AS st ON st.stack_id = x.stack_id",
        rows = grouped(db, &s, &s.parts, &keys, ""),
        ty = s.profile_type,
        series = s.series,
        stacks = stacks_of(db, &s.stacks),
    )
}

/// Label keys and values of a type in a range with the number of series
/// having each: `(key, value, series)`. The label-values table is kept
/// per day (the dashboard's pickers read it so); here only the series
/// with samples in the range count ([`label_values_of`]), so a 30-minute
/// range does not list the rest of its day's services and values.
#[must_use]
pub fn label_values_sql(
    opts: &QueryOptions,
    profile_type: &str,
    from_ms: i64,
    to_ms: i64,
) -> String {
    let sel = Selection {
        profile_type: profile_type.to_string(),
        from_ms,
        to_ms,
        selector: Selector::all(),
    }
    .sql(opts);
    label_values_of(&opts.database, &sel, &time_lit(from_ms), &time_lit(to_ms))
}

/// `(key, value, series)` of the series with samples in `sel` (its range
/// `[t1, t2)` as `DateTime64(3, 'UTC')` expressions): the series ids read
/// from the selection's parts (a long range's rollups, not a day of
/// samples), their keys and values from the per-day label-values table.
#[must_use]
pub fn label_values_of(db: &Ident, sel: &SelectionSql, t1: &str, t2: &str) -> String {
    format!(
        "SELECT key, value, uniqExact(series_id) AS series FROM {db}.cp_label_values \
         WHERE profile_type = {ty} AND date >= toDate({t1}) AND date <= toDate({t2}) \
         AND series_id IN ({rows}) \
         GROUP BY key, value ORDER BY key, series DESC, value",
        ty = sel.profile_type,
        rows = part_rows(db, sel, &sel.parts, &["series_id".to_string()], ""),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys as pprof files carry them: with `-`, in any script, or quoted
    /// with any character; never control characters or empty.
    #[test]
    fn a_label_name_alone_is_bare_or_quoted_as_in_a_selector() {
        assert_eq!(label_key_arg("user-id").unwrap(), "user-id");
        assert_eq!(label_key_arg(r#""a b""#).unwrap(), "a b");
        assert_eq!(label_key_arg(r#""a\"b""#).unwrap(), "a\"b");
        for bad in [r#""a"#, r#""a"b"#, r#""a\q""#] {
            assert!(label_key_arg(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn selector_keys_are_those_pprof_stores() {
        let s = Selector::parse(
            r#"{user-id="42", ключ!="", "a b"=~"x.*", app.kubernetes.io/name="web"}"#,
        )
        .unwrap();
        let keys: Vec<&str> = s.matchers.iter().map(|m| m.key.as_str()).collect();
        assert_eq!(keys, ["user-id", "ключ", "a b", "app.kubernetes.io/name"]);
        assert!(
            s.series_condition().contains("labels['a b']"),
            "{}",
            s.series_condition()
        );
        for bad in [
            r#"{""="x"}"#,
            "{\"a\tb\"=\"x\"}",
            r#"{a b="x"}"#,
            r#"{"a="x"}"#,
        ] {
            assert!(Selector::parse(bad).is_err(), "{bad}");
        }
        let sel = Selection {
            profile_type: "cpu:nanoseconds".into(),
            from_ms: 0,
            to_ms: 1000,
            selector: Selector::all(),
        };
        let opts = QueryOptions::default();
        assert!(by_label_sql(&opts, &sel, "user-id", 60)
            .unwrap()
            .contains("lv AS `user-id`"));
        assert!(by_label_sql(&opts, &sel, "a`b", 60)
            .unwrap()
            .contains("`a\\`b`"));
        assert!(by_label_sql(&opts, &sel, "a\nb", 60).is_err());
    }

    #[test]
    fn selectors_parse() {
        let s =
            Selector::parse(r#"{service="api", version=~"1\\.4.*", host!="a", region!~"eu.*"}"#)
                .unwrap();
        assert_eq!(
            s.matchers,
            vec![
                Matcher {
                    key: "service".into(),
                    op: MatchOp::Eq,
                    value: "api".into()
                },
                Matcher {
                    key: "version".into(),
                    op: MatchOp::Re,
                    value: r"1\.4.*".into()
                },
                Matcher {
                    key: "host".into(),
                    op: MatchOp::Ne,
                    value: "a".into()
                },
                Matcher {
                    key: "region".into(),
                    op: MatchOp::NotRe,
                    value: "eu.*".into()
                },
            ]
        );
        assert_eq!(Selector::parse("{}").unwrap(), Selector::all());
        assert_eq!(Selector::parse("  ").unwrap(), Selector::all());
        assert_eq!(
            Selector::parse(r#"a="x\"y""#).unwrap().matchers[0].value,
            "x\"y"
        );
        assert_eq!(Selector::parse(r#"{a="1",}"#).unwrap().matchers.len(), 1);
    }

    #[test]
    fn bad_selectors_are_refused_in_one_line() {
        for bad in [
            "{",
            r#"{a="b""#,
            r#"{a="b"} x"#,
            r#"{a=b}"#,
            r#"{a=="b"}"#,
            r#"{a=~"("}"#,
            r#"{a="\q"}"#,
            r#"{a="b" c="d"}"#,
            r#"{'a'="b"}"#,
            "{a=\"b\"}); DROP TABLE x; --",
        ] {
            let e = Selector::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("selector "), "{bad}: {e}");
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
    }

    fn num(key: &str, min: Option<i64>, max: Option<i64>, negate: bool) -> NumMatcher {
        NumMatcher {
            key: key.into(),
            min,
            max,
            negate,
        }
    }

    /// Units given are held against units stored; plain numbers always
    /// pass; other keys do not matter.
    #[test]
    fn numeric_units_must_match_the_stored_ones() {
        let stored = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, u)| ((*k).into(), (*u).into()))
                .collect()
        };
        let ok = |sel: &str, st: &[(&str, &str)]| {
            check_numeric_units(&Selector::parse(sel).unwrap(), &stored(st))
        };
        let heap = [("bytes", "bytes")];
        assert!(ok("{bytes>=1kB, bytes<4KiB}", &heap).is_ok());
        assert!(ok("{bytes>=1024}", &heap).is_ok());
        assert!(ok("{bytes>=1ms}", &heap).is_err());
        assert!(ok("{n>=1kB}", &heap).is_ok(), "a key nothing stores");
        let mixed = [
            ("bytes", "bytes"),
            ("lat", "nanoseconds"),
            ("req", "requests"),
        ];
        assert!(ok("{lat<=2ms}", &mixed).is_ok());
        assert!(ok("{lat=1s:2s, bytes>1kB}", &mixed).is_ok());
        assert!(ok("{req>=2}", &mixed).is_ok());
        let e = ok("{req>=2kB}", &mixed).unwrap_err().to_string();
        assert!(
            e.contains("`req` is stored in \"requests\", not in bytes"),
            "{e}"
        );
        let e = ok("{lat>2ms}", &[("lat", "milliseconds")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("stored in milliseconds, not nanoseconds"), "{e}");
        assert!(ok("{lat>2}", &[("lat", "milliseconds")]).is_ok());
        assert!(ok("{b>1kB}", &[("b", "kilobytes")]).is_err());
        assert!(ok("{b>1kB}", &[("b", "count")]).is_err());
        assert_eq!(
            Selector::parse("{a>=1kB, b<=3, c=1ms:2s}")
                .unwrap()
                .numeric_units,
            [("a".to_string(), "bytes"), ("c".to_string(), "nanoseconds")]
        );
    }

    #[test]
    fn numeric_selectors_parse_with_units() {
        let one = |s: &str| {
            let sel = Selector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert!(sel.matchers.is_empty(), "{s}");
            assert_eq!(sel.numeric.len(), 1, "{s}");
            sel.numeric[0].clone()
        };
        let k = 1024;
        for (s, want) in [
            ("{bytes>=1024}", num("bytes", Some(1024), None, false)),
            ("{bytes<4KiB}", num("bytes", None, Some(4 * k - 1), false)),
            ("{bytes <= 4kb}", num("bytes", None, Some(4 * k), false)),
            ("{bytes>1kB}", num("bytes", Some(k + 1), None, false)),
            ("{bytes=1kB:4kB}", num("bytes", Some(k), Some(4 * k), false)),
            (
                "{bytes = 1KiB : 4KiB}",
                num("bytes", Some(k), Some(4 * k), false),
            ),
            ("{bytes=1kB:}", num("bytes", Some(k), None, false)),
            ("{bytes=:4kB}", num("bytes", None, Some(4 * k), false)),
            ("{bytes!=1kB:4kB}", num("bytes", Some(k), Some(4 * k), true)),
            ("{bytes=256}", num("bytes", Some(256), Some(256), false)),
            ("{bytes!=256B}", num("bytes", Some(256), Some(256), true)),
            ("{bytes>=1.5MiB}", num("bytes", Some(3 << 19), None, false)),
            ("{bytes<=2GB}", num("bytes", None, Some(2 << 30), false)),
            ("{wait>=1.5ms}", num("wait", Some(1_500_000), None, false)),
            ("{wait<2s}", num("wait", None, Some(1_999_999_999), false)),
            ("{wait>=3us}", num("wait", Some(3_000), None, false)),
            ("{wait>=3µs}", num("wait", Some(3_000), None, false)),
            (
                "{wait<=1h}",
                num("wait", None, Some(3_600_000_000_000), false),
            ),
            (
                "{wait<=2min}",
                num("wait", None, Some(120_000_000_000), false),
            ),
            ("{delta>=-5}", num("delta", Some(-5), None, false)),
            ("{delta=-5:+5}", num("delta", Some(-5), Some(5), false)),
            ("bytes>=1", num("bytes", Some(1), None, false)),
        ] {
            assert_eq!(one(s), want, "{s}");
        }
        // Mixed with string matchers; `=` with a quoted value stays a string.
        let s = Selector::parse(r#"{service="heap", bytes>=1kB, bytes="12", x!="1"}"#).unwrap();
        assert_eq!(s.matchers.len(), 3);
        assert_eq!(s.numeric, vec![num("bytes", Some(1024), None, false)]);
        assert!(s.needs_raw());
        assert!(!Selector::parse(r#"{a="1"}"#).unwrap().needs_raw());
        assert!(Selector::parse(r#"{span_id="1"}"#).unwrap().needs_raw());
    }

    #[test]
    fn bad_numeric_selectors_are_refused_in_one_line() {
        for (bad, why) in [
            ("{bytes>}", "expected a number after `>`"),
            ("{bytes>=\"1\"}", "expected a number after `>=`"),
            ("{bytes=1XB}", "unknown unit \"xb\""),
            ("{bytes=4kB:1kB}", "empty range (4096 > 1024)"),
            ("{bytes=:}", "a range needs a bound"),
            ("{bytes>1.5}", "not a whole number"),
            ("{bytes>=0.1B}", "not a whole number"),
            ("{bytes>=9999999PB}", "too large"),
            ("{bytes>9223372036854775807}", "no Int64 value"),
            ("{bytes=1kB:4kB:8kB}", "expected `,` or `}`"),
            ("{bytes=~1}", "expected a double-quoted value"),
            ("{bytes=1 kB}", "expected `,` or `}`"),
            ("{span_id>3}", "span_id is compared as a string"),
            ("{span_id=3}", "span_id is compared as a string"),
            ("{bytes<=1kB; DROP TABLE x}", "expected `,` or `}`"),
            ("{bytes<=1kBx}", "unknown unit \"kbx\""),
        ] {
            let e = Selector::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("selector "), "{bad}: {e}");
            assert!(e.contains(why), "{bad}: {e}");
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
        assert!(Selector::all().with_span_id("").is_err());
    }

    #[test]
    fn sample_conditions_render_span_and_numeric_matchers() {
        let s = Selector::parse(
            r#"{span_id="00F067AA0BA902B7", span_id!="", bytes=1kB:4kB, n!=5, m<0}"#,
        )
        .unwrap();
        assert_eq!(
            s.sample_condition(),
            "span_id = 67667974448284343 AND span_id != 0 AND \
             (mapContains(num_labels, 'bytes') AND num_labels['bytes'] >= 1024 AND num_labels['bytes'] <= 4096) AND \
             NOT (mapContains(num_labels, 'n') AND num_labels['n'] >= 5 AND num_labels['n'] <= 5) AND \
             (mapContains(num_labels, 'm') AND num_labels['m'] <= -1)"
        );
        // Span matchers are no series conditions.
        assert_eq!(s.series_condition(), "1");
        let r = Selector::parse(r#"{span_id=~"00f0.*"}"#).unwrap();
        assert_eq!(
            r.sample_condition(),
            "match(if(span_id = 0, '', leftPad(lower(hex(span_id)), 16, '0')), '^(?:00f0.*)$')"
        );
        // A long range with a sample matcher reads the raw samples.
        let o = QueryOptions::default();
        let sel = Selection {
            profile_type: "cpu:nanoseconds".into(),
            from_ms: 0,
            to_ms: 86_400_000,
            selector: Selector::all().with_span_id("00f067aa0ba902b7").unwrap(),
        };
        assert_eq!(sel.source(&o), Source::Raw);
        assert!(flame_sql(&o, &sel, 0).contains("FROM flamehouse.cp_samples WHERE"));
        let plain = Selection {
            selector: Selector::all(),
            ..sel.clone()
        };
        assert_eq!(plain.source(&o), Source::Rollup);
        // Neither rollup (they have no span ids) for the span's side.
        let f = flame_sql(&o, &sel, 0);
        assert!(
            !f.contains("cp_samples_1m") && !f.contains("cp_samples_1h"),
            "{f}"
        );
        let d = diff_sql(&o, &plain, &sel, 0, false).unwrap();
        assert!(d.contains("FROM flamehouse.cp_samples WHERE"), "{d}");
    }

    #[test]
    fn sources_switch_at_the_threshold() {
        let o = QueryOptions::default();
        let sel = |secs: i64| Selection {
            profile_type: "cpu:nanoseconds".into(),
            from_ms: 0,
            to_ms: secs * 1000,
            selector: Selector::all(),
        };
        assert_eq!(sel(DEFAULT_ROLLUP_AFTER_SECONDS).source(&o), Source::Raw);
        assert_eq!(
            sel(DEFAULT_ROLLUP_AFTER_SECONDS + 1).source(&o),
            Source::Rollup
        );
    }

    #[test]
    fn long_ranges_are_exact_whatever_the_selector() {
        // A long range reads the samples for its partial minutes and the
        // rollup for whole ones; read from the samples alone (a numeric
        // matcher) it covers the same exact range, so complementary
        // selectors add up to the whole.
        let o = QueryOptions::default();
        let from_ms = 30_000;
        let to_ms = 7 * HOUR_MS + 20_000;
        let sel = |s: &str| Selection {
            profile_type: "alloc_space:bytes".into(),
            from_ms,
            to_ms,
            selector: Selector::parse(s).unwrap(),
        };
        let all = sel("{}").sql(&o);
        let big = sel("{bytes>=1024}").sql(&o);
        assert_eq!(sel("{}").source(&o), Source::Rollup);
        assert_eq!(sel("{bytes>=1024}").source(&o), Source::Raw);
        let r = |col: &str, ranges: &[(i64, i64)]| ranges_sql(col, ranges);
        assert_eq!(
            all.fine_parts,
            [
                Part {
                    source: Source::Raw,
                    range: r("ts", &[(from_ms, MINUTE_MS), (7 * HOUR_MS, to_ms)])
                },
                Part {
                    source: Source::Rollup,
                    range: r("minute", &[(MINUTE_MS, 7 * HOUR_MS)])
                },
            ]
        );
        assert_eq!(big.fine_parts.len(), 1);
        assert!(big.fine_parts[0]
            .range
            .starts_with(&format!("({} AND ", r("ts", &[(from_ms, to_ms)]))));
        assert_eq!(all.profiles, big.profiles);
        // Short ranges stay exact.
        let short = Selection {
            to_ms: HOUR_MS + 20_000,
            ..sel("{bytes>=1024}")
        }
        .sql(&o);
        assert!(short.fine_parts[0].range.starts_with(&format!(
            "({} AND ",
            r("ts", &[(from_ms, HOUR_MS + 20_000)])
        )));
    }

    #[test]
    fn the_last_migration_of_the_profile_count_view_keeps_the_gauge_pattern() {
        let last = crate::storage::schema::MIGRATIONS
            .iter()
            .rev()
            .find(|(_, _, sql)| {
                sql.contains("CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.cp_series_profiles_mv")
            })
            .unwrap()
            .2;
        let lit = sql_string(GAUGE_TYPE_PATTERN);
        assert_eq!(
            last.matches(&format!("match(profile_type, {lit})")).count(),
            1
        );
        for (t, g) in [
            ("inuse_space:bytes", true),
            ("inuse_objects:count", true),
            ("goroutine:count", true),
            ("alloc_space:bytes", false),
            ("cpu:nanoseconds", false),
            ("samples:count", false),
            ("contentions:count", false),
            ("delay:nanoseconds", false),
            ("x_inuse_space:bytes", false),
            ("heap-space:bytes", true),
            ("heap-live-samples:count", true),
            ("heap-live-size:bytes", true),
            ("alloc-space:bytes", false),
            ("cpu-time:nanoseconds", false),
        ] {
            assert_eq!(is_gauge_type(t), g, "{t}");
        }
    }

    #[test]
    fn service_selectors_read_no_series_table() {
        // A selector on `service` alone (or none) is answered from the
        // samples' `service` column: no `cp_series` sub-query (the answers
        // are checked against `go tool pprof` by the e2e tests, e.g.
        // `top_functions_equal_go_tool_pprof_top_for_every_sample_type`,
        // which selects by service only).
        let o = QueryOptions::default();
        let sel = |s: &str| Selection {
            profile_type: "cpu:nanoseconds".into(),
            from_ms: 1_000 * HOUR_MS,
            to_ms: 1_001 * HOUR_MS + 5,
            selector: Selector::parse(s).unwrap(),
        };
        for s in [
            r#"{}"#,
            r#"{service="api"}"#,
            r#"{service=~"a.*", service!="b"}"#,
        ] {
            let f = flame_sql(&o, &sel(s), 0);
            assert!(!f.contains("cp_series"), "{s}: {f}");
            assert!(
                !top_functions_sql(&o, &sel(s), None, 0)
                    .unwrap()
                    .contains("cp_series"),
                "{s}"
            );
            assert!(!diff_sql(&o, &sel(s), &sel(r#"{service="web"}"#), 0, false)
                .unwrap()
                .contains("cp_series"));
        }
        // The service matchers still filter the rows, by the sort key.
        assert!(flame_sql(&o, &sel(r#"{service="api"}"#), 0).contains("service = 'api'"));
        // Any other label needs the series.
        for s in [r#"{service="api", version="1"}"#, r#"{host!="a"}"#] {
            assert!(flame_sql(&o, &sel(s), 0).contains("cp_series"), "{s}");
        }
        // Grafana's selections are conditions the engine evaluates: always
        // through the series.
        let d = SelectionSql::dynamic(&o, "'cpu:nanoseconds'", "t1", "t2", "1", "1");
        assert!(flame_sql_of(&o.database, &d, "'0'").contains("cp_series"));
    }

    #[test]
    fn a_range_forced_onto_the_rollup_without_a_whole_minute_is_one_raw_range() {
        // A diff puts both sides on the rollup when one is long; a side
        // inside one minute is all edge: one raw range (it was the same
        // range twice, OR-ed, in one part).
        let o = QueryOptions {
            rollup_after_seconds: -1,
            ..QueryOptions::default()
        };
        let h = 1_000 * HOUR_MS;
        for (from, to) in [(h + 10_500, h + 10_700), (h + 10_500, h + MINUTE_MS)] {
            let s = Selection {
                profile_type: "cpu:nanoseconds".into(),
                from_ms: from,
                to_ms: to,
                selector: Selector::all(),
            }
            .sql(&o);
            assert_eq!(
                s.parts,
                [Part {
                    source: Source::Raw,
                    range: ranges_sql("ts", &[(from, to)]),
                }]
            );
        }
    }

    #[test]
    fn whole_hours_read_the_hourly_rollup() {
        let o = QueryOptions::default();
        let h = 1_000 * HOUR_MS;
        let plan = |from: i64, to: i64| {
            Selection {
                profile_type: "cpu:nanoseconds".into(),
                from_ms: from,
                to_ms: to,
                selector: Selector::all(),
            }
            .sql(&o)
            .parts
            .into_iter()
            .map(|p| (p.source, p.range))
            .collect::<Vec<_>>()
        };
        let r = |col: &str, rs: &[(i64, i64)]| ranges_sql(col, rs);
        // Within an hour: the samples only.
        assert_eq!(
            plan(h + 5, h + 10),
            vec![(Source::Raw, r("ts", &[(h + 5, h + 10)]))]
        );
        assert_eq!(
            plan(h + 5, h + HOUR_MS),
            vec![(Source::Raw, r("ts", &[(h + 5, h + HOUR_MS)]))]
        );
        // One whole hour: the hourly rollup alone.
        assert_eq!(
            plan(h, h + HOUR_MS),
            vec![(Source::Hourly, r("hour", &[(h, h + HOUR_MS)]))]
        );
        // Edges and hours.
        assert_eq!(
            plan(h - 5, h + 2 * HOUR_MS + 7),
            vec![
                (
                    Source::Raw,
                    r("ts", &[(h - 5, h), (h + 2 * HOUR_MS, h + 2 * HOUR_MS + 7)])
                ),
                (Source::Hourly, r("hour", &[(h, h + 2 * HOUR_MS)])),
            ]
        );
        // Long: the partial minutes raw, whole minutes on the minute
        // rollup, whole hours on the hourly one: exactly the range.
        let day = 24 * HOUR_MS;
        assert_eq!(
            plan(h - 90_000, h + day + 1),
            vec![
                (
                    Source::Raw,
                    r("ts", &[(h - 90_000, h - 60_000), (h + day, h + day + 1)])
                ),
                (Source::Rollup, r("minute", &[(h - 60_000, h)])),
                (Source::Hourly, r("hour", &[(h, h + day)])),
            ]
        );
        // Long on whole minutes: no raw read.
        assert_eq!(
            plan(h - 60_000, h + day),
            vec![
                (Source::Rollup, r("minute", &[(h - 60_000, h)])),
                (Source::Hourly, r("hour", &[(h, h + day)])),
            ]
        );
    }
}
