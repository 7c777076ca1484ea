//! The parameterized views of migration 9 (`sql/schema/009_continuous_views.sql`):
//! the continuous-profile flame graph and top functions for SQL users, their
//! bodies written by the same builders as the CLI and the Grafana dashboard
//! ([`crate::continuous_query`] over a [`SelectionSql::dynamic`] selection
//! whose type, range and selector are view parameters), so the three cannot
//! drift. This module owns that migration's text ([`views_sql`]); a test
//! keeps the committed file equal to it.
//!
//! # The views
//!
//! ClickHouse's parameterized views have no optional parameters, so
//! migration 6's `cp_flame` and `cp_top_functions` keep their parameters
//! and columns (callers keep working) and now answer as the builders do:
//! gauge types (`inuse_space`, `inuse_objects`, `goroutine`) averaged per
//! profile of each series, whole hours read from the hourly rollup. Their
//! selector stays an equality map (`map('handler', 'a')`, `map()` for all).
//!
//! The full selector language is in two new views, `cp_flame_matching`
//! and `cp_top_functions_matching`, which take the matchers as one
//! parameter `matchers Array(Tuple(String, String, String))`, each
//! `(key, op, value)`, all of which must hold (`[]`: every series):
//!
//! | op | on | as the selector |
//! | --- | --- | --- |
//! | `=`, `!=` | a series label (a missing one is `''`) | `{k="v"}`, `{k!="v"}` |
//! | `=~`, `!~` | a series label, the regex anchored at both ends | `{k=~"re"}`, `{k!~"re"}` |
//! | `=`, `!=`, `=~`, `!~` on the key `span_id` | the samples' span id | `{span_id="..."}` |
//! | `<`, `<=`, `>`, `>=` | a numeric label, an integer in its stored unit (bytes, ns) | `{bytes>=1024}` |
//! | `in`, `not in` | a numeric label in `lo:hi` (inclusive, either bound may be left out; one number: equal) | `{bytes=1024:4096}`, `{bytes!=1024:4096}` |
//!
//! A sample without the numeric label matches no `<`, `<=`, `>`, `>=`,
//! `in` and every `not in` (`-tagfocus` / `-tagignore`). Units (`4KiB`)
//! are the CLI's; the views take integers. A selection with a span or
//! numeric matcher reads the samples alone (the rollups keep neither), as
//! the CLI does. An unknown op, a non-integer bound or a numeric op on
//! `span_id` stops the query with one message (`throwIf`).

use crate::continuous_query::{
    self as cq, QueryOptions, SelectionSql, Source, DEFAULT_ROLLUP_AFTER_SECONDS, SPAN_ID_KEY,
};
use crate::storage::ident::Ident;
use crate::storage::sql_string;

/// The placeholder database the builders write, replaced by `{db}` (the
/// migration templates' placeholder).
const DB_MARK: &str = "__flamehouse_views_db__";

const TYPE_P: &str = "{profile_type:String}";
const T1_P: &str = "{t1:DateTime64(3, 'UTC')}";
const T2_P: &str = "{t2:DateTime64(3, 'UTC')}";
const MATCH_P: &str = "{match:Map(String, String)}";
const MATCHERS_P: &str = "{matchers:Array(Tuple(String, String, String))}";
const MAX_NODES_P: &str = "{max_nodes:UInt32}";
const LIMIT_P: &str = "{limit:UInt32}";

/// The ops of a matcher on numeric labels.
const NUM_OPS: &str = "('<', '<=', '>', '>=', 'in', 'not in')";

/// The message of a matcher the views cannot apply.
const BAD_MATCHER: &str = "cp_*_matching: every matcher is (key, op, value): op =, !=, =~, !~ on a label or span_id, or <, <=, >, >=, in, not in on a numeric label with integer bounds (in: 'lo:hi')";

/// `re` anchored at both ends, as the selector's regexes.
fn anchored(re: &str) -> String {
    format!("concat('^(?:', {re}, ')$')")
}

/// A span id as `cp_samples.span_id` stores it
/// ([`crate::ingest::continuous::span_id_value`]): 0 for `''`, 1 to 16 hex
/// digits as the number, anything else its stable hash (FNV-1a 64 of
/// `span`, 0xff, the bytes).
pub fn span_id_sql(v: &str) -> String {
    format!(
        "if({v} = '', toUInt64(0), if(match({v}, '^[0-9a-fA-F]{{1,16}}$'), \
         reinterpretAsUInt64(reverse(unhex(leftPad({v}, 16, '0')))), \
         arrayFold((h, b) -> bitXor(h, toUInt64(b)) * 1099511628211, \
           arrayConcat([115, 112, 97, 110, 255], arrayMap(i -> reinterpretAsUInt8(substring({v}, i, 1)), range(1, length({v}) + 1))), \
           toUInt64(14695981039346656037))))"
    )
}

