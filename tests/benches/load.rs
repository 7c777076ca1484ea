//! Benchmark: loading a one-hour MemHawk profile with the `flamehouse` CLI
//! (throughput and peak memory, measured on the loader process alone),
//! against the engine's own bulk insert of the same rows, plus the latencies
//! of the memory views on the loaded data.
//!
//! Run (the CLI and the UDF executable must be built first; the bench runs
//! them from `target/release/`):
//!
//! ```text
//! cargo build --release -p flamehouse -p flamehouse-udf
//! cargo bench -p flamehouse-tests --bench load
//! BENCH_SNAPSHOTS=600 cargo bench -p flamehouse-tests --bench load   # quick
//! ```
//!
//! Env: BENCH_SNAPSHOTS (default 3600 one-second snapshots), BENCH_CHANGED
//! (changed traces per snapshot, default 5000), BENCH_STACKS (distinct
//! traces, default 20000), BENCH_FRAMES (distinct frame addresses, default
//! 3000), BENCH_RUNS (view runs after the warm-up, default 3), BENCH_KEEP=1
//! keeps the temporary directory, BENCH_DIAG=1 adds where-the-time-goes
//! diagnostics (a second load into a schema without `stack_functions_mv`,
//! and the bulk insert with a copy of that view; slow at the defaults).

use flamehouse::formats::binpb::{
    AllocSummary, ElfInfo, ProcessInfo, Segment, Snapshot, Stacktrace, StacktracePtr,
    TracedAllocSummary, PROFILER_TRACE_BIT,
};
use flamehouse::storage::engine::{Engine, EngineOptions};
use flamehouse::storage::rows::{RowBinary, SampleRow};
use flamehouse::storage::sql_string;
use flamehouse_fixtures::binpb_writer::BinpbWriter;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

extern "C" {
    fn _exit(status: std::ffi::c_int) -> !;
}

fn env_or<T: std::str::FromStr>(k: &str, d: T) -> T {
    std::env::var(k)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(d)
}

const MAIN_PATH: &str = "/nonexistent/flamehouse-bench/bin/bench-app";
const MAIN_BIAS: u64 = 0x5555_5555_4000;
const MAIN_TEXT: (u64, u64) = (0x1000, 0x40_0000);
const LIB_PATH: &str = "/nonexistent/flamehouse-bench/lib/libbench.so.1";
const LIB_BIAS: u64 = 0x7fff_f7a0_0000;
const LIB_TEXT: (u64, u64) = (0x2000, 0x10_0000);
const START_NS: u64 = 1_750_000_000_000_000_000;

/// Shape of a generated profile.
#[derive(Debug, Clone, Copy)]
struct Shape {
    snapshots: usize,
    changed: usize,
    stacks: usize,
    frames: usize,
    seed: u64,
}

/// What generation wrote.
#[derive(Debug)]
struct Generated {
    path: PathBuf,
    bytes: u64,
    /// `changed` entries over all snapshots (the stack values).
    entries: u64,
    elapsed: Duration,
}

/// Per-trace state: latest absolute values and the typical block size.
#[derive(Clone, Copy, Default)]
struct TraceState {
    v: AllocSummary,
    unit: i64,
    defined: bool,
}

