//! The continuous-profiling dashboard (`dashboards/continuous.json`),
//! provisioned beside the memory one: pickers for the profile type, the
//! services and one label (key, then values, cardinality shown), and the
//! panels flame graph, top functions, series by label, diff of two
//! selections and sandwich (callers and callees of a chosen function).
//!
//! The panels send SQL of the same shape as `continuous_query`'s builders
//! (one scan for a diff, stacks joined once, recursion counted once in
//! totals), written here with Grafana variables in place of literals: the
//! builders take Rust values, and Grafana can only substitute text. The
//! schema's views (`cp_flame`, `cp_top_functions`) take an equality map
//! only, which a multi-value picker cannot fill.
//!
//! # Safety of variables
//! As in the memory dashboard, every variable reaches SQL as
//! `decodeURLComponent('${var:percentencode}')`. Service, label value and
//! function pickers carry `x` + the hex of the name as their value (so `''`,
//! a series without the label, is `x`, and a multi-value selection joined as
//! `{xA,xB}` splits on `,` unambiguously); keys are label names
//! (`[A-Za-z_][A-Za-z0-9_.]*`), used only as a map key.
//!
//! # Selection
//! A series is selected when its service is among `$service` and its value
//! of `$label` among `$value` (a series without the label has the value
//! `""`, offered as "(no label)"). Grafana's "All" sends every listed value,
//! the missing-label entry included, so "All" selects every series of the
//! picked services. An empty selection selects everything, as Grafana's
//! own "All". The range is the dashboard's, `[$__fromTime_ms,
//! $__toTime_ms)`; ranges longer than
//! [`crate::continuous_query::DEFAULT_ROLLUP_AFTER_SECONDS`] read the
//! per-minute rollup, as the builders and views do.
//!
//! # Diff
//! Baseline: `$label` in `$baseline` over the range shifted back by
//! `$offset`; comparison: the main selection over the range (release A vs B
//! with no offset; this hour vs yesterday with "All" on both sides and a
//! one-day offset). Absolute or normalized (`$diff_mode`).
//!
//! Units: a panel's unit cannot follow a variable, so values show as plain
//! numbers (`short`) in the type's own unit (`cpu:nanoseconds`: ns).

use super::{ds, var, Layout};
use crate::continuous_query::DEFAULT_ROLLUP_AFTER_SECONDS;
use crate::storage::ident::Ident;
use serde_json::{json, Value};

/// The continuous dashboard's uid.
pub const CONTINUOUS_UID: &str = "flamehouse-continuous";

/// Rows of the top-functions table (and choices of the function picker).
pub const TOP_LIMIT: u32 = 500;

fn ty() -> String {
    var("type")
}

fn key() -> String {
    var("label")
}

/// A hex picker's selection (`x` + hex per value) as `Array(String)`.
fn list(name: &str) -> String {
    let joined = format!("trimBoth(replaceRegexpAll({}, '[{{}}]', ''))", var(name));
    format!(
        "if({joined} = '', CAST([], 'Array(String)'), \
         arrayMap(h -> unhex(substring(h, 2)), splitByChar(',', {joined})))"
    )
}

/// The chosen function's name; valid UTF-8 whatever the value (the tree's
/// `root` option must be, and every stored name is).
fn function() -> String {
    format!("toValidUTF8(unhex(substring({}, 2)))", var("function"))
}

fn max_nodes() -> String {
    format!("toUInt32OrZero({})", var("max_nodes"))
}

/// The range's ends, `DateTime64(3, 'UTC')`.
fn from() -> String {
    "toDateTime64($__fromTime_ms, 3, 'UTC')".into()
}
fn to() -> String {
    "toDateTime64($__toTime_ms, 3, 'UTC')".into()
}

fn service_ok(col: &str) -> String {
    let s = list("service");
    format!("(empty({s}) OR has({s}, {col}))")
}

/// Time range bounds, and the picker of label values, of one selection.
struct Side {
    from: String,
    to: String,
    values: String,
}

fn main_side() -> Side {
    Side {
        from: from(),
        to: to(),
        values: list("value"),
    }
}

fn baseline_side() -> Side {
    let off = format!("toIntervalSecond(toInt64OrZero({}))", var("offset"));
    Side {
        from: format!("({} - {off})", from()),
        to: format!("({} - {off})", to()),
        values: list("baseline"),
    }
}

/// Whether the range is read from the rollup.
fn rollup(s: &Side) -> String {
    format!(
        "dateDiff('second', {}, {}) > {DEFAULT_ROLLUP_AFTER_SECONDS}",
        s.from, s.to
    )
}

