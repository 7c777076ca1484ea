//! Generator of realistic `.binpb` fixtures whose stack addresses are real
//! instruction addresses of a compiled program.
//!
//! The program is `fixtures/gen/workload.c` ([`WORKLOAD_SOURCE`]), compiled on
//! demand with `gcc -g -O1` by [`compile_workload`] (or
//! `fixtures/gen/build.sh`); no binary is committed. [`generate`] reads the
//! binary's program headers, function symbols and DWARF line table, and
//! writes a MemHawk snapshot stream through [`BinpbWriter`]:
//!
//! - a ProcessInfo header (configurable pid and name; `processFullPath` is
//!   the binary's absolute path, so the symbolizer finds the main program);
//! - snapshot 0 at the start time: trace 0 with all-zero values and no stack,
//!   the profiler's trace `0x80000000` with an empty stack, and the module
//!   map (repeated in snapshot 1, as MemHawk does);
//! - `snapshots` snapshots one second apart: traces appear over the first
//!   half, live sizes grow to a peak at two thirds of the run, then frees
//!   bring them down; `totalCount`/`totalBytes` never decrease; `changed`
//!   carries absolute values and `total` is the sum of the latest value of
//!   every trace.
//!
//! Module map: the main program at a PIE load bias of `0x555555554000`
//! (bias 0 for a non-PIE binary) with every program header of the binary as
//! segments (name empty, as MemHawk writes the main program), plus a fake
//! `libc.so.6` at a path that does not exist (its frames symbolize to
//! `libc.so.6+0xOFFSET`), a fake profiler library and the vdso.
//!
//! Stacks (`stacks` distinct ones) follow the program's real call graph
//! (`_start` → libc start-up → `main` → ... → allocating function → libc
//! `malloc`/`calloc`/`realloc`), choosing for each workload frame one of the
//! addresses of that function's DWARF line-table rows (so some fall inside
//! the inlined `wl_inline_alloc`), and one or two frames for the recursive
//! `wl_tree_build` (MemHawk collapses deep recursion). Frame addresses are
//! absolute (bias + ELF address), as MemHawk stores them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::Command;

use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
use object::{Object, ObjectKind, ObjectSection, ObjectSymbol, SymbolKind};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::binpb::{
    AllocSummary, BinpbWriter, ElfInfo, ProcessInfo, Segment, Snapshot, Stacktrace, StacktracePtr,
    TracedAllocSummary, PROFILER_TRACE_BIT,
};

/// The workload's C source (in the repository).
pub const WORKLOAD_SOURCE: &str =
    concat!(env!("CARGO_MANIFEST_DIR"), "/../fixtures/gen/workload.c");

/// Load bias of a PIE main program (what Linux uses without ASLR on x86-64).
pub const PIE_BIAS: u64 = 0x5555_5555_4000;

/// Load bias of the fake libc.
pub const LIBC_BIAS: u64 = 0x7fff_f7d8_0000;

/// Path of the fake libc (does not exist, so it has no symbols).
pub const FAKE_LIBC: &str = "/nonexistent/flamehouse-fixture/lib/libc.so.6";

/// Module-relative offsets of the fake libc's frames.
const LIBC_MALLOC: &[u64] = &[0xa50fe, 0xa5183, 0xa5231];
const LIBC_CALLOC: &[u64] = &[0xa6c12, 0xa6c9d];
const LIBC_REALLOC: &[u64] = &[0xa7a40, 0xa7b1f];
const LIBC_START_CALL_MAIN: u64 = 0x29d8f;
const LIBC_START_MAIN: u64 = 0x29e3f;

/// Errors of the generator; each names the file concerned.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Reading the binary or writing the output failed.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        cause: std::io::Error,
    },
    /// The binary is not a readable 64-bit ELF file.
    #[error("{}: not a readable 64-bit ELF file: {cause}", path.display())]
    Elf {
        /// The binary.
        path: PathBuf,
        /// What `object` said.
        cause: object::Error,
    },
    /// The binary's DWARF line table could not be read.
    #[error("{}: bad DWARF line table: {cause}", path.display())]
    Dwarf {
        /// The binary.
        path: PathBuf,
        /// What `gimli` said.
        cause: gimli::Error,
    },
    /// A function of the workload is missing (not the workload binary, or
    /// built without symbols).
    #[error("{}: no function symbol {name:?} (not built from workload.c with symbols?)", path.display())]
    MissingFunction {
        /// The binary.
        path: PathBuf,
        /// The function.
        name: &'static str,
    },
    /// The compiler failed.
    #[error("compiling {}: {detail}", path.display())]
    Compile {
        /// The source.
        path: PathBuf,
        /// The command and its stderr.
        detail: String,
    },
}