/// Distinct synthetic stacks (frame indexes, root first): a fixed start-up
/// chain, then frames drawn per depth band with a skew (so prefixes are
/// shared, as in a real call graph), then a few library frames ending in an
/// allocator entry point. Indexes `< main_n` are main-program addresses,
/// the rest library addresses.
fn make_stacks(rng: &mut StdRng, shape: &Shape) -> (Vec<Vec<u32>>, usize) {
    let lib_n = (shape.frames / 6).max(16);
    let main_n = shape.frames.saturating_sub(lib_n).max(64);
    // Main: 0 = _start, 1 = main, the rest in 30 depth bands.
    let bands = 30usize;
    let band = ((main_n - 2) / bands).max(1);
    // Library: 0 = __libc_start_main, 1..9 = allocator entry points, rest helpers.
    let lib = |i: usize| (main_n + i) as u32;
    let mut seen: HashSet<Vec<u32>> = HashSet::with_capacity(shape.stacks);
    let mut out = Vec::with_capacity(shape.stacks);
    while out.len() < shape.stacks {
        let depth = rng.gen_range(10..=30usize);
        let mut st = vec![lib(0), 0, 1];
        let tail = rng.gen_range(1..=3usize);
        let middle = depth - 3 - tail;
        for d in 0..middle {
            let u: f64 = rng.gen();
            let k = ((band as f64) * u * u * u) as usize;
            let i = 2 + (d % bands) * band + k.min(band - 1);
            st.push(i.min(main_n - 1) as u32);
        }
        for _ in 1..tail {
            st.push(lib(rng.gen_range(9..lib_n)));
        }
        st.push(lib(rng.gen_range(1..9)));
        if seen.insert(st.clone()) {
            out.push(st);
        }
    }
    (out, main_n)
}

