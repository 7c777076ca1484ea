//! Loading one module's symbols: its ELF file (memory-mapped), its DWARF
//! (in the file or a separate debug file) and its symbol tables.

use std::borrow::Cow;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use addr2line::Context;
use gimli::{EndianArcSlice, RunTimeEndian};
use memmap2::Mmap;
use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};

use super::Error;

pub(crate) type Reader = EndianArcSlice<RunTimeEndian>;

/// One function symbol from `.symtab` / `.dynsym` (demangled name).
#[derive(Debug, Clone)]
struct Symbol {
    addr: u64,
    size: u64,
    name: String,
}

/// Everything known about one module file.
pub(crate) struct ModuleSymbols {
    /// The DWARF context, if the file or a separate debug file had DWARF.
    pub(crate) dwarf: Option<Context<Reader>>,
    /// Where the DWARF came from (the binary itself or a debug file).
    pub(crate) dwarf_path: Option<PathBuf>,
    /// A DWARF problem that made us fall back to the symbol table.
    pub(crate) dwarf_error: Option<Error>,
    /// Function symbols sorted by address.
    symbols: Vec<Symbol>,
}

impl std::fmt::Debug for ModuleSymbols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModuleSymbols")
            .field("dwarf_path", &self.dwarf_path)
            .field("symbols", &self.symbols.len())
            .finish_non_exhaustive()
    }
}

/// Where to look for separate debug files.
pub(crate) struct DebugSearch<'a> {
    /// The module's path on the profiled machine (before the sysroot).
    pub(crate) original: &'a Path,
    /// Global debug directories, already expanded for the sysroot (sysroot
    /// form first, then as is).
    pub(crate) debug_dirs: &'a [PathBuf],
}

fn map_file(path: &Path) -> Result<Mmap, Error> {
    let file = File::open(path).map_err(|cause| Error::Open {
        path: path.to_path_buf(),
        cause,
    })?;
    // SAFETY: the map is read-only and private; the file could still be
    // truncated by someone else while mapped, which is the accepted risk of
    // every mmap-based symbolizer (binaries and debug files are not expected
    // to change under a running loader).
    unsafe { Mmap::map(&file) }.map_err(|cause| Error::Open {
        path: path.to_path_buf(),
        cause,
    })
}

fn parse<'d>(path: &Path, data: &'d [u8]) -> Result<object::File<'d>, Error> {
    object::File::parse(data).map_err(|cause| Error::Parse {
        path: path.to_path_buf(),
        cause,
    })
}

fn has_dwarf(file: &object::File<'_>) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0)
}

fn load_dwarf(path: &Path, file: &object::File<'_>) -> Result<gimli::Dwarf<Reader>, Error> {
    let endian = if file.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    };
    gimli::Dwarf::load(|id| -> Result<Reader, Error> {
        let data: Cow<'_, [u8]> = match file.section_by_name(id.name()) {
            Some(section) => section.uncompressed_data().map_err(|cause| Error::Parse {
                path: path.to_path_buf(),
                cause,
            })?,
            None => Cow::Borrowed(&[]),
        };
        Ok(EndianArcSlice::new(Arc::from(&*data), endian))
    })
}

fn collect_symbols(file: &object::File<'_>, out: &mut Vec<Symbol>) {
    for sym in file.symbols().chain(file.dynamic_symbols()) {
        if sym.kind() != SymbolKind::Text || sym.is_undefined() || sym.address() == 0 {
            continue;
        }
        let Ok(name) = sym.name() else { continue };
        if name.is_empty() {
            continue;
        }
        out.push(Symbol {
            addr: sym.address(),
            size: sym.size(),
            name: addr2line::demangle_auto(Cow::Borrowed(name), None).into_owned(),
        });
    }
}

/// Candidate separate debug files, in search order.
fn debug_candidates(
    on_disk: &Path,
    file: &object::File<'_>,
    search: &DebugSearch<'_>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(Some(id)) = file.build_id() {
        if let Some((first, rest)) = id.split_first() {
            let rest: String = rest.iter().map(|b| format!("{b:02x}")).collect();
            for dir in search.debug_dirs {
                out.push(
                    dir.join(".build-id")
                        .join(format!("{first:02x}"))
                        .join(format!("{rest}.debug")),
                );
            }
        }
    }
    if let Ok(Some((name, _crc))) = file.gnu_debuglink() {
        let name = Path::new(std::str::from_utf8(name).unwrap_or_default());
        if !name.as_os_str().is_empty() {
            if let Some(dir) = on_disk.parent() {
                out.push(dir.join(name));
                out.push(dir.join(".debug").join(name));
            }
            let original_dir = search.original.parent().unwrap_or(Path::new("/"));
            let relative = original_dir.strip_prefix("/").unwrap_or(original_dir);
            for dir in search.debug_dirs {
                out.push(dir.join(relative).join(name));
            }
        }
    }
    out
}

/// A separate debug file that parsed and holds DWARF.
struct DebugFile {
    path: PathBuf,
    map: Mmap,
}