/// Options of [`generate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixtureOptions {
    /// The compiled workload ([`compile_workload`]).
    pub binary: PathBuf,
    /// The `.binpb` file to write (replaced if it exists).
    pub output: PathBuf,
    /// Snapshots after snapshot 0, one second apart. Default 30 (at least 2
    /// are written).
    pub snapshots: usize,
    /// Distinct stack traces. Default 3000.
    pub stacks: usize,
    /// Random seed (same seed and binary: same file). Default 1.
    pub seed: u64,
    /// Process id. Default 4242.
    pub pid: u32,
    /// Process short name. Default `workload`.
    pub name: String,
    /// Start time, ns since the Unix epoch. Default 2026-01-01T00:00:00Z.
    pub start_timestamp_ns: u64,
}

impl FixtureOptions {
    /// Defaults for the given binary and output file.
    #[must_use]
    pub fn new(binary: impl Into<PathBuf>, output: impl Into<PathBuf>) -> Self {
        Self {
            binary: binary.into(),
            output: output.into(),
            snapshots: 30,
            stacks: 3000,
            seed: 1,
            pid: 4242,
            name: "workload".to_owned(),
            start_timestamp_ns: 1_767_225_600_000_000_000,
        }
    }
}

/// What [`generate`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFixture {
    /// The output file.
    pub output: PathBuf,
    /// The binary's absolute path (the header's `processFullPath`).
    pub binary: PathBuf,
    /// The main program's load bias.
    pub bias: u64,
    /// Snapshot records written (including snapshot 0).
    pub snapshots: usize,
    /// Distinct stack traces (not counting trace 0 and the profiler's).
    pub stacks: usize,
    /// Distinct frame addresses defined.
    pub frames: usize,
    /// The distinct absolute addresses inside the main program used in
    /// stacks, sorted.
    pub main_addresses: Vec<u64>,
    /// Snapshot index (0-based, counting snapshot 0) of the peak live size.
    pub peak_snapshot: usize,
    /// File size in bytes.
    pub bytes: u64,
}

