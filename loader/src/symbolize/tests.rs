use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::*;
use crate::fixture::test_support::{run, workload, TempDir};
use crate::fixture::{self, FixtureOptions, FAKE_LIBC, PIE_BIAS};
use crate::formats::binpb::{BinpbReader, ElfInfo, Record, Segment};

fn elf(filename: &str, bias: u64, segments: &[(u64, u64)]) -> ElfInfo {
    ElfInfo {
        filename: filename.to_owned(),
        addr: bias,
        segments: segments
            .iter()
            .map(|&(addr, size)| Segment { addr, size })
            .collect(),
    }
}

// ---------------------------------------------------------------- module map

#[test]
fn module_map_picks_largest_bias_whose_segments_contain_the_address() {
    let map = ModuleMap::new(
        &[
            elf(
                "",
                0x5555_5555_4000,
                &[(0, 0x1000), (0x1000, 0x2000), (0, 0)],
            ),
            elf(
                "/lib/libc.so.6",
                0x7f00_0000_0000,
                &[(0, 0x28000), (0x28000, 0x1000)],
            ),
            elf("/lib/libm.so.6", 0x7f00_0010_0000, &[(0x1000, 0x1000)]),
        ],
        Some(Path::new("/usr/bin/app")),
    );
    // Start inclusive, end exclusive.
    assert_eq!(map.lookup(0x5555_5555_4000), Some((0, 0)));
    assert_eq!(map.lookup(0x5555_5555_6fff), Some((0, 0x2fff)));
    assert_eq!(map.lookup(0x5555_5555_7000), None);
    // Below every bias.
    assert_eq!(map.lookup(0x1000), None);
    assert_eq!(map.lookup(0), None);
    // The module-relative address is addr - bias, not addr - segment start.
    assert_eq!(map.lookup(0x7f00_0002_8010), Some((1, 0x28010)));
    // libm's bias is the largest not above, but its segment starts at +0x1000:
    // the address falls to no module (libc's segments end before it).
    assert_eq!(map.lookup(0x7f00_0010_0800), None);
    assert_eq!(map.lookup(0x7f00_0010_1800), Some((2, 0x1800)));
    // Far above everything.
    assert_eq!(map.lookup(u64::MAX), None);
    // Main program names.
    assert_eq!(
        map.modules()[0].path.as_deref(),
        Some(Path::new("/usr/bin/app"))
    );
    assert!(map.modules()[0].is_main);
    assert_eq!(map.modules()[1].basename(), "libc.so.6");
}

#[test]
fn module_map_falls_back_to_a_lower_bias_that_contains_the_address() {
    // A higher-bias module whose segments do not contain the address does not
    // hide a lower-bias module whose segments do (the rule's "and whose
    // segments contain it").
    let map = ModuleMap::new(
        &[
            elf("/a.so", 0x1000, &[(0, 0x10_0000)]),
            elf("/b.so", 0x2000, &[(0x20_0000, 0x1000)]),
        ],
        None,
    );
    assert_eq!(map.lookup(0x3000), Some((0, 0x2000)));
    assert_eq!(map.lookup(0x20_2000), Some((1, 0x20_0000)));
}

#[test]
fn module_map_same_bias_profile_order_and_overflow() {
    let map = ModuleMap::new(
        &[
            elf("/x.so", 0x1000, &[(0, 0x100)]),
            elf("/y.so", 0x1000, &[(0x80, 0x100)]),
            elf("/z.so", u64::MAX - 0x10, &[(0, 0x100), (0x20, 0x10)]),
        ],
        None,
    );
    assert_eq!(map.lookup(0x1090), Some((0, 0x90)));
    assert_eq!(map.lookup(0x1100), Some((1, 0x100)));
    // Segment end clamped at u64::MAX; a segment whose start overflows is
    // dropped.
    assert_eq!(map.lookup(u64::MAX - 1), Some((2, 0xf)));
    assert_eq!(map.modules()[2].ranges.len(), 1);
}