fn find_debug_file(
    on_disk: &Path,
    file: &object::File<'_>,
    search: &DebugSearch<'_>,
) -> Option<DebugFile> {
    let own_id = file.build_id().ok().flatten();
    let own_canon = on_disk.canonicalize().ok();
    for candidate in debug_candidates(on_disk, file, search) {
        if !candidate.is_file() {
            continue;
        }
        if own_canon.is_some() && candidate.canonicalize().ok() == own_canon {
            continue;
        }
        let Ok(map) = map_file(&candidate) else {
            continue;
        };
        let Ok(debug) = object::File::parse(&*map) else {
            continue;
        };
        if !has_dwarf(&debug) {
            continue;
        }
        // A debug file for another build of the binary would give wrong
        // answers: when both carry a build id they must agree.
        if let (Some(own), Ok(Some(theirs))) = (own_id, debug.build_id()) {
            if own != theirs {
                continue;
            }
        }
        drop(debug);
        return Some(DebugFile {
            path: candidate,
            map,
        });
    }
    None
}

fn load_sup(
    dwarf: &mut gimli::Dwarf<Reader>,
    file: &object::File<'_>,
    on_disk: &Path,
    search: &DebugSearch<'_>,
) {
    // dwz-style supplementary file (.gnu_debugaltlink); best effort.
    let Ok(Some((name, _id))) = file.gnu_debugaltlink() else {
        return;
    };
    let name = Path::new(std::str::from_utf8(name).unwrap_or_default());
    let mut candidates = Vec::new();
    if name.is_absolute() {
        // Usually `/usr/lib/debug/.dwz/...`: look under each debug directory
        // (which carries the sysroot) first, then at the path as is.
        if let Ok(under) = name.strip_prefix("/usr/lib/debug") {
            candidates.extend(search.debug_dirs.iter().map(|dir| dir.join(under)));
        }
        candidates.push(name.to_path_buf());
    } else if let Some(dir) = on_disk.parent() {
        candidates.push(dir.join(name));
    }
    for candidate in candidates {
        let Ok(map) = map_file(&candidate) else {
            continue;
        };
        let Ok(sup) = object::File::parse(&*map) else {
            continue;
        };
        if dwarf
            .load_sup(|id| -> Result<Reader, Error> {
                let data = sup
                    .section_by_name(id.name())
                    .and_then(|s| s.uncompressed_data().ok())
                    .unwrap_or(Cow::Borrowed(&[]));
                Ok(EndianArcSlice::new(
                    Arc::from(&*data),
                    if sup.is_little_endian() {
                        RunTimeEndian::Little
                    } else {
                        RunTimeEndian::Big
                    },
                ))
            })
            .is_ok()
        {
            return;
        }
    }
}

impl ModuleSymbols {
    /// Opens the module at `on_disk` (already prefixed with the sysroot).
    pub(crate) fn load(on_disk: &Path, search: &DebugSearch<'_>) -> Result<Self, Error> {
        let map = map_file(on_disk)?;
        let file = parse(on_disk, &map)?;
        let mut symbols = Vec::new();
        collect_symbols(&file, &mut symbols);

        let debug = if has_dwarf(&file) {
            None
        } else {
            find_debug_file(on_disk, &file, search)
        };
        let mut dwarf = None;
        let mut dwarf_path = None;
        let mut dwarf_error = None;
        let dwarf_source: Option<(PathBuf, object::File<'_>)> = match &debug {
            Some(debug) => {
                let parsed = parse(&debug.path, &debug.map)?;
                collect_symbols(&parsed, &mut symbols);
                Some((debug.path.clone(), parsed))
            }
            None if has_dwarf(&file) => Some((on_disk.to_path_buf(), parse(on_disk, &map)?)),
            None => None,
        };
        if let Some((path, source)) = dwarf_source {
            let loaded = load_dwarf(&path, &source).and_then(|mut d| {
                load_sup(&mut d, &source, on_disk, search);
                Context::from_dwarf(d).map_err(|cause| Error::Dwarf {
                    path: path.clone(),
                    cause,
                })
            });
            match loaded {
                Ok(ctx) => {
                    dwarf = Some(ctx);
                    dwarf_path = Some(path);
                }
                Err(err) => dwarf_error = Some(err),
            }
        }

        symbols.sort_by(|a, b| a.addr.cmp(&b.addr).then(b.size.cmp(&a.size)));
        symbols.dedup_by_key(|s| s.addr);
        if dwarf.is_none() && symbols.is_empty() {
            return Err(dwarf_error.unwrap_or_else(|| Error::NoSymbols {
                path: on_disk.to_path_buf(),
            }));
        }
        Ok(Self {
            dwarf,
            dwarf_path,
            dwarf_error,
            symbols,
        })
    }

    /// The nearest preceding function symbol containing `addr` (a symbol of
    /// unknown size, 0, is taken to extend to the next symbol).
    pub(crate) fn symbol_name(&self, addr: u64) -> Option<&str> {
        let idx = self
            .symbols
            .partition_point(|s| s.addr <= addr)
            .checked_sub(1)?;
        let sym = &self.symbols[idx];
        if sym.size > 0 && addr - sym.addr >= sym.size {
            return None;
        }
        Some(&sym.name)
    }
}
