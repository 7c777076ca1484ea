//! Memory profiles end to end: generated MemHawk fixtures (two processes) are
//! loaded into their own database of the shared engine, and every view of
//! `sql/schema/002_views.sql` is compared, at seeded random instants and
//! intervals and for both metrics, against an independent replay of the
//! decoded snapshots written here in plain Rust.
//!
//! The replay decodes each file with the tests' own decoder
//! (`super::memhawk`, written from binpb-format.md, sharing no code with
//! `flamehouse::formats::binpb`), keeps every trace's absolute values per snapshot
//! (as-of semantics), symbolizes each trace with `Symbolizer` + `ModuleMap`
//! as a user would, and compares at the level of
//! function paths (root first), so it does not depend on the loader's own
//! trace -> stack mapping or on the tables' layout.
//!
//! Also: loading twice changes nothing (even with the progress lost), a torn
//! tail and a corrupted record, resuming a file that grew, and `init` twice.

use super::memhawk;
use flamehouse::formats::binpb::{AllocSummary, ProcessInfo};
use flamehouse::ingest::{load_file, LoadOptions, LoadSummary, PROFILER_LABEL};
use flamehouse::model::Mapping;
use flamehouse::storage::schema::{migrate, SchemaOptions};
use flamehouse::symbolize::{ModuleMap, Symbolizer, SymbolizerOptions};
use flamehouse_fixtures::workload::{compile_workload, generate, FixtureOptions};
use flamehouse_tests::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The database every comparison runs on (both fixtures, loaded once).
const DB: &str = "flamehouse_mem_test";
const SNAPSHOTS: usize = 90;
const STACKS: usize = 1500;
const METRICS: [&str; 2] = ["bytes", "count"];

// ---------------------------------------------------------------------------
// The independent replay.

/// Values of a trace: size, active, overhead, total_count, total_bytes.
type Vals = [i64; 5];

/// Live value of a metric.
fn live(v: &Vals, metric: &str) -> i64 {
    if metric == "count" {
        v[1]
    } else {
        v[0]
    }
}

/// Cumulative value of a metric.
fn cumulative(v: &Vals, metric: &str) -> i64 {
    if metric == "count" {
        v[3]
    } else {
        v[4]
    }
}

#[derive(Debug, Clone)]
struct Snap {
    /// Timestamp, ms (the tables' precision).
    ts: i64,
    /// The profiler's whole-process values.
    total: AllocSummary,
    /// Byte offsets of the record: start (its length prefix) and end.
    start: u64,
    end: u64,
    /// Distinct function paths touched (one sample row each).
    touched_paths: usize,
}

#[derive(Debug, Clone)]
struct Trace {
    /// Index of its symbolized path in `Replay::paths`.
    path: usize,
    /// (ts, values) each time the trace is mentioned, in order.
    history: Vec<(i64, Vals)>,
}

#[derive(Debug, Clone)]
struct Replay {
    header: ProcessInfo,
    header_end: u64,
    snaps: Vec<Snap>,
    /// Distinct symbolized paths, root first (empty: the process root).
    paths: Vec<Vec<String>>,
    traces: Vec<Trace>,
    /// Per function: the paths through it, and when a trace through it was
    /// mentioned (sorted, distinct).
    functions: BTreeMap<String, (Vec<usize>, Vec<i64>)>,
}

impl Replay {
    fn read(path: &Path) -> Replay {
        // Decoded by the tests' own decoder (super::memhawk), not the
        // library's reader.
        let file = memhawk::read(path);
        let h = &file.header;
        let header = ProcessInfo {
            process_short_name: h.short_name.clone(),
            process_full_path: h.full_path.clone(),
            pid: h.pid,
            start_timestamp: h.start_timestamp,
        };
        let header_end = file.header_end;
        let mut sym = Symbolizer::new(SymbolizerOptions::default());
        let mut snaps: Vec<Snap> = Vec::new();
        let mut paths: Vec<Vec<String>> = Vec::new();
        let mut path_ids: HashMap<Vec<String>, usize> = HashMap::new();
        let mut traces: Vec<Trace> = Vec::new();
        let mut trace_ids: HashMap<u32, usize> = HashMap::new();
        let mut latest: HashMap<u32, Vals> = HashMap::new();
        for (s, start, end) in &file.snapshots {
            if !s.loaded_so.is_empty() {
                // MemHawk's module rule, written out: each non-empty
                // segment at bias + p_vaddr, a start that overflows dropped.
                let modules: Vec<Mapping> = s
                    .loaded_so
                    .iter()
                    .map(|m| Mapping {
                        path: m.filename.clone(),
                        bias: m.bias,
                        ranges: m
                            .segments
                            .iter()
                            .filter(|&&(_, size)| size > 0)
                            .filter_map(|&(addr, size)| {
                                let start = m.bias.checked_add(addr)?;
                                Some(start..start.saturating_add(size))
                            })
                            .collect(),
                        ..Mapping::default()
                    })
                    .collect();
                let main = PathBuf::from(&h.full_path);
                sym.set_modules(ModuleMap::new(&modules, Some(&main)));
            }
            let ts = (s.timestamp / 1_000_000) as i64;
            let mut touched = BTreeSet::new();
            for &(id, v) in &s.changed {
                let i = *trace_ids.entry(id).or_insert_with(|| {
                    // Bit 31: the profiler's own allocations.
                    let labels: Vec<String> = if id & 0x8000_0000 != 0 {
                        vec![PROFILER_LABEL.to_string()]
                    } else {
                        sym.symbolize_stack(&file.stack(id))
                            .into_iter()
                            .map(|f| f.label)
                            .collect()
                    };
                    let n = paths.len();
                    let path = *path_ids.entry(labels.clone()).or_insert(n);
                    if path == n {
                        paths.push(labels);
                    }
                    traces.push(Trace {
                        path,
                        history: Vec::new(),
                    });
                    traces.len() - 1
                });
                traces[i].history.push((ts, v));
                touched.insert(traces[i].path);
                latest.insert(id, v);
            }
            let t = s.total.expect("fixtures carry totals");
            // The absolute-value semantics: the replayed sum is the
            // reported total at every snapshot.
            let mut sum = [0i64; 5];
            for v in latest.values() {
                for i in 0..5 {
                    sum[i] += v[i];
                }
            }
            assert_eq!(sum, t, "replay vs total at {ts}");
            snaps.push(Snap {
                ts,
                total: AllocSummary {
                    size: t[0],
                    active: t[1],
                    overhead: t[2],
                    total_count: t[3] as u64,
                    total_bytes: t[4] as u64,
                },
                start: *start,
                end: *end,
                touched_paths: touched.len(),
            });
        }
        let mut r = Replay {
            header,
            header_end,
            snaps,
            paths,
            traces,
            functions: BTreeMap::new(),
        };
        r.index_functions();
        r
    }

    fn index_functions(&mut self) {
        let mut functions: BTreeMap<String, (Vec<usize>, Vec<i64>)> = BTreeMap::new();
        for (i, p) in self.paths.iter().enumerate() {
            for f in p.iter().collect::<BTreeSet<_>>() {
                functions.entry(f.clone()).or_default().0.push(i);
            }
        }
        for tr in &self.traces {
            for f in self.paths[tr.path].iter().collect::<BTreeSet<_>>() {
                let e = functions.get_mut(f).unwrap();
                e.1.extend(tr.history.iter().map(|h| h.0));
            }
        }
        for e in functions.values_mut() {
            e.1.sort_unstable();
            e.1.dedup();
        }
        self.functions = functions;
    }

    /// The stream cut after its first `n` snapshots.
    fn prefix(&self, n: usize) -> Replay {
        let last = self.snaps[n - 1].ts;
        let mut r = self.clone();
        r.snaps.truncate(n);
        for tr in &mut r.traces {
            tr.history.retain(|h| h.0 <= last);
        }
        r.traces.retain(|tr| !tr.history.is_empty());
        r.index_functions();
        r
    }

    fn first_ts(&self) -> i64 {
        self.snaps[0].ts
    }

    fn last_ts(&self) -> i64 {
        self.snaps.last().unwrap().ts
    }

    /// The earliest snapshot with the largest live size.
    fn peak(&self) -> &Snap {
        let max = self.snaps.iter().map(|s| s.total.size).max().unwrap();
        self.snaps.iter().find(|s| s.total.size == max).unwrap()
    }

    /// Each path's values at `t` (sum over its traces of their latest values
    /// at or before `t`), by path index; `None` before any of its traces
    /// is mentioned.
    fn values_at(&self, t: i64) -> Vec<Option<Vals>> {
        let mut out: Vec<Option<Vals>> = vec![None; self.paths.len()];
        for tr in &self.traces {
            let n = tr.history.partition_point(|(ts, _)| *ts <= t);
            if n == 0 {
                continue;
            }
            let v = tr.history[n - 1].1;
            let e = out[tr.path].get_or_insert_with(Default::default);
            for i in 0..5 {
                e[i] += v[i];
            }
        }
        out
    }