#[test]
fn main_program_names_and_missing_main_path() {
    let map = ModuleMap::new(
        &[
            elf("/proc/self/exe", 0, &[(0x40_0000, 0x1000)]),
            elf("", 0x1000_0000, &[(0, 0x10)]),
        ],
        None,
    );
    assert!(map.modules().iter().all(|m| m.is_main && m.path.is_none()));
    assert_eq!(map.modules()[0].basename(), "[main]");
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.set_modules(map);
    assert_eq!(sym.symbolize(0x40_0010)[0].label, "[main]+0x400010");
    assert_eq!(sym.symbolize(0x1000_0001)[0].label, "[main]+0x1");
    // Both entries share the "no path" file: reported once.
    assert_eq!(sym.missing_modules().len(), 1);
    assert!(matches!(sym.missing_modules()[0], Error::NoMainPath { .. }));
    assert_eq!(sym.symbolize(0x10)[0].label, "0x10");
    assert_eq!(sym.symbolize(0x10)[0].source, FrameSource::Unsymbolized);
}

// ------------------------------------------------- against binutils addr2line

/// `addr2line -f -i -C -a -e BIN ADDR...`: per address, (function, file
/// basename, line) innermost first.
fn binutils(binary: &Path, rel: &[u64]) -> Vec<Vec<(String, String, Option<u32>)>> {
    let mut args: Vec<std::ffi::OsString> = ["-f", "-i", "-C", "-a", "-e"]
        .iter()
        .map(Into::into)
        .collect();
    args.push(binary.into());
    args.extend(rel.iter().map(|a| format!("{a:#x}").into()));
    let args: Vec<&OsStr> = args.iter().map(AsRef::as_ref).collect();
    let out = run("addr2line", &args);
    let mut groups: Vec<Vec<(String, String, Option<u32>)>> = Vec::new();
    let mut lines = out.lines();
    while let Some(line) = lines.next() {
        if line.starts_with("0x") && !line.contains(':') {
            groups.push(Vec::new());
            continue;
        }
        let loc = lines.next().expect("file:line after function");
        let loc = loc.split(" (discriminator").next().unwrap();
        let (file, line_no) = loc.rsplit_once(':').expect("file:line");
        let base = Path::new(file)
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        groups.last_mut().expect("address first").push((
            line.to_owned(),
            base,
            line_no.parse().ok(),
        ));
    }
    assert_eq!(groups.len(), rel.len());
    groups
}

struct Generated {
    _dir: TempDir,
    binary: PathBuf,
    made: fixture::GeneratedFixture,
    loaded_so: Vec<ElfInfo>,
    header_path: PathBuf,
    frame_addrs: Vec<u64>,
}

fn generated(stacks: usize) -> Generated {
    let dir = TempDir::new("symbolize");
    let binary = workload(&dir);
    let mut opts = FixtureOptions::new(&binary, dir.path().join("w.binpb"));
    opts.snapshots = 6;
    opts.stacks = stacks;
    let made = fixture::generate(&opts).expect("generate");
    let mut reader = BinpbReader::open(&opts.output).unwrap();
    let mut loaded_so = Vec::new();
    let mut header_path = PathBuf::new();
    while let Some(rec) = reader.next_record().unwrap() {
        match rec {
            Record::Header(h) => header_path = h.process_full_path.into(),
            Record::Snapshot(s) if loaded_so.is_empty() => loaded_so = s.loaded_so,
            Record::Snapshot(_) => {}
        }
    }
    let dict = reader.dictionaries();
    let frame_addrs = (1..=dict.frame_count() as u32)
        .map(|id| dict.frame_address(id).expect("dense ids"))
        .collect();
    Generated {
        _dir: dir,
        binary,
        made,
        loaded_so,
        header_path,
        frame_addrs,
    }
}

