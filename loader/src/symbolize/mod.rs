//! Symbolization of stack addresses against format-neutral mappings
//! ([`crate::model::Mapping`]: every format converts its own module records).
//!
//! - [`ModuleMap`] maps an absolute address to its loaded module and the
//!   module-relative address (`addr - load bias`), following the rule of
//!   `shared/reference/binpb-format.md` ("Semantics that matter");
//! - [`Symbolizer`] turns an address into frames: DWARF through `addr2line`
//!   (inlined frames expanded, Rust and C++ names demangled), from the binary
//!   itself or a separate debug file (build id, then `.gnu_debuglink`), else
//!   the ELF symbol tables, else `module+0xOFFSET`. Each distinct
//!   (module file, module-relative address, leaf or caller) is symbolized
//!   once. Caller (non-leaf) frames are return addresses and are looked up
//!   at `addr - 1` ([`Symbolizer::symbolize_caller`]).
//!
//! A module that cannot be opened or read, or that has no symbols at all,
//! never fails symbolization: its addresses get `module+0xOFFSET` labels and
//! the module is reported once in [`Symbolizer::missing_modules`].
//!
//! # Example
//!
//! ```no_run
//! use std::path::Path;
//! use flamehouse::model::Mapping;
//! use flamehouse::symbolize::{ModuleMap, Symbolizer, SymbolizerOptions};
//!
//! let mappings = vec![Mapping {
//!     path: "/usr/lib/libc.so.6".into(),
//!     bias: 0x7f00_0000_0000,
//!     ranges: vec![0x7f00_0000_1000..0x7f00_0010_0000],
//!     ..Mapping::default()
//! }];
//! let mut symbolizer = Symbolizer::new(SymbolizerOptions::default());
//! symbolizer.set_modules(ModuleMap::new(&mappings, Some(Path::new("/usr/bin/app"))));
//! for frame in symbolizer.symbolize(0x5555_5555_5123) {
//!     println!("{}", frame.label);
//! }
//! for missing in symbolizer.missing_modules() {
//!     eprintln!("no symbols: {missing}");
//! }
//! ```

mod elf;
mod module_map;

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

pub use module_map::{is_main_program, parse_proc_maps, Module, ModuleMap, PROC_SELF_EXE};

use elf::{DebugSearch, ModuleSymbols};

/// Errors about one module file. Symbolization itself never fails; these are
/// what [`Symbolizer::missing_modules`] reports. Each names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be opened or mapped (missing, permissions...).
    #[error("{}: cannot open: {cause}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        cause: io::Error,
    },
    /// The file is not an object file `object` can read.
    #[error("{}: not a readable ELF file: {cause}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What `object` said.
        cause: object::Error,
    },
    /// The DWARF could not be loaded.
    #[error("{}: bad DWARF: {cause}", path.display())]
    Dwarf {
        /// The file holding the DWARF.
        path: PathBuf,
        /// What `gimli` said.
        cause: gimli::Error,
    },
    /// The file has neither DWARF (own or separate) nor function symbols.
    #[error("{}: no DWARF and no symbol table", path.display())]
    NoSymbols {
        /// The file.
        path: PathBuf,
    },
    /// The main program's entry has no usable name (`/proc/self/exe` or
    /// empty) and no main program path was supplied.
    #[error("main program (module name {filename:?}): no path given (the header's processFullPath is empty)")]
    NoMainPath {
        /// The module name as the profile gives it.
        filename: String,
    },
}

impl Error {
    /// The file the error is about (`None` for [`Error::NoMainPath`]).
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::Open { path, .. }
            | Self::Parse { path, .. }
            | Self::Dwarf { path, .. }
            | Self::NoSymbols { path } => Some(path),
            Self::NoMainPath { .. } => None,
        }
    }
}

/// How much of a source position a frame label carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Granularity {
    /// The function name only (the default): `parse_record`.
    #[default]
    Function,
    /// Function, source file base name and line: `parse_record (workload.c:42)`.
    /// The file's base name keeps labels short and independent of the build
    /// machine's directories; [`Frame::file`] has the full path.
    FunctionFileLine,
}

/// Options of a [`Symbolizer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymbolizerOptions {
    /// Prefix for every module path (and for the debug directories, which are
    /// searched under the sysroot first and then as is), for profiles taken
    /// on another machine whose files were copied under this directory.
    /// Default: none.
    pub sysroot: Option<PathBuf>,
    /// Label granularity. Default: [`Granularity::Function`].
    pub granularity: Granularity,
    /// Global debug directories for separate debug files (build-id tree
    /// `DIR/.build-id/xx/yyyy.debug` and `.gnu_debuglink` names under
    /// `DIR/<module dir>/`). Default: `["/usr/lib/debug"]`.
    pub debug_dirs: Vec<PathBuf>,
}