/// The side's series (labels once per series and day).
fn series_in(db: &Ident, s: &Side) -> String {
    let v = &s.values;
    format!(
        "series_id IN (SELECT series_id FROM {db}.cp_series WHERE profile_type = {ty} \
         AND date >= toDate({f}) AND date <= toDate({t}) AND {svc} \
         AND (empty({v}) OR has({v}, labels[{k}])))",
        ty = ty(),
        f = s.from,
        t = s.to,
        svc = service_ok("service"),
        k = key(),
    )
}

/// The side's rows of the raw samples (`raw`) or of the rollup.
fn cond(db: &Ident, s: &Side, raw: bool) -> String {
    let range = if raw {
        format!("ts >= {} AND ts < {}", s.from, s.to)
    } else {
        format!(
            "minute >= toStartOfMinute({}) AND minute < {}",
            s.from, s.to
        )
    };
    format!("({range} AND {})", series_in(db, s))
}

/// `SELECT {cols} FROM` both sources, each with `where(raw)` added.
fn both(db: &Ident, s: &Side, cols: impl Fn(bool) -> String, extra: &str) -> String {
    let svc = service_ok("service");
    let part = |raw: bool| {
        format!(
            "SELECT {} FROM {db}.{} WHERE profile_type = {} AND {svc} AND {}{} AND {}{extra}",
            cols(raw),
            if raw { "cp_samples" } else { "cp_samples_1m" },
            ty(),
            if raw { "NOT " } else { "" },
            rollup(s),
            cond(db, s, raw),
        )
    };
    format!("{} UNION ALL {}", part(true), part(false))
}

/// `(stack_id, v)` of the main selection, zero sums dropped.
fn per_stack(db: &Ident) -> String {
    format!(
        "SELECT stack_id, sum(value) AS v FROM ({}) GROUP BY stack_id HAVING v != 0",
        both(db, &main_side(), |_| "stack_id, value".into(), "")
    )
}

fn flame_rows(tree: &str, from: &str, diff: bool) -> String {
    let right = if diff {
        ", n.valueRight AS valueRight, n.selfRight AS selfRight"
    } else {
        ""
    };
    format!(
        "SELECT n.level AS level, n.label AS label, n.value AS value, n.self AS self{right} \
         FROM (SELECT {tree} AS tree FROM {from}) \
         ARRAY JOIN tree AS n, arrayEnumerate(tree) AS i ORDER BY i"
    )
}

/// The flame graph of the main selection.
pub fn flame_sql(db: &Ident) -> String {
    flame_rows(
        &format!(
            "stackTreeWith(groupArray((st.labels, x.v)), map('max_nodes', toString({})))",
            max_nodes()
        ),
        &format!(
            "({}) AS x ANY LEFT JOIN {db}.stacks AS st ON st.stack_id = x.stack_id",
            per_stack(db)
        ),
        false,
    )
}

/// Baseline vs comparison, both summed in one scan of each source.
pub fn diff_sql(db: &Ident) -> String {
    let (a, b) = (baseline_side(), main_side());
    // One source for both: the rollup when the (equal-length) range is long.
    let svc = service_ok("service");
    let part = |raw: bool| {
        format!(
            "SELECT stack_id, value, {ca} AS in_a, {cb} AS in_b FROM {db}.{t} \
             WHERE profile_type = {ty} AND {svc} AND {not}{long} AND (in_a OR in_b)",
            ca = cond(db, &a, raw),
            cb = cond(db, &b, raw),
            t = if raw { "cp_samples" } else { "cp_samples_1m" },
            ty = ty(),
            not = if raw { "NOT " } else { "" },
            long = rollup(&b),
        )
    };
    let inner = format!(
        "SELECT stack_id, sumIf(value, in_a) AS va, sumIf(value, in_b) AS vb \
         FROM ({} UNION ALL {}) GROUP BY stack_id HAVING va != 0 OR vb != 0",
        part(true),
        part(false)
    );
    flame_rows(
        &format!(
            "stackDiffWith(groupArray((st.labels, x.va)), groupArray((st.labels, x.vb)), \
             map('max_nodes', toString({}), 'normalize', if({} = '1', '1', '0')))",
            max_nodes(),
            var("diff_mode")
        ),
        &format!("({inner}) AS x ANY LEFT JOIN {db}.stacks AS st ON st.stack_id = x.stack_id"),
        true,
    )
}

/// Top functions of the main selection: `(function, self, total,
/// self_share, total_share)`, shares of the selection's total; total counts
/// every stack through a function once (recursion once).
pub fn top_sql(db: &Ident) -> String {
    format!(
        "SELECT sf.function AS function, sumIf(x.v, sf.is_leaf = 1) AS self, sum(x.v) AS total, \
                self / any(x.grand) AS self_share, total / any(x.grand) AS total_share \
         FROM (SELECT stack_id, v, sum(v) OVER () AS grand FROM ({ps})) AS x \
         INNER JOIN (SELECT function, stack_id, max(is_leaf) AS is_leaf \
                     FROM {db}.stack_functions GROUP BY function, stack_id) AS sf \
         ON sf.stack_id = x.stack_id \
         GROUP BY function ORDER BY total DESC, function LIMIT {TOP_LIMIT}",
        ps = per_stack(db),
    )
}

