//! The continuous-profiling dashboard (`dashboards/continuous.json`),
//! provisioned beside the memory one: pickers for the profile type, the
//! services and one label (key, then values, cardinality shown), and the
//! panels flame graph, top functions, series by label, diff of two
//! selections and sandwich (callers and callees of a chosen function).
//!
//! Every panel's SQL comes from the builders of `continuous_query` (the
//! `*_sql_of` functions over a [`SelectionSql::dynamic`] selection): the
//! type, the range, the series condition and the options are Grafana
//! variables and macros instead of literals, and the engine takes the
//! choices the builders take from Rust values (the per-minute rollup for
//! long ranges, whole hours from the hourly rollup, averaging gauge types
//! per profile), so a query change reaches the CLI and the dashboard alike.
//! The schema's views (`cp_flame`, `cp_top_functions`) take an equality map
//! only, which a multi-value picker cannot fill.
//!
//! # Safety of variables
//! As in the memory dashboard, every variable reaches SQL as
//! `decodeURLComponent('${var:percentencode}')`. Service, label value and
//! function pickers carry `x` + the hex of the name as their value (so `''`,
//! a series without the label, is `x`, and a multi-value selection joined as
//! `{xA,xB}` splits on `,` unambiguously); keys are stored label names,
//! used only as a map key (a string literal, never an identifier).
//!
//! # Selection
//! A series is selected when its service is among `$service` and its value
//! of `$label` among `$value` (a series without the label has the value
//! `""`, offered as "(no label)"). "All" sends the pickers' `allValue`
//! ([`ALL_VALUE`]), which selects every series of the picked services
//! (every service for the service picker), whatever values the range's
//! pickers list: a baseline a day back keeps yesterday's versions. An
//! empty selection selects everything too. The range is the dashboard's, `[$__fromTime_ms,
//! $__toTime_ms)`; ranges longer than
//! [`crate::continuous_query::DEFAULT_ROLLUP_AFTER_SECONDS`] read the
//! per-minute rollup, whole hours the hourly one, as the builders do.
//! Gauge types (`inuse_space`) show the average per profile
//! ([`crate::continuous_query::is_gauge_type`]).
//!
//! # Diff
//! Baseline: `$label` in `$baseline` over the range shifted back by
//! `$offset`; comparison: the main selection over the range (release A vs B
//! with no offset; this hour vs yesterday with "All" on both sides and a
//! one-day offset). Absolute or normalized (`$diff_mode`).
//!
//! Units: a panel's unit cannot follow a variable, so values show as plain
//! numbers (`short`) in the type's own unit (`cpu:nanoseconds`: ns).

use super::{ds, max_nodes, var, Layout};
use crate::continuous_query::{
    self as cq, QueryOptions, SandwichSide, SelectionSql, DEFAULT_ROLLUP_AFTER_SECONDS,
};
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

/// What a multi-value picker sends for "All" (its `allValue`): no hex
/// value (those start with `x`), so it is never a selection of values.
/// Without it Grafana would send every value the picker lists, which are
/// the values of the dashboard's range: a baseline a day back would miss
/// yesterday's versions, and a few hundred values overflow the engine's
/// `max_query_size` (each variable appears many times in a query).
pub const ALL_VALUE: &str = "all";

/// A hex picker's selection (`x` + hex per value) as `Array(String)`;
/// empty for "All" ([`ALL_VALUE`]) or nothing chosen.
fn list(name: &str) -> String {
    let joined = format!("trimBoth(replaceRegexpAll({}, '[{{}}]', ''))", var(name));
    format!(
        "if({joined} IN ('', '{ALL_VALUE}'), CAST([], 'Array(String)'), \
         arrayMap(h -> unhex(substring(h, 2)), splitByChar(',', {joined})))"
    )
}

