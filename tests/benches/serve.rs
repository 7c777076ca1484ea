//! Benchmark: N concurrent readers on `flamehouse serve` while `flamehouse
//! load --url --watch` follows a growing profile (the live-view story):
//! p50/p90/p99/max latency of the dashboards' queries, per query and in
//! all, and the load's wall time. At the end the server must hold every row
//! of the file once (checked against a second server-less load).
//!
//! Run (the CLI and the UDF executable must be built first):
//!
//! ```text
//! cargo build --release --bins
//! cargo bench -p flamehouse-tests --bench serve
//! BENCH_READERS=16 BENCH_SNAPSHOTS=1200 cargo bench -p flamehouse-tests --bench serve
//! ```
//!
//! Env: BENCH_READERS (concurrent readers, default 8), BENCH_SNAPSHOTS
//! (default 600), BENCH_STACKS (default 3000), BENCH_STEPS (the file grows
//! in this many steps, default 10), BENCH_STEP_MS (between steps, default
//! 500).

use flamehouse::storage::server::{ServerBackend, ServerOptions};
use flamehouse::storage::Backend;
use flamehouse_fixtures::workload::{compile_workload, generate, FixtureOptions};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn env_or<T: std::str::FromStr>(k: &str, d: T) -> T {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn bin(name: &str) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    root.join("target/release").join(name)
}

fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