fn compare_with_binutils(sym: &mut Symbolizer, binary: &Path, abs: &[u64], bias: u64) {
    let rel: Vec<u64> = abs.iter().map(|a| a - bias).collect();
    let expected = binutils(binary, &rel);
    let mut inlined = 0;
    for ((&addr, rel), want) in abs.iter().zip(&rel).zip(expected) {
        let got = sym.symbolize(addr);
        let got: Vec<(String, String, Option<u32>)> = got
            .iter()
            .rev() // ours: outermost first; binutils: innermost first
            .map(|f| {
                let base = f
                    .file
                    .as_deref()
                    .map(|p| {
                        Path::new(p)
                            .file_name()
                            .unwrap()
                            .to_string_lossy()
                            .into_owned()
                    })
                    .unwrap_or_else(|| "??".to_owned());
                (f.function.clone(), base, f.line)
            })
            .collect();
        assert_eq!(got, want, "address {addr:#x} (module-relative {rel:#x})");
        if want.len() > 1 && want[0].0 == "wl_inline_alloc" {
            inlined += 1;
        }
    }
    assert!(
        inlined > 0,
        "some fixture addresses fall inside the inlined function"
    );
}

#[test]
fn fixture_addresses_match_binutils_addr2line() {
    let g = generated(1500);
    assert_eq!(g.header_path, g.made.binary);
    assert_eq!(g.made.bias, PIE_BIAS);
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.set_modules(ModuleMap::new(&g.loaded_so, Some(&g.header_path)));
    compare_with_binutils(&mut sym, &g.binary, &g.made.main_addresses, g.made.bias);
    // Outermost first, flagged.
    let inl = g
        .made
        .main_addresses
        .iter()
        .map(|&a| sym.symbolize(a).to_vec())
        .find(|f| f.len() > 1 && f[1].function == "wl_inline_alloc")
        .unwrap();
    assert!(!inl[0].inlined && inl[1].inlined);
    assert_eq!(inl[1].function, "wl_inline_alloc");
    assert_eq!(inl[0].source, FrameSource::Dwarf);
    assert!(sym.missing_modules().is_empty());
    assert_eq!(sym.stats().symbolized, sym.stats().distinct_addresses);
}

#[test]
fn missing_module_falls_back_to_offset_reported_once_and_cache_counts() {
    let g = generated(800);
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.set_modules(ModuleMap::new(&g.loaded_so, Some(&g.header_path)));
    let libc_bias = g
        .loaded_so
        .iter()
        .find(|e| e.filename == FAKE_LIBC)
        .unwrap()
        .addr;
    let mut libc_frames = 0;
    for round in 0..3 {
        for &addr in &g.frame_addrs {
            let frames = sym.symbolize(addr);
            assert!(!frames.is_empty());
            if addr >= libc_bias {
                assert_eq!(frames.len(), 1);
                assert_eq!(
                    frames[0].label,
                    format!("libc.so.6+{:#x}", addr - libc_bias)
                );
                assert_eq!(frames[0].source, FrameSource::Unsymbolized);
                if round == 0 {
                    libc_frames += 1;
                }
            }
        }
    }
    // __libc_start_main and __libc_start_call_main.
    assert_eq!(libc_frames, 2);
    assert_eq!(
        sym.missing_modules().len(),
        1,
        "{:?}",
        sym.missing_modules()
    );
    let missing = &sym.missing_modules()[0];
    assert!(matches!(missing, Error::Open { .. }));
    assert_eq!(missing.path(), Some(Path::new(FAKE_LIBC)));
    assert!(missing.to_string().contains("libc.so.6"));

    let stats = sym.stats();
    let n = g.frame_addrs.len();
    assert_eq!(stats.distinct_addresses, n);
    assert_eq!(stats.lookups, 3 * n as u64);
    assert_eq!(stats.hits, 2 * n as u64);
    assert_eq!(stats.symbolized, n - libc_frames);
    assert_eq!(stats.unmapped, 0);
    let pct = stats.symbolized_percent();
    assert!(pct > 50.0 && pct < 100.0, "{pct}");

    // A stack, leaf first in, root first out.
    let stack: Vec<u64> = g.frame_addrs[..1].to_vec();
    assert_eq!(
        sym.symbolize_stack(&stack),
        sym.symbolize(stack[0]).to_vec()
    );
}