/// Writes a profile of `shape.snapshots` one-second snapshots.
fn generate(path: &Path, shape: &Shape) -> std::io::Result<Generated> {
    let started = Instant::now();
    let mut rng = StdRng::seed_from_u64(shape.seed);
    let (stacks, main_n) = make_stacks(&mut rng, shape);
    let lib_n = shape.frames.max(main_n + 16) - main_n;
    // Absolute addresses (return address minus 1), spread over the text.
    let addr = |i: u32| -> u64 {
        let i = u64::from(i);
        let m = main_n as u64;
        if i < m {
            MAIN_BIAS + MAIN_TEXT.0 + (i * (MAIN_TEXT.1 - 0x100) / m) + (i * 7 % 61)
        } else {
            let j = i - m;
            LIB_BIAS + LIB_TEXT.0 + (j * (LIB_TEXT.1 - 0x100) / lib_n as u64) + (j * 5 % 37)
        }
    };
    let header = ProcessInfo {
        process_short_name: "bench-app".into(),
        process_full_path: MAIN_PATH.into(),
        pid: 31337,
        start_timestamp: START_NS,
    };
    let file = std::fs::File::create(path)?;
    let mut w = BinpbWriter::new(std::io::BufWriter::with_capacity(1 << 20, file), &header)?;
    let modules = vec![
        ElfInfo {
            filename: String::new(),
            addr: MAIN_BIAS,
            segments: vec![
                Segment {
                    addr: 0,
                    size: 0x1000,
                },
                Segment {
                    addr: MAIN_TEXT.0,
                    size: MAIN_TEXT.1,
                },
                Segment {
                    addr: MAIN_TEXT.0 + MAIN_TEXT.1,
                    size: 0x2_0000,
                },
            ],
        },
        ElfInfo {
            filename: LIB_PATH.into(),
            addr: LIB_BIAS,
            segments: vec![
                Segment {
                    addr: 0,
                    size: 0x2000,
                },
                Segment {
                    addr: LIB_TEXT.0,
                    size: LIB_TEXT.1,
                },
            ],
        },
    ];

    let n = shape.snapshots;
    // Trace ids 1..=stacks; 0 is MemHawk's all-zero start-up trace.
    let mut traces = vec![TraceState::default(); stacks.len() + 1];
    for t in traces.iter_mut() {
        // Block sizes log-uniform in 16 B .. 64 KiB.
        t.unit = (16.0 * 4096f64.powf(rng.gen::<f64>())) as i64;
    }
    let mut frame_defined = vec![false; main_n + lib_n];
    let mut stamp = vec![usize::MAX; traces.len()];
    let mut profiler = AllocSummary::default();
    let mut total = AllocSummary::default();
    let mut entries = 0u64;
    let mut chosen: Vec<usize> = Vec::with_capacity(shape.changed);
    for s in 0..n {
        // Traces appear over the first half: a quarter at once, then the rest.
        let born = if n <= 1 {
            stacks.len()
        } else {
            let grown = stacks.len() / 4 + stacks.len() * 3 * s / (2 * n);
            grown.min(stacks.len()).max(shape.changed.min(stacks.len()))
        };
        chosen.clear();
        if shape.changed >= born {
            chosen.extend(1..=born);
        } else {
            while chosen.len() < shape.changed {
                // Half hot (a few traces change all the time), half uniform.
                let i = if rng.gen_bool(0.5) {
                    let u: f64 = rng.gen();
                    ((born as f64) * u * u) as usize
                } else {
                    rng.gen_range(0..born)
                };
                let id = i.min(born - 1) + 1;
                if stamp[id] != s {
                    stamp[id] = s;
                    chosen.push(id);
                }
            }
            chosen.sort_unstable();
        }
        // Growth for two thirds of the run, then frees bring it down.
        let growing = s * 3 < n * 2;
        let mut snap = Snapshot {
            timestamp: START_NS + s as u64 * 1_000_000_000 + rng.gen_range(0..3_000_000),
            ..Default::default()
        };
        if s == 0 {
            snap.loaded_so = modules.clone();
            snap.changed.push(TracedAllocSummary {
                trace_id: 0,
                actual: Some(AllocSummary::default()),
            });
            entries += 1;
        }
        snap.changed.reserve(chosen.len() + 1);
        for &id in &chosen {
            let t = &mut traces[id];
            if !t.defined {
                t.defined = true;
                let st = &stacks[id - 1];
                for &f in st {
                    if !frame_defined[f as usize] {
                        frame_defined[f as usize] = true;
                        snap.ptr_ids.push(StacktracePtr {
                            ptr_id: f + 1,
                            ptr_addr: addr(f) - 1,
                        });
                    }
                }
                snap.stacktraces.push(Stacktrace {
                    trace_id: id as u32,
                    // Leaf first on the wire.
                    ptr_id: st.iter().rev().map(|f| f + 1).collect(),
                });
            }
            let old = t.v;
            let allocs = rng.gen_range(1..=8i64);
            let frees = if growing {
                rng.gen_range(0..=allocs)
            } else {
                rng.gen_range(0..=allocs * 2)
            }
            .min(old.active + allocs);
            let mut bytes = 0i64;
            for _ in 0..allocs {
                bytes += t.unit + rng.gen_range(0..=t.unit / 4);
            }
            let active = old.active + allocs - frees;
            let size = if active == 0 {
                0
            } else {
                (old.size + bytes - frees * (t.unit + t.unit / 8)).max(active)
            };
            t.v = AllocSummary {
                size,
                active,
                overhead: active * 16,
                total_count: old.total_count + allocs as u64,
                total_bytes: old.total_bytes + bytes as u64,
            };
            add_delta(&mut total, &old, &t.v);
            snap.changed.push(TracedAllocSummary {
                trace_id: id as u32,
                actual: Some(t.v),
            });
        }
        entries += chosen.len() as u64;
        // The profiler's own allocations (empty stack), every 10 s.
        if s % 10 == 0 {
            let old = profiler;
            profiler.total_count += 3;
            profiler.total_bytes += 3 * 4096;
            profiler.active = (profiler.active + 1).min(64);
            profiler.size = profiler.active * 4096;
            profiler.overhead = profiler.active * 16;
            add_delta(&mut total, &old, &profiler);
            snap.changed.push(TracedAllocSummary {
                trace_id: PROFILER_TRACE_BIT,
                actual: Some(profiler),
            });
            entries += 1;
        }
        snap.total = Some(total);
        w.write_snapshot(&snap)?;
    }
    let bytes = w.offset();
    w.into_inner().flush()?;
    Ok(Generated {
        path: path.to_path_buf(),
        bytes,
        entries,
        elapsed: started.elapsed(),
    })
}