/// A string matcher `m` (key `m.1`, op `m.2`, value `m.3`) on `col`.
fn string_match(col: &str) -> String {
    format!(
        "multiIf(m.2 = '=', {col} = m.3, m.2 = '!=', {col} != m.3, \
         m.2 = '=~', match({col}, {re}), m.2 = '!~', NOT match({col}, {re}), 1)",
        re = anchored("m.3")
    )
}

/// Whether matcher `m` is applied to the sample rows (span id, numeric).
fn on_samples() -> String {
    format!(
        "(m.1 = {span} OR m.2 IN {NUM_OPS})",
        span = sql_string(SPAN_ID_KEY)
    )
}

/// The checks of the matchers: 1, or the query stops with [`BAD_MATCHER`].
fn valid(matchers: &str) -> String {
    let bound = |b: &str| format!("({b} = '' OR isNotNull(toInt64OrNull({b})))");
    let lo = "splitByChar(':', m.3)[1]";
    let hi = "if(position(m.3, ':') > 0, splitByChar(':', m.3)[2], m.3)";
    format!(
        "arrayAll(m -> throwIf(NOT (m.2 IN ('=', '!=', '=~', '!~') \
           OR (m.1 != {span} AND m.2 IN ('<', '<=', '>', '>=') AND isNotNull(toInt64OrNull(m.3))) \
           OR (m.1 != {span} AND m.2 IN ('in', 'not in') AND length(splitByChar(':', m.3)) <= 2 \
               AND m.3 NOT IN ('', ':') AND {blo} AND {bhi})), {msg}) = 0, {matchers})",
        span = sql_string(SPAN_ID_KEY),
        blo = bound(lo),
        bhi = bound(hi),
        msg = sql_string(BAD_MATCHER),
    )
}

/// The condition on `cp_series` rows of the label matchers.
fn series_condition(matchers: &str) -> String {
    format!(
        "{valid} AND arrayAll(m -> {on} OR {cond}, {matchers})",
        valid = valid(matchers),
        on = on_samples(),
        cond = string_match("labels[m.1]"),
    )
}

/// The condition on the samples' `service` column implied by matchers on
/// `service` (the sort key's second part).
fn service_condition(matchers: &str) -> String {
    format!(
        "arrayAll(m -> m.1 != 'service' OR {cond}, {matchers})",
        cond = string_match("service")
    )
}

/// The condition on `cp_samples` rows of the span and numeric matchers.
fn sample_condition(matchers: &str) -> String {
    let hex = "if(span_id = 0, '', leftPad(lower(hex(span_id)), 16, '0'))";
    let x = "num_labels[m.1]";
    let has = "mapContains(num_labels, m.1)";
    let lo = "toInt64OrNull(splitByChar(':', m.3)[1])";
    let hi = "toInt64OrNull(if(position(m.3, ':') > 0, splitByChar(':', m.3)[2], m.3))";
    let range =
        format!("({has} AND ({lo} IS NULL OR {x} >= {lo}) AND ({hi} IS NULL OR {x} <= {hi}))");
    let n = "toInt64OrZero(m.3)";
    format!(
        "arrayAll(m -> multiIf(\
           m.1 = {span} AND m.2 = '=', span_id = {sid}, \
           m.1 = {span} AND m.2 = '!=', span_id != {sid}, \
           m.1 = {span}, {smatch}, \
           m.2 = '<', {has} AND {x} < {n}, m.2 = '<=', {has} AND {x} <= {n}, \
           m.2 = '>', {has} AND {x} > {n}, m.2 = '>=', {has} AND {x} >= {n}, \
           m.2 = 'in', {range}, m.2 = 'not in', NOT {range}, 1), {matchers})",
        span = sql_string(SPAN_ID_KEY),
        sid = span_id_sql("m.3"),
        smatch = string_match(hex),
    )
}

