//! The generated fleet of the continuous-profile benches (`continuous`,
//! `continuous_ingest`): 100 series (5 services x 2 versions x 10 hosts),
//! one 10 s CPU profile per series every 10 s, stacks drawn from a
//! per-service pool of call paths; written as gzipped pprof (as Go writes
//! them) or as `perf script` text (the same draws).

#![allow(dead_code)] // each bench uses its part

use flamehouse::formats::pprof::write::PprofWriter;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

pub const SERVICES: [&str; 5] = ["checkout", "cart", "search", "auth", "ledger"];
pub const VERSIONS: [&str; 2] = ["v1.4.0", "v1.5.0"];
pub const HOSTS: usize = 10;
pub const TICK_MS: i64 = 10_000;
pub const PERIOD_NS: i64 = 10_000_000;
pub const CPU: &str = "cpu:nanoseconds";

/// Leaves shared by every service: where Go services spend CPU.
const LEAVES: [&str; 16] = [
    "runtime.mallocgc",
    "runtime.memmove",
    "runtime.mapaccess2_faststr",
    "syscall.Syscall",
    "internal/poll.(*FD).Read",
    "internal/poll.(*FD).Write",
    "encoding/json.(*decodeState).object",
    "encoding/json.(*encodeState).string",
    "crypto/sha256.block",
    "compress/flate.(*compressor).deflate",
    "strconv.ParseFloat",
    "sort.pdqsort",
    "regexp.(*Regexp).doOnePass",
    "bytes.(*Buffer).WriteString",
    "runtime.scanobject",
    "runtime.futex",
];

/// `n` distinct call paths of one service, root first: a start-up chain,
/// an HTTP handler (8 endpoints), 4..16 service frames drawn per depth from
/// small per-depth sets with a skew (so prefixes are shared as in a real
/// call graph), then one or two library leaves; a few GC and scheduler
/// stacks.
pub fn make_pool(rng: &mut StdRng, service: &str, n: usize) -> Vec<Vec<String>> {
    let mut seen: HashSet<Vec<String>> = HashSet::new();
    let mut out = Vec::with_capacity(n);
    let mut tries = 0usize;
    while out.len() < n {
        tries += 1;
        assert!(
            tries < n * 1000,
            "pool of {n} stacks: too few distinct paths"
        );
        let mut st: Vec<String> = Vec::with_capacity(24);
        if out.len() % 50 == 7 {
            // Background work: GC and the scheduler.
            st.push("runtime.gcBgMarkWorker".into());
            st.push("runtime.gcDrain".into());
            st.push(LEAVES[rng.gen_range(0..LEAVES.len())].into());
        } else {
            st.push("runtime.goexit".into());
            st.push("net/http.(*conn).serve".into());
            st.push("net/http.serverHandler.ServeHTTP".into());
            let endpoint = ((8.0 * rng.gen::<f64>().powi(2)) as usize).min(7);
            st.push(format!("{service}/api.(*Server).handle{endpoint}"));
            let depth = rng.gen_range(4..=16usize);
            for d in 0..depth {
                // 12 functions per depth, the first ones far more likely.
                let k = ((12.0 * rng.gen::<f64>().powi(3)) as usize).min(11);
                st.push(format!("{service}/pkg{}.fn{d}_{k}", d % 5));
            }
            if rng.gen_bool(0.4) {
                st.push("runtime.newobject".into());
            }
            st.push(LEAVES[rng.gen_range(0..LEAVES.len())].into());
        }
        if seen.insert(st.clone()) {
            out.push(st);
        }
    }
    out
}

/// What generation wrote.
pub struct Generated {
    pub files: Vec<PathBuf>,
    pub bytes: u64,
    /// Sum of the `cpu` values written (the oracle of the totals).
    pub cpu_total: i64,
    /// Samples written (distinct series and stack per profile).
    pub samples: u64,
}

/// One drawn sample: version, host, index in the service's pool, count.
pub struct Draw {
    pub version: usize,
    pub host: usize,
    pub stack: usize,
    pub count: i64,
}

/// The draws of the fleet, tick by tick and service by service (seeded:
/// the same sequence for every output format).
pub struct Fleet {
    pub pools: Vec<Vec<Vec<String>>>,
    rng: StdRng,
    stacks: usize,
}

impl Fleet {
    pub fn new(pool: usize, stacks: usize) -> Self {
        let mut rng = StdRng::seed_from_u64(10);
        let pools = SERVICES
            .iter()
            .map(|s| make_pool(&mut rng, s, pool))
            .collect();
        Fleet { pools, rng, stacks }
    }

    /// The samples of one service's profile at the next tick.
    pub fn draw(&mut self, service: usize) -> Vec<Draw> {
        let pool = &self.pools[service];
        let rng = &mut self.rng;
        let mut out = Vec::new();
        let mut chosen: Vec<usize> = Vec::with_capacity(self.stacks);
        for vi in 0..VERSIONS.len() {
            for host in 0..HOSTS {
                chosen.clear();
                while chosen.len() < self.stacks.min(pool.len()) {
                    // The newer version's regression: 20 stacks drawn far
                    // more often.
                    let i = if vi == 1 && rng.gen_bool(0.25) {
                        pool.len() / 2 + rng.gen_range(0..20.min(pool.len() / 2))
                    } else {
                        ((pool.len() as f64 * rng.gen::<f64>().powi(3)) as usize)
                            .min(pool.len() - 1)
                    };
                    if !chosen.contains(&i) {
                        chosen.push(i);
                    }
                }
                for &i in &chosen {
                    let count = 1 + (30.0 * rng.gen::<f64>().powi(2)) as i64;
                    out.push(Draw {
                        version: vi,
                        host,
                        stack: i,
                        count,
                    });
                }
            }
        }
        out
    }
}

