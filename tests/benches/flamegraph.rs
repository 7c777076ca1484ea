//! Benchmark: the flame graph of a 1,000,000-sample table through flamehouse
//! against ClickHouse's built-in `flameGraph()`, in one run of the same
//! embedded engine, plus the UDF's raw throughput and peak memory.
//!
//! Also: the same flame graph from the table stored by stack id (the
//! `{table}_stacks` dictionary and `(stack_id, value)` rows, the shape of the
//! memory schema and continuous-profiling samples): aggregate by the integer
//! id, then join the frames of the distinct ids only. And the raw UDF
//! against a baseline build (`BASELINE_UDF`, default
//! `/work/baseline/flamehouse-udf`) on the same bytes, when it exists.
//!
//! Run: `cargo bench -p flamehouse-tests --bench flamegraph`
//! (env: BENCH_SAMPLES, BENCH_DISTINCT, BENCH_RUNS, BASELINE_UDF).

use flamehouse_fixtures::demo::{grouped_sql, load_synthetic, SyntheticProfile};
use flamehouse_udf::codec::{Format, Limits};
use flamehouse_udf::serve::{serve_udf, Function};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Counts live and peak heap bytes of this process's Rust allocations (the
/// engine uses its own allocator), for the UDF's in-process peak memory.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator, only counting sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
        PEAK.fetch_max(now, Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;
use flamehouse_tests::{engine, udf_binary};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn env_or<T: std::str::FromStr>(k: &str, d: T) -> T {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn median_time(runs: usize, sql: &str) -> (Duration, String) {
    let mut times = Vec::new();
    let mut out = String::new();
    for _ in 0..runs {
        let t = Instant::now();
        out = engine()
            .query_tsv(sql)
            .unwrap_or_else(|e| panic!("{e}\n{sql}"));
        times.push(t.elapsed());
    }
    times.sort();
    (times[times.len() / 2], out)
}

fn main() {
    let samples: u64 = env_or("BENCH_SAMPLES", 1_000_000);
    let distinct: usize = env_or("BENCH_DISTINCT", 20_000);
    let runs: usize = env_or("BENCH_RUNS", 5);
    let p = SyntheticProfile {
        samples,
        distinct,
        seed: 1,
        ..Default::default()
    };
    let t = Instant::now();
    load_synthetic(engine(), &"bench".parse().unwrap(), &p).unwrap();
    println!(
        "data: {} samples, {} distinct stacks, depth {}-{}, cubic skew (loaded in {:.1?})",
        samples,
        distinct,
        p.min_depth,
        p.max_depth,
        t.elapsed()
    );
    let frames: String = engine()
        .query_tsv("SELECT sum(length(stack)), uniqExact(stack) FROM bench")
        .unwrap();
    println!(
        "frames in table: {}",
        frames.trim().replace('\t', ", distinct stacks: ")
    );

    // The same samples by stack id.
    let t = Instant::now();
    engine().execute("DROP TABLE IF EXISTS bench_ids").unwrap();
    engine()
        .execute(
            "CREATE TABLE bench_ids (stack_id UInt32, value Int64) ENGINE = MergeTree ORDER BY tuple() \
             AS SELECT s.id AS stack_id, b.value AS value FROM bench AS b \
             INNER JOIN bench_stacks AS s ON cityHash64(s.stack) = cityHash64(b.stack)",
        )
        .unwrap();
    let n: String = engine()
        .query_tsv("SELECT count(), sum(value) FROM bench_ids")
        .unwrap();
    let want: String = engine()
        .query_tsv("SELECT count(), sum(value) FROM bench")
        .unwrap();
    assert_eq!(n, want, "bench_ids holds every sample");
    println!(
        "by-id table: {} rows (built in {:.1?})",
        n.trim(),
        t.elapsed()
    );
    let by_id = "(SELECT s.stack AS stack, a.v AS v \
         FROM (SELECT stack_id, sum(value) AS v FROM bench_ids GROUP BY stack_id) AS a \
         INNER JOIN bench_stacks AS s ON s.id = a.stack_id)";

    let grouped = grouped_sql(&"bench".parse().unwrap(), "");
    let cases = [
        (
            "builtin flameGraph()",
            "SELECT length(flameGraph(stack, value)) FROM bench SETTINGS allow_introspection_functions = 1".to_string(),
        ),
        (
            "builtin flameGraph(), max_threads=1 (exact)",
            "SELECT length(flameGraph(stack, value)) FROM bench SETTINGS allow_introspection_functions = 1, max_threads = 1".to_string(),
        ),
        (
            "flamehouse stackTree()",
            format!("SELECT length(stackTree(groupArray((stack, v)))) FROM {grouped}"),
        ),
        (
            "flamehouse stackFold()",
            format!("SELECT length(stackFold(groupArray((stack, v)))) FROM {grouped}"),
        ),
        (
            "flamehouse stackTree(max_nodes=8192)",
            format!("SELECT length(stackTreeWith(groupArray((stack, v)), map('max_nodes', '8192'))) FROM {grouped}"),
        ),
        (
            "flamehouse stackTree() by stack id",
            format!("SELECT length(stackTree(groupArray((stack, v)))) FROM {by_id}"),
        ),
        (
            "flamehouse stackTree(max_nodes=8192) by id",
            format!("SELECT length(stackTreeWith(groupArray((stack, v)), map('max_nodes', '8192'))) FROM {by_id}"),
        ),
    ];
    // The by-id tree is the inline one.
    let digest = |from: &str| {
        engine()
            .query_tsv(&format!(
                "SELECT cityHash64(toString(stackTree(groupArray((stack, v))))) FROM {from}"
            ))
            .unwrap()
    };
    assert_eq!(digest(&grouped), digest(by_id), "by-id tree differs");
    let mut results = Vec::new();
    for (name, sql) in &cases {
        let _ = engine().query_tsv(sql); // warm-up (starts the UDF pool)
        let (d, out) = median_time(runs, sql);
        println!(
            "{name:<45} median {:>8.1} ms over {runs} runs -> {} rows",
            d.as_secs_f64() * 1e3,
            out.trim()
        );
        results.push(d);
    }
    let base = results[0].as_secs_f64();
    println!();
    println!(
        "RATIO flameGraph() / stackTree()  = {:.2}x",
        base / results[2].as_secs_f64()
    );
    println!(
        "RATIO flameGraph() / stackFold()  = {:.2}x",
        base / results[3].as_secs_f64()
    );
    println!(
        "RATIO flameGraph(max_threads=1) / stackTree() = {:.2}x",
        results[1].as_secs_f64() / results[2].as_secs_f64()
    );
    println!(
        "RATIO flameGraph() / stackTree() by stack id = {:.2}x (max_nodes=8192: {:.2}x)",
        base / results[5].as_secs_f64(),
        base / results[6].as_secs_f64()
    );

    // Raw UDF throughput: the exact RowBinary the engine sends, piped into
    // the executable outside the engine.
    let input = engine()
        .query(
            &format!(
                "SELECT CAST(groupArray((stack, v)) AS Array(Tuple(Array(String), Int64))), \
                 CAST(map() AS Map(String, String)) FROM {grouped}"
            ),
            "RowBinary",
        )
        .unwrap();
    let mb = input.len() as f64 / 1e6;
    println!();
    // In process: decode, build, encode (no process start, no pipe).
    let mut best = Duration::MAX;
    let mut peak = 0;
    for _ in 0..runs {
        let before = LIVE.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let t = Instant::now();
        serve_udf(
            Function::Tree,
            Format::RowBinary,
            false,
            Limits::default(),
            &input[..],
            std::io::sink(),
        )
        .unwrap();
        best = best.min(t.elapsed());
        peak = peak.max(PEAK.load(Ordering::Relaxed) - before);
    }
    println!(
        "UDF raw (in process): {:.1} MB RowBinary, {} stacks in {:.1} ms = {:.0} MB/s, {:.0} stacks/s; peak heap {:.1} MiB",
        mb,
        distinct,
        best.as_secs_f64() * 1e3,
        mb / best.as_secs_f64(),
        distinct as f64 / best.as_secs_f64(),
        peak as f64 / (1 << 20) as f64
    );
    // The executable, through a pipe, as the engine runs it; and the
    // baseline build on the same bytes.
    let baseline = std::path::PathBuf::from(
        std::env::var("BASELINE_UDF").unwrap_or_else(|_| "/work/baseline/flamehouse-udf".into()),
    );
    let mut bins = vec![("new", udf_binary())];
    if baseline.exists() {
        bins.push(("baseline", baseline));
    }
    let mut best_of = Vec::new();
    for (name, bin) in &bins {
        let mut best = Duration::MAX;
        for _ in 0..runs {
            let t = Instant::now();
            let mut child = Command::new(bin)
                .args(["tree", "--format", "RowBinary"])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .unwrap();
            child.stdin.take().unwrap().write_all(&input).unwrap();
            assert!(child.wait().unwrap().success());
            best = best.min(t.elapsed());
        }
        println!(
            "UDF process {name} (spawn + pipe): {:.1} ms = {:.0} MB/s",
            best.as_secs_f64() * 1e3,
            mb / best.as_secs_f64()
        );
        best_of.push(best);
    }
    if best_of.len() == 2 {
        println!(
            "RATIO UDF process baseline / new = {:.2}x",
            best_of[1].as_secs_f64() / best_of[0].as_secs_f64()
        );
    }
}