#[test]
fn function_file_line_labels() {
    let g = generated(200);
    let mut sym = Symbolizer::new(SymbolizerOptions {
        granularity: Granularity::FunctionFileLine,
        ..SymbolizerOptions::default()
    });
    sym.set_modules(ModuleMap::new(&g.loaded_so, Some(&g.header_path)));
    for &addr in &g.made.main_addresses {
        for f in sym.symbolize(addr) {
            if let (Some(_), Some(line)) = (&f.file, f.line) {
                let base = Path::new(f.file.as_deref().unwrap()).file_name().unwrap();
                assert_eq!(
                    f.label,
                    format!("{} ({}:{line})", f.function, base.to_string_lossy())
                );
            }
        }
    }
    let labels: Vec<String> = g
        .made
        .main_addresses
        .iter()
        .flat_map(|&a| {
            sym.symbolize(a)
                .iter()
                .map(|f| f.label.clone())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(labels
        .iter()
        .any(|l| l.starts_with("wl_inline_alloc (workload.c:")));
}

// ------------------------------------------ debug files, symtab, stripped, sysroot

fn objcopy(args: &[&OsStr]) {
    run("objcopy", args);
}

fn symbolize_all(
    opts: SymbolizerOptions,
    binary: &Path,
    g: &Generated,
) -> (Vec<Vec<Frame>>, Symbolizer) {
    let map = ModuleMap::new(&g.loaded_so, Some(binary));
    let mut sym = Symbolizer::new(opts);
    sym.set_modules(map);
    let frames = g
        .made
        .main_addresses
        .iter()
        .map(|&a| sym.symbolize(a).to_vec())
        .collect();
    (frames, sym)
}

fn reference(g: &Generated) -> Vec<Vec<Frame>> {
    symbolize_all(SymbolizerOptions::default(), &g.binary, g).0
}

#[test]
fn separate_debug_file_via_debuglink_next_to_binary_and_in_dot_debug() {
    let g = generated(300);
    let want = reference(&g);
    let dir = TempDir::new("debuglink");
    for sub in ["", ".debug"] {
        let bin = dir.path().join(format!("app{}", sub.len()));
        let dbg_name = format!("app{}.dbg", sub.len());
        let dbg_dir = dir.path().join(sub);
        std::fs::create_dir_all(&dbg_dir).unwrap();
        let dbg = dbg_dir.join(&dbg_name);
        objcopy(&[
            "--only-keep-debug".as_ref(),
            g.binary.as_os_str(),
            dbg.as_os_str(),
        ]);
        let link = format!("--add-gnu-debuglink={}", dbg.display());
        objcopy(&[
            "--strip-debug".as_ref(),
            link.as_ref(),
            g.binary.as_os_str(),
            bin.as_os_str(),
        ]);
        let (got, sym) = symbolize_all(SymbolizerOptions::default(), &bin, &g);
        assert_eq!(got, want, "debug file in {sub:?}");
        assert!(sym.missing_modules().is_empty());
    }
}

#[test]
fn separate_debug_file_via_build_id_under_debug_dirs_and_sysroot() {
    let g = generated(300);
    let want = reference(&g);
    let dir = TempDir::new("buildid");
    // The profile says the binary was /opt/app/bin/app on the profiled
    // machine; its files were copied under a sysroot.
    let sysroot = dir.path().join("root");
    let bin_in_root = sysroot.join("opt/app/bin/app");
    std::fs::create_dir_all(bin_in_root.parent().unwrap()).unwrap();
    objcopy(&[
        "--strip-debug".as_ref(),
        g.binary.as_os_str(),
        bin_in_root.as_os_str(),
    ]);
    let notes = run("readelf", &["-n".as_ref(), g.binary.as_os_str()]);
    let id = notes
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .expect("gcc emits a build id")
        .trim()
        .to_owned();
    let debug_file = sysroot
        .join("usr/lib/debug/.build-id")
        .join(&id[..2])
        .join(format!("{}.debug", &id[2..]));
    std::fs::create_dir_all(debug_file.parent().unwrap()).unwrap();
    objcopy(&[
        "--only-keep-debug".as_ref(),
        g.binary.as_os_str(),
        debug_file.as_os_str(),
    ]);

    let opts = SymbolizerOptions {
        sysroot: Some(sysroot.clone()),
        ..SymbolizerOptions::default()
    };
    let (got, sym) = symbolize_all(opts, Path::new("/opt/app/bin/app"), &g);
    assert_eq!(got, want);
    assert!(sym.missing_modules().is_empty());

    // Without the sysroot the module is missing: reported with its path.
    let (got, sym) = symbolize_all(
        SymbolizerOptions::default(),
        Path::new("/opt/app/bin/app"),
        &g,
    );
    assert!(got
        .iter()
        .all(|f| f.len() == 1 && f[0].function.starts_with("app+0x")));
    assert_eq!(sym.missing_modules().len(), 1);
    assert_eq!(
        sym.missing_modules()[0].path(),
        Some(Path::new("/opt/app/bin/app"))
    );

    // Custom debug_dirs (no sysroot): binary given by its real path.
    let opts = SymbolizerOptions {
        debug_dirs: vec![sysroot.join("usr/lib/debug")],
        ..SymbolizerOptions::default()
    };
    let (got, _) = symbolize_all(opts, &bin_in_root, &g);
    assert_eq!(got, want);
}

#[test]
fn no_dwarf_uses_the_symbol_table_and_stripped_falls_back_to_offsets() {
    let g = generated(300);
    let want = reference(&g);
    let dir = TempDir::new("symtab");
    let nodebug = dir.path().join("nodebug");
    objcopy(&[
        "--strip-debug".as_ref(),
        g.binary.as_os_str(),
        nodebug.as_os_str(),
    ]);
    let (got, sym) = symbolize_all(SymbolizerOptions::default(), &nodebug, &g);
    for (got, want) in got.iter().zip(&want) {
        // One frame, the outermost (non-inlined) function, no file/line.
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].function, want[0].function);
        assert_eq!(got[0].source, FrameSource::SymbolTable);
        assert_eq!(got[0].file, None);
    }
    assert!(sym.missing_modules().is_empty());

    let stripped = dir.path().join("stripped");
    run(
        "strip",
        &[
            "--strip-all".as_ref(),
            "-o".as_ref(),
            stripped.as_os_str(),
            g.binary.as_os_str(),
        ],
    );
    let (got, sym) = symbolize_all(SymbolizerOptions::default(), &stripped, &g);
    for (frames, &addr) in got.iter().zip(&g.made.main_addresses) {
        assert_eq!(frames.len(), 1);
        assert_eq!(
            frames[0].label,
            format!("stripped+{:#x}", addr - g.made.bias)
        );
    }
    assert_eq!(sym.missing_modules().len(), 1);
    assert!(matches!(sym.missing_modules()[0], Error::NoSymbols { .. }));
    assert_eq!(sym.stats().symbolized, 0);
}