pub fn host_name(h: usize) -> String {
    format!("host-{h:02}")
}

/// Writes one gzipped pprof per service and tick into `dir` (`version` and
/// `host` are sample labels, as `pprof.Do` writes them).
pub fn generate_pprof(
    dir: &Path,
    start_ms: i64,
    ticks: i64,
    stacks: usize,
    pool: usize,
) -> Generated {
    let mut fleet = Fleet::new(pool, stacks);
    let mut g = Generated {
        files: Vec::new(),
        bytes: 0,
        cpu_total: 0,
        samples: 0,
    };
    let hosts: Vec<String> = (0..HOSTS).map(host_name).collect();
    for tick in 0..ticks {
        let ts_ns = (start_ms + tick * TICK_MS) * 1_000_000;
        for (si, service) in SERVICES.iter().enumerate() {
            let mut w = PprofWriter::new(
                &[("samples", "count"), ("cpu", "nanoseconds")],
                ("cpu", "nanoseconds"),
                PERIOD_NS,
            );
            w.set_time(ts_ns, TICK_MS * 1_000_000);
            for d in fleet.draw(si) {
                let frames: Vec<&str> = fleet.pools[si][d.stack]
                    .iter()
                    .rev()
                    .map(String::as_str)
                    .collect();
                w.add_sample(
                    &frames,
                    &[d.count, d.count * PERIOD_NS],
                    &[("version", VERSIONS[d.version]), ("host", &hosts[d.host])],
                );
                g.cpu_total += d.count * PERIOD_NS;
                g.samples += 1;
            }
            let path = dir.join(format!("{service}-{tick:05}.pb.gz"));
            let data = w.encode_gzip().unwrap();
            g.bytes += data.len() as u64;
            std::fs::write(&path, data).unwrap();
            g.files.push(path);
        }
    }
    g
}

/// A stable fake address of a symbol.
fn addr_of(sym: &str) -> u64 {
    let h = flamehouse::storage::rows::stable_hash(&[sym.as_bytes()]);
    0x40_0000 + (h % 0x40_0000) / 16 * 16
}

/// Writes the same draws as [`generate_pprof`] as `perf script` text, one
/// file per service and tick (`{service}-{tick}.perf.txt`), in perf's
/// default fields as `perf script` prints a `perf record -g -e cpu-clock`
/// recording: a header `comm pid time: period cpu-clock:pppH:` per sample
/// (a count of n is n samples of 10 ms), then the frames leaf first
/// (`\taddr sym+0xoff (module)`), then a blank line. The comm is
/// `service-version-host` (perf has no other labels: the 20 processes of a
/// file are its 20 series); the file's modification time is the last
/// sample's, so the profile's time is the tick's.
pub fn generate_perf(
    dir: &Path,
    start_ms: i64,
    ticks: i64,
    stacks: usize,
    pool: usize,
) -> Generated {
    let mut fleet = Fleet::new(pool, stacks);
    let mut g = Generated {
        files: Vec::new(),
        bytes: 0,
        cpu_total: 0,
        samples: 0,
    };
    // Seconds since boot of the first tick.
    let boot_s = 5000.0f64;
    for tick in 0..ticks {
        for (si, service) in SERVICES.iter().enumerate() {
            let draws = fleet.draw(si);
            let n: i64 = draws.iter().map(|d| d.count).sum();
            let module = format!("/srv/{service}/bin/{service}");
            let mut text = String::with_capacity(n as usize * 1200);
            let mut k = 0i64;
            for d in &draws {
                let comm = format!("{service}-{}-{}", VERSIONS[d.version], host_name(d.host));
                let pid = 1000 + d.version * 100 + d.host;
                for _ in 0..d.count {
                    // Spread over [0, 9.99] s of the tick, the last at 9.99.
                    let t = boot_s
                        + (tick * TICK_MS) as f64 / 1000.0
                        + 9.99 * k as f64 / (n - 1).max(1) as f64;
                    k += 1;
                    let _ = writeln!(
                        text,
                        "{comm} {pid:>6} {t:.6}: {PERIOD_NS:>10} cpu-clock:pppH: "
                    );
                    for (depth, sym) in fleet.pools[si][d.stack].iter().rev().enumerate() {
                        let a = addr_of(sym);
                        let off = 0x10 + (depth as u64 * 7) % 0x80;
                        let _ = writeln!(text, "\t{:>16x} {sym}+0x{off:x} ({module})", a + off);
                    }
                    text.push('\n');
                }
                g.cpu_total += d.count * PERIOD_NS;
                g.samples += 1;
            }
            let path = dir.join(format!("{service}-{tick:05}.perf.txt"));
            std::fs::write(&path, &text).unwrap();
            let last_ms = start_ms + tick * TICK_MS + 9_990;
            let f = std::fs::File::options().write(true).open(&path).unwrap();
            f.set_modified(
                std::time::UNIX_EPOCH + std::time::Duration::from_millis(last_ms as u64),
            )
            .unwrap();
            g.bytes += text.len() as u64;
            g.files.push(path);
        }
    }
    g
}
