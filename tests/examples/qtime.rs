//! Times queries on a saved engine data directory, in process (no HTTP):
//! `cargo run --release -p flamehouse-tests --example qtime -- DIR RUNS
//! (FILE.sql | -e SQL)...` prints the minimum and median of RUNS runs after
//! one warm-up, and the first line of the answer. `{N}` in a query is
//! replaced by a new number on every run (inserts that the engine does not
//! deduplicate, `IN` lists its query condition cache has not seen). For
//! timing pieces of the bench's queries (`BENCH_SAVE_TO`, `BENCH_SQL_DIR`).

use flamehouse::storage::engine::{Engine, EngineOptions};
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("DIR");
    let runs: usize = args
        .next()
        .expect("RUNS")
        .parse::<usize>()
        .expect("RUNS")
        .max(1);
    let engine = Engine::open(&EngineOptions {
        data_dir: Some(dir.into()),
        ..Default::default()
    })
    .expect("open");
    let mut queries = Vec::new();
    while let Some(a) = args.next() {
        if a == "-e" {
            let sql = args.next().expect("SQL");
            queries.push((sql.chars().take(60).collect::<String>(), sql));
        } else {
            queries.push((a.clone(), std::fs::read_to_string(&a).expect("read")));
        }
    }
    for (name, sql) in queries {
        // `{N}` in a query: a new number each run (distinct inserts).
        let mut n = std::process::id() as u64 * 1000;
        let mut next = || {
            n += 1;
            sql.replace("{N}", &n.to_string())
        };
        let first = engine.query_tsv(&next()).unwrap_or_else(|e| panic!("{e}"));
        let mut t = Vec::new();
        for _ in 0..runs {
            let q = next();
            let s = Instant::now();
            engine.query_tsv(&q).expect("query");
            t.push(s.elapsed().as_secs_f64() * 1000.0);
        }
        t.sort_by(f64::total_cmp);
        println!(
            "{:8.2} ms min {:8.2} ms med  {name}  -> {}",
            t[0],
            t[t.len() / 2],
            first
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(60)
                .collect::<String>()
        );
    }
    // The engine's static destructors crash once queries ran: leave at once.
    extern "C" {
        fn _exit(status: std::ffi::c_int) -> !;
    }
    // SAFETY: ends the process; nothing is left to flush but stdout.
    use std::io::Write;
    let _ = std::io::stdout().flush();
    unsafe { _exit(0) }
}