impl Default for SymbolizerOptions {
    fn default() -> Self {
        Self {
            sysroot: None,
            granularity: Granularity::default(),
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
        }
    }
}

/// Where a frame's name came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrameSource {
    /// DWARF (own or separate debug file).
    Dwarf,
    /// The ELF symbol tables (`.symtab`, `.dynsym`).
    SymbolTable,
    /// Nothing: the name is `module+0xOFFSET`, or `0xADDR` for an address in
    /// no module.
    Unsymbolized,
    /// The profile itself named the frame ([`Symbolizer::named_frame`]).
    Profile,
}

/// One frame of a symbolized address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Demangled function name; `module+0xOFFSET` (module-relative offset)
    /// when the module has no name for the address, `0x…` (absolute) when
    /// the address is in no module, `??` for an inlined frame DWARF leaves
    /// unnamed.
    pub function: String,
    /// Source file (full path as DWARF gives it), if known.
    pub file: Option<String>,
    /// Source line, if known.
    pub line: Option<u32>,
    /// Whether this frame is an inlined call (every frame of an address but
    /// the first, outermost one).
    pub inlined: bool,
    /// Where the name came from.
    pub source: FrameSource,
    /// The label for the symbolizer's [`Granularity`].
    pub label: String,
}

/// Cache counters of a [`Symbolizer`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SymbolizerStats {
    /// Calls to [`Symbolizer::symbolize`] (one per address occurrence).
    pub lookups: u64,
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Distinct (module file, module-relative address) pairs symbolized (plus
    /// distinct addresses in no module).
    pub distinct_addresses: usize,
    /// Distinct addresses that got a name from DWARF or a symbol table.
    pub symbolized: usize,
    /// Distinct addresses in no module.
    pub unmapped: usize,
}

impl SymbolizerStats {
    /// Share of distinct addresses that got a name, in percent (100 when
    /// there were none).
    #[must_use]
    pub fn symbolized_percent(&self) -> f64 {
        if self.distinct_addresses == 0 {
            100.0
        } else {
            self.symbolized as f64 * 100.0 / self.distinct_addresses as f64
        }
    }
}

/// One module file, opened on first use.
#[derive(Debug)]
struct FileEntry {
    /// Short name for fallback labels.
    basename: String,
    /// `None` when the file could not be used (reported in `missing`).
    symbols: Option<ModuleSymbols>,
}

/// Key of a file: its on-disk path, or the module name of an unresolvable
/// main program.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum FileKey {
    Path(PathBuf),
    /// Every main-program entry without a path (one file).
    NoMainPath,
}

const UNMAPPED: u32 = u32::MAX;

/// Symbolizes absolute addresses against a [`ModuleMap`], caching each
/// distinct (module file, module-relative address).
#[derive(Debug)]
pub struct Symbolizer {
    options: SymbolizerOptions,
    /// Debug directories with the sysroot applied (sysroot form first).
    debug_dirs: Vec<PathBuf>,
    map: ModuleMap,
    /// File id of each module of `map`, `None` until first used.
    module_files: Vec<Option<u32>>,
    files: Vec<FileEntry>,
    file_ids: HashMap<FileKey, u32>,
    /// Keyed by (file, module-relative address, looked up as a caller).
    cache: HashMap<(u32, u64, bool), Box<[Frame]>>,
    missing: Vec<Error>,
    dwarf_errors: Vec<Error>,
    stats: SymbolizerStats,
}

impl Symbolizer {
    /// A symbolizer with an empty module map (every address is unmapped until
    /// [`Symbolizer::set_modules`]).
    #[must_use]
    pub fn new(options: SymbolizerOptions) -> Self {
        let debug_dirs = match &options.sysroot {
            Some(root) => options
                .debug_dirs
                .iter()
                .map(|d| with_sysroot(root, d))
                .chain(options.debug_dirs.iter().cloned())
                .collect(),
            None => options.debug_dirs.clone(),
        };
        Self {
            options,
            debug_dirs,
            map: ModuleMap::default(),
            module_files: Vec::new(),
            files: Vec::new(),
            file_ids: HashMap::new(),
            cache: HashMap::new(),
            missing: Vec::new(),
            dwarf_errors: Vec::new(),
            stats: SymbolizerStats::default(),
        }
    }

    /// The options.
    #[must_use]
    pub fn options(&self) -> &SymbolizerOptions {
        &self.options
    }