fn add_delta(total: &mut AllocSummary, old: &AllocSummary, new: &AllocSummary) {
    total.size += new.size - old.size;
    total.active += new.active - old.active;
    total.overhead += new.overhead - old.overhead;
    total.total_count += new.total_count - old.total_count;
    total.total_bytes += new.total_bytes - old.total_bytes;
}

/// A release binary of the workspace next to the bench executable.
fn release_binary(name: &str) -> PathBuf {
    flamehouse_fixtures::testing::built_binary(name)
}

/// Peak resident set of a running process (`VmHWM`, KiB).
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// One finished subprocess: wall time, peak RSS, CPU per thread group and
/// its output.
struct Measured {
    elapsed: Duration,
    peak_kib: u64,
    stdout: String,
    /// CPU seconds (user + system) per thread name: the main thread
    /// (decoding, symbolizing, encoding, and the engine calls it makes
    /// itself), then the engine's threads by name (`MergeMutate` background
    /// merges, `QueryPipelineEx` query execution, ...).
    cpu: Vec<(String, f64)>,
}

impl Measured {
    fn cpu_line(&self) -> String {
        let total: f64 = self.cpu.iter().map(|(_, s)| s).sum();
        let mut by_cpu = self.cpu.clone();
        by_cpu.sort_by(|a, b| b.1.total_cmp(&a.1));
        let parts: Vec<String> = by_cpu
            .iter()
            .filter(|(_, s)| *s >= 0.05)
            .map(|(g, s)| format!("{g} {s:.1} s"))
            .collect();
        format!("CPU {total:.1} s = {}", parts.join(", "))
    }
}

/// Adds the CPU ticks (utime + stime) every thread of `pid` used since the
/// last call to the group of its current name: pool threads are renamed for
/// the job they run (`QueryPipelineEx`, `MergeMutate`, ...), so each
/// interval is charged to the name the thread had at its end.
fn thread_ticks(pid: u32, last: &mut HashMap<u32, u64>, groups: &mut BTreeMap<String, u64>) {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for e in dir.flatten() {
        let Ok(tid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        // After the name: state (field 3) ... utime (14), stime (15).
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let ticks = f.get(11).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0)
            + f.get(12).and_then(|x| x.parse::<u64>().ok()).unwrap_or(0);
        let prev = last.insert(tid, ticks).unwrap_or(0);
        let g = if tid == pid {
            "main thread".to_string()
        } else {
            comm.to_string()
        };
        *groups.entry(g).or_default() += ticks.saturating_sub(prev);
    }
}

/// Runs `cmd` and measures its wall time and peak RSS.
///
/// The peak is the child's own `VmHWM` from `/proc/<pid>/status`, polled
/// every 50 ms while it runs (it is a high-water mark, so polling misses at
/// most the growth of the last 50 ms before exit). `getrusage(RUSAGE_CHILDREN)`
/// is unreliable here: std spawns children with posix_spawn (vfork-style,
/// CLONE_VM), so until exec the child runs on the parent's mm, and exec
/// folds the old mm's high-water mark into the process's `maxrss`
/// (`setmax_mm_hiwater_rss` in the kernel), so a child of a large process
/// reports at least the parent's RSS; it is also the maximum over all
/// waited-for children rather than one child. `VmHWM` belongs to the mm the
/// child got at exec, so it is the loader's own peak.
fn run_measured(cmd: &mut Command, label: &str) -> Measured {
    let out = tempfile_path(&format!("{label}.out"));
    let err = tempfile_path(&format!("{label}.err"));
    cmd.stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap());
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("spawning {cmd:?}: {e}"));
    let pid = child.id();
    let mut peak = 0u64;
    let (mut last, mut groups) = (HashMap::new(), BTreeMap::new());
    let status = loop {
        // Read before try_wait: once the child has exited its mm is gone.
        if let Some(kib) = vm_hwm_kib(pid) {
            peak = peak.max(kib);
        }
        thread_ticks(pid, &mut last, &mut groups);
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let elapsed = started.elapsed();
    let stdout = std::fs::read_to_string(&out).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    assert!(
        status.success(),
        "{cmd:?} failed ({status}):\n{stdout}\n{stderr}"
    );
    Measured {
        elapsed,
        peak_kib: peak,
        stdout,
        // USER_HZ is 100 on Linux.
        cpu: groups
            .into_iter()
            .map(|(g, t)| (g, t as f64 / 100.0))
            .collect(),
    }
}

