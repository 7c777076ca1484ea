//! Benchmark (issue 10, section 6, ingest): the generated fleet of the
//! `continuous` bench (`fleet/mod.rs`: 100 series, 10 s CPU profiles) loaded
//! from files as `flamehouse load --service S S-*` does
//! (`cp_batch::load_files`: many profiles per insert, decoding on a reader
//! thread), against the engine's own bulk insert of the SAME rows: every
//! table the load wrote (frames, stacks, cp_series, cp_stacks, cp_samples,
//! cp_profiles) exported to RowBinary files and inserted with `INSERT ...
//! SELECT FROM file()` into a fresh database with the full schema, so the
//! materialized views (rollup, label values, stack functions) do the same
//! work; `file()` reads with the tables' own types and, in a second fresh
//! database, with LowCardinality read as its plain type (as the loader
//! sends it, faster), and the faster of the two is the baseline. The
//! loaded database's merges are stopped before the copies are timed (the
//! load resumes them when it ends; they would take cores from the copy). Both for pprof (gzipped, as Go writes it) and for `perf script`
//! text of the same draws (a slice: text is large).
//!
//! ```text
//! cargo build --release --bins
//! cargo bench -p flamehouse-tests --bench continuous_ingest                 # 24 h of pprof (43,200 files, 10.4 M rows) + 10 min of perf script
//! BENCH_HOURS=1 BENCH_PERF_MINUTES=2 cargo bench -p flamehouse-tests --bench continuous_ingest   # quick
//! ```
//!
//! Env: BENCH_HOURS (pprof, default 24; 0 skips it), BENCH_PERF_MINUTES (perf script,
//! default 10; 0 skips it), BENCH_STACKS (default 6), BENCH_POOL (default
//! 800), BENCH_BATCH_ROWS (default the loader's), BENCH_KEEP=1 keeps the
//! files. Prints the perf script parser's MB/s alone, and where the load's time goes (reading + decoding + rows on
//! one thread, without the engine) and the load average.

#[path = "fleet/mod.rs"]
mod fleet;

// The `flamehouse` binary's allocator: this bench runs its load path in
// process.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use flamehouse::ingest::continuous::{
    reader_rows_cached, ContinuousOptions, CpProfileRow, CpSampleRow, CpStackRow, LoadCache,
    SeriesRow,
};
use flamehouse::ingest::cp_batch::{load_files, BatchOptions};
use flamehouse::storage::rows::{FrameRow, RowBinary, StackRow};
use flamehouse::storage::schema::{migrate, SchemaOptions};
use flamehouse::storage::{column_names, read_structure, sql_string};
use flamehouse_tests::engine;
use fleet::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

fn env_or<T: std::str::FromStr>(k: &str, d: T) -> T {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

fn q(sql: &str) -> String {
    engine()
        .query_tsv(sql)
        .unwrap_or_else(|e| panic!("{e}\n{sql}"))
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// CPU seconds this process has used so far, every thread (the embedded
/// engine's included): `utime + stime` of `/proc/self/stat`, in the
/// kernel's fixed 100 ticks per second.
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces): state is the
    // first, utime the 12th, stime the 13th.
    let after = stat.rsplit_once(')').map_or("", |(_, a)| a);
    let f: Vec<f64> = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|x| x.parse().ok())
        .collect();
    f.iter().sum::<f64>() / 100.0
}

fn progress(s: &str) {
    println!("  {s}");
    let _ = std::io::stdout().flush();
}

/// The tables a load writes, with the structure the loader inserts.
const TABLES: [(&str, &str); 6] = [
    (FrameRow::TABLE, FrameRow::STRUCTURE),
    (StackRow::TABLE, StackRow::STRUCTURE),
    (SeriesRow::TABLE, SeriesRow::STRUCTURE),
    (CpStackRow::TABLE, CpStackRow::STRUCTURE),
    (CpSampleRow::TABLE, CpSampleRow::STRUCTURE),
    (CpProfileRow::TABLE, CpProfileRow::STRUCTURE),
];

fn fresh(db: &str) {
    q(&format!("DROP DATABASE IF EXISTS {db}"));
    migrate(
        engine(),
        &SchemaOptions {
            database: db.parse().unwrap(),
            cluster: None,
        },
    )
    .unwrap();
}