/// One half of the sandwich of `$function` (as `sandwich_sql`: callers
/// upwards from its outermost call, callees below its innermost).
pub fn sandwich_sql(db: &Ident, callers: bool) -> String {
    let f = function();
    let path = if callers {
        format!("arrayReverse(arraySlice(st.labels, 1, indexOf(st.labels, {f}) - 1))")
    } else {
        format!(
            "arraySlice(st.labels, length(st.labels) - indexOf(arrayReverse(st.labels), {f}) + 2)"
        )
    };
    flame_rows(
        &format!(
            "stackTreeWith(groupArray(({path}, x.v)), map('max_nodes', toString({}), 'root', {f}))",
            max_nodes()
        ),
        &format!(
            "({}) AS x ANY LEFT JOIN {db}.stacks AS st ON st.stack_id = x.stack_id \
             WHERE x.stack_id IN (SELECT stack_id FROM {db}.stack_functions WHERE function = {f})",
            per_stack(db)
        ),
        false,
    )
}

/// The main selection summed per step and value of `$group_by`: `(time,
/// series, value)`, `series` = `key=value`. Steps on the rollup are at
/// least a minute.
pub fn by_label_sql(db: &Ident) -> String {
    let s = main_side();
    let step = format!(
        "if({}, greatest($__interval_s, 60), greatest($__interval_s, 1))",
        rollup(&s)
    );
    let gk = var("group_by");
    let time = |raw: bool| {
        format!(
            "toDateTime(toStartOfInterval({}, toIntervalSecond({step})), 'UTC') AS time, series_id, value",
            if raw { "ts" } else { "minute" }
        )
    };
    format!(
        "SELECT x.time AS time, concat({gk}, '=', s.lv) AS series, sum(x.v) AS value \
         FROM (SELECT time, series_id, sum(value) AS v FROM ({}) GROUP BY time, series_id) AS x \
         INNER JOIN (SELECT series_id, any(labels[{gk}]) AS lv FROM {db}.cp_series \
                     WHERE profile_type = {ty} GROUP BY series_id) AS s \
         ON s.series_id = x.series_id \
         GROUP BY time, series ORDER BY time, series",
        both(db, &s, time, ""),
        ty = ty(),
    )
}

fn date_range() -> String {
    format!("date >= toDate({}) AND date <= toDate({})", from(), to())
}

/// Values of `$label` with their series count, the missing label last.
fn values_query(db: &Ident) -> String {
    let k = key();
    format!(
        "SELECT __text, __value FROM (\
           SELECT concat(value, ' (', toString(uniqExact(series_id)), ' series)') AS __text, \
                  concat('x', hex(value)) AS __value, 0 AS o, value AS v \
           FROM {db}.cp_label_values WHERE profile_type = {ty} AND {dr} AND {svc} AND key = {k} GROUP BY value \
           UNION ALL \
           SELECT concat('(no ', {k}, ' label, ', toString(uniqExact(series_id)), ' series)'), 'x', 1, '' \
           FROM {db}.cp_series WHERE profile_type = {ty} AND {dr} AND {svc} AND NOT mapContains(labels, {k}) \
           HAVING count() > 0) ORDER BY o, v",
        ty = ty(),
        dr = date_range(),
        svc = service_ok("service"),
    )
}

fn custom(name: &str, label: &str, opts: &[(&str, &str)]) -> Value {
    let query: Vec<String> = opts.iter().map(|(t, v)| format!("{t} : {v}")).collect();
    json!({
        "name": name, "label": label, "type": "custom", "query": query.join(","),
        "current": {"text": opts[0].0, "value": opts[0].1},
        "options": opts.iter().enumerate().map(|(i, (t, v))| json!({"text": t, "value": v, "selected": i == 0})).collect::<Vec<_>>(),
    })
}

fn picker(name: &str, label: &str, query: String, multi: bool) -> Value {
    json!({
        "name": name, "label": label, "type": "query", "datasource": ds(),
        "query": query, "definition": label,
        // On time range change: pickers list what the range holds.
        "refresh": 2, "sort": 0, "multi": multi, "includeAll": multi,
        "current": if multi { json!({"text": ["All"], "value": ["$__all"]}) } else { json!({}) },
    })
}