fn work_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| flamehouse_fixtures::testing::temp_path("bench-load"))
        .clone()
}

fn tempfile_path(name: &str) -> PathBuf {
    work_dir().join(name)
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn q(engine: &Engine, sql: &str) -> String {
    engine
        .query_tsv(sql)
        .unwrap_or_else(|e| panic!("{e}\n{sql}"))
}

/// One warm-up, then the median of `runs`; also the output's row count.
fn median_time(engine: &Engine, runs: usize, sql: &str) -> (Duration, usize) {
    let _ = q(engine, sql);
    let mut times = Vec::new();
    let mut rows = 0;
    for _ in 0..runs {
        let t = Instant::now();
        rows = q(engine, sql).lines().count();
        times.push(t.elapsed());
    }
    times.sort();
    (times[times.len() / 2], rows)
}

fn main() {
    let shape = Shape {
        snapshots: env_or("BENCH_SNAPSHOTS", 3600usize).max(6),
        changed: env_or("BENCH_CHANGED", 5000),
        stacks: env_or("BENCH_STACKS", 20_000usize).max(1),
        frames: env_or("BENCH_FRAMES", 3000usize).max(100),
        seed: 7,
    };
    let runs: usize = env_or("BENCH_RUNS", 3usize).max(1);
    let keep = std::env::var_os("BENCH_KEEP").is_some_and(|v| v != "0");
    let diag = std::env::var_os("BENCH_DIAG").is_some_and(|v| v != "0");
    let dir = work_dir();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cli = release_binary("flamehouse");
    let _ = release_binary(flamehouse_udf::catalog::BINARY);
    println!(
        "shape: {} snapshots x {} changed traces, {} distinct traces, {} frame addresses; cli {}",
        shape.snapshots,
        shape.changed,
        shape.stacks,
        shape.frames,
        cli.display()
    );
    let mut summary: Vec<String> = Vec::new();

    // 1. Generate the profiles.
    let full = generate(&dir.join("memhawk_bench_31337_protobuf.binpb"), &shape).unwrap();
    let short_shape = Shape {
        snapshots: shape.snapshots / 6,
        ..shape
    };
    let short = generate(
        &dir.join("memhawk_bench-short_31337_protobuf.binpb"),
        &short_shape,
    )
    .unwrap();
    for (name, g, sh) in [("full", &full, &shape), ("1/6", &short, &short_shape)] {
        let line = format!(
            "generate {name:<4}: {} snapshots, {} stack values, {:.1} MB in {:.1?} ({:.0} values/s)",
            sh.snapshots,
            g.entries,
            g.bytes as f64 / 1e6,
            g.elapsed,
            g.entries as f64 / g.elapsed.as_secs_f64()
        );
        println!("{line}");
        summary.push(line);
    }

    // 2. The loader, as a subprocess, before this process opens an engine.
    let full_data = dir.join("data-full");
    let short_data = dir.join("data-short");
    let flamehouse = |data: &Path, args: &[&str]| {
        let mut c = Command::new(&cli);
        c.arg(args[0]).arg("--data").arg(data).args(&args[1..]);
        c
    };
    let init = run_measured(&mut flamehouse(&full_data, &["init"]), "init");
    let line = format!(
        "engine start + schema (`init`): {:.2} s, peak RSS {:.0} MiB",
        init.elapsed.as_secs_f64(),
        mib(init.peak_kib)
    );
    println!("{line}");
    summary.push(line);
    let load_short = run_measured(
        &mut flamehouse(&short_data, &["load", short.path.to_str().unwrap()]),
        "load-short",
    );
    print!("{}", load_short.stdout);
    let load_full = run_measured(
        &mut flamehouse(&full_data, &["load", full.path.to_str().unwrap()]),
        "load-full",
    );
    print!("{}", load_full.stdout);
    let loader_s = load_full.elapsed.as_secs_f64();
    let loader_rate = full.entries as f64 / loader_s;
    for (name, g, m) in [("full", &full, &load_full), ("1/6", &short, &load_short)] {
        let line = format!(
            "load {name:<4}: {} stack values in {:.2} s = {:.0} stack values/s ({:.1} MB/s of file); loader peak RSS {:.0} MiB",
            g.entries,
            m.elapsed.as_secs_f64(),
            g.entries as f64 / m.elapsed.as_secs_f64(),
            g.bytes as f64 / 1e6 / m.elapsed.as_secs_f64(),
            mib(m.peak_kib)
        );
        println!("{line}");
        summary.push(line);
        let line = format!("  load {name:<4} {}", m.cpu_line());
        println!("{line}");
        summary.push(line);
    }
    if diag {
        // Where the load time goes: the same load into a schema without the
        // per-function materialized view.
        let nomv = dir.join("data-nomv");
        run_measured(&mut flamehouse(&nomv, &["init"]), "init-nomv");
        run_measured(
            &mut flamehouse(&nomv, &["sql", "DROP VIEW flamehouse.stack_functions_mv"]),
            "drop-mv",
        );
        let m = run_measured(
            &mut flamehouse(&nomv, &["load", full.path.to_str().unwrap()]),
            "load-nomv",
        );
        for line in [
            format!(
                "diag: load full WITHOUT stack_functions_mv: {:.2} s = {:.0} stack values/s; peak RSS {:.0} MiB",
                m.elapsed.as_secs_f64(),
                full.entries as f64 / m.elapsed.as_secs_f64(),
                mib(m.peak_kib)
            ),
            format!("  diag: load without MV {}", m.cpu_line()),
        ] {
            println!("{line}");
            summary.push(line);
        }
        let _ = std::fs::remove_dir_all(&nomv);
    }
    let line = format!(
        "loader peak RSS full / 1/6 = {:.2} (file size ratio {:.2})",
        load_full.peak_kib as f64 / load_short.peak_kib.max(1) as f64,
        full.bytes as f64 / short.bytes.max(1) as f64
    );
    println!("{line}");
    summary.push(line);

    // 3. Open the loader's data directory in this process (chDB allows one
    // data directory per process; the loader has exited).
    let t = Instant::now();
    let engine = Engine::open(&EngineOptions {
        data_dir: Some(full_data.clone()),
        ..Default::default()
    })
    .unwrap_or_else(|e| panic!("opening {}: {e}", full_data.display()));
    println!("opened {} in {:.1?}", full_data.display(), t.elapsed());
    // Keep the loaded parts as the loader left them while the baseline and
    // the first view timings run: their merges would otherwise take cores
    // from both (and make the baseline look slower than it is).
    q(&engine, "SYSTEM STOP MERGES flamehouse.samples");
    let counts = q(
        &engine,
        "SELECT (SELECT count() FROM flamehouse.samples), (SELECT count() FROM flamehouse.stack_functions), \
         (SELECT count() FROM flamehouse.stacks), (SELECT count() FROM flamehouse.frames), \
         (SELECT formatReadableSize(sum(data_compressed_bytes)) FROM system.parts WHERE active AND database = 'flamehouse' AND table = 'samples')",
    );
    let c: Vec<&str> = counts.trim().split('\t').collect();
    let sample_rows: u64 = c[0].parse().unwrap();
    let line = format!(
        "stored: {} sample rows ({} on disk), {} stack_functions rows, {} stacks, {} frames",
        c[0], c[4], c[1], c[2], c[3]
    );
    println!("{line}");
    summary.push(line);

    let structure = sql_string(SampleRow::STRUCTURE);
    let tmp = full_data.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let export = tmp.join("bench-samples.rowbinary");
    let t = Instant::now();
    q(
        &engine,
        &format!(
            "INSERT INTO FUNCTION file({}, 'RowBinary', {structure}) SELECT * FROM flamehouse.samples ORDER BY process_id, stack_id, ts",
            sql_string(&export.display().to_string())
        ),
    );
    let export_bytes = std::fs::metadata(&export).map(|m| m.len()).unwrap_or(0);
    println!(
        "exported samples: {:.1} MB RowBinary in {:.1?}",
        export_bytes as f64 / 1e6,
        t.elapsed()
    );
    let from_file = format!(
        "SELECT * FROM file({}, RowBinary, {structure})",
        sql_string(&export.display().to_string())
    );
    // Plain copy (same columns, engine and settings; no materialized view).
    let mut bulk = Duration::MAX;
    for _ in 0..2 {
        q(&engine, "DROP TABLE IF EXISTS flamehouse.samples_bulk SYNC");
        q(
            &engine,
            "CREATE TABLE flamehouse.samples_bulk AS flamehouse.samples",
        );
        let t = Instant::now();
        q(
            &engine,
            &format!("INSERT INTO flamehouse.samples_bulk {from_file}"),
        );
        bulk = bulk.min(t.elapsed());
    }
    let bulk_s = bulk.as_secs_f64();
    let bulk_rate = sample_rows as f64 / bulk_s;
    for line in [
        format!(
            "bulk INSERT SELECT FROM file() into a copy of samples: {sample_rows} rows in {:.2} s = {:.0} rows/s (best of 2)",
            bulk_s, bulk_rate
        ),
        format!(
            "RATIO loader time / bulk insert time = {:.2}x (goal <= 2); loader throughput / bulk = {:.2} (goal >= 0.5)",
            loader_s / bulk_s,
            loader_rate / bulk_rate
        ),
    ] {
        println!("{line}");
        summary.push(line);
    }
    let _ = std::fs::remove_file(&export);
    q(&engine, "DROP TABLE IF EXISTS flamehouse.samples_bulk SYNC");

    // 4. View latencies.
    let info = q(
        &engine,
        "SELECT process_id, toUnixTimestamp64Milli(min(ts)), toUnixTimestamp64Milli(max(ts)) \
         FROM flamehouse.totals GROUP BY process_id",
    );
    let f: Vec<i64> = info
        .trim()
        .split('\t')
        .map(|x| x.parse::<i128>().unwrap() as i64)
        .collect();
    let pid = f[0] as u64;
    let (first, last) = (f[1], f[2]);
    let mid = first + (last - first) / 2;
    let (t1, t2) = (mid - 150_000, mid + 150_000);
    let heavy = q(
        &engine,
        &format!(
            "SELECT function FROM flamehouse.top_functions(process_id = {pid}, metric = 'bytes', t = '{}', limit = 3)",
            flamehouse::flame::format_utc_ms(mid)
        ),
    );
    let functions: Vec<String> = heavy.lines().map(sql_string).collect();
    println!("heaviest functions: {}", functions.join(", "));
    let common = format!("process_id = {pid}, metric = 'bytes'");
    let views = [
        (
            "1 flame_at (mid, max_nodes 2000)",
            format!(
                "SELECT * FROM flamehouse.flame_at({common}, max_nodes = 2000, t = '{}')",
                flamehouse::flame::format_utc_ms(mid)
            ),
        ),
        (
            "1 flame_at (mid, max_nodes 0)",
            format!(
                "SELECT * FROM flamehouse.flame_at({common}, max_nodes = 0, t = '{}')",
                flamehouse::flame::format_utc_ms(mid)
            ),
        ),
        (
            "2 flame_peak (max_nodes 2000)",
            format!("SELECT * FROM flamehouse.flame_peak({common}, max_nodes = 2000)"),
        ),
        (
            "3 flame_change added (5 min)",
            format!(
                "SELECT * FROM flamehouse.flame_change({common}, max_nodes = 2000, t1 = '{}', t2 = '{}', direction = 'added')",
                flamehouse::flame::format_utc_ms(t1),
                flamehouse::flame::format_utc_ms(t2)
            ),
        ),
        (
            "3 flame_diff (5 min)",
            format!(
                "SELECT * FROM flamehouse.flame_diff({common}, max_nodes = 2000, t1 = '{}', t2 = '{}')",
                flamehouse::flame::format_utc_ms(t1),
                flamehouse::flame::format_utc_ms(t2)
            ),
        ),
        (
            "5 totals_series (step 60)",
            format!(
                "SELECT * FROM flamehouse.totals_series(process_id = {pid}, step = 60, t1 = '{}', t2 = '{}')",
                flamehouse::flame::format_utc_ms(first),
                flamehouse::flame::format_utc_ms(last)
            ),
        ),
    ];
    // Step 5 reads every sample, step 60 the per-minute rollup.
    let views: Vec<(String, String)> = views
        .into_iter()
        .map(|(n, q)| (n.to_string(), q))
        .chain([5, 60].map(|step| {
            (
                format!("6 function_series (3 heaviest, step {step})"),
                format!(
                    "SELECT * FROM flamehouse.function_series(process_id = {pid}, step = {step}, t1 = '{}', t2 = '{}', functions = [{}])",
                    flamehouse::flame::format_utc_ms(first),
                    flamehouse::flame::format_utc_ms(last),
                    functions.join(", ")
                ),
            )
        }))
        .collect();
    let parts = |engine: &Engine| {
        q(
            engine,
            "SELECT count() FROM system.parts WHERE active AND database = 'flamehouse' AND table = 'samples'",
        )
        .trim()
        .to_string()
    };
    for pass in ["as loaded", "merged"] {
        if pass == "merged" {
            q(&engine, "SYSTEM START MERGES flamehouse.samples");
            let t = Instant::now();
            q(&engine, "OPTIMIZE TABLE flamehouse.samples FINAL");
            println!("OPTIMIZE TABLE samples FINAL: {:.1?}", t.elapsed());
        }
        let line = format!("views on the {pass} table ({} parts):", parts(&engine));
        println!("{line}");
        summary.push(line);
        for (name, sql) in &views {
            let (d, rows) = median_time(&engine, runs, sql);
            let ms = d.as_secs_f64() * 1e3;
            let line = format!(
                "  view {name:<40} median {ms:>8.1} ms over {runs} runs, {rows} rows{}",
                if ms < 1000.0 { "" } else { "  (over 1 s)" }
            );
            println!("{line}");
            summary.push(line);
        }
    }

    println!();
    println!("===== SUMMARY (load bench) =====");
    println!(
        "shape: {} snapshots x {} changed, {} traces, {} frames",
        shape.snapshots, shape.changed, shape.stacks, shape.frames
    );
    for l in &summary {
        println!("{l}");
    }
    if let Ok(load) = std::fs::read_to_string("/proc/loadavg") {
        println!("load average at end: {}", load.trim());
    }
    if keep {
        println!("kept {}", dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // The engine's own static destructors crash at exit once queries ran on
    // other threads (see tests/harness.rs): leave without running them.
    std::mem::forget(engine);
    // SAFETY: ends the process immediately; output is flushed above.
    unsafe { _exit(0) }
}