    /// The same by path.
    fn paths_at(&self, t: i64) -> BTreeMap<Vec<String>, Vals> {
        self.values_at(t)
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| Some((self.paths[i].clone(), v?)))
            .collect()
    }

    /// Per path, `f(values)`, non-zero ones only (the views drop zero
    /// stacks).
    fn samples(&self, t: i64, f: impl Fn(&Vals) -> i64) -> Vec<Sample> {
        self.paths_at(t)
            .iter()
            .map(|(p, v)| (p.clone(), f(v)))
            .filter(|(_, v)| *v != 0)
            .collect()
    }

    /// Per path, value(t2) - value(t1) of the live metric.
    fn changes(&self, t1: i64, t2: i64, metric: &str) -> Vec<Sample> {
        let a = self.values_at(t1);
        let b = self.values_at(t2);
        let v = |x: &Option<Vals>| x.as_ref().map_or(0, |v| live(v, metric));
        (0..self.paths.len())
            .filter(|&i| a[i].is_some() || b[i].is_some())
            .map(|i| (self.paths[i].clone(), v(&b[i]) - v(&a[i])))
            .collect()
    }

    /// Every function (label) of every path.
    fn functions(&self) -> BTreeSet<String> {
        self.functions.keys().cloned().collect()
    }

    /// (live bytes, live count) of a function given `values_at`: every
    /// path through it counted once.
    fn function_value(&self, f: &str, values: &[Option<Vals>]) -> (i64, i64) {
        let mut out = (0, 0);
        if let Some((paths, _)) = self.functions.get(f) {
            for v in paths.iter().filter_map(|&i| values[i]) {
                out.0 += v[0];
                out.1 += v[1];
            }
        }
        out
    }

    /// Whether a trace through `f` is mentioned in [from, to].
    fn function_touched(&self, f: &str, from: i64, to: i64) -> bool {
        self.functions.get(f).is_some_and(|(_, ts)| {
            let i = ts.partition_point(|&x| x < from);
            i < ts.len() && ts[i] <= to
        })
    }

    /// Sample rows a load of the first `n` snapshots writes.
    fn sample_rows(&self, n: usize) -> usize {
        self.snaps[..n].iter().map(|s| s.touched_paths).sum()
    }
}

/// Top functions from per-path values: (function, self, total), where self
/// sums the paths ending in the function and total the paths through it
/// (once per path, recursion included).
fn top_functions(samples: &[Sample]) -> BTreeMap<String, (i64, i64)> {
    let mut out: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (p, v) in samples {
        let distinct: BTreeSet<&String> = p.iter().collect();
        for f in distinct {
            let e = out.entry(f.clone()).or_default();
            e.1 += v;
            if p.last() == Some(f) {
                e.0 += v;
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Fixtures, loading, SQL helpers.

#[derive(Debug)]
struct Fixture {
    path: PathBuf,
    replay: Replay,
}

/// Generated into the engine's data directory (removed at exit).
fn dir() -> PathBuf {
    engine().data_dir().join("memory-fixtures")
}

fn fixtures() -> &'static [Fixture] {
    static F: OnceLock<Vec<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let dir = dir();
        let bin = compile_workload(&dir).expect("compile the workload with gcc");
        [(4242u32, "workload", 1u64), (4343, "workload-b", 2)]
            .iter()
            .map(|&(pid, name, seed)| {
                let path = dir.join(format!("memhawk_{name}_{pid}_protobuf.binpb"));
                let mut fo = FixtureOptions::new(&bin, &path);
                fo.snapshots = SNAPSHOTS;
                fo.stacks = STACKS;
                fo.pid = pid;
                fo.name = name.to_string();
                fo.seed = seed;
                // Both processes overlap in time, and timestamps carry ms.
                fo.start_timestamp_ns += u64::from(pid - 4242) * 12_345_678_901;
                generate(&fo).expect("generate fixture");
                let replay = Replay::read(&path);
                assert_eq!(replay.snaps.len(), SNAPSHOTS + 1);
                Fixture { path, replay }
            })
            .collect()
    })
}

fn schema(db: &str) -> Vec<u32> {
    let opts = SchemaOptions {
        database: db.parse().unwrap(),
        cluster: None,
    };
    migrate(engine(), &opts).unwrap_or_else(|e| panic!("migrate {db}: {e}"))
}

fn load(db: &str, path: &Path) -> flamehouse::Result<LoadSummary> {
    let opts = LoadOptions {
        database: db.parse().unwrap(),
        ..Default::default()
    };
    load_file(engine(), path, &opts, &mut |_| {})
}

/// The main database with both fixtures loaded once; their process ids.
fn loaded() -> &'static [u64] {
    static L: OnceLock<Vec<u64>> = OnceLock::new();
    L.get_or_init(|| {
        assert_eq!(
            schema(DB),
            vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
        );
        fixtures()
            .iter()
            .map(|f| {
                let s = load(DB, &f.path).unwrap_or_else(|e| panic!("load: {e}"));
                assert_eq!(s.snapshots, (SNAPSHOTS + 1) as u64);
                assert_eq!(s.snapshots_stored, (SNAPSHOTS + 1) as u64);
                assert!(!s.torn_tail);
                assert_eq!(s.sample_rows as usize, f.replay.sample_rows(SNAPSHOTS + 1));
                s.process_id
            })
            .collect()
    })
}

/// `YYYY-MM-DD hh:mm:ss.fff` (UTC) of ms since the epoch.
fn ts(ms: i64) -> String {
    let (secs, milli) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{milli:03}",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

/// A flame-graph view's rows, checked for pre-order validity, as a path map.
fn flame(db: &str, call: &str) -> BTreeMap<Vec<String>, Vec<i64>> {
    let diff = call.starts_with("flame_diff");
    let cols = if diff {
        "level, label, value, self, valueRight, selfRight"
    } else {
        "level, label, value, self"
    };
    let rows = parse_rows(&q(&format!("SELECT {cols} FROM {db}.{call} ORDER BY i")));
    check_tree(&rows)
}

/// `top_functions*` rows in the view's order.
fn top(db: &str, call: &str) -> Vec<(String, i64, i64)> {
    q(&format!("SELECT function, self, total FROM {db}.{call}"))
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (
                unescape_tsv(f[0]),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
            )
        })
        .collect()
}

/// A view's own order of the reference top functions, limited.
fn ordered_top(
    m: BTreeMap<String, (i64, i64)>,
    by_abs: bool,
    limit: usize,
) -> Vec<(String, i64, i64)> {
    let mut v: Vec<(String, i64, i64)> = m.into_iter().map(|(f, (s, t))| (f, s, t)).collect();
    v.sort_by(|a, b| {
        let (ka, kb) = if by_abs {
            (a.2.abs(), b.2.abs())
        } else {
            (a.2, b.2)
        };
        kb.cmp(&ka).then_with(|| a.0.as_bytes().cmp(b.0.as_bytes()))
    });
    v.truncate(limit);
    v
}

/// Random instants: before, at, between and after snapshots.
fn instants(rng: &mut StdRng, r: &Replay, n: usize) -> Vec<i64> {
    let (a, b) = (r.first_ts(), r.last_ts());
    let mut out = vec![a - 1, a, r.peak().ts, b, b + 5000];
    for _ in 0..n {
        if rng.gen_bool(0.3) {
            let s = &r.snaps[rng.gen_range(0..r.snaps.len())];
            out.push(s.ts - i64::from(rng.gen_bool(0.5)));
        } else {
            out.push(rng.gen_range(a - 2000..b + 2000));
        }
    }
    out
}

fn intervals(rng: &mut StdRng, r: &Replay, n: usize) -> Vec<(i64, i64)> {
    let (a, b) = (r.first_ts(), r.last_ts());
    let p = r.peak().ts;
    let mut out = vec![(a - 1, b), (a, p), (p, b), (p, p), (a - 1000, a - 1)];
    for _ in 0..n {
        let x = rng.gen_range(a - 2000..b + 2000);
        let y = rng.gen_range(a - 2000..b + 2000);
        out.push((x.min(y), x.max(y)));
    }
    out
}

/// Equal path maps, or a panic listing the first differences.
fn same_tree(
    got: &BTreeMap<Vec<String>, Vec<i64>>,
    want: &BTreeMap<Vec<String>, Vec<i64>>,
    ctx: &str,
) {
    if got == want {
        return;
    }
    let keys: BTreeSet<&Vec<String>> = got.keys().chain(want.keys()).collect();
    let diffs: Vec<String> = keys
        .into_iter()
        .filter(|k| got.get(*k) != want.get(*k))
        .take(8)
        .map(|k| {
            format!(
                "  {:?}: got {:?}, want {:?}",
                k.join(";"),
                got.get(k),
                want.get(k)
            )
        })
        .collect();
    panic!(
        "{ctx}: {} vs {} nodes, first differences:\n{}",
        got.len(),
        want.len(),
        diffs.join("\n")
    );
}

// ---------------------------------------------------------------------------
// The comparisons, reusable on any database holding a fixture.

fn check_flame_at(db: &str, pid: u64, r: &Replay, metric: &str, t: i64) {
    let common = format!("process_id = {pid}, metric = '{metric}', max_nodes = 0");
    let got = flame(db, &format!("flame_at({common}, t = '{}')", ts(t)));
    let want = reference(&[&r.samples(t, |v| live(v, metric))]);
    same_tree(&got, &want, &format!("flame_at {metric} t={}", ts(t)));
    let got = flame(db, &format!("flame_cumulative({common}, t = '{}')", ts(t)));
    let want = reference(&[&r.samples(t, |v| cumulative(v, metric))]);
    same_tree(
        &got,
        &want,
        &format!("flame_cumulative {metric} t={}", ts(t)),
    );
}

