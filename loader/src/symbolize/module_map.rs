//! The module map of a profile: which loaded module an absolute address
//! belongs to, and the module-relative address to look up in that module's
//! ELF file.

use std::path::{Path, PathBuf};

use crate::model::Mapping;

/// The name MemHawk gives the main program when it does not write an empty
/// one.
pub const PROC_SELF_EXE: &str = "/proc/self/exe";

/// One loaded module of a profile (one [`Mapping`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// The module name exactly as the profile gives it (may be empty or
    /// `/proc/self/exe` for the main program).
    pub filename: String,
    /// The path of the module's file on the profiled machine: `filename`, or
    /// the caller-supplied main program path for the main program. `None` for
    /// the main program when no path was supplied.
    pub path: Option<PathBuf>,
    /// Whether this entry is the main program (empty name or `/proc/self/exe`).
    pub is_main: bool,
    /// Whether `path` is already a path on this machine (a main program
    /// binary the user named), which the sysroot does not prefix.
    pub on_host: bool,
    /// The load bias (absolute address minus file address).
    pub bias: u64,
    /// The module's half-open absolute ranges ([`Mapping::ranges`]).
    pub ranges: Vec<(u64, u64)>,
}

impl Module {
    /// Whether an absolute address lies in one of the module's segments.
    #[must_use]
    pub fn contains(&self, addr: u64) -> bool {
        self.ranges
            .iter()
            .any(|&(start, end)| start <= addr && addr < end)
    }

    /// The short name used in fallback labels (`libc.so.6+0x1234`): the file
    /// name of [`Module::path`], or `[main]` for a main program without a
    /// path, or the raw filename when it has no file-name component.
    #[must_use]
    pub fn basename(&self) -> String {
        match &self.path {
            Some(path) => path.file_name().map_or_else(
                || path.display().to_string(),
                |name| name.to_string_lossy().into_owned(),
            ),
            None => "[main]".to_owned(),
        }
    }
}

/// The executable file mappings of a process as Linux lists them in
/// `/proc/PID/maps` (`start-end perms offset dev inode path`), one
/// [`Mapping`] each: what lets raw addresses of a profile that names no
/// modules (bpftrace's `0x...` frames) be symbolized, when a copy of the
/// file was taken while the process ran. Mappings that cannot hold code
/// (no `x` permission) or name no file (anonymous memory, `[vdso]`,
/// `[stack]`, ...) are left out. The load bias is `start - offset`, as for
/// a pprof mapping.
///
/// # Errors
/// The first line that is not a maps line: its number (from 1) and why.
pub fn parse_proc_maps(text: &str) -> Result<Vec<Mapping>, (usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let bad = |m: &str| (i + 1, format!("{m} in `{}`", line.trim()));
        if line.trim().is_empty() {
            continue;
        }
        let mut f = line.split_ascii_whitespace();
        let (Some(range), Some(perms), Some(offset), Some(_dev), Some(_inode)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            return Err(bad(
                "not a /proc/PID/maps line (start-end perms offset dev inode [path])",
            ));
        };
        let hex = |t: &str| u64::from_str_radix(t, 16).ok();
        let (Some(start), Some(end)) = range
            .split_once('-')
            .map_or((None, None), |(a, b)| (hex(a), hex(b)))
        else {
            return Err(bad("bad address range"));
        };
        let Some(offset) = hex(offset) else {
            return Err(bad("bad file offset"));
        };
        if start >= end || perms.len() != 4 {
            return Err(bad("bad address range or permissions"));
        }
        // The path is the rest of the line (it may hold spaces).
        let path = f.collect::<Vec<_>>().join(" ");
        if !perms.contains('x') || !path.starts_with('/') {
            continue;
        }
        // One range: the mapping's.
        #[allow(clippy::single_range_in_vec_init)]
        let ranges = vec![start..end];
        out.push(Mapping {
            path: path.strip_suffix(" (deleted)").unwrap_or(&path).to_owned(),
            build_id: None,
            bias: start.wrapping_sub(offset),
            ranges,
            file_offset: offset,
        });
    }
    Ok(out)
}

/// The modules of a profile, indexed for address lookup.
///
/// Lookup rule (shared/reference/binpb-format.md, "Semantics that matter"):
/// among the modules whose load bias is not above the address and one of
/// whose ranges (MemHawk: segments `bias + p_vaddr .. + p_memsz`) contains it, take the one
/// with the largest bias; the module-relative address is `addr - bias`.
/// Modules with equal biases are tried in profile order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleMap {
    modules: Vec<Module>,
    /// Indexes into `modules`, sorted by bias (stable, so profile order
    /// within one bias).
    by_bias: Vec<usize>,
}

/// Whether a profile's module name means the main program.
#[must_use]
pub fn is_main_program(filename: &str) -> bool {
    filename.is_empty() || filename == PROC_SELF_EXE
}

