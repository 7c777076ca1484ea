//! The `perf script` parser alone: `cargo run --release -p flamehouse
//! --example parse_perf -- FILE...` parses the files (already in memory)
//! three times and prints MB/s of text by wall time and by this thread's
//! CPU time (the latter holds on a loaded machine), and the share of the
//! text's identity hash (XXH3); with `ROWS=1`, the whole of a load's
//! reader thread instead (open, parse, rows). Used to profile the reader
//! (`perf record` / `valgrind --tool=callgrind` on this example).

use flamehouse::formats::{perf, text};
use std::path::PathBuf;
use std::time::Instant;

fn cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn main() {
    let files: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    let texts: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).expect("a readable text file"))
        .collect();
    let mb = texts.iter().map(String::len).sum::<usize>() as f64 / 1e6;
    let opts = perf::PerfOptions::default();
    let passes: usize = std::env::var("PASSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    if std::env::var_os("ROWS").is_some() {
        // As a load's reader thread: open, parse, build the rows.
        let copts = flamehouse::ingest::continuous::ContinuousOptions::default();
        for _ in 0..passes {
            let (t, c) = (Instant::now(), cpu_s());
            let mut cache = flamehouse::ingest::continuous::LoadCache::default();
            let mut rows = 0;
            for f in &files {
                let file = std::fs::File::open(f).expect("readable");
                let format = flamehouse::formats::detect_open(&file, f).expect("a format");
                let mut reader = format
                    .spec()
                    .open(file, f, &Default::default())
                    .expect("a profile");
                let mut sym = flamehouse::symbolize::Symbolizer::new(Default::default());
                for r in flamehouse::ingest::continuous::reader_rows_cached(
                    &mut *reader,
                    &mut sym,
                    "bench",
                    &copts,
                    &mut cache,
                )
                .expect("rows")
                {
                    rows += r.samples.len();
                }
            }
            let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_s() - c);
            println!(
                "read + parse + rows, {rows} rows: wall {wall:.3} s = {:.0} MB/s, cpu {cpu:.3} s = {:.0} MB/s",
                mb / wall,
                mb / cpu
            );
        }
        return;
    }
    for _ in 0..passes {
        let (t, c) = (Instant::now(), cpu_s());
        for (f, s) in files.iter().zip(&texts) {
            perf::parse(s, f, 0, &opts).expect("a perf script");
        }
        let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_s() - c);
        let (t, c) = (Instant::now(), cpu_s());
        for s in &texts {
            std::hint::black_box(text::identity("perf", s));
        }
        let (hwall, hcpu) = (t.elapsed().as_secs_f64(), cpu_s() - c);
        println!(
            "parse {mb:.1} MB: wall {wall:.3} s = {:.0} MB/s, cpu {cpu:.3} s = {:.0} MB/s; identity hash alone: wall {hwall:.3} s, cpu {hcpu:.3} s = {:.0} MB/s",
            mb / wall,
            mb / cpu,
            mb / hcpu
        );
    }
}