fn check_change(db: &str, pid: u64, r: &Replay, metric: &str, t1: i64, t2: i64) {
    let common = format!(
        "process_id = {pid}, metric = '{metric}', max_nodes = 0, t1 = '{}', t2 = '{}'",
        ts(t1),
        ts(t2)
    );
    let d = r.changes(t1, t2, metric);
    let added: Vec<Sample> = d.iter().filter(|s| s.1 > 0).cloned().collect();
    let removed: Vec<Sample> = d
        .iter()
        .filter(|s| s.1 < 0)
        .map(|(p, v)| (p.clone(), -v))
        .collect();
    for (dir, want) in [("added", &added), ("removed", &removed)] {
        let got = flame(db, &format!("flame_change({common}, direction = '{dir}')"));
        same_tree(
            &got,
            &reference(&[want]),
            &format!("flame_change {dir} {metric} [{}, {}]", ts(t1), ts(t2)),
        );
    }
    // Diff: both sides for every path non-zero on either side.
    let (a, b) = (r.paths_at(t1), r.paths_at(t2));
    let keys: BTreeSet<&Vec<String>> = a.keys().chain(b.keys()).collect();
    let (mut left, mut right) = (Vec::new(), Vec::new());
    for k in keys {
        let v1 = a.get(k).map_or(0, |v| live(v, metric));
        let v2 = b.get(k).map_or(0, |v| live(v, metric));
        if v1 != 0 || v2 != 0 {
            left.push((k.clone(), v1));
            right.push((k.clone(), v2));
        }
    }
    let got = flame(db, &format!("flame_diff({common})"));
    same_tree(
        &got,
        &reference(&[&left, &right]),
        &format!("flame_diff {metric} [{}, {}]", ts(t1), ts(t2)),
    );
    // Top functions by change.
    let nonzero: Vec<Sample> = d.into_iter().filter(|s| s.1 != 0).collect();
    let want = ordered_top(top_functions(&nonzero), true, usize::MAX);
    let call = format!(
        "top_functions_change(process_id = {pid}, metric = '{metric}', t1 = '{}', t2 = '{}', limit = 0)",
        ts(t1),
        ts(t2)
    );
    assert_eq!(
        top(db, &call),
        want,
        "top_functions_change {metric} [{}, {}]",
        ts(t1),
        ts(t2)
    );
    let call5 = call.replace("limit = 0", "limit = 5");
    let want5: Vec<_> = want.into_iter().take(5).collect();
    assert_eq!(top(db, &call5), want5);
}

fn check_top(db: &str, pid: u64, r: &Replay, metric: &str, t: i64) {
    let want = ordered_top(
        top_functions(&r.samples(t, |v| live(v, metric))),
        false,
        usize::MAX,
    );
    // `limit = 0`: every function (as the continuous views read it).
    let call = format!(
        "top_functions(process_id = {pid}, metric = '{metric}', t = '{}', limit = 0)",
        ts(t)
    );
    assert_eq!(top(db, &call), want, "top_functions {metric} t={}", ts(t));
    let call3 = call.replace("limit = 0", "limit = 3");
    let want3: Vec<_> = want.into_iter().take(3).collect();
    assert_eq!(top(db, &call3), want3);
}

fn check_process_and_peak(db: &str, pid: u64, r: &Replay, source: &Path) {
    let out = q(&format!(
        "SELECT process_id, pid, name, full_path, toUnixTimestamp64Nano(start_time), \
         toUnixTimestamp64Milli(first_ts), toUnixTimestamp64Milli(end_time), peak_bytes, \
         toUnixTimestamp64Milli(peak_time), source FROM {db}.process_list WHERE process_id = {pid}"
    ));
    let peak = r.peak();
    let want = format!(
        "{pid}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
        r.header.pid,
        r.header.process_short_name,
        r.header.process_full_path,
        r.header.start_timestamp,
        r.first_ts(),
        r.last_ts(),
        peak.total.size,
        peak.ts,
        std::fs::canonicalize(source).unwrap().display()
    );
    assert_eq!(out, want, "process_list");
    let out = q(&format!(
        "SELECT toUnixTimestamp64Milli(peak_time), peak_bytes, peak_count FROM {db}.peak(process_id = {pid})"
    ));
    assert_eq!(
        out,
        format!("{}\t{}\t{}\n", peak.ts, peak.total.size, peak.total.active),
        "peak"
    );
    for metric in METRICS {
        let got = flame(
            db,
            &format!("flame_peak(process_id = {pid}, metric = '{metric}', max_nodes = 0)"),
        );
        let want = reference(&[&r.samples(peak.ts, |v| live(v, metric))]);
        same_tree(&got, &want, &format!("flame_peak {metric}"));
    }
}

fn check_totals_series(db: &str, pid: u64, r: &Replay, step: i64, t1: i64, t2: i64) {
    let got = q(&format!(
        "SELECT toUnixTimestamp(time), live_bytes, live_count, max_live_bytes, max_live_count, \
         allocated_bytes, allocations FROM {db}.totals_series(process_id = {pid}, step = {step}, \
         t1 = '{}', t2 = '{}')",
        ts(t1),
        ts(t2)
    ));
    // Per step: the last snapshot's values, and the largest live values.
    let mut buckets: BTreeMap<i64, Vec<&Snap>> = BTreeMap::new();
    for s in r.snaps.iter().filter(|s| s.ts >= t1 && s.ts <= t2) {
        buckets
            .entry(s.ts.div_euclid(1000 * step) * step)
            .or_default()
            .push(s);
    }
    let mut want = String::new();
    for (b, ss) in buckets {
        let last = ss.last().unwrap().total;
        let max_b = ss.iter().map(|s| s.total.size).max().unwrap();
        let max_c = ss.iter().map(|s| s.total.active).max().unwrap();
        want += &format!(
            "{b}\t{}\t{}\t{max_b}\t{max_c}\t{}\t{}\n",
            last.size, last.active, last.total_bytes, last.total_count
        );
    }
    assert_eq!(
        got,
        want,
        "totals_series step={step} [{}, {}]",
        ts(t1),
        ts(t2)
    );
}

fn check_function_series(
    db: &str,
    pid: u64,
    r: &Replay,
    step: i64,
    t1: i64,
    t2: i64,
    functions: &[String],
) {
    let arr: Vec<String> = functions.iter().map(|f| lit(f)).collect();
    let got = q(&format!(
        "SELECT toUnixTimestamp(time), function, live_bytes, live_count FROM {db}.function_series(\
         process_id = {pid}, step = {step}, t1 = '{}', t2 = '{}', functions = [{}])",
        ts(t1),
        ts(t2),
        arr.join(", ")
    ));
    let ctx = format!(
        "function_series step={step} [{}, {}] {functions:?}",
        ts(t1),
        ts(t2)
    );
    let selected: BTreeSet<String> = if functions.is_empty() {
        r.functions()
    } else {
        functions.iter().cloned().collect()
    };
    let mut rows: BTreeSet<(i64, String)> = BTreeSet::new();
    let mut prev: Option<i64> = None;
    let mut at_end: BTreeMap<i64, Vec<Option<Vals>>> = BTreeMap::new();
    for l in got.lines() {
        let f: Vec<&str> = l.split('\t').collect();
        let (b, func) = (f[0].parse::<i64>().unwrap(), unescape_tsv(f[1]));
        assert!(prev.is_none_or(|p| p <= b), "{ctx}: not ordered by time");
        prev = Some(b);
        assert!(
            selected.contains(&func),
            "{ctx}: unexpected function {func:?}"
        );
        // The function's live values at the end of the step (t2 picks the
        // last step, which is taken whole).
        let end = (b + step) * 1000 - 1;
        let values = at_end.entry(b).or_insert_with(|| r.values_at(end));
        let want = r.function_value(&func, values);
        let have = (f[2].parse::<i64>().unwrap(), f[3].parse::<i64>().unwrap());
        assert_eq!(have, want, "{ctx}: {func} at step {b}");
        assert!(
            r.function_touched(&func, b * 1000, end),
            "{ctx}: {func} has a row at step {b} without a change"
        );
        assert!(rows.insert((b, func)), "{ctx}: duplicate row");
    }
    // Every step in which a function's value changed has its row.
    let mut b = t1.div_euclid(1000 * step) * step;
    let mut before = r.values_at(b * 1000 - 1);
    while b * 1000 <= t2 {
        let end = (b + step) * 1000 - 1;
        let after = r.values_at(end);
        for func in &selected {
            if r.function_value(func, &before) != r.function_value(func, &after) {
                assert!(
                    rows.contains(&(b, func.clone())),
                    "{ctx}: no row for {func} at step {b}"
                );
            }
        }
        before = after;
        b += step;
    }
}

/// Every view against the replay, at `n` random instants and intervals.
fn check_all_views(db: &str, pid: u64, f: &Fixture, source: &Path, seed: u64, n: usize) {
    let r = &f.replay;
    let mut rng = StdRng::seed_from_u64(seed);
    check_process_and_peak(db, pid, r, source);
    for metric in METRICS {
        for t in instants(&mut rng, r, n) {
            check_flame_at(db, pid, r, metric, t);
            check_top(db, pid, r, metric, t);
        }
        for (t1, t2) in intervals(&mut rng, r, n) {
            check_change(db, pid, r, metric, t1, t2);
        }
    }
    for (t1, t2) in intervals(&mut rng, r, n / 2) {
        // Whole-minute steps read the per-minute rollup, others the samples.
        let step = [1, 7, 10, 60, 120][rng.gen_range(0..5)];
        check_totals_series(db, pid, r, step, t1, t2);
        check_function_series(db, pid, r, step, t1, t2, &[]);
        let all: Vec<String> = r.functions().into_iter().collect();
        let some: Vec<String> = (0..3)
            .map(|_| all[rng.gen_range(0..all.len())].clone())
            .chain(["no such function".to_string()])
            .collect();
        check_function_series(db, pid, r, step, t1, t2, &some);
    }
}

