//! Generator of realistic `.binpb` fixtures whose stacks are call paths the
//! compiled program really has.
//!
//! The program is `fixtures/gen/workload.c`, embedded in this library
//! ([`WORKLOAD_C`]) so an installed `flamehouse` needs no checkout: the
//! source is written next to the binary and compiled on demand with
//! `gcc -g -O1` by [`compile_workload`] (or `fixtures/gen/build.sh`); no
//! binary is committed. [`generate`] reads the binary's program headers,
//! function symbols and the compiler's DWARF call-site records, and writes a
//! MemHawk snapshot stream through [`BinpbWriter`]:
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
//! # Stacks
//!
//! Stacks are walks of the workload's real call graph, as an unwinder
//! records them: every frame inside the program is the return address of a
//! real call instruction (the `DW_TAG_call_site` records gcc writes with
//! `-g -O1`: `DW_AT_call_return_pc` and the callee). A walk starts at
//! `_start`'s call of `__libc_start_main` (found by its GOT slot), goes
//! through two fake libc frames (`__libc_start_main`,
//! `__libc_start_call_main`), `main`, and follows calls from function to
//! function down to a call of `malloc`, `calloc` or `realloc`: that call's
//! return address is the leaf (the allocating function; MemHawk's own hook
//! frames are not part of a stack). Allocations inside libc functions
//! (`printf`'s buffer) are not modelled. Recursion (`wl_tree_build`) is
//! written level by level, one frame per level up to the workload's 13
//! levels, as an unwinder sees it; MemHawk's collapsing of deep recursion is
//! not imitated, because those levels are what makes thousands of distinct
//! real call paths. [`generate`] takes every path with at most two frames of
//! one function first, then a seeded random choice of the deeper ones; a
//! request for more stacks than the program has paths (16,385) gets them
//! all ([`GeneratedFixture::stacks`] says how many).
//!
//! What is written per frame is [`FrameAddresses`]: by default the return
//! address minus 1 for every frame, as MemHawk stores them
//! (`shared/reference/binpb-format.md`); [`FrameAddresses::Unwound`] writes
//! the callers' raw return addresses instead, which the symbolizer must
//! look up at `addr - 1` ([`crate::symbolize::Symbolizer::symbolize_stack`]):
//! both variants of one seed must give the same flame graph.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::Command;

use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
use object::{
    Object, ObjectKind, ObjectSection, ObjectSymbol, ObjectSymbolTable, RelocationTarget,
    SymbolKind,
};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::formats::binpb::{
    AllocSummary, BinpbWriter, ElfInfo, ProcessInfo, Segment, Snapshot, Stacktrace, StacktracePtr,
    TracedAllocSummary, PROFILER_TRACE_BIT,
};

/// The workload's C source (`fixtures/gen/workload.c`), embedded so the
/// generator works from an installed binary.
pub const WORKLOAD_C: &str = include_str!("../../fixtures/gen/workload.c");

/// Load bias of a PIE main program (what Linux uses without ASLR on x86-64).
pub const PIE_BIAS: u64 = 0x5555_5555_4000;

/// Load bias of the fake libc.
pub const LIBC_BIAS: u64 = 0x7fff_f7d8_0000;

/// Path of the fake libc (does not exist, so it has no symbols).
pub const FAKE_LIBC: &str = "/nonexistent/flamehouse-fixture/lib/libc.so.6";

/// Module-relative addresses of the fake libc's two start-up frames
/// (`__libc_start_call_main` calling `main`, `__libc_start_main` calling
/// it), written as they are in both [`FrameAddresses`] variants.
const LIBC_START_CALL_MAIN: u64 = 0x29d8f;
const LIBC_START_MAIN: u64 = 0x29e3f;

/// The allocators whose calls end a stack.
pub const ALLOCATORS: &[&str] = &["malloc", "calloc", "realloc"];