/// Stops the merges of `db`'s tables and waits until none runs.
fn quiet_merges(db: &str) {
    for t in q(&format!(
        "SELECT name FROM system.tables WHERE database = '{db}' AND engine LIKE '%MergeTree'"
    ))
    .lines()
    {
        q(&format!("SYSTEM STOP MERGES {db}.`{t}`"));
    }
    let t = Instant::now();
    while q(&format!(
        "SELECT count() FROM system.merges WHERE database = '{db}'"
    ))
    .trim()
        != "0"
        && t.elapsed().as_secs() < 600
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Reading, decoding and row building alone (one thread, no engine): ms.
fn build_only(files: &[PathBuf], opts: &ContinuousOptions) -> (f64, usize) {
    let t = Instant::now();
    let mut rows = 0;
    // As the loader: one cache for the load.
    let mut cache = LoadCache::default();
    for f in files {
        let file = std::fs::File::open(f).unwrap();
        let format = flamehouse::formats::detect_open(&file, f).unwrap();
        let mut reader = format.spec().open(file, f, &Default::default()).unwrap();
        let mut sym = flamehouse::symbolize::Symbolizer::new(Default::default());
        for r in reader_rows_cached(&mut *reader, &mut sym, "bench", opts, &mut cache).unwrap() {
            rows += r.samples.len();
        }
    }
    (t.elapsed().as_secs_f64(), rows)
}

/// The perf script parser alone on texts already in memory (one thread,
/// best of 3 passes), and the share of the text's identity hash (XXH3-64
/// of the file's bytes: part of every stored profile id).
fn parse_alone(files: &[PathBuf], say: &mut dyn FnMut(String)) {
    let texts: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    let bytes: usize = texts.iter().map(String::len).sum();
    let opts = flamehouse::formats::perf::PerfOptions::default();
    let (mut parse_s, mut hash_s) = (f64::MAX, f64::MAX);
    for _ in 0..3 {
        let t = Instant::now();
        for (f, text) in files.iter().zip(&texts) {
            flamehouse::formats::perf::parse(text, f, 0, &opts).unwrap();
        }
        parse_s = parse_s.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        for text in &texts {
            std::hint::black_box(flamehouse::formats::text::identity("perf", text));
        }
        hash_s = hash_s.min(t.elapsed().as_secs_f64());
    }
    say(format!(
        "perf script: parse alone (text in memory, one thread, best of 3): {:.1} MB in {parse_s:.3} s = {:.0} MB/s; of which the identity hash (XXH3) {hash_s:.3} s = {:.0} MB/s (load average {})",
        bytes as f64 / 1e6,
        bytes as f64 / 1e6 / parse_s,
        bytes as f64 / 1e6 / hash_s,
        loadavg()
    ));
}

/// Loads `gen`'s files into `db` per service, then bulk-inserts the same
/// rows into `db`_bulk0 and `db`_bulk1 (see below); checks both hold the same; prints and returns the
/// figures.
fn measure(name: &str, db: &str, gen: &Generated, dir: &Path, say: &mut dyn FnMut(String)) {
    let batch_rows = env_or("BENCH_BATCH_ROWS", BatchOptions::default().batch_rows);
    let (build_s, built) = build_only(&gen.files, &ContinuousOptions::default());
    say(format!(
        "{name}: read + decode + rows alone (one thread, no engine): {} files in {build_s:.2} s = {:.3} ms per file, {:.0} rows/s (load average {})",
        gen.files.len(),
        build_s * 1e3 / gen.files.len() as f64,
        built as f64 / build_s,
        loadavg()
    ));
    fresh(db);
    let cpu0 = cpu_s();
    let t = Instant::now();
    let mut loaded = 0usize;
    let mut batches = 0usize;
    for service in SERVICES {
        let files: Vec<PathBuf> = gen
            .files
            .iter()
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&format!("{service}-")))
            })
            .cloned()
            .collect();
        let opts = ContinuousOptions {
            database: db.parse().unwrap(),
            service: Some(service.to_string()),
            ..Default::default()
        };
        let bo = BatchOptions {
            batch_rows,
            ..Default::default()
        };
        let s =
            load_files(engine(), &files, &opts, &bo, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((s.failed, s.expired, s.already_stored), (0, 0, 0), "{s:?}");
        loaded += s.sample_rows;
        batches += s.batches;
        progress(&format!(
            "{name}: loaded {service}: {} files, {loaded} rows so far, {:.1?}, load average {}",
            files.len(),
            t.elapsed(),
            loadavg()
        ));
    }
    let load_s = t.elapsed().as_secs_f64();
    let load_cpu = cpu_s() - cpu0;
    let la_load = loadavg();
    // The load resumed its database's merges when it ended: stopped again
    // (and the running ones waited for), so that they do not take cores
    // from the bulk copy timed below.
    quiet_merges(db);
    let counts = |db: &str| {
        q(&format!(
            "SELECT (SELECT count() FROM {db}.cp_samples), (SELECT sum(value) FROM {db}.cp_samples WHERE profile_type LIKE '%:nanoseconds'), \
                    (SELECT sum(value) FROM {db}.cp_samples_1m), (SELECT count() FROM {db}.cp_series), (SELECT count() FROM {db}.cp_label_values), \
                    (SELECT count() FROM {db}.stacks), (SELECT count() FROM {db}.stack_functions), (SELECT count() FROM {db}.frames), \
                    (SELECT count() FROM {db}.cp_profiles), (SELECT count() FROM {db}.cp_stacks)"
        ))
    };
    let c = counts(db);
    let f: Vec<i64> = c.trim().split('\t').map(|x| x.parse().unwrap()).collect();
    let rows = f[0] as u64;
    assert_eq!(rows as usize, loaded, "every loaded row is stored");
    assert_eq!(rows as usize, built, "as many rows as built");
    assert_eq!(f[1], gen.cpu_total, "stored cpu total = generated total");
    let load_rate = rows as f64 / load_s;
    say(format!(
        "{name}: load: {} files, {rows} sample rows in {batches} batches ({} series rows, {} stacks, {} frames, {} profile rows) in {load_s:.2} s = {load_rate:.0} rows/s, {:.3} ms per file; {load_cpu:.2} CPU seconds, {:.2} cores busy (load average {la_load})",
        gen.files.len(),
        f[3],
        f[5],
        f[7],
        f[8],
        load_s * 1e3 / gen.files.len() as f64,
        load_cpu / load_s,
    ));

    // The engine's bulk insert of the same rows, views included: read by
    // file() with the tables' own types and with LowCardinality read as
    // its plain type (`read_structure`, what the loader sends), each into
    // a fresh schema; the faster is the baseline.
    let mut exports = Vec::new();
    for (t, structure) in TABLES {
        let path = dir.join(format!("{t}.rowbinary"));
        let cols = column_names(structure).join(", ");
        q(&format!(
            "INSERT INTO FUNCTION file({}, 'RowBinary', {}) SELECT {cols} FROM {db}.{t}",
            sql_string(&path.display().to_string()),
            sql_string(structure)
        ));
        exports.push((t, structure, path));
    }
    let mut bulk_s = f64::MAX;
    let mut bulk_cpu = 0.0;
    let mut la_bulk = String::new();
    for (k, plain) in [(0, false), (1, true)] {
        let bulk = format!("{db}_bulk{k}");
        fresh(&bulk);
        for (t, _) in TABLES {
            q(&format!("SYSTEM STOP MERGES {bulk}.{t}"));
        }
        let cpu0 = cpu_s();
        let t = Instant::now();
        for (table, structure, path) in &exports {
            let read = if plain {
                read_structure(structure)
            } else {
                structure.to_string()
            };
            q(&format!(
                "INSERT INTO {bulk}.{table} ({}) SELECT * FROM file({}, RowBinary, {})",
                column_names(structure).join(", "),
                sql_string(&path.display().to_string()),
                sql_string(&read)
            ));
        }
        let s = t.elapsed().as_secs_f64();
        let cpu = cpu_s() - cpu0;
        let la = loadavg();
        for (t, _) in TABLES {
            q(&format!("SYSTEM START MERGES {bulk}.{t}"));
        }
        assert_eq!(
            counts(&bulk),
            c,
            "the bulk copy holds the same rows, views included"
        );
        progress(&format!(
            "{name}: bulk copy reading {}: {s:.2} s, {cpu:.2} CPU seconds (load average {la})",
            if plain {
                "LowCardinality as plain types"
            } else {
                "the tables' own types"
            }
        ));
        if s < bulk_s {
            (bulk_s, bulk_cpu, la_bulk) = (s, cpu, la);
        }
    }
    let bulk_rate = rows as f64 / bulk_s;
    say(format!(
        "{name}: engine bulk INSERT ... SELECT FROM file() of the same rows into the 6 tables of a fresh schema (views included), the faster reading: {bulk_s:.2} s = {bulk_rate:.0} rows/s (load average {la_bulk})"
    ));
    // However well reading and the engine overlap, the load cannot take
    // less wall time than its CPU seconds spread over every core.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    say(format!(
        "{name}: CPU seconds, load {load_cpu:.2} vs bulk copy {bulk_cpu:.2} ({:.1}x); on {cores} cores the load needs at least {:.2} s, so its ratio is at most {:.3}x",
        load_cpu / bulk_cpu.max(1e-9),
        load_cpu / cores as f64,
        bulk_s / (load_cpu / cores as f64).max(1e-9),
    ));
    say(format!(
        "RATIO {name} ingest / bulk insert = {:.3}x (goal >= 0.5) {}",
        load_rate / bulk_rate,
        if load_rate / bulk_rate >= 0.5 {
            "met"
        } else {
            "MISSED"
        }
    ));
    for (_, _, p) in &exports {
        let _ = std::fs::remove_file(p);
    }
    for k in 0..2 {
        q(&format!("DROP DATABASE {db}_bulk{k}"));
    }
    q(&format!("DROP DATABASE {db}"));
}