/// Compiles [`WORKLOAD_SOURCE`] with `$CC` (default `gcc`) `-g -O1` into
/// `out_dir/workload` and returns that path.
///
/// # Errors
/// If the directory cannot be created or the compiler fails.
pub fn compile_workload(out_dir: &Path) -> Result<PathBuf, Error> {
    std::fs::create_dir_all(out_dir).map_err(|cause| Error::Io {
        path: out_dir.to_path_buf(),
        cause,
    })?;
    let out = out_dir.join("workload");
    let cc = std::env::var("CC").unwrap_or_else(|_| "gcc".to_owned());
    let source = PathBuf::from(WORKLOAD_SOURCE);
    let mut cmd = Command::new(&cc);
    cmd.args(["-g", "-O1", "-fno-omit-frame-pointer", "-o"])
        .arg(&out)
        .arg(&source);
    let output = cmd.output().map_err(|cause| Error::Compile {
        path: source.clone(),
        detail: format!("cannot run {cc}: {cause}"),
    })?;
    if !output.status.success() {
        return Err(Error::Compile {
            path: source,
            detail: format!(
                "{cmd:?} failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        });
    }
    Ok(out)
}

/// The functions of the workload whose line-table rows give frame addresses.
const FUNCTIONS: &[&str] = &[
    "_start",
    "main",
    "wl_load_file",
    "wl_parse_record",
    "wl_serve_requests",
    "wl_cache_insert",
    "wl_grow_buffer",
    "wl_build_index",
    "wl_tree_build",
];

/// What the generator needs from the binary.
#[derive(Debug)]
struct BinaryInfo {
    bias: u64,
    segments: Vec<Segment>,
    /// ELF (module-relative) addresses per function, sorted.
    sites: HashMap<&'static str, Vec<u64>>,
}

fn read_binary(path: &Path) -> Result<BinaryInfo, Error> {
    let data = std::fs::read(path).map_err(|cause| Error::Io {
        path: path.to_path_buf(),
        cause,
    })?;
    let elf_err = |cause| Error::Elf {
        path: path.to_path_buf(),
        cause,
    };
    let elf = ElfFile64::<object::Endianness>::parse(&*data).map_err(elf_err)?;
    let endian = elf.endian();
    let segments = elf
        .elf_header()
        .program_headers(endian, &*data)
        .map_err(elf_err)?
        .iter()
        .map(|ph| Segment {
            addr: ph.p_vaddr(endian),
            size: ph.p_memsz(endian),
        })
        .collect();
    let bias = if elf.kind() == ObjectKind::Dynamic {
        PIE_BIAS
    } else {
        0
    };

    let mut ranges: HashMap<&'static str, (u64, u64)> = HashMap::new();
    for sym in elf.symbols() {
        if sym.kind() != SymbolKind::Text || sym.size() == 0 && sym.name() != Ok("_start") {
            continue;
        }
        let Ok(name) = sym.name() else { continue };
        if let Some(&known) = FUNCTIONS.iter().find(|&&f| f == name) {
            ranges.insert(known, (sym.address(), sym.address() + sym.size().max(1)));
        }
    }
    for &name in FUNCTIONS {
        if !ranges.contains_key(name) {
            return Err(Error::MissingFunction {
                path: path.to_path_buf(),
                name,
            });
        }
    }

    let rows = line_rows(path, &elf)?;
    let mut sites = HashMap::new();
    for (&name, &(start, end)) in &ranges {
        let mut addrs: Vec<u64> = rows.range(start + 1..end).map(|(&addr, ())| addr).collect();
        if addrs.is_empty() {
            // No line rows (e.g. `_start` from crt1.o): a byte inside it.
            addrs.push(start + (end - start).min(0x20) / 2);
        }
        sites.insert(name, addrs);
    }
    Ok(BinaryInfo {
        bias,
        segments,
        sites,
    })
}

/// Every address of a DWARF line-table row (end-of-sequence rows excluded).
fn line_rows(
    path: &Path,
    elf: &ElfFile64<'_, object::Endianness>,
) -> Result<BTreeMap<u64, ()>, Error> {
    let endian = if elf.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let sections = gimli::DwarfSections::load(|id| -> Result<Vec<u8>, Error> {
        Ok(elf
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .map(|d| d.into_owned())
            .unwrap_or_default())
    })?;
    let dwarf = sections.borrow(|s| gimli::EndianSlice::new(s, endian));
    let dwarf_err = |cause| Error::Dwarf {
        path: path.to_path_buf(),
        cause,
    };
    let mut out = BTreeMap::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next().map_err(dwarf_err)? {
        let unit = dwarf.unit(header).map_err(dwarf_err)?;
        let Some(program) = unit.line_program.clone() else {
            continue;
        };
        let mut rows = program.rows();
        while let Some((_, row)) = rows.next_row().map_err(dwarf_err)? {
            if !row.end_sequence() && row.address() != 0 {
                out.insert(row.address(), ());
            }
        }
    }
    Ok(out)
}

/// One call path of the workload, root first, as function names; the leaf
/// allocator is chosen separately.
const PATHS: &[(&[&str], &[u64])] = &[
    (&["main", "wl_load_file", "wl_parse_record"], LIBC_MALLOC),
    (
        &["main", "wl_serve_requests", "wl_cache_insert"],
        LIBC_MALLOC,
    ),
    (
        &["main", "wl_serve_requests", "wl_grow_buffer"],
        LIBC_REALLOC,
    ),
    (&["main", "wl_build_index", "wl_tree_build"], LIBC_MALLOC),
    (&["main", "wl_build_index", "wl_tree_build"], LIBC_CALLOC),
];

fn pick(rng: &mut StdRng, from: &[u64]) -> u64 {
    from[rng.gen_range(0..from.len())]
}

/// Distinct stacks, leaf first, absolute addresses.
fn make_stacks(info: &BinaryInfo, count: usize, rng: &mut StdRng) -> Vec<Vec<u64>> {
    let mut seen = HashSet::new();
    let mut stacks = Vec::with_capacity(count);
    let mut attempts = 0usize;
    while stacks.len() < count && attempts < count.saturating_mul(50).max(1000) {
        attempts += 1;
        let (path, leaf) = PATHS[rng.gen_range(0..PATHS.len())];
        let mut root_first = vec![
            info.bias + pick(rng, &info.sites["_start"]),
            LIBC_BIAS + LIBC_START_MAIN,
            LIBC_BIAS + LIBC_START_CALL_MAIN,
        ];
        for &function in path {
            let sites = &info.sites[function];
            root_first.push(info.bias + pick(rng, sites));
            if function == "wl_tree_build" && rng.gen_bool(0.5) {
                root_first.push(info.bias + pick(rng, sites));
            }
        }
        root_first.push(LIBC_BIAS + pick(rng, leaf));
        root_first.reverse();
        if seen.insert(root_first.clone()) {
            stacks.push(root_first);
        }
    }
    stacks
}

/// Live and cumulative state of one trace.
#[derive(Debug, Clone, Copy, Default)]
struct TraceState {
    unit: i64,
    value: AllocSummary,
}

impl TraceState {
    fn alloc(&mut self, count: i64) {
        self.value.active += count;
        self.value.size += count * self.unit;
        self.value.overhead += count * 16;
        self.value.total_count += count as u64;
        self.value.total_bytes += (count * self.unit) as u64;
    }

    fn free(&mut self, count: i64) {
        let count = count.min(self.value.active);
        self.value.active -= count;
        self.value.size -= count * self.unit;
        self.value.overhead -= count * 16;
    }
}

fn module_map(info: &BinaryInfo) -> Vec<ElfInfo> {
    let libc_segments = vec![
        Segment {
            addr: 0,
            size: 0x28000,
        },
        Segment {
            addr: 0x28000,
            size: 0x195000,
        },
        Segment {
            addr: 0x1bd000,
            size: 0x58000,
        },
        Segment {
            addr: 0x215000,
            size: 0x13000,
        },
    ];
    vec![
        ElfInfo {
            filename: String::new(),
            addr: info.bias,
            segments: info.segments.clone(),
        },
        ElfInfo {
            filename: "linux-vdso.so.1".to_owned(),
            addr: 0x7fff_f7fc_1000,
            segments: vec![Segment {
                addr: 0,
                size: 0x2000,
            }],
        },
        ElfInfo {
            filename: "/nonexistent/flamehouse-fixture/lib/libmemhawk.so".to_owned(),
            addr: 0x7fff_f7f8_0000,
            segments: vec![Segment {
                addr: 0,
                size: 0x3a000,
            }],
        },
        ElfInfo {
            filename: FAKE_LIBC.to_owned(),
            addr: LIBC_BIAS,
            segments: libc_segments,
        },
    ]
}

fn sum(states: &BTreeMap<u32, TraceState>) -> AllocSummary {
    states.values().fold(AllocSummary::default(), |mut acc, s| {
        acc.size += s.value.size;
        acc.active += s.value.active;
        acc.overhead += s.value.overhead;
        acc.total_count += s.value.total_count;
        acc.total_bytes += s.value.total_bytes;
        acc
    })
}

/// Writes a fixture (see the module documentation) and describes it.
///
/// # Errors
/// If the binary cannot be read (or is not the workload) or the output
/// cannot be written.
pub fn generate(opts: &FixtureOptions) -> Result<GeneratedFixture, Error> {
    let binary = std::path::absolute(&opts.binary).map_err(|cause| Error::Io {
        path: opts.binary.clone(),
        cause,
    })?;
    let info = read_binary(&binary)?;
    let mut rng = StdRng::seed_from_u64(opts.seed);
    let stacks = make_stacks(&info, opts.stacks, &mut rng);
    let snapshots = opts.snapshots.max(2);
    let peak = (snapshots * 2 / 3).max(1);
    // Trace k+1 is born in snapshot 1 + k * births / len (first half).
    let births = (snapshots / 2).max(1);

    let io_err = |cause| Error::Io {
        path: opts.output.clone(),
        cause,
    };
    let header = ProcessInfo {
        process_short_name: opts.name.clone(),
        process_full_path: binary.display().to_string(),
        pid: opts.pid,
        start_timestamp: opts.start_timestamp_ns,
    };
    let file = File::create(&opts.output).map_err(io_err)?;
    let mut writer = BinpbWriter::new(BufWriter::new(file), &header).map_err(io_err)?;

    let mut states: BTreeMap<u32, TraceState> = BTreeMap::new();
    let mut frame_ids: HashMap<u64, u32> = HashMap::new();
    let modules = module_map(&info);

    // Snapshot 0: trace 0 all zeros without a stack, the profiler's trace
    // with an empty stack, the module map.
    states.insert(0, TraceState::default());
    let mut profiler = TraceState {
        unit: 4096,
        ..TraceState::default()
    };
    profiler.alloc(2);
    states.insert(PROFILER_TRACE_BIT, profiler);
    writer
        .write_snapshot(&Snapshot {
            timestamp: opts.start_timestamp_ns,
            changed: vec![
                TracedAllocSummary {
                    trace_id: 0,
                    actual: Some(AllocSummary::default()),
                },
                TracedAllocSummary {
                    trace_id: PROFILER_TRACE_BIT,
                    actual: Some(profiler.value),
                },
            ],
            stacktraces: vec![Stacktrace {
                trace_id: PROFILER_TRACE_BIT,
                ptr_id: Vec::new(),
            }],
            loaded_so: modules.clone(),
            total: Some(sum(&states)),
            ..Snapshot::default()
        })
        .map_err(io_err)?;

    let mut next_trace = 0usize;
    let mut peak_size = i64::MIN;
    let mut peak_snapshot = 0;
    for i in 1..=snapshots {
        let mut snap = Snapshot {
            timestamp: opts.start_timestamp_ns + i as u64 * 1_000_000_000,
            loaded_so: if i == 1 { modules.clone() } else { Vec::new() },
            ..Snapshot::default()
        };
        let mut changed: BTreeMap<u32, ()> = BTreeMap::new();
        // Births.
        let born_until = if i > births {
            stacks.len()
        } else {
            (stacks.len() * i).div_ceil(births)
        };
        while next_trace < born_until {
            let trace_id = next_trace as u32 + 1;
            let mut ptr_id = Vec::with_capacity(stacks[next_trace].len());
            for &addr in &stacks[next_trace] {
                let next_id = frame_ids.len() as u32 + 1;
                let id = *frame_ids.entry(addr).or_insert_with(|| {
                    snap.ptr_ids.push(StacktracePtr {
                        ptr_id: next_id,
                        ptr_addr: addr,
                    });
                    next_id
                });
                ptr_id.push(id);
            }
            snap.stacktraces.push(Stacktrace { trace_id, ptr_id });
            let unit = 16 << rng.gen_range(0..9);
            let mut state = TraceState {
                unit,
                ..TraceState::default()
            };
            state.alloc(rng.gen_range(1..20));
            states.insert(trace_id, state);
            changed.insert(trace_id, ());
            next_trace += 1;
        }
        // Activity of live traces.
        for (&trace_id, state) in states.iter_mut() {
            if trace_id == 0
                || trace_id & PROFILER_TRACE_BIT != 0
                || changed.contains_key(&trace_id)
            {
                continue;
            }
            if !rng.gen_bool(0.3) {
                continue;
            }
            if i <= peak {
                state.alloc(rng.gen_range(1..10));
                let active = state.value.active;
                state.free(rng.gen_range(0..=active / 4));
            } else {
                state.alloc(rng.gen_range(0..3));
                let active = state.value.active;
                state.free(active / 2 + rng.gen_range(0..=active / 4));
            }
            changed.insert(trace_id, ());
        }
        // The profiler's own allocations grow a little every snapshot.
        if let Some(p) = states.get_mut(&PROFILER_TRACE_BIT) {
            p.alloc(1);
            changed.insert(PROFILER_TRACE_BIT, ());
        }
        snap.changed = changed
            .keys()
            .map(|id| TracedAllocSummary {
                trace_id: *id,
                actual: Some(states[id].value),
            })
            .collect();
        let total = sum(&states);
        if total.size > peak_size {
            peak_size = total.size;
            peak_snapshot = i;
        }
        snap.total = Some(total);
        writer.write_snapshot(&snap).map_err(io_err)?;
    }
    let bytes = writer.offset();
    drop(writer.into_inner());

    let mut main_addresses: Vec<u64> = frame_ids
        .keys()
        .copied()
        .filter(|&a| a >= info.bias && a < LIBC_BIAS && a < 0x7fff_0000_0000)
        .collect();
    main_addresses.sort_unstable();
    Ok(GeneratedFixture {
        output: opts.output.clone(),
        binary,
        bias: info.bias,
        snapshots: snapshots + 1,
        stacks: stacks.len(),
        frames: frame_ids.len(),
        main_addresses,
        peak_snapshot,
        bytes,
    })
}

/// Helpers shared by the tests of this module and of
/// [`crate::symbolize`].
#[cfg(test)]
pub(crate) mod test_support {
    use std::path::{Path, PathBuf};
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A directory under the system temp dir, removed on drop.
    #[derive(Debug)]
    pub(crate) struct TempDir(PathBuf);

    impl TempDir {
        pub(crate) fn new(tag: &str) -> Self {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let path =
                std::env::temp_dir().join(format!("flamehouse-{tag}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir_all(&path).expect("create temp dir");
            Self(path)
        }

        pub(crate) fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Compiles the workload into `dir` (gcc is required: it is the Rust
    /// toolchain's linker driver here, so it is always present).
    pub(crate) fn workload(dir: &TempDir) -> PathBuf {
        super::compile_workload(dir.path()).expect("compile fixtures/gen/workload.c with gcc")
    }

    /// Runs a command and panics with its stderr if it fails.
    pub(crate) fn run(program: &str, args: &[&std::ffi::OsStr]) -> String {
        let out = std::process::Command::new(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program} (binutils installed?): {e}"));
        assert!(
            out.status.success(),
            "{program} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("utf-8 output")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::test_support::{workload, TempDir};
    use super::*;
    use crate::binpb::{BinpbReader, Record};
    use crate::symbolize::ModuleMap;

    struct Read {
        header: ProcessInfo,
        snapshots: Vec<Snapshot>,
        stacks: HashMap<u32, Vec<u64>>,
    }

    fn read_back(path: &Path) -> Read {
        let mut reader = BinpbReader::open(path).expect("open");
        let mut header = None;
        let mut snapshots = Vec::new();
        while let Some(record) = reader.next_record().expect("valid record") {
            match record {
                Record::Header(h) => header = Some(h),
                Record::Snapshot(s) => snapshots.push(s),
            }
        }
        assert!(!reader.tail().expect("ended").is_torn());
        let dict = reader.dictionaries();
        let mut stacks = HashMap::new();
        for snap in &snapshots {
            for st in &snap.stacktraces {
                stacks.insert(st.trace_id, dict.resolve(st.trace_id).collect());
            }
        }
        Read {
            header: header.expect("header"),
            snapshots,
            stacks,
        }
    }

    #[test]
    fn stream_follows_memhawk_semantics() {
        let dir = TempDir::new("fixture");
        let bin = workload(&dir);
        let mut opts = FixtureOptions::new(&bin, dir.path().join("a.binpb"));
        opts.snapshots = 12;
        opts.stacks = 2500;
        opts.pid = 77;
        opts.name = "alpha".to_owned();
        let made = generate(&opts).expect("generate");
        assert_eq!(made.stacks, 2500);
        assert_eq!(made.snapshots, 13);
        let read = read_back(&opts.output);

        assert_eq!(read.header.pid, 77);
        assert_eq!(read.header.process_short_name, "alpha");
        assert_eq!(Path::new(&read.header.process_full_path), made.binary);
        assert_eq!(read.header.start_timestamp, opts.start_timestamp_ns);
        assert_eq!(read.snapshots.len(), 13);

        // Snapshot 0: trace 0 zeros without stack, profiler trace with an
        // empty stack, the module map (repeated in snapshot 1 only).
        let s0 = &read.snapshots[0];
        assert_eq!(s0.timestamp, opts.start_timestamp_ns);
        let t0 = s0
            .changed
            .iter()
            .find(|t| t.trace_id == 0)
            .expect("trace 0");
        assert_eq!(t0.actual, Some(AllocSummary::default()));
        assert!(!read.stacks.contains_key(&0));
        assert_eq!(read.stacks[&PROFILER_TRACE_BIT], Vec::<u64>::new());
        assert!(s0.changed.iter().any(|t| t.trace_id == PROFILER_TRACE_BIT));
        assert!(!s0.loaded_so.is_empty());
        assert_eq!(read.snapshots[1].loaded_so, s0.loaded_so);
        assert!(read.snapshots[2..].iter().all(|s| s.loaded_so.is_empty()));

        // 1 s apart; total = sum of latest values; cumulative never
        // decreases; growth to a peak, then frees.
        let mut latest: HashMap<u32, AllocSummary> = HashMap::new();
        let mut prev_total = AllocSummary::default();
        let mut sizes = Vec::new();
        for (i, snap) in read.snapshots.iter().enumerate() {
            assert_eq!(
                snap.timestamp,
                opts.start_timestamp_ns + i as u64 * 1_000_000_000
            );
            for t in &snap.changed {
                let v = t.actual.expect("actual");
                if let Some(old) = latest.get(&t.trace_id) {
                    assert!(v.total_count >= old.total_count && v.total_bytes >= old.total_bytes);
                }
                assert!(v.size >= 0 && v.active >= 0);
                latest.insert(t.trace_id, v);
            }
            let mut sum = AllocSummary::default();
            for v in latest.values() {
                sum.size += v.size;
                sum.active += v.active;
                sum.overhead += v.overhead;
                sum.total_count += v.total_count;
                sum.total_bytes += v.total_bytes;
            }
            let total = snap.total.expect("total");
            assert_eq!(total, sum, "snapshot {i}");
            assert!(total.total_count >= prev_total.total_count);
            assert!(total.total_bytes >= prev_total.total_bytes);
            prev_total = total;
            sizes.push(total.size);
        }
        let peak = *sizes.iter().max().unwrap();
        assert_eq!(sizes[made.peak_snapshot], peak);
        assert!(made.peak_snapshot > 1 && made.peak_snapshot < sizes.len() - 1);
        assert!(
            *sizes.last().unwrap() < peak / 2,
            "frees after the peak: {sizes:?}"
        );

        // Distinct stacks, every frame in a module, main-program frames
        // inside the binary's code, recursion shows up as two frames.
        let traced: Vec<&Vec<u64>> = read
            .stacks
            .iter()
            .filter(|(id, _)| **id != PROFILER_TRACE_BIT)
            .map(|(_, s)| s)
            .collect();
        assert_eq!(traced.len(), 2500);
        let distinct: std::collections::HashSet<_> = traced.iter().collect();
        assert_eq!(distinct.len(), 2500);
        let map = ModuleMap::new(&s0.loaded_so, Some(&made.binary));
        for stack in &traced {
            for &addr in *stack {
                let (module, _) = map
                    .lookup(addr)
                    .unwrap_or_else(|| panic!("{addr:#x} in no module"));
                assert!(module == 0 || map.modules()[module].filename == FAKE_LIBC);
            }
        }
        let rec = traced
            .iter()
            .filter(|s| {
                s.iter()
                    .filter(|&&a| map.lookup(a).is_some_and(|(m, _)| m == 0))
                    .count()
                    == 5
            })
            .count();
        assert!(rec > 0, "some stacks carry two wl_tree_build frames");
        assert!(made.main_addresses.len() > 20);
        assert!(made.bytes > 0 && made.bytes == std::fs::metadata(&opts.output).unwrap().len());
    }

    #[test]
    fn same_seed_same_file_and_two_processes_differ() {
        let dir = TempDir::new("fixture-seed");
        let bin = workload(&dir);
        let mut a = FixtureOptions::new(&bin, dir.path().join("a.binpb"));
        a.snapshots = 4;
        a.stacks = 300;
        let mut b = a.clone();
        b.output = dir.path().join("b.binpb");
        generate(&a).unwrap();
        generate(&b).unwrap();
        assert_eq!(
            std::fs::read(&a.output).unwrap(),
            std::fs::read(&b.output).unwrap()
        );

        let mut c = a.clone();
        c.output = dir.path().join("c.binpb");
        c.pid = 9001;
        c.name = "beta".to_owned();
        c.seed = 2;
        generate(&c).unwrap();
        let ra = read_back(&a.output);
        let rc = read_back(&c.output);
        assert_eq!((ra.header.pid, rc.header.pid), (4242, 9001));
        assert_eq!(rc.header.process_short_name, "beta");
        assert_ne!(ra.stacks, rc.stacks);
    }

    #[test]
    fn not_the_workload_is_an_error_naming_the_file() {
        let dir = TempDir::new("fixture-bad");
        let path = dir.path().join("nope");
        std::fs::write(&path, b"not an elf").unwrap();
        let err = generate(&FixtureOptions::new(&path, dir.path().join("x.binpb"))).unwrap_err();
        assert!(matches!(err, Error::Elf { .. }), "{err}");
        assert!(err.to_string().contains("nope"));
    }
}