/// `sel` reading the samples alone, exactly `[t1, t2)`, where `raw_only`
/// holds (span and numeric matchers: the rollups keep neither), each
/// sample row filtered by `sample`; unchanged where it does not.
fn raw_only_if(
    mut sel: SelectionSql,
    raw_only: &str,
    sample: &str,
    t1: &str,
    t2: &str,
) -> SelectionSql {
    let exact = format!("ts >= {t1} AND ts < {t2}");
    let guard = |parts: &mut Vec<cq::Part>| {
        for p in parts.iter_mut() {
            p.range = if p.source == Source::Raw {
                format!(
                    "((({raw_only}) AND {exact}) OR (NOT ({raw_only}) AND {})) AND {sample}",
                    p.range
                )
            } else {
                format!("(NOT ({raw_only}) AND {})", p.range)
            };
        }
    };
    guard(&mut sel.parts);
    guard(&mut sel.fine_parts);
    sel.profiles = format!(
        "((({raw_only}) AND {exact}) OR (NOT ({raw_only}) AND {}))",
        sel.profiles
    );
    sel.profile_time = format!("if({raw_only}, ts, {})", sel.profile_time);
    sel.by_minute = format!("(NOT ({raw_only}) AND {})", sel.by_minute);
    sel
}

fn dynamic(db: &Ident, series: &str, service: &str) -> SelectionSql {
    SelectionSql::dynamic(
        &QueryOptions {
            database: db.clone(),
            rollup_after_seconds: DEFAULT_ROLLUP_AFTER_SECONDS,
        },
        TYPE_P,
        T1_P,
        T2_P,
        series,
        service,
    )
}

/// The selection of `cp_flame` / `cp_top_functions`: labels equal to
/// every pair of `match`.
fn map_selection(db: &Ident) -> SelectionSql {
    dynamic(
        db,
        &format!("arrayAll(k -> labels[k] = {MATCH_P}[k], mapKeys({MATCH_P}))"),
        &format!("(NOT mapContains({MATCH_P}, 'service') OR service = {MATCH_P}['service'])"),
    )
}

/// The selection of the `_matching` views.
fn matchers_selection(db: &Ident) -> SelectionSql {
    let raw_only = format!("arrayExists(m -> {}, {MATCHERS_P})", on_samples());
    raw_only_if(
        dynamic(
            db,
            &series_condition(MATCHERS_P),
            &service_condition(MATCHERS_P),
        ),
        &raw_only,
        &sample_condition(MATCHERS_P),
        T1_P,
        T2_P,
    )
}

/// `max_nodes` as the tree options take it; 1 (no tree: the root and
/// one `[other]` row are 2) stops the query with one line, as the CLI
/// refuses it, instead of the UDF's error inside the engine's.
fn max_nodes() -> String {
    format!(
        "toString({MAX_NODES_P} + throwIf({MAX_NODES_P} = 1, \
         'max_nodes: 0 (every node) or at least 2 (the root and one [other] row)'))"
    )
}

/// Top functions with `limit` (0: all), largest total first.
fn top(db: &Ident, sel: &SelectionSql, cols: &str) -> String {
    format!(
        "SELECT {cols} FROM ({}) ORDER BY total DESC, function \
         LIMIT if({LIMIT_P} = 0, 18446744073709551615, {LIMIT_P})",
        cq::top_functions_sql_of(db, sel, None, 0)
    )
}

/// The views, as `CREATE OR REPLACE VIEW` statements on `db`.
fn views(db: &Ident) -> Vec<(&'static str, &'static str, String)> {
    let by_map = map_selection(db);
    let by_matchers = matchers_selection(db);
    // Every series: the service condition alone (none) chooses them.
    let mut every = dynamic(db, "1", "1");
    every.by_service = true;
    vec![
        (
            "cp_flame",
            "Flame graph of a type over [t1, t2) for the series whose labels equal every pair of `match`: rows (i, level, label, value, self) in pre-order; max_nodes 0 = every node.",
            cq::flame_sql_of(db, &by_map, &max_nodes()),
        ),
        (
            "cp_top_functions",
            "Top functions of the same selection: (function, self, total); self: stacks whose leaf it is, total: every stack through it once (recursion once); limit 0 = all.",
            top(db, &by_map, "function, self, total"),
        ),
        (
            "cp_flame_matching",
            "cp_flame with the selector's matchers: `matchers` [(key, op, value), ...], every one must hold ([] = all).",
            cq::flame_sql_of(db, &by_matchers, &max_nodes()),
        ),
        (
            "cp_top_functions_matching",
            "cp_top_functions with the matchers: (function, self, total, self_share, total_share), shares of the selection's total.",
            top(
                db,
                &by_matchers,
                "function, self, total, self_share, total_share",
            ),
        ),
        (
            "cp_labels",
            "Label keys and values of a type over [t1, t2) with their cardinality: (key, value, series), the number of series with samples in the range having each (as `flamehouse profile labels`).",
            cq::label_values_of(db, &every, T1_P, T2_P),
        ),
    ]
}