fn main() {
    let hours = env_or("BENCH_HOURS", 24i64).max(0);
    let perf_minutes = env_or("BENCH_PERF_MINUTES", 10i64).max(0);
    let stacks = env_or("BENCH_STACKS", 6usize).max(1);
    let pool = env_or("BENCH_POOL", 800usize).max(40);
    let keep = std::env::var_os("BENCH_KEEP").is_some_and(|v| v != "0");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let start_ms = (now_ms / 3_600_000 - hours) * 3_600_000;
    let mut summary: Vec<String> = Vec::new();
    let mut say = |line: String| {
        println!("{line}");
        summary.push(line);
    };
    let base = flamehouse_fixtures::testing::temp_path("bench-cpingest");

    // pprof: the whole range from files (BENCH_HOURS=0 skips it).
    if hours > 0 {
        let dir = base.join("pprof");
        std::fs::create_dir_all(&dir).unwrap();
        let t = Instant::now();
        let ticks = hours * 3600 * 1000 / TICK_MS;
        let gen = generate_pprof(&dir, start_ms, ticks, stacks, pool);
        say(format!(
            "pprof: generated {} files ({hours} h x 100 series, {stacks} stacks per series and profile), {:.1} MB, {} samples in {:.1?}",
            gen.files.len(),
            gen.bytes as f64 / 1e6,
            gen.samples,
            t.elapsed()
        ));
        measure("pprof", "cpi_pprof", &gen, &dir, &mut say);
        if !keep {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    // perf script: a slice of the same draws.
    if perf_minutes > 0 {
        let dir = base.join("perf");
        std::fs::create_dir_all(&dir).unwrap();
        let t = Instant::now();
        let ticks = perf_minutes * 60 * 1000 / TICK_MS;
        let start = (now_ms / 3_600_000 - 1) * 3_600_000;
        let gen = generate_perf(&dir, start, ticks, stacks, pool);
        say(format!(
            "perf script: generated {} files ({perf_minutes} min x 100 series), {:.1} MB of text, {} distinct samples in {:.1?}",
            gen.files.len(),
            gen.bytes as f64 / 1e6,
            gen.samples,
            t.elapsed()
        ));
        parse_alone(&gen.files, &mut say);
        measure("perf script", "cpi_perf", &gen, &dir, &mut say);
        if !keep {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }

    println!();
    println!("===== SUMMARY (continuous ingest bench) =====");
    for l in &summary {
        println!("{l}");
    }
    println!("load average at end: {}", loadavg());
    if keep {
        println!("kept {}", base.display());
    } else {
        let _ = std::fs::remove_dir_all(&base);
    }
}