impl ModuleMap {
    /// Builds the map from a profile's mappings (format-neutral: each
    /// format converts its own module records). `main_program` is the main
    /// program's path (MemHawk's `processFullPath`); it replaces an empty
    /// module name or `/proc/self/exe`.
    #[must_use]
    pub fn new(mappings: &[Mapping], main_program: Option<&Path>) -> Self {
        let modules = mappings
            .iter()
            .map(|m| {
                let is_main = is_main_program(&m.path);
                let path = if is_main {
                    main_program
                        .filter(|p| !p.as_os_str().is_empty())
                        .map(Path::to_path_buf)
                } else {
                    Some(PathBuf::from(&m.path))
                };
                Module {
                    filename: m.path.clone(),
                    path,
                    is_main,
                    on_host: false,
                    bias: m.bias,
                    ranges: m.ranges.iter().map(|r| (r.start, r.end)).collect(),
                }
            })
            .collect::<Vec<_>>();
        let mut by_bias: Vec<usize> = (0..modules.len()).collect();
        by_bias.sort_by_key(|&i| modules[i].bias);
        Self { modules, by_bias }
    }

    /// The same map with the module named `full_path` (the header's
    /// `processFullPath`) also taken as the main program, at `main_program`:
    /// a MemHawk build that names the main program by its path instead of
    /// an empty name or `/proc/self/exe` still gets `--binary` applied.
    #[must_use]
    pub fn main_named(mut self, full_path: &str, main_program: Option<&Path>) -> Self {
        if full_path.is_empty() {
            return self;
        }
        for m in &mut self.modules {
            if !m.is_main && m.filename == full_path {
                m.is_main = true;
                if let Some(p) = main_program.filter(|p| !p.as_os_str().is_empty()) {
                    m.path = Some(p.to_path_buf());
                }
            }
        }
        self
    }

    /// The same map with the main program's path taken as a path on this
    /// machine (a binary the user named, e.g. `load --binary`): the sysroot
    /// is not put in front of it.
    #[must_use]
    pub fn main_on_host(mut self) -> Self {
        for m in &mut self.modules {
            if m.is_main {
                m.on_host = true;
            }
        }
        self
    }

    /// The module containing `addr` and the module-relative address
    /// (`addr - bias`), or `None` when no module's segments contain it.
    #[must_use]
    pub fn lookup(&self, addr: u64) -> Option<(usize, u64)> {
        let end = self
            .by_bias
            .partition_point(|&i| self.modules[i].bias <= addr);
        let candidates = &self.by_bias[..end];
        // Largest bias first; within one bias, profile order.
        let mut rest = candidates;
        while let Some(&last) = rest.last() {
            let bias = self.modules[last].bias;
            let group_start = rest.partition_point(|&i| self.modules[i].bias < bias);
            for &i in &rest[group_start..] {
                if self.modules[i].contains(addr) {
                    return Some((i, addr - bias));
                }
            }
            rest = &rest[..group_start];
        }
        None
    }

    /// The module at `index` (as returned by [`ModuleMap::lookup`], the
    /// position in the mappings).
    #[must_use]
    pub fn module(&self, index: usize) -> Option<&Module> {
        self.modules.get(index)
    }

    /// All modules, in profile order.
    #[must_use]
    pub fn modules(&self) -> &[Module] {
        &self.modules
    }

    /// Number of modules.
    #[must_use]
    pub fn len(&self) -> usize {
        self.modules.len()
    }

    /// Whether the map has no modules.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.modules.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as Linux prints them (`show_map_vma`): executable file
    /// mappings kept with bias `start - offset`, the rest left out; a path
    /// with spaces or ` (deleted)` kept whole or without the suffix; a line
    /// that is no maps line refused with its number.
    #[test]
    fn proc_maps_give_the_executable_file_mappings() {
        let text = "\
55ea2564e000-55ea2564f000 r--p 00000000 fe:00 11780132                   /tmp/x/burn
55ea2564f000-55ea25650000 r-xp 00001000 fe:00 11780132                   /tmp/x/burn
7fb3f31e7000-7fb3f31ea000 rw-p 00000000 00:00 0 
7fb3f3210000-7fb3f3366000 r-xp 00026000 fe:00 326279                     /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd1c5f2000-7ffd1c5f4000 r-xp 00000000 00:00 0                          [vdso]
7f0000000000-7f0000001000 r-xp 00002000 fe:00 7                          /opt/my app/lib.so (deleted)
";
        let m = parse_proc_maps(text).unwrap();
        let got: Vec<(&str, u64, u64, u64)> = m
            .iter()
            .map(|m| (m.path.as_str(), m.bias, m.ranges[0].start, m.file_offset))
            .collect();
        assert_eq!(
            got,
            [
                ("/tmp/x/burn", 0x55ea2564e000, 0x55ea2564f000, 0x1000),
                (
                    "/usr/lib/x86_64-linux-gnu/libc.so.6",
                    0x7fb3f31ea000,
                    0x7fb3f3210000,
                    0x26000
                ),
                ("/opt/my app/lib.so", 0x7effffffe000, 0x7f0000000000, 0x2000),
            ]
        );
        for (bad, why) in [
            ("55-56 r-xp 0 fe:00\n", "not a /proc/PID/maps line"),
            ("zz-56 r-xp 0 fe:00 1 /a\n", "bad address range"),
            ("55-56 r-xp 0x fe:00 1 /a\n", "bad file offset"),
            (
                "56-55 r-xp 0 fe:00 1 /a\n",
                "bad address range or permissions",
            ),
        ] {
            let e = parse_proc_maps(&format!("\n{bad}")).unwrap_err();
            assert_eq!(e.0, 2, "{bad}");
            assert!(e.1.starts_with(why), "{bad}: {}", e.1);
        }
    }
}