#[test]
fn unreadable_module_is_reported_not_fatal() {
    let dir = TempDir::new("garbage");
    let garbage = dir.path().join("libgarbage.so");
    std::fs::write(&garbage, b"\x7fELF garbage").unwrap();
    let map = ModuleMap::new(
        &[elf(garbage.to_str().unwrap(), 0x7000_0000, &[(0, 0x1000)])],
        None,
    );
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.set_modules(map);
    assert_eq!(sym.symbolize(0x7000_0123)[0].label, "libgarbage.so+0x123");
    assert_eq!(sym.symbolize(0x7000_0124)[0].label, "libgarbage.so+0x124");
    assert_eq!(sym.missing_modules().len(), 1);
    assert!(matches!(sym.missing_modules()[0], Error::Parse { .. }));
}

// ------------------------------------------------------- real-world modules

/// A module entry for `path` at `bias` with every program header as a
/// segment, as MemHawk writes it.
fn real_module(path: &Path, bias: u64) -> ElfInfo {
    use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
    let data = std::fs::read(path).unwrap();
    let elf = ElfFile64::<object::Endianness>::parse(&*data).unwrap();
    let e = elf.endian();
    ElfInfo {
        filename: path.display().to_string(),
        addr: bias,
        segments: elf
            .elf_header()
            .program_headers(e, &*data)
            .unwrap()
            .iter()
            .map(|ph| Segment {
                addr: ph.p_vaddr(e),
                size: ph.p_memsz(e),
            })
            .collect(),
    }
}