/// Frames of one function in one stack at most: the workload's recursion
/// (`wl_tree_build`, depth capped at 12 by `main`) has 13 levels.
pub const MAX_LEVELS: usize = 13;

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
    /// The workload's call graph is not there: no `main`, or no call path
    /// from it to an allocator in the DWARF call-site records (not the
    /// workload, or built without `-g`).
    #[error("{}: {what} (not built from workload.c with -g -O1?)", path.display())]
    NoCallGraph {
        /// The binary.
        path: PathBuf,
        /// What is missing.
        what: String,
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

/// What a fixture writes as the address of each frame inside the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FrameAddresses {
    /// Every frame, the leaf included, is its return address minus 1 (an
    /// address inside the call instruction), as MemHawk stores them. The
    /// default.
    #[default]
    ReturnMinusOne,
    /// Caller frames are raw return addresses (the instruction after each
    /// call), as a frame-pointer unwinder records them; the leaf stays
    /// return address minus 1 (inside the call to the allocator, where
    /// execution is). Symbolizing it right needs the `addr - 1` rule for
    /// non-leaf frames; the return address of some calls lies on another
    /// line or outside an inlined function (`wl_index_root`).
    Unwound,
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
    /// Distinct stack traces, at most the program's call paths (16,385).
    /// Default 3000.
    pub stacks: usize,
    /// Random seed (same seed and binary: same file). Default 1.
    pub seed: u64,
    /// Process id. Default 4242.
    pub pid: u32,
    /// Process short name. Default `workload`.
    pub name: String,
    /// Start time, ns since the Unix epoch. Default 2026-01-01T00:00:00Z.
    pub start_timestamp_ns: u64,
    /// What is written per frame. Default [`FrameAddresses::ReturnMinusOne`]
    /// (MemHawk's form).
    pub frame_addresses: FrameAddresses,
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
            frame_addresses: FrameAddresses::default(),
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
    /// stacks (as written), sorted.
    pub main_addresses: Vec<u64>,
    /// Snapshot index (0-based, counting snapshot 0) of the peak live size.
    pub peak_snapshot: usize,
    /// File size in bytes.
    pub bytes: u64,
}

/// Writes [`WORKLOAD_C`] to `out_dir/workload.c`, compiles it with `$CC`
/// (default `gcc`) `-g -O1 -fno-omit-frame-pointer` into `out_dir/workload`
/// and returns that path.
///
/// # Errors
/// If the directory or source cannot be written or the compiler fails.
pub fn compile_workload(out_dir: &Path) -> Result<PathBuf, Error> {
    std::fs::create_dir_all(out_dir).map_err(|cause| Error::Io {
        path: out_dir.to_path_buf(),
        cause,
    })?;
    let source = out_dir.join("workload.c");
    std::fs::write(&source, WORKLOAD_C).map_err(|cause| Error::Io {
        path: source.clone(),
        cause,
    })?;
    let out = out_dir.join("workload");
    let dir = out_dir.canonicalize().map_err(|cause| Error::Io {
        path: out_dir.to_path_buf(),
        cause,
    })?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "gcc".to_owned());
    let mut cmd = Command::new(&cc);
    // Compiled in the output directory under a stable name: the DWARF file
    // of every frame reads `fixtures/gen/workload.c` wherever the fixtures
    // were written, so two fixture sets name their frames alike.
    cmd.current_dir(&dir)
        .args(["-g", "-O1", "-fno-omit-frame-pointer"])
        .arg(format!("-ffile-prefix-map={}=fixtures/gen", dir.display()))
        .args(["-o", "workload", "workload.c"]);
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

/// One call instruction of the program (ELF addresses).
#[derive(Debug, Clone, PartialEq, Eq)]
struct CallSite {
    /// The return address: the instruction after the call.
    ret: u64,
    /// The called function's name.
    callee: String,
}