/// The chosen function's name; valid UTF-8 whatever the value (the tree's
/// `root` option must be, and every stored name is).
fn function() -> String {
    format!("toValidUTF8(unhex(substring({}, 2)))", var("function"))
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

/// One selection of the dashboard: the time range and the picker of label
/// values, as [`SelectionSql::dynamic`] (the builders of
/// `continuous_query` then write every panel's SQL).
fn selection(db: &Ident, t1: &str, t2: &str, values: &str) -> SelectionSql {
    SelectionSql::dynamic(
        &QueryOptions {
            database: db.clone(),
            rollup_after_seconds: DEFAULT_ROLLUP_AFTER_SECONDS,
        },
        &ty(),
        t1,
        t2,
        &format!(
            "{svc} AND (empty({values}) OR has({values}, labels[{k}]))",
            svc = service_ok("service"),
            k = key(),
        ),
        &service_ok("service"),
    )
}

/// The main selection: `$service`, `$label` in `$value`, the range.
fn main_side(db: &Ident) -> SelectionSql {
    selection(db, &from(), &to(), &list("value"))
}

/// The diff's baseline: `$label` in `$baseline`, the range shifted back by
/// `$offset`.
fn baseline_side(db: &Ident) -> SelectionSql {
    let off = format!("toIntervalSecond(toInt64OrZero({}))", var("offset"));
    selection(
        db,
        &format!("({} - {off})", from()),
        &format!("({} - {off})", to()),
        &list("baseline"),
    )
}

/// `max_nodes` as the tree options take it.
fn max_nodes_opt() -> String {
    format!("toString({})", max_nodes())
}

/// Grafana's flame graph frame: the builders' rows without `i`.
fn frame(sql: &str, diff: bool) -> String {
    let right = if diff { ", valueRight, selfRight" } else { "" };
    format!("SELECT level, label, value, self{right} FROM ({sql}) ORDER BY i")
}

/// The flame graph of the main selection.
pub fn flame_sql(db: &Ident) -> String {
    frame(
        &cq::flame_sql_of(db, &main_side(db), &max_nodes_opt()),
        false,
    )
}

/// Baseline vs comparison (the main selection).
pub fn diff_sql(db: &Ident) -> String {
    frame(
        &cq::diff_sql_of(
            db,
            &baseline_side(db),
            &main_side(db),
            &max_nodes_opt(),
            &format!("if({} = '1', '1', '0')", var("diff_mode")),
        ),
        true,
    )
}

/// Top functions of the main selection: `(function, self, total,
/// self_share, total_share)`, shares of the selection's total; total counts
/// every stack through a function once (recursion once).
pub fn top_sql(db: &Ident) -> String {
    cq::top_functions_sql_of(db, &main_side(db), None, TOP_LIMIT)
}

/// One half of the sandwich of `$function` (as `sandwich_sql`: callers
/// upwards from its outermost call, callees below its innermost).
pub fn sandwich_sql(db: &Ident, callers: bool) -> String {
    let side = if callers {
        SandwichSide::Callers
    } else {
        SandwichSide::Callees
    };
    frame(
        &cq::sandwich_sql_of(db, &main_side(db), &function(), side, &max_nodes_opt()),
        false,
    )
}

/// The main selection per step and value of `$group_by`: `(time, series,
/// value)`, `series` = `key=value`. Steps on the rollup are at least a
/// minute.
pub fn by_label_sql(db: &Ident) -> String {
    let step = step();
    let gk = var("group_by");
    format!(
        "SELECT toDateTime(time, 'UTC') AS time, concat({gk}, '=', lv) AS series, value \
         FROM ({}) ORDER BY time, series",
        cq::by_label_sql_of(db, &main_side(db), &gk, Some(&step)),
    )
}

/// The chosen function's value per step over the dashboard's range:
/// `(time, series, value)`, every stack through it counted once (as its
/// total in the top functions); steps on the rollup at least a minute.
pub fn function_series_sql(db: &Ident) -> String {
    format!(
        "SELECT toDateTime(time, 'UTC') AS time, function AS series, value \
         FROM ({}) ORDER BY time, series",
        cq::function_series_sql_of(db, &main_side(db), &format!("[{}]", function()), &step()),
    )
}

/// The step of the time series panels: Grafana's interval, at least a
/// minute when the range reads the per-minute rollup.
fn step() -> String {
    let long = format!(
        "dateDiff('second', {}, {}) > {DEFAULT_ROLLUP_AFTER_SECONDS}",
        from(),
        to()
    );
    format!("if({long}, greatest($__interval_s, 60), greatest($__interval_s, 1))")
}

fn date_range() -> String {
    // The days of [from, to): a `to` at midnight is not of its day.
    format!(
        "date >= toDate({}) AND date <= toDate({} - toIntervalMillisecond(1))",
        from(),
        to()
    )
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
    let mut p = json!({
        "name": name, "label": label, "type": "query", "datasource": ds(),
        "query": query, "definition": label,
        // On time range change: pickers list what the range holds.
        "refresh": 2, "sort": 0, "multi": multi, "includeAll": multi,
        "current": if multi { json!({"text": ["All"], "value": ["$__all"]}) } else { json!({}) },
    });
    if multi {
        p["allValue"] = json!(ALL_VALUE);
    }
    p
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
    panels.push({
        let mut p = l.panel(
            "timeseries",
            "${function:text} over time (total per step)",
            "The chosen function's total per step: every stack of the selection through it, counted once \
             (recursion once), as its total in the top functions.",
            [0, 48, 24, 8],
            function_series_sql(db),
            0,
        );
        p["fieldConfig"] = json!({"defaults": {"unit": "short"}, "overrides": []});
        p["transformations"] = json!([{"id": "prepareTimeSeries", "options": {"format": "multi"}}]);
        p
    });
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