/// Outputs of a set of queries (tables and views) for one process, to
/// compare two databases or one database before and after a change.
fn snapshot_of(db: &str, pid: u64, r: &Replay) -> Vec<String> {
    let (a, b) = (r.first_ts(), r.last_ts());
    let mid = ts((a + b) / 2 + 333);
    let mut out = vec![
        q(&format!(
            "SELECT ts, stack_id, size, active, overhead, total_count, total_bytes, size_delta, \
             active_delta, count_delta, bytes_delta FROM {db}.samples WHERE process_id = {pid} \
             ORDER BY stack_id, ts"
        )),
        q(&format!(
            "SELECT DISTINCT function, stack_id, is_leaf FROM {db}.stack_functions WHERE stack_id IN \
             (SELECT stack_id FROM {db}.samples WHERE process_id = {pid}) ORDER BY function, stack_id"
        )),
        q(&format!(
            "SELECT * FROM {db}.totals FINAL WHERE process_id = {pid} ORDER BY ts"
        )),
        // Batches differ between one load and a resumed one, so the rollup's
        // rows do; their sums may not.
        q(&format!(
            "SELECT stack_id, minute, sum(size_delta), sum(active_delta) FROM {db}.samples_1m \
             WHERE process_id = {pid} GROUP BY ALL ORDER BY ALL"
        )),
        q(&format!(
            "SELECT stack_id, frame_ids, labels FROM {db}.stacks FINAL WHERE stack_id IN \
             (SELECT stack_id FROM {db}.samples WHERE process_id = {pid}) ORDER BY stack_id"
        )),
        q(&format!(
            // Not `line`: a frame is keyed by its label, and at function
            // granularity the line is that of whichever address was seen
            // first, by any process.
            "SELECT frame_id, label, function, file, module FROM {db}.frames FINAL WHERE frame_id IN (SELECT arrayJoin(frame_ids) \
             FROM {db}.stacks WHERE stack_id IN (SELECT stack_id FROM {db}.samples \
             WHERE process_id = {pid})) ORDER BY frame_id"
        )),
        q(&format!(
            "SELECT * EXCEPT source FROM {db}.process_list WHERE process_id = {pid}"
        )),
        q(&format!("SELECT * FROM {db}.peak(process_id = {pid})")),
    ];
    for metric in METRICS {
        let common = format!("process_id = {pid}, metric = '{metric}'");
        for call in [
            format!("flame_at({common}, max_nodes = 0, t = '{mid}')"),
            format!("flame_peak({common}, max_nodes = 0)"),
            format!("flame_cumulative({common}, max_nodes = 0, t = '{}')", ts(b)),
            format!(
                "flame_change({common}, max_nodes = 0, t1 = '{}', t2 = '{mid}', direction = 'added')",
                ts(a)
            ),
            format!(
                "flame_change({common}, max_nodes = 0, t1 = '{mid}', t2 = '{}', direction = 'removed')",
                ts(b)
            ),
            format!("flame_diff({common}, max_nodes = 0, t1 = '{mid}', t2 = '{}')", ts(b)),
            format!("top_functions({common}, t = '{mid}', limit = 1000)"),
            format!("top_functions_change({common}, t1 = '{}', t2 = '{mid}', limit = 1000)", ts(a)),
        ] {
            out.push(q(&format!("SELECT * FROM {db}.{call}")));
        }
    }
    out.push(q(&format!(
        "SELECT * FROM {db}.totals_series(process_id = {pid}, step = 10, t1 = '{}', t2 = '{}')",
        ts(a),
        ts(b)
    )));
    out.push(q(&format!(
        "SELECT * FROM {db}.function_series(process_id = {pid}, step = 10, t1 = '{}', t2 = '{}', functions = [])",
        ts(a),
        ts(b)
    )));
    out
}

/// Equal query outputs, or a panic naming the first differing query and line.
fn same_outputs(got: &[String], want: &[String]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if g != w {
            let gl: Vec<&str> = g.lines().collect();
            let wl: Vec<&str> = w.lines().collect();
            let n = (0..gl.len().max(wl.len()))
                .find(|&n| gl.get(n) != wl.get(n))
                .unwrap();
            panic!(
                "query {i} differs ({} vs {} lines) at line {n}:\n got  {:?}\n want {:?}",
                gl.len(),
                wl.len(),
                gl.get(n),
                wl.get(n)
            );
        }
    }
}

fn count(sql: &str) -> u64 {
    q(sql).trim().parse().unwrap()
}

/// A fresh database (dropped first if a previous run left it).
fn fresh_db(db: &str) {
    q(&format!("DROP DATABASE IF EXISTS {db}"));
    assert_eq!(
        schema(db),
        vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    );
}

// ---------------------------------------------------------------------------
// The tests.

#[test]
fn time_literals_are_utc_milliseconds() {
    for ms in [
        0i64,
        1_767_225_600_000,
        1_767_225_612_345,
        951_782_400_999,
        4_102_444_799_001,
    ] {
        let back = count(&format!(
            "SELECT toUnixTimestamp64Milli(toDateTime64('{}', 3, 'UTC'))",
            ts(ms)
        ));
        assert_eq!(back as i64, ms, "{}", ts(ms));
    }
}

#[test]
fn process_list_peak_and_flame_peak_match_the_replay() {
    let pids = loaded();
    assert_eq!(count(&format!("SELECT count() FROM {DB}.process_list")), 2);
    for (f, &pid) in fixtures().iter().zip(pids) {
        check_process_and_peak(DB, pid, &f.replay, &f.path);
    }
    assert_ne!(pids[0], pids[1]);
    // A process never loaded has no peak (not a row of zeros dated 1970).
    let unknown = (1..).find(|n| !pids.contains(n)).unwrap();
    assert_eq!(
        q(&format!("SELECT * FROM {DB}.peak(process_id = {unknown})")),
        ""
    );
}

#[test]
fn flame_views_at_instants_match_the_replay() {
    let pids = loaded();
    let mut rng = StdRng::seed_from_u64(7);
    for (f, &pid) in fixtures().iter().zip(pids) {
        for metric in METRICS {
            for t in instants(&mut rng, &f.replay, 8) {
                check_flame_at(DB, pid, &f.replay, metric, t);
            }
        }
        // Pruning keeps the root value and bounds the rows.
        let t = f.replay.peak().ts + 1;
        let full = flame(
            DB,
            &format!(
                "flame_at(process_id = {pid}, metric = 'bytes', max_nodes = 0, t = '{}')",
                ts(t)
            ),
        );
        for max_nodes in [2, 5, 12] {
            let rows = parse_rows(&q(&format!(
                "SELECT level, label, value, self FROM {DB}.flame_at(process_id = {pid}, \
                 metric = 'bytes', max_nodes = {max_nodes}, t = '{}') ORDER BY i",
                ts(t)
            )));
            assert!(rows.len() <= max_nodes, "{max_nodes}: {} rows", rows.len());
            assert_eq!(check_tree(&rows)[&Vec::new()], full[&Vec::new()]);
        }
    }
}

#[test]
fn change_and_diff_views_over_intervals_match_the_replay() {
    let pids = loaded();
    let mut rng = StdRng::seed_from_u64(8);
    for (f, &pid) in fixtures().iter().zip(pids) {
        for metric in METRICS {
            for (t1, t2) in intervals(&mut rng, &f.replay, 6) {
                check_change(DB, pid, &f.replay, metric, t1, t2);
            }
        }
    }
}

#[test]
fn top_functions_match_the_replay() {
    let pids = loaded();
    let mut rng = StdRng::seed_from_u64(9);
    for (f, &pid) in fixtures().iter().zip(pids) {
        for metric in METRICS {
            for t in instants(&mut rng, &f.replay, 6) {
                check_top(DB, pid, &f.replay, metric, t);
            }
        }
        // Recursion: wl_tree_build appears twice in some stacks but its
        // total never exceeds its callers'.
        let t = f.replay.peak().ts;
        let top = top(
            DB,
            &format!(
                "top_functions(process_id = {pid}, metric = 'bytes', t = '{}', limit = 1000)",
                ts(t)
            ),
        );
        let get = |name: &str| top.iter().find(|x| x.0 == name).unwrap().2;
        assert!(get("wl_tree_build") <= get("wl_build_index"));
        assert_eq!(
            get("main") + get(PROFILER_LABEL),
            f.replay.peak().total.size
        );
    }
}

#[test]
fn series_views_match_the_replay() {
    let pids = loaded();
    let mut rng = StdRng::seed_from_u64(10);
    for (f, &pid) in fixtures().iter().zip(pids) {
        let r = &f.replay;
        let (a, b) = (r.first_ts(), r.last_ts());
        let all: Vec<String> = r.functions().into_iter().collect();
        let mut cases = vec![
            (1, a, b),
            (10, a - 5000, b + 5000),
            (60, a, b),
            (7, r.peak().ts, b),
        ];
        for (t1, t2) in intervals(&mut rng, r, 4) {
            cases.push(([1, 7, 10, 60][rng.gen_range(0..4)], t1, t2));
        }
        for (step, t1, t2) in cases {
            check_totals_series(DB, pid, r, step, t1, t2);
            check_function_series(DB, pid, r, step, t1, t2, &[]);
            let some: Vec<String> = (0..3)
                .map(|_| all[rng.gen_range(0..all.len())].clone())
                .chain(["wl_tree_build".to_string(), "no such function".to_string()])
                .collect();
            check_function_series(DB, pid, r, step, t1, t2, &some);
        }
    }
}