/// What the generator needs from the binary.
#[derive(Debug)]
struct BinaryInfo {
    bias: u64,
    segments: Vec<Segment>,
    /// Call sites per calling function, by return address.
    calls: BTreeMap<String, Vec<CallSite>>,
    /// Return address of `_start`'s call of `__libc_start_main`, if found.
    start_ret: Option<u64>,
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

    // Function ranges, to name the caller of each call site.
    let mut functions: BTreeMap<u64, (u64, String)> = BTreeMap::new();
    for sym in elf.symbols() {
        if sym.kind() != SymbolKind::Text || sym.size() == 0 {
            continue;
        }
        if let Ok(name) = sym.name() {
            functions.insert(sym.address(), (sym.address() + sym.size(), name.to_owned()));
        }
    }
    let function_at = |addr: u64| {
        functions
            .range(..=addr)
            .next_back()
            .filter(|(_, (end, _))| addr < *end)
            .map(|(_, (_, name))| name.clone())
    };

    let mut calls: BTreeMap<String, Vec<CallSite>> = BTreeMap::new();
    for site in call_sites(path, &elf)? {
        // The call instruction ends at `ret`, so `ret - 1` is inside it.
        if let Some(caller) = function_at(site.ret - 1) {
            calls.entry(caller).or_default().push(site);
        }
    }
    for sites in calls.values_mut() {
        sites.sort_by_key(|s| s.ret);
        sites.dedup();
    }
    if !calls.contains_key("main") {
        return Err(Error::NoCallGraph {
            path: path.to_path_buf(),
            what: "no DWARF call sites in main".to_owned(),
        });
    }
    let start_ret = start_call(&elf);
    Ok(BinaryInfo {
        bias,
        segments,
        calls,
        start_ret,
    })
}

/// Every call the compiler recorded: `DW_TAG_call_site` (DWARF 5) or
/// `DW_TAG_GNU_call_site`, with its return address and callee name. Calls
/// through a pointer (no callee) are skipped.
fn call_sites(
    path: &Path,
    elf: &ElfFile64<'_, object::Endianness>,
) -> Result<Vec<CallSite>, Error> {
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
    let mut out = Vec::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next().map_err(dwarf_err)? {
        let unit = dwarf.unit(header).map_err(dwarf_err)?;
        let mut entries = unit.entries();
        while let Some(entry) = entries.next_dfs().map_err(dwarf_err)? {
            let (ret_attr, origin_attr) = match entry.tag() {
                gimli::DW_TAG_call_site => (gimli::DW_AT_call_return_pc, gimli::DW_AT_call_origin),
                gimli::DW_TAG_GNU_call_site => (gimli::DW_AT_low_pc, gimli::DW_AT_abstract_origin),
                _ => continue,
            };
            let Some(ret_value) = entry.attr_value(ret_attr) else {
                continue;
            };
            let Some(ret) = dwarf.attr_address(&unit, ret_value).map_err(dwarf_err)? else {
                continue;
            };
            let Some(gimli::AttributeValue::UnitRef(origin)) = entry.attr_value(origin_attr) else {
                continue;
            };
            if let Some(callee) = entry_name(&dwarf, &unit, origin).map_err(dwarf_err)? {
                out.push(CallSite { ret, callee });
            }
        }
    }
    Ok(out)
}

/// The name of a DIE, following `DW_AT_abstract_origin` / `DW_AT_specification`
/// a few times.
fn entry_name<R: gimli::Reader>(
    dwarf: &gimli::Dwarf<R>,
    unit: &gimli::Unit<R>,
    mut offset: gimli::UnitOffset<R::Offset>,
) -> gimli::Result<Option<String>> {
    for _ in 0..4 {
        let entry = unit.entry(offset)?;
        if let Some(name) = entry.attr_value(gimli::DW_AT_name) {
            let name = dwarf.attr_string(unit, name)?;
            return Ok(Some(name.to_string_lossy()?.into_owned()));
        }
        match entry
            .attr_value(gimli::DW_AT_abstract_origin)
            .or_else(|| entry.attr_value(gimli::DW_AT_specification))
        {
            Some(gimli::AttributeValue::UnitRef(next)) => offset = next,
            _ => return Ok(None),
        }
    }
    Ok(None)
}