/// `sql` with a line break (indented by its parenthesis depth) before each
/// clause keyword outside string literals, so the file can be read; the
/// text between is unchanged and no line is blank.
fn layout(sql: &str) -> String {
    const BREAKS: &[&str] = &[
        " FROM ",
        " WHERE ",
        " UNION ALL ",
        " GROUP BY ",
        " ORDER BY ",
        " HAVING ",
        " LIMIT ",
        " ANY LEFT JOIN ",
        " ANY INNER JOIN ",
        " LEFT JOIN ",
        " ARRAY JOIN ",
        " AND series_id IN ",
    ];
    let b = sql.as_bytes();
    let (mut out, mut depth, mut quoted, mut i) = (String::new(), 0usize, false, 0);
    while i < b.len() {
        let c = b[i];
        if quoted {
            if c == b'\\' && i + 1 < b.len() {
                out.push_str(&sql[i..i + 2]);
                i += 2;
                continue;
            }
            quoted = c != b'\'';
        } else if c == b'\'' {
            quoted = true;
        } else if c == b'(' {
            depth += 1;
        } else if c == b')' {
            depth = depth.saturating_sub(1);
        } else if c == b' ' {
            if let Some(k) = BREAKS.iter().find(|k| sql[i..].starts_with(*k)) {
                out.push('\n');
                out.push_str(&"  ".repeat(depth));
                out.push_str(&k[1..]);
                i += k.len();
                continue;
            }
        }
        let n = sql[i..].chars().next().map_or(1, char::len_utf8);
        out.push_str(&sql[i..i + n]);
        i += n;
    }
    out
}

/// Migration 9's text: a header and one `CREATE OR REPLACE VIEW` per view,
/// the database as the `{db}` placeholder.
#[must_use]
pub fn views_sql() -> String {
    let db = Ident::new(DB_MARK).expect("an identifier");
    let mut out = String::from(HEADER);
    for (name, doc, body) in views(&db) {
        let stmt = format!(
            "CREATE OR REPLACE VIEW {{db}}.{name} {{on_cluster}} AS\n{}",
            layout(&body.replace(&format!("{DB_MARK}."), "{db}."))
        );
        let mark = view_mark(&stmt);
        out.push_str(&format!("\n-- {name}: {doc}\n{stmt}\nCOMMENT '{mark}';\n"));
    }
    out
}

/// The comment a view of migration 9 carries: `flamehouse ` and a stable
/// hash of its statement (before the database is filled in). `migrate`
/// re-creates a view only when its stored comment differs, so a load does
/// not run four DDL statements (four `ON CLUSTER` tasks on a cluster) when
/// the views are already this binary's.
fn view_mark(template: &str) -> String {
    format!(
        "flamehouse {:016x}",
        crate::storage::rows::stable_hash(&[template.as_bytes()])
    )
}

/// The view name and the comment of one rendered statement of migration 9
/// (`CREATE OR REPLACE VIEW db.name ... COMMENT '...'`); `None` for any
/// other statement.
#[must_use]
pub fn view_name_and_mark(stmt: &str) -> Option<(&str, &str)> {
    let rest = stmt.strip_prefix("CREATE OR REPLACE VIEW ")?;
    let qualified = rest.split_whitespace().next()?;
    let name = qualified.rsplit('.').next()?;
    let (_, tail) = stmt.rsplit_once("\nCOMMENT '")?;
    let mark = tail.strip_suffix('\'')?;
    (!mark.contains('\'')).then_some((name, mark))
}