    /// Replaces the module map (when a snapshot brings a new `loaded_so`).
    /// Opened files and the cache are kept: they are keyed by file path and
    /// module-relative address, which a new map does not invalidate.
    pub fn set_modules(&mut self, map: ModuleMap) {
        self.module_files = vec![None; map.len()];
        self.map = map;
    }

    /// The current module map.
    #[must_use]
    pub fn modules(&self) -> &ModuleMap {
        &self.map
    }

    /// The frames of one absolute address, outermost first (the function
    /// containing the address, then the functions inlined into it down to
    /// the innermost): root-to-leaf order for that address. Never empty.
    /// The address is looked up as it is: right for a leaf frame.
    pub fn symbolize(&mut self, addr: u64) -> &[Frame] {
        self.lookup(addr, false)
    }

    /// The frames of a caller (non-leaf) frame, like [`Symbolizer::symbolize`]
    /// but looked up at `addr - 1`: a caller frame is a return address, the
    /// instruction after the call, which may already belong to another line
    /// or lie outside the inlined function that made the call; `addr - 1` is
    /// inside the call instruction (as addr2line users, perf and pprof do).
    /// MemHawk already stores return address minus 1, where the extra 1
    /// still lands inside the call (no call is shorter than 2 bytes).
    /// An address that does not symbolize keeps its recorded value in its
    /// `module+0xOFFSET` label.
    pub fn symbolize_caller(&mut self, addr: u64) -> &[Frame] {
        self.lookup(addr, true)
    }

    fn lookup(&mut self, addr: u64, caller: bool) -> &[Frame] {
        self.stats.lookups += 1;
        let key = match self.map.lookup(addr) {
            Some((module, rel)) => (self.file_of(module), rel, caller),
            None => (UNMAPPED, addr, caller),
        };
        if self.cache.contains_key(&key) {
            self.stats.hits += 1;
        } else {
            let adjusted = (caller && key.1 > 0)
                .then(|| self.compute(key.0, key.1 - 1))
                .filter(|f| f.iter().any(|f| f.source != FrameSource::Unsymbolized));
            let frames = adjusted.unwrap_or_else(|| self.compute(key.0, key.1));
            self.stats.distinct_addresses += 1;
            if key.0 == UNMAPPED {
                self.stats.unmapped += 1;
            }
            if frames.iter().any(|f| f.source != FrameSource::Unsymbolized) {
                self.stats.symbolized += 1;
            }
            self.cache.insert(key, frames.into_boxed_slice());
        }
        &self.cache[&key]
    }

    /// The frames of a whole stack given innermost (leaf) first, as MemHawk
    /// stores it, returned root first: the reversed address order with the
    /// leaf expanded by [`Symbolizer::symbolize`] and every other address by
    /// [`Symbolizer::symbolize_caller`].
    pub fn symbolize_stack(&mut self, leaf_first: &[u64]) -> Vec<Frame> {
        let mut out = Vec::with_capacity(leaf_first.len());
        for (i, &addr) in leaf_first.iter().enumerate().rev() {
            out.extend_from_slice(self.lookup(addr, i > 0));
        }
        out
    }

    /// Modules (files) that gave no symbols at all, once each, in the order
    /// they were first needed. Their addresses are labelled
    /// `module+0xOFFSET`.
    #[must_use]
    pub fn missing_modules(&self) -> &[Error] {
        &self.missing
    }

    /// Modules whose DWARF was present but unreadable, once each; their
    /// addresses fell back to the symbol tables (so they are not in
    /// [`Symbolizer::missing_modules`]).
    #[must_use]
    pub fn dwarf_errors(&self) -> &[Error] {
        &self.dwarf_errors
    }

    /// Cache counters.
    #[must_use]
    pub fn stats(&self) -> SymbolizerStats {
        self.stats
    }

    fn file_of(&mut self, module: usize) -> u32 {
        if let Some(id) = self.module_files[module] {
            return id;
        }
        let m = &self.map.modules()[module];
        let key = match &m.path {
            Some(path) => FileKey::Path(match &self.options.sysroot {
                Some(root) if !m.on_host => with_sysroot(root, path),
                _ => path.clone(),
            }),
            None => FileKey::NoMainPath,
        };
        let id = match self.file_ids.get(&key) {
            Some(&id) => id,
            None => {
                let basename = m.basename();
                let symbols = match &key {
                    FileKey::Path(on_disk) => {
                        let original = m.path.as_deref().unwrap_or(on_disk);
                        ModuleSymbols::load(
                            on_disk,
                            &DebugSearch {
                                original,
                                debug_dirs: &self.debug_dirs,
                            },
                        )
                        .map(|mut loaded| {
                            if let Some(err) = loaded.dwarf_error.take() {
                                self.dwarf_errors.push(err);
                            }
                            loaded
                        })
                        .map_err(|err| self.missing.push(err))
                        .ok()
                    }
                    FileKey::NoMainPath => {
                        self.missing.push(Error::NoMainPath {
                            filename: m.filename.clone(),
                        });
                        None
                    }
                };
                let id = u32::try_from(self.files.len()).expect("fewer than 2^32 module files");
                self.files.push(FileEntry { basename, symbols });
                self.file_ids.insert(key, id);
                id
            }
        };
        self.module_files[module] = Some(id);
        id
    }

