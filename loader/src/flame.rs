//! `flamehouse flame`: render any flame-graph view to folded text or SVG, for
//! people without Grafana.

use crate::backend::{sql_string, Backend};
use crate::error::{Error, Result};

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

/// The SQL that selects the view's `(level, label, value, self)` rows.
pub fn view_sql(
    db: &str,
    process_id: u64,
    metric: &str,
    max_nodes: u32,
    view: &FlameView,
) -> String {
    let common = format!(
        "process_id = {process_id}, metric = {}, max_nodes = {max_nodes}",
        sql_string(metric)
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
            return format!(
                "SELECT level, label, value, self, valueRight, selfRight FROM {db}.flame_diff({common}, t1 = {}, t2 = {}) ORDER BY i",
                sql_string(t1),
                sql_string(t2)
            )
        }
    };
    format!("SELECT level, label, value, self FROM {db}.{call} ORDER BY i")
}

/// Turns pre-order `(level, label, value, self)` rows into folded lines
/// (`a;b;c self`), one per node with a non-zero self; the root is left out.
/// Diff rows (`..., valueRight, selfRight`) give `a;b;c self selfRight`.
pub fn rows_to_folded(tsv: &str) -> Result<Vec<String>> {
    let mut path: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for (n, line) in tsv.lines().enumerate() {
        let f: Vec<&str> = line.split('\t').collect();
        let bad = || Error::Query {
            message: format!("unexpected flame-graph row {}: {line:?}", n + 1),
        };
        if f.len() < 4 {
            return Err(bad());
        }
        let level: usize = f[0].parse().map_err(|_| bad())?;
        let self_: i64 = f[3].parse().map_err(|_| bad())?;
        if level == 0 {
            path.clear();
            continue;
        }
        path.truncate(level - 1);
        // TSV escapes stay escaped: a folded line must not contain a raw
        // tab or newline anyway; `;` inside a frame becomes `:`.
        path.push(f[1].replace(';', ":"));
        if f.len() >= 6 {
            let right: i64 = f[5].parse().map_err(|_| bad())?;
            if self_ != 0 || right != 0 {
                out.push(format!("{} {self_} {right}", path.join(";")));
            }
        } else if self_ != 0 {
            out.push(format!("{} {self_}", path.join(";")));
        }
    }
    Ok(out)
}

/// The unit a view's `metric` counts, as tooltips name it: `bytes` is
/// `bytes`, `count` is `allocations`; anything else is named as given.
pub fn count_name(metric: &str) -> &str {
    match metric {
        "count" => "allocations",
        m => m,
    }
}

/// The label of the tree's root row (level 0) as the view returned it, so
/// an SVG's root bar says what the Grafana panel's does.
pub fn root_label(tsv: &str) -> Option<&str> {
    tsv.lines()
        .map(|l| l.split('\t'))
        .find_map(|mut f| (f.next() == Some("0")).then(|| f.next()).flatten())
}

/// Resolves a process given as an id or a name (the latest process of that
/// name).
pub fn resolve_process(backend: &dyn Backend, db: &str, process: &str) -> Result<u64> {
    if let Ok(id) = process.parse::<u64>() {
        return Ok(id);
    }
    let out = backend.query_tsv(&format!(
        "SELECT process_id FROM {db}.processes FINAL WHERE name = {} ORDER BY start_time DESC LIMIT 1",
        sql_string(process)
    ))?;
    out.trim().parse().map_err(|_| Error::Query {
        message: format!("no process named {process:?} (see `flamehouse sql \"SELECT * FROM {db}.process_list\"`)"),
    })
}

/// Resolves a time argument: an absolute UTC time as is, or `+N` / `+Ns` /
/// `+Nm` as an offset from the process's first snapshot; `end` is the last.
pub fn resolve_time(backend: &dyn Backend, db: &str, process_id: u64, t: &str) -> Result<String> {
    let bad = || Error::Query {
        message: format!(
            "bad time {t:?}: use `YYYY-MM-DD hh:mm:ss[.fff]` (UTC), `+90s`, `+5m` or `end`"
        ),
    };
    let expr = if t == "end" {
        "end_time".to_string()
    } else if let Some(rest) = t.strip_prefix('+') {
        let (num, mult) = match rest.strip_suffix('m') {
            Some(n) => (n, 60_000),
            None => (rest.strip_suffix('s').unwrap_or(rest), 1000),
        };
        let n: f64 = num.parse().map_err(|_| bad())?;
        format!(
            "first_ts + toIntervalMillisecond({})",
            (n * mult as f64) as i64
        )
    } else {
        return Ok(t.to_string());
    };
    let out = backend.query_tsv(&format!(
        "SELECT toString({expr}) FROM {db}.process_list WHERE process_id = {process_id}"
    ))?;
    let v = out.trim();
    if v.is_empty() {
        return Err(Error::Query {
            message: format!("process {process_id} has no snapshots"),
        });
    }
    Ok(v.to_string())
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

    #[test]
    fn utc_milliseconds_format() {
        assert_eq!(format_utc_ms(0), "1970-01-01 00:00:00.000");
        assert_eq!(format_utc_ms(1_767_225_612_345), "2026-01-01 00:00:12.345");
        assert_eq!(format_utc_ms(951_782_400_001), "2000-02-29 00:00:00.001");
        assert_eq!(format_utc_ms(-1), "1969-12-31 23:59:59.999");
    }

    #[test]
    fn folded_lines_from_tree_and_diff_rows() {
        let tree = "0\ttotal\t10\t1\n1\ta\t9\t4\n2\tb;c\t5\t5\n";
        assert_eq!(rows_to_folded(tree).unwrap(), vec!["a 4", "a;b:c 5"]);
        let diff = "0\ttotal\t3\t0\t4\t0\n1\tx\t3\t3\t4\t4\n";
        assert_eq!(rows_to_folded(diff).unwrap(), vec!["x 3 4"]);
        assert!(rows_to_folded("0\ttotal").is_err());
    }

    #[test]
    fn root_label_and_unit_names() {
        assert_eq!(
            root_label("0\tall of it\t10\t1\n1\ta\t9\t9\n"),
            Some("all of it")
        );
        assert_eq!(root_label(""), None);
        assert_eq!(count_name("bytes"), "bytes");
        assert_eq!(count_name("count"), "allocations");
    }
}