fn symbol_address(path: &Path, pred: impl Fn(&str) -> bool) -> Option<(u64, String)> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(path).unwrap();
    let file = object::File::parse(&*data).unwrap();
    file.symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.size() > 4 && s.address() != 0)
        .find_map(|s| {
            s.name()
                .ok()
                .filter(|n| pred(n))
                .map(|n| (s.address(), n.to_owned()))
        })
}

#[test]
fn rust_names_are_demangled() {
    // This test executable is Rust with DWARF.
    let exe = std::env::current_exe().unwrap();
    let (addr, mangled) = symbol_address(&exe, |n| {
        n.contains("symbolize5tests") && n.contains("rust_names_are_demangled")
    })
    .expect("this test's own symbol");
    assert!(mangled.starts_with("_ZN") || mangled.starts_with("_R"));
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.set_modules(ModuleMap::new(&[real_module(&exe, 0x5555_0000_0000)], None));
    let frames = sym.symbolize(0x5555_0000_0000 + addr + 2);
    assert_eq!(
        frames[0].function,
        "flamehouse::symbolize::tests::rust_names_are_demangled"
    );
    assert_eq!(frames[0].source, FrameSource::Dwarf);
}

#[test]
fn system_libc_resolves_through_its_symbol_tables() {
    // The libc this test process runs on (from its own memory map), so it
    // cannot be missing and the test cannot pass without looking at it.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let libc = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            let name = Path::new(p)
                .file_name()
                .unwrap_or_default()
                .to_string_lossy();
            name == "libc.so.6" || (name.starts_with("libc-") && name.ends_with(".so"))
        })
        .map(Path::new)
        .unwrap_or_else(|| panic!("no libc mapped in this test process:\n{maps}"));
    let (addr, _) = symbol_address(libc, |n| n == "malloc").expect("libc exports malloc");
    let bias = 0x7fff_f7d8_0000;
    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.set_modules(ModuleMap::new(&[real_module(libc, bias)], None));
    let frames = sym.symbolize(bias + addr + 3);
    assert!(
        frames.last().unwrap().function.contains("malloc"),
        "{frames:?}"
    );
    assert_ne!(frames[0].source, FrameSource::Unsymbolized);
    assert!(sym.missing_modules().is_empty());
}

/// Traces of a fixture, leaf first, with the module map and binary.
fn traces_of(path: &Path) -> (Vec<Vec<u64>>, Vec<ElfInfo>) {
    let mut reader = BinpbReader::open(path).unwrap();
    let mut ids = Vec::new();
    let mut loaded_so = Vec::new();
    while let Some(rec) = reader.next_record().unwrap() {
        if let Record::Snapshot(s) = rec {
            if loaded_so.is_empty() {
                loaded_so = s.loaded_so;
            }
            // Not the profiler's own (empty) stack.
            ids.extend(
                s.stacktraces
                    .iter()
                    .filter(|t| !t.ptr_id.is_empty())
                    .map(|t| t.trace_id),
            );
        }
    }
    let dict = reader.dictionaries();
    let traces = ids.iter().map(|&id| dict.resolve(id).collect()).collect();
    (traces, loaded_so)
}

