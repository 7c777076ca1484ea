//! Shared harness of the end-to-end tests: one embedded engine per test
//! process (chDB allows one database path per process), SQL helpers, and the
//! independent reference implementation the functions are checked against.

use flamehouse::storage::engine::{Engine, EngineOptions};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

static ENGINE: OnceLock<Engine> = OnceLock::new();

extern "C" {
    fn on_exit(
        cb: extern "C" fn(std::ffi::c_int, *mut std::ffi::c_void),
        arg: *mut std::ffi::c_void,
    ) -> std::ffi::c_int;
    fn _exit(status: std::ffi::c_int) -> !;
}

/// Runs at exit before the engine's own static destructors (registered
/// earlier, so run later): remove the data directory and leave with the
/// harness's status without running those destructors, which crash once
/// queries have run on other threads (closing the connection first does not
/// prevent it).
extern "C" fn close_engine(status: std::ffi::c_int, _: *mut std::ffi::c_void) {
    let _ = std::fs::remove_dir_all(data_dir());
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: ends the process immediately with the status exit() was given.
    unsafe { _exit(status) }
}

fn data_dir() -> PathBuf {
    std::env::temp_dir().join(format!("flamehouse-it-{}", std::process::id()))
}

/// The process-wide engine on a fresh temporary data directory. It is
/// closed at exit: the engine's own teardown crashes on an open connection.
pub fn engine() -> &'static Engine {
    ENGINE.get_or_init(|| {
        let dir = data_dir();
        let _ = std::fs::remove_dir_all(&dir);
        let e = Engine::open(&EngineOptions {
            data_dir: Some(dir),
            ..Default::default()
        })
        .unwrap_or_else(|e| panic!("opening the embedded engine: {e}"));
        // SAFETY: registering a plain function with the C runtime.
        unsafe { on_exit(close_engine, std::ptr::null_mut()) };
        e
    })
}

/// Runs `sql`, returning TabSeparated text; panics with the engine's error.
pub fn q(sql: &str) -> String {
    engine()
        .query_tsv(sql)
        .unwrap_or_else(|e| panic!("query failed: {e}\nSQL: {sql}"))
}

/// Runs `sql`, which must fail; returns the error message.
pub fn q_err(sql: &str) -> String {
    match engine().query_tsv(sql) {
        Ok(out) => panic!("query unexpectedly succeeded with {out:?}\nSQL: {sql}"),
        Err(e) => e.to_string(),
    }
}

/// Path of the built `flamehouse-udf` executable.
pub fn udf_binary() -> PathBuf {
    flamehouse::storage::engine::find_udf_binary(None).expect("flamehouse-udf is built")
}

/// A sample: frames root first and a value.
pub type Sample = (Vec<String>, i64);

/// A ClickHouse string literal for `s` (SQL quoting, byte-exact).
pub fn lit(s: &str) -> String {
    flamehouse::storage::sql_string(s)
}

/// A SQL literal of `Array(Tuple(Array(String), Int64))`.
pub fn samples_lit(samples: &[Sample]) -> String {
    let items: Vec<String> = samples
        .iter()
        .map(|(st, v)| {
            let frames: Vec<String> = st.iter().map(|f| lit(f)).collect();
            format!("([{}]::Array(String), toInt64({v}))", frames.join(","))
        })
        .collect();
    if items.is_empty() {
        "[]::Array(Tuple(Array(String), Int64))".into()
    } else {
        format!("[{}]", items.join(","))
    }
}

pub use flamehouse::flame::unescape_tsv;

/// One flame-graph row as returned by the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// Depth.
    pub level: u32,
    /// Label.
    pub label: String,
    /// Value and self, then valueRight and selfRight for diffs.
    pub vals: Vec<i64>,
}

/// Parses TabSeparated rows `level, label, numbers...`.
pub fn parse_rows(tsv: &str) -> Vec<Row> {
    tsv.lines()
        .map(|l| {
            let mut f = l.split('\t');
            let level = f.next().unwrap().parse().unwrap();
            let label = unescape_tsv(f.next().unwrap());
            let vals = f.map(|x| x.parse().unwrap()).collect();
            Row { level, label, vals }
        })
        .collect()
}