/// The return address of `_start`'s `call *__libc_start_main@GOTPCREL(%rip)`
/// (`ff 15 rel32`, found by its GOT slot's dynamic relocation); `None` when
/// the start-up code is not that (static binary, other libc).
fn start_call(elf: &ElfFile64<'_, object::Endianness>) -> Option<u64> {
    let dynsyms = elf.dynamic_symbol_table()?;
    let got = elf.dynamic_relocations()?.find_map(|(offset, reloc)| {
        let RelocationTarget::Symbol(index) = reloc.target() else {
            return None;
        };
        let sym = dynsyms.symbol_by_index(index).ok()?;
        (sym.name().ok()? == "__libc_start_main").then_some(offset)
    })?;
    let start = elf.symbols().find(|s| s.name() == Ok("_start"))?.address();
    let text = elf
        .sections()
        .find(|s| (s.address()..s.address() + s.size()).contains(&start))?;
    let bytes = text.data().ok()?;
    let from = usize::try_from(start - text.address()).ok()?;
    let window = bytes.get(from..bytes.len().min(from + 64))?;
    window.windows(6).enumerate().find_map(|(i, w)| {
        let rel = i32::from_le_bytes([w[2], w[3], w[4], w[5]]);
        let next = start + i as u64 + 6;
        (w[0] == 0xff && w[1] == 0x15 && next.wrapping_add_signed(i64::from(rel)) == got)
            .then_some(next)
    })
}

/// Every call path from `main` to an allocator, root first, as return
/// addresses (ELF addresses), each function at most [`MAX_LEVELS`] times.
fn call_paths(info: &BinaryInfo) -> Vec<Vec<u64>> {
    fn walk<'a>(
        info: &'a BinaryInfo,
        function: &'a str,
        names: &mut Vec<&'a str>,
        rets: &mut Vec<u64>,
        out: &mut Vec<Vec<u64>>,
    ) {
        let Some(sites) = info.calls.get(function) else {
            return;
        };
        for site in sites {
            rets.push(site.ret);
            if ALLOCATORS.contains(&site.callee.as_str()) {
                out.push(rets.clone());
            } else if info.calls.contains_key(&site.callee)
                && names.iter().filter(|&&n| n == site.callee).count() < MAX_LEVELS
            {
                names.push(&site.callee);
                walk(info, &site.callee, names, rets, out);
                names.pop();
            }
            rets.pop();
        }
    }
    let mut out = Vec::new();
    walk(info, "main", &mut vec!["main"], &mut Vec::new(), &mut out);
    out
}

/// The most frames of one function in a path (1 without recursion).
fn levels(path: &[u64], info: &BinaryInfo) -> usize {
    let mut callers: HashMap<&str, usize> = HashMap::new();
    for &ret in path {
        for (name, sites) in &info.calls {
            if sites.iter().any(|s| s.ret == ret) {
                *callers.entry(name.as_str()).or_default() += 1;
            }
        }
    }
    callers.values().copied().max().unwrap_or(0)
}