/// Caller frames are return addresses: symbolized at `addr - 1`, checked
/// against binutils' addr2line at `addr - 1` on the workload's call of
/// `wl_tree_plant` from the inlined `wl_index_root`, whose return address
/// is already on `wl_build_index`'s next line (outside the inlined range).
/// A fixture written with raw return addresses and one written as MemHawk
/// does (return address - 1) give the same stacks.
#[test]
fn caller_frames_are_looked_up_at_return_address_minus_one() {
    let dir = TempDir::new("symbolize-ret");
    let binary = workload(&dir);
    let mut stacks = Vec::new();
    let mut loaded = Vec::new();
    for (name, frames) in [
        ("memhawk.binpb", fixture::FrameAddresses::ReturnMinusOne),
        ("unwound.binpb", fixture::FrameAddresses::Unwound),
    ] {
        let mut opts = FixtureOptions::new(&binary, dir.path().join(name));
        opts.snapshots = 3;
        opts.stacks = 400;
        opts.frame_addresses = frames;
        fixture::generate(&opts).expect("generate");
        let (traces, loaded_so) = traces_of(&opts.output);
        stacks.push(traces);
        loaded = loaded_so;
    }
    let (memhawk, unwound) = (&stacks[0], &stacks[1]);
    assert_eq!(memhawk.len(), unwound.len());

    // The raw return address of the wl_tree_plant call: a caller frame of
    // the unwound fixture whose two lookups differ per addr2line.
    let bias = PIE_BIAS;
    let callers: std::collections::BTreeSet<u64> = unwound
        .iter()
        .flat_map(|s| s[1..].iter().copied())
        .filter(|&a| a >= bias && a < fixture::LIBC_BIAS)
        .collect();
    let rel: Vec<u64> = callers.iter().map(|a| a - bias).collect();
    let at_ret = binutils(&binary, &rel);
    let before: Vec<u64> = rel.iter().map(|r| r - 1).collect();
    let at_call = binutils(&binary, &before);
    let (i, _) = at_call
        .iter()
        .enumerate()
        .find(|(_, g)| g.iter().any(|f| f.0 == "wl_index_root"))
        .expect("addr2line: a call inside the inlined wl_index_root");
    assert!(
        at_ret[i].iter().all(|f| f.0 != "wl_index_root"),
        "its return address is outside the inlined function: {:?}",
        at_ret[i]
    );
    let ret = callers.iter().nth(i).copied().unwrap();

    let mut sym = Symbolizer::new(SymbolizerOptions::default());
    sym.set_modules(ModuleMap::new(&loaded, Some(&binary)));
    let got: Vec<(String, Option<u32>)> = sym
        .symbolize_caller(ret)
        .iter()
        .rev()
        .map(|f| (f.function.clone(), f.line))
        .collect();
    let want: Vec<(String, Option<u32>)> = at_call[i]
        .iter()
        .map(|(f, _, line)| (f.clone(), *line))
        .collect();
    assert_eq!(got, want);
    // Every caller frame agrees with addr2line at addr - 1.
    for (k, &addr) in callers.iter().enumerate() {
        let got: Vec<String> = sym
            .symbolize_caller(addr)
            .iter()
            .rev()
            .map(|f| f.function.clone())
            .collect();
        let want: Vec<String> = at_call[k].iter().map(|f| f.0.clone()).collect();
        assert_eq!(got, want, "caller frame {addr:#x}");
    }

    // Whole stacks: both variants give the same labels, and the path
    // through the inlined wrapper reads wl_build_index -> wl_index_root ->
    // wl_tree_plant.
    let mut through_wrapper = 0;
    for (a, b) in memhawk.iter().zip(unwound) {
        let la: Vec<String> = sym
            .symbolize_stack(a)
            .into_iter()
            .map(|f| f.label)
            .collect();
        let lb: Vec<String> = sym
            .symbolize_stack(b)
            .into_iter()
            .map(|f| f.label)
            .collect();
        assert_eq!(la, lb);
        if let Some(p) = la.iter().position(|l| l == "wl_build_index") {
            assert_eq!(
                la[p + 1..p + 3],
                ["wl_index_root", "wl_tree_plant"],
                "{la:?}"
            );
            through_wrapper += 1;
        }
    }
    assert!(through_wrapper > 100, "{through_wrapper}");
}