    fn compute(&self, file: u32, addr: u64) -> Vec<Frame> {
        if file == UNMAPPED {
            return vec![self.frame(
                format!("{addr:#x}"),
                None,
                None,
                false,
                FrameSource::Unsymbolized,
            )];
        }
        let entry = &self.files[file as usize];
        let fallback = || format!("{}+{addr:#x}", entry.basename);
        let Some(symbols) = &entry.symbols else {
            return vec![self.frame(fallback(), None, None, false, FrameSource::Unsymbolized)];
        };
        let sym_name = symbols.symbol_name(addr);
        if let Some(ctx) = &symbols.dwarf {
            if let Some(frames) = dwarf_frames(ctx, addr) {
                // addr2line yields innermost first; we return outermost first.
                return frames
                    .into_iter()
                    .rev()
                    .enumerate()
                    .map(|(i, (name, file, line))| {
                        let outermost = i == 0;
                        let (name, source) = match name {
                            Some(name) => (name, FrameSource::Dwarf),
                            None if outermost => match sym_name {
                                Some(s) => (s.to_owned(), FrameSource::SymbolTable),
                                None => (fallback(), FrameSource::Unsymbolized),
                            },
                            None => ("??".to_owned(), FrameSource::Unsymbolized),
                        };
                        self.frame(name, file, line, !outermost, source)
                    })
                    .collect();
            }
        }
        match sym_name {
            Some(name) => {
                vec![self.frame(name.to_owned(), None, None, false, FrameSource::SymbolTable)]
            }
            None => vec![self.frame(fallback(), None, None, false, FrameSource::Unsymbolized)],
        }
    }

    /// The frame of a function the profile names itself (a
    /// [`crate::model::Symbol`]), labelled at the symbolizer's granularity
    /// like a symbolized address.
    #[must_use]
    pub fn named_frame(&self, function: &str, file: Option<&str>, line: Option<u32>) -> Frame {
        self.frame(
            function.to_owned(),
            file.map(str::to_owned),
            line,
            false,
            FrameSource::Profile,
        )
    }

    fn frame(
        &self,
        function: String,
        file: Option<String>,
        line: Option<u32>,
        inlined: bool,
        source: FrameSource,
    ) -> Frame {
        let label = match (self.options.granularity, &file) {
            (Granularity::FunctionFileLine, Some(file)) => {
                let base = Path::new(file)
                    .file_name()
                    .map_or_else(|| file.clone(), |b| b.to_string_lossy().into_owned());
                match line {
                    Some(line) => format!("{function} ({base}:{line})"),
                    None => format!("{function} ({base})"),
                }
            }
            _ => function.clone(),
        };
        Frame {
            function,
            file,
            line,
            inlined,
            source,
            label,
        }
    }
}

type DwarfFrame = (Option<String>, Option<String>, Option<u32>);

/// The DWARF frames of `addr`, innermost first, or `None` when DWARF knows
/// nothing about it (or fails on it).
fn dwarf_frames(ctx: &addr2line::Context<elf::Reader>, addr: u64) -> Option<Vec<DwarfFrame>> {
    let mut iter = ctx.find_frames(addr).skip_all_loads().ok()?;
    let mut out = Vec::new();
    while let Ok(Some(frame)) = iter.next() {
        let name = frame
            .function
            .as_ref()
            .and_then(|f| f.demangle().ok())
            .map(|n| n.into_owned());
        let (file, line) = frame
            .location
            .map_or((None, None), |l| (l.file.map(str::to_owned), l.line));
        out.push((name, file, line));
    }
    if out.is_empty() {
        None
    } else {
        Some(out)
    }
}

/// `path` under `root` (`/usr/lib/x.so` under `/sysroot` is
/// `/sysroot/usr/lib/x.so`; a relative path is joined as is).
fn with_sysroot(root: &Path, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}