#[test]
fn loading_twice_changes_nothing_even_without_progress() {
    let db = "flamehouse_mem_twice";
    fresh_db(db);
    let mut pids = Vec::new();
    for f in fixtures() {
        pids.push(load(db, &f.path).unwrap().process_id);
    }
    let before: Vec<String> = fixtures()
        .iter()
        .zip(&pids)
        .flat_map(|(f, &pid)| snapshot_of(db, pid, &f.replay))
        .collect();
    let rows = count(&format!("SELECT count() FROM {db}.samples"));
    // Again: everything is replayed, nothing stored.
    for (f, &pid) in fixtures().iter().zip(&pids) {
        let s = load(db, &f.path).unwrap();
        assert_eq!(s.process_id, pid);
        assert_eq!(s.snapshots, (SNAPSHOTS + 1) as u64);
        assert_eq!(s.snapshots_stored, 0);
        assert_eq!(s.sample_rows, 0);
    }
    let again: Vec<String> = fixtures()
        .iter()
        .zip(&pids)
        .flat_map(|(f, &pid)| snapshot_of(db, pid, &f.replay))
        .collect();
    same_outputs(&again, &before);
    assert_eq!(count(&format!("SELECT count() FROM {db}.samples")), rows);
    // The progress lost (a crash after the inserts): every batch is sent
    // again and deduplicated by its token.
    q(&format!("TRUNCATE TABLE {db}.load_progress"));
    for f in fixtures() {
        let s = load(db, &f.path).unwrap();
        assert_eq!(s.snapshots_stored, (SNAPSHOTS + 1) as u64);
    }
    let third: Vec<String> = fixtures()
        .iter()
        .zip(&pids)
        .flat_map(|(f, &pid)| snapshot_of(db, pid, &f.replay))
        .collect();
    same_outputs(&third, &before);
    assert_eq!(count(&format!("SELECT count() FROM {db}.samples")), rows);
    assert_eq!(
        count(&format!(
            "SELECT count() FROM (SELECT DISTINCT * FROM {db}.samples)"
        )),
        rows
    );
    // And the results are the right ones.
    for (f, &pid) in fixtures().iter().zip(&pids) {
        check_all_views(db, pid, f, &f.path, 11, 2);
    }
}

/// A crash after a batch's rows but before its progress (here: the last
/// progress rows deleted) makes the next load start at an earlier batch
/// boundary; it must cut the same batches, whose tokens the engine already
/// has, so nothing is stored twice.
#[test]
fn resuming_from_an_earlier_boundary_stores_nothing_twice() {
    let db = "flamehouse_mem_lost_progress";
    fresh_db(db);
    let f = &fixtures()[0];
    let opts = LoadOptions {
        database: db.parse().unwrap(),
        batch_snapshots: 16,
        ..Default::default()
    };
    let s = load_file(engine(), &f.path, &opts, &mut |_| {}).unwrap();
    let pid = s.process_id;
    let before = snapshot_of(db, pid, &f.replay);
    let rows = count(&format!("SELECT count() FROM {db}.samples"));
    // Batches of 16 snapshots, the stream's first one of 2: the third
    // batch ends after snapshot 34. Progress as if the load had crashed
    // after storing everything but recording only the first three batches.
    let kept = 2 + 16 + 16;
    let end = f.replay.snaps[kept - 1].end;
    q(&format!(
        "ALTER TABLE {db}.load_progress DELETE WHERE process_id = {pid} SETTINGS mutations_sync = 1"
    ));
    q(&format!(
        "INSERT INTO {db}.load_progress (source, process_id, offset, snapshots, last_ts) \
         VALUES ({}, {pid}, {end}, {kept}, 0)",
        lit(&f.path.display().to_string())
    ));
    let again = load_file(engine(), &f.path, &opts, &mut |_| {}).unwrap();
    assert_eq!(again.snapshots_stored as usize, f.replay.snaps.len() - kept);
    assert_eq!(count(&format!("SELECT count() FROM {db}.samples")), rows);
    same_outputs(&snapshot_of(db, pid, &f.replay), &before);
}

#[test]
fn torn_tail_loads_every_complete_snapshot_then_resumes() {
    let db = "flamehouse_mem_torn";
    fresh_db(db);
    let f = &fixtures()[0];
    let r = &f.replay;
    let data = std::fs::read(&f.path).unwrap();
    let last = r.snaps.last().unwrap();
    let copy = dir().join("torn.binpb");
    std::fs::write(&copy, &data[..((last.start + last.end) / 2) as usize]).unwrap();
    let s = load(db, &copy).unwrap();
    let n = r.snaps.len() - 1;
    assert!(s.torn_tail, "torn tail not reported");
    assert_eq!(s.snapshots, n as u64);
    assert_eq!(s.snapshots_stored, n as u64);
    assert_eq!(s.bytes, last.start);
    let pid = s.process_id;
    assert_eq!(count(&format!("SELECT count() FROM {db}.totals")), n as u64);
    assert_eq!(
        count(&format!("SELECT count() FROM {db}.samples")),
        r.sample_rows(n) as u64
    );
    assert_eq!(
        count(&format!("SELECT max(offset) FROM {db}.load_progress")),
        last.start
    );
    let prev = r.snaps[n - 1].ts;
    assert_eq!(
        count(&format!(
            "SELECT toUnixTimestamp64Milli(end_time) FROM {db}.process_list WHERE process_id = {pid}"
        )) as i64,
        prev
    );
    // Every view shows the stream up to its last complete snapshot.
    let kept = Fixture {
        path: f.path.clone(),
        replay: r.prefix(n),
    };
    check_all_views(db, pid, &kept, &copy, 13, 2);
    for metric in METRICS {
        check_flame_at(db, pid, &kept.replay, metric, last.ts);
    }
    // The writer finishes the record: the next load stores just it.
    std::fs::write(&copy, &data).unwrap();
    let s = load(db, &copy).unwrap();
    assert!(!s.torn_tail);
    assert_eq!(s.snapshots_stored, 1);
    assert_eq!(
        count(&format!("SELECT count() FROM {db}.samples")),
        r.sample_rows(n + 1) as u64
    );
    let main = loaded()[0];
    assert_eq!(main, pid);
    same_outputs(&snapshot_of(db, pid, r), &snapshot_of(DB, pid, r));
}

#[test]
fn corrupted_record_fails_naming_file_and_offset_and_keeps_what_precedes() {
    let db = "flamehouse_mem_corrupt";
    fresh_db(db);
    let f = &fixtures()[1];
    let r = &f.replay;
    let mut data = std::fs::read(&f.path).unwrap();
    let k = r.snaps.len() / 2;
    let bad = &r.snaps[k];
    // Flip bytes in the middle of the record's zstd frame (its content
    // checksum catches it).
    let mid = ((bad.start + 8 + bad.end) / 2) as usize;
    for b in &mut data[mid..mid + 4] {
        *b ^= 0xff;
    }
    let copy = dir().join("corrupt.binpb");
    std::fs::write(&copy, &data).unwrap();
    let err = load(db, &copy)
        .expect_err("a corrupted record is an error")
        .to_string();
    let abs = std::fs::canonicalize(&copy).unwrap();
    assert!(err.contains(&abs.display().to_string()), "{err}");
    assert!(err.contains(&format!("byte {}", bad.start)), "{err}");
    // Every snapshot before it is stored, nothing after.
    let pid = count(&format!("SELECT process_id FROM {db}.processes"));
    assert_eq!(count(&format!("SELECT count() FROM {db}.totals")), k as u64);
    assert_eq!(
        count(&format!("SELECT count() FROM {db}.samples")),
        r.sample_rows(k) as u64
    );
    assert_eq!(
        count(&format!(
            "SELECT toUnixTimestamp64Milli(max(ts)) FROM {db}.samples"
        )) as i64,
        r.snaps[k - 1].ts
    );
    assert_eq!(
        count(&format!("SELECT max(offset) FROM {db}.load_progress")),
        bad.start
    );
    let kept = r.prefix(k);
    for metric in METRICS {
        check_flame_at(db, pid, &kept, metric, r.snaps[k - 1].ts);
        check_flame_at(db, pid, &kept, metric, r.last_ts());
        check_top(db, pid, &kept, metric, r.last_ts());
    }
    // Loading it again fails the same way and stores nothing more.
    let err2 = load(db, &copy).expect_err("still corrupted").to_string();
    assert_eq!(err2, err);
    assert_eq!(
        count(&format!("SELECT count() FROM {db}.samples")),
        r.sample_rows(k) as u64
    );
}