/// Distinct stacks, leaf first, absolute addresses as written (see the
/// module documentation).
fn make_stacks(
    info: &BinaryInfo,
    count: usize,
    frames: FrameAddresses,
    rng: &mut StdRng,
) -> Vec<Vec<u64>> {
    let (mut shallow, mut deep): (Vec<Vec<u64>>, Vec<Vec<u64>>) = call_paths(info)
        .into_iter()
        .partition(|p| levels(p, info) <= 2);
    shallow.shuffle(rng);
    deep.shuffle(rng);
    let caller = |ret: u64| match frames {
        FrameAddresses::ReturnMinusOne => info.bias + ret - 1,
        FrameAddresses::Unwound => info.bias + ret,
    };
    let mut seen = HashSet::new();
    shallow
        .into_iter()
        .chain(deep)
        .take(count)
        .map(|path| {
            let mut stack: Vec<u64> = Vec::with_capacity(path.len() + 3);
            if let Some(ret) = info.start_ret {
                stack.push(caller(ret));
            }
            stack.push(LIBC_BIAS + LIBC_START_MAIN);
            stack.push(LIBC_BIAS + LIBC_START_CALL_MAIN);
            let (leaf, callers) = path.split_last().expect("a path has a leaf call");
            stack.extend(callers.iter().map(|&r| caller(r)));
            stack.push(info.bias + leaf - 1);
            stack.reverse();
            stack
        })
        .filter(|s| seen.insert(s.clone()))
        .collect()
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
    let stacks = make_stacks(&info, opts.stacks, opts.frame_addresses, &mut rng);
    if stacks.is_empty() && opts.stacks > 0 {
        return Err(Error::NoCallGraph {
            path: binary,
            what: "no call path from main to malloc, calloc or realloc".to_owned(),
        });
    }
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

    use super::test_support::{run, workload, TempDir};
    use super::*;
    use crate::formats::binpb::{BinpbReader, Record};
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
        // Recursion: one frame per level, up to the workload's 13 levels.
        let program_frames = |s: &Vec<u64>| {
            s.iter()
                .filter(|&&a| map.lookup(a).is_some_and(|(m, _)| m == 0))
                .count()
        };
        let shallowest = traced.iter().map(|s| program_frames(s)).min().unwrap();
        let deepest = traced.iter().map(|s| program_frames(s)).max().unwrap();
        // _start, main, wl_load_file / wl_serve_requests, the allocating
        // function; and _start, main, wl_build_index, wl_tree_plant, then
        // 13 levels of wl_tree_build.
        assert_eq!((shallowest, deepest), (4, 4 + MAX_LEVELS));
        assert!(made.main_addresses.len() >= 12, "{:?}", made.main_addresses);
        assert!(made.bytes > 0 && made.bytes == std::fs::metadata(&opts.output).unwrap().len());
    }

    /// The call instructions of `objdump -d`: return address (the next
    /// instruction) -> (calling function, called symbol without `@plt` /
    /// `@GLIBC...`), and every function's name by start address.
    fn objdump_calls(binary: &Path) -> HashMap<u64, (String, String)> {
        let text = run("objdump", &["-d".as_ref(), binary.as_os_str()]);
        let mut calls = HashMap::new();
        let mut function = String::new();
        let mut pending: Option<(String, String)> = None;
        for line in text.lines() {
            // `0000000000001189 <wl_parse_record>:`
            if let Some(name) = line.strip_suffix(">:").and_then(|l| l.split_once(" <")) {
                function = name.1.to_owned();
                pending = None;
                continue;
            }
            // `    11e1:\te8 ca fe ff ff       \tcall   10b0 <malloc@plt>`
            let mut parts = line.trim_start().splitn(3, '\t');
            let (Some(addr), Some(_bytes)) = (parts.next(), parts.next()) else {
                continue;
            };
            let Some(addr) = addr
                .strip_suffix(':')
                .and_then(|a| u64::from_str_radix(a, 16).ok())
            else {
                continue;
            };
            if let Some(call) = pending.take() {
                calls.insert(addr, call);
            }
            let insn = parts.next().unwrap_or("");
            if insn.starts_with("call") {
                let target = insn
                    .rsplit_once('<')
                    .and_then(|(_, t)| t.strip_suffix('>'))
                    .unwrap_or("");
                let target = target.split('@').next().unwrap_or("").to_owned();
                pending = Some((function.clone(), target));
            }
        }
        calls
    }

    /// Every caller -> callee edge of every generated stack exists in the
    /// binary's disassembly (objdump, not the DWARF the generator reads):
    /// each program frame is (return address - 1 of) a call instruction
    /// whose target is the function of the next inner frame, and each leaf
    /// calls an allocator. Both frame-address variants.
    #[test]
    fn call_graph_of_the_stacks_is_in_the_disassembly() {
        let dir = TempDir::new("fixture-objdump");
        let bin = workload(&dir);
        let calls = objdump_calls(&bin);
        assert!(calls.len() > 20, "objdump found {} calls", calls.len());
        for (frames, shift) in [
            (FrameAddresses::ReturnMinusOne, 1),
            (FrameAddresses::Unwound, 0),
        ] {
            let mut opts = FixtureOptions::new(&bin, dir.path().join("g.binpb"));
            opts.snapshots = 4;
            opts.stacks = 20_000;
            opts.frame_addresses = frames;
            let made = generate(&opts).expect("generate");
            // Every real call path, no more: 3 + 2 * (2^13 - 1).
            assert_eq!(made.stacks, 3 + 2 * ((1 << MAX_LEVELS) - 1));
            let read = read_back(&opts.output);
            let map = ModuleMap::new(&read.snapshots[0].loaded_so, Some(&made.binary));
            let mut edges = std::collections::BTreeSet::new();
            for (id, stack) in &read.stacks {
                if *id == PROFILER_TRACE_BIT {
                    continue;
                }
                // Every program frame follows a call instruction; the leaf
                // (return address - 1 in both variants) calls an allocator.
                for (depth, &addr) in stack.iter().enumerate() {
                    if map.lookup(addr).is_none_or(|(m, _)| m != 0) {
                        continue;
                    }
                    let ret = addr - made.bias + if depth == 0 { 1 } else { shift };
                    let (caller, callee) = calls.get(&ret).unwrap_or_else(|| {
                        panic!("trace {id}: {addr:#x} is not after a call instruction")
                    });
                    if depth == 0 {
                        assert!(
                            ALLOCATORS.contains(&callee.as_str()),
                            "trace {id}: leaf {caller} calls {callee}"
                        );
                    }
                    edges.insert((caller.clone(), callee.clone()));
                }
                // Walk root -> leaf: each frame's callee is the function of
                // the next inner program frame.
                let program: Vec<(String, String)> = stack
                    .iter()
                    .enumerate()
                    .rev()
                    .filter(|(_, &a)| map.lookup(a).is_some_and(|(m, _)| m == 0))
                    .map(|(depth, &a)| {
                        let ret = a - made.bias + if depth == 0 { 1 } else { shift };
                        calls[&ret].clone()
                    })
                    .collect();
                assert_eq!(
                    program[0],
                    ("_start".to_owned(), "__libc_start_main".to_owned())
                );
                assert_eq!(program[1].0, "main", "trace {id}: libc calls main");
                for pair in program[1..].windows(2) {
                    assert_eq!(pair[0].1, pair[1].0, "trace {id}: {program:?}");
                }
            }
            // The program's whole allocating call graph, nothing else (no
            // `main -> atoi -> ...`).
            let want: std::collections::BTreeSet<(String, String)> = [
                ("_start", "__libc_start_main"),
                ("main", "wl_load_file"),
                ("main", "wl_serve_requests"),
                ("main", "wl_build_index"),
                ("wl_load_file", "wl_parse_record"),
                ("wl_parse_record", "malloc"),
                ("wl_serve_requests", "wl_cache_insert"),
                ("wl_serve_requests", "wl_grow_buffer"),
                ("wl_cache_insert", "malloc"),
                ("wl_grow_buffer", "realloc"),
                ("wl_build_index", "wl_tree_plant"),
                ("wl_tree_plant", "wl_tree_build"),
                ("wl_tree_build", "calloc"),
                ("wl_tree_build", "malloc"),
                ("wl_tree_build", "wl_tree_build"),
            ]
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect();
            assert_eq!(edges, want, "{frames:?}");
        }
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