/// The continuous-profiling dashboard, querying the schema in database `db`.
pub fn continuous_dashboard(db: &Ident) -> Value {
    let mut l = Layout { next_id: 0 };
    let mut panels = Vec::new();
    panels.push(l.panel(
        "flamegraph",
        "Flame graph (${type})",
        "Every stack of the selection (type, services, label values) over the dashboard's range.",
        [0, 0, 24, 12],
        flame_sql(db),
        1,
    ));
    panels.push({
        let mut p = l.panel(
            "table",
            "Top functions (${type})",
            "self: the function as the leaf frame; total: every stack through it, counted once (recursion once). \
             Shares are of the whole selection.",
            [0, 12, 12, 12],
            top_sql(db),
            1,
        );
        p["fieldConfig"] = json!({"defaults": {"unit": "short"}, "overrides": [
            {"matcher": {"id": "byName", "options": "self_share"}, "properties": [
                {"id": "unit", "value": "percentunit"}, {"id": "displayName", "value": "self %"}]},
            {"matcher": {"id": "byName", "options": "total_share"}, "properties": [
                {"id": "unit", "value": "percentunit"}, {"id": "displayName", "value": "total %"}]}
        ]});
        p
    });
    panels.push({
        let mut p = l.panel(
            "timeseries",
            "By ${group_by} (sum per step)",
            "The selection summed per step, one series per value of the group-by label.",
            [12, 12, 12, 12],
            by_label_sql(db),
            0,
        );
        p["fieldConfig"] = json!({"defaults": {"unit": "short"}, "overrides": []});
        p["transformations"] = json!([{"id": "prepareTimeSeries", "options": {"format": "multi"}}]);
        p
    });
    panels.push(l.panel(
        "flamegraph",
        "Diff: baseline ${label} in ${baseline:text} (${offset:text} earlier) vs the selection",
        "Baseline: the label's baseline values over the range shifted back by the offset; comparison: \
         the selection over the range. Red grew, green shrank.",
        [0, 24, 24, 12],
        diff_sql(db),
        1,
    ));
    for (i, callers) in [true, false].into_iter().enumerate() {
        panels.push(l.panel(
            "flamegraph",
            if callers {
                "Callers of ${function:text}"
            } else {
                "Callees of ${function:text}"
            },
            "The sandwich of the chosen function: the root is the function (its total); recursion folded into it.",
            [12 * i as u32, 36, 12, 12],
            sandwich_sql(db, callers),
            1,
        ));
    }
    let svc = service_ok("service");
    let dr = date_range();
    json!({
        "uid": CONTINUOUS_UID,
        "title": "flamehouse: continuous profiling",
        "tags": ["flamehouse", "continuous", "profiling"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "editable": true,
        "time": {"from": "now-1h", "to": "now"},
        "links": [],
        "templating": {"list": [
            {
                "name": "type", "label": "Profile type", "type": "query", "datasource": ds(),
                "query": format!("SELECT DISTINCT profile_type FROM {db}.cp_series ORDER BY profile_type != 'cpu:nanoseconds', profile_type"),
                "definition": "profile types", "refresh": 1, "sort": 0, "multi": false, "includeAll": false
            },
            picker("service", "Service", format!(
                "SELECT concat(service, ' (', toString(uniqExact(series_id)), ' series)') AS __text, concat('x', hex(service)) AS __value \
                 FROM {db}.cp_series WHERE profile_type = {ty} AND {dr} GROUP BY service ORDER BY service", ty = ty()), true),
            picker("label", "Label", format!(
                "SELECT concat(key, ' (', toString(uniqExact(value)), ' values, ', toString(uniqExact(series_id)), ' series)') AS __text, key AS __value \
                 FROM {db}.cp_label_values WHERE profile_type = {ty} AND {dr} AND {svc} AND key != 'service' GROUP BY key ORDER BY key", ty = ty()), false),
            picker("value", "Values", values_query(db), true),
            picker("baseline", "Diff baseline values", values_query(db), true),
            custom("offset", "Diff baseline offset", &[("none", "0"), ("1 hour", "3600"), ("1 day", "86400"), ("1 week", "604800")]),
            custom("diff_mode", "Diff", &[("absolute", "0"), ("normalized", "1")]),
            picker("group_by", "Group by", format!(
                "SELECT concat(key, ' (', toString(uniqExact(value)), ' values)') AS __text, key AS __value \
                 FROM {db}.cp_label_values WHERE profile_type = {ty} AND {dr} AND {svc} GROUP BY key ORDER BY key != 'service', key", ty = ty()), false),
            picker("function", "Function", format!(
                "SELECT function AS __text, concat('x', hex(function)) AS __value FROM ({})", top_sql(db)), false),
            custom("max_nodes", "Max nodes", &[("2000", "2000"), ("500", "500"), ("8192", "8192"), ("0", "0")]),
        ]},
        "panels": panels,
    })
}