#[test]
fn resuming_a_grown_file_equals_a_single_load() {
    let db = "flamehouse_mem_resume";
    fresh_db(db);
    let f = &fixtures()[1];
    let r = &f.replay;
    let data = std::fs::read(&f.path).unwrap();
    let copy = dir().join(f.path.file_name().unwrap());
    let copy = copy.with_extension("resume.binpb");
    // Just the header (the profiler has only started).
    std::fs::write(&copy, &data[..r.header_end as usize]).unwrap();
    let s = load(db, &copy).unwrap();
    assert!(!s.torn_tail);
    assert_eq!((s.snapshots, s.snapshots_stored), (0, 0));
    assert_eq!(count(&format!("SELECT count() FROM {db}.samples")), 0);
    // A prefix ending at a record boundary, not at a batch boundary.
    let k = 37;
    std::fs::write(&copy, &data[..r.snaps[k - 1].end as usize]).unwrap();
    let s = load(db, &copy).unwrap();
    assert!(!s.torn_tail);
    assert_eq!((s.snapshots, s.snapshots_stored), (k as u64, k as u64));
    assert_eq!(
        count(&format!("SELECT count() FROM {db}.samples")),
        r.sample_rows(k) as u64
    );
    let pid = s.process_id;
    // The file grew to its full size.
    std::fs::write(&copy, &data).unwrap();
    let s = load(db, &copy).unwrap();
    assert_eq!(s.snapshots, r.snaps.len() as u64);
    assert_eq!(s.snapshots_stored, (r.snaps.len() - k) as u64);
    assert_eq!(
        count(&format!("SELECT count() FROM {db}.samples")),
        r.sample_rows(r.snaps.len()) as u64
    );
    assert_eq!(
        count(&format!(
            "SELECT count() FROM (SELECT DISTINCT process_id, ts, stack_id FROM {db}.samples)"
        )),
        r.sample_rows(r.snaps.len()) as u64
    );
    assert_eq!(
        count(&format!("SELECT count() FROM {db}.processes FINAL")),
        1
    );
    assert_eq!(loaded()[1], pid);
    same_outputs(&snapshot_of(db, pid, r), &snapshot_of(DB, pid, r));
    check_all_views(db, pid, f, &copy, 12, 3);
}

#[test]
fn init_twice_is_a_noop() {
    let db = "flamehouse_mem_init";
    q(&format!("DROP DATABASE IF EXISTS {db}"));
    assert_eq!(
        schema(db),
        vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    );
    let tables = q(&format!(
        "SELECT name, engine FROM system.tables WHERE database = '{db}' ORDER BY name"
    ));
    let migrations = q(&format!(
        "SELECT version, name FROM {db}.schema_migrations ORDER BY version"
    ));
    assert_eq!(schema(db), Vec::<u32>::new());
    assert_eq!(schema(db), Vec::<u32>::new());
    assert_eq!(
        q(&format!(
            "SELECT name, engine FROM system.tables WHERE database = '{db}' ORDER BY name"
        )),
        tables
    );
    assert_eq!(
        q(&format!(
            "SELECT version, name FROM {db}.schema_migrations ORDER BY version"
        )),
        migrations
    );
    assert_eq!(
        migrations,
        "1\ttables\n2\tviews\n3\trollup\n4\tchecked_views\n5\texact_loads\n6\tcontinuous\n7\tcontinuous_rollups\n8\tspan_ids\n9\tcontinuous_views\n10\ttext_identity\n11\tcontinuous_stacks\n12\tprofile_lookup\n13\tprocess_stacks\n14\tmemory_view_edges\n15\tmore_gauge_types\n"
    );
    // Every table a load writes with a deduplication token (and every
    // materialized view's target) keeps a window of tokens: without one
    // the token is ignored and a re-sent batch is stored twice.
    assert_eq!(
        q(&format!(
            "SELECT name FROM system.tables WHERE database = '{db}' AND engine LIKE '%MergeTree' \
             AND name != 'schema_migrations' \
             AND create_table_query NOT LIKE '%non_replicated_deduplication_window = 100000%' \
             ORDER BY name"
        )),
        ""
    );
    for view in [
        "process_list",
        "peak",
        "flame_at",
        "flame_peak",
        "flame_change",
        "flame_diff",
        "flame_cumulative",
        "totals_series",
        "function_series",
        "top_functions",
        "top_functions_change",
    ] {
        assert!(
            tables.contains(&format!("{view}\tView")),
            "{view} missing: {tables}"
        );
    }
}

/// The loader keeps the per-minute rollup equal to the samples' changes
/// summed per stack and minute; migration 3 fills it from samples stored
/// before it (once: a re-run adds nothing), and function_series then agrees
/// with the database whose rollup the loader wrote.
#[test]
fn rollup_matches_the_samples_and_the_migration_backfills_it_once() {
    let db = "flamehouse_mem_backfill";
    fresh_db(db);
    let f = &fixtures()[0];
    let pid = load(db, &f.path).unwrap().process_id;
    assert_eq!(loaded()[0], pid);
    let rollup = format!(
        "SELECT stack_id, minute, sum(size_delta), sum(active_delta) FROM {db}.samples_1m \
         GROUP BY ALL HAVING sum(size_delta) != 0 OR sum(active_delta) != 0 ORDER BY ALL"
    );
    let direct = q(&format!(
        "SELECT stack_id, toStartOfMinute(ts) AS m, sum(size_delta), sum(active_delta) \
         FROM {db}.samples GROUP BY ALL HAVING sum(size_delta) != 0 OR sum(active_delta) != 0 \
         ORDER BY ALL"
    ));
    assert!(direct.lines().count() > 10, "{direct}");
    assert_eq!(q(&rollup), direct, "as the loader wrote it");
    // A database from before migration 3: samples, no rollup.
    q(&format!("TRUNCATE TABLE {db}.samples_1m"));
    q(&format!(
        "ALTER TABLE {db}.schema_migrations DELETE WHERE version = 3 SETTINGS mutations_sync = 1"
    ));
    assert_eq!(schema(db), vec![3]);
    assert_eq!(schema(db), Vec::<u32>::new());
    assert_eq!(q(&rollup), direct, "as the migration filled it");
    let (a, b) = (f.replay.first_ts(), f.replay.last_ts());
    for step in [60, 120, 7] {
        let sql = |d: &str| {
            format!(
                "SELECT * FROM {d}.function_series(process_id = {pid}, step = {step}, t1 = '{}', t2 = '{}', functions = [])",
                ts(a),
                ts(b)
            )
        };
        let mine = q(&sql(db));
        assert!(!mine.is_empty());
        assert_eq!(mine, q(&sql(DB)), "step {step}");
    }
}

/// Since migration 4 the views refuse a metric other than `bytes`/`count`
/// and a direction other than `added`/`removed` (before it, every other
/// metric read as bytes), also where no row would be read (an unknown
/// process); the accepted values still answer.
#[test]
fn views_refuse_unknown_metric_and_direction() {
    let pid = loaded()[0];
    let r = &fixtures()[0].replay;
    let (t1, t2) = (ts(r.first_ts()), ts(r.last_ts()));
    let calls = |metric: &str, direction: &str, pid: u64| {
        let m = lit(metric);
        let d = lit(direction);
        vec![
            format!("flame_at(process_id = {pid}, metric = {m}, max_nodes = 0, t = '{t2}')"),
            format!("flame_peak(process_id = {pid}, metric = {m}, max_nodes = 0)"),
            format!("flame_change(process_id = {pid}, metric = {m}, max_nodes = 0, t1 = '{t1}', t2 = '{t2}', direction = {d})"),
            format!("flame_diff(process_id = {pid}, metric = {m}, max_nodes = 0, t1 = '{t1}', t2 = '{t2}')"),
            format!("flame_cumulative(process_id = {pid}, metric = {m}, max_nodes = 0, t = '{t2}')"),
            format!("top_functions(process_id = {pid}, metric = {m}, t = '{t2}', limit = 10)"),
            format!("top_functions_change(process_id = {pid}, metric = {m}, t1 = '{t1}', t2 = '{t2}', limit = 10)"),
        ]
    };
    for p in [pid, 1] {
        for call in calls("bogus", "added", p) {
            let e = q_err(&format!("SELECT count() FROM {DB}.{call}"));
            assert!(
                e.contains("unknown metric 'bogus'") && e.contains("'bytes' or 'count'"),
                "{call}: {e}"
            );
        }
        let e = q_err(&format!(
            "SELECT count() FROM {DB}.{}",
            calls("bytes", "sideways", p)[2]
        ));
        assert!(e.contains("unknown direction 'sideways'"), "{e}");
    }
    for metric in METRICS {
        for dir in ["added", "removed"] {
            for call in calls(metric, dir, pid) {
                let n: u64 = q(&format!("SELECT count() FROM {DB}.{call}"))
                    .trim()
                    .parse()
                    .unwrap();
                assert!(n > 0, "{call}");
            }
        }
    }
}

/// Per-process contents of every per-process table, raw (no FINAL, no
/// GROUP BY: a row stored twice shows), plus the rollup's sums and the
/// progress a resume would start from.
fn process_tables(db: &str, pid: u64) -> Vec<String> {
    [
        format!("SELECT count() FROM {db}.samples WHERE process_id = {pid}"),
        format!("SELECT count() FROM {db}.totals WHERE process_id = {pid}"),
        format!(
            "SELECT ts, size, active, overhead, total_count, total_bytes FROM {db}.totals \
             WHERE process_id = {pid} ORDER BY ts"
        ),
        format!(
            "SELECT stack_id, minute, sum(size_delta), sum(active_delta) FROM {db}.samples_1m \
             WHERE process_id = {pid} GROUP BY ALL ORDER BY ALL"
        ),
        format!(
            "SELECT count(), any(pid), any(name), any(full_path), any(start_time) \
             FROM {db}.processes FINAL WHERE process_id = {pid}"
        ),
        format!(
            "SELECT max(offset), argMax(snapshots, offset), toUnixTimestamp64Milli(argMax(last_ts, offset)) \
             FROM {db}.load_progress WHERE process_id = {pid}"
        ),
        format!(
            "SELECT min(first_ts), max(last_ts), max(peak_size), argMaxMerge(peak) \
             FROM {db}.process_stats WHERE process_id = {pid}"
        ),
    ]
    .iter()
    .map(|s| q(s))
    .collect()
}