const HEADER: &str = "\
-- flamehouse schema, migration 9: the continuous-profile views, right for
-- every profile type. GENERATED by `flamehouse::continuous_views::views_sql`
-- from the builders of `continuous_query` (the CLI's and Grafana's queries),
-- so the three cannot drift; a test keeps this file equal to it (regenerate:
-- FLAMEHOUSE_WRITE_SQL=1 cargo test --release -p flamehouse --lib continuous_views).
-- Once this migration is applied, `migrate` (every `init`, `load` and
-- `delete`) re-creates a view whose COMMENT is not this file's (another
-- binary's builders, or a view a user replaced), and `init` re-creates all
-- five, so a database follows the builders of the binary that runs it.
--
-- Parameters: profile_type String (`cpu:nanoseconds`), t1, t2
-- DateTime64(3, 'UTC') (the range [t1, t2), exactly: give UTC text or a
-- UTC value such as now64(3, 'UTC'); the engine passes a parameter as
-- text, so now64(3) in a session of another time zone is shifted by its
-- offset). Gauge types (inuse_*, goroutine, heap-space, heap-live-*) are
-- averaged per profile of each series, then summed over the series; other
-- types summed. Whole hours read cp_samples_1h; a range over 6 hours reads
-- its other whole minutes from cp_samples_1m and only its partial minutes
-- from cp_samples, a shorter one its edges from cp_samples: the rollups
-- change the cost, never the answer. max_nodes 1 (no tree) is an error.
-- cp_labels (migration 6's parameters) counts the series with samples in
-- the range, as `flamehouse profile labels` does.
--
-- cp_flame and cp_top_functions keep migration 6's parameters and columns
-- (parameterized views have no optional parameters: new ones would break
-- their callers), the selector an equality map `match Map(String, String)`;
-- cp_top_functions' `limit` 0 is now every function. The full selector is
-- in cp_flame_matching and cp_top_functions_matching: `matchers
-- Array(Tuple(String, String, String))`, each (key, op, value):
--   =, !=, =~, !~   a series label (missing = ''), regexes anchored
--   same on span_id the samples' span id (as the CLI's `{span_id=...}`)
--   <, <=, >, >=    a numeric label (bytes), an integer in its stored unit
--   in, not in      a numeric label in 'lo:hi' (inclusive, a bound may be
--                   empty; one number: equal) = pprof -tagfocus / -tagignore
-- e.g. matchers = [('handler', '=~', 'a|b'), ('bytes', '>=', '1024')].
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migration_9_is_fresh() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../sql/schema/009_continuous_views.sql");
        let want = views_sql();
        if std::env::var_os("FLAMEHOUSE_WRITE_SQL").is_some() {
            std::fs::write(&path, &want).unwrap();
        }
        let got = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            got == want,
            "{} is stale: FLAMEHOUSE_WRITE_SQL=1 cargo test --release -p flamehouse --lib continuous_views",
            path.display()
        );
    }

    #[test]
    fn layout_changes_only_whitespace_outside_strings() {
        let db = Ident::new(DB_MARK).unwrap();
        for (name, _, body) in views(&db) {
            let laid = layout(&body);
            assert!(laid.lines().count() > 10, "{name}");
            let words = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
            assert_eq!(words(&laid), words(&body), "{name}");
        }
        assert_eq!(
            layout("SELECT ' FROM x' FROM (SELECT 1 FROM t)"),
            "SELECT ' FROM x'\nFROM (SELECT 1\n  FROM t)"
        );
    }

    #[test]
    fn every_statement_is_one_block() {
        // `migrate` splits on blank lines: one statement per view.
        let sql = views_sql();
        let stmts = flamehouse_udf::catalog::statements(&sql);
        assert_eq!(stmts.len(), 5, "{stmts:#?}");
        assert!(stmts
            .iter()
            .all(|s| s.starts_with("CREATE OR REPLACE VIEW {db}.cp_")));
        assert!(!sql.contains(DB_MARK));
    }

    #[test]
    fn every_view_carries_the_mark_of_its_statement() {
        let sql = views_sql();
        let stmts = flamehouse_udf::catalog::statements(&sql);
        let mut marks = std::collections::BTreeSet::new();
        for s in &stmts {
            let (name, mark) = view_name_and_mark(s).expect(s);
            assert!(s.contains(&format!("VIEW {{db}}.{name} ")), "{name}");
            let body = s.rsplit_once("\nCOMMENT '").unwrap().0;
            assert_eq!(mark, view_mark(body), "{name}");
            // Another body, another mark.
            assert_ne!(mark, view_mark(&body.replace("ORDER BY", "ORDER  BY")));
            marks.insert(mark.to_string());
        }
        assert_eq!(marks.len(), 5);
        assert_eq!(view_name_and_mark("CREATE TABLE x.t (a UInt8)"), None);
        assert_eq!(
            view_name_and_mark("CREATE OR REPLACE VIEW d.v AS SELECT 1\nCOMMENT 'it''s'"),
            None
        );
    }
}