fn main() {
    let readers: usize = env_or("BENCH_READERS", 8);
    let snapshots: usize = env_or("BENCH_SNAPSHOTS", 600);
    let stacks: usize = env_or("BENCH_STACKS", 3000);
    let steps: usize = env_or("BENCH_STEPS", 10);
    let step_ms: u64 = env_or("BENCH_STEP_MS", 500);

    let dir = std::env::temp_dir().join(format!("flamehouse-bench-serve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let workload = compile_workload(&dir).expect("gcc compiles the workload");
    let mut o = FixtureOptions::new(&workload, dir.join("full.binpb"));
    o.snapshots = snapshots;
    o.stacks = stacks;
    let g = generate(&o).unwrap();
    let data = std::fs::read(&g.output).unwrap();
    println!(
        "profile: {} snapshots, {} stacks, {} bytes, growing in {steps} steps every {step_ms} ms; {readers} readers",
        g.snapshots, g.stacks, g.bytes
    );

    // The server: loopback, the built-in `default` user.
    let mut serve = Command::new(bin("flamehouse"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data"])
        .arg(dir.join("data"))
        .env_remove("FLAMEHOUSE_READER_PASSWORD")
        .env_remove("FLAMEHOUSE_WRITER_PASSWORD")
        .env_remove("FLAMEHOUSE_USERS")
        .stdout(Stdio::piped())
        .spawn()
        .expect("flamehouse serve");
    let mut line = String::new();
    BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line.trim().rsplit(' ').next().unwrap().to_string();

    let live = dir.join("live.binpb");
    std::fs::write(&live, &data[..data.len() / steps]).unwrap();
    let started = Instant::now();
    let mut loader = Command::new(bin("flamehouse"))
        .args(["load", "--url", &url, "--watch", "--idle-exit", "3"])
        .arg(&live)
        .stdout(Stdio::null())
        .spawn()
        .expect("flamehouse load");

    let stop = Arc::new(AtomicBool::new(false));
    let lat: Arc<Mutex<BTreeMap<&'static str, Vec<Duration>>>> = Arc::default();
    let threads: Vec<_> = (0..readers)
        .map(|i| {
            let (url, stop, lat) = (url.clone(), stop.clone(), lat.clone());
            std::thread::spawn(move || {
                let b = ServerBackend::new(&ServerOptions {
                    url,
                    ..Default::default()
                })
                .unwrap();
                // Wait for the process to appear.
                let pid = loop {
                    if stop.load(Ordering::Relaxed) {
                        return 0usize;
                    }
                    match b.query_tsv("SELECT process_id FROM flamehouse.process_list LIMIT 1") {
                        Ok(t) if !t.trim().is_empty() => break t.trim().to_string(),
                        _ => std::thread::sleep(Duration::from_millis(50)),
                    }
                };
                let queries: [(&'static str, String); 4] = [
                    ("process_list", "SELECT * FROM flamehouse.process_list".into()),
                    ("totals_series", format!("SELECT * FROM flamehouse.totals_series(process_id = {pid}, t1 = '2000-01-01', t2 = '2100-01-01', step = 5)")),
                    ("flame_peak", format!("SELECT level, label, value, self FROM flamehouse.flame_peak(process_id = {pid}, max_nodes = 2000, metric = 'bytes')")),
                    ("count", "SELECT count() FROM flamehouse.samples".into()),
                ];
                let mut errors = 0usize;
                let mut n = i;
                while !stop.load(Ordering::Relaxed) {
                    let (name, sql) = &queries[n % queries.len()];
                    n += 1;
                    let t = Instant::now();
                    match b.query_tsv(sql) {
                        Ok(_) => lat.lock().unwrap().entry(name).or_default().push(t.elapsed()),
                        Err(e) => {
                            errors += 1;
                            if errors < 3 {
                                eprintln!("reader {i}: {name}: {e}");
                            }
                        }
                    }
                }
                errors
            })
        })
        .collect();

    for part in 2..=steps {
        std::thread::sleep(Duration::from_millis(step_ms));
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&live)
            .unwrap();
        let len = f.metadata().unwrap().len() as usize;
        f.write_all(&data[len..data.len() * part / steps]).unwrap();
    }
    let status = loader.wait().unwrap();
    let load_s = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let errors: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(status.success(), "the load failed");

    let lat = lat.lock().unwrap();
    let mut all: Vec<Duration> = Vec::new();
    println!(
        "{:<14} {:>7} {:>9} {:>9} {:>9} {:>9}",
        "query", "n", "p50 ms", "p90 ms", "p99 ms", "max ms"
    );
    for (name, v) in lat.iter() {
        let mut v = v.clone();
        v.sort();
        println!(
            "{name:<14} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
            v.len(),
            pct(&v, 0.5),
            pct(&v, 0.9),
            pct(&v, 0.99),
            pct(&v, 1.0)
        );
        all.extend(v);
    }
    all.sort();
    println!(
        "{:<14} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>9.1}",
        "all",
        all.len(),
        pct(&all, 0.5),
        pct(&all, 0.9),
        pct(&all, 0.99),
        pct(&all, 1.0)
    );
    println!(
        "load --watch: {load_s:.1} s (the file grew for {:.1} s, then 3 s idle); {:.0} queries/s; {errors} failed queries",
        (steps - 1) as f64 * step_ms as f64 / 1e3,
        all.len() as f64 / load_s
    );

    // Every row once: the server's counts equal a load of the whole file
    // into a second server (a fresh directory), as the loader is the same.
    let b = ServerBackend::new(&ServerOptions {
        url: url.clone(),
        ..Default::default()
    })
    .unwrap();
    let counts = "SELECT (SELECT count() FROM flamehouse.samples), (SELECT count() FROM flamehouse.totals), (SELECT count() FROM flamehouse.stacks)";
    let live_counts = b.query_tsv(counts).unwrap();
    let _ = Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status();
    assert!(
        serve.wait().unwrap().success(),
        "serve did not stop cleanly"
    );
    let once = Command::new(bin("flamehouse"))
        .args(["load", "--data"])
        .arg(dir.join("once"))
        .arg(&g.output)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(once.success());
    let out = Command::new(bin("flamehouse"))
        .args(["sql", "--data"])
        .arg(dir.join("once"))
        .arg(counts)
        .output()
        .unwrap();
    let once_counts = String::from_utf8_lossy(&out.stdout).into_owned();
    println!(
        "rows (samples, totals, stacks): live {} / one load {}",
        live_counts.trim(),
        once_counts.trim()
    );
    assert_eq!(
        live_counts, once_counts,
        "the live load differs from one load"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