/// A fixture whose binary was moved under a sysroot after profiling (as
/// when analysing another machine's profile): the header's path no longer
/// exists here, the binary and the shared libraries the profile lists are
/// under `root`. Returns (fixture, root, reference database loaded while the
/// binary was still in place).
fn sysroot_fixture() -> &'static (Fixture, PathBuf, &'static str) {
    static F: OnceLock<(Fixture, PathBuf, &'static str)> = OnceLock::new();
    F.get_or_init(|| {
        let dir = dir().join("sysroot");
        let _ = std::fs::remove_dir_all(&dir);
        let bin = compile_workload(&dir.join("build")).expect("compile the workload");
        let bin = std::fs::canonicalize(bin).unwrap();
        let path = dir.join("memhawk_remote_77_protobuf.binpb");
        let mut fo = FixtureOptions::new(&bin, &path);
        fo.snapshots = 40;
        fo.stacks = 600;
        fo.pid = 77;
        fo.name = "remote".into();
        fo.seed = 5;
        generate(&fo).expect("generate fixture");
        // Reference: the file loaded where it was profiled.
        let reference = "flamehouse_mem_sysroot_ref";
        fresh_db(reference);
        let s = load(reference, &path).unwrap();
        // Everything but the fixture's two start-up frames in a libc that
        // is deliberately absent (`/nonexistent/...`).
        assert!(s.symbolized_percent > 80.0, "{s:?}");
        // Move the binary under the sysroot; copy the libraries there.
        let root = dir.join("root");
        let under = |p: &Path| root.join(p.strip_prefix("/").unwrap());
        std::fs::create_dir_all(under(&bin).parent().unwrap()).unwrap();
        std::fs::rename(&bin, under(&bin)).unwrap();
        let mut reader = flamehouse::formats::binpb::BinpbReader::open(&path).unwrap();
        while let Some(rec) = reader.next_record().unwrap() {
            if let flamehouse::formats::binpb::Record::Snapshot(s) = rec {
                for so in &s.loaded_so {
                    let p = Path::new(&so.filename);
                    if p.is_absolute() && p.is_file() && !under(p).exists() {
                        std::fs::create_dir_all(under(p).parent().unwrap()).unwrap();
                        std::fs::copy(p, under(p)).unwrap();
                    }
                }
            }
        }
        assert!(!bin.exists());
        let replay = Replay::read(&path);
        (Fixture { path, replay }, root, reference)
    })
}

fn load_with(db: &str, path: &Path, sysroot: Option<&Path>, replace: bool) -> LoadSummary {
    let opts = LoadOptions {
        database: db.parse().unwrap(),
        symbolizer: SymbolizerOptions {
            sysroot: sysroot.map(Path::to_path_buf),
            ..Default::default()
        },
        replace,
        ..Default::default()
    };
    load_file(engine(), path, &opts, &mut |_| {}).unwrap_or_else(|e| panic!("load: {e}"))
}

/// `--sysroot` puts the sysroot in front of the main program's path once
/// (it was put there twice: nothing symbolized, and stored for good).
#[test]
fn sysroot_finds_the_moved_main_program() {
    let (f, root, reference) = sysroot_fixture();
    let db = "flamehouse_mem_sysroot";
    fresh_db(db);
    let s = load_with(db, &f.path, Some(root), false);
    // Everything but the fixture's two start-up frames in a libc that
    // is deliberately absent (`/nonexistent/...`).
    assert!(s.symbolized_percent > 80.0, "{s:?}");
    assert!(
        !s.missing_modules.iter().any(|m| m.contains("workload")),
        "{:?}",
        s.missing_modules
    );
    let pid = s.process_id;
    same_outputs(
        &snapshot_of(db, pid, &f.replay),
        &snapshot_of(reference, pid, &f.replay),
    );
    assert_eq!(process_tables(db, pid), process_tables(reference, pid));
    assert!(
        q(&format!(
            "SELECT count() FROM {db}.frames WHERE function = 'wl_tree_build'"
        ))
        .trim()
            != "0"
    );
}

/// A load with a wrong sysroot (nothing symbolized) is redone with
/// `replace`: every table then equals a load made where the binary was, the
/// other process is untouched; a plain re-run would store nothing. The same
/// after `delete_process` and a plain load.
#[test]
fn replace_redoes_a_bad_load_and_leaves_other_processes_alone() {
    let (f, root, reference) = sysroot_fixture();
    let db = "flamehouse_mem_replace";
    fresh_db(db);
    let other = &fixtures()[1];
    let other_pid = load(db, &other.path).unwrap().process_id;
    let other_before = snapshot_of(db, other_pid, &other.replay);
    let other_tables = process_tables(db, other_pid);

    let wrong = root.with_file_name("no-such-root");
    let s = load_with(db, &f.path, Some(&wrong), false);
    assert!(s.symbolized_percent < 1.0, "{s:?}");
    let pid = s.process_id;
    let bad = snapshot_of(db, pid, &f.replay);
    assert_ne!(bad, snapshot_of(reference, pid, &f.replay));
    // A plain re-run with the right sysroot stores nothing new.
    let s = load_with(db, &f.path, Some(root), false);
    assert_eq!(s.snapshots_stored, 0);
    assert_eq!(snapshot_of(db, pid, &f.replay), bad);

    let s = load_with(db, &f.path, Some(root), true);
    assert_eq!(s.snapshots_stored as usize, f.replay.snaps.len());
    // Everything but the fixture's two start-up frames in a libc that
    // is deliberately absent (`/nonexistent/...`).
    assert!(s.symbolized_percent > 80.0, "{s:?}");
    same_outputs(
        &snapshot_of(db, pid, &f.replay),
        &snapshot_of(reference, pid, &f.replay),
    );
    assert_eq!(process_tables(db, pid), process_tables(reference, pid));
    same_outputs(&snapshot_of(db, other_pid, &other.replay), &other_before);
    assert_eq!(process_tables(db, other_pid), other_tables);

    // Deleted, then loaded again (not dropped as a duplicate of the
    // deleted batches).
    flamehouse::ingest::delete_process(engine(), &db.parse().unwrap(), pid).unwrap();
    for t in flamehouse::ingest::PROCESS_TABLES {
        assert_eq!(
            count(&format!(
                "SELECT count() FROM {db}.{t} WHERE process_id = {pid}"
            )),
            0,
            "{t}"
        );
    }
    assert_eq!(process_tables(db, other_pid), other_tables);
    let s = load_with(db, &f.path, Some(root), false);
    assert_eq!(s.snapshots_stored as usize, f.replay.snaps.len());
    assert_eq!(process_tables(db, pid), process_tables(reference, pid));
    same_outputs(
        &snapshot_of(db, pid, &f.replay),
        &snapshot_of(reference, pid, &f.replay),
    );
    same_outputs(&snapshot_of(db, other_pid, &other.replay), &other_before);
}

/// A copy damaged before its first snapshot fails and stores nothing, not
/// even a process row naming it: the process's source is the file that
/// was loaded afterwards.
#[test]
fn a_failed_load_does_not_become_the_process_source() {
    let db = "flamehouse_mem_source";
    fresh_db(db);
    let f = &fixtures()[0];
    let r = &f.replay;
    let mut data = std::fs::read(&f.path).unwrap();
    let first = &r.snaps[0];
    let mid = ((first.start + 8 + first.end) / 2) as usize;
    for b in &mut data[mid..mid + 4] {
        *b ^= 0xff;
    }
    let copy = dir().join("damaged-first.binpb");
    std::fs::write(&copy, &data).unwrap();
    let err = load(db, &copy).expect_err("damaged").to_string();
    assert!(err.contains(&format!("byte {}", first.start)), "{err}");
    assert_eq!(count(&format!("SELECT count() FROM {db}.processes")), 0);
    assert_eq!(count(&format!("SELECT count() FROM {db}.process_list")), 0);
    let s = load(db, &f.path).unwrap();
    assert_eq!(s.snapshots_stored as usize, r.snaps.len());
    let src = std::fs::canonicalize(&f.path).unwrap();
    assert_eq!(
        q(&format!(
            "SELECT source FROM {db}.process_list WHERE process_id = {}",
            s.process_id
        ))
        .trim(),
        src.display().to_string()
    );
    // The damaged copy again: it stores nothing and changes no source.
    load(db, &copy).expect_err("still damaged");
    assert_eq!(
        q(&format!("SELECT source FROM {db}.process_list")).trim(),
        src.display().to_string()
    );
}

/// `flamehouse flame`'s folded lines (folded in the engine by `stackFold`)
/// equal the view's own tree folded here: one line per node with a non-zero
/// self (diff: either side's), its path from the tree rows as checked by
/// `check_tree`, `;` in a frame as `:`, for every view, both metrics, a
/// full tree and a pruned one (`[other]` nodes included); the SVG's root
/// label is the tree's.
#[test]
fn flame_command_folds_every_view_as_its_tree() {
    use flamehouse::flame::{self, FlameRequest, FlameView, Metric, TimeArg, ViewKind};
    let pids = loaded();
    let (pid, r) = (pids[0], &fixtures()[0].replay);
    let (first, last) = (r.snaps[0].ts, r.snaps.last().unwrap().ts);
    let (peak, mid) = (r.peak().ts, first + (last - first) / 2);
    let db: flamehouse::Ident = DB.parse().unwrap();
    let (mut checked, mut pruned) = (0, 0);
    for metric in [Metric::Bytes, Metric::Count] {
        for max_nodes in [0u32, 40] {
            for view in [
                ViewKind::Peak,
                ViewKind::At,
                ViewKind::Cumulative,
                ViewKind::Added,
                ViewKind::Removed,
                ViewKind::Diff,
            ] {
                let (t, range) = match view {
                    ViewKind::Peak => (None, None),
                    ViewKind::At | ViewKind::Cumulative => (Some(mid), None),
                    ViewKind::Added => (None, Some((first, peak))),
                    ViewKind::Removed => (None, Some((peak, last))),
                    _ => (None, Some((first, last))),
                };
                let req = FlameRequest {
                    view,
                    process: pid.to_string(),
                    t: t.map(TimeArg::Utc),
                    t1: range.map(|r| TimeArg::Utc(r.0)),
                    t2: range.map(|r| TimeArg::Utc(r.1)),
                    metric,
                    max_nodes,
                };
                let got = flame::flame(engine(), &db, &req).unwrap();
                let fv = match (view, t, range) {
                    (ViewKind::At, Some(t), _) => FlameView::At { t: ts(t) },
                    (ViewKind::Cumulative, Some(t), _) => FlameView::Cumulative { t: ts(t) },
                    (ViewKind::Added, _, Some((a, b))) => FlameView::Added {
                        t1: ts(a),
                        t2: ts(b),
                    },
                    (ViewKind::Removed, _, Some((a, b))) => FlameView::Removed {
                        t1: ts(a),
                        t2: ts(b),
                    },
                    (ViewKind::Diff, _, Some((a, b))) => FlameView::Diff {
                        t1: ts(a),
                        t2: ts(b),
                    },
                    _ => FlameView::Peak,
                };
                let rows = parse_rows(&q(&flame::view_sql(&db, pid, metric, max_nodes, &fv)));
                if max_nodes > 0 {
                    assert!(rows.len() <= max_nodes as usize, "{view:?}");
                }
                let tree = check_tree(&rows);
                let mut want: Vec<String> = tree
                    .iter()
                    .filter(|(path, v)| {
                        !path.is_empty() && v.iter().skip(1).step_by(2).any(|s| *s != 0)
                    })
                    .map(|(path, v)| {
                        let selfs: Vec<String> =
                            v.iter().skip(1).step_by(2).map(i64::to_string).collect();
                        let frames: Vec<String> =
                            path.iter().map(|f| f.replace(';', ":")).collect();
                        format!("{} {}", frames.join(";"), selfs.join(" "))
                    })
                    .collect();
                want.sort();
                let mut lines = got.lines.clone();
                lines.sort();
                assert!(want.len() > 3, "{view:?} {metric:?} {max_nodes}: {want:?}");
                pruned += usize::from(want.iter().any(|l| l.contains("[other]")));
                assert_eq!(lines, want, "{view:?} {metric:?} max_nodes {max_nodes}");
                assert_eq!(got.root, rows[0].label, "{view:?}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 24);
    assert!(pruned >= 6, "only {pruned} pruned trees with [other] lines");
}

/// Migration 13: the memory views join the stacks of their own process
/// (`process_stacks`, ordered by process), not the whole `stacks`
/// dictionary that every process and every continuous profile fills. The
/// loader writes a process's rows (every stack its samples name, with its
/// labels); unrelated stacks change no answer and are not read (`EXPLAIN`);
/// a database of migrations 1 to 12 is back-filled to the loader's rows and
/// answers as before; `delete` removes the process's rows only.
#[test]
fn memory_views_read_their_process_stacks_only() {
    let db = "flamehouse_mem_pstacks";
    fresh_db(db);
    let (f1, f2) = (&fixtures()[0], &fixtures()[1]);
    let p1 = load(db, &f1.path).unwrap().process_id;
    let p2 = load(db, &f2.path).unwrap().process_id;
    let before = [
        snapshot_of(db, p1, &f1.replay),
        snapshot_of(db, p2, &f2.replay),
    ];
    // The reference: each process's distinct sample stacks and their labels.
    let want = q(&format!(
        "SELECT DISTINCT s.process_id, s.stack_id, st.labels FROM {db}.samples AS s \
         INNER JOIN (SELECT DISTINCT stack_id, labels FROM {db}.stacks) AS st ON st.stack_id = s.stack_id \
         ORDER BY ALL"
    ));
    let rows = || {
        q(&format!(
            "SELECT DISTINCT process_id, stack_id, labels FROM {db}.process_stacks ORDER BY ALL"
        ))
    };
    assert!(want.lines().count() > 20, "{want}");
    assert_eq!(rows(), want, "the loader's rows");

    q(&format!(
        "INSERT INTO {db}.stacks (stack_id, frame_ids, labels) \
         SELECT cityHash64('unrelated', number), [number], ['main', toString(number)] FROM numbers(30000)"
    ));
    let (a, b) = (f1.replay.first_ts(), f1.replay.last_ts());
    let plan = |view: &str| {
        q(&format!(
            "EXPLAIN indexes = 1 SELECT * FROM {db}.{view}(process_id = {p1}, metric = 'bytes', \
             max_nodes = 0, t1 = '{}', t2 = '{}')",
            ts(a),
            ts(b)
        ))
    };
    let reads = |plan: &str, t: &str| plan.contains(&format!("ReadFromMergeTree ({db}.{t})"));
    let p = plan("flame_diff");
    assert!(!reads(&p, "stacks") && reads(&p, "process_stacks"), "{p}");
    assert!(
        p.contains("Condition: (process_id in"),
        "process_stacks read by its key:\n{p}"
    );
    same_outputs(&snapshot_of(db, p1, &f1.replay), &before[0]);
    same_outputs(&snapshot_of(db, p2, &f2.replay), &before[1]);

    // Back to migrations 1 to 12: no process_stacks, migration 4's views.
    q(&format!("DROP TABLE {db}.process_stacks"));
    q(&format!(
        "ALTER TABLE {db}.schema_migrations DELETE WHERE version = 13 SETTINGS mutations_sync = 1"
    ));
    let opts = SchemaOptions {
        database: db.parse().unwrap(),
        cluster: None,
    };
    for stmt in flamehouse_udf::catalog::statements(
        &opts.render(include_str!("../../sql/schema/004_checked_views.sql")),
    ) {
        q(&stmt);
    }
    assert!(
        reads(&plan("flame_diff"), "stacks"),
        "migration 4 joined stacks"
    );
    assert_eq!(schema(db), vec![13]);
    assert_eq!(rows(), want, "the back-fill is the loader's rows");
    assert!(!reads(&plan("flame_diff"), "stacks"));
    same_outputs(&snapshot_of(db, p1, &f1.replay), &before[0]);
    same_outputs(&snapshot_of(db, p2, &f2.replay), &before[1]);
    assert_eq!(schema(db), Vec::<u32>::new());
    assert_eq!(rows(), want, "the back-fill runs once");

    flamehouse::ingest::delete_process(engine(), &db.parse().unwrap(), p1).unwrap();
    let left = q(&format!(
        "SELECT DISTINCT process_id FROM {db}.process_stacks ORDER BY ALL"
    ));
    assert_eq!(
        left.trim(),
        p2.to_string(),
        "delete removes its process's rows only"
    );
}

/// Migrations 12 and 13 render for a cluster (`init --cluster`): every DDL
/// statement runs `ON CLUSTER`, the new table is Replicated, no placeholder
/// is left; the back-fill is a plain INSERT (on the node `init` talks to,
/// replicated from there); every statement parses.
#[test]
fn migrations_12_and_13_render_for_a_cluster() {
    let opts = SchemaOptions {
        database: "fh_mem_cluster".parse().unwrap(),
        cluster: Some("prod".parse().unwrap()),
    };
    for (version, want_name, want_stmts) in [(12, "profile_lookup", 4), (13, "process_stacks", 9)] {
        let (_, name, sql) = flamehouse::storage::schema::MIGRATIONS
            .iter()
            .find(|m| m.0 == version)
            .unwrap();
        assert_eq!(*name, want_name);
        let stmts = flamehouse_udf::catalog::statements(&opts.render(sql));
        assert_eq!(stmts.len(), want_stmts, "{version}");
        for s in &stmts {
            for p in ["{db}", "{on_cluster}", "{replicated}"] {
                assert!(!s.contains(p), "{s}");
            }
            if s.starts_with("INSERT") {
                assert!(!s.contains("ON CLUSTER"), "{s}");
            } else {
                assert!(s.contains(" ON CLUSTER prod "), "{s}");
            }
            if s.starts_with("CREATE TABLE") {
                assert!(s.contains("ENGINE = ReplicatedReplacingMergeTree"), "{s}");
            }
            q(&format!("SELECT formatQuerySingleLine({})", lit(s)));
        }
    }
}