/// The reference: for every stack prefix, `[value, self]` per side, computed
/// by enumerating prefixes directly (no tree): a prefix's value is the sum
/// of samples that start with it; its self is the sum of samples equal to it.
pub fn reference(sides: &[&[Sample]]) -> BTreeMap<Vec<String>, Vec<i64>> {
    let mut m: BTreeMap<Vec<String>, Vec<i64>> = BTreeMap::new();
    let w = sides.len() * 2;
    m.insert(Vec::new(), vec![0; w]);
    for (side, samples) in sides.iter().enumerate() {
        for (st, v) in samples.iter() {
            for k in 0..=st.len() {
                let e = m.entry(st[..k].to_vec()).or_insert_with(|| vec![0; w]);
                e[side * 2] += v;
                if k == st.len() {
                    e[side * 2 + 1] += v;
                }
            }
        }
    }
    m
}

/// Checks the Grafana nested-set rules and returns the path -> values map:
/// one level-0 root first; each row one level below its parent;
/// `value = self + sum(children)` per side; siblings by descending sort key
/// (value, or value + valueRight for diffs), ties by label.
pub fn check_tree(rows: &[Row]) -> BTreeMap<Vec<String>, Vec<i64>> {
    assert!(!rows.is_empty(), "empty tree");
    assert_eq!(rows[0].level, 0, "first row is not the root");
    let sides = rows[0].vals.len() / 2;
    let key = |r: &Row| -> i128 { (0..sides).map(|s| r.vals[s * 2] as i128).sum() };
    let mut out = BTreeMap::new();
    let mut path: Vec<String> = Vec::new();
    // Per open ancestor: its row index and the running sum of children.
    let mut open: Vec<(usize, Vec<i64>)> = Vec::new();
    let mut last_child: Vec<Option<usize>> = Vec::new();
    let close = |open: &mut Vec<(usize, Vec<i64>)>, last_child: &mut Vec<Option<usize>>| {
        let (idx, sums) = open.pop().unwrap();
        last_child.pop();
        for (s, sum) in sums.iter().enumerate() {
            assert_eq!(
                rows[idx].vals[s * 2],
                rows[idx].vals[s * 2 + 1] + sum,
                "value != self + children at row {idx} ({:?})",
                rows[idx]
            );
        }
        idx
    };
    for (i, r) in rows.iter().enumerate() {
        if i > 0 {
            assert!(r.level >= 1, "second root at row {i}");
        }
        assert!(
            r.level as usize <= open.len(),
            "row {i} jumps from level {} to {}",
            open.len().saturating_sub(1),
            r.level
        );
        while open.len() > r.level as usize {
            close(&mut open, &mut last_child);
            path.pop();
        }
        if let Some((_, sums)) = open.last_mut() {
            for (s, sum) in sums.iter_mut().enumerate() {
                *sum += r.vals[s * 2];
            }
            if let Some(prev) = last_child.last().copied().flatten() {
                let (a, b) = (&rows[prev], r);
                assert!(
                    key(a) > key(b)
                        || (key(a) == key(b) && a.label.as_bytes() <= b.label.as_bytes()),
                    "siblings out of order at row {i}: {a:?} before {b:?}"
                );
            }
            *last_child.last_mut().unwrap() = Some(i);
        }
        if r.level > 0 {
            path.push(r.label.clone());
        }
        let prev = out.insert(path.clone(), r.vals.clone());
        assert!(prev.is_none(), "duplicate path {path:?}");
        open.push((i, vec![0; sides]));
        last_child.push(None);
    }
    while !open.is_empty() {
        close(&mut open, &mut last_child);
    }
    out
}

/// Random samples over a small vocabulary (so prefixes are shared).
pub fn random_samples(
    rng: &mut impl rand::Rng,
    n: usize,
    vocab: usize,
    max_depth: usize,
) -> Vec<Sample> {
    (0..n)
        .map(|_| {
            let d = rng.gen_range(0..=max_depth);
            let st = (0..d)
                .map(|_| format!("f{}", rng.gen_range(0..vocab)))
                .collect();
            (st, rng.gen_range(-5..100))
        })
        .collect()
}
